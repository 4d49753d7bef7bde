//! The full input-queued VC mesh router in RTL: the twin of `hw::noc::router::RouterCl`
//! (BookSim2 `iq`), data path included. A wiring top over sub-blocks that are each checked on
//! their own:
//! * one [`VcFifoRtl`] per input VC (`iv = port·V + vc`, ports in `sched::noc::Dir` order),
//!   written by the input links, popped by the switch grants, its front shown the cycle a flit
//!   arrives (write bypass, as the CL's input queuing precedes VA and SA);
//! * the allocator control [`RouterCtrlRtl`] (RC, VC states, VA and SA iSLIP, output-VC
//!   ownership, credit counters, the migration VC priority), fed the buffer fronts;
//! * the 5×5 crossbar: per input port the front of its granted VC, per output port the input
//!   port the control selects, the output VC written into the flit's link `vc` and the hop
//!   count incremented (saturating at 255, as the CL's `saturating_add`).
//!
//! # Flit format (`FW = 11 + 2·CW + PW` bits, LSB first)
//! `head` (bit 0), `tail` (1), `low` (2: the migration stream, CL `class >= low_class`),
//! `dest_x` (CW bits from 3), `dest_y` (CW bits from 3 + CW), `hops` (8 bits from 3 + 2·CW),
//! `payload` (PW bits from 11 + 2·CW). The link's VC travels beside the flit
//! (`in_flit_vc`/`out_flit_vc`, the S5 `flit_vc`). The payload is opaque to the router: a
//! synthesized router carries the data bits there; the mesh stand-in
//! ([`super::router_swap`]) carries a handle to the CL flit's bookkeeping (packet id,
//! timestamps, class, watch bit), which no router decision reads.
//!
//! # Cycle semantics
//! Those of [`RouterCtrlRtl`] (see its module doc) with the buffers inside: a flit and a
//! credit arriving on a link in cycle t are used in cycle t; a flit granted in cycle t leaves
//! on `out_flit*` and its credit on `credit_out*` in cycle t (combinational from the inputs
//! and the registers), the links outside add the latency. Supported: `routing_delay` 1..=15,
//! `va_delay` = `sa_delay` = 1, serialization 1, `vc_buf` 1..=D
//! ([`RouterParams::of`] refuses the rest by name).
//!
//! `err` (sticky until reset): a credit counter saw illegal traffic, a body flit reached an
//! idle VC, or a flit arrived at a full buffer — each a broken neighbour (the CL panics).

use rust_hdl::prelude::*;

use super::router_ctrl::{RouterCtrlParams, RouterCtrlRtl, RouterTb, TbFlit, TrafficKnobs, NPORTS};
use super::vc_fifo::VcFifoRtl;
use crate::cosim::{record, settle, PortTrace};
use crate::export::{boxed, BlockDef, ParamSet};
use crate::RtlError;

/// Bits of the flit format before the coordinates (head, tail, low).
pub const FLIT_FLAGS: usize = 3;
/// Hop-count bits.
pub const HOP_BITS: usize = 8;

/// Full router: `V` VCs per port (`NV = 5·V`), `CW`-bit coordinates, `DW`-bit credit
/// counters, `FW`-bit flits, `D` buffer slots per VC, `OW`-bit occupancy counts.
///
/// Port coupling: `out_flit*`, `credit_out*`, `ev_*`: comb(inputs, registers); `vc_occ`,
/// `vc_state`, `credits`, `ovc_busy`, `err`: registered.
#[derive(LogicBlock)]
pub struct RouterRtl<
    const V: usize,
    const NV: usize,
    const CW: usize,
    const DW: usize,
    const FW: usize,
    const D: usize,
    const OW: usize,
