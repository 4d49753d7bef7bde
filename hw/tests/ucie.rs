//! Unit testbench of the UCIe D2D adapter: wire rate and FDI latency, CRC + go-back-N replay
//! under a seeded bit-error rate (every flit once, in order), determinism, and results that
//! do not depend on whether idle edges are evaluated, nor on whether the edge between two core
//! edges is run ahead at the first.

use hw::harness::{ClockDomain, ClockSet, Cycle, LinkArena, NEVER};
use hw::noc::flit::Flit;
use hw::pkg::ni::PayloadPools;
use hw::pkg::ucie::{UcieAdapterCl, UcieCfg, UciePorts, UcieStats};
use proptest::prelude::*;

/// Which UCIe edges the testbench evaluates.
#[derive(Clone, Copy, PartialEq)]
enum Edges {
    /// Every edge.
    Every,
    /// Only where the adapter asks (busy / next_event) or a flit lands.
    Asked,
    /// As `Asked`, and the edge between two core edges run at the first, after the router's
    /// send (`eval_ahead`, as the package does untraced; error-free wire).
    Ahead,
}

/// Drives `n` flits into one adapter (one per core cycle while `gap` allows; they land a
/// core cycle after they are sent, on a core edge, as the router's do) and returns each
/// delivered flit's (tick, data) and the stats.
fn drive(cfg: &UcieCfg, seed: u64, n: u32, gap: u64, edges: Edges) -> (Vec<(Cycle, u32)>, UcieStats) {
    let clocks = ClockSet::new(vec![ClockDomain::new("core", 1250), ClockDomain::new("ucie", 625)]).unwrap();
    let (core, ucie) = (clocks.clock(0), clocks.clock(1));
    let mut flits = LinkArena::<Flit>::new();
    let inp = flits.add(core.div as u32);
    let out = flits.add_cdc(1, core.div as u32);
    let pools = PayloadPools::new(0, 0, 256);
    let mut a = UcieAdapterCl::new(0, cfg, seed, ucie, core, UciePorts { in_flit: inp, out_flit: out }, clocks.tick_ps());
    let mut got = Vec::new();
    let mut sent = 0u32;
    let mut next_send: Cycle = 0;
    let mut t: Cycle = 0;
    let mut land: Cycle = NEVER;
    let mut last_eval: Cycle = 0;
    // Edges up to this tick were evaluated ahead.
    let mut ahead_to: Cycle = 0;
    let limit = 5_000_000;
    while (got.len() as u32) < n && t < limit {
        // SAFETY: single-threaded testbench, one sender and receiver per link.
        unsafe {
            if let Some(f) = flits.recv(out, t) {
                got.push((t, f.data));
            }
            let ask = edges == Edges::Every || a.busy() || a.next_event() <= t || land == t;
            if ucie.is_edge(t) && ask && t > ahead_to {
                a.eval(t, &flits, &pools, edges == Edges::Ahead);
                last_eval = t;
            }
            if core.is_edge(t) && sent < n && t >= next_send {
                flits.send(inp, t, Flit { data: sent, head: true, tail: true, ..Default::default() });
                sent += 1;
                land = t + core.div;
                next_send = t + gap.max(1) * core.div;
            }
            if edges == Edges::Ahead && core.is_edge(t) {
                let at = t + ucie.div;
                if a.due_ahead(at) {
                    a.eval_ahead(t, at, &flits, &pools);
                    last_eval = at;
                }
                ahead_to = at;
            }
        }
        // Next tick: every tick while flits are offered or the adapter works; else jump.
        let mut nt = t + 1;
        // (no jump within a few ticks of an evaluation: a flit for the router may still land)
        if edges != Edges::Every && !a.busy() && sent >= n && t >= last_eval + 4 {
            let ne = a.next_event();
            if ne != NEVER && ne > nt {
                nt = if land > t { ne.min(land) } else { ne };
            }
        }
        t = nt;
    }
    (got, *a.stats())
}

