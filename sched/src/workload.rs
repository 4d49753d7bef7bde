//! Seeded routing generator with a long tail and request structure.
//!
//! Popularity: at each MoE layer the experts are ranked by a per-layer random permutation
//! and the expert of rank r (1-based) gets weight `1 / r^skew` (Zipf-like; `skew = 0` is
//! uniform), so the hot experts differ from layer to layer. A [`GenCfg::popularity`]
//! override (e.g. from the AllenAI per-expert counts, [`crate::trace::PopularityProfile`])
//! replaces these weights. Every token picks `top_k` distinct experts per layer by
//! weighted sampling without replacement.
//!
//! Requests (continuous batching with chunked prefill): each iteration holds
//! `tokens_per_iter` tokens. Decode requests contribute one token each (position
//! `prompt_len + step`), at most `max_decode_frac · tokens_per_iter` of them, served
//! round-robin; the rest of the iteration is filled with prefill chunks (consecutive
//! positions of a prompt; a prompt longer than the remaining budget continues in the next
//! iteration). A request whose prompt is done turns into a decode request for
//! `decode_steps` steps, then leaves. New requests (prompt and decode lengths drawn
//! uniformly from their ranges) are admitted whenever the prefill budget is not used up.
//! With `max_decode_frac = 1` there is no prefill budget: new requests start directly in
//! decode (their prompt counts as already processed), giving a pure decode workload.
//! `prefill_chunk > 0` is chunked prefill: a prompt contributes at most that many tokens to
//! an iteration and several prompts prefill side by side (each at most once per iteration);
//! `decode_tokens` caps the decode tokens of an iteration as a count instead of
//! `max_decode_frac`.
//!
//! Request coherence (`coherence > 0`): every request has, per layer, a preferred set of
//! `request_experts` experts (drawn once by the layer's popularity from the request's own
//! seeded stream); each token of the request takes its whole top-k from that set with
//! probability `coherence` (by the layer's weights restricted to the set), else from the
//! whole layer as above. Tokens of one request then share experts more than tokens of two
//! requests do — the routing correlation of real requests. With `coherence = 0` no extra
//! random number is drawn, so traces are the same as without the field.
//!
//! Everything is deterministic per `seed` (Xoshiro256++).

use std::collections::VecDeque;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

use crate::trace::{Trace, TraceHeader, TraceToken, MAX_EXPERTS, MAX_LAYERS};

/// A generator config value that cannot be used: the field and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("config field `{field}`: {reason}")]
pub struct GenCfgError {
    pub field: String,
    pub reason: String,
}

fn err<T>(field: &str, reason: impl Into<String>) -> Result<T, GenCfgError> {
    Err(GenCfgError { field: field.into(), reason: reason.into() })
}

/// The routing dimensions every generator shares (this one and `scenario`): experts, top-k and
/// layers within the trace format's bounds, at least one token and iteration, at most
/// [`MAX_GEN_TOKENS`] token lines. The error names the field.
pub(crate) fn check_dims(experts: u32, top_k: u32, layers: u32, tokens_per_iter: u32, iters: u32) -> Result<(), GenCfgError> {
    if experts == 0 || experts > MAX_EXPERTS {
        return err("experts", format!("{experts} outside 1..={MAX_EXPERTS}"));
    }
    if top_k == 0 || top_k > experts {
        return err("top_k", format!("{top_k} outside 1..=experts ({experts})"));
    }
    if layers == 0 || layers > MAX_LAYERS {
        return err("layers", format!("{layers} outside 1..={MAX_LAYERS}"));
    }
    if tokens_per_iter == 0 {
        return err("tokens_per_iter", "must be at least 1");
    }
    if iters == 0 {
        return err("iters", "must be at least 1");
    }
    if tokens_per_iter as u64 * iters as u64 > MAX_GEN_TOKENS {
        return err("iters", format!("tokens_per_iter × iters above {MAX_GEN_TOKENS}"));
    }
    Ok(())
}

/// Largest number of token lines a generated trace may have (memory guard).
pub const MAX_GEN_TOKENS: u64 = 1 << 24;

