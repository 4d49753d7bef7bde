//! NI-Balancer trigger `NiTriggerRtl` (RTL twin of `hw::wafer::balancer::TriggerCl`, paper
//! Eq. 2 for one layer): the device loads one per cycle into a sum and a max, then the
//! imbalance against α, exactly.
//!
//! ```text
//!  go: dt_ok = since > β ─► Scan: sum += in_load(dev), max = max(max, in_load(dev)), one device per cycle
//!                        ─► after the last: max · (n·P) > sum · (P + a) ?  (α = a / P, its decimal)  ─► Fin ─► Done
//! ```
//!
//! **Exactness.** The CL computes `(max − mean) / mean > α` in f64 with `mean = sum / n`. For
//! `sum > 0` that is `max · n / sum − 1 > a / P`, i.e. the integer compare
//! `max · (n·P) > sum · (P + a)` with α as the rational of its shortest decimal (`0.2` = 2/10);
//! the host writes the two constants `n·P` and `P + a` (`cfg_np`, `cfg_pa`). The two sides
//! differ by at least one unit when they differ, and the stand-in (`ni_balancer_swap`) checks
//! at load that the CL's rounding (of the mean, the difference, the quotient and of α itself)
//! stays below that, so only an exact tie can decide differently: the block flags it on `tie`.
//! `sum = 0` (a zero mean) adds nothing, as in the CL. Loads and the sum are 32 bits (checked
//! at load), the products 64 bits ([`Mul32Rtl`] twice).
//!
//! Cycles, as the CL: `dt_ok` false → 1; else `n` (scan) + 1 (the term) + 1 (the end).

use rust_hdl::prelude::*;

use super::mul::Mul32Rtl;

/// State encoding.
pub mod st {
    pub const SCAN: u64 = 0;
    /// The layer's term was taken in the last scan cycle (the CL's step after the last device).
    pub const FIN: u64 = 2;
    pub const DONE: u64 = 3;
    pub const IDLE: u64 = 4;
}

#[derive(LogicBlock, Default)]
pub struct NiTriggerRtl {
    pub clock: Signal<In, Clock>,
    /// Synchronous reset: idle.
    pub reset: Signal<In, Bit>,
    /// Devices of the layer; `n·P` and `P + a` for α = a / P; β; static from `go`.
    pub cfg_n: Signal<In, Bits<16>>,
    pub cfg_np: Signal<In, Bits<32>>,
    pub cfg_pa: Signal<In, Bits<32>>,
    pub cfg_beta: Signal<In, Bits<64>>,
    /// Cycles since the last migration (sampled at `go`).
    pub since: Signal<In, Bits<64>>,
    /// Start (idle or done).
    pub go: Signal<In, Bit>,
    /// The load counter of device `dev` (read in each scan cycle).
    pub in_load: Signal<In, Bits<32>>,

    pub state: Signal<Out, Bits<3>>,
    pub dev: Signal<Out, Bits<16>>,
    pub done: Signal<Out, Bit>,
    /// Migrate (valid when done): Δt > β and the imbalance above α.
    pub fire: Signal<Out, Bit>,
    /// The imbalance equalled α exactly (sticky until the next `go`).
    pub tie: Signal<Out, Bit>,
    pub cycles: Signal<Out, Bits<32>>,

    state_q: DFF<Bits<3>>,
    dev_q: DFF<Bits<16>>,
    dt_ok_q: DFF<Bit>,
    sum_q: DFF<Bits<32>>,
    max_q: DFF<Bits<32>>,
    fire_q: DFF<Bit>,
    tie_q: DFF<Bit>,
    cycles_q: DFF<Bits<32>>,
    lhs_mul: Mul32Rtl,
    rhs_mul: Mul32Rtl,
}

