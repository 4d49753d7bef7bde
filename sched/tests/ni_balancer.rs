//! MoEntwine's NI-Balancer (FL): Eq. 2 by hand and its β gate; Algorithm 1 and the greedy
//! baseline on a hand-worked 2×2 example; both replayed decision by decision against an
//! independent re-derivation from `device_loads` on random cases (ties included); Zipf-skewed
//! loads; Local/Global migration steps on ER, HER and baseline mappings.

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use sched::balance::ni::*;
use sched::wafer::{expert_hosts, map, MappingKind, WaferGeom};

// ------------------------------------------------------------------------------------------
// Trigger (Eq. 2)
// ------------------------------------------------------------------------------------------

#[test]
fn eq2_by_hand() {
    // layer 0: mean 2, max 4 -> 1; layer 1: mean 2, max 3 -> 0.5
    let l = vec![vec![4.0, 2.0, 2.0, 0.0], vec![3.0, 1.0]];
    assert_eq!(imbalance(&l), 1.5);
    assert_eq!(imbalance(&[vec![1.0; 4]]), 0.0);
    // zero-mean and empty layers contribute 0
    assert_eq!(imbalance(&[vec![0.0, 0.0], vec![], vec![4.0, 2.0, 2.0, 0.0]]), 1.0);
    assert_eq!(imbalance(&[]), 0.0);
    // the paper's Fig. 12 scale: one device at 2.9x the mean of 8 -> 1.9 per layer
    let mut row = vec![5.1 / 7.0; 8];
    row[0] = 2.9;
    assert!((imbalance(&[row.clone(), row]) - 3.8).abs() < 1e-12);
}

#[test]
fn trigger_alpha_and_beta_are_strict() {
    let l = vec![vec![4.0, 2.0, 2.0, 0.0], vec![3.0, 1.0]]; // imbalance 1.5
    let ni = TriggerCfg { alpha: 1.4, beta_cycles: 0 };
    assert!(should_migrate(&ni, &l, 1));
    assert!(!should_migrate(&ni, &l, 0), "beta = 0: not in the cycle of the last migration");
    assert!(should_migrate(&ni, &l, u64::MAX), "never migrated before");
    assert!(!should_migrate(&TriggerCfg { alpha: 1.5, beta_cycles: 0 }, &l, 10), "alpha is strict");
    let inv = TriggerCfg { alpha: 1.0, beta_cycles: 100 };
    assert!(!should_migrate(&inv, &l, 100), "beta is strict");
    assert!(should_migrate(&inv, &l, 101));
    assert!(!should_migrate(&inv, &[vec![1.0; 4]], 1000), "balanced: never");
    assert!(!should_migrate(&ni, &[vec![f64::NAN, 1.0]], 10), "NaN never triggers");
}

// ------------------------------------------------------------------------------------------
// Algorithm 1 by hand
// ------------------------------------------------------------------------------------------

/// 2×2 mesh (dies 0 (0,0), 1 (1,0), 2 (0,1), 3 (1,1)), 8 experts, device d hosts 2d and 2d+1.
fn hand_case() -> (Vec<f64>, Vec<Vec<u32>>, Vec<u32>, WaferGeom) {
    let load = vec![9.0, 3.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.5];
    let placement = (0..4).map(|d| vec![2 * d, 2 * d + 1]).collect();
    (load, placement, vec![1, 1, 1, 2], WaferGeom::single(2, 2))
}

fn mv(expert: u32, src_device: u32, dst_device: u32) -> Move {
    Move { expert, src_device, dst_device }
}

