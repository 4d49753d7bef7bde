//! Allocator control of the input-queued VC mesh router: the RTL twin of the control half of
//! `hw::noc::router::RouterCl` (BookSim2 `iq`), for P = 5 ports and V VCs per port.
//!
//! # What is in the block, what stays outside
//! In: per input VC (index `iv = port·V + vc`, ports in `sched::noc::Dir` order) the VC state
//! (Idle / Routing / VcAlloc / Active), the RC stage (one [`RouteComputeRtl`] per VC holding
//! the route), the allocated output VC; the VC allocator and the switch allocator (separable
//! single-iteration iSLIP built from [`RrArbiterRtl`] for VA and from [`RrPickRtl`] with the
//! pointers held here for SA, pointers moving only on accepted grants); output-VC ownership (busy from VA until the tail is sent); one
//! [`CreditCounterRtl`] per output VC.
//! Out (the data path): the VC buffers and the crossbar. The block sees the front of every
//! buffer (`in_valid`, `in_multi`, `in_head`, `in_tail`, `in_dest_*`, a flit written this cycle
//! included: buffer write bypasses to the front as in the CL) and drives the pops
//! (`sa_grant`, which are also the credits returned upstream) and the crossbar selects
//! (`st_valid`, `st_in_port`, `st_out_vc`, the VC to write into the outgoing flit).
//!
//! # Cycle semantics (default `RouterCfg`: routing 1, VA 1, SA 1)
//! In-cycle order as in the CL (BookSim's `_InternalStep`): credits returned this cycle count
//! before SA; VA then SA, both reading the registers of the previous edge. A head reaching
//! the front of an Idle VC is routed in that cycle (RC), does VA `routing_delay` cycles later,
//! SA from the cycle after its VA grant. A head queued behind a tail is routed in the cycle
//! after the tail leaves (when it reaches the front) and does VA `routing_delay` cycles after
//! that — the CL computes that route already when the tail leaves, so `vc_port` shows the RC
//! result combinationally while the VC is in Routing; the first use of the route (VA) is in the
//! same cycle in both models. VA of a cycle cannot take an output VC freed by a tail in the
//! same cycle (the CL frees it in SA, after VA).
//!
//! Supported delays: `routing_delay` 1..=15 (a per-VC countdown), `va_delay` = `sa_delay` = 1
//! and serialization 1 (what the package and the NoC configs use). The CL's longer VA/SA
//! (decisions re-checked `delay − 1` cycles later) and serialized mesh outputs are not
//! modelled: [`RouterCtrlParams::of`] returns `None` for them (and `new` takes only params). `st_delay` is a property of the crossbar and
//! link pipeline outside this block; `credit_delay` of the credit link.
//!
//! Error flag: `err` is sticky (until reset) when a credit counter saw illegal traffic or a
//! body flit reached the front of a VC waiting for a head (the CL panics on both: a bug in the
//! neighbour, never silently absorbed here).

use std::collections::VecDeque;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rust_hdl::prelude::*;

use super::route_compute::RouteComputeRtl;
use crate::cosim::{record, settle, PortTrace};
use crate::credit_counter::CreditCounterRtl;
use crate::export::{boxed, BlockDef, ParamSet};
use crate::rr_arbiter::{RrArbiterRtl, RrPickRtl};
use crate::RtlError;

/// Router ports (N, E, S, W, local in `sched::noc::Dir` order: +x, −x, +y, −y, local).
pub const NPORTS: usize = 5;

/// VC state encodings, equal to `hw::noc::router::VcState as u8`. A 2-bit register rather than
/// a `LogicState` enum, so the state is a plain bit vector on the ports and in co-sim traces.
pub const VC_IDLE: u64 = 0;
pub const VC_ROUTING: u64 = 1;
pub const VC_VCALLOC: u64 = 2;
pub const VC_ACTIVE: u64 = 3;

/// Router allocator control: `V` VCs per port, `NV = 5·V` input (and output) VCs, `CW`-bit
/// coordinates, `DW`-bit credit counters (downstream depth < 2^DW).
///
/// Port coupling: `va_grant`, `sa_grant`, `st_*`: comb(inputs, registers); `vc_state`,
/// `vc_ovc`, `ovc_busy`, `credits`, `err`: registered; `vc_port`: registered, comb(in_dest)
/// while the VC is in Routing (see the module doc).
#[derive(LogicBlock)]
pub struct RouterCtrlRtl<const V: usize, const NV: usize, const CW: usize, const DW: usize> {
    /// Single clock; every register is updated on its rising edge.
    pub clock: Signal<In, Clock>,
    /// Synchronous, active-high reset: VCs idle, output VCs free, credits full, pointers 0.
    pub reset: Signal<In, Bit>,
    /// This router's coordinates (straps).
    pub cur_x: Signal<In, Bits<CW>>,
    pub cur_y: Signal<In, Bits<CW>>,
    /// Bit iv: input VC iv holds at least one flit (its front is valid).
    pub in_valid: Signal<In, Bits<NV>>,
    /// Bit iv: input VC iv holds at least two flits (a packet may wait behind the front).
    pub in_multi: Signal<In, Bits<NV>>,
    /// Bit iv: the front flit is a head / a tail (a one-flit packet is both).
    pub in_head: Signal<In, Bits<NV>>,
    pub in_tail: Signal<In, Bits<NV>>,
    /// Destination of the front flit of each input VC (read while it is a head).
    pub in_dest_x: [Signal<In, Bits<CW>>; NV],
    pub in_dest_y: [Signal<In, Bits<CW>>; NV],
    /// Bit ov (= out port·V + vc): a credit for output VC ov arrives this cycle.
    pub credit_in: Signal<In, Bits<NV>>,
    /// Migration VC priority on (strap; CL `low_class != u8::MAX`): a low-priority front flit
    /// (`in_low`) is allocated only the last VC of its output, regular ones never it, and an
    /// output a regular flit requests is not granted to a low one (see the module doc).
    pub prio_en: Signal<In, Bit>,
    /// Router cycles an output must go without regular requests before a low-priority flit
    /// may take it (strap; CL `low_idle`).
    pub low_idle: Signal<In, Bits<16>>,
    /// Bit iv: the front flit of input VC iv belongs to the low-priority (migration) stream
    /// (CL `class >= low_class`). Ignored while `prio_en` is low.
    pub in_low: Signal<In, Bits<NV>>,
    /// Bit iv: input VC iv won an output VC this cycle (VA accept). comb.
    pub va_grant: Signal<Out, Bits<NV>>,
    /// Bit iv: the front flit of input VC iv crosses the switch this cycle: pop it and return
    /// a credit upstream. At most one per input port and per output port. comb.
    pub sa_grant: Signal<Out, Bits<NV>>,
    /// Bit o: output port o sends a flit this cycle. comb.
    pub st_valid: Signal<Out, Bits<5>>,
    /// Per output port: the input port it takes the flit from (crossbar select). comb.
    pub st_in_port: [Signal<Out, Bits<3>>; 5],
    /// Per output port: the output VC the flit is sent on (written into the flit). comb.
    pub st_out_vc: [Signal<Out, Bits<4>>; 5],
    /// Per input VC: state (`VC_*`). registered.
    pub vc_state: [Signal<Out, Bits<2>>; NV],
    /// Per input VC: output port (the route). registered; the RC result while in Routing.
    pub vc_port: [Signal<Out, Bits<3>>; NV],
    /// Per input VC: allocated output VC (valid in Active). registered.
    pub vc_ovc: [Signal<Out, Bits<4>>; NV],
    /// Bit ov: output VC ov is held by an input VC. registered.
    pub ovc_busy: Signal<Out, Bits<NV>>,
    /// Per output VC: credits available. registered.
    pub credits: [Signal<Out, Bits<DW>>; NV],
    /// Sticky protocol error (illegal credit traffic, a body flit where a head must be).
    /// registered.
    pub err: Signal<Out, Bit>,
    /// Event masks for the statistics counters (CL `RouterStats`), comb: input VCs asking for
    /// VA this cycle (`va_stalls` = |ev_va_req| − |va_grant|), input VCs asking for the
    /// switch with a credit (`sa_conflicts` = |ev_sa_req| − |sa_grant|), and Active VCs with
    /// a flit but no downstream credit (`sa_credit_stalls`).
    pub ev_va_req: Signal<Out, Bits<NV>>,
    pub ev_sa_req: Signal<Out, Bits<NV>>,
    pub ev_sa_cstall: Signal<Out, Bits<NV>>,

