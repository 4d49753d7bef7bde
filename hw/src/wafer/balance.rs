//! The load-balanced wafer, iteration by iteration (SPEC §4 NI-Balancer; paper §V): the
//! per-expert load counters, the Eq. 2 trigger, the decision unit (`balancer.rs`, Algorithm 1
//! as a controller; or DeepSeek's EPLB for the baseline) and the migration engines
//! (`migration.rs`) around the cycle-level wafer. One iteration is one MoE layer of the
//! iteration's tokens, run cycle by cycle; everything between iterations is the controllers'
//! table updates.
//!
//! Per iteration:
//! 1. the placement in use (each expert's home die, round-robin, plus the replicas whose
//!    weights have fully arrived in a shadow slot) gives the layer program: each token goes to
//!    the replica nearest its holder (`program::plans`);
//! 2. the wafer runs the layer — with the non-invasive balancer, its migration engines move
//!    the pending chunks in the all-reduce / all-to-all windows of the same run; the same
//!    layer is also run without them, to measure the regular traffic's latency unperturbed;
//! 3. the load counters add the iteration's per-expert token counts (a window of the last
//!    `window_iters` iterations is what the decision sees);
//! 4. the trigger (Eq. 2) compares Σ (max − mean) / mean of the window's device loads with α,
//!    and the cycles since the last migration with β (0 for the non-invasive balancer, which
//!    also waits until its previous migration has landed);
//! 5. on a trigger the decision unit re-plans the replicas from the home placement: replicas
//!    kept by the new plan stay, the others are dropped, the new ones migrate — invasive
//!    balancers stall the wafer for a cycle-level run of the whole migration (every chunk
//!    straight from source to destination, nothing else on the network), the non-invasive one
//!    hands the moves to the migration engines as Local/Global steps.
//!
//! One layer stands for all: every layer of the model has the same windows and migrates its
//! own experts in them, so the per-layer ratios are the model's (docs/balance.md).
//!
//! This module holds the controllers and their state between iterations ([`BalanceLoop`]);
//! the run driver that builds and runs each iteration's wafer (and an invasive stall) is
//! `testbenches::run::balance`, so every wafer run stops at the same bounds.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use waves::{WaveFilter, WaveFormat, WaveWriter};

use sched::balance::eplb::{max_over_mean, rebalance_experts, EplbCfg};
use sched::balance::ni::{ColdRule, Move, TriggerCfg};
use sched::models::ModelPreset;
use sched::wafer::{A2aXfer, Mapping, Routing};
use serde::{Deserialize, Serialize};

use super::balancer::{run_decision, run_trigger, NiUnits};
use super::config::WaferCfg;
use super::migration::MigrationPlan;
use super::program::{build_planned, plans, LayerOpts, LayerProgram, Phase};
use super::wafer::{Wafer, WaferError, WaferRun};
use crate::cfg::{err, CfgError};

/// Which balancer runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BalancerKind {
    /// Home placement only.
    None,
    /// DeepSeek's EPLB re-placement of every slot (invasive: inference stalls while the
    /// weights move).
    Eplb,
    /// Algorithm 1 into shadow slots, invasive (stall while the copies move).
    Topo,
    /// Algorithm 1 into shadow slots, non-invasive (Local/Global steps in the collective
    /// windows, on cold links).
    TopoNi,
}

impl BalancerKind {
    pub const ALL: [BalancerKind; 4] = [BalancerKind::None, BalancerKind::Eplb, BalancerKind::Topo, BalancerKind::TopoNi];
    pub fn name(self) -> &'static str {
        match self {
            BalancerKind::None => "none",
            BalancerKind::Eplb => "eplb",
            BalancerKind::Topo => "topo",
            BalancerKind::TopoNi => "topo-ni",
        }
    }
}

impl std::str::FromStr for BalancerKind {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self, crate::Error> {
        BalancerKind::ALL.into_iter().find(|k| k.name() == s).ok_or_else(|| crate::Error::Unknown { field: "balancer".into(), name: s.into(), known: "none, eplb, topo, topo-ni".into() })
    }
}

