//! `chiplet_ctrl` (RTL) against `ChipletCtrlCl` (CL) in lockstep. One chiplet of an
//! R×C package with small agents around it that answer legally, like the package does:
//! a scheduler (pre-loads, then grants one expert at a time), a DDR channel (random
//! readiness and latency, one landing per cycle), a PE array, a D2D engine (one send at a
//! time), the other chiplets' micro-slices arriving as D2D heads (only of granted experts
//! this chiplet is on, each micro-slice it does not load exactly once — sometimes as a
//! hand-off instead), Rule-5 assignments, and EP-style token arrivals. Every `CtrlOut`
//! field, the ring's live bits and pointer, `pending` and `quiescent` are compared every
//! cycle; the counters at the end. A mismatch panics with the cycle, the port and both
//! values.

mod common;

use std::collections::VecDeque;

use hw::pkg::chiplet::{ChipletCtrlCl, ChipletId, CtrlIn, CtrlKnobs, CtrlOut, CtrlSched, ExpertId, Trajectory};
use hw::pkg::package::PkgTraj;
use hw::pkg::ring::SlotTag;
use proptest::prelude::*;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rtl::pkg::chiplet_twin::ChipletCtrlTwin;

#[derive(Debug, Clone, Copy)]
struct Case {
    rows: usize,
    cols: usize,
    id: u8,
    slots: u32,
    experts: usize,
    knobs: CtrlKnobs,
    /// EP-style token gating of some experts.
    tokens: bool,
}

fn cmp<T: PartialEq + std::fmt::Debug>(cycle: u64, port: &str, cl: T, rtl: T) {
    assert!(cl == rtl, "cycle {cycle}: port {port}: CL {cl:?} RTL {rtl:?}");
}

fn compare(cycle: u64, a: &CtrlOut, b: &CtrlOut) {
    cmp(cycle, "ddr_req", a.ddr_req, b.ddr_req);
    cmp(cycle, "rx_slot", a.rx_slot, b.rx_slot);
    cmp(cycle, "pe_start", a.pe_start, b.pe_start);
    cmp(cycle, "tx_start", a.tx_start, b.tx_start);
    cmp(cycle, "done", a.done, b.done);
    cmp(cycle, "expert_done", a.expert_done, b.expert_done);
    cmp(cycle, "handoff", a.handoff, b.handoff);
    cmp(cycle, "free", a.free, b.free);
}

/// The compared outputs as waveform values: an `Option` is its payload packed below a valid
/// bit (bit 63), a slot tag as {expert, k, loader}.
const WAVE_PORTS: [(&str, u32); 8] =
    [("ddr_req", 64), ("rx_slot", 64), ("pe_start", 64), ("tx_start", 64), ("done", 1), ("expert_done", 64), ("handoff", 64), ("free", 64)];

fn encode(o: &CtrlOut) -> Vec<u64> {
    let tag = |t: SlotTag| (t.expert.0 as u64) << 24 | (t.k as u64) << 8 | t.loader.0 as u64;
    let v = |x: Option<u64>| x.map_or(0, |x| 1 << 63 | x);
    vec![
        v(o.ddr_req.map(|(s, t)| (s as u64) << 40 | tag(t))),
        v(o.rx_slot.map(u64::from)),
        v(o.pe_start.map(|(s, t)| (s as u64) << 40 | tag(t))),
        v(o.tx_start.map(|(s, d)| (s as u64) << 8 | d.0 as u64)),
        o.done as u64,
        v(o.expert_done.map(|e| e.0 as u64)),
        v(o.handoff.map(|(t, d)| tag(t) << 8 | d.0 as u64)),
        v(o.free.map(|f| (f.granted as u64) << 16 | f.preload as u64)),
    ]
}