> {
    /// Single clock; every register is updated on its rising edge.
    pub clock: Signal<In, Clock>,
    /// Synchronous, active-high reset: buffers empty, VCs idle, credits full, pointers 0.
    pub reset: Signal<In, Bit>,
    /// This router's coordinates (straps).
    pub cur_x: Signal<In, Bits<CW>>,
    pub cur_y: Signal<In, Bits<CW>>,
    /// Migration VC priority on, and its idle hold-off in cycles (straps, see
    /// [`RouterCtrlRtl`]).
    pub prio_en: Signal<In, Bit>,
    pub low_idle: Signal<In, Bits<16>>,
    /// Per input port: a flit arrives (bit p), its VC and the flit.
    pub in_flit_valid: Signal<In, Bits<5>>,
    pub in_flit_vc: [Signal<In, Bits<4>>; 5],
    pub in_flit: [Signal<In, Bits<FW>>; 5],
    /// Per output port: a credit arrives from downstream (bit o) and its VC.
    pub credit_in_valid: Signal<In, Bits<5>>,
    pub credit_in_vc: [Signal<In, Bits<4>>; 5],
    /// Per output port: a flit leaves (bit o), its output VC and the flit (hops + 1). comb.
    pub out_flit_valid: Signal<Out, Bits<5>>,
    pub out_flit_vc: [Signal<Out, Bits<4>>; 5],
    pub out_flit: [Signal<Out, Bits<FW>>; 5],
    /// Per input port: a credit goes back upstream (bit p, a flit left that port's buffer)
    /// and its VC. comb.
    pub credit_out_valid: Signal<Out, Bits<5>>,
    pub credit_out_vc: [Signal<Out, Bits<4>>; 5],
    /// Per input VC: flits buffered, and the VC state (`VC_*`). registered.
    pub vc_occ: [Signal<Out, Bits<OW>>; NV],
    pub vc_state: [Signal<Out, Bits<2>>; NV],
    /// Per input VC: route (output port) and allocated output VC. registered.
    pub vc_port: [Signal<Out, Bits<3>>; NV],
    pub vc_ovc: [Signal<Out, Bits<4>>; NV],
    /// Per output VC: credits available, and whether an input VC holds it. registered.
    pub credits: [Signal<Out, Bits<DW>>; NV],
    pub ovc_busy: Signal<Out, Bits<NV>>,
    /// Event masks for the statistics (see [`RouterCtrlRtl`]): VA grants, VA requests, SA
    /// requests with a credit, Active VCs stalled on credits. comb.
    pub ev_va_grant: Signal<Out, Bits<NV>>,
    pub ev_va_req: Signal<Out, Bits<NV>>,
    pub ev_sa_req: Signal<Out, Bits<NV>>,
    pub ev_sa_cstall: Signal<Out, Bits<NV>>,
    /// Sticky protocol error (see the module doc). registered.
    pub err: Signal<Out, Bit>,

    // --- blocks
    /// Allocator control.
    ctrl: RouterCtrlRtl<V, NV, CW, DW>,
    /// Input VC buffers.
    buf: [VcFifoRtl<FW, D, OW>; NV],

    // --- combinational locals
    /// Buffer-front flags gathered over the VCs (each control input written once).
    f_valid: Signal<Local, Bits<NV>>,
    f_multi: Signal<Local, Bits<NV>>,
    f_head: Signal<Local, Bits<NV>>,
    f_tail: Signal<Local, Bits<NV>>,
    f_low: Signal<Local, Bits<NV>>,
    /// Credits arriving, per output VC.
    cr_in: Signal<Local, Bits<NV>>,
    /// Per input port: the front flit of its granted VC, and that VC.
    pfront: [Signal<Local, Bits<FW>>; 5],
    pvc: [Signal<Local, Bits<4>>; 5],
    pgo: Signal<Local, Bits<5>>,
    /// Per output port: the flit the crossbar selects (hops not yet counted).
    xsel: [Signal<Local, Bits<FW>>; 5],
    /// Any buffer overfilled.
    ovf: Signal<Local, Bit>,
    /// Buffer writes, per input VC, and the flit offered to each.
    wr_l: Signal<Local, Bits<NV>>,
    wr_d: [Signal<Local, Bits<FW>>; NV],
    /// Each front shifted down to its `dest_y` field.
    fy: [Signal<Local, Bits<FW>>; NV],

    // --- constants
    idx_port: [Constant<Bits<3>>; NV],
    idx_vc: [Constant<Bits<4>>; NV],
    bit_nv: [Constant<Bits<NV>>; NV],
    bit5: [Constant<Bits<5>>; 5],
    zero_nv: Constant<Bits<NV>>,
    zero5: Constant<Bits<5>>,
    zero4: Constant<Bits<4>>,
    zero_fw: Constant<Bits<FW>>,
    /// Bit offset of `dest_y`, a one in the hop field's LSB, and the hop field's mask.
    off_dy: Constant<Bits<FW>>,
    hop_one: Constant<Bits<FW>>,
    hop_mask: Constant<Bits<FW>>,
}

