//! Input-queued virtual-channel mesh router, CL model of BookSim2's `iq` router.
//!
//! Pipeline per packet (delays from [`RouterCfg`]): buffer write + route computation (RC,
//! `routing_delay`), VC allocation (VA, `va_delay`), switch allocation (SA, `sa_delay`), switch
//! traversal (ST, `st_delay`); body flits skip RC/VA. Allocators are separable single-iteration
//! iSLIP with round-robin arbiters whose pointers move only on accepted grants. Credit flow
//! control per VC; an output VC is held by one input VC from VA until its tail is sent.
//!
//! In-cycle order (BookSim's `_InternalStep`): input queuing (flits into VC buffers, credits
//! into counters) → VA evaluate → VA update → SA evaluate → SA update. A VC that finishes a
//! stage in cycle *t* starts the next one in *t + 1*. Switch traversal and the channel form one
//! fixed pipeline, so a granted flit is handed to its output link at once and the link's
//! latency includes `st_delay` (the mesh builds it so); this gives BookSim's zero-load hop
//! time `routing + va + sa + st + link` without copying flits through a crossbar queue.
//!
//! The router touches only its own registers and its links, so its state is updated in place
//! during `eval` (no other module can observe it within the cycle); links provide the
//! registered boundary.

use sched::noc::{route_xy_fl, Coord, Dir};

use core::hint::select_unpredictable as sel;

use super::arbiter::rr_pick;
use super::config::RouterCfg;
use super::credit::CreditCounterCl;
use super::flit::{Credit, Flit, N_CLASSES};
use crate::harness::{Cycle, LinkArena, LinkId, Probe, SignalDecl, NEVER};
use crate::harness::trace::{SampleBlock, SampleOut};

pub const NPORTS: usize = 5;
const NONE8: u8 = u8::MAX;

/// BookSim's VC states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum VcState {
    #[default]
    Idle = 0,
    Routing = 1,
    VcAlloc = 2,
    Active = 3,
}

/// Registers of one input VC.
#[derive(Debug, Clone, Copy)]
struct InVc {
    state: VcState,
    /// First cycle the VC's next stage (VA or SA) may act.
    ready: Cycle,
    out_port: u8,
    out_vc: u8,
    /// Ring buffer position and occupancy.
    head: u8,
    len: u8,
    /// Cycle a VA decision takes effect (`NEVER`: none in progress), and its grant.
    va_apply: Cycle,
    va_grant: u8,
    /// Cycle an SA decision takes effect, and whether it was granted.
    sa_apply: Cycle,
    sa_grant: bool,
    /// Cycle the current front flit reached the front (watchdog: no flit may wait forever).
    front_since: Cycle,
}

impl Default for InVc {
    fn default() -> Self {
        InVc {
            state: VcState::Idle,
            ready: 0,
            out_port: 0,
            out_vc: 0,
            head: 0,
            len: 0,
            va_apply: NEVER,
            va_grant: NONE8,
            sa_apply: NEVER,
            sa_grant: false,
            front_since: NEVER,
        }
    }
}

/// Link ids of the router's ports (`LinkId::NONE` on the mesh edge).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct RouterPorts {
    /// Flits arriving on input port p.
    pub in_flit: [LinkId; NPORTS],
    /// Credits arriving for output port p (from the downstream input buffer). (Next to
    /// `in_flit`: the two are read every cycle.)
    pub in_credit: [LinkId; NPORTS],
    /// Flits leaving on output port p.
    pub out_flit: [LinkId; NPORTS],
    /// Credits leaving for input port p (to the upstream sender).
    pub out_credit: [LinkId; NPORTS],
}

/// Event counters (always on, cheap).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct RouterStats {
    pub flits_switched: u64,
    pub va_grants: u64,
    pub va_stalls: u64,
    pub sa_credit_stalls: u64,
    pub sa_conflicts: u64,
}

impl RouterStats {
    pub fn add(&mut self, o: &RouterStats) {
        self.flits_switched += o.flits_switched;
        self.va_grants += o.va_grants;
        self.va_stalls += o.va_stalls;
        self.sa_credit_stalls += o.sa_credit_stalls;
        self.sa_conflicts += o.sa_conflicts;
    }
}

/// Field order is the memory order (`repr(C)`): what every evaluation touches comes first,
/// so a router's per-cycle state spans few cache lines (the mesh's routers together do not
/// fit in L1, so each line a router touches is a miss in every cycle).
#[repr(C)]
pub struct RouterCl {
    /// Cycle of the latest eval (for the line trace's stall marks).
    last_eval: Cycle,
    /// Input VCs waiting for VA (Routing/VcAlloc) and Active VCs with a flit, as bitmasks.
    va_set: u64,
    sa_set: u64,
    buffered: u32,
    traced_send: bool,
    /// 1-cycle VA and SA and no serialized output (kept with `ser`); see [`RouterCl::plain`].
    plain_cfg: bool,
    /// Branch-free allocators (see [`RouterCl::set_branch_free`]).
    branch_free: bool,
    /// First links of the groups holding the flit and credit inputs, port p at position p
    /// (`LinkId::NONE`: not so laid out); see [`RouterCl::set_input_rows`].
    in_rows: [LinkId; 2],
    /// Flits of class `>= low_class` are a low-priority stream (the wafer's migration, which
    /// must not delay regular traffic): they travel only in the last VC of each port, which
    /// regular packets are never allocated (so neither ever queues behind the other), and an
    /// output any regular flit requests is not granted to them. `u8::MAX` (the default)
    /// disables it, leaving the allocators exactly the BookSim ones the NoC, the package and
    /// the RTL twin use.
    pub low_class: u8,
    /// Traffic class + 1 of the flit sent on each output this cycle, 0 if none (for traces;
    /// cleared with `out_trace`).
    pub out_class: [u8; NPORTS],
    v: usize,
    depth: usize,
    rd: u64,
    /// Harness ticks per router cycle (1 in the single-clock mesh; the core clock's divider
    /// in a multi-clock system, where `now` counts ticks and the router is evaluated only at
    /// its clock's edges). Every internal delay is a whole number of router cycles.
    tk: u64,
    ivc: Vec<InVc>,
    buf: Vec<Flit>,
    pub ports: RouterPorts,
    /// Free output VCs per output port (bit vc), mirror of the owners in `vt` for fast VA.
    ovc_free: [u64; NPORTS],
    sa_gptr: [u32; NPORTS],
    sa_aptr: [u32; NPORTS],
    /// Per input port: round-robin offset among its VCs for switch requests.
    sw_rr: [u32; NPORTS],
    /// Per VC index (port·V + vc): the output VC's and the input VC's small registers side by
    /// side, so a router with few VCs keeps them in one or two cache lines.
    vt: [VcTab; 64],
    /// VA scratch: output VCs granting each input VC this cycle (all zero between cycles).
    va_grants_to: [u64; 64],
    /// Flit sent on each output this cycle (for traces): trace id or 0.
    pub out_trace: [u64; NPORTS],
    /// Flits sent per output port and traffic class (`Flit::class`), since construction.
    pub out_class_flits: [[u64; N_CLASSES]; NPORTS],
    pub stats: RouterStats,
    pub id: u32,
    pub coord: Coord,
    va: u64,
    sa: u64,
    /// Serialization cycles of the mesh outputs, and the cycle each output is free again
    /// (an output sends one flit per `ser[o]` cycles; the local port is never serialized).
    /// Per port because a wafer's border routers drive cross-wafer links of another width.
    ser: [u64; NPORTS],
    out_free_at: [Cycle; NPORTS],
    /// Per output: the last cycle a regular flit requested it. A low-priority flit is granted
    /// an output only after `low_idle` cycles without regular requests, so it fills idle
    /// stretches of a link, not the short gaps inside a regular stream (a granted flit holds a
    /// serialized output for `ser` cycles and cannot be pre-empted).
    hi_seen: [Cycle; NPORTS],
    pub low_idle: u64,
}

