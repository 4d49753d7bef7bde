//! Per-VC credit counter, the upstream view of a downstream buffer (RTL twin of
//! `hw::noc::credit::CreditCounterCl`).
//!
//! Next state is exactly `CreditCounterCl::next(send, credit)`: a returned credit is applied
//! before a send, so a send and a credit in the same cycle cancel. `can_send = credits != 0`.
//! Reset loads the full buffer depth (all downstream slots free) and clears `err`.
//!
//! Illegal traffic (a send at 0 credits, a credit at full depth) is a bug in the *user* of
//! the counter. It is guarded identically in CL and RTL (issue 5): the illegal event is
//! dropped, so the count saturates at 0 / `depth` instead of wrapping to 2^W − 1, and the
//! sticky `err` output goes high until reset. The lockstep tests drive illegal traffic too
//! and compare `err` every cycle.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rust_hdl::prelude::*;

use crate::cosim::{record, PortTrace};
use crate::export::{boxed, BlockDef, ParamSet};
use crate::RtlError;

/// Credit counter of width `W` bits for a downstream buffer of `depth` flits
/// (`1 <= depth < 2^W`).
///
/// Port coupling: `can_send`, `credits`, `err`: registered (driven from `credit_cnt.q`); `send`,
/// `credit`: sampled at the rising clock edge.
#[derive(LogicBlock)]
pub struct CreditCounterRtl<const W: usize> {
    /// Single clock; the counter updates on its rising edge.
    pub clock: Signal<In, Clock>,
    /// Synchronous, active-high reset: credits return to `depth`.
    pub reset: Signal<In, Bit>,
    /// A flit is sent downstream this cycle (consumes one credit).
    pub send: Signal<In, Bit>,
    /// A credit comes back from downstream this cycle (one buffer slot freed).
    pub credit: Signal<In, Bit>,
    /// At least one credit is available. registered.
    pub can_send: Signal<Out, Bit>,
    /// Credits available now. registered.
    pub credits: Signal<Out, Bits<W>>,
    /// Sticky error: a send without credit or a credit beyond depth since reset. registered.
    pub err: Signal<Out, Bit>,
    /// Credits available (the counter register).
    credit_cnt: DFF<Bits<W>>,
    /// The sticky error register behind `err`.
    err_q: DFF<Bit>,
    /// Downstream buffer depth: the reset value and the upper bound of `credit_cnt`.
    depth: Constant<Bits<W>>,
    /// `1` at width W, so the `+1`/`-1` in the Verilog are width-matched.
    one: Constant<Bits<W>>,
    /// The next count without a send and with one, formed from the register and `credit`
    /// alone, and whether a send leaves the count as it is (a credit under depth cancels
    /// it; a send at 0 is dropped), so `send` only selects (it is the late input: in the
    /// router it is the end of the switch allocation).
    cnt_n: Signal<Local, Bits<W>>,
    cnt_s: Signal<Local, Bits<W>>,
    keep: Signal<Local, Bit>,
}

impl<const W: usize> CreditCounterRtl<W> {
    /// Builds a counter for a downstream buffer of `depth` flits. Panics (a configuration bug)
    /// when `depth` is 0 or does not fit in `W` bits.
    pub fn new(depth: u64) -> Self {
        assert!(
            (1..=32).contains(&W),
            "credit counter width {W} outside 1..=32"
        );
        assert!(depth >= 1, "credit counter depth must be >= 1");
        assert!(
            depth < (1u64 << W),
            "depth {depth} does not fit the {W}-bit credit counter"
        );
        Self {
            clock: Default::default(),
            reset: Default::default(),
            send: Default::default(),
            credit: Default::default(),
            can_send: Default::default(),
            credits: Default::default(),
            err: Default::default(),
            credit_cnt: Default::default(),
            err_q: Default::default(),
            depth: Constant::new(depth.into()),
            one: Constant::new(1u64.into()),
            cnt_n: Default::default(),
            cnt_s: Default::default(),
            keep: Default::default(),
        }
    }

    /// The configured downstream depth.
    pub fn depth(&self) -> u64 {
        self.depth.val().to_u64()
    }
}

