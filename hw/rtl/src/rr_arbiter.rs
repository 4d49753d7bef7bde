//! Round-robin arbiter (RTL twin of `hw::noc::arbiter::RrArbiterCl`).
//!
//! Semantics, identical to the CL model and checked cycle-by-cycle by
//! `tests/rtl_noc_rr_arbiter.rs`:
//! * `grant` is one-hot: the first requester at or after the priority pointer, wrapping at `N`.
//!   It is combinational from `req` and the pointer register (no cycle of latency), so a
//!   switch allocator can use it in the same cycle it asks.
//! * The pointer moves to one past the granted requester **only when the grant is used**
//!   (`fire & grant_valid`), never on a mere request (BookSim/PyMTL `update_on_grant`).
//!
//! Implementation notes (why it looks like this):
//! * The pointer is held **one-hot** (`ptr_oh`, as PyMTL's `RoundRobinArbiterEn` holds its
//!   priority) rather than binary. That keeps the block generic in `N` alone on stable Rust
//!   (no `clog2(N)` const-generic width) and makes the wrap a rotate, not a modulo.
//! * The priority search is [`RrPickRtl`]'s, with an empty fallback set: the classic masked
//!   two-pass priority encoder — requesters at or after the pointer win over the wrapped ones;
//!   within each pass the lowest set bit is isolated with `x & !(p << 1)`, `p` the inclusive
//!   prefix OR of `x` in six shift-OR steps (it was `x & (!x + 1)`: the same bit, but a carry
//!   chain through all `N` bits in the allocators' critical paths). The arbiter is the pick
//!   plus the pointer register, so the router's shared-pointer picks and this arbiter search
//!   with one circuit. No loops, so the Verilog stays small and each local is written once
//!   (rust-hdl's settle loop and Verilog's blocking `always @(*)` then agree by
//!   construction).

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rust_hdl::prelude::*;

use crate::cosim::{record, PortTrace};
use crate::export::{boxed, BlockDef, ParamSet};
use crate::RtlError;

/// Round-robin arbiter over `N` requesters (1..=64).
///
/// Port coupling (Chisel-style): `grant`/`grant_valid`: comb(req, ptr_oh); `fire`: sampled at
/// the rising clock edge.
#[derive(LogicBlock)]
pub struct RrArbiterRtl<const N: usize> {
    /// Single clock; every register is updated on its rising edge.
    pub clock: Signal<In, Clock>,
    /// Synchronous, active-high reset: priority returns to requester 0.
    pub reset: Signal<In, Bit>,
    /// Request mask, bit i = requester i.
    pub req: Signal<In, Bits<N>>,
    /// The grant shown this cycle is used: move priority past it at the next edge.
    pub fire: Signal<In, Bit>,
    /// One-hot grant (all zeros when nobody requests). comb(req, ptr_oh).
    pub grant: Signal<Out, Bits<N>>,
    /// Some requester was granted (`req != 0`). comb(req).
    pub grant_valid: Signal<Out, Bit>,
    /// Priority pointer, one-hot: the requester with highest priority this cycle.
    ptr_oh: DFF<Bits<N>>,
    /// The search: `req` at/after the pointer, else from requester 0 (no fallback set).
    pick: RrPickRtl<N>,
    /// The pick's empty fallback set.
    none: Constant<Bits<N>>,
    /// `1` at width N: reset value of the pointer. A sized constant, so the emitted Verilog
    /// has no width-mismatched literals.
    one: Constant<Bits<N>>,
    /// Bit N-1 set: a grant to the last requester wraps the pointer to requester 0.
    top_bit: Constant<Bits<N>>,
}

impl<const N: usize> RrArbiterRtl<N> {
    /// Builds the arbiter. `N` is the const-generic width; `n` is the configured requester count
    /// and must match it (rust-hdl-style sanity check, so a mis-sized alias fails at build time
    /// of the model rather than as a silent truncation in Verilog).
    pub fn new(n: usize) -> Self {
        assert!((1..=64).contains(&N), "arbiter width {N} outside 1..=64");
        assert_eq!(n, N, "configured requester count {n} != RTL width {N}");
        Self {
            clock: Default::default(),
            reset: Default::default(),
            req: Default::default(),
            fire: Default::default(),
            grant: Default::default(),
            grant_valid: Default::default(),
            ptr_oh: Default::default(),
            pick: RrPickRtl::new(),
            none: Constant::new(0u64.into()),
            one: Constant::new(1u64.into()),
            top_bit: Constant::new((1u64 << (N - 1)).into()),
        }
    }

