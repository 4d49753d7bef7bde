//! Unit testbench of the DDR3 channel: isolated read latency (row miss, row hit, bank
//! conflict), streaming bandwidth, refresh overhead, in-order responses, and results that do
//! not depend on which idle edges the engine skips.

use hw::harness::{ClockDomain, ClockSet, Cycle, LinkArena, Probe, NEVER};
use hw::pkg::ddr::{DdrCfg, DdrChannelCl, DdrPorts, DdrReq, DdrResp, DdrStats};
use proptest::prelude::*;

/// Sends each request (DDR cycle, addr, bytes) at its cycle, keeping at most `queue_depth`
/// outstanding (later ones wait, as the chiplet's credit makes them); returns each
/// response's DDR cycle (in id order) and the stats.
fn drive(cfg: &DdrCfg, reqs: &[(u64, u64, u32)], every_edge: bool) -> (Vec<u64>, DdrStats) {
    drive_with(cfg, reqs, every_edge, false)
}

/// [`drive`], with the command bus run ahead between arrivals and departures or not.
fn drive_with(cfg: &DdrCfg, reqs: &[(u64, u64, u32)], every_edge: bool, run_ahead: bool) -> (Vec<u64>, DdrStats) {
    let (done, stats, _) = drive_traced(cfg, reqs, every_edge, run_ahead, false);
    (done, stats)
}

/// The change of a traced value: (DDR cycle, signal of the probe, value).
type Change = (u64, u32, u64);

/// [`drive_with`], traced or not: traced, the probe's values are sampled after each
/// evaluation, and the channel is also evaluated at the edges where only a traced register
/// changes (`traced_next_event`: `settle`); the bus run ahead tapes its traced registers,
/// whose changes are taken at each edge visited before anything else (as the package
/// does). Returns the changes too, in (cycle, signal) order.
fn drive_traced(cfg: &DdrCfg, reqs: &[(u64, u64, u32)], every_edge: bool, run_ahead: bool, traced: bool) -> (Vec<u64>, DdrStats, Vec<Change>) {
    let clocks = ClockSet::new(vec![ClockDomain::new("ddr", 1250)]).unwrap();
    let clk = clocks.clock(0);
    let mut rq = LinkArena::<DdrReq>::new();
    let mut rs = LinkArena::<DdrResp>::new();
    let req_l = rq.add(1);
    let resp_l = rs.add_cdc(1, clk.div as u32);
    let mut d = DdrChannelCl::new(0, cfg, clk, clk, DdrPorts { req_in: req_l, resp_out: resp_l });
    d.taping = traced && run_ahead;
    let (mut prev, mut cur, mut changes) = (vec![0u64; 5], Vec::new(), Vec::new());
    let mut done = vec![NEVER; reqs.len()];
    let (mut next, mut outstanding, mut got) = (0usize, 0u32, 0usize);
    let mut t: Cycle = 0;
    let mut land = NEVER;
    while got < reqs.len() {
        // SAFETY: single-threaded testbench.
        unsafe {
            if let Some(r) = rs.recv(resp_l, t) {
                done[r.id as usize] = clk.cycle_of(t);
                outstanding -= 1;
                got += 1;
            }
            let c = clk.cycle_of(t);
            d.take_tape(t + 1, |at, k, v| {
                if prev[k as usize] != v {
                    prev[k as usize] = v;
                    changes.push((clk.cycle_of(at), k, v));
                }
            });
            let visit = every_edge || d.busy() || d.next_event() <= t || land == t;
            let settle = !visit && traced && d.traced_next_event() <= t;
            if visit {
                d.eval(t, &rq, &rs, run_ahead);
            } else if settle {
                d.settle(t);
            }
            if traced && (visit || settle) {
                cur.clear();
                d.sample(&mut cur);
                for (k, (p, &v)) in prev.iter_mut().zip(&cur).enumerate() {
                    if *p != v {
                        *p = v;
                        changes.push((c, k as u32, v));
                    }
                }
            }
            if next < reqs.len() && clk.cycle_of(t) >= reqs[next].0 && outstanding < cfg.queue_depth {
                let (_, addr, bytes) = reqs[next];
                rq.send(req_l, t, DdrReq { id: next as u32, addr, bytes });
                land = t + 1;
                next += 1;
                outstanding += 1;
            }
        }
        t += 1;
        assert!(t < 100_000_000, "runaway");
    }
    d.take_tape(t, |at, k, v| {
        if prev[k as usize] != v {
            prev[k as usize] = v;
            changes.push((clk.cycle_of(at), k, v));
        }
    });
    changes.sort();
    (done, *d.stats(), changes)
}

