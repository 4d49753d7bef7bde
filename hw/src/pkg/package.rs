//! The FSE-DP package as a system: R×C chiplets (die router, D2D engine, chiplet controller
//! with its ring buffer, PE array, DDR channel, UCIe adapters on the die-to-die links) and
//! the IO die (trajectory scheduler), wired by registered links and stepped by the harness
//! in three clock domains (core, UCIe, DDR) through [`ClockedControl`].
//!
//! **Wiring** (every arrow is a harness link; latencies in core cycles unless noted):
//!
//! ```text
//!  IO die ──SchedMsg (2)──► ctrl ──done (2)──► IO die
//!  ctrl ──DdrReq (CDC)──► DDR ──DdrResp (CDC)──► ctrl        (DDR clock domain)
//!  D2D engine ⇄ router local port (2 / st+2, credits 2)
//!  router A ─(st)─► UCIe adapter A→B ─(CDC: wire, FDI, replay)─► router B  (UCIe domain)
//!  router B ──credits (FDI + 1, sideband)──► router A
//! ```
//!
//! The glue between the controller and its neighbours is registered: the controller's PE
//! start is issued to the array at the next core edge, the slot it gives a waiting D2D head
//! reaches the engine at the next edge, DDR requests and responses cross into and out of the
//! DDR domain on crossing links.
//!
//! **Partitions.** One partition per band of chiplets (the IO die rides with the first);
//! blocks talk only through links, so the stepping is the same serial or parallel.
//!
//! **Functional mode.** The DDR image holds every expert's micro-slices (generated int8
//! weights); a DDR response copies the slice's bytes into the ring slot; D2D moves them as
//! 256-byte payload chunks (ni.rs); when the PE array finishes a micro-slice job, the FL
//! arithmetic (`sched::pkg::moe::micro_slice_partial_fl`) is applied to the bytes in the
//! ring slot and to the activations of the tokens computed there, and the partial outputs
//! are accumulated per (token, expert) on the chiplet that computed them. After the run each
//! token's output (sum over its experts) is compared bit for bit with the dense reference
//! `moe_layer_ref_fl`. What is approximated: EP/Hydra token packets are timed flits without
//! payload; the owner reads the dispatched activations from the (read-only) token array, and
//! a token's partial outputs are summed after the run rather than at the combine packet's
//! arrival (integer addition: same bits in any order; the run does check that every combine
//! packet arrived).

use std::collections::HashMap;

use sched::noc::{Coord, Dir};
use sched::pkg::iodie::{eit_fl, totals_fl, RequestGatingFl, SchedMsg, TokenBufferFl};
use sched::pkg::moe::{micro_slice_partial_fl, moe_layer_ref_fl, ExpertWeights, MicroSliceWeights};

use super::chiplet::{ChipletCtrlCl, ChipletCtrlModel, ChipletId, CtrlFactory, CtrlIn, CtrlKnobs, CtrlOut, CtrlSched, Trajectory};
use super::config::{Loaders, PkgCfg, Strategy};
use super::ddr::{DdrChannelCl, DdrPorts, DdrReq, DdrResp};
use super::iodie::{IoDieCfg, IoDieFactory, IoDieModel, IoDiePorts, IoDieSchedulerCl, LayerStart, OrderPolicy, SchedMsgCl};
use super::ni::{D2dEngineCl, NiPorts, PacketKind, PayloadPools};
use super::pe_array::{PeArrayCl, PeJob};
use super::plan::LayerPlan;
use super::result::{ChipletResult, PeakRates, PkgResult, Roofline};
use super::ring::SlotTag;
use super::rule5::{ArbiterPorts, FreeReport, LoadArbiterCl};
use super::ucie::{UcieAdapterCl, UciePorts};
use crate::cfg::CfgError;
use crate::harness::{
    run_partitions, ChangeLog, ClockSet, ClockedControl, Cycle, DomainClock, LinkArena, LinkId, PartStatus, Partition, Probe,
    SignalDecl, SignalSink, WakeOffsets, WakeSet, WatchdogReport, C_FINISHED,
};
use crate::pkg::timeline::{BreakdownRec, CycleBreakdown, PeState, TimelineRec};
use crate::noc::flit::{Credit, Flit};
use crate::noc::router::{RouterCl, RouterPorts, NPORTS};

/// Trajectories of the package: ring order = snake order of the members, micro-slice k
/// loaded by ring member k mod |T_e| (counted from the ring's first member), then visiting
/// every member once (docs/fsedp-reading.md). The die's next-hop logic: the same functions
/// as `sched::pkg::iodie::{loader_fl, next_station_fl}` (checked exhaustively in the tests)
/// over a fixed snake-order table, without allocating — the controller asks every cycle.
#[derive(Debug, Clone, Copy)]
pub struct PkgTraj {
    pub rows: usize,
    pub cols: usize,
    snake: [u8; 16],
    /// Sharded loading (`loaders = "all"`): every chiplet loads its share of every expert.
    shard: bool,
}

impl PkgTraj {
    pub fn new(rows: usize, cols: usize) -> Self {
        let mut snake = [0u8; 16];
        for (i, c) in sched::pkg::iodie::snake_order(rows, cols).into_iter().take(16).enumerate() {
            snake[i] = c;
        }
        PkgTraj { rows, cols, snake, shard: false }
    }

    /// The same package with sharded loading (as `sched::pkg::iodie::{shard_loader_fl,
    /// shard_next_station_fl}`).
    pub fn sharded(mut self) -> Self {
        self.shard = true;
        self
    }

    /// Position of chiplet `c` in the snake order (the ring order of every trajectory).
    pub fn ring_position(&self, c: ChipletId) -> u8 {
        self.snake.iter().position(|&x| x == c).unwrap_or(usize::MAX) as u8
    }

    /// Ring members of `mask` in snake order, and how many.
    fn ring(&self, mask: u16) -> ([u8; 16], usize) {
        let mut r = [0u8; 16];
        let mut n = 0;
        for &c in &self.snake[..(self.rows * self.cols).min(16)] {
            if mask >> c & 1 == 1 {
                r[n] = c;
                n += 1;
            }
        }
        (r, n)
    }
}

impl Trajectory for PkgTraj {
    fn loader(&self, mask: u16, k: u16) -> ChipletId {
        if self.shard {
            return self.snake[k as usize % (self.rows * self.cols).min(16)];
        }
        let (r, n) = self.ring(mask);
        assert!(n > 0, "loader of an empty trajectory");
        r[k as usize % n]
    }
    fn next_station(&self, mask: u16, loader: ChipletId, at: ChipletId) -> Option<ChipletId> {
        let (r, n) = self.ring(mask);
        if self.shard && mask >> loader & 1 == 0 {
            // A helper loader: into the ring at the first member after it in snake order,
            // which is then where the ring closes.
            let lp = self.ring_position(loader) as usize;
            let first = r[..n].iter().copied().find(|&c| self.ring_position(c) as usize > lp).or(r[..n].first().copied())?;
            if at == loader {
                return Some(first);
            }
            let p = r[..n].iter().position(|&c| c == at)?;
            let nxt = r[(p + 1) % n];
            return (n > 1 && nxt != first).then_some(nxt);
        }
        let p = r[..n].iter().position(|&c| c == at)?;
        if n < 2 {
            return None;
        }
        let nxt = r[(p + 1) % n];
        (nxt != loader && mask >> loader & 1 == 1).then_some(nxt)
    }
}

#[cfg(test)]
mod traj_tests {
    use super::*;
    use sched::pkg::iodie::{loader_fl, next_station_fl, shard_loader_fl, shard_next_station_fl};

    #[test]
    fn next_hop_logic_equals_the_fl_functions() {
        for (rows, cols) in [(1, 2), (2, 2), (3, 3), (2, 3)] {
            let t = PkgTraj::new(rows, cols);
            let ts = PkgTraj::new(rows, cols).sharded();
            let n = rows * cols;
            for mask in 1u16..(1 << n) {
                for k in 0..7u16 {
                    assert_eq!(Some(t.loader(mask, k)), loader_fl(mask, u8::MAX, k as usize, rows, cols));
                }
                for l in 0..n as u8 {
                    for at in 0..n as u8 {
                        assert_eq!(t.next_station(mask, l, at), next_station_fl(mask, l, at, rows, cols), "{rows}x{cols} mask {mask:#b} loader {l} at {at}");
                        assert_eq!(ts.next_station(mask, l, at), shard_next_station_fl(mask, l, at, rows, cols), "sharded {rows}x{cols} mask {mask:#b} loader {l} at {at}");
                    }
                }
                for k in 0..7u16 {
                    assert_eq!(ts.loader(mask, k), shard_loader_fl(k as usize, rows, cols));
                }
            }
        }
    }
}

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
struct Buffering {
    reqs: Vec<RequestGatingFl>,
    /// Request index of each token.
    req_of_token: Vec<usize>,
    deferred: Vec<bool>,
    bank_after: TokenBufferFl,
}

