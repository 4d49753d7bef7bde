//! Randomised invariants of the mesh NoC: credit conservation on every channel at every
//! chunk boundary, no deadlock under XY routing (every generated flit is retired after the
//! sources stop), and no loss / duplication of flits (every packet's flits 0..size arrive
//! exactly once). Buffer overflow and per-VC out-of-order delivery are asserted inside the
//! router / terminal, so a panic there fails the property.

use std::collections::{HashMap, HashSet};

use hw::noc::flit::PID_SRC_SHIFT;
use hw::noc::mesh::Mesh;
use hw::noc::terminal::NiCtx;
use hw::noc::{NocCfg, TrafficPattern};
use proptest::prelude::*;

/// Cycles with the sources on.
const INJECT_CYCLES: u64 = 1500;
/// Bound on the drain after the sources stop (XY routing on a mesh cannot deadlock).
const DRAIN_BOUND: u64 = 20_000;

#[derive(Debug, Clone)]
struct Params {
    k: u32,
    vcs: u32,
    vc_buf: u32,
    packet_size: u32,
    rate: f64,
    pattern: TrafficPattern,
    routing_delay: u32,
    va_delay: u32,
    sa_delay: u32,
    st_delay: u32,
    credit_delay: u32,
    link_latency: u32,
    /// Serialization cycles per flit on mesh links (flit_bytes / link_width_bytes).
    ser: u32,
    threads: u32,
    fast_forward: bool,
    seed: u64,
    /// Chunk lengths (cycles) cycled through between credit checks.
    chunks: Vec<u64>,
}

fn pattern_strategy() -> impl Strategy<Value = (u8, u32, f64)> {
    // (pattern kind, hotspot node (taken modulo k*k), hotspot fraction)
    (0u8..4, 0u32..25, 0.1f64..0.9)
}

fn params() -> impl Strategy<Value = Params> {
    (
        (2u32..=5, 1u32..=3, 1u32..=4, 1u32..=4, 0.02f64..0.6, pattern_strategy()),
        (0u32..=2, 1u32..=2, 1u32..=2, 1u32..=2, 0u32..=2, 1u32..=3),
        (1u32..=2, any::<bool>(), any::<u64>(), prop::collection::vec(1u64..=7, 1..6), 1u32..=3),
    )
        .prop_map(|((k, vcs, vc_buf, packet_size, rate, (pk, hn, hf)), (rd, va, sa, st, cd, ll), (threads, ff, seed, chunks, ser))| {
            let pattern = match pk {
                0 => TrafficPattern::Uniform,
                1 => TrafficPattern::Transpose,
                2 => TrafficPattern::BitComplement,
                _ => TrafficPattern::Hotspot { nodes: vec![hn % (k * k)], fraction: hf },
            };
            Params {
                k,
                vcs,
                vc_buf,
                packet_size,
                rate,
                pattern,
                routing_delay: rd,
                va_delay: va,
                sa_delay: sa,
                st_delay: st,
                credit_delay: cd,
                link_latency: ll,
                ser,
                threads,
                fast_forward: ff,
                seed,
                chunks,
            }
        })
}

fn cfg_of(p: &Params) -> NocCfg {
    let mut c = NocCfg::default();
    c.mesh.k = p.k;
    c.mesh.link_latency = p.link_latency;
    c.mesh.flit_bytes = 16 * p.ser;
    c.mesh.link_width_bytes = 16;
    let r = &mut c.mesh.router;
    r.vcs = p.vcs;
    r.vc_buf = p.vc_buf;
    r.routing_delay = p.routing_delay;
    r.va_delay = p.va_delay;
    r.sa_delay = p.sa_delay;
    r.st_delay = p.st_delay;
    r.credit_delay = p.credit_delay;
    c.traffic.pattern = p.pattern.clone();
    c.traffic.rate = p.rate;
    c.traffic.packet_size = p.packet_size;
    c.traffic.seed = p.seed;
    c.measure.watchdog_cycles = 0;
    c.sim.threads = p.threads;
    c.sim.fast_forward = p.fast_forward;
    c
}

