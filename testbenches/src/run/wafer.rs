//! One MoE layer on the wafer-scale chip, per mapping (`waferstream wafer`), and the one way
//! every wafer run in the project is simulated ([`simulate`]: the balance loop, MoE-GPS,
//! Sem-MoE and the regression cases go through it too, so they all stop at the same bounds).
//!
//! Build: [`wafer_cfg`] (a config with the flags' overrides) and [`WaferLayer::new`] (the
//! HBM fit, every mapping's tables, the routing — all before a cycle is simulated). Run:
//! [`WaferLayer::run`] with one [`RunOptions`], one [`Part`] per mapping.

use std::path::{Path, PathBuf};
use std::time::Instant;

use hw::wafer::mapping::{mapping_ctrl_cl, MappingCtrlFactory};
use hw::wafer::program::{build, LayerProgram};
use hw::wafer::{Wafer, WaferCfg, WaferResult, WaferRun};
use sched::models::ModelPreset;
use sched::trace::load_trace;
use sched::wafer::routing::{generated_routing, trace_routing};
use sched::wafer::{map, Mapping, MappingKind};

use super::limits;
use super::{contained, ensure_parent, Error, Part, Parts, Result, RunOptions, WaveSink};

/// Routing of one layer: `[group][token]` → top-k [`ExpertId`](sched::ExpertId)s (`sched::wafer::Routing`, serialised as the bare nested lists).
pub use sched::wafer::Routing;

/// A `CxR` grid flag as parsed, with the text it was given as (errors quote it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GridArg {
    pub cols: u32,
    pub rows: u32,
    pub text: String,
}

/// What the flags change in a wafer config (`None`: the config's own value).
#[derive(Debug, Clone, Default)]
pub struct WaferOverrides {
    /// `--wafer`: dies per wafer.
    pub wafer: Option<GridArg>,
    /// `--wafers`: wafers of the multi-wafer system.
    pub wafers: Option<GridArg>,
    pub tp: Option<u32>,
    pub dp: Option<u32>,
    pub tokens_per_group: Option<u32>,
    /// `--tokens-per-die`: tokens per TP group = this × TP (the token count grows with TP;
    /// MoEntwine §VI-B3, moentwine.txt L254). Refused together with `tokens_per_group`.
    pub tokens_per_die: Option<u32>,
    pub micro_batches: Option<u32>,
    /// Drop the all-gather half of the all-reduce.
    pub no_all_gather: bool,
    /// `--comm-dtype`: the element the dispatch moves (the combine and the all-reduce move
    /// FP16 either way).
    pub comm_dtype: Option<CommDtype>,
    /// `--replica-split`: which replica of a replicated expert serves a token.
    pub replica_split: Option<hw::wafer::config::ReplicaSplit>,
    pub seed: Option<u64>,
}

/// The element type of the wafer's communication (`--comm-dtype`). `int8` is the default
/// config: int8 dispatch (the experts' input is quantized before it leaves the holder),
/// FP16 combine and all-reduce. `fp16` is MoEntwine's "for attention layers and all
/// communications, we employ FP16 precision" (moentwine.txt L222): the dispatch moves FP16
/// too, twice the bytes. Only `dispatch_elem_bytes` differs between the two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommDtype {
    Int8,
    Fp16,
}

impl CommDtype {
    pub fn name(self) -> &'static str {
        match self {
            CommDtype::Int8 => "int8",
            CommDtype::Fp16 => "fp16",
        }
    }
    /// `dispatch_elem_bytes` of the config.
    pub fn dispatch_elem_bytes(self) -> u32 {
        match self {
            CommDtype::Int8 => 1,
            CommDtype::Fp16 => 2,
        }
    }
}

impl std::str::FromStr for CommDtype {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim() {
            "int8" => Ok(CommDtype::Int8),
            "fp16" => Ok(CommDtype::Fp16),
            other => Err(Error::input("--comm-dtype", format!("unknown `{other}` (expected int8 or fp16)"))),
        }
    }
}

