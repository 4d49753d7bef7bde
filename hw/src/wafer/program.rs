//! One MoE layer as a program for every die: the kernels of its compute engine, the
//! transfers of its collective engine, and what each waits for. The FL decides what moves
//! where (`sched::wafer`: the mapping, the all-reduce plan, the dispatch plan); this file
//! only turns those decisions into per-die programs, sized in bytes and flits.
//!
//! Per die, with M micro-batches (tokens of every TP group split into M contiguous ranges):
//! * kernels, in stream order: Attention(0..M), then Gate(m), Experts(m) for each m;
//! * all-reduce transfers of micro-batch m (the FL plan, one copy per micro-batch): a die's
//!   step-s send of chunk c waits for Attention(m) and for every earlier-step transfer of
//!   chunk c into the die (the ring's forward dependence);
//! * Gate(m) waits for the die's all-reduce of m to be complete (all its receives and sends);
//! * dispatch of m: one transfer per (holder → expert host) pair, after Gate(m) on the holder;
//! * Experts(m) on a host waits for every dispatch transfer of m into it;
//! * combine of m: the reverse transfers, after Experts(m) on the host.
//!
//! A transfer whose source is its destination never enters the network.

use sched::models::ModelPreset;
use sched::wafer::collective::{allreduce_plan, ChunkId};
use sched::wafer::dispatch::A2aXfer;
use sched::wafer::{dispatch_plan, expert_hosts, try_dispatch_plan_split, Mapping, ReplicaSplit, Routing};

use super::compute::{attention_cost, experts_cost, gate_cost, Kernel, KernelKind};
use super::config::WaferCfg;

/// The phase (traffic class) of a transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    AllReduce = 0,
    Dispatch = 1,
    Combine = 2,
}

impl Phase {
    pub const ALL: [Phase; 3] = [Phase::AllReduce, Phase::Dispatch, Phase::Combine];
    pub fn name(self) -> &'static str {
        match self {
            Phase::AllReduce => "allreduce",
            Phase::Dispatch => "dispatch",
            Phase::Combine => "combine",
        }
    }
}

/// One value per traffic phase of the layer (all-reduce, dispatch, combine). Serialized as
/// the array `[allreduce, dispatch, combine]`, the form the results have always had.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PerPhase<T> {
    pub allreduce: T,
    pub dispatch: T,
    pub combine: T,
}

impl<T> PerPhase<T> {
    /// `f` of each phase.
    pub fn from_fn(mut f: impl FnMut(Phase) -> T) -> Self {
        PerPhase { allreduce: f(Phase::AllReduce), dispatch: f(Phase::Dispatch), combine: f(Phase::Combine) }
    }
}

impl<T> std::ops::Index<Phase> for PerPhase<T> {
    type Output = T;
    fn index(&self, p: Phase) -> &T {
        match p {
            Phase::AllReduce => &self.allreduce,
            Phase::Dispatch => &self.dispatch,
            Phase::Combine => &self.combine,
        }
    }
}

impl<T> std::ops::IndexMut<Phase> for PerPhase<T> {
    fn index_mut(&mut self, p: Phase) -> &mut T {
        match p {
            Phase::AllReduce => &mut self.allreduce,
            Phase::Dispatch => &mut self.dispatch,
            Phase::Combine => &mut self.combine,
        }
    }
}

impl<T: serde::Serialize> serde::Serialize for PerPhase<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // As `[T; 3]` serializes (a tuple), so the JSON is unchanged.
        serde::Serialize::serialize(&[&self.allreduce, &self.dispatch, &self.combine], s)
    }
}

/// One transfer through the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetXfer {
    pub src: u32,
    pub dst: u32,
    pub bytes: u64,
    pub flits: u32,
    pub phase: Phase,
    pub mb: u32,
    /// All-reduce: the chunk moved and whether the receiver adds it (reduce-scatter) or
    /// overwrites (all-gather).
    pub chunk: Option<ChunkId>,
    pub reduce: bool,
    /// All-reduce: the collective step (0 for the all-to-all).
    pub step: u32,
}

