//! The scenario file of `waferstream run`: a `[scenario]` header (name, kind) and the tables
//! of that kind — `[noc]` for a mesh NoC sweep, `[package]` + `[workload]` for the chiplet
//! package — plus `[output]`. Named scenarios are embedded (`waferstream run NAME`).
//!
//! [`load`] finds and parses one (a file, a name, or the default); [`check_package`] and
//! [`package_run`] turn a `kind = "package"` scenario into a checked [`PackageRun`]
//! (`sweep` builds every grid point through the same two).

use std::path::{Path, PathBuf};

use hw::noc::NocCfg;
use hw::pkg::config::{PkgCfg, Strategy};
use hw::pkg::package::PkgRtl;
use sched::models::ModelPreset;
use serde::{Deserialize, Serialize};

use super::limits;
use super::package::{parse_strategies, workload_shaped, PackageRun, Workload};
use crate::error::{Error, Result};

/// The embedded default scenario.
pub const DEFAULT_SCENARIO: &str = include_str!("../../configs/default.toml");

/// Embedded named scenarios (`waferstream run NAME`).
pub const NAMED: [(&str, &str); 3] = [
    ("default", DEFAULT_SCENARIO),
    ("noc-sweep", include_str!("../../configs/noc_sweep.toml")),
    ("fsedp-paper", include_str!("../../papers/fsedp-paper.toml")),
];

/// A scenario file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioCfg {
    pub scenario: ScenarioHeader,
    #[serde(default)]
    pub noc: NocCfg,
    /// `kind = "package"`: the package and what runs on it.
    #[serde(default)]
    pub package: PkgCfg,
    #[serde(default)]
    pub workload: WorkloadCfg,
    #[serde(default)]
    pub output: OutputCfg,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioHeader {
    pub name: String,
    pub kind: ScenarioKind,
    /// Injection rates to sweep (flits/node/cycle); the config's traffic.rate if empty.
    #[serde(default)]
    pub rates: Vec<f64>,
    /// A line printed under a package scenario's table: what it tests and where the rest is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScenarioKind {
    /// Mesh NoC under synthetic traffic.
    NocSweep,
    /// One MoE layer on the FSE-DP chiplet package, per strategy.
    Package,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct OutputCfg {
    pub json: Option<PathBuf>,
    /// Package scenarios: directory for the plots (SVG).
    pub plots: Option<PathBuf>,
    pub vcd: Option<PathBuf>,
    pub fst: Option<PathBuf>,
    pub trace: Vec<String>,
    pub window: Option<String>,
}

/// What the package runs: model, tokens and strategies (the scenario's `[workload]`).
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
    /// MoE layers per iteration, run in turn (their results add up: a latency over all
    /// layers, divided by `layers` the layer average); 0 = every layer of the model.
    #[serde(skip_serializing_if = "is_one")]
    pub layers: u32,
    /// Request structure of the generated routing (sched::workload): prompt lengths and
    /// decode steps of a request (`[min, max]`), chunked prefill (most tokens of one prompt
    /// per iteration; 0 = unchunked), most decode tokens per iteration (0 = half the
    /// iteration, the generator's default share), and how strongly a request's tokens pick
    /// from the request's own preferred experts (`coherence` in [0, 1], sets of
    /// `request_experts`, 0 = 2 · top_k).
    // (Written only when set, so a sweep line of a workload without them keeps its bytes.)
    #[serde(skip_serializing_if = "is_default_prompt")]
    pub prompt_len: [u32; 2],
    #[serde(skip_serializing_if = "is_default_decode")]
    pub decode_steps: [u32; 2],
    #[serde(skip_serializing_if = "is_zero")]
    pub prefill_chunk: u32,
    #[serde(skip_serializing_if = "is_zero")]
    pub decode_tokens: u32,
    #[serde(skip_serializing_if = "is_zero_f")]
    pub coherence: f64,
    #[serde(skip_serializing_if = "is_zero")]
    pub request_experts: u32,
}

fn is_one(v: &u32) -> bool {
    *v == 1
}
fn is_zero(v: &u32) -> bool {
    *v == 0
}
fn is_zero_f(v: &f64) -> bool {
    *v == 0.0
}
fn is_default_prompt(v: &[u32; 2]) -> bool {
    *v == sched::workload::GenCfg::default().prompt_len
}
fn is_default_decode(v: &[u32; 2]) -> bool {
    *v == sched::workload::GenCfg::default().decode_steps
}

impl WorkloadCfg {
    /// The generator's shape of this workload (tokens, skew, seed, request structure).
    pub fn shape(&self) -> sched::workload::GenCfg {
        let d = sched::workload::GenCfg::default();
        sched::workload::GenCfg {
            tokens_per_iter: self.tokens,
            skew: self.skew,
            seed: self.seed.max(1),
            prompt_len: self.prompt_len,
            decode_steps: self.decode_steps,
            prefill_chunk: self.prefill_chunk,
            decode_tokens: (self.decode_tokens > 0).then_some(self.decode_tokens),
            coherence: self.coherence,
            request_experts: self.request_experts,
            ..d
        }
    }

    /// Layers to generate for `model` (`layers`, or all of the model's with 0).
    pub fn layers_for(&self, model: &ModelPreset) -> u32 {
        if self.layers == 0 { model.layers } else { self.layers }
    }
}