#[test]
fn algorithm1_by_hand() {
    let (load, placement, slots, g) = hand_case();
    assert_eq!(device_loads(&load, &placement), vec![12.0, 2.0, 2.0, 1.0]);
    let p = topo_balance(&load, &placement, &slots, &g, ColdRule::ShareBefore).unwrap();
    // ShareBefore (line 5: Heat_d < Heat_hot - Load_src/Num_src)
    // it 1: hot 0 (12), src 0 (9), bar 12-9 = 3, cold {1, 2, 3}; hops from 0: 1, 1, 2
    //       -> 1 (tie 1 = 2 hops: lower id), not the coldest (3).  heats 7.5 6.5 2 1
    // it 2: hot 0 (7.5), src 0 (4.5 > 3), bar 3, cold {2, 3} (1 hosts 0) -> 2 (1 hop).
    //       heats 6 5 5 1
    // it 3: hot 0 (6), src 0 (3 = 3 of expert 1: lower id), bar 3, cold {3} -> 3.
    //       num_0 = 4: heats 5.25 4.25 4.25 3.25
    // it 4: hot 0, src 1 (3 > 2.25), bar 2.25: no heat below -> stop (3 and 0 keep a slot)
    assert_eq!(p.moves, vec![mv(0, 0, 1), mv(0, 0, 2), mv(0, 0, 3)]);
    assert_eq!(p.heats, vec![5.25, 4.25, 4.25, 3.25]);
    assert_eq!(p.placement, vec![vec![0, 1], vec![0, 2, 3], vec![0, 4, 5], vec![0, 6, 7]]);
    assert_eq!(p.num, vec![4, 1, 1, 1, 1, 1, 1, 1]);
    assert_eq!(p.slots_left, vec![1, 0, 0, 1]);
    assert_eq!(p.total_hops(&g), 4);
    assert_eq!(max_over_mean(&p.heats), 5.25 / 4.25);

    // HeatAfter (the heat d would have after hosting src < Heat_hot): the same first three
    // moves (6.5, 5 and 4 < the peak; 5.5 for 3 in it 1), then
    // it 4: hot 0 (5.25), src 1 (3 > 2.25), 3 would be 3.25 + 1.5 = 4.75 < 5.25 -> copy to 3,
    //       the only device with a slot not hosting 1 (2 hops).  heats 3.75 4.25 4.25 4.75
    // it 5: hot 3, src 0 (2.25): the one free slot left is on 0, which hosts 0 -> stop
    let p = topo_balance(&load, &placement, &slots, &g, ColdRule::HeatAfter).unwrap();
    assert_eq!(p.moves, vec![mv(0, 0, 1), mv(0, 0, 2), mv(0, 0, 3), mv(1, 0, 3)]);
    assert_eq!(p.heats, vec![3.75, 4.25, 4.25, 4.75]);
    assert_eq!(p.slots_left, vec![1, 0, 0, 0]);
    assert_eq!(p.total_hops(&g), 6);
}

#[test]
fn greedy_by_hand() {
    let (load, placement, slots, g) = hand_case();
    let p = greedy_balance(&load, &placement, &slots, &g, ColdRule::ShareBefore).unwrap();
    // ShareBefore
    // it 1: hottest expert 0 (9); candidates 1 (2), 2 (2), 3 (1) -> coldest 3 (2 hops away);
    //       1 < 12 - 9. heats 7.5 2 2 5.5
    // it 2: expert 0 (4.5); candidates 1, 2 (both 2) -> 1; 2 < 7.5 - 4.5; from the host nearest
    //       to 1: 0 and 3 both 1 hop -> 0. heats 6 5 2 4
    // it 3: expert 0 (3 = expert 1's 3: lower id); candidates {2} (3 hosts 0); 2 < 6 - 3;
    //       from 0 or 3 (1 hop each) -> 0. heats 5.25 4.25 4.25 3.25
    // it 4: expert 1 (3); candidates {3} (0 hosts 1); 3.25 < 5.25 - 3 fails -> stop
    assert_eq!(p.moves, vec![mv(0, 0, 3), mv(0, 0, 1), mv(0, 0, 2)]);
    assert_eq!(p.heats, vec![5.25, 4.25, 4.25, 3.25]);
    assert_eq!(p.slots_left, vec![1, 0, 0, 1]);
    assert_eq!(p.total_hops(&g), 4);
    // HeatAfter: the same three (5.5, 5, 4.25 < the peak), then it 4: expert 1 to 3 (4.75 <
    // 5.25, from 0, its only host); it 5: expert 0 (2.25), no device with a slot lacks it -> stop
    let p = greedy_balance(&load, &placement, &slots, &g, ColdRule::HeatAfter).unwrap();
    assert_eq!(p.moves, vec![mv(0, 0, 3), mv(0, 0, 1), mv(0, 0, 2), mv(1, 0, 3)]);
    assert_eq!(p.heats, vec![3.75, 4.25, 4.25, 4.75]);
}