/// [`rr_pick`] for a request set known not to be empty (bits below the arbiter's width),
/// without a branch (its winner is random); an empty set gives 64.
#[inline]
fn rr_pick_nz(req: u64, ptr: u32) -> usize {
    let hi = req & (u64::MAX << ptr);
    sel(hi != 0, hi.trailing_zeros(), req.trailing_zeros()) as usize
}

/// The two lowest set bits of a non-empty `bits`, cleared from it, each with whether it was
/// set: the second is the first again, disabled, when only one was (the branch-free
/// allocators' request loops visit two VCs per iteration, so the trip count varies less).
#[inline(always)]
fn pop_two(bits: &mut u64) -> [(usize, bool); 2] {
    let i1 = bits.trailing_zeros() as usize;
    *bits &= *bits - 1;
    let two = *bits != 0;
    let i2 = sel(two, bits.trailing_zeros() as usize, i1);
    *bits &= bits.wrapping_sub(1);
    [(i1, true), (i2, two)]
}

/// [`route_xy_fl`] with a select where that function's `if` is compiled to a branch (the
/// destinations of dense uniform traffic are random, and it was often mispredicted). Kept
/// here, for the branch-free router only: the package routes through `route_xy_fl`.
#[inline]
fn route_xy_bf(cur: Coord, dest: Coord) -> u8 {
    let (x_off, x_minus) = (dest.x != cur.x, dest.x < cur.x);
    let (y_off, y_minus) = (dest.y != cur.y, dest.y < cur.y);
    let y = 4 - 2 * y_off as usize + y_minus as usize;
    let x = x_minus as usize;
    Dir::ALL[sel(x_off, x, y)] as u8
}

/// Registers of VC index i = port·V + vc (see `RouterCl::vt`).
#[derive(Debug, Clone, Copy)]
#[repr(C)]
struct VcTab {
    /// Upstream view of output VC i's downstream buffer.
    credits: CreditCounterCl,
    /// Input VC holding output VC i, `NONE8` if free.
    owner: u8,
    /// VA grant pointer of output VC i, accept pointer of input VC i.
    gptr: u8,
    aptr: u8,
    /// Port and VC of index i, so the hot path never divides.
    port: u8,
    vc: u8,
}

impl RouterCl {
    /// `ser`: cycles a flit occupies each mesh output (serialization; 1 = one flit per cycle).
    pub fn new(id: u32, k: u32, cfg: &RouterCfg, ser: u32, ports: RouterPorts) -> Self {
        let v = cfg.vcs as usize;
        let depth = cfg.vc_buf as usize;
        let nv = NPORTS * v;
        assert!(nv <= 64 && depth <= 255);
        let ser: [u64; NPORTS] = std::array::from_fn(|p| if p == Dir::Local.idx() { 1 } else { ser as u64 });
        RouterCl {
            id,
            coord: Coord::of(id, k),
            v,
            depth,
            rd: cfg.routing_delay as u64,
            va: cfg.va_delay as u64,
            sa: cfg.sa_delay as u64,
            ports,
            ivc: vec![InVc::default(); nv],
            buf: vec![Flit::default(); nv * depth],
            ovc_free: [if v == 64 { u64::MAX } else { (1u64 << v) - 1 }; NPORTS],
            vt: std::array::from_fn(|i| VcTab {
                credits: CreditCounterCl::new(depth as u16),
                owner: NONE8,
                gptr: 0,
                aptr: 0,
                port: (i / v.max(1)) as u8,
                vc: (i % v.max(1)) as u8,
            }),
            va_grants_to: [0; 64],
            sa_gptr: [0; NPORTS],
            sa_aptr: [0; NPORTS],
            sw_rr: [0; NPORTS],
            va_set: 0,
            sa_set: 0,
            buffered: 0,
            out_trace: [0; NPORTS],
            out_class_flits: [[0; N_CLASSES]; NPORTS],
            out_class: [0; NPORTS],
            traced_send: false,
            last_eval: 0,
            plain_cfg: Self::plain_cfg_of(cfg.va_delay as u64, cfg.sa_delay as u64, &ser),
            branch_free: false,
            in_rows: [LinkId::NONE; 2],
            ser,
            out_free_at: [0; NPORTS],
            tk: 1,
            low_class: u8::MAX,
            hi_seen: [NEVER; NPORTS],
            low_idle: 0,
            stats: RouterStats::default(),
        }
    }

    /// A router with 1-cycle VA and SA, no low-priority stream and no serialized output (the
    /// BookSim `iq` defaults): the allocators are then compiled without those branches.
    #[inline]
    fn plain(&self) -> bool {
        self.plain_cfg && self.low_class == u8::MAX
    }

    /// The configuration part of [`RouterCl::plain`], kept in `plain_cfg` (set by `new` and
    /// `set_port_ser`, the only writers of `va`, `sa` and `ser`).
    fn plain_cfg_of(va: u64, sa: u64, ser: &[u64; NPORTS]) -> bool {
        va == 1 && sa == 1 && *ser == [1; NPORTS]
    }

    /// Serialization of one mesh output (`port` 0..4, not the local port): cycles a flit
    /// occupies that link, >= 1 — e.g. a wafer's cross-wafer border link, narrower or wider
    /// than the on-wafer links set by `new`.
    pub fn set_port_ser(&mut self, port: usize, ser: u32) {
        assert!(port != Dir::Local.idx() && port < NPORTS && ser >= 1, "serialization is per mesh output, >= 1");
        self.ser[port] = ser as u64;
        self.plain_cfg = Self::plain_cfg_of(self.va, self.sa, &self.ser);
    }

    /// Evaluates a plain router (see [`RouterCl::plain`]) with selects and masks instead of
    /// branches where their outcome is random under dense traffic (the mesh at BookSim's
    /// reference point: credits landing, VCs empty or idle, VA and SA requests and grants):
    /// fewer mispredicted branches for more instructions. Same results either way. Off by
    /// default: the package's routers see sparse, mostly multi-flit traffic, where those
    /// branches are predictable and the extra instructions made `bench package` 13 % slower
    /// (docs/results-noc.md, eighth session); the mesh turns it on.
    pub fn set_branch_free(&mut self, on: bool) {
        self.branch_free = on;
    }

    /// The router's flit inputs are links 0..5 of one link group, input port p at position p,
    /// and likewise its credit inputs (`mesh::wire` lays a tile's inputs out so, with a link
    /// that is never sent on for a port on the mesh edge): the branch-free evaluation then
    /// polls each group's row at once ([`LinkArena::row`]) instead of port by port.
    pub fn set_input_rows(&mut self, flit: LinkId, credit: LinkId) {
        for p in 0..NPORTS {
            let (f, c) = (self.ports.in_flit[p], self.ports.in_credit[p]);
            assert!((f.is_none() || f.is_in_group_at(flit, p)) && (c.is_none() || c.is_in_group_at(credit, p)), "router {}: input {p} is not at its place in the input groups", self.id);
        }
        self.in_rows = [flit, credit];
    }

