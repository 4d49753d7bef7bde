//! IO-die scheduler of the FSE-DP package, CL model (seeds/expert-streaming.txt §V-B, Fig. 8;
//! SPEC §3): Expert Information Table, bitonic sorter, order list (paired-load policy), Idle
//! Chiplet Vector, Expert–Chiplet matcher (Algorithm 1) and the token-buffer QoS timer bank
//! (Algorithm 2). Its decisions — the sequence of [`SchedMsg`]s — equal those of the FL twin
//! `sched::pkg::iodie` on the same inputs (tests/iodie_cl.rs); this file adds the cycles.
//!
//! # Micro-architecture (core clock domain, one state per cycle)
//!
//! ```text
//!  gating stream ──► EIT (single-cycle SRAM, E entries {T_e, n_e}) ──► read port ──┐
//!   1 entry/cycle      │ n_e fans out to the sorter input register               ▼
//!                      ▼                                               ┌── AND ICV ──► E–C matcher ──► Grant
//!  QoS timer bank ◄─ cold vector      bitonic sorter, S stage regs ──► order list ─┘  (priority encoder
//!  (T_QoS, C_fw)     (n_e < θ_min)     (one stage per cycle)          (shift reg)      over snake order)
//!                                                            done FIFO ──► ICV |= done_mask
//! ```
//!
//! Layer start ([`IoDieSchedulerCl::begin_layer`] at edge t0), states of [`MatchState`]:
//! 1. `WriteEit` — one EIT entry per cycle, E cycles (every entry, zero ones too: the SRAM is
//!    overwritten). The count column also loads the sorter's input register and, with
//!    token buffering, the cold vector (0 < n_e < θ_min). With the `ById` policy the order
//!    list is filled here (append e when n_e > 0), so `ById` needs no sorter.
//! 2. With token buffering (θ_min > 0 and a request-level input): `TokenBuf` — one request per
//!    cycle: its QoS-timer slot is read, Algorithm 2 applied (C_fw ≥ N_threshold → T_QoS+1,
//!    C_fw=0; cold ∧ T_QoS>0 → defer, T_QoS−1) and written back. Then `RewriteEit` — the
//!    gating source re-streams the per-expert entries of the requests kept (n_e and T_e
//!    without the deferred requests), one per cycle, E cycles. (The summation of the kept
//!    requests' counts happens in that source, not in the scheduler.)
//! 3. `Sort` (not `ById`) — the bitonic network of width P = next_pow2(E), one stage per
//!    cycle: log2 P·(log2 P+1)/2 cycles (P/2 comparators per stage in hardware).
//! 4. `Order` (not `ById`) — one cycle: the order list is loaded from the sorted keys through
//!    the fixed paired-load (or hot-first) interleave of the K non-zero entries.
//! 5. `Preload` — one message per cycle: `Preload { expert, mask }` for each of the K experts
//!    in order (EIT read for the mask). The first scan starts with every chiplet idle.
//! 6. `Scan` — one order-list entry examined per cycle: EIT read of T_e, AND with ICV. On a
//!    hit the start chiplet c* is the first set bit of T_e ∧ ICV in snake order (a priority
//!    encoder) and the matcher moves to `Grant`; else the pointer advances; past the end it
//!    goes `Idle`. `Grant` — one cycle: the message is sent, ICV ← ICV ∧ ¬T_e, the entry is
//!    removed from the order list (compaction), and the scan resumes at the same position:
//!    every entry before it was not grantable under an ICV that can only have lost bits
//!    since, so resuming there gives the decision Algorithm 1's "scan again from the head"
//!    gives. With ICV = 0 after a grant, or the list empty, the scan ends at once.
//! 7. `Idle` — waiting: a done mask that arrived at edge t (the OR of all done links at t)
//!    is queued in the done FIFO; at a later edge, when the matcher is `Idle`, the oldest is
//!    popped, ICV ← ICV ∨ done_mask, and the head of the order list is examined in that same
//!    cycle (the comparator sees the updated ICV). Releases are applied one at a time, in
//!    arrival order — exactly the FL's sequence of `release` calls. `Done` — every expert of
//!    the layer is granted (done pulses still set ICV bits). A release that sets no new ICV
//!    bit starts no scan (nothing can have become grantable).
//!
//! **Stale done pulses** (FL: `release_seen`). Per chiplet the matcher keeps the edge of the
//! last grant naming it (`last_grant_at`). A done bit of chiplet c arriving at t_a on a link of
//! latency L_in was sent at t_a − L_in; it covers a grant issued at t_g iff that grant reached
//! c before, t_g + L_out < t_a − L_in (a chiplet never reports done in the edge a grant
//! reaches it: it has just been given work). Uncovered bits are dropped when the pulse is
//! latched, and, for grants issued after it arrived, when it is applied. The chiplet pulses
//! again after the new work. This needs the link latencies to be the real grant/done path
//! latencies (ticks).
//!
//! So a grant enabled by a done pulse arriving at edge t is issued at edge t + 1 + x, x = the
//! order-list entries examined (≥ 1), at the earliest t + 2; the first grant of a layer at
//! E + S + 1 + K + x cycles after the layer's start edge (S = 0 and no order cycle for
//! `ById`; plus R + E with token buffering) ([`IoDieStats::first_grant_cycles_max`]).
//!
//! Outputs: [`SchedMsgCl`] on `ports.msg_out` — one link (every message) or one link per
//! chiplet (a message goes to the links of its mask's members) — at most one message per
//! cycle. Inputs: done masks (`u16`) on `ports.done_in`, any number of links.

use std::collections::VecDeque;
use std::fmt;

use serde::{Deserialize, Serialize};

pub use sched::pkg::iodie::{EitEntryFl, IoDieError, OrderPolicy, RequestGatingFl, SchedMsg, TokenBufferCfgFl};
use sched::pkg::iodie::{
    all_mask, bitonic_stage_apply, bitonic_stages, check_eit, eit_fl, layer_counts_fl, paired_fl, snake_order, sorter_pad,
    totals_fl, SortKey, MAX_CHIPLETS, MAX_EXPERTS,
};
use sched::{ChipletId, ExpertId, ReqId};

