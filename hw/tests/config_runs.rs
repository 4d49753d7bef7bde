//! Issue 19: a config that validates simulates, and a run that cannot finish ends in the
//! watchdog with a report, not at `sim.max_cycles` hours later.
//!
//! * The package configs of `testbenches/regress/pkg/issue19_*.toml` once validated and then
//!   panicked in the engine (a link latency outside the wake window or past the link ring,
//!   two values on one clock-crossing edge), never finished (a BER no flit survives) or lost
//!   a flit to fast-forward. Each file's header says what it must do now: `Expect: runs.`
//!   (every strategy checked bit for bit against the dense reference, and the same result
//!   without fast-forward) or `Expect: refused FIELD` (`validate` names the field).
//! * The die rates of the wafer: a rate so small a kernel's cycles overflow is refused
//!   naming the field (it used to saturate and wrap, making a starved die faster).

use std::path::PathBuf;

use hw::harness::WatchdogReport;
use hw::pkg::config::{PkgCfg, Strategy};
use hw::pkg::package::{LayerInput, Package, PkgError};
use hw::wafer::WaferCfg;

fn layer(seed: u64) -> LayerInput {
    let g = sched::workload::GenCfg { model: None, experts: 16, top_k: 2, layers: 1, tokens_per_iter: 8, iters: 1, seed, ..Default::default() };
    let t = sched::workload::generate(&g).unwrap();
    LayerInput { routing: t.routing(0..t.tokens.len(), 0), experts: 16, d_model: 64, d_ffn: 48, requests: None }
}

fn run(c: &PkgCfg, s: Strategy) -> Result<hw::pkg::result::PkgResult, PkgError> {
    Package::new(c, s, &layer(c.seed), true)?.run(None)
}

