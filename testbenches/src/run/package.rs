//! The FSE-DP chiplet package as a testbench: a routing trace (generated, or loaded and
//! narrowed to some iterations and layers) runs layer batch by layer batch through the
//! request tracker (`hw::pkg::session::Session`, which carries token buffering across layers
//! and iterations), once per strategy; each strategy's batches merge into one
//! [`PkgResult`] ([`PkgResult::merge`]).
//!
//! * [`PackageInput::build`] — what `waferstream package` is given (model, tokens, skew,
//!   trace and its selection, dimensions) checked in one place, in the order the command
//!   always checked them, and the [`Workload`] made from it;
//! * [`PackageRun::new`] — a config, a workload and strategies, checked before anything
//!   runs (callers with their own workload: `run`'s package scenarios, `sweep`, `bench`);
//! * [`PackageRun::run`] — every strategy with one [`RunOptions`]; a strategy that fails
//!   (a watchdog, a waveform write, a panic) fails alone ([`Parts`]).

use std::ops::Range;
use std::path::PathBuf;

use hw::pkg::config::{PkgCfg, Strategy};
use hw::pkg::package::{Package, PkgRtl};
use hw::pkg::result::PkgResult;
use hw::pkg::session::Session;
use sched::models::{model_by_name, ModelPreset};
use sched::trace::{load_trace, Trace};
use sched::workload::{generate, GenCfg};

use super::{contained, ensure_parent, limits, run_in_order, Part, Parts, RunOptions};
use crate::error::{Error, Result};

/// What a package run computes: a routing trace (generated or loaded, already narrowed to
/// the selected iterations and layers), the shared experts every token also visits, and the
/// expert dimensions.
#[derive(Debug, Clone)]
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

    /// Token lines the run covers (tokens per iteration × iterations): the `tokens` of the
    /// results JSON and of a sweep line.
    pub fn tokens(&self) -> usize {
        self.trace.tokens.len()
    }

    /// MoE layers per iteration.
    pub fn layers(&self) -> usize {
        self.trace.header.layers as usize
    }

    /// Layer batches without deferrals (token buffering may add a few).
    pub fn batches(&self) -> u64 {
        self.trace.iterations().len() as u64 * self.trace.header.layers as u64
    }
}

/// The workload of a run: `trace` narrowed by `iters`/`layers`, or, without a trace,
/// generated routing of `tokens` per iteration (`iters`/`layers` then give how many
/// iterations and layers to generate, from 0: `--iters 0..100` = 100 iterations). Errors name
/// the flag (`--iters`, `--layers`); callers with other names replace it.
#[allow(clippy::too_many_arguments)]
pub fn workload_from(m: &ModelPreset, tokens: u32, skew: f64, seed: u64, trace: Option<&Trace>, iters: Option<Range<usize>>, layers: Option<Range<usize>>, d_model: u32, d_ffn: u32) -> Result<Workload> {
    let shape = GenCfg { tokens_per_iter: tokens, skew, seed, ..Default::default() };
    workload_shaped(m, &shape, trace, iters, layers, d_model, d_ffn)
}

/// As [`workload_from`], the generated routing shaped by `shape` (its `tokens_per_iter`,
/// `skew`, `seed` and request fields — prompt and decode lengths, `max_decode_frac`,
/// `prefill_chunk`, `decode_tokens`, `coherence`, `request_experts`; the model, experts,
/// top-k, layers and iterations come from `m` and `iters`/`layers`). A bad field is refused
/// naming it (`config field `FIELD``).
pub fn workload_shaped(m: &ModelPreset, shape: &GenCfg, trace: Option<&Trace>, iters: Option<Range<usize>>, layers: Option<Range<usize>>, d_model: u32, d_ffn: u32) -> Result<Workload> {
    let shared = m.shared_experts as usize;
    let tokens = shape.tokens_per_iter;
    let mut t = match trace {
        None => {
            let n_iters = iters.as_ref().map_or(1, |r| r.end);
            let n_layers = layers.as_ref().map_or(1, |r| r.end);
            // Checked here: `as u32` below would wrap 2^32 + 1 to 1.
            if n_layers > sched::trace::MAX_LAYERS as usize {
                return Err(Error::input("--layers", format!("{n_layers} layers to generate, at most {}", sched::trace::MAX_LAYERS)));
            }
            if n_iters as u64 * tokens as u64 > sched::workload::MAX_GEN_TOKENS {
                return Err(Error::input("--iters", format!("{n_iters} iterations of {tokens} tokens is more than {} token lines", sched::workload::MAX_GEN_TOKENS)));
            }
            let g = GenCfg { model: Some(m.name.clone()), experts: m.experts, top_k: m.top_k, layers: n_layers as u32, iters: n_iters as u32, ..shape.clone() };
            generate(&g).map_err(|e| Error::Run(e.to_string()))?
        }
        Some(t) => t.clone(),
    };
    if let Some(r) = iters {
        t = t.select_iters(r).map_err(|e| Error::input("--iters", e.to_string()))?;
    }
    if let Some(r) = layers {
        t = t.select_layers(r).map_err(|e| Error::input("--layers", e.to_string()))?;
    }
    if t.tokens.is_empty() {
        return Err(Error::Run("the trace selection holds no tokens".into()));
    }
    if t.header.experts as usize + shared > sched::pkg::iodie::MAX_EXPERTS {
        return Err(Error::Run(format!("{} routed + {shared} shared experts: the IO die's EIT holds at most {}", t.header.experts, sched::pkg::iodie::MAX_EXPERTS)));
    }
    Ok(Workload { trace: t, shared, d_model, d_ffn })
}