/// Errors of a package run.
#[derive(Debug, thiserror::Error)]
pub enum PkgError {
    #[error(transparent)]
    Cfg(#[from] CfgError),
    #[error("{0}")]
    Input(String),
    #[error("{0}")]
    Watchdog(Box<WatchdogReport>),
    /// Still busy at `sim.max_cycles` (progress never stopped, so the watchdog did not
    /// trip): the state of the package then, as the watchdog would report it.
    #[error("the layer did not finish within sim.max_cycles = {0} core cycles, though it was still making progress (not a deadlock: raise sim.max_cycles); state at cycle {cycle}:\n{state}", cycle = .1.cycle, state = .1.state())]
    Timeout(u64, Box<WatchdogReport>),
    #[error("waveform: {0}")]
    Wave(String),
    /// The cycle-level model disagrees with its functional twin (a model bug).
    #[error("model check failed: {0}")]
    Check(String),
}

/// RTL stand-ins to build in place of the CL models (`package --rtl`).
#[derive(Debug, Clone, Copy, Default)]
pub struct PkgRtl {
    pub iodie: Option<IoDieFactory>,
    pub ctrl: Option<CtrlFactory>,
}

/// Link arenas of the package (shared by all partitions under the link protocol).
pub struct PkgWires {
    pub flits: LinkArena<Flit>,
    pub credits: LinkArena<Credit>,
    pub msgs: LinkArena<SchedMsgCl>,
    pub done: LinkArena<u16>,
    pub ddr_req: LinkArena<DdrReq>,
    pub ddr_resp: LinkArena<DdrResp>,
    /// Control sideband: a micro-slice handed to the next station (deadlock escape).
    pub handoff: LinkArena<SlotTag>,
    /// Rule 5: free-slot reports to the IO die's load arbiter and its load assignments.
    pub status: LinkArena<FreeReport>,
    pub loads: LinkArena<SlotTag>,
    pub pools: PayloadPools,
}

/// Read-only context of a run.
pub struct PkgCtx {
    pub traj: PkgTraj,
    pub core: DomainClock,
    pub ucie: DomainClock,
    pub ddr: DomainClock,
    pub d_model: u32,
    pub micro_slices: u16,
    /// FFN columns of micro-slice k.
    pub slice_f: Vec<u32>,
    /// Bytes of micro-slice k (3·d_model·f_k).
    pub slice_bytes: Vec<u32>,
    /// Largest micro-slice (a ring slot).
    pub slot_bytes: usize,
    pub act_bytes: u32,
    pub out_bytes: u32,
    /// Bytes of a DDR data burst and of a D2D flit (timeline counters).
    pub ddr_burst_bytes: u64,
    pub flit_bytes: u64,
    /// Functional mode: activations and the DDR image.
    pub func: Option<FuncData>,
}

/// Functional-mode data: token activations (T×d_model) and every expert's micro-slices as
/// bytes (the DDR image, the same in every chiplet's DDR).
pub struct FuncData {
    pub x: Vec<i8>,
    pub image: Vec<Vec<Vec<u8>>>,
    pub weights: Vec<ExpertWeights>,
}

/// One chiplet with its glue registers.
pub struct ChipletTile {
    pub id: ChipletId,
    pub scope: String,
    pub router: RouterCl,
    pub ni: D2dEngineCl,
    /// The CL controller, or its stand-in (`--rtl chiplet-ctrl`).
    pub ctrl: Box<dyn ChipletCtrlModel>,
    pub pe: PeArrayCl,
    pub ddr: DdrChannelCl,
    /// Adapters of this die's outgoing die-to-die links, with their direction names.
    pub ucie: Vec<(&'static str, UcieAdapterCl)>,
    msg_in: LinkId,
    done_out: LinkId,
    ddr_req_out: LinkId,
    ddr_resp_in: LinkId,
    /// Hand-off sideband: my link to each chiplet, each chiplet's link to me, and the
    /// hand-offs received but not yet taken by the controller (one per cycle).
    handoff_out: Vec<LinkId>,
    handoff_in: Vec<LinkId>,
    status_out: LinkId,
    load_in: LinkId,
    /// Flits the adapters had delivered at the last evaluation (progress counter).
    ucie_delivered: u64,
    handoff_q: std::collections::VecDeque<SlotTag>,
    ddr_depth: u32,
    ddr_outstanding: u32,
    /// First tick the DDR request crossing is free again: the crossing carries one request
    /// per DDR edge, so a core faster than the DDR holds its next request (the controller
    /// sees `ddr_ready` low) rather than landing two on one DDR edge (issue 19).
    ddr_req_free_at: Cycle,
    /// Registered glue: PE job issued next edge, slot for the waiting D2D head.
    pe_job: Option<PeJob>,
    rx_slot_reg: Option<u32>,
    /// Tokens computed here per expert (PE job rows) and, functional mode, their ids.
    m_here: Vec<u32>,
    tokens_here: Vec<Vec<u32>>,
    /// EP/Hydra: tokens of each expert this chiplet owns, per home (for the combine).
    combine_to: Vec<Vec<(u8, u32)>>,
    grants_expected: u32,
    grants_seen: u32,
    combines_expected: u32,
    combines_seen: u32,
    /// Activations held (home tokens + dispatched in) and outputs accumulated, tokens.
    home_tokens: u32,
    tokens_in: u32,
    out_tokens: u32,
    /// Ticks at which values this tile's blocks sent land (the tile is evaluated then).
    wake: WakeSet,
    last_t: Cycle,
    /// Time integral of live ring slots (slot·ticks), for the mean weight memory.
    live_integral: u128,
    /// What the PE array is doing since the last core edge, and its integral.
    pe_state: PeState,
    breakdown: BreakdownRec,
    /// MACs per cycle of the job in (or entering) the PE array.
    mac_rate: f64,
    /// A job's last busy cycle is the edge that reports it done: that cycle (until this
    /// tick, at that job's MAC rate) still computes whatever the state after the edge.
    compute_until: Cycle,
    done_rate: f64,
    /// Activity per time bin (when asked for), and the counters it last read.
    timeline: Option<TimelineRec>,
    seen: [u64; 3],
    peak_token_bytes: u64,
    macs: u64,
    ddr_bytes: u64,
    /// Functional mode: partial outputs per (token, expert).
    partials: HashMap<(u32, u16), Vec<i32>>,
    progress: u64,
}

/// The IO die.
pub struct IoDieTile {
    /// The CL model, or its stand-in (`--rtl scheduler`).
    pub sched: Box<dyn IoDieModel>,
    /// A4: the Rule-5 load arbiter beside the scheduler.
    pub rule5: Option<LoadArbiterCl>,
    /// Ticks at which the scheduler's messages land.
    wake: WakeSet,
}

/// A band of chiplets (and the IO die in the first band).
pub struct PkgPart {
    pub tiles: Vec<ChipletTile>,
    pub iodie: Option<IoDieTile>,
    log: Option<ChangeLog>,
    /// Where a core-edge send lands, as tick offsets from the sending edge: every link
    /// latency of the core-domain blocks and the next core edge (registers written now are
    /// read there). Offsets of 64 ticks or more (slow cores on a fine tick) are kept exactly
    /// too ([`WakeOffsets`]).
    core_wake: WakeOffsets,
}

/// Neighbour on the k×k chiplet array (the mesh's own function).
fn neighbour(i: u32, d: Dir, k: u32) -> Option<u32> {
    crate::noc::mesh::neighbour_in(i, d, k, k)
}

fn to_ctrl(m: SchedMsg) -> CtrlSched {
    match m {
        SchedMsg::Preload { expert, mask } => CtrlSched::Preload { expert, mask },
        SchedMsg::Grant { expert, mask, .. } => CtrlSched::Grant { expert, mask },
    }
}

impl ChipletTile {
    /// Which of the end conditions of [`Self::finished`] still fail (watchdog report).
    fn unfinished(&self) -> String {
        let c = &self.ctrl;
        let mut v = Vec::new();
        if !c.quiescent() {
            v.push(format!("controller not quiescent ({})", c.state_summary()));
        }
        if self.ni.busy() {
            v.push("D2D engine busy".to_string());
        }
        if self.router.occupancy() > 0 {
            v.push(format!("{} flits in the router", self.router.occupancy()));
        }
        if self.pe_job.is_some() || self.pe.busy() {
            v.push("PE array busy".to_string());
        }
        if !self.handoff_q.is_empty() {
            v.push(format!("{} hand-offs queued", self.handoff_q.len()));
        }
        if self.ddr_outstanding > 0 {
            v.push(format!("{} DDR requests outstanding", self.ddr_outstanding));
        }
        if v.is_empty() {
            v.push("links or adapters still busy".to_string());
        }
        v.join(", ")
    }