/// Routing-generator config.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GenCfg {
    /// Model name written into the trace header (informational).
    pub model: Option<String>,
    pub experts: u32,
    pub top_k: u32,
    /// MoE layers.
    pub layers: u32,
    /// Tokens per iteration (the paper: 16, 64, 256, 1024).
    pub tokens_per_iter: u32,
    pub iters: u32,
    /// Prompt length range `[min, max]` of new requests (inclusive).
    pub prompt_len: [u32; 2],
    /// Decode steps range `[min, max]` of new requests (inclusive).
    pub decode_steps: [u32; 2],
    /// Largest share of an iteration's tokens that decode requests may take, in [0, 1].
    pub max_decode_frac: f64,
    /// Zipf exponent of expert popularity (0 = uniform).
    pub skew: f64,
    /// Per-layer expert weights (`popularity[l % len][e]`, each row `experts` long,
    /// non-negative, at least `top_k` positive) replacing the Zipf weights.
    pub popularity: Option<Vec<Vec<f64>>>,
    pub seed: u64,
    /// Chunked prefill: most tokens of one prompt per iteration (0 = as many as the
    /// iteration's prefill budget holds, one prompt after another).
    pub prefill_chunk: u32,
    /// Most decode tokens per iteration, a count replacing `max_decode_frac` (`None`: the
    /// fraction).
    pub decode_tokens: Option<u32>,
    /// Probability that a token takes its experts from its request's preferred set, [0, 1].
    pub coherence: f64,
    /// Size of a request's preferred set per layer (0 = 2 · top_k), top_k..=experts.
    pub request_experts: u32,
}

impl Default for GenCfg {
    fn default() -> Self {
        GenCfg {
            model: Some("qwen3-30b-a3b".into()),
            experts: 128,
            top_k: 8,
            layers: 1,
            tokens_per_iter: 256,
            iters: 1,
            prompt_len: [32, 512],
            decode_steps: [16, 256],
            max_decode_frac: 0.5,
            skew: 1.0,
            popularity: None,
            seed: 1,
            prefill_chunk: 0,
            decode_tokens: None,
            coherence: 0.0,
            request_experts: 0,
        }
    }
}

impl GenCfg {
    /// Experts, top-k and layers from a model preset; the rest default.
    pub fn for_model(m: &crate::models::ModelPreset) -> Self {
        GenCfg { model: Some(m.name.clone()), experts: m.experts, top_k: m.top_k, layers: m.layers, ..Default::default() }
    }

    pub fn validate(&self) -> Result<(), GenCfgError> {
        check_dims(self.experts, self.top_k, self.layers, self.tokens_per_iter, self.iters)?;
        if self.tokens_per_iter as u64 * self.iters as u64 * self.layers as u64 * self.top_k as u64 > 1 << 30 {
            return err("iters", "trace too large (tokens × layers × top_k above 2^30 expert ids)");
        }
        for (f, r) in [("prompt_len", self.prompt_len), ("decode_steps", self.decode_steps)] {
            if r[0] == 0 || r[0] > r[1] {
                return err(f, format!("[{}, {}] is not a range with 1 <= min <= max", r[0], r[1]));
            }
        }
        if !(0.0..=1.0).contains(&self.max_decode_frac) {
            return err("max_decode_frac", format!("{} outside [0, 1]", self.max_decode_frac));
        }
        if !self.skew.is_finite() || self.skew < 0.0 || self.skew > 16.0 {
            return err("skew", format!("{} outside [0, 16]", self.skew));
        }
        if let Some(d) = self.decode_tokens {
            if d > self.tokens_per_iter {
                return err("decode_tokens", format!("{d} decode tokens in an iteration of {} tokens", self.tokens_per_iter));
            }
        }
        if self.prefill_chunk > 1 << 20 {
            return err("prefill_chunk", format!("{} outside 0..=2^20 tokens", self.prefill_chunk));
        }
        if !(self.coherence.is_finite() && (0.0..=1.0).contains(&self.coherence)) {
            return err("coherence", format!("{} outside [0, 1]", self.coherence));
        }
        if self.request_experts != 0 && (self.request_experts < self.top_k || self.request_experts > self.experts) {
            return err("request_experts", format!("{} outside top_k..=experts ({}..={}; 0 = 2 · top_k)", self.request_experts, self.top_k, self.experts));
        }
        if let Some(p) = &self.popularity {
            if p.is_empty() {
                return err("popularity", "no rows");
            }
            for (l, row) in p.iter().enumerate() {
                let f = format!("popularity[{l}]");
                if row.len() != self.experts as usize {
                    return err(&f, format!("{} weights, experts is {}", row.len(), self.experts));
                }
                if row.iter().any(|w| !w.is_finite() || *w < 0.0) {
                    return err(&f, "weights must be finite and >= 0");
                }
                if row.iter().filter(|w| **w > 0.0).count() < self.top_k as usize {
                    return err(&f, format!("fewer than top_k ({}) experts with positive weight", self.top_k));
                }
            }
        }
        Ok(())
    }
}