    // --- blocks
    /// RC stage and route register of each input VC.
    rc: [RouteComputeRtl<CW>; NV],
    /// VA accept arbiter of each input VC over all output VCs (CL `va_aptr`).
    va_in: [RrArbiterRtl<NV>; NV],
    /// VA grant arbiter of each output VC over all input VCs (CL `va_gptr`).
    va_out: [RrArbiterRtl<NV>; NV],
    /// SA grant pick of each output port over the input ports (CL `sa_gptr`): regular
    /// requesters first, else any (one search depth for both classes).
    sa_out: [RrPickRtl<5>; 5],
    /// SA accept pick of each input port over the output ports (CL `sa_aptr`), regular
    /// grants first.
    sa_in: [RrPickRtl<5>; 5],
    /// Per input port p and output port o (index p·5 + o): which of p's VCs routed to o sends
    /// if p accepts o (CL `sw_rr`), regular VCs first. All 25 choices are made beside the
    /// input arbitration and the accepted output's is selected after it; the pointer is one
    /// per port (`sa_vc_ptr`), shared by all outputs exactly as the CL's per-port offset is.
    sa_vc: [RrPickRtl<V>; 25],
    /// The switch allocator's round-robin pointers, one-hot (requester 0 after reset), moved
    /// one past a used grant (as [`RrArbiterRtl`]'s).
    sa_out_ptr: [DFF<Bits<5>>; 5],
    sa_in_ptr: [DFF<Bits<5>>; 5],
    sa_vc_ptr: [DFF<Bits<V>>; 5],
    /// Upstream view of each downstream VC buffer.
    cc: [CreditCounterRtl<DW>; NV],

    // --- registers
    /// VC state (`VC_*`).
    vc_st: [DFF<Bits<2>>; NV],
    /// Cycles left before a Routing VC may ask for VA (routing delay countdown).
    rc_wait: [DFF<Bits<4>>; NV],
    /// Output VC held by each input VC, one-hot over ov (0 when none).
    ovc_oh: [DFF<Bits<NV>>; NV],
    /// The same output VC as a VC number on its port (for `st_out_vc` and `vc_ovc`).
    out_vc: [DFF<Bits<4>>; NV],
    /// Output VCs held (ownership from VA until the tail is sent).
    ovc_held: DFF<Bits<NV>>,
    /// Sticky protocol error behind `err` (the counters keep their own).
    err_q: DFF<Bit>,
    /// Per input VC: the output VC it holds has a credit in its counter, i.e. exactly
    /// `(ovc_oh & can_send).any()` of the same edge, kept as a register (its next value is
    /// known a level after the VC's own switch grant, because only the holder sends on an
    /// output VC), so the switch request does not wait for the counter's zero test and the
    /// output-VC select behind it.
    cr_q: [DFF<Bit>; NV],
    /// Per output port: cycles left in which a low-priority flit may not request it (a
    /// regular flit requested it less than `low_idle` cycles ago; CL `hi_seen`).
    hi_wait: [DFF<Bits<16>>; 5],

    // --- combinational locals (each defaulted before it is accumulated)
    /// Input VCs whose route register names port o.
    route_is: [Signal<Local, Bits<NV>>; 5],
    /// Input VCs asking for VA this cycle (Routing/VcAlloc, routing delay over).
    va_elig: Signal<Local, Bits<NV>>,
    /// VA requesters towards output port o.
    va_req: [Signal<Local, Bits<NV>>; 5],
    /// Request of output VC j's grant arbiter (its port's requesters while it is free).
    va_oreq: [Signal<Local, Bits<NV>>; NV],
    /// Output VCs granting input VC iv (the transpose of the grant arbiters' outputs).
    va_gt: [Signal<Local, Bits<NV>>; NV],
    /// Output VCs whose grant was accepted.
    va_acc: Signal<Local, Bits<NV>>,
    /// Output VCs with a credit this cycle (counter or a credit arriving now).
    cok: Signal<Local, Bits<NV>>,
    /// Per output VC: its counter is non-zero / at least 2 / full (the depth).
    cc_nz: Signal<Local, Bits<NV>>,
    cc_ge2: Signal<Local, Bits<NV>>,
    cc_full: Signal<Local, Bits<NV>>,
    /// Per input VC: the same three of the output VC it holds, and a credit arriving for it
    /// now (0 while it holds none).
    sel_nz: Signal<Local, Bits<NV>>,
    sel_ge2: Signal<Local, Bits<NV>>,
    sel_full: Signal<Local, Bits<NV>>,
    sel_ci: Signal<Local, Bits<NV>>,
    /// Per input VC: its output VC number as one-hot over V.
    out_vc_oh: [Signal<Local, Bits<V>>; NV],
    /// Per (input port p, output port o), p·5 + o: the output VC (one-hot over V) and the
    /// tail bit of the VC `sa_vc` chose, so the sends and the releases follow from the input
    /// arbitration directly.
    cand_ovc: [Signal<Local, Bits<V>>; 25],
    cand_tail: [Signal<Local, Bit>; 25],
    /// Input VCs that may ask for the switch (Active, flit at the front, credit downstream).
    sa_elig: Signal<Local, Bits<NV>>,
    /// Per input port: output ports granting it.
    sa_gt: [Signal<Local, Bits<5>>; 5],
    /// Output ports whose grant was accepted.
    sa_acc: Signal<Local, Bits<5>>,
    /// Per input port: the VC that sends (one-hot over V, 0 when the port sends nothing).
    sa_vc_gnt: [Signal<Local, Bits<V>>; 5],
    /// Input VCs whose front flit crosses the switch.
    sa_go: Signal<Local, Bits<NV>>,
    /// Output VCs a flit is sent on, and those a tail releases.
    send: Signal<Local, Bits<NV>>,
    freed: Signal<Local, Bits<NV>>,
    /// The same if output o's grant is accepted (the VC its granted input port chose), and
    /// the output VCs of the accepted outputs.
    send_c: Signal<Local, Bits<NV>>,
    freed_c: Signal<Local, Bits<NV>>,
    acc_ov: Signal<Local, Bits<NV>>,
    /// A body flit at the front of a VC that waits for a head.
    proto_err: Signal<Local, Bit>,
    /// Any credit counter's sticky error.
    cc_err: Signal<Local, Bit>,
    /// `in_low` while the priority is on (else 0: every flit regular).
    low: Signal<Local, Bits<NV>>,
    /// Class mask of output VC j's VA grant arbiter: the last VC of a port serves low
    /// requesters only, the others regular ones only (all ones while the priority is off).
    va_cls: [Signal<Local, Bits<NV>>; NV],
    /// Outputs a low-priority flit may not request this cycle (`hi_wait` running).
    lo_block: Signal<Local, Bits<5>>,
    /// Per input VC: output ports with a credit arriving now for its output VC number (read
    /// where it holds an output VC on that port).
    cio: [Signal<Local, Bits<5>>; NV],
    /// Per output port o: input VCs that may ask for it (Active, routed to o, a flit at the
    /// front, a credit for their output VC, which is on port o), written per output so the
    /// credit test is a VC-number select rather than a select over all output VCs.
    eo: [Signal<Local, Bits<NV>>; 5],
    /// The same, regular requesters, and low-priority ones while o is not blocked.
    eo_hi: [Signal<Local, Bits<NV>>; 5],
    eo_lo: [Signal<Local, Bits<NV>>; 5],
    /// Per output port: input ports with a regular requester, and with any requester.
    sa_hreq: [Signal<Local, Bits<5>>; 5],
    sa_areq: [Signal<Local, Bits<5>>; 5],
    /// Per input port: output ports it requests with a regular VC.
    sa_hport: [Signal<Local, Bits<5>>; 5],
    /// Per input port p and output port o (p·5 + o): p's regular / low VCs routed to o.
    sa_vc_hi: [Signal<Local, Bits<V>>; 25],
    sa_vc_lo: [Signal<Local, Bits<V>>; 25],