/// Configuration of a [`RouterRtl`]: the control's, plus the buffer depth in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouterParams {
    pub ctrl: RouterCtrlParams,
    /// Flits per VC buffer (`vc_buf`), 1..=D.
    pub depth: usize,
}

impl RouterParams {
    /// From the CL's configuration, for a router built with `vcs` VCs, `slots` buffer slots
    /// and `coord_bits`-bit coordinates; the error names the field the RTL cannot model and
    /// why (field paths of `hw::noc::NocCfg`).
    pub fn of(cfg: &hw::noc::RouterCfg, k: u32, ser: u32, vcs: usize, slots: usize, coord_bits: usize) -> Result<Self, hw::noc::CfgError> {
        let no = |field: &str, reason: String| Err(hw::noc::CfgError { field: field.into(), reason: format!("{reason} (the RTL router cannot model it)") });
        if ser != 1 {
            return no("mesh.link_width_bytes", format!("serialization of {ser} cycles per flit; the RTL router sends one flit per cycle per output (flit_bytes <= link_width_bytes)"));
        }
        if cfg.va_delay != 1 {
            return no("mesh.router.va_delay", format!("{}: the RTL VC allocator decides in 1 cycle", cfg.va_delay));
        }
        if cfg.sa_delay != 1 {
            return no("mesh.router.sa_delay", format!("{}: the RTL switch allocator decides in 1 cycle", cfg.sa_delay));
        }
        if !(1..=15).contains(&cfg.routing_delay) {
            return no("mesh.router.routing_delay", format!("{}: the RTL route stage counts 1..=15 cycles", cfg.routing_delay));
        }
        if cfg.vcs as usize != vcs {
            return no("mesh.router.vcs", format!("{}: the RTL router is built with {vcs} VCs per port", cfg.vcs));
        }
        if !(1..=slots).contains(&(cfg.vc_buf as usize)) {
            return no("mesh.router.vc_buf", format!("{}: the RTL router's VC buffers hold 1..={slots} flits", cfg.vc_buf));
        }
        if k as usize > 1 << coord_bits {
            return no("mesh.k", format!("{k}: the RTL router has {coord_bits}-bit coordinates (k <= {})", 1 << coord_bits));
        }
        let ctrl = match RouterCtrlParams::of(cfg, k, ser) {
            Some(c) => c,
            None => return no("mesh.router", "delays the RTL control does not implement".into()),
        };
        Ok(Self { ctrl, depth: cfg.vc_buf as usize })
    }
}

