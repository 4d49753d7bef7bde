//! FL IO-die scheduler: hand examples (exact message sequences), the bitonic network against a
//! plain sort, Algorithm 1 invariants, Algorithm 2 timers.

use proptest::prelude::*;
use sched::pkg::iodie::*;
use sched::pkg::placement::*;

use sched::{ExpertId, ReqId};

fn e(mask: u16, count: u32) -> EitEntryFl {
    EitEntryFl { mask, count }
}

/// 2×2 (snake order 0, 1, 3, 2), four experts.
fn eit4() -> Vec<EitEntryFl> {
    vec![e(0b0011, 10), e(0b0100, 2), e(0b1100, 6), e(0b0001, 1)]
}

#[test]
fn paired_2x2_exact_sequence() {
    let mut s = TrajectorySchedulerFl::new(2, 2).unwrap();
    let m = s.begin_layer(&eit4(), OrderPolicy::Paired).unwrap();
    // sorted 0 (10), 2 (6), 1 (2), 3 (1) → paired 0, 3, 2, 1
    assert_eq!(s.order(), &[ExpertId(0), ExpertId(3), ExpertId(2), ExpertId(1)]);
    assert_eq!(
        m,
        vec![
            SchedMsg::preload(0, 0b0011),
            SchedMsg::preload(3, 0b0001),
            SchedMsg::preload(2, 0b1100),
            SchedMsg::preload(1, 0b0100),
            SchedMsg::grant(0, 0b0011, 0),
            // chiplet 3 comes before 2 in snake order
            SchedMsg::grant(2, 0b1100, 3),
        ]
    );
    assert_eq!(s.icv(), 0);
    assert!(!s.is_finished());
    assert_eq!(s.release(0b0011), vec![SchedMsg::grant(3, 0b0001, 0)]);
    assert_eq!(s.icv(), 0b0010);
    assert_eq!(s.release(0b0100), vec![SchedMsg::grant(1, 0b0100, 2)]);
    assert!(s.is_finished());
    assert_eq!(s.release(0b1111), vec![]);
}

#[test]
fn by_id_and_hot_first_2x2() {
    let mut s = TrajectorySchedulerFl::new(2, 2).unwrap();
    let m = s.begin_layer(&eit4(), OrderPolicy::ById).unwrap();
    assert_eq!(
        &m[4..],
        &[
            SchedMsg::grant(0, 0b0011, 0),
            SchedMsg::grant(1, 0b0100, 2),
            SchedMsg::grant(2, 0b1100, 3),
        ]
    );
    assert_eq!(s.release(0b0001), vec![SchedMsg::grant(3, 0b0001, 0)]);
    assert!(s.is_finished());

    let m = s.begin_layer(&eit4(), OrderPolicy::HotFirst).unwrap();
    assert_eq!(s.order(), &[ExpertId(0), ExpertId(2), ExpertId(1), ExpertId(3)]);
    assert_eq!(&m[4..], &[SchedMsg::grant(0, 0b0011, 0), SchedMsg::grant(2, 0b1100, 3)]);
}

#[test]
fn zero_experts_and_bad_input() {
    let mut s = TrajectorySchedulerFl::new(2, 2).unwrap();
    let m = s.begin_layer(&[e(0, 0), e(0b1000, 3), e(0, 0)], OrderPolicy::Paired).unwrap();
    assert_eq!(m, vec![SchedMsg::preload(1, 0b1000), SchedMsg::grant(1, 0b1000, 3)]);
    assert!(s.is_finished());
    assert!(s.begin_layer(&[e(0b10000, 1)], OrderPolicy::Paired).is_err());
    assert!(s.begin_layer(&[e(0b1, 0)], OrderPolicy::Paired).is_err());
    assert!(s.begin_layer(&vec![e(1, 1); 257], OrderPolicy::Paired).is_err());
    assert!(TrajectorySchedulerFl::new(0, 4).is_err());
    assert!(TrajectorySchedulerFl::new(5, 4).is_err());
    assert!(eit_fl(&[vec![1, 2]], 4).is_err());
    assert_eq!(eit_fl(&[vec![0, 2, 0, 1], vec![0; 4]], 4).unwrap(), vec![e(0b1010, 3), e(0, 0)]);
}

