//! MoE-GPS Distribution-Only predictor `DistOnlyPredictorRtl<E, AB>` (RTL twin of
//! `hw::wafer::predictor::DistOnlyPredictorCl`): the Eq. 1 moving-window counters, one expert
//! per cycle.
//!
//! ```text
//!  in_count (expert `cursor` of the iteration) ─► saturate at cfg_max ─► c ──► slot SRAM[addr] (write @posedge)
//!  slot SRAM[addr] (read @negedge: the oldest iteration's counter of this expert) ──┐
//!  sums[cursor] ─► full ? sum − old + c : sum + c ─► sums[cursor], wr_sum            ┘
//!  cursor ─► last expert? ─► head + 1 mod window, filled + 1 (≤ window), back to idle
//! ```
//!
//! Registers (as the CL's `PredRegs`): the ring of `window` slots is one SRAM of
//! `window × experts` counter words, addressed linearly (`addr = head · experts + cursor`,
//! kept as its own counter `addr`, which steps by one per expert and returns to 0 when the
//! head wraps — no multiplier); one running-sum register per expert (`E` entries); `head`,
//! `filled`, `cursor` and the state bit.
//!
//! Cycle semantics, equal to the CL's `start` + `step`:
//! * `start` in an idle cycle records expert 0 at this edge (the CL's `start` latches the
//!   iteration and the same cycle's `step` records expert 0); `start` while busy is ignored
//!   (the CL refuses it; the stand-in refuses it before it reaches the block).
//! * Each update cycle, expert `cursor`: `c = min(in_count, cfg_max)`; if the window is full
//!   (`filled == cfg_window`) the slot word at `addr` (the oldest iteration) leaves the sum:
//!   `sum' = sum − old + c`, else `sum' = sum + c`; the word at `addr` becomes `c`.
//! * After the last expert (`cursor + 1 == cfg_experts`): `head = (head + 1) mod window`,
//!   `filled = min(filled + 1, window)`, idle; `done` pulses.
//!
//! What differs from the CL object, in structure only: the CL latches the iteration's counts
//! in `start`; the block reads them one per cycle on `in_count`, the count of expert `cursor`
//! (the gate's per-expert count memory read at the block's registered `cursor`, so the
//! driver answers it without a combinational loop). Counter words are 32 bits and the sums
//! 32 bits: a configuration whose window sum could reach 2^32 (`window · (2^counter_bits − 1)`)
//! is refused by the stand-in (`predictor_swap`), as are more than `E` experts or a ring of
//! more than 2^AB words. The CL's sums are 64-bit; below 2^32 they are the same numbers.
//!
//! The SRAM is rust-hdl's `RAM` (a BRAM on an FPGA), written at the rising edge and read at
//! the falling edge (as the IO-die scheduler's EIT), so the word of this cycle's `addr` — a
//! register — is there before the rising edge that overwrites it. A word is read only when
//! the window is full, and every word of the ring has been written since the last reset by
//! then, so an SRAM without reset is enough.
//!
//! The prediction itself (Eq. 1's apportionment of the window sums into per-expert loads) is
//! the FL function `sched::balance::gps::loads_from_counts`, applied to the block's sums —
//! as the CL does; the hardware part is the counters and the sums.

use rust_hdl::prelude::*;

/// Distribution-Only predictor with at most `E` experts and a slot SRAM of `2^AB` words
/// (`window · experts ≤ 2^AB`).
#[derive(LogicBlock)]
pub struct DistOnlyPredictorRtl<const E: usize, const AB: usize> {
    pub clock: Signal<In, Clock>,
    /// Synchronous reset: empty window, sums 0, idle.
    pub reset: Signal<In, Bit>,
    /// Experts counted (1..=E); static between resets.
    pub cfg_experts: Signal<In, Bits<32>>,
    /// Iterations in the window (≥ 1, `cfg_window · cfg_experts ≤ 2^AB`); static.
    pub cfg_window: Signal<In, Bits<32>>,
    /// Largest counter value, 2^counter_bits − 1; static.
    pub cfg_max: Signal<In, Bits<32>>,
    /// Start recording an iteration (idle cycles only): expert 0 is recorded at this edge.
    pub start: Signal<In, Bit>,
    /// The iteration's count of expert `cursor` (read in the start cycle and each update cycle).
    pub in_count: Signal<In, Bits<32>>,
    /// Sum read port (combinational): the expert whose window sum `rd_sum` shows.
    pub rd_expert: Signal<In, Bits<32>>,

