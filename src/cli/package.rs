//! `waferstream package`: one MoE layer on the FSE-DP chiplet package, per strategy, in
//! timing mode (full model size, payload-free flits) or functional mode (small dimensions,
//! real int8 data checked bit-exact against the dense reference).
//!
//! Precedence: explicit flag > `--config` file (a `PkgCfg` TOML) > built-in default. The run
//! itself is `testbenches::run::package`; this module parses flags, checks output paths,
//! prints the table and writes the JSON.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use hw::pkg::config::{PkgCfg, Strategy};
use hw::pkg::result::PkgResult;
use testbenches::run::package::PackageInput;
use testbenches::run::{limits, RunOptions, WaveSink};

use super::{check_writable, ensure_parent, CliResult};

#[derive(Args, Debug, Clone, Default)]
pub struct PackageArgs {
    /// Model preset (dimensions, experts, top-k, shared experts) (default: qwen3-30b-a3b;
    /// functional with --functional).
    #[arg(long)]
    pub model: Option<String>,
    /// Tokens in the layer (one iteration), 1..=1048576 (default: 256; 32 with --functional).
    #[arg(long)]
    pub tokens: Option<u32>,
    /// Chiplet array RxC (square: 2x2, 3x3, 4x4) (default: 2x2, or the --config file's).
    #[arg(long)]
    pub array: Option<String>,
    /// Strategies, comma-separated: ep, ep-paper, hydra, hydra-oracle, a1..a5 (fse-dp = a3)
    #[arg(long, default_value = limits::DEFAULT_STRATEGIES)]
    pub strategy: String,
    /// Real int8 data through the dataflow, outputs checked against the dense reference
    /// (model `functional` by default: d_model 64, d_ffn 48, 16 experts, top-2).
    #[arg(long)]
    pub functional: bool,
    /// UCIe bit-error rate in [0, 1) (replay hides the errors) (default: 0, or the --config
    /// file's).
    #[arg(long)]
    pub ber: Option<f64>,
    /// Micro-slices per expert (default: 8, or the --config file's).
    #[arg(long)]
    pub micro_slices: Option<u32>,
    /// Ring-buffer slots per chiplet (default: 0 = sized from the on-chip memory, or the
    /// --config file's).
    #[arg(long)]
    pub ring_slots: Option<u32>,
    /// Override the model's d_model (default: the model's).
    #[arg(long)]
    pub d_model: Option<u32>,
    /// Override the model's d_ffn (default: the model's).
    #[arg(long)]
    pub d_ffn: Option<u32>,
    /// Routing trace (SPEC §8): experts and top-k from its header.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Iterations of the trace to run, A..B (each iteration's layers run in turn) (default:
    /// every iteration of a trace; 1 generated).
    #[arg(long)]
    pub iters: Option<String>,
    /// MoE layers of the trace to run, A..B (default: every layer of a trace; 1 generated).
    #[arg(long)]
    pub layers: Option<String>,
    /// Zipf skew of the generated routing, 0..=16 (default: 1.0).
    #[arg(long)]
    pub skew: Option<f64>,
    /// Seed of generated routing, functional data and bit errors (default: 0, or the
    /// --config file's; generated routing uses at least 1).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Package config (TOML, the `PkgCfg` fields) (default: the built-in package, SPEC §3).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Worker threads of one simulation, 1..=64 (default: 1, or the --config file's).
    #[arg(long)]
    pub threads: Option<u32>,
    /// Layer batches of a strategy simulated at once, each on its own package, when they do
    /// not depend on each other (every strategy but A5); 0 = all cores ÷ --threads (default:
    /// the --config file's `sim.batch_jobs`, else 0). Results do not depend on it.
    #[arg(long)]
    pub batch_jobs: Option<u32>,
    /// Step every edge (results are identical; for checking) (default: fast-forward over
    /// edges where only counters run).
    #[arg(long)]
    pub no_fast_forward: bool,
    /// Results JSON (default: none).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Waveforms of the run's first layer batch (one file per strategy: NAME-STRATEGY.vcd
    /// when several) (default: none).
    #[arg(long)]
    pub vcd: Option<PathBuf>,
    /// As --vcd, in FST (default: none).
    #[arg(long)]
    pub fst: Option<PathBuf>,
    /// GTKWave save file for the dump: signals grouped by block (router, chiplet, IO die,
    /// die, link), one per waveform file (NAME-<part>.gtkw when there are several).
    #[arg(long)]
    pub gtkw: Option<PathBuf>,
    /// Write plots (SVG) into this directory: per-chiplet activity timeline per strategy,
    /// PE utilization over time, on-chip memory, cycle breakdown (default: no plots).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Print nothing but errors (no header, table or progress).
    #[arg(long)]
    pub quiet: bool,
    /// Run this controller's rust-hdl RTL block inside the package in place of its CL model
    /// (same stats, same waveforms; slower) (default: none, every block CL).
    #[arg(long, value_enum)]
    pub rtl: Option<RtlBlock>,
}