use crate::cfg::{err, CfgError};
use crate::harness::{Cycle, DomainClock, LinkArena, LinkId, Probe, SignalDecl, NEVER};

/// Parameters of the IO-die scheduler.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IoDieCfg {
    /// Expert order policy (`paired` for A3+, `by_id` for A1/A2, `hot_first`).
    pub policy: OrderPolicy,
    /// EIT entries = experts of the model (1..=256); the sorter is next_pow2 of it wide.
    pub experts: u32,
    /// Done FIFO entries (≥ 1). A full FIFO ORs a new mask into its newest entry (counted in
    /// `done_fifo_merges`; the decisions may then differ from one release per arrival).
    pub done_fifo: u32,
    /// Token buffering (Algorithm 2); `theta_min = 0` turns it off.
    pub token_buffer: TokenBufferCfgFl,
    /// Pre-load and grant messages go to every chiplet (sharded loading: chiplets off the
    /// trajectory load and forward), not only to the trajectory's members.
    pub broadcast: bool,
}

impl Default for IoDieCfg {
    fn default() -> Self {
        IoDieCfg { policy: OrderPolicy::Paired, experts: 128, done_fifo: 32, token_buffer: TokenBufferCfgFl::default(), broadcast: false }
    }
}

impl IoDieCfg {
    pub fn validate(&self) -> Result<(), CfgError> {
        if self.experts == 0 || self.experts as usize > MAX_EXPERTS {
            return err("experts", format!("{} is not in 1..={MAX_EXPERTS}", self.experts));
        }
        if self.done_fifo == 0 || self.done_fifo > 4096 {
            return err("done_fifo", format!("{} is not in 1..=4096", self.done_fifo));
        }
        if let Err(IoDieError::Cfg { field, reason }) = self.token_buffer.validate() {
            return Err(CfgError { field: field.into(), reason }.under("token_buffer"));
        }
        Ok(())
    }
}

/// A scheduler message on its way to the chiplets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SchedMsgCl {
    pub msg: SchedMsg,
    /// Layer sequence number (counts `begin_layer` calls from 0).
    pub layer: u32,
}

/// Matcher / controller state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum MatchState {
    /// Layer finished (or none started): every expert granted.
    #[default]
    Done = 0,
    WriteEit = 1,
    TokenBuf = 2,
    RewriteEit = 3,
    Sort = 4,
    Order = 5,
    Preload = 6,
    Scan = 7,
    Grant = 8,
    /// Waiting for done pulses (some experts not yet granted).
    Idle = 9,
}

impl MatchState {
    fn short(self) -> &'static str {
        match self {
            MatchState::Done => "DONE",
            MatchState::WriteEit => "WEIT",
            MatchState::TokenBuf => "TBUF",
            MatchState::RewriteEit => "REIT",
            MatchState::Sort => "SORT",
            MatchState::Order => "ORDR",
            MatchState::Preload => "PREL",
            MatchState::Scan => "SCAN",
            MatchState::Grant => "GRNT",
            MatchState::Idle => "IDLE",
        }
    }
}

/// Link ids of the scheduler's ports.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IoDiePorts {
    /// One link (every message) or one per chiplet (a message to each member of its mask).
    pub msg_out: Vec<LinkId>,
    /// Done masks from the chiplets (bit c = chiplet c finished all its granted work).
    pub done_in: Vec<LinkId>,
}

/// Event counters (always on). Cycle counts are core cycles.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct IoDieStats {
    pub layers: u64,
    /// Grants issued (E–C matcher decisions).
    pub decisions: u64,
    pub preloads: u64,
    /// Done masks applied to the ICV.
    pub releases: u64,
    /// Requests deferred by token buffering.
    pub deferred: u64,
    /// Max over grants of the cycles from the event that enabled it (layer start, or the
    /// arrival of the done mask whose release scan issued it) to the grant.
    pub decision_cycles_max: u64,
    /// Sum of the same (mean = sum / decisions).
    pub decision_cycles_sum: u64,
    /// Max of the same over the grants enabled by a done pulse (not by a layer start).
    pub release_decision_cycles_max: u64,
    /// Max over layers of the cycles from layer start to its first grant.
    pub first_grant_cycles_max: u64,
    /// Cycles the scheduler was busy (any state but `Idle`/`Done`), over all layers.
    pub layer_sched_cycles: u64,
    /// Cycles spent examining order-list entries (`Scan`).
    pub scan_cycles: u64,
    /// Done masks ORed into a full FIFO's newest entry.
    pub done_fifo_merges: u64,
    /// Done bits dropped as stale (the chiplet was given new work the pulse did not cover).
    pub stale_done_bits: u64,
}

pub struct IoDieSchedulerCl {
    pub clk: DomainClock,
    pub rows: usize,
    pub cols: usize,
    n: usize,
    cfg: IoDieCfg,
    snake: Vec<ChipletId>,
    pub ports: IoDiePorts,

