//! Bitonic sorter of the IO-die scheduler (RTL twin of the CL's sorter register and of
//! `sched::pkg::iodie::bitonic_stage_apply`, seeds/expert-streaming.txt §V-B, Fig. 8).
//!
//! `P` lanes of 40-bit keys `{n_e[31:0], ~e[7:0]}`: a larger key goes first, so "larger token
//! count first, ties by the lower expert id" — `key_before` of the FL — is a plain unsigned
//! `>` on the packed key. One network stage per `step` cycle, `S = log2 P·(log2 P + 1)/2`
//! stages, exactly the CL's `Sort` state (one stage register, the vector in flight).
//!
//! Why this shape:
//! * **Folded, not fully pipelined.** The CL applies one stage per cycle to one register
//!   (one layer's vector is in flight at a time), so the RTL has one bank of lane registers
//!   and one comparator set per stage *shape* `j = 2^b` (P/2 comparators each), selected by
//!   the one-hot stage registers `k_oh`/`j_oh`. The latency is the pipelined network's (S
//!   cycles); the area is log2 P comparator banks instead of S.
//! * **Stage shape from loops with literal strides.** rust-hdl unrolls `for` loops whose
//!   bounds are Rust expressions and evaluates array indices with `evalexpr` (which has `+`
//!   and `*` but no XOR), so each stride `J` is its own loop nest `lo = blk·2J + t`,
//!   `hi = lo + J`; nests with `2J > P` get an empty range.
//! * **Direction from constants.** The half-cleaner at lane `lo` sorts descending ("after"
//!   order) where bit `a` of `lo` is set (swap when lo > hi there, when lo < hi elsewhere), `k = 2^a`: the constants `lb1..lb8` hold those lane
//!   masks and `desc` picks the one of the current `k`.
//! * Read ports `rd_a`/`rd_b` are combinational muxes over the lanes (the paired-load
//!   sequencer's head and tail pointers read them); they return the lane's expert id, the
//!   only field the sequencer uses.

use rust_hdl::prelude::*;

/// Key width: 32-bit token count and 8-bit inverted expert id.
pub const KEY_BITS: usize = 40;

/// Packs (count, expert) into a sorter key: larger key = scheduled first.
pub fn pack_key(count: u32, expert: u8) -> u64 {
    (count as u64) << 8 | (!expert) as u64
}

/// Unpacks a sorter key into (count, expert).
pub fn unpack_key(key: u64) -> (u32, u8) {
    ((key >> 8) as u32, !(key as u8))
}

/// Stages of a width-`p` network.
pub const fn stage_count(p: usize) -> usize {
    let l = p.trailing_zeros() as usize;
    l * (l + 1) / 2
}

/// Blocks of a stride-`j` stage in a width-`p` network (0 when the stride does not exist).
const fn blocks(p: usize, j: usize) -> usize {
    if p >= 2 * j {
        p / (2 * j)
    } else {
        0
    }
}

/// Lanes whose index has bit `a` set: the descending half-cleaners of stages with k = 2^a.
fn lane_bit_mask<const P: usize>(a: usize) -> Bits<P> {
    let mut m: Bits<P> = 0.into();
    for i in 0..P {
        if i >> a & 1 == 1 {
            m = m.replace_bit(i, true);
        }
    }
    m
}

