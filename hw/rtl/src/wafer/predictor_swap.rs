//! The `dist_only_predictor` RTL block inside the gps experiment, in place of the CL model
//! (`waferstream gps ... --rtl predictor`): [`DistOnlyRtlModel`] implements
//! `hw::wafer::predictor::DistOnlyModel` by clocking [`DistOnlyPredictorSwapRtl`] once per
//! `step` (rising and falling edge), with the iteration's counts answered on `in_count` at the
//! block's `cursor` (the gate's count memory, which the stand-in holds) and the window sums
//! taken from the block's ports: its write port (`wr_expert`, `wr_sum`) every cycle, and a
//! sweep of its sum read port after every iteration (`done`), which overwrites them.
//!
//! The build holds up to 256 experts and a 2^18-word slot SRAM with 32-bit counters and sums;
//! a configuration outside it is refused naming the field (`experts`, `window`,
//! `counter_bits`), before anything runs.

use hw::harness::SignalDecl;
use hw::wafer::predictor::{declare_signals, DistOnlyModel};
use rust_hdl::prelude::*;
use sched::balance::gps::{DistOnlyCfg, DistOnlyPredictor, GpsError};

use super::predictor::DistOnlyPredictorSwapRtl;

/// Drives one predictor block a cycle at a time (shared by the stand-in and the lockstep test).
pub struct DistOnlyDriver {
    pub uut: Box<DistOnlyPredictorSwapRtl>,
}

impl DistOnlyDriver {
    /// A block reset and configured for `(cfg, experts)` (checked by [`check_cfg`] first).
    pub fn new(cfg: &DistOnlyCfg, experts: usize) -> Self {
        let mut uut = Box::new(DistOnlyPredictorSwapRtl::new());
        uut.connect_all();
        uut.cfg_experts.next = (experts as u64).into();
        uut.cfg_window.next = (cfg.window as u64).into();
        uut.cfg_max.next = ((1u64 << cfg.counter_bits) - 1).into();
        let mut d = DistOnlyDriver { uut };
        d.uut.reset.next = true;
        d.edge(false, 0);
        d.uut.reset.next = false;
        d.settle();
        d
    }

    pub fn settle(&mut self) {
        crate::cosim::settle(self.uut.as_mut()).expect("the predictor's logic settles");
    }

    /// One clock cycle with `start` and `in_count` applied (rising edge, then falling edge:
    /// the SRAM's read of the next cycle's word).
    pub fn edge(&mut self, start: bool, in_count: u64) {
        self.uut.start.next = start;
        self.uut.in_count.next = in_count.min(u32::MAX as u64).into();
        self.settle();
        self.uut.clock.next = true.into();
        self.settle();
        self.uut.clock.next = false.into();
        self.settle();
    }

    /// `sums[e]` through the read port.
    pub fn read_sum(&mut self, e: usize) -> u64 {
        self.uut.rd_expert.next = (e as u64).into();
        self.settle();
        self.uut.rd_sum.val().to_u64()
    }
}

/// Why the built block cannot model `(cfg, experts)`, naming the field; `Ok` if it can.
pub fn check_cfg(cfg: &DistOnlyCfg, experts: usize) -> Result<(), GpsError> {
    // The FL's own checks first (window ≥ 1, counter_bits 1..=32, experts ≥ 1).
    DistOnlyPredictor::new(*cfg, experts)?;
    let refuse = |field, reason: String| Err(GpsError { field, reason: format!("dist_only_predictor RTL: {reason}") });
    if experts > DistOnlyPredictorSwapRtl::EXPERTS {
        return refuse("experts", format!("{experts} experts; the built block holds at most {}", DistOnlyPredictorSwapRtl::EXPERTS));
    }
    if cfg.window as u64 * experts as u64 > DistOnlyPredictorSwapRtl::WORDS {
        return refuse("window", format!("a window of {} iterations × {experts} experts is over the slot SRAM's {} words", cfg.window, DistOnlyPredictorSwapRtl::WORDS));
    }
    if cfg.window as u128 * ((1u128 << cfg.counter_bits) - 1) >= 1u128 << 32 {
        return refuse("counter_bits", format!("{} bits × a window of {} could reach 2^32 in a 32-bit window sum", cfg.counter_bits, cfg.window));
    }
    Ok(())
}

/// The RTL predictor as the gps experiment's Distribution-Only predictor.
pub struct DistOnlyRtlModel {
    drv: DistOnlyDriver,
    cfg: DistOnlyCfg,
    experts: usize,
    /// The iteration being recorded: the gate's per-expert counts, read by the block at
    /// `cursor` (outside the block, as in the CL's `start`).
    input: Vec<u64>,
    /// A start latched by `start`, applied at the next `step`.
    pending: bool,
    /// The window sums as the block's ports show them.
    sums: Vec<u64>,
}

/// [`hw::wafer::predictor::DistOnlyFactory`] of the RTL predictor.
pub fn dist_only_factory(cfg: DistOnlyCfg, experts: usize) -> Result<Box<dyn DistOnlyModel>, GpsError> {
    check_cfg(&cfg, experts)?;
    let mut drv = DistOnlyDriver::new(&cfg, experts);
    let sums = (0..experts).map(|e| drv.read_sum(e)).collect();
    Ok(Box::new(DistOnlyRtlModel { drv, cfg, experts, input: vec![0; experts], pending: false, sums }))
}

impl DistOnlyModel for DistOnlyRtlModel {
    fn start(&mut self, counts: &[u64]) -> Result<(), GpsError> {
        if self.busy() {
            return Err(GpsError { field: "iteration_expert_counts", reason: "the predictor is still recording the previous iteration".into() });
        }
        if counts.len() != self.experts {
            return Err(GpsError { field: "iteration_expert_counts", reason: format!("{} counts for {} experts", counts.len(), self.experts) });
        }
        self.input.copy_from_slice(counts);
        self.pending = true;
        Ok(())
    }

    fn step(&mut self) {
        let cursor = self.drv.uut.cursor.val().index();
        let count = if self.pending || self.drv.uut.state.val() { self.input.get(cursor).copied().unwrap_or(0) } else { 0 };
        self.drv.edge(std::mem::take(&mut self.pending), count);
        let u = &self.drv.uut;
        if u.wr_en.val() {
            let e = u.wr_expert.val().index();
            if let Some(s) = self.sums.get_mut(e) {
                *s = u.wr_sum.val().to_u64();
            }
        }
        if u.done.val() {
            for e in 0..self.experts {
                self.sums[e] = self.drv.read_sum(e);
            }
        }
    }

    fn busy(&self) -> bool {
        self.pending || self.drv.uut.state.val()
    }

    fn counts(&self) -> &[u64] {
        &self.sums
    }

    fn declare(&self, scope: &[String], out: &mut Vec<SignalDecl>) {
        declare_signals(&self.cfg, self.experts, scope, out);
    }

    fn sample(&self, out: &mut Vec<u64>) {
        let u = &self.drv.uut;
        out.extend([u.state.val() as u64, u.cursor.val().to_u64(), u.head.val().to_u64(), u.filled.val().to_u64(), u.wr_count.val().to_u64()]);
        out.extend(self.sums.iter().copied());
    }
}
