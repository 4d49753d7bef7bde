//! `waferstream package`: one MoE layer on the FSE-DP chiplet package, per strategy, in
//! timing mode (full model size, payload-free flits) or functional mode (small dimensions,
//! real int8 data checked bit-exact against the dense reference).
//!
//! Precedence: explicit flag > `--config` file (a `PkgCfg` TOML) > built-in default.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use hw::pkg::config::{PkgCfg, Strategy};
use hw::pkg::package::Package;
use hw::pkg::session::Session;
use hw::pkg::result::PkgResult;
use sched::models::{model_by_name, ModelPreset};
use sched::trace::{load_trace, Trace};
use sched::workload::{generate, GenCfg};
use serde::{Deserialize, Serialize};

use super::{check_writable, ensure_parent, CliResult};

#[derive(Args, Debug, Clone, Default)]
pub struct PackageArgs {
    /// Model preset (dimensions, experts, top-k, shared experts).
    #[arg(long)]
    pub model: Option<String>,
    /// Tokens in the layer (one iteration).
    #[arg(long)]
    pub tokens: Option<u32>,
    /// Chiplet array RxC (square: 2x2, 3x3, 4x4).
    #[arg(long)]
    pub array: Option<String>,
    /// Strategies, comma-separated: ep, hydra, a1..a5 (fse-dp = a3).
    #[arg(long, default_value = "ep,a3")]
    pub strategy: String,
    /// Real int8 data through the dataflow, outputs checked against the dense reference
    /// (model `functional` by default: d_model 64, d_ffn 48, 16 experts, top-2).
    #[arg(long)]
    pub functional: bool,
    /// UCIe bit-error rate in [0, 1) (replay hides the errors).
    #[arg(long)]
    pub ber: Option<f64>,
    #[arg(long)]
    pub micro_slices: Option<u32>,
    #[arg(long)]
    pub ring_slots: Option<u32>,
    /// Override the model's dimensions.
    #[arg(long)]
    pub d_model: Option<u32>,
    #[arg(long)]
    pub d_ffn: Option<u32>,
    /// Routing trace (SPEC §8): experts and top-k from its header.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Iterations of the trace to run, A..B (each iteration's layers run in turn).
    #[arg(long)]
    pub iters: Option<String>,
    /// MoE layers of the trace to run, A..B.
    #[arg(long)]
    pub layers: Option<String>,
    /// Zipf skew of the generated routing.
    #[arg(long)]
    pub skew: Option<f64>,
    #[arg(long)]
    pub seed: Option<u64>,
    /// Package config (TOML, the `PkgCfg` fields).
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[arg(long)]
    pub threads: Option<u32>,
    /// Step every edge (results are identical; for checking).
    #[arg(long)]
    pub no_fast_forward: bool,
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Waveforms of the run (one file per strategy: NAME-<strategy>.vcd when several).
    #[arg(long)]
    pub vcd: Option<PathBuf>,
    #[arg(long)]
    pub fst: Option<PathBuf>,
    /// Write plots (SVG) into this directory: per-chiplet activity timeline per strategy,
    /// PE utilization over time, on-chip memory, cycle breakdown.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    #[arg(long)]
    pub quiet: bool,
    /// Run this controller's rust-hdl RTL block inside the package in place of its CL model
    /// (same stats, same waveforms; slower).
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
}

impl RtlBlock {
    fn factory(self) -> hw::pkg::package::PkgRtl {
        match self {
            RtlBlock::Scheduler => hw::pkg::package::PkgRtl { iodie: Some(rtl::pkg::iodie_swap::iodie_factory), ctrl: None },
            RtlBlock::ChipletCtrl => hw::pkg::package::PkgRtl { iodie: None, ctrl: Some(rtl::pkg::chiplet_swap::chiplet_ctrl_factory) },
        }
    }
}