/// Bitonic sorter over `P` lanes (`P` a power of two, 2..=256).
///
/// Port coupling: `rd_a_expert`/`rd_b_expert`: comb(rd_*_addr, lanes); `stage`/`last`: registered;
/// `clear`, `wr_*`, `step`, `restart`: sampled at the rising edge (`clear` before `wr_*`).
#[derive(LogicBlock)]
pub struct BitonicSorterRtl<const P: usize> {
    pub clock: Signal<In, Clock>,
    /// Zero every lane (a new layer: padding lanes must read as count 0).
    pub clear: Signal<In, Bit>,
    /// Load `wr_key` into lane `wr_addr` (the EIT write stream's count column).
    pub wr_en: Signal<In, Bit>,
    pub wr_addr: Signal<In, Bits<8>>,
    pub wr_key: Signal<In, Bits<KEY_BITS>>,
    /// Apply stage `stage` of the network at this edge.
    pub step: Signal<In, Bit>,
    /// Return to stage 0 (k = 2, j = 1).
    pub restart: Signal<In, Bit>,
    /// Index of the next stage to apply (the CL's `sort_stage`). registered.
    pub stage: Signal<Out, Bits<6>>,
    /// The next stage is the network's last one. registered.
    pub last: Signal<Out, Bit>,
    pub rd_a_addr: Signal<In, Bits<8>>,
    /// Expert id of lane `rd_a_addr` (255 for an address past the lanes).
    pub rd_a_expert: Signal<Out, Bits<8>>,
    pub rd_b_addr: Signal<In, Bits<8>>,
    pub rd_b_expert: Signal<Out, Bits<8>>,
    /// The read lanes' key byte `~e` (the count field is not read).
    rd_a_lo: Signal<Local, Bits<8>>,
    rd_b_lo: Signal<Local, Bits<8>>,
    /// The lanes (the stage register).
    lane: [DFF<Bits<KEY_BITS>>; P],
    stage_q: DFF<Bits<6>>,
    /// k = 2^a as one-hot bit a; j = 2^b as one-hot bit b.
    k_oh: DFF<Bits<9>>,
    j_oh: DFF<Bits<9>>,
    /// Descending lanes of the current stage.
    desc: Signal<Local, Bits<P>>,
    lb1: Constant<Bits<P>>,
    lb2: Constant<Bits<P>>,
    lb3: Constant<Bits<P>>,
    lb4: Constant<Bits<P>>,
    lb5: Constant<Bits<P>>,
    lb6: Constant<Bits<P>>,
    lb7: Constant<Bits<P>>,
    lb8: Constant<Bits<P>>,
    /// S − 1 (0 for P = 1, where `last` is never used).
    s_last: Constant<Bits<6>>,
    k_init: Constant<Bits<9>>,
    j_init: Constant<Bits<9>>,
}

impl<const P: usize> BitonicSorterRtl<P> {
    pub fn new() -> Self {
        assert!(P.is_power_of_two() && (2..=256).contains(&P), "sorter width {P} is not a power of two in 2..=256");
        Self {
            clock: Default::default(),
            clear: Default::default(),
            wr_en: Default::default(),
            wr_addr: Default::default(),
            wr_key: Default::default(),
            step: Default::default(),
            restart: Default::default(),
            stage: Default::default(),
            last: Default::default(),
            rd_a_addr: Default::default(),
            rd_a_expert: Default::default(),
            rd_a_lo: Default::default(),
            rd_b_addr: Default::default(),
            rd_b_expert: Default::default(),
            rd_b_lo: Default::default(),
            lane: std::array::from_fn(|_| Default::default()),
            stage_q: Default::default(),
            k_oh: Default::default(),
            j_oh: Default::default(),
            desc: Default::default(),
            lb1: Constant::new(lane_bit_mask::<P>(1)),
            lb2: Constant::new(lane_bit_mask::<P>(2)),
            lb3: Constant::new(lane_bit_mask::<P>(3)),
            lb4: Constant::new(lane_bit_mask::<P>(4)),
            lb5: Constant::new(lane_bit_mask::<P>(5)),
            lb6: Constant::new(lane_bit_mask::<P>(6)),
            lb7: Constant::new(lane_bit_mask::<P>(7)),
            lb8: Constant::new(lane_bit_mask::<P>(8)),
            s_last: Constant::new((stage_count(P).saturating_sub(1) as u64).into()),
            k_init: Constant::new(0b10u64.into()),
            j_init: Constant::new(0b01u64.into()),
        }
    }

    /// Lane `i`'s key (for the lockstep tests).
    pub fn lane_key(&self, i: usize) -> u64 {
        self.lane[i].q.val().to_u64()
    }
}

impl<const P: usize> Default for BitonicSorterRtl<P> {
    fn default() -> Self {
        Self::new()
    }
}