    /// Puts the router in a clock domain of `tk` harness ticks per cycle (see the `tk` field);
    /// its link latencies must then be multiples of `tk` as well.
    pub fn set_ticks_per_cycle(&mut self, tk: u64) {
        assert!(tk >= 1);
        self.tk = tk;
    }

    /// Flits held (VC buffers + switch traversal).
    #[inline]
    pub fn occupancy(&self) -> u32 {
        self.buffered
    }

    /// Every traced value at its rest value: no flit held or sent, every input VC idle,
    /// every output VC free with all its credits. Two samples at rest are equal, so tracing
    /// skips a router that was at rest before and after an evaluation.
    pub fn at_rest(&self) -> bool {
        self.buffered == 0
            && self.va_set == 0
            && self.sa_set == 0
            // (Not `== [0; NPORTS]`: that compiles to a call of the C library's memcmp, a
            // cold function at every traced core edge.)
            && self.out_trace.iter().all(|&f| f == 0)
            && self.ivc.iter().all(|c| c.len == 0 && c.state == VcState::Idle)
            && self.vt[..NPORTS * self.v].iter().all(|t| t.owner == NONE8 && t.credits.credits == t.credits.depth)
    }

    pub fn vc_occupancy(&self, port: usize, vc: usize) -> usize {
        self.ivc[port * self.v + vc].len as usize
    }

    pub fn vc_state(&self, port: usize, vc: usize) -> VcState {
        self.ivc[port * self.v + vc].state
    }

    pub fn credits(&self, port: usize, vc: usize) -> u16 {
        self.vt[port * self.v + vc].credits.credits
    }

    /// Route register of an input VC: (output port, output VC). Read-only probe for the RTL
    /// lockstep (`hw/rtl/tests/rtl_noc_router_ctrl.rs`).
    pub fn vc_route(&self, port: usize, vc: usize) -> (u8, u8) {
        let s = &self.ivc[port * self.v + vc];
        (s.out_port, s.out_vc)
    }

    /// Whether output VC `vc` of output `port` is held by an input VC (VA until the tail).
    pub fn ovc_busy(&self, port: usize, vc: usize) -> bool {
        self.vt[port * self.v + vc].owner != NONE8
    }

    /// Allocator priority pointers, for the RTL lockstep: (VA accept per input VC, VA grant
    /// per output VC, SA grant per output port, SA accept per input port, SA VC offset per
    /// input port).
    pub fn alloc_pointers(&self) -> [Vec<u32>; 5] {
        let nv = NPORTS * self.v;
        [self.vt[..nv].iter().map(|t| t.aptr as u32).collect(), self.vt[..nv].iter().map(|t| t.gptr as u32).collect(), self.sa_gptr.to_vec(), self.sa_aptr.to_vec(), self.sw_rr.to_vec()]
    }

    /// Since when the longest-waiting front flit of any input VC has been waiting
    /// (`NEVER` if the buffers are empty).
    pub fn oldest_front(&self) -> Cycle {
        let mut m = NEVER;
        let mut bits = self.va_set | self.sa_set;
        while bits != 0 {
            let iv = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if self.ivc[iv].len > 0 {
                m = m.min(self.ivc[iv].front_since);
            }
        }
        m
    }

    /// Test hook for the watchdog: a port whose downstream stops returning credits.
    pub fn fault_zero_credits(&mut self, port: usize) {
        for vc in 0..self.v {
            self.vt[port * self.v + vc].credits.credits = 0;
        }
    }

    /// One cycle. Returns the number of flits moved (switch traversals), for the watchdog,
    /// and whether anything was sent on a link this cycle.
    ///
    /// # Safety
    /// Must be called by the engine in cycle `now`, with `flits`/`credits` the system's links
    /// and this router the only sender/receiver of the links named in its `ports`.
    pub unsafe fn eval(&mut self, now: Cycle, flits: &LinkArena<Flit>, credits: &LinkArena<Credit>) -> (u64, bool) {
        self.eval_if(now, flits, credits, true)
    }

    /// [`Self::eval`] for a receiver that knows whether anything can land on the router's
    /// inputs this cycle (`lands`; the package's per-tile landing marks, which every input
    /// link stamps): with `false` the inputs are not polled. A package router receives a flit
    /// or credit at few of its edges, and polling its ten input stamps at every edge was a
    /// third of its evaluation (docs/results-speed.md).
    ///
    /// # Safety
    /// As [`Self::eval`]; `lands` must be `true` whenever a flit or credit lands on an input
    /// in cycle `now`.
    #[inline(always)]
    pub unsafe fn eval_if(&mut self, now: Cycle, flits: &LinkArena<Flit>, credits: &LinkArena<Credit>, lands: bool) -> (u64, bool) {
        if self.branch_free {
            return self.eval_branch_free(now, flits, credits, lands);
        }
        self.eval_in::<false>(now, flits, credits, lands)
    }

    /// [`Self::eval_if`] of a router with branch-free allocators ([`Self::set_branch_free`]),
    /// kept out of line so the package, which inlines `eval_if`, keeps the code it had.
    #[inline(never)]
    unsafe fn eval_branch_free(&mut self, now: Cycle, flits: &LinkArena<Flit>, credits: &LinkArena<Credit>, lands: bool) -> (u64, bool) {
        self.eval_in::<true>(now, flits, credits, lands)
    }

