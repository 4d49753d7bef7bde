//! The chiplet controller's ring pointers (`RingAllocRtl<S>`): the allocation pointer
//! (tail) and the head of its micro-slice ring, with the cycle's two allocations — the D2D
//! arrival's, then the DDR load's into what is left — each the first free slot at/after the
//! pointer, found by the ring's own encoder ([`super::ring::RingScanRtl`], as
//! [`super::ring::RingBufferRtl`] uses it).
//!
//! ```text
//!  live2 (after the releases and the eviction) ─► sc_rx (from tail) ─► rx_ok, rx_slot, rx_m ─┐
//!      free after it ─► free (count; the controller's reserve test)                          │
//!  ld_want ─► sc_ld (from the pointer past the D2D allocation) ─► ld_ok, ld_slot, ld_m ───────┤
//!  head: sc_hd (first live at/after head, over live2) ▸ first allocation into an empty ring   │
//!  escape: sc_he (first live at/after it, over live_n) ▸ the tail ────────────────────────────┴─► tail, head
//! ```
//!
//! The rules are the CL's `RingBufferCl` as the controller's cycle uses it: the Rule-3
//! releases and the eviction (given as `live2`), then the D2D arrival's allocation
//! (`rx_want`), then the DDR load's (`ld_want`, scanning from the pointer the first one
//! moved), then the escape's release (`escape`, given with `live_n`, the live bits after
//! everything). The pointer moves past each allocation (wrapping at the ring's last slot);
//! the head moves past the releases, onto the first allocation into an empty ring, then past
//! the escape's release (onto the tail if nothing is live). `slots` ≤ S slots exist (a
//! constant mask), so one build serves every ring size up to S. A synchronous `reset` sets
//! both pointers to 0.
//!
//! Port coupling: `rx_*`, `free`, `ld_*` comb in `live2`, `rx_want`, `ld_want`; `tail`,
//! `head` registered.

use rust_hdl::prelude::*;

use super::popcount::PopCountRtl;
use super::ring::RingScanRtl;
use crate::cosim::{record, PortTrace};
use crate::export::{boxed, BlockDef, ParamSet};
use crate::RtlError;

/// The ring pointers of an `S`-slot controller (1 ≤ S ≤ 64) with `slots` ≤ S slots in use.
#[derive(LogicBlock)]
pub struct RingAllocRtl<const S: usize> {
    pub clock: Signal<In, Clock>,
    /// Synchronous reset: tail and head 0.
    pub reset: Signal<In, Bit>,
    /// Live bits after the releases and the eviction (before the allocations).
    pub live2: Signal<In, Bits<S>>,
    /// H: a D2D arrival wants a slot.
    pub rx_want: Signal<In, Bit>,
    /// K: a DDR load wants a slot (after the D2D allocation).
    pub ld_want: Signal<In, Bit>,
    /// L: the escape released a slot; `live_n` the live bits after it.
    pub escape: Signal<In, Bit>,
    pub live_n: Signal<In, Bits<S>>,
    /// The D2D arrival's allocation.
    pub rx_ok: Signal<Out, Bit>,
    pub rx_slot: Signal<Out, Bits<8>>,
    pub rx_m: Signal<Out, Bits<S>>,
    /// Free slots after the D2D allocation.
    pub free: Signal<Out, Bits<8>>,
    /// The DDR load's allocation.
    pub ld_ok: Signal<Out, Bit>,
    pub ld_slot: Signal<Out, Bits<8>>,
    pub ld_m: Signal<Out, Bits<S>>,
    /// Allocation pointer and head (registered).
    pub tail: Signal<Out, Bits<8>>,
    pub head: Signal<Out, Bits<8>>,

    /// The D2D arrival's slot (first free at/after the tail).
    sc_rx: RingScanRtl<S>,
    /// The DDR load's slot (first free at/after the pointer past the D2D allocation).
    sc_ld: RingScanRtl<S>,
    /// The head after the releases (first live at/after the head).
    sc_hd: RingScanRtl<S>,
    /// The head after the escape's release.
    sc_he: RingScanRtl<S>,
    tail_q: DFF<Bits<8>>,
    head_q: DFF<Bits<8>>,
    /// `tail_q` and `head_q` as thermometers (bit i: slot i at/after the pointer), the scans'
    /// `from_ge`, moved with them from the scans' `slot_ge` (as in `RingBufferRtl`; zero
    /// before the first reset scans as pointer 0).
    tail_ge_q: DFF<Bits<S>>,
    head_ge_q: DFF<Bits<S>>,
    /// The free slots before the D2D allocation (`exist & !live2`) counted by the shared
    /// adder tree ([`PopCountRtl`]); `free` is that less the allocation. It was the count of
    /// `free3` (after the allocation's scan), a chain of S conditional increments.
    free_count: PopCountRtl<S>,
    tail2: Signal<Local, Bits<8>>,
    tail_n: Signal<Local, Bits<8>>,
    hd_a: Signal<Local, Bits<8>>,
    /// `tail2`, `tail_n` and `hd_a` as thermometers.
    tail2_ge: Signal<Local, Bits<S>>,
    tail_n_ge: Signal<Local, Bits<S>>,
    hd_a_ge: Signal<Local, Bits<S>>,
    /// Every slot (the thermometer of pointer 0) and the last slot in use (where the pointer
    /// wraps), one-hot.
    all: Constant<Bits<S>>,
    last_oh: Constant<Bits<S>>,
    exist: Constant<Bits<S>>,
    one8: Constant<Bits<8>>,
}

