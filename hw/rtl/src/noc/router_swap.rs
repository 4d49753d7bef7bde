//! The RTL router inside the cycle-level mesh, in place of the CL model (`waferstream noc
//! --rtl router`, PyMTL3-style): [`RouterRtlModel`] implements `hw::noc::RouterModel` by
//! driving a [`Router2Rtl`] one rising + falling clock edge per evaluated router cycle, with
//! the mesh links' arrivals as its inputs and its outputs sent on the mesh links.
//!
//! # What the stand-in adds around the block
//! * The flit bookkeeping the CL carries for measurement (packet id, creation and injection
//!   cycles, sequence number, class, watch and record bits) rides in a side table: an arriving
//!   flit's entry is stored under a free 8-bit handle, the handle travels through the RTL
//!   buffers and crossbar as the flit's payload, and the flit leaving on an output is rebuilt
//!   from its entry with the RTL's head/tail/destination, output VC and hop count. No router
//!   decision reads the table.
//! * The statistics counters: the per-cycle increments come from the block's event masks
//!   ([`stats_of`]); the lockstep (`tests/rtl_noc_router.rs`) checks them against the CL's
//!   every cycle.
//! * The watchdog and line-trace views (since when each front flit waits, the handles queued
//!   per VC for the diagnostic's packet ids), kept from the same arrivals and pops.
//!
//! # Why skipped edges are exact
//! The block is clocked only in cycles where the router holds a flit or a flit or credit
//! arrives. In any other cycle every VC buffer is empty and no input is valid: no VC can be
//! routed, allocated or switched (each needs a front flit), no credit counter moves (no
//! credit arrives, nothing is sent), no arbiter pointer moves (pointers move on fired grants
//! only), and the route-delay countdown runs only in a VC that holds a head — so the edge
//! would leave every register as it is. The CL returns early from exactly those cycles too.
//! The migration priority's hold-off countdown is the one register that moves on an empty
//! edge; the NoC has no migration stream, so the stand-in runs with the priority off (and
//! refuses a router whose `low_class` is set: it is never built with one).

use std::collections::VecDeque;

use hw::harness::{Cycle, LinkArena, Probe, SignalDecl, NEVER};
use hw::noc::flit::{Credit, Flit};
use hw::noc::router::{RouterPorts, RouterStats, VcState, NPORTS};
use hw::noc::{CfgError, RouterCfg, RouterModel};
use rust_hdl::prelude::*;
use sched::noc::{Coord, Dir};

use super::router::{stats_of, Router2Rtl, RouterIn, RouterParams, RtlFlit};

/// VCs, buffer slots and coordinate bits of the block the stand-in runs ([`Router2Rtl`]).
const V: usize = 2;
const SLOTS: usize = 8;
const CW: usize = 3;
/// Handles of the 8-bit payload.
const HANDLES: usize = 256;

/// The RTL router as a mesh tile's router.
pub struct RouterRtlModel {
    uut: Box<Router2Rtl>,
    coord: Coord,
    ports: RouterPorts,
    depth: usize,
    /// Side table of the flits inside the router, by handle, and the free handles.
    table: Vec<Flit>,
    free: Vec<u8>,
    /// Per input VC: handles buffered (front first), and since when the front waits.
    queued: Vec<VecDeque<u8>>,
    front_since: Vec<Cycle>,
    buffered: u32,
    stats: RouterStats,
    /// Trace id of the flit sent on each output in the latest cycle (0: none).
    out_trace: [u64; NPORTS],
    last_eval: Cycle,
}

fn vc_state(s: u64) -> VcState {
    match s {
        0 => VcState::Idle,
        1 => VcState::Routing,
        2 => VcState::VcAlloc,
        _ => VcState::Active,
    }
}