    /// The cycle of [`Self::eval_if`]; `BF`: the branch-free input stage and allocators
    /// (the mesh's, [`Self::set_branch_free`]) or the branching ones (the package's).
    #[inline(always)]
    unsafe fn eval_in<const BF: bool>(&mut self, now: Cycle, flits: &LinkArena<Flit>, credits: &LinkArena<Credit>, lands: bool) -> (u64, bool) {
        let mut sent = false;
        self.last_eval = now;
        if self.traced_send {
            self.out_trace = [0; NPORTS];
            self.out_class = [0; NPORTS];
            self.traced_send = false;
        }
        if BF {
            self.prefetch_state();
        }
        // --- input queuing: flits into VC buffers, credits into counters
        let waiting = self.va_set;
        // Which inputs something lands on, as port masks gathered without a branch per port
        // (arrivals are random: a branch per poll is mispredicted often), then only those are
        // read. Credits and flits touch disjoint state, so taking all credits first leaves
        // the same state as taking them port by port.
        let (mut fa, mut ca) = (0u32, 0u32);
        // The flit inputs' row, when polled as one (see `set_input_rows`).
        let mut frow = None;
        if BF && lands && !self.in_rows[0].is_none() {
            // As below, the slots of the five inputs found from one index per arena.
            let (fr, cr) = (flits.row(self.in_rows[0], now, NPORTS), credits.row(self.in_rows[1], now, NPORTS));
            for p in 0..NPORTS {
                fa |= (flits.row_lands(fr, p, now) as u32) << p;
            }
            for p in 0..NPORTS {
                let (hit, cr) = credits.row_lands_value(cr, p, now);
                let c = &mut self.vt[p * self.v + sel(hit, cr.vc as usize, 0)].credits;
                let room = c.credits < c.depth;
                c.credits += (hit & room) as u16;
                c.err |= hit & !room;
            }
            frow = Some(fr);
        } else if lands {
            for p in 0..NPORTS {
                fa |= (flits.lands(self.ports.in_flit[p], now) as u32) << p;
            }
            if BF {
                // A credit is one byte and a group's credit values of one cycle share a line,
                // so every input's credit is applied masked by whether it landed (a fixed
                // loop: the number of credits landing is random, and a loop over them
                // mispredicted its exit almost every cycle). `CreditCounterCl::on_credit`
                // without a branch.
                for p in 0..NPORTS {
                    let (hit, cr) = credits.lands_value(self.ports.in_credit[p], now);
                    let c = &mut self.vt[p * self.v + sel(hit, cr.vc as usize, 0)].credits;
                    let room = c.credits < c.depth;
                    c.credits += (hit & room) as u16;
                    c.err |= hit & !room;
                }
            } else {
                for p in 0..NPORTS {
                    ca |= (credits.lands(self.ports.in_credit[p], now) as u32) << p;
                }
            }
        }
        while ca != 0 {
            let p = ca.trailing_zeros() as usize;
            ca &= ca - 1;
            let cr = credits.landed(self.ports.in_credit[p], now);
            self.vt[p * self.v + cr.vc as usize].credits.on_credit();
        }
        // (Branch-free, a lost head is reported once for all arrivals; otherwise
        // `buffer_write` checks it.)
        let mut lost = false;
        while fa != 0 {
            let p = fa.trailing_zeros() as usize;
            fa &= fa - 1;
            let f = match frow {
                Some(fr) if BF => flits.row_value(fr, p),
                _ => flits.landed(self.ports.in_flit[p], now),
            };
            lost |= self.buffer_write::<BF>(p, f, now);
        }
        if BF {
            assert!(!lost, "router {}: body flit at an idle VC (lost head)", self.id);
        }
        if self.buffered == 0 {
            return (0, false);
        }
        // A head that arrived this cycle starts RC: with `routing_delay >= 1` it cannot ask for
        // an output VC before the next cycle, so VA does not visit it (and a VC that wins an
        // output VC now cannot ask for the switch before the next cycle, so SA skips those).
        let fresh = if self.rd > 0 { self.va_set & !waiting } else { 0 };
        let plain = self.plain();
        let mut won = 0;
        if self.va_set != 0 {
            won = if plain { self.vc_alloc::<true, BF>(now, fresh) } else { self.vc_alloc::<false, false>(now, fresh) };
        }
        let mut moved = 0;
        if self.sa_set != 0 {
            moved = if plain {
                self.sw_alloc::<true, BF>(now, won, flits, credits, &mut sent)
            } else {
                self.sw_alloc::<false, false>(now, won, flits, credits, &mut sent)
            };
        }
        (moved, sent)
    }

    /// Starts loading the lines of the router's state that this cycle's evaluation will read
    /// further on: the input VCs' registers, the front flits of (up to) two VCs asking for the
    /// switch, and the VA grant scratch. The 64 routers' state does not fit in L1, so each of
    /// these is a miss in every cycle, and without the hints they were loaded only when the
    /// allocators reached them, behind mispredicted loop exits that discard the loads issued
    /// ahead. Hints only: no effect on any result.
    #[inline(always)]
    fn prefetch_state(&self) {
        let n = self.ivc.len() * core::mem::size_of::<InVc>();
        let ivc = self.ivc.as_ptr() as *const u8;
        let mut off = 0;
        while off < n {
            prefetch(ivc.wrapping_add(off));
            off += 64;
        }
        prefetch(ivc.wrapping_add(n - 1));
        // The two lowest VCs of `sa_set` (VC 0 when there are fewer, a harmless extra hint).
        let b = self.sa_set;
        let b2 = b & b.wrapping_sub(1);
        for iv in [(b.trailing_zeros() & 63) as usize, (b2.trailing_zeros() & 63) as usize] {
            let iv = sel(iv < self.ivc.len(), iv, 0);
            let f = self.buf.as_ptr().wrapping_add(iv * self.depth + self.ivc[iv].head as usize) as *const u8;
            prefetch(f);
            prefetch(f.wrapping_add(core::mem::size_of::<Flit>() - 1));
        }
        let g = self.va_grants_to.as_ptr();
        prefetch(g);
        prefetch(g.wrapping_add(self.ivc.len() - 1));
    }

    /// Returns whether the flit was a body flit at an idle VC (a lost head; the caller
    /// panics): checked by the caller once for all arrivals, as a check here was compiled to
    /// a branch on whether the VC is idle, which is random.
    #[inline(never)]
    #[must_use]
    fn buffer_write<const BF: bool>(&mut self, p: usize, f: Flit, now: Cycle) -> bool {
        let iv = p * self.v + f.vc as usize;
        let depth = self.depth;
        let s = &mut self.ivc[iv];
        assert!(
            (s.len as usize) < depth,
            "router r_{}_{} in_{} vc{}: buffer overfilled (credit protocol violated)",
            self.coord.y,
            self.coord.x,
            Dir::from_idx(p).short(),
            f.vc
        );
        let mut slot = s.head as usize + s.len as usize;
        if slot >= depth {
            slot -= depth;
        }
        if !BF {
            s.front_since = if s.len == 0 { now } else { s.front_since };
            s.len += 1;
            self.buf[iv * depth + slot] = f;
            self.buffered += 1;
            match s.state {
                VcState::Idle => {
                    assert!(f.head, "router {}: body flit at an idle VC (lost head)", self.id);
                    s.state = VcState::Routing;
                    s.out_port = route_xy_fl(self.coord, f.dest_coord()) as u8;
                    s.ready = now + self.rd * self.tk;
                    self.va_set |= 1 << iv;
                }
                VcState::Active => {
                    self.sa_set |= 1 << iv;
                }
                _ => {}
            }
            return false;
        }
        // (Selects, not branches: whether a VC is empty, idle or active is random.)
        s.front_since = sel(s.len == 0, now, s.front_since);
        s.len += 1;
        self.buf[iv * depth + slot] = f;
        self.buffered += 1;
        // An idle VC starts RC with this (head) flit; an active one asks for the switch.
        let (idle, active) = (s.state == VcState::Idle, s.state == VcState::Active);
        let route = route_xy_bf(self.coord, f.dest_coord());
        s.state = sel(idle, VcState::Routing, s.state);
        s.out_port = sel(idle, route, s.out_port);
        s.ready = sel(idle, now + self.rd * self.tk, s.ready);
        self.va_set |= (idle as u64) << iv;
        self.sa_set |= (active as u64) << iv;
        idle & !f.head
    }

    #[inline]
    fn front(&self, iv: usize) -> &Flit {
        let s = &self.ivc[iv];
        &self.buf[iv * self.depth + s.head as usize]
    }