#[test]
fn ties_and_degenerate_inputs() {
    let g = WaferGeom::single(3, 1); // dies 0 - 1 - 2 in a row
    let topo_balance = |l: &[f64], p: &[Vec<u32>], s: &[u32], g: &WaferGeom| topo_balance(l, p, s, g, ColdRule::ShareBefore);
    // hottest tie (0 and 2 both 4): lower id 0; src 0 (3), bar 1, cold {1} -> heats 2.5 1.5 4;
    // then hot 2, src 3 (3), bar 1: 1.5 is not below -> stop
    let p = topo_balance(&[3.0, 1.0, 0.0, 3.0, 1.0], &[vec![0, 1], vec![2], vec![3, 4]], &[0, 2, 0], &g).unwrap();
    assert_eq!(p.moves, vec![mv(0, 0, 1)]);
    assert_eq!(p.heats, vec![2.5, 1.5, 4.0]);
    // all zero: nothing is below the peak
    let p = topo_balance(&[0.0; 3], &[vec![0], vec![1], vec![2]], &[1; 3], &g).unwrap();
    assert!(p.moves.is_empty());
    // the hottest device hosts nothing (all heats 0 and die 0 empty)
    let p = topo_balance(&[0.0], &[vec![], vec![0], vec![]], &[1; 3], &g).unwrap();
    assert!(p.moves.is_empty());
    // no shadow slots: nothing moves, heats as given
    let p = topo_balance(&[5.0, 1.0, 1.0], &[vec![0], vec![1], vec![2]], &[0; 3], &g).unwrap();
    assert!(p.moves.is_empty());
    assert_eq!(p.heats, vec![5.0, 1.0, 1.0]);
    // existing replicas count: expert 0 on 0 and 2 carries 3 each (heats 4 0 3); a third copy
    // on 1 -> 2 each (heats 3 2 2); then bar = 3 - 2 = 1: stop
    let p = topo_balance(&[6.0, 1.0, 0.0], &[vec![0, 1], vec![2], vec![0]], &[9, 9, 9], &g).unwrap();
    assert_eq!(p.moves, vec![mv(0, 0, 1)]);
    assert_eq!(p.heats, vec![3.0, 2.0, 2.0]);
    assert_eq!(p.num, vec![3, 1, 1]);
    // huge slot counts still terminate (cap: devices x experts)
    let p = topo_balance(&[6.0, 1.0], &[vec![0, 1], vec![], vec![]], &[u32::MAX; 3], &g).unwrap();
    assert_eq!(p.moves, vec![mv(0, 0, 1), mv(0, 0, 2)]);
    assert_eq!(p.heats, vec![3.0, 2.0, 2.0]);
    // a single dominant expert: under line 5 the bar is 6 - 6 = 0 (the rest of device 0 carries
    // nothing) and no heat is strictly below it, so it is never copied; HeatAfter splits it:
    // 0 + 3 < 6 -> copy to 1 (heats 3 3 0), then hot 0 (tie: lower id), 0 + 2 < 3 -> copy to 2
    let one = (&[6.0, 0.0][..], &[vec![0, 1], vec![], vec![]][..]);
    assert!(topo_balance(one.0, one.1, &[1; 3], &g).unwrap().moves.is_empty());
    let p = sched::balance::ni::topo_balance(one.0, one.1, &[1; 3], &g, ColdRule::HeatAfter).unwrap();
    assert_eq!(p.moves, vec![mv(0, 0, 1), mv(0, 0, 2)]);
    assert_eq!(p.heats, vec![2.0, 2.0, 2.0]);
}

// ------------------------------------------------------------------------------------------
// Replayed against a re-derivation from device_loads
// ------------------------------------------------------------------------------------------

fn argmax_lower(v: &[f64]) -> usize {
    let mut b = 0;
    for i in 1..v.len() {
        if v[i] > v[b] {
            b = i;
        }
    }
    b
}

fn nums(load: &[f64], p: &[Vec<u32>]) -> Vec<u32> {
    let mut n = vec![0; load.len()];
    p.iter().flatten().for_each(|&e| n[e as usize] += 1);
    n
}

fn max_of(v: &[f64]) -> f64 {
    v.iter().cloned().fold(f64::MIN, f64::max)
}

