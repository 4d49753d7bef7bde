//! One chiplet of the package as the partitions step it: its blocks (die router, D2D engine,
//! chiplet controller, PE array, DDR channel, the UCIe adapters of its outgoing die-to-die
//! links) and the glue between them — the tile's link ends, the registered glue between the
//! controller and its neighbours, this layer's work, the run's counters and time integrals,
//! and in functional mode the partial outputs computed here.
//!
//! The glue is registered: the controller's PE start is issued to the array at the next
//! core edge, the slot it gives a waiting D2D head reaches the engine at the next edge, DDR
//! requests and responses cross into and out of the DDR domain on crossing links.
//!
//! The per-edge methods are `#[inline]`: the partition step that calls them (package.rs) is
//! another codegen unit now, and without the hint they were no longer inlined there (the
//! package bench ran ~2% slower than when they shared a file).

use std::collections::{HashMap, VecDeque};

use sched::pkg::iodie::SchedMsg;
use sched::pkg::moe::{micro_slice_partial_fl, MicroSliceWeights};

use super::chiplet::{ChipletCtrlModel, ChipletId, CtrlIn, CtrlOut, CtrlSched, ExpertId};
use super::ddr::{DdrChannelCl, DdrReq};
use super::ni::{D2dEngineCl, PacketKind};
use super::pe_array::{PeArrayCl, PeComputeModel, PeJob};
use super::ring::SlotTag;
use super::timeline::{BreakdownRec, MacRate, PeState, TimelineRec};
use super::ucie::UcieAdapterCl;
use super::wires::{FuncData, PkgCtx, PkgWires};
use crate::harness::{ChangeLog, Cycle, LinkId, Probe, SignalDecl, WakeOffsets, WakeSet};
use crate::noc::router::RouterCl;

/// One chiplet: its blocks (public: testbenches and reports read them) and their glue.
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
    pub(super) links: TileLinks,
    pub(super) glue: TileGlue,
    pub(super) work: TileWork,
    pub(super) stats: TileStats,
    pub(super) activity: TileActivity,
    /// Functional mode: partial outputs per (token, expert).
    pub(super) partials: FuncPartials,
    /// `--rtl pe`: the functional arithmetic on this model (else the FL twin's), and its
    /// first error.
    pub(super) pe_compute: Option<Box<dyn PeComputeModel>>,
    pub(super) pe_error: Option<String>,
    /// Ticks at which values this tile's blocks sent land (the tile is evaluated then).
    pub(super) wake: WakeSet,
    /// Its part of the partition's status at its last evaluated tick.
    pub(super) status: TileStatus,
    /// What the status reads of the adapters, refreshed where one is evaluated.
    pub(super) ucie_sum: UcieSummary,
    /// First tick at which one of its blocks has something due (it sleeps until then unless
    /// a value from outside lands on it; 0 at the start of a run).
    pub(super) need_at: Cycle,
    /// The blocks evaluated at the current tick (tracing samples only those).
    pub(super) touched: Touched,
    /// The router was at rest ([`RouterCl::at_rest`]) at its last evaluation (traced runs).
    pub(super) router_rest: bool,
    /// The last evaluated core edge left work for the next one (`core_edge`'s answer).
    pub(super) core_active: bool,
    /// The ring's change count at its last sample (`None`: sample at every core edge).
    pub(super) ring_seen: Option<u64>,
    /// The adapters have been evaluated through this tick: the UCIe edge after a core edge,
    /// run at the core edge (`UcieAdapterCl::eval_ahead`; untraced, fast-forward on). Not
    /// reset between runs: the adapters' registers are past it.
    pub(super) ucie_ahead_to: Cycle,
    /// Traced: where its DDR channel's signals start in its partition's change log.
    pub(super) ddr_sig: u32,
}

/// Which of a tile's blocks were evaluated at a tick: the core-domain blocks (controller, D2D
/// engine, PE array, router), the DDR channel, the UCIe adapters (bit per adapter).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Touched {
    /// A core edge: the D2D engine is evaluated (the other core-domain blocks may be
    /// skipped, below).
    pub(super) core: bool,
    /// The router: evaluated at core edges, skipped too when at rest before and after.
    pub(super) router: bool,
    /// The controller's ring: at core edges where its change count moved.
    pub(super) ring: bool,
    /// The controller stepped (not settled) and the PE array stepped (`core_edge`).
    pub(super) ctrl: bool,
    pub(super) pe: bool,
    pub(super) ddr: bool,
    pub(super) ucie: u32,
}