    /// VC allocation: separable iSLIP over input VCs × output VCs (BookSim `islip` VC
    /// allocator, one iteration). A VC in Routing/VcAlloc whose RC is done requests every free
    /// VC of its output port, so all free VCs of a port see the same requester set. A decision
    /// takes effect `va_delay − 1` cycles later, when the output VC is re-checked; a VC that got
    /// nothing retries `va_delay` cycles after it asked. Returns the input VCs that acquired an
    /// output VC this cycle (they may ask for the switch from the next cycle on).
    ///
    /// `PLAIN`: the router is plain (see [`RouterCl::plain`]), so the branches of a longer VA
    /// and of the low-priority stream are compiled out; `!PLAIN` handles every router.
    #[inline(never)]
    #[allow(clippy::needless_range_loop)] // o indexes several per-port arrays
    fn vc_alloc<const PLAIN: bool, const BF: bool>(&mut self, now: Cycle, fresh: u64) -> u64 {
        let v = self.v;
        let nv = (NPORTS * v) as u32;
        let fast = PLAIN || self.va == 1;
        let mut req_by_port = [0u64; NPORTS];
        let mut ports_req = 0u32;
        let mut asked = 0u64;
        let prio = !PLAIN && self.low_class != u8::MAX;
        // Requesters whose packet is low priority.
        let mut low_iv = 0u64;
        // VCs whose head arrived this cycle are still in RC (see `eval`): not visited.
        let mut bits = self.va_set & !fresh;
        if PLAIN && BF {
            // As the loop below, two VCs per iteration (the second masked when there is only
            // one) and without a branch (whether a VC is ready and its port has a free VC is
            // random): a plain router decides in the cycle it asks (no decision is ever
            // pending), and a VC that cannot request changes no state.
            while bits != 0 {
                for (iv, en) in pop_two(&mut bits) {
                    let s = &mut self.ivc[iv];
                    let ok = en & (s.ready <= now);
                    s.state = sel(ok, VcState::VcAlloc, s.state);
                    let o = s.out_port as usize;
                    let free = self.ovc_free[o] != 0;
                    self.stats.va_stalls += (ok & !free) as u64;
                    let req = ok & free;
                    req_by_port[o] |= (req as u64) << iv;
                    ports_req |= (req as u32) << o;
                    asked |= (req as u64) << iv;
                }
            }
        }
        while bits != 0 {
            let iv = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let s = &mut self.ivc[iv];
            if s.va_apply != NEVER || s.ready > now {
                continue;
            }
            s.state = VcState::VcAlloc;
            let o = s.out_port as usize;
            if self.ovc_free[o] == 0 {
                // No request can be made. With a 1-cycle VA this attempt changes no state (the
                // VC simply asks again next cycle), so it is skipped; with longer VA the retry
                // phase matters and the attempt is recorded below.
                self.stats.va_stalls += 1;
                if fast {
                    continue;
                }
            } else {
                req_by_port[o] |= 1 << iv;
                ports_req |= 1 << o;
            }
            asked |= 1 << iv;
            if prio && self.buf[iv * self.depth + self.ivc[iv].head as usize].class >= self.low_class {
                low_iv |= 1 << iv;
            }
        }
        let mut won = 0u64;
        if asked != 0 {
            // Grant phase: each free output VC picks one requester. `va_grants_to` is scratch
            // kept zeroed between calls: only the entries of requesters are touched.
            while ports_req != 0 {
                let o = ports_req.trailing_zeros() as usize;
                ports_req &= ports_req - 1;
                let r = req_by_port[o];
                if PLAIN && BF {
                    // Every VC of the port, the busy ones masked (a fixed loop: the number of
                    // free VCs is random). `r` is not empty (the port was requested).
                    let free = self.ovc_free[o];
                    for vc in 0..v {
                        let ov = o * v + vc;
                        let g = rr_pick_nz(r, self.vt[ov].gptr as u32);
                        self.va_grants_to[g] |= (free >> vc & 1) << ov;
                    }
                    continue;
                }
                let mut f = self.ovc_free[o];
                while f != 0 {
                    let ov = o * v + f.trailing_zeros() as usize;
                    f &= f - 1;
                    let mut r = r;
                    if prio {
                        // The last VC is the low-priority stream's, the others the regular one's.
                        r &= if ov % v == v - 1 { low_iv } else { !low_iv };
                        if r == 0 {
                            continue;
                        }
                    }
                    let g = rr_pick(r, self.vt[ov].gptr as u32, nv).unwrap() as usize;
                    self.va_grants_to[g] |= 1 << ov;
                }
            }
            // Accept phase: each requester accepts one grant; pointers move on accept only.
            let apply = now + (self.va - 1) * self.tk;
            let mut bits = asked;
            while bits != 0 {
                let iv = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let m = std::mem::take(&mut self.va_grants_to[iv]);
                if PLAIN && BF {
                    // As below without a branch (whether a requester got a grant is random):
                    // every change masked by `got` (`a` is 0 without a grant). In a plain
                    // router every asked VC requested, so one without a grant stalled.
                    let got = m != 0;
                    let a = rr_pick_nz(m, self.vt[iv].aptr as u32) & 63;
                    self.vt[a].gptr = sel(got, wrap_inc(iv, nv as usize) as u8, self.vt[a].gptr);
                    self.vt[iv].aptr = sel(got, wrap_inc(a, nv as usize) as u8, self.vt[iv].aptr);
                    self.stats.va_stalls += !got as u64;
                    // `take_ovc(iv, a)`, masked.
                    let (op, ovc) = (self.vt[a].port as usize, self.vt[a].vc);
                    self.vt[a].owner = sel(got, iv as u8, self.vt[a].owner);
                    self.ovc_free[op] &= !((got as u64) << ovc);
                    let s = &mut self.ivc[iv];
                    s.out_vc = sel(got, ovc, s.out_vc);
                    s.state = sel(got, VcState::Active, s.state);
                    s.ready = sel(got, now + self.tk, s.ready);
                    self.va_set &= !((got as u64) << iv);
                    self.sa_set |= (got as u64) << iv;
                    self.stats.va_grants += got as u64;
                    won |= (got as u64) << iv;
                    continue;
                }
                let grant = if m != 0 {
                    let a = rr_pick(m, self.vt[iv].aptr as u32, nv).unwrap() as usize;
                    self.vt[a].gptr = wrap_inc(iv, nv as usize) as u8;
                    self.vt[iv].aptr = wrap_inc(a, nv as usize) as u8;
                    a as u8
                } else {
                    if req_by_port[self.ivc[iv].out_port as usize] >> iv & 1 == 1 {
                        self.stats.va_stalls += 1;
                    }
                    NONE8
                };
                if fast {
                    if grant != NONE8 {
                        self.take_ovc(iv, grant as usize, now);
                        won |= 1 << iv;
                    }
                } else {
                    let s = &mut self.ivc[iv];
                    s.va_apply = apply;
                    s.va_grant = grant;
                }
            }
        }
        if fast {
            return won;
        }
        // Update: decisions taking effect now (VA longer than one cycle).
        let mut bits = self.va_set;
        while bits != 0 {
            let iv = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let s = &mut self.ivc[iv];
            if s.va_apply != now {
                continue;
            }
            s.va_apply = NEVER;
            let g = s.va_grant;
            if g != NONE8 && self.vt[g as usize].owner == NONE8 {
                self.take_ovc(iv, g as usize, now);
                won |= 1 << iv;
            } else {
                s.ready = now + self.tk;
            }
        }
        won
    }