    fn finished(&self) -> bool {
        self.ctrl.quiescent()
            && self.grants_seen == self.grants_expected
            && self.combines_seen == self.combines_expected
            && !self.ni.busy()
            && self.router.occupancy() == 0
            && self.pe_job.is_none()
            && self.handoff_q.is_empty()
            && self.rx_slot_reg.is_none()
            && !self.pe.busy()
            && self.ddr_outstanding == 0
            && !self.ddr.has_requests()
            && self.ucie.iter().all(|(_, a)| !a.busy())
    }

    /// Time integrals of the state held since the last core edge, up to tick `now`: live
    /// ring slots, the cycle breakdown, the timeline.
    fn integrate(&mut self, now: Cycle, slot_bytes: usize) {
        let live = self.ctrl.live_slots() as u128;
        self.live_integral += live * (now - self.last_t) as u128;
        let split = self.compute_until.clamp(self.last_t, now);
        self.breakdown.add(PeState::Compute, split - self.last_t);
        self.breakdown.add(self.pe_state, now - split);
        if let Some(tl) = self.timeline.as_mut() {
            let w = live as f64 * slot_bytes as f64;
            tl.interval(0, self.last_t, split, true, self.done_rate, w);
            tl.interval(0, split, now, self.pe_state == PeState::Compute, self.mac_rate, w);
        }
        self.last_t = now;
    }

    /// The PE array's state from this core edge on (see [`CycleBreakdown`]).
    fn pe_state_now(&self) -> PeState {
        if self.pe.busy() {
            PeState::Compute
        } else if self.pe.counters.busy_cycles == 0 && self.pe_job.is_none() {
            PeState::Fill
        } else if self.ddr_outstanding > 0 {
            PeState::DdrWait
        } else if self.ctrl.pending() > 0 {
            PeState::D2dWait
        } else {
            PeState::SchedWait
        }
    }

    /// DDR data bursts and D2D flits since the last core edge, into the timeline.
    fn count_traffic(&mut self, now: Cycle, ctx: &PkgCtx) {
        let now_counts = [self.ddr.stats().reads * ctx.ddr_burst_bytes, self.ni.stats.tx_flits * ctx.flit_bytes, self.ni.stats.rx_flits * ctx.flit_bytes];
        let d: Vec<u64> = now_counts.iter().zip(&self.seen).map(|(a, b)| a - b).collect();
        self.seen = now_counts;
        if let Some(tl) = self.timeline.as_mut() {
            tl.count(0, now, d[0], d[1], d[2]);
        }
    }

    fn token_bytes(&self, ctx: &PkgCtx) -> u64 {
        (self.home_tokens + self.tokens_in) as u64 * ctx.d_model as u64 * ctx.act_bytes as u64 + self.out_tokens as u64 * ctx.d_model as u64 * 4
    }

    /// One core edge of the chiplet's core-domain blocks.
    ///
    /// # Safety
    /// Engine protocol: sole sender/receiver of this tile's links, at core edge `now`.
    unsafe fn core_edge(&mut self, now: Cycle, w: &PkgWires, ctx: &PkgCtx, core_wake: &WakeOffsets) -> bool {
        let mut active = false;
        // --- registered inputs
        let sched = w.msgs.recv(self.msg_in, now).map(|m| to_ctrl(m.msg));
        if let Some(CtrlSched::Grant { mask, .. }) = sched {
            if mask >> self.id & 1 == 1 {
                self.grants_seen += 1;
            }
        }
        let ddr_landed = w.ddr_resp.recv(self.ddr_resp_in, now).map(|r| {
            self.ddr_outstanding -= 1;
            r.id
        });
        if let (Some(s), Some(f)) = (ddr_landed, ctx.func.as_ref()) {
            let tag = self.ctrl.slot_tag(s);
            let src = &f.image[tag.expert as usize][tag.k as usize];
            let b = s as usize * ctx.slot_bytes;
            self.ctrl.ring_data_mut()[b..b + src.len()].copy_from_slice(src);
        }
        for &l in &self.handoff_in {
            if let Some(tag) = w.handoff.recv(l, now) {
                self.handoff_q.push_back(tag);
            }
        }
        let (moved, sent) = self.router.eval(now, &w.flits, &w.credits);
        let pe_done = self.pe.eval(now, self.pe_job.take());
        if pe_done.is_some() {
            self.compute_until = now + ctx.core.div;
            self.done_rate = self.mac_rate;
        }
        if let (Some(s), Some(f)) = (pe_done, ctx.func.as_ref()) {
            self.compute_partials(s, f, ctx);
        }
        let ev = self.ni.eval(now, &w.flits, &w.credits, self.rx_slot_reg.take(), self.ctrl.ring_data_mut(), ctx.slot_bytes, &w.pools);
        let mut tokens_arrived = None;
        match ev.tokens_landed {
            Some((PacketKind::Dispatch, e, n)) => {
                tokens_arrived = Some((e, n));
                self.tokens_in += n;
            }
            Some((PacketKind::Combine, _, n)) => {
                self.combines_seen += 1;
                let _ = n;
            }
            _ => {}
        }
        // The DDR request crossing is still taken (a DDR slower than the core): the
        // controller sees `ddr_ready` low now and must be evaluated again at the first core
        // edge it is free, even if nothing else happens by then (fast-forward).
        if ctx.ddr.next_edge(now + 1) < self.ddr_req_free_at {
            self.wake.add(ctx.core.next_edge(self.ddr_req_free_at - 1));
        }
        let inp = CtrlIn {
            sched,
            ddr_ready: self.ddr_outstanding < self.ddr_depth && ctx.ddr.next_edge(now + 1) >= self.ddr_req_free_at,
            ddr_landed,
            rx_head: ev.rx_head,
            rx_landed: ev.rx_landed,
            pe_done,
            tx_done: ev.tx_done,
            tx_ready: ev.tx_ready,
            tokens_arrived,
            handoff: self.handoff_q.pop_front(),
            load: w.loads.recv(self.load_in, now),
        };
        let out = self.ctrl.step(&inp, &ctx.traj);
        // --- outputs to the neighbours
        self.rx_slot_reg = out.rx_slot;
        if let Some((s, tag)) = out.pe_start {
            let e = tag.expert as usize;
            let job = self.pe.cfg().micro_slice_job(s, self.m_here[e], ctx.d_model, ctx.slice_f[tag.k as usize]);
            self.mac_rate = job.macs() as f64 / self.pe.cfg().job_busy_cycles(&job).max(1) as f64;
            self.macs += job.macs();
            self.pe_job = Some(job);
        }
        if let Some((s, dest)) = out.tx_start {
            let tag = self.ctrl.slot_tag(s);
            self.ni.start_tx(s, tag, ctx.slice_bytes[tag.k as usize] as usize, dest);
        }
        if let Some((s, tag)) = out.ddr_req {
            let bytes = ctx.slice_bytes[tag.k as usize];
            let addr = (tag.expert as u64 * ctx.micro_slices as u64 + tag.k as u64) * ctx.slot_bytes as u64;
            let due = ctx.ddr.next_edge(now + 1);
            self.ddr_req_free_at = due + 1;
            w.ddr_req.send_at(self.ddr_req_out, now, due, DdrReq { id: s, addr, bytes });
            self.wake.add(due);
            self.ddr_outstanding += 1;
            self.ddr_bytes += bytes as u64;
        }
        if out.done {
            w.done.send(self.done_out, now, 1 << self.id);
        }
        if let Some((tag, next)) = out.handoff {
            w.handoff.send(self.handoff_out[next as usize], now, tag);
        }
        if let Some(r) = out.free {
            w.status.send(self.status_out, now, r);
        }
        if let Some(e) = out.expert_done {
            // EP/Hydra: the outputs go back to their tokens' homes.
            for &(h, n) in &self.combine_to[e as usize] {
                self.ni.queue_tokens(PacketKind::Combine, e, n, n as usize * ctx.d_model as usize * ctx.out_bytes as usize, h);
            }
        }
        let did = !self.handoff_q.is_empty() || inp.load.is_some() || out != CtrlOut::default() || ev.rx_landed.is_some() || ev.tx_done.is_some() || ev.tokens_landed.is_some() || ddr_landed.is_some() || pe_done.is_some() || sched.is_some();
        self.progress += moved + did as u64 + self.pe.busy() as u64;
        active |= did || sent || self.pe_job.is_some() || self.rx_slot_reg.is_some();
        if active || moved > 0 {
            // Something may be on a link now: wake up when it lands (fast-forward must not
            // skip the tick a link delivers at).
            self.wake.add_offsets(core_wake);
        }
        // The D2D engine's sends too, at their own landing only: a token packet's last flit
        // (or the credit of a drained flit) sent at an edge where nothing else happened used
        // to land while the tile was fast-forwarded past that tick — the flit was lost and
        // its packet kept the next router's output VC forever (issue 19: `vcs = 1, vc_buf =
        // 1` under EP "deadlocked"; without fast-forward it finished). Runs that finished
        // visited that tick anyway, so this adds no evaluation to them.
        if self.ni.sent_this_cycle() {
            let p = &self.ni.ports;
            self.wake.add(now + p.inj_flit.latency().max(p.ej_credit.latency()) as u64);
        }
        // --- memory occupancy (time-weighted; state is constant between evaluated edges)
        let tb = self.token_bytes(ctx);
        self.peak_token_bytes = self.peak_token_bytes.max(tb);
        active
    }

