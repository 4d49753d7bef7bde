//! MoEntwine's Non-invasive Balancer (NI-Balancer), FL (seeds/moentwine.txt §V; SPEC §4).
//!
//! Three plain functions a cycle-level controller in `hw` must agree with, decision for decision:
//!
//! 1. **Trigger** (paper Eq. 2, [`imbalance`], [`should_migrate`]): migrate when the imbalance
//!    summed over the layers, Σ_i (max(load_i) − μ(load_i)) / μ(load_i), exceeds α **and** the
//!    time since the last migration exceeds β (β = 0 for the non-invasive balancer).
//! 2. **Topology-aware balancing** (paper Algorithm 1, [`topo_balance`]): repeatedly copy the
//!    most popular expert of the hottest device into a free shadow slot of the *nearest* device
//!    that stays below the peak. [`greedy_balance`] is the baseline the paper contrasts it with
//!    ("copy the hottest expert to the coldest device", no topology), with the same interface.
//! 3. **Migration steps** ([`migration_steps`], [`split_path`]): the XY route of one copy cut
//!    into *Local* steps (hops inside one FTD, run during the all-reduce, when intra-FTD links
//!    are cold) and *Global* steps (hops between FTDs, run during the all-to-all, when the
//!    inter-FTD links are idle).
//!
//! # Heats are a pure function of the placement
//! `Heat_d` = Σ `load_e / num_e` over the experts `e` hosted on device `d`, summed **in ascending
//! expert id** from `0.0`, where `num_e` is the number of devices hosting `e`
//! ([`device_loads`]). The balancers never update a heat incrementally: after each copy they
//! recompute, by that formula, the heat of every device whose sum changed (the hosts of the
//! copied expert and the destination). A heat is therefore always bit-for-bit
//! `device_loads(load, placement)[d]`, whatever the history, which is what a CL controller
//! has to reproduce.
//!
//! # Ties (every decision)
//! * hottest device: the largest heat; equal heats → the **lower device id**;
//! * source expert on it: the largest `load_e / num_e`; equal → the **lower expert id**;
//! * destination ([`topo_balance`]): the fewest XY hops ([`WaferGeom::hops`]) from the hottest
//!   device among the cold set; equal hops → the **lower device id**;
//! * destination ([`greedy_balance`]): the smallest heat among the candidates; equal → the lower
//!   device id; its copy source: the host of the expert nearest to the destination; equal hops
//!   → the lower device id;
//! * all comparisons are plain `f64` comparisons of the values defined above; "cold" is strict
//!   under both [`ColdRule`]s, which the caller picks (the CL must use the same one).

use super::eplb;
use crate::noc::{path_xy_fl, Coord};
use crate::wafer::{Mapping, WaferGeom};
use serde::{Deserialize, Serialize};

/// Largest load over the mean load; 1.0 when every load is 0 (or there are none). The same
/// function as [`eplb::max_over_mean`], so both balancers are scored alike.
pub use eplb::max_over_mean;

// ---------------------------------------------------------------------------------------------
// Trigger (Eq. 2)
// ---------------------------------------------------------------------------------------------

/// The trigger's two tuning parameters (paper Eq. 2).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TriggerCfg {
    /// Threshold on the summed layer imbalance ([`imbalance`]); migrate only when it is
    /// strictly exceeded.
    pub alpha: f64,
    /// Least cycles between two migrations, strictly exceeded; 0 for the non-invasive balancer
    /// (the invasive baselines use it to limit how often inference is interrupted).
    pub beta_cycles: u64,
}

/// Paper Eq. 2, left-hand side: Σ over layers of (max(load_i) − μ(load_i)) / μ(load_i), with
/// `loads[layer][device]` the device loads of each layer. A layer whose mean is not positive
/// (all zero, or empty) contributes 0. Loads are expected finite and non-negative; a NaN
/// propagates.
pub fn imbalance(loads: &[Vec<f64>]) -> f64 {
    let mut s = 0.0;
    for layer in loads {
        if layer.is_empty() {
            continue;
        }
        let mean = layer.iter().sum::<f64>() / layer.len() as f64;
        if mean.is_nan() {
            return f64::NAN;
        }
        if mean <= 0.0 {
            continue;
        }
        let max = layer.iter().cloned().fold(f64::MIN, f64::max);
        s += (max - mean) / mean;
    }
    s
}

