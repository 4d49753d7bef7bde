//! PE array (CL): R×C int8 MACs in the core clock domain, output- or weight-stationary, a
//! timed fold engine whose cycle counts equal SCALE-Sim 3.0.0's.
//!
//! The fold mechanism (what a fold is, what it costs, why) is documented on the FL twin,
//! [`sched::pkg::pe_array`]: per GEMM, `ceil(Sr/R) × ceil(Sc/C)` folds (column fold outer,
//! row fold inner), each `prefix + stream + skew` cycles in SCALE-Sim timing (OS:
//! `K + R + C − 2`, WS: `2R + C + M − 2`), with SCALE-Sim's "Total Cycles" the index of the
//! last busy cycle. This block walks those folds with registers, one cycle per core edge.
//!
//! **Interface.** A job ([`PeJob`]) is up to three GEMMs run back to back (a micro-slice:
//! gate, up, down) with an opaque `tag`. At an edge where the array is idle ([`PeArrayCl::ready`])
//! the owner passes the job to [`PeArrayCl::eval`]; that edge is the job's first busy cycle.
//! `eval` returns the tag at the edge of the job's last busy cycle, so for a single GEMM
//! issued at tick `t0` (unit clock) the done tick is `t0 + gemm_cycles_fl(..)` — SCALE-Sim's
//! 0-based last-cycle index — and the next job can be issued at the following edge.
//!
//! **Fast-forward.** While busy the array has no inputs (the job's operands were latched
//! at issue) and produces no output before its last cycle, so its registers evolve as a
//! pure counter. [`PeArrayCl::next_event`] is the tick of that last cycle; an engine may skip
//! every edge before it. `eval` is robust to that: on entry it catches up the skipped edges
//! ([`PeArrayCl::advance_to`]) by advancing the fold counters fold by fold, which is exactly
//! what the per-cycle next-state logic would have done (tested: identical done ticks and
//! counters stepping every edge vs. jumping to `next_event`). Waveforms of `fold_cycle` of
//! course only show the edges actually visited.

use std::fmt;

use serde::{Deserialize, Serialize};

pub use sched::pkg::pe_array::{Dataflow, FoldPlan, Timing};
use sched::pkg::pe_array::fold_plan_fl;

pub use crate::cfg::CfgError;
use crate::cfg::err;
use crate::harness::{Cycle, DomainClock, Probe, SignalDecl, NEVER};
use crate::harness::trace::{SampleBlock, SampleOut};

/// Largest array side accepted (a 4096×4096 array is already far beyond any chiplet).
pub const MAX_SIDE: u32 = 4096;

/// PE array parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PeArrayCfg {
    /// PE rows (SCALE-Sim ArrayHeight), 1..=4096.
    pub rows: u32,
    /// PE columns (SCALE-Sim ArrayWidth), 1..=4096.
    pub cols: u32,
    pub dataflow: Dataflow,
    /// `scale_sim` reproduces SCALE-Sim 3.0.0; `double_buffered` hides the next fold's preload.
    pub timing: Timing,
    /// Gate and up projections as one GEMM against `[W_gate | W_up]` (both read the same
    /// activations): `(m×d)·(d×2f)` instead of two `(m×d)·(d×f)`. Same arithmetic; on an
    /// output-stationary array it halves the passes over `d` when `f` is narrower than the
    /// array (a micro-slice of Qwen3 is 96 columns on a 64- or 128-column array).
    pub fuse_gate_up: bool,
}

impl Default for PeArrayCfg {
    fn default() -> Self {
        PeArrayCfg { rows: 32, cols: 64, dataflow: Dataflow::Os, timing: Timing::ScaleSim, fuse_gate_up: false }
    }
}

impl PeArrayCfg {
    pub fn validate(&self) -> Result<(), CfgError> {
        for (name, v) in [("rows", self.rows), ("cols", self.cols)] {
            if v == 0 {
                return err(name, "must be >= 1 (an array needs at least one PE)");
            }
            if v > MAX_SIDE {
                return err(name, format!("{v} is absurd (at most {MAX_SIDE})"));
            }
        }
        Ok(())
    }
    pub fn macs(&self) -> u64 {
        self.rows as u64 * self.cols as u64
    }
    /// The fold plan of one GEMM on this array.
    pub fn plan(&self, g: Gemm) -> FoldPlan {
        fold_plan_fl(g.m as u64, g.k as u64, g.n as u64, self.rows as u64, self.cols as u64, self.dataflow, self.timing)
    }
    /// The job of a micro-slice of `f` FFN columns for `m` tokens under this array's
    /// mapping ([`PeJob::micro_slice`], or fused gate|up).
    pub fn micro_slice_job(&self, tag: u32, m: u32, d_model: u32, f: u32) -> PeJob {
        if self.fuse_gate_up {
            PeJob::from_gemms(tag, &[Gemm::new(m, d_model, 2 * f), Gemm::new(m, f, d_model)])
        } else {
            PeJob::micro_slice(tag, m, d_model, f)
        }
    }
    /// Busy cycles of a whole job (sum of its GEMMs' folds).
    pub fn job_busy_cycles(&self, job: &PeJob) -> u64 {
        job.gemms().iter().map(|&g| self.plan(g).busy_cycles()).sum()
    }
}