    fn compute_partials(&mut self, slot: u32, f: &FuncData, ctx: &PkgCtx) {
        let tag = self.ctrl.slot_tag(slot);
        let e = tag.expert as usize;
        let fk = ctx.slice_f[tag.k as usize] as usize;
        let d = ctx.d_model as usize;
        let b = slot as usize * ctx.slot_bytes;
        let bytes = &self.ctrl.ring_data()[b..b + ctx.slice_bytes[tag.k as usize] as usize];
        let ws = MicroSliceWeights::from_bytes(bytes, d, fk).expect("ring slot holds a whole micro-slice");
        let toks = &self.tokens_here[e];
        let mut x = Vec::with_capacity(toks.len() * d);
        for &t in toks {
            x.extend_from_slice(&f.x[t as usize * d..(t as usize + 1) * d]);
        }
        let p = micro_slice_partial_fl(&x, toks.len(), d, &ws);
        for (i, &t) in toks.iter().enumerate() {
            let acc = self.partials.entry((t, tag.expert)).or_insert_with(|| vec![0; d]);
            for (a, v) in acc.iter_mut().zip(&p[i * d..(i + 1) * d]) {
                *a = a.wrapping_add(*v);
            }
        }
    }
}

impl Partition for PkgPart {
    type Shared = PkgWires;
    type Ctx = PkgCtx;

    fn eval(&mut self, now: Cycle, w: &PkgWires, ctx: &PkgCtx) -> PartStatus {
        let mut st = PartStatus::default();
        let core = ctx.core.is_edge(now);
        let mut all_done = true;
        // Work of a core-domain block is due at the next core edge only (the ticks between
        // are the adapters' and the DDR's).
        let mut core_due = false;
        if let Some(io) = self.iodie.as_mut() {
            if core {
                // SAFETY: engine protocol (sole sender of msg links, receiver of done links).
                let mut sent = unsafe { io.sched.eval(now, &w.msgs, &w.done) };
                if let Some(a) = io.rule5.as_mut() {
                    // SAFETY: engine protocol (sole receiver of status, sender of loads).
                    sent |= unsafe { a.eval(now, io.sched.sent_msg(), &w.status, &w.loads) };
                }
                st.progress += sent as u64;
                io.wake.advance(now);
                if sent {
                    io.wake.add_offsets(&self.core_wake);
                }
            }
            core_due |= io.sched.busy();
            st.next_event = st.next_event.min(io.sched.next_event()).min(io.wake.next());
            if let Some(a) = &io.rule5 {
                core_due |= a.busy(now);
                st.next_event = st.next_event.min(a.next_event());
            }
            all_done &= io.sched.is_finished() && !io.sched.busy();
        }
        let (ucie_edge, ddr_edge) = (ctx.ucie.is_edge(now), ctx.ddr.is_edge(now));
        // The event-driven blocks (UCIe adapters, DDR channels) are evaluated only at edges
        // where they are due (traced, also where a traced register changes on its own).
        let traced = self.log.is_some();
        for t in self.tiles.iter_mut() {
            // A block that sends on a link wakes the tile when the value lands.
            t.wake.advance(now);
            if ucie_edge {
                for (_, a) in t.ucie.iter_mut() {
                    // SAFETY: engine protocol; the adapter is its links' sole endpoint.
                    if unsafe { a.due(now, &w.flits) } {
                        if let Some(at) = unsafe { a.eval(now, &w.flits, &w.pools) } {
                            t.wake.add(at);
                        }
                    }
                }
            }
            // SAFETY: engine protocol.
            if ddr_edge && unsafe { if traced { t.ddr.traced_due(now, &w.ddr_req) } else { t.ddr.due(now, &w.ddr_req) } } {
                if let Some(at) = unsafe { t.ddr.eval(now, &w.ddr_req, &w.ddr_resp) } {
                    t.wake.add(at);
                }
            }
            let mut active = false;
            if core {
                t.integrate(now, ctx.slot_bytes);
                // SAFETY: engine protocol.
                active = unsafe { t.core_edge(now, w, ctx, &self.core_wake) };
                t.pe_state = t.pe_state_now();
                if t.timeline.is_some() {
                    t.count_traffic(now, ctx);
                }
            }
            // An adapter hands one flit per edge to the router; its other work is announced
            // by its next event.
            let ucie_busy = t.ucie.iter().any(|(_, a)| a.delivering());
            // A request or its response on the crossing links.
            let ddr_wait = t.ddr_outstanding > 0 && !t.ddr.has_requests();
            core_due |= active || t.router.occupancy() > 0 || (t.ni.busy() && !t.ni.waiting_for_slot_only()) || ddr_wait;
            // The adapters' work is due at the next tick.
            let busy = ucie_busy || t.ddr.busy();
            // Traced, the edges where a traced register changes between events are visited
            // too, so the waveform is the same with and without fast-forward.
            if traced {
                st.next_event = st.next_event.min(t.pe.next_change()).min(t.ddr.traced_next_event());
            }
            st.busy |= busy;
            st.next_event = st.next_event.min(t.pe.next_event()).min(t.ddr.next_event()).min(t.wake.next());
            for (_, a) in &t.ucie {
                st.next_event = st.next_event.min(a.next_event());
            }
            // Progress: a link that only replays (bit-error rate too high for a flit to get
            // through) is not progress, so such a run ends in the watchdog.
            let delivered: u64 = t.ucie.iter().map(|(_, a)| a.stats().delivered).sum();
            // (a DDR woken only for refresh is not progress either)
            st.progress += std::mem::take(&mut t.progress) + t.ddr.has_requests() as u64 + (delivered - t.ucie_delivered);
            t.ucie_delivered = delivered;
            all_done &= t.finished();
        }
        if core_due {
            st.next_event = st.next_event.min(ctx.core.edge_after(now));
        }
        st.counters[C_FINISHED] = all_done as u64;
        if let Some(log) = self.log.as_mut() {
            let buf = log.begin();
            if let Some(io) = &self.iodie {
                io.sched.sample(buf);
                if let Some(a) = &io.rule5 {
                    a.sample(buf);
                }
            }
            for t in &self.tiles {
                t.sample(buf);
            }
            log.commit(now);
        }
        st
    }
}

impl ChipletTile {
    fn declare(&self, out: &mut Vec<SignalDecl>) {
        let scope: Vec<String> = self.scope.split('.').map(String::from).collect();
        self.ctrl.declare(&scope, out);
        self.ni.declare(&scope, out);
        let mut pe = scope.clone();
        pe.push("pe".into());
        self.pe.declare(&pe, out);
        self.ddr.declare(&scope, out);
        let mut r = scope.clone();
        r.push("router".into());
        self.router.declare(&r, out);
        for (d, a) in &self.ucie {
            let mut u = scope.clone();
            u.push(format!("ucie_{d}"));
            a.declare(&u, out);
        }
    }
    fn sample(&self, out: &mut Vec<u64>) {
        self.ctrl.sample(out);
        self.ni.sample(out);
        self.pe.sample(out);
        self.ddr.sample(out);
        self.router.sample(out);
        for (_, a) in &self.ucie {
            a.sample(out);
        }
    }
}

/// A package set up for one layer of one strategy.
pub struct Package {
    pub cfg: PkgCfg,
    pub strategy: Strategy,
    pub parts: Vec<PkgPart>,
    pub wires: PkgWires,
    pub ctx: PkgCtx,
    pub clocks: ClockSet,
    pub plan: LayerPlan,
    /// Tokens computed in this run (a deferred request's tokens have no experts here).
    routing: Vec<Vec<u16>>,
    buffering: Option<Buffering>,
    /// Next tick to evaluate.
    now: Cycle,
    /// Ticks evaluated (not skipped by fast-forward); not part of the results.
    pub evaluated: u64,
}

/// Algorithm 2's FL twin at this layer boundary: the requests' gating records (expert, home
/// chiplet, tokens), in order of first appearance, and which of them are deferred.
fn buffering_fl(layer: &LayerInput, rq: &LayerRequests, tb: &sched::pkg::iodie::TokenBufferCfgFl, n: usize) -> Result<Buffering, PkgError> {
    if rq.slot_of_token.len() != layer.routing.len() {
        return Err(PkgError::Input(format!("{} request slots for {} tokens", rq.slot_of_token.len(), layer.routing.len())));
    }
    if rq.bank.cfg != *tb {
        return Err(PkgError::Input(format!("QoS bank built for {:?}, the IO die has {:?}", rq.bank.cfg, tb)));
    }
    let home = LayerPlan::homes(layer.routing.len(), n);
    let mut index: HashMap<u32, usize> = HashMap::new();
    let mut reqs: Vec<RequestGatingFl> = Vec::new();
    let mut req_of_token = Vec::with_capacity(layer.routing.len());
    let mut counts: Vec<HashMap<(u16, u8), u32>> = Vec::new();
    for (t, es) in layer.routing.iter().enumerate() {
        let slot = rq.slot_of_token[t];
        let r = *index.entry(slot).or_insert_with(|| {
            reqs.push(RequestGatingFl { slot, counts: Vec::new() });
            counts.push(HashMap::new());
            reqs.len() - 1
        });
        req_of_token.push(r);
        for &e in es {
            *counts[r].entry((e, home[t])).or_default() += 1;
        }
    }
    for (r, c) in reqs.iter_mut().zip(counts) {
        let mut v: Vec<(u16, u8, u32)> = c.into_iter().map(|((e, h), k)| (e, h, k)).collect();
        v.sort_unstable();
        r.counts = v;
    }
    let n_e = totals_fl(&reqs, layer.experts, n).map_err(|e| PkgError::Input(e.to_string()))?;
    let sets: Vec<(u32, Vec<u16>)> = reqs.iter().map(|r| (r.slot, r.experts())).collect();
    let mut bank_after = rq.bank.clone();
    let deferred = bank_after.layer_boundary(&sets, &n_e).map_err(|e| PkgError::Input(e.to_string()))?;
    Ok(Buffering { reqs, req_of_token, deferred, bank_after })
}

/// Expert order of the IO die per strategy.
fn policy(s: Strategy) -> OrderPolicy {
    match s {
        Strategy::A3 | Strategy::A4 | Strategy::A5 => OrderPolicy::Paired,
        _ => OrderPolicy::ById,
    }
}

impl Package {
    /// Builds the package for `layer` under `strategy`; `functional` moves real int8 data.
    pub fn new(cfg: &PkgCfg, strategy: Strategy, layer: &LayerInput, functional: bool) -> Result<Package, PkgError> {
        Self::new_with(cfg, strategy, layer, functional, None)
    }

