//! Micro-slice ring-buffer controller `RingBufferRtl<S>` (RTL twin of
//! `hw::pkg::ring::RingBufferCl`, paper §IV-A).
//!
//! ```text
//!  release_mask (S bits) ──► live' = live & !release ──► head' (first live at/after head)
//!  alloc + tag ──► priority encoder: first free slot at/after tail ──► alloc_slot (comb)
//!                                       └──► live[slot], tag[slot], tail' = slot + 1 mod S
//! ```
//!
//! Per slot a live bit and the micro-slice tag (expert, k, loader); `head` follows the oldest
//! live slot (the trace's view), `tail` is the allocation pointer. A cycle applies the
//! releases first (out of order, any number: Rule 3 frees whatever finished), then at most
//! one allocation — the CL's `release(..)*; alloc(..)` in one edge. The allocation answers
//! combinationally (`alloc_ok`, `alloc_slot`), as the CL's `alloc` returns the slot in the
//! same call; the state changes at the edge.
//!
//! Why "first free at or after the tail" rather than a strict FIFO: a micro-slice that waits
//! (a pre-load of an ungranted expert) must not pin the head and starve a trajectory (see
//! the CL's module doc), so a slot is reused as soon as its live bit clears.

use rust_hdl::prelude::*;

use super::popcount::PopCountRtl;

/// Ring-buffer controller with `S` slots (1 ≤ S ≤ 64).
#[derive(LogicBlock)]
pub struct RingBufferRtl<const S: usize> {
    pub clock: Signal<In, Clock>,
    /// Synchronous reset: empty ring, head = tail = 0.
    pub reset: Signal<In, Bit>,
    /// Slots released this cycle (each must be live), applied before the allocation.
    /// (Not `release`: that is a Verilog keyword, and the block is exported.)
    pub release_mask: Signal<In, Bits<S>>,
    /// Allocate a slot for the tag below.
    pub alloc: Signal<In, Bit>,
    pub alloc_expert: Signal<In, Bits<16>>,
    pub alloc_k: Signal<In, Bits<16>>,
    pub alloc_loader: Signal<In, Bits<8>>,
    /// Tag read port (combinational).
    pub rd_slot: Signal<In, Bits<8>>,

    /// The allocation succeeded (comb: a free slot after this cycle's releases).
    pub alloc_ok: Signal<Out, Bit>,
    /// The slot allocated (comb; valid with `alloc_ok`).
    pub alloc_slot: Signal<Out, Bits<8>>,
    /// Registered state.
    pub live: Signal<Out, Bits<S>>,
    pub occ: Signal<Out, Bits<8>>,
    pub head: Signal<Out, Bits<8>>,
    pub tail: Signal<Out, Bits<8>>,
    pub rd_expert: Signal<Out, Bits<16>>,
    pub rd_k: Signal<Out, Bits<16>>,
    pub rd_loader: Signal<Out, Bits<8>>,

    // --- registers
    live_q: DFF<Bits<S>>,
    occ_q: DFF<Bits<8>>,
    head_q: DFF<Bits<8>>,
    tail_q: DFF<Bits<8>>,
    /// `tail_q` and `head_q` as thermometers (bit i: slot i at/after the pointer), the scans'
    /// `from_ge`, moved with them from the scans' `slot_ge`. Zero before the first reset (the
    /// DFFs' power-up value), where the binary pointers are 0: a scan from an empty
    /// thermometer finds the first set bit overall, which is the scan from slot 0.
    tail_ge_q: DFF<Bits<S>>,
    head_ge_q: DFF<Bits<S>>,
    tag_expert: [DFF<Bits<16>>; S],
    tag_k: [DFF<Bits<16>>; S],
    tag_loader: [DFF<Bits<8>>; S],

    // --- combinational locals
    /// Live bits after the releases.
    live_r: Signal<Local, Bits<S>>,
    occ_r: Signal<Local, Bits<8>>,
    /// Population count of `live_r` (the shared adder tree, [`PopCountRtl`]): a chain of S
    /// increments was the ring's critical path.
    live_count: PopCountRtl<S>,
    slot: Signal<Local, Bits<8>>,
    /// First free slot at/after the tail (else the first free slot): the allocation.
    free_scan: RingScanRtl<S>,
    /// First live slot at/after the head (else the first live slot), after the releases.
    live_scan: RingScanRtl<S>,
    /// Whether an allocation happens.
    take: Signal<Local, Bit>,
    /// The allocated slot, one-hot (from the free scan's thermometer, not decoded from `slot`).
    slot_oh: Signal<Local, Bits<S>>,
    /// Every slot (the thermometer of pointer 0) and the last slot (where the tail wraps).
    all: Constant<Bits<S>>,
    last_oh: Constant<Bits<S>>,
}

