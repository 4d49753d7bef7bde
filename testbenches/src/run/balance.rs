//! Expert load balancing on the wafer, iteration by iteration, per balancer (none, EPLB,
//! topology-aware invasive, NI-Balancer), on a scenario workload with time structure or a
//! routing trace (`waferstream balance`). The balancer blocks and their state between
//! iterations are `hw::wafer::balance::BalanceLoop`; this is the run driver: it builds the
//! wafer of each iteration, runs it (with the migration in flight beside it, and alone for
//! the unperturbed numbers), and runs an invasive migration's stall.
//!
//! Build: [`balance_cfg`], [`BalanceSetup::new`] (HBM fit with the shadow slots, the warm-up,
//! the mapping's cold links for topo-ni), [`BalanceSetup::with_workload`]. Run:
//! [`BalanceSetup::run`] → one [`BalanceResult`] per balancer.

use std::path::{Path, PathBuf};

use hw::wafer::balance::{BalanceCfg, BalanceLoop, BalanceResult, BalancerKind, IterRecord};
use hw::wafer::balancer::NiUnits;
use hw::wafer::migration::MigGate;
use hw::wafer::{Wafer, WaferCfg};
use sched::models::ModelPreset;
use sched::scenario::{generate_scenario, Mix, ScenarioCfg, SCENARIO_NAMES};
use sched::trace::{load_trace, Trace};
use sched::wafer::routing::{trace_iteration_routing, trace_stream_routing};
use sched::wafer::Mapping;

use super::limits;
use super::wafer::{check_fits, run_mapping_ctrl, simulate, text, threads, Routing, WaveEnd};
use super::{contained, Error, Part, Parts, Result, RunOptions, WaveSink};

/// What the flags change in a balancer config (`None`: the config's own value).
#[derive(Debug, Clone, Default)]
pub struct BalanceOverrides {
    pub shadow_slots: Option<u32>,
    pub alpha: Option<f64>,
    pub warmup: Option<u32>,
}

/// The balancer config: `base` (a file's, or the default), then the overrides, validated.
pub fn balance_cfg(base: BalanceCfg, o: &BalanceOverrides) -> Result<BalanceCfg> {
    let mut b = base;
    if let Some(s) = o.shadow_slots {
        b.shadow_slots = s;
    }
    if let Some(x) = o.alpha {
        b.alpha = x;
    }
    if let Some(w) = o.warmup {
        b.warmup_iters = w;
    }
    b.validate().map_err(text)?;
    Ok(b)
}

/// Where the iterations' routing comes from.
#[derive(Debug, Clone)]
pub struct BalanceInput {
    /// A routing trace (iteration i of the run takes the trace's iteration i, cyclically),
    /// or else the scenario.
    pub trace: Option<PathBuf>,
    /// `mixed` or one scenario name.
    pub scenario: String,
    /// Period of the mixed scenario's drift, iterations.
    pub period: u32,
    /// Zipf skew of the scenarios' expert popularity.
    pub skew: Option<f64>,
}

/// The workload: per iteration, `[group][token]` → top-k; the per-layer skewness of its
/// source; how a trace was read (`stream` or `iterations`).
pub struct Workload {
    pub routing: Vec<Routing>,
    pub layer_skewness: Vec<f64>,
    pub read_as: &'static str,
}