/// Per-layer expert weights the generator samples from (Zipf over a per-layer permutation,
/// or the override).
pub fn layer_popularity(cfg: &GenCfg, rng: &mut Xoshiro256PlusPlus) -> Vec<Vec<f64>> {
    let e = cfg.experts as usize;
    (0..cfg.layers as usize)
        .map(|l| {
            if let Some(p) = &cfg.popularity {
                return p[l % p.len()].clone();
            }
            // Fisher-Yates permutation: perm[rank] = expert.
            let mut perm: Vec<usize> = (0..e).collect();
            for i in (1..e).rev() {
                perm.swap(i, rng.gen_range(0..=i));
            }
            let mut w = vec![0.0; e];
            for (rank, &ex) in perm.iter().enumerate() {
                w[ex] = 1.0 / ((rank + 1) as f64).powf(cfg.skew);
            }
            w
        })
        .collect()
}

/// `k` distinct experts drawn by weight without replacement (sequential draws, each from
/// the weights not yet taken). Output ascending.
pub(crate) fn sample_topk(w: &[f64], total: f64, k: usize, rng: &mut Xoshiro256PlusPlus, taken: &mut [bool]) -> Vec<u16> {
    let mut out = Vec::with_capacity(k);
    let mut rest = total;
    for _ in 0..k {
        let mut u = rng.gen::<f64>() * rest;
        let mut pick = None;
        let mut last = None;
        for (e, &we) in w.iter().enumerate() {
            if taken[e] || we <= 0.0 {
                continue;
            }
            last = Some(e);
            if u < we {
                pick = Some(e);
                break;
            }
            u -= we;
        }
        // Floating-point rounding can leave u just above the remaining mass: take the last one;
        // with no positive weight left, any untaken expert (never a panic; `k` <= experts).
        let e = pick.or(last).or_else(|| taken.iter().position(|t| !t)).expect("k <= experts");
        taken[e] = true;
        rest -= w[e];
        out.push(e as u16);
    }
    for &e in &out {
        taken[e as usize] = false;
    }
    out.sort_unstable();
    out
}

/// Each request's preferred experts per layer (request coherence): the layer's weights kept
/// on the request's set and zero elsewhere, drawn on the request's first token from a
/// stream seeded by (seed, request id), so the main stream does not depend on them.
struct RequestPrefs<'a> {
    cfg: &'a GenCfg,
    pop: &'a [Vec<f64>],
    /// request id → per layer (weights, their sum).
    sets: std::collections::HashMap<u32, Vec<(Vec<f64>, f64)>>,
}

impl<'a> RequestPrefs<'a> {
    fn new(cfg: &'a GenCfg, pop: &'a [Vec<f64>]) -> Self {
        RequestPrefs { cfg, pop, sets: std::collections::HashMap::new() }
    }

    /// Set size: `request_experts`, or 2 · top_k (at most the experts).
    fn size(&self) -> usize {
        let c = self.cfg;
        if c.request_experts > 0 { c.request_experts as usize } else { (2 * c.top_k).min(c.experts) as usize }
    }

    fn of(&mut self, req: u32, l: usize) -> (&[f64], f64) {
        let (cfg, pop, k) = (self.cfg, self.pop, self.size());
        let v = self.sets.entry(req).or_insert_with(|| {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed ^ 0x9e37_79b9_7f4a_7c15 ^ ((req as u64) << 20));
            let mut taken = vec![false; cfg.experts as usize];
            pop.iter()
                .map(|w| {
                    let total: f64 = w.iter().sum();
                    let set = sample_topk(w, total, k, &mut rng, &mut taken);
                    let mut kept = vec![0.0; w.len()];
                    for &e in &set {
                        // A zero-weight expert of the set keeps a tiny weight: the set is the
                        // request's whole choice.
                        kept[e as usize] = w[e as usize].max(f64::MIN_POSITIVE);
                    }
                    let t = kept.iter().sum();
                    (kept, t)
                })
                .collect()
        });
        let (w, t) = &v[l];
        (w, *t)
    }
}

