//! `iodie_scheduler` (RTL) against `IoDieSchedulerCl` (CL) in lockstep: the same layers,
//! done pulses and QoS host writes, every traced output, the QoS bank and the performance
//! counters compared after every edge. A mismatch names the edge, the port and both values.

mod common;

use hw::harness::{DomainClock, LinkArena, Probe};
use hw::pkg::iodie::{IoDieCfg, IoDiePorts, IoDieSchedulerCl, MatchState, SchedMsgCl};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rtl::pkg::iodie::{IoDieRtlParams, POLICY_BY_ID, POLICY_HOT_FIRST, POLICY_PAIRED};
use rtl::pkg::iodie_twin::{build_block, random_eit, random_reqs, BusyChiplets, IoDieDriver, IoDieIn};
use sched::pkg::iodie::{EitEntryFl, OrderPolicy, TokenBufferCfgFl};

#[derive(Debug, Clone)]
struct Scenario {
    rows: usize,
    cols: usize,
    experts: usize,
    policy: OrderPolicy,
    tb: TokenBufferCfgFl,
    fifo: usize,
    l_in: u32,
    l_out: u32,
}

const PORTS: [&str; 20] = [
    "state", "icv", "eit_wr_valid", "eit_wr_addr", "eit_rd_valid", "eit_rd_addr", "eit_rd_mask", "sorter_stage", "order_len", "scan_ptr",
    "preload_valid", "preload_expert", "grant_valid", "grant_expert", "grant_mask", "grant_start", "grant_icv", "grants", "done_fifo_occ",
    "defer_valid",
];

/// Runs `cycles` edges of random traffic; panics with edge/port/values on the first mismatch.
fn lockstep(sc: &Scenario, cycles: u64, seed: u64) {
    let n = sc.rows * sc.cols;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut msgs = LinkArena::<SchedMsgCl>::new();
    let out = msgs.add(sc.l_out);
    let mut done = LinkArena::<u16>::new();
    let din: Vec<_> = (0..n).map(|_| done.add(sc.l_in)).collect();
    let cfg = IoDieCfg { policy: sc.policy, experts: sc.experts as u32, done_fifo: sc.fifo as u32, token_buffer: sc.tb.clone(), broadcast: false };
    let mut cl = IoDieSchedulerCl::new(sc.rows, sc.cols, &cfg, DomainClock::UNIT, IoDiePorts { msg_out: vec![out], done_in: din.clone() }).unwrap();
    let params = IoDieRtlParams {
        rows: sc.rows,
        cols: sc.cols,
        experts: sc.experts,
        policy: match sc.policy {
            OrderPolicy::Paired => POLICY_PAIRED,
            OrderPolicy::HotFirst => POLICY_HOT_FIRST,
            OrderPolicy::ById => POLICY_BY_ID,
        },
        theta_min: sc.tb.theta_min,
        n_threshold: sc.tb.n_threshold,
        t_qos_init: sc.tb.t_qos_init,
        stale_window: sc.l_in + sc.l_out,
    };
    let block = build_block(&params, sc.tb.slots as usize, sc.fifo).expect("a built size");
    let mut rtl = IoDieDriver::new(block, n, sc.experts);
    // Chiplets: busy until a cycle, then report done on their link.
    let mut chips = BusyChiplets::new(n);
    let mut gap = 0u64;
    let mut edge_trace: Vec<String> = Vec::new();
    let mut waves = common::LockstepTrace::new(&PORTS.map(|p| (p, 64)));
    for t in 0..cycles {
        let mut inp = IoDieIn { stamp: t as u32, ..IoDieIn::default() };
        unsafe {
            // Grants reach the chiplets: every member works for a while.
            if let Some(m) = msgs.recv(out, t) {
                if let sched::pkg::iodie::SchedMsg::Grant { mask, .. } = m.msg {
                    chips.grant(mask, || {
                        let hi = [3u64, 30][rng.gen_range(0..2)];
                        t + rng.gen_range(1..hi)
                    });
                }
            }
            let d = chips.done(t, || rng.gen_bool(0.01));
            for (c, &l) in din.iter().enumerate() {
                if d >> c & 1 == 1 {
                    done.send(l, t, 1 << c);
                }
            }
            // What arrives at this edge (the RTL gets the OR; the CL reads its links).
            for &l in &din {
                if done.arrives(l, t) {
                    inp.done |= done.recv(l, t).unwrap();
                }
            }
        }
        // QoS host writes outside TBUF.
        if sc.tb.theta_min > 0 && cl.state != MatchState::TokenBuf && rng.gen_bool(0.05) {
            let slot = rng.gen_range(0..sc.tb.slots);
            if rng.gen_bool(0.8) {
                cl.forward_pass_done(sched::ReqId(slot)).unwrap();
                inp.host_op = 2;
            } else {
                cl.admit(sched::ReqId(slot)).unwrap();
                inp.host_op = 3;
            }
            inp.host_slot = slot as u8;
        }
        // New layers.
        if cl.can_begin_layer() {
            if gap == 0 {
                gap = rng.gen_range(1..20);
            }
            gap -= 1;
            if gap == 0 {
                if sc.tb.theta_min > 0 && rng.gen_bool(0.7) {
                    let reqs = random_reqs(&mut rng, n, sc.experts, sc.tb.slots);
                    cl.begin_layer_requests(t, &reqs).unwrap();
                    rtl.begin_layer_requests(&reqs, true);
                } else {
                    let eit = random_eit(&mut rng, n, sc.experts);
                    cl.begin_layer(t, &eit).unwrap();
                    rtl.begin_layer(&eit);
                }
            }
        }
        unsafe { cl.eval(t, &msgs, &done) };
        let o = *rtl.edge(inp);
        let mut want = Vec::new();
        cl.sample(&mut want);
        let got = o.traced();
        edge_trace.push(format!("{t}: {cl}"));
        if edge_trace.len() > 12 {
            edge_trace.remove(0);
        }
        waves.push(want[..PORTS.len()].to_vec(), got[..PORTS.len()].to_vec());
        for (k, port) in PORTS.iter().enumerate() {
            if got[k] != want[k] {
                panic!(
                    "{sc:?} seed {seed}: edge {t} port {port}: RTL {:#x} CL {:#x}\n{}\nlast CL edges:\n{}",
                    got[k],
                    want[k],
                    waves.dump(&format!("iodie_seed{seed}")),
                    edge_trace.join("\n")
                );
            }
        }
        assert_eq!(rtl.stats, cl.stats, "{sc:?} seed {seed}: edge {t}: performance counters (RTL left, CL right)");
        if sc.tb.theta_min > 0 {
            for s in 0..sc.tb.slots {
                assert_eq!(Some(rtl.uut.qos_slot(s as usize)), cl.qos(sched::ReqId(s)), "{sc:?} seed {seed}: edge {t}: QoS slot {s}");
            }
            if cl.state != MatchState::TokenBuf && cl.state != MatchState::WriteEit {
                assert_eq!(rtl.deferred(), cl.deferred(), "{sc:?} seed {seed}: edge {t}: deferred requests");
            }
        }
    }
    assert!(cl.stats.decisions > 0, "{sc:?}: the run granted nothing");
}