    /// 1 while recording (the CL's `PredState::Update`), registered.
    pub state: Signal<Out, Bit>,
    pub cursor: Signal<Out, Bits<32>>,
    pub head: Signal<Out, Bits<32>>,
    pub filled: Signal<Out, Bits<32>>,
    /// The write port of the last edge (registered): a counter word was written (`wr_en`) at
    /// SRAM word `wr_addr` for expert `wr_expert`, value `wr_count` (0 when none, as the CL's
    /// `wr_count`), and that expert's new sum `wr_sum` (0 when none).
    pub wr_en: Signal<Out, Bit>,
    pub wr_addr: Signal<Out, Bits<AB>>,
    pub wr_expert: Signal<Out, Bits<32>>,
    pub wr_count: Signal<Out, Bits<32>>,
    pub wr_sum: Signal<Out, Bits<32>>,
    /// Pulse: the iteration's last expert was recorded at the last edge.
    pub done: Signal<Out, Bit>,
    /// `sums[rd_expert]` (0 out of range).
    pub rd_sum: Signal<Out, Bits<32>>,

    // --- registers
    state_q: DFF<Bit>,
    cursor_q: DFF<Bits<32>>,
    head_q: DFF<Bits<32>>,
    filled_q: DFF<Bits<32>>,
    addr_q: DFF<Bits<AB>>,
    wr_en_q: DFF<Bit>,
    wr_addr_q: DFF<Bits<AB>>,
    wr_expert_q: DFF<Bits<32>>,
    wr_count_q: DFF<Bits<32>>,
    wr_sum_q: DFF<Bits<32>>,
    done_q: DFF<Bit>,
    sums: [DFF<Bits<32>>; E],
    /// The window's counter words, `addr = head · experts + cursor`.
    slots: RAM<Bits<32>, AB>,

    // --- combinational locals
    /// This cycle records an expert (update state, or a start while idle).
    active: Signal<Local, Bit>,
    /// The expert's saturated count.
    cnt: Signal<Local, Bits<32>>,
    /// `sums[cursor]`.
    cur_sum: Signal<Local, Bits<32>>,
    new_sum: Signal<Local, Bits<32>>,
    full: Signal<Local, Bit>,
    last: Signal<Local, Bit>,
    head_wrap: Signal<Local, Bit>,
    /// The SRAM's write enable, written once (a sub-block input).
    we_n: Signal<Local, Bit>,
    one_ab: Constant<Bits<AB>>,
    zero_ab: Constant<Bits<AB>>,
}

impl<const E: usize, const AB: usize> Default for DistOnlyPredictorRtl<E, AB> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const E: usize, const AB: usize> DistOnlyPredictorRtl<E, AB> {
    pub fn new() -> Self {
        assert!((1..=1024).contains(&E), "{E} experts (1..=1024)");
        assert!((1..=24).contains(&AB), "slot SRAM of 2^{AB} words (AB in 1..=24)");
        Self {
            clock: Default::default(),
            reset: Default::default(),
            cfg_experts: Default::default(),
            cfg_window: Default::default(),
            cfg_max: Default::default(),
            start: Default::default(),
            in_count: Default::default(),
            rd_expert: Default::default(),
            state: Default::default(),
            cursor: Default::default(),
            head: Default::default(),
            filled: Default::default(),
            wr_en: Default::default(),
            wr_addr: Default::default(),
            wr_expert: Default::default(),
            wr_count: Default::default(),
            wr_sum: Default::default(),
            done: Default::default(),
            rd_sum: Default::default(),
            state_q: Default::default(),
            cursor_q: Default::default(),
            head_q: Default::default(),
            filled_q: Default::default(),
            addr_q: Default::default(),
            wr_en_q: Default::default(),
            wr_addr_q: Default::default(),
            wr_expert_q: Default::default(),
            wr_count_q: Default::default(),
            wr_sum_q: Default::default(),
            done_q: Default::default(),
            sums: std::array::from_fn(|_| Default::default()),
            slots: Default::default(),
            active: Default::default(),
            cnt: Default::default(),
            cur_sum: Default::default(),
            new_sum: Default::default(),
            full: Default::default(),
            last: Default::default(),
            head_wrap: Default::default(),
            we_n: Default::default(),
            one_ab: Constant::new(1u64.into()),
            zero_ab: Constant::new(0u64.into()),
        }
    }

    /// Largest `experts` this build holds.
    pub const EXPERTS: usize = E;
    /// Words of the slot SRAM (`window · experts` must fit).
    pub const WORDS: u64 = 1u64 << AB;
}