/// The requests in arrival order.
fn sorted(mut reqs: Vec<(u64, u64, u32)>) -> Vec<(u64, u64, u32)> {
    reqs.sort_by_key(|r| r.0);
    reqs
}

/// The channel run-ahead proptests drive: look-ahead, queue depth, refresh every 700 cycles
/// or none, tRC.
fn ahead_cfg(lookahead: u32, depth: u32, refresh: bool, t_rc: u32) -> DdrCfg {
    DdrCfg { lookahead, queue_depth: depth, t_rc, t_refi: if refresh { 700 } else { 0 }, ..Default::default() }
}

fn no_refresh() -> DdrCfg {
    DdrCfg { t_refi: 0, ..Default::default() }
}

#[test]
fn isolated_reads_row_miss_row_hit_and_bank_conflict() {
    let c = no_refresh();
    let burst = c.burst_cycles();
    // One 128-byte burst from idle: ACT at arrival cycle 11, RD tRCD later, data tCL later.
    let (d, s) = drive(&c, &[(10, 0, 128)], true);
    let miss = d[0] - 10;
    assert_eq!(miss, 1 + (c.t_rcd + c.t_cl) as u64 + burst + 1, "row miss latency");
    assert_eq!((s.activates, s.row_hits), (1, 0));
    // Same row later: no ACT.
    let (d, s) = drive(&c, &[(10, 0, 128), (200, 128, 128)], true);
    assert_eq!(d[1] - 200, 1 + c.t_cl as u64 + burst + 1, "row hit latency");
    assert_eq!((s.activates, s.row_hits), (1, 1));
    // Same bank, other row: PRE (after tRAS) + ACT.
    let other_row = c.page_bytes as u64 * c.banks as u64;
    let (d, s) = drive(&c, &[(10, 0, 128), (200, other_row, 128)], true);
    assert_eq!(d[1] - 200, 1 + (c.t_rp + c.t_rcd + c.t_cl) as u64 + burst + 1, "bank conflict latency");
    assert_eq!((s.activates, s.precharges), (2, 1));
}

#[test]
fn streaming_reaches_the_peak_rate() {
    let c = no_refresh();
    // 64 requests of 64 KiB back to back (the chiplet streams micro-slices).
    let reqs: Vec<(u64, u64, u32)> = (0..64).map(|i| (0, i * 65536, 65536)).collect();
    let (d, s) = drive(&c, &reqs, false);
    let bytes = 64.0 * 65536.0;
    let cycles = *d.iter().max().unwrap() as f64;
    let rate = bytes / cycles; // bytes per DDR cycle; peak 2 x 16
    eprintln!("stream at {:.2} % of peak", 100.0 * rate / 32.0);
    assert!(rate / 32.0 > 0.95, "stream at {:.1} % of peak", 100.0 * rate / 32.0);
    assert!(d.windows(2).all(|w| w[0] < w[1]), "in order");
    assert_eq!(s.reads, bytes as u64 / 128);
}