#[test]
fn token_buffer_alg2() {
    assert_eq!(TokenBufferCfgFl::n_threshold_for_slack(0.1).unwrap(), 10);
    assert_eq!(TokenBufferCfgFl::n_threshold_for_slack(0.2).unwrap(), 5);
    assert_eq!(TokenBufferCfgFl::n_threshold_for_slack(0.3).unwrap(), 3);
    assert!(TokenBufferCfgFl::n_threshold_for_slack(0.0).is_err());
    assert!(TokenBufferCfgFl::n_threshold_for_slack(f64::NAN).is_err());
    let cfg = TokenBufferCfgFl { theta_min: 3, n_threshold: 2, t_qos_init: 0, slots: 4 };
    let mut tb = TokenBufferFl::new(cfg).unwrap();
    // n_e: expert 0 hot (10), expert 1 cold (2).
    let n_e = [10, 2];
    let reqs = vec![(ReqId(0), vec![ExpertId(0), ExpertId(1)]), (ReqId(1), vec![ExpertId(0)])];
    // No credit yet: nobody deferred.
    assert_eq!(tb.layer_boundary(&reqs, &n_e).unwrap(), vec![false, false]);
    tb.forward_pass_done(ReqId(0)).unwrap();
    tb.forward_pass_done(ReqId(0)).unwrap();
    // C_fw(0) = 2 >= 2: one credit, spent at once on the cold expert 1.
    assert_eq!(tb.layer_boundary(&reqs, &n_e).unwrap(), vec![true, false]);
    assert_eq!((tb.t_qos[0], tb.c_fw[0]), (0, 0));
    assert_eq!(tb.layer_boundary(&reqs, &n_e).unwrap(), vec![false, false]);
    assert!(tb.layer_boundary(&[(ReqId(9), vec![ExpertId(0)])], &n_e).is_err());

    // Whole layer: the deferred request's tokens leave the EIT.
    let mut s = TrajectorySchedulerFl::new(1, 2).unwrap();
    let mut tb = TokenBufferFl::new(TokenBufferCfgFl { theta_min: 3, n_threshold: 1, t_qos_init: 1, slots: 4 }).unwrap();
    let g = vec![
        RequestGatingFl::from_raw(0, &[(0, 0, 4), (1, 1, 1)]),
        RequestGatingFl::from_raw(1, &[(0, 1, 5)]),
    ];
    let l = schedule_layer_fl(&mut s, &mut tb, &g, 2, OrderPolicy::Paired).unwrap();
    assert_eq!(l.deferred, vec![true, false]);
    assert_eq!(l.eit, vec![e(0b10, 5), e(0, 0)]);
    assert_eq!(l.msgs, vec![SchedMsg::preload(0, 0b10), SchedMsg::grant(0, 0b10, 1)]);
    let bad = vec![RequestGatingFl::from_raw(0, &[(2, 0, 1)])];
    assert!(schedule_layer_fl(&mut s, &mut tb, &bad, 2, OrderPolicy::Paired).is_err());
}

#[test]
fn placements() {
    assert_eq!(ep_placement_fl(5, 2).unwrap(), vec![0, 1, 0, 1, 0]);
    let p = hydra_placement_fl(&[1, 100, 1, 1, 50, 50], 2).unwrap();
    // 100 → c0, 50 (e4) → c1, 50 (e5) → c1 (50 < 100), then the 1s → c0 (100 = 100 tie → c0)…
    assert_eq!(placement_load_fl(&[1, 100, 1, 1, 50, 50], &p, 2).iter().sum::<u64>(), 203);
    assert_eq!(p[1], 0);
    assert_eq!(p[4], 1);
    assert_eq!(p[5], 1);
}

fn arb_eit(chiplets: usize, max_experts: usize) -> impl Strategy<Value = Vec<EitEntryFl>> {
    let all = all_mask(chiplets);
    prop::collection::vec((0u16..=all, 1u32..200), 1..=max_experts)
        .prop_map(move |v| v.into_iter().map(|(m, c)| if m == 0 { e(0, 0) } else { e(m, c) }).collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// The bitonic network equals a plain sort (count descending, lower id first).
    #[test]
    fn bitonic_equals_sort(counts in prop::collection::vec(0u32..50, 1..=256)) {
        let keys: Vec<SortKey> = counts.iter().enumerate().map(|(i, &c)| (c, ExpertId(i as u16))).collect();
        let mut want = keys.clone();
        want.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        prop_assert_eq!(bitonic_sort_fl(&keys), want);
    }

    /// Algorithm 1: every scheduled expert gets one Preload (all first, in order) then one
    /// Grant; a grant's start is idle and in its trajectory; releasing everything finishes.
    #[test]
    fn alg1_invariants(
        (r, c, eit) in (1usize..=4, 1usize..=4).prop_flat_map(|(r, c)| (Just(r), Just(c), arb_eit(r * c, 64))),
        pol in 0u8..3,
    ) {
        let n = r * c;
        let policy = [OrderPolicy::Paired, OrderPolicy::HotFirst, OrderPolicy::ById][pol as usize];
        let mut s = TrajectorySchedulerFl::new(r, c).unwrap();
        let mut icv = all_mask(n);
        let mut msgs = s.begin_layer(&eit, policy).unwrap();
        let k = eit.iter().filter(|x| x.count > 0).count();
        prop_assert!(msgs[..k].iter().all(|m| !m.is_grant()));
        let mut granted = vec![false; eit.len()];
        let mut rounds = 0;
        loop {
            for m in &msgs {
                if let SchedMsg::Grant { expert, mask, start } = *m {
                    prop_assert!(in_mask(icv, start) && in_mask(mask, start));
                    prop_assert!(!granted[expert.idx()]);
                    granted[expert.idx()] = true;
                    icv &= !mask;
                }
            }
            prop_assert_eq!(icv, s.icv());
            if s.is_finished() { break; }
            rounds += 1;
            prop_assert!(rounds <= eit.len() + 1);
            let done = all_mask(n) & !icv;
            icv |= done;
            msgs = s.release(done);
            prop_assert!(!msgs.is_empty());
        }
        for (i, x) in eit.iter().enumerate() {
            prop_assert_eq!(granted[i], x.count > 0);
        }
    }
}
