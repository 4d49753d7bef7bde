//! Sem-MoE (`shared/seeds/sem-moe.txt`, SPEC §6): token–expert co-scheduling, FL.
//!
//! * [`Profile`] — the offline profile: per MoE layer a token_id → expert count table
//!   `T^(L)` (§3.2) and from it the confidence table `C_p = Pr(expert | token)`.
//! * [`co_cluster`] — Appendix Algorithm 1: alternate expert placement (`expert_place`) and
//!   unit (request or token) assignment (`request_schedule`) over `devices` clusters, keeping
//!   the best of the §3.3 objective (load imbalance + remote activations).
//! * [`DpScheduler`] — Algorithm 2: a request goes to the unmasked device with the largest
//!   summed token-table score; the device is then masked until every device had one request.
//! * [`rebatch`] / [`resume_order`] — Algorithm 3: per-token device lookup, stable argsort,
//!   group-by-device, align to the reduce-scatter chunk sizes, concatenate; the inverse
//!   shuffle after the all-gather. [`NGramTable`] — the 2-gram device transition table `A`.
//! * [`local_activation_rate`] — share of token–expert activations served on the token's
//!   own device.
//!
//! Where the paper's extraction is garbled (the score normalizations, what a "unit" is, how
//! `T_p` and `A_p` compare) our reading is written down in `docs/semmoe.md`. Every tie is
//! broken towards the lower index (device, expert, unit), so the result is a function of the
//! inputs and `SemMoeCfg::seed` only.

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

use super::{balanced_packing, BalanceError};
use crate::trace::{Rows, TraceToken};

/// Largest device (cluster) count the functions accept.
pub const MAX_DEVICES: u32 = 4096;

/// Parameters of the co-clustering solver (Algorithm 1) and the 2-gram table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SemMoeCfg {
    /// Alternation rounds (`n_steps`): each places experts, then re-assigns units.
    pub n_steps: u32,
    /// Random pairwise expert swaps tried after each placement (`ft_steps`).
    pub ft_steps: u32,
    /// Expert placement score weights: expert–expert affinity, unit–expert affinity, load.
    pub alpha_e: f64,
    pub beta_e: f64,
    pub gamma_e: f64,
    /// Unit assignment score weights: unit–unit affinity, unit–expert affinity.
    pub alpha_r: f64,
    pub beta_r: f64,
    /// Weight of load imbalance against remote activations in the objective, in [0, 1].
    pub theta: f64,
    /// Layers the device-transition table looks back (the paper uses 2).
    pub lookback: u32,
    /// Seed of the fine-tuning swaps.
    pub seed: u64,
}

impl Default for SemMoeCfg {
    fn default() -> Self {
        SemMoeCfg { n_steps: 4, ft_steps: 256, alpha_e: 0.5, beta_e: 1.0, gamma_e: 0.5, alpha_r: 0.5, beta_r: 1.0, theta: 0.5, lookback: 2, seed: 1 }
    }
}

impl SemMoeCfg {
    pub fn validate(&self) -> Result<(), BalanceError> {
        if self.n_steps == 0 || self.n_steps > 1000 {
            return Err(BalanceError::new("n_steps", format!("{} outside 1..=1000", self.n_steps)));
        }
        if self.ft_steps > 1_000_000 {
            return Err(BalanceError::new("ft_steps", format!("{} above 1000000", self.ft_steps)));
        }
        for (f, v) in [("alpha_e", self.alpha_e), ("beta_e", self.beta_e), ("gamma_e", self.gamma_e), ("alpha_r", self.alpha_r), ("beta_r", self.beta_r)] {
            if !(v.is_finite() && (0.0..=1e6).contains(&v)) {
                return Err(BalanceError::new(f, format!("{v} is not a weight in [0, 1e6]")));
            }
        }
        if !(self.theta.is_finite() && (0.0..=1.0).contains(&self.theta)) {
            return Err(BalanceError::new("theta", format!("{} outside [0, 1]", self.theta)));
        }
        if self.lookback > 4 {
            return Err(BalanceError::new("lookback", format!("{} above 4 (the table has devices^lookback rows)", self.lookback)));
        }
        Ok(())
    }
}

fn check_devices(devices: u32) -> Result<(), BalanceError> {
    if devices == 0 || devices > MAX_DEVICES {
        return Err(BalanceError::new("devices", format!("{devices} outside 1..={MAX_DEVICES}")));
    }
    Ok(())
}

/// Index of the largest value (ties: the lowest index; NaN never wins). `None` if empty or
/// every entry is excluded.
fn argmax_by(n: usize, mut f: impl FnMut(usize) -> Option<f64>) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for i in 0..n {
        if let Some(v) = f(i) {
            if v.is_nan() {
                continue;
            }
            if best.is_none_or(|(_, b)| v > b) {
                best = Some((i, v));
            }
        }
    }
    best.map(|(i, _)| i)
}

// ---------------------------------------------------------------------------------------
// Profiling tables (§3.2)
// ---------------------------------------------------------------------------------------

/// The offline profile: per layer, how often each token id activated each expert.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Profile {
    pub experts: u32,
    pub layers: u32,
    /// token_id → row of the tables (ascending token ids).
    pub rows: BTreeMap<u32, usize>,
    /// Token frequency `a_j` (occurrences in the profile), per row.
    pub freq: Vec<u64>,
    /// `counts[l][row]`: (expert, activations) with activations > 0, ascending expert.
    pub counts: Vec<Vec<Vec<(u16, u32)>>>,
}

impl Profile {
    /// Builds the tables from profiled tokens (routing checked against `experts`/`layers`).
    /// A token without `token_id` is refused (field `token_id`).
    pub fn build(tokens: &[TraceToken], experts: u32, layers: u32) -> Result<Profile, BalanceError> {
        if experts == 0 || experts > crate::trace::MAX_EXPERTS {
            return Err(BalanceError::new("experts", format!("{experts} outside 1..={}", crate::trace::MAX_EXPERTS)));
        }
        let mut rows = BTreeMap::new();
        for (i, t) in tokens.iter().enumerate() {
            let id = t.token_id.ok_or_else(|| BalanceError::new("token_id", format!("token {i} (iter {}, req {}) has no token_id: the token table is keyed by it", t.iter, t.req)))?;
            if t.layers.len() != layers as usize {
                return Err(BalanceError::new("layers", format!("token {i} has {} layers, expected {layers}", t.layers.len())));
            }
            if let Some(e) = t.layers.iter().flatten().find(|&&e| u32::from(e) >= experts) {
                return Err(BalanceError::new("layers", format!("token {i}: expert {e} out of range 0..{experts}")));
            }
            let n = rows.len();
            rows.entry(id).or_insert(n);
        }
        // Rows in ascending token id order.
        for (k, v) in rows.iter_mut().enumerate() {
            *v.1 = k;
        }
        let n = rows.len();
        let mut freq = vec![0u64; n];
        let mut dense: Vec<BTreeMap<(usize, u16), u32>> = vec![BTreeMap::new(); layers as usize];
        for t in tokens {
            let r = rows[&t.token_id.unwrap_or_default()];
            freq[r] += 1;
            for (l, es) in t.layers.iter().enumerate() {
                for &e in es {
                    *dense[l].entry((r, e)).or_default() += 1;
                }
            }
        }
        let counts = dense
            .into_iter()
            .map(|m| {
                let mut v: Vec<Vec<(u16, u32)>> = vec![Vec::new(); n];
                for ((r, e), c) in m {
                    v[r].push((e, c));
                }
                v
            })
            .collect();
        Ok(Profile { experts, layers, rows, freq, counts })
    }

