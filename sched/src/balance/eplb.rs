//! DeepSeek's expert-parallel load balancer (EPLB), FL.
//!
//! A port of `rebalance_experts` from DeepSeek's open-source `eplb.py` (the EPLB repository,
//! MIT licence; main branch as of March 2025, where the global policy is the hierarchical one
//! with one group and one node). For every MoE layer it turns the estimated load of each
//! logical expert into a placement of `num_replicas` physical expert slots:
//!
//! 1. **Groups to nodes** ([`balanced_packing`]): the experts form `num_groups` equal groups of
//!    consecutive ids; the groups are packed onto `num_nodes` nodes, the same number per node,
//!    heaviest group first, each to the lightest node that still has room.
//! 2. **Replicas within a node** ([`replicate_experts`]): each node gets `num_replicas /
//!    num_nodes` slots; every expert of the node gets one, and each remaining slot goes to the
//!    expert with the largest load per replica (`load / replicas`).
//! 3. **Replicas to GPUs** ([`balanced_packing`] again): a node's replicas, each carrying
//!    `load / replicas` of its expert, are packed onto the node's `num_gpus / num_nodes` GPUs,
//!    `num_replicas / num_gpus` per GPU, heaviest first to the lightest GPU with room.
//!
//! Physical slot `p` lives on GPU `p / (num_replicas / num_gpus)`; GPU `g` on node
//! `g / (num_gpus / num_nodes)`. When `num_groups % num_nodes != 0` the *global* policy runs:
//! the same three steps with one group and one node (replication over all experts, then
//! packing over all GPUs).
//!
//! # Ties
//! The reference resolves ties through PyTorch: `max(dim=-1).indices` returns the **first**
//! maximal index, Python's `min` the **first** minimal pack, and `sort(descending=True)` is
//! *not* stable (it is `std::sort` — whose insertion-sort pass keeps rows of at most 16 items in
//! index order with libstdc++ — or x86-simd-sort's quicksort on AVX2/AVX-512 builds, whose tie
//! order is unspecified). This port fixes one rule everywhere: **among equal values the lower
//! index comes first** — a stable descending sort, the first maximal expert, the first minimal
//! pack. Inputs without equal sort keys (distinct group loads, distinct per-replica loads) get
//! exactly the reference's placement whatever its build; with ties, this is the order a stable
//! sort and the small-row `std::sort` give.
//!
//! # Arithmetic
//! Loads are `f64`; the reference computes in `float32` (`weight.float()`). Equal rationals stay
//! equal in both (IEEE division is correctly rounded), so a difference needs two loads, load
//! shares or pack sums closer than `float32` resolution that `f64` still tells apart (or sums
//! that round differently): then the two may break the near-tie differently. Integer token
//! counts below 2^24 (the usual input) are exact in both.
//!
//! # Inputs
//! Stricter than the reference in one respect: `num_gpus % num_nodes == 0` and
//! `experts % num_groups == 0` are required under both policies (the reference's docstring
//! requires the former; the latter defines the groups), where the reference's global branch
//! would not look. Loads must be finite and non-negative and rows of equal length. Every
//! violation is an [`EplbError`] naming the argument, never a panic.

use serde::{Deserialize, Serialize};
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// Most physical expert slots per layer.
pub const MAX_REPLICAS: usize = 1 << 20;
/// Most `layers × num_replicas` in one call (slots placed in all).
pub const MAX_SLOTS: usize = 1 << 26;
/// Most entries of `log2phy` (`layers × experts × max replicas of one expert`).
pub const MAX_LOG2PHY: usize = 1 << 26;

/// The argument of [`rebalance_experts`] an [`EplbError`] is about (the reference's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EplbArg {
    Weight,
    NumReplicas,
    NumGroups,
    NumNodes,
    NumGpus,
}

impl EplbArg {
    pub fn name(self) -> &'static str {
        match self {
            EplbArg::Weight => "weight",
            EplbArg::NumReplicas => "num_replicas",
            EplbArg::NumGroups => "num_groups",
            EplbArg::NumNodes => "num_nodes",
            EplbArg::NumGpus => "num_gpus",
        }
    }
}

