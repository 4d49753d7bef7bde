//! Oldest / newest picker over an age matrix (`AgePickerRtl<S>`), the one selection circuit
//! of the chiplet controller's queues (`chiplet.rs`: the eviction picker, the PE picker, the
//! D2D-send picker and the load-side escape).
//!
//! ```text
//!  req (S bits) ─┐
//!  age[0..S] ────┼─► per slot i: oldest  = req[i] & every other member j has age[i][j]
//!  newest ───────┘               newest  = req[i] & no other member j has age[i][j]
//!                 ──► lowest qualifying i (prefix OR) ──► found, slot, onehot
//! ```
//!
//! `age[i]` bit j set means slot i entered its queue before slot j. The controller keeps one
//! S×S matrix for all its queues (a slot is in at most one), so "oldest of a set X" is the
//! member older than every other member and "newest" the member older than none: an
//! AND/OR-reduce per row, no counters or timestamps. With a consistent matrix (a total order
//! on the members) exactly one member qualifies; the priority encoder makes the answer
//! defined for any matrix (the lowest qualifying slot), which is what the unit test checks
//! against its own reference (`hw/rtl/tests/rtl_pkg_picker.rs`).
//!
//! Purely combinational (the controller's stages answer in the cycle). Sized constants
//! instead of integer literals and per-slot one-hot constants instead of `replace_bit`, so
//! the exported Verilog is `-Wall` clean without the WIDTH waiver.

use rust_hdl::prelude::*;

use crate::cosim::{record, PortTrace};
use crate::export::{boxed, BlockDef, ParamSet};
use crate::RtlError;

/// Oldest / newest member of the set `req` under the age matrix `age` (1 ≤ S ≤ 64).
///
/// Port coupling: every output is combinational in every input.
#[derive(LogicBlock)]
pub struct AgePickerRtl<const S: usize> {
    /// The candidate set (a queue's membership bits, possibly masked).
    pub req: Signal<In, Bits<S>>,
    /// Pick the newest member instead of the oldest.
    pub newest: Signal<In, Bit>,
    /// Row i of the age matrix: bit j = slot i entered before slot j.
    pub age: [Signal<In, Bits<S>>; S],
    /// `req` had a qualifying member.
    pub found: Signal<Out, Bit>,
    /// Its index (0 when not found).
    pub slot: Signal<Out, Bits<8>>,
    /// Its one-hot mask (0 when not found).
    pub onehot: Signal<Out, Bits<S>>,

    // --- combinational locals
    /// The other members of the set, seen from slot i.
    others: Signal<Local, Bits<S>>,
    /// Slot i qualifies (member, and oldest / newest).
    hit: Signal<Local, Bit>,
    /// Every slot's `hit` (and membership) side by side; its inclusive prefix OR.
    hb: Signal<Local, Bits<S>>,
    pe: [Signal<Local, Bits<S>>; 6],

    // --- constants
    /// `unit[i]`: bit i alone; `notu[i]`: every bit but i.
    unit: [Constant<Bits<S>>; S],
    notu: [Constant<Bits<S>>; S],
    /// Slot indices as 8-bit constants.
    index: [Constant<Bits<8>>; S],
    zero_s: Constant<Bits<S>>,
    zero8: Constant<Bits<8>>,
}

impl<const S: usize> Default for AgePickerRtl<S> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const S: usize> AgePickerRtl<S> {
    pub fn new() -> Self {
        assert!((1..=64).contains(&S), "age picker of {S} slots (1..=64)");
        let all: u64 = if S == 64 { u64::MAX } else { (1u64 << S) - 1 };
        Self {
            req: Default::default(),
            newest: Default::default(),
            age: std::array::from_fn(|_| Default::default()),
            found: Default::default(),
            slot: Default::default(),
            onehot: Default::default(),
            others: Default::default(),
            hit: Default::default(),
            hb: Default::default(),
            pe: Default::default(),
            unit: std::array::from_fn(|i| Constant::new((1u64 << i).into())),
            notu: std::array::from_fn(|i| Constant::new((all & !(1u64 << i)).into())),
            index: std::array::from_fn(|i| Constant::new((i as u64).into())),
            zero_s: Constant::new(0u64.into()),
            zero8: Constant::new(0u64.into()),
        }
    }
}

impl<const S: usize> Logic for AgePickerRtl<S> {
    #[hdl_gen]
    fn update(&mut self) {
        // Flat: every slot's qualification in parallel (`hb`), the lowest one isolated with
        // the inclusive prefix OR `pe` (shift-OR steps, as the round-robin arbiters). It was a
        // loop of S conditional updates gated by `!found`, a priority chain S deep; the answer
        // (the lowest qualifying slot) is the same.
        self.hb.next = self.zero_s.val();
        for i in 0..S {
            self.others.next = self.req.val() & self.notu[i].val();
            if self.newest.val() {
                // Older than none of the others.
                self.hit.next = !(self.age[i].val() & self.others.val()).any();
            } else {
                // Older than every other.
                self.hit.next = !(self.others.val() & !self.age[i].val()).any();
            }
            if (self.req.val() & self.unit[i].val()).any() & self.hit.val() {
                self.hb.next = self.hb.val() | self.unit[i].val();
            }
        }
        self.pe[0].next = self.hb.val() | (self.hb.val() << 1);
        self.pe[1].next = self.pe[0].val() | (self.pe[0].val() << 2);
        self.pe[2].next = self.pe[1].val() | (self.pe[1].val() << 4);
        self.pe[3].next = self.pe[2].val() | (self.pe[2].val() << 8);
        self.pe[4].next = self.pe[3].val() | (self.pe[3].val() << 16);
        self.pe[5].next = self.pe[4].val() | (self.pe[4].val() << 32);
        self.onehot.next = self.hb.val() & !(self.pe[5].val() << 1);
        self.found.next = self.hb.val().any();
        // The index of the one-hot (AND-OR; 0 when not found).
        self.slot.next = self.zero8.val();
        for i in 0..S {
            if self.onehot.val().get_bit(i) {
                self.slot.next = self.slot.val() | self.index[i].val();
            }
        }
    }
}

