//! Population count of a slot mask (`PopCountRtl<S>`), the one counter of the micro-slice
//! rings: the ring buffer's live count ([`super::ring::RingBufferRtl`], `occ`), the ring
//! pointers' free count ([`super::ring_alloc::RingAllocRtl`], `free`) and the chiplet
//! controller's free slots and ungranted live slots after A..F ([`super::chiplet`], `pf`,
//! `pu`). The four were the same tree written out four times (issue 23 review, duplicates
//! D2-D5); the owners now form the mask and read `count`.
//!
//! ```text
//!  bits (S bits, S ≤ 64; leaves S..64 zero)
//!   ─► 64 leaves of 0/1 ─► 32 sums ─► 16 ─► 8 ─► 4 ─► 2 ─► 1 ─► count (8 bits)
//! ```
//!
//! A balanced adder tree, six levels over 64 leaves: entries 0..64 of `pc` are the leaves,
//! then the sums of each level (64.., 96.., 112.., 120.., 124.., 126). A chain of S
//! conditional increments was the ring's critical path (sixth and eighth sessions,
//! docs/rtl.md); synthesis drops the constant-zero leaves above S, so an 8-slot count is
//! three levels of adders.
//!
//! Port coupling: `count` is combinational in `bits`. Sized constants, no integer literals
//! (WIDTH-clean). Checked against `u64::count_ones` by `hw/rtl/tests/rtl_pkg_popcount.rs`.

use rust_hdl::prelude::*;

/// Number of set bits of an `S`-bit mask (1 ≤ S ≤ 64), as 8 bits.
#[derive(LogicBlock)]
pub struct PopCountRtl<const S: usize> {
    /// The mask to count (the owner's live / free / ungranted slots).
    pub bits: Signal<In, Bits<S>>,
    /// Its population count (0..=S).
    pub count: Signal<Out, Bits<8>>,
    /// The tree: 64 leaves, then each level's sums; `pc[126]` is the count.
    pc: [Signal<Local, Bits<8>>; 127],
    one8: Constant<Bits<8>>,
    zero8: Constant<Bits<8>>,
}

impl<const S: usize> Default for PopCountRtl<S> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const S: usize> PopCountRtl<S> {
    pub fn new() -> Self {
        assert!((1..=64).contains(&S), "population count of {S} bits (1..=64)");
        Self {
            bits: Default::default(),
            count: Default::default(),
            pc: std::array::from_fn(|_| Default::default()),
            one8: Constant::new(1u64.into()),
            zero8: Constant::new(0u64.into()),
        }
    }
}

impl<const S: usize> Logic for PopCountRtl<S> {
    #[hdl_gen]
    fn update(&mut self) {
        for i in 0..S {
            self.pc[i].next = self.zero8.val();
            if self.bits.val().get_bit(i) {
                self.pc[i].next = self.one8.val();
            }
        }
        for i in S..64 {
            self.pc[i].next = self.zero8.val();
        }
        for k in 0..32 {
            self.pc[64 + k].next = self.pc[2 * k].val() + self.pc[2 * k + 1].val();
        }
        for k in 0..16 {
            self.pc[96 + k].next = self.pc[64 + 2 * k].val() + self.pc[64 + 2 * k + 1].val();
        }
        for k in 0..8 {
            self.pc[112 + k].next = self.pc[96 + 2 * k].val() + self.pc[96 + 2 * k + 1].val();
        }
        for k in 0..4 {
            self.pc[120 + k].next = self.pc[112 + 2 * k].val() + self.pc[112 + 2 * k + 1].val();
        }
        for k in 0..2 {
            self.pc[124 + k].next = self.pc[120 + 2 * k].val() + self.pc[120 + 2 * k + 1].val();
        }
        self.pc[126].next = self.pc[124].val() + self.pc[125].val();
        self.count.next = self.pc[126].val();
    }
}