    /// Pr(expert | token) at `layer` (the confidence table row; sums to 1), sparse; `None`
    /// for a token never profiled (or a layer out of range).
    pub fn confidence(&self, layer: usize, token_id: u32) -> Option<Vec<(u16, f64)>> {
        let r = *self.rows.get(&token_id)?;
        let row = self.counts.get(layer)?.get(r)?;
        let total: u64 = row.iter().map(|&(_, c)| c as u64).sum();
        if total == 0 {
            return None;
        }
        Some(row.iter().map(|&(e, c)| (e, c as f64 / total as f64)).collect())
    }

    /// Activations per expert at `layer` over the profile.
    pub fn expert_loads(&self, layer: usize) -> Vec<f64> {
        let mut v = vec![0.0; self.experts as usize];
        for row in self.counts.get(layer).into_iter().flatten() {
            for &(e, c) in row {
                v[e as usize] += c as f64;
            }
        }
        v
    }
}

// ---------------------------------------------------------------------------------------
// Placements
// ---------------------------------------------------------------------------------------

/// `expert_dev[l][e]`: the device of expert `e` at layer `l`.
pub type Placement = Vec<Vec<u32>>;

/// Experts per device at most: `ceil(experts / devices)` (the paper's `N/E`, rounded up
/// when it does not divide).
pub fn expert_capacity(experts: u32, devices: u32) -> u32 {
    experts.div_ceil(devices.max(1))
}

/// Round-robin placement: expert `e` on device `e % devices` at every layer (the vanilla
/// SGLang/EP layout).
pub fn round_robin_placement(experts: u32, layers: u32, devices: u32) -> Result<Placement, BalanceError> {
    check_devices(devices)?;
    Ok((0..layers).map(|_| (0..experts).map(|e| e % devices).collect()).collect())
}

/// Load-only placement of one layer: greedy LPT packing of the expert loads onto `devices`
/// with equal expert counts (EPLB's `balanced_packing`; when the count does not divide, the
/// loads are padded with zero-load phantom experts that are dropped afterwards).
pub fn lpt_layer(loads: &[f64], devices: u32) -> Result<Vec<u32>, BalanceError> {
    check_devices(devices)?;
    if let Some(i) = loads.iter().position(|x| !x.is_finite() || *x < 0.0) {
        return Err(BalanceError::new("loads", format!("load[{i}] = {} is not a finite non-negative number", loads[i])));
    }
    let d = devices as usize;
    let mut w = loads.to_vec();
    w.resize(loads.len().div_ceil(d) * d, 0.0);
    let p = balanced_packing(&w, d).ok_or_else(|| BalanceError::new("loads", "balanced packing refused the loads"))?;
    Ok(p.pack_index[..loads.len()].iter().map(|&x| x as u32).collect())
}

/// Load-only placement of every layer from the profile's expert loads.
pub fn load_only_placement(p: &Profile, devices: u32) -> Result<Placement, BalanceError> {
    (0..p.layers as usize).map(|l| lpt_layer(&p.expert_loads(l), devices)).collect()
}

/// Per-device sum of `loads` under one layer's placement.
pub fn device_loads(loads: &[f64], layer_dev: &[u32], devices: u32) -> Vec<f64> {
    let mut v = vec![0.0; devices as usize];
    for (e, &d) in layer_dev.iter().enumerate() {
        if let (Some(x), Some(slot)) = (loads.get(e), v.get_mut(d as usize)) {
            *slot += x;
        }
    }
    v
}

// ---------------------------------------------------------------------------------------
// Algorithm 1: alternating co-clustering
// ---------------------------------------------------------------------------------------

/// What Algorithm 1 clusters together with the experts: a request (attention-DP) or a token
/// (attention-TP). `act[l][e]`: its (predicted or profiled) activations of expert `e` at
/// layer `l`; `weight`: its tokens (the attention load it brings to a device).
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    pub weight: f64,
    pub act: Vec<Vec<f64>>,
}

/// Algorithm 1's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CoCluster {
    /// `expert_dev[l][e]` (the table `E`).
    pub expert_dev: Placement,
    /// Device of each unit.
    pub unit_dev: Vec<u32>,
    /// The objective of the kept solution and of every candidate, in order (step 0 is the
    /// initial load-only placement with its unit assignment).
    pub objective: f64,
    pub history: Vec<f64>,
}

struct Problem<'a> {
    units: &'a [Unit],
    layers: usize,
    experts: usize,
    d: usize,
    /// loads[l][e]
    loads: Vec<Vec<f64>>,
    /// coact[l][e * experts + e']: unit-level co-activation (expert–expert affinity).
    coact: Vec<Vec<f64>>,
    total_act: f64,
    total_weight: f64,
}

