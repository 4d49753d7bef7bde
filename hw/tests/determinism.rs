//! Stepping never changes results: serial vs 2 vs 3 threads, fast-forward on vs off, give
//! identical statistics and byte-identical VCD/FST waveforms.

use std::path::{Path, PathBuf};

use hw::noc::measure::PointResult;
use hw::noc::mesh::Mesh;
use hw::noc::router::RouterStats;
use hw::noc::terminal::NiStats;
use hw::noc::{run_point, NocCfg, WaveOut};
use waves::{DiffResult, WaveFilter, WaveFormat, WaveWriter};

fn tmp_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("determinism").join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn cfg(rate: f64, seed: u64) -> NocCfg {
    let mut c = NocCfg::default();
    c.mesh.k = 4;
    c.traffic.rate = rate;
    c.traffic.seed = seed;
    c.traffic.packet_size = 2;
    // Shorter sample periods keep the runs small; the measurement logic is unchanged.
    c.measure.sample_period = 400;
    c
}

/// Everything of a point that must not depend on stepping (wall clock and evaluated cycles
/// excluded by design).
#[derive(Debug, PartialEq)]
struct Outcome {
    rate: u64,
    status: String,
    saturated: bool,
    avg_packet_latency: u64,
    avg_network_latency: u64,
    avg_flit_latency: u64,
    max_packet_latency: u64,
    accepted_flit_rate: u64,
    injected_flit_rate: u64,
    avg_hops: u64,
    measured_packets: u64,
    sample_periods: u64,
    cycles: u64,
    router: RouterStats,
    ni: NiStats,
    router_totals: RouterStats,
}

fn outcome(r: &PointResult, mesh: &Mesh) -> Outcome {
    Outcome {
        rate: r.rate.to_bits(),
        status: format!("{:?}", r.status),
        saturated: r.saturated,
        avg_packet_latency: r.avg_packet_latency.to_bits(),
        avg_network_latency: r.avg_network_latency.to_bits(),
        avg_flit_latency: r.avg_flit_latency.to_bits(),
        max_packet_latency: r.max_packet_latency,
        accepted_flit_rate: r.accepted_flit_rate.to_bits(),
        injected_flit_rate: r.injected_flit_rate.to_bits(),
        avg_hops: r.avg_hops.to_bits(),
        measured_packets: r.measured_packets,
        sample_periods: r.sample_periods,
        cycles: r.cycles,
        router: r.router,
        ni: mesh.ni_totals(),
        router_totals: mesh.router_totals(),
    }
}

struct Run {
    outcome: Outcome,
    evaluated: u64,
    cycles: u64,
    wave: Option<Vec<u8>>,
}

/// Runs one point, with a waveform of `format` (all signals, or `filter`) when given.
fn run(c: &NocCfg, wave: Option<(&Path, WaveFormat, &WaveFilter)>) -> Run {
    match wave {
        None => {
            let (r, mesh) = run_point(c, None, &mut |_| {}).unwrap();
            Run { outcome: outcome(&r, &mesh), evaluated: r.evaluated_cycles, cycles: r.cycles, wave: None }
        }
        Some((path, format, filter)) => {
            let signals = Mesh::new(c).unwrap().signals();
            let mut w = WaveWriter::create(path, format, c.mesh.period_ps(), &signals, filter).unwrap();
            assert!(w.selected_count() > 0);
            let (r, mesh) = run_point(c, Some(WaveOut { sink: &mut w }), &mut |_| {}).unwrap();
            w.finish(r.cycles).unwrap();
            let bytes = std::fs::read(path).unwrap();
            Run { outcome: outcome(&r, &mesh), evaluated: r.evaluated_cycles, cycles: r.cycles, wave: Some(bytes) }
        }
    }
}

const MODES: [(u32, bool); 6] = [(1, true), (1, false), (2, true), (2, false), (3, true), (3, false)];

fn check_all_modes(rate: f64, format: Option<WaveFormat>, dir_name: &str) -> Vec<Run> {
    let dir = tmp_dir(dir_name);
    let filter = WaveFilter::default();
    let mut runs = Vec::new();
    for (threads, ff) in MODES {
        let mut c = cfg(rate, 7);
        c.sim.threads = threads;
        c.sim.fast_forward = ff;
        let ext = match format {
            Some(WaveFormat::Fst) => "fst",
            _ => "vcd",
        };
        let path = dir.join(format!("t{threads}_ff{}.{ext}", ff as u8));
        let r = run(&c, format.map(|f| (path.as_path(), f, &filter)));
        if !ff {
            assert_eq!(r.evaluated, r.cycles, "without fast-forward every cycle is evaluated");
        }
        runs.push(r);
    }
    let first = &runs[0];
    assert!(first.outcome.measured_packets > 0);
    for (i, r) in runs.iter().enumerate().skip(1) {
        let (threads, ff) = MODES[i];
        assert_eq!(r.outcome, first.outcome, "rate {rate}: threads {threads}, fast_forward {ff} differs from serial+FF");
        if let (Some(a), Some(b)) = (&first.wave, &r.wave) {
            assert!(a == b, "rate {rate}: waveform of threads {threads}, fast_forward {ff} differs from serial+FF ({} vs {} bytes)", b.len(), a.len());
        }
    }
    runs
}