struct Req {
    id: u32,
    prompt: u32,
    /// Next prompt position to prefill.
    done: u32,
    decode: u32,
    /// Decode steps taken.
    step: u32,
}

/// Generates a trace (validated config; the same config gives the same trace).
pub fn generate(cfg: &GenCfg) -> Result<Trace, GenCfgError> {
    cfg.validate()?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed);
    let pop = layer_popularity(cfg, &mut rng);
    let totals: Vec<f64> = pop.iter().map(|w| w.iter().sum()).collect();
    let mut taken = vec![false; cfg.experts as usize];
    let t = cfg.tokens_per_iter as usize;
    let decode_cap = match cfg.decode_tokens {
        Some(d) => d as usize,
        None => ((cfg.max_decode_frac * t as f64).floor() as usize).min(t),
    };
    let mut prefs = RequestPrefs::new(cfg, &pop);
    let mut next_id = 0u32;
    let mut decoding: VecDeque<Req> = VecDeque::new();
    let mut prefilling: VecDeque<Req> = VecDeque::new();
    let mut tokens = Vec::with_capacity(t * cfg.iters as usize);
    let mut new_req = |rng: &mut Xoshiro256PlusPlus| {
        let r = Req {
            id: next_id,
            prompt: rng.gen_range(cfg.prompt_len[0]..=cfg.prompt_len[1]),
            done: 0,
            decode: rng.gen_range(cfg.decode_steps[0]..=cfg.decode_steps[1]),
            step: 0,
        };
        next_id = next_id.wrapping_add(1);
        r
    };
    for it in 0..cfg.iters {
        // (req, pos) of this iteration's tokens.
        let mut slots: Vec<(u32, u32)> = Vec::with_capacity(t);
        if decode_cap == t {
            // Pure decode: keep `t` requests in flight, each one token per iteration.
            while decoding.len() < t {
                let mut r = new_req(&mut rng);
                r.done = r.prompt;
                decoding.push_back(r);
            }
        }
        let n_dec = decoding.len().min(decode_cap);
        for _ in 0..n_dec {
            let mut r = decoding.pop_front().expect("n_dec <= len");
            slots.push((r.id, r.prompt + r.step));
            r.step += 1;
            if r.step < r.decode {
                decoding.push_back(r);
            }
        }
        // Chunked prefill: each prompt at most `prefill_chunk` tokens, at most once, per
        // iteration; a new prompt when every prompt in flight had its chunk.
        let mut served = 0usize;
        while cfg.prefill_chunk > 0 && slots.len() < t {
            // The queue holds the prompts not yet served this iteration first, then the served.
            if served == prefilling.len() {
                let r = new_req(&mut rng);
                prefilling.push_front(r);
            }
            let mut r = prefilling.pop_front().expect("served < len");
            let n = ((r.prompt - r.done) as usize).min(t - slots.len()).min(cfg.prefill_chunk as usize);
            for p in 0..n as u32 {
                slots.push((r.id, r.done + p));
            }
            r.done += n as u32;
            if r.done == r.prompt {
                decoding.push_back(r);
            } else {
                prefilling.push_back(r);
                served += 1;
            }
        }
        while slots.len() < t {
            if prefilling.is_empty() {
                let r = new_req(&mut rng);
                prefilling.push_back(r);
            }
            let r = prefilling.front_mut().expect("non-empty");
            let n = ((r.prompt - r.done) as usize).min(t - slots.len());
            for p in 0..n as u32 {
                slots.push((r.id, r.done + p));
            }
            r.done += n as u32;
            if r.done == r.prompt {
                let r = prefilling.pop_front().expect("non-empty");
                decoding.push_back(r);
            }
        }
        for (req, pos) in slots {
            let layers = (0..cfg.layers as usize)
                .map(|l| {
                    if cfg.coherence > 0.0 && rng.gen::<f64>() < cfg.coherence {
                        let (w, total) = prefs.of(req, l);
                        sample_topk(w, total, cfg.top_k as usize, &mut rng, &mut taken)
                    } else {
                        sample_topk(&pop[l], totals[l], cfg.top_k as usize, &mut rng, &mut taken)
                    }
                })
                .collect();
            tokens.push(TraceToken { iter: it, req, pos, token_id: None, layers, scores: None });
        }
    }
    let header = TraceHeader::new(cfg.model.as_deref(), cfg.experts, cfg.top_k, cfg.layers);
    Ok(Trace { header, tokens })
}

