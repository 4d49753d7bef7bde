//! The attention layer's all-reduce as an explicit transfer schedule (paper §IV-B2: "packages
//! are sent bi-directionally, step by step"; §IV-B4 for HER). The FL decides every transfer;
//! the CL collective engines execute the plan step by step with real flits and only time it.
//!
//! # Chunks and who ends with what
//! A TP group's data (one partial sum per die) is cut into `2·tp` chunks. Chunks `0..tp`
//! travel clockwise (rank r → rank r+1), chunks `tp..2tp` counter-clockwise (r → r−1).
//! With `p = tp` and `s` the step:
//!
//! * reduce-scatter, steps `0..p−1`: rank r sends its partial of chunk `(r−s−1) mod p`
//!   clockwise and of chunk `p + (r+s+1) mod p` counter-clockwise; the receiver adds. After it
//!   **rank r holds the fully reduced chunks r and p+r** — token slice r (mapping.rs).
//! * all-gather (if `all_gather`), steps `p−1..2p−2`: rank r sends reduced chunk
//!   `(r−s') mod p` clockwise and `p + (r+s') mod p` counter-clockwise (`s'` = step − (p−1));
//!   the receiver overwrites. After it every die of the group holds every reduced chunk.
//! * HER: reduce-scatter only inside each wafer, then an inter-wafer all-gather over the
//!   [`super::ring_order`] of the wafer grid among the dies at the same local position: at inter
//!   step `s'` the die on wafer-ring position i forwards clockwise the low chunk
//!   (group of wafer `(i−s') mod W`, chunk r) and counter-clockwise the high chunk
//!   (group of wafer `(i+s') mod W`, chunk p+r). After `W−1` steps the die at local position q
//!   (rank r, wafer-local group lg) holds chunks r and p+r of group `w·gpw + lg` for every
//!   wafer w. With `all_gather = false` HER stops after the reduce-scatter.
//!
//! So each die sends at most one chunk per ring direction per step; with `p = 2` (or `W = 2`)
//! both directions go to the same neighbour, as two transfers.

use super::{ring_order, Mapping, MappingKind};
use serde::Serialize;
use std::collections::HashMap;

/// Identifies a piece of data: which group's data, which chunk of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct ChunkId {
    pub group: u32,
    pub chunk: u32,
}

/// One transfer of a collective step. `reduce`: the receiver adds the payload to its copy of
/// `data`; otherwise it overwrites it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Xfer {
    pub step: u32,
    pub src: u32,
    pub dst: u32,
    pub data: ChunkId,
    pub reduce: bool,
}

/// A collective as steps of concurrent transfers. All transfers of step s read the state left
/// by step s−1 (a step is a barrier: the CL engines start step s+1 on a die once its step-s
/// receives have landed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CollectivePlan {
    /// Chunks a group's data is cut into (`2·tp`).
    pub chunks_per_group: u32,
    /// Number of steps (`xfers` use steps `0..steps`).
    pub steps: u32,
    /// Sorted by (step, src, dst, data).
    pub xfers: Vec<Xfer>,
}

impl CollectivePlan {
    /// The transfers of one step (a contiguous slice, thanks to the sort).
    pub fn step_xfers(&self, step: u32) -> &[Xfer] {
        let a = self.xfers.partition_point(|x| x.step < step);
        let b = self.xfers.partition_point(|x| x.step <= step);
        &self.xfers[a..b]
    }
}