/// The config of a run: `base` (a file's, or the default), then the overrides, validated.
pub fn wafer_cfg(base: WaferCfg, o: &WaferOverrides) -> Result<WaferCfg> {
    let mut c = base;
    if let Some(w) = &o.wafer {
        (c.die_cols, c.die_rows) = (w.cols, w.rows);
    }
    if let Some(w) = &o.wafers {
        (c.wafers_x, c.wafers_y) = (w.cols, w.rows);
    }
    // In 64 bits: the config's u32 products wrap (65536 x 65536 dies is "0 dies").
    let (cols, rows) = (c.die_cols as u64 * c.wafers_x as u64, c.die_rows as u64 * c.wafers_y as u64);
    if cols > 64 || rows > 64 {
        let what = match (&o.wafer, &o.wafers) {
            (Some(w), Some(ws)) => format!("--wafer {} with --wafers {}", w.text, ws.text),
            (Some(w), None) => format!("--wafer {}", w.text),
            (None, Some(ws)) => format!("--wafers {}", ws.text),
            (None, None) => "config fields `die_cols`/`die_rows` x `wafers_x`/`wafers_y`".to_string(),
        };
        return Err(Error::input(what, format!("the die grid is {cols}x{rows}; at most 64 dies per side")));
    }
    if let Some(tp) = o.tp {
        c.tp = tp;
    }
    match o.dp {
        Some(dp) => c.dp = dp,
        // Default: the rest of the dies (a config's dp is kept when it matches).
        None if c.tp > 0 && c.dies().is_multiple_of(c.tp) && c.tp * c.dp != c.dies() => c.dp = c.dies() / c.tp,
        None => {}
    }
    if let Some(t) = o.tokens_per_group {
        c.tokens_per_group = t;
    }
    if let Some(per_die) = o.tokens_per_die {
        if o.tokens_per_group.is_some() {
            return Err(Error::input("--tokens-per-die", "give --tokens-per-group or --tokens-per-die, not both"));
        }
        // In 64 bits: the product is checked against the config's range by `validate`.
        let t = per_die as u64 * c.tp as u64;
        if per_die == 0 || t > limits::WAFER_TOKENS_PER_GROUP_MAX {
            return Err(Error::input("--tokens-per-die", format!("{per_die} tokens per die x TP={} must give 1..={} tokens per group", c.tp, limits::WAFER_TOKENS_PER_GROUP_MAX)));
        }
        c.tokens_per_group = t as u32;
    }
    if let Some(d) = o.comm_dtype {
        c.dispatch_elem_bytes = d.dispatch_elem_bytes();
    }
    if let Some(r) = o.replica_split {
        c.replica_split = r;
    }
    if let Some(m) = o.micro_batches {
        c.micro_batches = m;
    }
    if o.no_all_gather {
        c.all_gather = false;
    }
    if let Some(s) = o.seed {
        c.seed = s;
    }
    c.validate().map_err(text)?;
    Ok(c)
}

/// A model crate's error as it reads (the `From` impls of [`Error`] would put it behind an
/// empty field name).
pub(crate) fn text(e: impl std::fmt::Display) -> Error {
    Error::Run(e.to_string())
}

/// Refuses a model whose weights do not fit the dies' HBM: per die, its experts of every MoE
/// layer (routed, by the placement; shared ones on every die) plus its 1/TP of the attention
/// weights (FP16, 4·d² per layer).
pub fn check_fits(c: &WaferCfg, m: &ModelPreset) -> Result<()> {
    let dies = c.dies() as u64;
    let per_die = (m.experts as u64).div_ceil(dies).max(1) + m.shared_experts as u64;
    let bytes = m.layers as u64 * (per_die * m.expert_bytes() + 8 * m.d_model as u64 * m.d_model as u64 / c.tp as u64);
    let cap = (c.die.hbm_gb * 1e9) as u64;
    if bytes > cap {
        return Err(Error::input(
            format!("--model {}", m.name),
            format!(
                "{:.1} GB of weights per die ({} experts x {} layers + attention / TP={}) exceed die.hbm_gb = {} GB on {} dies",
                bytes as f64 / 1e9,
                per_die,
                m.layers,
                c.tp,
                c.die.hbm_gb,
                dies
            ),
        ));
    }
    Ok(())
}

