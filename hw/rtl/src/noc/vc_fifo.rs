//! One input VC buffer of the mesh router: a FIFO of packed flits with write bypass, the
//! buffer half of `hw::noc::router::RouterCl`'s `buf`/`InVc` (`head`, `len`).
//!
//! The CL's input queuing writes an arriving flit before VA and SA of the same cycle, so a
//! flit written into an empty buffer is at the front in the cycle it arrives (an Active VC
//! may switch it in that cycle). The block shows it the same way: `front`/`valid` are
//! comb(`wr`, `wr_data`) when empty, else the registered head slot. A write and a pop of
//! the bypassed flit in one cycle leave the buffer empty.
//!
//! `D` slots are built; `depth` (1..=D, a constructor constant) is where the pointers wrap,
//! so one monomorphization serves every `vc_buf` up to `D` (the slots past `depth` are never
//! written and synthesize away).

use rust_hdl::prelude::*;

/// Flit FIFO of `D` slots of `FW` bits, `OW`-bit pointers and count (`D < 2^OW`).
///
/// Port coupling: `front`, `valid`, `multi`: comb(wr, wr_data, registers); `count`,
/// `overflow`: registered.
#[derive(LogicBlock)]
pub struct VcFifoRtl<const FW: usize, const D: usize, const OW: usize> {
    /// Single clock; every register is updated on its rising edge.
    pub clock: Signal<In, Clock>,
    /// Synchronous, active-high reset: empty, pointers 0, no overflow.
    pub reset: Signal<In, Bit>,
    /// A flit arrives this cycle (the upstream router holds a credit for it).
    pub wr: Signal<In, Bit>,
    pub wr_data: Signal<In, Bits<FW>>,
    /// The front flit leaves this cycle (switch grant). Only while `valid`.
    pub pop: Signal<In, Bit>,
    /// The front flit (a flit written into an empty buffer this cycle included). comb.
    pub front: Signal<Out, Bits<FW>>,
    /// The buffer holds at least one flit this cycle, the write included. comb.
    pub valid: Signal<Out, Bit>,
    /// The buffer holds at least two flits this cycle, the write included. comb.
    pub multi: Signal<Out, Bit>,
    /// Flits held after the previous edge. registered.
    pub count: Signal<Out, Bits<OW>>,
    /// Sticky: a write found the buffer full (the credit protocol was broken upstream; the
    /// CL panics). registered.
    pub overflow: Signal<Out, Bit>,
    /// The slots.
    slot: [DFF<Bits<FW>>; D],
    /// Front slot, next free slot, flits held.
    head_ptr: DFF<Bits<OW>>,
    tail_ptr: DFF<Bits<OW>>,
    occ: DFF<Bits<OW>>,
    ovf_q: DFF<Bit>,
    /// The front flit is the one written this cycle (empty buffer).
    bypass: Signal<Local, Bit>,
    /// The write goes into a slot (not consumed by a same-cycle pop of the bypass).
    store: Signal<Local, Bit>,
    /// The pop takes a stored flit.
    take: Signal<Local, Bit>,
    /// Registered head slot's flit.
    head_flit: Signal<Local, Bits<FW>>,
    last: Constant<Bits<OW>>,
    full: Constant<Bits<OW>>,
    one: Constant<Bits<OW>>,
    zero: Constant<Bits<OW>>,
}

impl<const FW: usize, const D: usize, const OW: usize> VcFifoRtl<FW, D, OW> {
    /// A FIFO using `depth` of its `D` slots. Panics (a configuration bug of the instantiating
    /// code) when `depth` is 0 or above `D`, or `D` does not fit `OW` bits.
    pub fn new(depth: usize) -> Self {
        assert!((1..=D).contains(&depth), "VC buffer depth {depth} outside 1..={D}");
        assert!(D < (1 << OW) && OW <= 16, "{D} slots need more than {OW} count bits");
        Self {
            clock: Default::default(),
            reset: Default::default(),
            wr: Default::default(),
            wr_data: Default::default(),
            pop: Default::default(),
            front: Default::default(),
            valid: Default::default(),
            multi: Default::default(),
            count: Default::default(),
            overflow: Default::default(),
            slot: std::array::from_fn(|_| Default::default()),
            head_ptr: Default::default(),
            tail_ptr: Default::default(),
            occ: Default::default(),
            ovf_q: Default::default(),
            bypass: Default::default(),
            store: Default::default(),
            take: Default::default(),
            head_flit: Default::default(),
            last: Constant::new(((depth - 1) as u64).into()),
            full: Constant::new((depth as u64).into()),
            one: Constant::new(1u64.into()),
            zero: Constant::new(0u64.into()),
        }
    }
}