#[test]
fn refresh_takes_its_share() {
    let c = DdrCfg::default();
    let reqs: Vec<(u64, u64, u32)> = (0..256).map(|i| (0, i * 65536, 65536)).collect();
    let (d, s) = drive(&c, &reqs, false);
    let (d0, _) = drive(&no_refresh(), &reqs, false);
    let (t, t0) = (*d.iter().max().unwrap() as f64, *d0.iter().max().unwrap() as f64);
    let share = c.t_rfc as f64 / c.t_refi as f64;
    assert!(s.refreshes as f64 >= t / c.t_refi as f64 - 1.0, "{} refreshes in {t} cycles", s.refreshes);
    let cost = t / t0 - 1.0;
    eprintln!("refresh: {} refreshes, cost {:.2} % vs tRFC/tREFI {:.2} %", s.refreshes, 100.0 * cost, 100.0 * share);
    assert!(cost > share * 0.8 && cost < share * 2.0, "refresh cost {:.2} % vs tRFC/tREFI {:.2} %", 100.0 * cost, 100.0 * share);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Random request streams: every request answered once, in order; evaluating only the
    /// edges the channel asks for gives the same cycles and counters as every edge.
    #[test]
    fn skipping_idle_edges_changes_nothing(
        reqs in prop::collection::vec((0u64..3000, 0u64..(1 << 24), 1u32..20000), 1..24),
        refresh in any::<bool>(),
    ) {
        let mut reqs = reqs;
        reqs.sort_by_key(|r| r.0);
        let c = if refresh { DdrCfg { t_refi: 700, ..Default::default() } } else { no_refresh() };
        let every = drive(&c, &reqs, true);
        prop_assert!(every.0.windows(2).all(|w| w[0] < w[1]));
        prop_assert_eq!(every.1.requests, reqs.len() as u64);
        let skipping = drive(&c, &reqs, false);
        prop_assert_eq!(&every, &skipping);
        // Run ahead, the channel is evaluated at arrivals, departures and the edges it asks
        // for once the queue is short: the same cycles and counters.
        let ahead = drive_with(&c, &reqs, false, true);
        prop_assert_eq!(&every, &ahead);
    }

    /// Run ahead with a short look-ahead and small queue depths, requests landing while the
    /// bus runs ahead through long streams (the stop at fewer than `lookahead` bursts is what
    /// keeps a landing request from changing a command already issued): the same as every edge.
    #[test]
    fn running_ahead_changes_nothing(
        reqs in prop::collection::vec((0u64..6000, 0u64..(1 << 22), 1u32..40000), 1..20),
        lookahead in 1u32..12,
        depth in 1u32..5,
        refresh in any::<bool>(),
    ) {
        let (reqs, c) = (sorted(reqs), ahead_cfg(lookahead, depth, refresh, 39));
        let every = drive_with(&c, &reqs, true, false);
        let ahead = drive_with(&c, &reqs, false, true);
        prop_assert_eq!(every, ahead);
    }

    /// Traced: the bus run ahead keeps `cmd`, `open_banks` and `refreshing` on its tape, and
    /// the channel visited at the edges it asks for shows them as of that edge — the same
    /// waveform (every change, at its cycle) as sampling after an evaluation at every edge,
    /// with requests landing while the bus runs ahead, refreshes, short look-aheads and a
    /// long tRC.
    #[test]
    fn taped_registers_give_the_waveform_of_every_edge(
        reqs in prop::collection::vec((0u64..6000, 0u64..(1 << 22), 1u32..40000), 1..16),
        lookahead in 1u32..12,
        depth in 1u32..5,
        refresh in any::<bool>(),
        slow_rc in any::<bool>(),
    ) {
        // A long tRC: after a refresh the next ACT can come later than its end (the
        // `refreshing` register then falls at an edge without a command).
        let (reqs, c) = (sorted(reqs), ahead_cfg(lookahead, depth, refresh, if slow_rc { 400 } else { 39 }));
        let every = drive_traced(&c, &reqs, true, false, true);
        let taped = drive_traced(&c, &reqs, false, true, true);
        prop_assert!(every.2.len() > 2 * reqs.len());
        prop_assert_eq!(&every.0, &taped.0);
        prop_assert_eq!(&every.1, &taped.1);
        if let Some(i) = (0..every.2.len()).find(|&i| every.2.get(i) != taped.2.get(i)) {
            prop_assert!(false, "first difference at change {i}: every edge {:?}, taped {:?}", every.2.get(i), taped.2.get(i));
        }
        prop_assert_eq!(every.2.len(), taped.2.len());
    }
}