/// Runs with injection, checking credits after every chunk; then drains with injection off.
/// Returns the mesh after the drain and the number of cycles the drain took.
fn run_and_drain(cfg: &NocCfg, chunks: &[u64]) -> Result<(Mesh, u64), String> {
    let mut mesh = Mesh::new(cfg).map_err(|e| format!("config rejected: {e}"))?;
    let mut ctx = NiCtx { log_deliveries: true, ..NiCtx::running(cfg.traffic.pattern.clone()) };
    mesh.check_credits().map_err(|e| format!("cycle 0: {e}"))?;
    let mut i = 0;
    while mesh.now() < INJECT_CYCLES {
        let step = chunks[i % chunks.len()];
        i += 1;
        let end = (mesh.now() + step - 1).min(INJECT_CYCLES - 1);
        mesh.run(end, &ctx, false).map_err(|e| e.to_string())?;
        mesh.check_credits().map_err(|e| format!("after cycle {}: {e}", mesh.now()))?;
    }
    let injected = mesh.ni_totals();
    if injected.gen_flits == 0 && cfg.traffic.rate >= 0.02 && cfg.mesh.k >= 2 {
        return Err("no traffic generated in the injection phase".into());
    }
    ctx.inject = false;
    let drain_start = mesh.now();
    loop {
        let s = mesh.ni_totals();
        if s.gen_flits == s.ret_flits {
            break;
        }
        if mesh.now() - drain_start > DRAIN_BOUND {
            return Err(format!(
                "not drained after {DRAIN_BOUND} cycles without injection: {} generated, {} retired (deadlock?)",
                s.gen_flits, s.ret_flits
            ));
        }
        let end = mesh.now() + 4;
        mesh.run(end, &ctx, false).map_err(|e| e.to_string())?;
        mesh.check_credits().map_err(|e| format!("drain, after cycle {}: {e}", mesh.now()))?;
    }
    let drained_in = mesh.now() - drain_start;
    // Once drained the network stays empty: nothing is generated or moved any more.
    let before = mesh.ni_totals();
    let end = mesh.now() + 50;
    mesh.run(end, &ctx, false).map_err(|e| e.to_string())?;
    mesh.check_credits().map_err(|e| e.to_string())?;
    let after = mesh.ni_totals();
    if after.gen_flits != before.gen_flits || after.ret_flits != before.ret_flits {
        return Err("flits generated or retired after injection stopped and the mesh drained".into());
    }
    if mesh.tiles().any(|t| t.router.occupancy() != 0) {
        return Err("router buffers not empty after the drain".into());
    }
    Ok((mesh, drained_in))
}

/// Every delivered (pid, seq) is unique, the count equals the generated flits, and every
/// packet's flit indices are exactly 0..packet_size. Also: every packet's source is a node.
fn check_deliveries(mesh: &Mesh, packet_size: u32) -> Result<(), String> {
    let s = mesh.ni_totals();
    let n = mesh.cfg.mesh.nodes() as u64;
    let mut seen: HashSet<(u64, u16)> = HashSet::new();
    let mut per_pkt: HashMap<u64, Vec<u16>> = HashMap::new();
    let mut total = 0u64;
    for t in mesh.tiles() {
        for &(pid, seq) in &t.ni.deliveries {
            total += 1;
            if !seen.insert((pid, seq)) {
                return Err(format!("flit {pid:#x}.{seq} delivered twice (second time at node {})", t.ni.id));
            }
            if pid >> PID_SRC_SHIFT >= n {
                return Err(format!("flit {pid:#x}.{seq}: source node out of range"));
            }
            per_pkt.entry(pid).or_default().push(seq);
        }
    }
    if total != s.gen_flits {
        return Err(format!("{total} flits delivered, {} generated", s.gen_flits));
    }
    if total != s.ret_flits {
        return Err(format!("{total} deliveries logged, ret_flits {}", s.ret_flits));
    }
    let expect: Vec<u16> = (0..packet_size as u16).collect();
    for (pid, mut seqs) in per_pkt {
        seqs.sort_unstable();
        if seqs != expect {
            return Err(format!("packet {pid:#x}: flits {seqs:?} delivered, expected {expect:?}"));
        }
    }
    // Per source, packet sequence numbers are dense 0..m (no packet lost as a whole).
    let mut per_src: HashMap<u64, Vec<u64>> = HashMap::new();
    for &(pid, _) in &seen {
        per_src.entry(pid >> PID_SRC_SHIFT).or_default().push(pid & ((1u64 << PID_SRC_SHIFT) - 1));
    }
    for (src, mut seqs) in per_src {
        seqs.sort_unstable();
        seqs.dedup();
        if seqs.iter().enumerate().any(|(i, &s)| i as u64 != s) {
            return Err(format!("source {src}: packet sequence numbers not dense: {:?}", &seqs[..seqs.len().min(20)]));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, max_shrink_iters: 64, ..ProptestConfig::default() })]

    #[test]
    fn credits_conserved_no_deadlock_no_loss(p in params()) {
        let cfg = cfg_of(&p);
        let (mesh, drained_in) = match run_and_drain(&cfg, &p.chunks) {
            Ok(x) => x,
            Err(e) => return Err(TestCaseError::fail(format!("{e}\nparams: {p:?}"))),
        };
        prop_assert!(drained_in <= DRAIN_BOUND);
        if let Err(e) = check_deliveries(&mesh, p.packet_size) {
            return Err(TestCaseError::fail(format!("{e}\nparams: {p:?}")));
        }
    }
}