    // --- registers
    pub state: MatchState,
    layer: u32,
    /// Edge of the current layer's start.
    layer_t0: Cycle,
    first_grant_done: bool,
    /// EIT SRAM (E entries).
    eit: Vec<EitEntryFl>,
    /// Gating stream being written (the source's side: the EIT entries of this pass).
    stream: Vec<EitEntryFl>,
    wr_ptr: usize,
    /// Request-level input (token buffering): slot and A(r) bitmap of each request, and the
    /// gating records kept by the source for the rewrite pass.
    reqs: Vec<RequestGatingFl>,
    req_sets: Vec<(ReqId, [u64; 4])>,
    deferred: Vec<bool>,
    tb_ptr: usize,
    /// Cold vector: bit e set iff 0 < n_e < θ_min (over all requests).
    cold: [u64; 4],
    /// Message driven onto the chiplet links at the last evaluated edge (the Rule-5 load
    /// arbiter snoops it).
    sent_msg: Option<SchedMsg>,
    /// QoS timer bank.
    t_qos: Vec<u32>,
    c_fw: Vec<u32>,
    /// Sorter pipeline register (the vector in flight) and its stage index.
    sort_reg: Vec<SortKey>,
    stages: Vec<(usize, usize)>,
    sort_stage: usize,
    /// Order list (compacted on each grant) and emitter / scan pointers.
    order: Vec<ExpertId>,
    pre_ptr: usize,
    scan_ptr: usize,
    /// Idle Chiplet Vector.
    pub icv: u16,
    /// Match found in `Scan`, issued in `Grant`: (expert, mask, start).
    grant_reg: (ExpertId, u16, ChipletId),
    /// Done FIFO: (mask, arrival edge).
    done_fifo: VecDeque<(u16, Cycle)>,
    /// Edge of the event the current scan serves, and whether it is a done arrival.
    trigger: Cycle,
    trigger_is_release: bool,
    /// Per chiplet: edge of the last grant naming it this layer (`NEVER`: none).
    last_grant_at: [Cycle; MAX_CHIPLETS],
    /// First edge not yet evaluated (the layer's start edge right after `begin_layer`).
    next_edge: Cycle,

    // --- per-cycle outputs (probe pulses; cleared at the next evaluated edge)
    pub eit_wr_valid: bool,
    pub eit_wr_addr: ExpertId,
    pub eit_rd_valid: bool,
    pub eit_rd_addr: ExpertId,
    pub eit_rd_mask: u16,
    pub grant_valid: bool,
    pub grant_expert: ExpertId,
    pub grant_mask: u16,
    pub grant_start: ChipletId,
    /// ICV the last grant was matched against (its start chiplet is a member).
    pub grant_icv: u16,
    /// Grants issued (traced as `grants`, mod 2^16).
    pub grants_issued: u64,
    pub preload_valid: bool,
    pub preload_expert: ExpertId,
    pub defer_valid: bool,
    pulses: bool,

    pub stats: IoDieStats,
}

impl IoDieSchedulerCl {
    /// A scheduler for an R×C package in clock domain `clk`.
    pub fn new(rows: usize, cols: usize, cfg: &IoDieCfg, clk: DomainClock, ports: IoDiePorts) -> Result<Self, CfgError> {
        cfg.validate()?;
        if rows == 0 || cols == 0 || rows * cols > MAX_CHIPLETS {
            return err("array", format!("{rows}x{cols}: the IO die schedules 1..={MAX_CHIPLETS} chiplets"));
        }
        let n = rows * cols;
        if ports.msg_out.len() != 1 && ports.msg_out.len() != n {
            return err("ports.msg_out", format!("{} links: give 1 or one per chiplet ({n})", ports.msg_out.len()));
        }
        let e = cfg.experts as usize;
        let slots = cfg.token_buffer.slots as usize;
        Ok(IoDieSchedulerCl {
            clk,
            rows,
            cols,
            n,
            snake: snake_order(rows, cols),
            ports,
            state: MatchState::Done,
            layer: 0,
            layer_t0: 0,
            first_grant_done: true,
            eit: vec![EitEntryFl::default(); e],
            stream: Vec::new(),
            wr_ptr: 0,
            reqs: Vec::new(),
            req_sets: Vec::new(),
            deferred: Vec::new(),
            tb_ptr: 0,
            cold: [0; 4],
            sent_msg: None,
            t_qos: vec![cfg.token_buffer.t_qos_init; slots],
            c_fw: vec![0; slots],
            sort_reg: vec![(0, ExpertId(0)); e.next_power_of_two()],
            stages: bitonic_stages(e.next_power_of_two()),
            sort_stage: 0,
            order: Vec::with_capacity(e),
            pre_ptr: 0,
            scan_ptr: 0,
            icv: all_mask(n),
            grant_reg: (ExpertId(0), 0, ChipletId(0)),
            done_fifo: VecDeque::with_capacity(cfg.done_fifo as usize),
            trigger: 0,
            trigger_is_release: false,
            last_grant_at: [NEVER; MAX_CHIPLETS],
            next_edge: 0,
            eit_wr_valid: false,
            eit_wr_addr: ExpertId(0),
            eit_rd_valid: false,
            eit_rd_addr: ExpertId(0),
            eit_rd_mask: 0,
            grant_valid: false,
            grant_expert: ExpertId(0),
            grant_mask: 0,
            grant_start: ChipletId(0),
            grant_icv: 0,
            grants_issued: 0,
            preload_valid: false,
            preload_expert: ExpertId(0),
            defer_valid: false,
            pulses: false,
            cfg: cfg.clone(),
            stats: IoDieStats::default(),
        })
    }

    pub fn cfg(&self) -> &IoDieCfg {
        &self.cfg
    }

    /// Stages of the sorter network (0 for one expert).
    pub fn sorter_stages(&self) -> usize {
        self.stages.len()
    }

    /// A new layer may start: the previous one is fully granted.
    pub fn can_begin_layer(&self) -> bool {
        self.state == MatchState::Done
    }

    /// Every expert of the current layer granted.
    pub fn is_finished(&self) -> bool {
        self.state == MatchState::Done
    }

    /// Requests deferred at the current layer (token buffering), per request given to
    /// [`Self::begin_layer_requests`]; valid once the `TokenBuf` state is over.
    pub fn deferred(&self) -> &[bool] {
        &self.deferred
    }

    /// The current order list (granted experts removed).
    pub fn order(&self) -> &[ExpertId] {
        &self.order
    }