impl<const V: usize, const NV: usize, const CW: usize, const DW: usize, const FW: usize, const D: usize, const OW: usize>
    RouterRtl<V, NV, CW, DW, FW, D, OW>
{
    /// Payload bits of the flit format.
    pub const PW: usize = FW - (FLIT_FLAGS + 2 * CW + HOP_BITS);

    /// Builds the router for `p`. Panics (a configuration bug of the instantiating code; user
    /// configs are checked by [`RouterParams::of`]) when the widths do not match `p`.
    pub fn new(p: &RouterParams) -> Self {
        assert!(FW > FLIT_FLAGS + 2 * CW + HOP_BITS && FW <= 64, "flit width {FW} leaves no payload (or exceeds 64)");
        assert!(p.ctrl.k <= 1 << CW, "k = {} needs more than {CW} coordinate bits", p.ctrl.k);
        let zero_nv: Bits<NV> = 0u64.into();
        let hop_off = FLIT_FLAGS + 2 * CW;
        Self {
            clock: Default::default(),
            reset: Default::default(),
            cur_x: Default::default(),
            cur_y: Default::default(),
            prio_en: Default::default(),
            low_idle: Default::default(),
            in_flit_valid: Default::default(),
            in_flit_vc: std::array::from_fn(|_| Default::default()),
            in_flit: std::array::from_fn(|_| Default::default()),
            credit_in_valid: Default::default(),
            credit_in_vc: std::array::from_fn(|_| Default::default()),
            out_flit_valid: Default::default(),
            out_flit_vc: std::array::from_fn(|_| Default::default()),
            out_flit: std::array::from_fn(|_| Default::default()),
            credit_out_valid: Default::default(),
            credit_out_vc: std::array::from_fn(|_| Default::default()),
            vc_occ: std::array::from_fn(|_| Default::default()),
            vc_state: std::array::from_fn(|_| Default::default()),
            vc_port: std::array::from_fn(|_| Default::default()),
            vc_ovc: std::array::from_fn(|_| Default::default()),
            credits: std::array::from_fn(|_| Default::default()),
            ovc_busy: Default::default(),
            ev_va_grant: Default::default(),
            ev_va_req: Default::default(),
            ev_sa_req: Default::default(),
            ev_sa_cstall: Default::default(),
            err: Default::default(),
            ctrl: RouterCtrlRtl::new(&p.ctrl),
            buf: std::array::from_fn(|_| VcFifoRtl::new(p.depth)),
            f_valid: Default::default(),
            f_multi: Default::default(),
            f_head: Default::default(),
            f_tail: Default::default(),
            f_low: Default::default(),
            cr_in: Default::default(),
            pfront: std::array::from_fn(|_| Default::default()),
            pvc: std::array::from_fn(|_| Default::default()),
            pgo: Default::default(),
            xsel: std::array::from_fn(|_| Default::default()),
            ovf: Default::default(),
            wr_l: Default::default(),
            wr_d: std::array::from_fn(|_| Default::default()),
            fy: std::array::from_fn(|_| Default::default()),
            idx_port: std::array::from_fn(|i| Constant::new(((i / V) as u64).into())),
            idx_vc: std::array::from_fn(|i| Constant::new(((i % V) as u64).into())),
            bit_nv: std::array::from_fn(|i| Constant::new(zero_nv.replace_bit(i, true))),
            bit5: std::array::from_fn(|i| Constant::new((1u64 << i).into())),
            zero_nv: Constant::new(zero_nv),
            zero5: Constant::new(0u64.into()),
            zero4: Constant::new(0u64.into()),
            zero_fw: Constant::new(0u64.into()),
            off_dy: Constant::new(((FLIT_FLAGS + CW) as u64).into()),
            hop_one: Constant::new((1u64 << hop_off).into()),
            hop_mask: Constant::new((0xffu64 << hop_off).into()),
        }
    }

    /// Allocator priority pointers (see [`RouterCtrlRtl::pointers`]).
    pub fn pointers(&self) -> [Vec<u32>; 5] {
        self.ctrl.pointers()
    }
}