impl Touched {
    /// Any block of the tile evaluated (else its status is the one cached at its last
    /// evaluation).
    pub(super) fn any(&self) -> bool {
        self.core || self.ddr || self.ucie != 0
    }
}

/// A tile's part of its partition's status, a function of its blocks' state only: cached
/// at the tile's last evaluated tick and reused at the ticks where none of its blocks is
/// evaluated (the UCIe and DDR edges between core edges, when this tile's adapters and
/// channel are not due) — the same values the blocks would report, without re-reading
/// them. `valid` is cleared when a run starts (the blocks are public and may have been
/// changed between runs).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct TileStatus {
    pub(super) valid: bool,
    /// Core-domain work at the next core edge: flits in the router, the D2D engine with
    /// more than a slot to wait for, or a DDR request or response on the crossing links.
    pub(super) core_due: bool,
    /// The core-domain blocks' part of `core_due` (the router's flits, the D2D engine's
    /// work): they change only at core edges, so it is kept from the last one.
    pub(super) core_work: bool,
    /// An adapter hands one flit per edge to the router (its other work is announced by its
    /// next event); the DDR channel's work at the next tick.
    pub(super) busy: bool,
    /// The blocks' next events (the PE array's, the channel's, the adapters'; traced, also
    /// the edges where a traced register changes on its own — so the waveform is the same
    /// with and without fast-forward); the wake set is read at every tick.
    pub(super) next_event: Cycle,
    pub(super) ddr_requests: bool,
    /// Flits the adapters have delivered (progress counter).
    pub(super) ucie_delivered: u64,
    pub(super) finished: bool,
    /// The PE array computes (progress at every core edge, for the watchdog).
    pub(super) pe_busy: bool,
}

impl TileStatus {
    /// The whole status (at a core edge, or when the cache is not valid). Reads
    /// `t.ucie_sum`, which must be current (refreshed after the adapters' evaluation).
    #[inline]
    pub(super) fn of(t: &ChipletTile, traced: bool) -> Self {
        let s = TileStatus {
            valid: true,
            core_work: t.router.occupancy() > 0 || (t.ni.busy() && !t.ni.waiting_for_slot_only()),
            finished: t.finished(),
            pe_busy: t.pe.busy(),
            ..Default::default()
        };
        s.with_edges(t, traced)
    }

    /// Between core edges only the DDR channel and the adapters are evaluated: the fields
    /// they change, with the core-domain blocks' (`core_work`, `finished`, `pe_busy`) kept
    /// from the last core edge — the same values, without reading the router, the D2D
    /// engine and the controller again. Reads `t.ucie_sum` as [`Self::of`].
    #[inline]
    pub(super) fn with_edges(mut self, t: &ChipletTile, traced: bool) -> Self {
        let ddr_wait = t.glue.ddr_outstanding > 0 && !t.ddr.has_requests();
        let mut next_event = t.pe.next_event().min(t.ddr.next_event());
        if traced {
            next_event = next_event.min(t.pe.next_change()).min(t.ddr.traced_next_event());
        }
        let u = &t.ucie_sum;
        self.core_due = self.core_work || ddr_wait;
        self.busy = u.delivering || t.ddr.busy();
        self.next_event = next_event.min(u.next_event);
        self.ddr_requests = t.ddr.has_requests();
        self.ucie_delivered = u.delivered;
        self
    }
}

/// The tile's adapters as its status reads them: their earliest next event, whether one
/// hands a flit to the router at its next edge, the flits delivered. Only an adapter's
/// `eval` changes these, so the tile keeps them from the last tick one was evaluated: the
/// status is re-read at every core edge, the adapters are evaluated far less often (a
/// third of a tile's status cost was these three loops over adapters that had not moved).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct UcieSummary {
    pub(super) next_event: Cycle,
    pub(super) delivering: bool,
    pub(super) delivered: u64,
}