    // --- constants
    /// Port and VC number of index i (input and output VCs share the numbering).
    idx_port: [Constant<Bits<3>>; NV],
    idx_vc: [Constant<Bits<4>>; NV],
    /// One-hot of the VC number of index i, over V.
    idx_vc_oh: [Constant<Bits<V>>; NV],
    /// Input VCs of port p.
    port_mask: [Constant<Bits<NV>>; 5],
    /// Routing delay, and one less (the countdown after an arrival).
    rd: Constant<Bits<4>>,
    rd_m1: Constant<Bits<4>>,
    one4: Constant<Bits<4>>,
    zero_nv: Constant<Bits<NV>>,
    /// Sized zeros and one-hot bits (no width-mismatched literals in the Verilog).
    bit_nv: [Constant<Bits<NV>>; NV],
    bit5: [Constant<Bits<5>>; 5],
    zero5: Constant<Bits<5>>,
    zero_v: Constant<Bits<V>>,
    /// 1 and the downstream depth at the credit counters' width; whether depth >= 2.
    one_dw: Constant<Bits<DW>>,
    depth_dw: Constant<Bits<DW>>,
    deep2: Constant<Bit>,
    /// VC 0 and VC V − 1 one-hot over V (the VC pointer's reset value and wrap).
    one_v: Constant<Bits<V>>,
    top_v: Constant<Bits<V>>,
    zero3: Constant<Bits<3>>,
    zero4: Constant<Bits<4>>,
    /// Output VCs that are the last VC of their port (the migration VC).
    last_vc: Constant<Bits<NV>>,
    ones_nv: Constant<Bits<NV>>,
    zero16: Constant<Bits<16>>,
    one16: Constant<Bits<16>>,
    st_idle: Constant<Bits<2>>,
    st_routing: Constant<Bits<2>>,
    st_vcalloc: Constant<Bits<2>>,
    st_active: Constant<Bits<2>>,
}

/// Configuration of a [`RouterCtrlRtl`] (the subset of `hw::noc::RouterCfg` it implements,
/// plus the mesh size the coordinates must cover).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouterCtrlParams {
    pub vcs: usize,
    pub vc_buf: u64,
    pub routing_delay: u64,
    /// Routers per side of the mesh (coordinates < k).
    pub k: usize,
}

impl RouterCtrlParams {
    /// From the CL's configuration; `None` when the RTL does not implement it (VA/SA longer
    /// than one cycle, routing delay 0 or > 15, serialized outputs).
    pub fn of(cfg: &hw::noc::RouterCfg, k: u32, ser: u32) -> Option<Self> {
        let ok = cfg.va_delay == 1
            && cfg.sa_delay == 1
            && (1..=15).contains(&cfg.routing_delay)
            && ser == 1;
        ok.then_some(Self {
            vcs: cfg.vcs as usize,
            vc_buf: cfg.vc_buf as u64,
            routing_delay: cfg.routing_delay as u64,
            k: k as usize,
        })
    }
}

impl<const V: usize, const NV: usize, const CW: usize, const DW: usize>
    RouterCtrlRtl<V, NV, CW, DW>
{
    /// Builds the control for `p`. Panics (a configuration bug of the instantiating code, not
    /// user input: configs are checked by [`RouterCtrlParams::of`]) when the widths do not
    /// match `p` or `p` is outside what the block implements.
    pub fn new(p: &RouterCtrlParams) -> Self {
        assert!((1..=12).contains(&V) && V == p.vcs, "{} VCs configured, RTL built for {V}", p.vcs);
        assert_eq!(NV, NPORTS * V, "NV must be 5 x V");
        assert!((1..=15).contains(&p.routing_delay), "routing delay {} outside 1..=15", p.routing_delay);
        let zero_nv: Bits<NV> = 0u64.into();
        let mut port_mask = [zero_nv; 5];
        for (pi, m) in port_mask.iter_mut().enumerate() {
            for v in 0..V {
                *m = m.replace_bit(pi * V + v, true);
            }
        }
        Self {
            clock: Default::default(),
            reset: Default::default(),
            cur_x: Default::default(),
            cur_y: Default::default(),
            in_valid: Default::default(),
            in_multi: Default::default(),
            in_head: Default::default(),
            in_tail: Default::default(),
            in_dest_x: std::array::from_fn(|_| Default::default()),
            in_dest_y: std::array::from_fn(|_| Default::default()),
            credit_in: Default::default(),
            prio_en: Default::default(),
            low_idle: Default::default(),
            in_low: Default::default(),
            va_grant: Default::default(),
            sa_grant: Default::default(),
            st_valid: Default::default(),
            st_in_port: std::array::from_fn(|_| Default::default()),
            st_out_vc: std::array::from_fn(|_| Default::default()),
            vc_state: std::array::from_fn(|_| Default::default()),
            vc_port: std::array::from_fn(|_| Default::default()),
            vc_ovc: std::array::from_fn(|_| Default::default()),
            ovc_busy: Default::default(),
            credits: std::array::from_fn(|_| Default::default()),
            err: Default::default(),
            ev_va_req: Default::default(),
            ev_sa_req: Default::default(),
            ev_sa_cstall: Default::default(),
            rc: std::array::from_fn(|_| RouteComputeRtl::new(p.k)),
            va_in: std::array::from_fn(|_| RrArbiterRtl::new(NV)),
            va_out: std::array::from_fn(|_| RrArbiterRtl::new(NV)),
            sa_out: std::array::from_fn(|_| RrPickRtl::new()),
            sa_in: std::array::from_fn(|_| RrPickRtl::new()),
            sa_vc: std::array::from_fn(|_| RrPickRtl::new()),
            sa_out_ptr: std::array::from_fn(|_| Default::default()),
            sa_in_ptr: std::array::from_fn(|_| Default::default()),
            sa_vc_ptr: std::array::from_fn(|_| Default::default()),
            cc: std::array::from_fn(|_| CreditCounterRtl::new(p.vc_buf)),
            vc_st: std::array::from_fn(|_| Default::default()),
            rc_wait: std::array::from_fn(|_| Default::default()),
            ovc_oh: std::array::from_fn(|_| Default::default()),
            out_vc: std::array::from_fn(|_| Default::default()),
            ovc_held: Default::default(),
            err_q: Default::default(),
            cr_q: std::array::from_fn(|_| Default::default()),
            hi_wait: std::array::from_fn(|_| Default::default()),
            route_is: std::array::from_fn(|_| Default::default()),
            va_elig: Default::default(),
            va_req: std::array::from_fn(|_| Default::default()),
            va_oreq: std::array::from_fn(|_| Default::default()),
            va_gt: std::array::from_fn(|_| Default::default()),
            va_acc: Default::default(),
            cok: Default::default(),
            cc_nz: Default::default(),
            cc_ge2: Default::default(),
            cc_full: Default::default(),
            sel_nz: Default::default(),
            sel_ge2: Default::default(),
            sel_full: Default::default(),
            sel_ci: Default::default(),
            out_vc_oh: std::array::from_fn(|_| Default::default()),
            cand_ovc: std::array::from_fn(|_| Default::default()),
            cand_tail: std::array::from_fn(|_| Default::default()),
            sa_elig: Default::default(),
            sa_gt: std::array::from_fn(|_| Default::default()),
            sa_acc: Default::default(),
            sa_vc_gnt: std::array::from_fn(|_| Default::default()),
            sa_go: Default::default(),
            send: Default::default(),
            freed: Default::default(),
            send_c: Default::default(),
            freed_c: Default::default(),
            acc_ov: Default::default(),
            proto_err: Default::default(),
            cc_err: Default::default(),
            low: Default::default(),
            va_cls: std::array::from_fn(|_| Default::default()),
            lo_block: Default::default(),
            cio: std::array::from_fn(|_| Default::default()),
            eo: std::array::from_fn(|_| Default::default()),
            eo_hi: std::array::from_fn(|_| Default::default()),
            eo_lo: std::array::from_fn(|_| Default::default()),
            sa_hreq: std::array::from_fn(|_| Default::default()),
            sa_areq: std::array::from_fn(|_| Default::default()),
            sa_hport: std::array::from_fn(|_| Default::default()),
            sa_vc_hi: std::array::from_fn(|_| Default::default()),
            sa_vc_lo: std::array::from_fn(|_| Default::default()),
            idx_port: std::array::from_fn(|i| Constant::new(((i / V) as u64).into())),
            idx_vc: std::array::from_fn(|i| Constant::new(((i % V) as u64).into())),
            idx_vc_oh: std::array::from_fn(|i| Constant::new((1u64 << (i % V)).into())),
            port_mask: port_mask.map(Constant::new),
            rd: Constant::new(p.routing_delay.into()),
            rd_m1: Constant::new((p.routing_delay - 1).into()),
            one4: Constant::new(1u64.into()),
            zero_nv: Constant::new(zero_nv),
            bit_nv: std::array::from_fn(|i| Constant::new(zero_nv.replace_bit(i, true))),
            bit5: std::array::from_fn(|i| Constant::new((1u64 << i).into())),
            zero5: Constant::new(0u64.into()),
            zero_v: Constant::new(0u64.into()),
            one_dw: Constant::new(1u64.into()),
            depth_dw: Constant::new(p.vc_buf.into()),
            deep2: Constant::new(p.vc_buf >= 2),
            one_v: Constant::new(1u64.into()),
            top_v: Constant::new((1u64 << (V - 1)).into()),
            zero3: Constant::new(0u64.into()),
            zero4: Constant::new(0u64.into()),
            last_vc: Constant::new((0..NPORTS).fold(zero_nv, |m, p| m.replace_bit(p * V + V - 1, true))),
            ones_nv: Constant::new(!zero_nv),
            zero16: Constant::new(0u64.into()),
            one16: Constant::new(1u64.into()),
            st_idle: Constant::new(VC_IDLE.into()),
            st_routing: Constant::new(VC_ROUTING.into()),
            st_vcalloc: Constant::new(VC_VCALLOC.into()),
            st_active: Constant::new(VC_ACTIVE.into()),
        }
    }

    /// Priority pointers of the allocators, for lockstep comparison with the CL:
    /// (VA accept per input VC, VA grant per output VC, SA grant per output port, SA accept
    /// per input port, SA VC select per input port).
    pub fn pointers(&self) -> [Vec<u32>; 5] {
        [
            self.va_in.iter().map(|a| a.ptr()).collect(),
            self.va_out.iter().map(|a| a.ptr()).collect(),
            self.sa_out_ptr.iter().map(|r| oh_index(r.q.val().to_u64())).collect(),
            self.sa_in_ptr.iter().map(|r| oh_index(r.q.val().to_u64())).collect(),
            self.sa_vc_ptr.iter().map(|r| oh_index(r.q.val().to_u64())).collect(),
        ]
    }
}

