//! Testbench of the assembled package: functional mode bit-exact against the dense FL
//! reference for every strategy and array; determinism (threads, fast-forward, waveforms).

use hw::pkg::config::{PkgCfg, Strategy};
use hw::pkg::package::{LayerInput, Package};
use sched::workload::{generate, GenCfg};

fn layer(tokens: u32, experts: u32, top_k: u32, d_model: u32, d_ffn: u32, seed: u64) -> LayerInput {
    let g = GenCfg { model: None, experts, top_k, layers: 1, tokens_per_iter: tokens, iters: 1, seed, ..Default::default() };
    let t = generate(&g).unwrap();
    LayerInput { routing: t.routing(0..t.tokens.len(), 0), experts: experts as usize, d_model, d_ffn, requests: None }
}

fn cfg(k: u32) -> PkgCfg {
    let mut c = PkgCfg { rows: k, cols: k, ..Default::default() };
    c.pe.rows = 8;
    c.pe.cols = 8;
    c.sim.max_cycles = 20_000_000;
    c.sim.watchdog_cycles = 20_000;
    c
}

#[test]
fn functional_2x2_every_strategy_bit_exact() {
    let l = layer(32, 16, 2, 64, 48, 7);
    for s in Strategy::ALL {
        let mut p = Package::new(&cfg(2), s, &l, true).unwrap();
        let r = p.run(None).unwrap_or_else(|e| panic!("{}: {e}", s.name()));
        assert_eq!(r.outputs_match_reference, Some(true), "{}", s.name());
        eprintln!("{} latency {} ddr {} d2d {}", s.name(), r.latency_cycles, r.ddr_bytes, r.d2d_bytes);
    }
}

fn key(r: &hw::pkg::result::PkgResult) -> String {
    format!("{} {} {} {} {} {:?}", r.latency_cycles, r.ddr_bytes, r.d2d_bytes, r.macs, r.peak_weight_bytes, r.chiplets)
}

/// Same config + seed → identical results and waveform changes with fast-forward on or off
/// and on one or two threads; fast-forward evaluates fewer ticks. Also on a one-token layer,
/// where all but one chiplet sleep most of the time (a tile with nothing due is skipped
/// while the others work: its waveform and counters must not show it), on a 4×4 array and
/// under Rule 5.
#[test]
fn stepping_does_not_change_results_or_waves() {
    let (busy, sparse, few) = (layer(48, 16, 2, 64, 48, 3), layer(1, 16, 2, 64, 48, 5), layer(6, 16, 2, 64, 48, 7));
    for (l, k, s, sharded) in [
        (&busy, 3, Strategy::Ep, false),
        (&busy, 3, Strategy::A3, false),
        (&busy, 3, Strategy::A3, true),
        (&busy, 3, Strategy::A4, false),
        (&sparse, 3, Strategy::A3, false),
        (&few, 4, Strategy::Ep, false),
        (&few, 4, Strategy::A3, false),
    ] {
        let l = l.clone();
        let mut runs = Vec::new();
        for (ff, th) in [(false, 1), (true, 1), (true, 2), (false, 3)] {
            let mut c = cfg(k);
            if sharded {
                c.loaders = hw::pkg::config::Loaders::All;
            }
            c.sim.fast_forward = ff;
            c.sim.threads = th;
            let mut p = Package::new(&c, s, &l, true).unwrap();
            let mut waves: Vec<(u64, usize, u64)> = Vec::new();
            let r = p.run(Some(&mut waves)).unwrap();
            assert_eq!(r.outputs_match_reference, Some(true));
            if !runs.is_empty() {
                let w0: &Vec<(u64, usize, u64)> = &runs.first().map(|x: &(String, Vec<(u64, usize, u64)>, u64)| x.1.clone()).unwrap();
                if let Some(i) = (0..w0.len().min(waves.len())).find(|&i| w0[i] != waves[i]) {
                    let sig = p.signals();
                    let name = |id: usize| format!("{}.{}", sig[id].scope.join("."), sig[id].name);
                    eprintln!("first difference at {i}: {:?} {} vs {:?} {}", w0[i], name(w0[i].1), waves[i], name(waves[i].1));
                }
            }
            runs.push((key(&r), waves, p.evaluated));
        }
        for r in &runs[1..] {
            assert_eq!(r.0, runs[0].0, "{}: results differ", s.name());
            assert!(r.1 == runs[0].1, "{}: waveforms differ", s.name());
        }
        // Untraced, fast-forward skips the edges at which only counters run.
        let ev = |ff: bool| {
            let mut c = cfg(k);
            c.sim.fast_forward = ff;
            if sharded {
                c.loaders = hw::pkg::config::Loaders::All;
            }
            let mut p = Package::new(&c, s, &l, true).unwrap();
            let r = p.run(None).unwrap();
            (key(&r), p.evaluated)
        };
        let (a, b) = (ev(false), ev(true));
        assert_eq!(a.0, b.0);
        assert_eq!(a.0, runs[0].0);
        assert!(b.1 < a.1, "fast-forward skipped nothing ({} vs {})", b.1, a.1);
    }
}