    /// Starts a layer at edge `now` from its EIT (one entry per expert, `cfg.experts` of them
    /// at most; missing entries are zero): the gating stream starts to write the EIT this
    /// edge. Panics if the previous layer is not finished (a wiring bug); bad entries are
    /// refused.
    pub fn begin_layer(&mut self, now: Cycle, eit: &[EitEntryFl]) -> Result<(), IoDieError> {
        if eit.len() > self.eit.len() {
            return Err(IoDieError::TooManyExperts(eit.len()));
        }
        check_eit(eit, self.n)?;
        let mut s = eit.to_vec();
        s.resize(self.eit.len(), EitEntryFl::default());
        self.reqs.clear();
        self.req_sets.clear();
        self.deferred.clear();
        self.start(now, s);
        Ok(())
    }

    /// Starts a layer at edge `now` from the requests' gating results: with token buffering
    /// on, Algorithm 2 runs on the QoS timer bank before the EIT is rewritten without the
    /// deferred requests.
    pub fn begin_layer_requests(&mut self, now: Cycle, reqs: &[RequestGatingFl]) -> Result<(), IoDieError> {
        let e = self.eit.len();
        let n_e = totals_fl(reqs, e, self.n)?;
        for r in reqs {
            if r.slot.idx() >= self.t_qos.len() {
                return Err(IoDieError::BadSlot { slot: r.slot, slots: self.t_qos.len() });
            }
        }
        let no_defer = vec![false; reqs.len()];
        let all = eit_fl(&layer_counts_fl(reqs, &no_defer, e, self.n)?, self.n)?;
        let theta = self.cfg.token_buffer.theta_min;
        self.cold = [0; 4];
        if theta > 0 {
            for (i, &c) in n_e.iter().enumerate() {
                if c > 0 && c < theta {
                    self.cold[i / 64] |= 1 << (i % 64);
                }
            }
        }
        self.req_sets = reqs.iter().map(|r| (r.slot, r.expert_set())).collect();
        self.reqs = if theta > 0 { reqs.to_vec() } else { Vec::new() };
        self.deferred = no_defer;
        self.start(now, all);
        Ok(())
    }

    fn start(&mut self, now: Cycle, stream: Vec<EitEntryFl>) {
        assert!(self.can_begin_layer(), "iodie: layer {} started before layer {} was fully granted", self.layer + 1, self.layer);
        if self.stats.layers > 0 {
            self.layer += 1;
        }
        self.stats.layers += 1;
        self.stream = stream;
        self.wr_ptr = 0;
        self.tb_ptr = 0;
        self.order.clear();
        self.pre_ptr = 0;
        self.scan_ptr = 0;
        self.sort_stage = 0;
        self.icv = all_mask(self.n);
        self.done_fifo.clear();
        self.last_grant_at = [NEVER; MAX_CHIPLETS];
        self.layer_t0 = now;
        self.next_edge = now;
        self.trigger = now;
        self.trigger_is_release = false;
        self.first_grant_done = false;
        self.state = MatchState::WriteEit;
    }

    /// Request in `slot` completed a forward pass (C_fw += 1). A register write from the
    /// package's request tracker.
    pub fn forward_pass_done(&mut self, slot: ReqId) -> Result<(), IoDieError> {
        let s = self.c_fw.get_mut(slot.idx()).ok_or(IoDieError::BadSlot { slot, slots: self.t_qos.len() })?;
        *s = s.saturating_add(1);
        Ok(())
    }

    /// A new request takes `slot`: its QoS timer and counter restart.
    pub fn admit(&mut self, slot: ReqId) -> Result<(), IoDieError> {
        if slot.idx() >= self.t_qos.len() {
            return Err(IoDieError::BadSlot { slot, slots: self.t_qos.len() });
        }
        self.t_qos[slot.idx()] = self.cfg.token_buffer.t_qos_init;
        self.c_fw[slot.idx()] = 0;
        Ok(())
    }

    /// Loads the QoS timer bank (T_QoS, C_fw per slot): the bank lives across layers and
    /// iterations while a package run covers one layer, so the session hands it over.
    pub fn load_qos(&mut self, t_qos: &[u32], c_fw: &[u32]) -> Result<(), IoDieError> {
        if t_qos.len() != self.t_qos.len() || c_fw.len() != self.c_fw.len() {
            return Err(IoDieError::BadSlot { slot: ReqId(t_qos.len().max(c_fw.len()) as u32), slots: self.t_qos.len() });
        }
        self.t_qos.copy_from_slice(t_qos);
        self.c_fw.copy_from_slice(c_fw);
        Ok(())
    }

    /// Message sent at the last evaluated edge.
    pub fn sent_msg(&self) -> Option<SchedMsg> {
        self.sent_msg
    }

    /// The QoS timer bank: (T_QoS, C_fw) per slot.
    pub fn qos_bank(&self) -> (&[u32], &[u32]) {
        (&self.t_qos, &self.c_fw)
    }

    /// QoS timer and forward-pass counter of `slot`.
    pub fn qos(&self, slot: ReqId) -> Option<(u32, u32)> {
        Some((*self.t_qos.get(slot.idx())?, self.c_fw[slot.idx()]))
    }

    /// Work to do on the next edge (fast-forward must not skip it).
    pub fn busy(&self) -> bool {
        !matches!(self.state, MatchState::Idle | MatchState::Done) || !self.done_fifo.is_empty() || self.pulses
    }

    /// Next edge (absolute tick) at which this block changes state by itself; `NEVER` while
    /// it only waits for done pulses (their links wake the system).
    pub fn next_event(&self) -> Cycle {
        if self.busy() {
            self.next_edge
        } else {
            NEVER
        }
    }

    fn cycles(&self, from: Cycle, to: Cycle) -> u64 {
        (to - from) / self.clk.div
    }

