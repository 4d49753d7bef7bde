//! The input of one package run: one MoE layer (each token's experts, the expert
//! dimensions) and, under token buffering (A5), the requests of its tokens — and what
//! Algorithm 2's FL twin decides from them at the layer boundary (`Buffering`, checked
//! against the IO die at the end of the run). The session (`session.rs`) produces these
//! layer after layer.

use std::collections::HashMap;

use sched::pkg::iodie::{totals_fl, RequestGatingFl, TokenBufferCfgFl, TokenBufferFl};
use sched::{ChipletId, ExpertId, ReqId};

use super::plan::LayerPlan;

/// One MoE layer to run: each token's experts (routed and shared, ids < `experts`) and the
/// expert dimensions.
#[derive(Debug, Clone)]
pub struct LayerInput {
    pub routing: Vec<Vec<u16>>,
    pub experts: usize,
    pub d_model: u32,
    pub d_ffn: u32,
    /// Requests of the tokens (token buffering, A5); `None`: no request structure, nothing
    /// is deferred.
    pub requests: Option<LayerRequests>,
}

/// Token buffering input of one layer: each token's slot in the IO die's QoS timer bank
/// (slot 0: an untracked request, never deferred — its timer never earns) and the bank as
/// it stands before this layer boundary. The bank lives across layers and iterations while
/// a package run covers one layer, so the session carries it from run to run.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerRequests {
    pub slot_of_token: Vec<u32>,
    pub bank: TokenBufferFl,
}

/// What token buffering decided at a layer boundary (the FL twin's answer; the IO die's
/// decisions are checked against it at the end of the run).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Buffering {
    pub(super) reqs: Vec<RequestGatingFl>,
    /// Request index of each token.
    pub(super) req_of_token: Vec<usize>,
    pub(super) deferred: Vec<bool>,
    pub(super) bank_after: TokenBufferFl,
}

impl Buffering {
    /// Algorithm 2's FL twin at this layer boundary: the requests' gating records (expert,
    /// home chiplet, tokens), in order of first appearance, and which of them are deferred
    /// (an error: the input does not fit the IO die's bank).
    pub(super) fn decide(layer: &LayerInput, rq: &LayerRequests, tb: &TokenBufferCfgFl, n: usize) -> crate::Result<Buffering> {
        if rq.slot_of_token.len() != layer.routing.len() {
            return Err(crate::Error::Msg(format!("{} request slots for {} tokens", rq.slot_of_token.len(), layer.routing.len())));
        }
        if rq.bank.cfg != *tb {
            return Err(crate::Error::Msg(format!("QoS bank built for {:?}, the IO die has {:?}", rq.bank.cfg, tb)));
        }
        let home = LayerPlan::homes(layer.routing.len(), n);
        let mut index: HashMap<u32, usize> = HashMap::new();
        let mut reqs: Vec<RequestGatingFl> = Vec::new();
        let mut req_of_token = Vec::with_capacity(layer.routing.len());
        let mut counts: Vec<HashMap<(ExpertId, ChipletId), u32>> = Vec::new();
        for (t, es) in layer.routing.iter().enumerate() {
            let slot = rq.slot_of_token[t];
            let r = *index.entry(slot).or_insert_with(|| {
                reqs.push(RequestGatingFl { slot: ReqId(slot), counts: Vec::new() });
                counts.push(HashMap::new());
                reqs.len() - 1
            });
            req_of_token.push(r);
            for &e in es {
                *counts[r].entry((ExpertId(e), ChipletId(home[t]))).or_default() += 1;
            }
        }
        for (r, c) in reqs.iter_mut().zip(counts) {
            let mut v: Vec<(ExpertId, ChipletId, u32)> = c.into_iter().map(|((e, h), k)| (e, h, k)).collect();
            v.sort_unstable();
            r.counts = v;
        }
        let n_e = totals_fl(&reqs, layer.experts, n).map_err(|e| e.to_string())?;
        let sets: Vec<(ReqId, Vec<ExpertId>)> = reqs.iter().map(|r| (r.slot, r.experts())).collect();
        let mut bank_after = rq.bank.clone();
        let deferred = bank_after.layer_boundary(&sets, &n_e).map_err(|e| e.to_string())?;
        Ok(Buffering { reqs, req_of_token, deferred, bank_after })
    }
}
