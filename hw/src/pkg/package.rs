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
//! **Files.** This file is the top: the partitions' stepping ([`PkgPart`]), the run and its
//! result. The blocks' glue per chiplet is `tile.rs` ([`ChipletTile`]), what the partitions
//! share `wires.rs`, the layer input `layer.rs`, the trajectories `traj.rs`, and the
//! construction of a package (placement, links, blocks, partitions) `builder.rs`.
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

use sched::pkg::iodie::TokenBufferFl;
use sched::pkg::moe::moe_layer_ref_fl;
use sched::ExpertId;

use super::config::{PkgCfg, Strategy};
use super::iodie::{IoDieFactory, IoDieModel};
use super::chiplet::CtrlFactory;
use super::layer::Buffering;
use super::plan::LayerPlan;
use super::result::{ChipletResult, PeakRates, PkgResult, Roofline};
use super::rule5::LoadArbiterCl;
use super::timeline::{CycleBreakdown, TimelineRec};
use crate::cfg::CfgError;
use crate::harness::{
    run_partitions, ChangeLog, ClockSet, ClockedControl, Cycle, LinkId, PartStatus, Partition, Probe, SignalDecl, SignalSink, WakeOffsets, WakeSet, WatchdogReport,
    C_AHEAD_PROGRESS, C_AHEAD_VISIT, C_FINISHED, C_STEADY_PROGRESS,
};

// The package's parts under the paths they have always had.
pub use super::layer::{LayerInput, LayerRequests};
pub use super::tile::ChipletTile;
use super::tile::{TileStatus, Touched, UcieSummary};
pub use super::traj::PkgTraj;
pub use super::wires::{FuncData, PkgCtx, PkgWires};

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
    /// Functional mode: every chiplet's PE arithmetic on this model (`--rtl pe`).
    pub pe: Option<super::pe_array::PeComputeFactory>,
}

impl PkgRtl {
    /// Refuses a stand-in the run cannot use: the PE arithmetic needs functional mode (a
    /// timing run moves no data for it to compute). The builder calls it; the CLI too, before
    /// its output checks.
    pub fn check(&self, functional: bool) -> Result<(), String> {
        if self.pe.is_some() && !functional {
            return Err("--rtl pe runs the PE arithmetic of the functional package on the RTL array; add --functional (a timing run moves no data for it to compute)".into());
        }
        Ok(())
    }
}

/// The IO die.
pub struct IoDieTile {
    /// The CL model, or its stand-in (`--rtl scheduler`).
    pub sched: Box<dyn IoDieModel>,
    /// A4: the Rule-5 load arbiter beside the scheduler.
    pub rule5: Option<LoadArbiterCl>,
    /// Ticks at which the scheduler's messages land.
    pub(super) wake: WakeSet,
    /// The chiplets' done links, the scheduler's only inputs: an idle scheduler is evaluated
    /// only at the edges where a pulse lands on one.
    pub(super) done_in: Vec<LinkId>,
}

/// A band of chiplets (and the IO die in the first band).
pub struct PkgPart {
    pub tiles: Vec<ChipletTile>,
    pub iodie: Option<IoDieTile>,
    pub(super) log: Option<ChangeLog>,
    /// Where a core-edge send lands, as tick offsets from the sending edge: every link
    /// latency of the core-domain blocks and the next core edge (registers written now are
    /// read there). Offsets of 64 ticks or more (slow cores on a fine tick) are kept exactly
    /// too ([`WakeOffsets`]).
    pub(super) core_wake: WakeOffsets,
    /// Tiles with nothing due sleep (fast-forward inside the partition; off with
    /// `sim.fast_forward = false`, which evaluates every tile at every tick).
    pub(super) sleep: bool,
    /// The IO die's scheduler as of the last core edge: it changes only there, so between
    /// core edges (the adapters' and the DDR's ticks) its summary stands (None: read it).
    pub(super) io_seen: Option<IoSeen>,
    /// Traced: the earliest change on the tiles' DDR tapes (`Cycle::MAX`: none).
    pub(super) tape_next: Cycle,
}

