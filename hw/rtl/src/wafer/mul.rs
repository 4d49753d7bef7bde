//! Combinational unsigned multiplier `p = a · b` for 32-bit operands, 64-bit product, built
//! from four 16 × 16 partial products (rust-hdl 0.46 multiplies `Bits<16>` only):
//! `p = ll + (lh + hl)·2^16 + hh·2^32`. The NI-Balancer's share unit (`Load_e · L / Num_e`) and
//! the Eq. 2 trigger's cross-multiplications use it; a synthesizer maps each partial product
//! to a DSP (ECP5 MULT18X18D, XC7 DSP48) or LUTs.
//!
//! Port coupling: combinational.

use rust_hdl::prelude::*;

#[derive(LogicBlock, Default)]
pub struct Mul32Rtl {
    pub a: Signal<In, Bits<32>>,
    pub b: Signal<In, Bits<32>>,
    pub p: Signal<Out, Bits<64>>,
    /// Partial products (low/high halves of a and b) and their 64-bit forms.
    ll: Signal<Local, Bits<32>>,
    lh: Signal<Local, Bits<32>>,
    hl: Signal<Local, Bits<32>>,
    hh: Signal<Local, Bits<32>>,
    mid: Signal<Local, Bits<64>>,
}

impl Logic for Mul32Rtl {
    #[hdl_gen]
    fn update(&mut self) {
        self.ll.next = self.a.val().get_bits::<16>(0) * self.b.val().get_bits::<16>(0);
        self.lh.next = self.a.val().get_bits::<16>(0) * self.b.val().get_bits::<16>(16);
        self.hl.next = self.a.val().get_bits::<16>(16) * self.b.val().get_bits::<16>(0);
        self.hh.next = self.a.val().get_bits::<16>(16) * self.b.val().get_bits::<16>(16);
        // lh + hl < 2^33: summed at 64 bits.
        self.mid.next = bit_cast::<64, 32>(self.lh.val()) + bit_cast::<64, 32>(self.hl.val());
        self.p.next = bit_cast::<64, 32>(self.ll.val()) + (self.mid.val() << 16) + (bit_cast::<64, 32>(self.hh.val()) << 32);
    }
}
