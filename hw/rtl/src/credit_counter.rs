//! Per-VC credit counter, the upstream view of a downstream buffer (RTL twin of
//! `hw::noc::credit::CreditCounterCl`).
//!
//! Next state is exactly `CreditCounterCl::next(send, credit)`: `credits + credit - send`, so a
//! send and a returned credit in the same cycle cancel. `can_send = credits != 0`. Reset loads
//! the full buffer depth (all downstream slots free).
//!
//! Illegal traffic (send without credit, credit beyond depth) is a bug in the *user* of the
//! counter. CL panics on it; RTL would wrap, and the lockstep tests assert it never happens
//! (`sim_assert!`-style checks live in the tests, never inside `#[hdl_gen]`, see S10).

use rust_hdl::prelude::*;

/// Credit counter of width `W` bits for a downstream buffer of `depth` flits
/// (`1 <= depth < 2^W`).
///
/// Port coupling: `can_send`, `credits`: registered (driven from `credit_cnt.q`); `send`,
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
    /// Credits available (the counter register).
    credit_cnt: DFF<Bits<W>>,
    /// Downstream buffer depth: the reset value and the upper bound of `credit_cnt`.
    depth: Constant<Bits<W>>,
    /// `1` at width W, so the `+1`/`-1` in the Verilog are width-matched.
    one: Constant<Bits<W>>,
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
            credit_cnt: Default::default(),
            depth: Constant::new(depth.into()),
            one: Constant::new(1u64.into()),
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
        // 1. Clock the counter; hold by default (send & credit, or neither, cancel).
        dff_setup!(self, clock, credit_cnt);
        // 2./4. Outputs are registered: straight from the counter.
        self.credits.next = self.credit_cnt.q.val();
        self.can_send.next = self.credit_cnt.q.val().any();
        // 3. Next state = credits + credit - send.
        if self.send.val() & !self.credit.val() {
            self.credit_cnt.d.next = self.credit_cnt.q.val() - self.one.val();
        }
        if self.credit.val() & !self.send.val() {
            self.credit_cnt.d.next = self.credit_cnt.q.val() + self.one.val();
        }
        if self.reset.val() {
            self.credit_cnt.d.next = self.depth.val();
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