impl PkgPart {
    /// Traced: the DDR channels' changes at the edges their bus ran ahead through, at ticks
    /// before `end`, into the change log in (tick, signal) order — the tiles are in signal
    /// order, and each tape in (tick, signal) order. `now`: the tick to be sampled next.
    ///
    /// Out of line (and the re-read of the tapes' first ticks below): inlined, they grew
    /// the stepper's loop enough to change what the compiler inlines into `Package::run`,
    /// and the untraced layer ran 3 % slower.
    #[inline(never)]
    fn take_tapes(&mut self, end: Cycle, now: Cycle) {
        let Some(log) = self.log.as_mut() else { return };
        loop {
            // The tile whose tape starts earliest (the first such), and the earliest start of
            // the others: it hands over what comes before that (and its own first tick).
            let (mut first, mut at, mut other) = (usize::MAX, Cycle::MAX, Cycle::MAX);
            for (i, t) in self.tiles.iter().enumerate() {
                let n = t.ddr.tape_next();
                if n < at {
                    (first, at, other) = (i, n, at);
                } else {
                    other = other.min(n);
                }
            }
            if at >= end {
                break;
            }
            let t = &mut self.tiles[first];
            let sig = t.ddr_sig;
            t.ddr.take_tape(end.min(other).max(at + 1), |c, k, v| log.ahead_change(c, sig + k, v, now));
        }
        self.read_tapes();
    }

    /// Traced: `tape_next` from the tiles' tapes.
    #[inline(never)]
    fn read_tapes(&mut self) {
        self.tape_next = self.tiles.iter().map(|t| t.ddr.tape_next()).min().unwrap_or(Cycle::MAX);
    }
}

/// What the partition reads of the IO die's scheduler at every tick.
#[derive(Clone, Copy)]
pub(super) struct IoSeen {
    busy: bool,
    next_event: Cycle,
    finished: bool,
}

impl Partition for PkgPart {
    type Shared = PkgWires;
    type Ctx = PkgCtx;