impl UcieSummary {
    /// `next_core`: the adapters have been run through the UCIe edge before this core edge
    /// (`UcieAdapterCl::eval_ahead`), so one that holds flits for the router delivers the
    /// next at that core edge, not at the next tick.
    #[inline]
    pub(super) fn of(ucie: &[(&'static str, UcieAdapterCl)], next_core: Option<Cycle>) -> Self {
        let mut u = UcieSummary { next_event: crate::harness::NEVER, delivering: false, delivered: 0 };
        for (_, a) in ucie {
            u.next_event = u.next_event.min(a.next_event());
            u.delivering |= a.delivering();
            u.delivered += a.stats().delivered;
        }
        if let (true, Some(c)) = (u.delivering, next_core) {
            u.delivering = false;
            u.next_event = u.next_event.min(c);
        }
        u
    }
}

/// The tile's ends of the package's links (ids in the arenas of [`PkgWires`]).
pub(super) struct TileLinks {
    pub(super) msg_in: LinkId,
    pub(super) done_out: LinkId,
    pub(super) ddr_req_out: LinkId,
    pub(super) ddr_resp_in: LinkId,
    /// Rule 5: free-slot reports out, load assignments in.
    pub(super) status_out: LinkId,
    pub(super) load_in: LinkId,
}

/// Registered glue between the controller and its neighbours.
pub(super) struct TileGlue {
    /// PE job issued at the next edge.
    pub(super) pe_job: Option<PeJob>,
    /// Slot for the waiting D2D head, given at the next edge.
    pub(super) rx_slot_reg: Option<u32>,
    /// Hand-offs received but not yet taken by the controller (one per cycle).
    pub(super) handoff_q: VecDeque<SlotTag>,
    /// Fetches received but not yet taken by the controller (one per cycle).
    pub(super) fetch_q: VecDeque<SlotTag>,
    pub(super) slot_req_q: VecDeque<SlotTag>,
    /// DDR requests in flight, and how many the channel's queue takes.
    pub(super) ddr_outstanding: u32,
    pub(super) ddr_depth: u32,
    /// First tick the DDR request crossing is free again: the crossing carries one request
    /// per DDR edge, so a core faster than the DDR holds its next request (the controller
    /// sees `ddr_ready` low) rather than landing two on one DDR edge (issue 19).
    pub(super) ddr_req_free_at: Cycle,
}

impl TileGlue {
    pub(super) fn new(ddr_depth: u32) -> Self {
        TileGlue { pe_job: None, rx_slot_reg: None, handoff_q: VecDeque::new(), fetch_q: VecDeque::new(), slot_req_q: VecDeque::new(), ddr_outstanding: 0, ddr_depth, ddr_req_free_at: 0 }
    }
}

/// This layer's work on the tile, fixed when the package is built.
pub(super) struct TileWork {
    /// Tokens computed here per expert (PE job rows) and, functional mode, their ids.
    pub(super) m_here: Vec<u32>,
    pub(super) tokens_here: Vec<Vec<u32>>,
    /// EP/Hydra: tokens of each expert this chiplet owns, per home (for the combine).
    pub(super) combine_to: Vec<Vec<(ChipletId, u32)>>,
    /// Grants addressed to this chiplet, and combine packets it receives.
    pub(super) grants_expected: u32,
    pub(super) combines_expected: u32,
    /// Activations of the tokens homed here, and outputs accumulated here, in tokens.
    pub(super) home_tokens: u32,
    pub(super) out_tokens: u32,
}

/// Counters of the run.
#[derive(Debug, Clone, Default)]
pub(super) struct TileStats {
    pub(super) grants_seen: u32,
    pub(super) combines_seen: u32,
    /// Activations dispatched in, tokens.
    pub(super) tokens_in: u32,
    /// Flits the adapters had delivered at the last evaluation (progress counter).
    pub(super) ucie_delivered: u64,
    pub(super) peak_token_bytes: u64,
    pub(super) macs: u64,
    pub(super) ddr_bytes: u64,
    /// DDR bytes of deadlock-escape reloads (part of `ddr_bytes`).
    pub(super) reload_bytes: u64,
    /// Progress since the partition last read it (watchdog).
    pub(super) progress: u64,
}

/// Time accounting: the state held between evaluated core edges, integrated over time.
#[derive(Debug, Clone, Default)]
pub(super) struct TileActivity {
    pub(super) last_t: Cycle,
    /// Time integral of live ring slots (slot·ticks), for the mean weight memory.
    pub(super) live_integral: u128,
    /// What the PE array is doing since the last core edge, and its integral.
    pub(super) pe_state: PeState,
    pub(super) breakdown: BreakdownRec,
    /// MACs per cycle of the job in (or entering) the PE array.
    pub(super) mac_rate: MacRate,
    /// A job's last busy cycle is the edge that reports it done: that cycle (until this
    /// tick, at that job's MAC rate) still computes whatever the state after the edge.
    pub(super) compute_until: Cycle,
    pub(super) done_rate: MacRate,
    /// Activity per time bin (when asked for), and the traffic counters it last read.
    pub(super) timeline: Option<TimelineRec>,
    pub(super) seen: TrafficBytes,
}

/// Traffic of a tile in bytes (timeline input): DDR data bursts read, D2D flits sent and
/// received.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct TrafficBytes {
    pub(super) ddr_read: u64,
    pub(super) d2d_tx: u64,
    pub(super) d2d_rx: u64,
}

/// Functional mode: the partial outputs computed on this chiplet, per (token, expert),
/// accumulated over the expert's micro-slices.
#[derive(Debug, Clone, Default)]
pub(super) struct FuncPartials {
    by_token_expert: HashMap<(u32, ExpertId), Vec<i32>>,
}

impl FuncPartials {
    /// Adds `p` (`d` values) to token `t`'s partial output of expert `e`.
    fn add(&mut self, t: u32, e: ExpertId, p: &[i32]) {
        let acc = self.by_token_expert.entry((t, e)).or_insert_with(|| vec![0; p.len()]);
        for (a, v) in acc.iter_mut().zip(p) {
            *a = a.wrapping_add(*v);
        }
    }

