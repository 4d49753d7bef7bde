//! `waferstream bench [all|noc|package]`: simulation speed.
//!
//! * `all` (default): the whole speed suite of `testbenches::run::bench` (noc, package,
//!   package traced, wafer, balance, a sweep's points per minute) in one table, with the
//!   run-to-run noise of each figure; `--save FILE` keeps it, `--compare FILE` flags every
//!   figure that moved by more than the noise either run measured.
//! * `noc`: measured the way the BookSim2 reference was (reference/booksim
//!   "Speed": 8x8 mesh, 1-flit packets, uniform 0.30, one deterministic run, min/median/max
//!   wall time of repeated runs).
//! * `package`: one MoE layer on the chiplet package (issue 7: Qwen3-30B-A3B, 256 tokens,
//!   2x2, timing mode, FSE-DP A3, one thread): wall time, simulated cycles, D2D flits and DDR
//!   bursts per second, peak memory; with `--waves true` (or a `--wave-dir`) also the cost
//!   of full VCD and FST tracing (the VCD of the default layer is about 1 GB, so tracing is
//!   opt-in).

use std::process::ExitCode;

use clap::Args;
use hw::noc::{run_point, NocCfg};
use serde::Serialize;

use testbenches::run::package::{workload_from, PackageRun};
use testbenches::run::{limits, RunOptions, WaveSink};

use super::{ensure_parent, CliResult};

/// BookSim2's rate on the same kind of machine at 0.30 (reference/booksim/README.md).
pub const BOOKSIM_CYCLES_PER_S: f64 = 6550.0;

/// What to measure.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BenchTarget {
    /// The whole suite, one table (`--save`, `--compare`).
    #[default]
    All,
    /// The mesh NoC against BookSim2's reference.
    Noc,
    /// One MoE layer on the chiplet package.
    Package,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[arg(value_enum, default_value = "all")]
    pub target: BenchTarget,
    /// All: save the measured suite (JSON) for a later `--compare`.
    #[arg(long)]
    pub save: Option<std::path::PathBuf>,
    /// All: compare with a saved suite; exit 1 when a figure got worse by more than the
    /// noise either run measured.
    #[arg(long)]
    pub compare: Option<std::path::PathBuf>,
    /// All: small points and two repetitions (seconds; checks the plumbing, the figures
    /// mean nothing).
    #[arg(long)]
    pub quick: bool,
    /// Package: model of the measured layer.
    #[arg(long, default_value = limits::DEFAULT_MODEL)]
    pub model: String,
    /// Package: tokens of the measured layer, 1..=65536.
    #[arg(long, default_value_t = limits::DEFAULT_TOKENS)]
    pub tokens: u32,
    /// Package: chiplet array RxC (default: 2x2, or the --config file's).
    #[arg(long)]
    pub array: Option<String>,
    /// Package: package config (TOML, the `PkgCfg` fields), e.g.
    /// testbenches/configs/pkg-wide-sharded-reserve.toml, the FSE-DP paper's package (its PE
    /// array and sharded loading) (default: the built-in package, SPEC §3).
    #[arg(long)]
    pub config: Option<std::path::PathBuf>,
    /// Package: the one strategy measured.
    #[arg(long, default_value = "a3")]
    pub strategy: String,
    /// Package: also time fully traced runs, VCD and FST, written under --wave-dir (the
    /// default layer's VCD is about 1 GB) (default: false, or true when --wave-dir is given).
    #[arg(long, action = clap::ArgAction::Set)]
    pub waves: Option<bool>,
    /// Package: directory of the traced runs' files (default: out/bench; giving it turns
    /// --waves on).
    #[arg(long)]
    pub wave_dir: Option<std::path::PathBuf>,
    /// Noc: routers per side.
    #[arg(long, default_value_t = 8)]
    pub k: u32,
    /// Noc: injection rate (flits/node/cycle).
    #[arg(long, default_value_t = 0.30)]
    pub rate: f64,
    /// Thread counts to measure (default: noc 1,2; package 1).
    #[arg(long, value_delimiter = ',')]
    pub threads: Vec<u32>,
    /// Repetitions per thread count (default: noc 5; package 3).
    #[arg(long)]
    pub repeat: Option<u32>,
    /// Results JSON (default: none).
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
}

#[derive(Serialize)]
struct BenchRow {
    k: u32,
    rate: f64,
    threads: u32,
    cycles: u64,
    wall_min: f64,
    wall_median: f64,
    wall_max: f64,
    cycles_per_second: f64,
    router_cycles_per_second: f64,
    /// Only on BookSim2's reference configuration (8x8 at 0.30); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    vs_booksim: Option<f64>,
}