impl Logic for NiTriggerRtl {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, state_q, dev_q, dt_ok_q, sum_q, max_q, fire_q, tie_q, cycles_q);
        self.lhs_mul.a.next = self.max_q.q.val();
        self.lhs_mul.b.next = self.cfg_np.val();
        self.rhs_mul.a.next = self.sum_q.q.val();
        self.rhs_mul.b.next = self.cfg_pa.val();
        self.state.next = self.state_q.q.val();
        self.dev.next = self.dev_q.q.val();
        self.done.next = self.state_q.q.val() == 3;
        self.fire.next = self.fire_q.q.val() & self.dt_ok_q.q.val();
        self.tie.next = self.tie_q.q.val();
        self.cycles.next = self.cycles_q.q.val();
        if self.state_q.q.val() < 3 {
            self.cycles_q.d.next = self.cycles_q.q.val() + 1;
        }
        if self.state_q.q.val() == 0 {
            if !self.dt_ok_q.q.val() {
                self.state_q.d.next = 3.into();
            } else if self.dev_q.q.val() < self.cfg_n.val() {
                self.sum_q.d.next = self.sum_q.q.val() + self.in_load.val();
                if self.in_load.val() > self.max_q.q.val() {
                    self.max_q.d.next = self.in_load.val();
                }
                self.dev_q.d.next = self.dev_q.q.val() + 1;
            } else {
                // The layer's term: (max − mean) / mean > α, as integers; a zero mean adds
                // nothing.
                if self.sum_q.q.val() != 0 {
                    self.fire_q.d.next = self.lhs_mul.p.val() > self.rhs_mul.p.val();
                    self.tie_q.d.next = self.lhs_mul.p.val() == self.rhs_mul.p.val();
                }
                self.state_q.d.next = 2.into();
            }
        }
        if self.state_q.q.val() == 2 {
            self.state_q.d.next = 3.into();
        }
        if ((self.state_q.q.val() == 4) | (self.state_q.q.val() == 3)) & self.go.val() {
            self.state_q.d.next = 0.into();
            self.dev_q.d.next = 0.into();
            self.dt_ok_q.d.next = self.since.val() > self.cfg_beta.val();
            self.sum_q.d.next = 0.into();
            self.max_q.d.next = 0.into();
            self.fire_q.d.next = false;
            self.tie_q.d.next = false;
            self.cycles_q.d.next = 0.into();
        }
        if self.reset.val() {
            self.state_q.d.next = 4.into();
            self.dev_q.d.next = 0.into();
            self.fire_q.d.next = false;
            self.tie_q.d.next = false;
            self.cycles_q.d.next = 0.into();
        }
    }
}

/// Co-sim recorder: trigger run after trigger run (0..=8 devices, α from a set of decimals,
/// Δt on both sides of β), each started with `go` and given its n + 3 cycles; `in_load` is
/// random every cycle (the block reads it at its cursor); a reset in cycle 0.
pub fn record_ni_trigger(module: &str, cycles: usize, seed: u64) -> Result<crate::cosim::PortTrace, crate::RtlError> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    // (reset, go, n, np, pa, beta, since, in_load)
    let mut stim: Vec<(bool, bool, u64, u64, u64, u64, u64, u64)> = vec![(true, false, 0, 0, 0, 0, 0, 0)];
    while stim.len() < cycles {
        let n = rng.gen_range(0..=8u64);
        let (a, p) = [(0u64, 1u64), (2, 10), (25, 100), (5, 10), (1, 1), (15, 10)][rng.gen_range(0..6)];
        let (beta, since) = (rng.gen_range(0..3u64), rng.gen_range(0..4u64));
        let same = rng.gen_bool(0.3);
        let v = rng.gen_range(0..200u64);
        for c in 0..(n + 4) {
            let l = if same { v } else { rng.gen_range(0..200u64) };
            stim.push((false, c == 0, n, n * p, p + a, beta, since, l));
        }
    }
    crate::cosim::record(
        module,
        NiTriggerRtl::default(),
        cycles,
        |u| &mut u.clock,
        |c, u| {
            let s = stim[c];
            u.reset.next = s.0;
            u.go.next = s.1;
            u.cfg_n.next = s.2.into();
            u.cfg_np.next = s.3.into();
            u.cfg_pa.next = s.4.into();
            u.cfg_beta.next = s.5.into();
            u.since.next = s.6.into();
            u.in_load.next = s.7.into();
        },
    )
}

/// Export registration.
pub const EXPORT: crate::export::BlockDef = crate::export::BlockDef {
    name: "ni_trigger",
    top: false,
    domain: crate::export::ModelDomain::WaferCore,
    cosim_cycles: 4096,
    sets: &[crate::export::ParamSet {
        module: "ni_trigger",
        rust_type: "NiTriggerRtl",
        params: &[("load_bits", 32)],
        // ECP5-85F: 58.8-59.5 MHz at seeds 1-3 (docs/rtl.md, "Timing closure at the prototype clocks").
        ecp5_clock_mhz: 55,
        build: || crate::export::boxed(NiTriggerRtl::default()),
        recorder: Some(|cycles, seed| record_ni_trigger("ni_trigger", cycles, seed)),
    }],
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(not(feature = "yosys"), ignore = "needs yosys (feature `yosys`)")]
    fn ni_trigger_synthesizable() {
        let mut uut = NiTriggerRtl::default();
        uut.connect_all();
        check_all(&uut).unwrap();
        yosys_validate("waferstream_ni_trigger", &generate_verilog(&uut)).unwrap();
    }
}