/// Paper Eq. 2: `imbalance(device_loads_per_layer) > alpha && cycles_since_last_migration >
/// beta_cycles`. Both comparisons are strict, so with β = 0 a migration is never triggered in
/// the very cycle the previous one was (Δt = 0); a caller that has never migrated passes
/// `u64::MAX`. A NaN imbalance never triggers.
pub fn should_migrate(cfg: &TriggerCfg, device_loads_per_layer: &[Vec<f64>], cycles_since_last_migration: u64) -> bool {
    cycles_since_last_migration > cfg.beta_cycles && imbalance(device_loads_per_layer) > cfg.alpha
}

// ---------------------------------------------------------------------------------------------
// Algorithm 1 and the greedy baseline
// ---------------------------------------------------------------------------------------------

/// An input the balancers refuse (never a panic): `field` is `load`, `placement`,
/// `shadow_slots` or `geom`.
pub type NiError = super::BalanceError;

/// One copy of an expert into a shadow slot: `src_device` already hosts `expert` and sends its
/// weights; `dst_device` receives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Move {
    pub expert: u32,
    pub src_device: u32,
    pub dst_device: u32,
}

/// What a balancer decided.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BalancePlan {
    /// The copies, in decision order.
    pub moves: Vec<Move>,
    /// Device → hosted experts after the moves, ascending (the input's lists sorted, plus the
    /// copies).
    pub placement: Vec<Vec<u32>>,
    /// Device heats after the moves: exactly `device_loads(load, &placement)`.
    pub heats: Vec<f64>,
    /// Expert → devices hosting it after the moves (`Num_e`).
    pub num: Vec<u32>,
    /// Free shadow slots per device after the moves.
    pub slots_left: Vec<u32>,
}

impl BalancePlan {
    /// Σ over the moves of the XY hops from source to destination.
    pub fn total_hops(&self, geom: &WaferGeom) -> u64 {
        self.moves.iter().map(|m| geom.hops(m.src_device, m.dst_device) as u64).sum()
    }
}

/// Which devices count as *cold*, i.e. may receive the source expert `src` copied off the
/// hottest device `hot` (paper Algorithm 1, line 5 vs the prose of §V-C). Both are strict, so
/// with either the destination's new heat stays below the old peak and **the peak heat never
/// increases**.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ColdRule {
    /// Algorithm 1, line 5, as printed: `Heat_d < Heat_hot − Load_src / Num_src`, the share
    /// *before* the copy. It leaves a margin of `Load_src / (Num_src (Num_src + 1))` under the
    /// peak, and so never replicates an expert whose share alone outweighs everything else on
    /// the hottest device (a single dominant expert stays where it is).
    ShareBefore,
    /// The prose: "devices whose Heat_d would not exceed the current maximum after hosting this
    /// expert": the heat `d` would have with `src` added and `Num_src + 1`, computed by the
    /// heat formula itself (in ascending expert id, [`device_loads`]), strictly below
    /// `Heat_hot`. Since that is exactly the value `d`'s heat becomes, the no-increase property
    /// holds bit for bit.
    HeatAfter,
}

/// Device loads of a placement: `Σ load_e / num_e` over the experts on each device, summed in
/// ascending expert id, `num_e` = how many devices of `placement` host `e` (the load of an
/// expert is split evenly over its replicas; an expert listed nowhere contributes nothing).
/// These are Algorithm 1's `Heat_d`.
///
/// Panics if `placement` names an expert `≥ load.len()` (the balancers check this and return
/// an [`NiError`] instead).
pub fn device_loads(load: &[f64], placement: &[Vec<u32>]) -> Vec<f64> {
    let mut num = vec![0u32; load.len()];
    for dev in placement {
        for &e in dev {
            num[e as usize] += 1;
        }
    }
    placement.iter().map(|dev| heat_of(load, &num, dev)).collect()
}

