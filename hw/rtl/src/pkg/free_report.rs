//! The chiplet controller's Rule-5 free-slot report (`FreeReportRtl<S>`): the CL's
//! `free_report` and its `reported` register — the value of the status link to the IO die's
//! Rule-5 load arbiter, sent when it changes or when a load was assigned this cycle.
//!
//! ```text
//!  free (S bits) ──► popcount − reserve − fifo_len (floored at 0) ──► granted room (net)
//!  ung (S bits) ──► popcount + fifo_ung ──► pre = min(net, half − ung), 0 once ung ≥ half
//!  (net, pre) ≠ last report, or resend ──► valid (with enable); last report ◄─ (net, pre)
//! ```
//!
//! Room for a granted expert's micro-slice is every free slot beyond the D2D reserve, net of
//! the loads already assigned and not issued (the Rule-5 FIFO); pre-loads (ungranted experts)
//! may hold at most half the ring (Rule 4's cap), counting the ungranted slices both in the
//! ring and in the FIFO. The inputs are the state after this cycle's edge (the CL reports
//! after its `step`).
//!
//! Port coupling: `valid`, `granted`, `preload` comb in every input but `reset`; the last
//! report is registered (reset: 0/0).

use rust_hdl::prelude::*;

/// Rule-5 report of an `S`-slot ring (1..=64).
#[derive(LogicBlock)]
pub struct FreeReportRtl<const S: usize> {
    pub clock: Signal<In, Clock>,
    /// Synchronous reset: the last report is 0/0.
    pub reset: Signal<In, Bit>,
    /// Rule 5 is on and this is not a layer-start or table-write cycle.
    pub enable: Signal<In, Bit>,
    /// Report even if unchanged (a load was assigned this cycle). (Not `force`: a Verilog
    /// keyword.)
    pub resend: Signal<In, Bit>,
    /// Free slots after the edge (existing, not live).
    pub free: Signal<In, Bits<S>>,
    /// Live slots after the edge whose expert is not granted.
    pub ung: Signal<In, Bits<S>>,
    /// Rule-5 FIFO entries after the edge, and how many of them are of ungranted experts.
    pub fifo_len: Signal<In, Bits<8>>,
    pub fifo_ung: Signal<In, Bits<8>>,
    /// The report of this cycle.
    pub valid: Signal<Out, Bit>,
    pub granted: Signal<Out, Bits<16>>,
    pub preload: Signal<Out, Bits<16>>,

    rep_g: DFF<Bits<16>>,
    rep_p: DFF<Bits<16>>,
    cnt: Signal<Local, Bits<8>>,
    free_f: Signal<Local, Bits<8>>,
    net: Signal<Local, Bits<8>>,
    ung_f: Signal<Local, Bits<8>>,
    pre: Signal<Local, Bits<8>>,
    reserve: Constant<Bits<8>>,
    half: Constant<Bits<8>>,
    /// Sized constants (a Rust literal is a 32-bit Verilog constant: WIDTH) and the 16-bit
    /// weights 2^b that zero-extend the 8-bit counts into the 16-bit report.
    zero8: Constant<Bits<8>>,
    one8: Constant<Bits<8>>,
    zero16: Constant<Bits<16>>,
    bit16: [Constant<Bits<16>>; 8],
    net16: Signal<Local, Bits<16>>,
    pre16: Signal<Local, Bits<16>>,
}

impl<const S: usize> FreeReportRtl<S> {
    /// `slots` ring slots exist (≤ S; half of them, rounded up, is the pre-load cap) and
    /// `reserve` of them are kept for D2D arrivals.
    pub fn new(slots: usize, reserve: u32) -> Self {
        assert!((1..=64).contains(&S) && (1..=S).contains(&slots), "{slots} slots in a {S}-slot report");
        Self {
            clock: Default::default(),
            reset: Default::default(),
            enable: Default::default(),
            resend: Default::default(),
            free: Default::default(),
            ung: Default::default(),
            fifo_len: Default::default(),
            fifo_ung: Default::default(),
            valid: Default::default(),
            granted: Default::default(),
            preload: Default::default(),
            rep_g: Default::default(),
            rep_p: Default::default(),
            cnt: Default::default(),
            free_f: Default::default(),
            net: Default::default(),
            ung_f: Default::default(),
            pre: Default::default(),
            reserve: Constant::new((reserve as u64).into()),
            half: Constant::new((slots as u64).div_ceil(2).into()),
            zero8: Constant::new(0u64.into()),
            one8: Constant::new(1u64.into()),
            zero16: Constant::new(0u64.into()),
            bit16: std::array::from_fn(|b| Constant::new((1u64 << b).into())),
            net16: Default::default(),
            pre16: Default::default(),
        }
    }
}