    /// One core-clock edge. Returns whether a message was sent.
    ///
    /// # Safety
    /// Called by the engine at edge `now` of `clk`, with `msgs`/`done` the system's links and
    /// this scheduler the only sender of `ports.msg_out` and receiver of `ports.done_in`.
    pub unsafe fn eval(&mut self, now: Cycle, msgs: &LinkArena<SchedMsgCl>, done: &LinkArena<u16>) -> bool {
        self.next_edge = self.clk.edge_after(now);
        self.sent_msg = None;
        if self.pulses {
            self.eit_wr_valid = false;
            self.eit_rd_valid = false;
            self.grant_valid = false;
            self.preload_valid = false;
            self.defer_valid = false;
            self.pulses = false;
        }
        // Done pulses: latched now (stale bits dropped), visible to the matcher next edge.
        let mut m = 0u16;
        for &l in &self.ports.done_in {
            if let Some(v) = done.recv(l, now) {
                let sent = now.saturating_sub(l.latency() as u64);
                let mut v = v & all_mask(self.n);
                let mut bits = v;
                while bits != 0 {
                    let c = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let g = self.last_grant_at[c];
                    if g != NEVER && g + self.out_latency(c) >= sent {
                        v &= !(1 << c);
                        self.stats.stale_done_bits += 1;
                    }
                }
                m |= v;
            }
        }
        if m != 0 {
            if self.done_fifo.len() < self.cfg.done_fifo as usize {
                self.done_fifo.push_back((m, now));
            } else {
                let b = self.done_fifo.back_mut().expect("fifo depth >= 1");
                *b = (b.0 | m, now);
                self.stats.done_fifo_merges += 1;
            }
        }
        if !matches!(self.state, MatchState::Idle | MatchState::Done) {
            self.stats.layer_sched_cycles += 1;
        }
        let mut sent = false;
        match self.state {
            MatchState::Done | MatchState::Idle => {
                if let Some(&(dm, at)) = self.done_fifo.front() {
                    if at < now {
                        self.done_fifo.pop_front();
                        // Chiplets granted since the pulse arrived: stale.
                        let mut dm = dm;
                        for c in 0..self.n {
                            if dm >> c & 1 == 1 && self.last_grant_at[c] != NEVER && self.last_grant_at[c] >= at {
                                dm &= !(1 << c);
                                self.stats.stale_done_bits += 1;
                            }
                        }
                        let new_bits = dm & !self.icv;
                        self.icv |= dm;
                        self.stats.releases += 1;
                        if self.state == MatchState::Idle && new_bits != 0 {
                            self.trigger = at;
                            self.trigger_is_release = true;
                            self.scan_ptr = 0;
                            self.state = MatchState::Scan;
                            self.stats.layer_sched_cycles += 1;
                            self.scan_step();
                        }
                    }
                }
            }
            MatchState::WriteEit | MatchState::RewriteEit => self.write_eit(),
            MatchState::TokenBuf => self.token_buf_step(),
            MatchState::Sort => {
                let (k, j) = self.stages[self.sort_stage];
                bitonic_stage_apply(&mut self.sort_reg, k, j);
                self.sort_stage += 1;
                if self.sort_stage == self.stages.len() {
                    self.state = MatchState::Order;
                }
            }
            MatchState::Order => {
                let hot: Vec<ExpertId> = self.sort_reg.iter().take_while(|k| k.0 > 0).map(|k| k.1).collect();
                self.order = if self.cfg.policy == OrderPolicy::Paired { paired_fl(&hot) } else { hot };
                self.enter_preload();
            }
            MatchState::Preload => {
                let e = self.order[self.pre_ptr];
                let mask = self.read_eit(e);
                self.send(now, msgs, SchedMsg::Preload { expert: e, mask });
                self.preload_valid = true;
                self.preload_expert = e;
                self.stats.preloads += 1;
                sent = true;
                self.pre_ptr += 1;
                if self.pre_ptr == self.order.len() {
                    self.scan_ptr = 0;
                    self.state = MatchState::Scan;
                }
            }
            MatchState::Scan => self.scan_step(),
            MatchState::Grant => {
                let (e, mask, start) = self.grant_reg;
                // One event per E–C matcher decision; the level check is all it costs when off.
                tracing::debug!(layer = self.layer, expert = e.0, chiplets = mask, start = start.0, cycle = self.clk.cycle_of(now), "iodie grant");
                self.send(now, msgs, SchedMsg::Grant { expert: e, mask, start });
                sent = true;
                self.grant_valid = true;
                self.grant_expert = e;
                self.grant_mask = mask;
                self.grant_start = start;
                self.grant_icv = self.icv;
                self.grants_issued = self.grants_issued.wrapping_add(1);
                assert!(self.icv >> start.0 & 1 == 1 && mask >> start.0 & 1 == 1, "iodie: grant of expert {e} to busy or foreign chiplet {start}");
                self.icv &= !mask;
                for c in 0..self.n {
                    if mask >> c & 1 == 1 {
                        self.last_grant_at[c] = now;
                    }
                }
                let removed = self.order.remove(self.scan_ptr);
                debug_assert_eq!(removed, e);
                let dc = self.cycles(self.trigger, now);
                self.stats.decisions += 1;
                self.stats.decision_cycles_sum += dc;
                self.stats.decision_cycles_max = self.stats.decision_cycles_max.max(dc);
                if self.trigger_is_release {
                    self.stats.release_decision_cycles_max = self.stats.release_decision_cycles_max.max(dc);
                }
                if !self.first_grant_done {
                    self.first_grant_done = true;
                    let c = self.cycles(self.layer_t0, now);
                    self.stats.first_grant_cycles_max = self.stats.first_grant_cycles_max.max(c);
                }
                self.state = if self.order.is_empty() {
                    MatchState::Done
                } else if self.icv == 0 || self.scan_ptr == self.order.len() {
                    MatchState::Idle
                } else {
                    MatchState::Scan
                };
            }
        }
        if self.eit_wr_valid || self.eit_rd_valid || self.grant_valid || self.preload_valid || self.defer_valid {
            self.pulses = true;
        }
        sent
    }

    /// Single-cycle EIT read (the matcher's / preload emitter's port).
    fn read_eit(&mut self, e: ExpertId) -> u16 {
        let mask = self.eit[e.idx()].mask;
        self.eit_rd_valid = true;
        self.eit_rd_addr = e;
        self.eit_rd_mask = mask;
        mask
    }