/// What `waferstream package` is given besides the package config: `None` takes the default
/// (see [`limits`]: model `qwen3-30b-a3b`, 256 tokens, or `functional` and 32 tokens in
/// functional mode; skew 1.0; the model's dimensions). Errors name the flag.
#[derive(Debug, Clone, Default)]
pub struct PackageInput {
    pub model: Option<String>,
    pub tokens: Option<u32>,
    pub skew: Option<f64>,
    /// Sets the config's `seed` (functional data, UCIe bit errors, generated routing).
    pub seed: Option<u64>,
    pub d_model: Option<u32>,
    pub d_ffn: Option<u32>,
    /// Routing trace (SPEC §8): experts and top-k from its header.
    pub trace: Option<PathBuf>,
    /// Iterations (of the trace, or generated: `0..N`) and layers to run.
    pub iters: Option<Range<usize>>,
    pub layers: Option<Range<usize>>,
    pub functional: bool,
}

impl PackageInput {
    /// Checks the input against `cfg` (which it validates first), loads or generates the
    /// routing, and checks the run ([`PackageRun::new`]): every error before a cycle runs.
    pub fn build(self, mut cfg: PkgCfg, strategies: Vec<Strategy>, rtl: PkgRtl) -> Result<PackageRun> {
        if let Some(s) = self.seed {
            cfg.seed = s;
        }
        cfg.validate().map_err(Error::from)?;
        // Inputs that shape generated routing do nothing with a trace: refused, not ignored.
        if self.trace.is_some() {
            if self.skew.is_some() {
                return Err(Error::input("--skew", "the trace decides the routing; --skew shapes generated routing only"));
            }
            if self.seed.is_some() && !self.functional && cfg.ucie.ber == 0.0 {
                return Err(Error::input("--seed", "with --trace the seed only drives functional data (--functional) and UCIe bit errors (--ber); neither is on"));
            }
        }
        let trace = match &self.trace {
            Some(p) => Some(load_trace(p).map_err(|e| Error::Run(e.to_string()))?),
            None => None,
        };
        let model_name = self.model.clone().unwrap_or_else(|| if self.functional { limits::DEFAULT_MODEL_FUNCTIONAL } else { limits::DEFAULT_MODEL }.into());
        let mut model = model_by_name(&model_name).map_err(|e| Error::input("--model", e.to_string()))?;
        if let Some(t) = &trace {
            if self.model.is_none() && self.d_model.is_none() {
                return Err(Error::input("--trace", "give --model (or --d-model and --d-ffn) for the expert dimensions"));
            }
            model.experts = t.header.experts;
            model.top_k = t.header.top_k;
        }
        let d_model = self.d_model.unwrap_or(model.d_model);
        let d_ffn = self.d_ffn.unwrap_or(model.d_ffn);
        if d_model == 0 || d_ffn == 0 {
            return Err(Error::input("--d-model/--d-ffn", "must be at least 1"));
        }
        cfg.validate_for(d_ffn).map_err(Error::from)?;
        let tokens = self.tokens.unwrap_or(if self.functional { limits::DEFAULT_TOKENS_FUNCTIONAL } else { limits::DEFAULT_TOKENS });
        limits::check_u64("--tokens", tokens as u64, limits::TOKENS)?;
        if trace.is_some() && self.tokens.is_some() {
            return Err(Error::input("--tokens", "the trace decides the tokens (select with --iters)"));
        }
        let skew = limits::check_f64("--skew", self.skew.unwrap_or(limits::DEFAULT_SKEW), limits::SKEW)?;
        let work = workload_from(&model, tokens, skew, cfg.seed.max(1), trace.as_ref(), self.iters, self.layers, d_model, d_ffn)?;
        PackageRun::new(cfg, model, work, strategies, self.functional, rtl)
    }
}