/// An input [`rebalance_experts`] refuses; `reason` does not repeat the argument's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {reason}", arg.name())]
pub struct EplbError {
    pub arg: EplbArg,
    pub reason: String,
}

impl EplbError {
    fn new(arg: EplbArg, reason: impl Into<String>) -> Self {
        EplbError { arg, reason: reason.into() }
    }
}

/// The sizes of `rebalance_experts(weight, num_replicas, num_groups, num_nodes, num_gpus)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EplbCfg {
    /// Physical expert slots per layer, a multiple of `num_gpus`, at least the expert count.
    pub num_replicas: usize,
    /// Expert groups (consecutive ids, equal size).
    pub num_groups: usize,
    /// Server nodes; the hierarchical policy keeps each group on one node.
    pub num_nodes: usize,
    /// GPUs (devices), a multiple of `num_nodes`.
    pub num_gpus: usize,
}

/// Which of the reference's two policies placed the experts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// `num_groups % num_nodes == 0`: groups to nodes, replicas within nodes, replicas to GPUs.
    Hierarchical,
    /// Otherwise: replicate over all experts, pack over all GPUs (one group, one node).
    Global,
}

impl Policy {
    pub fn name(self) -> &'static str {
        match self {
            Policy::Hierarchical => "hierarchical",
            Policy::Global => "global",
        }
    }
}

impl EplbCfg {
    /// The policy the reference picks for these sizes.
    pub fn policy(&self) -> Policy {
        if self.num_nodes != 0 && self.num_groups.is_multiple_of(self.num_nodes) {
            Policy::Hierarchical
        } else {
            Policy::Global
        }
    }

    /// Physical slots per GPU (`num_replicas / num_gpus`; 0 while `num_gpus` is 0).
    pub fn slots_per_gpu(&self) -> usize {
        self.num_replicas.checked_div(self.num_gpus).unwrap_or(0)
    }

    /// The GPU holding physical slot `p`.
    pub fn gpu_of_slot(&self, p: usize) -> usize {
        p / self.slots_per_gpu().max(1)
    }

    /// The node holding physical slot `p`.
    pub fn node_of_slot(&self, p: usize) -> usize {
        p / self.num_replicas.checked_div(self.num_nodes).unwrap_or(0).max(1)
    }

    /// Checks the sizes and the loads; the first violation, naming its argument.
    pub fn validate(&self, weight: &[Vec<f64>]) -> Result<(), EplbError> {
        use EplbArg::*;
        let first = weight.first().ok_or_else(|| EplbError::new(Weight, "no layers"))?;
        let experts = first.len();
        if experts == 0 {
            return Err(EplbError::new(Weight, "layer 0 has no experts"));
        }
        for (l, row) in weight.iter().enumerate() {
            if row.len() != experts {
                return Err(EplbError::new(Weight, format!("layer {l} has {} experts, layer 0 has {experts}", row.len())));
            }
            for (e, &x) in row.iter().enumerate() {
                if !x.is_finite() {
                    return Err(EplbError::new(Weight, format!("layer {l} expert {e}: load {x} is not finite")));
                }
                if x < 0.0 {
                    return Err(EplbError::new(Weight, format!("layer {l} expert {e}: load {x} is negative")));
                }
            }
            // Loads are summed (device loads, the mean): a sum past f64's range is inf, and
            // inf / inf is a NaN imbalance.
            let sum: f64 = row.iter().sum();
            if !sum.is_finite() {
                return Err(EplbError::new(Weight, format!("layer {l}: the loads sum past {:e} (f64's range); scale them down", f64::MAX)));
            }
        }
        for (arg, v) in [(NumReplicas, self.num_replicas), (NumGroups, self.num_groups), (NumNodes, self.num_nodes), (NumGpus, self.num_gpus)] {
            if v == 0 {
                return Err(EplbError::new(arg, "must be at least 1"));
            }
        }
        if self.num_replicas > MAX_REPLICAS {
            return Err(EplbError::new(NumReplicas, format!("{} slots per layer, at most {MAX_REPLICAS}", self.num_replicas)));
        }
        if !self.num_gpus.is_multiple_of(self.num_nodes) {
            return Err(EplbError::new(NumGpus, format!("{} GPUs do not split evenly over {} nodes", self.num_gpus, self.num_nodes)));
        }
        if !self.num_replicas.is_multiple_of(self.num_gpus) {
            return Err(EplbError::new(NumReplicas, format!("{} replicas do not split evenly over {} GPUs", self.num_replicas, self.num_gpus)));
        }
        if !experts.is_multiple_of(self.num_groups) {
            return Err(EplbError::new(NumGroups, format!("{experts} experts do not split into {} equal groups", self.num_groups)));
        }
        if self.num_replicas < experts {
            return Err(EplbError::new(
                NumReplicas,
                format!("{} replicas for {experts} experts: every expert needs at least one", self.num_replicas),
            ));
        }
        if weight.len().checked_mul(self.num_replicas).is_none_or(|s| s > MAX_SLOTS) {
            return Err(EplbError::new(
                NumReplicas,
                format!("{} layers x {} replicas, at most {MAX_SLOTS} slots in one call", weight.len(), self.num_replicas),
            ));
        }
        Ok(())
    }
}