fn workload(input: &BalanceInput, c: &WaferCfg, m: &ModelPreset, iters: u32, warmup: u32) -> Result<Workload> {
    let trace: Trace = match &input.trace {
        Some(p) => load_trace(p).map_err(text)?,
        None => {
            let mix = if input.scenario == "mixed" {
                Mix::Mixed { period_iters: input.period }
            } else if SCENARIO_NAMES.contains(&input.scenario.as_str()) {
                Mix::Fixed(input.scenario.clone())
            } else {
                return Err(Error::input("--scenario", format!("unknown {:?} (mixed, {})", input.scenario, SCENARIO_NAMES.join(", "))));
            };
            let scenarios = match &mix {
                Mix::Fixed(s) => vec![s.clone()],
                Mix::Mixed { .. } => ScenarioCfg::default().scenarios,
            };
            let mut s = ScenarioCfg {
                model: Some(m.name.clone()),
                experts: m.experts,
                top_k: m.top_k,
                layers: 1,
                tokens_per_iter: c.dp.saturating_mul(c.tokens_per_group),
                iters,
                seed: c.seed,
                scenarios,
                mix,
                warmup_iters: warmup,
                ..ScenarioCfg::default()
            };
            if let Some(k) = input.skew {
                s.skew = k;
            }
            s.validate().map_err(|e| Error::input("--scenario", e.to_string()))?;
            generate_scenario(&s).map_err(|e| Error::input("--scenario", e.to_string()))?
        }
    };
    let skew = sched::scenario::layer_skewness(&trace);
    let what = input.trace.as_ref().map_or("--scenario".to_string(), |p| format!("--trace {}", p.display()));
    // A trace whose iterations each hold the tokens of a run iteration gives one per
    // iteration; a smaller one (a decode trace: one token per iteration) is read as a stream.
    let need = c.dp as usize * c.tokens_per_group as usize;
    let stream = trace.iterations().iter().any(|(_, r)| r.len() < need);
    let routing = (0..iters as usize)
        .map(|k| if stream { trace_stream_routing(&trace, m, 0, k, c.dp, c.tokens_per_group) } else { trace_iteration_routing(&trace, m, 0, k, c.dp, c.tokens_per_group) }.map_err(|e| Error::input(what.clone(), e)))
        .collect::<Result<Vec<_>>>()?;
    Ok(Workload { routing, layer_skewness: skew, read_as: if stream { "stream" } else { "iterations" } })
}

/// The balance run, checked.
pub struct BalanceSetup {
    /// The wafer (each balancer's loop adds the migration VC).
    pub cfg: WaferCfg,
    pub model: ModelPreset,
    pub bal: BalanceCfg,
    pub kinds: Vec<BalancerKind>,
    pub iters: u32,
    pub map: Mapping,
    pub workload: Option<Workload>,
    /// The NI-Balancer's trigger and decision unit (the CL's; `--rtl balancer`: the RTL
    /// stand-ins). Every balancer's trigger is the unit; Algorithm 1 is topo's and topo-ni's.
    pub units: NiUnits,
}

