//! `UcieReplayRtl` against its CL golden model, the UCIe adapter `hw::pkg::ucie::UcieAdapterCl`
//! (S8 strength 3: lockstep, every port every cycle).
//!
//! The CL adapter runs for real (its TX queue, wire with seeded bit errors, sideband and RX
//! queue) and is evaluated at every edge of its domain. Before each edge the test reads the
//! events the controller sees at that edge from the CL (read-only views): the flit offered
//! by the TX queue, whether the wire is free, the acknowledgement and the flit that arrive.
//! The RTL block gets them as inputs; after the CL's edge its decisions (sent? which seq,
//! new or replay, accepted? ACK/NAK out, counters) are the expected outputs, and the
//! controller registers (head, send, next, expect, NAK latch, timer) are compared too.
//! Sequence numbers compare mod 2^W.

mod common;

use hw::harness::{ClockDomain, ClockSet, LinkArena, NEVER};
use hw::noc::flit::Flit;
use hw::pkg::ni::PayloadPools;
use hw::pkg::ucie::{UcieAdapterCl, UcieCfg, UciePorts};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rtl::prelude::*;
use rust_hdl::prelude::*;

/// One lockstep run.
#[derive(Debug, Clone)]
struct Run {
    cfg: UcieCfg,
    seed: u64,
    /// Period of a second clock domain, ps: only sets the harness tick, so the adapter's
    /// domain (625 ps) has `div > 1` and acknowledgements land between its edges.
    aux_ps: u64,
    /// Phase of the adapter's clock, ps.
    phase_ps: u64,
    /// Offered load: phases of (cycles, percent chance of a new flit per cycle), repeated.
    phases: Vec<(u32, u8)>,
    cycles: u64,
}

/// What the run exercised (so a test can assert its stimulus reached the corners).
#[derive(Debug, Default, Clone, Copy)]
struct Coverage {
    sends: u64,
    replays_sent: u64,
    naks: u64,
    acks: u64,
    accepted: u64,
    crc_fails: u64,
    full_stalls: u64,
    replays: u64,
    timeouts: u64,
}

/// Compares one port (`width` bits) and records both values; a mismatch fails with the cycle,
/// the port and both values, and writes both models' VCDs of every compared port.
fn check<T: Into<u64>>(tr: &mut common::LockstepTrace, port: &str, width: u32, rtl: T, cl: T) -> Result<(), TestCaseError> {
    tr.cmp(port, width, cl.into(), rtl.into()).map_err(TestCaseError::fail)
}

