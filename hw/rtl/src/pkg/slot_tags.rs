//! The chiplet controller's per-slot tag file (`SlotTagsRtl<S, R>`): each ring slot's tag —
//! expert, micro-slice k, loader — with the controller's two allocation write ports and `R`
//! slot-indexed read ports, plus every slot's expert and loader in parallel.
//!
//! ```text
//!  wa (H: D2D arrival's slot, the head's tag) ──┐
//!  wb (K: DDR load's slot, the issued tag) ─────┴─► exp/k/ld[0..S] registers
//!  rd_slot[r] ─► mux ─► rd_expert/k/loader[r]   (B landing, D PE done, H victim, I pick, L escape, rd port)
//!  every slot ──────► expert[i], loader[i]      (grant batch, token gating, ungranted counts, next-hop loader)
//! ```
//!
//! A slot's tag is written when the slot is allocated (the CL's `RingBufferCl::alloc`) and
//! read while it is live; the controller allocates at most two slots per cycle, the D2D
//! arrival's (`wa`) and then the DDR load's (`wb`), into different slots (the second scan
//! sees the first allocation). Should both name the same slot, `wb` wins (it is the later
//! one). A read port answers the registered tag (this cycle's writes show from the next
//! cycle on), 0 for a slot index ≥ S. A synchronous `reset` clears every tag; the controller
//! ties it low: a tag is only read after its slot was allocated (the live bits say which),
//! so its tags need no reset — they had none before this block existed, and tying it low
//! keeps the controller's netlist and its `rd_*` port (which shows a free slot's stale tag)
//! as they were.
//!
//! Port coupling: `rd_*[r]` comb in `rd_slot[r]`; `expert`, `loader` registered.

use rust_hdl::prelude::*;

use crate::cosim::{record, PortTrace};
use crate::export::{boxed, BlockDef, ParamSet};
use crate::RtlError;

/// Tags of an `S`-slot ring (1 ≤ S ≤ 64) with `R` read ports.
#[derive(LogicBlock)]
pub struct SlotTagsRtl<const S: usize, const R: usize> {
    pub clock: Signal<In, Clock>,
    /// Synchronous reset: every tag 0 (wins over the writes).
    pub reset: Signal<In, Bit>,
    /// Write port a (the D2D arrival's allocation).
    pub wa_en: Signal<In, Bit>,
    pub wa_slot: Signal<In, Bits<8>>,
    pub wa_expert: Signal<In, Bits<16>>,
    pub wa_k: Signal<In, Bits<16>>,
    pub wa_loader: Signal<In, Bits<4>>,
    /// Write port b (the DDR load's allocation; wins over a on the same slot).
    pub wb_en: Signal<In, Bit>,
    pub wb_slot: Signal<In, Bits<8>>,
    pub wb_expert: Signal<In, Bits<16>>,
    pub wb_k: Signal<In, Bits<16>>,
    pub wb_loader: Signal<In, Bits<4>>,
    /// Read ports: slot index in, its tag out (0 for an index ≥ S).
    pub rd_slot: [Signal<In, Bits<8>>; R],
    pub rd_expert: [Signal<Out, Bits<16>>; R],
    pub rd_k: [Signal<Out, Bits<16>>; R],
    pub rd_loader: [Signal<Out, Bits<4>>; R],
    /// Every slot's expert and loader.
    pub expert: [Signal<Out, Bits<16>>; S],
    pub loader: [Signal<Out, Bits<4>>; S],

    t_exp: [DFF<Bits<16>>; S],
    t_k: [DFF<Bits<16>>; S],
    t_ld: [DFF<Bits<4>>; S],
    /// Slot indices as 8-bit constants.
    index: [Constant<Bits<8>>; S],
    zero16: Constant<Bits<16>>,
    zero4: Constant<Bits<4>>,
}

impl<const S: usize, const R: usize> Default for SlotTagsRtl<S, R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const S: usize, const R: usize> SlotTagsRtl<S, R> {
    pub fn new() -> Self {
        assert!((1..=64).contains(&S) && R >= 1, "tag file of {S} slots (1..=64), {R} read ports");
        Self {
            clock: Default::default(),
            reset: Default::default(),
            wa_en: Default::default(),
            wa_slot: Default::default(),
            wa_expert: Default::default(),
            wa_k: Default::default(),
            wa_loader: Default::default(),
            wb_en: Default::default(),
            wb_slot: Default::default(),
            wb_expert: Default::default(),
            wb_k: Default::default(),
            wb_loader: Default::default(),
            rd_slot: std::array::from_fn(|_| Default::default()),
            rd_expert: std::array::from_fn(|_| Default::default()),
            rd_k: std::array::from_fn(|_| Default::default()),
            rd_loader: std::array::from_fn(|_| Default::default()),
            expert: std::array::from_fn(|_| Default::default()),
            loader: std::array::from_fn(|_| Default::default()),
            t_exp: std::array::from_fn(|_| Default::default()),
            t_k: std::array::from_fn(|_| Default::default()),
            t_ld: std::array::from_fn(|_| Default::default()),
            index: std::array::from_fn(|i| Constant::new((i as u64).into())),
            zero16: Constant::new(0u64.into()),
            zero4: Constant::new(0u64.into()),
        }
    }
}

