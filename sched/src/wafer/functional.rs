//! Functional mode of the wafer: the values the CL's collective engines move are checked
//! against these FL references. Every die starts a micro-batch with a short partial-sum vector
//! per chunk of its TP group's activations ([`initial_data`]); the all-reduce is
//! [`super::collective::execute_fl`] of the plan; a dispatched token carries its holder's
//! reduced chunk of slice `t mod tp` ([`token_value`]); an expert's output is a fixed function
//! of its input ([`expert_out`]) that the combine brings back.

use std::collections::HashMap;

use super::collective::{ChunkId, CollectivePlan};
use super::Mapping;

/// Elements per chunk in functional mode (the flits' count comes from the model's sizes; the
/// values only have to be distinct enough to catch a wrong or stale chunk).
pub const FUNC_LEN: usize = 4;

/// Die `die`'s partial sum of `chunk` of micro-batch `mb` (small, distinct integers).
pub fn initial_chunk(die: u32, mb: u32, chunk: ChunkId) -> Vec<i64> {
    (0..FUNC_LEN as u64)
        .map(|j| {
            let mut x = (die as u64) << 40 ^ (mb as u64) << 32 ^ (chunk.group as u64) << 16 ^ (chunk.chunk as u64) << 4 ^ j;
            x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            ((x >> 40) % 1000) as i64
        })
        .collect()
}

/// Die `die`'s inputs for micro-batch `mb`: the chunks of its own group.
pub fn die_inputs(m: &Mapping, plan: &CollectivePlan, die: u32, mb: u32) -> Vec<(ChunkId, Vec<i64>)> {
    let g = m.group_of[die as usize];
    (0..plan.chunks_per_group)
        .map(|c| {
            let id = ChunkId { group: g, chunk: c };
            (id, initial_chunk(die, mb, id))
        })
        .collect()
}

/// Every die's inputs for micro-batch `mb` ([`die_inputs`] of each die).
pub fn initial_data(m: &Mapping, plan: &CollectivePlan, mb: u32) -> HashMap<(u32, ChunkId), Vec<i64>> {
    (0..m.group_of.len() as u32).flat_map(|d| die_inputs(m, plan, d, mb).into_iter().map(move |(id, v)| ((d, id), v))).collect()
}

/// The chunk holding token `token` of `group` (its slice `token mod tp`).
pub fn token_chunk(m: &Mapping, group: u32, token: u32) -> ChunkId {
    ChunkId { group, chunk: token % m.tp }
}

/// The value a holder sends for token `token` of `group`: its copy of the token's chunk.
pub fn token_value(data: &HashMap<(u32, ChunkId), Vec<i64>>, m: &Mapping, holder: u32, group: u32, token: u32) -> Option<Vec<i64>> {
    data.get(&(holder, token_chunk(m, group, token))).cloned()
}

/// Expert `expert`'s output for an input vector.
pub fn expert_out(input: &[i64], expert: u32) -> Vec<i64> {
    input.iter().map(|v| v.wrapping_mul(expert as i64 + 1).wrapping_add(expert as i64)).collect()
}
