//! Workloads with time structure: scenarios, warm-up, cyclic drift and token→expert affinity
//! (MoEntwine §V-B / Fig. 12, Sem-MoE Appendix A). The output is an ordinary SPEC §8
//! [`Trace`] (with `token_id` filled in), so every consumer loads it like any other trace.
//!
//! # Model
//!
//! **Scenarios** come from a fixed set ([`SCENARIO_NAMES`]). Each scenario has, per MoE
//! layer, a popularity vector that depends only on the scenario name, the layer and the
//! expert count (not on `seed`): experts ranked by a scenario-specific order get weight
//! `1 / (rank + 1)^skew`. **Overlap rule**: every layer has a *base* order (seeded by the
//! layer alone: the intrinsically popular experts, MoEntwine's "popularity bias"). The first
//! `shared = ceil(top_k / 2)` experts of the base order sit at the **even ranks**
//! `0, 2, …, 2·(shared − 1)` of every scenario; all other ranks are filled by a
//! scenario-specific shuffle of the remaining experts. So any two scenarios share `shared`
//! of their top-`2·shared` experts (the domain-independent hot ones) and differ in the rest
//! (domain-specific experts), apart from chance coincidences.
//!
//! **Token ids and clusters**: the vocabulary `0..vocab` is cut into `clusters` contiguous
//! clusters ([`cluster_of`]). Each scenario draws a token's cluster from a Zipf(1) over a
//! scenario-specific order of the clusters (seeded by name: "that scenario's clusters" are
//! the ones it ranks high), then the id uniformly inside the cluster. Each cluster has, per
//! layer, a preferred set of `top_k` experts (seeded by cluster index and layer, uniform over
//! the experts), weighted uniformly ([`cluster_preference`]).
//!
//! **Routing**: at layer `l` a token of scenario `s` and cluster `c` in iteration `t` picks
//! `top_k` distinct experts by weighted sampling without replacement (as `workload.rs`) from
//! `w = (1 − α_t)·U + α_t·(affinity·C[c][l] + (1 − affinity)·P[s][l])`, where `U`, `C`, `P`
//! are the uniform, cluster-preference and scenario-popularity vectors each normalized to sum
//! 1, and `α_t = min(1, t / warmup_iters)` (1 throughout when `warmup_iters = 0`): during
//! warm-up the weights blend from uniform to the scenario's.
//!
//! **Requests and mix**: an iteration has `tokens_per_iter` slots; each slot runs one request
//! at a time, one token per iteration (decode-style, `pos` = step), for a length drawn
//! uniformly from `req_len`; when it ends the slot admits a new request whose scenario is
//! drawn from the arrival shares of that iteration. `Mix::Fixed(name)`: every request is
//! `name`. `Mix::Mixed { period_iters: P }` with `n` scenarios: scenario `i` has share
//! `(1 + cos(2π (t/P − i/n))) / n` (for `n = 1` that is just 1), a smooth schedule that
//! sums to 1 and repeats every `P` iterations — the request pool drifts cyclically, and the
//! in-flight mix follows with a lag of about one request length.
//!
//! All sampling uses one Xoshiro256++ seeded by `seed`; the same config gives the same trace.

use std::f64::consts::PI;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

use crate::trace::{Trace, TraceHeader, TraceToken};

/// Largest `clusters` value (the per-scenario cluster tables are this long).
pub const MAX_CLUSTERS: u32 = 1 << 20;

/// The scenario names a config may use.
pub const SCENARIO_NAMES: &[&str] = &["chat", "coding", "math", "privacy", "writing", "translation"];

/// A scenario config value that cannot be used: the field and why (the generator's error
/// type: the two configs share their routing dimensions and their checks).
pub type ScenarioError = crate::workload::GenCfgError;

fn err<T>(field: &str, reason: impl Into<String>) -> Result<T, ScenarioError> {
    Err(ScenarioError { field: field.into(), reason: reason.into() })
}

/// How requests are spread over the configured scenarios.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Mix {
    /// Every request belongs to this scenario (must be listed in `scenarios`).
    Fixed(String),
    /// Arrival shares follow a cosine schedule with this period (iterations, >= 2).
    Mixed { period_iters: u32 },
}