/// Where a layer's routing comes from: a routing trace's first iteration, first layer, or
/// generated with a Zipf skew (`None`: uniform, 0).
#[derive(Debug, Clone, Default)]
pub struct LayerInput {
    pub trace: Option<PathBuf>,
    pub skew: Option<f64>,
}

impl LayerInput {
    /// The input's own checks (no file is read): the skew within [`limits::SKEW`], and no
    /// skew with a trace.
    pub fn check(&self) -> Result<()> {
        let skew = self.skew.unwrap_or(0.0);
        let r = limits::SKEW;
        if !(skew.is_finite() && r.contains(&skew)) {
            return Err(Error::input("--skew", format!("must be within {}..={} (got {skew})", r.start(), r.end())));
        }
        if self.trace.is_some() && self.skew.is_some() {
            return Err(Error::input("--skew", "the trace decides the routing; --skew shapes generated routing only"));
        }
        Ok(())
    }
}

/// Routing of the layer: `[group][token]` → top-k experts (generated, or a trace's first
/// iteration, first layer).
pub fn layer_routing(c: &WaferCfg, m: &ModelPreset, input: &LayerInput) -> Result<Routing> {
    match &input.trace {
        Some(p) => {
            let t = load_trace(p).map_err(text)?;
            trace_routing(&t, m, 0, c.dp, c.tokens_per_group).map_err(|e| Error::input(format!("--trace {}", p.display()), e))
        }
        None => generated_routing(m, c.dp, c.tokens_per_group, input.skew.unwrap_or(0.0), c.seed).map_err(|e| Error::input("--tokens-per-group", e)),
    }
}

/// The mapping controller's (CL) decision for `c`: the tables the collective engines run on,
/// and the cycles it took.
pub fn run_mapping_ctrl(c: &WaferCfg) -> Result<(Mapping, u64)> {
    run_mapping_ctrl_with(c, mapping_ctrl_cl)
}

/// The decision of the mapping controller `ctrl` builds (the CL model, or an RTL stand-in:
/// `wafer --rtl mapping`) for `c`.
pub fn run_mapping_ctrl_with(c: &WaferCfg, ctrl: MappingCtrlFactory) -> Result<(Mapping, u64)> {
    let refused = |e: sched::wafer::MapError| Error::input(format!("--mapping {}", c.mapping.name()), e.to_string());
    ctrl(c.mapping, c.geom(), c.tp, c.dp, c.all_gather).map_err(refused)?.run_to_end().map_err(refused)
}

/// Where a waveform of a wafer run ends: the last die's end (a layer) or the run's end (a
/// layer with a migration beside it, which may outlast the layer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaveEnd {
    Layer,
    Run,
}

/// The one call that simulates a built wafer: the options resolved against the wafer
/// defaults ([`limits::WAFER_MAX_CYCLES`], [`limits::WAFER_WATCHDOG_CYCLES`], one thread,
/// fast-forward on), and the waveform of `opts.waves` (its path as it is) when given.
pub fn simulate(w: &mut Wafer, c: &WaferCfg, opts: &RunOptions, end: WaveEnd) -> Result<WaferRun> {
    let threads = threads(opts);
    let ff = opts.fast_forward.unwrap_or(true);
    let max = opts.max_cycles.unwrap_or(limits::WAFER_MAX_CYCLES);
    let watchdog = opts.watchdog_cycles.unwrap_or(limits::WAFER_WATCHDOG_CYCLES);
    match &opts.waves {
        Some(sink) => {
            let path = sink.path.as_path();
            ensure_parent(path)?;
            let period_ps = (1e6 / c.clock_mhz).round().max(1.0) as u64;
            let mut wr = waves::WaveWriter::create(path, sink.format, period_ps, &w.signals(), &waves::WaveFilter::default()).map_err(|e| Error::io(path, e.to_string()))?;
            let run = w.run_traced(threads, ff, max, watchdog, Some(&mut wr)).map_err(text)?;
            let at = match end {
                WaveEnd::Layer => run.layer_cycles,
                WaveEnd::Run => run.end_cycle,
            };
            wr.finish(at).map_err(|e| Error::io(path, e.to_string()))?;
            Ok(run)
        }
        None => w.run(threads, ff, max, watchdog).map_err(text),
    }
}

/// Stepper threads of a wafer run (at least one).
pub fn threads(opts: &RunOptions) -> usize {
    opts.threads.unwrap_or(1).max(1) as usize
}