/// The balancing controllers' parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BalanceCfg {
    /// Shadow slots per die (replicas it can hold besides its home experts). EPLB gets the
    /// same memory: `experts + shadow_slots × dies` physical slots.
    pub shadow_slots: u32,
    /// Eq. 2's α: the summed relative imbalance above which a migration may start.
    pub alpha: f64,
    /// Eq. 2's β for the invasive balancers, cycles since the last migration (the
    /// non-invasive one uses β = 0).
    pub invasive_beta_cycles: u64,
    /// Iterations the load counters cover.
    pub window_iters: u32,
    /// Flits per migration chunk (the unit a step moves and stages).
    pub chunk_flits: u32,
    /// Iterations left out of the averaged metrics (the workload's warm-up).
    pub warmup_iters: u32,
}

impl Default for BalanceCfg {
    fn default() -> Self {
        BalanceCfg { shadow_slots: 2, alpha: 0.2, invasive_beta_cycles: 2_000_000, window_iters: 4, chunk_flits: 64, warmup_iters: 10 }
    }
}

impl BalanceCfg {
    pub fn validate(&self) -> Result<(), CfgError> {
        if self.shadow_slots > 64 {
            return err("shadow_slots", format!("{} above 64", self.shadow_slots));
        }
        if !self.alpha.is_finite() || self.alpha < 0.0 {
            return err("alpha", format!("{} is not a finite value >= 0", self.alpha));
        }
        if self.window_iters == 0 || self.window_iters > 1000 {
            return err("window_iters", format!("{} outside 1..=1000", self.window_iters));
        }
        if self.chunk_flits == 0 || self.chunk_flits > 1 << 20 {
            return err("chunk_flits", format!("{} outside 1..=2^20", self.chunk_flits));
        }
        Ok(())
    }
}

/// One iteration's record (paper Fig. 15: device loads over iterations).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IterRecord {
    pub iter: u32,
    /// Token–expert assignments computed on each die.
    pub device_loads: Vec<u64>,
    pub max_over_mean: f64,
    pub layer_cycles: u64,
    pub moe_compute_cycles: u64,
    pub a2a_cycles: u64,
    /// Mean latency of the layer's regular transfers (handed to the collective engine → last
    /// flit received), with the migration beside them and without.
    pub regular_traffic_cycles: f64,
    pub regular_traffic_cycles_no_migration: f64,
    /// Spans of the all-reduce + dispatch + combine phases, with and without migration.
    pub comm_phase_cycles: u64,
    pub comm_phase_cycles_no_migration: u64,
    pub migration_stall_cycles: u64,
    /// Migration flits injected in this iteration (concurrent or stalled).
    pub migration_flits: u64,
    /// The trigger fired after this iteration (a new plan was decided).
    pub triggered: bool,
    /// Replicas in use (landed in shadow slots).
    pub replicas: u32,
}

/// What a balancer run measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BalanceResult {
    pub balancer: String,
    /// Mean over the iterations after warm-up of max / mean device load.
    pub max_over_mean_load: f64,
    pub migration_stall_cycles: u64,
    /// Σ over iterations of the expert compute of the slowest die and of the all-to-all
    /// (dispatch + combine spans).
    pub moe_compute_cycles: u64,
    pub a2a_cycles: u64,
    /// Σ over iterations of the regular transfers' mean latency (all-reduce, dispatch and
    /// combine transfers: handed to the collective engine → last flit received), with the
    /// migration running beside them and without it (the same layers re-run).
    pub regular_traffic_cycles: f64,
    pub regular_traffic_cycles_no_migration: f64,
    /// Σ over iterations of the communication phases' spans, with and without migration
    /// (these also move with when each die reaches a phase).
    pub comm_phase_cycles: u64,
    pub comm_phase_cycles_no_migration: u64,
    /// Σ layer cycles + stalls.
    pub total_cycles: u64,
    pub migrations: u32,
    pub moves: u64,
    pub migrated_bytes: u64,
    /// Cycles of the decision unit (Algorithm 1 controller) summed over decisions.
    pub decision_cycles: u64,
    pub iterations: Vec<IterRecord>,
}

/// Token–expert assignments each die computes (every micro-batch).
fn die_loads(prog: &LayerProgram, dies: u32) -> Vec<u64> {
    let mut d = vec![0u64; dies as usize];
    for a in prog.assignments.iter().flatten() {
        d[a.dst as usize] += 1;
    }
    d
}

/// The numbers of one run: the slowest die's expert compute, the all-to-all span, the span
/// of all communication phases, the regular transfers' mean latency.
fn traffic(run: &WaferRun) -> (u64, u64, u64, f64) {
    let ar = run.phase_cycles(Phase::AllReduce);
    let a2a = run.phase_cycles(Phase::Dispatch) + run.phase_cycles(Phase::Combine);
    // The slowest die's expert compute: the layer waits for it.
    let moe = run.die_busy.iter().map(|b| b.experts).max().unwrap_or(0);
    (moe, a2a, ar + a2a, run.mean_xfer_latency())
}

