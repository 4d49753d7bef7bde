//! What a wafer run reports: the per-phase latency breakdown and the per-link, per-phase
//! traffic with its hot/cold classification (the balancer schedules migrations on the cold
//! links of each phase).

use serde::Serialize;
use sched::noc::Dir;

use super::compute::KernelKind;
use super::config::WaferCfg;
use super::program::{LayerProgram, PerPhase, Phase};
use super::wafer::WaferRun;
use crate::noc::mesh::neighbour_in;

/// How busy a link was in one phase, relative to the phase's busiest link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Heat {
    /// No flit of the phase.
    Idle,
    /// Fewer than `hot_fraction` × the busiest link's flits.
    Cold,
    Hot,
}

/// One directed die-to-die link and its traffic per phase.
#[derive(Debug, Clone, Serialize)]
pub struct LinkUse {
    /// Sending die and direction (`e`, `w`, `s`, `n` = +x, −x, +y, −y).
    pub from: u32,
    pub to: u32,
    pub dir: &'static str,
    pub cross_wafer: bool,
    /// Flits per phase.
    pub flits: PerPhase<u64>,
    pub heat: PerPhase<Heat>,
}

/// Every directed link of the mesh with its phase traffic and heat.
pub fn classify_links(cfg: &WaferCfg, run: &WaferRun) -> Vec<LinkUse> {
    let (cols, rows) = (cfg.cols(), cfg.rows());
    let geom = cfg.geom();
    let mut out = Vec::new();
    for (i, per_port) in run.link_flits.iter().enumerate() {
        let i = i as u32;
        for d in [Dir::XPlus, Dir::XMinus, Dir::YPlus, Dir::YMinus] {
            let Some(nb) = neighbour_in(i, d, cols, rows) else { continue };
            let f = per_port[d.idx()];
            out.push(LinkUse {
                from: i,
                to: nb,
                dir: ["e", "w", "s", "n"][d.idx()],
                cross_wafer: geom.crosses_wafer(i, nb),
                // The router counts flits per traffic class; a phase's class is its index.
                flits: PerPhase::from_fn(|p| f[p as usize]),
                heat: PerPhase::from_fn(|_| Heat::Idle),
            });
        }
    }
    for p in Phase::ALL {
        let max = out.iter().map(|l| l.flits[p]).max().unwrap_or(0);
        for l in out.iter_mut() {
            l.heat[p] = if l.flits[p] == 0 {
                Heat::Idle
            } else if l.flits[p] as f64 >= cfg.hot_fraction * max as f64 {
                Heat::Hot
            } else {
                Heat::Cold
            };
        }
    }
    out
}

/// One mapping's result (the acceptance fields first).
#[derive(Debug, Clone, Serialize)]
pub struct WaferResult {
    pub mapping: String,
    pub avg_a2a_hops: f64,
    pub ftds_disjoint: bool,
    pub allreduce_cycles: u64,
    pub a2a_dispatch_cycles: u64,
    pub a2a_combine_cycles: u64,
    pub expert_cycles: u64,
    pub layer_cycles: u64,
    pub attention_cycles: u64,
    pub gate_cycles: u64,
    /// Cycles the mapping controller took to fill its tables (before the layer).
    pub mapping_controller_cycles: u64,
    /// Functional mode: what was checked against the FL reference (all equal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub functional: Option<super::functional::FuncReport>,
    /// Mean hops of the layer's token→expert assignments (local ones count 0).
    pub dispatch_mean_hops: f64,
    pub transfers: usize,
    pub flits_injected: u64,
    pub flit_hops: u64,
    pub cycles_evaluated: u64,
    pub wall_seconds: f64,
    pub cycles_per_second: f64,
    pub flits_per_second: f64,
    /// The busiest die's kernel cycles (attention + gate + experts + predictor): the layer
    /// if the network cost nothing, on that die. `layer_cycles` minus this is the
    /// communication the layer could not hide behind that die's compute (the `reproduce`
    /// report's "exposed communication"). Not serialized, so the `wafer` JSON is unchanged.
    #[serde(skip)]
    pub busiest_die_compute_cycles: u64,
    /// Links hot in each phase, of all directed links.
    pub hot_links: PerPhase<usize>,
    pub links: Vec<LinkUse>,
}

impl WaferResult {
    pub fn new(cfg: &WaferCfg, map: &sched::wafer::Mapping, prog: &LayerProgram, run: &WaferRun, wall: f64) -> Self {
        let links = classify_links(cfg, run);
        let hot_links = PerPhase::from_fn(|p| links.iter().filter(|l| l.heat[p] == Heat::Hot).count());
        let wall = wall.max(1e-9);
        WaferResult {
            mapping: map.kind.name().to_string(),
            avg_a2a_hops: map.avg_a2a_hops(),
            ftds_disjoint: map.ftds_disjoint(),
            allreduce_cycles: run.phase_cycles(Phase::AllReduce),
            a2a_dispatch_cycles: run.phase_cycles(Phase::Dispatch),
            a2a_combine_cycles: run.phase_cycles(Phase::Combine),
            expert_cycles: run.kernel_cycles(KernelKind::Experts),
            layer_cycles: run.layer_cycles,
            attention_cycles: run.kernel_cycles(KernelKind::Attention),
            gate_cycles: run.kernel_cycles(KernelKind::Gate),
            mapping_controller_cycles: 0,
            functional: None,
            dispatch_mean_hops: if prog.a2a_assignments == 0 { 0.0 } else { prog.a2a_hops as f64 / prog.a2a_assignments as f64 },
            transfers: prog.xfers.len(),
            flits_injected: run.tx_flits,
            flit_hops: run.flit_hops,
            cycles_evaluated: run.evaluated,
            wall_seconds: wall,
            cycles_per_second: run.layer_cycles as f64 / wall,
            flits_per_second: run.flit_hops as f64 / wall,
            busiest_die_compute_cycles: run.die_busy.iter().map(|b| b.attention + b.gate + b.experts + b.predict).max().unwrap_or(0),
            hot_links,
            links,
        }
    }
}
