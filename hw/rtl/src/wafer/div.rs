//! Sequential unsigned divider (radix-2 restoring, one quotient bit per cycle): `q = a / b`,
//! `r = a % b` for 16-bit operands, in 16 cycles. The mapping controller's tile-shape unit
//! divides mesh sizes (at most a few hundred) for each candidate width (`n / w`, `cols / w`,
//! then `rows / (n / w)`); the CL counts the same 16 cycles per division
//! (`hw::wafer::mapping::SHAPE_CYCLES`).
//!
//! Why sequential: the first version was unrolled (16 stages in one cycle) and two of them
//! were chained (`rows / (n / w)`), which closed at 3.0 MHz on an ECP5-85F (519 logic levels
//! from the width register to the ring grid). One stage per cycle is a 16-bit compare and
//! subtract between registers.
//!
//! Protocol: `start` loads `a` and `b` and performs the first step in the same cycle; `run`
//! performs one more step; with neither, the registers hold. After `start` and 15 `run`
//! cycles the registers hold the result (`q`, `r`); `q_next` / `r_next` are the values the
//! registers take at this edge (the last step's result, combinationally, in its own cycle).
//! Operands below 2^15 (the trial value `2·rem + 1 < 2·b` needs the spare top bit); `b = 0`
//! gives `q = all ones, r = a` (never used: candidates start at 1).

use rust_hdl::prelude::*;

/// Operand width of the divider, and its cycles per division.
pub const DIV_W: usize = 16;

/// 16-step sequential restoring divider (operands < 2^15).
#[derive(LogicBlock)]
pub struct DivRtl {
    pub clock: Signal<In, Clock>,
    pub start: Signal<In, Bit>,
    pub run: Signal<In, Bit>,
    pub a: Signal<In, Bits<16>>,
    pub b: Signal<In, Bits<16>>,
    /// The registers: the result once 16 steps have run.
    pub q: Signal<Out, Bits<16>>,
    pub r: Signal<Out, Bits<16>>,
    /// This cycle's step result (what `q` / `r` become at the edge).
    pub q_next: Signal<Out, Bits<16>>,
    pub r_next: Signal<Out, Bits<16>>,
    /// `r_next == 0`, as two equality compares of the trial value (`t == b`: the step
    /// subtracts to 0; `t == 0`: nothing to subtract) instead of a test of the subtractor's
    /// result: no carry chain between the registers and this bit.
    pub z_next: Signal<Out, Bit>,
    /// Partial remainder, quotient bits so far, the dividend's bits not yet shifted in (MSB
    /// first), the divisor.
    rem_r: DFF<Bits<16>>,
    quo_r: DFF<Bits<16>>,
    sh_r: DFF<Bits<16>>,
    b_r: DFF<Bits<16>>,
    /// The step's operands (the loaded values on `start`, else the registers) and its trial
    /// value `2·rem + bit`.
    rem: Signal<Local, Bits<16>>,
    quo: Signal<Local, Bits<16>>,
    sh: Signal<Local, Bits<16>>,
    dv: Signal<Local, Bits<16>>,
    t: Signal<Local, Bits<16>>,
    msb: Constant<Bits<16>>,
    zero: Constant<Bits<16>>,
    one: Constant<Bits<16>>,
}

impl DivRtl {
    pub fn new() -> Self {
        Self {
            clock: Default::default(),
            start: Default::default(),
            run: Default::default(),
            a: Default::default(),
            b: Default::default(),
            q: Default::default(),
            r: Default::default(),
            q_next: Default::default(),
            r_next: Default::default(),
            z_next: Default::default(),
            rem_r: Default::default(),
            quo_r: Default::default(),
            sh_r: Default::default(),
            b_r: Default::default(),
            rem: Default::default(),
            quo: Default::default(),
            sh: Default::default(),
            dv: Default::default(),
            t: Default::default(),
            msb: Constant::new((1u64 << (DIV_W - 1)).into()),
            zero: Constant::new(0u64.into()),
            one: Constant::new(1u64.into()),
        }
    }
}

impl Default for DivRtl {
    fn default() -> Self {
        Self::new()
    }
}

impl Logic for DivRtl {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, rem_r, quo_r, sh_r, b_r);
        // The step's operands.
        self.rem.next = self.rem_r.q.val();
        self.quo.next = self.quo_r.q.val();
        self.sh.next = self.sh_r.q.val();
        self.dv.next = self.b_r.q.val();
        if self.start.val() {
            self.rem.next = self.zero.val();
            self.quo.next = self.zero.val();
            self.sh.next = self.a.val();
            self.dv.next = self.b.val();
        }
        // One restoring step: shift the dividend's next bit in, subtract when it fits.
        self.t.next = self.rem.val() + self.rem.val();
        if (self.sh.val() & self.msb.val()).any() {
            self.t.next = self.rem.val() + self.rem.val() + self.one.val();
        }
        self.r_next.next = self.t.val();
        self.q_next.next = self.quo.val() + self.quo.val();
        if self.t.val() >= self.dv.val() {
            self.r_next.next = self.t.val() - self.dv.val();
            self.q_next.next = self.quo.val() + self.quo.val() + self.one.val();
        }
        self.z_next.next = (self.t.val() == self.dv.val()) | !self.t.val().any();
        if self.start.val() | self.run.val() {
            self.rem_r.d.next = self.r_next.val();
            self.quo_r.d.next = self.q_next.val();
            self.sh_r.d.next = self.sh.val() + self.sh.val();
            self.b_r.d.next = self.dv.val();
        }
        self.q.next = self.quo_r.q.val();
        self.r.next = self.rem_r.q.val();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cosim::settle;

    /// Every operand pair below 2^9 (and a spread of larger ones) against `/` and `%`,
    /// clocked through the 16 steps in rust-hdl's simulation.
    #[test]
    fn sequential_divider_equals_integer_division() {
        let mut uut = DivRtl::new();
        uut.connect_all();
        let mut pairs: Vec<(u64, u64)> = Vec::new();
        for a in (0..512u64).step_by(7) {
            for b in 1..64u64 {
                pairs.push((a, b));
            }
        }
        for (a, b) in [(32_767u64, 1u64), (32_767, 32_767), (32_766, 181), (1, 32_767), (30_000, 7)] {
            pairs.push((a, b));
        }
        for (a, b) in pairs {
            for c in 0..DIV_W {
                uut.start.next = c == 0;
                uut.run.next = c != 0;
                uut.a.next = a.into();
                uut.b.next = b.into();
                settle(&mut uut).unwrap();
                if c == DIV_W - 1 {
                    assert_eq!((uut.q_next.val().index() as u64, uut.r_next.val().index() as u64), (a / b, a % b), "{a} / {b} (last step)");
                }
                assert_eq!(uut.z_next.val(), !uut.r_next.val().any(), "{a} / {b} step {c}: z_next");
                uut.clock.next = true.into();
                settle(&mut uut).unwrap();
                uut.clock.next = false.into();
                settle(&mut uut).unwrap();
            }
            assert_eq!((uut.q.val().index() as u64, uut.r.val().index() as u64), (a / b, a % b), "{a} / {b}");
        }
    }
}
