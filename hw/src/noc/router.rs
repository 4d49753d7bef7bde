//! Input-queued virtual-channel mesh router, CL model of BookSim2's `iq` router.
//!
//! Pipeline per packet (delays from [`RouterCfg`]): buffer write + route computation (RC,
//! `routing_delay`), VC allocation (VA, `va_delay`), switch allocation (SA, `sa_delay`), switch
//! traversal (ST, `st_delay`); body flits skip RC/VA. Allocators are separable single-iteration
//! iSLIP with round-robin arbiters whose pointers move only on accepted grants. Credit flow
//! control per VC; an output VC is held by one input VC from VA until its tail is sent.
//!
//! In-cycle order (BookSim's `_InternalStep`): input queuing (flits into VC buffers, credits
//! into counters) → VA evaluate → VA update → SA evaluate → SA update → ST. A VC that finishes a
//! stage in cycle *t* starts the next one in *t + 1*, which gives the zero-load hop time
//! `routing + va + sa + st + link` of BookSim.
//!
//! The router touches only its own registers and its links, so its state is updated in place
//! during `eval` (no other module can observe it within the cycle); links provide the
//! registered boundary.

use std::collections::VecDeque;

use sched::noc::{route_xy_fl, Coord, Dir};

use super::arbiter::rr_pick;
use super::config::RouterCfg;
use super::credit::CreditCounterCl;
use super::flit::{Credit, Flit};
use crate::harness::{Cycle, Link, Probe, SignalDecl, NEVER};

pub const NPORTS: usize = 5;
/// Port not connected (mesh edge).
pub const NO_LINK: u32 = u32::MAX;
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
        }
    }
}

/// Link ids of the router's ports (`NO_LINK` on the mesh edge).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouterPorts {
    /// Flits arriving on input port p.
    pub in_flit: [u32; NPORTS],
    /// Flits leaving on output port p.
    pub out_flit: [u32; NPORTS],
    /// Credits arriving for output port p (from the downstream input buffer).
    pub in_credit: [u32; NPORTS],
    /// Credits leaving for input port p (to the upstream sender).
    pub out_credit: [u32; NPORTS],
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

pub struct RouterCl {
    pub id: u32,
    pub coord: Coord,
    k: u32,
    v: usize,
    depth: usize,
    rd: u64,
    va: u64,
    sa: u64,
    st: u64,
    pub ports: RouterPorts,
    ivc: Vec<InVc>,
    buf: Vec<Flit>,
    /// Input VC (port·V + vc) holding each output VC, `NONE8` if free.
    ovc_owner: Vec<u8>,
    /// Upstream view of each downstream VC buffer.
    ovc_credits: Vec<CreditCounterCl>,
    va_gptr: Vec<u32>,
    va_aptr: Vec<u32>,
    sa_gptr: [u32; NPORTS],
    sa_aptr: [u32; NPORTS],
    /// Per input port: round-robin offset among its VCs for switch requests.
    sw_rr: [u32; NPORTS],
    /// Flits in switch traversal, per output port: (departure cycle, flit).
    xbar: Vec<VecDeque<(Cycle, Flit)>>,
    /// Input VCs waiting for VA (Routing/VcAlloc) and Active VCs with a flit, as bitmasks.
    va_set: u64,
    sa_set: u64,
    buffered: u32,
    in_xbar: u32,
    /// Flit sent on each output this cycle (for traces): trace id or 0.
    pub out_trace: [u64; NPORTS],
    pub stats: RouterStats,
}