/// A checked package run: the config, the model, the workload, the strategies.
#[derive(Debug, Clone)]
pub struct PackageRun {
    cfg: PkgCfg,
    model: ModelPreset,
    work: Workload,
    strategies: Vec<Strategy>,
    functional: bool,
    rtl: PkgRtl,
}

impl PackageRun {
    /// `model` names the run (its dimensions are the workload's); `rtl` the controllers' RTL
    /// stand-ins (`PkgRtl::default()`: the CL models). Checks the config, the config against
    /// the workload's d_ffn, and each strategy's token-buffering parameters.
    pub fn new(cfg: PkgCfg, model: ModelPreset, work: Workload, strategies: Vec<Strategy>, functional: bool, rtl: PkgRtl) -> Result<PackageRun> {
        if strategies.is_empty() {
            return Err(Error::input("--strategy", format!("give at least one of {}", Strategy::LIST)));
        }
        limits::check_distinct("--strategy", &strategies, |s| s.name().to_string())?;
        cfg.validate().map_err(Error::from)?;
        cfg.validate_for(work.d_ffn).map_err(Error::from)?;
        // Config errors are the input's, the same for every strategy: refused before the first.
        for &s in &strategies {
            cfg.token_buffer_cfg(s).map_err(Error::from)?;
        }
        Ok(PackageRun { cfg, model, work, strategies, functional, rtl })
    }

    pub fn cfg(&self) -> &PkgCfg {
        &self.cfg
    }

    pub fn model(&self) -> &ModelPreset {
        &self.model
    }

    pub fn workload(&self) -> &Workload {
        &self.work
    }

    pub fn strategies(&self) -> &[Strategy] {
        &self.strategies
    }

    pub fn functional(&self) -> bool {
        self.functional
    }

    /// The config a run uses: this run's, with `o`'s simulation settings where given.
    pub fn effective_cfg(&self, o: &RunOptions) -> Result<PkgCfg> {
        let mut c = self.cfg.clone();
        if let Some(t) = o.threads {
            c.sim.threads = t;
        }
        if let Some(j) = o.batch_jobs {
            c.sim.batch_jobs = j;
        }
        if let Some(f) = o.fast_forward {
            c.sim.fast_forward = f;
        }
        if let Some(m) = o.max_cycles {
            c.sim.max_cycles = m;
        }
        if let Some(w) = o.watchdog_cycles {
            c.sim.watchdog_cycles = w;
        }
        c.validate().map_err(Error::from)?;
        Ok(c)
    }

    /// Every strategy, whatever the others do: a strategy that fails (a watchdog, a
    /// waveform write, a panic) is returned with its error beside the finished ones.
    /// Waveforms (`o.waves`) cover each strategy's first layer batch, one file per strategy
    /// (`STEM-<strategy>.EXT` when several).
    pub fn run(&self, o: &RunOptions) -> Parts<Strategy, PkgResult> {
        let cfg = self.effective_cfg(o);
        let several = self.strategies.len() > 1;
        self.strategies
            .iter()
            .map(|&s| Part {
                key: s,
                result: match &cfg {
                    Ok(cfg) => contained(s.name(), || self.run_one(cfg, s, o, several)),
                    Err(e) => Err(e.clone()),
                },
            })
            .collect()
    }

    /// Runs the one strategy of a one-strategy run (`sweep`'s points, `bench`): its result
    /// or its error.
    pub fn run_single(&self, o: &RunOptions) -> Result<PkgResult> {
        let mut p = self.run(o);
        match (p.ok.pop(), p.failed.pop()) {
            (_, Some((_, e))) => Err(e),
            (Some((_, r)), None) => Ok(r),
            (None, None) => Err(Error::Run("internal: no result".into())),
        }
    }

