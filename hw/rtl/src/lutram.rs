//! `AsyncRam<D, N>`: a `2^N`-word memory written at the rising edge of `write_clock` and read
//! combinationally (asynchronous read port): `read_data = mem[read_address]` at all times,
//! including the word written at the last edge.
//!
//! Why not rust-hdl's `RAM`: that widget registers `read_data` at the rising edge of its own
//! `read_clock`. The blocks that need a "same-cycle" read (the IO-die scheduler's EIT, the
//! Sem-MoE token and n-gram tables) clocked it with `~clock`, so the read address was latched
//! at the falling edge and the data was there for the next rising edge. That makes every path
//! into the read register and every path out of it a half-cycle path (posedge → negedge,
//! negedge → posedge): the ECP5 Fmax of both blocks was set by one of them. With an
//! asynchronous read the same value reaches the same rising edge through one full-cycle path.
//!
//! **Cycle equivalence.** Seen at a rising edge, the negedge-read `RAM` gives
//! `mem[address at the falling edge]`, with the writes of the edges before it. This block
//! gives `mem[address just before the rising edge]` with the same writes (writes happen only
//! at rising edges). The two are the same value whenever the read address is a function of
//! registers only (it does not change between the falling and the rising edge); every user
//! of this block drives it from registers. Sampled while the clock is low (the co-simulation
//! convention, `cosim`), `read_data` is also the same.
//!
//! **Synthesis.** Yosys infers a memory with an asynchronous read port: LUT-RAM on FPGAs with
//! it (ECP5 `TRELLIS_DPR16X4`, 7-series `RAM64M`/`RAM32M`), flip-flops and a read multiplexer
//! otherwise (iCE40 has no asynchronous-read block RAM, so it no longer becomes a
//! `SB_RAM40_4K` there), a register file / latch array on an ASIC. Uninitialised words read 0
//! in the Rust simulation and x in Verilog, as with rust-hdl's `RAM`; the co-simulations
//! (two-valued traces, `!==` compares) show that no unwritten word reaches an output.

use rust_hdl::prelude::*;
use std::collections::BTreeMap;

/// A `2^N` × `D` memory: one write port (rising edge of `write_clock`, `write_enable`) and one
/// asynchronous read port. Port names as rust-hdl's `RAM`, without `read_clock`.
#[derive(LogicBlock, Default)]
pub struct AsyncRam<D: Synth, const N: usize> {
    pub read_address: Signal<In, Bits<N>>,
    pub read_data: Signal<Out, D>,
    pub write_address: Signal<In, Bits<N>>,
    pub write_clock: Signal<In, Clock>,
    pub write_data: Signal<In, D>,
    pub write_enable: Signal<In, bool>,
    _sim: Box<BTreeMap<Bits<N>, D>>,
    /// Words held when fewer than `2^N` (0: all `2^N`; see [`AsyncRam::with_words`]).
    _words: usize,
}

impl<D: Synth, const N: usize> AsyncRam<D, N> {
    /// A memory of `words` (≤ `2^N`) words addressed by `N` bits: the Verilog array has
    /// `words` entries (a 64-word table with the 8-bit address of its 256-word build is four
    /// 16 × 4 LUT-RAMs on ECP5, not sixteen). Writes at an address ≥ `words` are dropped, as
    /// Verilog drops them; a read there gives 0 in Rust and x in Verilog — the users read only
    /// addresses below `words`.
    pub fn with_words(words: usize) -> Self {
        assert!((1..=1usize << N).contains(&words), "AsyncRam: {words} words with {N} address bits");
        Self { _words: words, ..Default::default() }
    }

    fn words(&self) -> usize {
        if self._words == 0 { 1 << N } else { self._words }
    }
}

impl<D: Synth, const N: usize> Logic for AsyncRam<D, N> {
    fn update(&mut self) {
        // Write first: a read of the word written at this edge sees the new value, as the
        // falling-edge read of rust-hdl's `RAM` did.
        if self.write_clock.pos_edge() && self.write_enable.val() && self.write_address.val().index() < self.words() {
            self._sim
                .insert(self.write_address.val(), self.write_data.val());
        }
        self.read_data.next = *self
            ._sim
            .get(&self.read_address.val())
            .unwrap_or(&D::default());
    }

    fn connect(&mut self) {
        self.read_data.connect();
    }

    fn hdl(&self) -> Verilog {
        // The read is a continuous assignment of a wire (sensitive to the array in every
        // simulator), copied into the `output reg` rust-hdl declares.
        Verilog::Custom(format!(
            "\
reg[{d}:0] mem[{last}:0];
wire[{d}:0] mem_rd = mem[read_address];

always @(*) begin
   read_data = mem_rd;
end

always @(posedge write_clock) begin
   if (write_enable) begin
      mem[write_address] <= write_data;
   end
end
",
            d = D::BITS - 1,
            last = self.words() - 1,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settle(r: &mut AsyncRam<Bits<8>, 4>) {
        assert!(simulate(r, 100));
    }

    fn edge(r: &mut AsyncRam<Bits<8>, 4>) {
        r.write_clock.next = true.into();
        settle(r);
        r.write_clock.next = false.into();
        settle(r);
    }

    #[test]
    fn reads_are_combinational_and_see_the_last_write() {
        let mut r = AsyncRam::<Bits<8>, 4>::default();
        r.connect_all();
        settle(&mut r);
        assert_eq!(r.read_data.val(), Bits::<8>::from(0u64));
        r.write_address.next = 3.into();
        r.write_data.next = 0xA5.into();
        r.write_enable.next = true;
        r.read_address.next = 3.into();
        settle(&mut r);
        // Not written before the edge.
        assert_eq!(r.read_data.val(), Bits::<8>::from(0u64));
        edge(&mut r);
        assert_eq!(r.read_data.val(), Bits::<8>::from(0xA5u64));
        r.write_enable.next = false;
        r.write_data.next = 0x11.into();
        edge(&mut r);
        assert_eq!(r.read_data.val(), Bits::<8>::from(0xA5u64));
        // The address alone changes the data, without a clock.
        r.read_address.next = 4.into();
        settle(&mut r);
        assert_eq!(r.read_data.val(), Bits::<8>::from(0u64));
    }

    #[test]
    fn verilog_has_an_asynchronous_read() {
        let r = AsyncRam::<Bits<4>, 8>::default();
        let Verilog::Custom(v) = r.hdl() else {
            panic!("custom Verilog expected")
        };
        assert!(v.contains("reg[3:0] mem[255:0];"));
        assert!(v.contains("wire[3:0] mem_rd = mem[read_address];"));
        assert!(!v.contains("read_clock"));
    }
}