/// Scenario-workload config. JSON example:
/// `{"experts": 64, "top_k": 8, "layers": 2, "tokens_per_iter": 256, "iters": 100,
///   "scenarios": ["chat", "math"], "mix": {"mixed": {"period_iters": 50}}, "warmup_iters": 10,
///   "vocab": 32000, "clusters": 64, "affinity": 0.5, "seed": 1}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScenarioCfg {
    /// Model name written into the trace header (informational).
    pub model: Option<String>,
    pub experts: u32,
    pub top_k: u32,
    pub layers: u32,
    pub tokens_per_iter: u32,
    pub iters: u32,
    pub seed: u64,
    /// Scenario names from [`SCENARIO_NAMES`], no repeats.
    pub scenarios: Vec<String>,
    pub mix: Mix,
    /// Iterations over which routing weights blend from uniform to the scenario's.
    pub warmup_iters: u32,
    /// Vocabulary size: token ids are `0..vocab`.
    pub vocab: u32,
    /// Semantic clusters of token ids (`1..=vocab`).
    pub clusters: u32,
    /// Weight of the cluster preference against scenario popularity, in [0, 1].
    pub affinity: f64,
    /// Zipf exponent of scenario popularity (0 = uniform), in [0, 16].
    pub skew: f64,
    /// Request length range `[min, max]` in tokens (inclusive, min >= 1).
    pub req_len: [u32; 2],
    /// Request-level topic coherence (Sem-MoE Appendix A.1: requests of one topic activate
    /// similar experts); `None` (the default, and omitted from JSON) = every token's cluster
    /// drawn independently, as before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coherence: Option<Coherence>,
}

/// Request-level coherence of token clusters. When a request is admitted it draws
/// `clusters_per_request` clusters (with repetition) from its scenario's cluster
/// distribution; each of its tokens then, with probability `share`, takes one of them
/// (uniformly) instead of an independent draw. All of it comes from a per-request generator
/// seeded by (`seed`, request id), so the main stream of draws is the same for any `share`:
/// `share = 0` is the independent generator exactly, `share = 1` puts every request's tokens
/// in at most `clusters_per_request` clusters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Coherence {
    /// Probability that a token takes one of its request's clusters, in [0, 1].
    pub share: f64,
    /// Clusters a request draws (`1..=clusters`).
    pub clusters_per_request: u32,
}

impl Default for ScenarioCfg {
    fn default() -> Self {
        ScenarioCfg {
            model: Some("qwen3-30b-a3b".into()),
            experts: 128,
            top_k: 8,
            layers: 1,
            tokens_per_iter: 256,
            iters: 100,
            seed: 1,
            scenarios: vec!["chat".into(), "coding".into(), "math".into(), "privacy".into()],
            mix: Mix::Mixed { period_iters: 50 },
            warmup_iters: 10,
            vocab: 32000,
            clusters: 64,
            affinity: 0.5,
            skew: 1.0,
            req_len: [8, 64],
            coherence: None,
        }
    }
}

impl ScenarioCfg {
    pub fn validate(&self) -> Result<(), ScenarioError> {
        crate::workload::check_dims(self.experts, self.top_k, self.layers, self.tokens_per_iter, self.iters)?;
        let toks = self.tokens_per_iter as u64 * self.iters as u64;
        // Work guard: every expert pick scans the expert weights.
        if toks.saturating_mul(self.layers as u64).saturating_mul(self.experts as u64 + self.top_k as u64) > 1 << 34 {
            return err("iters", "trace too large (tokens × layers × experts above 2^34)");
        }
        if self.scenarios.is_empty() {
            return err("scenarios", "at least one scenario");
        }
        for (i, s) in self.scenarios.iter().enumerate() {
            if !SCENARIO_NAMES.contains(&s.as_str()) {
                return err(&format!("scenarios[{i}]"), format!("unknown scenario {s:?} (known: {})", SCENARIO_NAMES.join(", ")));
            }
            if self.scenarios[..i].contains(s) {
                return err(&format!("scenarios[{i}]"), format!("{s:?} listed twice"));
            }
        }
        match &self.mix {
            Mix::Fixed(n) if !self.scenarios.contains(n) => {
                return err("mix.fixed", format!("{n:?} is not in `scenarios`"));
            }
            Mix::Mixed { period_iters } if *period_iters < 2 => {
                return err("mix.mixed.period_iters", format!("{period_iters} below 2"));
            }
            _ => {}
        }
        if self.vocab == 0 {
            return err("vocab", "must be at least 1");
        }
        if self.clusters == 0 || self.clusters > self.vocab || self.clusters > MAX_CLUSTERS {
            return err("clusters", format!("{} outside 1..=min(vocab ({}), {MAX_CLUSTERS})", self.clusters, self.vocab));
        }
        if !self.affinity.is_finite() || !(0.0..=1.0).contains(&self.affinity) {
            return err("affinity", format!("{} outside [0, 1]", self.affinity));
        }
        if !self.skew.is_finite() || !(0.0..=16.0).contains(&self.skew) {
            return err("skew", format!("{} outside [0, 16]", self.skew));
        }
        if let Some(c) = &self.coherence {
            if !c.share.is_finite() || !(0.0..=1.0).contains(&c.share) {
                return err("coherence.share", format!("{} outside [0, 1]", c.share));
            }
            if c.clusters_per_request == 0 || c.clusters_per_request > self.clusters {
                return err("coherence.clusters_per_request", format!("{} outside 1..=clusters ({})", c.clusters_per_request, self.clusters));
            }
        }
        if self.req_len[0] == 0 || self.req_len[0] > self.req_len[1] {
            return err("req_len", format!("[{}, {}] is not a range with 1 <= min <= max", self.req_len[0], self.req_len[1]));
        }
        Ok(())
    }
}