/// What a balance run reports as it goes.
pub enum BalanceEvent<'a> {
    /// A balancer starts its `iters` iterations.
    Start(BalancerKind, usize),
    /// An iteration of the running balancer ended.
    Iter(&'a IterRecord),
    /// A balancer ended (or failed).
    Done(&'a Part<BalancerKind, BalanceResult>),
}

impl BalanceSetup {
    /// Every check of the run's parameters: at least one balancer, the iterations within
    /// [`limits::BALANCE_ITERS`], the weights fit (with `warmup_flag`: the warm-up was given
    /// as a flag, not the config), warm-up iterations leave some to measure, the shadow slots
    /// fit the HBM, and topo-ni has cold links to use.
    pub fn new(cfg: WaferCfg, model: ModelPreset, bal: BalanceCfg, kinds: Vec<BalancerKind>, iters: u32, warmup_flag: bool) -> Result<Self> {
        if kinds.is_empty() {
            return Err(Error::input("--balancer", "give at least one of none, eplb, topo, topo-ni"));
        }
        limits::check_u64("--iters", iters as u64, limits::BALANCE_ITERS)?;
        let c = cfg;
        c.validate().map_err(text)?;
        check_fits(&c, &model)?;
        // Warm-up iterations are left out of the mean imbalance; with none left after them, the
        // mean would silently fall back to every iteration. (The default's 10 is the paper's
        // setting and only applies when the run is long enough.)
        if bal.warmup_iters >= iters && (warmup_flag || bal.warmup_iters != BalanceCfg::default().warmup_iters) {
            let what = if warmup_flag { "--warmup" } else { "warmup_iters of --balance-config" };
            return Err(Error::input(what, format!("{} warm-up iterations of --iters {}: none left to measure (give fewer, or more --iters)", bal.warmup_iters, iters)));
        }
        // Shadow slots hold whole experts: they must fit beside the home experts.
        let per_die = model.layers as u64 * ((model.experts as u64).div_ceil(c.dies() as u64) + bal.shadow_slots as u64) * model.expert_bytes();
        if per_die as f64 > c.die.hbm_gb * 1e9 {
            return Err(Error::input(format!("--shadow-slots {}", bal.shadow_slots), format!("{:.1} GB of expert weights per die exceed die.hbm_gb = {} GB", per_die as f64 / 1e9, c.die.hbm_gb)));
        }
        let (map, _) = run_mapping_ctrl(&c)?;
        if kinds.contains(&BalancerKind::TopoNi) && !(map.ftds_disjoint() && map.all_gather) {
            return Err(Error::input(
                "--balancer topo-ni",
                format!("the {} mapping's FTDs are not disjoint (or the all-gather is off), so no links are cold in the all-to-all; use --mapping er or her", c.mapping.name()),
            ));
        }
        Ok(BalanceSetup { cfg: c, model, bal, kinds, iters, map, workload: None, units: NiUnits::CL })
    }

    /// Builds the workload (a trace is read here).
    pub fn with_workload(mut self, input: &BalanceInput) -> Result<Self> {
        self.workload = Some(workload(input, &self.cfg, &self.model, self.iters, self.bal.warmup_iters)?);
        Ok(self)
    }

    /// Runs every balancer in turn over the workload; a balancer that fails does not stop the
    /// others. `opts.waves`: the non-invasive balancer's first iteration with a migration in
    /// flight, and its decision unit's first run beside it (NAME-decision.EXT). `on` sees the
    /// run's progress and may stop it with an error.
    pub fn run(&self, opts: &RunOptions, mut on: impl FnMut(BalanceEvent) -> Result<()>) -> Result<Parts<BalancerKind, BalanceResult>> {
        let w = self.workload.as_ref().ok_or_else(|| Error::Run("balance: no workload (with_workload first)".into()))?;
        tracing::info!(balancers = ?self.kinds.iter().map(|k| k.name()).collect::<Vec<_>>(), mapping = self.cfg.mapping.name(), iters = w.routing.len(), "balance run start");
        let mut parts = Parts { ok: Vec::new(), failed: Vec::new() };
        for &k in &self.kinds {
            on(BalanceEvent::Start(k, w.routing.len()))?;
            let wave = opts.waves.as_ref().filter(|_| k == BalancerKind::TopoNi);
            let mut stop: Option<Error> = None;
            let result = contained(k.name(), || {
                self.run_one(k, &w.routing, opts, wave, &mut |rec| {
                    if stop.is_none() {
                        if let Err(e) = on(BalanceEvent::Iter(rec)) {
                            stop = Some(e);
                        }
                    }
                })
            })
            .map_err(|e| Error::Run(format!("balance {}: {e}", k.name())));
            if let Some(e) = stop {
                return Err(e);
            }
            let part = Part { key: k, result };
            on(BalanceEvent::Done(&part))?;
            match part.result {
                Ok(r) => parts.ok.push((k, r)),
                Err(e) => parts.failed.push((k, e)),
            }
        }
        Ok(parts)
    }

    /// One balancer over `routing` (`routing[i]`: iteration i's `[group][token]` → top-k).
    pub fn run_one(&self, kind: BalancerKind, routing: &[Routing], opts: &RunOptions, wave: Option<&WaveSink>, on_iter: &mut dyn FnMut(&IterRecord)) -> Result<BalanceResult> {
        run_balance_with(&self.cfg, &self.model, &self.map, &self.bal, kind, routing, opts, wave, on_iter, self.units)
    }
}

/// Runs `routing.len()` iterations under one balancer: each iteration's layer on the wafer
/// (the migration in flight beside it; then alone, for the unperturbed numbers), and an
/// invasive migration's stall when the balancer decides one. `wave`: the first iteration
/// with a migration in flight (`top.wafer.…`), and the decision unit's first run beside it.
#[allow(clippy::too_many_arguments)]
pub fn run_balance(cfg: &WaferCfg, model: &ModelPreset, map: &Mapping, bal: &BalanceCfg, kind: BalancerKind, routing: &[Routing], opts: &RunOptions, wave: Option<&WaveSink>, on_iter: &mut dyn FnMut(&IterRecord)) -> Result<BalanceResult> {
    run_balance_with(cfg, model, map, bal, kind, routing, opts, wave, on_iter, NiUnits::CL)
}

/// [`run_balance`] with `units` as the trigger and decision unit (an RTL stand-in's factories).
#[allow(clippy::too_many_arguments)]
pub fn run_balance_with(cfg: &WaferCfg, model: &ModelPreset, map: &Mapping, bal: &BalanceCfg, kind: BalancerKind, routing: &[Routing], opts: &RunOptions, wave: Option<&WaveSink>, on_iter: &mut dyn FnMut(&IterRecord), units: NiUnits) -> Result<BalanceResult> {
    let mut bl = BalanceLoop::new(cfg, model, map, bal, kind, wave.map(|s| (s.path.as_path(), s.format))).map_err(text)?.with_units(units);
    let c = bl.cfg.clone();
    let n = threads(opts);
    // Fast-forward always (results are identical); waveforms only where asked.
    let plain = RunOptions { waves: None, ..opts.clone() };
    let mut wave_wafer = wave.cloned();
    tracing::debug!(balancer = kind.name(), iters = routing.len(), "balancer start");
    for (i, r) in routing.iter().enumerate() {
        let prog = bl.program(r);
        // The layer, with the non-invasive migration beside it.
        let mut w = Wafer::new(&c, &prog, n).map_err(text)?;
        let o = match bl.inflight() {
            Some(mp) => {
                w.load_migration(mp, MigGate::Windows);
                // The first iteration with a migration in flight goes to the waveform.
                match wave_wafer.take() {
                    Some(s) => RunOptions { waves: Some(s), ..plain.clone() },
                    None => plain.clone(),
                }
            }
            None => plain.clone(),
        };
        let run = simulate(&mut w, &c, &o, WaveEnd::Run)?;
        let alone = if bl.inflight().is_some() {
            bl.delivered(&w);
            let mut w0 = Wafer::new(&c, &prog, n).map_err(text)?;
            Some(simulate(&mut w0, &c, &plain, WaveEnd::Layer)?)
        } else {
            None
        };
        let mut rec = bl.record(i, &prog, &run, alone.as_ref());
        let (decided, stall) = bl.after_layer(&mut rec, &prog).map_err(text)?;
        if let Some(d) = decided {
            tracing::debug!(balancer = kind.name(), iter = i, moves = d.moves, replicas = d.replicas, decision_cycles = d.decision_cycles, "balancer re-plan");
        }
        if let Some(s) = stall {
            let mut ws = Wafer::new(&c, &s.program, n).map_err(text)?;
            ws.load_migration(&s.plan, MigGate::Always);
            let sr = simulate(&mut ws, &c, &plain, WaveEnd::Run)?;
            tracing::debug!(balancer = kind.name(), iter = i, stall_cycles = sr.end_cycle, flits = sr.mig_flits, "invasive migration");
            bl.stalled(&mut rec, &sr);
        }
        tracing::debug!(balancer = kind.name(), iter = i, layer_cycles = rec.layer_cycles, max_over_mean = rec.max_over_mean, "iteration done");
        on_iter(&rec);
        bl.push(rec);
    }
    Ok(bl.finish())
}

/// The decision unit's waveform beside the wafer's: NAME-decision.EXT.
pub fn decision_path(p: &Path) -> PathBuf {
    hw::wafer::balance::decision_path(p)
}

/// DeepSeek's EPLB on a matrix of per-layer expert loads (`waferstream eplb`): the plan and
/// the max / mean device load per layer before (one replica per expert, in id order) and
/// after. Its errors name the argument at fault (`EplbError::arg`) for the caller to word.
pub struct EplbRun {
    pub plan: sched::balance::EplbPlan,
    pub before: Vec<f64>,
    pub after: Vec<f64>,
}

/// Checks `cfg` against `weights`, plans, and measures the imbalance before and after.
pub fn eplb(weights: &[Vec<f64>], cfg: &sched::balance::EplbCfg) -> std::result::Result<EplbRun, sched::balance::EplbError> {
    use sched::balance::{in_order_device_loads, max_over_mean, rebalance_experts};
    cfg.validate(weights)?;
    let plan = rebalance_experts(weights, cfg)?;
    let before: Vec<f64> = weights.iter().map(|row| max_over_mean(&in_order_device_loads(row, cfg.num_gpus))).collect();
    let after: Vec<f64> = (0..weights.len()).map(|l| max_over_mean(&plan.device_loads(l, &weights[l]))).collect();
    tracing::debug!(layers = weights.len(), devices = cfg.num_gpus, "eplb planned");
    Ok(EplbRun { plan, before, after })
}