pub fn run(mut a: BenchArgs) -> CliResult<ExitCode> {
    if a.target != BenchTarget::All {
        if let Some((_, flag)) = [(a.save.is_some(), "--save"), (a.compare.is_some(), "--compare"), (a.quick, "--quick")].into_iter().find(|(set, _)| *set) {
            return Err(format!("{flag}: a flag of the whole suite (`bench` or `bench all`), not of `bench {}`", if a.target == BenchTarget::Noc { "noc" } else { "package" }));
        }
    }
    match a.target {
        BenchTarget::Package => return bench_package(a),
        BenchTarget::All => return bench_all(a),
        BenchTarget::Noc => {}
    }
    if a.threads.is_empty() {
        a.threads = vec![1, 2];
    }
    let repeat = a.repeat.unwrap_or(5);
    if repeat == 0 {
        return Err("--repeat 0: at least one repetition is needed".into());
    }
    if a.threads.is_empty() || a.threads.contains(&0) {
        return Err("--threads: thread counts must be >= 1".into());
    }
    if let Some(p) = &a.json {
        super::check_writable(p)?;
    }
    // BookSim2's figure was measured on 8x8 at 0.30 only; elsewhere a ratio means nothing.
    let reference = a.k == 8 && (a.rate - 0.30).abs() < 1e-12;
    let mut rows = Vec::new();
    println!("{:>7} {:>7} {:>9} {:>9} {:>9} {:>12} {:>14} {:>9}", "threads", "cycles", "min s", "median s", "max s", "cycles/s", "router-cyc/s", "x BookSim");
    for &t in &a.threads {
        let mut cfg = NocCfg::default();
        cfg.mesh.k = a.k;
        cfg.traffic.rate = a.rate;
        cfg.sim.threads = t;
        cfg.validate().map_err(|e| e.to_string())?;
        let mut walls = Vec::new();
        let mut cycles = 0;
        for _ in 0..repeat {
            let start = std::time::Instant::now();
            let (r, _) = run_point(&cfg, None, &mut |_| {}).map_err(|e| e.to_string())?;
            walls.push(start.elapsed().as_secs_f64());
            cycles = r.cycles;
        }
        walls.sort_by(|x, y| x.partial_cmp(y).unwrap());
        let med = walls[walls.len() / 2];
        let cps = cycles as f64 / med;
        let row = BenchRow {
            k: a.k,
            rate: a.rate,
            threads: t,
            cycles,
            wall_min: walls[0],
            wall_median: med,
            wall_max: *walls.last().unwrap(),
            cycles_per_second: cps,
            router_cycles_per_second: cps * (a.k * a.k) as f64,
            vs_booksim: reference.then(|| cps / BOOKSIM_CYCLES_PER_S),
        };
        println!(
            "{:>7} {:>7} {:>9.4} {:>9.4} {:>9.4} {:>12.0} {:>14.0} {:>9}",
            row.threads, row.cycles, row.wall_min, row.wall_median, row.wall_max, row.cycles_per_second, row.router_cycles_per_second, row.vs_booksim.map_or("-".to_string(), |v| format!("{v:.1}"))
        );
        rows.push(row);
    }
    if reference {
        println!("(median wall time incl. network construction; BookSim2 reference: {BOOKSIM_CYCLES_PER_S} cycles/s at 0.30 on 8x8)");
    } else {
        println!("(median wall time incl. network construction; absolute figures: BookSim2's reference is 8x8 at 0.30 only, so no ratio for k={} rate={})", a.k, a.rate);
    }
    if let Some(p) = &a.json {
        ensure_parent(p)?;
        std::fs::write(p, serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())? + "\n").map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The whole suite (`testbenches::run::bench::suite`), one table; save and compare.
fn bench_all(a: BenchArgs) -> CliResult<ExitCode> {
    use testbenches::run::bench::{compare, load, save, suite, SuiteOptions};
    // Read the saved suite and check the output before the minutes of measuring.
    let noc_flag = [(a.k != 8, "--k"), ((a.rate - 0.30).abs() > 0.0, "--rate"), (!a.threads.is_empty(), "--threads"), (a.repeat.is_some(), "--repeat"), (a.json.is_some(), "--json")]
        .into_iter()
        .chain([(a.model != limits::DEFAULT_MODEL, "--model"), (a.tokens != limits::DEFAULT_TOKENS, "--tokens"), (a.array.is_some(), "--array"), (a.config.is_some(), "--config"), (a.strategy != "a3", "--strategy"), (a.waves.is_some(), "--waves")])
        .find(|(set, _)| *set);
    if let Some((_, flag)) = noc_flag {
        return Err(format!("{flag}: a flag of `bench noc` / `bench package`; the whole suite (`bench`, `bench all`) takes --save, --compare, --quick and --wave-dir"));
    }
    let old = a.compare.as_deref().map(load).transpose().map_err(|e| format!("--compare: {e}"))?;
    if let Some(p) = &a.save {
        super::check_writable(p)?;
    }
    let o = SuiteOptions { quick: a.quick, wave_dir: a.wave_dir.clone() };
    println!("{:<22} {:>14} {:>14} {:>14} {:>7}  {}", "figure", "median", "best", "worst", "noise", "what");
    let s = suite(&o, |f| println!("{:<22} {:>14.4e} {:>14.4e} {:>14.4e} {:>6.1}%  {} ({})", f.name, f.value, f.best, f.worst, f.noise * 100.0, f.what, f.unit)).map_err(|e| e.to_string())?;
    if let Some(p) = &a.save {
        save(&s, p).map_err(|e| e.to_string())?;
        println!("wrote {}", p.display());
    }
    let Some(old) = old else { return Ok(ExitCode::SUCCESS) };
    let (moved, notes) = compare(&old, &s);
    for n in &notes {
        println!("note: {n}");
    }
    if moved.is_empty() {
        println!("compare: no figure moved beyond its noise (floor {:.0} %)", testbenches::run::bench::NOISE_FLOOR * 100.0);
        return Ok(ExitCode::SUCCESS);
    }
    for m in &moved {
        println!("{} {:<22} {:.4e} -> {:.4e} ({:+.1} %, noise {:.1} %)", if m.regression { "SLOWER" } else { "faster" }, m.name, m.old, m.new, m.change * 100.0, m.threshold * 100.0);
    }
    Ok(if moved.iter().any(|m| m.regression) { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// The process's peak resident memory, bytes (Linux `VmHWM`; 0 where unknown).
fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)).and_then(|k| k.parse::<u64>().ok()))
        .map_or(0, |kb| kb * 1024)
}