impl<const S: usize> Logic for FreeReportRtl<S> {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, rep_g, rep_p);
        // ---- room for granted experts: free beyond the reserve, net of the FIFO
        self.cnt.next = self.zero8.val();
        for i in 0..S {
            if self.free.val().get_bit(i) {
                self.cnt.next = self.cnt.val() + self.one8.val();
            }
        }
        self.free_f.next = self.cnt.val();
        self.net.next = self.zero8.val();
        if self.free_f.val() > self.reserve.val() {
            self.net.next = self.free_f.val() - self.reserve.val();
        }
        if self.net.val() > self.fifo_len.val() {
            self.net.next = self.net.val() - self.fifo_len.val();
        } else {
            self.net.next = self.zero8.val();
        }
        // ---- room for pre-loads: below half the ring of ungranted slices
        self.cnt.next = self.zero8.val();
        for i in 0..S {
            if self.ung.val().get_bit(i) {
                self.cnt.next = self.cnt.val() + self.one8.val();
            }
        }
        self.ung_f.next = self.cnt.val() + self.fifo_ung.val();
        self.pre.next = self.zero8.val();
        if self.ung_f.val() < self.half.val() {
            self.pre.next = self.half.val() - self.ung_f.val();
            if self.net.val() < self.pre.val() {
                self.pre.next = self.net.val();
            }
        }
        // ---- the report, when it changed (or a load was assigned)
        // (net, pre) zero-extended to the report's 16 bits, bit by bit (wires).
        self.net16.next = self.zero16.val();
        self.pre16.next = self.zero16.val();
        for b in 0..8 {
            if self.net.val().get_bit(b) {
                self.net16.next = self.net16.val() | self.bit16[b].val();
            }
            if self.pre.val().get_bit(b) {
                self.pre16.next = self.pre16.val() | self.bit16[b].val();
            }
        }
        self.valid.next = false;
        self.granted.next = self.zero16.val();
        self.preload.next = self.zero16.val();
        if self.enable.val() & ((self.net16.val() != self.rep_g.q.val()) | (self.pre16.val() != self.rep_p.q.val()) | self.resend.val()) {
            self.valid.next = true;
            self.granted.next = self.net16.val();
            self.preload.next = self.pre16.val();
            self.rep_g.d.next = self.net16.val();
            self.rep_p.d.next = self.pre16.val();
        }
        if self.reset.val() {
            self.rep_g.d.next = self.zero16.val();
            self.rep_p.d.next = self.zero16.val();
        }
    }
}

// ---------------------------------------------------------------- export

/// The exported size: the standard chiplet's report (`chiplet_ctrl_s8_e16`: 8 slots, reserve 1).
pub type FreeReport8Rtl = FreeReportRtl<8>;

/// Co-sim recorder: reset in cycle 0, then random free / ungranted masks (disjoint, as live
/// and free slots are), FIFO lengths 0..8 with an ungranted share, `resend` (p 0.1) and
/// `enable` (p 0.9); a mask is held for a few cycles at a time so that unchanged reports
/// (no `valid`) occur.
pub fn record_free_report_8(module: &str, cycles: usize, seed: u64) -> Result<crate::cosim::PortTrace, crate::RtlError> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut cur = (0u64, 0u64, 0u64, 0u64);
    // (reset, enable, resend, free, ung, fifo_len, fifo_ung)
    let stim: Vec<(bool, bool, bool, u64, u64, u64, u64)> = (0..cycles)
        .map(|c| {
            if rng.gen_bool(0.3) {
                let free = rng.gen_range(0..256u64);
                let ung = rng.gen_range(0..256u64) & !free;
                let len = rng.gen_range(0..9u64);
                cur = (free, ung, len, rng.gen_range(0..=len));
            }
            (c == 0, rng.gen_bool(0.9), rng.gen_bool(0.1), cur.0, cur.1, cur.2, cur.3)
        })
        .collect();
    crate::cosim::record(module, FreeReport8Rtl::new(8, 1), cycles, |u| &mut u.clock, |c, u| {
        let (reset, enable, resend, free, ung, len, fung) = stim[c];
        u.reset.next = reset;
        u.enable.next = enable;
        u.resend.next = resend;
        u.free.next = free.into();
        u.ung.next = ung.into();
        u.fifo_len.next = len.into();
        u.fifo_ung.next = fung.into();
    })
}

/// Export registration: linted and co-simulated like the other leaf blocks.
pub const EXPORT: crate::export::BlockDef = crate::export::BlockDef {
    name: "free_report",
    top: false,
    domain: crate::export::ModelDomain::PkgCore,
    cosim_cycles: 4096,
    sets: &[crate::export::ParamSet {
        module: "free_report_s8",
        rust_type: "FreeReport8Rtl",
        params: &[("slots", 8), ("reserve", 1)],
        ecp5_clock_mhz: 100,
        build: || crate::export::boxed(FreeReport8Rtl::new(8, 1)),
        recorder: Some(|cycles, seed| record_free_report_8("free_report_s8", cycles, seed)),
    }],
};