/// The outcome of [`balanced_packing`] on one row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packing {
    /// The pack of each item.
    pub pack_index: Vec<usize>,
    /// The item's position in its pack (the order items entered it).
    pub rank_in_pack: Vec<usize>,
}

/// The outcome of [`replicate_experts`] on one row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replication {
    /// Logical expert of each physical expert (the first `num_log` are `0..num_log`).
    pub phy2log: Vec<usize>,
    /// Replica rank of each physical expert (0 for an expert's first replica).
    pub rank: Vec<usize>,
    /// Replicas of each logical expert.
    pub logcnt: Vec<usize>,
}

/// `f64` with the total order of `<` on non-NaN values (−0 = +0), for the heaps below.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Load(f64);

impl Eq for Load {}

impl PartialOrd for Load {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Load {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.partial_cmp(&other.0).unwrap_or(Ordering::Equal)
    }
}

fn has_nan(w: &[f64]) -> bool {
    w.iter().any(|x| x.is_nan())
}

/// The reference's `balanced_packing` on one row: `n` items to `num_packs` packs of exactly
/// `n / num_packs` items each. With one item per pack, item `i` goes to pack `i`. Otherwise the
/// items go heaviest first (stable: equal weights in index order) each to the lightest pack
/// that still has room (the lowest-numbered one among equally light packs).
///
/// `None` if `num_packs` is 0 or does not divide `n`, or a weight is NaN.
pub fn balanced_packing(weight: &[f64], num_packs: usize) -> Option<Packing> {
    let n = weight.len();
    if num_packs == 0 || !n.is_multiple_of(num_packs) || has_nan(weight) {
        return None;
    }
    let per_pack = n / num_packs;
    if per_pack == 1 {
        return Some(Packing { pack_index: (0..n).collect(), rank_in_pack: vec![0; n] });
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| Load(weight[b]).cmp(&Load(weight[a])));
    let mut pack_index = vec![0; n];
    let mut rank_in_pack = vec![0; n];
    let mut items = vec![0usize; num_packs];
    // Min-heap of the packs with room: lightest first, lowest index among equals (Python's
    // `min` returns the first minimal element of `range(num_packs)`).
    let mut open: BinaryHeap<Reverse<(Load, usize)>> = (0..num_packs).map(|p| Reverse((Load(0.0), p))).collect();
    for item in order {
        let Reverse((Load(w), pack)) = open.pop()?;
        pack_index[item] = pack;
        rank_in_pack[item] = items[pack];
        items[pack] += 1;
        if items[pack] < per_pack {
            open.push(Reverse((Load(w + weight[item]), pack)));
        }
    }
    Some(Packing { pack_index, rank_in_pack })
}