/// Controllers with an RTL stand-in for `package --rtl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RtlBlock {
    /// The IO-die scheduler (`iodie_scheduler`).
    Scheduler,
    /// Every chiplet's controller (`chiplet_ctrl`).
    ChipletCtrl,
    /// Every chiplet's PE arithmetic on the PE array (`pe_array`); needs --functional.
    Pe,
}

impl RtlBlock {
    pub fn factory(self) -> hw::pkg::package::PkgRtl {
        match self {
            RtlBlock::Scheduler => hw::pkg::package::PkgRtl { iodie: Some(rtl::pkg::iodie_swap::iodie_factory), ctrl: None, pe: None },
            RtlBlock::ChipletCtrl => hw::pkg::package::PkgRtl { iodie: None, ctrl: Some(rtl::pkg::chiplet_swap::chiplet_ctrl_factory), pe: None },
            RtlBlock::Pe => hw::pkg::package::PkgRtl { iodie: None, ctrl: None, pe: Some(rtl::pkg::pe_array_swap::pe_compute_factory) },
        }
    }
}


pub fn parse_array(s: &str) -> CliResult<(u32, u32)> {
    let bad = || format!("--array: `{s}` is not RxC (e.g. 2x2)");
    super::split_grid(s).ok_or_else(bad)
}

pub fn parse_strategies(s: &str) -> CliResult<Vec<Strategy>> {
    testbenches::run::package::parse_strategies(s, "--strategy").map_err(|e| e.to_string())
}

/// The waveform file of one run among several: `NAME-<run>.EXT` (the base path when alone).
pub fn wave_path(base: &Path, run: &str, several: bool) -> PathBuf {
    testbenches::run::part_path(base, run, several)
}

/// The end of a multi-strategy run (`package`, `run`) after its outputs are written: `Err`
/// when its one strategy failed (the error as is); with several, each failed strategy's
/// reason on stderr and the partial exit code; otherwise `None` (the caller goes on).
pub fn parts_outcome(several: bool, failed: &[(Strategy, String)]) -> CliResult<Option<ExitCode>> {
    match failed {
        [] => Ok(None),
        [(_, e)] if !several => Err(e.clone()),
        f => {
            for (s, e) in f {
                super::report_failed_part("strategy", s.name(), e, &format!("{}: ", s.name()));
            }
            Ok(Some(ExitCode::from(super::EXIT_PARTIAL)))
        }
    }
}

/// A run's parts as the CLI reports them: the finished results, the failed strategies with
/// their messages.
pub fn split(parts: testbenches::run::Parts<Strategy, PkgResult>) -> (Vec<PkgResult>, Vec<(Strategy, String)>) {
    (parts.ok.into_iter().map(|(_, r)| r).collect(), parts.failed.into_iter().map(|(s, e)| (s, e.to_string())).collect())
}