    pub(super) fn get(&self, t: u32, e: ExpertId) -> Option<&Vec<i32>> {
        self.by_token_expert.get(&(t, e))
    }
}

fn to_ctrl(m: SchedMsg) -> CtrlSched {
    match m {
        SchedMsg::Preload { expert, mask } => CtrlSched::Preload { expert, mask },
        SchedMsg::Grant { expert, mask, .. } => CtrlSched::Grant { expert, mask },
    }
}

impl ChipletTile {
    /// A tile at the start of the layer: its blocks, link ends and work (`ddr_depth`: the DDR
    /// channel's queue); no glue in flight, counters at zero.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        id: ChipletId,
        scope: String,
        router: RouterCl,
        ni: D2dEngineCl,
        ctrl: Box<dyn ChipletCtrlModel>,
        pe: PeArrayCl,
        ddr: DdrChannelCl,
        ucie: Vec<(&'static str, UcieAdapterCl)>,
        links: TileLinks,
        work: TileWork,
        ddr_depth: u32,
    ) -> Self {
        let glue = TileGlue::new(ddr_depth);
        ChipletTile {
            id,
            scope,
            router,
            ni,
            ctrl,
            pe,
            ddr,
            ucie,
            links,
            glue,
            work,
            stats: TileStats::default(),
            activity: TileActivity::default(),
            partials: FuncPartials::default(),
            pe_compute: None,
            pe_error: None,
            wake: WakeSet::default(),
            status: Default::default(),
            ucie_sum: Default::default(),
            need_at: 0,
            touched: Touched::default(),
            router_rest: false,
            core_active: false,
            ring_seen: None,
            ucie_ahead_to: 0,
            ddr_sig: 0,
        }
    }