/// The balancing state between iterations.
struct State {
    /// Die → experts of its primary slots: round-robin home experts, or EPLB's last
    /// placement of every slot.
    base: Vec<Vec<u32>>,
    /// Replicas in use: (expert, die).
    replicas: BTreeSet<(u32, u32)>,
    /// Non-invasive: the migration in flight and the replicas it is bringing.
    inflight: Option<MigrationPlan>,
}

impl State {
    fn placement(&self) -> Vec<Vec<u32>> {
        let mut p = self.base.clone();
        for &(e, d) in &self.replicas {
            if !p[d as usize].contains(&e) {
                p[d as usize].push(e);
            }
        }
        for v in p.iter_mut() {
            v.sort_unstable();
        }
        p
    }
}

/// Inverts a list of lists: `lists[i]` holds js → `out[j]` holds the is (ascending), for
/// `n` js. Die → experts and expert → dies are the two directions of one placement.
fn invert(lists: &[Vec<u32>], n: u32) -> Vec<Vec<u32>> {
    let mut out = vec![Vec::new(); n as usize];
    for (i, js) in lists.iter().enumerate() {
        for &j in js {
            out[j as usize].push(i as u32);
        }
    }
    out
}

/// The nearest die of `hosts` to `dst` (ties: lower id) — the copy source a move really has.
fn nearest(map: &Mapping, hosts: &[u32], dst: u32) -> u32 {
    *hosts.iter().min_by_key(|&&h| (map.geom.hops(h, dst), h)).expect("an expert has a host")
}

/// The balancing controllers around the wafer, between iterations: the placement in use,
/// the load counters' window, the trigger and the decision unit, the migration in flight.
/// A run driver (`testbenches::run::balance`) builds each iteration's layer with
/// [`BalanceLoop::program`], runs it on a [`Wafer`] (with [`BalanceLoop::inflight`]'s
/// migration beside it), hands the measurements to [`BalanceLoop::record`] and
/// [`BalanceLoop::after_layer`], runs an invasive migration's [`Stall`] when one is asked
/// for ([`BalanceLoop::stalled`]) and ends with [`BalanceLoop::finish`].
pub struct BalanceLoop {
    /// The wafer config every run of the loop uses (one more VC, for the migration stream).
    pub cfg: WaferCfg,
    kind: BalancerKind,
    bal: BalanceCfg,
    map: Mapping,
    model: ModelPreset,
    st: State,
    expert_flits: u32,
    window: std::collections::VecDeque<(Vec<u64>, Vec<u64>)>,
    trig: TriggerCfg,
    now: u64,
    last_mig: Option<u64>,
    res: BalanceResult,
    decision_wave: Option<(PathBuf, WaveFormat)>,
    /// The trigger and decision unit (CL, or RTL stand-ins: [`BalanceLoop::with_units`]).
    units: NiUnits,
}

/// An invasive migration: the wafer runs nothing but the copies (each chunk straight from
/// source to destination) — `program` is the empty layer, `plan` the copies.
pub struct Stall {
    pub program: LayerProgram,
    pub plan: MigrationPlan,
}

/// What a decision changed, for the run driver's events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decided {
    pub moves: usize,
    pub replicas: usize,
    pub decision_cycles: u64,
}