#[test]
fn stats_identical_across_threads_and_fast_forward() {
    check_all_modes(0.2, None, "stats");
}

#[test]
fn vcd_identical_across_threads_and_fast_forward() {
    let runs = check_all_modes(0.2, Some(WaveFormat::Vcd), "vcd_0.2");
    let text = String::from_utf8(runs[0].wave.clone().unwrap()).unwrap();
    assert!(text.contains("$scope module r_1_2 $end") || text.contains("r_1_2"), "scope r_1_2 missing from the VCD");
    assert!(text.lines().filter(|l| l.starts_with('#')).count() > 100, "too few timestamps");
}

#[test]
fn fst_identical_across_threads_and_fast_forward() {
    let runs = check_all_modes(0.2, Some(WaveFormat::Fst), "fst_0.2");
    assert!(runs[0].wave.as_ref().unwrap().len() > 1000);
}

/// At a low rate, fast-forward really skips cycles, and still changes nothing.
#[test]
fn low_rate_fast_forward_skips_cycles_and_changes_nothing() {
    let runs = check_all_modes(0.01, Some(WaveFormat::Vcd), "vcd_0.01");
    for (i, r) in runs.iter().enumerate() {
        let (threads, ff) = MODES[i];
        if ff {
            assert!(r.evaluated < r.cycles, "threads {threads}: fast-forward evaluated {} of {} cycles", r.evaluated, r.cycles);
        } else {
            assert_eq!(r.evaluated, r.cycles);
        }
    }
}

/// FST at low rate too (the FST writer sees gaps in time).
#[test]
fn low_rate_fst_identical_serial_vs_parallel_ff() {
    let dir = tmp_dir("fst_0.01");
    let filter = WaveFilter::default();
    let mut a = cfg(0.01, 3);
    a.sim.fast_forward = false;
    let mut b = cfg(0.01, 3);
    b.sim.threads = 2;
    let ra = run(&a, Some((&dir.join("a.fst"), WaveFormat::Fst, &filter)));
    let rb = run(&b, Some((&dir.join("b.fst"), WaveFormat::Fst, &filter)));
    assert_eq!(ra.outcome, rb.outcome);
    assert!(rb.evaluated < rb.cycles);
    assert!(ra.wave == rb.wave, "FST bytes differ");
    match waves::diff(&dir.join("a.fst"), &dir.join("b.fst")).unwrap() {
        DiffResult::Same { changes, .. } => assert!(changes > 0),
        other => panic!("expected Same, got {other}"),
    }
}