    /// Which of the end conditions of [`Self::finished`] still fail (watchdog report).
    pub(super) fn unfinished(&self) -> String {
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
        if self.glue.pe_job.is_some() || self.pe.busy() {
            v.push("PE array busy".to_string());
        }
        if !self.glue.handoff_q.is_empty() {
            v.push(format!("{} hand-offs queued", self.glue.handoff_q.len()));
        }
        if !self.glue.fetch_q.is_empty() || !self.glue.slot_req_q.is_empty() {
            v.push(format!("{} fetches and {} slot requests queued", self.glue.fetch_q.len(), self.glue.slot_req_q.len()));
        }
        if self.glue.ddr_outstanding > 0 {
            v.push(format!("{} DDR requests outstanding", self.glue.ddr_outstanding));
        }
        if v.is_empty() {
            v.push("links or adapters still busy".to_string());
        }
        v.join(", ")
    }

    #[inline]
    pub(super) fn finished(&self) -> bool {
        self.ctrl.quiescent()
            && self.stats.grants_seen == self.work.grants_expected
            && self.stats.combines_seen == self.work.combines_expected
            && !self.ni.busy()
            && self.router.occupancy() == 0
            && self.glue.pe_job.is_none()
            && self.glue.handoff_q.is_empty()
            && self.glue.fetch_q.is_empty()
            && self.glue.slot_req_q.is_empty()
            && self.glue.rx_slot_reg.is_none()
            && !self.pe.busy()
            && self.glue.ddr_outstanding == 0
            && !self.ddr.has_requests()
            && self.ucie.iter().all(|(_, a)| !a.busy())
    }

    /// Time integrals of the state held since the last core edge, up to tick `now`: live
    /// ring slots, the cycle breakdown, the timeline.
    #[inline]
    pub(super) fn integrate(&mut self, now: Cycle, slot_bytes: usize) {
        let live = self.ctrl.live_slots() as u128;
        self.activity.live_integral += live * (now - self.activity.last_t) as u128;
        let split = self.activity.compute_until.clamp(self.activity.last_t, now);
        self.activity.breakdown.add(PeState::Compute, split - self.activity.last_t);
        self.activity.breakdown.add(self.activity.pe_state, now - split);
        if let Some(tl) = self.activity.timeline.as_mut() {
            let w = live as u64 * slot_bytes as u64;
            tl.interval(0, self.activity.last_t, split, true, self.activity.done_rate, w);
            tl.interval(0, split, now, self.activity.pe_state == PeState::Compute, self.activity.mac_rate, w);
        }
        self.activity.last_t = now;
    }

    /// The PE array's state from this core edge on (see [`CycleBreakdown`]).
    #[inline]
    pub(super) fn pe_state_now(&self) -> PeState {
        if self.pe.busy() {
            PeState::Compute
        } else if self.pe.counters.busy_cycles == 0 && self.glue.pe_job.is_none() {
            PeState::Fill
        } else if self.glue.ddr_outstanding > 0 {
            PeState::DdrWait
        } else if self.ctrl.pending() > 0 {
            PeState::D2dWait
        } else {
            PeState::SchedWait
        }
    }

    /// DDR data bursts and D2D flits since the last core edge, into the timeline.
    pub(super) fn count_traffic(&mut self, now: Cycle, ctx: &PkgCtx) {
        let now_counts = TrafficBytes { ddr_read: self.ddr.stats().reads * ctx.ddr_burst_bytes, d2d_tx: self.ni.stats.tx_flits * ctx.flit_bytes, d2d_rx: self.ni.stats.rx_flits * ctx.flit_bytes };
        let seen = std::mem::replace(&mut self.activity.seen, now_counts);
        if let Some(tl) = self.activity.timeline.as_mut() {
            tl.count(0, now, now_counts.ddr_read - seen.ddr_read, now_counts.d2d_tx - seen.d2d_tx, now_counts.d2d_rx - seen.d2d_rx);
        }
    }

    fn token_bytes(&self, ctx: &PkgCtx) -> u64 {
        (self.work.home_tokens + self.stats.tokens_in) as u64 * ctx.d_model as u64 * ctx.act_bytes as u64 + self.work.out_tokens as u64 * ctx.d_model as u64 * 4
    }