fn sc(rows: usize, cols: usize, experts: usize, policy: OrderPolicy) -> Scenario {
    Scenario { rows, cols, experts, policy, tb: TokenBufferCfgFl::default(), fifo: 32, l_in: 2, l_out: 2 }
}

#[test]
fn iodie_lockstep_paired_2x2() {
    lockstep(&sc(2, 2, 16, OrderPolicy::Paired), 12_000, 1);
}

#[test]
fn iodie_lockstep_policies() {
    lockstep(&sc(2, 2, 8, OrderPolicy::HotFirst), 4_000, 2);
    lockstep(&sc(1, 3, 5, OrderPolicy::ById), 4_000, 3);
    lockstep(&sc(3, 3, 1, OrderPolicy::Paired), 2_000, 4);
}

#[test]
fn iodie_lockstep_4x4_128_experts() {
    lockstep(&sc(4, 4, 128, OrderPolicy::Paired), 10_000, 5);
}

#[test]
fn iodie_lockstep_token_buffering_small_fifo() {
    let tb = TokenBufferCfgFl { theta_min: 3, n_threshold: 2, t_qos_init: 1, slots: 4 };
    let s = Scenario { tb, fifo: 2, l_in: 1, l_out: 3, ..sc(2, 3, 12, OrderPolicy::Paired) };
    lockstep(&s, 10_000, 6);
    let s1 = Scenario { tb: TokenBufferCfgFl { slots: 8, ..TokenBufferCfgFl::default() }, fifo: 1, ..sc(2, 2, 6, OrderPolicy::ById) };
    lockstep(&s1, 4_000, 7);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(6))]
    #[test]
    fn iodie_lockstep_random(rows in 1usize..5, cols in 1usize..5, experts in 1usize..40, policy in 0u8..3, tb in any::<bool>(), seed in any::<u64>()) {
        prop_assume!(rows * cols <= 16);
        let policy = [OrderPolicy::Paired, OrderPolicy::HotFirst, OrderPolicy::ById][policy as usize];
        let mut s = sc(rows, cols, experts, policy);
        if tb {
            s.tb = TokenBufferCfgFl { theta_min: 4, n_threshold: 1, t_qos_init: 2, slots: 4 };
            s.fifo = 2;
        }
        lockstep(&s, 3_000, seed);
    }
}

