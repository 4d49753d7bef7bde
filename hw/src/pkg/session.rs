//! Request tracker: turns a routing trace (iterations × requests × layers) into the sequence
//! of MoE-layer batches the package runs, one [`LayerInput`] per (global iteration, layer),
//! and carries the IO die's QoS timer bank from one layer run to the next.
//!
//! Without token buffering the batches are the trace's own: iteration i, layer 0..L, all
//! tokens of the iteration in file order. With token buffering (A5, paper Algorithm 2) the IO
//! die may pause a whole request at a layer boundary: the request keeps its activations and
//! gating result and resumes *at that layer* in the next iteration, where its tokens join
//! the tokens of the other requests (paper §III-C, §V). A paused request's later layers and
//! its next forward passes move one iteration later with it, so every request keeps its own
//! cursor (the layer it waits at) and a queue of forward passes; a forward pass may start at
//! the iteration the trace gives it or later, never earlier. The run ends when every request
//! has finished its passes — the deferred work is done, not dropped.
//!
//! The tracker also keeps the expert popularity the run has seen, the input of the paper's
//! Hydra ([`Session::predicted`]): for the batch of layer l it predicts each expert's token
//! count as the counts of layer l summed over the earlier iterations' batches, and, before
//! any iteration has run layer l, the counts of the batch run just before (the previous
//! layer: "cross-layer expert popularity", expert-streaming.txt L257). The batch being run
//! never enters its own prediction.
//!
//! The tracker also owns the requests' QoS-bank slots (admit on a request's first batch,
//! `forward_pass_done` when it leaves its last layer, the slot freed after its last pass;
//! with every slot taken a request shares slot 0, whose timer never earns, so it is never
//! deferred). The bank itself evolves inside the IO die during each run; the package hands
//! back the bank after the boundary (checked against the FL twin) and the tracker stores it.

use std::collections::VecDeque;

use sched::pkg::iodie::{TokenBufferCfgFl, TokenBufferFl};
use sched::ReqId;
use sched::trace::Trace;

use super::layer::{LayerInput, LayerRequests};

/// One forward pass of one request: its tokens (indices into the trace) and the first
/// global iteration it may start at.
#[derive(Debug, Clone)]
struct Pass {
    avail: u64,
    tokens: Vec<usize>,
}

#[derive(Debug, Clone)]
struct Request {
    passes: VecDeque<Pass>,
    /// Layer the request's current pass waits at.
    layer: usize,
    /// QoS bank slot (None until admitted).
    slot: Option<u32>,
}

/// Counters of a session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SessionStats {
    /// Layer batches run.
    pub layer_runs: u64,
    /// Global iterations (forward passes of the package), incl. the ones that only finish
    /// deferred requests.
    pub iterations: u64,
    /// Request pauses (one request at one layer boundary).
    pub deferrals: u64,
    /// Token-layer computations postponed by those pauses.
    pub deferred_tokens: u64,
}

/// The batch handed out last: which requests and tokens it holds.
#[derive(Debug, Clone)]
struct Batch {
    layer: usize,
    /// Token count per expert of the batch (routed and shared), for the popularity history.
    counts: Vec<u64>,
    /// (request, trace token) per batch position.
    members: Vec<(usize, usize)>,
}

pub struct Session<'a> {
    trace: &'a Trace,
    /// Shared experts appended to every token's routing (ids after the routed ones).
    shared: usize,
    d_model: u32,
    d_ffn: u32,
    tb: TokenBufferCfgFl,
    bank: TokenBufferFl,
    free_slots: Vec<u32>,
    reqs: Vec<Request>,
    /// Requests with passes left.
    live: usize,
    g: u64,
    layer: usize,
    pending: Option<Batch>,
    /// Per layer, each expert's tokens over the committed batches of that layer.
    seen: Vec<Vec<u64>>,
    /// Each expert's tokens in the last committed batch.
    last: Option<Vec<u64>>,
    /// The prediction for the pending batch (see [`Session::predicted`]).
    pred: Option<Vec<u64>>,
    pub stats: SessionStats,
}