    fn write_eit(&mut self) {
        let i = self.wr_ptr;
        let x = self.stream[i];
        self.eit[i] = x;
        self.sort_reg[i] = (x.count, ExpertId(i as u16));
        self.eit_wr_valid = true;
        self.eit_wr_addr = ExpertId(i as u16);
        if self.cfg.policy == OrderPolicy::ById && x.count > 0 {
            self.order.push(ExpertId(i as u16));
        }
        self.wr_ptr += 1;
        if self.wr_ptr < self.stream.len() {
            return;
        }
        // Last entry written.
        if self.state == MatchState::WriteEit && !self.reqs.is_empty() {
            self.state = MatchState::TokenBuf;
            return;
        }
        self.after_eit();
    }

    fn after_eit(&mut self) {
        if self.cfg.policy == OrderPolicy::ById {
            self.enter_preload();
        } else {
            // Padding lanes of the sorter: (0, id ≥ E), as `sorter_pad`.
            let e = self.eit.len();
            let pad = sorter_pad(&self.sort_reg[..e]);
            self.sort_reg.copy_from_slice(&pad);
            self.sort_stage = 0;
            self.state = if self.stages.is_empty() { MatchState::Order } else { MatchState::Sort };
        }
    }

    fn enter_preload(&mut self) {
        self.pre_ptr = 0;
        self.scan_ptr = 0;
        self.state = if self.order.is_empty() { MatchState::Done } else { MatchState::Preload };
    }

    /// Algorithm 2 for one request (one QoS-bank read-modify-write per cycle).
    fn token_buf_step(&mut self) {
        let (slot, set) = self.req_sets[self.tb_ptr];
        let s = slot.idx();
        if self.c_fw[s] >= self.cfg.token_buffer.n_threshold {
            self.t_qos[s] = self.t_qos[s].saturating_add(1);
            self.c_fw[s] = 0;
        }
        let cold = set.iter().zip(self.cold.iter()).any(|(a, b)| a & b != 0);
        if cold && self.t_qos[s] > 0 {
            self.t_qos[s] -= 1;
            self.deferred[self.tb_ptr] = true;
            self.defer_valid = true;
            self.stats.deferred += 1;
        }
        self.tb_ptr += 1;
        if self.tb_ptr == self.req_sets.len() {
            // The gating source re-streams the kept requests' entries.
            let e = self.eit.len();
            let kept = layer_counts_fl(&self.reqs, &self.deferred, e, self.n).expect("checked at begin_layer_requests");
            self.stream = eit_fl(&kept, self.n).expect("checked at begin_layer_requests");
            self.order.clear();
            self.wr_ptr = 0;
            self.state = MatchState::RewriteEit;
        }
    }

    /// Examines order-list entry `scan_ptr`: EIT read, AND with ICV, priority encoder.
    fn scan_step(&mut self) {
        self.stats.scan_cycles += 1;
        if self.icv == 0 || self.scan_ptr >= self.order.len() {
            self.state = if self.order.is_empty() { MatchState::Done } else { MatchState::Idle };
            return;
        }
        let e = self.order[self.scan_ptr];
        let mask = self.read_eit(e);
        let hit = mask & self.icv;
        if hit != 0 {
            let start = self.snake.iter().copied().find(|&c| hit >> c.0 & 1 == 1).expect("hit != 0");
            self.grant_reg = (e, mask, start);
            self.state = MatchState::Grant;
        } else {
            self.scan_ptr += 1;
            if self.scan_ptr == self.order.len() {
                self.state = MatchState::Idle;
            }
        }
    }

    /// Latency (ticks) of the message path to chiplet `c`.
    fn out_latency(&self, c: usize) -> u64 {
        let l = if self.ports.msg_out.len() == 1 { self.ports.msg_out[0] } else { self.ports.msg_out[c] };
        l.latency() as u64
    }

    unsafe fn send(&mut self, now: Cycle, msgs: &LinkArena<SchedMsgCl>, m: SchedMsg) {
        self.sent_msg = Some(m);
        send_msg(&self.ports, self.cfg.broadcast, msgs, now, SchedMsgCl { msg: m, layer: self.layer });
    }
}

/// Drives a scheduler message onto the chiplet links: the one shared link, or the links of
/// the mask's members (every chiplet when broadcasting). The CL model and its RTL stand-in
/// (`--rtl scheduler`) send through this.
///
/// # Safety
/// As [`LinkArena::send`]: the caller is the links' only sender, at edge `now`.
pub unsafe fn send_msg(ports: &IoDiePorts, broadcast: bool, msgs: &LinkArena<SchedMsgCl>, now: Cycle, v: SchedMsgCl) {
    if ports.msg_out.len() == 1 {
        msgs.send(ports.msg_out[0], now, v);
    } else {
        let mask = if broadcast { u16::MAX } else { v.msg.mask() };
        for (c, &l) in ports.msg_out.iter().enumerate() {
            if mask >> c & 1 == 1 && !l.is_none() {
                msgs.send(l, now, v);
            }
        }
    }
}

/// The IO-die scheduler as the package sees it: the CL model, or an implementation standing in
/// for it cycle for cycle (the RTL block behind `--rtl scheduler`, PyMTL-style).
pub trait IoDieModel: Probe + Send {
    /// One core-clock edge (see [`IoDieSchedulerCl::eval`]). Returns whether a message was sent.
    ///
    /// # Safety
    /// As [`IoDieSchedulerCl::eval`].
    unsafe fn eval(&mut self, now: Cycle, msgs: &LinkArena<SchedMsgCl>, done: &LinkArena<u16>) -> bool;
    /// Message sent at the last evaluated edge.
    fn sent_msg(&self) -> Option<SchedMsg>;
    /// Work to do on the next edge.
    fn busy(&self) -> bool;
    fn next_event(&self) -> Cycle;
    fn is_finished(&self) -> bool;
    fn stats(&self) -> IoDieStats;
    /// Requests deferred at the current layer (token buffering).
    fn deferred(&self) -> Vec<bool>;
    /// The QoS timer bank: (T_QoS, C_fw) per slot.
    fn qos_bank(&self) -> (Vec<u32>, Vec<u32>);
    /// One line for the watchdog report.
    fn report(&self) -> String;
}