/// Decision latency measured on the RTL block (docs/rtl.md "Decision latency"): a layer with
/// every expert active, each on one chiplet, chiplets busy 40 cycles per grant. Every row of
/// the docs' table is asserted; the parts that can be worked by hand are asserted against the
/// hand formula rather than against the table:
/// * first grant = E EIT writes + S bitonic stages (S = log₂E·(log₂E+1)/2) + 1 order cycle +
///   E preloads + 1 scan cycle = 2E + S + 2, for any chiplet count;
/// * 16 experts on 16 chiplets: each expert owns a chiplet, so all are granted from the
///   layer start (no release-enabled decision: release_max 0), one grant every 2 cycles
///   (scan, grant): mean decision = first + (0 + 2 + … + 30)/16 = first + 15;
/// * a release-enabled grant takes at least 2 cycles (pop + grant, docs) and at most one
///   cycle per order-list entry beyond that, plus the queueing of done pulses behind earlier
///   ones (each release is applied one at a time).
#[test]
fn iodie_decision_latency_table() {
    // (chiplets, experts) → (first_grant, release_max, mean decision × 10): docs/rtl.md.
    let docs: [(usize, usize, u64, u64, u64); 12] = [
        (4, 16, 44, 4, 143),
        (4, 32, 81, 9, 154),
        (4, 64, 151, 11, 135),
        (4, 128, 286, 21, 147),
        (9, 16, 44, 3, 314),
        (9, 32, 81, 31, 339),
        (9, 64, 151, 41, 382),
        (9, 128, 286, 96, 597),
        (16, 16, 44, 0, 590),
        (16, 32, 81, 14, 553),
        (16, 64, 151, 100, 876),
        (16, 128, 286, 97, 926),
    ];
    let mut rows_seen = 0;
    println!("experts chiplets first_grant release_max decision_mean");
    for &(rows, cols) in &[(2usize, 2usize), (3, 3), (4, 4)] {
        for &e in &[16usize, 32, 64, 128] {
            let n = rows * cols;
            let p = IoDieRtlParams { rows, cols, experts: e, policy: POLICY_PAIRED, theta_min: 0, n_threshold: 1, t_qos_init: 0, stale_window: 4 };
            let mut d = IoDieDriver::new(build_block(&p, 64, 32).unwrap(), n, e);
            let eit: Vec<EitEntryFl> = (0..e).map(|x| EitEntryFl { mask: 1 << (x % n), count: 1 + (x as u32 * 7919) % 97 }).collect();
            d.begin_layer(&eit);
            let mut chips = BusyChiplets::new(n);
            let mut t = 0u32;
            while d.stats.decisions < e as u64 {
                let o = *d.out();
                if o.grant_valid {
                    chips.grant(o.grant_mask, || t as u64 + 40);
                }
                let i = IoDieIn { stamp: t, done: chips.done(t as u64, || false), ..IoDieIn::default() };
                d.edge(i);
                t += 1;
                assert!(t < 1_000_000, "layer did not finish");
            }
            let s = d.stats;
            let mean = s.decision_cycles_sum as f64 / s.decisions as f64;
            println!("{e:>7} {n:>8} {:>11} {:>11} {:>13.1}", s.first_grant_cycles_max, s.release_decision_cycles_max, mean);
            assert_eq!(s.decisions, e as u64, "every expert granted once");
            let lg = e.trailing_zeros() as u64;
            let hand_first = 2 * e as u64 + lg * (lg + 1) / 2 + 2;
            assert_eq!(s.first_grant_cycles_max, hand_first, "E={e} N={n}: first grant");
            if n == 16 && e == 16 {
                assert_eq!(s.release_decision_cycles_max, 0, "all granted at the start");
                assert_eq!(s.decision_cycles_sum, 16 * hand_first + 2 * (0..16).sum::<u64>());
            } else {
                assert!(s.release_decision_cycles_max >= 2, "E={e} N={n}: a release-enabled grant takes pop + grant");
            }
            let row = docs.iter().find(|r| r.0 == n && r.1 == e).unwrap();
            let got = (s.first_grant_cycles_max, s.release_decision_cycles_max, (mean * 10.0).round() as u64);
            assert_eq!(got, (row.2, row.3, row.4), "E={e} N={n}: docs/rtl.md's row");
            rows_seen += 1;
        }
    }
    assert_eq!(rows_seen, docs.len());
}

/// The mismatch waveforms: both sides written, and `wave diff` finds the differing port.
#[test]
fn lockstep_mismatch_writes_both_vcds() {
    let mut w = common::LockstepTrace::new(&[("state", 4u32), ("grant_valid", 1)]);
    w.push(vec![1, 0], vec![1, 0]);
    w.push(vec![2, 1], vec![2, 0]);
    let msg = w.dump("self_check");
    let paths: Vec<&str> = msg.trim_start_matches("waveforms: ").split(' ').collect();
    assert_eq!(paths.len(), 2, "{msg}");
    match waves::diff(std::path::Path::new(paths[0]), std::path::Path::new(paths[1])).unwrap() {
        waves::DiffResult::Differ(d) => {
            assert_eq!(d.signal, "lockstep.grant_valid");
            assert_eq!(d.time, 1000);
        }
        other => panic!("the two sides should differ: {other}"),
    }
}