    /// As [`Package::new`], with the IO-die scheduler built by `rtl_iodie` in place of the CL
    /// model (`--rtl scheduler`).
    pub fn new_with(cfg: &PkgCfg, strategy: Strategy, layer: &LayerInput, functional: bool, rtl_iodie: Option<IoDieFactory>) -> Result<Package, PkgError> {
        Self::new_with_blocks(cfg, strategy, layer, functional, PkgRtl { iodie: rtl_iodie, ctrl: None })
    }

    /// As [`Package::new`], with the RTL stand-ins of `rtl` in place of their CL models.
    pub fn new_with_blocks(cfg: &PkgCfg, strategy: Strategy, layer: &LayerInput, functional: bool, rtl: PkgRtl) -> Result<Package, PkgError> {
        let rtl_iodie = rtl.iodie;
        cfg.validate()?;
        cfg.validate_for(layer.d_ffn)?;
        let n = cfg.chiplets() as usize;
        let (rows, cols) = (cfg.rows as usize, cfg.cols as usize);
        let k = cfg.cols;
        if layer.experts == 0 || layer.experts > sched::pkg::iodie::MAX_EXPERTS {
            return Err(PkgError::Input(format!("{} experts: the IO die's EIT holds 1..={}", layer.experts, sched::pkg::iodie::MAX_EXPERTS)));
        }
        if layer.routing.is_empty() {
            return Err(PkgError::Input("no tokens in the layer".into()));
        }
        for (t, es) in layer.routing.iter().enumerate() {
            if let Some(&e) = es.iter().find(|&&e| e as usize >= layer.experts) {
                return Err(PkgError::Input(format!("token {t} routed to expert {e} of {}", layer.experts)));
            }
        }
        if layer.d_model == 0 || layer.d_ffn == 0 {
            return Err(PkgError::Input("d_model and d_ffn must be at least 1".into()));
        }
        if functional && (layer.d_model as u64 * layer.d_ffn as u64 > 1 << 20 || layer.routing.len() > 1 << 16) {
            return Err(PkgError::Input(format!(
                "functional mode is for small layers (d_model·d_ffn ≤ 2^20, ≤ 65536 tokens); got {}×{} and {} tokens",
                layer.d_model,
                layer.d_ffn,
                layer.routing.len()
            )));
        }
        // --- clocks: core, UCIe, DDR, and every link latency in ticks (checked by validate)
        let timing = cfg.timing()?;
        let clocks = timing.clocks.clone();
        let (core, ucie, ddr) = (timing.core, timing.ucie, timing.ddr);
        let tk = timing.tk;
        let tick_ps = timing.tick_ps;
        // --- the layer plan: placement for EP/Hydra
        let owner = match strategy {
            Strategy::Ep => Some(sched::pkg::placement::ep_placement_fl(layer.experts, n).map_err(|e| PkgError::Input(e.to_string()))?),
            Strategy::Hydra => {
                let mut load = vec![0u64; layer.experts];
                for es in &layer.routing {
                    for &e in es {
                        load[e as usize] += 1;
                    }
                }
                Some(sched::pkg::placement::hydra_placement_fl(&load, n).map_err(|e| PkgError::Input(e.to_string()))?)
            }
            _ => None,
        };
        // --- token buffering (A5): Algorithm 2 decides which requests wait at this layer;
        // their tokens keep their homes but compute nothing in this run.
        let tb_cfg = cfg.token_buffer_cfg(strategy)?;
        let buffering = match &layer.requests {
            Some(rq) if tb_cfg.theta_min > 0 => Some(buffering_fl(layer, rq, &tb_cfg, n)?),
            _ => None,
        };
        let routing: Vec<Vec<u16>> = match &buffering {
            Some(b) => layer.routing.iter().zip(&b.req_of_token).map(|(es, &r)| if b.deferred[r] { Vec::new() } else { es.clone() }).collect(),
            None => layer.routing.clone(),
        };
        let plan = LayerPlan::build(&routing, layer.experts, n, strategy, owner);
        let m = cfg.micro_slices as usize;
        let slice_f: Vec<u32> = (0..m).map(|k| ExpertWeights::slice_cols(layer.d_ffn as usize, k, m).len() as u32).collect();
        let slice_bytes: Vec<u32> = slice_f.iter().map(|&f| 3 * layer.d_model * f).collect();
        let slot_bytes = *slice_bytes.iter().max().unwrap() as usize;
        let slots = cfg.slots_for(slot_bytes as u64);
        if slots <= cfg.ddr_reserve {
            return Err(CfgError { field: "weight_buffer_bytes".into(), reason: format!("holds {slots} micro-slices of {slot_bytes} bytes; need more than ddr_reserve ({})", cfg.ddr_reserve) }.into());
        }
        // --- links, allocated at their receivers
        let r = &cfg.router;
        let st = r.st_delay as u64;
        let credit_lat = timing.credit_lat; // sideband credits land on a core edge
        let mut flits = LinkArena::<Flit>::new();
        let mut credits = LinkArena::<Credit>::new();
        let mut msgs = LinkArena::<SchedMsgCl>::new();
        let mut done = LinkArena::<u16>::new();
        let mut ddr_req = LinkArena::<DdrReq>::new();
        let mut ddr_resp = LinkArena::<DdrResp>::new();
        let cl = |c: u64| timing.cl(c) as u32; // core cycles → ticks (validate bounds them)
        let mut flit_in = vec![[LinkId::NONE; NPORTS]; n];
        let mut credit_in = vec![[LinkId::NONE; NPORTS]; n];
        let mut ucie_in = vec![[LinkId::NONE; NPORTS]; n];
        let mut ej = vec![LinkId::NONE; n];
        let mut inj_credit = vec![LinkId::NONE; n];
        for i in 0..n {
            for d in Dir::ALL {
                let p = d.idx();
                if d == Dir::Local {
                    flit_in[i][p] = flits.add(cl(2));
                    credit_in[i][p] = credits.add(cl(2));
                } else if neighbour(i as u32, d, k).is_some() {
                    // From the neighbour's adapter (a crossing into the core domain).
                    flit_in[i][p] = flits.add_cdc(1, tk as u32);
                    credit_in[i][p] = credits.add(credit_lat as u32);
                    // Adapter input of my output p: the router's switch traversal.
                    ucie_in[i][p] = flits.add(cl(st));
                }
            }
            ej[i] = flits.add(cl(st + 2));
            inj_credit[i] = credits.add(cl(2));
        }
        let msg_in: Vec<LinkId> = (0..n).map(|_| msgs.add(cl(2))).collect();
        let done_in: Vec<LinkId> = (0..n).map(|_| done.add(cl(2))).collect();
        let ddr_req_l: Vec<LinkId> = (0..n).map(|_| ddr_req.add_cdc(1, ddr.div as u32)).collect();
        let ddr_resp_l: Vec<LinkId> = (0..n).map(|_| ddr_resp.add_cdc(1, core.div as u32)).collect();
        let mut handoff = LinkArena::<SlotTag>::new();
        // handoff_l[src][dst]
        let handoff_l: Vec<Vec<LinkId>> = (0..n).map(|_| (0..n).map(|_| handoff.add(cl(2))).collect()).collect();
        let mut status = LinkArena::<FreeReport>::new();
        let mut loads = LinkArena::<SlotTag>::new();
        let status_l: Vec<LinkId> = (0..n).map(|_| status.add(cl(2))).collect();
        let load_l: Vec<LinkId> = (0..n).map(|_| loads.add(cl(2))).collect();
        // Landing offsets of core-edge sends (see PkgPart::core_wake); the DDR request's
        // crossing is added where it is sent.
        let core_wake = WakeOffsets::of([tk, cl(2) as u64, cl(st) as u64, cl(st + 2) as u64, credit_lat]);
        // --- the IO die
        // Sharded loading (FSE-DP strategies): every chiplet loads and forwards, so the
        // scheduler's messages go to all of them.
        let sharded = cfg.loaders == Loaders::All && strategy.streams_experts();
        let io_cfg = IoDieCfg { policy: policy(strategy), experts: layer.experts as u32, done_fifo: 32, token_buffer: tb_cfg, broadcast: sharded };
        let io_ports = IoDiePorts { msg_out: msg_in.clone(), done_in: done_in.clone() };
        let mut io = IoDieSchedulerCl::new(rows, cols, &io_cfg, core, io_ports.clone())?;
        let start = match (&buffering, &layer.requests) {
            (Some(b), Some(rq)) => {
                io.load_qos(&rq.bank.t_qos, &rq.bank.c_fw).map_err(|e| PkgError::Input(e.to_string()))?;
                io.begin_layer_requests(0, &b.reqs).map_err(|e| PkgError::Input(e.to_string()))?;
                rtl_iodie.map(|_| LayerStart::Requests { t_qos: rq.bank.t_qos.clone(), c_fw: rq.bank.c_fw.clone(), reqs: b.reqs.clone() })
            }
            _ => {
                let eit = eit_fl(plan.counts(), n).map_err(|e| PkgError::Input(e.to_string()))?;
                io.begin_layer(0, &eit).map_err(|e| PkgError::Input(e.to_string()))?;
                rtl_iodie.map(|_| LayerStart::Eit(eit))
            }
        };
        // The CL model checked the layer; a stand-in gets the same start (built only for one).
        let io: Box<dyn IoDieModel> = match (rtl_iodie, start) {
            (Some(f), Some(start)) => f(rows, cols, &io_cfg, core, io_ports, &start).map_err(|e| PkgError::Input(format!("--rtl scheduler: {e}")))?,
            _ => Box::new(io),
        };
        // --- chiplets
        let knobs = CtrlKnobs { helpers: sharded, ..strategy.knobs(cfg.ddr_reserve) };
        let m_of: Vec<u16> = (0..layer.experts).map(|e| if plan.tokens(e) > 0 { m as u16 } else { 0 }).collect();
        let mut tiles = Vec::with_capacity(n);
        let mut adapter_idx = 0u32;
        for i in 0..n {
            let c = i as u8;
            let coord = Coord::of(i as u32, k);
            let mut ports = RouterPorts { in_flit: flit_in[i], out_flit: [LinkId::NONE; NPORTS], in_credit: credit_in[i], out_credit: [LinkId::NONE; NPORTS] };
            let mut adapters = Vec::new();
            for d in Dir::ALL {
                let p = d.idx();
                if d == Dir::Local {
                    ports.out_flit[p] = ej[i];
                    ports.out_credit[p] = inj_credit[i];
                } else if let Some(nb) = neighbour(i as u32, d, k) {
                    let q = d.opposite().idx();
                    ports.out_flit[p] = ucie_in[i][p];
                    ports.out_credit[p] = credit_in[nb as usize][q];
                    let a = UcieAdapterCl::new(adapter_idx, &cfg.ucie, cfg.seed, ucie, core, UciePorts { in_flit: ucie_in[i][p], out_flit: flit_in[nb as usize][q] }, tick_ps);
                    adapter_idx += 1;
                    adapters.push((d.short(), a));
                }
            }
            let mut router = RouterCl::new(i as u32, k, r, 1, ports);
            router.set_ticks_per_cycle(tk);
            let np = NiPorts { inj_flit: flit_in[i][Dir::Local.idx()], inj_credit: inj_credit[i], ej_flit: ej[i], ej_credit: credit_in[i][Dir::Local.idx()] };
            let mut ni = D2dEngineCl::new(c, k, r.vcs, r.vc_buf, cfg.flit_bytes, np);
            ni.set_ticks_per_cycle(tk);
            let sb = if functional { slot_bytes } else { 0 };
            let mut ctrl: Box<dyn ChipletCtrlModel> = match rtl.ctrl {
                Some(f) => f(c, rows, cols, layer.experts, slots, sb, knobs).map_err(|e| PkgError::Input(format!("--rtl chiplet-ctrl: {e}")))?,
                None => Box::new(ChipletCtrlCl::new(c, layer.experts, slots, sb, knobs)),
            };
            // Tokens computed here, EP dispatch in/out.
            let m_here: Vec<u32> = (0..layer.experts).map(|e| plan.count[e][i]).collect();
            let tokens_here: Vec<Vec<u32>> = if functional { (0..layer.experts).map(|e| plan.tokens_of(&layer.routing, e as u16, c)).collect() } else { Vec::new() };
            let mut missing = vec![0u32; layer.experts];
            let mut out_groups: HashMap<(u16, u8), u32> = HashMap::new();
            let mut combine_to = vec![Vec::new(); layer.experts];
            let mut combine_groups: HashMap<(u16, u8), u32> = HashMap::new();
            for &(_, e, from, to) in &plan.dispatch {
                if to == c {
                    missing[e as usize] += 1;
                    *combine_groups.entry((e, from)).or_default() += 1;
                }
                if from == c {
                    *out_groups.entry((e, to)).or_default() += 1;
                }
            }
            let mut og: Vec<_> = out_groups.into_iter().collect();
            og.sort();
            for ((e, to), cnt) in &og {
                ni.queue_tokens(PacketKind::Dispatch, *e, *cnt, *cnt as usize * layer.d_model as usize * cfg.act_bytes as usize, *to);
            }
            let mut cg: Vec<_> = combine_groups.into_iter().collect();
            cg.sort();
            for ((e, from), cnt) in cg {
                combine_to[e as usize].push((from, cnt));
            }
            // Combine packets this chiplet receives: one per (expert, owner) of its dispatched tokens.
            let combines_expected = og.len() as u32;
            ctrl.begin_layer(&m_of, &missing);
            let grants_expected = (0..layer.experts).filter(|&e| plan.mask(e) >> i & 1 == 1).count() as u32;
            let home_tokens = plan.home.iter().filter(|&&h| h == c).count() as u32;
            let out_tokens = m_here.iter().sum::<u32>();
            let pe = PeArrayCl::new(&cfg.pe, core)?;
            let ddr_ch = DdrChannelCl::new(c, &cfg.ddr, ddr, core, DdrPorts { req_in: ddr_req_l[i], resp_out: ddr_resp_l[i] });
            tiles.push(ChipletTile {
                id: c,
                scope: format!("top.pkg.c_{}_{}", coord.y, coord.x),
                router,
                ni,
                ctrl,
                pe,
                ddr: ddr_ch,
                ucie: adapters,
                msg_in: msg_in[i],
                done_out: done_in[i],
                ddr_req_out: ddr_req_l[i],
                ddr_resp_in: ddr_resp_l[i],
                handoff_out: handoff_l[i].clone(),
                handoff_in: (0..n).filter(|&j| j != i).map(|j| handoff_l[j][i]).collect(),
                handoff_q: std::collections::VecDeque::new(),
                ucie_delivered: 0,
                status_out: status_l[i],
                load_in: load_l[i],
                ddr_depth: cfg.ddr.queue_depth,
                ddr_outstanding: 0,
                ddr_req_free_at: 0,
                pe_job: None,
                rx_slot_reg: None,
                m_here,
                tokens_here,
                combine_to,
                grants_expected,
                grants_seen: 0,
                combines_expected,
                combines_seen: 0,
                home_tokens,
                tokens_in: 0,
                out_tokens,
                wake: WakeSet::default(),
                last_t: 0,
                live_integral: 0,
                pe_state: PeState::Fill,
                breakdown: BreakdownRec::default(),
                mac_rate: 0.0,
                compute_until: 0,
                done_rate: 0.0,
                timeline: None,
                seen: [0; 3],
                peak_token_bytes: 0,
                macs: 0,
                ddr_bytes: 0,
                partials: HashMap::new(),
                progress: 0,
            });
        }
        // --- partitions: bands of chiplets, the IO die with the first
        let threads = (cfg.sim.threads as usize).clamp(1, n);
        let mut parts = Vec::with_capacity(threads);
        let mut it = tiles.into_iter();
        let mut first = 0;
        // Rule 5 (A4): the load arbiter; a claim waits for the status that reflects the
        // previous one (load link + status link + 1 cycle).
        let rule5 = (strategy == Strategy::A4).then(|| LoadArbiterCl::new(n, m_of.clone(), PkgTraj::new(rows, cols), core, ArbiterPorts { status_in: &status_l, load_out: &load_l }, 5));
        let mut io = Some(IoDieTile { sched: io, rule5, wake: WakeSet::default() });
        for p in 0..threads {
            let take = (n - first) / (threads - p);
            parts.push(PkgPart { tiles: it.by_ref().take(take).collect(), iodie: if p == 0 { io.take() } else { None }, log: None, core_wake: core_wake.clone() });
            first += take;
        }
        // Functional data: the DDR image and the activations.
        let func = if functional {
            let d = layer.d_model as usize;
            let weights: Vec<ExpertWeights> = (0..layer.experts as u32).map(|e| ExpertWeights::generate(cfg.seed, e, d, layer.d_ffn as usize)).collect();
            let image = weights.iter().map(|w| (0..m).map(|k| w.micro_slice(k, m).to_bytes()).collect()).collect();
            let x = sched::pkg::moe::generate_tokens(cfg.seed, layer.routing.len(), d);
            Some(FuncData { x, image, weights })
        } else {
            None
        };
        let pools = if functional {
            // Every flit that can be in flight from one sender: all buffers of the package.
            let per = (n * (NPORTS + 1) * (r.vcs * r.vc_buf) as usize + 64).next_power_of_two() * 4;
            PayloadPools::new(n, per, cfg.flit_bytes as usize)
        } else {
            PayloadPools::new(0, 0, cfg.flit_bytes as usize)
        };
        let ctx = PkgCtx {
            traj: if sharded { PkgTraj::new(rows, cols).sharded() } else { PkgTraj::new(rows, cols) },
            core,
            ucie,
            ddr,
            d_model: layer.d_model,
            micro_slices: m as u16,
            slice_f,
            slice_bytes,
            slot_bytes,
            act_bytes: cfg.act_bytes,
            out_bytes: cfg.out_bytes,
            ddr_burst_bytes: cfg.ddr.burst_bytes() as u64,
            flit_bytes: cfg.flit_bytes as u64,
            func,
        };
        let mut pkg = Package {
            cfg: cfg.clone(),
            strategy,
            parts,
            wires: PkgWires { flits, credits, msgs, done, ddr_req, ddr_resp, handoff, status, loads, pools },
            ctx,
            clocks,
            plan,
            routing,
            buffering,
            now: 0,
            evaluated: 0,
        };
        if cfg.sim.timeline {
            pkg.enable_timeline();
        }
        Ok(pkg)
    }