/// Checks `plan` move by move; `topo` selects Algorithm 1's rules, else the greedy's.
fn replay(load: &[f64], placement: &[Vec<u32>], slots: &[u32], g: &WaferGeom, plan: &BalancePlan, topo: bool, rule: ColdRule) -> Result<(), TestCaseError> {
    let mut p: Vec<Vec<u32>> = placement.to_vec();
    let mut s = slots.to_vec();
    let share = |n: &[u32], e: u32| load[e as usize] / n[e as usize] as f64;
    let total: f64 = load.iter().sum();
    let mut moves = plan.moves.iter();
    // d is cold for src against peak, from the definitions: the share before the copy, or the
    // heat d would have (device_loads of the placement with the copy made)
    let cold = |p: &[Vec<u32>], h: &[f64], n: &[u32], d: u32, src: u32, peak: f64| match rule {
        ColdRule::ShareBefore => h[d as usize] < peak - load[src as usize] / n[src as usize] as f64,
        ColdRule::HeatAfter => {
            let mut q = p.to_vec();
            q[d as usize].push(src);
            device_loads(load, &q)[d as usize] < peak
        }
    };
    loop {
        let h = device_loads(load, &p);
        let n = nums(load, &p);
        prop_assert!((h.iter().sum::<f64>() - total).abs() <= 1e-9 * total.max(1.0), "loads conserved");
        let hot = argmax_lower(&h) as u32;
        // the decision the rules give in this state (None = stop)
        let want: Option<Move> = if topo {
            let on_hot = &p[hot as usize];
            let src = on_hot.iter().copied().fold(None, |b: Option<u32>, e| match b {
                Some(b) if !(share(&n, e) > share(&n, b) || (share(&n, e) == share(&n, b) && e < b)) => Some(b),
                _ => Some(e),
            });
            src.and_then(|src| {
                let cold: Vec<u32> = (0..h.len() as u32)
                    .filter(|&d| s[d as usize] > 0 && !p[d as usize].contains(&src) && cold(&p, &h, &n, d, src, h[hot as usize]))
                    .collect();
                let near = cold.iter().map(|&d| g.hops(hot, d)).min()?;
                let dst = *cold.iter().find(|&&d| g.hops(hot, d) == near)?;
                Some(Move { expert: src, src_device: hot, dst_device: dst })
            })
        } else {
            let src = argmax_lower(&(0..load.len() as u32).map(|e| share(&n, e)).collect::<Vec<_>>()) as u32;
            let cand: Vec<u32> = (0..h.len() as u32).filter(|&d| s[d as usize] > 0 && !p[d as usize].contains(&src)).collect();
            let dst = cand.iter().copied().fold(None, |b: Option<u32>, d| match b {
                Some(b) if h[d as usize] >= h[b as usize] => Some(b),
                _ => Some(d),
            });
            dst.filter(|&d| cold(&p, &h, &n, d, src, h[hot as usize])).map(|dst| {
                let hosts: Vec<u32> = (0..h.len() as u32).filter(|&d| p[d as usize].contains(&src)).collect();
                let near = hosts.iter().map(|&d| g.hops(d, dst)).min().unwrap();
                let from = *hosts.iter().find(|&&d| g.hops(d, dst) == near).unwrap();
                Move { expert: src, src_device: from, dst_device: dst }
            })
        };
        let got = moves.next();
        prop_assert_eq!(got.copied(), want, "decision differs from the rules");
        let Some(m) = got else { break };
        // the move's preconditions, stated directly
        prop_assert!(s[m.dst_device as usize] > 0, "destination had a free slot");
        prop_assert!(!p[m.dst_device as usize].contains(&m.expert), "destination did not host the expert");
        prop_assert!(p[m.src_device as usize].contains(&m.expert), "source hosts the expert");
        if topo {
            // nearest among the cold set
            for d in 0..h.len() as u32 {
                if s[d as usize] > 0 && !p[d as usize].contains(&m.expert) && cold(&p, &h, &n, d, m.expert, h[hot as usize]) {
                    prop_assert!(g.hops(hot, m.dst_device) <= g.hops(hot, d));
                }
            }
        }
        let before = max_of(&h);
        p[m.dst_device as usize].push(m.expert);
        s[m.dst_device as usize] -= 1;
        prop_assert!(max_of(&device_loads(load, &p)) <= before, "peak heat never increases");
    }
    prop_assert!(plan.moves.len() as u64 <= slots.iter().map(|&x| x as u64).sum::<u64>());
    for d in &mut p {
        d.sort_unstable();
    }
    prop_assert_eq!(&p, &plan.placement);
    prop_assert_eq!(&s, &plan.slots_left);
    prop_assert_eq!(&nums(load, &p), &plan.num);
    // bit-for-bit the heats of the final placement
    prop_assert_eq!(device_loads(load, &plan.placement), plan.heats.clone());
    Ok(())
}