/// Tracing samples only the blocks evaluated at a tick (a block's values are registers that
/// change only when it is evaluated). Checked here: every block is sampled at every tick and
/// a skipped one must not have changed (the package panics naming the signal), over the
/// strategies, fast-forward on and off (tiles sleep or not), timing and functional mode,
/// bit errors (UCIe replays), 2x2 and 3x3; and the changes recorded equal the skipping run's.
#[test]
fn traced_blocks_skipped_only_when_unchanged() {
    let (busy, sparse) = (layer(24, 16, 2, 64, 48, 11), layer(1, 16, 2, 64, 48, 13));
    for (l, k, s, ff, func, ber) in [
        (&busy, 2, Strategy::Ep, true, true, 0.0),
        (&busy, 2, Strategy::A3, true, false, 0.0),
        (&busy, 2, Strategy::A3, false, true, 0.0),
        (&busy, 2, Strategy::A4, true, true, 0.0),
        (&busy, 2, Strategy::A5, true, true, 0.0),
        (&busy, 3, Strategy::A3, true, true, 1e-5),
        (&busy, 3, Strategy::Hydra, true, false, 0.0),
        (&sparse, 3, Strategy::A3, true, true, 0.0),
    ] {
        let mut c = cfg(k);
        c.sim.fast_forward = ff;
        c.ucie.ber = ber;
        let run = |check: bool| {
            let mut p = Package::new(&c, s, l, func).unwrap();
            p.check_trace_skips = check;
            let mut waves: Vec<(u64, usize, u64)> = Vec::new();
            let r = p.run(Some(&mut waves)).unwrap_or_else(|e| panic!("{} {k}x{k}: {e}", s.name()));
            (key(&r), waves)
        };
        let (checked, skipping) = (run(true), run(false));
        assert_eq!(checked.0, skipping.0, "{} {k}x{k}", s.name());
        assert!(checked.1 == skipping.1, "{} {k}x{k}: waveforms differ", s.name());
        assert!(!checked.1.is_empty());
    }
}

#[test]
fn functional_3x3_and_4x4_bit_exact() {
    for k in [3u32, 4] {
        let l = layer(40, 16, 2, 64, 48, 11 + k as u64);
        for s in Strategy::ALL {
            let mut p = Package::new(&cfg(k), s, &l, true).unwrap();
            let r = p.run(None).unwrap_or_else(|e| panic!("{k}x{k} {}: {e}", s.name()));
            assert_eq!(r.outputs_match_reference, Some(true), "{k}x{k} {}", s.name());
        }
    }
}