/// An event a die's program waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ev {
    /// Kernel i (index in this die's kernel list) finished.
    Kernel(u32),
    /// Transfer x (global id) fully received here.
    Rx(u32),
    /// Transfer x (global id) fully sent from here.
    Tx(u32),
}

#[derive(Debug, Clone, Default)]
pub struct DieProgram {
    pub kernels: Vec<Kernel>,
    pub kernel_deps: Vec<Vec<Ev>>,
    /// Transfers this die sends (global ids) and their dependences.
    pub tx: Vec<u32>,
    pub tx_deps: Vec<Vec<Ev>>,
    /// Transfers this die receives (global ids).
    pub rx: Vec<u32>,
}

/// The layer's programs, plus what the results report about the traffic.
#[derive(Debug, Clone, Default)]
pub struct LayerProgram {
    pub micro_batches: u32,
    /// The decisions the program was built from (functional mode checks against them).
    pub mapping: Option<Mapping>,
    pub allreduce: Option<sched::wafer::collective::CollectivePlan>,
    /// Per micro-batch, every token→expert assignment (the FL dispatch plan).
    pub assignments: Vec<Vec<A2aXfer>>,
    /// Dispatch and combine transfers → the assignments they carry.
    pub items: std::collections::HashMap<u32, Vec<A2aXfer>>,
    pub xfers: Vec<NetXfer>,
    pub dies: Vec<DieProgram>,
    /// Token-expert assignments (all of them, including the local ones) and their hop sum.
    pub a2a_assignments: u64,
    pub a2a_hops: u64,
    /// Tokens per expert over the layer.
    pub expert_tokens: Vec<u64>,
    /// A kernel the die cannot time ([`super::compute::KernelCost::checked_cycles`]: a rate
    /// so small its cycles overflow) or a transfer of more flits than a 32-bit count;
    /// [`super::Wafer::new`] refuses the program with it (the first one found).
    pub size_error: Option<crate::cfg::CfgError>,
}

/// Token range of micro-batch `m` of `mbs` over `t` tokens.
pub fn mb_range(t: u32, mbs: u32, m: u32) -> std::ops::Range<u32> {
    (m as u64 * t as u64 / mbs as u64) as u32..((m as u64 + 1) * t as u64 / mbs as u64) as u32
}

/// Builds the layer: `routing[g][t]` = the top-k experts of token t of TP group g, each expert
/// on its default host ([`expert_hosts`]: round-robin, one copy per die when the experts
/// outnumber the dies).
pub fn build(cfg: &WaferCfg, model: &ModelPreset, map: &Mapping, routing: &Routing) -> LayerProgram {
    let hosts = expert_hosts(model.experts, cfg.dies());
    build_planned(cfg, model, map, plans(cfg, map, &hosts, routing), &LayerOpts::default())
}

/// The FL dispatch plan of every micro-batch: `routing` (as for [`build`]) with experts on
/// `hosts[e]` (replicas allowed; each token picks the replica nearest its holder, see
/// [`dispatch_plan`], or with `cfg.replica_split = even` its replica in turn, an even
/// Load_e/Num_e share per micro-batch). Token ids in the records are the token's index in
/// its group.
pub fn plans(cfg: &WaferCfg, map: &Mapping, hosts: &[Vec<u32>], routing: &Routing) -> Vec<Vec<A2aXfer>> {
    let (t, mbs) = (cfg.tokens_per_group, cfg.micro_batches);
    (0..mbs)
        .map(|m| {
            let range = mb_range(t, mbs, m);
            let routing_m = routing.filter_tokens(|_, ti| range.contains(&(ti as u32)));
            match cfg.replica_split {
                ReplicaSplit::Nearest => dispatch_plan(map, hosts, &routing_m),
                split => try_dispatch_plan_split(map, hosts, &routing_m, split).unwrap_or_else(|e| panic!("dispatch_plan: {e}")),
            }
        })
        .collect()
}

/// What a layer carries besides its token→expert plan.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LayerOpts {
    /// A per-token expert predictor (MoE-GPS Token-to-Expert) runs on every die before its
    /// attention, for this many cycles (0: no predictor kernel).
    pub predict_cycles: u64,
}