impl<const S: usize> Default for RingBufferRtl<S> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const S: usize> RingBufferRtl<S> {
    pub fn new() -> Self {
        assert!((1..=64).contains(&S), "ring of {S} slots (1..=64)");
        Self {
            clock: Default::default(),
            reset: Default::default(),
            release_mask: Default::default(),
            alloc: Default::default(),
            alloc_expert: Default::default(),
            alloc_k: Default::default(),
            alloc_loader: Default::default(),
            rd_slot: Default::default(),
            alloc_ok: Default::default(),
            alloc_slot: Default::default(),
            live: Default::default(),
            occ: Default::default(),
            head: Default::default(),
            tail: Default::default(),
            rd_expert: Default::default(),
            rd_k: Default::default(),
            rd_loader: Default::default(),
            live_q: Default::default(),
            occ_q: Default::default(),
            head_q: Default::default(),
            tail_q: Default::default(),
            tail_ge_q: Default::default(),
            head_ge_q: Default::default(),
            tag_expert: std::array::from_fn(|_| Default::default()),
            tag_k: std::array::from_fn(|_| Default::default()),
            tag_loader: std::array::from_fn(|_| Default::default()),
            live_r: Default::default(),
            occ_r: Default::default(),
            live_count: PopCountRtl::new(),
            slot: Default::default(),
            free_scan: RingScanRtl::new(),
            live_scan: RingScanRtl::new(),
            take: Default::default(),
            slot_oh: Default::default(),
            all: Constant::new((u64::MAX >> (64 - S)).into()),
            last_oh: Constant::new((1u64 << (S - 1)).into()),
        }
    }
}

impl<const S: usize> Logic for RingBufferRtl<S> {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, live_q, occ_q, head_q, tail_q, tail_ge_q, head_ge_q);
        for i in 0..S {
            self.tag_expert[i].clock.next = self.clock.val();
            self.tag_expert[i].d.next = self.tag_expert[i].q.val();
            self.tag_k[i].clock.next = self.clock.val();
            self.tag_k[i].d.next = self.tag_k[i].q.val();
            self.tag_loader[i].clock.next = self.clock.val();
            self.tag_loader[i].d.next = self.tag_loader[i].q.val();
        }
        // ---- registered outputs and the tag read port
        self.live.next = self.live_q.q.val();
        self.occ.next = self.occ_q.q.val();
        self.head.next = self.head_q.q.val();
        self.tail.next = self.tail_q.q.val();
        self.rd_expert.next = 0.into();
        self.rd_k.next = 0.into();
        self.rd_loader.next = 0.into();
        for i in 0..S {
            if self.rd_slot.val().index() == i {
                self.rd_expert.next = self.tag_expert[i].q.val();
                self.rd_k.next = self.tag_k[i].q.val();
                self.rd_loader.next = self.tag_loader[i].q.val();
            }
        }

        // ---- releases (out of order), then the live count
        self.live_r.next = self.live_q.q.val() & !self.release_mask.val();
        // The count's input is `live_r` written out from the register and the port, not read
        // from the local: a statement that reads no local of this block is split off by
        // Verilator, so the sub-block forms no loop at always-block granularity (UNOPTFLAT).
        self.live_count.bits.next = self.live_q.q.val() & !self.release_mask.val();
        self.occ_r.next = self.live_count.count.val();

        // ---- allocation: priority encoder over the free bits, starting at the tail
        self.free_scan.bits.next = !self.live_r.val();
        self.free_scan.from_ge.next = self.tail_ge_q.q.val();
        self.slot.next = self.free_scan.slot.val();
        self.slot_oh.next = self.free_scan.slot_ge.val() & !(self.free_scan.slot_ge.val() << 1);
        self.take.next = self.alloc.val() & self.free_scan.found.val();
        self.alloc_ok.next = self.take.val();
        self.alloc_slot.next = self.slot.val();

        // ---- head: the first live slot at/after the head once the releases are applied
        self.live_scan.bits.next = self.live_r.val();
        self.live_scan.from_ge.next = self.head_ge_q.q.val();

        // ---- next state
        self.live_q.d.next = self.live_r.val();
        self.occ_q.d.next = self.occ_r.val();
        if self.live_scan.found.val() {
            self.head_q.d.next = self.live_scan.slot.val();
            self.head_ge_q.d.next = self.live_scan.slot_ge.val();
        } else {
            // Empty: the head waits at the tail (the next allocation moves it there).
            self.head_q.d.next = self.tail_q.q.val();
            self.head_ge_q.d.next = self.tail_ge_q.q.val();
        }
        if self.take.val() {
            self.live_q.d.next = self.live_r.val() | self.slot_oh.val();
            self.occ_q.d.next = self.occ_r.val() + 1;
            // Empty after the releases (the same test as `occ_r == 0`, without the count).
            if !self.live_r.val().any() {
                self.head_q.d.next = self.slot.val();
                self.head_ge_q.d.next = self.free_scan.slot_ge.val();
            }
            // One past the slot, wrapping after the last: slots above it, or every slot.
            if (self.slot_oh.val() & self.last_oh.val()).any() {
                self.tail_q.d.next = 0.into();
                self.tail_ge_q.d.next = self.all.val();
            } else {
                self.tail_q.d.next = self.slot.val() + 1;
                self.tail_ge_q.d.next = self.free_scan.slot_ge.val() << 1;
            }
            for i in 0..S {
                if self.slot_oh.val().get_bit(i) {
                    self.tag_expert[i].d.next = self.alloc_expert.val();
                    self.tag_k[i].d.next = self.alloc_k.val();
                    self.tag_loader[i].d.next = self.alloc_loader.val();
                }
            }
        }

        if self.reset.val() {
            self.live_q.d.next = 0.into();
            self.occ_q.d.next = 0.into();
            self.head_q.d.next = 0.into();
            self.tail_q.d.next = 0.into();
            self.tail_ge_q.d.next = self.all.val();
            self.head_ge_q.d.next = self.all.val();
        }
    }
}