/// Runs `cycles` cycles; returns the layers completed.
fn lockstep(c: &Case, cycles: u64, seed: u64) -> u32 {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let n = c.rows * c.cols;
    let traj = if c.knobs.helpers { PkgTraj::new(c.rows, c.cols).sharded() } else { PkgTraj::new(c.rows, c.cols) };
    let mut cl = ChipletCtrlCl::new(ChipletId(c.id), c.experts, c.slots, 0, c.knobs);
    let mut rtl = ChipletCtrlTwin::new(c.id, c.rows, c.cols, c.slots, c.experts, c.knobs).expect("a built size");
    let me = ChipletId(c.id);
    let on = |mask: u16| mask >> me.0 & 1 == 1;
    let mut waves = common::LockstepTrace::new(&WAVE_PORTS);

    // Per-layer plan.
    let mut m_of: Vec<u16> = vec![0; c.experts];
    let mut masks: Vec<u16> = vec![0; c.experts];
    let mut sched_q: VecDeque<(u64, CtrlSched)> = VecDeque::new();
    // Agents.
    let mut ddr: Vec<(u64, u32)> = Vec::new();
    let mut ddr_lat_hi = 12u64;
    let mut pe: Option<(u64, u32)> = None;
    let mut tx: Option<(u64, u32)> = None;
    let mut rx_landing: Vec<(u64, u32)> = Vec::new();
    let mut arrivals: Vec<(u64, SlotTag)> = Vec::new();
    let mut head: Option<SlotTag> = None;
    let mut handoffs: VecDeque<SlotTag> = VecDeque::new();
    let mut loads: VecDeque<(u64, SlotTag)> = VecDeque::new();
    // Rule-5 assignments handed over and not yet issued to DDR (the arbiter's view).
    let mut loads_out: Vec<SlotTag> = Vec::new();
    let mut tokens: Vec<(u64, u16, u32)> = Vec::new();
    let mut layer_open = false;
    let mut layers = 0u32;
    let mut idle_since = 0u64;

    for t in 0..cycles {
        // ---- layer start once everything drained
        if !layer_open && cl.quiescent() && ddr.is_empty() && pe.is_none() && tx.is_none() && rx_landing.is_empty() && head.is_none() && arrivals.is_empty() && handoffs.is_empty() && loads.is_empty() && tokens.is_empty() {
            let k = rng.gen_range(1..=c.experts.min(8));
            let mut ids: Vec<usize> = (0..c.experts).collect();
            ids.shuffle(&mut rng);
            ids.truncate(k);
            m_of.iter_mut().for_each(|m| *m = 0);
            let mut missing = vec![0u32; c.experts];
            for &e in &ids {
                m_of[e] = rng.gen_range(1..=12);
                let mut mask = 0u16;
                while mask == 0 {
                    for ch in 0..n {
                        if rng.gen_bool(0.5) {
                            mask |= 1 << ch;
                        }
                    }
                }
                if rng.gen_bool(0.6) {
                    mask |= 1 << me.0;
                }
                masks[e] = mask;
                if c.tokens && on(mask) && rng.gen_bool(0.5) {
                    missing[e] = rng.gen_range(1..40);
                }
            }
            cl.begin_layer(&m_of, &missing);
            rtl.begin_layer(&m_of, &missing);
            // Pre-loads in a random order, then grants in another, spaced out.
            let mut at = t + 1;
            for &e in &ids {
                sched_q.push_back((at, CtrlSched::Preload { expert: ExpertId(e as u16), mask: masks[e] }));
                at += rng.gen_range(1..4);
            }
            let mut gids = ids.clone();
            gids.shuffle(&mut rng);
            for &e in &gids {
                at += [rng.gen_range(1..10), rng.gen_range(10..300)][rng.gen_range(0..2)];
                sched_q.push_back((at, CtrlSched::Grant { expert: ExpertId(e as u16), mask: masks[e] }));
            }
            // Rule 5: the arbiter hands this chiplet some micro-slices of the experts it is on.
            let mut mine: Vec<Vec<bool>> = ids.iter().map(|&e| (0..m_of[e]).map(|k| traj.loader(masks[e], k) == me).collect()).collect();
            if c.knobs.rule5 {
                for (i, &e) in ids.iter().enumerate() {
                    for k in 0..m_of[e] {
                        let mine_k = on(masks[e]) && rng.gen_bool(0.5);
                        mine[i][k as usize] = mine_k;
                        if mine_k {
                            loads.push_back((t + rng.gen_range(1..200), SlotTag { expert: ExpertId(e as u16), k, loader: me }));
                        }
                    }
                }
                loads.make_contiguous().sort_by_key(|l| l.0);
            }
            // What the other chiplets send: after the grant, every micro-slice this chiplet
            // is on and does not load itself.
            for (i, &e) in ids.iter().enumerate() {
                if !on(masks[e]) {
                    continue;
                }
                for k in 0..m_of[e] {
                    if !mine[i][k as usize] {
                        let loader = if c.knobs.rule5 { ChipletId(masks[e].trailing_zeros() as u8) } else { traj.loader(masks[e], k) };
                        let loader = if loader == me { (0..n as u8).map(ChipletId).find(|&x| x != me && (c.knobs.helpers || masks[e] >> x.0 & 1 == 1)).unwrap_or(loader) } else { loader };
                        // Keyed by the expert: released at its grant.
                        arrivals.push((u64::MAX - e as u64, SlotTag { expert: ExpertId(e as u16), k, loader }));
                    }
                }
            }
            for (e, &m) in missing.iter().enumerate() {
                let mut left = m;
                while left > 0 {
                    let x = rng.gen_range(1..=left);
                    tokens.push((t + rng.gen_range(5..400), e as u16, x));
                    left -= x;
                }
            }
            tokens.sort_by_key(|x| x.0);
            ddr_lat_hi = [3, 12, 40][rng.gen_range(0..3)];
            layer_open = true;
            layers += 1;
        }

        // ---- inputs of this cycle
        let mut inp = CtrlIn { ddr_ready: ddr.len() < 4 && rng.gen_bool(0.8), tx_ready: tx.is_none() && rng.gen_bool(0.7), ..CtrlIn::default() };
        if let Some(&(at, m)) = sched_q.front() {
            if at <= t {
                sched_q.pop_front();
                inp.sched = Some(m);
                if let CtrlSched::Grant { expert, .. } = m {
                    for a in arrivals.iter_mut().filter(|a| a.0 == u64::MAX - expert.0 as u64) {
                        a.0 = t + rng.gen_range(1..60);
                    }
                }
            }
        }
        if let Some(i) = ddr.iter().position(|d| d.0 <= t) {
            inp.ddr_landed = Some(ddr.remove(i).1);
        }
        if let Some((at, s)) = pe {
            if at <= t {
                inp.pe_done = Some(s);
                pe = None;
            }
        }
        if let Some((at, s)) = tx {
            if at <= t {
                inp.tx_done = Some(s);
                tx = None;
            }
        }
        if let Some(i) = rx_landing.iter().position(|d| d.0 <= t) {
            inp.rx_landed = Some(rx_landing.remove(i).1);
        }
        if head.is_none() {
            if let Some(i) = arrivals.iter().position(|a| a.0 <= t) {
                let tag = arrivals.remove(i).1;
                if rng.gen_bool(0.1) {
                    handoffs.push_back(tag);
                } else {
                    head = Some(tag);
                }
            }
        }
        inp.rx_head = head;
        inp.handoff = handoffs.pop_front();
        if loads_out.len() < 8 {
            if let Some(&(at, tag)) = loads.front() {
                if at <= t {
                    loads.pop_front();
                    inp.load = Some(tag);
                    loads_out.push(tag);
                }
            }
        }
        if let Some(&(at, e, x)) = tokens.first() {
            if at <= t {
                tokens.remove(0);
                inp.tokens_arrived = Some((ExpertId(e), x));
            }
        }

        // ---- both models
        let a = cl.step(&inp, &traj);
        let b = rtl.step(&inp);
        if let Some(w) = std::env::var("CC_DEBUG").ok().and_then(|v| v.parse::<u64>().ok()) {
            if t + 200 >= w && t <= w {
                eprintln!("{t}: in {inp:?}\n    cl {a:?}\n    rtl {b:?}");
            }
        }
        waves.push(encode(&a), encode(&b));
        if a != b {
            eprintln!("cycle {t}: outputs differ; {}", waves.dump(&format!("chiplet_ctrl_seed{seed}")));
        }
        compare(t, &a, &b);
        cmp(t, "pending", cl.pending(), rtl.state.pending);
        cmp(t, "quiescent", cl.quiescent(), rtl.state.quiescent);
        let live: u64 = (0..c.slots).filter(|&s| cl.ring.is_live(s)).map(|s| 1u64 << s).sum();
        cmp(t, "ring.live", live, rtl.state.live);
        cmp(t, "ring.tail", cl.ring.tail(), rtl.state.tail);
        cmp(t, "ring.head", cl.ring.head(), rtl.state.head);
        cmp(t, &format!("error (reload list {}, Rule-5 FIFO {})", rtl.state.reload_len, rtl.state.assigned_len), false, rtl.state.error);

        // ---- agents take the outputs
        if let Some((s, tag)) = a.ddr_req {
            ddr.push((t + rng.gen_range(1..=ddr_lat_hi), s));
            if let Some(i) = loads_out.iter().position(|&x| x == tag) {
                loads_out.remove(i);
            }
        }
        if let Some(s) = a.rx_slot {
            head = None;
            rx_landing.push((t + rng.gen_range(1..10), s));
        }
        if let Some((s, _)) = a.pe_start {
            pe = Some((t + rng.gen_range(1..8), s));
        }
        if let Some((s, _)) = a.tx_start {
            tx = Some((t + rng.gen_range(1..6), s));
        }
        if a.done && sched_q.is_empty() {
            layer_open = false;
        }
        if sched_q.is_empty() && cl.quiescent() {
            layer_open = false;
        }
        if !cl.quiescent() {
            idle_since = t;
        }
        assert!(t - idle_since < 5000 || !layer_open, "cycle {t}: no progress for 5000 cycles: {}", cl.state_summary());
    }
    cmp(cycles, "stats", cl.stats, rtl.stats);
    cmp(cycles, "peak_occupancy", cl.ring.peak_occupancy, rtl.peak_occupancy);
    layers
}