/// A traced functional run passes the package waveform checkers (ring capacity, each
/// micro-slice computed exactly once per trajectory chiplet, grants only to idle chiplets).
#[test]
fn waveform_checkers_pass_on_a_package_dump() {
    let l = layer(40, 16, 2, 64, 48, 5);
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("pkg_waves");
    std::fs::create_dir_all(&dir).unwrap();
    for s in [Strategy::A3, Strategy::Ep] {
        let mut p = Package::new(&cfg(2), s, &l, true).unwrap();
        let path = dir.join(format!("{}.vcd", s.name()));
        let mut w = waves::WaveWriter::create(&path, waves::WaveFormat::Vcd, p.tick_ps(), &p.signals(), &waves::WaveFilter::default()).unwrap();
        let r = p.run(Some(&mut w)).unwrap();
        w.finish(r.latency_cycles * 2).unwrap();
        let checks = waves::check_package(&path).unwrap();
        assert_eq!(checks.len(), 3, "{checks:?}");
        assert!(checks.iter().all(|c| c.ok), "{}: {checks:?}", s.name());
    }
}

#[test]
fn rule5_hands_micro_slices_to_the_member_with_room_bit_exact() {
    // Few ring slots make the free-storage differences Rule 5 acts on.
    let l = layer(48, 16, 2, 64, 48, 11);
    for k in [2, 3] {
        let mut c = cfg(k);
        c.ring_slots = 6;
        let mut p = Package::new(&c, Strategy::A4, &l, true).unwrap();
        let r = p.run(None).unwrap();
        assert_eq!(r.outputs_match_reference, Some(true), "{k}x{k}");
        assert!(r.rule5_redirected > 0, "{k}x{k}: no micro-slice was loaded away from its Rule-4 loader");
        let a3 = Package::new(&c, Strategy::A3, &l, true).unwrap().run(None).unwrap();
        eprintln!("{k}x{k}: a4 {} cycles ({} redirected) vs a3 {}", r.latency_cycles, r.rule5_redirected, a3.latency_cycles);
    }
}

// Token buffering over many iterations (the session loop: requests paused at cold layers,
// resumed later, every token-layer computed once) runs through the run layer the CLI uses:
// testbenches/tests/package.rs.

/// A bit-error rate on every die-to-die link: the receivers' CRC catches the flipped flits,
/// go-back-N replays them, and every token's output is still bit-exact.
#[test]
fn bit_errors_on_the_links_are_replayed_and_outputs_stay_bit_exact() {
    let l = layer(32, 16, 2, 64, 48, 5);
    let mut c = cfg(3);
    c.ucie.ber = 1e-5;
    for s in [Strategy::Ep, Strategy::A3] {
        let r = Package::new(&c, s, &l, true).unwrap().run(None).unwrap();
        assert_eq!(r.outputs_match_reference, Some(true), "{}", s.name());
        if s == Strategy::A3 {
            assert!(r.replays > 0, "no replay at BER 1e-5 over {} D2D bytes", r.d2d_bytes);
        }
    }
}

/// Lazy acknowledgements (fast-forward on, untraced: an ack that only frees retry entries is
/// taken at the adapter's next evaluation, `UcieAdapterCl::eval`) change no result: each run
/// equals the one with fast-forward off (every adapter evaluated at every edge, each ack at
/// its own), with bit errors (NAKs, replays, replay timeouts) and with retry buffers so small
/// that acknowledgements gate the sending (the case that stays an event).
#[test]
fn lazy_acknowledgements_change_no_result() {
    let l = layer(32, 16, 2, 64, 48, 9);
    for (ber, retry) in [(0.0, 2), (1e-5, 2), (1e-4, 3), (1e-4, 64)] {
        for s in [Strategy::Ep, Strategy::A3, Strategy::A4] {
            let run = |ff: bool| {
                let mut c = cfg(3);
                c.ucie.ber = ber;
                c.ucie.retry_buffer_flits = retry;
                c.sim.fast_forward = ff;
                let r = Package::new(&c, s, &l, true).unwrap().run(None).unwrap();
                assert_eq!(r.outputs_match_reference, Some(true), "{} ber {ber} retry {retry}", s.name());
                (key(&r), r.replays)
            };
            let (eager, lazy) = (run(false), run(true));
            assert_eq!(eager, lazy, "{} ber {ber} retry {retry}", s.name());
            if ber >= 1e-4 {
                assert!(lazy.1 > 0, "{} ber {ber}: no replay", s.name());
            }
        }
    }
}

