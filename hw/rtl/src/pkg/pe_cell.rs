//! One processing element `PeRtl`: the cell of the PE array (`super::pe_array::PeArrayRtl`,
//! which holds R×C of them in one flat row-major array), the RTL side of
//! `hw::pkg::pe_array::PeArrayCl`'s int8 MAC grid.
//!
//! ```text
//!            b_top (int8)   psum_top (i32, WS)
//!               │              │
//!  a_left ──► [a_q] ──────────────────────► a_out (to the PE on the right)
//!  (int8)       │              │
//!               ▼              ▼
//!        a × w (int8×int8) + addend ──► [acc_q] ──► acc_out (OS: accumulator; WS: partial sum down)
//!        w = OS: b_top │ WS: b_q            └──► [res_q] at the fold's last cycle (OS result bank)
//!               [b_q] ──► b_out (OS: B flows down every cycle; WS: weight, shifts only in preload)
//! ```
//!
//! Arithmetic: the two int8 operands are sign-extended to 16 bits and multiplied with
//! rust-hdl's 16×16 multiplier; the signed product of two int8 values fits in 16 bits
//! (|p| ≤ 2^14), so the low 16 bits of the unsigned product are its two's complement, which
//! is sign-extended to 32 bits and added with 32-bit wrap-around — exactly the FL twin's
//! `gemm_i8_fl` (i32 wrapping accumulators).
//!
//! Output stationary (`ws` low): `acc_q ← (acc_zero ? 0 : acc_q) + a·b_top` every cycle, with
//! `acc_zero` the fold's first cycle (so a fold starts from zero whatever the previous fold or
//! job left); at the fold's last cycle (`capture`) the same sum also goes to `res_q`, the
//! result bank the owner drains during the next fold. Weight stationary (`ws` high):
//! `acc_q ← psum_top + a·b_q`, a partial sum that moves one row down per cycle; `b_q` shifts
//! down only while `preload` is high (the fold's first R cycles), then holds the weight.

use rust_hdl::prelude::*;

/// One int8 MAC PE with its operand, accumulator and result registers.
#[derive(LogicBlock)]
pub struct PeRtl {
    pub clock: Signal<In, Clock>,
    /// Synchronous reset: every register to zero.
    pub reset: Signal<In, Bit>,
    /// Weight-stationary mode (else output-stationary).
    pub ws: Signal<In, Bit>,
    /// WS: shift the weight chain this cycle (the fold's preload).
    pub preload: Signal<In, Bit>,
    /// OS: the fold's first cycle (the accumulator restarts from zero).
    pub acc_zero: Signal<In, Bit>,
    /// OS: the fold's last cycle (the sum goes to the result register too).
    pub capture: Signal<In, Bit>,
    /// Activation from the left (the array's `a_in[i]` for column 0).
    pub a_left: Signal<In, Bits<8>>,
    /// B operand (OS) or weight (WS preload) from above (the array's port for row 0).
    pub b_top: Signal<In, Bits<8>>,
    /// WS partial sum from above (zero for row 0).
    pub psum_top: Signal<In, Bits<32>>,
    pub a_out: Signal<Out, Bits<8>>,
    pub b_out: Signal<Out, Bits<8>>,
    pub acc_out: Signal<Out, Bits<32>>,
    pub res_out: Signal<Out, Bits<32>>,
    // --- registers
    a_q: DFF<Bits<8>>,
    b_q: DFF<Bits<8>>,
    acc_q: DFF<Bits<32>>,
    res_q: DFF<Bits<32>>,
    // --- combinational locals
    /// The operands sign-extended to 16 bits.
    a16: Signal<Local, Bits<16>>,
    w16: Signal<Local, Bits<16>>,
    /// 16×16 product; its low 16 bits are the signed int8 product.
    prod: Signal<Local, Bits<32>>,
    /// The signed product sign-extended to 32 bits.
    prod32: Signal<Local, Bits<32>>,
    addend: Signal<Local, Bits<32>>,
    sum: Signal<Local, Bits<32>>,
    ext8: Constant<Bits<16>>,
    ext16: Constant<Bits<32>>,
}

impl PeRtl {
    pub fn new() -> Self {
        PeRtl {
            clock: Default::default(),
            reset: Default::default(),
            ws: Default::default(),
            preload: Default::default(),
            acc_zero: Default::default(),
            capture: Default::default(),
            a_left: Default::default(),
            b_top: Default::default(),
            psum_top: Default::default(),
            a_out: Default::default(),
            b_out: Default::default(),
            acc_out: Default::default(),
            res_out: Default::default(),
            a_q: Default::default(),
            b_q: Default::default(),
            acc_q: Default::default(),
            res_q: Default::default(),
            a16: Default::default(),
            w16: Default::default(),
            prod: Default::default(),
            prod32: Default::default(),
            addend: Default::default(),
            sum: Default::default(),
            ext8: Constant::new(0xFF00u64.into()),
            ext16: Constant::new(0xFFFF_0000u64.into()),
        }
    }
}

impl Default for PeRtl {
    fn default() -> Self {
        Self::new()
    }
}

impl Logic for PeRtl {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, a_q, b_q, acc_q, res_q);
        self.a_out.next = self.a_q.q.val();
        self.b_out.next = self.b_q.q.val();
        self.acc_out.next = self.acc_q.q.val();
        self.res_out.next = self.res_q.q.val();
        // ---- signed int8 × int8 through the 16×16 multiplier
        self.a16.next = bit_cast::<16, 8>(self.a_left.val());
        if self.a_left.val().get_bit(7) {
            self.a16.next = bit_cast::<16, 8>(self.a_left.val()) | self.ext8.val();
        }
        self.w16.next = bit_cast::<16, 8>(self.b_top.val());
        if self.b_top.val().get_bit(7) {
            self.w16.next = bit_cast::<16, 8>(self.b_top.val()) | self.ext8.val();
        }
        if self.ws.val() {
            self.w16.next = bit_cast::<16, 8>(self.b_q.q.val());
            if self.b_q.q.val().get_bit(7) {
                self.w16.next = bit_cast::<16, 8>(self.b_q.q.val()) | self.ext8.val();
            }
        }
        self.prod.next = self.a16.val() * self.w16.val();
        self.prod32.next = bit_cast::<32, 16>(bit_cast::<16, 32>(self.prod.val()));
        if self.prod.val().get_bit(15) {
            self.prod32.next = bit_cast::<32, 16>(bit_cast::<16, 32>(self.prod.val())) | self.ext16.val();
        }
        // ---- accumulate (OS) or pass the partial sum down (WS)
        self.addend.next = self.acc_q.q.val();
        if self.acc_zero.val() {
            self.addend.next = 0.into();
        }
        if self.ws.val() {
            self.addend.next = self.psum_top.val();
        }
        self.sum.next = self.addend.val() + self.prod32.val();
        // ---- next state
        self.a_q.d.next = self.a_left.val();
        if !self.ws.val() | self.preload.val() {
            self.b_q.d.next = self.b_top.val();
        }
        self.acc_q.d.next = self.sum.val();
        if self.capture.val() {
            self.res_q.d.next = self.sum.val();
        }
        if self.reset.val() {
            self.a_q.d.next = 0.into();
            self.b_q.d.next = 0.into();
            self.acc_q.d.next = 0.into();
            self.res_q.d.next = 0.into();
        }
    }
}