/// The comparison table; a failed strategy gets a row with its reason (the speedup is
/// against the first finished strategy).
pub fn print_results(results: &[PkgResult], failed: &[(Strategy, String)]) {
    // The name column fits the longest name (8 wide for the short ones, as always).
    let w = results.iter().map(|r| r.strategy.name().len()).chain(failed.iter().map(|(s, _)| s.name().len())).max().unwrap_or(0).max(8);
    println!(
        "{:<w$} {:>12} {:>7} {:>11} {:>9} {:>12} {:>12} {:>10} {:>9}",
        "strategy", "latency_cyc", "util%", "roofline", "ratio", "peak_w_MB", "ddr_MB", "d2d_MB", "speedup"
    );
    let base = results.first().map(|r| r.latency_cycles).unwrap_or(1) as f64;
    for r in results {
        println!(
            "{:<w$} {:>12} {:>7.1} {:>11} {:>9.2} {:>12.2} {:>12.2} {:>10.2} {:>8.2}x{}",
            r.strategy.name(),
            r.latency_cycles,
            r.utilization * 100.0,
            r.roofline_cycles,
            r.roofline_ratio,
            r.peak_weight_bytes as f64 / 1e6,
            r.ddr_bytes as f64 / 1e6,
            r.d2d_bytes as f64 / 1e6,
            base / r.latency_cycles as f64,
            match r.outputs_match_reference {
                Some(true) => "  outputs bit-exact",
                Some(false) => "  OUTPUTS DIFFER",
                None => "",
            }
        );
    }
    for (s, e) in failed {
        println!("{:<w$} FAILED: {}", s.name(), super::reason(e).trim_start_matches(&format!("{}: ", s.name())));
    }
}