/// FNV-1a 64 over the parts (stable across Rust versions, unlike `DefaultHasher`).
fn stable_hash(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in *p {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn rng_for(tag: &str, a: &[u8], b: u32, c: u32) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(stable_hash(&[tag.as_bytes(), a, &b.to_le_bytes(), &c.to_le_bytes()]))
}

fn shuffle<T>(v: &mut [T], rng: &mut Xoshiro256PlusPlus) {
    for i in (1..v.len()).rev() {
        v.swap(i, rng.gen_range(0..=i));
    }
}

/// Scenario order of the experts of one layer (`order[rank] = expert`), by the overlap rule
/// of the module docs.
pub fn scenario_order(name: &str, layer: u32, experts: u32, top_k: u32) -> Vec<usize> {
    let e = experts as usize;
    let mut base: Vec<usize> = (0..e).collect();
    shuffle(&mut base, &mut rng_for("base", &[], layer, experts));
    let shared = (top_k as usize).div_ceil(2).min(e);
    let mut rest: Vec<usize> = base[shared..].to_vec();
    shuffle(&mut rest, &mut rng_for("scenario", name.as_bytes(), layer, experts));
    let mut order = Vec::with_capacity(e);
    let mut rest = rest.into_iter();
    let mut sh = base[..shared].iter().copied();
    for r in 0..e {
        let next = if r % 2 == 0 { sh.next() } else { None };
        order.push(next.or_else(|| rest.next()).or_else(|| sh.next()).expect("e items"));
    }
    order
}

/// Scenario popularity of one layer, normalized to sum 1.
pub fn scenario_popularity(name: &str, layer: u32, experts: u32, top_k: u32, skew: f64) -> Vec<f64> {
    let mut w = vec![0.0; experts as usize];
    for (rank, &ex) in scenario_order(name, layer, experts, top_k).iter().enumerate() {
        w[ex] = 1.0 / ((rank + 1) as f64).powf(skew);
    }
    normalize(w)
}

/// The preferred experts of a token cluster at one layer (`top_k` distinct, ascending).
pub fn cluster_preference(cluster: u32, layer: u32, experts: u32, top_k: u32) -> Vec<usize> {
    let mut v: Vec<usize> = (0..experts as usize).collect();
    shuffle(&mut v, &mut rng_for("cluster", &[], cluster, layer ^ experts.rotate_left(16)));
    let mut p = v[..top_k as usize].to_vec();
    p.sort_unstable();
    p
}

/// The cluster of a token id: `token_id · clusters / vocab` (contiguous ranges).
pub fn cluster_of(cfg: &ScenarioCfg, token_id: u32) -> u32 {
    ((token_id as u64 * cfg.clusters as u64) / cfg.vocab.max(1) as u64) as u32
}

/// Token-id range `[lo, hi)` of a cluster.
fn cluster_range(cfg: &ScenarioCfg, c: u32) -> (u32, u32) {
    let lo = ((c as u64 * cfg.vocab as u64).div_ceil(cfg.clusters as u64)) as u32;
    let hi = (((c as u64 + 1) * cfg.vocab as u64).div_ceil(cfg.clusters as u64)) as u32;
    (lo, hi)
}

fn normalize(mut w: Vec<f64>) -> Vec<f64> {
    let s: f64 = w.iter().sum();
    if s > 0.0 {
        w.iter_mut().for_each(|x| *x /= s);
    }
    w
}

/// Arrival shares of the configured scenarios at iteration `t` (sum 1).
pub fn arrival_shares(cfg: &ScenarioCfg, t: u32) -> Vec<f64> {
    let n = cfg.scenarios.len();
    match &cfg.mix {
        Mix::Fixed(name) => cfg.scenarios.iter().map(|s| if s == name { 1.0 } else { 0.0 }).collect(),
        Mix::Mixed { .. } if n <= 1 => vec![1.0; n],
        Mix::Mixed { period_iters } => {
            let ph = t as f64 / (*period_iters).max(1) as f64;
            (0..n).map(|i| ((1.0 + (2.0 * PI * (ph - i as f64 / n as f64)).cos()) / n as f64).max(0.0)).collect()
        }
    }
}

/// Index drawn from non-negative weights (falls back to the last positive one on rounding).
fn draw(w: &[f64], rng: &mut Xoshiro256PlusPlus) -> usize {
    let total: f64 = w.iter().sum();
    let mut u = rng.gen::<f64>() * total;
    let mut last = 0;
    for (i, &x) in w.iter().enumerate() {
        if x <= 0.0 {
            continue;
        }
        last = i;
        if u < x {
            return i;
        }
        u -= x;
    }
    last
}

struct Slot {
    req: u32,
    scen: usize,
    pos: u32,
    len: u32,
    /// With [`Coherence`]: the request's own generator and its clusters.
    coherent: Option<(Xoshiro256PlusPlus, Vec<u32>)>,
}

/// A cluster drawn from cumulative weights.
fn draw_cluster(cum: &[f64], u01: f64) -> u32 {
    let u = u01 * cum.last().copied().unwrap_or(0.0);
    cum.partition_point(|&x| x <= u).min(cum.len() - 1) as u32
}

/// Generates a scenario trace (validated config; the same config gives the same trace).
pub fn generate_scenario(cfg: &ScenarioCfg) -> Result<Trace, ScenarioError> {
    cfg.validate()?;
    let e = cfg.experts as usize;
    let k = cfg.top_k as usize;
    let ns = cfg.scenarios.len();
    // pop[s][l], pref[c][l] as normalized vectors.
    let pop: Vec<Vec<Vec<f64>>> = cfg
        .scenarios
        .iter()
        .map(|s| (0..cfg.layers).map(|l| scenario_popularity(s, l, cfg.experts, cfg.top_k, cfg.skew)).collect())
        .collect();
    // Cluster distribution per scenario: Zipf(1) over a name-seeded order of the clusters,
    // as cumulative weights (binary search per token).
    let cl_cum: Vec<Vec<f64>> = cfg
        .scenarios
        .iter()
        .map(|s| {
            let mut order: Vec<usize> = (0..cfg.clusters as usize).collect();
            shuffle(&mut order, &mut rng_for("clusters", s.as_bytes(), cfg.clusters, 0));
            let mut w = vec![0.0; order.len()];
            for (r, &c) in order.iter().enumerate() {
                w[c] = 1.0 / (r + 1) as f64;
            }
            let mut acc = 0.0;
            w.iter().map(|x| {
                acc += x;
                acc
            }).collect()
        })
        .collect();
    // Cluster preferences are built lazily, for the clusters that occur.
    let mut pref: std::collections::HashMap<usize, Vec<Vec<usize>>> = std::collections::HashMap::new();
    let uniform = 1.0 / e as f64;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed);
    let mut taken = vec![false; e];
    let mut w = vec![0.0; e];
    let mut next_req = 0u32;
    let mut slots: Vec<Option<Slot>> = (0..cfg.tokens_per_iter).map(|_| None).collect();
    let mut tokens = Vec::with_capacity(cfg.tokens_per_iter as usize * cfg.iters as usize);
    for it in 0..cfg.iters {
        let shares = arrival_shares(cfg, it);
        let alpha = if cfg.warmup_iters == 0 { 1.0 } else { (it as f64 / cfg.warmup_iters as f64).min(1.0) };
        for slot in slots.iter_mut() {
            if slot.as_ref().is_none_or(|s| s.pos >= s.len) {
                let scen = if ns == 1 { 0 } else { draw(&shares, &mut rng) };
                let len = rng.gen_range(cfg.req_len[0]..=cfg.req_len[1]);
                let coherent = cfg.coherence.map(|c| {
                    let mut r = rng_for("request", &cfg.seed.to_le_bytes(), next_req, 0);
                    let cs = (0..c.clusters_per_request).map(|_| draw_cluster(&cl_cum[scen], r.gen::<f64>())).collect();
                    (r, cs)
                });
                *slot = Some(Slot { req: next_req, scen, pos: 0, len, coherent });
                next_req = next_req.wrapping_add(1);
            }
            let s = slot.as_mut().expect("filled above");
            let cum = &cl_cum[s.scen];
            let mut c = draw_cluster(cum, rng.gen::<f64>());
            if let (Some(co), Some((r, cs))) = (&cfg.coherence, s.coherent.as_mut()) {
                // Both draws always, so the request's stream does not depend on `share`.
                let (coin, pick) = (r.gen::<f64>(), r.gen_range(0..cs.len()));
                if coin < co.share {
                    c = cs[pick];
                }
            }
            let (lo, hi) = cluster_range(cfg, c);
            let token_id = if hi > lo { rng.gen_range(lo..hi) } else { lo.min(cfg.vocab - 1) };
            let c = cluster_of(cfg, token_id) as usize;
            let pc = pref.entry(c).or_insert_with(|| {
                (0..cfg.layers).map(|l| cluster_preference(c as u32, l, cfg.experts, cfg.top_k)).collect()
            });
            let layers = (0..cfg.layers as usize)
                .map(|l| {
                    let p = &pop[s.scen][l];
                    for (x, &px) in w.iter_mut().zip(p) {
                        *x = (1.0 - alpha) * uniform + alpha * (1.0 - cfg.affinity) * px;
                    }
                    let cw = alpha * cfg.affinity / k as f64;
                    for &ex in &pc[l] {
                        w[ex] += cw;
                    }
                    crate::workload::sample_topk(&w, w.iter().sum(), k, &mut rng, &mut taken)
                })
                .collect();
            tokens.push(TraceToken { iter: it, req: s.req, pos: s.pos, token_id: Some(token_id), layers, scores: None });
            s.pos += 1;
        }
    }
    let header = TraceHeader::new(cfg.model.as_deref(), cfg.experts, cfg.top_k, cfg.layers);
    Ok(Trace { header, tokens })
}