    /// Input VC `iv` acquires output VC `ov`; it may request the switch from the next cycle.
    #[inline]
    fn take_ovc(&mut self, iv: usize, ov: usize, now: Cycle) {
        debug_assert_eq!(self.vt[ov].owner, NONE8);
        self.vt[ov].owner = iv as u8;
        let o = self.vt[ov].port as usize;
        self.ovc_free[o] &= !(1 << self.vt[ov].vc);
        let s = &mut self.ivc[iv];
        s.out_vc = self.vt[ov].vc;
        s.state = VcState::Active;
        s.ready = now + self.tk;
        self.va_set &= !(1 << iv);
        self.sa_set |= 1 << iv;
        self.stats.va_grants += 1;
    }

    /// Switch allocation: per input port one VC per output (round-robin from `sw_rr`), then
    /// separable iSLIP over input ports × output ports. Only VCs whose downstream VC has a
    /// credit request. A granted flit leaves its buffer when the decision takes effect
    /// (`sa_delay − 1` cycles later, credit re-checked), returns a credit upstream and enters
    /// the crossbar for `st_delay` cycles.
    ///
    /// `PLAIN` as for [`RouterCl::vc_alloc`] (also: no output is serialized); `fresh`: VCs
    /// that won an output VC in this cycle's VA, not ready before the next cycle.
    #[inline(never)]
    #[allow(clippy::needless_range_loop)] // p/o index several per-port arrays
    fn sw_alloc<const PLAIN: bool, const BF: bool>(&mut self, now: Cycle, fresh: u64, flits: &LinkArena<Flit>, credits: &LinkArena<Credit>, sent: &mut bool) -> u64 {
        let v = self.v;
        let fast = PLAIN || self.sa == 1;
        let mut chosen = [[0u8; NPORTS]; NPORTS];
        let mut rank = [[u8::MAX; NPORTS]; NPORTS];
        let mut out_req = [0u64; NPORTS];
        // Ports requesting each output with a regular (not low-priority) flit.
        let mut hi_req = [0u64; NPORTS];
        let prio = !PLAIN && self.low_class != u8::MAX;
        let mut outs = 0u32;
        let mut asked = 0u64;
        let mut n_req = 0u64;
        // Flits after a tail that are not heads (checked once, see `traverse`).
        let mut bad = false;
        let mut bits = self.sa_set & !fresh;
        if PLAIN && BF {
            // The requests of two VCs per iteration (the second masked when there is only
            // one), without a branch (whether a VC is ready and its downstream VC has a
            // credit is random; as the loop below): half the iterations, and a loop whose
            // trip count varies less, so its exit is mispredicted less often.
            while bits != 0 {
                for (iv, en) in pop_two(&mut bits) {
                    let s = &self.ivc[iv];
                    let rdy = en & (s.ready <= now);
                    let o = s.out_port as usize;
                    let cs = self.vt[o * v + s.out_vc as usize].credits.can_send();
                    let can = rdy & cs;
                    self.stats.sa_credit_stalls += (rdy & !cs) as u64;
                    n_req += can as u64;
                    let p = self.vt[iv].port as usize;
                    let vc = self.vt[iv].vc;
                    let off = self.sw_rr[p] as u8;
                    let r = sel(vc >= off, vc.wrapping_sub(off), vc.wrapping_add(v as u8).wrapping_sub(off));
                    let take = can & (r < rank[p][o]);
                    rank[p][o] = sel(take, r, rank[p][o]);
                    chosen[p][o] = sel(take, vc, chosen[p][o]);
                    out_req[o] |= (can as u64) << p;
                    outs |= (can as u32) << o;
                }
            }
        }
        while bits != 0 {
            let iv = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let s = &self.ivc[iv];
            if (!PLAIN && s.sa_apply != NEVER) || s.ready > now {
                continue;
            }
            if !fast {
                asked |= 1 << iv;
            }
            let o = s.out_port as usize;
            let can = self.vt[o * v + s.out_vc as usize].credits.can_send();
            if !can {
                self.stats.sa_credit_stalls += 1;
                continue;
            }
            if !PLAIN && self.ser[o] > 1 && self.out_free_at[o] > now {
                // The output is still serializing the previous flit.
                continue;
            }
            n_req += 1;
            let p = self.vt[iv].port as usize;
            let vc = self.vt[iv].vc;
            let off = self.sw_rr[p] as u8;
            let mut r = if vc >= off { vc - off } else { vc + v as u8 - off };
            if prio {
                if self.front(iv).class >= self.low_class {
                    if self.hi_seen[o] != NEVER && now < self.hi_seen[o] + self.low_idle {
                        continue;
                    }
                    // Low priority: ranked after every regular VC of the port.
                    r += v as u8;
                } else {
                    hi_req[o] |= 1 << p;
                    self.hi_seen[o] = now;
                }
            }
            if r < rank[p][o] {
                rank[p][o] = r;
                chosen[p][o] = vc;
            }
            out_req[o] |= 1 << p;
            outs |= 1 << o;
        }
        let mut moved = 0;
        if n_req != 0 {
            // Grant phase over the requested outputs only, accept phase over granted inputs.
            // (Eight entries: the fixed loop below writes an empty grant to entry 0.)
            let mut grants_to = [0u64; 8];
            let mut ins = 0u32;
            let mut m = outs;
            if PLAIN && BF {
                // Every output, the unrequested ones masked (a fixed loop: the number of
                // requested outputs is random).
                for o in 0..NPORTS {
                    let r = out_req[o];
                    let b = (r != 0) as u64;
                    let g = rr_pick_nz(r, self.sa_gptr[o]) & 7;
                    grants_to[g] |= b << o;
                    ins |= (b as u32) << g;
                }
                m = 0;
            }
            while m != 0 {
                let o = m.trailing_zeros() as usize;
                m &= m - 1;
                if prio && hi_req[o] != 0 {
                    out_req[o] = hi_req[o];
                }
                let g = rr_pick(out_req[o], self.sa_gptr[o], NPORTS as u32).unwrap() as usize;
                grants_to[g] |= 1 << o;
                ins |= 1 << g;
            }
            let apply = now + (self.sa - 1) * self.tk;
            while ins != 0 {
                let p = ins.trailing_zeros() as usize;
                ins &= ins - 1;
                let mut g = grants_to[p];
                if prio {
                    // An input port sends one flit a cycle: a regular grant is accepted first.
                    let hi: u64 = (0..NPORTS).filter(|&o| g >> o & 1 == 1 && (rank[p][o] as usize) < v).map(|o| 1u64 << o).sum();
                    if hi != 0 {
                        g = hi;
                    }
                }
                let a = rr_pick(g, self.sa_aptr[p], NPORTS as u32).unwrap() as usize;
                self.sa_gptr[a] = wrap_inc(p, NPORTS);
                self.sa_aptr[p] = wrap_inc(a, NPORTS);
                let vc = chosen[p][a] as usize;
                self.sw_rr[p] = wrap_inc(vc, v);
                let iv = p * v + vc;
                moved += 1;
                if fast {
                    bad |= self.traverse::<PLAIN, BF>(iv, now, flits, credits, sent);
                } else {
                    let s = &mut self.ivc[iv];
                    s.sa_apply = apply;
                    s.sa_grant = true;
                    asked &= !(1 << iv);
                }
            }
            self.stats.sa_conflicts += n_req - moved;
        }
        if fast {
            assert!(!bad, "router {}: flit after a tail is not a head", self.id);
            return moved;
        }
        // SA longer than one cycle: the attempts that got nothing also wait out the delay.
        let apply = now + (self.sa - 1) * self.tk;
        let mut bits = asked;
        while bits != 0 {
            let iv = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let s = &mut self.ivc[iv];
            s.sa_apply = apply;
            s.sa_grant = false;
        }
        // Update: decisions taking effect now.
        let mut moved = 0;
        let mut bits = self.sa_set;
        while bits != 0 {
            let iv = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let s = self.ivc[iv];
            if s.sa_apply != now {
                continue;
            }
            self.ivc[iv].sa_apply = NEVER;
            let ov = s.out_port as usize * v + s.out_vc as usize;
            if s.sa_grant && self.vt[ov].credits.can_send() {
                bad |= self.traverse::<false, false>(iv, now, flits, credits, sent);
                moved += 1;
            } else {
                self.ivc[iv].ready = now + self.tk;
            }
        }
        assert!(!bad, "router {}: flit after a tail is not a head", self.id);
        moved
    }

