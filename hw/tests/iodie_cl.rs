//! CL IO-die scheduler against its FL twin: the same message sequence on the same inputs
//! (random EITs on 2×2..4×4 with up to 128 experts, random done-pulse times and link
//! latencies), the ICV invariant (a grant's start chiplet is idle), token buffering, and the
//! decision latency.

use hw::harness::{DomainClock, LinkArena};
use hw::pkg::iodie::*;
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use sched::pkg::iodie::{all_mask, TokenBufferFl, TrajectorySchedulerFl};

#[derive(Debug, Clone)]
struct Bench {
    rows: usize,
    cols: usize,
    policy: OrderPolicy,
    lat_out: u32,
    lat_in: u32,
    /// Probability per cycle that some busy chiplets pulse done.
    p_pulse: f64,
    per_chiplet_out: bool,
    seed: u64,
    /// Core clock: ticks per cycle (link latencies scale with it).
    div: u64,
    /// Evaluate the CL only when it is busy or a done mask arrives (fast-forward).
    ff: bool,
}

struct Outcome {
    cl: Vec<SchedMsg>,
    /// Core cycle each message reached the chiplets.
    at: Vec<u64>,
    fl: Vec<SchedMsg>,
    stats: IoDieStats,
    cycles: u64,
}

/// Testbench playing the chiplets: a chiplet is busy from the grant that names it until it
/// pulses done (at a random later cycle); it never pulses in the cycle a grant reaches it.
/// Every done mask is also given to the FL (`release_seen` with the grants received so far).
fn run_layer(b: &Bench, eit: &[EitEntryFl]) -> Result<Outcome, TestCaseError> {
    let n = b.rows * b.cols;
    let mut msgs = LinkArena::<SchedMsgCl>::new();
    let d = b.div;
    let outs: Vec<_> = (0..if b.per_chiplet_out { n } else { 1 }).map(|_| msgs.add(b.lat_out * d as u32)).collect();
    // Done links: one shared, or (with per-chiplet message links) one per chiplet, whose
    // same-edge pulses the scheduler ORs into one release.
    let mut done = LinkArena::<u16>::new();
    let dins: Vec<_> = (0..if b.per_chiplet_out { n } else { 1 }).map(|_| done.add(b.lat_in * d as u32)).collect();
    let clk = DomainClock { div: d, ph: 0 };
    let mut arrivals = std::collections::VecDeque::new();
    let mut evals = 0u64;
    let cfg = IoDieCfg { policy: b.policy, experts: eit.len() as u32, ..IoDieCfg::default() };
    let ports = IoDiePorts { msg_out: outs.clone(), done_in: dins.clone() };
    let mut cl = IoDieSchedulerCl::new(b.rows, b.cols, &cfg, clk, ports).unwrap();
    let mut fl = TrajectorySchedulerFl::new(b.rows, b.cols).unwrap();
    let mut fl_msgs = fl.begin_layer(eit, b.policy).unwrap();
    cl.begin_layer(0, eit).unwrap();
    let k = eit.iter().filter(|x| x.count > 0).count();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(b.seed);
    let mut got = Vec::new();
    let mut at = Vec::new();
    let mut busy = 0u16;
    let mut grants_seen = 0usize;
    let mut t = 0u64;
    while !(cl.is_finished() && got.len() == 2 * k) {
        prop_assert!(t < 200_000 * d, "no progress: {} of {} messages", got.len(), 2 * k);
        // Messages reaching the chiplets.
        let mut this_cycle: Option<SchedMsg> = None;
        for (c, &l) in outs.iter().enumerate() {
            if let Some(m) = unsafe { msgs.recv(l, t) } {
                if b.per_chiplet_out {
                    prop_assert!(m.msg.mask() >> c & 1 == 1, "chiplet {c} got a message not for it");
                    if let Some(prev) = this_cycle {
                        prop_assert_eq!(prev, m.msg);
                        continue;
                    }
                }
                this_cycle = Some(m.msg);
            }
        }
        let mut fresh = 0u16;
        if let Some(m) = this_cycle {
            if let SchedMsg::Grant { start, mask, .. } = m {
                fresh = mask;
                prop_assert!(busy >> start.0 & 1 == 0, "grant {:?} starts on busy chiplet {} (busy {:#b})", m, start, busy);
                busy |= mask;
                grants_seen += 1;
            }
            got.push(m);
            at.push(t / d);
        }
        // Done pulses of chiplets that finished.
        let can = busy & !fresh;
        if can != 0 && rng.gen_bool(b.p_pulse) {
            let mut sub = can & rng.gen_range(1..=all_mask(n));
            if sub == 0 {
                sub = 1 << can.trailing_zeros();
            }
            busy &= !sub;
            if b.per_chiplet_out {
                for (c, &l) in dins.iter().enumerate() {
                    if sub >> c & 1 == 1 {
                        unsafe { done.send(l, t, 1 << c) };
                    }
                }
            } else {
                unsafe { done.send(dins[0], t, sub) };
            }
            arrivals.push_back(t + (b.lat_in as u64) * d);
            fl_msgs.extend(fl.release_seen(sub, grants_seen));
        }
        let arriving = arrivals.front() == Some(&t);
        if arriving {
            arrivals.pop_front();
        }
        if !b.ff || arriving || cl.next_event() <= t {
            evals += 1;
            unsafe { cl.eval(t, &msgs, &done) };
            if cl.grant_valid {
                prop_assert!(cl.grant_icv >> cl.grant_start.0 & 1 == 1, "CL granted from a busy start chiplet");
            }
        }
        t += d;
    }
    if b.ff {
        prop_assert!(evals <= t / d);
    }
    prop_assert!(fl.is_finished());
    prop_assert_eq!(cl.stats.done_fifo_merges, 0);
    Ok(Outcome { cl: got, at, fl: fl_msgs, stats: cl.stats, cycles: t / d })
}