/// A mesh of up to 4×4, up to 24 experts on random hosts (some with replicas), integer loads
/// from a small range (many ties), 0..=3 shadow slots per die.
fn case() -> impl Strategy<Value = (Vec<f64>, Vec<Vec<u32>>, Vec<u32>, WaferGeom)> {
    (1u32..=4, 1u32..=4, 1usize..=24, prop::bool::ANY).prop_flat_map(|(c, r, n, coarse)| {
        let dies = (c * r) as usize;
        let lmax = if coarse { 4u32 } else { 100 };
        (
            prop::collection::vec(0..=lmax, n),
            prop::collection::vec((0..dies as u32, prop::collection::vec(0..dies as u32, 0..=2)), n),
            prop::collection::vec(0u32..=3, dies),
        )
            .prop_map(move |(l, hosts, slots)| {
                let mut placement = vec![Vec::new(); dies];
                for (e, (h, extra)) in hosts.iter().enumerate() {
                    for &d in std::iter::once(h).chain(extra) {
                        if !placement[d as usize].contains(&(e as u32)) {
                            placement[d as usize].push(e as u32);
                        }
                    }
                }
                (l.into_iter().map(f64::from).collect(), placement, slots, WaferGeom::single(c, r))
            })
    })
}

fn rules() -> impl Strategy<Value = ColdRule> {
    prop_oneof![Just(ColdRule::ShareBefore), Just(ColdRule::HeatAfter)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn topo_replays((load, placement, slots, g) in case(), rule in rules()) {
        let plan = topo_balance(&load, &placement, &slots, &g, rule).unwrap();
        replay(&load, &placement, &slots, &g, &plan, true, rule)?;
    }

    #[test]
    fn greedy_replays((load, placement, slots, g) in case(), rule in rules()) {
        let plan = greedy_balance(&load, &placement, &slots, &g, rule).unwrap();
        replay(&load, &placement, &slots, &g, &plan, false, rule)?;
    }

    /// Fractional loads: the same invariants without exact ties.
    #[test]
    fn replays_real_loads((_, placement, slots, g) in case(), seed in any::<u64>(), rule in rules()) {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let n = placement.iter().flatten().copied().max().map_or(0, |m| m + 1) as usize;
        let load: Vec<f64> = (0..n).map(|_| rng.gen::<f64>() * 1e3).collect();
        // every expert id below n appears somewhere by construction of case()
        let plan = topo_balance(&load, &placement, &slots, &g, rule).unwrap();
        replay(&load, &placement, &slots, &g, &plan, true, rule)?;
        let plan = greedy_balance(&load, &placement, &slots, &g, rule).unwrap();
        replay(&load, &placement, &slots, &g, &plan, false, rule)?;
    }

    /// Arbitrary (also malformed) inputs: a plan or an error, never a panic.
    #[test]
    fn never_panics(load in prop::collection::vec(prop_oneof![Just(f64::NAN), Just(-1.0), 0.0..10.0f64], 0..6),
                    placement in prop::collection::vec(prop::collection::vec(0u32..8, 0..4), 0..6),
                    slots in prop::collection::vec(0u32..3, 0..6), c in 0u32..3, r in 0u32..3) {
        let g = WaferGeom::single(c, r);
        for rule in [ColdRule::ShareBefore, ColdRule::HeatAfter] {
            let _ = topo_balance(&load, &placement, &slots, &g, rule);
            let _ = greedy_balance(&load, &placement, &slots, &g, rule);
        }
    }
}

// ------------------------------------------------------------------------------------------
// Skewed loads
// ------------------------------------------------------------------------------------------

/// Zipf(1.2) loads over 128 experts, expert `e` at rank `perm[e]`.
fn zipf(perm: &[usize]) -> Vec<f64> {
    perm.iter().map(|&r| 1.0 / ((r + 1) as f64).powf(1.2)).collect()
}

fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        v.swap(i, rng.gen_range(0..=i));
    }
    v
}