    /// The front flit of `iv` leaves its buffer through the switch (SA decision taking
    /// effect): credit consumed downstream, credit returned upstream, crossbar entered.
    ///
    /// Returns whether the flit after a tail is not a head (the caller panics; as for
    /// [`Self::buffer_write`], a check here was a branch on a random condition).
    #[inline]
    #[must_use]
    fn traverse<const PLAIN: bool, const BF: bool>(&mut self, iv: usize, now: Cycle, flits: &LinkArena<Flit>, credits: &LinkArena<Credit>, sent: &mut bool) -> bool {
        let mut bad = false;
        let v = self.v;
        let s = self.ivc[iv];
        let o = s.out_port as usize;
        let ov = o * v + s.out_vc as usize;
        // The flit is copied out whole, then its new hop count and VC are set in the copy.
        // (Setting them in the buffer slot first made the copy's 4-byte load of the bytes
        // around them wait for those two byte stores to reach the cache: a failed store
        // forwarding on a line that is usually not in L1, the largest stall of the mesh.)
        let at = iv * self.depth + s.head as usize;
        let mut f = self.buf[at];
        f.hops = f.hops.saturating_add(1);
        f.vc = s.out_vc;
        {
            let s = &mut self.ivc[iv];
            s.len -= 1;
            // An emptied ring restarts at slot 0: a lightly loaded VC then reuses the same one
            // or two cache lines instead of walking its whole buffer (same behaviour).
            // (Branch-free: whether the ring wraps or empties is random.)
            let next = s.head as usize + 1;
            s.head = (next * (next < self.depth) as usize * (s.len != 0) as usize) as u8;
            s.front_since = now;
        }
        self.buffered -= 1;
        self.vt[ov].credits.on_send();
        if f.tail {
            // wait_for_tail_credit = 0: the output VC is free once the tail is sent.
            self.vt[ov].owner = NONE8;
            self.ovc_free[o] |= 1 << s.out_vc;
        }
        // The freed slot goes back upstream as a credit.
        let p = self.vt[iv].port as usize;
        // SAFETY: within this router's eval (see `eval`), sole sender on this link.
        unsafe { credits.send(self.ports.out_credit[p], now, Credit { vc: self.vt[iv].vc }) };
        *sent = true;
        // Switch traversal (ST) and the link are one pipeline: the output link's latency
        // includes `st_delay`, so the flit is handed to it now and arrives exactly when it would
        // after ST + link.
        // SAFETY: within this router's eval, sole sender on this link.
        unsafe { flits.send(self.ports.out_flit[o], now, f) };
        if !PLAIN && self.ser[o] > 1 {
            self.out_free_at[o] = now + self.ser[o] * self.tk;
        }
        let class = if (f.class as usize) < N_CLASSES { f.class } else { f.class % N_CLASSES as u8 };
        self.out_class_flits[o][class as usize] += 1;
        self.out_class[o] = class + 1;
        self.out_trace[o] = f.trace_id();
        self.traced_send = true;
        self.stats.flits_switched += 1;
        let len = self.ivc[iv].len;
        let st = &mut self.ivc[iv];
        if !BF {
            if f.tail {
                if len > 0 {
                    // Next packet's head: RC starts next cycle.
                    let nf = &self.buf[iv * self.depth + st.head as usize];
                    assert!(nf.head, "router {}: flit after a tail is not a head", self.id);
                    st.state = VcState::Routing;
                    st.out_port = route_xy_fl(self.coord, nf.dest_coord()) as u8;
                    st.ready = now + (1 + self.rd) * self.tk;
                    self.va_set |= 1 << iv;
                } else {
                    st.state = VcState::Idle;
                }
                self.sa_set &= !(1 << iv);
            } else {
                st.ready = now + self.tk;
                if len == 0 {
                    self.sa_set &= !(1 << iv);
                }
            }
            return false;
        }
        if f.tail {
            // With a flit left it is the next packet's head: RC starts next cycle; else the
            // VC goes idle. (Selects: whether a flit is left is random. An emptied ring's
            // head is slot 0, whose stale flit is read and ignored.)
            let more = len > 0;
            let nf = &self.buf[iv * self.depth + st.head as usize];
            bad = more & !nf.head;
            let route = route_xy_bf(self.coord, nf.dest_coord());
            st.state = sel(more, VcState::Routing, VcState::Idle);
            st.out_port = sel(more, route, st.out_port);
            st.ready = sel(more, now + (1 + self.rd) * self.tk, st.ready);
            self.va_set |= (more as u64) << iv;
            self.sa_set &= !(1 << iv);
        } else {
            st.ready = now + self.tk;
            self.sa_set &= !(((len == 0) as u64) << iv);
        }
        bad
    }

    /// Lines describing blocked buffers, for the watchdog diagnostic.
    pub fn blocked_report(&self, scope: &str, out: &mut Vec<(Cycle, String)>, waiting: &mut Vec<(Cycle, String)>) {
        for iv in 0..NPORTS * self.v {
            let s = &self.ivc[iv];
            if s.len == 0 {
                continue;
            }
            let (p, vc) = (iv / self.v, iv % self.v);
            let f = self.front(iv);
            let why = match s.state {
                VcState::Active => {
                    let ov = s.out_port as usize * self.v + s.out_vc as usize;
                    format!(
                        "waits for switch to out_{} vc{} (credits {})",
                        Dir::from_idx(s.out_port as usize).short(),
                        s.out_vc,
                        self.vt[ov].credits.credits
                    )
                }
                VcState::Routing | VcState::VcAlloc => {
                    let o = s.out_port as usize;
                    let owners: Vec<String> = (0..self.v)
                        .map(|ov| match self.vt[o * self.v + ov].owner {
                            NONE8 => format!("vc{ov}: free"),
                            w => format!("vc{ov}: held by in_{} vc{}", Dir::from_idx(w as usize / self.v).short(), w as usize % self.v),
                        })
                        .collect();
                    format!("waits for an output VC on out_{} ({})", Dir::from_idx(o).short(), owners.join(", "))
                }
                VcState::Idle => "idle with flits (model bug)".into(),
            };
            out.push((s.front_since, format!(
                "{scope}.in_{}.vc{}: {} flit(s), front waiting since cycle {}, state {:?}, {}",
                Dir::from_idx(p).short(),
                vc,
                s.len,
                // Times in this router's cycles (a package router runs on a multi-clock tick).
                s.front_since / self.tk,
                s.state,
                why
            )));
            waiting.push((s.front_since, format!(
                "packet {:#x} (src {} -> dest {}, created cycle {}) at {scope}.in_{}.vc{}",
                f.pid,
                f.src(),
                f.dest,
                f.ctime / self.tk,
                Dir::from_idx(p).short(),
                vc
            )));
        }
    }
}