impl IoDieModel for IoDieSchedulerCl {
    unsafe fn eval(&mut self, now: Cycle, msgs: &LinkArena<SchedMsgCl>, done: &LinkArena<u16>) -> bool {
        IoDieSchedulerCl::eval(self, now, msgs, done)
    }
    fn sent_msg(&self) -> Option<SchedMsg> {
        self.sent_msg
    }
    fn busy(&self) -> bool {
        IoDieSchedulerCl::busy(self)
    }
    fn next_event(&self) -> Cycle {
        IoDieSchedulerCl::next_event(self)
    }
    fn is_finished(&self) -> bool {
        IoDieSchedulerCl::is_finished(self)
    }
    fn stats(&self) -> IoDieStats {
        self.stats
    }
    fn deferred(&self) -> Vec<bool> {
        self.deferred.clone()
    }
    fn qos_bank(&self) -> (Vec<u32>, Vec<u32>) {
        (self.t_qos.clone(), self.c_fw.clone())
    }
    fn report(&self) -> String {
        format!("state {:?}, icv {:#b}, order list {} experts left", self.state, self.icv, self.order.len())
    }
}

/// How a layer is handed to the scheduler: its EIT, or (token buffering) the QoS bank and the
/// requests' gating results.
#[derive(Debug, Clone)]
pub enum LayerStart {
    Eit(Vec<EitEntryFl>),
    Requests { t_qos: Vec<u32>, c_fw: Vec<u32>, reqs: Vec<RequestGatingFl> },
}

/// Builds a stand-in scheduler for an R×C package (the RTL swap). It receives what the CL
/// model receives: its configuration, clock, ports and the layer's start at edge 0.
pub type IoDieFactory = fn(rows: usize, cols: usize, cfg: &IoDieCfg, clk: DomainClock, ports: IoDiePorts, start: &LayerStart) -> crate::Result<Box<dyn IoDieModel>>;

/// Declares the scheduler's traced signals (the CL's [`Probe`] order; stand-ins declare the
/// same so their waveforms compare equal).
pub fn declare_signals(scope: &[String], chiplets: usize, experts: usize, stages: usize, done_fifo: u32, out: &mut Vec<SignalDecl>) {
    let e_w = bits_for(experts as u64);
    let n_w = chiplets as u32;
    let mut sig = |name: &str, width: u32| out.push(SignalDecl { scope: scope.to_vec(), name: name.into(), width });
    sig("state", 4);
    sig("icv", n_w);
    sig("eit_wr_valid", 1);
    sig("eit_wr_addr", e_w);
    sig("eit_rd_valid", 1);
    sig("eit_rd_addr", e_w);
    sig("eit_rd_mask", n_w);
    sig("sorter_stage", bits_for(stages as u64));
    sig("order_len", e_w);
    sig("scan_ptr", e_w);
    sig("preload_valid", 1);
    sig("preload_expert", e_w);
    sig("grant_valid", 1);
    sig("grant_expert", e_w);
    sig("grant_mask", n_w);
    sig("grant_start", 4);
    sig("grant_icv", n_w);
    // Grants so far (mod 2^16): a waveform checker counts grants by its changes.
    sig("grants", 16);
    sig("done_fifo_occ", bits_for(done_fifo as u64));
    sig("defer_valid", 1);
    for s in 0..stages {
        let mut sc = scope.to_vec();
        sc.push("sorter".into());
        sc.push(format!("stage{s}"));
        out.push(SignalDecl { scope: sc, name: "valid".into(), width: 1 });
    }
}

fn bits_for(max: u64) -> u32 {
    (64 - max.leading_zeros()).max(1)
}

impl Probe for IoDieSchedulerCl {
    fn declare(&self, scope: &[String], out: &mut Vec<SignalDecl>) {
        declare_signals(scope, self.n, self.eit.len(), self.stages.len(), self.cfg.done_fifo, out);
    }

    fn sample(&self, out: &mut Vec<u64>) {
        out.extend([
            self.state as u64,
            self.icv as u64,
            self.eit_wr_valid as u64,
            self.eit_wr_addr.0 as u64,
            self.eit_rd_valid as u64,
            self.eit_rd_addr.0 as u64,
            self.eit_rd_mask as u64,
            self.sort_stage as u64,
            self.order.len() as u64,
            self.scan_ptr as u64,
            self.preload_valid as u64,
            self.preload_expert.0 as u64,
            self.grant_valid as u64,
            self.grant_expert.0 as u64,
            self.grant_mask as u64,
            self.grant_start.0 as u64,
            self.grant_icv as u64,
            self.grants_issued & 0xffff,
            self.done_fifo.len() as u64,
            self.defer_valid as u64,
        ]);
        // Stage s holds the vector in the cycle it is applied (state Sort, stage index s).
        for s in 0..self.stages.len() {
            out.push((self.state == MatchState::Sort && self.sort_stage == s) as u64);
        }
    }
}