impl Problem<'_> {
    /// The §3.3 objective, both parts as fractions: θ·Σ|W_c − W/D|/W + (1−θ)·remote/total.
    fn objective(&self, ep: &Placement, ud: &[u32], theta: f64) -> f64 {
        let mut w = vec![0.0; self.d];
        let mut local = 0.0;
        for (u, &c) in self.units.iter().zip(ud) {
            w[c as usize] += u.weight;
            for (l, a) in u.act.iter().enumerate() {
                for (e, &x) in a.iter().enumerate() {
                    if ep[l][e] == c {
                        local += x;
                    }
                }
            }
        }
        let mean = self.total_weight / self.d as f64;
        let imb: f64 = w.iter().map(|x| (x - mean).abs()).sum::<f64>() / self.total_weight.max(1e-12);
        let remote = (self.total_act - local) / self.total_act.max(1e-12);
        theta * imb + (1.0 - theta) * remote
    }

    /// `expert_place`: experts by load (descending), each to the best-scoring unmasked device.
    fn expert_place(&self, ud: &[u32], cfg: &SemMoeCfg, rng: &mut Xoshiro256PlusPlus) -> Placement {
        let (n, d) = (self.experts, self.d);
        let cap = n.div_ceil(d);
        (0..self.layers)
            .map(|l| {
                // R[c][e]: activations of e by the units on device c.
                let mut r = vec![vec![0.0; n]; d];
                for (u, &c) in self.units.iter().zip(ud) {
                    for (e, &x) in u.act[l].iter().enumerate() {
                        r[c as usize][e] += x;
                    }
                }
                let loads = &self.loads[l];
                let total_load: f64 = loads.iter().sum();
                let mean_load = (total_load / d as f64).max(1e-12);
                let mut order: Vec<usize> = (0..n).collect();
                order.sort_by(|&a, &b| loads[b].total_cmp(&loads[a]).then(a.cmp(&b)));
                let mut dev = vec![0u32; n];
                let mut members: Vec<Vec<usize>> = vec![Vec::new(); d];
                let mut cls_load = vec![0.0; d];
                let co = &self.coact[l];
                for &e in &order {
                    let eafe: Vec<f64> = (0..d).map(|c| members[c].iter().map(|&m| co[e * n + m]).sum()).collect();
                    let eafr: Vec<f64> = (0..d).map(|c| r[c][e]).collect();
                    let (se, sr) = (eafe.iter().sum::<f64>(), eafr.iter().sum::<f64>());
                    let c = argmax_by(d, |c| {
                        (members[c].len() < cap).then(|| {
                            let a = if se > 0.0 { eafe[c] / se } else { 0.0 };
                            let b = if sr > 0.0 { eafr[c] / sr } else { 0.0 };
                            cfg.alpha_e * a + cfg.beta_e * b - cfg.gamma_e * cls_load[c] / mean_load
                        })
                    })
                    .unwrap_or(0);
                    dev[e] = c as u32;
                    members[c].push(e);
                    cls_load[c] += loads[e];
                }
                // Fine-tuning: random swaps that improve (1−θ)·local − θ·imbalance.
                if d >= 2 {
                    for _ in 0..cfg.ft_steps {
                        let c1 = rng.gen_range(0..d);
                        let c2 = (c1 + rng.gen_range(1..d)) % d;
                        if members[c1].is_empty() || members[c2].is_empty() {
                            continue;
                        }
                        let (i1, i2) = (rng.gen_range(0..members[c1].len()), rng.gen_range(0..members[c2].len()));
                        let (e1, e2) = (members[c1][i1], members[c2][i2]);
                        let dlocal = (r[c1][e2] + r[c2][e1] - r[c1][e1] - r[c2][e2]) / self.total_act.max(1e-12);
                        let (n1, n2) = (cls_load[c1] - loads[e1] + loads[e2], cls_load[c2] - loads[e2] + loads[e1]);
                        let dimb = ((n1 - mean_load).abs() + (n2 - mean_load).abs() - (cls_load[c1] - mean_load).abs() - (cls_load[c2] - mean_load).abs()) / total_load.max(1e-12);
                        if (1.0 - cfg.theta) * dlocal - cfg.theta * dimb > 1e-12 {
                            members[c1][i1] = e2;
                            members[c2][i2] = e1;
                            dev[e1] = c2 as u32;
                            dev[e2] = c1 as u32;
                            (cls_load[c1], cls_load[c2]) = (n1, n2);
                        }
                    }
                }
                dev
            })
            .collect()
    }

    /// `request_schedule`: units by weight (descending), each to the best-scoring unmasked
    /// device: unit–unit affinity (dot product with the device's mean unit) and unit–expert
    /// affinity (its activations of the device's experts), both normalized over devices.
    fn request_schedule(&self, ep: &Placement, cfg: &SemMoeCfg) -> Vec<u32> {
        let (n, d) = (self.experts, self.d);
        let k = self.units.len();
        let cap = k.div_ceil(d);
        let mut order: Vec<usize> = (0..k).collect();
        order.sort_by(|&a, &b| self.units[b].weight.total_cmp(&self.units[a].weight).then(a.cmp(&b)));
        let mut sum = vec![vec![vec![0.0; n]; self.layers]; d];
        let mut cnt = vec![0usize; d];
        let mut ud = vec![0u32; k];
        for &u in &order {
            let unit = &self.units[u];
            let mut rafe = vec![0.0; d];
            let mut rafr = vec![0.0; d];
            for (l, a) in unit.act.iter().enumerate() {
                for (e, &x) in a.iter().enumerate() {
                    if x != 0.0 {
                        rafe[ep[l][e] as usize] += x;
                        for c in 0..d {
                            if cnt[c] > 0 {
                                rafr[c] += x * sum[c][l][e] / cnt[c] as f64;
                            }
                        }
                    }
                }
            }
            let (se, sr) = (rafe.iter().sum::<f64>(), rafr.iter().sum::<f64>());
            let c = argmax_by(d, |c| {
                (cnt[c] < cap).then(|| {
                    let a = if sr > 0.0 { rafr[c] / sr } else { 0.0 };
                    let b = if se > 0.0 { rafe[c] / se } else { 0.0 };
                    cfg.alpha_r * a + cfg.beta_r * b
                })
            })
            .unwrap_or(0);
            ud[u] = c as u32;
            cnt[c] += 1;
            for (l, a) in unit.act.iter().enumerate() {
                for (e, &x) in a.iter().enumerate() {
                    sum[c][l][e] += x;
                }
            }
        }
        ud
    }
}

/// Algorithm 1 over `units` (all with `layers` rows of `experts` activations) and `devices`
/// clusters. Start: the load-only placement and the units scheduled against it ("cluster
/// based on expert affinity"); then `n_steps` rounds of `expert_place` → `request_schedule`,
/// keeping the solution with the lowest objective (ties: the earlier one). Constraints held by
/// construction: every expert on exactly one device, at most `ceil(experts/devices)` experts
/// and `ceil(units/devices)` units per device.
pub fn co_cluster(units: &[Unit], experts: u32, layers: u32, devices: u32, cfg: &SemMoeCfg) -> Result<CoCluster, BalanceError> {
    cfg.validate()?;
    check_devices(devices)?;
    if experts == 0 || experts > crate::trace::MAX_EXPERTS {
        return Err(BalanceError::new("experts", format!("{experts} outside 1..={}", crate::trace::MAX_EXPERTS)));
    }
    if layers == 0 {
        return Err(BalanceError::new("layers", "at least one layer"));
    }
    let (n, nl, d) = (experts as usize, layers as usize, devices as usize);
    for (i, u) in units.iter().enumerate() {
        if u.act.len() != nl || u.act.iter().any(|a| a.len() != n) {
            return Err(BalanceError::new("units", format!("unit {i}: activations are not {nl} layers x {n} experts")));
        }
        if !(u.weight.is_finite() && u.weight >= 0.0) || u.act.iter().flatten().any(|x| !(x.is_finite() && *x >= 0.0)) {
            return Err(BalanceError::new("units", format!("unit {i}: weight and activations must be finite and non-negative")));
        }
    }
    let mut loads = vec![vec![0.0; n]; nl];
    let mut coact = vec![vec![0.0; n * n]; nl];
    for u in units {
        for l in 0..nl {
            let a = &u.act[l];
            let nz: Vec<(usize, f64)> = a.iter().copied().enumerate().filter(|&(_, x)| x > 0.0).collect();
            let s: f64 = nz.iter().map(|&(_, x)| x).sum();
            for &(e, x) in &nz {
                loads[l][e] += x;
                for &(f, y) in &nz {
                    if f != e {
                        coact[l][e * n + f] += x * y / s;
                    }
                }
            }
        }
    }
    let total_act: f64 = loads.iter().flatten().sum();
    let total_weight: f64 = units.iter().map(|u| u.weight).sum();
    let pb = Problem { units, layers: nl, experts: n, d, loads, coact, total_act, total_weight };
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed);
    let ep0: Placement = pb.loads.iter().map(|l| lpt_layer(l, devices)).collect::<Result<_, _>>()?;
    let ud0 = pb.request_schedule(&ep0, cfg);
    let mut best = (pb.objective(&ep0, &ud0, cfg.theta), ep0, ud0.clone());
    let mut history = vec![best.0];
    let mut ud = ud0;
    for _ in 0..cfg.n_steps {
        let ep = pb.expert_place(&ud, cfg, &mut rng);
        ud = pb.request_schedule(&ep, cfg);
        let obj = pb.objective(&ep, &ud, cfg.theta);
        history.push(obj);
        if obj < best.0 {
            best = (obj, ep, ud.clone());
        }
    }
    Ok(CoCluster { objective: best.0, expert_dev: best.1, unit_dev: best.2, history })
}