mod random {
    use super::*;
    use proptest::prelude::{prop_assert_eq, proptest, ProptestConfig};

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// Random routings, dimensions, arrays, strategies and bit-error rates: every token's
        /// output equals the dense reference.
        #[test]
        fn functional_outputs_bit_exact_for_random_layers(
            tokens in 4u32..40, experts in 4u32..17, top_k in 1u32..4, d_model in 4u32..48, d_ffn in 4u32..40,
            k in 2u32..4, s in 0usize..7, ber_i in 0usize..3, seed in 0u64..1000, slices in 1u32..5, sharded in proptest::bool::ANY,
        ) {
            let top_k = top_k.min(experts);
            let l = layer(tokens, experts, top_k, d_model, d_ffn, seed);
            let mut c = cfg(k);
            if sharded {
                c.loaders = hw::pkg::config::Loaders::All;
            }
            c.micro_slices = slices.min(d_ffn);
            c.ucie.ber = [0.0, 1e-5, 1e-4][ber_i];
            c.seed = seed;
            let st = Strategy::ALL[s];
            let r = Package::new(&c, st, &l, true).unwrap().run(None).unwrap();
            prop_assert_eq!(r.outputs_match_reference, Some(true), "{} {}x{}", st.name(), k, k);
        }
    }
}

/// The cycle breakdown adds up to the latency on every chiplet, its compute part is the PE
/// array's busy count, and the activity timeline (which changes no result) integrates to
/// the run's own counters.
#[test]
fn cycle_breakdown_and_timeline_add_up() {
    let l = layer(48, 16, 2, 64, 48, 5);
    for s in [Strategy::Ep, Strategy::A3] {
        let mut c = cfg(2);
        let plain = Package::new(&c, s, &l, true).unwrap().run(None).unwrap();
        c.sim.timeline = true;
        let r = Package::new(&c, s, &l, true).unwrap().run(None).unwrap();
        assert_eq!(key(&r), key(&plain), "{}: recording the timeline changed the run", s.name());
        let t = r.timeline.as_ref().expect("timeline recorded");
        assert!(t.bins > 0 && t.bins <= hw::pkg::timeline::MAX_BINS);
        for (ch, tl) in r.chiplets.iter().zip(&t.chiplets) {
            assert_eq!(ch.cycles.total(), r.latency_cycles, "{}: chiplet {} breakdown {:?}", s.name(), ch.id, ch.cycles);
            assert_eq!(ch.cycles.compute, ch.pe_busy_cycles, "{}: chiplet {}", s.name(), ch.id);
            let busy: f64 = tl.pe_busy.iter().sum();
            assert!((busy - ch.pe_busy_cycles as f64).abs() < 1e-6, "{}: timeline busy {busy} vs {}", s.name(), ch.pe_busy_cycles);
            let macs: f64 = tl.macs.iter().sum();
            assert!((macs - ch.macs as f64).abs() <= 1e-6 * ch.macs as f64 + 1.0, "{}: timeline MACs {macs} vs {}", s.name(), ch.macs);
            let tx: f64 = tl.d2d_tx_bytes.iter().sum();
            assert_eq!(tx as u64, ch.d2d_tx_bytes, "{}", s.name());
        }
        assert_eq!(r.cycles.total(), r.latency_cycles * r.chiplets.len() as u64);
    }
}

/// The timeline is the same whichever edges were evaluated: fast-forward on (tiles sleep,
/// the engine skips ticks, the adapters take acknowledgements lazily) or off, one thread or
/// two, with bins merged (a run longer than `MAX_BINS` first-width bins). Its bins hold
/// integers, and a DDR burst counts at the tick it is issued.
#[test]
fn timeline_identical_with_and_without_fast_forward() {
    for (l, s, merged) in [(layer(48, 16, 2, 64, 48, 5), Strategy::A3, false), (layer(24, 16, 2, 64, 48, 7), Strategy::A4, false), (layer(120, 16, 2, 64, 96, 3), Strategy::A3, true)] {
        let run = |ff: bool, threads: u32| {
            let mut c = cfg(2);
            c.sim.timeline = true;
            c.sim.fast_forward = ff;
            c.sim.threads = threads;
            Package::new(&c, s, &l, true).unwrap().run(None).unwrap().timeline.expect("timeline recorded")
        };
        let slow = run(false, 1);
        assert!(!merged || slow.bin_cycles >= 4 * hw::pkg::timeline::FIRST_BIN_CYCLES, "{}: bin width {}", s.name(), slow.bin_cycles);
        assert!(slow.chiplets.iter().any(|c| c.ddr_bytes.iter().filter(|&&b| b > 0.0).count() > 2));
        for (ff, threads) in [(true, 1), (true, 2)] {
            assert!(run(ff, threads) == slow, "{}: timeline differs with fast-forward {ff}, {threads} threads", s.name());
        }
    }
}