impl<const V: usize, const NV: usize, const CW: usize, const DW: usize, const FW: usize, const D: usize, const OW: usize> Logic
    for RouterRtl<V, NV, CW, DW, FW, D, OW>
{
    #[hdl_gen]
    fn update(&mut self) {
        // 1. Clocks and resets of the sub-blocks (the top holds no registers of its own).
        self.ctrl.clock.next = self.clock.val();
        self.ctrl.reset.next = self.reset.val();
        for i in 0..NV {
            self.buf[i].clock.next = self.clock.val();
            self.buf[i].reset.next = self.reset.val();
        }

        // 2. Input links into the VC buffers; credits into the control.
        // Each sub-block input is written once (built in a local first): a default-then-
        // override write glitches it, and Icarus ping-pongs (see Router control, lessons).
        self.wr_l.next = self.zero_nv.val();
        for i in 0..NV {
            self.wr_d[i].next = self.zero_fw.val();
            for p in 0..5 {
                if self.idx_port[i].val().index() == p {
                    if self.in_flit_valid.val().get_bit(p) & (self.in_flit_vc[p].val() == self.idx_vc[i].val()) {
                        self.wr_l.next = self.wr_l.val() | self.bit_nv[i].val();
                    }
                    self.wr_d[i].next = self.in_flit[p].val();
                }
            }
            self.buf[i].wr.next = self.wr_l.val().get_bit(i);
            self.buf[i].wr_data.next = self.wr_d[i].val();
        }
        self.cr_in.next = self.zero_nv.val();
        for i in 0..NV {
            for o in 0..5 {
                if (self.idx_port[i].val().index() == o)
                    & self.credit_in_valid.val().get_bit(o)
                    & (self.credit_in_vc[o].val() == self.idx_vc[i].val())
                {
                    self.cr_in.next = self.cr_in.val() | self.bit_nv[i].val();
                }
            }
        }

        // 3. The buffer fronts, unpacked for the control.
        self.f_valid.next = self.zero_nv.val();
        self.f_multi.next = self.zero_nv.val();
        self.f_head.next = self.zero_nv.val();
        self.f_tail.next = self.zero_nv.val();
        self.f_low.next = self.zero_nv.val();
        for i in 0..NV {
            if self.buf[i].valid.val() {
                self.f_valid.next = self.f_valid.val() | self.bit_nv[i].val();
            }
            if self.buf[i].multi.val() {
                self.f_multi.next = self.f_multi.val() | self.bit_nv[i].val();
            }
            if self.buf[i].front.val().get_bit(0) {
                self.f_head.next = self.f_head.val() | self.bit_nv[i].val();
            }
            if self.buf[i].front.val().get_bit(1) {
                self.f_tail.next = self.f_tail.val() | self.bit_nv[i].val();
            }
            if self.buf[i].front.val().get_bit(2) {
                self.f_low.next = self.f_low.val() | self.bit_nv[i].val();
            }
            self.ctrl.in_dest_x[i].next = self.buf[i].front.val().get_bits::<CW>(3);
            // dest_y through a shift (a constant part-select base would need a log2(FW)-bit
            // index, which a generic width cannot size).
            self.fy[i].next = self.buf[i].front.val() >> self.off_dy.val();
            self.ctrl.in_dest_y[i].next = self.fy[i].val().get_bits::<CW>(0);
        }
        self.ctrl.cur_x.next = self.cur_x.val();
        self.ctrl.cur_y.next = self.cur_y.val();
        self.ctrl.prio_en.next = self.prio_en.val();
        self.ctrl.low_idle.next = self.low_idle.val();
        self.ctrl.in_valid.next = self.f_valid.val();
        self.ctrl.in_multi.next = self.f_multi.val();
        self.ctrl.in_head.next = self.f_head.val();
        self.ctrl.in_tail.next = self.f_tail.val();
        self.ctrl.in_low.next = self.f_low.val();
        self.ctrl.credit_in.next = self.cr_in.val();

        // 4. Switch grants pop the buffers; per input port the granted front and its VC.
        for i in 0..NV {
            self.buf[i].pop.next = self.ctrl.sa_grant.val().get_bit(i);
        }
        self.pgo.next = self.zero5.val();
        for p in 0..5 {
            self.pfront[p].next = self.zero_fw.val();
            self.pvc[p].next = self.zero4.val();
        }
        for i in 0..NV {
            for p in 0..5 {
                if (self.idx_port[i].val().index() == p) & self.ctrl.sa_grant.val().get_bit(i) {
                    self.pfront[p].next = self.buf[i].front.val();
                    self.pvc[p].next = self.idx_vc[i].val();
                    self.pgo.next = self.pgo.val() | self.bit5[p].val();
                }
            }
        }
        // The freed slot goes back upstream as a credit.
        self.credit_out_valid.next = self.pgo.val();
        for p in 0..5 {
            self.credit_out_vc[p].next = self.pvc[p].val();
        }

        // 5. Crossbar: each sending output takes its input port's granted front; the flit
        //    leaves on the allocated output VC with one more hop (saturating).
        self.out_flit_valid.next = self.ctrl.st_valid.val();
        for o in 0..5 {
            self.xsel[o].next = self.zero_fw.val();
            for p in 0..5 {
                if self.ctrl.st_in_port[o].val().index() == p {
                    self.xsel[o].next = self.pfront[p].val();
                }
            }
            self.out_flit[o].next = self.xsel[o].val();
            if self.ctrl.st_valid.val().get_bit(o) & ((self.xsel[o].val() & self.hop_mask.val()) != self.hop_mask.val()) {
                self.out_flit[o].next = self.xsel[o].val() + self.hop_one.val();
            }
            if !self.ctrl.st_valid.val().get_bit(o) {
                self.out_flit[o].next = self.zero_fw.val();
            }
            self.out_flit_vc[o].next = self.ctrl.st_out_vc[o].val();
        }

        // 6. Registered state and event outputs.
        self.ovf.next = false;
        for i in 0..NV {
            self.vc_occ[i].next = self.buf[i].count.val();
            self.vc_state[i].next = self.ctrl.vc_state[i].val();
            self.vc_port[i].next = self.ctrl.vc_port[i].val();
            self.vc_ovc[i].next = self.ctrl.vc_ovc[i].val();
            self.credits[i].next = self.ctrl.credits[i].val();
            if self.buf[i].overflow.val() {
                self.ovf.next = true;
            }
        }
        self.ovc_busy.next = self.ctrl.ovc_busy.val();
        self.ev_va_grant.next = self.ctrl.va_grant.val();
        self.ev_va_req.next = self.ctrl.ev_va_req.val();
        self.ev_sa_req.next = self.ctrl.ev_sa_req.val();
        self.ev_sa_cstall.next = self.ctrl.ev_sa_cstall.val();
        self.err.next = self.ctrl.err.val() | self.ovf.val();
    }
}