    // Inlined into the stepper's loops: its status, built field by field across the tile
    // evaluations, is then merged field by field; returned out of line it was copied in
    // 16-byte moves that waited on those 8-byte stores (failed store forwarding, a fifth of
    // this function's samples).
    #[inline(always)]
    fn eval(&mut self, now: Cycle, w: &PkgWires, ctx: &PkgCtx) -> PartStatus {
        if self.tape_next <= now {
            self.take_tapes(now + 1, now);
        }
        let mut st = PartStatus::default();
        let core = ctx.core.is_edge(now);
        let mut all_done = true;
        // Work of a core-domain block is due at the next core edge only (the ticks between
        // are the adapters' and the DDR's).
        let mut core_due = false;
        // Traced: the IO die's values can change only at an edge where it has work before or
        // after (`busy`: a state other than idle/done, done pulses queued, pulses to clear);
        // at others, as fast-forward skipping them shows, it changes nothing.
        let mut io_touched = false;
        if let Some(io) = self.iodie.as_mut() {
            if core {
                io_touched = io.sched.busy();
                // An idle scheduler (waiting in Idle or Done, no done pulse queued, no output
                // pulse to clear) changes nothing at an edge where no done pulse lands: it is
                // not evaluated there, as fast-forward skips such edges when the whole package
                // waits on it. (Without fast-forward every block runs at every tick.)
                // SAFETY: engine protocol (sole receiver of done links).
                let quiet = self.sleep && !io_touched && !io.done_in.iter().any(|&l| unsafe { w.done.arrives(l, now) });
                // SAFETY: engine protocol (sole sender of msg links, receiver of done links).
                let mut sent = !quiet && unsafe { io.sched.eval(now, &w.msgs, &w.done) };
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
            let seen = match self.io_seen {
                Some(s) if !core => s,
                _ => *self.io_seen.insert(IoSeen { busy: io.sched.busy(), next_event: io.sched.next_event(), finished: io.sched.is_finished() }),
            };
            core_due |= seen.busy;
            io_touched = core && (io_touched || seen.busy);
            st.next_event = st.next_event.min(seen.next_event).min(io.wake.next());
            if let Some(a) = &io.rule5 {
                core_due |= a.busy(now);
                st.next_event = st.next_event.min(a.next_event());
            }
            all_done &= seen.finished && !seen.busy;
        }
        // The event-driven blocks (UCIe adapters, DDR channels) are evaluated only at edges
        // where they are due (traced, also where a traced register changes on its own).
        let traced = self.log.is_some();
        let ahead = core && self.sleep && !traced && ctx.ucie_ahead;
        let edges = TickEdges { core, ucie: ctx.ucie.is_edge(now), ddr: ctx.ddr.is_edge(now), traced, gate: self.sleep, ahead };
        for t in self.tiles.iter_mut() {
            // A tile sleeps until the first tick it has something due (the fast-forward of
            // the engine, per tile: a tile whose blocks wait is not evaluated while the
            // others work), or until a value from outside lands on it — a neighbour's flit
            // or credit, the IO die's message, the sideband (the inbox marks). An evaluation
            // in between would change nothing, as fast-forward skipping it does not; only the
            // PE array's progress count (watchdog) is the same as if evaluated.
            if self.sleep && now < t.need_at && !w.inbox.lands(t.id.idx(), now) {
                t.touched = Touched::default();
                st.next_event = st.next_event.min(t.need_at);
                // A DDR channel holding requests serves them (event-driven, at its next
                // event): progress at every tick, as if evaluated.
                st.progress += (core && t.status.pe_busy) as u64 + t.status.ddr_requests as u64;
                if ahead {
                    st.counters[C_STEADY_PROGRESS] += t.status.ddr_requests as u64;
                }
                // (The timeline integrates the sleep at the tile's next evaluated edge: its bins
                // hold integers, so one long interval adds up to what edge-by-edge ones do.)
                all_done &= t.status.finished;
                continue;
            }
            // SAFETY: engine protocol.
            let (core_work, finished) = unsafe { eval_tile(t, now, w, ctx, &self.core_wake, edges, &mut st) };
            core_due |= core_work;
            all_done &= finished;
        }
        if core_due {
            st.next_event = st.next_event.min(ctx.core.edge_after(now));
        }
        // Stored only when set (it starts at 0): a store into the counters at every step was
        // read back at once by the merge's 16-byte loads, which waited on it (failed store
        // forwarding, 2 % of a layer's samples).
        if all_done {
            st.counters[C_FINISHED] = 1;
        }
        // Tracing samples only the blocks evaluated at this tick: a block's values are its
        // registers, which change only when it is evaluated (the IO die and the core-domain
        // blocks at core edges, the adapters and the DDR where due; a sleeping tile not at
        // all). `hw/tests/package.rs::traced_blocks_skipped_only_when_unchanged` samples the
        // skipped blocks anyway and checks that.
        if let Some(log) = self.log.as_mut() {
            if log.begin_blocks(now) {
                if let Some(io) = &self.iodie {
                    log.block(io_touched, |b| io.sched.sample(b));
                    if let Some(a) = &io.rule5 {
                        log.block(core, |b| a.sample(b));
                    }
                }
                for t in &self.tiles {
                    t.sample_blocks(log);
                }
                log.end_blocks();
            }
            // (A channel that ran ahead here put changes on its tape.)
            self.read_tapes();
        }
        st
    }
}

/// What kind of tick the partition evaluates (the same for all its tiles).
#[derive(Clone, Copy)]
struct TickEdges {
    core: bool,
    ucie: bool,
    ddr: bool,
    traced: bool,
    /// Fast-forward on: blocks whose evaluation would change nothing are skipped inside an
    /// awake tile too (off: every block at every tick).
    gate: bool,
    /// A core edge at which the adapters run their next edge ahead (fast-forward on,
    /// untraced, clocks that allow it: `PkgCtx::ucie_ahead`).
    ahead: bool,
}

/// One tick of an awake tile: its adapters and DDR channel where due, its core-domain blocks
/// at a core edge, its status and the next tick it needs. Returns whether it has core work at
/// the next core edge and whether it has finished.
///
/// Out of line on purpose: inlined into the partition's tile loop, the compiler hoisted
/// about ninety loads of the wires' and the context's fields out of the loop and spilled them
/// to the stack at every partition evaluation, sleeping tiles or not (about 195 instructions
/// per evaluation, 6 % of a layer's; docs/results-speed.md, "eighth session").
///
/// # Safety
/// Engine protocol: the tile's blocks are their links' sole endpoints, at tick `now`.
#[inline(never)]
unsafe fn eval_tile(t: &mut ChipletTile, now: Cycle, w: &PkgWires, ctx: &PkgCtx, core_wake: &WakeOffsets, edges: TickEdges, st: &mut PartStatus) -> (bool, bool) {
    let TickEdges { core, ucie: ucie_edge, ddr: ddr_edge, traced, gate, ahead } = edges;
    // A block that sends on a link wakes the tile when the value lands.
    t.wake.advance(now);
    // Which blocks were evaluated (the tile's status is re-read if any was; traced,
    // only those are sampled).
    t.touched = Touched { core, router: core, ring: core, ctrl: core, pe: core, ddr: false, ucie: 0 };
    // (Between core edges, adapters already run through this edge at the last core edge
    // are not evaluated again.)
    if ucie_edge && now > t.ucie_ahead_to {
        for (i, (_, a)) in t.ucie.iter_mut().enumerate() {
            // SAFETY: engine protocol; the adapter is its links' sole endpoint.
            if unsafe { a.due(now, &w.flits) } {
                t.touched.ucie |= 1 << i;
                if let Some(at) = unsafe { a.eval(now, &w.flits, &w.pools, gate && !traced) } {
                    t.wake.add(at);
                }
            }
        }
    }
    // SAFETY: engine protocol.
    if ddr_edge && unsafe { t.ddr.due(now, &w.ddr_req) } {
        t.touched.ddr = true;
        // Run ahead (see `DdrChannelCl::eval`; traced, the channel tapes its traced
        // registers) except where the commands are counted at their edge: the timeline
        // (bursts per bin).
        let run_ahead = gate && t.activity.timeline.is_none();
        if let Some(at) = unsafe { t.ddr.eval(now, &w.ddr_req, &w.ddr_resp, run_ahead) } {
            t.wake.add(at);
        }
        if t.activity.timeline.is_some() {
            // A burst goes into the bin of the tick it is issued at, not of the next core
            // edge the tile happens to be evaluated at (which fast-forward moves).
            t.count_traffic(now, ctx);
        }
    } else if traced && ddr_edge && t.ddr.traced_next_event() <= now {
        // Only a traced register changes on its own here (the `cmd` pulse falls, a
        // refresh ends).
        t.touched.ddr = true;
        t.ddr.settle(now);
    }
    let mut active;
    // Flits the adapters handed to the router at the edge run ahead (progress of that tick).
    let mut ahead_delivered = 0;
    if core {
        t.integrate(now, ctx.slot_bytes);
        // SAFETY: engine protocol.
        active = unsafe { t.core_edge(now, w, ctx, core_wake, gate, traced) };
        // Traced, the D2D engine's flit pulses (`inj_valid`, `ej_valid`) fall at the
        // next edge: evaluated there, so the waveform does not depend on whether
        // anything else is due.
        active |= traced && t.ni.sent_this_cycle();
        if traced {
            // A router at rest before and after changed nothing.
            let rest = t.router.at_rest();
            t.touched.router = !(rest && t.router_rest);
            t.router_rest = rest;
            // The ring changes only when its change count moves.
            let seen = t.ctrl.ring_changes();
            t.touched.ring = seen.is_none() || seen != t.ring_seen;
            t.ring_seen = seen;
        }
        t.activity.pe_state = t.pe_state_now();
        if t.activity.timeline.is_some() {
            t.count_traffic(now, ctx);
        }
        t.core_active = active;
        if ahead {
            // The adapters' edge before the next core edge, run now (`eval_ahead`): the
            // router has sent what lands on them by then, and nothing else reaches them. The
            // engine need not visit that tick for them; the watchdog observes it as visited.
            let at = now + ctx.ucie.div;
            for (i, (_, a)) in t.ucie.iter_mut().enumerate() {
                if a.due_ahead(at) {
                    t.touched.ucie |= 1 << i;
                    st.counters[C_AHEAD_VISIT] += 1;
                    // SAFETY: engine protocol, after the router's evaluation.
                    if let Some(land) = unsafe { a.eval_ahead(now, at, &w.flits, &w.pools) } {
                        t.wake.add(land);
                        ahead_delivered += 1;
                    }
                }
            }
            t.ucie_ahead_to = at;
        }
    } else {
        // Between core edges the last edge's answer stands: its work is due at the next
        // one (a tile woken here by an adapter or the DDR must not forget it, e.g. the
        // D2D engine's pulses that fall at the next edge when traced).
        active = t.core_active;
    }
    if t.touched.ucie != 0 || !t.status.valid {
        t.ucie_sum = UcieSummary::of(&t.ucie, ahead.then(|| ctx.core.edge_after(now)));
    }
    if core || !t.status.valid {
        t.status = TileStatus::of(t, traced);
    } else if t.touched.any() {
        t.status = t.status.with_edges(t, traced);
    }
    let c = &t.status;
    let core_work = active || c.core_due;
    st.busy |= c.busy;
    st.next_event = st.next_event.min(c.next_event).min(t.wake.next());
    // The next tick this tile has something due (see the sleep in `PkgPart::eval`): the next tick
    // while busy, else its next event (the DDR's next command or response among
    // them), link landing, or core edge with core work. (A DDR holding requests no
    // longer keeps the tile awake at every tick for the watchdog's progress count:
    // the sleeping tile counts it.)
    t.need_at = if c.busy {
        now + 1
    } else if core_work {
        c.next_event.min(t.wake.next()).min(ctx.core.edge_after(now))
    } else {
        c.next_event.min(t.wake.next())
    };
    // Progress: a link that only replays (bit-error rate too high for a flit to get
    // through) is not progress, so such a run ends in the watchdog.
    // (a DDR woken only for refresh is not progress either)
    st.progress += std::mem::take(&mut t.stats.progress) + c.ddr_requests as u64 + (c.ucie_delivered - t.stats.ucie_delivered - ahead_delivered);
    if ahead {
        st.counters[C_AHEAD_PROGRESS] += ahead_delivered;
        st.counters[C_STEADY_PROGRESS] += c.ddr_requests as u64;
    }
    t.stats.ucie_delivered = c.ucie_delivered;
    (core_work, c.finished)
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
    pub(super) routing: Vec<Vec<u16>>,
    pub(super) buffering: Option<Buffering>,
    /// Next tick to evaluate.
    pub(super) now: Cycle,
    /// Ticks evaluated (not skipped by fast-forward); not part of the results.
    pub evaluated: u64,
    /// Test aid: traced, every block is sampled at every evaluated tick, and a block the
    /// tracing would have skipped (not evaluated) must not have changed (panics naming the
    /// signal). Off in runs: tracing samples the evaluated blocks only.
    pub check_trace_skips: bool,
}

impl Package {
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
                t.activity.timeline = Some(TimelineRec::new(1, tk, macs));
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
            for t in p.tiles.iter_mut() {
                t.ddr_sig = t.declare(&mut decl) as u32;
            }
            p.tape_next = Cycle::MAX;
            let mut log = ChangeLog::new(base, decl.len());
            log.check_skips = self.check_trace_skips;
            p.log = Some(log);
            base += decl.len();
        }
    }

    /// Moves recorded changes into `sink`, merged in (tick, signal) order.
    pub fn drain_trace(&mut self, sink: &mut dyn SignalSink) -> Result<(), PkgError> {
        // The DDR channels' changes at edges their bus ran ahead through, up to the engine
        // (it has evaluated every tick before `now`).
        for p in self.parts.iter_mut() {
            p.take_tapes(self.now, self.now);
        }
        let mut logs: Vec<&mut ChangeLog> = self.parts.iter_mut().filter_map(|p| p.log.as_mut()).collect();

        ChangeLog::drain_merged(&mut logs, sink).map_err(|e| PkgError::Wave(e.to_string()))
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
        // Traced, the changes of a chunk are drained while they are still in cache (about 20 K
        // changes per 4 K core cycles of an A3 layer); untraced, chunks only bound the run.
        let chunk = if sink.is_some() { 1u64 << 12 } else { 1u64 << 16 };
        let mut ctl = ClockedControl::new(self.clocks.clone(), 0, self.parts.len(), self.cfg.sim.fast_forward, self.cfg.sim.watchdog_cycles.saturating_mul(tk));
        // Progress here is a flit moved or delivered, a controller event, PE compute or DDR
        // service — never a replay — so an unfinished package without it is stuck, busy or not.
        ctl.watch_unfinished = true;
        for p in self.parts.iter_mut() {
            p.sleep = self.cfg.sim.fast_forward;
            p.io_seen = None;
            p.tiles.iter_mut().for_each(|t| {
                t.ddr.taping = sink.is_some();
                t.status.valid = false;
                t.need_at = 0;
                t.router_rest = false;
                t.ring_seen = None;
            });
        }
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
                self.check_pe_compute()?;
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
            if t.stats.grants_seen < t.work.grants_expected {
                blocked.push((0, format!("{}.ctrl: {} of {} grants received; pending {}", t.scope, t.stats.grants_seen, t.work.grants_expected, t.ctrl.pending())));
            }
            if t.stats.combines_seen < t.work.combines_expected {
                blocked.push((0, format!("{}.d2d: waits for {} combine packets", t.scope, t.work.combines_expected - t.stats.combines_seen)));
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

    /// A PE compute stand-in's first error (`--rtl pe`: its arithmetic or its cycle count
    /// disagreed with the CL fold timing).
    fn check_pe_compute(&self) -> Result<(), PkgError> {
        match self.tiles().find_map(|t| t.pe_error.as_ref().map(|e| (t, e))) {
            Some((t, e)) => Err(PkgError::Check(format!("{}.pe (RTL): {e}", t.scope))),
            None => Ok(()),
        }
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
                let p = self.tiles().find_map(|tile| tile.partials.get(t as u32, ExpertId(e)));
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
                macs: t.stats.macs,
                ddr_bytes: t.stats.ddr_bytes,
                d2d_tx_bytes: tx,
                peak_ring_slots: t.ctrl.peak_slots(),
                peak_weight_bytes: pw,
                peak_token_bytes: t.stats.peak_token_bytes,
                rule1_computes: t.ctrl.stats().rule1_computes,
                rule2_computes: t.ctrl.stats().rule2_computes,
                replays: rep,
                evictions: t.ctrl.stats().evictions,
                handoffs: t.ctrl.stats().handoffs_out,
                reloads: t.ctrl.stats().reloads,
                reload_bytes: t.stats.reload_bytes,
                forwards: t.ctrl.stats().forwards,
                rx_stall_cycles: t.ni.stats.rx_slot_wait_cycles,
                cycles: t.activity.breakdown.finish(tk, latency),
            });
            cycles.add(&chiplets.last().expect("pushed").cycles);
            macs += t.stats.macs;
            ddr_bytes += t.stats.ddr_bytes;
            d2d += tx;
            replays += rep;
            peak_w += pw;
            mean_w += t.activity.live_integral as f64 * slot as f64 / last.max(1) as f64;
            peak_t += t.stats.peak_token_bytes;
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
                let recs: Vec<TimelineRec> = self.tiles().filter_map(|t| t.activity.timeline.clone()).collect();
                (!recs.is_empty()).then(|| TimelineRec::join(recs, latency))
            },
        }
    }
}