/// The reference's `replicate_experts` on one row: `num_log = weight.len()` logical experts to
/// `num_phy` physical ones. Physical expert `i < num_log` is logical expert `i`; each further
/// one replicates the expert with the largest `weight / replicas`, the lowest id among equals
/// (`torch.max(dim=-1).indices` is the first maximal index).
///
/// `None` if `num_phy < num_log` or a weight is NaN.
pub fn replicate_experts(weight: &[f64], num_phy: usize) -> Option<Replication> {
    let num_log = weight.len();
    if num_phy < num_log || has_nan(weight) {
        return None;
    }
    let mut phy2log: Vec<usize> = (0..num_log).collect();
    let mut rank = vec![0; num_log];
    let mut logcnt = vec![1usize; num_log];
    phy2log.reserve(num_phy - num_log);
    rank.reserve(num_phy - num_log);
    // Max-heap on (load per replica, lower id first); an entry's key is recomputed as
    // `weight / count` exactly as the reference divides, so the argmax is the same.
    let mut heap: BinaryHeap<(Load, Reverse<usize>)> = (0..num_log).map(|e| (Load(weight[e]), Reverse(e))).collect();
    for _ in num_log..num_phy {
        let (_, Reverse(e)) = heap.pop()?;
        phy2log.push(e);
        rank.push(logcnt[e]);
        logcnt[e] += 1;
        heap.push((Load(weight[e] / logcnt[e] as f64), Reverse(e)));
    }
    Some(Replication { phy2log, rank, logcnt })
}

/// `inv[perm[i]] = i`.
fn inverse(perm: &[usize]) -> Vec<usize> {
    let mut inv = vec![0; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inv[p] = i;
    }
    inv
}

/// One layer of the reference's `rebalance_experts_hierarchical`: (phy2log, phyrank, logcnt).
/// Sizes are validated by the caller.
fn hierarchical_layer(w: &[f64], num_phy: usize, num_groups: usize, num_nodes: usize, num_gpus: usize) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
    let num_log = w.len();
    let group_size = num_log / num_groups;
    let groups_per_node = num_groups / num_nodes;
    let phy_per_gpu = num_phy / num_gpus;
    let log_per_node = num_log / num_nodes;
    let phy_per_node = num_phy / num_nodes;

    // Step 1: groups to nodes. `mlog` numbers the experts node by node: node-major, then the
    // group's rank in its node, then the expert's place in its group.
    let tokens_per_group: Vec<f64> = w.chunks(group_size).map(|g| g.iter().sum()).collect();
    let gp = balanced_packing(&tokens_per_group, num_nodes).expect("validated sizes");
    let log2mlog: Vec<usize> =
        (0..num_log).map(|e| (gp.pack_index[e / group_size] * groups_per_node + gp.rank_in_pack[e / group_size]) * group_size + e % group_size).collect();
    let mlog2log = inverse(&log2mlog);

    let mut phy2log = vec![0; num_phy];
    let mut phyrank = vec![0; num_phy];
    let mut mlogcnt = vec![0; num_log];
    for node in 0..num_nodes {
        // Step 2: replicas within the node.
        let tokens_per_mlog: Vec<f64> = (0..log_per_node).map(|j| w[mlog2log[node * log_per_node + j]]).collect();
        let rep = replicate_experts(&tokens_per_mlog, phy_per_node).expect("validated sizes");
        mlogcnt[node * log_per_node..(node + 1) * log_per_node].copy_from_slice(&rep.logcnt);

        // Step 3: the node's replicas to its GPUs.
        let tokens_per_phy: Vec<f64> = rep.phy2log.iter().map(|&m| tokens_per_mlog[m] / rep.logcnt[m] as f64).collect();
        let pk = balanced_packing(&tokens_per_phy, num_gpus / num_nodes).expect("validated sizes");
        let phy2pphy: Vec<usize> = (0..phy_per_node).map(|p| pk.pack_index[p] * phy_per_gpu + pk.rank_in_pack[p]).collect();
        let pphy2phy = inverse(&phy2pphy);
        for (q, &p) in pphy2phy.iter().enumerate() {
            let slot = node * phy_per_node + q;
            phy2log[slot] = mlog2log[rep.phy2log[p] + node * log_per_node];
            phyrank[slot] = rep.rank[p];
        }
    }
    let logcnt = log2mlog.iter().map(|&m| mlogcnt[m]).collect();
    (phy2log, phyrank, logcnt)
}