/// One GEMM `(m×k)·(k×n)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Gemm {
    pub m: u32,
    pub k: u32,
    pub n: u32,
}

impl Gemm {
    pub fn new(m: u32, k: u32, n: u32) -> Self {
        Gemm { m, k, n }
    }
    pub fn macs(&self) -> u64 {
        self.m as u64 * self.k as u64 * self.n as u64
    }
}

/// Up to three GEMMs run back to back, completed as one (`tag` is the owner's handle).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PeJob {
    pub tag: u32,
    gemms: [Gemm; 3],
    len: u8,
}

impl PeJob {
    /// A job of one GEMM.
    pub fn single(tag: u32, g: Gemm) -> Self {
        PeJob { tag, gemms: [g, Gemm::default(), Gemm::default()], len: 1 }
    }
    /// A micro-slice of `f` FFN columns for `m` tokens: gate and up `(m×d_model)·(d_model×f)`,
    /// then down `(m×f)·(f×d_model)`.
    pub fn micro_slice(tag: u32, m: u32, d_model: u32, f: u32) -> Self {
        let up = Gemm::new(m, d_model, f);
        PeJob { tag, gemms: [up, up, Gemm::new(m, f, d_model)], len: 3 }
    }
    /// Any 1..=3 GEMMs.
    pub fn from_gemms(tag: u32, gs: &[Gemm]) -> Self {
        assert!((1..=3).contains(&gs.len()), "a PE job holds 1 to 3 GEMMs");
        let mut gemms = [Gemm::default(); 3];
        gemms[..gs.len()].copy_from_slice(gs);
        PeJob { tag, gemms, len: gs.len() as u8 }
    }
    pub fn gemms(&self) -> &[Gemm] {
        &self.gemms[..self.len as usize]
    }
    pub fn macs(&self) -> u64 {
        self.gemms().iter().map(|g| g.macs()).sum()
    }
}

/// The functional arithmetic of a PE job on a model of the array instead of the FL twin's
/// (`package --rtl pe`): the job's GEMMs on the array, the FFN activation beside it. The CL
/// array keeps the timing; an implementation checks that its own busy cycles equal the CL's
/// fold timing (`PeArrayCfg::job_busy_cycles`) and returns an error otherwise.
pub trait PeComputeModel: Send {
    /// Partial output (`m × d_model`, i32) of the `m` tokens `x` (`m × d_model` int8) through
    /// the micro-slice `w`, computed as `job` (this slice's job: its GEMMs in their order).
    fn micro_slice_partial(&mut self, job: &PeJob, x: &[i8], m: usize, w: &sched::pkg::moe::MicroSliceWeights) -> Result<Vec<i32>, String>;
}

/// Builds a [`PeComputeModel`] for a chiplet's array (or refuses the config, naming the field).
pub type PeComputeFactory = fn(cfg: &PeArrayCfg) -> crate::Result<Box<dyn PeComputeModel>>;

/// Always-on event counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct PeCounters {
    /// Core cycles with a fold in progress.
    pub busy_cycles: u64,
    /// MACs of completed GEMMs (`m·k·n` each).
    pub mac_ops: u64,
    /// Completed folds.
    pub folds: u64,
    /// Completed jobs.
    pub jobs: u64,
}

impl PeCounters {
    /// `mac_ops / (rows·cols·busy_cycles)` (0 before any busy cycle).
    pub fn utilization(&self, cfg: &PeArrayCfg) -> f64 {
        if self.busy_cycles == 0 {
            0.0
        } else {
            self.mac_ops as f64 / (cfg.macs() as f64 * self.busy_cycles as f64)
        }
    }
}

/// The PE array block.
#[derive(Debug, Clone)]
pub struct PeArrayCl {
    cfg: PeArrayCfg,
    clk: DomainClock,
    // ---- registers ----
    /// Current job (latched at issue).
    job: PeJob,
    busy: bool,
    /// GEMM of `job` in progress.
    gemm_idx: u8,
    /// Fold plan of that GEMM (decoded from its shape when the GEMM starts).
    plan: FoldPlan,
    /// Row fold (inner loop) and column fold (outer loop) of the fold in progress.
    fold_row: u64,
    fold_col: u64,
    /// Cycles of the current fold already executed.
    fold_cycle: u64,
    /// Tick of the next edge not yet executed while busy (catch-up point for fast-forward).
    next_tick: Cycle,
    /// Tick of the job's last busy cycle (`next_event`).
    done_tick: Cycle,
    pub counters: PeCounters,
}