impl BalanceLoop {
    /// The loop of balancer `kind` on `cfg` (the migration VC added) with `map`'s tables;
    /// `decision_wave`: the decision unit's first run goes to NAME-decision.EXT beside it.
    pub fn new(cfg: &WaferCfg, model: &ModelPreset, map: &Mapping, bal: &BalanceCfg, kind: BalancerKind, decision_wave: Option<(&Path, WaveFormat)>) -> Result<Self, WaferError> {
        bal.validate()?;
        // Every balancer runs on the same routers: one more VC, for the migration stream.
        let cfg = WaferCfg { migration_vc: true, ..cfg.clone() };
        cfg.validate()?;
        let dies = cfg.dies();
        let home = invert(&sched::wafer::expert_hosts(model.experts, dies), dies);
        let expert_flits = model.expert_bytes().div_ceil(cfg.flit_bytes as u64).min(u32::MAX as u64) as u32;
        let res = BalanceResult {
            balancer: kind.name().into(),
            max_over_mean_load: 0.0,
            migration_stall_cycles: 0,
            moe_compute_cycles: 0,
            a2a_cycles: 0,
            regular_traffic_cycles: 0.0,
            regular_traffic_cycles_no_migration: 0.0,
            comm_phase_cycles: 0,
            comm_phase_cycles_no_migration: 0,
            total_cycles: 0,
            migrations: 0,
            moves: 0,
            migrated_bytes: 0,
            decision_cycles: 0,
            iterations: Vec::new(),
        };
        let trig = TriggerCfg { alpha: bal.alpha, beta_cycles: if kind == BalancerKind::TopoNi { 0 } else { bal.invasive_beta_cycles } };
        Ok(BalanceLoop {
            cfg,
            kind,
            bal: bal.clone(),
            map: map.clone(),
            model: model.clone(),
            st: State { base: home, replicas: BTreeSet::new(), inflight: None },
            expert_flits,
            window: Default::default(),
            trig,
            now: 0,
            last_mig: None,
            res,
            decision_wave: decision_wave.map(|(p, f)| (p.to_path_buf(), f)),
            units: NiUnits::CL,
        })
    }

    /// The loop with `units` as its Eq. 2 trigger and Algorithm 1 decision unit (the CL's by
    /// default; `balance --rtl balancer` passes the RTL stand-ins). EPLB's decision is not a
    /// unit (its trigger is).
    pub fn with_units(mut self, units: NiUnits) -> Self {
        self.units = units;
        self
    }

    /// The layer of one iteration's routing (`[group][token]` → top-k) under the placement in
    /// use: each token to the replica nearest its holder.
    pub fn program(&self, routing: &Routing) -> LayerProgram {
        let placement = self.st.placement();
        let hosts = invert(&placement, self.model.experts);
        let pl: Vec<Vec<A2aXfer>> = plans(&self.cfg, &self.map, &hosts, routing);
        build_planned(&self.cfg, &self.model, &self.map, pl, &LayerOpts::default())
    }

    /// The non-invasive migration in flight (its chunks go beside the next layer).
    pub fn inflight(&self) -> Option<&MigrationPlan> {
        self.st.inflight.as_ref()
    }

    /// Marks what the migration engines of `w` delivered in the layer just run (the same
    /// layer is then run without it, for [`BalanceLoop::record`]'s unperturbed numbers).
    pub fn delivered(&mut self, w: &Wafer) {
        if let Some(mp) = self.st.inflight.as_mut() {
            w.migration_delivered(mp);
        }
    }

    /// The record of iteration `i`: its layer `prog`, the run `run` (with the migration in
    /// flight beside it) and, with a migration, the same layer run alone (`alone`).
    pub fn record(&self, i: usize, prog: &LayerProgram, run: &WaferRun, alone: Option<&WaferRun>) -> IterRecord {
        let d_tokens = die_loads(prog, self.cfg.dies());
        let (moe, a2a, comm, regular) = traffic(run);
        let (comm_no_mig, regular_no_mig) = match alone {
            Some(r0) => {
                let t = traffic(r0);
                (t.2, t.3)
            }
            None => (comm, regular),
        };
        IterRecord {
            iter: i as u32,
            max_over_mean: max_over_mean(&d_tokens.iter().map(|&x| x as f64).collect::<Vec<_>>()),
            device_loads: d_tokens,
            layer_cycles: run.layer_cycles,
            moe_compute_cycles: moe,
            a2a_cycles: a2a,
            regular_traffic_cycles: regular,
            regular_traffic_cycles_no_migration: regular_no_mig,
            comm_phase_cycles: comm,
            comm_phase_cycles_no_migration: comm_no_mig,
            migration_stall_cycles: 0,
            migration_flits: run.mig_flits,
            triggered: false,
            replicas: self.st.replicas.len() as u32,
        }
    }