/// Declares a named alias for a standard router configuration (S3).
#[macro_export]
macro_rules! declare_router {
    ($name: ident, $v: expr, $cw: expr, $dw: expr, $pw: expr, $d: expr, $ow: expr) => {
        #[doc = concat!("Mesh router, ", stringify!($v), " VCs x ", stringify!($d), " buffer slots, ", stringify!($cw), "-bit coordinates, ", stringify!($pw), "-bit payload.")]
        pub type $name = $crate::noc::router::RouterRtl<$v, { 5 * $v }, $cw, $dw, { 11 + 2 * $cw + $pw }, $d, $ow>;
    };
}

// The NoC default (2 VCs, buffers up to 8 flits), meshes up to 8x8, an 8-bit payload.
declare_router!(Router2Rtl, 2, 3, 4, 8, 8, 4);

/// Packing of the flit format (module doc) for drivers and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RtlFlit {
    pub head: bool,
    pub tail: bool,
    pub low: bool,
    pub dest_x: u8,
    pub dest_y: u8,
    pub hops: u8,
    pub payload: u64,
}

impl RtlFlit {
    pub fn pack(&self, cw: usize) -> u64 {
        let off = FLIT_FLAGS as u64;
        (self.head as u64)
            | (self.tail as u64) << 1
            | (self.low as u64) << 2
            | (self.dest_x as u64) << off
            | (self.dest_y as u64) << (off + cw as u64)
            | (self.hops as u64) << (off + 2 * cw as u64)
            | self.payload << (off + 2 * cw as u64 + HOP_BITS as u64)
    }

    pub fn unpack(w: u64, cw: usize) -> Self {
        let m = (1u64 << cw) - 1;
        let off = FLIT_FLAGS;
        RtlFlit {
            head: w & 1 == 1,
            tail: w >> 1 & 1 == 1,
            low: w >> 2 & 1 == 1,
            dest_x: (w >> off & m) as u8,
            dest_y: (w >> (off + cw) & m) as u8,
            hops: (w >> (off + 2 * cw) & 0xff) as u8,
            payload: w >> (off + 2 * cw + HOP_BITS),
        }
    }
}

