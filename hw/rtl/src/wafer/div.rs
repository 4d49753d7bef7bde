//! Combinational unsigned divider (restoring, unrolled): `q = a / b`, `r = a % b` for 16-bit
//! operands. The mapping controller's tile-shape unit tests one candidate width per cycle
//! (`n % w`, `cols % w`, `rows % (n / w)`), as the CL does, so the divisions are
//! combinational; the operands are mesh sizes (at most a few hundred), so 16 bits are ample.
//!
//! Stage `i` (MSB first) shifts the next dividend bit into the partial remainder and
//! subtracts `b` when it fits. rust-hdl emits one always block with blocking assignments, and
//! its Rust simulation re-runs `update` to a fixpoint, so each stage has its own signal
//! (`rem[i]`, `quo[i]`) rather than one accumulator assigned W times. `b = 0` gives
//! `q = all ones, r = a` (never used: candidates start at 1). Operands below 2^15 (the trial
//! value `2·rem + 1 < 2·b` needs the spare top bit). Shifts are written `x + x` and the
//! constants are sized, so the Verilog has no width-mismatched literal (Verilator WIDTH-clean).

use rust_hdl::prelude::*;

/// Operand width of the divider.
pub const DIV_W: usize = 16;

/// 16-bit restoring divider (operands < 2^15). Ports: `a`, `b` in; `q`, `r` comb out.
#[derive(LogicBlock)]
pub struct DivRtl {
    pub a: Signal<In, Bits<16>>,
    pub b: Signal<In, Bits<16>>,
    pub q: Signal<Out, Bits<16>>,
    pub r: Signal<Out, Bits<16>>,
    /// Partial remainder before stage i (rem[0] = 0), and the quotient bits so far.
    rem: [Signal<Local, Bits<16>>; 17],
    quo: [Signal<Local, Bits<16>>; 17],
    /// The dividend shifted left by i: its MSB is stage i's bit.
    sh: [Signal<Local, Bits<16>>; 16],
    /// Stage i's trial value (2·rem + bit), one bit wider than the remainder can be.
    t: [Signal<Local, Bits<16>>; 16],
    msb: Constant<Bits<16>>,
    zero: Constant<Bits<16>>,
    one: Constant<Bits<16>>,
}

impl DivRtl {
    pub fn new() -> Self {
        Self {
            a: Default::default(),
            b: Default::default(),
            q: Default::default(),
            r: Default::default(),
            rem: std::array::from_fn(|_| Default::default()),
            quo: std::array::from_fn(|_| Default::default()),
            sh: std::array::from_fn(|_| Default::default()),
            t: std::array::from_fn(|_| Default::default()),
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
        self.rem[0].next = self.zero.val();
        self.quo[0].next = self.zero.val();
        self.sh[0].next = self.a.val();
        for i in 0..15 {
            self.sh[i + 1].next = self.sh[i].val() + self.sh[i].val();
        }
        for i in 0..16 {
            self.t[i].next = self.rem[i].val() + self.rem[i].val();
            if (self.sh[i].val() & self.msb.val()).any() {
                self.t[i].next = self.rem[i].val() + self.rem[i].val() + self.one.val();
            }
            self.rem[i + 1].next = self.t[i].val();
            self.quo[i + 1].next = self.quo[i].val() + self.quo[i].val();
            if self.t[i].val() >= self.b.val() {
                self.rem[i + 1].next = self.t[i].val() - self.b.val();
                self.quo[i + 1].next = self.quo[i].val() + self.quo[i].val() + self.one.val();
            }
        }
        self.q.next = self.quo[16].val();
        self.r.next = self.rem[16].val();
    }
}