/// The update logic, written once per stride and per direction mask. `#[hdl_gen]` sees the
/// expanded tokens, so each stride's loop nest has literal strides (`blk * 2J + t`), which
/// rust-hdl's `evalexpr` index evaluation needs (see the module doc). The numbers are `tt`
/// fragments: a `literal` fragment reaches the proc macro wrapped in an invisible group, which
/// `#[hdl_gen]` does not translate.
macro_rules! sorter_logic {
    (dirs: [$(($a:tt, $lb:ident)),*], strides: [$(($b:tt, $j:tt, $jj:tt)),*]) => {
        impl<const P: usize> Logic for BitonicSorterRtl<P> {
            #[hdl_gen]
            fn update(&mut self) {
                dff_setup!(self, clock, stage_q, k_oh, j_oh);
                for i in 0..P {
                    self.lane[i].clock.next = self.clock.val();
                    self.lane[i].d.next = self.lane[i].q.val();
                }
                self.stage.next = self.stage_q.q.val();
                self.last.next = self.stage_q.q.val() == self.s_last.val();
                // Read ports.
                self.rd_a_lo.next = 0.into();
                self.rd_b_lo.next = 0.into();
                for i in 0..P {
                    if self.rd_a_addr.val().index() == i {
                        self.rd_a_lo.next = self.lane[i].q.val().get_bits::<8>(0);
                    }
                    if self.rd_b_addr.val().index() == i {
                        self.rd_b_lo.next = self.lane[i].q.val().get_bits::<8>(0);
                    }
                }
                self.rd_a_expert.next = !self.rd_a_lo.val();
                self.rd_b_expert.next = !self.rd_b_lo.val();
                // Descending lanes of stage (k, j): bit a of the lane index, k = 2^a.
                self.desc.next = 0.into();
                $(
                    if self.k_oh.q.val().get_bit($a) {
                        self.desc.next = self.$lb.val();
                    }
                )*
                // Stage application: one comparator bank per stride J = 2^b, selected by j_oh.
                if self.step.val() {
                    $(
                        if self.j_oh.q.val().get_bit($b) {
                            for blk in 0..blocks(P, $j) {
                                for t in 0..$j {
                                    if self.desc.val().get_bit(blk * $jj + t) {
                                        if self.lane[blk * $jj + t].q.val() > self.lane[blk * $jj + t + $j].q.val() {
                                            self.lane[blk * $jj + t].d.next = self.lane[blk * $jj + t + $j].q.val();
                                            self.lane[blk * $jj + t + $j].d.next = self.lane[blk * $jj + t].q.val();
                                        }
                                    } else if self.lane[blk * $jj + t].q.val() < self.lane[blk * $jj + t + $j].q.val() {
                                        self.lane[blk * $jj + t].d.next = self.lane[blk * $jj + t + $j].q.val();
                                        self.lane[blk * $jj + t + $j].d.next = self.lane[blk * $jj + t].q.val();
                                    }
                                }
                            }
                        }
                    )*
                    // Next stage: j halves; after j = 1, k doubles and j = k_old (= k_new / 2).
                    self.stage_q.d.next = self.stage_q.q.val() + 1;
                    if self.j_oh.q.val().get_bit(0) {
                        self.k_oh.d.next = self.k_oh.q.val() << 1;
                        self.j_oh.d.next = self.k_oh.q.val();
                    } else {
                        self.j_oh.d.next = self.j_oh.q.val() >> 1;
                    }
                }
                // Loads (the EIT write stream); clear first, then the written lane.
                for i in 0..P {
                    if self.clear.val() {
                        self.lane[i].d.next = 0.into();
                    }
                    if self.wr_en.val() & (self.wr_addr.val().index() == i) {
                        self.lane[i].d.next = self.wr_key.val();
                    }
                }
                if self.restart.val() {
                    self.stage_q.d.next = 0.into();
                    self.k_oh.d.next = self.k_init.val();
                    self.j_oh.d.next = self.j_init.val();
                }
            }
        }
    };
}

sorter_logic!(
    dirs: [(1, lb1), (2, lb2), (3, lb3), (4, lb4), (5, lb5), (6, lb6), (7, lb7), (8, lb8)],
    strides: [(0, 1, 2), (1, 2, 4), (2, 4, 8), (3, 8, 16), (4, 16, 32), (5, 32, 64), (6, 64, 128), (7, 128, 256)]
);

/// Export registration: the sorter alone at 16 lanes (lint and synthesis; its behaviour is
/// co-simulated inside `iodie_scheduler`). Wider sorters are not in the standard export:
/// yosys `synth` of the 128-lane one ran over 7 minutes (docs/rtl.md).
pub const EXPORT: crate::export::BlockDef = crate::export::BlockDef {
    name: "bitonic_sorter",
    top: false,
    domain: crate::export::ModelDomain::PkgCore,
    cosim_cycles: 0,
    sets: &[
        crate::export::ParamSet {
            module: "bitonic_sorter_16",
            rust_type: "BitonicSorterRtl<16>",
            params: &[("lanes", 16)],
            // ECP5-85F: 64.0 MHz at seed 1; the 16-lane network is combinational (docs/rtl.md, "Timing closure at the prototype clocks").
            ecp5_clock_mhz: 60,
            build: || crate::export::boxed(BitonicSorterRtl::<16>::new()),
            recorder: None,
        },
    ],
};