    pub fn tiles(&self) -> impl Iterator<Item = &ChipletTile> {
        self.parts.iter().flat_map(|p| p.tiles.iter())
    }

    pub fn iodie(&self) -> &dyn IoDieModel {
        self.parts[0].iodie.as_ref().expect("the IO die rides in partition 0").sched.as_ref()
    }

    /// Harness tick, ps (the waveform timescale).
    pub fn tick_ps(&self) -> u64 {
        self.clocks.tick_ps()
    }

    /// All traceable signals in global id order: the IO die, then the chiplets.
    pub fn signals(&self) -> Vec<SignalDecl> {
        let mut out = Vec::new();
        for p in &self.parts {
            if let Some(io) = &p.iodie {
                io.sched.declare(&["top".into(), "pkg".into(), "iodie".into()], &mut out);
                if let Some(a) = &io.rule5 {
                    a.declare(&["top".into(), "pkg".into(), "iodie".into()], &mut out);
                }
            }
            for t in &p.tiles {
                t.declare(&mut out);
            }
        }
        out
    }

    /// Starts recording value changes.
    /// Records each chiplet's activity per time bin into the result's `timeline`.
    pub fn enable_timeline(&mut self) {
        let (tk, macs) = (self.ctx.core.div, self.cfg.pe.macs());
        for p in self.parts.iter_mut() {
            for t in p.tiles.iter_mut() {
                t.timeline = Some(TimelineRec::new(1, tk, macs));
            }
        }
    }