/// Heat of one device: `experts` ascending-sorted copy summed in id order.
fn heat_of(load: &[f64], num: &[u32], experts: &[u32]) -> f64 {
    let mut es: Vec<u32> = experts.to_vec();
    es.sort_unstable();
    es.iter().map(|&e| load[e as usize] / num[e as usize] as f64).fold(0.0, |a, x| a + x)
}

/// The balancers' working state, checked on entry.
struct State<'a> {
    load: &'a [f64],
    geom: &'a WaferGeom,
    /// device → experts, ascending
    placement: Vec<Vec<u32>>,
    /// expert → hosts, ascending
    hosts: Vec<Vec<u32>>,
    num: Vec<u32>,
    heats: Vec<f64>,
    slots: Vec<u32>,
}

impl<'a> State<'a> {
    fn new(load: &'a [f64], placement: &[Vec<u32>], shadow_slots: &[u32], geom: &'a WaferGeom) -> Result<Self, NiError> {
        geom.validate().map_err(|e| NiError::new("geom", e.to_string()))?;
        let dies = geom.dies() as usize;
        if let Some((e, x)) = load.iter().enumerate().find(|(_, x)| !x.is_finite() || **x < 0.0) {
            return Err(NiError::new("load", format!("expert {e}: load {x} is not finite and non-negative")));
        }
        if load.len() > u32::MAX as usize {
            return Err(NiError::new("load", format!("{} experts: at most 2^32 - 1", load.len())));
        }
        if placement.len() != dies {
            return Err(NiError::new("placement", format!("{} devices listed but the mesh {geom} has {dies} dies", placement.len())));
        }
        if shadow_slots.len() != dies {
            return Err(NiError::new("shadow_slots", format!("{} devices listed but the mesh {geom} has {dies} dies", shadow_slots.len())));
        }
        let mut sorted = Vec::with_capacity(dies);
        let mut hosts = vec![Vec::new(); load.len()];
        for (d, dev) in placement.iter().enumerate() {
            let mut v = dev.clone();
            v.sort_unstable();
            for (i, &e) in v.iter().enumerate() {
                if e as usize >= load.len() {
                    return Err(NiError::new("placement", format!("device {d}: expert {e} but only {} experts have a load", load.len())));
                }
                if i > 0 && v[i - 1] == e {
                    return Err(NiError::new("placement", format!("device {d}: expert {e} listed twice")));
                }
                hosts[e as usize].push(d as u32);
            }
            sorted.push(v);
        }
        if let Some(e) = hosts.iter().position(|h| h.is_empty()) {
            return Err(NiError::new("placement", format!("expert {e} is hosted on no device")));
        }
        let num: Vec<u32> = hosts.iter().map(|h| h.len() as u32).collect();
        let heats = sorted.iter().map(|dev| heat_of(load, &num, dev)).collect();
        Ok(State { load, geom, placement: sorted, hosts, num, heats, slots: shadow_slots.to_vec() })
    }

    /// Upper bound on the copies: every copy takes a free slot and a (device, expert) pair
    /// not yet hosted.
    fn max_moves(&self) -> u64 {
        let slots: u64 = self.slots.iter().map(|&s| s as u64).sum();
        let pairs = self.placement.len() as u64 * self.load.len() as u64;
        slots.min(pairs)
    }

    fn share(&self, e: u32) -> f64 {
        self.load[e as usize] / self.num[e as usize] as f64
    }

    /// The largest heat, ties → lower id.
    fn hottest(&self) -> u32 {
        let mut best = 0;
        for d in 1..self.heats.len() {
            if self.heats[d] > self.heats[best] {
                best = d;
            }
        }
        best as u32
    }