/// Inputs of one cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RouterIn {
    /// Per input port: (VC, packed flit).
    pub flit: [Option<(usize, u64)>; NPORTS],
    /// Per output port: the VC of an arriving credit.
    pub credit: [Option<usize>; NPORTS],
}

/// Outputs of one cycle (read after settling, before the edge).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RouterOut {
    /// Per output port: (output VC, packed flit).
    pub flit: [Option<(usize, u64)>; NPORTS],
    /// Per input port: the VC of a credit returned upstream.
    pub credit: [Option<usize>; NPORTS],
    pub ev_va_grant: u64,
    pub ev_va_req: u64,
    pub ev_sa_req: u64,
    pub ev_sa_cstall: u64,
}

impl<const V: usize, const NV: usize, const CW: usize, const DW: usize, const FW: usize, const D: usize, const OW: usize>
    RouterRtl<V, NV, CW, DW, FW, D, OW>
{
    /// Drives one cycle's inputs (straps included).
    pub fn drive(&mut self, cur: (u64, u64), prio: Option<u64>, reset: bool, i: &RouterIn) {
        self.reset.next = reset;
        self.cur_x.next = cur.0.into();
        self.cur_y.next = cur.1.into();
        self.prio_en.next = prio.is_some();
        self.low_idle.next = prio.unwrap_or(0).into();
        let mut fv = 0u64;
        let mut cv = 0u64;
        for p in 0..NPORTS {
            let (vc, w) = i.flit[p].unwrap_or((0, 0));
            fv |= (i.flit[p].is_some() as u64) << p;
            self.in_flit_vc[p].next = (vc as u64).into();
            self.in_flit[p].next = w.into();
            cv |= (i.credit[p].is_some() as u64) << p;
            self.credit_in_vc[p].next = (i.credit[p].unwrap_or(0) as u64).into();
        }
        self.in_flit_valid.next = fv.into();
        self.credit_in_valid.next = cv.into();
    }

    /// Reads the settled outputs.
    pub fn outputs(&self) -> RouterOut {
        let fv = self.out_flit_valid.val().to_u64();
        let cv = self.credit_out_valid.val().to_u64();
        RouterOut {
            flit: std::array::from_fn(|o| (fv >> o & 1 == 1).then(|| (self.out_flit_vc[o].val().to_u64() as usize, self.out_flit[o].val().to_u64()))),
            credit: std::array::from_fn(|p| (cv >> p & 1 == 1).then(|| self.credit_out_vc[p].val().to_u64() as usize)),
            ev_va_grant: self.ev_va_grant.val().to_u64(),
            ev_va_req: self.ev_va_req.val().to_u64(),
            ev_sa_req: self.ev_sa_req.val().to_u64(),
            ev_sa_cstall: self.ev_sa_cstall.val().to_u64(),
        }
    }
}

/// The CL statistics increments of one cycle, from the event masks (the CL's counters,
/// `hw::noc::router::RouterStats`, are bumped by the same decisions).
pub fn stats_of(o: &RouterOut) -> hw::noc::router::RouterStats {
    let switched = o.flit.iter().filter(|f| f.is_some()).count() as u64;
    let grants = o.ev_va_grant.count_ones() as u64;
    hw::noc::router::RouterStats {
        flits_switched: switched,
        va_grants: grants,
        va_stalls: o.ev_va_req.count_ones() as u64 - grants,
        sa_credit_stalls: o.ev_sa_cstall.count_ones() as u64,
        sa_conflicts: o.ev_sa_req.count_ones() as u64 - switched,
    }
}