/// Writes the results JSON (`testbenches::run::package::results_json`), with the `failed`
/// list (strategy, reason, error) only when a strategy failed.
pub fn write_json(path: &Path, cfg: &PkgCfg, model: &str, tokens: usize, layers: usize, results: &[PkgResult], failed: &[(Strategy, String)]) -> CliResult<()> {
    ensure_parent(path)?;
    let mut v = testbenches::run::package::results_json(cfg, model, tokens, layers, results);
    if !failed.is_empty() {
        v["failed"] = super::failed_parts_json("strategy", failed.iter().map(|(s, e)| (s.name(), e)));
    }
    std::fs::write(path, serde_json::to_string_pretty(&v).map_err(|e| e.to_string())? + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// A plot directory must be creatable and writable before a long run starts.
pub fn check_plot_dir(d: &Path) -> CliResult<()> {
    if d.is_file() {
        return Err(format!("--plot {}: is a file, not a directory", d.display()));
    }
    std::fs::create_dir_all(d).map_err(|e| format!("--plot: cannot create {}: {e}", d.display()))?;
    check_writable(&d.join(".write-check"))
}

pub fn load_cfg(path: &Path) -> CliResult<PkgCfg> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let c: PkgCfg = super::noc::parse_toml(&text, &path.display().to_string())?;
    Ok(c)
}

/// The waveform sink of `--vcd`/`--fst` (checked exclusive by `check_run_outputs`).
pub fn wave_sink(vcd: Option<&Path>, fst: Option<&Path>) -> Option<WaveSink> {
    match (vcd, fst) {
        (Some(p), _) => Some(WaveSink::vcd(p)),
        (_, Some(p)) => Some(WaveSink::fst(p)),
        _ => None,
    }
}

pub fn run(a: PackageArgs) -> CliResult<ExitCode> {
    if let Some(r) = a.rtl {
        r.factory().check(a.functional)?;
    }
    let strategies = parse_strategies(&a.strategy)?;
    // Output paths first, every file the run will write (one waveform per strategy): a long
    // run must not be lost to an unwritable file.
    let names: Vec<&str> = strategies.iter().map(|s| s.name()).collect();
    super::check_run_outputs(a.json.as_deref(), a.vcd.as_deref(), a.fst.as_deref(), &names)?;
    super::check_gtkw(a.gtkw.as_deref(), a.vcd.is_some() || a.fst.is_some(), &names)?;
    let mut cfg = match &a.config {
        Some(p) => load_cfg(p)?,
        None => PkgCfg::default(),
    };
    if let Some(s) = &a.array {
        let (r, c) = parse_array(s)?;
        cfg.rows = r;
        cfg.cols = c;
    }
    if let Some(b) = a.ber {
        cfg.ucie.ber = b;
    }
    if let Some(m) = a.micro_slices {
        cfg.micro_slices = m;
    }
    if let Some(s) = a.ring_slots {
        cfg.ring_slots = s;
    }
    if let Some(t) = a.threads {
        cfg.sim.threads = t;
    }
    if let Some(j) = a.batch_jobs {
        cfg.sim.batch_jobs = j;
    }
    if let Some(d) = &a.plot {
        check_plot_dir(d)?;
        cfg.sim.timeline = true;
    }
    if a.no_fast_forward {
        cfg.sim.fast_forward = false;
    }
    let parse_range = |s: &Option<String>, flag: &str| s.as_deref().map(|s| testbenches::run::package::parse_range(s, flag)).transpose().map_err(|e| e.to_string());
    let input = PackageInput {
        model: a.model.clone(),
        tokens: a.tokens,
        skew: a.skew,
        seed: a.seed,
        d_model: a.d_model,
        d_ffn: a.d_ffn,
        trace: a.trace.clone(),
        iters: parse_range(&a.iters, "--iters")?,
        layers: parse_range(&a.layers, "--layers")?,
        functional: a.functional,
    };
    let run = input.build(cfg, strategies, a.rtl.map(RtlBlock::factory).unwrap_or_default()).map_err(|e| e.to_string())?;
    let (cfg, model, work) = (run.cfg(), run.model(), run.workload());
    let ntok = work.tokens();
    let nlayers = work.layers();
    if !a.quiet {
        println!(
            "package {}x{} {} ({} iteration(s) x {} layer(s), {} tokens, d_model {}, d_ffn {}, {} experts top-{}{}){}",
            cfg.rows,
            cfg.cols,
            model.name,
            work.trace.iterations().len(),
            nlayers,
            ntok,
            work.d_model,
            work.d_ffn,
            work.experts(),
            model.top_k,
            if model.shared_experts > 0 { format!(" + {} shared", model.shared_experts) } else { String::new() },
            if a.functional { ", functional" } else { "" }
        );
    }
    let opts = RunOptions { progress: !a.quiet, verbose: !a.quiet, waves: wave_sink(a.vcd.as_deref(), a.fst.as_deref()), ..Default::default() };
    let several = run.strategies().len() > 1;
    let (results, failed) = split(run.run(&opts));
    if results.is_empty() {
        // Nothing finished, nothing to write: the reasons, and the exit code.
        return parts_outcome(several, &failed).map(|c| c.unwrap_or(ExitCode::from(2)));
    }
    if !a.quiet {
        print_results(&results, &failed);
    }
    if let Some(p) = &a.json {
        write_json(p, cfg, &model.name, ntok, nlayers, &results, &failed)?;
        if !a.quiet {
            println!("wrote {}", p.display());
        }
    }
    let names: Vec<&str> = run.strategies().iter().map(|s| s.name()).collect();
    super::write_gtkw(&super::gtkw_pairs(a.vcd.as_deref().or(a.fst.as_deref()), a.gtkw.as_deref(), &names), a.quiet)?;
    if let Some(d) = &a.plot {
        let title = format!("{} {} tokens, {}x{}", model.name, ntok, cfg.rows, cfg.cols);
        let files = super::plot::package_plots(d, &title, &results)?;
        if !a.quiet {
            println!("wrote {} plots to {}", files.len(), d.display());
        }
    }
    if let Some(code) = parts_outcome(several, &failed)? {
        return Ok(code);
    }
    if a.functional && results.iter().any(|r| r.outputs_match_reference != Some(true)) {
        eprintln!("error: functional outputs differ from the reference");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