    /// One core edge of the chiplet's core-domain blocks.
    ///
    /// `gate` (fast-forward on): the controller is not stepped at an edge where its inputs
    /// are those of its last step and that step changed nothing ([`ChipletCtrlModel::settled_for`];
    /// at most edges of a streaming layer it waits for the PE array or a whole micro-slice);
    /// nor is the PE array before its next event (its done edge; traced, the end of the
    /// current fold): it catches up there, as after a sleep — those cycles have no inputs and
    /// no outputs, and only its untraced cycle-in-fold counter moves.
    ///
    /// # Safety
    /// Engine protocol: sole sender/receiver of this tile's links, at core edge `now`.
    #[inline]
    pub(super) unsafe fn core_edge(&mut self, now: Cycle, w: &PkgWires, ctx: &PkgCtx, core_wake: &WakeOffsets, gate: bool, traced: bool) -> bool {
        let mut active = false;
        // --- registered inputs
        let sched = w.msgs.recv(self.links.msg_in, now).map(|m| to_ctrl(m.msg));
        if let Some(CtrlSched::Grant { mask, .. }) = sched {
            if mask >> self.id.0 & 1 == 1 {
                self.stats.grants_seen += 1;
            }
        }
        let ddr_landed = w.ddr_resp.recv(self.links.ddr_resp_in, now).map(|r| {
            self.glue.ddr_outstanding -= 1;
            r.id
        });
        if let (Some(s), Some(f)) = (ddr_landed, ctx.func.as_ref()) {
            let tag = self.ctrl.slot_tag(s);
            let src = &f.image[tag.expert.idx()][tag.k as usize];
            let b = s as usize * ctx.slot_bytes;
            self.ctrl.ring_data_mut()[b..b + src.len()].copy_from_slice(src);
        }
        // The control sideband (hand-offs, fetches, slot requests from every other
        // chiplet, in chiplet order), polled only at ticks where something lands.
        let me = self.id.idx();
        w.handoff.recv_each(me, now, |tag| self.glue.handoff_q.push_back(tag));
        w.fetch.recv_each(me, now, |tag| self.glue.fetch_q.push_back(tag));
        w.slot_req.recv_each(me, now, |tag| self.glue.slot_req_q.push_back(tag));
        // The inbox mark covers every router input (builder.rs): the router polls them only
        // when something lands on the tile.
        let lands = w.inbox.lands(me, now);
        let (moved, sent) = self.router.eval_if(now, &w.flits, &w.credits, lands);
        let pe_job = self.glue.pe_job.take();
        // Until its next event (the done edge; traced, the next edge a traced register
        // changes, the end of a fold) the PE array changes nothing the tile or the waveform
        // reads: it is stepped there and catches up, as after a sleep.
        let pe_idle = gate && pe_job.is_none() && now < self.pe.next_step(traced);
        self.touched.pe = !pe_idle;
        let pe_done = if pe_idle { None } else { self.pe.eval(now, pe_job) };
        if pe_done.is_some() {
            self.activity.compute_until = now + ctx.core.div;
            self.activity.done_rate = self.activity.mac_rate;
        }
        if let (Some(s), Some(f)) = (pe_done, ctx.func.as_ref()) {
            self.compute_partials(s, f, ctx);
        }
        let ev = self.ni.eval(now, &w.flits, &w.credits, self.glue.rx_slot_reg.take(), self.ctrl.ring_data_mut(), ctx.slot_bytes, &w.pools);
        let mut tokens_arrived = None;
        match ev.tokens_landed {
            Some((PacketKind::Dispatch, e, n)) => {
                tokens_arrived = Some((e, n));
                self.stats.tokens_in += n;
            }
            Some((PacketKind::Combine, _, n)) => {
                self.stats.combines_seen += 1;
                let _ = n;
            }
            _ => {}
        }
        // The DDR request crossing is still taken (a DDR slower than the core): the
        // controller sees `ddr_ready` low now and must be evaluated again at the first core
        // edge it is free, even if nothing else happens by then (fast-forward).
        if ctx.ddr.next_edge(now + 1) < self.glue.ddr_req_free_at {
            self.wake.add(ctx.core.next_edge(self.glue.ddr_req_free_at - 1));
        }
        let inp = CtrlIn {
            sched,
            ddr_ready: self.glue.ddr_outstanding < self.glue.ddr_depth && ctx.ddr.next_edge(now + 1) >= self.glue.ddr_req_free_at,
            ddr_landed,
            rx_head: ev.rx_head,
            rx_landed: ev.rx_landed,
            pe_done,
            tx_done: ev.tx_done,
            tx_ready: ev.tx_ready,
            tokens_arrived,
            handoff: self.glue.handoff_q.pop_front(),
            load: w.loads.recv(self.links.load_in, now),
            fetch: self.glue.fetch_q.pop_front(),
            slot_req: self.glue.slot_req_q.pop_front(),
        };
        let settled = gate && self.ctrl.settled_for(&inp);
        // (A settled controller is not stepped: its counters stay, and are not read.)
        let (reloads_before, evictions_before) = if settled { (0, 0) } else { (self.ctrl.stats().reloads, self.ctrl.stats().evictions) };
        let out = if settled { CtrlOut::default() } else { self.ctrl.step(&inp, &ctx.traj) };
        self.touched.ctrl = !settled;
        // A deadlock escape drops a slice without an output (its reload issues at the next
        // edge): the one change of the controller's state that no output announces, so the
        // next edge is evaluated (the tile must not sleep through it).
        let dropped = !settled && self.ctrl.stats().evictions != evictions_before;
        // --- outputs to the neighbours
        self.glue.rx_slot_reg = out.rx_slot;
        if let Some((s, tag)) = out.pe_start {
            let e = tag.expert.idx();
            let job = self.pe.cfg().micro_slice_job(s, self.work.m_here[e], ctx.d_model, ctx.slice_f[tag.k as usize]);
            self.activity.mac_rate = MacRate { macs: job.macs(), cycles: self.pe.cfg().job_busy_cycles(&job).max(1) };
            self.stats.macs += job.macs();
            self.glue.pe_job = Some(job);
        }
        if let Some((s, dest)) = out.tx_start {
            let tag = self.ctrl.slot_tag(s);
            self.ni.start_tx(s, tag, ctx.slice_bytes[tag.k as usize] as usize, dest);
        }
        if let Some((s, tag)) = out.ddr_req {
            let bytes = ctx.slice_bytes[tag.k as usize];
            let addr = (tag.expert.0 as u64 * ctx.micro_slices as u64 + tag.k as u64) * ctx.slot_bytes as u64;
            let due = ctx.ddr.next_edge(now + 1);
            self.glue.ddr_req_free_at = due + 1;
            w.ddr_req.send_at(self.links.ddr_req_out, now, due, DdrReq { id: s, addr, bytes });
            self.wake.add(due);
            self.glue.ddr_outstanding += 1;
            self.stats.ddr_bytes += bytes as u64;
            if self.ctrl.stats().reloads > reloads_before {
                // The deadlock escape's cost: a dropped or handed-off slice fetched again.
                self.stats.reload_bytes += bytes as u64;
            }
        }
        if out.done {
            w.done.send(self.links.done_out, now, 1 << self.id.0);
        }
        if let Some((tag, next)) = out.handoff {
            w.handoff.send(self.id.idx(), next.idx(), now, tag);
        }
        if let Some((tag, src)) = out.fetch {
            w.fetch.send(self.id.idx(), src.idx(), now, tag);
        }
        if let Some((tag, member)) = out.slot_req {
            w.slot_req.send(self.id.idx(), member.idx(), now, tag);
        }
        if let Some(r) = out.free {
            w.status.send(self.links.status_out, now, r);
        }
        if let Some(e) = out.expert_done {
            // EP/Hydra: the outputs go back to their tokens' homes.
            for &(h, n) in &self.work.combine_to[e.idx()] {
                self.ni.queue_tokens(PacketKind::Combine, e, n, n as usize * ctx.d_model as usize * ctx.out_bytes as usize, h);
            }
        }
        let did = !self.glue.handoff_q.is_empty() || !self.glue.fetch_q.is_empty() || !self.glue.slot_req_q.is_empty() || inp.load.is_some() || out != CtrlOut::default() || ev.rx_landed.is_some() || ev.tx_done.is_some() || ev.tokens_landed.is_some() || ddr_landed.is_some() || pe_done.is_some() || sched.is_some();
        self.stats.progress += moved + did as u64 + self.pe.busy() as u64;
        active |= did || sent || dropped || self.glue.pe_job.is_some() || self.glue.rx_slot_reg.is_some();
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
        self.stats.peak_token_bytes = self.stats.peak_token_bytes.max(tb);
        active
    }