    pub fn enable_trace(&mut self) {
        let mut base = 0;
        for p in self.parts.iter_mut() {
            let mut decl = Vec::new();
            if let Some(io) = &p.iodie {
                io.sched.declare(&[], &mut decl);
                if let Some(a) = &io.rule5 {
                    a.declare(&[], &mut decl);
                }
            }
            for t in &p.tiles {
                t.declare(&mut decl);
            }
            p.log = Some(ChangeLog::new(base, decl.len()));
            base += decl.len();
        }
    }

    /// Moves recorded changes into `sink`, merged in (tick, signal) order.
    pub fn drain_trace(&mut self, sink: &mut dyn SignalSink) -> Result<(), PkgError> {
        let mut logs: Vec<&mut ChangeLog> = self.parts.iter_mut().filter_map(|p| p.log.as_mut()).collect();
        ChangeLog::drain_merged(&mut logs, sink).map_err(PkgError::Wave)
    }

    /// Runs the layer to its end. With `sink`, value changes are written as they are drained
    /// (every `chunk` core cycles, so memory stays bounded).
    pub fn run(&mut self, mut sink: Option<&mut dyn SignalSink>) -> Result<PkgResult, PkgError> {
        let t0 = std::time::Instant::now();
        if sink.is_some() {
            self.enable_trace();
        }
        let tk = self.ctx.core.div;
        let end = self.cfg.sim.max_cycles.saturating_mul(tk);
        let threads = self.cfg.sim.threads as usize;
        let chunk = 1u64 << 16;
        let mut ctl = ClockedControl::new(self.clocks.clone(), 0, self.parts.len(), self.cfg.sim.fast_forward, self.cfg.sim.watchdog_cycles.saturating_mul(tk));
        // Progress here is a flit moved or delivered, a controller event, PE compute or DDR
        // service — never a replay — so an unfinished package without it is stuck, busy or not.
        ctl.watch_unfinished = true;
        loop {
            ctl.end = (self.now + chunk * tk).min(end);
            let (last, c) = run_partitions(&mut self.parts, &self.wires, &self.ctx, self.now, ctl, threads);
            ctl = c;
            self.now = self.clocks.next_edge(last + 1);
            if let Some(s) = sink.as_deref_mut() {
                self.drain_trace(s)?;
            }
            if ctl.tripped {
                return Err(PkgError::Watchdog(Box::new(self.watchdog_report(last, ctl.watchdog.stalled_for() / tk))));
            }
            if ctl.finished {
                self.evaluated += ctl.evaluated;
                // The last core cycle (the result counts it) into the time integrals.
                let (end, slot) = (self.ctx.core.edge_after(last), self.ctx.slot_bytes);
                for p in self.parts.iter_mut() {
                    p.tiles.iter_mut().for_each(|t| t.integrate(end, slot));
                }
                self.check_buffering()?;
                return Ok(self.result(last, t0.elapsed().as_secs_f64()));
            }
            if last >= end {
                return Err(PkgError::Timeout(self.cfg.sim.max_cycles, Box::new(self.watchdog_report(last, 0))));
            }
        }
    }