    /// One strategy, every layer batch (see [`PackageRun::run`]). Without token buffering
    /// (every strategy but A5) a batch does not depend on the ones before it, so up to
    /// `sim.batch_jobs` batches run at once, each on its own package, and their results
    /// merge in batch order: the same result as one after the other.
    fn run_one(&self, cfg: &PkgCfg, s: Strategy, o: &RunOptions, several: bool) -> Result<PkgResult> {
        let w = &self.work;
        let batches = w.batches();
        let tb = cfg.token_buffer_cfg(s).map_err(Error::from)?;
        // Token buffering makes each batch depend on the one before (the session takes its
        // deferrals); without it the package's answer is `None` whatever it computed.
        let jobs = if tb.theta_min > 0 { 1 } else { batch_jobs(cfg) };
        // Independent batches may also run on cores the caller has spare (`sweep`'s idle
        // workers), taken window by window.
        let spare = o.spare.as_ref().filter(|_| tb.theta_min == 0 && batches > 1);
        tracing::info!(strategy = s.name(), tokens = w.tokens(), layers = w.layers(), batches, functional = self.functional, jobs, "package run");
        let mut session = Session::new(&w.trace, w.shared, w.d_model, w.d_ffn, tb)?;
        let mut acc: Option<PkgResult> = None;
        let mut i = 0;
        // Progress on stderr (drawn only on a terminal) for runs of many layer batches.
        let bar = if !o.progress || batches < 2 { indicatif::ProgressBar::hidden() } else { indicatif::ProgressBar::new(batches) };
        bar.set_style(indicatif::ProgressStyle::with_template("{prefix:>6} [{bar:30}] {pos}/{len} layer batches, {elapsed} elapsed, eta {eta}").expect("valid template").progress_chars("=> "));
        bar.set_prefix(s.name());
        let mut merge = |r: PkgResult| match &mut acc {
            None => acc = Some(r),
            Some(a) => a.merge(r),
        };
        if jobs <= 1 && spare.is_none() {
            while let Some(l) = session.next_layer() {
                if i >= bar.length().unwrap_or(0) {
                    bar.set_length(i + 1);
                }
                let (r, outcome) = self.run_batch(cfg, s, &l, session.predicted(), o, several, i)?;
                session.commit(outcome)?;
                merge(r);
                i += 1;
                bar.set_position(i);
            }
        } else {
            // Batches are taken from the session a window at a time (memory stays bounded
            // on long traces), run on `jobs` workers, and merged in order; the first failed
            // batch in order is the run's error, as it would be one after the other.
            let window = (jobs * 16) as usize;
            loop {
                let mut todo = Vec::new();
                while todo.len() < window {
                    let Some(l) = session.next_layer() else { break };
                    let pred = session.predicted().map(|p| p.to_vec());
                    session.commit(None)?;
                    todo.push((i + todo.len() as u64, l, pred));
                }
                if todo.is_empty() {
                    break;
                }
                if i + todo.len() as u64 > bar.length().unwrap_or(0) {
                    bar.set_length(i + todo.len() as u64);
                }
                // (Given back when the window ends, or when a batch panics.)
                let lent = spare.map(|c| c.lend());
                let done = run_in_order(&todo, jobs as usize + lent.as_ref().map_or(0, |l| l.n), |(b, l, pred)| {
                    let r = self.run_batch(cfg, s, l, pred.as_deref(), o, several, *b).map(|(r, _)| r);
                    bar.inc(1);
                    r
                });
                drop(lent);
                for r in done {
                    match r {
                        Some(r) => merge(r?),
                        // Not run: a batch before it failed (that error was returned above).
                        None => return Err(Error::Run("internal: a layer batch was skipped".into())),
                    }
                }
                i += todo.len() as u64;
            }
        }
        bar.finish_and_clear();
        let mut r = acc.ok_or_else(|| Error::Run("the workload holds no tokens".into()))?;
        r.session = session.stats;
        tracing::info!(strategy = s.name(), cycles = r.latency_cycles, layer_runs = r.session.layer_runs, deferrals = r.session.deferrals, "package run done");
        Ok(r)
    }