/// 128 experts, 8 per die on a 4×4 wafer (expert `e` on die `e % 16`), 2 shadow slots per die,
/// Zipf(1.2) loads: seed 0 with rank = expert id, 31 more with shuffled ranks. Reports max/mean
/// before, after the greedy baseline and after Algorithm 1 under both cold rules (numbers in
/// docs/balance.md; `--nocapture` prints them).
#[test]
fn zipf_skew_balances() {
    let g = WaferGeom::single(4, 4);
    let placement: Vec<Vec<u32>> = {
        let mut p = vec![Vec::new(); 16];
        for (e, h) in expert_hosts(128, 16).iter().enumerate() {
            p[h[0] as usize].push(e as u32);
        }
        p
    };
    let slots = vec![2u32; 16];
    let seeds = 32u64;
    for rule in [ColdRule::ShareBefore, ColdRule::HeatAfter] {
        let (mut sb, mut sg, mut st) = (0.0f64, 0.0f64, 0.0f64);
        let (mut hops, mut moves) = ([0u64; 2], [0usize; 2]);
        let (mut worst_g, mut worst_t) = (0.0f64, 0.0f64);
        for seed in 0..seeds {
            let perm = if seed == 0 { (0..128).collect() } else { shuffled(128, seed) };
            let load = zipf(&perm);
            let before = max_over_mean(&device_loads(&load, &placement));
            let gr = greedy_balance(&load, &placement, &slots, &g, rule).unwrap();
            let tp = topo_balance(&load, &placement, &slots, &g, rule).unwrap();
            let (ag, at) = (max_over_mean(&gr.heats), max_over_mean(&tp.heats));
            assert!(at <= before && ag <= before, "{rule:?} seed {seed}: {before} -> greedy {ag}, topo {at}");
            if rule == ColdRule::HeatAfter {
                assert!(at < before && ag < before, "seed {seed}: {before} -> greedy {ag}, topo {at}");
            }
            if seed == 0 {
                eprintln!(
                    "{rule:?} zipf rank = id: before {before:.3}, greedy {ag:.3} ({} moves, {} hops), topo {at:.3} ({} moves, {} hops)",
                    gr.moves.len(),
                    gr.total_hops(&g),
                    tp.moves.len(),
                    tp.total_hops(&g)
                );
            }
            (sb, sg, st) = (sb + before, sg + ag, st + at);
            (worst_g, worst_t) = (worst_g.max(ag), worst_t.max(at));
            hops[0] += gr.total_hops(&g);
            hops[1] += tp.total_hops(&g);
            moves[0] += gr.moves.len();
            moves[1] += tp.moves.len();
        }
        let n = seeds as f64;
        let (b, ag, at) = (sb / n, sg / n, st / n);
        eprintln!(
            "{rule:?} zipf mean over {seeds} placements: before {b:.3}, greedy {ag:.3} (worst {worst_g:.3}; {:.1} moves, {:.2} hops/move), topo {at:.3} (worst {worst_t:.3}; {:.1} moves, {:.2} hops/move)",
            moves[0] as f64 / n,
            hops[0] as f64 / moves[0].max(1) as f64,
            moves[1] as f64 / n,
            hops[1] as f64 / moves[1].max(1) as f64
        );
        assert!(b > 1.5, "Zipf 1.2 over 8 experts per die is strongly skewed: {b}");
        if rule == ColdRule::HeatAfter {
            assert!(at < 0.8 * b && ag < 0.8 * b, "{b} -> greedy {ag}, topo {at}");
            // Algorithm 1 makes more copies (it balances further), so its *total* hops need not
            // be lower; per copy the nearest destination is cheaper
            assert!(
                hops[1] * (moves[0] as u64) < hops[0] * (moves[1] as u64),
                "hops per move: topo {}/{} greedy {}/{}",
                hops[1],
                moves[1],
                hops[0],
                moves[0]
            );
        }
    }
}

// ------------------------------------------------------------------------------------------
// Migration steps
// ------------------------------------------------------------------------------------------