/// Co-sim recorder: a router at (1, 2) of a `k`x`k` mesh under [`RouterTb`] traffic with a
/// third of the packets in the migration stream (priority on, 3-cycle hold-off), reset in
/// cycle 0. The closed loop (credits and sends feed back into the traffic) is run once to fix
/// the input sequence, which [`record`] then replays on a fresh block.
pub fn record_router<const V: usize, const NV: usize, const CW: usize, const DW: usize, const FW: usize, const D: usize, const OW: usize>(
    module: &str,
    params: RouterParams,
    cycles: usize,
    seed: u64,
) -> Result<PortTrace, RtlError> {
    let knobs = TrafficKnobs { p_inject: 0.6, p_drain: 0.5, max_pkt: 4 };
    let cur = (1u64, 2u64.min(params.ctrl.k as u64 - 1));
    let prio = Some(3);
    let err = |d: String| RtlError::Trace { module: module.into(), detail: d };
    let pack = |f: &TbFlit| {
        let pkt = f.id >> 12;
        RtlFlit { head: f.head, tail: f.tail, low: pkt % 3 == 0, dest_x: f.dest_x, dest_y: f.dest_y, hops: (pkt % 9) as u8 * 31, payload: f.id & ((1 << (FW - 11 - 2 * CW)) - 1) }.pack(CW)
    };
    let mut tb = RouterTb::new(params.ctrl, knobs, seed);
    let mut uut = RouterRtl::<V, NV, CW, DW, FW, D, OW>::new(&params);
    uut.connect_all();
    let mut inputs = Vec::with_capacity(cycles);
    for c in 0..cycles {
        tb.arrive();
        let i = RouterIn { flit: std::array::from_fn(|p| tb.arriving[p].map(|(vc, f)| (vc, pack(&f)))), credit: tb.credit_arriving };
        inputs.push(i);
        uut.drive(cur, prio, c == 0, &i);
        settle(&mut uut).map_err(err)?;
        let o = uut.outputs();
        let pops = (0..NPORTS).filter_map(|p| o.credit[p].map(|vc| 1u64 << (p * V + vc))).fold(0, |a, b| a | b);
        tb.step(pops, std::array::from_fn(|q| o.flit[q].map(|(vc, _)| vc)));
        uut.clock.next = true.into();
        settle(&mut uut).map_err(err)?;
        uut.clock.next = false.into();
        settle(&mut uut).map_err(err)?;
    }
    record(module, RouterRtl::<V, NV, CW, DW, FW, D, OW>::new(&params), cycles, |u| &mut u.clock, move |c, u| u.drive(cur, prio, c == 0, &inputs[c]))
}

/// The registered parameter set: the NoC default router (2 VCs of 8 flits) of an 8x8 mesh.
pub fn export_params() -> RouterParams {
    RouterParams { ctrl: RouterCtrlParams { vcs: 2, vc_buf: 8, routing_delay: 1, k: 8 }, depth: 8 }
}

/// Export registration: 2 VCs x 8 flits, 3-bit coordinates, 8-bit payload (25-bit flits).
pub const EXPORT: BlockDef = BlockDef {
    name: "router",
    top: true,
    domain: crate::export::ModelDomain::PkgCore,
    cosim_cycles: crate::export::TOP_COSIM_CYCLES,
    sets: &[ParamSet {
        module: "router_v2_d8",
        rust_type: "Router2Rtl",
        params: &[("vcs", 2), ("vc_buf", 8), ("routing_delay", 1), ("coord_bits", 3), ("payload_bits", 8)],
        // ECP5-85F: 42.3 MHz at seed 1 (36.0 on 2026-11-26; 40 needs seeds 2-3); one cycle of credit check, allocation and traversal (docs/rtl.md, "Timing closure at the prototype clocks").
        ecp5_clock_mhz: 30,
        build: || boxed(Router2Rtl::new(&export_params())),
        recorder: Some(|cycles, seed| record_router::<2, 10, 3, 4, 25, 8, 4>("router_v2_d8", export_params(), cycles, seed)),
    }],
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(not(feature = "yosys"), ignore = "needs yosys (enable feature `yosys`)")]
    fn router_synthesizable() {
        let mut uut = Router2Rtl::new(&export_params());
        uut.connect_all();
        let vlog = generate_verilog(&uut);
        yosys_validate("waferstream_router_v2_d8", &vlog).unwrap();
    }

    #[test]
    fn flit_format_round_trips() {
        let f = RtlFlit { head: true, tail: false, low: true, dest_x: 5, dest_y: 7, hops: 200, payload: 0xa5 };
        assert_eq!(RtlFlit::unpack(f.pack(3), 3), f);
        assert_eq!(Router2Rtl::PW, 8);
    }
}
