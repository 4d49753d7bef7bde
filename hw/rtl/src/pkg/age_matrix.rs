//! The chiplet controller's queue-order state (`AgeMatrixRtl<S>`): one S×S age matrix over
//! the ring's slots, with the cycle's queue entries as insert ports, answering the matrix
//! the controller's oldest / newest pickers ([`super::picker::AgePickerRtl`]) read.
//!
//! ```text
//!  age[0..S] (registers) ─┐
//!  batch ▸ ddr ▸ d2d ▸ pe_tx (entries, rank order) ─► age_e[0..S] ─► pickers H, I, L
//!  pick (entry after the PE pick) ──────────────────► age_p[0..S] ─► picker J; next state
//! ```
//!
//! `age[i]` bit j set means slot i entered its queue before slot j. The controller's four
//! queues (rx_ready, local_ready, local_wait, tx_q) hold a slot in at most one of them, so
//! one matrix orders them all; a queue's membership is a bit vector in the controller and
//! its oldest / newest member is a picker over this matrix (docs/rtl.md, Chiplet
//! controller). This block is the matrix's update, the part of the CL's `push_back`s the
//! queues share:
//! * The entries of stages A–D of a cycle rank in program order: a grant's `batch` (the
//!   waiting pre-loads of the granted expert, moved to local_ready or tx_q: they keep their
//!   mutual order), then a DDR landing (`ddr`), a D2D landing (`d2d`), a PE done pushed to
//!   tx_q (`pe_tx`). A slot that enters gets a fresh row (it is older than the slots of the
//!   later groups only) and a fresh column (every slot that did not enter is older than it),
//!   so stale bits of slots that left a queue never matter. `age_e` is the matrix after
//!   these entries; the eviction, PE and escape pickers read it.
//! * The PE pick of stage I (`pick`, computed by the controller from `age_e`) enters last:
//!   a forward-with-compute slot queued for its send. `age_p` is the matrix after it; the
//!   send picker (J) reads it, and it is the next state.
//!
//! As a rule over logical time: give every entry group a fresh timestamp, later groups
//! later ones (the batch one per distinct old timestamp of its members, in their old
//! order), slots that never entered since reset the oldest; then bit j of row i is
//! "stamp(i) < stamp(j)" — the unit test's reference (`hw/rtl/tests/rtl_pkg_age_matrix.rs`).
//! Precondition (the controller guarantees it: each is a different event on a different
//! slot): `batch`, `ddr`, `d2d` and `pe_tx` are pairwise disjoint; `pick` may overlap them
//! (a slot that landed and was picked in the same cycle). For overlapping entry groups the
//! output is defined by the code below (first group wins the row, every group sets its
//! columns) but is not a timestamp order.
//!
//! Port coupling: `age_e` comb in `batch`, `ddr`, `d2d`, `pe_tx`; `age_p` also in `pick`;
//! the matrix is registered (synchronous `reset` clears it — no slot entered yet).
//! Sized constants, no `replace_bit`: the exported Verilog is `-Wall` clean without waivers.

use rust_hdl::prelude::*;

use crate::cosim::{record, PortTrace};
use crate::export::{boxed, BlockDef, ParamSet};
use crate::RtlError;

/// The age matrix of an `S`-slot ring (1 ≤ S ≤ 64) with the controller's insert ports.
#[derive(LogicBlock)]
pub struct AgeMatrixRtl<const S: usize> {
    pub clock: Signal<In, Clock>,
    /// Synchronous reset: every row 0.
    pub reset: Signal<In, Bit>,
    /// A: the grant's batch of waiting pre-loads (re-enter in their mutual order).
    pub batch: Signal<In, Bits<S>>,
    /// B: the DDR landing (enters after the batch).
    pub ddr: Signal<In, Bits<S>>,
    /// C: the D2D landing (after the DDR landing).
    pub d2d: Signal<In, Bits<S>>,
    /// D: a PE done pushed to tx_q (after the D2D landing).
    pub pe_tx: Signal<In, Bits<S>>,
    /// I: the PE pick (after all of the above, and after `age_e` was read).
    pub pick: Signal<In, Bits<S>>,
    /// Row i after the entries of A–D: bit j = slot i entered before slot j.
    pub age_e: [Signal<Out, Bits<S>>; S],
    /// Row i after the pick too (the next state).
    pub age_p: [Signal<Out, Bits<S>>; S],

    age: [DFF<Bits<S>>; S],
    /// The slots that enter in A–D.
    nset: Signal<Local, Bits<S>>,
    zero_s: Constant<Bits<S>>,
}

impl<const S: usize> Default for AgeMatrixRtl<S> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const S: usize> AgeMatrixRtl<S> {
    pub fn new() -> Self {
        assert!((1..=64).contains(&S), "age matrix of {S} slots (1..=64)");
        Self {
            clock: Default::default(),
            reset: Default::default(),
            batch: Default::default(),
            ddr: Default::default(),
            d2d: Default::default(),
            pe_tx: Default::default(),
            pick: Default::default(),
            age_e: std::array::from_fn(|_| Default::default()),
            age_p: std::array::from_fn(|_| Default::default()),
            age: std::array::from_fn(|_| Default::default()),
            nset: Default::default(),
            zero_s: Constant::new(0u64.into()),
        }
    }
}