    fn compute_partials(&mut self, slot: u32, f: &FuncData, ctx: &PkgCtx) {
        let tag = self.ctrl.slot_tag(slot);
        let e = tag.expert.idx();
        let fk = ctx.slice_f[tag.k as usize] as usize;
        let d = ctx.d_model as usize;
        let b = slot as usize * ctx.slot_bytes;
        let bytes = &self.ctrl.ring_data()[b..b + ctx.slice_bytes[tag.k as usize] as usize];
        let ws = MicroSliceWeights::from_bytes(bytes, d, fk).expect("ring slot holds a whole micro-slice");
        let toks = &self.work.tokens_here[e];
        let mut x = Vec::with_capacity(toks.len() * d);
        for &t in toks {
            x.extend_from_slice(&f.x[t as usize * d..(t as usize + 1) * d]);
        }
        let p = match self.pe_compute.as_mut() {
            None => micro_slice_partial_fl(&x, toks.len(), d, &ws),
            Some(model) => {
                let job = self.pe.cfg().micro_slice_job(slot, self.work.m_here[e], ctx.d_model, fk as u32);
                match model.micro_slice_partial(&job, &x, toks.len(), &ws) {
                    Ok(p) => p,
                    Err(e) => {
                        self.pe_error.get_or_insert_with(|| format!("expert {} micro-slice {}: {e}", tag.expert, tag.k));
                        return;
                    }
                }
            }
        };
        for (i, &t) in toks.iter().enumerate() {
            self.partials.add(t, tag.expert, &p[i * d..(i + 1) * d]);
        }
    }