    /// `d` may take `src` copied off a device of heat `peak` under `rule` (slots and hosting
    /// are checked by the caller).
    fn is_cold(&self, rule: ColdRule, d: u32, src: u32, peak: f64) -> bool {
        match rule {
            ColdRule::ShareBefore => self.heats[d as usize] < peak - self.share(src),
            ColdRule::HeatAfter => {
                // the same sum as heat_of over placement[d] ∪ {src}, in ascending id
                let new_share = self.load[src as usize] / (self.num[src as usize] + 1) as f64;
                let mut h = 0.0;
                let mut added = false;
                for &e in &self.placement[d as usize] {
                    if !added && e > src {
                        h += new_share;
                        added = true;
                    }
                    h += self.share(e);
                }
                if !added {
                    h += new_share;
                }
                h < peak
            }
        }
    }

    fn hosts_expert(&self, d: u32, e: u32) -> bool {
        self.placement[d as usize].binary_search(&e).is_ok()
    }

    /// Copy `e` to `dst`; recompute the changed heats from scratch.
    fn copy(&mut self, e: u32, src: u32, dst: u32) -> Move {
        let p = &mut self.placement[dst as usize];
        let at = p.binary_search(&e).unwrap_err();
        p.insert(at, e);
        let h = &mut self.hosts[e as usize];
        let at = h.binary_search(&dst).unwrap_err();
        h.insert(at, dst);
        self.num[e as usize] += 1;
        self.slots[dst as usize] -= 1;
        for &d in &self.hosts[e as usize] {
            self.heats[d as usize] = heat_of(self.load, &self.num, &self.placement[d as usize]);
        }
        Move { expert: e, src_device: src, dst_device: dst }
    }

    fn finish(self, moves: Vec<Move>) -> BalancePlan {
        BalancePlan { moves, placement: self.placement, heats: self.heats, num: self.num, slots_left: self.slots }
    }
}

/// Paper Algorithm 1, "Topology-aware Balancing".
///
/// Inputs: `load[e]` the historical load of expert `e`; `placement[d]` the experts device
/// (die) `d` hosts, replicas already in shadow slots included (`Num_e` is counted from it, so
/// the paper's "Num ← {1}" is the case of one host per expert); `shadow_slots[d]` the free
/// shadow slots of `d`; `geom` the mesh (device = die id, distances = XY hops).
///
/// Loop, each iteration:
/// 1. `hot` = the device of largest heat (ties → lower id);
/// 2. `src` = the expert on `hot` with the largest `load_e / num_e` (ties → lower id); if `hot`
///    hosts nothing, stop;
/// 3. cold set = devices `d` that are cold under `rule` ([`ColdRule`]: `Heat_d < Heat_hot −
///    load_src / num_src` as line 5 prints it, or the heat after hosting `src` below `Heat_hot`
///    as the prose says), do not host `src` and have a free shadow slot; stop if it is empty;
/// 4. `dst` = the cold device fewest hops from `hot` (ties → lower id);
/// 5. copy `src` from `hot` to `dst`: `num_src += 1`, a slot of `dst` used, heats recomputed.
///
/// Under either rule the destination's new heat is below the old peak and every other heat
/// falls or stays, so **the peak heat never increases**. The loop
/// also stops after `min(Σ shadow_slots, devices × experts)` copies — it cannot take more, each
/// copy using a slot and a new (device, expert) pair — so it always terminates.
pub fn topo_balance(
    load: &[f64],
    placement: &[Vec<u32>],
    shadow_slots: &[u32],
    geom: &WaferGeom,
    rule: ColdRule,
) -> Result<BalancePlan, NiError> {
    let mut st = State::new(load, placement, shadow_slots, geom)?;
    let mut moves = Vec::new();
    for _ in 0..st.max_moves() {
        let hot = st.hottest();
        let Some(src) = max_share(&st, &st.placement[hot as usize]) else { break };
        let peak = st.heats[hot as usize];
        let mut dst: Option<(u32, u32)> = None; // (hops, device)
        for d in 0..st.heats.len() as u32 {
            if st.slots[d as usize] == 0 || st.hosts_expert(d, src) || !st.is_cold(rule, d, src, peak) {
                continue;
            }
            let h = st.geom.hops(hot, d);
            if dst.is_none_or(|(bh, _)| h < bh) {
                dst = Some((h, d));
            }
        }
        let Some((_, dst)) = dst else { break };
        moves.push(st.copy(src, hot, dst));
    }
    Ok(st.finish(moves))
}