/// Expert loads of one layer per iteration (file order; each row `experts` long). Empty if
/// `layer` is out of range.
pub fn iteration_loads(trace: &Trace, layer: usize) -> Vec<Vec<u64>> {
    if layer >= trace.header.layers as usize {
        return Vec::new();
    }
    let e = trace.header.experts as usize;
    trace
        .iterations()
        .into_iter()
        .map(|(_, r)| {
            let mut v = vec![0u64; e];
            for t in &trace.tokens[r] {
                for &x in t.layers.get(layer).into_iter().flatten() {
                    if let Some(c) = v.get_mut(x as usize) {
                        *c += 1;
                    }
                }
            }
            v
        })
        .collect()
}

/// Skewness per layer (MoE-GPS / SPEC §5): load of the most loaded expert over the mean
/// expert load, over the whole trace. 1 = perfectly balanced; 0 for a layer with no load.
pub fn layer_skewness(trace: &Trace) -> Vec<f64> {
    let e = trace.header.experts as usize;
    (0..trace.header.layers as usize)
        .map(|l| {
            let mut v = vec![0u64; e];
            for t in &trace.tokens {
                for &x in t.layers.get(l).into_iter().flatten() {
                    if let Some(c) = v.get_mut(x as usize) {
                        *c += 1;
                    }
                }
            }
            let total: u64 = v.iter().sum();
            if total == 0 || e == 0 {
                return 0.0;
            }
            *v.iter().max().expect("e > 0") as f64 / (total as f64 / e as f64)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_ranges_partition_the_vocabulary() {
        for (vocab, clusters) in [(1, 1), (10, 3), (10, 10), (32000, 64), (7, 5), (u32::MAX, 7)] {
            let c = ScenarioCfg { vocab, clusters, ..Default::default() };
            let mut next = 0u64;
            for k in 0..clusters {
                let (lo, hi) = cluster_range(&c, k);
                assert_eq!(lo as u64, next);
                assert!(hi > lo);
                assert_eq!(cluster_of(&c, lo), k);
                assert_eq!(cluster_of(&c, hi - 1), k);
                next = hi as u64;
            }
            assert_eq!(next, vocab as u64);
        }
    }

    #[test]
    fn scenario_tables_are_pinned() {
        // The hash and seeding are part of the scenario's identity: a change here changes
        // every scenario's hot experts (and the docs' numbers).
        assert_eq!(stable_hash(&[b"math"]), stable_hash(&[b"math"]));
        assert_ne!(stable_hash(&[b"ma", b"th"]), stable_hash(&[b"m", b"ath"]));
        let o = scenario_order("math", 0, 16, 4);
        assert_eq!(o, scenario_order("math", 0, 16, 4));
        assert_eq!(&o[..6], &PINNED_MATH_L0[..]);
        let p = scenario_popularity("chat", 1, 16, 4, 1.0);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert_eq!(cluster_preference(3, 0, 16, 4).len(), 4);
    }

    const PINNED_MATH_L0: [usize; 6] = [1, 7, 15, 5, 6, 0];

    #[test]
    fn shares_sum_to_one_and_repeat() {
        let c = ScenarioCfg { mix: Mix::Mixed { period_iters: 12 }, ..Default::default() };
        for t in 0..30 {
            let s = arrival_shares(&c, t);
            assert!((s.iter().sum::<f64>() - 1.0).abs() < 1e-12, "{s:?}");
            let r = arrival_shares(&c, t + 12);
            assert!(s.iter().zip(&r).all(|(a, b)| (a - b).abs() < 1e-12));
        }
    }

    fn small() -> ScenarioCfg {
        ScenarioCfg { experts: 32, top_k: 4, layers: 2, tokens_per_iter: 32, iters: 24, vocab: 4000, clusters: 16, ..Default::default() }
    }

    #[test]
    fn coherence_zero_is_the_independent_generator() {
        let base = generate_scenario(&small()).unwrap();
        for cpr in [1, 3, 16] {
            let c = ScenarioCfg { coherence: Some(Coherence { share: 0.0, clusters_per_request: cpr }), ..small() };
            assert_eq!(generate_scenario(&c).unwrap(), base, "share 0, {cpr} clusters per request");
        }
        // And it is omitted from the serialized config (JSON outputs unchanged).
        assert!(!serde_json::to_string(&small()).unwrap().contains("coherence"));
    }

    #[test]
    fn coherence_one_keeps_each_request_in_its_clusters() {
        for cpr in [1u32, 2, 3] {
            let c = ScenarioCfg { coherence: Some(Coherence { share: 1.0, clusters_per_request: cpr }), ..small() };
            let t = generate_scenario(&c).unwrap();
            assert_eq!(t, generate_scenario(&c).unwrap(), "deterministic");
            let mut per_req: std::collections::BTreeMap<u32, std::collections::BTreeSet<u32>> = Default::default();
            for tok in &t.tokens {
                per_req.entry(tok.req).or_default().insert(cluster_of(&c, tok.token_id.unwrap()));
            }
            assert!(per_req.values().all(|s| s.len() <= cpr as usize), "{cpr}: {per_req:?}");
            // Independent draws spread a request over more clusters than that.
            let t0 = generate_scenario(&small()).unwrap();
            let mut most = std::collections::BTreeMap::<u32, std::collections::BTreeSet<u32>>::new();
            for tok in &t0.tokens {
                most.entry(tok.req).or_default().insert(cluster_of(&c, tok.token_id.unwrap()));
            }
            assert!(most.values().any(|s| s.len() > cpr as usize));
        }
    }

    #[test]
    fn coherence_is_validated() {
        for (share, cpr, field) in [(-0.1, 2, "coherence.share"), (1.5, 2, "coherence.share"), (f64::NAN, 2, "coherence.share"), (0.5, 0, "coherence.clusters_per_request"), (0.5, 17, "coherence.clusters_per_request")] {
            let c = ScenarioCfg { coherence: Some(Coherence { share, clusters_per_request: cpr }), ..small() };
            assert_eq!(c.validate().unwrap_err().field, field);
        }
        let t: ScenarioCfg = serde_json::from_str(r#"{"coherence": {"share": 0.5, "clusters_per_request": 2}}"#).unwrap();
        assert_eq!(t.coherence, Some(Coherence { share: 0.5, clusters_per_request: 2 }));
        assert!(serde_json::from_str::<ScenarioCfg>(r#"{"coherence": {"share": 0.5, "clusters": 2}}"#).is_err(), "unknown key refused");
    }
}