    /// Binary value of the priority pointer (for lockstep comparison against
    /// `RrArbiterCl::ptr`). Before the first reset the DFF holds 0, which the logic treats as
    /// pointer 0; this accessor reports that as 0 too. Panics if the register is not one-hot
    /// (a bug in this block, never an input error).
    pub fn ptr(&self) -> u32 {
        let oh = self.ptr_oh.q.val();
        let set: Vec<usize> = (0..N).filter(|&i| oh.get_bit(i)).collect();
        assert!(set.len() <= 1, "arbiter pointer {oh:x} is not one-hot");
        set.first().copied().unwrap_or(0) as u32
    }
}

impl<const N: usize> Default for RrArbiterRtl<N> {
    fn default() -> Self {
        Self::new(N)
    }
}

impl<const N: usize> Logic for RrArbiterRtl<N> {
    #[hdl_gen]
    fn update(&mut self) {
        // 1. Clock the pointer; hold by default.
        dff_setup!(self, clock, ptr_oh);
        // 2. The search (combinational): a requester at/after the pointer wins; otherwise
        //    wrap around.
        self.pick.ptr_oh.next = self.ptr_oh.q.val();
        self.pick.req_a.next = self.req.val();
        self.pick.req_b.next = self.none.val();
        self.grant.next = self.pick.grant.val();
        self.grant_valid.next = self.pick.grant_valid.val();
        // 3. Next pointer: one past the used grant (rotate left by one), reset to requester 0.
        if self.fire.val() & self.grant_valid.val() {
            if (self.grant.val() & self.top_bit.val()).any() {
                self.ptr_oh.d.next = self.one.val();
            } else {
                self.ptr_oh.d.next = self.grant.val() << 1;
            }
        }
        if self.reset.val() {
            self.ptr_oh.d.next = self.one.val();
        }
    }
}

/// Two-class round-robin pick without a pointer register of its own (combinational): the
/// grant is the first requester of `req_a` at or after the one-hot `ptr_oh`, wrapping at `N`
/// (exactly [`RrArbiterRtl`]'s search), or, when `req_a` is empty, the same search over
/// `req_b`. The owner keeps the pointer (and moves it on the used grant), so several picks can
/// share one pointer and run side by side: the router's switch allocator computes the "regular
/// first, else any" choice in one search depth instead of selecting the request first, and
/// each input port's VC choice for every output in parallel with the input arbitration.
///
/// Port coupling: `grant`, `grant_valid`: comb(ptr_oh, req_a, req_b).
#[derive(LogicBlock)]
pub struct RrPickRtl<const N: usize> {
    /// Priority pointer, one-hot (0 is taken as requester 0, as a cleared [`RrArbiterRtl`]).
    pub ptr_oh: Signal<In, Bits<N>>,
    /// Preferred requesters (e.g. the regular class), and the fallback set.
    pub req_a: Signal<In, Bits<N>>,
    pub req_b: Signal<In, Bits<N>>,
    /// One-hot grant (0 when both sets are empty). comb.
    pub grant: Signal<Out, Bits<N>>,
    /// `req_a | req_b` is not empty. comb.
    pub grant_valid: Signal<Out, Bit>,
    /// Bits at or above the pointer: the inclusive prefix OR of `ptr_oh` (no carry chain).
    ge: Signal<Local, Bits<N>>,
    m1: Signal<Local, Bits<N>>,
    m2: Signal<Local, Bits<N>>,
    m3: Signal<Local, Bits<N>>,
    m4: Signal<Local, Bits<N>>,
    m5: Signal<Local, Bits<N>>,
    /// The four searches (a at/after the pointer, a from 0, b likewise), each the lowest set
    /// bit `x & !(p << 1)` of its set, `p` the inclusive prefix OR in shift-OR steps.
    ah: Signal<Local, Bits<N>>,
    bh: Signal<Local, Bits<N>>,
    pah: [Signal<Local, Bits<N>>; 6],
    pal: [Signal<Local, Bits<N>>; 6],
    pbh: [Signal<Local, Bits<N>>; 6],
    pbl: [Signal<Local, Bits<N>>; 6],
    g_ah: Signal<Local, Bits<N>>,
    g_al: Signal<Local, Bits<N>>,
    g_bh: Signal<Local, Bits<N>>,
    g_bl: Signal<Local, Bits<N>>,
}