impl Default for WorkloadCfg {
    fn default() -> Self {
        WorkloadCfg {
            model: limits::DEFAULT_MODEL.into(),
            tokens: limits::DEFAULT_TOKENS,
            strategies: limits::DEFAULT_STRATEGIES.split(',').map(String::from).collect(),
            skew: limits::DEFAULT_SKEW,
            seed: 1,
            functional: false,
            iters: 1,
            layers: 1,
            prompt_len: sched::workload::GenCfg::default().prompt_len,
            decode_steps: sched::workload::GenCfg::default().decode_steps,
            prefill_chunk: 0,
            decode_tokens: 0,
            coherence: 0.0,
            request_experts: 0,
        }
    }
}

/// Reads a TOML document into `T`; an error names `origin` and the field at fault
/// (`config field `a.b``).
pub fn parse_toml<T: serde::de::DeserializeOwned>(text: &str, origin: &str) -> Result<T> {
    let de = toml::Deserializer::new(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path.is_empty() || path == "." {
            Error::input(origin, inner.to_string())
        } else {
            Error::input(origin, format!("config field `{path}`: {inner}"))
        }
    })
}

/// Parses and checks a scenario (`origin` names it in errors): the NoC config, the package
/// config of a package scenario, the injection rates.
pub fn parse_scenario(text: &str, origin: &str) -> Result<ScenarioCfg> {
    let s: ScenarioCfg = parse_toml(text, origin)?;
    s.noc.validate().map_err(|e| Error::input(origin, e.to_string().replacen("config field `", "config field `noc.", 1)))?;
    if s.scenario.kind == ScenarioKind::Package {
        s.package.validate().map_err(|e| Error::input(origin, e.under("package").to_string()))?;
    }
    if let Some(r) = s.scenario.rates.iter().find(|r| !(r.is_finite() && (0.0..=1.0).contains(*r))) {
        return Err(Error::input(origin, format!("config field `scenario.rates`: rate {r} outside 0..=1 flits/node/cycle")));
    }
    Ok(s)
}

/// The names of the embedded scenarios, comma-separated.
pub fn named_list() -> String {
    NAMED.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

/// The scenario `config` names: a file (a file of that name wins over an embedded name), an
/// embedded scenario's name, or, with `None`, the embedded default. A name that is neither
/// is refused listing the embedded ones.
pub fn load(config: Option<&Path>) -> Result<ScenarioCfg> {
    let Some(p) = config else { return parse_scenario(DEFAULT_SCENARIO, "embedded default scenario") };
    if !p.exists() {
        if let Some((n, text)) = p.to_str().and_then(|n| NAMED.iter().find(|(k, _)| *k == n)) {
            return parse_scenario(text, &format!("embedded scenario `{n}`"));
        }
    }
    match std::fs::read_to_string(p) {
        Ok(text) => parse_scenario(&text, &p.display().to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::Run(format!("cannot read {}: {e}; not an embedded scenario either (embedded: {})", p.display(), named_list()))),
        Err(e) => Err(Error::Run(format!("cannot read {}: {e}", p.display()))),
    }
}

/// Checks a `kind = "package"` scenario beyond its parse: the model, the workload's ranges and
/// strategies, the package against the model. Each error names its field. `run` and `sweep`
/// both go through here.
pub fn check_package(sc: &ScenarioCfg) -> Result<(ModelPreset, Vec<Strategy>)> {
    let w = &sc.workload;
    if !sc.scenario.rates.is_empty() {
        return Err(Error::input("config field `scenario.rates`", "a package scenario has no injection rates"));
    }
    let model = sched::models::model_by_name(&w.model).map_err(|e| Error::input("config field `workload.model`", e.to_string()))?;
    sc.package.validate_for(model.d_ffn).map_err(|e| Error::Run(e.under("package").to_string()))?;
    limits::check_u64("config field `workload.tokens`", w.tokens as u64, limits::TOKENS)?;
    limits::check_f64("config field `workload.skew`", w.skew, limits::SKEW)?;
    if w.iters == 0 {
        return Err(Error::input("config field `workload.iters`", "at least 1 iteration"));
    }
    // The request structure, checked by the generator's own rules before anything runs.
    let g = sched::workload::GenCfg { model: Some(model.name.clone()), experts: model.experts, top_k: model.top_k, layers: w.layers_for(&model), iters: w.iters, ..w.shape() };
    g.validate().map_err(|e| Error::input(format!("config field `workload.{}`", e.field), e.reason))?;
    let strategies = parse_strategies(&w.strategies.join(","), "config field `workload.strategies`")?;
    Ok((model, strategies))
}

/// The generated routing of a checked package scenario: `workload.iters` iterations of
/// `workload.tokens` tokens, `workload.layers` layers, shaped by the request fields (the
/// same [`workload_shaped`] as `package`).
pub fn package_workload(sc: &ScenarioCfg, model: &ModelPreset) -> Result<Workload> {
    let w = &sc.workload;
    let layers = (w.layers != 1).then(|| 0..w.layers_for(model) as usize);
    workload_shaped(model, &w.shape(), None, Some(0..w.iters as usize), layers, model.d_model, model.d_ffn)
        .map_err(|e| Error::Run(e.to_string().replace("--iters", "config field `workload.iters`").replace("--layers", "config field `workload.layers`")))
}

/// A `kind = "package"` scenario as a checked run: [`check_package`], [`package_workload`],
/// then [`PackageRun::new`]. `timeline` records the activity timeline (for plots).
pub fn package_run(sc: &ScenarioCfg, timeline: bool) -> Result<PackageRun> {
    let (model, strategies) = check_package(sc)?;
    let work = package_workload(sc, &model)?;
    let mut cfg = sc.package.clone();
    cfg.sim.timeline |= timeline;
    PackageRun::new(cfg, model, work, strategies, sc.workload.functional, PkgRtl::default())
}