fn arb_eit(n: usize, max_e: usize) -> impl Strategy<Value = Vec<EitEntryFl>> {
    let all = all_mask(n);
    prop::collection::vec((0u16..=all, 1u32..300, 0u8..8), 1..=max_e).prop_map(|v| {
        v.into_iter()
            // 1 in 8 experts gets no token; the rest a random trajectory.
            .map(|(m, c, z)| if m == 0 || z == 0 { EitEntryFl::default() } else { EitEntryFl { mask: m, count: c } })
            .collect()
    })
}

fn arb_bench() -> impl Strategy<Value = (Bench, Vec<EitEntryFl>)> {
    (2usize..=4, 2usize..=4, 0u8..3, 1u32..4, 1u32..4, 0.01f64..0.5, any::<bool>(), any::<u64>()).prop_flat_map(
        |(rows, cols, pol, lat_out, lat_in, p_pulse, per_chiplet_out, seed)| {
            let policy = [OrderPolicy::Paired, OrderPolicy::HotFirst, OrderPolicy::ById][pol as usize];
            let b = Bench { rows, cols, policy, lat_out, lat_in, p_pulse, per_chiplet_out, seed, div: 1, ff: false };
            (Just(b), arb_eit(rows * cols, 128))
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// The CL's message sequence equals the FL's; the testbench checks on every grant that
    /// its start chiplet is idle (never busy) and the CL that it was in its ICV.
    #[test]
    fn cl_decisions_equal_fl((b, eit) in arb_bench()) {
        let o = run_layer(&b, &eit)?;
        prop_assert_eq!(&o.cl, &o.fl);
        let k = eit.iter().filter(|x| x.count > 0).count() as u64;
        prop_assert_eq!(o.stats.decisions, k);
        prop_assert_eq!(o.stats.preloads, k);
        prop_assert!(o.cycles > 0);
    }

    /// Evaluated only at the edges of a core clock of 10 ticks, and fast-forwarded (evaluated
    /// only when `next_event` says so or a done mask arrives): the same messages at the same
    /// core cycles, the same counters, as stepping every cycle of a unit clock.
    #[test]
    fn clocked_and_fast_forward_equal_unit((b, eit) in arb_bench()) {
        let unit = run_layer(&b, &eit)?;
        let ffw = run_layer(&Bench { div: 10, ff: true, ..b.clone() }, &eit)?;
        prop_assert_eq!(&unit.cl, &ffw.cl);
        prop_assert_eq!(&unit.at, &ffw.at);
        prop_assert_eq!(unit.stats, ffw.stats);
    }

    /// Token buffering: the same deferrals and QoS timers at both levels over several layers,
    /// and the same messages for the EIT of the requests kept.
    #[test]
    fn token_buffering_equals_fl(
        reqs in prop::collection::vec(prop::collection::vec((0u16..32, 0u8..4, 1u32..6), 1..6), 1..12),
        theta in 1u32..12, n_thr in 1u32..4, t0 in 0u32..3, seed in any::<u64>(),
    ) {
        let tbc = TokenBufferCfgFl { theta_min: theta, n_threshold: n_thr, t_qos_init: t0, slots: 16 };
        let cfg = IoDieCfg { experts: 32, token_buffer: tbc.clone(), ..IoDieCfg::default() };
        let mut msgs = LinkArena::<SchedMsgCl>::new();
        let out = msgs.add(1);
        let done = LinkArena::<u16>::new();
        let mut cl = IoDieSchedulerCl::new(2, 2, &cfg, DomainClock::UNIT, IoDiePorts { msg_out: vec![out], done_in: vec![] }).unwrap();
        let mut fl = TrajectorySchedulerFl::new(2, 2).unwrap();
        let mut tb = TokenBufferFl::new(tbc).unwrap();
        let g: Vec<RequestGatingFl> = reqs.iter().enumerate().map(|(i, r)| RequestGatingFl::from_raw(i as u32, r)).collect();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut t = 0u64;
        for _layer in 0..4 {
            let l = sched::pkg::iodie::schedule_layer_fl(&mut fl, &mut tb, &g, 32, OrderPolicy::Paired).unwrap();
            let (d, want) = (l.deferred, l.msgs);
            cl.begin_layer_requests(t, &g).unwrap();
            let mut got = Vec::new();
            let mut t_end = t + 10_000;
            // No done pulses: the first round of grants only (the FL's begin_layer output).
            while t < t_end {
                if let Some(m) = unsafe { msgs.recv(out, t) } { got.push(m.msg); }
                unsafe { cl.eval(t, &msgs, &done) };
                if !cl.busy() && t_end > t + 3 { t_end = t + 3; }
                t += 1;
            }
            prop_assert_eq!(cl.deferred(), &d[..]);
            prop_assert_eq!(&got, &want);
            for s in 0..g.len() as u32 {
                prop_assert_eq!(cl.qos(sched::ReqId(s)), Some((tb.t_qos[s as usize], tb.c_fw[s as usize])));
            }
            // Finish the layer: rounds of "every chiplet done" at both levels.
            let mut dl = LinkArena::<u16>::new();
            let din = dl.add(1);
            cl.ports.done_in = vec![din];
            while !fl.is_finished() {
                let rest = fl.release(0b1111);
                unsafe { dl.send(din, t, 0b1111) };
                let mut got = Vec::new();
                let (t_pulse, mut t_end) = (t, t + 10_000);
                while t < t_end {
                    if let Some(m) = unsafe { msgs.recv(out, t) } { got.push(m.msg); }
                    unsafe { cl.eval(t, &msgs, &dl) };
                    // The pulse needs 1 cycle on its link and 1 to be seen.
                    if !cl.busy() && t >= t_pulse + 2 && t_end > t + 3 { t_end = t + 3; }
                    t += 1;
                }
                prop_assert_eq!(&got, &rest);
            }
            prop_assert!(cl.is_finished());
            cl.ports.done_in.clear();
            for s in 0..g.len() as u32 {
                if rng.gen_bool(0.7) {
                    tb.forward_pass_done(sched::ReqId(s)).unwrap();
                    cl.forward_pass_done(sched::ReqId(s)).unwrap();
                }
            }
        }
    }
}

/// Decision latency on 2×2 for 16/32/64/128 experts (all with tokens), per policy: cycles
/// from layer start to the first grant, the max over the layer's grants, and the max from a
/// done pulse's arrival to a grant it enables.
#[test]
fn decision_latency_2x2() {
    for policy in [OrderPolicy::Paired, OrderPolicy::ById] {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        for e in [16usize, 32, 64, 128] {
            let eit: Vec<EitEntryFl> = (0..e).map(|_| EitEntryFl { mask: rng.gen_range(1..16), count: rng.gen_range(1..100) }).collect();
            let b = Bench { rows: 2, cols: 2, policy, lat_out: 1, lat_in: 1, p_pulse: 0.05, per_chiplet_out: false, seed: 1, div: 1, ff: false };
            let o = run_layer(&b, &eit).unwrap_or_else(|err| panic!("{err}"));
            assert_eq!(o.cl, o.fl);
            let l = e.next_power_of_two().trailing_zeros() as u64;
            let sort = if policy == OrderPolicy::ById { 0 } else { l * (l + 1) / 2 + 1 };
            // Edge index of the first grant: EIT writes, sorter stages + order, preloads, then
            // >= 1 examined entry (the grant issues on the edge after the last one).
            let floor = e as u64 + sort + e as u64 + 1;
            println!(
                "{policy:?} experts {e:3}: first grant {} cycles (floor {floor}), decision max {}, after a done pulse max {} mean {:.1}, scan cycles {}, busy {}",
                o.stats.first_grant_cycles_max,
                o.stats.decision_cycles_max,
                o.stats.release_decision_cycles_max,
                o.stats.decision_cycles_sum as f64 / o.stats.decisions as f64,
                o.stats.scan_cycles,
                o.stats.layer_sched_cycles
            );
            assert!(o.stats.first_grant_cycles_max >= floor);
            assert!(o.stats.release_decision_cycles_max >= 2 && o.stats.release_decision_cycles_max <= 1 + e as u64);
        }
    }
}

/// The line trace and probe signals of one short run.
#[test]
fn trace_and_probe() {
    use hw::harness::Probe;
    let mut msgs = LinkArena::<SchedMsgCl>::new();
    let out = msgs.add(2);
    let done = LinkArena::<u16>::new();
    let cfg = IoDieCfg { experts: 3, ..IoDieCfg::default() };
    let mut cl = IoDieSchedulerCl::new(1, 2, &cfg, DomainClock::UNIT, IoDiePorts { msg_out: vec![out], done_in: vec![] }).unwrap();
    let mut decl = Vec::new();
    cl.declare(&["top".into(), "pkg".into(), "iodie".into()], &mut decl);
    let names: Vec<String> = decl.iter().map(|d| d.name.clone()).collect();
    for s in ["icv", "state", "eit_rd_addr", "eit_rd_mask", "grant_valid", "grant_expert", "grant_start", "sorter_stage"] {
        assert!(names.iter().any(|n| n == s), "missing signal {s}");
    }
    assert_eq!(decl.iter().filter(|d| d.scope.iter().any(|s| s == "sorter")).count(), cl.sorter_stages());
    cl.begin_layer(0, &[EitEntryFl { mask: 0b01, count: 3 }, EitEntryFl { mask: 0b11, count: 5 }]).unwrap();
    let mut lines = Vec::new();
    for t in 0..20 {
        unsafe { cl.eval(t, &msgs, &done) };
        let mut v = Vec::new();
        cl.sample(&mut v);
        assert_eq!(v.len(), decl.len());
        lines.push(cl.to_string());
    }
    assert!(lines.iter().any(|l| l.contains("G e1@0")), "{lines:#?}");
    assert!(lines.iter().any(|l| l.contains("P e0")), "{lines:#?}");
    assert!(!cl.is_finished() && !cl.busy() && cl.next_event() == hw::harness::NEVER);
}