impl<const E: usize, const AB: usize> Logic for DistOnlyPredictorRtl<E, AB> {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, state_q, cursor_q, head_q, filled_q, addr_q, wr_en_q, wr_addr_q, wr_expert_q, wr_count_q, wr_sum_q, done_q);
        for i in 0..E {
            self.sums[i].clock.next = self.clock.val();
            self.sums[i].d.next = self.sums[i].q.val();
        }
        // The SRAM: written at the rising edge, read at the falling edge at this cycle's
        // (registered) address.
        self.slots.write_clock.next = self.clock.val();
        self.slots.read_clock.next = !self.clock.val();
        self.slots.read_address.next = self.addr_q.q.val();
        self.slots.write_address.next = self.addr_q.q.val();

        // ---- registered outputs
        self.state.next = self.state_q.q.val();
        self.cursor.next = self.cursor_q.q.val();
        self.head.next = self.head_q.q.val();
        self.filled.next = self.filled_q.q.val();
        self.wr_en.next = self.wr_en_q.q.val();
        self.wr_addr.next = self.wr_addr_q.q.val();
        self.wr_expert.next = self.wr_expert_q.q.val();
        self.wr_count.next = self.wr_count_q.q.val();
        self.wr_sum.next = self.wr_sum_q.q.val();
        self.done.next = self.done_q.q.val();

        // ---- the sum read port and the current expert's sum
        self.rd_sum.next = 0.into();
        self.cur_sum.next = 0.into();
        for i in 0..E {
            if self.rd_expert.val().index() == i {
                self.rd_sum.next = self.sums[i].q.val();
            }
            if self.cursor_q.q.val().index() == i {
                self.cur_sum.next = self.sums[i].q.val();
            }
        }

        // ---- this cycle's expert
        self.active.next = self.state_q.q.val() | self.start.val();
        self.cnt.next = self.in_count.val();
        if self.in_count.val() > self.cfg_max.val() {
            self.cnt.next = self.cfg_max.val();
        }
        self.full.next = self.filled_q.q.val() == self.cfg_window.val();
        self.new_sum.next = self.cur_sum.val() + self.cnt.val();
        if self.full.val() {
            // The oldest iteration leaves the window.
            self.new_sum.next = self.cur_sum.val() - self.slots.read_data.val() + self.cnt.val();
        }
        self.last.next = (self.cursor_q.q.val() + 1) == self.cfg_experts.val();
        self.head_wrap.next = (self.head_q.q.val() + 1) == self.cfg_window.val();

        // ---- next state (hold by default)
        self.we_n.next = false;
        self.wr_en_q.d.next = false;
        self.wr_addr_q.d.next = self.zero_ab.val();
        self.wr_expert_q.d.next = 0.into();
        self.wr_count_q.d.next = 0.into();
        self.wr_sum_q.d.next = 0.into();
        self.done_q.d.next = false;
        if self.active.val() {
            self.we_n.next = true;
            self.wr_en_q.d.next = true;
            self.wr_addr_q.d.next = self.addr_q.q.val();
            self.wr_expert_q.d.next = self.cursor_q.q.val();
            self.wr_count_q.d.next = self.cnt.val();
            self.wr_sum_q.d.next = self.new_sum.val();
            for i in 0..E {
                if self.cursor_q.q.val().index() == i {
                    self.sums[i].d.next = self.new_sum.val();
                }
            }
            if self.last.val() {
                self.state_q.d.next = false;
                self.done_q.d.next = true;
                self.cursor_q.d.next = 0.into();
                if !self.full.val() {
                    self.filled_q.d.next = self.filled_q.q.val() + 1;
                }
                if self.head_wrap.val() {
                    self.head_q.d.next = 0.into();
                    self.addr_q.d.next = self.zero_ab.val();
                } else {
                    self.head_q.d.next = self.head_q.q.val() + 1;
                    self.addr_q.d.next = self.addr_q.q.val() + self.one_ab.val();
                }
            } else {
                self.state_q.d.next = true;
                self.cursor_q.d.next = self.cursor_q.q.val() + 1;
                self.addr_q.d.next = self.addr_q.q.val() + self.one_ab.val();
            }
        }
        self.slots.write_data.next = self.cnt.val();

        if self.reset.val() {
            self.we_n.next = false;
            self.state_q.d.next = false;
            self.cursor_q.d.next = 0.into();
            self.head_q.d.next = 0.into();
            self.filled_q.d.next = 0.into();
            self.addr_q.d.next = self.zero_ab.val();
            self.wr_en_q.d.next = false;
            self.wr_addr_q.d.next = self.zero_ab.val();
            self.wr_expert_q.d.next = 0.into();
            self.wr_count_q.d.next = 0.into();
            self.wr_sum_q.d.next = 0.into();
            self.done_q.d.next = false;
            for i in 0..E {
                self.sums[i].d.next = 0.into();
            }
        }
        self.slots.write_enable.next = self.we_n.val();
    }
}