impl<const W: usize> Logic for CreditCounterRtl<W> {
    #[hdl_gen]
    fn update(&mut self) {
        // 1. Clock the registers; hold by default (send & credit, or neither, cancel).
        dff_setup!(self, clock, credit_cnt, err_q);
        // 2./4. Outputs are registered: straight from the registers.
        self.credits.next = self.credit_cnt.q.val();
        self.can_send.next = self.credit_cnt.q.val().any();
        self.err.next = self.err_q.q.val();
        // 3. Next state: the credit first, then the send, each guarded (saturate + err). Both
        //    outcomes are formed first and `send` selects the count last: without a send a
        //    credit under depth counts; with one the count drops unless a credit under depth
        //    cancels it or it is 0 (a send without credit is not counted: no wrap to
        //    2^W - 1; a credit beyond depth is dropped and the send still counts).
        self.cnt_n.next = self.credit_cnt.q.val();
        if self.credit.val() & (self.credit_cnt.q.val() != self.depth.val()) {
            self.cnt_n.next = self.credit_cnt.q.val() + self.one.val();
        }
        self.keep.next = (self.credit.val() & (self.credit_cnt.q.val() != self.depth.val()))
            | !self.credit_cnt.q.val().any();
        self.cnt_s.next = self.credit_cnt.q.val() - self.one.val();
        if self.keep.val() {
            self.cnt_s.next = self.credit_cnt.q.val();
        }
        if self.send.val() {
            self.credit_cnt.d.next = self.cnt_s.val();
        } else {
            self.credit_cnt.d.next = self.cnt_n.val();
        }
        if self.send.val() & !self.credit.val() & !self.credit_cnt.q.val().any() {
            self.err_q.d.next = true;
        }
        if self.credit.val() & (self.credit_cnt.q.val() == self.depth.val()) {
            self.err_q.d.next = true;
        }
        if self.reset.val() {
            self.credit_cnt.d.next = self.depth.val();
            self.err_q.d.next = false;
        }
    }
}

/// Declares a named alias for a standard credit-counter width (S3).
#[macro_export]
macro_rules! declare_credit_counter {
    ($name: ident, $w: expr) => {
        #[doc = concat!("Credit counter, ", stringify!($w), "-bit.")]
        pub type $name = $crate::credit_counter::CreditCounterRtl<$w>;
    };
}

// Router input buffers are at most 8 flits deep per VC by default; 4 bits hold 0..=15.
declare_credit_counter!(CreditCounter4Rtl, 4);
// Wide counter for the UCIe die-to-die link, whose buffers cover the long round trip.
declare_credit_counter!(CreditCounter8Rtl, 8);

/// One wish per cycle: `(reset, want_send, want_credit, illegal)`. A legal wish becomes a send
/// only when a credit is available and a credit only when a flit is downstream; an illegal one
/// is applied as is (exercising the guard). Phases of heavy sending (drain to 0 credits) and
/// heavy returning (refill to depth); `illegal_p` of the cycles skip the legality check.
/// Shared by the lockstep tests (legalized by the CL model) and the co-sim recorder
/// (legalized by the RTL's own `can_send`).
pub fn wishes(cycles: usize, seed: u64, illegal_p: f64) -> Vec<(bool, bool, bool, bool)> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut p_send = 0.5;
    (0..cycles)
        .map(|c| {
            if c % 29 == 0 {
                p_send = [0.1, 0.5, 0.9][rng.gen_range(0..3)];
            }
            (
                rng.gen_bool(0.005),
                rng.gen_bool(p_send),
                rng.gen_bool(1.0 - p_send),
                rng.gen_bool(illegal_p),
            )
        })
        .collect()
}

/// Co-sim recorder: [`wishes`] with 2 % illegal cycles on a fresh counter, legalized against
/// the counter's registered `can_send` and a local count of flits in flight (reset at cycle 0).
pub fn record_credit_counter<const W: usize>(
    module: &str,
    depth: u64,
    cycles: usize,
    seed: u64,
) -> Result<PortTrace, RtlError> {
    let wishes = wishes(cycles, seed, 0.02);
    let mut in_flight = 0u64;
    record(
        module,
        CreditCounterRtl::<W>::new(depth),
        cycles,
        |u| &mut u.clock,
        move |c, u| {
            let (reset, want_send, want_credit, illegal) = wishes[c];
            let reset = reset || c == 0;
            // `can_send` is registered: already settled for this cycle.
            let send = want_send && (illegal || u.can_send.val());
            let credit = want_credit && (illegal || in_flight > 0);
            u.reset.next = reset;
            u.send.next = send;
            u.credit.next = credit;
            in_flight = if reset {
                0
            } else {
                in_flight.saturating_sub(credit as u64) + send as u64
            };
        },
    )
}

/// Export registration: the router's per-VC counter (8-flit buffers).
pub const EXPORT: BlockDef = BlockDef {
    name: "credit_counter",
    top: false,
    domain: crate::export::ModelDomain::PkgCore,
    cosim_cycles: 4096,
    sets: &[ParamSet {
        module: "credit_counter_8",
        rust_type: "CreditCounter4Rtl",
        params: &[("width", 4), ("depth", 8)],
        ecp5_clock_mhz: 100,
        build: || boxed(CreditCounter4Rtl::new(8)),
        recorder: Some(|cycles, seed| {
            record_credit_counter::<4>("credit_counter_8", 8, cycles, seed)
        }),
    }],
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(
        not(feature = "yosys"),
        ignore = "needs yosys (enable feature `yosys`)"
    )]
    fn credit_counter_synthesizable() {
        let mut uut = CreditCounter4Rtl::new(8);
        uut.connect_all();
        let vlog = generate_verilog(&uut);
        yosys_validate("waferstream_credit_counter_4", &vlog).unwrap();
        let mut uut = CreditCounter8Rtl::new(200);
        uut.connect_all();
        let vlog = generate_verilog(&uut);
        yosys_validate("waferstream_credit_counter_8", &vlog).unwrap();
    }
}