impl PeArrayCl {
    /// A new idle array on clock `clk` (core domain; `DomainClock::UNIT` in unit tests).
    pub fn new(cfg: &PeArrayCfg, clk: DomainClock) -> Result<Self, CfgError> {
        cfg.validate()?;
        Ok(PeArrayCl {
            cfg: cfg.clone(),
            clk,
            job: PeJob::default(),
            busy: false,
            gemm_idx: 0,
            plan: cfg.plan(Gemm::default()),
            fold_row: 0,
            fold_col: 0,
            fold_cycle: 0,
            next_tick: 0,
            done_tick: NEVER,
            counters: PeCounters::default(),
        })
    }

    pub fn cfg(&self) -> &PeArrayCfg {
        &self.cfg
    }
    /// Idle: a job may be issued at this edge.
    pub fn ready(&self) -> bool {
        !self.busy
    }
    pub fn busy(&self) -> bool {
        self.busy
    }
    /// Tag of the job in progress.
    pub fn current_tag(&self) -> Option<u32> {
        self.busy.then_some(self.job.tag)
    }
    /// Tick of the current job's last busy cycle (when `eval` reports it done), or `NEVER`.
    pub fn next_event(&self) -> Cycle {
        if self.busy {
            self.done_tick
        } else {
            NEVER
        }
    }

    /// Traced: the next edge at which a traced register (GEMM index, fold row or column,
    /// busy) changes — the last cycle of the current fold. (The cycle within a fold is not
    /// traced: a counter that changes every cycle would cost a waveform change per PE array
    /// per cycle and force every edge to be visited.)
    pub fn next_change(&self) -> Cycle {
        if !self.busy {
            return NEVER;
        }
        let rem = self.plan.fold_cycles(self.fold_index()) - self.fold_cycle;
        self.next_tick + (rem - 1) * self.clk.div
    }

    /// The next edge the array must be stepped at when nothing is issued (fast-forward
    /// steps it only there; in between it has no inputs and no outputs, and catches up
    /// through [`Self::advance_to`]): its done edge, or, traced, the end of the current fold
    /// (the next change of a traced register).
    pub fn next_step(&self, traced: bool) -> Cycle {
        if traced {
            self.next_change()
        } else {
            self.next_event()
        }
    }

    /// One core edge at tick `now` (must be an edge of this block's clock, non-decreasing).
    /// `issue` is a job to start this edge (only when [`Self::ready`]; this edge is its first
    /// busy cycle). Returns the tag of a job whose last busy cycle is this edge.
    pub fn eval(&mut self, now: Cycle, issue: Option<PeJob>) -> Option<u32> {
        debug_assert!(self.clk.is_edge(now), "PE array evaluated off its clock edge at tick {now}");
        assert!(!self.busy || now >= self.next_tick, "PE array evaluated back in time ({now} < {})", self.next_tick);
        self.advance_to(now);
        if let Some(job) = issue {
            assert!(!self.busy, "PE array: job {} issued while job {} is running (check ready())", job.tag, self.job.tag);
            self.job = job;
            self.gemm_idx = 0;
            if !self.start_gemm_from(0) {
                // Nothing to compute (every GEMM has a zero dimension): done at once.
                self.counters.jobs += 1;
                self.next_tick = self.clk.edge_after(now);
                return Some(job.tag);
            }
            self.busy = true;
            let total = self.cfg.job_busy_cycles(&job);
            self.done_tick = now + self.clk.ticks(total - 1);
        }
        if !self.busy {
            return None;
        }
        let done = self.step_cycle();
        self.next_tick = self.clk.edge_after(now);
        if done {
            debug_assert_eq!(now, self.done_tick);
            Some(self.job.tag)
        } else {
            None
        }
    }

    /// Executes, in one go, every busy cycle at edges before `tick` that was not evaluated
    /// (fast-forward catch-up). Exact: those cycles have no inputs and no outputs, and the
    /// fold counters advance as the per-cycle logic would. `tick` must not pass the done
    /// edge (the engine must visit `next_event`).
    pub fn advance_to(&mut self, tick: Cycle) {
        if !self.busy || tick <= self.next_tick {
            return;
        }
        assert!(tick <= self.done_tick, "PE array skipped past its done edge {} (to {tick})", self.done_tick);
        let n = self.clk.cycle_of(tick) - self.clk.cycle_of(self.next_tick);
        self.skip(n);
        self.next_tick = self.clk.next_edge(tick);
    }