impl RouterCl {
    pub fn new(id: u32, k: u32, cfg: &RouterCfg, ports: RouterPorts) -> Self {
        let v = cfg.vcs as usize;
        let depth = cfg.vc_buf as usize;
        let nv = NPORTS * v;
        assert!(nv <= 64 && depth <= 255);
        let st = cfg.st_delay as u64;
        RouterCl {
            id,
            coord: Coord::of(id, k),
            k,
            v,
            depth,
            rd: cfg.routing_delay as u64,
            va: cfg.va_delay as u64,
            sa: cfg.sa_delay as u64,
            st,
            ports,
            ivc: vec![InVc::default(); nv],
            buf: vec![Flit::default(); nv * depth],
            ovc_owner: vec![NONE8; nv],
            ovc_credits: vec![CreditCounterCl::new(depth as u16); nv],
            va_gptr: vec![0; nv],
            va_aptr: vec![0; nv],
            sa_gptr: [0; NPORTS],
            sa_aptr: [0; NPORTS],
            sw_rr: [0; NPORTS],
            xbar: (0..NPORTS).map(|_| VecDeque::with_capacity(st as usize + 1)).collect(),
            va_set: 0,
            sa_set: 0,
            buffered: 0,
            in_xbar: 0,
            out_trace: [0; NPORTS],
            stats: RouterStats::default(),
        }
    }

    /// Flits held (VC buffers + switch traversal).
    #[inline]
    pub fn occupancy(&self) -> u32 {
        self.buffered + self.in_xbar
    }

    pub fn vc_occupancy(&self, port: usize, vc: usize) -> usize {
        self.ivc[port * self.v + vc].len as usize
    }

    pub fn vc_state(&self, port: usize, vc: usize) -> VcState {
        self.ivc[port * self.v + vc].state
    }

    pub fn credits(&self, port: usize, vc: usize) -> u16 {
        self.ovc_credits[port * self.v + vc].credits
    }

    /// Flits in switch traversal towards `port` on output VC `vc`.
    pub fn xbar_count(&self, port: usize, vc: usize) -> usize {
        self.xbar[port].iter().filter(|(_, f)| f.vc as usize == vc).count()
    }

    /// Test hook for the watchdog: a port whose downstream stops returning credits.
    pub fn fault_zero_credits(&mut self, port: usize) {
        for vc in 0..self.v {
            self.ovc_credits[port * self.v + vc].credits = 0;
        }
    }

    /// One cycle. Returns the number of flits moved (switch traversals), for the watchdog,
    /// and whether anything was sent on a link this cycle.
    ///
    /// # Safety
    /// Must be called by the engine in cycle `now`, with `flits`/`credits` the system's links
    /// and this router the only sender/receiver of the links named in its `ports`.
    pub unsafe fn eval(&mut self, now: Cycle, flits: &[Link<Flit>], credits: &[Link<Credit>]) -> (u64, bool) {
        let mut sent = false;
        if self.out_trace != [0; NPORTS] {
            self.out_trace = [0; NPORTS];
        }
        // --- input queuing: flits into VC buffers, credits into counters
        for p in 0..NPORTS {
            let l = self.ports.in_flit[p];
            if l != NO_LINK {
                if let Some(f) = flits[l as usize].recv(now) {
                    self.buffer_write(p, f, now);
                }
            }
            let c = self.ports.in_credit[p];
            if c != NO_LINK {
                if let Some(cr) = credits[c as usize].recv(now) {
                    self.ovc_credits[p * self.v + cr.vc as usize].on_credit();
                }
            }
        }
        if self.buffered == 0 && self.in_xbar == 0 {
            return (0, false);
        }
        if self.va_set != 0 {
            self.vc_alloc(now);
        }
        let mut moved = 0;
        if self.sa_set != 0 {
            moved = self.sw_alloc(now, credits, &mut sent);
        }
        // --- switch traversal: flits whose crossbar delay has elapsed leave on their link
        if self.in_xbar != 0 {
            for o in 0..NPORTS {
                if let Some(&(t, f)) = self.xbar[o].front() {
                    if t == now {
                        self.xbar[o].pop_front();
                        self.in_xbar -= 1;
                        flits[self.ports.out_flit[o] as usize].send(now, f);
                        self.out_trace[o] = f.trace_id();
                        sent = true;
                    }
                }
            }
        }
        (moved, sent)
    }