/// Binary value of a one-hot pointer register (0 for the cleared register, as
/// [`RrArbiterRtl::ptr`]). Panics if it is not one-hot (a bug in this block).
fn oh_index(oh: u64) -> u32 {
    assert!(oh.count_ones() <= 1, "pointer {oh:x} is not one-hot");
    if oh == 0 {
        0
    } else {
        oh.trailing_zeros()
    }
}

impl<const V: usize, const NV: usize, const CW: usize, const DW: usize> Logic
    for RouterCtrlRtl<V, NV, CW, DW>
{
    #[hdl_gen]
    fn update(&mut self) {
        // 1. Clocks and resets of the registers and sub-blocks; registers hold by default.
        dff_setup!(self, clock, ovc_held, err_q);
        for o in 0..5 {
            self.hi_wait[o].clock.next = self.clock.val();
            self.hi_wait[o].d.next = self.hi_wait[o].q.val();
        }
        for i in 0..NV {
            self.vc_st[i].clock.next = self.clock.val();
            self.rc_wait[i].clock.next = self.clock.val();
            self.ovc_oh[i].clock.next = self.clock.val();
            self.out_vc[i].clock.next = self.clock.val();
            self.vc_st[i].d.next = self.vc_st[i].q.val();
            self.rc_wait[i].d.next = self.rc_wait[i].q.val();
            self.ovc_oh[i].d.next = self.ovc_oh[i].q.val();
            self.out_vc[i].d.next = self.out_vc[i].q.val();
            self.cr_q[i].clock.next = self.clock.val();
            self.cr_q[i].d.next = self.cr_q[i].q.val();
            self.rc[i].clock.next = self.clock.val();
            self.rc[i].reset.next = self.reset.val();
            self.va_in[i].clock.next = self.clock.val();
            self.va_in[i].reset.next = self.reset.val();
            self.va_out[i].clock.next = self.clock.val();
            self.va_out[i].reset.next = self.reset.val();
            self.cc[i].clock.next = self.clock.val();
            self.cc[i].reset.next = self.reset.val();
        }
        for p in 0..5 {
            self.sa_out_ptr[p].clock.next = self.clock.val();
            self.sa_in_ptr[p].clock.next = self.clock.val();
            self.sa_vc_ptr[p].clock.next = self.clock.val();
            self.sa_out_ptr[p].d.next = self.sa_out_ptr[p].q.val();
            self.sa_in_ptr[p].d.next = self.sa_in_ptr[p].q.val();
            self.sa_vc_ptr[p].d.next = self.sa_vc_ptr[p].q.val();
        }

        // 2. RC: a head at the front of an Idle VC (just arrived) or of a Routing VC (queued
        //    behind a tail) is routed; the route register latches it.
        self.proto_err.next = false;
        for i in 0..NV {
            self.rc[i].cur_x.next = self.cur_x.val();
            self.rc[i].cur_y.next = self.cur_y.val();
            self.rc[i].dest_x.next = self.in_dest_x[i].val();
            self.rc[i].dest_y.next = self.in_dest_y[i].val();
            self.rc[i].rc_en.next = self.in_valid.val().get_bit(i)
                & ((self.vc_st[i].q.val() == self.st_idle.val())
                    | (self.vc_st[i].q.val() == self.st_routing.val()));
            if self.rc[i].rc_en.val() & !self.in_head.val().get_bit(i) {
                self.proto_err.next = true;
            }
        }
        for o in 0..5 {
            self.route_is[o].next = self.zero_nv.val();
        }
        for i in 0..NV {
            for o in 0..5 {
                if self.rc[i].route_oh.val().get_bit(o) {
                    self.route_is[o].next = self.route_is[o].val() | self.bit_nv[i].val();
                }
            }
        }

        // 3. VA (separable iSLIP, one iteration): every free output VC of a port grants one of
        //    the VCs routed to that port (all free VCs of a port see the same requesters), each
        //    requester accepts one grant; pointers move on accepted grants only.
        self.va_elig.next = self.zero_nv.val();
        for i in 0..NV {
            if ((self.vc_st[i].q.val() == self.st_routing.val())
                | (self.vc_st[i].q.val() == self.st_vcalloc.val()))
                & !self.rc_wait[i].q.val().any()
            {
                self.va_elig.next = self.va_elig.val() | self.bit_nv[i].val();
            }
        }
        for o in 0..5 {
            self.va_req[o].next = self.va_elig.val() & self.route_is[o].val();
        }
        // Migration VC priority: the last VC of a port is the low-priority stream's.
        self.low.next = self.zero_nv.val();
        if self.prio_en.val() {
            self.low.next = self.in_low.val();
        }
        for j in 0..NV {
            self.va_cls[j].next = self.ones_nv.val();
            if self.prio_en.val() {
                if self.last_vc.val().get_bit(j) {
                    self.va_cls[j].next = self.low.val();
                } else {
                    self.va_cls[j].next = !self.low.val();
                }
            }
        }
        // Sub-block inputs are written exactly once per evaluation (the request is built in a
        // local first): a default-then-override write glitches the input, the arbiter's
        // output glitches back, and an event-driven simulator (Icarus) ping-pongs forever.
        for j in 0..NV {
            self.va_oreq[j].next = self.zero_nv.val();
            for o in 0..5 {
                if (self.idx_port[j].val().index() == o) & !self.ovc_held.q.val().get_bit(j) {
                    self.va_oreq[j].next = self.va_req[o].val() & self.va_cls[j].val();
                }
            }
            self.va_out[j].req.next = self.va_oreq[j].val();
        }
        for i in 0..NV {
            self.va_gt[i].next = self.zero_nv.val();
        }
        for j in 0..NV {
            for i in 0..NV {
                if self.va_out[j].grant.val().get_bit(i) {
                    self.va_gt[i].next = self.va_gt[i].val() | self.bit_nv[j].val();
                }
            }
        }
        self.va_acc.next = self.zero_nv.val();
        self.va_grant.next = self.zero_nv.val();
        for i in 0..NV {
            self.va_in[i].req.next = self.va_gt[i].val();
            // A requester always takes the grant it picks.
            self.va_in[i].fire.next = true;
            self.va_acc.next = self.va_acc.val() | self.va_in[i].grant.val();
            if self.va_in[i].grant_valid.val() {
                self.va_grant.next = self.va_grant.val() | self.bit_nv[i].val();
            }
        }
        for j in 0..NV {
            self.va_out[j].fire.next = self.va_acc.val().get_bit(j) & self.va_out[j].grant_valid.val();
        }

        // 4. SA: an Active VC with a flit and a downstream credit (a credit arriving now
        //    counts) asks for its output; iSLIP over ports, then the accepted port's VC
        //    arbiter picks which of its VCs routed there sends.
        self.cok.next = self.credit_in.val();
        self.cc_nz.next = self.zero_nv.val();
        self.cc_ge2.next = self.zero_nv.val();
        self.cc_full.next = self.zero_nv.val();
        for j in 0..NV {
            self.cc[j].credit.next = self.credit_in.val().get_bit(j);
            if self.cc[j].can_send.val() {
                self.cok.next = self.cok.val() | self.bit_nv[j].val();
                self.cc_nz.next = self.cc_nz.val() | self.bit_nv[j].val();
            }
            if self.cc[j].credits.val() > self.one_dw.val() {
                self.cc_ge2.next = self.cc_ge2.val() | self.bit_nv[j].val();
            }
            if self.cc[j].credits.val() == self.depth_dw.val() {
                self.cc_full.next = self.cc_full.val() | self.bit_nv[j].val();
            }
        }
        self.sel_nz.next = self.zero_nv.val();
        self.sel_ge2.next = self.zero_nv.val();
        self.sel_full.next = self.zero_nv.val();
        self.sel_ci.next = self.zero_nv.val();
        for i in 0..NV {
            if (self.ovc_oh[i].q.val() & self.cc_nz.val()).any() {
                self.sel_nz.next = self.sel_nz.val() | self.bit_nv[i].val();
            }
            if (self.ovc_oh[i].q.val() & self.cc_ge2.val()).any() {
                self.sel_ge2.next = self.sel_ge2.val() | self.bit_nv[i].val();
            }
            if (self.ovc_oh[i].q.val() & self.cc_full.val()).any() {
                self.sel_full.next = self.sel_full.val() | self.bit_nv[i].val();
            }
            if (self.ovc_oh[i].q.val() & self.credit_in.val()).any() {
                self.sel_ci.next = self.sel_ci.val() | self.bit_nv[i].val();
            }
        }
        // The output VC number as one-hot (the chosen VC's, `cand_ovc`), and the credits
        // arriving now per input VC over the output ports.
        for i in 0..NV {
            self.out_vc_oh[i].next = self.zero_v.val();
            for w in 0..V {
                if self.out_vc[i].q.val() == self.idx_vc[w].val() {
                    self.out_vc_oh[i].next = self.idx_vc_oh[w].val();
                }
            }
        }
        // Read from the held output VC's bits on port o (`ovc_oh`, a register) rather than
        // from `out_vc` decoded: equal where it is used (an Active VC routed to o holds
        // (o, out_vc)), one compare shallower.
        for i in 0..NV {
            self.cio[i].next = self.zero5.val();
            for j in 0..NV {
                for o in 0..5 {
                    if (self.idx_port[j].val().index() == o)
                        & self.ovc_oh[i].q.val().get_bit(j)
                        & self.credit_in.val().get_bit(j)
                    {
                        self.cio[i].next = self.cio[i].val() | self.bit5[o].val();
                    }
                }
            }
        }
        // An Active VC holds one output VC, on its route's port, numbered out_vc: its credit
        // is `cr_q` (the counter, registered) or a credit arriving now for (route, out_vc),
        // i.e. `(ovc_oh & cok).any()`.
        self.sa_elig.next = self.zero_nv.val();
        for o in 0..5 {
            self.eo[o].next = self.zero_nv.val();
        }
        for i in 0..NV {
            for o in 0..5 {
                if (self.vc_st[i].q.val() == self.st_active.val())
                    & self.in_valid.val().get_bit(i)
                    & self.rc[i].route_oh.val().get_bit(o)
                    & (self.cr_q[i].q.val() | self.cio[i].val().get_bit(o))
                {
                    self.eo[o].next = self.eo[o].val() | self.bit_nv[i].val();
                    self.sa_elig.next = self.sa_elig.val() | self.bit_nv[i].val();
                }
            }
        }
        // Migration priority: a low-priority requester is dropped while its output saw a
        // regular request within `low_idle` cycles; an output with a regular requester grants
        // only regular ones (without the priority every requester is regular).
        self.lo_block.next = self.zero5.val();
        for o in 0..5 {
            if self.hi_wait[o].q.val().any() {
                self.lo_block.next = self.lo_block.val() | self.bit5[o].val();
            }
        }
        for o in 0..5 {
            self.eo_hi[o].next = self.eo[o].val() & !self.low.val();
            self.eo_lo[o].next = self.zero_nv.val();
            if !self.lo_block.val().get_bit(o) {
                self.eo_lo[o].next = self.eo[o].val() & self.low.val();
            }
        }
        for p in 0..5 {
            self.sa_hport[p].next = self.zero5.val();
        }
        for o in 0..5 {
            self.sa_hreq[o].next = self.zero5.val();
            self.sa_areq[o].next = self.zero5.val();
            for p in 0..5 {
                if (self.eo_hi[o].val() & self.port_mask[p].val()).any() {
                    self.sa_hreq[o].next = self.sa_hreq[o].val() | self.bit5[p].val();
                    self.sa_hport[p].next = self.sa_hport[p].val() | self.bit5[o].val();
                }
                if ((self.eo_hi[o].val() | self.eo_lo[o].val()) & self.port_mask[p].val()).any() {
                    self.sa_areq[o].next = self.sa_areq[o].val() | self.bit5[p].val();
                }
            }
            // Regular requesters first, else any (the pick searches both at once).
            self.sa_out[o].ptr_oh.next = self.sa_out_ptr[o].q.val();
            self.sa_out[o].req_a.next = self.sa_hreq[o].val();
            self.sa_out[o].req_b.next = self.sa_areq[o].val();
        }
        for p in 0..5 {
            self.sa_gt[p].next = self.zero5.val();
        }
        for o in 0..5 {
            for p in 0..5 {
                if self.sa_out[o].grant.val().get_bit(p) {
                    self.sa_gt[p].next = self.sa_gt[p].val() | self.bit5[o].val();
                }
            }
        }
        self.sa_acc.next = self.zero5.val();
        for p in 0..5 {
            // An input port sends one flit a cycle: a regular grant is accepted first.
            self.sa_in[p].ptr_oh.next = self.sa_in_ptr[p].q.val();
            self.sa_in[p].req_a.next = self.sa_gt[p].val() & self.sa_hport[p].val();
            self.sa_in[p].req_b.next = self.sa_gt[p].val();
            self.sa_acc.next = self.sa_acc.val() | self.sa_in[p].grant.val();
        }
        // Pointers move one past a used grant: an output's when its grant was accepted, an
        // input's whenever it accepts.
        for o in 0..5 {
            if self.sa_acc.val().get_bit(o) & self.sa_out[o].grant_valid.val() {
                if (self.sa_out[o].grant.val() & self.bit5[4].val()).any() {
                    self.sa_out_ptr[o].d.next = self.bit5[0].val();
                } else {
                    self.sa_out_ptr[o].d.next = self.sa_out[o].grant.val() << 1;
                }
            }
            if self.sa_in[o].grant_valid.val() {
                if (self.sa_in[o].grant.val() & self.bit5[4].val()).any() {
                    self.sa_in_ptr[o].d.next = self.bit5[0].val();
                } else {
                    self.sa_in_ptr[o].d.next = self.sa_in[o].grant.val() << 1;
                }
            }
            if self.reset.val() {
                self.sa_out_ptr[o].d.next = self.bit5[0].val();
                self.sa_in_ptr[o].d.next = self.bit5[0].val();
            }
        }
        // The VC of each input port for each output it may accept: among the port's regular
        // VCs routed there, else among its low-priority ones (the CL ranks low VCs after every
        // regular one). Chosen beside the input arbitration; its accepted output selects.
        for p in 0..5 {
            for o in 0..5 {
                self.sa_vc_hi[p * 5 + o].next = self.zero_v.val();
                self.sa_vc_lo[p * 5 + o].next = self.zero_v.val();
            }
        }
        for i in 0..NV {
            for p in 0..5 {
                for o in 0..5 {
                    if self.idx_port[i].val().index() == p {
                        if self.eo_hi[o].val().get_bit(i) {
                            self.sa_vc_hi[p * 5 + o].next = self.sa_vc_hi[p * 5 + o].val() | self.idx_vc_oh[i].val();
                        }
                        if self.eo_lo[o].val().get_bit(i) {
                            self.sa_vc_lo[p * 5 + o].next = self.sa_vc_lo[p * 5 + o].val() | self.idx_vc_oh[i].val();
                        }
                    }
                }
            }
        }
        for p in 0..5 {
            for o in 0..5 {
                self.sa_vc[p * 5 + o].ptr_oh.next = self.sa_vc_ptr[p].q.val();
                self.sa_vc[p * 5 + o].req_a.next = self.sa_vc_hi[p * 5 + o].val();
                self.sa_vc[p * 5 + o].req_b.next = self.sa_vc_lo[p * 5 + o].val();
            }
        }
        // The chosen VC's output VC and tail bit, per (p, o).
        for p in 0..5 {
            for o in 0..5 {
                self.cand_ovc[p * 5 + o].next = self.zero_v.val();
                self.cand_tail[p * 5 + o].next = false;
            }
        }
        for i in 0..NV {
            for p in 0..5 {
                for o in 0..5 {
                    if (self.idx_port[i].val().index() == p)
                        & (self.sa_vc[p * 5 + o].grant.val() & self.idx_vc_oh[i].val()).any()
                    {
                        self.cand_ovc[p * 5 + o].next = self.cand_ovc[p * 5 + o].val() | self.out_vc_oh[i].val();
                        if self.in_tail.val().get_bit(i) {
                            self.cand_tail[p * 5 + o].next = true;
                        }
                    }
                }
            }
        }
        for p in 0..5 {
            self.sa_vc_gnt[p].next = self.zero_v.val();
            for o in 0..5 {
                // (`grant` is 0 without `grant_valid`: the AND only states it.)
                if self.sa_in[p].grant.val().get_bit(o) & self.sa_vc[p * 5 + o].grant_valid.val() {
                    self.sa_vc_gnt[p].next = self.sa_vc_gnt[p].val() | self.sa_vc[p * 5 + o].grant.val();
                }
            }
            // Used exactly when the port accepted (only then is a VC chosen).
            if self.sa_vc_gnt[p].val().any() {
                if (self.sa_vc_gnt[p].val() & self.top_v.val()).any() {
                    self.sa_vc_ptr[p].d.next = self.one_v.val();
                } else {
                    self.sa_vc_ptr[p].d.next = self.sa_vc_gnt[p].val() << 1;
                }
            }
            if self.reset.val() {
                self.sa_vc_ptr[p].d.next = self.one_v.val();
            }
        }
        self.sa_go.next = self.zero_nv.val();
        self.send.next = self.zero_nv.val();
        self.freed.next = self.zero_nv.val();
        for i in 0..NV {
            for p in 0..5 {
                if (self.idx_port[i].val().index() == p)
                    & (self.sa_vc_gnt[p].val() & self.idx_vc_oh[i].val()).any()
                {
                    self.sa_go.next = self.sa_go.val() | self.bit_nv[i].val();
                }
            }
        }
        // Sends and releases per output VC j = (port o, VC w): output o accepted input port p
        // whose chosen VC holds w. The same as OR-ing the ovc_oh of the VCs in sa_go (an
        // Active VC holds exactly one output VC, on its route's port, numbered out_vc), one
        // VC selection shallower. The input port is the one o granted (`sa_out[o].grant`,
        // one-hot; an accepted grant is that one), so the chosen VC is selected by the output
        // pick, beside the input pick, and the input pick enters once, as `sa_acc[o]`.
        self.send_c.next = self.zero_nv.val();
        self.freed_c.next = self.zero_nv.val();
        self.acc_ov.next = self.zero_nv.val();
        for j in 0..NV {
            for o in 0..5 {
                if (self.idx_port[j].val().index() == o) & self.sa_acc.val().get_bit(o) {
                    self.acc_ov.next = self.acc_ov.val() | self.bit_nv[j].val();
                }
                for p in 0..5 {
                    if (self.idx_port[j].val().index() == o)
                        & self.sa_out[o].grant.val().get_bit(p)
                        & (self.cand_ovc[p * 5 + o].val() & self.idx_vc_oh[j].val()).any()
                    {
                        self.send_c.next = self.send_c.val() | self.bit_nv[j].val();
                        if self.cand_tail[p * 5 + o].val() {
                            self.freed_c.next = self.freed_c.val() | self.bit_nv[j].val();
                        }
                    }
                }
            }
        }
        self.send.next = self.send_c.val() & self.acc_ov.val();
        self.freed.next = self.freed_c.val() & self.acc_ov.val();
        self.cc_err.next = false;
        for j in 0..NV {
            self.cc[j].send.next = self.send.val().get_bit(j);
            if self.cc[j].err.val() {
                self.cc_err.next = true;
            }
        }

        // 5. Switch traversal selects (the crossbar outside reads them this cycle).
        self.sa_grant.next = self.sa_go.val();
        self.st_valid.next = self.sa_acc.val();
        for o in 0..5 {
            self.st_in_port[o].next = self.zero3.val();
            self.st_out_vc[o].next = self.zero4.val();
        }
        for i in 0..NV {
            if self.sa_go.val().get_bit(i) {
                for o in 0..5 {
                    if self.rc[i].route_oh.val().get_bit(o) {
                        self.st_in_port[o].next = self.idx_port[i].val();
                        self.st_out_vc[o].next = self.out_vc[i].q.val();
                    }
                }
            }
        }

        // 6. VC state next: arrival (Idle -> Routing), routing countdown, VA (-> VcAlloc, or
        //    Active with the accepted output VC), tail sent (-> Routing for a head behind it,
        //    else Idle).
        for i in 0..NV {
            if self.rc_wait[i].q.val().any() {
                self.rc_wait[i].d.next = self.rc_wait[i].q.val() - self.one4.val();
            }
            if (self.vc_st[i].q.val() == self.st_idle.val()) & self.in_valid.val().get_bit(i) {
                self.vc_st[i].d.next = self.st_routing.val();
                self.rc_wait[i].d.next = self.rd_m1.val();
            }
            if self.va_elig.val().get_bit(i) {
                self.vc_st[i].d.next = self.st_vcalloc.val();
                if self.va_in[i].grant_valid.val() {
                    self.vc_st[i].d.next = self.st_active.val();
                    self.ovc_oh[i].d.next = self.va_in[i].grant.val();
                    for j in 0..NV {
                        if self.va_in[i].grant.val().get_bit(j) {
                            self.out_vc[i].d.next = self.idx_vc[j].val();
                        }
                    }
                }
            }
            // The credit flag follows the held output VC's counter: only this VC sends on it
            // (`sa_go`), credits arrive on `credit_in` (the counter's rules: a credit before a
            // send, a credit at full depth dropped, a send at 0 not counted).
            if self.sel_ci.val().get_bit(i) {
                if !self.sa_go.val().get_bit(i) {
                    self.cr_q[i].d.next = true;
                } else if self.sel_full.val().get_bit(i) {
                    self.cr_q[i].d.next = self.deep2.val();
                } else {
                    self.cr_q[i].d.next = self.sel_nz.val().get_bit(i);
                }
            } else if self.sa_go.val().get_bit(i) {
                self.cr_q[i].d.next = self.sel_ge2.val().get_bit(i);
            } else {
                self.cr_q[i].d.next = self.sel_nz.val().get_bit(i);
            }
            if self.va_elig.val().get_bit(i) & self.va_in[i].grant_valid.val() {
                // A free output VC: nobody sends on it this cycle.
                self.cr_q[i].d.next = (self.va_in[i].grant.val() & (self.cc_nz.val() | self.credit_in.val())).any();
            }
            if self.sa_go.val().get_bit(i) & self.in_tail.val().get_bit(i) {
                self.cr_q[i].d.next = false;
                self.ovc_oh[i].d.next = self.zero_nv.val();
                if self.in_multi.val().get_bit(i) {
                    self.vc_st[i].d.next = self.st_routing.val();
                    self.rc_wait[i].d.next = self.rd.val();
                } else {
                    self.vc_st[i].d.next = self.st_idle.val();
                }
            }
            if self.reset.val() {
                self.vc_st[i].d.next = self.st_idle.val();
                self.rc_wait[i].d.next = self.zero4.val();
                self.ovc_oh[i].d.next = self.zero_nv.val();
                self.out_vc[i].d.next = self.zero4.val();
                self.cr_q[i].d.next = false;
            }
        }
        // Ownership: taken by accepted VA grants, released by tails (never the same VC in one
        // cycle: VA only grants free ones, only held ones are released).
        self.ovc_held.d.next = (self.ovc_held.q.val() | self.va_acc.val()) & !self.freed.val();
        if self.proto_err.val() {
            self.err_q.d.next = true;
        }
        // The low-priority hold-off: restarted by a regular request, counted down otherwise.
        for o in 0..5 {
            if self.hi_wait[o].q.val().any() {
                self.hi_wait[o].d.next = self.hi_wait[o].q.val() - self.one16.val();
            }
            if self.prio_en.val() & self.sa_hreq[o].val().any() {
                self.hi_wait[o].d.next = self.zero16.val();
                if self.low_idle.val().any() {
                    self.hi_wait[o].d.next = self.low_idle.val() - self.one16.val();
                }
            }
            if self.reset.val() {
                self.hi_wait[o].d.next = self.zero16.val();
            }
        }
        if self.reset.val() {
            self.ovc_held.d.next = self.zero_nv.val();
            self.err_q.d.next = false;
        }

        // 7. Registered state outputs.
        for i in 0..NV {
            self.vc_state[i].next = self.vc_st[i].q.val();
            self.vc_port[i].next = self.rc[i].route.val();
            if self.vc_st[i].q.val() == self.st_routing.val() {
                self.vc_port[i].next = self.rc[i].port.val();
            }
            self.vc_ovc[i].next = self.out_vc[i].q.val();
        }
        self.ovc_busy.next = self.ovc_held.q.val();
        for j in 0..NV {
            self.credits[j].next = self.cc[j].credits.val();
        }
        self.err.next = self.err_q.q.val() | self.cc_err.val();
        self.ev_va_req.next = self.va_elig.val();
        self.ev_sa_req.next = self.sa_elig.val();
        self.ev_sa_cstall.next = self.zero_nv.val();
        for i in 0..NV {
            if (self.vc_st[i].q.val() == self.st_active.val())
                & self.in_valid.val().get_bit(i)
                & !(self.ovc_oh[i].q.val() & self.cok.val()).any()
            {
                self.ev_sa_cstall.next = self.ev_sa_cstall.val() | self.bit_nv[i].val();
            }
        }
    }
}