/// What the package runs: model, tokens and strategies (the `run` scenario's `[workload]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkloadCfg {
    pub model: String,
    pub tokens: u32,
    pub strategies: Vec<String>,
    pub skew: f64,
    pub seed: u64,
    pub functional: bool,
    /// Iterations of generated routing (`tokens` each), run in turn: token buffering (A5)
    /// acts across iterations.
    pub iters: u32,
}

impl Default for WorkloadCfg {
    fn default() -> Self {
        WorkloadCfg { model: "qwen3-30b-a3b".into(), tokens: 256, strategies: vec!["ep".into(), "a3".into()], skew: 1.0, seed: 1, functional: false, iters: 1 }
    }
}

fn parse_range(s: &str, flag: &str) -> CliResult<std::ops::Range<usize>> {
    let bad = || format!("{flag}: `{s}` is not A..B (or a single index)");
    if let Some((a, b)) = s.split_once("..") {
        let a: usize = a.trim().parse().map_err(|_| bad())?;
        let b: usize = b.trim().parse().map_err(|_| bad())?;
        if a >= b {
            return Err(format!("{flag}: `{s}` is empty"));
        }
        Ok(a..b)
    } else {
        let a: usize = s.trim().parse().map_err(|_| bad())?;
        Ok(a..a + 1)
    }
}

pub fn parse_array(s: &str) -> CliResult<(u32, u32)> {
    let bad = || format!("--array: `{s}` is not RxC (e.g. 2x2)");
    super::split_grid(s).ok_or_else(bad)
}

pub fn parse_strategies(s: &str) -> CliResult<Vec<Strategy>> {
    let v: Vec<Strategy> = s.split(',').filter(|x| !x.trim().is_empty()).map(Strategy::parse).collect::<Result<_, _>>().map_err(|e| format!("--strategy: {e}"))?;
    if v.is_empty() {
        return Err("--strategy: give at least one of ep, hydra, a1..a5".into());
    }
    super::no_duplicates("--strategy", &v, |s| s.name().to_string())?;
    Ok(v)
}

/// What a package run computes: a routing trace (generated or loaded, already narrowed to
/// the selected iterations and layers), the shared experts every token also visits, and the
/// expert dimensions.
pub struct Workload {
    pub trace: Trace,
    pub shared: usize,
    pub d_model: u32,
    pub d_ffn: u32,
}

impl Workload {
    /// Experts per layer incl. the shared ones.
    pub fn experts(&self) -> usize {
        self.trace.header.experts as usize + self.shared
    }
}

/// The workload of a run: `trace` narrowed by `iters`/`layers`, or, without a trace,
/// generated routing of `tokens` per iteration (`iters`/`layers` then give how many
/// iterations and layers to generate, from 0: `--iters 0..100` = 100 iterations).
#[allow(clippy::too_many_arguments)]
pub fn workload_from(m: &ModelPreset, tokens: u32, skew: f64, seed: u64, trace: Option<&Trace>, iters: Option<std::ops::Range<usize>>, layers: Option<std::ops::Range<usize>>, d_model: u32, d_ffn: u32) -> CliResult<Workload> {
    let shared = m.shared_experts as usize;
    let mut t = match trace {
        None => {
            let n_iters = iters.as_ref().map_or(1, |r| r.end);
            let n_layers = layers.as_ref().map_or(1, |r| r.end);
            // Checked here: `as u32` below would wrap 2^32 + 1 to 1.
            if n_layers > sched::trace::MAX_LAYERS as usize {
                return Err(format!("--layers: {n_layers} layers to generate, at most {}", sched::trace::MAX_LAYERS));
            }
            if n_iters as u64 * tokens as u64 > sched::workload::MAX_GEN_TOKENS {
                return Err(format!("--iters: {n_iters} iterations of {tokens} tokens is more than {} token lines", sched::workload::MAX_GEN_TOKENS));
            }
            let g = GenCfg { model: Some(m.name.clone()), experts: m.experts, top_k: m.top_k, layers: n_layers as u32, tokens_per_iter: tokens, iters: n_iters as u32, skew, seed, ..Default::default() };
            generate(&g).map_err(|e| e.to_string())?
        }
        Some(t) => t.clone(),
    };
    if let Some(r) = iters {
        t = t.select_iters(r).map_err(|e| format!("--iters: {e}"))?;
    }
    if let Some(r) = layers {
        t = t.select_layers(r).map_err(|e| format!("--layers: {e}"))?;
    }
    if t.tokens.is_empty() {
        return Err("the trace selection holds no tokens".into());
    }
    if t.header.experts as usize + shared > sched::pkg::iodie::MAX_EXPERTS {
        return Err(format!("{} routed + {shared} shared experts: the IO die's EIT holds at most {}", t.header.experts, sched::pkg::iodie::MAX_EXPERTS));
    }
    Ok(Workload { trace: t, shared, d_model, d_ffn })
}