    /// Layer batch `i` of strategy `s` on its own package (with waveforms if it is the
    /// first): its result and token buffering's answer for the session.
    #[allow(clippy::too_many_arguments)]
    fn run_batch(&self, cfg: &PkgCfg, s: Strategy, l: &hw::pkg::layer::LayerInput, predicted: Option<&[u64]>, o: &RunOptions, several: bool, i: u64) -> Result<(PkgResult, Option<(Vec<usize>, sched::pkg::iodie::TokenBufferFl)>)> {
        let mut p = Package::new_predicted(cfg, s, l, predicted, self.functional, self.rtl).map_err(|e| Error::Run(e.to_string()))?;
        let r = match o.waves.as_ref().filter(|_| i == 0) {
            Some(sink) => {
                let path = sink.part_path(s.name(), several);
                ensure_parent(&path)?;
                let mut wr = waves::WaveWriter::create(&path, sink.format, p.tick_ps(), &p.signals(), &waves::WaveFilter::default()).map_err(|e| Error::io(&path, e.to_string()))?;
                let r = p.run(Some(&mut wr)).map_err(|e| Error::Run(format!("{}: {e}", s.name())))?;
                wr.finish(r.latency_cycles * p.ctx.core.div).map_err(|e| Error::io(&path, e.to_string()))?;
                if o.verbose {
                    println!("wrote {}", path.display());
                }
                r
            }
            None => p.run(None).map_err(|e| Error::Run(format!("{}: {e}", s.name())))?,
        };
        tracing::debug!(strategy = s.name(), batch = i, tokens = l.routing.len(), cycles = r.latency_cycles, ticks_evaluated = p.evaluated, "layer batch done");
        Ok((r, p.buffering_outcome()))
    }
}

/// Layer batches run at once: `sim.batch_jobs`, or (0) the machine's cores ÷ the threads of
/// one simulation, at least 1.
fn batch_jobs(cfg: &PkgCfg) -> u32 {
    match cfg.sim.batch_jobs {
        0 => (std::thread::available_parallelism().map_or(1, |n| n.get() as u32) / cfg.sim.threads.max(1)).max(1),
        n => n,
    }
}

/// The results document of a package run (`package --json`, `run`'s package scenarios):
/// `tokens` = token lines run (tokens per iteration × iterations, as `sweep` lines count
/// them; the iterations are each result's `session.iterations`), `layers_run`. The caller
/// adds `failed` when a strategy failed, so a run where every strategy finished writes the
/// same bytes as before.
pub fn results_json(cfg: &PkgCfg, model: &str, tokens: usize, layers: usize, results: &[PkgResult]) -> serde_json::Value {
    serde_json::json!({ "model": model, "tokens": tokens, "layers_run": layers, "config": cfg, "results": results })
}

/// Parses a comma-separated strategy list (`ep,a3`; `fse-dp` = a3): at least one, none
/// twice. Errors name `field` (`--strategy`, a config field).
pub fn parse_strategies(s: &str, field: &str) -> Result<Vec<Strategy>> {
    let v: Vec<Strategy> = s.split(',').filter(|x| !x.trim().is_empty()).map(Strategy::parse).collect::<std::result::Result<_, _>>().map_err(|e| Error::input(field, e))?;
    if v.is_empty() {
        return Err(Error::input(field, format!("give at least one of {}", Strategy::LIST)));
    }
    limits::check_distinct(field, &v, |s| s.name().to_string())?;
    Ok(v)
}

/// `A..B` (or a single index `A` = `A..A+1`) of `--iters`/`--layers` (named by `field`).
pub fn parse_range(s: &str, field: &str) -> Result<Range<usize>> {
    let bad = || Error::input(field, format!("`{s}` is not A..B (or a single index)"));
    if let Some((a, b)) = s.split_once("..") {
        let a: usize = a.trim().parse().map_err(|_| bad())?;
        let b: usize = b.trim().parse().map_err(|_| bad())?;
        if a >= b {
            return Err(Error::input(field, format!("`{s}` is empty")));
        }
        Ok(a..b)
    } else {
        let a: usize = s.trim().parse().map_err(|_| bad())?;
        Ok(a..a + 1)
    }
}

/// The reason of an error, without the model state dump a watchdog appends: its first
/// non-empty line, minus the "state then:" lead-in of the dump (what a failed part's line
/// and the JSON `failed` list's `reason` say).
pub fn reason(e: &str) -> String {
    let first = e.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("(no reason given)");
    first.trim_end_matches("; state then:").trim_end_matches(':').to_string()
}