/// Declares a named alias for a standard router-control configuration (S3).
#[macro_export]
macro_rules! declare_router_ctrl {
    ($name: ident, $v: expr, $cw: expr, $dw: expr) => {
        #[doc = concat!("Router allocator control, ", stringify!($v), " VCs, ", stringify!($cw), "-bit coordinates, ", stringify!($dw), "-bit credits.")]
        pub type $name = $crate::noc::router_ctrl::RouterCtrlRtl<$v, { 5 * $v }, $cw, $dw>;
    };
}

// The package/NoC default: 2 VCs of 8 flits, meshes up to 8x8.
declare_router_ctrl!(RouterCtrl2Rtl, 2, 3, 4);
// 4 VCs (the lockstep's second configuration).
declare_router_ctrl!(RouterCtrl4Rtl, 4, 3, 4);

/// A flit as the control block sees it at the front of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TbFlit {
    /// Unique per run (packet number × 4096 + flit index), to pair CL and RTL decisions.
    pub id: u64,
    pub head: bool,
    pub tail: bool,
    pub dest_x: u8,
    pub dest_y: u8,
}

/// Knobs of [`RouterTb`]'s random traffic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrafficKnobs {
    /// Per input port and cycle: probability that the upstream router offers a flit.
    pub p_inject: f64,
    /// Per output port and cycle: probability that downstream frees a slot (returns a credit).
    pub p_drain: f64,
    /// Packet length is uniform in 1..=max_pkt flits.
    pub max_pkt: u32,
}