/// Runs a built layer program on the wafer (with `opts.waves`, and the functional check of
/// the payloads when `functional`) and summarizes it.
pub fn run_program(c: &WaferCfg, mp: &Mapping, map_cycles: u64, prog: &LayerProgram, functional: bool, opts: &RunOptions) -> Result<WaferResult> {
    let mut w = Wafer::new_with(c, prog, threads(opts), functional).map_err(text)?;
    let t0 = Instant::now();
    let run = simulate(&mut w, c, opts, WaveEnd::Layer)?;
    let wall = t0.elapsed().as_secs_f64();
    let mut r = WaferResult::new(c, mp, prog, &run, wall);
    r.mapping_controller_cycles = map_cycles;
    if functional {
        let rep = hw::wafer::functional::check(prog, &w).map_err(|e| Error::Run(format!("functional check failed ({} mapping): {e}", c.mapping.name())))?;
        r.functional = Some(rep);
    }
    Ok(r)
}

/// One mapping end to end: the mapping controller's decision, the layer program, the run.
pub fn run_one(c: &WaferCfg, m: &ModelPreset, routing: &Routing, functional: bool, opts: &RunOptions) -> Result<(WaferResult, LayerProgram)> {
    run_one_with(c, m, routing, functional, opts, mapping_ctrl_cl)
}

/// [`run_one`] with the mapping controller `ctrl` builds.
pub fn run_one_with(c: &WaferCfg, m: &ModelPreset, routing: &Routing, functional: bool, opts: &RunOptions, ctrl: MappingCtrlFactory) -> Result<(WaferResult, LayerProgram)> {
    let (mp, map_cycles) = run_mapping_ctrl_with(c, ctrl)?;
    let prog = build(c, m, &mp, routing);
    let r = run_program(c, &mp, map_cycles, &prog, functional, opts)?;
    Ok((r, prog))
}

/// One MoE layer on the wafer, built and checked, ready to run under each mapping.
#[derive(Debug, Clone)]
pub struct WaferLayer {
    /// The config (its `mapping` is replaced by each part's).
    pub cfg: WaferCfg,
    pub model: ModelPreset,
    pub mappings: Vec<MappingKind>,
    /// Real values through the collectives, checked against the FL after each run.
    pub functional: bool,
    pub routing: Routing,
    /// The mapping controller each part runs (default: the CL model; `wafer --rtl mapping`
    /// sets the RTL stand-in's factory). Private: [`WaferLayer::with_mapping_ctrl`] is the
    /// way in, so a controller that cannot serve a mapping is refused before any run.
    mapping_ctrl: MappingCtrlFactory,
}

impl WaferLayer {
    /// Every check before the first simulation: at least one mapping, the weights fit the
    /// dies' HBM, every mapping's tables exist for the grid, the input's skew.
    /// [`WaferLayer::with_routing`] then reads the routing.
    pub fn new(cfg: WaferCfg, model: ModelPreset, mappings: Vec<MappingKind>, functional: bool, input: &LayerInput) -> Result<Self> {
        if mappings.is_empty() {
            return Err(Error::input("--mapping", "give at least one of baseline, er, her"));
        }
        check_fits(&cfg, &model)?;
        for &k in &mappings {
            map(k, cfg.geom(), cfg.tp, cfg.dp, cfg.all_gather).map_err(|e| Error::input(format!("--mapping {}", k.name()), e.to_string()))?;
        }
        input.check()?;
        Ok(WaferLayer { cfg, model, mappings, functional, routing: Routing::default(), mapping_ctrl: mapping_ctrl_cl })
    }

    /// Runs the mapping controller `ctrl` (`wafer --rtl mapping`: the RTL stand-in's
    /// factory) in place of the CL model. What it cannot build — a stand-in's tables too
    /// small for the grid — is refused now, before any run, naming `flag` and the mapping.
    pub fn with_mapping_ctrl(mut self, flag: &str, ctrl: MappingCtrlFactory) -> Result<Self> {
        for &k in &self.mappings {
            ctrl(k, self.cfg.geom(), self.cfg.tp, self.cfg.dp, self.cfg.all_gather).map_err(|e| Error::input(format!("{flag} ({})", k.name()), e.to_string()))?;
        }
        self.mapping_ctrl = ctrl;
        Ok(self)
    }