/// Sums a run of several layers into one result (latencies and bytes add; peaks take the max).
fn accumulate(acc: &mut Option<PkgResult>, r: PkgResult) {
    match acc {
        None => *acc = Some(r),
        Some(a) => {
            let lat = a.latency_cycles + r.latency_cycles;
            a.utilization = (a.utilization * a.latency_cycles as f64 + r.utilization * r.latency_cycles as f64) / lat as f64;
            a.pe_busy_fraction = (a.pe_busy_fraction * a.latency_cycles as f64 + r.pe_busy_fraction * r.latency_cycles as f64) / lat as f64;
            a.cycles.add(&r.cycles);
            for (c, rc) in a.chiplets.iter_mut().zip(&r.chiplets) {
                c.cycles.add(&rc.cycles);
            }
            a.mean_weight_bytes = (a.mean_weight_bytes * a.latency_cycles as f64 + r.mean_weight_bytes * r.latency_cycles as f64) / lat as f64;
            a.latency_cycles = lat;
            a.peak_weight_bytes = a.peak_weight_bytes.max(r.peak_weight_bytes);
            a.peak_token_bytes = a.peak_token_bytes.max(r.peak_token_bytes);
            a.ddr_bytes += r.ddr_bytes;
            a.d2d_bytes += r.d2d_bytes;
            a.macs += r.macs;
            a.sched_decision_cycles_max = a.sched_decision_cycles_max.max(r.sched_decision_cycles_max);
            a.roofline_cycles += r.roofline_cycles;
            a.roofline_ratio = a.latency_cycles as f64 / a.roofline_cycles.max(1) as f64;
            a.wall_seconds += r.wall_seconds;
            a.cycles_per_second = a.latency_cycles as f64 / a.wall_seconds.max(1e-9);
            a.replays += r.replays;
            a.rule5_redirected += r.rule5_redirected;
            a.outputs_match_reference = match (a.outputs_match_reference, r.outputs_match_reference) {
                (Some(x), Some(y)) => Some(x && y),
                _ => None,
            };
        }
    }
}

/// The waveform file of one run among several: NAME-<run>.EXT (the base path when alone).
pub fn wave_path(base: &Path, run: &str, several: bool) -> PathBuf {
    if !several {
        return base.to_path_buf();
    }
    let stem = base.file_stem().map(|x| x.to_string_lossy().to_string()).unwrap_or_default();
    let ext = base.extension().map(|x| format!(".{}", x.to_string_lossy())).unwrap_or_default();
    base.with_file_name(format!("{stem}-{run}{ext}"))
}

/// Runs every strategy on the workload, layer batch by layer batch through the request
/// tracker (which carries token buffering across layers and iterations); writes waveforms
/// of the first batch when asked. The first failing strategy fails the call (one-strategy
/// callers: `sweep`, `bench`); [`run_parts`] keeps the others' results.
pub fn run_strategies(cfg: &PkgCfg, strategies: &[Strategy], w: &Workload, functional: bool, waves: Option<(&Path, waves::WaveFormat)>, quiet: bool) -> CliResult<Vec<PkgResult>> {
    run_parts(cfg, strategies, w, functional, waves, quiet, hw::pkg::package::PkgRtl::default())?.into_iter().map(|(_, r)| r).collect()
}