    /// Loads the first non-empty GEMM at index >= `i`; false if none.
    fn start_gemm_from(&mut self, mut i: usize) -> bool {
        let gs = self.job.gemms();
        while i < gs.len() {
            let plan = self.cfg.plan(gs[i]);
            if plan.folds() > 0 {
                self.gemm_idx = i as u8;
                self.plan = plan;
                self.fold_row = 0;
                self.fold_col = 0;
                self.fold_cycle = 0;
                return true;
            }
            i += 1;
        }
        false
    }

    fn fold_index(&self) -> u64 {
        self.fold_col * self.plan.row_folds + self.fold_row
    }

    /// Next-state logic of one busy cycle; true when it was the job's last.
    fn step_cycle(&mut self) -> bool {
        self.counters.busy_cycles += 1;
        self.fold_cycle += 1;
        if self.fold_cycle == self.plan.fold_cycles(self.fold_index()) {
            return self.end_fold();
        }
        false
    }

    /// The current fold's last cycle was executed: move the fold counters on.
    fn end_fold(&mut self) -> bool {
        self.counters.folds += 1;
        self.fold_cycle = 0;
        self.fold_row += 1;
        if self.fold_row == self.plan.row_folds {
            self.fold_row = 0;
            self.fold_col += 1;
            if self.fold_col == self.plan.col_folds {
                self.counters.mac_ops += self.job.gemms()[self.gemm_idx as usize].macs();
                if !self.start_gemm_from(self.gemm_idx as usize + 1) {
                    self.busy = false;
                    self.counters.jobs += 1;
                    return true;
                }
            }
        }
        false
    }

    /// `n` busy cycles that do not reach the job's last cycle, fold by fold.
    fn skip(&mut self, mut n: u64) {
        while n > 0 {
            let rem = self.plan.fold_cycles(self.fold_index()) - self.fold_cycle;
            if n < rem {
                self.fold_cycle += n;
                self.counters.busy_cycles += n;
                return;
            }
            n -= rem;
            self.counters.busy_cycles += rem;
            let done = self.end_fold();
            assert!(!done, "PE array fast-forward reached the job's end");
        }
    }
}

impl Probe for PeArrayCl {
    fn declare(&self, scope: &[String], out: &mut Vec<SignalDecl>) {
        let mut d = |name: &str, width: u32| out.push(SignalDecl { scope: scope.to_vec(), name: name.into(), width });
        d("busy", 1);
        d("job_tag", 32);
        d("gemm_idx", 2);
        d("fold_row", 32);
        d("fold_col", 32);
    }
    fn sample(&self, out: &mut Vec<u64>) {
        self.sample_to(out);
    }
}

impl SampleBlock for PeArrayCl {
    #[inline(always)]
    fn sample_to<O: SampleOut>(&self, out: &mut O) {
        out.put_all([self.busy as u64, if self.busy { self.job.tag as u64 } else { 0 }, self.gemm_idx as u64, self.fold_row, self.fold_col]);
    }
}

impl fmt::Display for PeArrayCl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.cfg;
        if !self.busy {
            return write!(f, "pe {}x{} {} idle jobs={} folds={} busy={}", c.rows, c.cols, c.dataflow.name(), self.counters.jobs, self.counters.folds, self.counters.busy_cycles);
        }
        let g = self.job.gemms()[self.gemm_idx as usize];
        write!(
            f,
            "pe {}x{} {} tag={} gemm={}/{} ({}x{}x{}) fold=r{}/{} c{}/{} cyc={}/{} done@{}",
            c.rows,
            c.cols,
            c.dataflow.name(),
            self.job.tag,
            self.gemm_idx + 1,
            self.job.len,
            g.m,
            g.k,
            g.n,
            self.fold_row,
            self.plan.row_folds,
            self.fold_col,
            self.plan.col_folds,
            self.fold_cycle,
            self.plan.fold_cycles(self.fold_index()),
            self.done_tick
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_gemm_done_at_scalesim_total() {
        let mut pe = PeArrayCl::new(&PeArrayCfg::default(), DomainClock::UNIT).unwrap();
        assert_eq!(pe.eval(0, Some(PeJob::single(7, Gemm::new(256, 2048, 96)))), None);
        assert_eq!(pe.next_event(), 34271);
        let mut t = 1;
        loop {
            if let Some(tag) = pe.eval(t, None) {
                assert_eq!((tag, t), (7, 34271));
                break;
            }
            t += 1;
        }
        assert_eq!(pe.counters.folds, 16);
        assert_eq!(pe.counters.busy_cycles, 34272);
    }
}