/// The layer's all-reduce for a mapping: every TP group's bidirectional ring reduce-scatter
/// (`tp−1` steps) then, if `m.all_gather`, the ring all-gather (`tp−1` steps); all groups run
/// concurrently (same step numbers). TP = 1: empty plan under baseline/ER; under HER the
/// inter-wafer all-gather still runs (it is what makes each wafer an FTD). HER: intra-wafer
/// reduce-scatter, then (if `m.all_gather`) the inter-wafer all-gather (`wafers−1` steps, step
/// numbers continue). See the module doc for which chunk goes where.
pub fn allreduce_plan(m: &Mapping) -> CollectivePlan {
    let p = m.tp;
    let mut xfers = Vec::new();
    let push = |xfers: &mut Vec<Xfer>, step, src, dst, group, chunk, reduce| {
        xfers.push(Xfer { step, src, dst, data: ChunkId { group, chunk }, reduce })
    };
    // Reduce-scatter.
    for (g, ring) in m.groups.iter().enumerate() {
        let g = g as u32;
        for s in 0..p.saturating_sub(1) {
            for r in 0..p {
                let (src, next, prev) = (ring[r as usize], ring[((r + 1) % p) as usize], ring[((r + p - 1) % p) as usize]);
                push(&mut xfers, s, src, next, g, (r + 2 * p - s - 1) % p, true);
                push(&mut xfers, s, src, prev, g, p + (r + s + 1) % p, true);
            }
        }
    }
    let mut steps = p.saturating_sub(1);
    if m.all_gather && m.kind != MappingKind::Her {
        for (g, ring) in m.groups.iter().enumerate() {
            let g = g as u32;
            for s in 0..p.saturating_sub(1) {
                for r in 0..p {
                    let (src, next, prev) = (ring[r as usize], ring[((r + 1) % p) as usize], ring[((r + p - 1) % p) as usize]);
                    push(&mut xfers, steps + s, src, next, g, (r + p - s) % p, false);
                    push(&mut xfers, steps + s, src, prev, g, p + (r + s) % p, false);
                }
            }
        }
        steps += p.saturating_sub(1);
    }
    if m.all_gather && m.kind == MappingKind::Her {
        let geom = &m.geom;
        let w = geom.wafers();
        let gpw = m.groups_per_wafer();
        let wring: Vec<u32> = ring_order(geom.wafers_x, geom.wafers_y).iter().map(|&(x, y)| y * geom.wafers_x + x).collect();
        for q in 0..geom.dies_per_wafer() {
            let d0 = geom.global_of(0, q);
            let (lg, r) = (m.group_of[d0 as usize] % gpw, m.rank_of[d0 as usize]);
            for i in 0..w {
                let src = geom.global_of(wring[i as usize], q);
                let next = geom.global_of(wring[((i + 1) % w) as usize], q);
                let prev = geom.global_of(wring[((i + w - 1) % w) as usize], q);
                for s in 0..w - 1 {
                    let cw_origin = wring[((i + w - s) % w) as usize];
                    let ccw_origin = wring[((i + s) % w) as usize];
                    push(&mut xfers, steps + s, src, next, cw_origin * gpw + lg, r, false);
                    push(&mut xfers, steps + s, src, prev, ccw_origin * gpw + lg, p + r, false);
                }
            }
        }
        steps += w - 1;
    }
    xfers.sort_by_key(|x| (x.step, x.src, x.dst, x.data));
    CollectivePlan { chunks_per_group: 2 * p, steps, xfers }
}

/// What a receiver does with a transfer's payload `v`: add it element-wise (reduce-scatter;
/// wrapping, over the longer of the two, missing elements 0) or overwrite (all-gather). The
/// FL executor and the CL engines' functional mode both apply transfers with this.
pub fn apply(slot: &mut Vec<i64>, v: Vec<i64>, reduce: bool) {
    if reduce {
        if slot.len() < v.len() {
            slot.resize(v.len(), 0);
        }
        for (a, b) in slot.iter_mut().zip(&v) {
            *a = a.wrapping_add(*b);
        }
    } else {
        *slot = v;
    }
}

/// Functional reference: executes `plan` on per-die data (`(die, chunk)` → values) and returns
/// the final state. Step semantics as in [`CollectivePlan`]: every transfer of a step reads the
/// state before the step. A transfer whose source holds nothing for its chunk is skipped; a
/// reduce onto a chunk the receiver does not hold stores the payload; vectors of different
/// lengths add element-wise over the longer one (missing elements count as 0). Never panics.
pub fn execute_fl(plan: &CollectivePlan, inputs: &HashMap<(u32, ChunkId), Vec<i64>>) -> HashMap<(u32, ChunkId), Vec<i64>> {
    let mut st = inputs.clone();
    let mut order: Vec<&Xfer> = plan.xfers.iter().collect();
    order.sort_by_key(|x| x.step);
    let mut i = 0;
    while i < order.len() {
        let step = order[i].step;
        let j = i + order[i..].iter().take_while(|x| x.step == step).count();
        let payloads: Vec<(&Xfer, Vec<i64>)> =
            order[i..j].iter().filter_map(|x| st.get(&(x.src, x.data)).map(|v| (*x, v.clone()))).collect();
        for (x, v) in payloads {
            apply(st.entry((x.dst, x.data)).or_default(), v, x.reduce);
        }
        i = j;
    }
    st
}