impl<const S: usize> Logic for AgeMatrixRtl<S> {
    #[hdl_gen]
    fn update(&mut self) {
        for i in 0..S {
            self.age[i].clock.next = self.clock.val();
        }
        self.nset.next = self.batch.val() | self.ddr.val() | self.d2d.val() | self.pe_tx.val();
        for i in 0..S {
            // A–D: an entering slot is older than the later groups' slots only (a batch
            // member also than the batch members it was older than); every other slot is
            // older than all that entered.
            if self.batch.val().get_bit(i) {
                self.age_e[i].next = (self.age[i].q.val() & self.batch.val()) | self.ddr.val() | self.d2d.val() | self.pe_tx.val();
            } else if self.ddr.val().get_bit(i) {
                self.age_e[i].next = self.d2d.val() | self.pe_tx.val();
            } else if self.d2d.val().get_bit(i) {
                self.age_e[i].next = self.pe_tx.val();
            } else if self.pe_tx.val().get_bit(i) {
                self.age_e[i].next = self.zero_s.val();
            } else {
                self.age_e[i].next = self.age[i].q.val() | self.nset.val();
            }
            // I: the picked slot is the newest entry (row 0, column 1).
            if self.pick.val().get_bit(i) {
                self.age_p[i].next = self.zero_s.val();
            } else {
                self.age_p[i].next = self.age_e[i].val() | self.pick.val();
            }
            self.age[i].d.next = self.age_p[i].val();
            if self.reset.val() {
                self.age[i].d.next = self.zero_s.val();
            }
        }
    }
}

// ---------------------------------------------------------------- export

/// The exported size: the standard chiplet's 8-slot matrix (`chiplet_ctrl_s8_e16`).
pub type AgeMatrix8Rtl = AgeMatrixRtl<8>;

/// Random entry groups over `s` slots for one cycle: `(batch, ddr, d2d, pe_tx, pick)`,
/// pairwise disjoint as the controller drives them (each of `ddr`, `d2d`, `pe_tx` one slot or
/// none, as there; with `wide`, any number), `pick` one slot or none, possibly one that
/// entered this cycle.
pub fn random_entries<R: rand::Rng>(rng: &mut R, s: usize, wide: bool) -> (u64, u64, u64, u64, u64) {
    /// With probability `p`, some of the slots still in `free` (one, or with `many` any
    /// number), taken out of `free`.
    fn group<R: rand::Rng>(rng: &mut R, free: &mut u64, s: usize, p: f64, many: bool) -> u64 {
        if *free == 0 || !rng.gen_bool(p) {
            return 0;
        }
        let g = if many {
            rng.gen::<u64>() & rng.gen::<u64>() & *free
        } else {
            let pos: Vec<usize> = (0..s).filter(|&i| *free >> i & 1 == 1).collect();
            1u64 << pos[rng.gen_range(0..pos.len())]
        };
        *free &= !g;
        g
    }
    let mut free = if s == 64 { u64::MAX } else { (1u64 << s) - 1 };
    let batch = group(rng, &mut free, s, 0.15, true);
    let ddr = group(rng, &mut free, s, 0.4, wide);
    let d2d = group(rng, &mut free, s, 0.4, wide);
    let pe_tx = group(rng, &mut free, s, 0.3, wide);
    let pick = if rng.gen_bool(0.4) { 1u64 << rng.gen_range(0..s) } else { 0 };
    (batch, ddr, d2d, pe_tx, pick)
}

/// Co-sim recorder: reset in cycle 0 and now and then, random entry groups every cycle
/// ([`random_entries`], single and wide groups), and one cycle in 16 arbitrary overlapping
/// masks (outside the controller's use; the Verilog must still agree bit for bit).
pub fn record_age_matrix_8(module: &str, cycles: usize, seed: u64) -> Result<PortTrace, RtlError> {
    use rand::{Rng, SeedableRng};
    const S: usize = 8;
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let stim: Vec<(bool, (u64, u64, u64, u64, u64))> = (0..cycles)
        .map(|c| {
            let reset = c == 0 || rng.gen_ratio(1, 500);
            let g = if rng.gen_ratio(1, 16) {
                let mut r = || rng.gen::<u64>() & rng.gen::<u64>() & 0xff;
                (r(), r(), r(), r(), r())
            } else {
                let wide = rng.gen_bool(0.3);
                random_entries(&mut rng, S, wide)
            };
            (reset, g)
        })
        .collect();
    record(module, AgeMatrix8Rtl::new(), cycles, |u| &mut u.clock, |c, u| {
        let (reset, (batch, ddr, d2d, pe_tx, pick)) = stim[c];
        u.reset.next = reset;
        u.batch.next = batch.into();
        u.ddr.next = ddr.into();
        u.d2d.next = d2d.into();
        u.pe_tx.next = pe_tx.into();
        u.pick.next = pick.into();
    })
}

/// Export registration: the 8-slot matrix, linted and co-simulated like the other leaf blocks.
pub const EXPORT: BlockDef = BlockDef {
    name: "age_matrix",
    top: false,
    domain: crate::export::ModelDomain::PkgCore,
    cosim_cycles: 4096,
    sets: &[ParamSet {
        module: "age_matrix_8",
        rust_type: "AgeMatrix8Rtl",
        params: &[("slots", 8)],
        ecp5_clock_mhz: 100,
        build: || boxed(AgeMatrix8Rtl::new()),
        recorder: Some(|cycles, seed| record_age_matrix_8("age_matrix_8", cycles, seed)),
    }],
};