/// The exported size: 8 experts (Mixtral's), a 16-iteration window (the gps default).
pub type DistOnlyPredictorE8W16Rtl = DistOnlyPredictorRtl<8, 7>;
/// The build `gps --rtl predictor` runs: up to 256 experts (DeepSeek-V3, the largest preset)
/// and a 2^18-word ring (window 1024 — the `--window` limit — at 256 experts).
pub type DistOnlyPredictorSwapRtl = DistOnlyPredictorRtl<256, 18>;

/// One cycle's inputs of the co-sim stimulus.
#[derive(Debug, Clone, Copy, Default)]
pub struct PredStim {
    pub reset: bool,
    pub experts: u64,
    pub window: u64,
    pub max: u64,
    pub start: bool,
    pub count: u64,
    pub rd_expert: u64,
}

/// Random stimulus for a `E`-expert, `2^AB`-word build: a reset in cycle 0 and every ~2 000
/// cycles, each with a new legal configuration (experts 1..=E, window with
/// `window · experts ≤ 2^AB`, counter_bits 1..=16 or 32 with the 32-bit sum bound); start pulses
/// with probability 0.4 per cycle (so iterations run back to back, with gaps, and starts land
/// while busy, which the block ignores); counts below 2^17 (so small counters saturate); the
/// read port sweeping experts 0..E+1.
pub fn pred_stimulus(e_max: usize, words: u64, cycles: usize, seed: u64) -> Vec<PredStim> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut cfg = PredStim::default();
    (0..cycles)
        .map(|c| {
            let reset = c == 0 || rng.gen_range(0..2000) == 0;
            if reset {
                cfg.experts = rng.gen_range(1..=e_max as u64);
                let wmax = (words / cfg.experts).max(1);
                cfg.window = rng.gen_range(1..=wmax.min(64));
                let mut bits = if rng.gen_bool(0.1) { 32 } else { rng.gen_range(1..=16u32) };
                while (cfg.window as u128) * ((1u128 << bits) - 1) >= 1u128 << 32 {
                    bits -= 1;
                }
                cfg.max = (1u64 << bits) - 1;
            }
            PredStim {
                reset,
                start: !reset && rng.gen_bool(0.4),
                count: if rng.gen_bool(0.05) { rng.gen::<u32>() as u64 } else { rng.gen_range(0..1u64 << 17) },
                rd_expert: rng.gen_range(0..e_max as u64 + 2),
                ..cfg
            }
        })
        .collect()
}

/// Co-sim recorder: [`pred_stimulus`] on the exported build.
pub fn record_dist_only_e8_w16(module: &str, cycles: usize, seed: u64) -> Result<crate::cosim::PortTrace, crate::RtlError> {
    let stim = pred_stimulus(8, DistOnlyPredictorE8W16Rtl::WORDS, cycles, seed);
    crate::cosim::record(
        module,
        DistOnlyPredictorE8W16Rtl::new(),
        cycles,
        |u| &mut u.clock,
        |c, u| {
            let s = stim[c];
            u.reset.next = s.reset;
            u.cfg_experts.next = s.experts.into();
            u.cfg_window.next = s.window.into();
            u.cfg_max.next = s.max.into();
            u.start.next = s.start;
            u.in_count.next = s.count.into();
            u.rd_expert.next = s.rd_expert.into();
        },
    )
}

/// Export registration: linted and co-simulated like the other leaf blocks.
pub const EXPORT: crate::export::BlockDef = crate::export::BlockDef {
    name: "dist_only_predictor",
    top: false,
    domain: crate::export::ModelDomain::WaferCore,
    cosim_cycles: 4096,
    sets: &[crate::export::ParamSet {
        module: "dist_only_predictor_e8_w16",
        rust_type: "DistOnlyPredictorE8W16Rtl",
        params: &[("experts", 8), ("sram_words", 128)],
        // ECP5-85F: 35.2 MHz at seed 1; read-subtract-add of a sum in one cycle (docs/rtl.md, "Timing closure at the prototype clocks").
        ecp5_clock_mhz: 30,
        build: || crate::export::boxed(DistOnlyPredictorE8W16Rtl::new()),
        recorder: Some(|cycles, seed| record_dist_only_e8_w16("dist_only_predictor_e8_w16", cycles, seed)),
    }],
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(not(feature = "yosys"), ignore = "needs yosys (feature `yosys`)")]
    fn dist_only_predictor_synthesizable() {
        let mut uut = DistOnlyPredictorE8W16Rtl::new();
        uut.connect_all();
        check_all(&uut).unwrap();
        yosys_validate("waferstream_dist_only_predictor_e8_w16", &generate_verilog(&uut)).unwrap();
    }
}