/// The expert of `experts` (ascending) with the largest share, ties → lower id.
fn max_share(st: &State<'_>, experts: &[u32]) -> Option<u32> {
    let mut best: Option<u32> = None;
    for &e in experts {
        if best.is_none_or(|b| st.share(e) > st.share(b)) {
            best = Some(e);
        }
    }
    best
}

/// The greedy baseline the paper contrasts Algorithm 1 with (§V-C: prior works "reassign shadow
/// slots by directly copying the hottest expert to the coldest device"), with the same inputs
/// and output as [`topo_balance`]. Each iteration:
///
/// 1. `src` = the expert of largest `load_e / num_e` over **all** experts (ties → lower id);
/// 2. candidates = devices with a free shadow slot that do not host `src`; `dst` = the one of
///    smallest heat (ties → lower id); stop if there is none;
/// 3. stop unless `dst` is cold under `rule` against the current peak `Heat_max` (the hottest
///    device's heat), so that both balancers stop on the same criterion and the peak never
///    increases — without it the greedy would keep filling slots and could raise the peak;
/// 4. copy `src` to `dst` from the host of `src` nearest to `dst` (ties → lower id) — the
///    cheapest source, which favours the baseline in hop counts.
///
/// The same `min(Σ shadow_slots, devices × experts)` cap bounds the loop.
pub fn greedy_balance(
    load: &[f64],
    placement: &[Vec<u32>],
    shadow_slots: &[u32],
    geom: &WaferGeom,
    rule: ColdRule,
) -> Result<BalancePlan, NiError> {
    let mut st = State::new(load, placement, shadow_slots, geom)?;
    let mut moves = Vec::new();
    let all: Vec<u32> = (0..load.len() as u32).collect();
    for _ in 0..st.max_moves() {
        let Some(src) = max_share(&st, &all) else { break };
        let hot = st.hottest();
        let mut dst: Option<u32> = None;
        for d in 0..st.heats.len() as u32 {
            if st.slots[d as usize] == 0 || st.hosts_expert(d, src) {
                continue;
            }
            if dst.is_none_or(|b| st.heats[d as usize] < st.heats[b as usize]) {
                dst = Some(d);
            }
        }
        let Some(dst) = dst else { break };
        if !st.is_cold(rule, dst, src, st.heats[hot as usize]) {
            break;
        }
        let mut from: Option<(u32, u32)> = None;
        for &h in &st.hosts[src as usize] {
            let k = st.geom.hops(h, dst);
            if from.is_none_or(|(bk, _)| k < bk) {
                from = Some((k, h));
            }
        }
        let (_, from) = from.expect("every expert has a host (checked in State::new)");
        moves.push(st.copy(src, from, dst));
    }
    Ok(st.finish(moves))
}

// ---------------------------------------------------------------------------------------------
// Migration steps (Local / Global)
// ---------------------------------------------------------------------------------------------

/// Which links a migration step uses, and so in which phase it runs (paper §V-A, Fig. 11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MigKind {
    /// Hops between two dies of the same FTD: run during the attention all-reduce, when the
    /// intra-FTD links are cold.
    Local,
    /// Hops between dies of different FTDs: run during the MoE all-to-all, which stays inside
    /// the FTDs and leaves the inter-FTD links idle.
    Global,
}