// ---------------------------------------------------------------------------------------
// Token tables
// ---------------------------------------------------------------------------------------

/// The token-to-expert-cluster table `T` with its confidence `T_p` (Algorithm 2/3 inputs):
/// per profiled token id and device, the mean over `layers` of Pr(token's expert is on that
/// device) = Σ over the device's experts of `C_p`. `lookup` gives the argmax device (ties:
/// lower) and its probability. A token never profiled uses the **nearest profiled token id**
/// (ties: the lower id) — our stand-in for the paper's nearest neighbour in embedding space;
/// it is meaningful where neighbouring ids are semantically close (the scenario generator's
/// contiguous token clusters), see docs/semmoe.md.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TokenDevTable {
    pub devices: u32,
    pub rows: BTreeMap<u32, Vec<f64>>,
}

impl TokenDevTable {
    /// From the profile's confidence table and a placement, over `layers` (a range of the
    /// placement's layers; DP uses all of them since a request stays on one device).
    pub fn from_placement(p: &Profile, placement: &Placement, layers: std::ops::Range<usize>, devices: u32) -> Result<Self, BalanceError> {
        check_devices(devices)?;
        if layers.is_empty() || layers.end > placement.len() || layers.end > p.layers as usize {
            return Err(BalanceError::new("layers", format!("{layers:?} outside the {} placed layers", placement.len())));
        }
        let nl = layers.len() as f64;
        let mut rows = BTreeMap::new();
        for &tok in p.rows.keys() {
            let mut r = vec![0.0; devices as usize];
            for l in layers.clone() {
                for (e, x) in p.confidence(l, tok).into_iter().flatten() {
                    if let Some(y) = placement[l].get(e as usize).and_then(|&d| r.get_mut(d as usize)) {
                        *y += x / nl;
                    }
                }
            }
            rows.insert(tok, r);
        }
        Ok(TokenDevTable { devices, rows })
    }

    /// The row of a token: its own, else the nearest profiled id's.
    pub fn row(&self, token_id: u32) -> Option<&Vec<f64>> {
        if let Some(r) = self.rows.get(&token_id) {
            return Some(r);
        }
        let below = self.rows.range(..token_id).next_back();
        let above = self.rows.range(token_id..).next();
        match (below, above) {
            (Some((b, rb)), Some((a, ra))) => Some(if token_id - b <= a - token_id { rb } else { ra }),
            (Some((_, r)), None) | (None, Some((_, r))) => Some(r),
            (None, None) => None,
        }
    }

    /// (device, confidence) of a token; `None` if the table is empty.
    pub fn lookup(&self, token_id: u32) -> Option<(u32, f64)> {
        let r = self.row(token_id)?;
        let i = argmax_by(r.len(), |i| Some(r[i]))?;
        Some((i as u32, r[i]))
    }

    /// Algorithm 2 line 3: `sum(T[R, :], dim=0)` over a request's token ids.
    pub fn request_score(&self, tokens: &[u32]) -> Vec<f64> {
        let mut s = vec![0.0; self.devices as usize];
        for &t in tokens {
            if let Some(r) = self.row(t) {
                for (x, y) in s.iter_mut().zip(r) {
                    *x += y;
                }
            }
        }
        s
    }
}

// ---------------------------------------------------------------------------------------
// Algorithm 2: online request scheduling (attention-DP)
// ---------------------------------------------------------------------------------------

/// Algorithm 2's state: the round-robin device mask (`true` = still free in this round).
#[derive(Debug, Clone, PartialEq)]
pub struct DpScheduler {
    pub free: Vec<bool>,
}

impl DpScheduler {
    pub fn new(devices: u32) -> Result<Self, BalanceError> {
        check_devices(devices)?;
        Ok(DpScheduler { free: vec![true; devices as usize] })
    }

    /// `get_dp_rank`: the free device with the largest score (ties and NaN: the lower free
    /// device), masked afterwards; the mask resets when every device is taken. Scores shorter
    /// than the device count count as 0 for the missing devices.
    pub fn schedule(&mut self, score: &[f64]) -> u32 {
        let n = self.free.len();
        let dev = argmax_by(n, |i| self.free[i].then(|| score.get(i).copied().unwrap_or(0.0)))
            .or_else(|| self.free.iter().position(|&f| f))
            .unwrap_or(0);
        if let Some(f) = self.free.get_mut(dev) {
            *f = false;
        }
        if self.free.iter().all(|f| !f) {
            self.free.iter_mut().for_each(|f| *f = true);
        }
        dev as u32
    }
}

// ---------------------------------------------------------------------------------------
// Algorithm 3: token re-batching (attention-TP) and the n-gram device table
// ---------------------------------------------------------------------------------------

/// Reduce-scatter chunk of rank `r` of `devices` over `n` tokens: positions
/// `[r·n/D, (r+1)·n/D)`.
pub fn chunk(n: usize, devices: u32, r: u32) -> std::ops::Range<usize> {
    let d = devices.max(1) as u64;
    (r as u64 * n as u64 / d) as usize..((r as u64 + 1) * n as u64 / d) as usize
}

/// `rebatch_tokens`: `pred[i]` is token i's predicted device. Returns `shf` (position p of the
/// shuffled batch holds token `shf[p]`): a stable argsort by device, grouped, then *aligned*
/// so device r's group fills exactly its reduce-scatter chunk ([`chunk`]): a group longer
/// than its chunk keeps its first tokens and the overflow (in argsort order) fills the
/// chunks still short, lowest device first. A prediction ≥ `devices` counts as overflow.
pub fn rebatch(pred: &[u32], devices: u32) -> Result<Vec<usize>, BalanceError> {
    check_devices(devices)?;
    let n = pred.len();
    let d = devices as usize;
    let mut groups: Vec<Vec<usize>> = vec![Vec::new(); d];
    let mut spill = Vec::new();
    // Stable argsort by device = visiting tokens in index order per device.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| (pred[i], i));
    for i in order {
        let p = pred[i] as usize;
        if p < d && groups[p].len() < chunk(n, devices, p as u32).len() {
            groups[p].push(i);
        } else {
            spill.push(i);
        }
    }
    let mut spill = spill.into_iter();
    for (r, g) in groups.iter_mut().enumerate() {
        let want = chunk(n, devices, r as u32).len();
        while g.len() < want {
            match spill.next() {
                Some(i) => g.push(i),
                None => break,
            }
        }
    }
    Ok(groups.concat())
}