/// Runs the CL adapter and the `W`-bit RTL controller in lockstep for `run.cycles` adapter
/// cycles; the first mismatch fails with its cycle, port and both values.
fn lockstep<const W: usize>(run: &Run) -> Result<Coverage, TestCaseError> {
    let m = (1u64 << W) - 1;
    let clocks = ClockSet::new(vec![ClockDomain::new("ucie", 625).with_phase(run.phase_ps), ClockDomain::new("aux", run.aux_ps)])
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let ucie = clocks.clock(0);
    let mut flits = LinkArena::<Flit>::new();
    // The test is the upstream router, in the adapter's domain: a flit sent at an edge lands
    // at the next one. The output link goes to a receiver in the same domain.
    let inp = flits.add(ucie.div as u32);
    let out = flits.add_cdc(1, ucie.div as u32);
    let pools = PayloadPools::new(0, 0, 256);
    let mut cl = UcieAdapterCl::new(0, &run.cfg, run.seed, ucie, ucie, UciePorts { in_flit: inp, out_flit: out }, clocks.tick_ps());
    // The twin takes one flit and one acknowledgement per cycle (see the block's docs).
    prop_assume!(cl.flit_ticks() >= ucie.div as f64, "flit shorter than a cycle");
    let timeout_cycles = cl.replay_timeout().div_ceil(ucie.div);
    let cap = run.cfg.retry_buffer_flits as u64;

    let mut uut = UcieReplayRtl::<W>::new(cap, timeout_cycles);
    uut.connect_all();
    // Reset cycle.
    uut.reset.next = true;
    common::settle(&mut uut);
    uut.clock.next = true.into();
    common::settle(&mut uut);
    uut.clock.next = false.into();
    uut.reset.next = false;
    common::settle(&mut uut);

    let mut rng = Xoshiro256PlusPlus::seed_from_u64(run.seed ^ 0x7472_6166_6669_6300);
    let mut phase = 0usize;
    let mut phase_left = run.phases[0].0;
    let mut data = 0u32;
    let mut cov = Coverage::default();
    let mut tr = common::LockstepTrace::named(&format!("ucie_replay_w{W}_seed{}", run.seed));
    for cycle in 0..run.cycles {
        tr.cycle(cycle);
        let now = ucie.edge(cycle);
        // --- the controller's view before the edge
        let v0 = cl.ctrl_view();
        let s0 = *cl.stats();
        let st = uut.state();
        check(&mut tr, "state.head", W as u32, st.head, v0.head_seq & m)?;
        check(&mut tr, "state.send", W as u32, st.send, v0.send_seq & m)?;
        check(&mut tr, "state.next", W as u32, st.next, v0.next_seq & m)?;
        check(&mut tr, "state.expect", W as u32, st.expect, v0.expect & m)?;
        check(&mut tr, "state.nak_sent", 1, st.nak_sent, v0.nak_sent)?;
        check(&mut tr, "state.timer_on", 1, st.timer_on, v0.timer != NEVER)?;
        if v0.timer != NEVER {
            check(&mut tr, "state.timer_left", 32, st.timer_left, v0.timer.saturating_sub(now).div_ceil(ucie.div))?;
        }
        // --- this edge's events (inputs)
        let acks = cl.acks_due(now);
        let rx = cl.flits_due(now);
        prop_assert!(acks.len() <= 1 && rx.len() <= 1, "cycle {}: {} acks / {} flits due in one cycle", cycle, acks.len(), rx.len());
        // SAFETY: single-threaded testbench; the test is the link's only sender and reads it
        // only before the adapter (its receiver) evaluates this edge.
        let arrives = unsafe { flits.arrives(inp, now) };
        uut.tx_valid.next = v0.tx_queue > 0 || arrives;
        uut.wire_ready.next = cl.wire_ready(now);
        uut.ack_valid.next = !acks.is_empty();
        let (nak, aseq) = acks.first().copied().unwrap_or((false, 0));
        uut.ack_nak.next = nak;
        uut.ack_seq.next = (aseq & m).into();
        uut.rx_valid.next = !rx.is_empty();
        let (rseq, rfail) = rx.first().copied().unwrap_or((0, false));
        uut.rx_seq.next = (rseq & m).into();
        uut.rx_crc_ok.next = !rfail;
        common::settle(&mut uut);
        // --- the CL's edge and its decisions (expected outputs)
        // SAFETY: as above; the adapter is the sole receiver of `inp` and sender of `out`.
        unsafe { cl.eval(now, &flits, &pools, false) };
        let v1 = cl.ctrl_view();
        let s1 = *cl.stats();
        let take = s1.flits - s0.flits;
        let replay = (s1.retried_bytes - s0.retried_bytes) / 256;
        prop_assert!(take + replay <= 1);
        let send = take + replay == 1;
        let tx_seq = if send { cl.last_sent_seq().expect("a flit was sent") } else { v1.send_seq };
        let len_after_ack = v1.next_seq - v1.head_seq - take;
        let pushed = v1.sideband + acks.len() - v0.sideband;
        prop_assert!(pushed <= 1);
        let (out_nak, out_seq) = if pushed == 1 { cl.last_ack_out().expect("pushed") } else { (false, v0.expect) };
        let accept = v1.expect - v0.expect;
        check(&mut tr, "tx_take", 1, uut.tx_take.val(), take == 1)?;
        check(&mut tr, "tx_send", 1, uut.tx_send.val(), send)?;
        check(&mut tr, "tx_replay", 1, uut.tx_replay.val(), replay == 1)?;
        check(&mut tr, "tx_seq", W as u32, uut.tx_seq.val().to_u64(), tx_seq & m)?;
        check(&mut tr, "tx_full", 1, uut.tx_full.val(), len_after_ack >= cap)?;
        check(&mut tr, "replays", 32, uut.replays.val().to_u64(), s0.replays & 0xffff_ffff)?;
        check(&mut tr, "timeouts", 32, uut.timeouts.val().to_u64(), s0.timeouts & 0xffff_ffff)?;
        check(&mut tr, "rx_accept", 1, uut.rx_accept.val(), accept == 1)?;
        check(&mut tr, "ack_out_valid", 1, uut.ack_out_valid.val(), pushed == 1)?;
        check(&mut tr, "ack_out_nak", 1, uut.ack_out_nak.val(), out_nak)?;
        check(&mut tr, "ack_out_seq", W as u32, uut.ack_out_seq.val().to_u64(), out_seq & m)?;
        cov.sends += send as u64;
        cov.replays_sent += replay;
        cov.naks += (pushed == 1 && out_nak) as u64;
        cov.acks += (pushed == 1 && !out_nak) as u64;
        cov.accepted += accept;
        cov.crc_fails += rfail as u64;
        cov.full_stalls += (len_after_ack >= cap && uut.tx_valid.val() && uut.wire_ready.val() && !send) as u64;
        // --- upstream: offer a new flit for the next edge
        if phase_left == 0 {
            phase = (phase + 1) % run.phases.len();
            phase_left = run.phases[phase].0;
        }
        phase_left -= 1;
        if rng.gen_range(0..100u8) < run.phases[phase].1 {
            // SAFETY: as above, one send per edge.
            unsafe { flits.send(inp, now, Flit { data, head: true, tail: true, ..Default::default() }) };
            data = data.wrapping_add(1);
        }
        // --- rising edge of the RTL
        uut.clock.next = true.into();
        common::settle(&mut uut);
        uut.clock.next = false.into();
        common::settle(&mut uut);
    }
    cov.replays = cl.stats().replays;
    cov.timeouts = cl.stats().timeouts;
    Ok(cov)
}