/// One strategy of a run: its result, or why it failed (the other strategies still ran).
pub type Part = (Strategy, CliResult<PkgResult>);

/// As [`run_strategies`], with the RTL stand-ins of `rtl` (`--rtl scheduler`, `--rtl
/// chiplet-ctrl`), every strategy run whatever the others did: a strategy that fails (a
/// watchdog, a waveform write) is returned with its error beside the finished ones. The
/// error of the call itself is bad input, found before anything runs.
pub fn run_parts(cfg: &PkgCfg, strategies: &[Strategy], w: &Workload, functional: bool, waves: Option<(&Path, waves::WaveFormat)>, quiet: bool, rtl: hw::pkg::package::PkgRtl) -> CliResult<Vec<Part>> {
    // Config errors are the input's, the same for every run: refused before the first one.
    for &s in strategies {
        cfg.token_buffer_cfg(s).map_err(|e| e.to_string())?;
    }
    let several = strategies.len() > 1;
    Ok(strategies
        .iter()
        .map(|&s| {
            // A panicking strategy (a model bug) fails that strategy, not the others.
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_one(cfg, s, w, functional, waves, several, quiet, rtl))).unwrap_or_else(|_| Err(format!("{}: panicked (see above)", s.name())));
            (s, r)
        })
        .collect())
}

/// One strategy, every layer batch (see [`run_parts`]).
#[allow(clippy::too_many_arguments)]
fn run_one(cfg: &PkgCfg, s: Strategy, w: &Workload, functional: bool, waves: Option<(&Path, waves::WaveFormat)>, several: bool, quiet: bool, rtl: hw::pkg::package::PkgRtl) -> CliResult<PkgResult> {
    // Layer batches without deferrals; token buffering may add a few.
    let batches = w.trace.iterations().len() as u64 * w.trace.header.layers as u64;
    let tb = cfg.token_buffer_cfg(s).map_err(|e| e.to_string())?;
    let mut session = Session::new(&w.trace, w.shared, w.d_model, w.d_ffn, tb)?;
    let mut acc = None;
    let mut i = 0;
    // Progress on stderr (drawn only on a terminal) for runs of many layer batches.
    let bar = if quiet || batches < 2 { indicatif::ProgressBar::hidden() } else { indicatif::ProgressBar::new(batches) };
    bar.set_style(indicatif::ProgressStyle::with_template("{prefix:>6} [{bar:30}] {pos}/{len} layer batches, {elapsed} elapsed, eta {eta}").expect("valid template").progress_chars("=> "));
    bar.set_prefix(s.name());
    while let Some(l) = session.next_layer() {
        if i >= bar.length().unwrap_or(0) {
            bar.set_length(i + 1);
        }
        let mut p = Package::new_with_blocks(cfg, s, &l, functional, rtl).map_err(|e| e.to_string())?;
        let r = match waves.filter(|_| i == 0) {
            Some((base, fmt)) => {
                let path = wave_path(base, s.name(), several);
                ensure_parent(&path)?;
                let mut w = waves::WaveWriter::create(&path, fmt, p.tick_ps(), &p.signals(), &waves::WaveFilter::default()).map_err(|e| format!("{}: {e}", path.display()))?;
                let r = p.run(Some(&mut w)).map_err(|e| format!("{}: {e}", s.name()))?;
                w.finish(r.latency_cycles * p.ctx.core.div).map_err(|e| format!("{}: {e}", path.display()))?;
                if !quiet {
                    println!("wrote {}", path.display());
                }
                r
            }
            None => p.run(None).map_err(|e| format!("{}: {e}", s.name()))?,
        };
        tracing::debug!(strategy = s.name(), cycles = r.latency_cycles, ticks_evaluated = p.evaluated, "layer batch done");
        session.commit(p.buffering_outcome())?;
        accumulate(&mut acc, r);
        i += 1;
        bar.set_position(i);
    }
    bar.finish_and_clear();
    let mut r = acc.ok_or("the workload holds no tokens")?;
    r.session = session.stats;
    Ok(r)
}

