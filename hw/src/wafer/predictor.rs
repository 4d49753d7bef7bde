//! MoE-GPS Distribution-Only predictor (CL): the Eq. 1 moving-window counters as registers.
//! Its FL twin is `sched::balance::gps::DistOnlyPredictor`; after every observed iteration the
//! window sums (n_i of Eq. 1) and the window slots must be equal
//! (`tests/wafer.rs::dist_only_predictor_cl_equals_fl`), and the prediction is made from the
//! sums by the FL's own apportionment (`gps::loads_from_counts`), as PyMTL's CL reuses its FL.
//!
//! Micro-architecture — registers: a ring of `window` slots, each one `counter_bits`-wide
//! counter per expert (an SRAM of window × experts words); one running-sum register per expert
//! (64 bits: window · (2^bits − 1) < 2^64, it never saturates); the ring's `head` (the slot
//! written next) and `filled` (slots holding an iteration); the input latch of the iteration
//! being recorded, and the `cursor` of the expert being updated. One expert per cycle:
//!
//! * `Update` (cycle e): if the window is full, `sum[e] −= slot[head][e]` (the oldest iteration
//!   leaves); `slot[head][e] = min(in[e], 2^bits − 1)`; `sum[e] += slot[head][e]`;
//! * after the last expert: `head = (head + 1) mod window`, `filled = min(filled + 1, window)`,
//!   back to `Idle`.
//!
//! So an iteration costs `experts` cycles; it is recorded off the critical path (the paper
//! estimates the distribution offline, L9@28647: no overhead in the layer).

use sched::balance::gps::{loads_from_counts, DistOnlyCfg, DistOnlyPredictor, GpsError};

use crate::harness::SignalDecl;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PredState {
    #[default]
    Idle = 0,
    Update = 1,
}

/// The registers (the slot SRAM included: a block this small is cloned whole).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PredRegs {
    pub state: PredState,
    /// `slots[w][e]`: counter of expert e in ring slot w.
    pub slots: Vec<Vec<u64>>,
    pub sums: Vec<u64>,
    pub head: u32,
    pub filled: u32,
    pub cursor: u32,
    /// The iteration being recorded (per-expert counts, as counted by the gate).
    pub input: Vec<u64>,
    /// The counter value written this cycle (0 when idle), for the waveform.
    pub wr_count: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DistOnlyPredictorCl {
    pub cfg: DistOnlyCfg,
    experts: usize,
    pub regs: PredRegs,
    /// Cycles spent updating.
    pub cycles: u64,
}

impl DistOnlyPredictorCl {
    /// Same checks as the FL (its constructor is called for them).
    pub fn new(cfg: DistOnlyCfg, experts: usize) -> Result<Self, GpsError> {
        DistOnlyPredictor::new(cfg, experts)?;
        Ok(DistOnlyPredictorCl {
            cfg,
            experts,
            regs: PredRegs { slots: vec![vec![0; experts]; cfg.window as usize], sums: vec![0; experts], input: vec![0; experts], ..Default::default() },
            cycles: 0,
        })
    }

    pub fn experts(&self) -> usize {
        self.experts
    }

    fn counter_max(&self) -> u64 {
        (1u64 << self.cfg.counter_bits) - 1
    }

    /// Latches one iteration's per-expert counts and starts recording it (refused while busy
    /// or with the wrong number of counts).
    pub fn start(&mut self, counts: &[u64]) -> Result<(), GpsError> {
        if self.regs.state != PredState::Idle {
            return Err(GpsError { field: "iteration_expert_counts", reason: "the predictor is still recording the previous iteration".into() });
        }
        if counts.len() != self.experts {
            return Err(GpsError { field: "iteration_expert_counts", reason: format!("{} counts for {} experts", counts.len(), self.experts) });
        }
        self.regs.input.copy_from_slice(counts);
        self.regs.cursor = 0;
        self.regs.state = PredState::Update;
        Ok(())
    }

    /// One clock cycle.
    pub fn step(&mut self) {
        let r = &mut self.regs;
        if r.state != PredState::Update {
            r.wr_count = 0;
            return;
        }
        self.cycles += 1;
        let (e, h) = (r.cursor as usize, r.head as usize);
        if r.filled == self.cfg.window {
            r.sums[e] -= r.slots[h][e];
        }
        let c = r.input[e].min((1u64 << self.cfg.counter_bits) - 1);
        r.slots[h][e] = c;
        r.sums[e] += c;
        r.wr_count = c;
        r.cursor += 1;
        if r.cursor as usize == self.experts {
            r.cursor = 0;
            r.head = (r.head + 1) % self.cfg.window;
            r.filled = (r.filled + 1).min(self.cfg.window);
            r.state = PredState::Idle;
        }
    }

    pub fn busy(&self) -> bool {
        self.regs.state != PredState::Idle
    }

    /// Records one iteration to the end (`experts` cycles); returns the cycles taken.
    pub fn observe(&mut self, counts: &[u64]) -> Result<u64, GpsError> {
        self.start(counts)?;
        let c0 = self.cycles;
        while self.busy() {
            self.step();
        }
        Ok(self.cycles - c0)
    }

    /// The window sums (n_i of Eq. 1).
    pub fn counts(&self) -> &[u64] {
        &self.regs.sums
    }