fn corpus() -> Vec<(String, PkgCfg, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testbenches/regress/pkg");
    let mut out = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if !name.starts_with("issue19_") || !name.ends_with(".toml") {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        let expect = text.lines().find_map(|l| l.split_once("Expect: ").map(|(_, e)| e.trim().to_string())).unwrap_or_else(|| panic!("{name}: no `Expect:` line"));
        let c: PkgCfg = toml::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        out.push((name, c, expect));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    // A missing corpus fails rather than passing vacuously.
    assert!(out.len() >= 20, "{} issue19 cases in {}", out.len(), dir.display());
    out
}

#[test]
fn issue19_configs_that_validate_simulate() {
    let mut failures = Vec::new();
    for (name, mut c, expect) in corpus() {
        c.sim.watchdog_cycles = 50_000;
        if let Some(field) = expect.strip_prefix("refused ") {
            match c.validate() {
                Err(e) if e.field == field => {}
                other => failures.push(format!("{name}: expected a refusal naming {field}, got {other:?}")),
            }
            continue;
        }
        assert_eq!(expect, "runs.", "{name}");
        if let Err(e) = c.validate() {
            failures.push(format!("{name}: refused: {e}"));
            continue;
        }
        for s in Strategy::ALL {
            match run(&c, s) {
                Ok(r) if r.outputs_match_reference == Some(true) => {
                    if s == Strategy::Ep || s == Strategy::A4 {
                        // Fast-forward (the wake set's far landings) changes nothing.
                        let slow = PkgCfg { sim: hw::pkg::config::PkgSimCfg { fast_forward: false, ..c.sim.clone() }, ..c.clone() };
                        let r2 = run(&slow, s).unwrap_or_else(|e| panic!("{name} {s:?} without fast-forward: {e}"));
                        if r2.latency_cycles != r.latency_cycles || r2.ddr_bytes != r.ddr_bytes || r2.replays != r.replays {
                            failures.push(format!("{name} {s:?}: {} cycles with fast-forward, {} without", r.latency_cycles, r2.latency_cycles));
                        }
                    }
                }
                Ok(_) => failures.push(format!("{name} {s:?}: outputs differ from the reference")),
                Err(e) => failures.push(format!("{name} {s:?}: {e}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Link bounds come from the engine's constant, named by the field that sets the latency.
#[test]
fn link_bounds_name_their_field() {
    let mut c = PkgCfg { ddr_phase_ps: 1, ..PkgCfg::default() };
    // 1 ps ticks: the ejection link is (st + 2) x 1250 ticks, at most 32767.
    c.router.st_delay = 24;
    assert!(c.validate().is_ok(), "{:?}", c.validate());
    c.router.st_delay = 25;
    assert_eq!(c.validate().unwrap_err().field, "router.st_delay");
    let mut c = PkgCfg::default();
    c.ucie.fdi_latency_ps = 20_000_000;
    assert!(c.validate().is_ok());
    c.ucie.fdi_latency_ps = 21_000_000;
    let e = c.validate().unwrap_err();
    assert_eq!(e.field, "ucie.fdi_latency_ps");
    assert!(e.reason.contains("32767 ticks"), "{e}");
}

/// The BER bound is where a flit's chance to pass its CRC falls below 1%.
#[test]
fn ber_bound_is_the_flit_pass_chance() {
    use hw::pkg::ucie::{flit_pass_probability, max_ber, MIN_FLIT_PASS};
    let b = max_ber();
    assert!((flit_pass_probability(b) - MIN_FLIT_PASS).abs() < 1e-9);
    let mut c = PkgCfg::default();
    c.ucie.ber = b * 0.999;
    assert!(c.validate().is_ok());
    c.ucie.ber = b * 1.001;
    assert_eq!(c.validate().unwrap_err().field, "ucie.ber");
    c.ucie.ber = 5e-3;
    assert_eq!(c.validate().unwrap_err().field, "ucie.ber");
}

/// A run stopped by its cycle limit says so, in its own words — not "no forward progress for
/// 0 cycles" (issue 19).
#[test]
fn max_cycles_stop_says_so() {
    let mut c = PkgCfg::default();
    c.sim.max_cycles = 300;
    let e = run(&c, Strategy::A3).unwrap_err();
    assert!(matches!(e, PkgError::Timeout(300, _)), "{e}");
    let m = e.to_string();
    assert!(m.contains("did not finish within sim.max_cycles = 300") && m.contains("still making progress"), "{m}");
    assert!(!m.contains("no forward progress"), "{m}");
}

/// A link that stops returning credits stalls the package while its blocks sleep between
/// events (nothing is busy at the next tick, the DDR still wakes for refresh): the watchdog
/// counts that stretch and ends the run naming the blocked buffer, within its limit (issue
/// 19: it only counted "busy" stretches and such runs went on to `max_cycles`).
#[test]
fn watchdog_catches_a_stall_between_events() {
    let mut c = PkgCfg::default();
    c.sim.watchdog_cycles = 20_000;
    // Before the fix the run went on to this limit (a Timeout, failing the match below).
    c.sim.max_cycles = 300_000;
    let mut p = Package::new(&c, Strategy::Ep, &layer(0), true).unwrap();
    for part in p.parts.iter_mut() {
        for t in part.tiles.iter_mut() {
            for port in 0..4 {
                t.router.fault_zero_credits(port); // the four mesh ports (4 is Local)
            }
        }
    }
    let e = p.run(None).unwrap_err();
    let PkgError::Watchdog(r) = &e else { panic!("expected the watchdog, got {e}") };
    let r: &WatchdogReport = r;
    assert!(r.stalled_for >= 20_000 && r.cycle < 200_000, "{r}");
    assert!(r.blocked.iter().any(|b| b.contains(".router.in_") && b.contains("credits 0")), "{r}");
}

// ----- wafer die rates (finding 10)

fn wafer_layer_cycles(c: &WaferCfg) -> Result<u64, String> {
    let model = sched::models::model_by_name("olmoe-1b-7b").unwrap();
    let m = sched::wafer::map(c.mapping, c.geom(), c.tp, c.dp, c.all_gather).map_err(|e| e.to_string())?;
    let routing = sched::wafer::routing::generated_routing(&model, c.dp, c.tokens_per_group, 0.5, c.seed).unwrap();
    let prog = hw::wafer::program::build(c, &model, &m, &routing);
    let mut w = hw::wafer::Wafer::new(c, &prog, 1).map_err(|e| e.to_string())?;
    // The run layer's one wafer call, at the wafer's default bounds (testbenches::run::limits).
    let r = testbenches::run::wafer::simulate(&mut w, c, &testbenches::run::RunOptions::default(), testbenches::run::wafer::WaveEnd::Layer).map_err(|e| e.to_string())?;
    Ok(r.layer_cycles)
}

fn small_wafer() -> WaferCfg {
    WaferCfg { die_cols: 2, die_rows: 2, tp: 2, dp: 2, tokens_per_group: 8, micro_batches: 2, ..WaferCfg::default() }
}

#[test]
fn starved_die_rates_are_refused_not_wrapped() {
    let base = wafer_layer_cycles(&small_wafer()).unwrap();
    // A slower die is slower (1000x less compute: the attention kernels are compute-bound).
    let mut slow = small_wafer();
    slow.die.fp16_tflops = 2.25;
    assert!(wafer_layer_cycles(&slow).unwrap() > base);
    for (field, f) in [
        ("die.fp16_tflops", &(|c: &mut WaferCfg| c.die.fp16_tflops = 1e-15) as &dyn Fn(&mut WaferCfg)),
        ("die.int8_tops", &|c: &mut WaferCfg| c.die.int8_tops = 1e-15),
        ("die.hbm_tbps", &|c: &mut WaferCfg| c.die.hbm_tbps = 1e-15),
        ("die.compute_efficiency", &|c: &mut WaferCfg| c.die.compute_efficiency = 1e-300),
        ("die.hbm_efficiency", &|c: &mut WaferCfg| c.die.hbm_efficiency = 1e-300),
    ] {
        let mut c = small_wafer();
        f(&mut c);
        let e = wafer_layer_cycles(&c).expect_err(field);
        assert!(e.contains(&format!("`{field}`")), "{field}: {e}");
    }
}

#[test]
fn wafer_clock_and_element_sizes_mean_hardware() {
    let mut c = WaferCfg { clock_mhz: 3.0, ..WaferCfg::default() };
    let e = c.validate().unwrap_err();
    assert_eq!(e.field, "clock_mhz");
    assert!(e.reason.contains("whole number of ps"), "{e}");
    c.clock_mhz = 500.0;
    assert!(c.validate().is_ok());
    for f in ["dispatch_elem_bytes", "combine_elem_bytes"] {
        let mut c = WaferCfg::default();
        if f == "dispatch_elem_bytes" { c.dispatch_elem_bytes = 3 } else { c.combine_elem_bytes = 3 }
        assert_eq!(c.validate().unwrap_err().field, f);
    }
}

/// Past the validation floor, a kernel too long to count (a huge layer on a slow die) is
/// refused when the program is built, naming the rate, never saturated.
#[test]
fn kernel_cycles_past_the_counting_bound_are_refused() {
    use hw::wafer::compute::{KernelCost, MAX_KERNEL_CYCLES};
    let die = hw::wafer::DieCfg::default();
    let ok = KernelCost { flops: 1e12, bytes: 1e9, fp16: true };
    assert!(ok.checked_cycles(&die, 1000.0).unwrap() < MAX_KERNEL_CYCLES);
    let huge = KernelCost { flops: 1e30, bytes: 0.0, fp16: true };
    assert_eq!(huge.checked_cycles(&die, 1000.0).unwrap_err().field, "die.fp16_tflops");
    let huge = KernelCost { flops: 0.0, bytes: 1e30, fp16: false };
    assert_eq!(huge.checked_cycles(&die, 1000.0).unwrap_err().field, "die.hbm_tbps");
    assert_eq!(huge.cycles(&die, 1000.0), u64::MAX);
}

/// A noisy link (a BER validation accepts) whose flits keep failing their CRC for longer than
/// the watchdog allows: the watchdog's report names the link and its replay state — a
/// replay is not progress.
#[test]
fn watchdog_names_a_replaying_link() {
    let mut c = PkgCfg::default();
    c.ucie.ber = 2e-3;
    c.sim.watchdog_cycles = 300;
    let e = run(&c, Strategy::A3).unwrap_err();
    let PkgError::Watchdog(r) = &e else { panic!("expected the watchdog, got {e}") };
    let line = r.blocked.iter().find(|b| b.contains(".ucie_")).unwrap_or_else(|| panic!("no UCIe line: {r}"));
    assert!(line.contains("replays") && line.contains("waits for an intact copy of flit"), "{line}");
}

/// A stall that starts while flits still cross the die-to-die links (one router port of one
/// chiplet stops returning credits; the rest of the package runs on until it waits on it):
/// the watchdog ends the run at the same cycle, after the same stall, naming the same
/// buffers, whether fast-forward skips ticks (and the adapters run their edge between two
/// core edges ahead, untraced) or every tick is evaluated, on one thread or two.
#[test]
fn watchdog_report_is_the_same_with_and_without_fast_forward() {
    let mut reports = Vec::new();
    for (tile, port) in [(0usize, 0usize), (1, 2), (3, 1), (2, 3)] {
        for s in [Strategy::Ep, Strategy::A3] {
            let mut got = Vec::new();
            for (ff, threads) in [(true, 1), (false, 1), (true, 2)] {
                let mut c = PkgCfg::default();
                c.sim.watchdog_cycles = 3_000;
                c.sim.fast_forward = ff;
                c.sim.threads = threads;
                let mut p = Package::new(&c, s, &layer(0), true).unwrap();
                p.parts.iter_mut().flat_map(|part| part.tiles.iter_mut()).filter(|t| t.id.idx() == tile).for_each(|t| t.router.fault_zero_credits(port));
                got.push(match p.run(None) {
                    Err(PkgError::Watchdog(r)) => r.to_string(),
                    other => format!("{:?}", other.map(|r| r.cycles)),
                });
            }
            assert_eq!(got[0], got[1], "tile {tile} port {port} {s:?}: fast-forward");
            assert_eq!(got[0], got[2], "tile {tile} port {port} {s:?}: two threads");
            reports.push(got.swap_remove(0));
        }
    }
    // The faults do stall these runs (else the comparison above says little).
    assert!(reports.iter().filter(|r| r.contains("no forward progress")).count() >= 4, "{reports:#?}");
}