fn knobs(eager: bool, fwc: bool, reserve: u32, rule5: bool, helpers: bool) -> CtrlKnobs {
    CtrlKnobs { eager, forward_with_compute: fwc, ddr_reserve: reserve, rule5, helpers, shard_reserve: false }
}

/// Every strategy preset's knobs (A1 naive, A2/A3, A4 Rule 5, sharded loading, EP tokens)
/// on a 2×2 package, 8 slots, 16 experts.
#[test]
fn chiplet_ctrl_presets_2x2() {
    let presets = [
        ("a1", knobs(false, false, 1, false, false), false),
        ("a3", knobs(true, true, 1, false, false), false),
        ("a4", knobs(true, true, 1, true, false), false),
        ("a3-all", knobs(true, true, 1, false, true), false),
        ("a4-all", knobs(true, true, 1, true, true), false),
        ("ep", knobs(true, true, 1, false, false), true),
    ];
    for (i, (name, k, tok)) in presets.into_iter().enumerate() {
        let c = Case { rows: 2, cols: 2, id: (i % 4) as u8, slots: 8, experts: 16, knobs: k, tokens: tok };
        let layers = lockstep(&c, 10_000, 17 + i as u64);
        assert!(layers >= 3, "{name}: only {layers} layers in 10 000 cycles");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]
    /// Random knob combinations (every one of the 2^5 × reserves reachable), sizes and seeds.
    #[test]
    fn chiplet_ctrl_lockstep_random(
        seed in any::<u64>(),
        shape in 0usize..4,
        eager in any::<bool>(), fwc in any::<bool>(), reserve in 0u32..3, rule5 in any::<bool>(), helpers in any::<bool>(), tok in any::<bool>(),
        id_pick in any::<u8>(),
    ) {
        let (rows, cols, slots, experts) = [(2, 2, 8, 16), (1, 3, 3, 16), (3, 3, 12, 64), (4, 4, 14, 128)][shape];
        let reserve = reserve.min(slots - 1);
        let c = Case { rows, cols, id: id_pick % (rows * cols) as u8, slots, experts, knobs: knobs(eager, fwc, reserve, rule5, helpers), tokens: tok };
        lockstep(&c, 10_000, seed);
    }
}

/// Sharded loading's flow control (`shard_flow = "reserve"`) is CL-only: the twin refuses it
/// when built, naming the config field (docs/rtl.md), so `--rtl chiplet-ctrl` never runs a
/// protocol the RTL does not implement.
#[test]
fn chiplet_ctrl_refuses_shard_flow_reserve() {
    let k = CtrlKnobs { shard_reserve: true, ..knobs(true, true, 1, false, true) };
    let e = ChipletCtrlTwin::new(1, 2, 2, 8, 16, k).err().expect("refused");
    assert!(e.to_string().contains("shard_flow = \"reserve\""), "{e}");
    assert!(ChipletCtrlTwin::new(1, 2, 2, 8, 16, knobs(true, true, 1, false, true)).is_ok());
}