#[test]
fn zero_ber_streams_at_the_wire_rate_after_the_fdi_latency() {
    let cfg = UcieCfg::default();
    // 64 lanes x 18 GT/s = 144 GB/s: a 256-byte flit takes 1.778 ns = 2.84 ticks of 625 ps;
    // offered one per core cycle (1250 ps) the wire is the bottleneck.
    let n = 2000;
    let (got, st) = drive(&cfg, 1, n, 1, Edges::Every);
    assert_eq!(got.len(), n as usize);
    assert!(got.iter().enumerate().all(|(i, &(_, d))| d == i as u32), "in order");
    assert_eq!(st.replays, 0);
    assert_eq!(st.crc_errors, 0);
    let first = got[0].0;
    let fdi = 4020u64.div_ceil(625);
    assert!(first >= fdi && first <= fdi + 10, "first flit at tick {first}, FDI {fdi} ticks");
    let span = (got[n as usize - 1].0 - first) as f64 * 625.0; // ps
    let rate = (n - 1) as f64 * 256.0 / span; // bytes per ps
    assert!((rate / 0.144 - 1.0).abs() < 0.01, "delivered {rate} B/ps vs 0.144");
}

#[test]
fn bit_errors_are_replayed_and_every_flit_arrives_once_in_order() {
    let cfg = UcieCfg { ber: 1e-4, ..Default::default() };
    let n = 3000;
    let (got, st) = drive(&cfg, 7, n, 1, Edges::Every);
    assert_eq!(got.len(), n as usize);
    assert!(got.iter().enumerate().all(|(i, &(_, d))| d == i as u32), "in order, once");
    // P(flit hit) = 1 - (1-1e-4)^2208 ≈ 0.198.
    let hit = st.crc_errors as f64 / (st.flits as f64 + st.retried_bytes as f64 / 256.0);
    assert!((0.15..0.25).contains(&hit), "{st:?}");
    assert!(st.replays > 0 && st.retried_bytes > 0);
    assert_eq!(st.undetected_errors, 0);
    assert_eq!(st.delivered, n as u64);
    let clean = drive(&UcieCfg::default(), 7, n, 1, Edges::Every).0;
    assert!(got.last().unwrap().0 > clean.last().unwrap().0, "replays cost time");
}

#[test]
fn same_seed_same_errors_other_seed_other_errors() {
    let cfg = UcieCfg { ber: 1e-4, ..Default::default() };
    let a = drive(&cfg, 3, 500, 1, Edges::Every);
    assert_eq!(a, drive(&cfg, 3, 500, 1, Edges::Every));
    assert_ne!(a.1, drive(&cfg, 4, 500, 1, Edges::Every).1);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Any BER, seed, load and retry-buffer size: no loss, no duplicate, no reorder; and the
    /// same answer when only the edges the adapter asks for are evaluated.
    #[test]
    fn no_loss_no_dup_no_reorder_and_skipping_idle_edges_changes_nothing(
        ber_exp in 0u32..4, seed in 0u64..1000, n in 1u32..400, gap in 1u64..6, retry in 1u32..40,
    ) {
        // Up to 1e-3 (a flit of 2208 bits gets through 11 % of the time).
        let ber = if ber_exp == 0 { 0.0 } else { 10f64.powi(-(6 - ber_exp as i32)) };
        let cfg = UcieCfg { ber, retry_buffer_flits: retry, ..Default::default() };
        let every = drive(&cfg, seed, n, gap, Edges::Every);
        prop_assert_eq!(every.0.len(), n as usize);
        prop_assert!(every.0.iter().enumerate().all(|(i, &(_, d))| d == i as u32));
        let skipping = drive(&cfg, seed, n, gap, Edges::Asked);
        prop_assert_eq!(every, skipping);
    }

    /// An error-free wire: running the edge between two core edges at the first
    /// (`eval_ahead`) delivers every flit at the tick and in the order evaluating each edge
    /// does, with the same counters.
    #[test]
    fn running_the_mid_edge_ahead_changes_nothing(seed in 0u64..1000, n in 1u32..400, gap in 1u64..6, retry in 1u32..40) {
        let cfg = UcieCfg { retry_buffer_flits: retry, ..Default::default() };
        let every = drive(&cfg, seed, n, gap, Edges::Every);
        prop_assert_eq!(every.0.len(), n as usize);
        prop_assert_eq!(every, drive(&cfg, seed, n, gap, Edges::Ahead));
    }
}