/// One step of a migration: consecutive hops of one kind. `path` lists the dies visited, both
/// ends included (so `path.len() − 1` hops); a step starts on the die the previous one ended on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigStep {
    pub kind: MigKind,
    pub path: Vec<u32>,
}

/// The kind of the hop between neighbouring dies `a` and `b`: Local iff `m.ftd_of` agrees.
pub fn hop_kind(m: &Mapping, a: u32, b: u32) -> MigKind {
    if m.ftd_of[a as usize] == m.ftd_of[b as usize] {
        MigKind::Local
    } else {
        MigKind::Global
    }
}

/// Cuts a die path (consecutive entries are the dies of one hop each) into maximal runs of
/// hops of one kind ([`hop_kind`]). Kinds of consecutive steps therefore alternate. A path of
/// fewer than two dies gives no step. Panics if a die is outside the mapping.
pub fn split_path(m: &Mapping, path: &[u32]) -> Vec<MigStep> {
    let mut steps: Vec<MigStep> = Vec::new();
    for w in path.windows(2) {
        let k = hop_kind(m, w[0], w[1]);
        match steps.last_mut() {
            Some(s) if s.kind == k => s.path.push(w[1]),
            _ => steps.push(MigStep { kind: k, path: vec![w[0], w[1]] }),
        }
    }
    steps
}

/// The steps of copying an expert from die `src` to die `dst` along the XY route
/// ([`crate::noc::path_xy_fl`], x first): [`split_path`] of that route. `src == dst` gives no
/// step. Under ER-Mapping a route inside one FTD is one Local step; a route that crosses FTD
/// borders alternates Local and Global steps. Because XY routing crosses the x border and the y
/// border at different places, a corner-to-opposite-corner copy on the 4×4 ER mesh is
/// Local → Global → Local → Global → Local; the paper's three-stage Local → Global → Local
/// (Fig. 11(d)) needs a route through the point where four FTDs meet, which
/// [`split_path`] accepts too. Panics if `src` or `dst` is outside the mapping.
pub fn migration_steps(m: &Mapping, src: u32, dst: u32) -> Vec<MigStep> {
    let cols = m.geom.cols();
    let dies = m.geom.dies();
    assert!(src < dies && dst < dies, "migration_steps: die {src} or {dst} outside the {dies} dies");
    let path: Vec<u32> = path_xy_fl(Coord::of(src, cols), Coord::of(dst, cols)).into_iter().map(|c| c.id(cols)).collect();
    split_path(m, &path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heat_is_sum_in_id_order() {
        // expert 1 on both devices: half of its load each
        let h = device_loads(&[3.0, 4.0, 1.0], &[vec![1, 0], vec![2, 1]]);
        assert_eq!(h, vec![5.0, 3.0]);
    }

    #[test]
    fn refuses_bad_input() {
        let g = WaferGeom::single(2, 1);
        let r = ColdRule::HeatAfter;
        let e = topo_balance(&[1.0, f64::NAN], &[vec![0], vec![1]], &[1, 1], &g, r).unwrap_err();
        assert_eq!(e.field, "load");
        let e = topo_balance(&[1.0, 1.0], &[vec![0]], &[1, 1], &g, r).unwrap_err();
        assert_eq!(e.field, "placement");
        let e = topo_balance(&[1.0, 1.0], &[vec![0, 0, 1], vec![]], &[1, 1], &g, r).unwrap_err();
        assert!(e.reason.contains("twice"), "{e}");
        let e = topo_balance(&[1.0, 1.0], &[vec![0], vec![0]], &[1, 1], &g, r).unwrap_err();
        assert!(e.reason.contains("expert 1 is hosted on no device"), "{e}");
        let e = greedy_balance(&[1.0], &[vec![0], vec![]], &[1], &g, r).unwrap_err();
        assert_eq!(e.field, "shadow_slots");
        let e = greedy_balance(&[1.0], &[vec![3], vec![]], &[1, 1], &g, r).unwrap_err();
        assert_eq!(e.field, "placement");
    }
}