/// `resume_tokens`: the inverse shuffle (`argsort(shf)`): `inv[i]` = position of token i.
pub fn resume_order(shf: &[usize]) -> Vec<usize> {
    let mut inv = vec![0; shf.len()];
    for (p, &i) in shf.iter().enumerate() {
        if let Some(x) = inv.get_mut(i) {
            *x = p;
        }
    }
    inv
}

/// Device of every token after re-batching: the rank whose chunk holds its position.
pub fn rank_of_tokens(shf: &[usize], devices: u32) -> Vec<u32> {
    let n = shf.len();
    let mut out = vec![0; n];
    for r in 0..devices {
        for p in chunk(n, devices, r) {
            if let Some(x) = shf.get(p).and_then(|&i| out.get_mut(i)) {
                *x = r;
            }
        }
    }
    out
}

/// The device a token's activation "selects" at a layer (the paper's `D^(l)`): the device
/// holding most of its top-k experts (ties: the lower device).
pub fn majority_device(experts: &[u16], layer_dev: &[u32], devices: u32) -> u32 {
    let mut c = vec![0u32; devices as usize];
    for &e in experts {
        if let Some(x) = layer_dev.get(e as usize).and_then(|&d| c.get_mut(d as usize)) {
            *x += 1;
        }
    }
    argmax_by(c.len(), |i| Some(c[i] as f64)).unwrap_or(0) as u32
}

/// The expert-group-sequence-to-expert-group table `A` with confidence `A_p` (Appendix B.1):
/// at layer `l`, key = the token's devices at the previous `min(lookback, l)` layers; value =
/// per device, the mean share of the token's top-k activations at `l` on that device.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NGramTable {
    pub devices: u32,
    pub lookback: u32,
    /// `rows[l][key]` = per-device mean share.
    pub rows: Vec<BTreeMap<Vec<u32>, Vec<f64>>>,
}

impl NGramTable {
    /// From profiled routings (`routing[token][l]` = top-k at layer l) under `placement`.
    pub fn build(routing: &[&Rows<u16>], placement: &Placement, devices: u32, lookback: u32) -> Result<Self, BalanceError> {
        check_devices(devices)?;
        let nl = placement.len();
        let mut sums: Vec<BTreeMap<Vec<u32>, (Vec<f64>, u64)>> = vec![BTreeMap::new(); nl];
        for (i, r) in routing.iter().enumerate() {
            if r.len() != nl {
                return Err(BalanceError::new("routing", format!("token {i}: {} layers, the placement has {nl}", r.len())));
            }
            let maj: Vec<u32> = (0..nl).map(|l| majority_device(&r[l], &placement[l], devices)).collect();
            for l in 0..nl {
                let key = maj[l.saturating_sub(lookback as usize)..l].to_vec();
                let k = r[l].len().max(1) as f64;
                let ent = sums[l].entry(key).or_insert_with(|| (vec![0.0; devices as usize], 0));
                for &e in &r[l] {
                    if let Some(x) = placement[l].get(e as usize).and_then(|&d| ent.0.get_mut(d as usize)) {
                        *x += 1.0 / k;
                    }
                }
                ent.1 += 1;
            }
        }
        let rows = sums.into_iter().map(|m| m.into_iter().map(|(k, (v, n))| (k, v.into_iter().map(|x| x / n as f64).collect())).collect()).collect();
        Ok(NGramTable { devices, lookback, rows })
    }

    /// (device, confidence) for a token at `layer` given its devices at earlier layers
    /// (`history[l']` for `l' < layer`); `None` if the key was never profiled.
    pub fn lookup(&self, layer: usize, history: &[u32]) -> Option<(u32, f64)> {
        let lo = layer.saturating_sub(self.lookback as usize);
        let key = history.get(lo..layer)?;
        let r = self.rows.get(layer)?.get(key)?;
        let i = argmax_by(r.len(), |i| Some(r[i]))?;
        Some((i as u32, r[i]))
    }
}

/// Algorithm 3 line 2: `cond(T_p > A_p, T, A)` per token (ties: the 2-gram table); a token
/// neither table knows keeps `fallback`.
pub fn choose_device(t: Option<(u32, f64)>, a: Option<(u32, f64)>, fallback: u32) -> u32 {
    match (t, a) {
        (Some((td, tp)), Some((ad, ap))) => {
            if tp > ap {
                td
            } else {
                ad
            }
        }
        (Some((td, _)), None) => td,
        (None, Some((ad, _))) => ad,
        (None, None) => fallback,
    }
}

// ---------------------------------------------------------------------------------------
// Metrics
// ---------------------------------------------------------------------------------------

/// Local and total activations of one token at one layer: experts of `experts` placed on `dev`.
pub fn local_activations(experts: &[u16], layer_dev: &[u32], dev: u32) -> u64 {
    experts.iter().filter(|&&e| layer_dev.get(e as usize) == Some(&dev)).count() as u64
}

/// Local activation rate: `local / total` (0 when there is no activation).
pub fn local_activation_rate(local: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        local as f64 / total as f64
    }
}

// ---------------------------------------------------------------------------------------
// The experiment: profile on one part of a trace, place and schedule, evaluate on the rest
// ---------------------------------------------------------------------------------------

/// The three placements the `semmoe` command compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PlacementKind {
    /// Expert `e` on device `e % D`; requests round-robin (DP) / tokens in batch order (TP).
    RoundRobin,
    /// LPT packing of the profiled expert loads; requests and tokens as round-robin.
    LoadOnly,
    /// Algorithm 1 placement; Algorithm 2 (DP) or Algorithm 3 (TP) data scheduling.
    SemMoe,
}

impl PlacementKind {
    pub const ALL: [PlacementKind; 3] = [PlacementKind::RoundRobin, PlacementKind::LoadOnly, PlacementKind::SemMoe];
    pub fn name(self) -> &'static str {
        match self {
            PlacementKind::RoundRobin => "round_robin",
            PlacementKind::LoadOnly => "load_only",
            PlacementKind::SemMoe => "sem_moe",
        }
    }
}

/// How attention is parallelized over the devices (which data scheduling applies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Attention {
    /// Attention-DP: a request lives on one device for every layer (Algorithm 2).
    Dp,
    /// Attention-TP: every layer's reduce-scatter re-batches tokens (Algorithm 3); a batch is
    /// `tp_batch` consecutive evaluation tokens.
    Tp { tp_batch: u32 },
}

/// One placement's decisions and its local activation rate on the evaluation tokens.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    pub kind: PlacementKind,
    pub expert_dev: Placement,
    /// `token_dev[i][l]`: the device of evaluation token `i` at layer `l`.
    pub token_dev: Vec<Vec<u32>>,
    pub local: u64,
    pub total: u64,
    pub lar_per_layer: Vec<f64>,
    /// Evaluation token-layer visits per device (the attention/gate load each device gets).
    pub device_tokens: Vec<u64>,
}