impl<'a> Session<'a> {
    /// `tb`: the IO die's token-buffering parameters (`PkgCfg::token_buffer_cfg`).
    pub fn new(trace: &'a Trace, shared: usize, d_model: u32, d_ffn: u32, tb: TokenBufferCfgFl) -> crate::Result<Self> {
        let bank = TokenBufferFl::new(tb.clone()).map_err(sched::Error::from)?;
        let mut reqs: Vec<Request> = Vec::new();
        let mut index = std::collections::HashMap::new();
        for (w, (_, range)) in trace.iterations().into_iter().enumerate() {
            for t in range {
                let r = *index.entry(trace.tokens[t].req).or_insert_with(|| {
                    reqs.push(Request { passes: VecDeque::new(), layer: 0, slot: None });
                    reqs.len() - 1
                });
                let p = &mut reqs[r].passes;
                match p.back_mut() {
                    Some(pass) if pass.avail == w as u64 => pass.tokens.push(t),
                    _ => p.push_back(Pass { avail: w as u64, tokens: vec![t] }),
                }
            }
        }
        let live = reqs.len();
        // Slot 0 is the shared never-deferred slot; hand out the others lowest first.
        let free_slots = (1..tb.slots).rev().collect();
        let seen = vec![Vec::new(); trace.header.layers as usize];
        Ok(Session { trace, shared, d_model, d_ffn, tb, bank, free_slots, reqs, live, g: 0, layer: 0, pending: None, seen, last: None, pred: None, stats: SessionStats::default() })
    }

    /// Each expert's token count predicted for the batch [`Self::next_layer`] handed out,
    /// from earlier batches only: layer l's counts over the earlier iterations, else the
    /// previous batch's counts, else (the run's first batch) `None`.
    pub fn predicted(&self) -> Option<&[u64]> {
        self.pred.as_deref()
    }

    /// The next layer batch, or `None` when every request has finished. Each batch must be
    /// answered by [`Self::commit`] before the next is asked for.
    pub fn next_layer(&mut self) -> Option<LayerInput> {
        assert!(self.pending.is_none(), "session: next_layer before commit");
        let layers = self.trace.header.layers as usize;
        let experts = self.trace.header.experts as usize;
        while self.live > 0 {
            let (g, l) = (self.g, self.layer);
            let mut members: Vec<(usize, usize)> = Vec::new();
            for (r, q) in self.reqs.iter().enumerate() {
                if let Some(p) = q.passes.front() {
                    if p.avail <= g && q.layer == l {
                        members.extend(p.tokens.iter().map(|&t| (r, t)));
                    }
                }
            }
            if members.is_empty() {
                self.advance(layers);
                continue;
            }
            // Batch order = trace order (token homes are contiguous blocks of it).
            members.sort_unstable_by_key(|&(_, t)| t);
            for &(r, _) in &members {
                if self.reqs[r].slot.is_none() {
                    let s = self.free_slots.pop().unwrap_or(0);
                    if s != 0 {
                        self.bank.admit(ReqId(s)).expect("slot below the bank size");
                    }
                    self.reqs[r].slot = Some(s);
                }
            }
            let routing: Vec<Vec<u16>> = members
                .iter()
                .map(|&(_, t)| {
                    let mut es = self.trace.tokens[t].layers[l].to_vec();
                    es.extend((0..self.shared).map(|s| (experts + s) as u16));
                    es
                })
                .collect();
            let slot_of_token = members.iter().map(|&(r, _)| self.reqs[r].slot.expect("admitted above")).collect();
            let mut counts = vec![0u64; experts + self.shared];
            for &e in routing.iter().flatten() {
                counts[e as usize] += 1;
            }
            self.pred = if self.seen[l].iter().any(|&c| c > 0) { Some(self.seen[l].clone()) } else { self.last.clone() };
            self.pending = Some(Batch { layer: l, counts, members });
            self.stats.layer_runs += 1;
            self.stats.iterations = g + 1;
            return Some(LayerInput {
                routing,
                experts: experts + self.shared,
                d_model: self.d_model,
                d_ffn: self.d_ffn,
                requests: Some(LayerRequests { slot_of_token, bank: self.bank.clone() }),
            });
        }
        None
    }