impl<const S: usize, const R: usize> Logic for SlotTagsRtl<S, R> {
    #[hdl_gen]
    fn update(&mut self) {
        for i in 0..S {
            self.t_exp[i].clock.next = self.clock.val();
            self.t_k[i].clock.next = self.clock.val();
            self.t_ld[i].clock.next = self.clock.val();
            self.t_exp[i].d.next = self.t_exp[i].q.val();
            self.t_k[i].d.next = self.t_k[i].q.val();
            self.t_ld[i].d.next = self.t_ld[i].q.val();
            if self.wa_en.val() & (self.wa_slot.val() == self.index[i].val()) {
                self.t_exp[i].d.next = self.wa_expert.val();
                self.t_k[i].d.next = self.wa_k.val();
                self.t_ld[i].d.next = self.wa_loader.val();
            }
            if self.wb_en.val() & (self.wb_slot.val() == self.index[i].val()) {
                self.t_exp[i].d.next = self.wb_expert.val();
                self.t_k[i].d.next = self.wb_k.val();
                self.t_ld[i].d.next = self.wb_loader.val();
            }
            if self.reset.val() {
                self.t_exp[i].d.next = self.zero16.val();
                self.t_k[i].d.next = self.zero16.val();
                self.t_ld[i].d.next = self.zero4.val();
            }
            self.expert[i].next = self.t_exp[i].q.val();
            self.loader[i].next = self.t_ld[i].q.val();
        }
        for r in 0..R {
            self.rd_expert[r].next = self.zero16.val();
            self.rd_k[r].next = self.zero16.val();
            self.rd_loader[r].next = self.zero4.val();
            for i in 0..S {
                if self.rd_slot[r].val() == self.index[i].val() {
                    self.rd_expert[r].next = self.t_exp[i].q.val();
                    self.rd_k[r].next = self.t_k[i].q.val();
                    self.rd_loader[r].next = self.t_ld[i].q.val();
                }
            }
        }
    }
}

// ---------------------------------------------------------------- export

/// The exported size: the standard chiplet's 8 slots and its 6 read ports
/// (`chiplet_ctrl_s8_e16`).
pub type SlotTags8Rtl = SlotTagsRtl<8, 6>;

/// Co-sim recorder: reset in cycle 0 and one cycle in 300, random writes on both ports (p 0.3 each, sometimes the same slot, slot
/// indices up to 9 so that out-of-range writes occur), random read indices 0..10 (≥ 8 reads
/// 0), random tag values.
pub fn record_slot_tags_8(module: &str, cycles: usize, seed: u64) -> Result<PortTrace, RtlError> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    type W = (bool, u64, u64, u64, u64);
    let stim: Vec<(bool, W, W, [u64; 6])> = (0..cycles)
        .map(|c| {
            let w = |rng: &mut rand_xoshiro::Xoshiro256PlusPlus| (rng.gen_bool(0.3), rng.gen_range(0..10u64), rng.gen::<u16>() as u64, rng.gen::<u16>() as u64, rng.gen_range(0..16u64));
            let a = w(&mut rng);
            let mut b = w(&mut rng);
            if rng.gen_bool(0.1) {
                b.1 = a.1;
            }
            (c == 0 || rng.gen_ratio(1, 300), a, b, std::array::from_fn(|_| rng.gen_range(0..10u64)))
        })
        .collect();
    record(module, SlotTags8Rtl::new(), cycles, |u| &mut u.clock, |c, u| {
        let (reset, a, b, rd) = stim[c];
        u.reset.next = reset;
        u.wa_en.next = a.0;
        u.wa_slot.next = a.1.into();
        u.wa_expert.next = a.2.into();
        u.wa_k.next = a.3.into();
        u.wa_loader.next = a.4.into();
        u.wb_en.next = b.0;
        u.wb_slot.next = b.1.into();
        u.wb_expert.next = b.2.into();
        u.wb_k.next = b.3.into();
        u.wb_loader.next = b.4.into();
        for r in 0..6 {
            u.rd_slot[r].next = rd[r].into();
        }
    })
}

/// Export registration: the 8-slot, 6-port tag file, linted and co-simulated like the other
/// leaf blocks.
pub const EXPORT: BlockDef = BlockDef {
    name: "slot_tags",
    top: false,
    domain: crate::export::ModelDomain::PkgCore,
    cosim_cycles: 4096,
    sets: &[ParamSet {
        module: "slot_tags_8",
        rust_type: "SlotTags8Rtl",
        params: &[("slots", 8), ("read_ports", 6)],
        ecp5_clock_mhz: 100,
        build: || boxed(SlotTags8Rtl::new()),
        recorder: Some(|cycles, seed| record_slot_tags_8("slot_tags_8", cycles, seed)),
    }],
};