/// The finished results of a run's parts, and the failed strategies with their errors.
pub fn split_parts(parts: Vec<Part>) -> (Vec<PkgResult>, Vec<(Strategy, String)>) {
    let (mut ok, mut failed) = (Vec::new(), Vec::new());
    for (s, r) in parts {
        match r {
            Ok(r) => ok.push(r),
            Err(e) => failed.push((s, e)),
        }
    }
    (ok, failed)
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

/// The comparison table; a failed strategy gets a row with its reason (the speedup is
/// against the first finished strategy).
pub fn print_results(results: &[PkgResult], failed: &[(Strategy, String)]) {
    println!(
        "{:<8} {:>12} {:>7} {:>11} {:>9} {:>12} {:>12} {:>10} {:>9}",
        "strategy", "latency_cyc", "util%", "roofline", "ratio", "peak_w_MB", "ddr_MB", "d2d_MB", "speedup"
    );
    let base = results.first().map(|r| r.latency_cycles).unwrap_or(1) as f64;
    for r in results {
        println!(
            "{:<8} {:>12} {:>7.1} {:>11} {:>9.2} {:>12.2} {:>12.2} {:>10.2} {:>8.2}x{}",
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
        println!("{:<8} FAILED: {}", s.name(), super::reason(e).trim_start_matches(&format!("{}: ", s.name())));
    }
}

/// The results JSON: `tokens` = token lines run (tokens per iteration x iterations, as
/// `sweep` lines count them; the iterations are each result's `session.iterations`),
/// `layers_run`; `failed` (strategy, reason, error) only when a strategy failed, so a run
/// where every strategy finished writes the same bytes as before.
pub fn write_json(path: &Path, cfg: &PkgCfg, model: &ModelPreset, tokens: usize, layers: usize, results: &[PkgResult], failed: &[(Strategy, String)]) -> CliResult<()> {
    ensure_parent(path)?;
    let mut v = serde_json::json!({ "model": model.name, "tokens": tokens, "layers_run": layers, "config": cfg, "results": results });
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

pub fn run(a: PackageArgs) -> CliResult<ExitCode> {
    let strategies = parse_strategies(&a.strategy)?;
    // Output paths first, every file the run will write (one waveform per strategy): a long
    // run must not be lost to an unwritable file.
    let names: Vec<&str> = strategies.iter().map(|s| s.name()).collect();
    super::check_run_outputs(a.json.as_deref(), a.vcd.as_deref(), a.fst.as_deref(), &names)?;
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
    if let Some(s) = a.seed {
        cfg.seed = s;
    }
    if let Some(t) = a.threads {
        cfg.sim.threads = t;
    }
    if let Some(d) = &a.plot {
        check_plot_dir(d)?;
        cfg.sim.timeline = true;
    }
    if a.no_fast_forward {
        cfg.sim.fast_forward = false;
    }
    cfg.validate().map_err(|e| e.to_string())?;
    // Flags that shape generated routing do nothing with a trace: refused, not ignored.
    if a.trace.is_some() {
        if a.skew.is_some() {
            return Err("--skew: the trace decides the routing; --skew shapes generated routing only".into());
        }
        if a.seed.is_some() && !a.functional && cfg.ucie.ber == 0.0 {
            return Err("--seed: with --trace the seed only drives functional data (--functional) and UCIe bit errors (--ber); neither is on".into());
        }
    }
    let trace = match &a.trace {
        Some(p) => Some(load_trace(p).map_err(|e| e.to_string())?),
        None => None,
    };
    let model_name = a.model.clone().unwrap_or_else(|| if a.functional { "functional".into() } else { "qwen3-30b-a3b".into() });
    let mut model = model_by_name(&model_name).map_err(|e| format!("--model: {e}"))?;
    if let Some(t) = &trace {
        if a.model.is_none() && a.d_model.is_none() {
            return Err("--trace: give --model (or --d-model and --d-ffn) for the expert dimensions".into());
        }
        model.experts = t.header.experts;
        model.top_k = t.header.top_k;
    }
    let d_model = a.d_model.unwrap_or(model.d_model);
    let d_ffn = a.d_ffn.unwrap_or(model.d_ffn);
    if d_model == 0 || d_ffn == 0 {
        return Err("--d-model/--d-ffn: must be at least 1".into());
    }
    cfg.validate_for(d_ffn).map_err(|e| e.to_string())?;
    let tokens = a.tokens.unwrap_or(if a.functional { 32 } else { 256 });
    if tokens == 0 || tokens > 1 << 20 {
        return Err(format!("--tokens: {tokens} outside 1..=1048576"));
    }
    if a.trace.is_some() && a.tokens.is_some() {
        return Err("--tokens: the trace decides the tokens (select with --iters)".into());
    }
    let skew = a.skew.unwrap_or(1.0);
    if !(skew.is_finite() && (0.0..=10.0).contains(&skew)) {
        return Err(format!("--skew: {skew} outside 0..=10"));
    }
    let iters = a.iters.as_deref().map(|s| parse_range(s, "--iters")).transpose()?;
    let lrange = a.layers.as_deref().map(|s| parse_range(s, "--layers")).transpose()?;
    let work = workload_from(&model, tokens, skew, cfg.seed.max(1), trace.as_ref(), iters, lrange, d_model, d_ffn)?;
    let waves = match (&a.vcd, &a.fst) {
        (Some(p), _) => Some((p.as_path(), waves::WaveFormat::Vcd)),
        (_, Some(p)) => Some((p.as_path(), waves::WaveFormat::Fst)),
        _ => None,
    };
    let ntok = work.trace.tokens.len();
    let nlayers = work.trace.header.layers as usize;
    if !a.quiet {
        println!(
            "package {}x{} {} ({} iteration(s) x {} layer(s), {} tokens, d_model {d_model}, d_ffn {d_ffn}, {} experts top-{}{}){}",
            cfg.rows,
            cfg.cols,
            model.name,
            work.trace.iterations().len(),
            nlayers,
            ntok,
            work.experts(),
            model.top_k,
            if model.shared_experts > 0 { format!(" + {} shared", model.shared_experts) } else { String::new() },
            if a.functional { ", functional" } else { "" }
        );
    }
    let parts = run_parts(&cfg, &strategies, &work, a.functional, waves, a.quiet, a.rtl.map(RtlBlock::factory).unwrap_or_default())?;
    let (results, failed) = split_parts(parts);
    if results.is_empty() {
        // Nothing finished, nothing to write: the reasons, and the exit code.
        return parts_outcome(strategies.len() > 1, &failed).map(|c| c.unwrap_or(ExitCode::from(2)));
    }
    if !a.quiet {
        print_results(&results, &failed);
    }
    if let Some(p) = &a.json {
        write_json(p, &cfg, &model, ntok, nlayers, &results, &failed)?;
        if !a.quiet {
            println!("wrote {}", p.display());
        }
    }
    if let Some(d) = &a.plot {
        let title = format!("{} {} tokens, {}x{}", model.name, ntok, cfg.rows, cfg.cols);
        let files = super::plot::package_plots(d, &title, &results)?;
        if !a.quiet {
            println!("wrote {} plots to {}", files.len(), d.display());
        }
    }
    if let Some(code) = parts_outcome(strategies.len() > 1, &failed)? {
        return Ok(code);
    }
    if a.functional && results.iter().any(|r| r.outputs_match_reference != Some(true)) {
        eprintln!("error: functional outputs differ from the reference");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