/// A scope glob plus a cycle window writes only the selected scopes; `waves::diff` says Same
/// for serial vs parallel and Differ for two seeds.
#[test]
fn scope_glob_and_window() {
    let dir = tmp_dir("glob");
    let filter = WaveFilter { globs: vec!["top.mesh.r_1_*".into()], window: Some((100, 2000)) };
    let mut serial = cfg(0.2, 7);
    serial.sim.threads = 1;
    let mut par = cfg(0.2, 7);
    par.sim.threads = 2;
    let mut other_seed = cfg(0.2, 8);
    other_seed.sim.threads = 1;
    let (pa, pb, pc) = (dir.join("serial.vcd"), dir.join("par.vcd"), dir.join("seed8.vcd"));
    let ra = run(&serial, Some((&pa, WaveFormat::Vcd, &filter)));
    let rb = run(&par, Some((&pb, WaveFormat::Vcd, &filter)));
    run(&other_seed, Some((&pc, WaveFormat::Vcd, &filter)));
    assert!(ra.wave == rb.wave);

    // Only top, top.mesh and the four r_1_x routers (with their sub-scopes) are present.
    let scopes = waves::list_scopes(&pa).unwrap();
    assert!(!scopes.is_empty());
    for s in &scopes {
        let ok = s == "top" || s == "top.mesh" || s.starts_with("top.mesh.r_1_");
        assert!(ok, "unexpected scope {s} in {scopes:?}");
    }
    for x in 0..4 {
        let r = format!("top.mesh.r_1_{x}");
        assert!(scopes.contains(&r), "{r} missing from {scopes:?}");
        assert!(scopes.iter().any(|s| s.starts_with(&format!("{r}."))), "{r} has no sub-scopes");
    }
    assert!(!scopes.iter().any(|s| s.starts_with("top.mesh.r_0_") || s.starts_with("top.mesh.r_2_")));

    // Window: timestamps (ps, 1000 ps per cycle at 1 GHz) stay within [100, 2000) cycles.
    let st = waves::stats(&pa).unwrap();
    let period = serial.mesh.period_ps();
    assert!(st.start_time >= 100 * period, "starts at {} ps, window starts at cycle 100", st.start_time);
    assert!(st.end_time <= 2000 * period, "ends at {} ps, window ends at cycle 2000", st.end_time);
    assert!(st.changes > st.signals as u64, "no activity recorded in the window");

    // The full signal set, as declared, has the same r_1_* subset the file holds.
    let all = Mesh::new(&serial).unwrap().signals();
    let selected = all.iter().filter(|d| d.scope.len() >= 3 && d.scope[2].starts_with("r_1_")).count();
    assert_eq!(st.signals, selected);

    match waves::diff(&pa, &pb).unwrap() {
        DiffResult::Same { signals, changes } => {
            assert_eq!(signals, selected);
            assert!(changes > 0);
        }
        other => panic!("serial vs 2 threads: expected Same, got {other}"),
    }
    match waves::diff(&pa, &pc).unwrap() {
        DiffResult::Differ(d) => {
            assert!(d.signal.starts_with("top.mesh.r_1_"), "differing signal {}", d.signal);
            assert!(d.time >= 100 * period && d.time < 2000 * period);
            assert_ne!(d.a, d.b);
        }
        other => panic!("seed 7 vs seed 8: expected Differ, got {other}"),
    }
}

/// Forwards every change to a writer but claims no window and no filter, so the mesh logs
/// everything (the behaviour before issue 5's bounded tracing); the writer then drops what is
/// outside its window and globs.
struct Unbounded<'a>(&'a mut WaveWriter);
impl hw::harness::SignalSink for Unbounded<'_> {
    fn change(&mut self, cycle: u64, sig: usize, value: u64) -> Result<(), hw::Error> {
        Ok(self.0.change(cycle, sig, value)?)
    }
}

/// Bounded tracing (issue 5 item 11): the change logs record only the writer's window and
/// selected signals, and the mesh runs in pieces while tracing; the file is byte-identical
/// to one fed with every change, for windows inside, across the start of, and entirely past
/// the run, with fast-forward (low rate, skipped cycles around the window start) and threads.
#[test]
fn bounded_tracing_writes_the_same_bytes_as_full_logging() {
    let dir = tmp_dir("bounded");
    for (rate, window) in [(0.2, Some((150, 400))), (0.01, Some((777, 2345))), (0.2, Some((1_000_000, 1_000_010))), (0.2, None)] {
        for (threads, ff) in [(1, true), (2, false), (2, true)] {
            for format in [WaveFormat::Vcd, WaveFormat::Fst] {
                let mut c = cfg(rate, 5);
                c.sim.threads = threads;
                c.sim.fast_forward = ff;
                let filter = WaveFilter { globs: vec!["top.mesh.r_1_*".into(), "top.mesh.r_0_0.ni".into()], window };
                let ext = if format == WaveFormat::Fst { "fst" } else { "vcd" };
                let mut bytes = vec![];
                let (plain, plain_mesh) = run_point(&c, None, &mut |_| {}).unwrap();
                let plain = outcome(&plain, &plain_mesh);
                for (i, bounded) in [true, false].into_iter().enumerate() {
                    let path = dir.join(format!("{i}.{ext}"));
                    let signals = Mesh::new(&c).unwrap().signals();
                    let mut w = WaveWriter::create(&path, format, c.mesh.period_ps(), &signals, &filter).unwrap();
                    let (r, mesh) = if bounded {
                        run_point(&c, Some(WaveOut { sink: &mut w }), &mut |_| {}).unwrap()
                    } else {
                        run_point(&c, Some(WaveOut { sink: &mut Unbounded(&mut w) }), &mut |_| {}).unwrap()
                    };
                    assert_eq!(outcome(&r, &mesh), plain, "tracing (run in pieces) changed the results");
                    w.finish(r.cycles).unwrap();
                    bytes.push(std::fs::read(&path).unwrap());
                }
                assert!(bytes[0] == bytes[1], "rate {rate} window {window:?} threads {threads} ff {ff} {ext}: bounded tracing wrote different bytes");
            }
        }
    }
}