/// Builds the layer from explicit per-micro-batch plans (`plans[m]`: every token→expert
/// assignment of micro-batch m, the tokens of `mb_range(tokens_per_group, micro_batches, m)`):
/// whoever decided where each token's expert runs — the default placement, a balancer's
/// replicas, a predictor that pre-placed tokens on their expert's die (`src == dst`: no
/// network transfer) — the program is built the same way.
pub fn build_planned(cfg: &WaferCfg, model: &ModelPreset, map: &Mapping, plans: Vec<Vec<A2aXfer>>, opts: &LayerOpts) -> LayerProgram {
    assert_eq!(plans.len(), cfg.micro_batches as usize, "build_planned: one plan per micro-batch");
    let n = cfg.dies() as usize;
    let mbs = cfg.micro_batches;
    let t = cfg.tokens_per_group;
    let d = model.d_model as u64;
    // Sizes that do not fit their counters are recorded (the first one) and refused by
    // the wafer, never wrapped or saturated silently.
    let size_error = std::cell::RefCell::new(None::<crate::cfg::CfgError>);
    let flits = |bytes: u64| {
        let f = bytes.div_ceil(cfg.flit_bytes as u64).max(1);
        u32::try_from(f).unwrap_or_else(|_| {
            size_error.borrow_mut().get_or_insert(crate::cfg::CfgError {
                field: "flit_bytes".into(),
                reason: format!("a transfer of {bytes} bytes is {f} flits of {} bytes, more than a 32-bit flit count", cfg.flit_bytes),
            });
            u32::MAX
        })
    };
    let timed = |c: super::compute::KernelCost| {
        c.checked_cycles(&cfg.die, cfg.clock_mhz).unwrap_or_else(|e| {
            size_error.borrow_mut().get_or_insert(e);
            u64::MAX
        })
    };
    let mut p = LayerProgram { micro_batches: mbs, dies: vec![DieProgram::default(); n], expert_tokens: vec![0; model.experts as usize], ..Default::default() };
    if opts.predict_cycles > 0 {
        for dp in p.dies.iter_mut() {
            dp.kernels.push(Kernel { kind: KernelKind::Predict, mb: 0, cycles: opts.predict_cycles });
            dp.kernel_deps.push(Vec::new());
        }
    }
    // Attention kernels (stream order: after the predictor, if any).
    let mut k_att = vec![vec![0u32; mbs as usize]; n];
    for (die, dp) in p.dies.iter_mut().enumerate() {
        for m in 0..mbs {
            let tm = mb_range(t, mbs, m).len() as u32;
            k_att[die][m as usize] = dp.kernels.len() as u32;
            dp.kernels.push(Kernel { kind: KernelKind::Attention, mb: m, cycles: timed(attention_cost(cfg, model.d_model, tm)) });
            dp.kernel_deps.push(Vec::new());
        }
    }
    let ar = allreduce_plan(map);
    p.mapping = Some(map.clone());
    p.allreduce = Some(ar.clone());
    for (m, plan) in (0..mbs).zip(plans) {
        let tm = mb_range(t, mbs, m).len() as u64;
        // --- all-reduce of m: the FL plan, chunk bytes of this micro-batch.
        let chunk_bytes = (tm * d * 2).div_ceil(ar.chunks_per_group.max(1) as u64);
        let first = p.xfers.len() as u32;
        // (die, chunk) → transfers of that chunk into the die so far, with their steps.
        let mut into: std::collections::HashMap<(u32, ChunkId), Vec<(u32, u32)>> = std::collections::HashMap::new();
        for x in &ar.xfers {
            let id = p.xfers.len() as u32;
            p.xfers.push(NetXfer { src: x.src, dst: x.dst, bytes: chunk_bytes, flits: flits(chunk_bytes), phase: Phase::AllReduce, mb: m, chunk: Some(x.data), reduce: x.reduce, step: x.step });
            into.entry((x.dst, x.data)).or_default().push((x.step, id));
        }
        let mut ar_deps_of_die: Vec<Vec<Ev>> = vec![Vec::new(); n];
        for (i, x) in ar.xfers.iter().enumerate() {
            let id = first + i as u32;
            let mut deps = vec![Ev::Kernel(k_att[x.src as usize][m as usize])];
            if let Some(v) = into.get(&(x.src, x.data)) {
                deps.extend(v.iter().filter(|(s, _)| *s < x.step).map(|&(_, id)| Ev::Rx(id)));
            }
            let s = &mut p.dies[x.src as usize];
            s.tx.push(id);
            s.tx_deps.push(deps);
            ar_deps_of_die[x.src as usize].push(Ev::Tx(id));
            p.dies[x.dst as usize].rx.push(id);
            ar_deps_of_die[x.dst as usize].push(Ev::Rx(id));
        }
        // --- dispatch plan of m (given).
        // Per (holder, host): the assignments one transfer carries (their count: its tokens).
        let mut pair_items: std::collections::BTreeMap<(u32, u32), Vec<A2aXfer>> = std::collections::BTreeMap::new();
        // Per die: the distinct tokens it gates (it holds them); per host: tokens per expert.
        let mut gated: Vec<std::collections::BTreeSet<(u32, u32)>> = vec![Default::default(); n];
        let mut host_tokens: Vec<std::collections::BTreeMap<u32, u32>> = vec![Default::default(); n];
        for a in &plan {
            pair_items.entry((a.src, a.dst)).or_default().push(*a);
            gated[a.src as usize].insert((a.group, a.token));
            *host_tokens[a.dst as usize].entry(a.expert).or_default() += 1;
            p.expert_tokens[a.expert as usize] += 1;
            p.a2a_assignments += 1;
            p.a2a_hops += map.geom.hops(a.src, a.dst) as u64;
        }
        // Gate(m) and Experts(m) kernels.
        let mut k_gate = vec![0u32; n];
        let mut k_exp = vec![0u32; n];
        for (die, dp) in p.dies.iter_mut().enumerate() {
            k_gate[die] = dp.kernels.len() as u32;
            let g = gated[die].len() as u32;
            dp.kernels.push(Kernel { kind: KernelKind::Gate, mb: m, cycles: timed(gate_cost(model.d_model, model.experts, g.max(1))) });
            dp.kernel_deps.push(std::mem::take(&mut ar_deps_of_die[die]));
            k_exp[die] = dp.kernels.len() as u32;
            let toks: Vec<u32> = host_tokens[die].values().copied().collect();
            dp.kernels.push(Kernel { kind: KernelKind::Experts, mb: m, cycles: timed(experts_cost(model.d_model, model.d_ffn, &toks)) });
            dp.kernel_deps.push(Vec::new());
        }
        // Dispatch and combine transfers (network ones only).
        for (&(src, dst), items) in &pair_items {
            if src == dst {
                continue;
            }
            let tokens = items.len() as u64;
            let id = p.xfers.len() as u32;
            let bytes = tokens * d * cfg.dispatch_elem_bytes as u64;
            p.xfers.push(NetXfer { src, dst, bytes, flits: flits(bytes), phase: Phase::Dispatch, mb: m, chunk: None, reduce: false, step: 0 });
            p.items.insert(id, items.clone());
            p.dies[src as usize].tx.push(id);
            p.dies[src as usize].tx_deps.push(vec![Ev::Kernel(k_gate[src as usize])]);
            p.dies[dst as usize].rx.push(id);
            let ke = k_exp[dst as usize] as usize;
            p.dies[dst as usize].kernel_deps[ke].push(Ev::Rx(id));
            let cid = p.xfers.len() as u32;
            let cbytes = tokens * d * cfg.combine_elem_bytes as u64;
            p.xfers.push(NetXfer { src: dst, dst: src, bytes: cbytes, flits: flits(cbytes), phase: Phase::Combine, mb: m, chunk: None, reduce: false, step: 0 });
            p.items.insert(cid, items.clone());
            p.dies[dst as usize].tx.push(cid);
            p.dies[dst as usize].tx_deps.push(vec![Ev::Kernel(k_exp[dst as usize])]);
            p.dies[src as usize].rx.push(cid);
        }
        p.assignments.push(plan);
    }
    p.size_error = size_error.into_inner();
    p
}
