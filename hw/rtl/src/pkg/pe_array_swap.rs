//! `package --functional --rtl pe`: every chiplet's PE arithmetic on the `pe_array` RTL block,
//! behind `hw::pkg::pe_array::PeComputeModel`.
//!
//! The CL array (`PeArrayCl`) keeps the package's timing, as with every other block; when it
//! reports a job done, the tile hands the job's data to this stand-in, which runs the same
//! job — the micro-slice's gate and up GEMMs (or the fused `[W_gate | W_up]` GEMM) and the
//! down GEMM, back to back as one RTL job — on the RTL array from an idle array, through
//! [`PeArrayDriver`] (operand feed, skew, drain). The down GEMM's activations are
//! `act_i8(gate, up)` of the RTL's own gate/up outputs, read by the feeder as it needs them
//! (an output read before it was drained is an error). The stand-in then checks that the
//! RTL's busy cycles equal the CL fold timing (`PeArrayCfg::job_busy_cycles`: the done edge
//! `busy − 1` edges after the issue edge) and returns an error naming both if not, so a run
//! that finishes has shown cycle equality for every job. The outputs are then checked
//! against the dense reference by the package (`outputs_match_reference`).
//!
//! Size: an array of at most [`SIM_MAX_PES`] PEs is simulated at its own size; a larger one
//! (the package's 32×64) runs on the same design at [`SIM_SIDE`]×[`SIM_SIDE`] — rust-hdl
//! evaluates every PE every cycle, ~20 ms per cycle at 32×64 — and the cycle check is then
//! against the CL fold timing at that size (the design's equality at 32×64 is the lockstep
//! test's `lockstep_package_size`).
//!
//! Refused by name: `pe.timing = double_buffered` (the RTL sequencer implements SCALE-Sim's
//! fold timing only) and small array sizes without a monomorphized block
//! (`pe_array_twin::SIZES`).

use hw::pkg::pe_array::{PeArrayCfg, PeComputeModel, PeJob, Timing};
use sched::pkg::moe::{act_i8, MicroSliceWeights};

use super::pe_array_twin::{build_block, GemmData, OperandA, PeArrayDriver, RtlJob, SIZES};

pub struct PeArrayStandIn {
    /// The package's array (its CL timing) and the RTL array simulated (`rtl_cfg`).
    cfg: PeArrayCfg,
    rtl_cfg: PeArrayCfg,
    drv: PeArrayDriver,
    /// Jobs run and RTL edges clocked (for the run's log).
    pub jobs: u64,
}

/// Largest array simulated at its own size, and the side of the array that stands in for a
/// larger one.
pub const SIM_MAX_PES: u64 = 64;
pub const SIM_SIDE: u32 = 8;

/// [`hw::pkg::pe_array::PeComputeFactory`] of the stand-in.
pub fn pe_compute_factory(cfg: &PeArrayCfg) -> hw::Result<Box<dyn PeComputeModel>> {
    if cfg.timing != Timing::ScaleSim {
        return Err(hw::Error::Msg(format!(
            "pe.timing = {}: the RTL fold sequencer implements SCALE-Sim fold timing only (double buffering needs a second weight and result register per PE and a fold boundary carried with the data)",
            cfg.timing.name()
        )));
    }
    // rust-hdl simulates every PE every cycle (~20 ms per cycle for the package's 32×64 on this
    // machine, an hour per functional layer), so an array larger than SIM_MAX_PES runs on the
    // same design at SIM_SIDE × SIM_SIDE; its cycle count is checked against the CL fold timing
    // at that size. The package's timing stays the CL's at its own size, which the lockstep
    // test shows the design equals at 32×64 too.
    let (r, c) = if cfg.macs() <= SIM_MAX_PES { (cfg.rows, cfg.cols) } else { (SIM_SIDE, SIM_SIDE) };
    let block = build_block(r as usize, c as usize)
        .ok_or_else(|| hw::Error::Msg(format!("pe.rows x pe.cols = {}x{}: no RTL array of that size is built (built: {SIZES}; arrays above {SIM_MAX_PES} PEs run as {SIM_SIDE}x{SIM_SIDE})", cfg.rows, cfg.cols)))?;
    let rtl_cfg = PeArrayCfg { rows: r, cols: c, ..cfg.clone() };
    Ok(Box::new(PeArrayStandIn { cfg: cfg.clone(), rtl_cfg, drv: PeArrayDriver::new(block), jobs: 0 }))
}