impl Outcome {
    pub fn lar(&self) -> f64 {
        local_activation_rate(self.local, self.total)
    }
}

/// Activations per expert at `layer` straight from routings (no token ids needed).
pub fn routing_loads(tokens: &[TraceToken], layer: usize, experts: u32) -> Vec<f64> {
    let mut v = vec![0.0; experts as usize];
    for t in tokens {
        for &e in t.layers.get(layer).into_iter().flatten() {
            if let Some(x) = v.get_mut(e as usize) {
                *x += 1.0;
            }
        }
    }
    v
}

/// Requests in order of first appearance: (req id, token indices).
fn requests(tokens: &[TraceToken]) -> Vec<(u32, Vec<usize>)> {
    let mut idx: BTreeMap<u32, usize> = BTreeMap::new();
    let mut out: Vec<(u32, Vec<usize>)> = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        let k = *idx.entry(t.req).or_insert_with(|| {
            out.push((t.req, Vec::new()));
            out.len() - 1
        });
        out[k].1.push(i);
    }
    out
}

fn score(o: &mut Outcome, eval: &[TraceToken], devices: u32) {
    let nl = o.expert_dev.len();
    let mut loc = vec![0u64; nl];
    let mut tot = vec![0u64; nl];
    o.device_tokens = vec![0; devices as usize];
    for (t, devs) in eval.iter().zip(&o.token_dev) {
        for l in 0..nl {
            let es = &t.layers[l];
            loc[l] += local_activations(es, &o.expert_dev[l], devs[l]);
            tot[l] += es.len() as u64;
            o.device_tokens[devs[l] as usize] += 1;
        }
    }
    o.local = loc.iter().sum();
    o.total = tot.iter().sum();
    o.lar_per_layer = loc.iter().zip(&tot).map(|(&a, &b)| local_activation_rate(a, b)).collect();
}