fn base(k: u32) -> NocCfg {
    let mut c = NocCfg::default();
    c.mesh.k = k;
    c.measure.watchdog_cycles = 0;
    c
}

/// Multi-flit packets over several hops, with VC buffers shorter than a packet: the terminal
/// asserts per-VC order (a panic fails this test); here we also check the logged order of
/// each packet's flits at its destination.
#[test]
fn multi_flit_packets_arrive_in_order() {
    for (vcs, vc_buf, threads) in [(1, 2, 1), (2, 3, 2), (3, 1, 1)] {
        let mut c = base(4);
        c.mesh.router.vcs = vcs;
        c.mesh.router.vc_buf = vc_buf;
        c.traffic.packet_size = 4;
        c.traffic.rate = 0.3;
        c.traffic.seed = 11;
        c.sim.threads = threads;
        let (mesh, _) = run_and_drain(&c, &[3]).unwrap();
        let mut pkts = 0;
        for t in mesh.tiles() {
            // Flits of one packet all use one VC at the ejection port, and the sink asserts
            // in-order per VC, so in the delivery log each packet's flits appear in order
            // 0,1,2,3 (possibly interleaved with other VCs' packets).
            let mut next: HashMap<u64, u16> = HashMap::new();
            for &(pid, seq) in &t.ni.deliveries {
                let e = next.entry(pid).or_insert(0);
                assert_eq!(seq, *e, "node {}: packet {pid:#x} flit {seq} arrived, expected flit {e}", t.ni.id);
                *e += 1;
                if *e == 4 {
                    pkts += 1;
                }
            }
            assert!(next.values().all(|&n| n == 4), "node {}: incomplete packet", t.ni.id);
        }
        assert!(pkts > 100, "only {pkts} packets delivered");
        check_deliveries(&mesh, 4).unwrap();
    }
}

/// With a single VC, two packets can never interleave on the ejection channel: the delivery
/// log of every node is a sequence of whole packets.
#[test]
fn single_vc_packets_are_contiguous() {
    let mut c = base(3);
    c.mesh.router.vcs = 1;
    c.mesh.router.vc_buf = 2;
    c.traffic.packet_size = 3;
    c.traffic.rate = 0.4;
    c.traffic.seed = 5;
    let (mesh, _) = run_and_drain(&c, &[5]).unwrap();
    let mut n = 0;
    for t in mesh.tiles() {
        for chunk in t.ni.deliveries.chunks(3) {
            let pid = chunk[0].0;
            let got: Vec<(u64, u16)> = chunk.to_vec();
            assert_eq!(got, vec![(pid, 0), (pid, 1), (pid, 2)], "node {}", t.ni.id);
            n += 1;
        }
        assert_eq!(t.ni.deliveries.len() % 3, 0);
    }
    assert!(n > 100, "only {n} packets");
}

/// The checks above are not vacuous: a heavily loaded mesh must actually fill buffers
/// (credits hit zero somewhere) while conservation holds.
#[test]
fn credit_check_exercises_full_buffers() {
    let mut c = base(4);
    c.mesh.router.vc_buf = 2;
    c.traffic.rate = 0.6;
    c.traffic.packet_size = 2;
    c.traffic.pattern = TrafficPattern::Hotspot { nodes: vec![5], fraction: 0.5 };
    let mut mesh = Mesh::new(&c).unwrap();
    let ctx = NiCtx::running(c.traffic.pattern.clone());
    let mut saw_zero = false;
    while mesh.now() < 1000 {
        let end = mesh.now() + 2;
        mesh.run(end, &ctx, false).unwrap();
        mesh.check_credits().unwrap();
        saw_zero |= mesh.tiles().any(|t| (0..4).any(|p| !t.router.ports.out_flit[p].is_none() && t.router.credits(p, 0) == 0));
    }
    assert!(saw_zero, "no output VC ever ran out of credits at 0.6 hotspot load");
    assert!(mesh.router_totals().sa_credit_stalls > 0 || mesh.router_totals().va_stalls > 0);
}