impl<const N: usize> RrPickRtl<N> {
    pub fn new() -> Self {
        assert!((1..=64).contains(&N), "pick width {N} outside 1..=64");
        Self {
            ptr_oh: Default::default(),
            req_a: Default::default(),
            req_b: Default::default(),
            grant: Default::default(),
            grant_valid: Default::default(),
            ge: Default::default(),
            m1: Default::default(),
            m2: Default::default(),
            m3: Default::default(),
            m4: Default::default(),
            m5: Default::default(),
            ah: Default::default(),
            bh: Default::default(),
            pah: Default::default(),
            pal: Default::default(),
            pbh: Default::default(),
            pbl: Default::default(),
            g_ah: Default::default(),
            g_al: Default::default(),
            g_bh: Default::default(),
            g_bl: Default::default(),
        }
    }
}

impl<const N: usize> Default for RrPickRtl<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Logic for RrPickRtl<N> {
    #[hdl_gen]
    fn update(&mut self) {
        self.m1.next = self.ptr_oh.val() | (self.ptr_oh.val() << 1);
        self.m2.next = self.m1.val() | (self.m1.val() << 2);
        self.m3.next = self.m2.val() | (self.m2.val() << 4);
        self.m4.next = self.m3.val() | (self.m3.val() << 8);
        self.m5.next = self.m4.val() | (self.m4.val() << 16);
        self.ge.next = self.m5.val() | (self.m5.val() << 32);
        self.ah.next = self.req_a.val() & self.ge.val();
        self.bh.next = self.req_b.val() & self.ge.val();
        self.pah[0].next = self.ah.val() | (self.ah.val() << 1);
        self.pal[0].next = self.req_a.val() | (self.req_a.val() << 1);
        self.pbh[0].next = self.bh.val() | (self.bh.val() << 1);
        self.pbl[0].next = self.req_b.val() | (self.req_b.val() << 1);
        self.pah[1].next = self.pah[0].val() | (self.pah[0].val() << 2);
        self.pal[1].next = self.pal[0].val() | (self.pal[0].val() << 2);
        self.pbh[1].next = self.pbh[0].val() | (self.pbh[0].val() << 2);
        self.pbl[1].next = self.pbl[0].val() | (self.pbl[0].val() << 2);
        self.pah[2].next = self.pah[1].val() | (self.pah[1].val() << 4);
        self.pal[2].next = self.pal[1].val() | (self.pal[1].val() << 4);
        self.pbh[2].next = self.pbh[1].val() | (self.pbh[1].val() << 4);
        self.pbl[2].next = self.pbl[1].val() | (self.pbl[1].val() << 4);
        self.pah[3].next = self.pah[2].val() | (self.pah[2].val() << 8);
        self.pal[3].next = self.pal[2].val() | (self.pal[2].val() << 8);
        self.pbh[3].next = self.pbh[2].val() | (self.pbh[2].val() << 8);
        self.pbl[3].next = self.pbl[2].val() | (self.pbl[2].val() << 8);
        self.pah[4].next = self.pah[3].val() | (self.pah[3].val() << 16);
        self.pal[4].next = self.pal[3].val() | (self.pal[3].val() << 16);
        self.pbh[4].next = self.pbh[3].val() | (self.pbh[3].val() << 16);
        self.pbl[4].next = self.pbl[3].val() | (self.pbl[3].val() << 16);
        self.pah[5].next = self.pah[4].val() | (self.pah[4].val() << 32);
        self.pal[5].next = self.pal[4].val() | (self.pal[4].val() << 32);
        self.pbh[5].next = self.pbh[4].val() | (self.pbh[4].val() << 32);
        self.pbl[5].next = self.pbl[4].val() | (self.pbl[4].val() << 32);
        self.g_ah.next = self.ah.val() & !(self.pah[5].val() << 1);
        self.g_al.next = self.req_a.val() & !(self.pal[5].val() << 1);
        self.g_bh.next = self.bh.val() & !(self.pbh[5].val() << 1);
        self.g_bl.next = self.req_b.val() & !(self.pbl[5].val() << 1);
        self.grant_valid.next = (self.req_a.val() | self.req_b.val()).any();
        // Preferred set first; within a set, at/after the pointer first, else wrapped.
        self.grant.next = self.g_bl.val();
        if self.bh.val().any() {
            self.grant.next = self.g_bh.val();
        }
        if self.req_a.val().any() {
            self.grant.next = self.g_al.val();
            if self.ah.val().any() {
                self.grant.next = self.g_ah.val();
            }
        }
    }
}