/// Profiles on `profile`, decides every placement of [`PlacementKind::ALL`] and schedules
/// `eval` (held out) with it. Tokens must match `experts`/`layers`; attention-DP needs token
/// ids (field `token_id`), attention-TP uses the token table only when ids are present.
pub fn evaluate(profile: &[TraceToken], eval: &[TraceToken], experts: u32, layers: u32, devices: u32, attention: Attention, cfg: &SemMoeCfg) -> Result<Vec<Outcome>, BalanceError> {
    cfg.validate()?;
    check_devices(devices)?;
    if profile.is_empty() {
        return Err(BalanceError::new("profile", "no profiling tokens"));
    }
    if eval.is_empty() {
        return Err(BalanceError::new("eval", "no evaluation tokens"));
    }
    for (name, set) in [("profile", profile), ("eval", eval)] {
        for (i, t) in set.iter().enumerate() {
            if t.layers.len() != layers as usize || t.layers.iter().flatten().any(|&e| u32::from(e) >= experts) {
                return Err(BalanceError::new(name, format!("token {i}: routing is not {layers} layers of experts in 0..{experts}")));
            }
        }
    }
    let nl = layers as usize;
    let ids = profile.iter().chain(eval).all(|t| t.token_id.is_some());
    let rr = round_robin_placement(experts, layers, devices)?;
    let lo: Placement = (0..nl).map(|l| lpt_layer(&routing_loads(profile, l, experts), devices)).collect::<Result<_, _>>()?;
    let mut out = Vec::new();
    match attention {
        Attention::Dp => {
            if !ids {
                return Err(BalanceError::new("token_id", "attention-DP scheduling (Algorithm 2) looks requests up in the token table: every token needs a token_id"));
            }
            let prof = Profile::build(profile, experts, layers)?;
            let reqs = requests(profile);
            let units: Vec<Unit> = reqs
                .iter()
                .map(|(_, toks)| {
                    let mut act = vec![vec![0.0; experts as usize]; nl];
                    for &i in toks {
                        for (l, a) in act.iter_mut().enumerate() {
                            for (e, p) in prof.confidence(l, profile[i].token_id.unwrap_or_default()).into_iter().flatten() {
                                a[e as usize] += p;
                            }
                        }
                    }
                    Unit { weight: toks.len() as f64, act }
                })
                .collect();
            let cc = co_cluster(&units, experts, layers, devices, cfg)?;
            let table = TokenDevTable::from_placement(&prof, &cc.expert_dev, 0..nl, devices)?;
            let ereqs = requests(eval);
            for kind in PlacementKind::ALL {
                let ep = match kind {
                    PlacementKind::RoundRobin => rr.clone(),
                    PlacementKind::LoadOnly => lo.clone(),
                    PlacementKind::SemMoe => cc.expert_dev.clone(),
                };
                // Baselines: the same masked scheduler with zero scores = round-robin.
                let mut sched = DpScheduler::new(devices)?;
                let mut token_dev = vec![Vec::new(); eval.len()];
                for (_, toks) in &ereqs {
                    let s = match kind {
                        PlacementKind::SemMoe => table.request_score(&toks.iter().map(|&i| eval[i].token_id.unwrap_or_default()).collect::<Vec<_>>()),
                        _ => vec![0.0; devices as usize],
                    };
                    let d = sched.schedule(&s);
                    for &i in toks {
                        token_dev[i] = vec![d; nl];
                    }
                }
                let mut o = Outcome { kind, expert_dev: ep, token_dev, local: 0, total: 0, lar_per_layer: Vec::new(), device_tokens: Vec::new() };
                score(&mut o, eval, devices);
                out.push(o);
            }
        }
        Attention::Tp { tp_batch } => {
            if tp_batch == 0 {
                return Err(BalanceError::new("tp_batch", "at least one token per batch"));
            }
            // Sem-MoE per layer: Algorithm 1 with tokens as the units (distinct token ids
            // with their profiled counts; without ids, every profiled occurrence).
            let prof = if ids { Some(Profile::build(profile, experts, layers)?) } else { None };
            let mut sem: Placement = Vec::with_capacity(nl);
            for l in 0..nl {
                let units: Vec<Unit> = match &prof {
                    Some(p) => p.counts[l]
                        .iter()
                        .zip(&p.freq)
                        .map(|(row, &f)| {
                            let mut a = vec![0.0; experts as usize];
                            for &(e, c) in row {
                                a[e as usize] = c as f64;
                            }
                            Unit { weight: f as f64, act: vec![a] }
                        })
                        .collect(),
                    None => profile
                        .iter()
                        .map(|t| {
                            let mut a = vec![0.0; experts as usize];
                            for &e in &t.layers[l] {
                                a[e as usize] = 1.0;
                            }
                            Unit { weight: 1.0, act: vec![a] }
                        })
                        .collect(),
                };
                let cc = co_cluster(&units, experts, 1, devices, &SemMoeCfg { seed: cfg.seed.wrapping_add(l as u64), ..cfg.clone() })?;
                let place = cc.expert_dev.into_iter().next().unwrap_or_default();
                sem.push(place);
            }
            let routing: Vec<&Rows<u16>> = profile.iter().map(|t| &t.layers).collect();
            let ngram = NGramTable::build(&routing, &sem, devices, cfg.lookback)?;
            let t_tables: Vec<TokenDevTable> = match &prof {
                Some(p) => (0..nl).map(|l| TokenDevTable::from_placement(p, &sem, l..l + 1, devices)).collect::<Result<_, _>>()?,
                None => Vec::new(),
            };
            for kind in PlacementKind::ALL {
                let ep = match kind {
                    PlacementKind::RoundRobin => rr.clone(),
                    PlacementKind::LoadOnly => lo.clone(),
                    PlacementKind::SemMoe => sem.clone(),
                };
                let mut token_dev = vec![vec![0u32; nl]; eval.len()];
                for start in (0..eval.len()).step_by(tp_batch as usize) {
                    let batch = start..(start + tp_batch as usize).min(eval.len());
                    let n = batch.len();
                    // Default (no shuffle): the reduce-scatter chunk of the token's position.
                    let plain: Vec<u32> = rank_of_tokens(&(0..n).collect::<Vec<_>>(), devices);
                    let mut hist: Vec<Vec<u32>> = vec![Vec::with_capacity(nl); n];
                    for l in 0..nl {
                        let ranks = match kind {
                            PlacementKind::SemMoe => {
                                let pred: Vec<u32> = (0..n)
                                    .map(|j| {
                                        let t = &eval[start + j];
                                        let tl = t.token_id.and_then(|id| t_tables.get(l)?.lookup(id));
                                        choose_device(tl, ngram.lookup(l, &hist[j]), plain[j])
                                    })
                                    .collect();
                                rank_of_tokens(&rebatch(&pred, devices)?, devices)
                            }
                            _ => plain.clone(),
                        };
                        for j in 0..n {
                            token_dev[start + j][l] = ranks[j];
                            // After the gate, the token's selected device is known: the history.
                            hist[j].push(majority_device(&eval[start + j].layers[l], &ep[l], devices));
                        }
                    }
                }
                let mut o = Outcome { kind, expert_dev: ep, token_dev, local: 0, total: 0, lar_per_layer: Vec::new(), device_tokens: Vec::new() };
                score(&mut o, eval, devices);
                out.push(o);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tok(id: u32, layers: Vec<Vec<u16>>) -> TraceToken {
        TraceToken { iter: 0, req: 0, pos: 0, token_id: Some(id), layers: layers.into(), scores: None }
    }

    #[test]
    fn profile_tables() {
        let t = vec![tok(5, vec![vec![0, 1]]), tok(5, vec![vec![0, 2]]), tok(3, vec![vec![3, 1]])];
        let p = Profile::build(&t, 4, 1).unwrap();
        assert_eq!(p.freq, vec![1, 2]); // rows by ascending id: 3, 5
        let c = p.confidence(0, 5).unwrap();
        assert_eq!(c, vec![(0, 0.5), (1, 0.25), (2, 0.25)]);
        assert_eq!(p.expert_loads(0), vec![2.0, 2.0, 1.0, 1.0]);
        assert!(p.confidence(0, 9).is_none());
        let mut bad = t.clone();
        bad[1].token_id = None;
        assert_eq!(Profile::build(&bad, 4, 1).unwrap_err().field, "token_id");
        assert_eq!(Profile::build(&t, 2, 1).unwrap_err().field, "layers");
        // T from a placement: token 5 has 3/4 of its mass on device 0 (experts 0, 1).
        let tab = TokenDevTable::from_placement(&p, &vec![vec![0, 0, 1, 1]], 0..1, 2).unwrap();
        assert_eq!(tab.lookup(5), Some((0, 0.75)));
        assert_eq!(tab.lookup(3), Some((0, 0.5)));
        // Unknown ids: the nearest profiled id (ties: the lower).
        assert_eq!(tab.lookup(4), tab.lookup(3));
        assert_eq!(tab.lookup(100), tab.lookup(5));
        assert_eq!(tab.request_score(&[5, 5]), vec![1.5, 0.5]);
    }

    #[test]
    fn algorithm2_masks_round_robin() {
        let mut s = DpScheduler::new(3).unwrap();
        // The same favourite device three times: the mask forces a full round.
        assert_eq!(s.schedule(&[0.0, 5.0, 1.0]), 1);
        assert_eq!(s.schedule(&[0.0, 5.0, 1.0]), 2);
        assert_eq!(s.schedule(&[0.0, 5.0, 1.0]), 0);
        assert_eq!(s.free, vec![true; 3]);
        assert_eq!(s.schedule(&[f64::NAN, f64::NAN]), 2); // missing = 0 beats NaN
        assert_eq!(s.schedule(&[f64::NAN; 3]), 0);
    }

    #[test]
    fn rebatch_aligns_and_inverts() {
        let pred = [1, 0, 1, 1, 2, 1];
        let shf = rebatch(&pred, 3).unwrap();
        // chunks of 2: device 0 {1, overflow}, device 1 {0, 2}, device 2 {4, overflow}
        assert_eq!(shf, vec![1, 3, 0, 2, 4, 5]);
        let ranks = rank_of_tokens(&shf, 3);
        assert_eq!(ranks, vec![1, 0, 1, 0, 2, 2]);
        let inv = resume_order(&shf);
        assert!((0..6).all(|i| shf[inv[i]] == i));
    }

    #[test]
    fn ngram_table_and_choice() {
        let placement = vec![vec![0, 0, 1, 1], vec![0, 1, 0, 1]];
        let r1 = vec![vec![0u16, 1], vec![0, 2]]; // l0 dev 0, l1 dev 0
        let r2 = vec![vec![2u16, 3], vec![1, 3]]; // l0 dev 1, l1 dev 1
        let a = NGramTable::build(&[&r1.into(), &r2.into()], &placement, 2, 2).unwrap();
        assert_eq!(a.lookup(1, &[0]), Some((0, 1.0)));
        assert_eq!(a.lookup(1, &[1]), Some((1, 1.0)));
        assert_eq!(a.lookup(0, &[]), Some((0, 0.5)));
        assert_eq!(choose_device(Some((1, 0.6)), Some((0, 0.6)), 3), 0);
        assert_eq!(choose_device(Some((1, 0.7)), Some((0, 0.6)), 3), 1);
        assert_eq!(choose_device(None, None, 3), 3);
    }

    /// Two token families, each co-activating its own four experts: co-clustering must put
    /// each family's experts together and each family's requests with them (LAR 1), where
    /// round-robin gets 1/2.
    #[test]
    fn co_cluster_separates_families() {
        let mk = |fam: usize| {
            let mut a = vec![0.0; 8];
            for e in 0..4 {
                a[fam * 4 + e] = 1.0;
            }
            Unit { weight: 1.0, act: vec![a] }
        };
        let units: Vec<Unit> = (0..8).map(|i| mk(i % 2)).collect();
        let cc = co_cluster(&units, 8, 1, 2, &SemMoeCfg::default()).unwrap();
        let ep = &cc.expert_dev[0];
        assert!(ep[..4].iter().all(|&d| d == ep[0]) && ep[4..].iter().all(|&d| d == ep[4]) && ep[0] != ep[4], "{ep:?}");
        for (u, &d) in cc.unit_dev.iter().enumerate() {
            assert_eq!(d, ep[(u % 2) * 4]);
        }
        assert!(cc.objective < 1e-9, "{:?}", cc.history);
    }

    #[test]
    fn refusals_name_the_field() {
        assert_eq!(co_cluster(&[], 8, 1, 0, &SemMoeCfg::default()).unwrap_err().field, "devices");
        let bad = SemMoeCfg { theta: 2.0, ..Default::default() };
        assert_eq!(co_cluster(&[], 8, 1, 2, &bad).unwrap_err().field, "theta");
        let u = Unit { weight: 1.0, act: vec![vec![1.0; 3]] };
        assert_eq!(co_cluster(&[u], 8, 1, 2, &SemMoeCfg::default()).unwrap_err().field, "units");
        assert_eq!(lpt_layer(&[1.0, f64::NAN], 2).unwrap_err().field, "loads");
    }

    /// A scenario with token–expert affinity: Sem-MoE's held-out LAR beats round-robin's
    /// under both attention modes; DP without token ids is refused naming `token_id`.
    #[test]
    fn evaluate_scenario_beats_round_robin() {
        use crate::scenario::{generate_scenario, ScenarioCfg};
        let sc = ScenarioCfg { experts: 32, top_k: 4, layers: 2, tokens_per_iter: 64, iters: 24, affinity: 0.8, clusters: 16, vocab: 4000, ..Default::default() };
        let tr = generate_scenario(&sc).unwrap();
        let its = tr.iterations();
        let split = its[12].1.start;
        let (p, e) = tr.tokens.split_at(split);
        for att in [Attention::Dp, Attention::Tp { tp_batch: 64 }] {
            let o = evaluate(p, e, 32, 2, 4, att, &SemMoeCfg::default()).unwrap();
            assert_eq!(o.len(), 3);
            let (rr, sm) = (o[0].lar(), o[2].lar());
            assert!(sm > rr, "{att:?}: sem-moe {sm} vs round-robin {rr}");
            assert_eq!(o[2].total, e.len() as u64 * 2 * 4);
            // Deterministic.
            assert_eq!(evaluate(p, e, 32, 2, 4, att, &SemMoeCfg::default()).unwrap(), o);
        }
        let mut q = p.to_vec();
        q[0].token_id = None;
        assert_eq!(evaluate(&q, e, 32, 2, 4, Attention::Dp, &SemMoeCfg::default()).unwrap_err().field, "token_id");
        // TP without ids runs on the 2-gram table alone.
        let strip = |v: &[TraceToken]| v.iter().map(|t| TraceToken { token_id: None, ..t.clone() }).collect::<Vec<_>>();
        let o = evaluate(&strip(p), &strip(e), 32, 2, 4, Attention::Tp { tp_batch: 64 }, &SemMoeCfg::default()).unwrap();
        assert!(o[2].lar() > 0.0);
    }

    fn units_strategy() -> impl Strategy<Value = (Vec<Unit>, u32, u32, u32)> {
        (1u32..24, 1u32..3, 1u32..7, 0usize..20).prop_flat_map(|(experts, layers, devices, k)| {
            let unit = (0.0f64..10.0, proptest::collection::vec(proptest::collection::vec(prop_oneof![Just(0.0), 0.0f64..5.0], experts as usize), layers as usize))
                .prop_map(|(weight, act)| Unit { weight, act });
            (proptest::collection::vec(unit, k), Just(experts), Just(layers), Just(devices))
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Every expert placed exactly once (a device id per expert, in range), at most
        /// ceil(N/D) experts and ceil(K/D) units per device, and the kept objective is the
        /// minimum of the history.
        #[test]
        fn co_cluster_invariants((units, experts, layers, devices) in units_strategy(), seed in 0u64..4) {
            let cfg = SemMoeCfg { n_steps: 2, ft_steps: 32, seed, ..Default::default() };
            let cc = co_cluster(&units, experts, layers, devices, &cfg).unwrap();
            prop_assert_eq!(cc.expert_dev.len(), layers as usize);
            for l in &cc.expert_dev {
                prop_assert_eq!(l.len(), experts as usize);
                let mut per = vec![0u32; devices as usize];
                for &d in l { prop_assert!(d < devices); per[d as usize] += 1; }
                prop_assert!(per.iter().all(|&c| c <= expert_capacity(experts, devices)));
            }
            let mut per = vec![0usize; devices as usize];
            for &d in &cc.unit_dev { prop_assert!(d < devices); per[d as usize] += 1; }
            prop_assert!(per.iter().all(|&c| c <= units.len().div_ceil(devices as usize)));
            prop_assert!(cc.history.iter().all(|&h| cc.objective <= h));
            // Deterministic.
            prop_assert_eq!(co_cluster(&units, experts, layers, devices, &cfg).unwrap(), cc);
        }

        /// Algorithm 2 never picks a masked device, and every round covers each device once.
        #[test]
        fn dp_mask_never_reuses((devices, scores) in (1u32..9).prop_flat_map(|d| (Just(d), proptest::collection::vec(proptest::collection::vec(-5.0f64..5.0, d as usize), 1..40)))) {
            let mut s = DpScheduler::new(devices).unwrap();
            let mut round = Vec::new();
            for sc in &scores {
                let free = s.free.clone();
                let d = s.schedule(sc);
                prop_assert!(free[d as usize], "masked device {} chosen", d);
                round.push(d);
                if round.len() == devices as usize {
                    round.sort_unstable();
                    prop_assert_eq!(&round, &(0..devices).collect::<Vec<_>>());
                    round.clear();
                }
            }
        }

        /// Re-batching is a permutation, each rank gets exactly its chunk, a token lands on
        /// its predicted device whenever that device's group fits its chunk, and the inverse
        /// shuffle restores the order.
        #[test]
        fn rebatch_shuffle_inverse_identity((devices, pred) in (1u32..9).prop_flat_map(|d| (Just(d), proptest::collection::vec(0u32..d + 1, 0..60)))) {
            let shf = rebatch(&pred, devices).unwrap();
            let mut sorted = shf.clone();
            sorted.sort_unstable();
            prop_assert_eq!(sorted, (0..pred.len()).collect::<Vec<_>>());
            let inv = resume_order(&shf);
            let batch: Vec<usize> = (0..pred.len()).map(|i| i * 7 + 1).collect();
            let shuffled: Vec<usize> = shf.iter().map(|&i| batch[i]).collect();
            let back: Vec<usize> = inv.iter().map(|&p| shuffled[p]).collect();
            prop_assert_eq!(back, batch);
            let ranks = rank_of_tokens(&shf, devices);
            for r in 0..devices {
                let want = pred.iter().filter(|&&p| p == r).count();
                if want <= chunk(pred.len(), devices, r).len() {
                    for (i, &p) in pred.iter().enumerate() {
                        if p == r { prop_assert_eq!(ranks[i], r); }
                    }
                }
            }
        }
    }
}