    /// Reads or generates the layer's routing (a trace file is read here).
    pub fn with_routing(mut self, input: &LayerInput) -> Result<Self> {
        self.routing = layer_routing(&self.cfg, &self.model, input)?;
        Ok(self)
    }

    /// The config of mapping `k`.
    pub fn cfg_of(&self, k: MappingKind) -> WaferCfg {
        WaferCfg { mapping: k, ..self.cfg.clone() }
    }

    /// Runs every mapping in turn; a mapping that fails (a watchdog, a functional mismatch,
    /// a panic) does not stop the others. `opts.waves` is the base path: one file per
    /// mapping, `STEM-<mapping>.EXT` when several. `each` sees every part as it ends (in
    /// order) and may stop the run with an error.
    pub fn run(&self, opts: &RunOptions, mut each: impl FnMut(&Part<MappingKind, WaferResult>, Option<&Path>) -> Result<()>) -> Result<Parts<MappingKind, WaferResult>> {
        let several = self.mappings.len() > 1;
        tracing::info!(mappings = ?self.mappings.iter().map(|k| k.name()).collect::<Vec<_>>(), model = %self.model.name, dies = self.cfg.dies(), "wafer run start");
        let mut parts = Parts { ok: Vec::new(), failed: Vec::new() };
        for &k in &self.mappings {
            let c = self.cfg_of(k);
            let waves = opts.waves.as_ref().map(|s| WaveSink { path: s.part_path(k.name(), several), format: s.format });
            let o = RunOptions { waves, ..opts.clone() };
            let result = contained(k.name(), || run_one_with(&c, &self.model, &self.routing, self.functional, &o, self.mapping_ctrl).map(|(r, _)| r));
            if let Ok(r) = &result {
                tracing::debug!(mapping = k.name(), layer_cycles = r.layer_cycles, "wafer mapping done");
            }
            let part = Part { key: k, result };
            each(&part, o.waves.as_ref().map(|s| s.path.as_path()))?;
            match part.result {
                Ok(r) => parts.ok.push((k, r)),
                Err(e) => parts.failed.push((k, e)),
            }
        }
        Ok(parts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper knobs' overrides: each refusal names its flag, and the values land in the
    /// config (tokens per group = per die × TP; fp16 = 2-byte dispatch; the split as given).
    #[test]
    fn paper_knob_overrides() {
        let o = WaferOverrides { tp: Some(8), tokens_per_die: Some(32), comm_dtype: Some(CommDtype::Fp16), replica_split: Some(hw::wafer::config::ReplicaSplit::Even), ..Default::default() };
        let c = wafer_cfg(WaferCfg::default(), &o).unwrap();
        assert_eq!((c.tokens_per_group, c.dp, c.dispatch_elem_bytes, c.combine_elem_bytes), (256, 2, 2, 2));
        assert_eq!(c.replica_split, hw::wafer::config::ReplicaSplit::Even);
        let both = WaferOverrides { tokens_per_group: Some(8), tokens_per_die: Some(2), ..Default::default() };
        assert!(wafer_cfg(WaferCfg::default(), &both).unwrap_err().to_string().contains("--tokens-per-die"));
        let big = WaferOverrides { tp: Some(16), tokens_per_die: Some(u32::MAX), ..Default::default() };
        assert!(wafer_cfg(WaferCfg::default(), &big).unwrap_err().to_string().contains("--tokens-per-die"));
        let zero = WaferOverrides { tokens_per_die: Some(0), ..Default::default() };
        assert!(wafer_cfg(WaferCfg::default(), &zero).unwrap_err().to_string().contains("--tokens-per-die"));
        assert!("bf16".parse::<CommDtype>().unwrap_err().to_string().contains("--comm-dtype"));
        // Defaults: today's config, and its serialized form has no replica_split key.
        let d = wafer_cfg(WaferCfg::default(), &WaferOverrides::default()).unwrap();
        assert_eq!(d, WaferCfg::default());
        assert!(!serde_json::to_string(&d).unwrap().contains("replica_split"));
    }
}