impl<const S: usize> RingAllocRtl<S> {
    pub fn new(slots: usize) -> Self {
        assert!((1..=64).contains(&S) && (1..=S).contains(&slots), "{slots} ring slots in a {S}-slot ring");
        let exist: u64 = if slots >= 64 { u64::MAX } else { (1u64 << slots) - 1 };
        Self {
            clock: Default::default(),
            reset: Default::default(),
            live2: Default::default(),
            rx_want: Default::default(),
            ld_want: Default::default(),
            escape: Default::default(),
            live_n: Default::default(),
            rx_ok: Default::default(),
            rx_slot: Default::default(),
            rx_m: Default::default(),
            free: Default::default(),
            ld_ok: Default::default(),
            ld_slot: Default::default(),
            ld_m: Default::default(),
            tail: Default::default(),
            head: Default::default(),
            sc_rx: RingScanRtl::new(),
            sc_ld: RingScanRtl::new(),
            sc_hd: RingScanRtl::new(),
            sc_he: RingScanRtl::new(),
            tail_q: Default::default(),
            head_q: Default::default(),
            tail_ge_q: Default::default(),
            head_ge_q: Default::default(),
            free_count: PopCountRtl::new(),
            tail2: Default::default(),
            tail_n: Default::default(),
            hd_a: Default::default(),
            tail2_ge: Default::default(),
            tail_n_ge: Default::default(),
            hd_a_ge: Default::default(),
            all: Constant::new((u64::MAX >> (64 - S)).into()),
            last_oh: Constant::new((1u64 << (slots - 1)).into()),
            exist: Constant::new(exist.into()),
            one8: Constant::new(1u64.into()),
        }
    }
}