    /// Between iterations, after the layer of `rec` (`prog`): the landed replicas join the
    /// placement, the load counters take the iteration, the trigger runs and, when it fires,
    /// the decision unit re-plans. An invasive balancer's copies come back as a [`Stall`] the
    /// driver runs before the next iteration (then [`BalanceLoop::stalled`]).
    pub fn after_layer(&mut self, rec: &mut IterRecord, prog: &LayerProgram) -> Result<(Option<Decided>, Option<Stall>), WaferError> {
        let (kind, bal) = (self.kind, &self.bal);
        let dies = self.cfg.dies();
        let experts = self.model.experts;
        let st = &mut self.st;
        self.now += rec.layer_cycles;
        // Replicas whose weights landed join the placement for the next iteration.
        if let Some(mp) = &st.inflight {
            for (k, m) in mp.moves.iter().enumerate() {
                if mp.move_done(k) {
                    st.replicas.insert((m.expert, m.dst_device));
                }
            }
            if mp.done() {
                st.inflight = None;
            }
        }
        // Load counters (per expert, and per die as measured) over the window, and the trigger
        // on the measured device loads.
        self.window.push_back((prog.expert_tokens.clone(), rec.device_loads.clone()));
        if self.window.len() > bal.window_iters as usize {
            self.window.pop_front();
        }
        let mut load = vec![0f64; experts as usize];
        let mut dev = vec![0f64; dies as usize];
        for (e, d) in &self.window {
            for (l, &c) in load.iter_mut().zip(e) {
                *l += c as f64;
            }
            for (l, &c) in dev.iter_mut().zip(d) {
                *l += c as f64;
            }
        }
        let since = self.last_mig.map_or(u64::MAX, |t| self.now - t);
        // The trigger (CL) runs only when a decision could follow.
        let unit_err = |e: crate::Error| WaferError::Unit(e.to_string());
        let fire = kind != BalancerKind::None && st.inflight.is_none() && {
            let (f, c) = run_trigger((self.units.trigger)(&self.trig, &[dev], since).map_err(unit_err)?).map_err(unit_err)?;
            self.res.decision_cycles += c;
            f
        };
        if !fire {
            return Ok((None, None));
        }
        let trace = self.decision_wave.take();
        let (moves, new_replicas, cycles) = decide(kind, st, &self.map, &load, bal, dies, experts, self.cfg.clock_mhz, trace.as_ref().map(|(p, f)| (p.as_path(), *f)), self.units)?;
        self.res.decision_cycles += cycles;
        let decided = Decided { moves: moves.len(), replicas: new_replicas.len(), decision_cycles: cycles };
        // Replicas the new plan does not keep are dropped now (their slots are reused).
        if kind != BalancerKind::Eplb {
            st.replicas.retain(|r| new_replicas.contains(r));
        }
        if moves.is_empty() {
            return Ok((Some(decided), None));
        }
        rec.triggered = true;
        self.res.migrations += 1;
        self.res.moves += moves.len() as u64;
        self.res.migrated_bytes += moves.len() as u64 * self.model.expert_bytes();
        self.last_mig = Some(self.now);
        if kind == BalancerKind::TopoNi {
            st.inflight = Some(MigrationPlan::stepwise(&self.map, &moves, self.expert_flits, bal.chunk_flits));
            return Ok((Some(decided), None));
        }
        let plan = MigrationPlan::direct(&moves, self.expert_flits, bal.chunk_flits);
        let program = LayerProgram { micro_batches: self.cfg.micro_batches, mapping: Some(self.map.clone()), dies: vec![Default::default(); dies as usize], ..Default::default() };
        if kind == BalancerKind::Eplb {
            st.base = vec![Vec::new(); dies as usize];
            for &(e, d) in &new_replicas {
                st.base[d as usize].push(e);
            }
            st.replicas.clear();
        } else {
            st.replicas.extend(moves.iter().map(|m| (m.expert, m.dst_device)));
        }
        Ok((Some(decided), Some(Stall { program, plan })))
    }

    /// An invasive migration's stall of `run` (its end: the stall's cycles; its flits).
    pub fn stalled(&mut self, rec: &mut IterRecord, run: &WaferRun) {
        rec.migration_stall_cycles = run.end_cycle;
        rec.migration_flits += run.mig_flits;
        self.now += run.end_cycle;
    }

    /// Keeps the iteration's record.
    pub fn push(&mut self, rec: IterRecord) {
        self.res.iterations.push(rec);
    }

    /// The records so far.
    pub fn iterations(&self) -> &[IterRecord] {
        &self.res.iterations
    }