    fn watchdog_report(&self, tick: Cycle, stalled_for: u64) -> WatchdogReport {
        let mut blocked = Vec::new();
        let mut waiting = Vec::new();
        let io = self.iodie();
        blocked.push((0, format!("top.pkg.iodie: {}", io.report())));
        for t in self.tiles() {
            let mut lines = Vec::new();
            t.ctrl.blocked_report(&format!("{}.ctrl", t.scope), &mut lines);
            for l in lines {
                blocked.push((0, l));
            }
            if t.grants_seen < t.grants_expected {
                blocked.push((0, format!("{}.ctrl: {} of {} grants received; pending {}", t.scope, t.grants_seen, t.grants_expected, t.ctrl.pending())));
            }
            if t.combines_seen < t.combines_expected {
                blocked.push((0, format!("{}.d2d: waits for {} combine packets", t.scope, t.combines_expected - t.combines_seen)));
            }
            t.router.blocked_report(&format!("{}.router", t.scope), &mut blocked, &mut waiting);
            let mut lines = Vec::new();
            t.ni.report(&format!("{}.d2d", t.scope), &mut lines);
            blocked.extend(lines.into_iter().map(|l| (0, l)));
            for (d, a) in &t.ucie {
                if let Some(r) = a.report() {
                    blocked.push((0, format!("{}.ucie_{d}: {r}", t.scope)));
                }
            }
            if !t.finished() {
                blocked.push((0, format!("{}: not finished: {}", t.scope, t.unfinished())));
            }
        }
        if let Some(a) = &self.parts[0].iodie.as_ref().and_then(|io| io.rule5.as_ref()) {
            blocked.push((0, format!("top.pkg.iodie.rule5: {}", a.report())));
        }
        let strip = |v: Vec<(Cycle, String)>| v.into_iter().map(|(_, s)| s).collect();
        WatchdogReport { cycle: tick / self.ctx.core.div, stalled_for, blocked: strip(blocked), waiting: strip(waiting) }
    }

    /// The IO die's token-buffering decisions and QoS bank equal the FL twin's.
    fn check_buffering(&self) -> Result<(), PkgError> {
        let Some(b) = &self.buffering else { return Ok(()) };
        let io = self.iodie();
        if io.deferred() != b.deferred {
            return Err(PkgError::Check(format!("IO die deferred {:?}, Algorithm 2 (FL) {:?}", io.deferred(), b.deferred)));
        }
        let (t, c) = io.qos_bank();
        if t != b.bank_after.t_qos || c != b.bank_after.c_fw {
            return Err(PkgError::Check("IO die QoS timer bank differs from Algorithm 2 (FL)".into()));
        }
        Ok(())
    }

    /// Token buffering's answer for this layer: indices of the tokens deferred (their
    /// requests wait for a later iteration) and the QoS bank after the boundary.
    pub fn buffering_outcome(&self) -> Option<(Vec<usize>, TokenBufferFl)> {
        let b = self.buffering.as_ref()?;
        let tokens = b.req_of_token.iter().enumerate().filter(|(_, &r)| b.deferred[r]).map(|(t, _)| t).collect();
        Some((tokens, b.bank_after.clone()))
    }

    /// Every token's output (sum of its experts' partial outputs) against the dense reference.
    pub fn check_outputs(&self) -> Option<bool> {
        let f = self.ctx.func.as_ref()?;
        let d = self.ctx.d_model as usize;
        let reference = moe_layer_ref_fl(&f.x, &self.routing, &f.weights);
        let mut got = vec![0i32; reference.len()];
        let mut complete = true;
        for (t, es) in self.routing.iter().enumerate() {
            for &e in es {
                let p = self.tiles().find_map(|tile| tile.partials.get(&(t as u32, e)));
                match p {
                    Some(p) => {
                        for (g, v) in got[t * d..(t + 1) * d].iter_mut().zip(p) {
                            *g = g.wrapping_add(*v);
                        }
                    }
                    None => complete = false,
                }
            }
        }
        Some(complete && got == reference)
    }

    fn result(&self, last: Cycle, wall: f64) -> PkgResult {
        let tk = self.ctx.core.div;
        let latency = last.div_ceil(tk).max(1);
        let pe_macs = self.cfg.pe.macs();
        let n = self.cfg.chiplets() as u64;
        let slot = self.ctx.slot_bytes as u64;
        let mut chiplets = Vec::new();
        let (mut macs, mut ddr_bytes, mut d2d, mut replays) = (0u64, 0u64, 0u64, 0u64);
        let (mut peak_w, mut mean_w, mut peak_t) = (0u64, 0f64, 0u64);
        let mut ddr_peak = 0.0;
        let mut d2d_peak = 0.0;
        let mut cycles = CycleBreakdown::default();
        for t in self.tiles() {
            let rep: u64 = t.ucie.iter().map(|(_, a)| a.stats().replays).sum();
            let tx = t.ni.stats.tx_flits * self.cfg.flit_bytes as u64;
            let pw = t.ctrl.peak_slots() as u64 * slot;
            chiplets.push(ChipletResult {
                id: t.id,
                pe_busy_cycles: t.pe.counters.busy_cycles,
                macs: t.macs,
                ddr_bytes: t.ddr_bytes,
                d2d_tx_bytes: tx,
                peak_ring_slots: t.ctrl.peak_slots(),
                peak_weight_bytes: pw,
                peak_token_bytes: t.peak_token_bytes,
                rule1_computes: t.ctrl.stats().rule1_computes,
                rule2_computes: t.ctrl.stats().rule2_computes,
                replays: rep,
                evictions: t.ctrl.stats().evictions,
                handoffs: t.ctrl.stats().handoffs_out,
                reloads: t.ctrl.stats().reloads,
                forwards: t.ctrl.stats().forwards,
                rx_stall_cycles: t.ni.stats.rx_slot_wait_cycles,
                cycles: t.breakdown.finish(tk, latency),
            });
            cycles.add(&chiplets.last().expect("pushed").cycles);
            macs += t.macs;
            ddr_bytes += t.ddr_bytes;
            d2d += tx;
            replays += rep;
            peak_w += pw;
            mean_w += t.live_integral as f64 * slot as f64 / last.max(1) as f64;
            peak_t += t.peak_token_bytes;
            ddr_peak += t.ddr.peak_bytes_per_tick() * tk as f64;
            d2d_peak += t.ucie.iter().map(|(_, a)| a.bytes_per_tick() * tk as f64).sum::<f64>();
        }
        let peak = PeakRates { ddr_bytes_per_cycle: ddr_peak, macs_per_cycle: (pe_macs * n) as f64, d2d_bytes_per_cycle: d2d_peak };
        let roof = Roofline::of(ddr_bytes, macs, d2d, &peak);
        PkgResult {
            strategy: self.strategy,
            latency_cycles: latency,
            utilization: macs as f64 / (peak.macs_per_cycle * latency as f64),
            peak_weight_bytes: peak_w,
            mean_weight_bytes: mean_w,
            peak_token_bytes: peak_t,
            ddr_bytes,
            d2d_bytes: d2d,
            macs,
            sched_decision_cycles_max: self.iodie().stats().decision_cycles_max,
            roofline_cycles: roof.cycles,
            roofline: roof,
            roofline_ratio: latency as f64 / roof.cycles.max(1) as f64,
            cycles_per_second: latency as f64 / wall.max(1e-9),
            wall_seconds: wall,
            replays,
            outputs_match_reference: self.check_outputs(),
            rule5_redirected: self.parts[0].iodie.as_ref().and_then(|io| io.rule5.as_ref()).map_or(0, |a| a.stats.redirected),
            session: Default::default(),
            pe_busy_fraction: chiplets.iter().map(|c| c.pe_busy_cycles as f64).sum::<f64>() / (n * latency) as f64,
            cycles,
            chiplets,
            timeline: {
                let recs: Vec<TimelineRec> = self.tiles().filter_map(|t| t.timeline.clone()).collect();
                (!recs.is_empty()).then(|| TimelineRec::join(recs, latency))
            },
        }
    }
}