/// The ring's circular priority encoder (`RingScanRtl<S>`): the first set bit of `bits` at or
/// after the pointer, else the first set bit overall — "the first free slot at/after the tail"
/// for an allocation, "the first live slot at/after the head" for the head. Used twice by
/// [`RingBufferRtl`] and four times by the chiplet controller's ring pointers
/// ([`super::ring_alloc::RingAllocRtl`]: its two allocations per cycle and its two head
/// updates), so both rings allocate with the same circuit.
///
/// The pointer comes as a thermometer (`from_ge`, bit i: slot i is at/after it), which the
/// owner keeps in a register beside the binary pointer, and the winner goes out as one too
/// (`slot_ge`): the owner's next thermometer, and its one-hot `slot_ge & !(slot_ge << 1)`
/// (write enables) without decoding `slot`. The search is flat, as `RrArbiterRtl`'s: `hi` =
/// `bits & from_ge` and `bits` each get their inclusive prefix OR in shift-OR steps, which is
/// already the thermometer of their lowest set bit; the non-empty `hi` selects. It was a loop
/// of S conditional updates after S pointer compares (a priority chain S muxes deep), and the
/// tag write enables decoded the binary slot: tail → compare → scan → decode was the ring's
/// critical path.
///
/// Port coupling: combinational. Sized constants, no integer literals (WIDTH-clean).
#[derive(LogicBlock)]
pub struct RingScanRtl<const S: usize> {
    pub bits: Signal<In, Bits<S>>,
    /// The pointer as a thermometer: bit i set iff slot i is at or after it.
    pub from_ge: Signal<In, Bits<S>>,
    /// Some bit is set.
    pub found: Signal<Out, Bit>,
    /// The first set bit at/after the pointer, else the first set bit (0 when none).
    pub slot: Signal<Out, Bits<8>>,
    /// `slot` as a thermometer: bit i set iff i >= slot (0 when none).
    pub slot_ge: Signal<Out, Bits<S>>,
    hi: Signal<Local, Bits<S>>,
    /// Inclusive prefix ORs of `hi` and `bits`, in shift-OR steps of 1, 2, 4, 8, 16, 32.
    ph: [Signal<Local, Bits<S>>; 6],
    pl: [Signal<Local, Bits<S>>; 6],
    /// The winner, one-hot (0 when no bit is set).
    pick: Signal<Local, Bits<S>>,
    /// Bit b of the encoder: the slots whose index has bit b set.
    enc: [Constant<Bits<S>>; 6],
    pow: [Constant<Bits<8>>; 6],
    zero8: Constant<Bits<8>>,
}

impl<const S: usize> Default for RingScanRtl<S> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const S: usize> RingScanRtl<S> {
    pub fn new() -> Self {
        assert!((1..=64).contains(&S), "ring scan of {S} slots (1..=64)");
        Self {
            bits: Default::default(),
            from_ge: Default::default(),
            found: Default::default(),
            slot: Default::default(),
            slot_ge: Default::default(),
            hi: Default::default(),
            ph: Default::default(),
            pl: Default::default(),
            pick: Default::default(),
            enc: std::array::from_fn(|b| {
                Constant::new((0..S).filter(|i| (i >> b) & 1 == 1).fold(0u64, |m, i| m | 1 << i).into())
            }),
            pow: std::array::from_fn(|b| Constant::new((1u64 << b).into())),
            zero8: Constant::new(0u64.into()),
        }
    }
}