// ---------------------------------------------------------------- export

/// The picker with a clock for export: the comb picker plus its answer registered
/// (`found_q`, `slot_q`), so the exported module has the clock the co-simulation testbench
/// drives. The picker itself is a sub-module (`age_picker_8$pk`) of the file.
#[derive(LogicBlock)]
pub struct AgePickerRegRtl<const S: usize> {
    pub clock: Signal<In, Clock>,
    /// Synchronous reset of the answer register (S3 port order: clock, reset, inputs).
    pub reset: Signal<In, Bit>,
    pub req: Signal<In, Bits<S>>,
    pub newest: Signal<In, Bit>,
    pub age: [Signal<In, Bits<S>>; S],
    pub found: Signal<Out, Bit>,
    pub slot: Signal<Out, Bits<8>>,
    pub onehot: Signal<Out, Bits<S>>,
    /// Last cycle's answer.
    pub found_q: Signal<Out, Bit>,
    pub slot_q: Signal<Out, Bits<8>>,
    pk: AgePickerRtl<S>,
    found_r: DFF<Bit>,
    slot_r: DFF<Bits<8>>,
    zero8: Constant<Bits<8>>,
}

impl<const S: usize> Default for AgePickerRegRtl<S> {
    fn default() -> Self {
        Self {
            clock: Default::default(),
            reset: Default::default(),
            req: Default::default(),
            newest: Default::default(),
            age: std::array::from_fn(|_| Default::default()),
            found: Default::default(),
            slot: Default::default(),
            onehot: Default::default(),
            found_q: Default::default(),
            slot_q: Default::default(),
            pk: AgePickerRtl::new(),
            found_r: Default::default(),
            slot_r: Default::default(),
            zero8: Constant::new(0u64.into()),
        }
    }
}

impl<const S: usize> Logic for AgePickerRegRtl<S> {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, found_r, slot_r);
        self.pk.req.next = self.req.val();
        self.pk.newest.next = self.newest.val();
        for i in 0..S {
            self.pk.age[i].next = self.age[i].val();
        }
        self.found.next = self.pk.found.val();
        self.slot.next = self.pk.slot.val();
        self.onehot.next = self.pk.onehot.val();
        self.found_q.next = self.found_r.q.val();
        self.slot_q.next = self.slot_r.q.val();
        self.found_r.d.next = self.pk.found.val();
        self.slot_r.d.next = self.pk.slot.val();
        if self.reset.val() {
            self.found_r.d.next = false;
            self.slot_r.d.next = self.zero8.val();
        }
    }
}

/// The exported size: the 8-slot picker of the standard chiplet (`chiplet_ctrl_s8_e16`).
pub type AgePicker8Rtl = AgePickerRegRtl<8>;

/// A random age matrix over `s` slots: with probability 1/2 a consistent one (a random total
/// order, as the controller keeps), else arbitrary bits (the priority encoder's tie rule).
pub fn random_age(rng: &mut impl rand::Rng, s: usize) -> Vec<u64> {
    if rng.gen_bool(0.5) {
        let mut rank: Vec<u32> = (0..s as u32).collect();
        for i in (1..s).rev() {
            rank.swap(i, rng.gen_range(0..=i));
        }
        (0..s).map(|i| (0..s).filter(|&j| rank[i] < rank[j]).fold(0u64, |m, j| m | 1 << j)).collect()
    } else {
        let mask = if s == 64 { u64::MAX } else { (1u64 << s) - 1 };
        (0..s).map(|_| rng.gen::<u64>() & mask).collect()
    }
}

/// Co-sim recorder: random sets (dense and sparse), random oldest/newest, and a fresh random
/// age matrix every cycle ([`random_age`]).
pub fn record_age_picker_8(module: &str, cycles: usize, seed: u64) -> Result<PortTrace, RtlError> {
    use rand::{Rng, SeedableRng};
    const S: usize = 8;
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let stim: Vec<(u64, bool, Vec<u64>)> = (0..cycles)
        .map(|_| {
            let req = if rng.gen_bool(0.5) { rng.gen::<u64>() & 0xff } else { rng.gen::<u64>() & rng.gen::<u64>() & 0xff };
            (req, rng.gen_bool(0.5), random_age(&mut rng, S))
        })
        .collect();
    record(module, AgePicker8Rtl::default(), cycles, |u| &mut u.clock, |c, u| {
        let (req, newest, age) = &stim[c];
        u.reset.next = c == 0;
        u.req.next = (*req).into();
        u.newest.next = *newest;
        for i in 0..S {
            u.age[i].next = age[i].into();
        }
    })
}

/// Export registration: the 8-slot picker, linted and co-simulated like the other leaf blocks.
pub const EXPORT: BlockDef = BlockDef {
    name: "age_picker",
    top: false,
    domain: crate::export::ModelDomain::PkgCore,
    cosim_cycles: 4096,
    sets: &[ParamSet {
        module: "age_picker_8",
        rust_type: "AgePicker8Rtl",
        params: &[("slots", 8)],
        ecp5_clock_mhz: 100,
        build: || boxed(AgePicker8Rtl::default()),
        recorder: Some(|cycles, seed| record_age_picker_8("age_picker_8", cycles, seed)),
    }],
};
