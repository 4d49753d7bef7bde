//! A wafer layer's routing, `[group][token]` → top-k experts: from the seeded generator or a
//! SPEC §8 trace (the package's loader), grouped by TP group — the first `tokens_per_group`
//! tokens are group 0's, the next group 1's, and so on.

use serde::{Deserialize, Serialize};

use crate::ids::ExpertId;
use crate::models::ModelPreset;
use crate::trace::Trace;
use crate::workload::{generate, GenCfg, MAX_GEN_TOKENS};

/// A wafer MoE layer's routing: `[group][token]` → the token's top-k expert ids. Group g is
/// TP group g's batch (its tokens are replicated over the group's dies); serialised as the
/// bare nested lists.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Routing {
    groups: Vec<Vec<Vec<ExpertId>>>,
}

impl Routing {
    pub fn new(groups: Vec<Vec<Vec<ExpertId>>>) -> Self {
        Routing { groups }
    }

    /// From bare expert numbers (the trace's rows, tests).
    pub fn from_raw(groups: Vec<Vec<Vec<u16>>>) -> Self {
        Routing { groups: groups.into_iter().map(|g| g.into_iter().map(|t| t.into_iter().map(ExpertId).collect()).collect()).collect() }
    }

    /// Every group's tokens, each token's experts.
    pub fn groups(&self) -> &[Vec<Vec<ExpertId>>] {
        &self.groups
    }

    /// Tokens of group `g`, each with its experts.
    pub fn group(&self, g: usize) -> &[Vec<ExpertId>] {
        &self.groups[g]
    }

    /// Number of groups.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Vec<Vec<ExpertId>>> {
        self.groups.iter()
    }

    /// The same groups and tokens, keeping only the tokens `keep(group, token)` accepts (the
    /// others route to no expert): one micro-batch of the layer.
    pub fn filter_tokens(&self, keep: impl Fn(usize, usize) -> bool) -> Routing {
        Routing {
            groups: self.groups.iter().enumerate().map(|(g, toks)| toks.iter().enumerate().map(|(t, es)| if keep(g, t) { es.clone() } else { Vec::new() }).collect()).collect(),
        }
    }
}

impl IntoIterator for Routing {
    type Item = Vec<Vec<ExpertId>>;
    type IntoIter = std::vec::IntoIter<Vec<Vec<ExpertId>>>;
    fn into_iter(self) -> Self::IntoIter {
        self.groups.into_iter()
    }
}

impl<'a> IntoIterator for &'a Routing {
    type Item = &'a Vec<Vec<ExpertId>>;
    type IntoIter = std::slice::Iter<'a, Vec<Vec<ExpertId>>>;
    fn into_iter(self) -> Self::IntoIter {
        self.groups.iter()
    }
}

/// Generated routing (`skew` 0 = uniform popularity) for `groups` × `tokens_per_group` tokens.
pub fn generated_routing(m: &ModelPreset, groups: u32, tokens_per_group: u32, skew: f64, seed: u64) -> crate::Result<Routing> {
    let need = groups as u64 * tokens_per_group as u64;
    if need == 0 || need > MAX_GEN_TOKENS {
        return Err(crate::Error::field("tokens_per_group", format!("{groups} groups x {tokens_per_group} tokens must be within 1..={MAX_GEN_TOKENS}")));
    }
    let g = GenCfg { model: Some(m.name.clone()), experts: m.experts, top_k: m.top_k, layers: 1, tokens_per_iter: need as u32, iters: 1, skew, seed: seed.max(1), ..Default::default() };
    let t = generate(&g)?;
    Ok(group(t.routing(0..t.tokens.len(), 0), tokens_per_group))
}

/// Routing from a trace: its first iteration's tokens of MoE layer `layer`, in order, reused
/// cyclically when the layer needs more tokens than the iteration holds. The trace must match
/// the model's experts and top-k.
pub fn trace_routing(t: &Trace, m: &ModelPreset, layer: u32, groups: u32, tokens_per_group: u32) -> crate::Result<Routing> {
    trace_iteration_routing(t, m, layer, 0, groups, tokens_per_group)
}

/// As [`trace_routing`], from the trace's `k`-th iteration (cyclically: iteration `k mod n` of
/// its `n` iterations), for runs of many iterations.
pub fn trace_iteration_routing(t: &Trace, m: &ModelPreset, layer: u32, k: usize, groups: u32, tokens_per_group: u32) -> crate::Result<Routing> {
    check_trace(t, m, layer)?;
    let its = t.iterations();
    if its.is_empty() {
        return Err(crate::Error::mismatch("trace", "the trace holds no tokens"));
    }
    let (_, first) = its[k % its.len()].clone();
    let it = t.routing(first, layer as usize);
    let need = groups as usize * tokens_per_group as usize;
    Ok(group((0..need).map(|i| it[i % it.len()].clone()).collect(), tokens_per_group))
}

/// The trace as one token stream (every iteration's tokens in order), `k`-th window of
/// `groups × tokens_per_group` tokens (cyclically): for runs whose iterations need more tokens
/// than a trace iteration holds (a decode trace of one token per iteration).
pub fn trace_stream_routing(t: &Trace, m: &ModelPreset, layer: u32, k: usize, groups: u32, tokens_per_group: u32) -> crate::Result<Routing> {
    check_trace(t, m, layer)?;
    let n = t.tokens.len();
    if n == 0 {
        return Err(crate::Error::mismatch("trace", "the trace holds no tokens"));
    }
    let need = groups as usize * tokens_per_group as usize;
    let start = (k as u128 * need as u128 % n as u128) as usize;
    Ok(group((0..need).map(|i| t.tokens[(start + i) % n].layers[layer as usize].to_vec()).collect(), tokens_per_group))
}

/// The trace matches the model's experts and top-k and has MoE layer `layer`.
fn check_trace(t: &Trace, m: &ModelPreset, layer: u32) -> crate::Result<()> {
    if t.header.experts != m.experts || t.header.top_k != m.top_k {
        return Err(crate::Error::mismatch("trace", format!("{} experts top-{} in the trace, {} has {} top-{}", t.header.experts, t.header.top_k, m.name, m.experts, m.top_k)));
    }
    if layer >= t.header.layers {
        return Err(crate::Error::field(format!("layer {layer}"), format!("the trace has {} layers", t.header.layers)));
    }
    Ok(())
}

fn group(tokens: Vec<Vec<u16>>, per: u32) -> Routing {
    Routing { groups: tokens.chunks(per as usize).map(|g| g.iter().map(|t| t.iter().map(|&e| ExpertId(e)).collect()).collect()).collect() }
}