    fn buffer_write(&mut self, p: usize, f: Flit, now: Cycle) {
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
        let slot = (s.head as usize + s.len as usize) % depth;
        s.len += 1;
        self.buf[iv * depth + slot] = f;
        self.buffered += 1;
        match s.state {
            VcState::Idle => {
                assert!(f.head, "router {}: body flit at an idle VC (lost head)", self.id);
                s.state = VcState::Routing;
                s.out_port = route_xy_fl(self.coord, Coord::of(f.dest as u32, self.k)) as u8;
                s.ready = now + self.rd;
                self.va_set |= 1 << iv;
            }
            VcState::Active => {
                self.sa_set |= 1 << iv;
            }
            _ => {}
        }
    }

    #[inline]
    fn front(&self, iv: usize) -> &Flit {
        let s = &self.ivc[iv];
        &self.buf[iv * self.depth + s.head as usize]
    }

    /// VC allocation: separable iSLIP over input VCs × output VCs (BookSim `islip` VC
    /// allocator, one iteration). A VC in Routing/VcAlloc whose RC is done requests every free
    /// VC of its output port. A decision takes effect `va_delay − 1` cycles later, when the
    /// output VC is re-checked; a VC that got nothing retries `va_delay` cycles after it asked.
    fn vc_alloc(&mut self, now: Cycle) {
        let v = self.v;
        let nv = NPORTS * v;
        let mut out_req = [0u64; 64];
        let mut asked = 0u64;
        let mut bits = self.va_set;
        while bits != 0 {
            let iv = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let s = &mut self.ivc[iv];
            if s.va_apply != NEVER || s.ready > now {
                continue;
            }
            s.state = VcState::VcAlloc;
            asked |= 1 << iv;
            let o = s.out_port as usize;
            for ov in o * v..(o + 1) * v {
                if self.ovc_owner[ov] == NONE8 {
                    out_req[ov] |= 1 << iv;
                }
            }
        }
        if asked != 0 {
            // Grant phase: each output VC picks one requesting input VC.
            let mut grants_to = [0u64; 64];
            for ov in 0..nv {
                if out_req[ov] != 0 {
                    let g = rr_pick(out_req[ov], self.va_gptr[ov], nv as u32).unwrap() as usize;
                    grants_to[g] |= 1 << ov;
                }
            }
            // Accept phase: each input VC accepts one grant; pointers move on accept only.
            let apply = now + self.va - 1;
            let mut bits = asked;
            while bits != 0 {
                let iv = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let s = &mut self.ivc[iv];
                s.va_apply = apply;
                s.va_grant = NONE8;
                if grants_to[iv] != 0 {
                    let a = rr_pick(grants_to[iv], self.va_aptr[iv], nv as u32).unwrap() as usize;
                    self.va_gptr[a] = ((iv + 1) % nv) as u32;
                    self.va_aptr[iv] = ((a + 1) % nv) as u32;
                    s.va_grant = a as u8;
                }
            }
        }
        // Update: decisions taking effect now.
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
            if g != NONE8 && self.ovc_owner[g as usize] == NONE8 {
                self.ovc_owner[g as usize] = iv as u8;
                s.out_vc = (g as usize % v) as u8;
                s.state = VcState::Active;
                s.ready = now + 1;
                self.va_set &= !(1 << iv);
                self.sa_set |= 1 << iv;
                self.stats.va_grants += 1;
            } else {
                s.ready = now + 1;
                self.stats.va_stalls += 1;
            }
        }
    }

    /// Switch allocation: per input port one VC per output (round-robin from `sw_rr`), then
    /// separable iSLIP over input ports × output ports. Only VCs whose downstream VC has a
    /// credit request. A granted flit leaves its buffer when the decision takes effect
    /// (`sa_delay − 1` cycles later, credit re-checked), returns a credit upstream and enters
    /// the crossbar for `st_delay` cycles.
    fn sw_alloc(&mut self, now: Cycle, credits: &[Link<Credit>], sent: &mut bool) -> u64 {
        let v = self.v;
        let mut req_po = [[0u64; NPORTS]; NPORTS];
        let mut in_req = [0u64; NPORTS];
        let mut asked = 0u64;
        let mut bits = self.sa_set;
        while bits != 0 {
            let iv = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let s = &self.ivc[iv];
            if s.sa_apply != NEVER || s.ready > now {
                continue;
            }
            asked |= 1 << iv;
            let o = s.out_port as usize;
            if self.ovc_credits[o * v + s.out_vc as usize].can_send() {
                let p = iv / v;
                req_po[p][o] |= 1 << (iv % v);
                in_req[p] |= 1 << o;
            } else {
                self.stats.sa_credit_stalls += 1;
            }
        }
        if asked != 0 {
            let mut out_req = [0u64; NPORTS];
            let mut chosen = [[0u8; NPORTS]; NPORTS];
            for p in 0..NPORTS {
                let mut m = in_req[p];
                while m != 0 {
                    let o = m.trailing_zeros() as usize;
                    m &= m - 1;
                    chosen[p][o] = rr_pick(req_po[p][o], self.sw_rr[p], v as u32).unwrap() as u8;
                    out_req[o] |= 1 << p;
                }
            }
            let mut grants_to = [0u64; NPORTS];
            for o in 0..NPORTS {
                if out_req[o] != 0 {
                    let g = rr_pick(out_req[o], self.sa_gptr[o], NPORTS as u32).unwrap() as usize;
                    grants_to[g] |= 1 << o;
                }
            }
            let mut granted = 0u64;
            for p in 0..NPORTS {
                if grants_to[p] != 0 {
                    let a = rr_pick(grants_to[p], self.sa_aptr[p], NPORTS as u32).unwrap() as usize;
                    self.sa_gptr[a] = ((p + 1) % NPORTS) as u32;
                    self.sa_aptr[p] = ((a + 1) % NPORTS) as u32;
                    let vc = chosen[p][a] as usize;
                    self.sw_rr[p] = ((vc + 1) % v) as u32;
                    granted |= 1 << (p * v + vc);
                }
            }
            let apply = now + self.sa - 1;
            let mut bits = asked;
            while bits != 0 {
                let iv = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let s = &mut self.ivc[iv];
                s.sa_apply = apply;
                s.sa_grant = granted >> iv & 1 == 1;
                if !s.sa_grant && in_req[iv / v] >> s.out_port & 1 == 1 {
                    self.stats.sa_conflicts += 1;
                }
            }
        }
        // Update: decisions taking effect now.
        let mut moved = 0;
        let mut bits = self.sa_set;
        while bits != 0 {
            let iv = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if self.ivc[iv].sa_apply != now {
                continue;
            }
            let s = self.ivc[iv];
            self.ivc[iv].sa_apply = NEVER;
            let o = s.out_port as usize;
            let ov = o * v + s.out_vc as usize;
            if !(s.sa_grant && self.ovc_credits[ov].can_send()) {
                self.ivc[iv].ready = now + 1;
                continue;
            }
            // Dequeue the front flit.
            let mut f = *self.front(iv);
            {
                let s = &mut self.ivc[iv];
                s.head = ((s.head as usize + 1) % self.depth) as u8;
                s.len -= 1;
            }
            self.buffered -= 1;
            f.hops = f.hops.saturating_add(1);
            f.vc = s.out_vc;
            self.ovc_credits[ov].on_send();
            if f.tail {
                // wait_for_tail_credit = 0: the output VC is free once the tail is sent.
                self.ovc_owner[ov] = NONE8;
            }
            // The freed slot goes back upstream as a credit.
            let p = iv / v;
            // SAFETY: within this router's eval (see `eval`), sole sender on this link.
            unsafe { credits[self.ports.out_credit[p] as usize].send(now, Credit { vc: (iv % v) as u8 }) };
            *sent = true;
            self.xbar[o].push_back((now + self.st, f));
            self.in_xbar += 1;
            debug_assert!(self.xbar[o].len() <= self.st as usize + self.sa as usize);
            moved += 1;
            self.stats.flits_switched += 1;
            let len = self.ivc[iv].len;
            let st = &mut self.ivc[iv];
            if f.tail {
                if len > 0 {
                    // Next packet's head: RC starts next cycle.
                    let nf = self.buf[iv * self.depth + st.head as usize];
                    assert!(nf.head, "router {}: flit after a tail is not a head", self.id);
                    st.state = VcState::Routing;
                    st.out_port = route_xy_fl(self.coord, Coord::of(nf.dest as u32, self.k)) as u8;
                    st.ready = now + 1 + self.rd;
                    self.va_set |= 1 << iv;
                } else {
                    st.state = VcState::Idle;
                }
                self.sa_set &= !(1 << iv);
            } else {
                st.ready = now + 1;
                if len == 0 {
                    self.sa_set &= !(1 << iv);
                }
            }
        }
        moved
    }

    /// Lines describing blocked buffers, for the watchdog diagnostic.
    pub fn blocked_report(&self, scope: &str, out: &mut Vec<String>, waiting: &mut Vec<String>) {
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
                        self.ovc_credits[ov].credits
                    )
                }
                VcState::Routing | VcState::VcAlloc => {
                    let o = s.out_port as usize;
                    let owners: Vec<String> = (0..self.v)
                        .map(|ov| match self.ovc_owner[o * self.v + ov] {
                            NONE8 => format!("vc{ov}: free"),
                            w => format!("vc{ov}: held by in_{} vc{}", Dir::from_idx(w as usize / self.v).short(), w as usize % self.v),
                        })
                        .collect();
                    format!("waits for an output VC on out_{} ({})", Dir::from_idx(o).short(), owners.join(", "))
                }
                VcState::Idle => "idle with flits (model bug)".into(),
            };
            out.push(format!(
                "{scope}.in_{}.vc{}: {} flit(s), state {:?}, {}",
                Dir::from_idx(p).short(),
                vc,
                s.len,
                s.state,
                why
            ));
            waiting.push(format!(
                "packet {:#x} (src {} -> dest {}, created cycle {}) at {scope}.in_{}.vc{}",
                f.pid,
                f.src,
                f.dest,
                f.ctime,
                Dir::from_idx(p).short(),
                vc
            ));
        }
    }
}