#[derive(Serialize)]
struct PkgBench {
    model: String,
    tokens: u32,
    array: String,
    /// The `--config` file (absent: the built-in package).
    #[serde(skip_serializing_if = "Option::is_none")]
    config: Option<String>,
    strategy: String,
    threads: u32,
    latency_cycles: u64,
    d2d_flits: u64,
    ddr_bursts: u64,
    wall_min: f64,
    wall_median: f64,
    wall_max: f64,
    cycles_per_second: f64,
    flits_per_second: f64,
    ddr_bursts_per_second: f64,
    /// Peak resident memory of the process after the untraced runs.
    peak_rss_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    vcd: Option<TracedRun>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fst: Option<TracedRun>,
    /// FST bytes / VCD bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    fst_over_vcd: Option<f64>,
}

#[derive(Serialize)]
struct TracedRun {
    path: String,
    bytes: u64,
    wall: f64,
    /// Traced wall / untraced median wall.
    slowdown: f64,
}

fn bench_package(a: BenchArgs) -> CliResult<ExitCode> {
    use super::package::{parse_array, parse_strategies};
    let repeat = a.repeat.unwrap_or(3);
    if repeat == 0 {
        return Err("--repeat 0: at least one repetition is needed".into());
    }
    if let Some(p) = &a.json {
        super::check_writable(p)?;
    }
    let strategies = parse_strategies(&a.strategy)?;
    let [strategy] = strategies.as_slice() else { return Err("--strategy: give one strategy for the package bench".into()) };
    let model = sched::models::model_by_name(&a.model).map_err(|e| format!("--model: {e}"))?;
    // Flags over the config file over the built-in package.
    let mut cfg = match &a.config {
        Some(p) => super::package::load_cfg(p)?,
        None => hw::pkg::config::PkgCfg::default(),
    };
    if let Some(s) = &a.array {
        (cfg.rows, cfg.cols) = parse_array(s)?;
    }
    let threads = match a.threads.as_slice() {
        [] => cfg.sim.threads,
        [t] if *t >= 1 => *t,
        _ => return Err("--threads: give one thread count (>= 1) for the package bench".into()),
    };
    cfg.sim.threads = threads;
    cfg.validate().map_err(|e| e.to_string())?;
    cfg.validate_for(model.d_ffn).map_err(|e| e.to_string())?;
    limits::check_u64("--tokens", a.tokens as u64, limits::BENCH_TOKENS).map_err(|e| e.to_string())?;
    let work = workload_from(&model, a.tokens, limits::DEFAULT_SKEW, cfg.seed.max(1), None, None, None, model.d_model, model.d_ffn).map_err(|e| e.to_string())?;
    let run = PackageRun::new(cfg.clone(), model.clone(), work, vec![*strategy], false, hw::pkg::package::PkgRtl::default()).map_err(|e| e.to_string())?;
    // Tracing is opt-in: the default layer's VCD is about 1 GB.
    let traced_too = a.waves.unwrap_or(a.wave_dir.is_some());
    let wave_dir = a.wave_dir.clone().unwrap_or_else(|| "out/bench".into());
    let (vcd_path, fst_path) = (wave_dir.join("bench-package.vcd"), wave_dir.join("bench-package.fst"));
    if traced_too {
        for p in [&vcd_path, &fst_path] {
            super::check_writable(p)?;
        }
    }
    let package = a.config.as_ref().map_or("built-in package".to_string(), |p| p.display().to_string());
    println!("bench package: {} {} tokens, {}x{} array, {}, {} thread(s), {} repetitions, {package}", model.name, a.tokens, cfg.rows, cfg.cols, strategy.name(), threads, repeat);
    let mut walls = Vec::new();
    let mut last = None;
    for i in 0..repeat {
        let t0 = std::time::Instant::now();
        let r = run.run_single(&RunOptions { batch_jobs: Some(1), ..Default::default() }).map_err(|e| e.to_string())?;
        walls.push(t0.elapsed().as_secs_f64());
        println!("  run {}: {:.3} s, {} cycles", i + 1, walls[i as usize], r.latency_cycles);
        last = Some(r);
    }
    let r = last.expect("repeat >= 1");
    let peak_rss = peak_rss_bytes();
    walls.sort_by(|x, y| x.total_cmp(y));
    let med = walls[walls.len() / 2];
    let flits = r.d2d_bytes / cfg.flit_bytes as u64;
    let bursts = r.ddr_bytes / cfg.ddr.burst_bytes() as u64;
    let traced = |path: &std::path::Path, fmt: waves::WaveFormat| -> CliResult<TracedRun> {
        let t0 = std::time::Instant::now();
        let t = run.run_single(&RunOptions { waves: Some(WaveSink { path: path.to_path_buf(), format: fmt }), batch_jobs: Some(1), ..Default::default() }).map_err(|e| e.to_string())?;
        let wall = t0.elapsed().as_secs_f64();
        if t.latency_cycles != r.latency_cycles {
            return Err(format!("internal: the traced run took {} cycles, the untraced {}", t.latency_cycles, r.latency_cycles));
        }
        let bytes = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?.len();
        println!("  traced {}: {:.3} s ({:.2}x untraced), {:.1} MB", path.display(), wall, wall / med, bytes as f64 / 1e6);
        Ok(TracedRun { path: path.display().to_string(), bytes, wall, slowdown: wall / med })
    };
    let (vcd, fst) = if traced_too { (Some(traced(&vcd_path, waves::WaveFormat::Vcd)?), Some(traced(&fst_path, waves::WaveFormat::Fst)?)) } else { (None, None) };
    let row = PkgBench {
        model: model.name.clone(),
        tokens: a.tokens,
        array: format!("{}x{}", cfg.rows, cfg.cols),
        config: a.config.as_ref().map(|p| p.display().to_string()),
        strategy: strategy.name().into(),
        threads,
        latency_cycles: r.latency_cycles,
        d2d_flits: flits,
        ddr_bursts: bursts,
        wall_min: walls[0],
        wall_median: med,
        wall_max: *walls.last().expect("non-empty"),
        cycles_per_second: r.latency_cycles as f64 / med,
        flits_per_second: flits as f64 / med,
        ddr_bursts_per_second: bursts as f64 / med,
        peak_rss_bytes: peak_rss,
        fst_over_vcd: match (&vcd, &fst) {
            (Some(v), Some(f)) if v.bytes > 0 => Some(f.bytes as f64 / v.bytes as f64),
            _ => None,
        },
        vcd,
        fst,
    };
    println!(
        "wall min/median/max {:.3}/{:.3}/{:.3} s; {:.2e} simulated cycles/s, {:.2e} D2D flits/s, {:.2e} DDR bursts/s; peak RSS {:.1} MB{}",
        row.wall_min,
        row.wall_median,
        row.wall_max,
        row.cycles_per_second,
        row.flits_per_second,
        row.ddr_bursts_per_second,
        row.peak_rss_bytes as f64 / 1e6,
        row.fst_over_vcd.map_or(String::new(), |x| format!("; FST/VCD bytes {x:.3}"))
    );
    if let Some(p) = &a.json {
        ensure_parent(p)?;
        std::fs::write(p, serde_json::to_string_pretty(&row).map_err(|e| e.to_string())? + "\n").map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        println!("wrote {}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}