/// [`hw::noc::RouterFactory`] of the RTL router.
pub fn router_factory(id: u32, k: u32, cfg: &RouterCfg, ser: u32, ports: RouterPorts) -> Result<Box<dyn RouterModel>, CfgError> {
    let p = RouterParams::of(cfg, k, ser, V, SLOTS, CW)?;
    let mut uut = Box::new(Router2Rtl::new(&p));
    uut.connect_all();
    let coord = Coord::of(id, k);
    let mut m = RouterRtlModel {
        uut,
        coord,
        ports,
        depth: cfg.vc_buf as usize,
        table: vec![Flit::default(); HANDLES],
        free: (0..HANDLES as u16).rev().map(|h| h as u8).collect(),
        queued: vec![VecDeque::new(); NPORTS * V],
        front_since: vec![NEVER; NPORTS * V],
        buffered: 0,
        stats: RouterStats::default(),
        out_trace: [0; NPORTS],
        last_eval: 0,
    };
    // Reset edge.
    m.uut.drive(m.cur(), None, true, &RouterIn::default());
    m.edge();
    Ok(Box::new(m))
}

impl RouterRtlModel {
    fn cur(&self) -> (u64, u64) {
        (self.coord.x as u64, self.coord.y as u64)
    }

    fn settle(&mut self) {
        // The block's combinational logic is loop-free (the lockstep and co-sim settle it);
        // a failure here is a bug of the block, not of the input.
        crate::cosim::settle(self.uut.as_mut()).expect("RTL router did not settle");
    }

    /// One rising + falling clock edge.
    fn edge(&mut self) {
        self.settle();
        self.uut.clock.next = true.into();
        self.settle();
        self.uut.clock.next = false.into();
        self.settle();
    }
}

impl RouterModel for RouterRtlModel {
    unsafe fn eval(&mut self, now: Cycle, flits: &LinkArena<Flit>, credits: &LinkArena<Credit>) -> (u64, bool) {
        self.last_eval = now;
        self.out_trace = [0; NPORTS];
        let mut input = RouterIn::default();
        let mut any = false;
        for p in 0..NPORTS {
            let l = self.ports.in_flit[p];
            if !l.is_none() {
                // SAFETY: the caller's contract (sole receiver of this link in cycle `now`).
                if let Some(f) = unsafe { flits.recv(l, now) } {
                    let h = self.free.pop().expect("more flits inside one router than payload handles");
                    self.table[h as usize] = f;
                    let iv = p * V + f.vc as usize;
                    if self.queued[iv].is_empty() {
                        self.front_since[iv] = now;
                    }
                    self.queued[iv].push_back(h);
                    self.buffered += 1;
                    let w = RtlFlit { head: f.head, tail: f.tail, low: false, dest_x: f.dest_x, dest_y: f.dest_y, hops: f.hops, payload: h as u64 };
                    input.flit[p] = Some((f.vc as usize, w.pack(CW)));
                    any = true;
                }
            }
            let c = self.ports.in_credit[p];
            if !c.is_none() {
                // SAFETY: as above.
                if let Some(cr) = unsafe { credits.recv(c, now) } {
                    input.credit[p] = Some(cr.vc as usize);
                    any = true;
                }
            }
        }
        if !any && self.buffered == 0 {
            // An edge with empty buffers and no input changes no register (module doc).
            return (0, false);
        }
        self.uut.drive(self.cur(), None, false, &input);
        self.settle();
        let out = self.uut.outputs();
        let d = stats_of(&out);
        self.stats.add(&d);
        let mut sent = false;
        for p in 0..NPORTS {
            if let Some(vc) = out.credit[p] {
                let iv = p * V + vc;
                let h = self.queued[iv].pop_front().expect("RTL popped an empty VC");
                self.free.push(h);
                self.buffered -= 1;
                self.front_since[iv] = now;
                // SAFETY: the caller's contract (sole sender on this link).
                unsafe { credits.send(self.ports.out_credit[p], now, Credit { vc: vc as u8 }) };
                sent = true;
            }
        }
        for o in 0..NPORTS {
            if let Some((vc, w)) = out.flit[o] {
                let r = RtlFlit::unpack(w, CW);
                // The handle was freed above (same cycle); its entry is intact until reused.
                let mut f = self.table[r.payload as usize];
                f.head = r.head;
                f.tail = r.tail;
                f.dest_x = r.dest_x;
                f.dest_y = r.dest_y;
                f.hops = r.hops;
                f.vc = vc as u8;
                self.out_trace[o] = f.trace_id();
                // SAFETY: as above.
                unsafe { flits.send(self.ports.out_flit[o], now, f) };
                sent = true;
            }
        }
        self.uut.clock.next = true.into();
        self.settle();
        self.uut.clock.next = false.into();
        self.settle();
        (d.flits_switched, sent)
    }