impl<const FW: usize, const D: usize, const OW: usize> Logic for VcFifoRtl<FW, D, OW> {
    #[hdl_gen]
    fn update(&mut self) {
        // 1. Clocks; registers hold by default.
        dff_setup!(self, clock, head_ptr, tail_ptr, occ, ovf_q);
        for s in 0..D {
            self.slot[s].clock.next = self.clock.val();
            self.slot[s].d.next = self.slot[s].q.val();
        }
        // 2. Front: the head slot, or the arriving flit when empty (write bypass).
        self.head_flit.next = self.slot[0].q.val();
        for s in 0..D {
            if self.head_ptr.q.val().index() == s {
                self.head_flit.next = self.slot[s].q.val();
            }
        }
        self.bypass.next = !self.occ.q.val().any();
        self.front.next = self.head_flit.val();
        if self.bypass.val() {
            self.front.next = self.wr_data.val();
        }
        self.valid.next = self.occ.q.val().any() | self.wr.val();
        self.multi.next = (self.occ.q.val() > self.one.val())
            | ((self.occ.q.val() == self.one.val()) & self.wr.val());
        // 3. Next state: a write is stored unless it is popped in the cycle it arrived; a
        //    pop of a stored flit advances the head.
        self.store.next = self.wr.val() & !(self.bypass.val() & self.pop.val());
        self.take.next = self.pop.val() & !self.bypass.val();
        // The tail slot takes every write that finds room, the pop not consulted: a flit
        // written into an empty buffer and popped in the same cycle lands in the slot at
        // `tail_ptr` but neither pointer nor the count moves, so the slot stays outside the
        // held range (never shown: `front` is the bypass while empty) and the next write
        // overwrites it. This keeps the switch grant (`pop`) out of the slots' write enables.
        if self.wr.val() & (self.occ.q.val() != self.full.val()) {
            for s in 0..D {
                if self.tail_ptr.q.val().index() == s {
                    self.slot[s].d.next = self.wr_data.val();
                }
            }
        }
        if self.store.val() {
            if self.occ.q.val() == self.full.val() {
                // Overfilled: the flit is dropped and the error raised.
                self.ovf_q.d.next = true;
            } else {
                self.tail_ptr.d.next = self.tail_ptr.q.val() + self.one.val();
                if self.tail_ptr.q.val() == self.last.val() {
                    self.tail_ptr.d.next = self.zero.val();
                }
            }
        }
        if self.take.val() {
            self.head_ptr.d.next = self.head_ptr.q.val() + self.one.val();
            if self.head_ptr.q.val() == self.last.val() {
                self.head_ptr.d.next = self.zero.val();
            }
        }
        if (self.store.val() & (self.occ.q.val() != self.full.val())) & !self.take.val() {
            self.occ.d.next = self.occ.q.val() + self.one.val();
        }
        if self.take.val() & !(self.store.val() & (self.occ.q.val() != self.full.val())) {
            self.occ.d.next = self.occ.q.val() - self.one.val();
        }
        if self.reset.val() {
            self.head_ptr.d.next = self.zero.val();
            self.tail_ptr.d.next = self.zero.val();
            self.occ.d.next = self.zero.val();
            self.ovf_q.d.next = false;
        }
        // 4. Registered outputs.
        self.count.next = self.occ.q.val();
        self.overflow.next = self.ovf_q.q.val();
    }
}