fn run_or_panic<const W: usize>(run: &Run) -> Coverage {
    let t = std::time::Instant::now();
    let cov = lockstep::<W>(run).unwrap_or_else(|e| panic!("lockstep W={W} {run:?}: {e}"));
    eprintln!("W={W} {} cycles in {:.2?}: {cov:?}", run.cycles, t.elapsed());
    cov
}

/// The default link at BER 1e-4 (≈ 20 % of flits hit): NAK replays, a saturated wire.
#[test]
fn ucie_replay_lockstep_default_link() {
    let run = Run {
        cfg: UcieCfg { ber: 1e-4, ..Default::default() },
        seed: 11,
        aux_ps: 625,
        phase_ps: 0,
        phases: vec![(3000, 100), (500, 0), (2000, 30)],
        cycles: 20_000,
    };
    let cov = run_or_panic::<8>(&run);
    assert!(cov.naks > 100 && cov.replays_sent > 100 && cov.timeouts > 10 && cov.accepted > 2000, "{cov:?}");
}

/// BER 1e-3 (89 % of flits hit), a small retry buffer and a slow clock ratio: replays that
/// fail again (timer rewinds), full-buffer stalls, acknowledgements between edges.
#[test]
fn ucie_replay_lockstep_harsh_link() {
    let run = Run {
        cfg: UcieCfg { ber: 1e-3, retry_buffer_flits: 5, lanes: 32, gt_per_s: 16.0, ..Default::default() },
        seed: 5,
        aux_ps: 1000,
        phase_ps: 250,
        phases: vec![(4000, 100), (300, 10)],
        cycles: 20_000,
    };
    let cov = run_or_panic::<8>(&run);
    assert!(cov.timeouts > 100 && cov.full_stalls > 1000 && cov.naks > 20, "{cov:?}");
}

/// 4-bit sequence numbers with the largest window they allow (8): the wrap-around arithmetic
/// at its limit.
#[test]
fn ucie_replay_lockstep_narrow_seq_full_window() {
    let run = Run {
        cfg: UcieCfg { ber: 3e-4, retry_buffer_flits: 8, ..Default::default() },
        seed: 3,
        aux_ps: 625,
        phase_ps: 0,
        phases: vec![(2000, 100), (200, 0), (1000, 60)],
        cycles: 20_000,
    };
    let cov = run_or_panic::<4>(&run);
    assert!(cov.full_stalls > 0 && cov.replays > 50, "{cov:?}");
}

fn run_strategy(max_retry: u32) -> impl Strategy<Value = Run> {
    (
        (any::<u64>(), 0usize..6, 1u32..=max_retry, 0usize..3, 0usize..5, 500u64..8000),
        (0usize..4, 0usize..2),
        proptest::collection::vec((20u32..800, prop_oneof![Just(0u8), Just(100u8), 0u8..=100]), 1..8),
    )
        .prop_map(move |((seed, ber_i, retry, lanes_i, gt_i, fdi), (aux_i, ph_i), phases)| Run {
            cfg: UcieCfg {
                ber: [0.0, 1e-5, 1e-4, 3e-4, 1e-3, 3e-3][ber_i],
                retry_buffer_flits: retry,
                lanes: [16, 32, 64][lanes_i],
                gt_per_s: [4.0, 8.0, 12.0, 18.0, 24.0][gt_i],
                fdi_latency_ps: fdi,
                ..Default::default()
            },
            seed,
            aux_ps: [625, 1000, 750, 700][aux_i],
            phase_ps: [0, 250][ph_i],
            phases,
            cycles: 10_000,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Any BER, seed, load, link width/rate, FDI latency, clock ratio and retry buffer up to
    /// 64: 10 000 cycles in lockstep.
    #[test]
    fn ucie_replay_lockstep_prop_w8(run in run_strategy(64)) {
        lockstep::<8>(&run)?;
    }

    /// 5-bit sequence numbers, windows up to the limit 16: wrap-around every 32 flits.
    #[test]
    fn ucie_replay_lockstep_prop_w5(run in run_strategy(16)) {
        lockstep::<5>(&run)?;
    }
}

#[test]
#[should_panic(expected = "needs more than 4-bit sequence numbers")]
fn ucie_replay_new_checks_window() {
    let _ = UcieReplayRtl::<4>::new(9, 57);
}

// The Verilog of these blocks is linted, co-simulated and synthesized by
// scripts/verilog-check.sh once they join the export registry (issue 8, open).