/// Random legal traffic around one router's control block: the upstream senders (per input
/// VC credit view, packets of random length and destination, at most one flit per input link
/// per cycle, a VC carries one packet at a time), the VC buffers (a mirror of the router's,
/// popped by the switch grants) and the downstream buffers (filled by the router's sends,
/// drained at random, one credit per output link per cycle). Shared by the co-sim recorder
/// and the CL lockstep (which feeds the same arrivals and credits into `RouterCl`'s links).
pub struct RouterTb {
    pub params: RouterCtrlParams,
    pub knobs: TrafficKnobs,
    rng: Xoshiro256PlusPlus,
    /// Flits in each input VC buffer (front first).
    pub buf: Vec<VecDeque<TbFlit>>,
    /// Upstream credits per input VC, and the packet being sent on it (flits left, dest).
    up_credits: Vec<u64>,
    up_left: Vec<u32>,
    up_dest: Vec<(u8, u8)>,
    up_seq: Vec<u64>,
    /// Flits in each downstream VC buffer (per output VC).
    down_occ: Vec<u64>,
    next_pkt: u64,
    /// Decided last cycle, delivered this cycle: a flit per input port (vc, flit) and a
    /// credit per output port (vc).
    pub arriving: [Option<(usize, TbFlit)>; NPORTS],
    pub credit_arriving: [Option<usize>; NPORTS],
}