fn bits_for(max: u64) -> u32 {
    (64 - max.leading_zeros()).max(1)
}

impl Probe for RouterCl {
    fn declare(&self, scope: &[String], out: &mut Vec<SignalDecl>) {
        let occ_w = bits_for(self.depth as u64);
        for p in 0..NPORTS {
            if self.ports.in_flit[p] == NO_LINK {
                continue;
            }
            for vc in 0..self.v {
                let mut sc = scope.to_vec();
                sc.push(format!("in_{}", Dir::from_idx(p).short()));
                sc.push(format!("vc{vc}"));
                out.push(SignalDecl { scope: sc.clone(), name: "occ".into(), width: occ_w });
                out.push(SignalDecl { scope: sc, name: "state".into(), width: 2 });
            }
        }
        for p in 0..NPORTS {
            if self.ports.out_flit[p] == NO_LINK {
                continue;
            }
            let mut sc = scope.to_vec();
            sc.push(format!("out_{}", Dir::from_idx(p).short()));
            out.push(SignalDecl { scope: sc.clone(), name: "flit_valid".into(), width: 1 });
            out.push(SignalDecl { scope: sc.clone(), name: "flit_id".into(), width: 32 });
            for vc in 0..self.v {
                let mut s2 = sc.clone();
                s2.push(format!("vc{vc}"));
                out.push(SignalDecl { scope: s2.clone(), name: "credits".into(), width: occ_w });
                out.push(SignalDecl { scope: s2, name: "busy".into(), width: 1 });
            }
        }
    }

    fn sample(&self, out: &mut Vec<u64>) {
        for p in 0..NPORTS {
            if self.ports.in_flit[p] == NO_LINK {
                continue;
            }
            for vc in 0..self.v {
                let s = &self.ivc[p * self.v + vc];
                out.push(s.len as u64);
                out.push(s.state as u64);
            }
        }
        for p in 0..NPORTS {
            if self.ports.out_flit[p] == NO_LINK {
                continue;
            }
            out.push((self.out_trace[p] != 0) as u64);
            out.push(self.out_trace[p]);
            for vc in 0..self.v {
                let ov = p * self.v + vc;
                out.push(self.ovc_credits[ov].credits as u64);
                out.push((self.ovc_owner[ov] != NONE8) as u64);
            }
        }
    }
}