impl<const S: usize> Logic for RingAllocRtl<S> {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, tail_q, head_q, tail_ge_q, head_ge_q);
        self.tail.next = self.tail_q.q.val();
        self.head.next = self.head_q.q.val();

        // H: the D2D arrival's slot, first free at/after the pointer. A slot's one-hot is its
        // thermometer's lowest bit; one past it is the thermometer shifted, or every slot
        // after the last slot in use.
        self.sc_rx.bits.next = self.exist.val() & !self.live2.val();
        self.sc_rx.from_ge.next = self.tail_ge_q.q.val();
        self.rx_ok.next = self.rx_want.val() & self.sc_rx.found.val();
        self.rx_slot.next = self.sc_rx.slot.val();
        self.rx_m.next = 0.into();
        self.tail2.next = self.tail_q.q.val();
        self.tail2_ge.next = self.tail_ge_q.q.val();
        if self.rx_ok.val() {
            self.rx_m.next = self.sc_rx.slot_ge.val() & !(self.sc_rx.slot_ge.val() << 1);
            if (self.rx_m.val() & self.last_oh.val()).any() {
                self.tail2.next = 0.into();
                self.tail2_ge.next = self.all.val();
            } else {
                self.tail2.next = self.sc_rx.slot.val() + 1;
                self.tail2_ge.next = self.sc_rx.slot_ge.val() << 1;
            }
        }
        // K: free slots after it; the DDR load's slot from the moved pointer.
        // (`rx_m` is one of the free slots, so the count after it is the count before it
        // less `rx_ok`.)
        self.free_count.bits.next = self.exist.val() & !self.live2.val();
        self.free.next = self.free_count.count.val();
        if self.rx_ok.val() {
            self.free.next = self.free_count.count.val() - self.one8.val();
        }
        self.sc_ld.bits.next = self.exist.val() & !(self.live2.val() | self.rx_m.val());
        self.sc_ld.from_ge.next = self.tail2_ge.val();
        self.ld_ok.next = self.ld_want.val() & self.sc_ld.found.val();
        self.ld_slot.next = self.sc_ld.slot.val();
        self.ld_m.next = 0.into();
        self.tail_n.next = self.tail2.val();
        self.tail_n_ge.next = self.tail2_ge.val();
        if self.ld_ok.val() {
            self.ld_m.next = self.sc_ld.slot_ge.val() & !(self.sc_ld.slot_ge.val() << 1);
            if (self.ld_m.val() & self.last_oh.val()).any() {
                self.tail_n.next = 0.into();
                self.tail_n_ge.next = self.all.val();
            } else {
                self.tail_n.next = self.sc_ld.slot.val() + 1;
                self.tail_n_ge.next = self.sc_ld.slot_ge.val() << 1;
            }
        }
        self.tail_q.d.next = self.tail_n.val();
        self.tail_ge_q.d.next = self.tail_n_ge.val();

        // The head: the oldest live slot, as the CL's ring moves it — past the releases
        // before the allocations, onto the first allocation into an empty ring, past the
        // escape's release after them.
        self.sc_hd.bits.next = self.live2.val();
        self.sc_hd.from_ge.next = self.head_ge_q.q.val();
        self.hd_a.next = self.tail_q.q.val();
        self.hd_a_ge.next = self.tail_ge_q.q.val();
        if self.sc_hd.found.val() {
            self.hd_a.next = self.sc_hd.slot.val();
            self.hd_a_ge.next = self.sc_hd.slot_ge.val();
        }
        if !self.live2.val().any() {
            if self.rx_ok.val() {
                self.hd_a.next = self.sc_rx.slot.val();
                self.hd_a_ge.next = self.sc_rx.slot_ge.val();
            } else if self.ld_ok.val() {
                self.hd_a.next = self.sc_ld.slot.val();
                self.hd_a_ge.next = self.sc_ld.slot_ge.val();
            }
        }
        self.head_q.d.next = self.hd_a.val();
        self.head_ge_q.d.next = self.hd_a_ge.val();
        self.sc_he.bits.next = self.live_n.val();
        self.sc_he.from_ge.next = self.hd_a_ge.val();
        if self.escape.val() {
            if self.sc_he.found.val() {
                self.head_q.d.next = self.sc_he.slot.val();
                self.head_ge_q.d.next = self.sc_he.slot_ge.val();
            } else {
                self.head_q.d.next = self.tail_n.val();
                self.head_ge_q.d.next = self.tail_n_ge.val();
            }
        }
        if self.reset.val() {
            self.tail_q.d.next = 0.into();
            self.head_q.d.next = 0.into();
            self.tail_ge_q.d.next = self.all.val();
            self.head_ge_q.d.next = self.all.val();
        }
    }
}

// ---------------------------------------------------------------- export

/// The exported size: the standard chiplet's 8 slots, all in use (`chiplet_ctrl_s8_e16`).
pub type RingAlloc8Rtl = RingAllocRtl<8>;

/// Co-sim recorder: reset in cycle 0 and one cycle in 300, then random live masks (`live_n`
/// the allocations' slots added to `live2`, one live slot dropped now and then as the
/// escape) and random requests.
pub fn record_ring_alloc_8(module: &str, cycles: usize, seed: u64) -> Result<PortTrace, RtlError> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    // Both allocations are answered combinationally from the inputs, so the escape's
    // `live_n` is drawn independently here (any input must give the same answer in both
    // models; the controller's lockstep covers the consistent use).
    record(module, RingAlloc8Rtl::new(8), cycles, |u| &mut u.clock, move |c, u| {
        let full = rng.gen_bool(0.2);
        let live2: u64 = if full { 255 } else { rng.gen_range(0..256) };
        u.reset.next = c == 0 || rng.gen_ratio(1, 300);
        u.live2.next = live2.into();
        u.rx_want.next = rng.gen_bool(0.4);
        u.ld_want.next = rng.gen_bool(0.4);
        u.escape.next = rng.gen_bool(0.1);
        u.live_n.next = (live2 & rng.gen_range(0..256u64)).into();
    })
}

/// Export registration: the 8-slot ring pointers, linted and co-simulated like the other leaf
/// blocks.
pub const EXPORT: BlockDef = BlockDef {
    name: "ring_alloc",
    top: false,
    domain: crate::export::ModelDomain::PkgCore,
    cosim_cycles: 4096,
    sets: &[ParamSet {
        module: "ring_alloc_s8",
        rust_type: "RingAlloc8Rtl",
        params: &[("slots", 8)],
        // ECP5-85F: 63.1-67.3 MHz at seeds 1-3 (docs/rtl.md, "Timing closure at the prototype clocks").
        ecp5_clock_mhz: 60,
        build: || boxed(RingAlloc8Rtl::new(8)),
        recorder: Some(|cycles, seed| record_ring_alloc_8("ring_alloc_s8", cycles, seed)),
    }],
};