fn check_steps(m: &sched::wafer::Mapping, a: u32, b: u32) {
    let st = migration_steps(m, a, b);
    let g = &m.geom;
    if a == b {
        assert!(st.is_empty());
        return;
    }
    // the steps chain into one route of hops(a, b) single hops from a to b
    assert_eq!(st[0].path[0], a);
    assert_eq!(*st.last().unwrap().path.last().unwrap(), b);
    let mut route = vec![a];
    for (i, s) in st.iter().enumerate() {
        assert!(s.path.len() >= 2);
        if i > 0 {
            assert_ne!(s.kind, st[i - 1].kind, "{a}->{b}: kinds alternate");
            assert_eq!(s.path[0], *st[i - 1].path.last().unwrap());
        }
        for w in s.path.windows(2) {
            assert_eq!(g.hops(w[0], w[1]), 1);
            let local = m.ftd_of[w[0] as usize] == m.ftd_of[w[1] as usize];
            assert_eq!(s.kind == MigKind::Local, local, "{a}->{b}: hop {}->{}", w[0], w[1]);
        }
        route.extend_from_slice(&s.path[1..]);
    }
    assert_eq!(route.len() as u32, g.hops(a, b) + 1, "{a}->{b}: minimal");
}

#[test]
fn migration_steps_er_4x4() {
    let m = map(MappingKind::Er, WaferGeom::single(4, 4), 4, 4, true).unwrap();
    assert_eq!(m.ftds[0], vec![0, 1, 4, 5]);
    let local = |p: Vec<u32>| MigStep { kind: MigKind::Local, path: p };
    let global = |p: Vec<u32>| MigStep { kind: MigKind::Global, path: p };
    // inside FTD 0: one Local step along XY (x first)
    assert_eq!(migration_steps(&m, 0, 5), vec![local(vec![0, 1, 5])]);
    assert_eq!(migration_steps(&m, 10, 15), vec![local(vec![10, 11, 15])]);
    // neighbouring FTDs across one border: Global then Local
    assert_eq!(migration_steps(&m, 1, 3), vec![global(vec![1, 2]), local(vec![2, 3])]);
    // corner to opposite corner: XY crosses the x border in row 0 and the y border in column 3
    assert_eq!(
        migration_steps(&m, 0, 15),
        vec![local(vec![0, 1]), global(vec![1, 2]), local(vec![2, 3, 7]), global(vec![7, 11]), local(vec![11, 15])]
    );
    // the paper's Fig. 11(d) shape, Local -> Global -> Local, through the point where the four
    // FTDs meet (5 -> 6 -> 10): split_path accepts that route
    let fig11d = split_path(&m, &[0, 1, 5, 6, 10, 11, 15]);
    assert_eq!(fig11d, vec![local(vec![0, 1, 5]), global(vec![5, 6, 10]), local(vec![10, 11, 15])]);
    assert!(migration_steps(&m, 6, 6).is_empty());
    for a in 0..16 {
        for b in 0..16 {
            check_steps(&m, a, b);
            // a route inside one FTD is one Local step
            if m.ftd_of[a as usize] == m.ftd_of[b as usize] && a != b {
                assert_eq!(migration_steps(&m, a, b).len(), 1);
                assert_eq!(migration_steps(&m, a, b)[0].kind, MigKind::Local);
            }
        }
    }
}

#[test]
fn migration_steps_other_mappings() {
    let cases = [
        map(MappingKind::Er, WaferGeom::single(8, 8), 4, 16, true).unwrap(),
        map(MappingKind::Er, WaferGeom::single(4, 2), 2, 4, true).unwrap(),
        map(MappingKind::Baseline, WaferGeom::single(4, 4), 4, 4, true).unwrap(),
        map(MappingKind::Her, WaferGeom { wafers_x: 2, wafers_y: 1, die_cols: 4, die_rows: 4 }, 4, 8, true).unwrap(),
    ];
    for m in &cases {
        for a in 0..m.geom.dies() {
            for b in 0..m.geom.dies() {
                check_steps(m, a, b);
            }
        }
    }
    // HER: the FTDs are the wafers, so only the cross-wafer hop is Global
    let her = &cases[3];
    let st = migration_steps(her, 0, 7); // row 0, x 0 -> 7 across the wafer border at 3|4
    assert_eq!(st.iter().map(|s| s.kind).collect::<Vec<_>>(), vec![MigKind::Local, MigKind::Global, MigKind::Local]);
    assert_eq!(st[1].path, vec![3, 4]);
    // baseline: FTDs interleave, so neighbours are in different FTDs: a single Global step
    let st = migration_steps(&cases[2], 0, 3);
    assert_eq!(st, vec![MigStep { kind: MigKind::Global, path: vec![0, 1, 2, 3] }]);
}