impl PeArrayStandIn {
    /// The RTL job of `job` with the micro-slice's operands.
    fn rtl_job(&self, job: &PeJob, x: &[i8], m: usize, w: &MicroSliceWeights) -> Result<RtlJob, String> {
        let (d, f) = (w.d_model, w.f);
        let gs = job.gemms();
        let shapes: Vec<(usize, usize, usize)> = gs.iter().map(|g| (g.m as usize, g.k as usize, g.n as usize)).collect();
        let gemms = match shapes.len() {
            3 => vec![
                GemmData { m, k: d, n: f, a: OperandA::Given(x.to_vec()), b: w.w_gate.clone() },
                GemmData { m, k: d, n: f, a: OperandA::Given(x.to_vec()), b: w.w_up.clone() },
                GemmData { m, k: f, n: d, a: OperandA::Act { gate: 0, gate_col: 0, up: 1, up_col: 0, act: act_i8 }, b: w.w_down.clone() },
            ],
            2 => {
                // fuse_gate_up: one GEMM against [W_gate | W_up] (d × 2f).
                let b = (0..d).flat_map(|r| w.w_gate[r * f..(r + 1) * f].iter().chain(&w.w_up[r * f..(r + 1) * f]).copied()).collect();
                vec![
                    GemmData { m, k: d, n: 2 * f, a: OperandA::Given(x.to_vec()), b },
                    GemmData { m, k: f, n: d, a: OperandA::Act { gate: 0, gate_col: 0, up: 0, up_col: f, act: act_i8 }, b: w.w_down.clone() },
                ]
            }
            n => return Err(format!("a micro-slice job of {n} GEMMs (expected gate, up, down or fused gate|up, down)")),
        };
        let have: Vec<(usize, usize, usize)> = gemms.iter().map(|g| (g.m, g.k, g.n)).collect();
        if have != shapes {
            return Err(format!("the CL job's GEMMs {shapes:?} are not the micro-slice's {have:?} (m = {m} tokens)"));
        }
        Ok(RtlJob { tag: job.tag, ws: self.cfg.dataflow == hw::pkg::pe_array::Dataflow::Ws, gemms })
    }
}

impl PeComputeModel for PeArrayStandIn {
    fn micro_slice_partial(&mut self, job: &PeJob, x: &[i8], m: usize, w: &MicroSliceWeights) -> Result<Vec<i32>, String> {
        let rj = self.rtl_job(job, x, m, w)?;
        if !self.drv.idle() {
            return Err("the RTL array is not idle at a new job".into());
        }
        self.drv.step(Some(rj));
        self.drv.check()?;
        let busy = self.rtl_cfg.job_busy_cycles(job);
        // The job, then the last fold's drain (at most `rows` edges), with a margin.
        let r = self.drv.run_to_idle(busy + self.rtl_cfg.rows as u64 + 8)?;
        self.jobs += 1;
        let [res] = r.as_slice() else {
            return Err(format!("{} jobs finished for one issued", r.len()));
        };
        if res.tag != job.tag {
            return Err(format!("done tag {} for job {}", res.tag, job.tag));
        }
        let rtl_busy = res.done_cycle - res.issue_cycle + 1;
        if busy.max(1) != rtl_busy {
            return Err(format!("RTL {}x{} busy {rtl_busy} cycles (issue edge {}, done edge {}), CL fold timing {busy}", self.rtl_cfg.rows, self.rtl_cfg.cols, res.issue_cycle, res.done_cycle));
        }
        res.outs.last().cloned().ok_or_else(|| "a job without GEMMs".into())
    }
}