impl<const S: usize> Logic for RingScanRtl<S> {
    #[hdl_gen]
    fn update(&mut self) {
        self.hi.next = self.bits.val() & self.from_ge.val();
        self.ph[0].next = self.hi.val() | (self.hi.val() << 1);
        self.pl[0].next = self.bits.val() | (self.bits.val() << 1);
        self.ph[1].next = self.ph[0].val() | (self.ph[0].val() << 2);
        self.pl[1].next = self.pl[0].val() | (self.pl[0].val() << 2);
        self.ph[2].next = self.ph[1].val() | (self.ph[1].val() << 4);
        self.pl[2].next = self.pl[1].val() | (self.pl[1].val() << 4);
        self.ph[3].next = self.ph[2].val() | (self.ph[2].val() << 8);
        self.pl[3].next = self.pl[2].val() | (self.pl[2].val() << 8);
        self.ph[4].next = self.ph[3].val() | (self.ph[3].val() << 16);
        self.pl[4].next = self.pl[3].val() | (self.pl[3].val() << 16);
        self.ph[5].next = self.ph[4].val() | (self.ph[4].val() << 32);
        self.pl[5].next = self.pl[4].val() | (self.pl[4].val() << 32);
        // The prefix OR of a set is the thermometer of its lowest bit.
        self.slot_ge.next = self.pl[5].val();
        if self.hi.val().any() {
            self.slot_ge.next = self.ph[5].val();
        }
        self.pick.next = self.slot_ge.val() & !(self.slot_ge.val() << 1);
        self.found.next = self.bits.val().any();
        self.slot.next = self.zero8.val();
        for b in 0..6 {
            if (self.pick.val() & self.enc[b].val()).any() {
                self.slot.next = self.slot.val() | self.pow[b].val();
            }
        }
    }
}

/// The exported size: the 8-slot ring of the standard chiplet (`chiplet_ctrl_s8_e16`).
pub type RingBuffer8Rtl = RingBufferRtl<8>;

/// Co-sim recorder: `cycles` cycles of the lockstep test's traffic, legalized by the CL model
/// (`hw::pkg::ring::RingBufferCl`) so only live slots are released — each live slot with
/// probability 0.3 per cycle, an allocation with random tag at probability 0.5 (so the ring
/// fills, wraps and refuses) — and the tag read port sweeping every slot plus two out of range.
/// Reset in cycle 0.
pub fn record_ring_buffer_8(module: &str, cycles: usize, seed: u64) -> Result<crate::cosim::PortTrace, crate::RtlError> {
    use hw::pkg::ring::{RingBufferCl, SlotTag};
    use sched::{ChipletId, ExpertId};
    use rand::{Rng, SeedableRng};
    const S: usize = 8;
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut cl = RingBufferCl::new(S as u32, 0);
    // (reset, release mask, alloc, tag, rd_slot) per cycle.
    let stim: Vec<(bool, u64, bool, SlotTag, u64)> = (0..cycles)
        .map(|c| {
            let tag = SlotTag { expert: ExpertId(rng.gen::<u16>()), k: rng.gen(), loader: ChipletId(rng.gen_range(0..16u8)) };
            let rd = rng.gen_range(0..S as u64 + 2);
            if c == 0 {
                return (true, 0, false, tag, rd);
            }
            let mut rel = 0u64;
            for s in 0..S as u32 {
                if cl.is_live(s) && rng.gen_range(0..100) < 30 {
                    rel |= 1 << s;
                    cl.release(s);
                }
            }
            let alloc = rng.gen_bool(0.5);
            if alloc {
                let _ = cl.alloc(tag);
            }
            (false, rel, alloc, tag, rd)
        })
        .collect();
    crate::cosim::record(
        module,
        RingBuffer8Rtl::new(),
        cycles,
        |u| &mut u.clock,
        |c, u| {
            let (reset, rel, alloc, tag, rd) = stim[c];
            u.reset.next = reset;
            u.release_mask.next = rel.into();
            u.alloc.next = alloc;
            u.alloc_expert.next = (tag.expert.0 as u64).into();
            u.alloc_k.next = (tag.k as u64).into();
            u.alloc_loader.next = (tag.loader.0 as u64).into();
            u.rd_slot.next = rd.into();
        },
    )
}

/// Export registration: linted and co-simulated like the other leaf blocks.
pub const EXPORT: crate::export::BlockDef = crate::export::BlockDef {
    name: "ring_buffer",
    top: false,
    domain: crate::export::ModelDomain::PkgCore,
    cosim_cycles: 4096,
    sets: &[crate::export::ParamSet {
        module: "ring_buffer_s8",
        rust_type: "RingBuffer8Rtl",
        params: &[("slots", 8)],
        ecp5_clock_mhz: 100,
        build: || crate::export::boxed(RingBuffer8Rtl::new()),
        recorder: Some(|cycles, seed| record_ring_buffer_8("ring_buffer_s8", cycles, seed)),
    }],
};