    /// The package's answer for the last batch: the batch positions deferred and the QoS bank
    /// after the layer boundary (`None`: token buffering off, nothing deferred).
    pub fn commit(&mut self, outcome: Option<(Vec<usize>, TokenBufferFl)>) -> crate::Result<()> {
        let b = self.pending.take().ok_or_else(|| crate::Error::block("session", "commit without a batch"))?;
        let layers = self.trace.header.layers as usize;
        self.pred = None;
        let seen = &mut self.seen[b.layer];
        if seen.is_empty() {
            *seen = vec![0; b.counts.len()];
        }
        for (s, c) in seen.iter_mut().zip(&b.counts) {
            *s += c;
        }
        self.last = Some(b.counts.clone());
        let mut deferred_req = vec![false; self.reqs.len()];
        if let Some((tokens, bank)) = outcome {
            if bank.cfg != self.tb {
                return Err(crate::Error::block("session", "QoS bank of another configuration"));
            }
            for i in tokens {
                let &(r, _) = b.members.get(i).ok_or_else(|| crate::Error::block("session", "deferred token outside the batch"))?;
                if !deferred_req[r] {
                    deferred_req[r] = true;
                    self.stats.deferrals += 1;
                }
                self.stats.deferred_tokens += 1;
            }
            self.bank = bank;
        }
        let mut seen = vec![false; self.reqs.len()];
        for &(r, _) in &b.members {
            if seen[r] || deferred_req[r] {
                continue;
            }
            seen[r] = true;
            let g = self.g;
            let q = &mut self.reqs[r];
            q.layer = b.layer + 1;
            if q.layer == layers {
                q.layer = 0;
                q.passes.pop_front();
                let slot = q.slot.expect("admitted");
                match q.passes.front_mut() {
                    Some(next) => {
                        // The next pass starts no earlier than the next iteration.
                        next.avail = next.avail.max(g + 1);
                        if slot != 0 {
                            self.bank.forward_pass_done(ReqId(slot)).map_err(sched::Error::from)?;
                        }
                    }
                    None => {
                        self.live -= 1;
                        if slot != 0 {
                            self.free_slots.push(slot);
                        }
                        q.slot = None;
                    }
                }
            }
        }
        self.advance(layers);
        Ok(())
    }

    fn advance(&mut self, layers: usize) {
        self.layer += 1;
        if self.layer == layers {
            self.layer = 0;
            self.g += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sched::trace::{TraceHeader, TraceToken};

    fn tok(iter: u32, req: u32, l0: Vec<u16>, l1: Vec<u16>) -> TraceToken {
        TraceToken { iter, req, pos: iter, token_id: None, layers: vec![l0, l1].into(), scores: None }
    }

    /// Request 1 paused at layer 1 of iteration 0 resumes there in iteration 1; its second
    /// pass (trace iteration 1) moves to iteration 2; request 0 is not held up.
    #[test]
    fn a_paused_request_resumes_at_its_layer_and_its_later_passes_follow() {
        let trace = Trace {
            header: TraceHeader::new(None, 4, 1, 2),
            tokens: vec![tok(0, 0, vec![0], vec![1]), tok(0, 1, vec![2], vec![3]), tok(1, 0, vec![0], vec![1]), tok(1, 1, vec![2], vec![3])],
        };
        let tb = TokenBufferCfgFl { theta_min: 1, slots: 4, ..Default::default() };
        let mut s = Session::new(&trace, 0, 8, 8, tb).unwrap();
        let mut seen = Vec::new();
        while let Some(l) = s.next_layer() {
            seen.push(l.routing.clone());
            let bank = l.requests.as_ref().unwrap().bank.clone();
            // Defer request 1 (expert 3) the first time it reaches layer 1.
            let defer: Vec<usize> = if seen.len() == 2 { l.routing.iter().position(|r| r == &vec![3]).into_iter().collect() } else { Vec::new() };
            s.commit(Some((defer, bank))).unwrap();
        }
        assert_eq!(
            seen,
            vec![
                vec![vec![0], vec![2]],  // g0 l0
                vec![vec![1], vec![3]],  // g0 l1: request 1 paused
                vec![vec![0]],           // g1 l0: request 0's second pass only
                vec![vec![3], vec![1]],  // g1 l1: request 1 resumed + request 0 (trace order)
                vec![vec![2]],           // g2 l0: request 1's second pass
                vec![vec![3]],           // g2 l1
            ]
        );
        assert_eq!(s.stats.iterations, 3);
        assert_eq!(s.stats.deferrals, 1);
    }
}