impl RouterTb {
    pub fn new(params: RouterCtrlParams, knobs: TrafficKnobs, seed: u64) -> Self {
        let nv = NPORTS * params.vcs;
        Self {
            params,
            knobs,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            buf: vec![VecDeque::new(); nv],
            up_credits: vec![params.vc_buf; nv],
            up_left: vec![0; nv],
            up_dest: vec![(0, 0); nv],
            up_seq: vec![0; nv],
            down_occ: vec![0; nv],
            next_pkt: 1,
            arriving: [None; NPORTS],
            credit_arriving: [None; NPORTS],
        }
    }

    /// Start of a cycle: this cycle's arrivals enter the VC buffers (write bypasses to the
    /// front, as in the CL's input queuing).
    pub fn arrive(&mut self) {
        let v = self.params.vcs;
        for p in 0..NPORTS {
            if let Some((vc, f)) = self.arriving[p] {
                self.buf[p * v + vc].push_back(f);
            }
        }
    }

    /// Credits arriving this cycle, bit ov.
    pub fn credit_mask(&self) -> u64 {
        let v = self.params.vcs;
        (0..NPORTS)
            .filter_map(|o| self.credit_arriving[o].map(|vc| 1u64 << (o * v + vc)))
            .fold(0, |a, b| a | b)
    }