/// Declares a named alias for a standard arbiter configuration (S3: one alias per standard
/// configuration, so exported module names and tests agree on the widths).
#[macro_export]
macro_rules! declare_rr_arbiter {
    ($name: ident, $n: expr) => {
        #[doc = concat!("Round-robin arbiter, ", stringify!($n), " requesters.")]
        pub type $name = $crate::rr_arbiter::RrArbiterRtl<$n>;
    };
}

// Router switch allocation: one arbiter per output over the 5 router ports (N, E, S, W, local).
declare_rr_arbiter!(RrArbiter5Rtl, 5);
// VC allocation: 5 ports x 2 VCs = 10 competing input VCs per output VC.
declare_rr_arbiter!(RrArbiter10Rtl, 10);

/// One cycle of arbiter stimulus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RrArbiterStim {
    pub reset: bool,
    pub req: u64,
    pub fire: bool,
}

/// All-ones mask of `n` requesters (1..=64).
pub fn req_mask(n: usize) -> u64 {
    if n == 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// Random stimulus: reset for the first cycle, then requests whose density changes every few
/// dozen cycles (sparse masks exercise the wrap, dense ones the fairness), random `fire` and
/// rare mid-run resets. Shared by the lockstep tests and the co-sim recorder.
pub fn stimulus(n: usize, cycles: usize, seed: u64) -> Vec<RrArbiterStim> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut density = 0.5;
    (0..cycles)
        .map(|c| {
            if c % 37 == 0 {
                density = [0.05, 0.2, 0.5, 0.9][rng.gen_range(0..4)];
            }
            let mut req = 0u64;
            for i in 0..n {
                if rng.gen_bool(density) {
                    req |= 1 << i;
                }
            }
            RrArbiterStim {
                reset: c == 0 || rng.gen_bool(0.01),
                req: req & req_mask(n),
                fire: rng.gen_bool(0.7),
            }
        })
        .collect()
}

/// Co-sim recorder: `cycles` cycles of [`stimulus`] on a fresh `RrArbiterRtl<N>`.
pub fn record_rr_arbiter<const N: usize>(
    module: &str,
    cycles: usize,
    seed: u64,
) -> Result<PortTrace, RtlError> {
    let stim = stimulus(N, cycles, seed);
    record(
        module,
        RrArbiterRtl::<N>::new(N),
        cycles,
        |u| &mut u.clock,
        |c, u| {
            u.reset.next = stim[c].reset;
            u.req.next = stim[c].req.into();
            u.fire.next = stim[c].fire;
        },
    )
}

/// Export registration: the router's switch (5) and VC (10) allocation arbiters.
pub const EXPORT: BlockDef = BlockDef {
    name: "rr_arbiter",
    top: false,
    domain: crate::export::ModelDomain::PkgCore,
    cosim_cycles: 4096,
    sets: &[
        ParamSet {
            module: "rr_arbiter_5",
            rust_type: "RrArbiter5Rtl",
            params: &[("n", 5)],
            ecp5_clock_mhz: 100,
            build: || boxed(RrArbiter5Rtl::new(5)),
            recorder: Some(|cycles, seed| record_rr_arbiter::<5>("rr_arbiter_5", cycles, seed)),
        },
        ParamSet {
            module: "rr_arbiter_10",
            rust_type: "RrArbiter10Rtl",
            params: &[("n", 10)],
            ecp5_clock_mhz: 100,
            build: || boxed(RrArbiter10Rtl::new(10)),
            recorder: Some(|cycles, seed| record_rr_arbiter::<10>("rr_arbiter_10", cycles, seed)),
        },
    ],
};

#[cfg(test)]
mod tests {
    use super::*;

    fn synth<const N: usize>(prefix: &str) {
        let mut uut = RrArbiterRtl::<N>::new(N);
        uut.connect_all();
        let vlog = generate_verilog(&uut);
        yosys_validate(prefix, &vlog).unwrap();
    }

    #[test]
    #[cfg_attr(
        not(feature = "yosys"),
        ignore = "needs yosys (enable feature `yosys`)"
    )]
    fn rr_arbiter_synthesizable() {
        synth::<5>("waferstream_rr_arbiter_5");
        synth::<10>("waferstream_rr_arbiter_10");
        synth::<1>("waferstream_rr_arbiter_1");
        synth::<64>("waferstream_rr_arbiter_64");
    }
}