    /// The totals over the iterations (the mean imbalance after the warm-up).
    pub fn finish(self) -> BalanceResult {
        let mut res = self.res;
        let after: Vec<&IterRecord> = res.iterations.iter().filter(|r| r.iter >= self.bal.warmup_iters).collect();
        let pick = if after.is_empty() { res.iterations.iter().collect() } else { after };
        res.max_over_mean_load = pick.iter().map(|r| r.max_over_mean).sum::<f64>() / pick.len().max(1) as f64;
        for r in &res.iterations {
            res.migration_stall_cycles += r.migration_stall_cycles;
            res.moe_compute_cycles += r.moe_compute_cycles;
            res.a2a_cycles += r.a2a_cycles;
            res.regular_traffic_cycles += r.regular_traffic_cycles;
            res.regular_traffic_cycles_no_migration += r.regular_traffic_cycles_no_migration;
            res.comm_phase_cycles += r.comm_phase_cycles;
            res.comm_phase_cycles_no_migration += r.comm_phase_cycles_no_migration;
            res.total_cycles += r.layer_cycles + r.migration_stall_cycles;
        }
        res
    }
}

/// The decision unit's waveform beside the wafer's: NAME-decision.EXT.
pub fn decision_path(p: &Path) -> PathBuf {
    let stem = p.file_stem().map_or("balance".into(), |s| s.to_string_lossy().into_owned());
    let name = match p.extension() {
        Some(e) => format!("{stem}-decision.{}", e.to_string_lossy()),
        None => format!("{stem}-decision"),
    };
    p.with_file_name(name)
}

/// A decision: the copies to make (source = the nearest die already holding the expert), the
/// (expert, die) set the plan ends with (EPLB: every slot; Algorithm 1: the shadow-slot
/// replicas), and the decision unit's cycles.
#[allow(clippy::too_many_arguments)]
fn decide(kind: BalancerKind, st: &State, map: &Mapping, load: &[f64], bal: &BalanceCfg, dies: u32, experts: u32, clock_mhz: f64, wave: Option<(&Path, WaveFormat)>, units: NiUnits) -> Result<(Vec<Move>, BTreeSet<(u32, u32)>, u64), WaferError> {
    let current = st.placement();
    let cur_hosts = invert(&current, experts);
    let (targets, cycles): (BTreeSet<(u32, u32)>, u64) = match kind {
        BalancerKind::Eplb => {
            // Every slot re-placed: the home slots plus the shadow slots, packed by EPLB.
            let per = (experts.div_ceil(dies) + bal.shadow_slots) as usize;
            let c = EplbCfg { num_replicas: per * dies as usize, num_groups: 1, num_nodes: 1, num_gpus: dies as usize };
            match rebalance_experts(&[load.to_vec()], &c) {
                Ok(p) => (p.phy2log[0].iter().enumerate().map(|(s, &e)| (e as u32, c.gpu_of_slot(s) as u32)).collect(), 0),
                Err(_) => (BTreeSet::new(), 0),
            }
        }
        _ => {
            let slots = vec![bal.shadow_slots; dies as usize];
            let unit_err = |e: crate::Error| WaferError::Unit(e.to_string());
            let unit = (units.decision)(load, &st.base, &slots, map.geom, ColdRule::HeatAfter).map_err(unit_err)?;
            let (plan, cycles) = match wave {
                Some((path, fmt)) => {
                    let path = decision_path(path);
                    let werr = |e: crate::Error| WaferError::Wave(format!("{}: {e}", path.display()));
                    let period_ps = (1e6 / clock_mhz).round().max(1.0) as u64;
                    let mut wr = WaveWriter::create(&path, fmt, period_ps, &unit.signals(), &WaveFilter::default()).map_err(|e| werr(e.into()))?;
                    // A stand-in's refusal is the unit's error, not the waveform's.
                    let (plan, cycles) = run_decision(unit, Some(&mut wr)).map_err(|e| match e {
                        crate::Error::Wave(_) => werr(e),
                        e => unit_err(e),
                    })?;
                    wr.finish(cycles + 1).map_err(|e| werr(e.into()))?;
                    (plan, cycles)
                }
                None => run_decision(unit, None).map_err(unit_err)?,
            };
            (plan.moves.iter().map(|m| (m.expert, m.dst_device)).collect(), cycles)
        }
    };
    // What must move: target (expert, die) pairs the die does not already hold.
    let moves: Vec<Move> = targets
        .iter()
        .filter(|&&(e, d)| !current[d as usize].contains(&e))
        .map(|&(e, d)| Move { expert: e, src_device: nearest(map, &cur_hosts[e as usize], d), dst_device: d })
        .collect();
    Ok((moves, targets, cycles))
}