/// The placement of every layer, as the reference returns it (plus the replica ranks).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EplbPlan {
    pub cfg: EplbCfg,
    pub policy: Policy,
    /// `[layer][slot]`: the logical expert of each physical slot (`num_replicas` per layer).
    pub phy2log: Vec<Vec<usize>>,
    /// `[layer][slot]`: the slot's replica rank among its expert's replicas.
    pub phyrank: Vec<Vec<usize>>,
    /// `[layer][expert][rank]`: the physical slot of each replica, −1 past the expert's count;
    /// the last axis is the largest count over all layers (as the reference's `maxlogcnt`).
    pub log2phy: Vec<Vec<Vec<i64>>>,
    /// `[layer][expert]`: replicas of each logical expert.
    pub logcnt: Vec<Vec<usize>>,
}

impl EplbPlan {
    /// Load on each GPU of `layer` when every replica carries `load / replicas` of its expert.
    /// `row` is that layer's loads as given to [`rebalance_experts`].
    pub fn device_loads(&self, layer: usize, row: &[f64]) -> Vec<f64> {
        let mut loads = vec![0.0; self.cfg.num_gpus];
        for (p, &e) in self.phy2log[layer].iter().enumerate() {
            loads[self.cfg.gpu_of_slot(p)] += row[e] / self.logcnt[layer][e] as f64;
        }
        loads
    }
}

/// The no-balancing baseline: one replica per expert, experts in id order over `num_gpus`
/// devices in contiguous runs whose sizes differ by at most one (expert `e` on device
/// `e · num_gpus / experts`). Empty if `num_gpus` is 0.
pub fn in_order_device_loads(row: &[f64], num_gpus: usize) -> Vec<f64> {
    let mut loads = vec![0.0; num_gpus];
    if num_gpus == 0 {
        return loads;
    }
    let n = row.len();
    for (e, &x) in row.iter().enumerate() {
        loads[(e as u128 * num_gpus as u128 / n as u128) as usize] += x;
    }
    loads
}

/// Largest load over the mean load; 1.0 when every load is 0 (or there are none).
pub fn max_over_mean(loads: &[f64]) -> f64 {
    let total: f64 = loads.iter().sum();
    if loads.is_empty() || total <= 0.0 {
        return 1.0;
    }
    let max = loads.iter().cloned().fold(f64::MIN, f64::max);
    max / (total / loads.len() as f64)
}

/// The reference's `rebalance_experts(weight, num_replicas, num_groups, num_nodes, num_gpus)`:
/// `weight[layer][expert]` is the estimated load of each logical expert. The hierarchical
/// policy runs when `num_groups % num_nodes == 0`, the global one otherwise.
pub fn rebalance_experts(weight: &[Vec<f64>], cfg: &EplbCfg) -> Result<EplbPlan, EplbError> {
    cfg.validate(weight)?;
    let policy = cfg.policy();
    let (groups, nodes) = match policy {
        Policy::Hierarchical => (cfg.num_groups, cfg.num_nodes),
        Policy::Global => (1, 1),
    };
    let mut phy2log = Vec::with_capacity(weight.len());
    let mut phyrank = Vec::with_capacity(weight.len());
    let mut logcnt = Vec::with_capacity(weight.len());
    for row in weight {
        let (p, r, c) = hierarchical_layer(row, cfg.num_replicas, groups, nodes, cfg.num_gpus);
        phy2log.push(p);
        phyrank.push(r);
        logcnt.push(c);
    }
    let experts = weight[0].len();
    let maxlogcnt = logcnt.iter().flatten().copied().max().unwrap_or(1);
    if weight.len().checked_mul(experts).and_then(|x| x.checked_mul(maxlogcnt)).is_none_or(|x| x > MAX_LOG2PHY) {
        return Err(EplbError::new(
            EplbArg::NumReplicas,
            format!(
                "log2phy would hold {} layers x {experts} experts x {maxlogcnt} replicas, at most {MAX_LOG2PHY} entries",
                weight.len()
            ),
        ));
    }
    let log2phy = phy2log
        .iter()
        .zip(&phyrank)
        .map(|(p2l, rk)| {
            let mut m = vec![vec![-1i64; maxlogcnt]; experts];
            for (slot, (&e, &r)) in p2l.iter().zip(rk).enumerate() {
                m[e][r] = slot as i64;
            }
            m
        })
        .collect();
    Ok(EplbPlan { cfg: *cfg, policy, phy2log, phyrank, log2phy, logcnt })
}