    /// The window slots, oldest first (as the FL's ring).
    pub fn window_slots(&self) -> Vec<Vec<u64>> {
        let w = self.cfg.window;
        let f = self.regs.filled;
        let first = (self.regs.head + w - f) % w;
        (0..f).map(|i| self.regs.slots[((first + i) % w) as usize].clone()).collect()
    }

    /// Eq. 1 as loads for an iteration of `tokens` assignments (the FL's apportionment).
    pub fn predicted_loads(&self, tokens: u64) -> Vec<u64> {
        loads_from_counts(&self.regs.sums, tokens)
    }

    /// Largest value one slot counter holds.
    pub fn slot_max(&self) -> u64 {
        self.counter_max()
    }

    /// Traced signals under `scope`: `state`, `cursor`, `head`, `filled`, `wr_count`,
    /// `sum_e{i}` (one per expert: the Eq. 1 window counts).
    pub fn declare(&self, scope: &[String], out: &mut Vec<SignalDecl>) {
        declare_signals(&self.cfg, self.experts, scope, out);
    }

    /// Values in [`Self::declare`] order.
    pub fn sample(&self, out: &mut Vec<u64>) {
        let r = &self.regs;
        out.extend([r.state as u64, r.cursor as u64, r.head as u64, r.filled as u64, r.wr_count]);
        out.extend(r.sums.iter().copied());
    }
}

/// The predictor's traced signals under `scope` (see [`DistOnlyPredictorCl::declare`]); the
/// same list for the CL model and an RTL stand-in, so their waveforms compare signal by signal.
pub fn declare_signals(cfg: &DistOnlyCfg, experts: usize, scope: &[String], out: &mut Vec<SignalDecl>) {
    let bits = |n: u64| (64 - n.leading_zeros()).max(1);
    out.push(SignalDecl { scope: scope.to_vec(), name: "state".into(), width: 1 });
    out.push(SignalDecl { scope: scope.to_vec(), name: "cursor".into(), width: bits(experts as u64) });
    out.push(SignalDecl { scope: scope.to_vec(), name: "head".into(), width: bits(cfg.window as u64) });
    out.push(SignalDecl { scope: scope.to_vec(), name: "filled".into(), width: bits(cfg.window as u64) });
    out.push(SignalDecl { scope: scope.to_vec(), name: "wr_count".into(), width: cfg.counter_bits as u32 });
    for e in 0..experts {
        out.push(SignalDecl { scope: scope.to_vec(), name: format!("sum_e{e}"), width: 64 });
    }
}

/// A Distribution-Only predictor as the gps experiment drives it: the CL model, or an RTL
/// stand-in (`waferstream gps --rtl predictor`, `rtl::wafer::predictor_swap`) built through a
/// [`DistOnlyFactory`], so `hw` does not depend on the RTL crate. Same cycle semantics as
/// [`DistOnlyPredictorCl`]: `start` latches an iteration, each `step` is one clock cycle.
pub trait DistOnlyModel {
    /// Latches one iteration's per-expert counts (refused while busy or with the wrong number
    /// of counts); the first expert is recorded in the next `step`.
    fn start(&mut self, counts: &[u64]) -> Result<(), GpsError>;
    /// One clock cycle.
    fn step(&mut self);
    fn busy(&self) -> bool;
    /// The window sums (n_i of Eq. 1).
    fn counts(&self) -> &[u64];
    /// Traced signals (as [`declare_signals`]).
    fn declare(&self, scope: &[String], out: &mut Vec<SignalDecl>);
    /// Values in `declare` order.
    fn sample(&self, out: &mut Vec<u64>);
    /// Eq. 1 as loads for an iteration of `tokens` assignments: the FL's apportionment applied
    /// to the model's window sums (the CL and the RTL model the counters and the sums).
    fn predicted_loads(&self, tokens: u64) -> Vec<u64> {
        loads_from_counts(self.counts(), tokens)
    }
}

/// Builds a predictor for `(cfg, experts)`; an RTL stand-in refuses a configuration it was not
/// built for, naming the field.
pub type DistOnlyFactory = fn(DistOnlyCfg, usize) -> Result<Box<dyn DistOnlyModel>, GpsError>;

/// [`DistOnlyFactory`] of the CL model (the default).
pub fn dist_only_cl(cfg: DistOnlyCfg, experts: usize) -> Result<Box<dyn DistOnlyModel>, GpsError> {
    Ok(Box::new(DistOnlyPredictorCl::new(cfg, experts)?))
}

impl DistOnlyModel for DistOnlyPredictorCl {
    fn start(&mut self, counts: &[u64]) -> Result<(), GpsError> {
        DistOnlyPredictorCl::start(self, counts)
    }
    fn step(&mut self) {
        DistOnlyPredictorCl::step(self)
    }
    fn busy(&self) -> bool {
        DistOnlyPredictorCl::busy(self)
    }
    fn counts(&self) -> &[u64] {
        DistOnlyPredictorCl::counts(self)
    }
    fn declare(&self, scope: &[String], out: &mut Vec<SignalDecl>) {
        DistOnlyPredictorCl::declare(self, scope, out)
    }
    fn sample(&self, out: &mut Vec<u64>) {
        DistOnlyPredictorCl::sample(self, out)
    }
}