/// One-line trace: `iodie L0 SCAN icv=0110 ord=5 ptr=2 fifo=0 rd e17:0011 > G e17@1`
/// (state, ICV as a bit string with chiplet 0 rightmost, order-list length, scan pointer,
/// done-FIFO occupancy, the EIT access of this cycle, after `>` the message sent: `G` grant
/// with its start chiplet, `P` preload; `W` an EIT write, `D` a deferral).
impl fmt::Display for IoDieSchedulerCl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "iodie L{} {} icv={:0w$b} ord={} ptr={} fifo={}",
            self.layer,
            self.state.short(),
            self.icv,
            self.order.len(),
            self.scan_ptr,
            self.done_fifo.len(),
            w = self.n
        )?;
        if self.state == MatchState::Sort {
            write!(f, " stage={}/{}", self.sort_stage, self.stages.len())?;
        }
        if self.eit_rd_valid {
            write!(f, " rd e{}:{:0w$b}", self.eit_rd_addr, self.eit_rd_mask, w = self.n)?;
        }
        write!(f, " >")?;
        if self.eit_wr_valid {
            write!(f, " W e{}", self.eit_wr_addr)?;
        }
        if self.preload_valid {
            write!(f, " P e{}", self.preload_expert)?;
        }
        if self.grant_valid {
            write!(f, " G e{}@{}", self.grant_expert, self.grant_start)?;
        }
        if self.defer_valid {
            write!(f, " D")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sched::pkg::iodie::TrajectorySchedulerFl;

    /// The 2×2 hand example of sched/tests/iodie_fl.rs, cycle by cycle.
    #[test]
    fn hand_example_timing() {
        let mut msgs = LinkArena::<SchedMsgCl>::new();
        let out = msgs.add(1);
        let mut done = LinkArena::<u16>::new();
        let din = done.add(1);
        let cfg = IoDieCfg { experts: 4, ..IoDieCfg::default() };
        let mut s = IoDieSchedulerCl::new(2, 2, &cfg, DomainClock::UNIT, IoDiePorts { msg_out: vec![out], done_in: vec![din] }).unwrap();
        let eit = [
            EitEntryFl { mask: 0b0011, count: 10 },
            EitEntryFl { mask: 0b0100, count: 2 },
            EitEntryFl { mask: 0b1100, count: 6 },
            EitEntryFl { mask: 0b0001, count: 1 },
        ];
        s.begin_layer(0, &eit).unwrap();
        let mut got = Vec::new();
        for t in 0..40u64 {
            unsafe {
                if let Some(m) = msgs.recv(out, t) {
                    got.push((t - 1, m.msg));
                }
                if t == 20 {
                    done.send(din, t, 0b0011);
                }
                if t == 30 {
                    done.send(din, t, 0b0100);
                }
                s.eval(t, &msgs, &done);
            }
        }
        // 4 EIT writes (0..3), 3 sorter stages (4..6), order (7), 4 preloads (8..11),
        // scan e0 hit (12) grant (13); scan e3 miss (14), e2 hit (15), grant (16).
        let times: Vec<u64> = got.iter().map(|x| x.0).collect();
        assert_eq!(times, vec![8, 9, 10, 11, 13, 16, 23, 33]);
        let mut fl = TrajectorySchedulerFl::new(2, 2).unwrap();
        let mut want = fl.begin_layer(&eit, OrderPolicy::Paired).unwrap();
        want.extend(fl.release(0b0011));
        want.extend(fl.release(0b0100));
        assert_eq!(got.iter().map(|x| x.1).collect::<Vec<_>>(), want);
        // Done mask sent at 20 arrives at 21, applied + head examined at 22, grant at 23.
        assert_eq!(s.stats.decisions, 4);
        assert_eq!(s.stats.first_grant_cycles_max, 13);
        assert_eq!(s.stats.decision_cycles_max, 16);
        assert!(s.is_finished() && !s.busy());
    }

    /// Token buffering costs R cycles (one QoS-bank access per request) plus an EIT rewrite.
    #[test]
    fn token_buffer_timing() {
        let mut msgs = LinkArena::<SchedMsgCl>::new();
        let out = msgs.add(1);
        let done = LinkArena::<u16>::new();
        let tb = TokenBufferCfgFl { theta_min: 2, n_threshold: 1, t_qos_init: 1, slots: 4 };
        let cfg = IoDieCfg { experts: 4, token_buffer: tb, ..IoDieCfg::default() };
        let mut s = IoDieSchedulerCl::new(1, 2, &cfg, DomainClock::UNIT, IoDiePorts { msg_out: vec![out], done_in: vec![] }).unwrap();
        // Request 0 uses cold expert 3 (1 token): deferred; request 1 stays.
        let reqs = [
            RequestGatingFl::from_raw(0, &[(0, 0, 2), (3, 1, 1)]),
            RequestGatingFl::from_raw(1, &[(0, 1, 3), (1, 1, 4)]),
        ];
        s.begin_layer_requests(0, &reqs).unwrap();
        let mut got = Vec::new();
        for t in 0..30 {
            unsafe {
                if let Some(m) = msgs.recv(out, t) {
                    got.push((t - 1, m.msg));
                }
                s.eval(t, &msgs, &done);
            }
        }
        assert_eq!(s.deferred(), &[true, false]);
        assert_eq!(s.qos(ReqId(0)), Some((0, 0)));
        // 4 writes, 2 QoS accesses, 4 rewrites, 3 sorter stages, order: preloads from 14.
        // Kept: e0 {c1}: 3 tokens, e1 {c1}: 4 → paired 1, 0; scan e1 at 16, grant 17.
        assert_eq!(
            got,
            vec![
                (14, SchedMsg::preload(1, 0b10)),
                (15, SchedMsg::preload(0, 0b10)),
                (17, SchedMsg::grant(1, 0b10, 1)),
            ]
        );
        assert_eq!(s.stats.deferred, 1);
    }

    #[test]
    fn cfg_refused_with_field() {
        let bad = IoDieCfg { experts: 0, ..IoDieCfg::default() };
        assert_eq!(bad.validate().unwrap_err().field, "experts");
        let mut tb = IoDieCfg::default();
        tb.token_buffer.n_threshold = 0;
        assert_eq!(tb.validate().unwrap_err().field, "token_buffer.n_threshold");
        let ports = IoDiePorts { msg_out: vec![], done_in: vec![] };
        assert!(IoDieSchedulerCl::new(2, 2, &IoDieCfg::default(), DomainClock::UNIT, ports).is_err());
    }
}