    fn occupancy(&self) -> u32 {
        self.buffered
    }

    fn oldest_front(&self) -> Cycle {
        (0..NPORTS * V).filter(|&iv| !self.queued[iv].is_empty()).map(|iv| self.front_since[iv]).min().unwrap_or(NEVER)
    }

    fn stats(&self) -> RouterStats {
        self.stats
    }

    fn vc_occupancy(&self, port: usize, vc: usize) -> usize {
        self.uut.vc_occ[port * V + vc].val().to_u64() as usize
    }

    fn credits(&self, port: usize, vc: usize) -> u16 {
        self.uut.credits[port * V + vc].val().to_u64() as u16
    }

    fn blocked_report(&self, scope: &str, out: &mut Vec<(Cycle, String)>, waiting: &mut Vec<(Cycle, String)>) {
        let u = &self.uut;
        for iv in 0..NPORTS * V {
            let Some(&h) = self.queued[iv].front() else { continue };
            let (p, vc) = (iv / V, iv % V);
            let f = &self.table[h as usize];
            let state = vc_state(u.vc_state[iv].val().to_u64());
            let o = u.vc_port[iv].val().to_u64() as usize;
            let why = match state {
                VcState::Active => {
                    let ovc = u.vc_ovc[iv].val().to_u64() as usize;
                    format!("waits for switch to out_{} vc{} (credits {})", Dir::from_idx(o).short(), ovc, self.credits(o, ovc))
                }
                VcState::Routing | VcState::VcAlloc => {
                    let owners: Vec<String> = (0..V)
                        .map(|ov| {
                            let owner = (0..NPORTS * V).find(|&j| {
                                u.vc_state[j].val().to_u64() == VcState::Active as u64 && u.vc_port[j].val().to_u64() as usize == o && u.vc_ovc[j].val().to_u64() as usize == ov
                            });
                            match owner {
                                None => format!("vc{ov}: free"),
                                Some(w) => format!("vc{ov}: held by in_{} vc{}", Dir::from_idx(w / V).short(), w % V),
                            }
                        })
                        .collect();
                    format!("waits for an output VC on out_{} ({})", Dir::from_idx(o).short(), owners.join(", "))
                }
                VcState::Idle => "idle with flits (model bug)".into(),
            };
            let len = self.queued[iv].len();
            out.push((self.front_since[iv], format!("{scope}.in_{}.vc{}: {} flit(s), front waiting since cycle {}, state {:?}, {} (RTL)", Dir::from_idx(p).short(), vc, len, self.front_since[iv], state, why)));
            waiting.push((self.front_since[iv], format!("packet {:#x} (src {} -> dest {}, created cycle {}) at {scope}.in_{}.vc{}", f.pid, f.src(), f.dest, f.ctime, Dir::from_idx(p).short(), vc)));
        }
    }
}

/// The CL router's signals (`hw::noc::router::RouterCl`'s `Probe`), same names, widths and
/// order, so `noc --rtl router --vcd` writes the CL run's waveform.
impl Probe for RouterRtlModel {
    fn declare(&self, scope: &[String], out: &mut Vec<SignalDecl>) {
        hw::noc::router::declare_signals(&self.ports, V, self.depth, scope, out);
    }

    fn sample(&self, out: &mut Vec<u64>) {
        let u = &self.uut;
        let busy = u.ovc_busy.val().to_u64();
        hw::noc::router::sample_signals(
            &self.ports,
            V,
            &self.out_trace,
            |iv| (u.vc_occ[iv].val().to_u64(), u.vc_state[iv].val().to_u64()),
            |ov| (u.credits[ov].val().to_u64(), busy >> ov & 1),
            out,
        );
    }
}

/// The CL router's line trace (`RouterCl`'s `Display`), from the RTL's registers.
impl std::fmt::Display for RouterRtlModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        hw::noc::router::write_line_trace(f, self.coord, &self.ports, V, &self.out_trace, |iv| {
            let len = self.queued[iv].len();
            (vc_state(self.uut.vc_state[iv].val().to_u64()), len, len > 0 && self.front_since[iv] < self.last_eval)
        })
    }
}