/// Sharded loading: every chiplet loads its share of every expert (helpers off the
/// trajectory forward without computing); outputs stay bit-exact for every strategy on 2x2
/// and 3x3, helpers forward, and a one-token layer's DDR bytes spread over all channels.
#[test]
fn sharded_loading_is_bit_exact_and_spreads_the_loads() {
    for k in [2, 3] {
        let l = layer(24, 16, 2, 64, 48, 11);
        for s in Strategy::ALL {
            let mut c = cfg(k);
            c.loaders = hw::pkg::config::Loaders::All;
            let r = Package::new(&c, s, &l, true).unwrap().run(None).unwrap_or_else(|e| panic!("{} {k}x{k}: {e}", s.name()));
            assert_eq!(r.outputs_match_reference, Some(true), "{} {k}x{k}", s.name());
        }
    }
    // One token, top-2: both trajectories are the token's home alone; sharded, all four
    // channels load (EP-like balance), and the other three chiplets forward.
    let l = layer(1, 16, 2, 64, 48, 3);
    let mut c = cfg(2);
    c.micro_slices = 4;
    let own = Package::new(&c, Strategy::A3, &l, true).unwrap().run(None).unwrap();
    c.loaders = hw::pkg::config::Loaders::All;
    let sh = Package::new(&c, Strategy::A3, &l, true).unwrap().run(None).unwrap();
    assert_eq!(sh.outputs_match_reference, Some(true));
    assert_eq!(own.chiplets.iter().filter(|x| x.ddr_bytes > 0).count(), 1);
    assert!(sh.chiplets.iter().all(|x| x.ddr_bytes > 0), "{:?}", sh.chiplets.iter().map(|x| x.ddr_bytes).collect::<Vec<_>>());
    assert_eq!(sh.chiplets.iter().map(|x| x.forwards).sum::<u64>(), 2 * 3);
}

/// A tile woken between two core edges (by an adapter or its DDR channel) keeps the work its
/// last core edge left for the next one: traced, the D2D engine's `inj_valid`/`ej_valid`
/// pulses must fall at the next core edge with tiles asleep as with every tile evaluated at
/// every tick. (Found when a DDR holding requests stopped keeping its tile awake at every
/// tick: the 4×4 waveform kept `ej_valid` high where the tile slept through that edge.)
#[test]
fn pulses_fall_at_the_next_core_edge_with_tiles_asleep() {
    // Qwen3-30B-A3B's expert shape at the default PE array: weights stream from DDR for
    // many edges (the smaller layers of the tests above did not show the fault).
    let l = layer(16, 64, 8, 2048, 768, 21);
    let s = Strategy::Ep;
    let run = |ff: bool| {
        let mut c = PkgCfg { rows: 4, cols: 4, ..Default::default() };
        c.sim.fast_forward = ff;
        let mut p = Package::new(&c, s, &l, false).unwrap();
        let mut waves: Vec<(u64, usize, u64)> = Vec::new();
        let r = p.run(Some(&mut waves)).unwrap();
        (key(&r), waves, p.evaluated)
    };
    let (every, asleep) = (run(false), run(true));
    assert_eq!(every.0, asleep.0, "{}: results differ", s.name());
    assert!(every.1 == asleep.1, "{}: waveforms differ", s.name());
    assert!(asleep.2 < every.2, "{}: fast-forward skipped nothing", s.name());
}