    /// Drives the block's inputs from the buffer fronts and this cycle's credits.
    pub fn drive<const V: usize, const NV: usize, const CW: usize, const DW: usize>(
        &self,
        u: &mut RouterCtrlRtl<V, NV, CW, DW>,
        cur: (u64, u64),
        reset: bool,
    ) {
        let (mut valid, mut multi, mut head, mut tail) = (0u64, 0u64, 0u64, 0u64);
        for (iv, b) in self.buf.iter().enumerate() {
            let f = b.front().copied().unwrap_or_default();
            valid |= (!b.is_empty() as u64) << iv;
            multi |= ((b.len() >= 2) as u64) << iv;
            head |= (f.head as u64) << iv;
            tail |= (f.tail as u64) << iv;
            u.in_dest_x[iv].next = (f.dest_x as u64).into();
            u.in_dest_y[iv].next = (f.dest_y as u64).into();
        }
        u.reset.next = reset;
        u.cur_x.next = cur.0.into();
        u.cur_y.next = cur.1.into();
        u.in_valid.next = valid.into();
        u.in_multi.next = multi.into();
        u.in_head.next = head.into();
        u.in_tail.next = tail.into();
        u.credit_in.next = self.credit_mask().into();
        // Every flit regular: the control's lockstep and co-sim run without the migration
        // stream (the full router's lockstep, `rtl_noc_router.rs`, runs it).
        u.prio_en.next = false;
        u.low_idle.next = 0u64.into();
        u.in_low.next = 0u64.into();
    }

    /// End of a cycle: the switch decisions (`pops` bit iv; `sends` per output port the output
    /// VC) take effect, credits come back upstream, downstream drains, and the next cycle's
    /// arrivals and credits are chosen. Returns the flits popped, per input VC.
    pub fn step(&mut self, pops: u64, sends: [Option<usize>; NPORTS]) -> Vec<(usize, TbFlit)> {
        let v = self.params.vcs;
        let nv = NPORTS * v;
        let k = self.params.k as u8;
        let mut popped = vec![];
        for iv in 0..nv {
            if pops >> iv & 1 == 1 {
                if let Some(f) = self.buf[iv].pop_front() {
                    popped.push((iv, f));
                }
                // The freed slot's credit reaches the upstream sender.
                self.up_credits[iv] += 1;
            }
        }
        // Sent flits occupy the downstream buffers until drained.
        for (o, s) in sends.iter().enumerate() {
            if let Some(vc) = s {
                self.down_occ[o * v + vc] += 1;
            }
        }
        for o in 0..NPORTS {
            self.credit_arriving[o] = None;
            if self.rng.gen_bool(self.knobs.p_drain) {
                let full: Vec<usize> = (0..v).filter(|&vc| self.down_occ[o * v + vc] > 0).collect();
                if !full.is_empty() {
                    let vc = full[self.rng.gen_range(0..full.len())];
                    self.down_occ[o * v + vc] -= 1;
                    self.credit_arriving[o] = Some(vc);
                }
            }
        }
        for p in 0..NPORTS {
            self.arriving[p] = None;
            if !self.rng.gen_bool(self.knobs.p_inject) {
                continue;
            }
            let ready: Vec<usize> = (0..v).filter(|&vc| self.up_credits[p * v + vc] > 0).collect();
            if ready.is_empty() {
                continue;
            }
            let vc = ready[self.rng.gen_range(0..ready.len())];
            let iv = p * v + vc;
            let head = self.up_left[iv] == 0;
            if head {
                self.up_left[iv] = self.rng.gen_range(1..=self.knobs.max_pkt);
                self.up_dest[iv] = (self.rng.gen_range(0..k), self.rng.gen_range(0..k));
                self.up_seq[iv] = self.next_pkt << 12;
                self.next_pkt += 1;
            }
            self.up_left[iv] -= 1;
            let f = TbFlit {
                id: self.up_seq[iv],
                head,
                tail: self.up_left[iv] == 0,
                dest_x: self.up_dest[iv].0,
                dest_y: self.up_dest[iv].1,
            };
            self.up_seq[iv] += 1;
            self.up_credits[iv] -= 1;
            self.arriving[p] = Some((vc, f));
        }
        popped
    }
}

/// Reads the switch decisions of the settled block: (pops bit iv, output VC per output port).
pub fn decisions<const V: usize, const NV: usize, const CW: usize, const DW: usize>(
    u: &RouterCtrlRtl<V, NV, CW, DW>,
) -> (u64, [Option<usize>; NPORTS]) {
    let st = u.st_valid.val().to_u64();
    let sends = std::array::from_fn(|o| {
        (st >> o & 1 == 1).then(|| u.st_out_vc[o].val().to_u64() as usize)
    });
    (u.sa_grant.val().to_u64(), sends)
}

/// Co-sim recorder: a router at (1, 2) of a `k`x`k` mesh under [`RouterTb`] traffic (reset in
/// cycle 0). The closed loop (pops and sends feed back into the traffic) is run once on its
/// own to fix the input sequence, which [`record`] then replays on a fresh block.
pub fn record_router_ctrl<const V: usize, const NV: usize, const CW: usize, const DW: usize>(
    module: &str,
    params: RouterCtrlParams,
    cycles: usize,
    seed: u64,
) -> Result<PortTrace, RtlError> {
    let knobs = TrafficKnobs { p_inject: 0.6, p_drain: 0.5, max_pkt: 4 };
    let cur = (1u64, 2u64.min(params.k as u64 - 1));
    let mut tb = RouterTb::new(params, knobs, seed);
    let mut uut = RouterCtrlRtl::<V, NV, CW, DW>::new(&params);
    uut.connect_all();
    let mut inputs = Vec::with_capacity(cycles);
    for c in 0..cycles {
        tb.arrive();
        inputs.push((tb.buf.clone(), tb.credit_mask()));
        tb.drive(&mut uut, cur, c == 0);
        settle(&mut uut).map_err(|d| RtlError::Trace { module: module.into(), detail: d })?;
        let (pops, sends) = decisions(&uut);
        tb.step(pops, sends);
        uut.clock.next = true.into();
        settle(&mut uut).map_err(|d| RtlError::Trace { module: module.into(), detail: d })?;
        uut.clock.next = false.into();
        settle(&mut uut).map_err(|d| RtlError::Trace { module: module.into(), detail: d })?;
    }
    let mut replay = RouterTb::new(params, knobs, seed);
    record(
        module,
        RouterCtrlRtl::<V, NV, CW, DW>::new(&params),
        cycles,
        |u| &mut u.clock,
        move |c, u| {
            replay.buf.clone_from(&inputs[c].0);
            let credits = inputs[c].1;
            replay.credit_arriving = std::array::from_fn(|o| {
                (0..params.vcs).find(|&vc| credits >> (o * params.vcs + vc) & 1 == 1)
            });
            replay.drive(u, cur, c == 0);
        },
    )
}

/// Export registration: 2 VCs of 8 flits, 3-bit coordinates (meshes up to 8x8).
pub const EXPORT: BlockDef = BlockDef {
    name: "router_ctrl",
    top: false,
    domain: crate::export::ModelDomain::PkgCore,
    cosim_cycles: 4096,
    sets: &[ParamSet {
        module: "router_ctrl_v2",
        rust_type: "RouterCtrl2Rtl",
        params: &[("vcs", 2), ("vc_buf", 8), ("routing_delay", 1), ("coord_bits", 3)],
        // ECP5-85F: 47.8 / 49.2 MHz at seeds 1 / 2; one cycle of credit check and VA/SA (docs/rtl.md, "Timing closure at the prototype clocks").
        ecp5_clock_mhz: 45,
        build: || boxed(RouterCtrl2Rtl::new(&EXPORT_PARAMS)),
        recorder: Some(|cycles, seed| {
            record_router_ctrl::<2, 10, 3, 4>("router_ctrl_v2", EXPORT_PARAMS, cycles, seed)
        }),
    }],
};

/// The registered parameter set (an 8x8 mesh's router with the default `RouterCfg`).
pub const EXPORT_PARAMS: RouterCtrlParams =
    RouterCtrlParams { vcs: 2, vc_buf: 8, routing_delay: 1, k: 8 };

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(
        not(feature = "yosys"),
        ignore = "needs yosys (enable feature `yosys`)"
    )]
    fn router_ctrl_synthesizable() {
        let mut uut = RouterCtrl2Rtl::new(&EXPORT_PARAMS);
        uut.connect_all();
        let vlog = generate_verilog(&uut);
        yosys_validate("waferstream_router_ctrl_v2", &vlog).unwrap();
    }
}