    /// Returns where its DDR channel's signals start in `out`.
    pub(super) fn declare(&self, out: &mut Vec<SignalDecl>) -> usize {
        let scope: Vec<String> = self.scope.split('.').map(String::from).collect();
        self.ctrl.declare(&scope, out);
        self.ni.declare(&scope, out);
        let mut pe = scope.clone();
        pe.push("pe".into());
        self.pe.declare(&pe, out);
        let ddr_at = out.len();
        self.ddr.declare(&scope, out);
        let mut r = scope.clone();
        r.push("router".into());
        self.router.declare(&r, out);
        for (d, a) in &self.ucie {
            let mut u = scope.clone();
            u.push(format!("ucie_{d}"));
            a.declare(&u, out);
        }
        ddr_at
    }
    /// Samples the blocks evaluated at this tick ([`ChipletTile::touched`]) into `log`, in
    /// [`ChipletTile::declare`]'s order; the others are skipped (unchanged).
    #[inline(always)]
    pub(super) fn sample_blocks(&self, log: &mut ChangeLog) {
        let Touched { core, router, ring, ctrl, pe, ddr, ucie } = self.touched;
        // Bit k: block k of `declare` (ring, controller, D2D engine, PE array, DDR, router,
        // the adapters) was evaluated.
        let mask = ring as u64 | (ctrl as u64) << 1 | (core as u64) << 2 | (pe as u64) << 3 | (ddr as u64) << 4 | (router as u64) << 5 | (ucie as u64) << 6;
        // A tile not evaluated at this tick (asleep, or awake on an edge none of its blocks
        // has) is skipped as a whole, without a call: about half of the tile samples of a
        // traced layer.
        if mask == 0 && log.skip_blocks(6 + self.ucie.len()) {
            return;
        }
        self.sample_touched(log, mask);
    }

    #[inline(never)]
    fn sample_touched(&self, log: &mut ChangeLog, mask: u64) {
        log.blocks(6 + self.ucie.len(), mask, |log, k, touched| match k {
            0 => log.block(touched, |b| self.ctrl.sample_ring(b)),
            1 => log.block(touched, |b| self.ctrl.sample_rest(b)),
            2 => log.block_of(touched, &self.ni),
            3 => log.block_of(touched, &self.pe),
            4 => log.block_of(touched, &self.ddr),
            5 => log.block_of(touched, &self.router),
            _ => log.block_of(touched, &self.ucie[k - 6].1),
        });
    }
}