#[cfg(test)]
mod request_tests {
    use super::*;

    fn cfg() -> GenCfg {
        GenCfg { experts: 64, top_k: 4, layers: 3, tokens_per_iter: 64, iters: 4, prefill_chunk: 16, decode_tokens: Some(8), coherence: 0.8, prompt_len: [20, 60], decode_steps: [4, 8], skew: 0.0, seed: 7, ..Default::default() }
    }

    #[test]
    fn request_structure_is_deterministic_and_validated() {
        assert_eq!(generate(&cfg()).unwrap(), generate(&cfg()).unwrap());
        assert_ne!(generate(&cfg()).unwrap(), generate(&GenCfg { seed: 8, ..cfg() }).unwrap());
        for (c, field) in [
            (GenCfg { coherence: 1.5, ..cfg() }, "coherence"),
            (GenCfg { coherence: f64::NAN, ..cfg() }, "coherence"),
            (GenCfg { decode_tokens: Some(65), ..cfg() }, "decode_tokens"),
            (GenCfg { request_experts: 3, ..cfg() }, "request_experts"),
            (GenCfg { request_experts: 65, ..cfg() }, "request_experts"),
        ] {
            assert_eq!(generate(&c).unwrap_err().field, field);
        }
    }

    /// Each iteration: exactly `tokens_per_iter` tokens, at most `decode_tokens` of them
    /// decode (position at or past the prompt: counted as a request's single token), and no
    /// request more than `prefill_chunk` tokens (decode requests have 1).
    #[test]
    fn chunks_and_decode_cap_hold_per_iteration() {
        let c = cfg();
        let t = generate(&c).unwrap();
        for it in 0..c.iters {
            let toks: Vec<_> = t.tokens.iter().filter(|x| x.iter == it).collect();
            assert_eq!(toks.len(), 64);
            let mut per_req = std::collections::HashMap::<u32, u32>::new();
            for x in &toks {
                *per_req.entry(x.req).or_default() += 1;
            }
            assert!(per_req.values().all(|&n| n <= 16), "iteration {it}: {per_req:?}");
            let singles = per_req.values().filter(|&&n| n == 1).count();
            assert!(per_req.len() >= 64 / 16, "at least 4 prompts side by side");
            let _ = singles;
        }
    }

    /// Two tokens of one request share more experts (same layer) than two tokens of two
    /// requests, with coherence; without, about the same. Counted by a naive pair loop.
    #[test]
    fn coherent_requests_share_experts() {
        let share = |c: &GenCfg| {
            let t = generate(c).unwrap();
            let (mut same, mut ns, mut diff, mut nd) = (0u64, 0u64, 0u64, 0u64);
            for i in 0..t.tokens.len() {
                for j in i + 1..t.tokens.len() {
                    let (a, b) = (&t.tokens[i], &t.tokens[j]);
                    let common = a.layers[0].iter().filter(|e| b.layers[0].contains(e)).count() as u64;
                    if a.req == b.req {
                        same += common;
                        ns += 1;
                    } else {
                        diff += common;
                        nd += 1;
                    }
                }
            }
            (same as f64 / ns as f64, diff as f64 / nd as f64)
        };
        let (s, d) = share(&cfg());
        assert!(s > 2.0 * d, "coherent: {s} shared in a request vs {d} across");
        let (s0, d0) = share(&GenCfg { coherence: 0.0, ..cfg() });
        assert!(s0 < 1.5 * d0 + 0.1, "independent: {s0} vs {d0}");
    }

    /// coherence = 0 draws nothing extra: the trace of the old generator.
    #[test]
    fn no_coherence_is_the_plain_generator() {
        let plain = GenCfg { experts: 32, top_k: 2, layers: 2, tokens_per_iter: 32, iters: 3, seed: 5, ..Default::default() };
        let explicit = GenCfg { coherence: 0.0, request_experts: 8, ..plain.clone() };
        assert_eq!(generate(&plain).unwrap(), generate(&explicit).unwrap());
    }
}