/// A hint to start loading the cache line holding `p` (any address: a prefetch never faults).
#[inline(always)]
fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch has no architectural effect; SSE is part of the x86_64 baseline.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// (x + 1) mod n without a division.
#[inline]
fn wrap_inc(x: usize, n: usize) -> u32 {
    if x + 1 >= n {
        0
    } else {
        (x + 1) as u32
    }
}

fn bits_for(max: u64) -> u32 {
    (64 - max.leading_zeros()).max(1)
}

/// The router's traced signals under `scope` (per input VC its occupancy and state; per output
/// the flit sent and per output VC its credits and busy bit), for a router with `ports`, `v`
/// VCs and `depth`-flit buffers. Shared by the CL router and any stand-in (`noc --rtl
/// router`), so both runs declare the same waveform.
pub fn declare_signals(ports: &RouterPorts, v: usize, depth: usize, scope: &[String], out: &mut Vec<SignalDecl>) {
    let occ_w = bits_for(depth as u64);
    for p in 0..NPORTS {
        if ports.in_flit[p].is_none() {
            continue;
        }
        for vc in 0..v {
            let mut sc = scope.to_vec();
            sc.push(format!("in_{}", Dir::from_idx(p).short()));
            sc.push(format!("vc{vc}"));
            out.push(SignalDecl { scope: sc.clone(), name: "occ".into(), width: occ_w });
            out.push(SignalDecl { scope: sc, name: "state".into(), width: 2 });
        }
    }
    for p in 0..NPORTS {
        if ports.out_flit[p].is_none() {
            continue;
        }
        let mut sc = scope.to_vec();
        sc.push(format!("out_{}", Dir::from_idx(p).short()));
        out.push(SignalDecl { scope: sc.clone(), name: "flit_valid".into(), width: 1 });
        out.push(SignalDecl { scope: sc.clone(), name: "flit_id".into(), width: 32 });
        for vc in 0..v {
            let mut s2 = sc.clone();
            s2.push(format!("vc{vc}"));
            out.push(SignalDecl { scope: s2.clone(), name: "credits".into(), width: occ_w });
            out.push(SignalDecl { scope: s2, name: "busy".into(), width: 1 });
        }
    }
}

impl Probe for RouterCl {
    fn declare(&self, scope: &[String], out: &mut Vec<SignalDecl>) {
        declare_signals(&self.ports, self.v, self.depth, scope, out);
    }

    fn sample(&self, out: &mut Vec<u64>) {
        self.sample_to(out);
    }
}

impl SampleBlock for RouterCl {
    #[inline(always)]
    fn sample_to<O: SampleOut>(&self, out: &mut O) {
        sample_signals(
            &self.ports,
            self.v,
            &self.out_trace,
            |iv| (self.ivc[iv].len as u64, self.ivc[iv].state as u64),
            |ov| (self.vt[ov].credits.credits as u64, (self.vt[ov].owner != NONE8) as u64),
            out,
        );
    }
}

/// The values of [`declare_signals`]'s signals, in its order: `in_vc(iv)` gives input VC
/// `iv`'s (occupancy, state), `out_vc(ov)` output VC `ov`'s (credits, busy); `out_trace` is the
/// flit id sent per output this cycle (0: none). Shared by the CL router and any stand-in, so
/// the sample order follows the declaration in one place.
#[inline(always)]
pub fn sample_signals(ports: &RouterPorts, v: usize, out_trace: &[u64; NPORTS], in_vc: impl Fn(usize) -> (u64, u64), out_vc: impl Fn(usize) -> (u64, u64), out: &mut impl SampleOut) {
    // Gathered on the stack and given as slices of up to 32 values (a 2×2 package's router
    // has 30): a traced run compares each slice in one tight loop, rather than a call and a
    // capacity or bounds check per value.
    let mut buf = [0u64; 32];
    let mut n = 0;
    let mut put = |x: u64, out: &mut _| {
        buf[n] = x;
        n += 1;
        if n == buf.len() {
            SampleOut::put_slice(out, &buf);
            n = 0;
        }
    };
    for p in 0..NPORTS {
        if ports.in_flit[p].is_none() {
            continue;
        }
        for vc in 0..v {
            let (occ, state) = in_vc(p * v + vc);
            put(occ, out);
            put(state, out);
        }
    }
    for p in 0..NPORTS {
        if ports.out_flit[p].is_none() {
            continue;
        }
        put((out_trace[p] != 0) as u64, out);
        put(out_trace[p], out);
        for vc in 0..v {
            let (credits, busy) = out_vc(p * v + vc);
            put(credits, out);
            put(busy, out);
        }
    }
    out.put_slice(&buf[..n]);
}

/// One-line trace of the router's state after a cycle (DESIGN-NOTES S4, PyMTL symbols):
/// `r_1_2 e[A1 .0] w[.0 .0] … > e l`. Per input port and VC: the state (`.` idle, `R` route
/// computation, `V` waiting for an output VC, `A` active) and the buffer occupancy, with `#`
/// when a VC holds flits but sent none this cycle; after `>`, the outputs a flit was switched
/// to this cycle.
impl std::fmt::Display for RouterCl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write_line_trace(f, self.coord, &self.ports, self.v, &self.out_trace, |iv| {
            let s = &self.ivc[iv];
            (s.state, s.len as usize, s.len > 0 && s.front_since < self.last_eval)
        })
    }
}

/// Writes the line trace above for a router at `coord`: `vc(iv)` gives input VC `iv`'s
/// (state, occupancy, stalled this cycle); `out_trace` the flit id sent per output (0: none).
/// Shared by the CL router and any stand-in, so both print the same line.
pub fn write_line_trace(f: &mut std::fmt::Formatter<'_>, coord: Coord, ports: &RouterPorts, v: usize, out_trace: &[u64; NPORTS], vc: impl Fn(usize) -> (VcState, usize, bool)) -> std::fmt::Result {
    write!(f, "r_{}_{}", coord.y, coord.x)?;
    for p in 0..NPORTS {
        if ports.in_flit[p].is_none() {
            continue;
        }
        write!(f, " {}[", Dir::from_idx(p).short())?;
        for c in 0..v {
            let (state, len, stalled) = vc(p * v + c);
            let g = match state {
                VcState::Idle => '.',
                VcState::Routing => 'R',
                VcState::VcAlloc => 'V',
                VcState::Active => 'A',
            };
            let stall = if stalled { "#" } else { "" };
            write!(f, "{}{g}{}{stall}", if c > 0 { " " } else { "" }, len)?;
        }
        write!(f, "]")?;
    }
    write!(f, " >")?;
    for p in 0..NPORTS {
        if out_trace[p] != 0 {
            write!(f, " {}", Dir::from_idx(p).short())?;
        }
    }
    Ok(())
}
