//! `waferstream pe`: one GEMM on the PE array (CL block, stepped with fast-forward), with
//! SCALE-Sim 3.0.0's cycle count and utilization, and the double-buffered figure beside it.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use hw::harness::DomainClock;
use hw::pkg::pe_array::{Dataflow, Gemm, PeArrayCfg, PeArrayCl, PeJob, Timing};
use serde::Serialize;

use super::CliResult;

#[derive(Args, Debug, Clone)]
pub struct PeArgs {
    /// Rows of A (tokens).
    #[arg(long)]
    pub m: u64,
    /// Reduction dimension.
    #[arg(long)]
    pub k: u64,
    /// Columns of B (outputs).
    #[arg(long)]
    pub n: u64,
    /// Array size ROWSxCOLS (SCALE-Sim ArrayHeight x ArrayWidth).
    #[arg(long, default_value = "32x64")]
    pub array: String,
    /// os | ws
    #[arg(long, default_value = "os")]
    pub dataflow: String,
    /// scalesim | double-buffered
    #[arg(long, default_value = "scalesim")]
    pub timing: String,
    /// Write the result as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Serialize)]
struct PeOut {
    m: u64,
    k: u64,
    n: u64,
    rows: u32,
    cols: u32,
    dataflow: Dataflow,
    timing: Timing,
    folds: u64,
    row_folds: u64,
    col_folds: u64,
    /// Done cycle of the job issued at cycle 0 (= SCALE-Sim "Total Cycles" in scalesim timing).
    cycles: u64,
    /// MACs / (rows·cols·cycles), as SCALE-Sim's "Overall Util %" / 100.
    utilization: f64,
    mac_ops: u64,
    busy_cycles: u64,
    /// With `timing = scalesim`: the double-buffered figures of the same GEMM.
    #[serde(skip_serializing_if = "Option::is_none")]
    double_buffered_cycles: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    double_buffered_utilization: Option<f64>,
}

/// Most folds one `pe` run simulates (about a second of fold-by-fold stepping).
pub const MAX_FOLDS: u64 = 1 << 28;

fn parse_array(s: &str) -> CliResult<(u32, u32)> {
    let bad = || format!("--array: `{s}` is not ROWSxCOLS with both in 1..={}", hw::pkg::pe_array::MAX_SIDE);
    super::split_grid(s).ok_or_else(bad)
}

/// Runs the CL array on one GEMM: issue at cycle 0, fast-forward to its done edge.
fn simulate(cfg: &PeArrayCfg, g: Gemm) -> (u64, hw::pkg::pe_array::PeCounters) {
    let mut pe = PeArrayCl::new(cfg, DomainClock::UNIT).expect("validated");
    let mut done = pe.eval(0, Some(PeJob::single(0, g))).map(|_| 0);
    while done.is_none() {
        let t = pe.next_event();
        done = pe.eval(t, None).map(|_| t);
    }
    (done.unwrap_or(0), pe.counters)
}

pub fn run(a: PeArgs) -> CliResult<ExitCode> {
    for (flag, v) in [("--m", a.m), ("--k", a.k), ("--n", a.n)] {
        if v == 0 || v > u32::MAX as u64 {
            return Err(format!("{flag}: {v} must be in 1..={}", u32::MAX));
        }
    }
    let (rows, cols) = parse_array(&a.array)?;
    let dataflow = Dataflow::parse(&a.dataflow).ok_or_else(|| format!("--dataflow: `{}` is not os or ws", a.dataflow))?;
    let timing = Timing::parse(&a.timing).ok_or_else(|| format!("--timing: `{}` is not scalesim or double-buffered", a.timing))?;
    let cfg = PeArrayCfg { rows, cols, dataflow, timing, fuse_gate_up: false };
    cfg.validate().map_err(|e| format!("--array: {e}"))?;
    if let Some(p) = &a.json {
        super::check_writable(p).map_err(|e| format!("--json: {e}"))?;
    }
    let g = Gemm::new(a.m as u32, a.k as u32, a.n as u32);
    let plan = cfg.plan(g);
    // Two bounds in one (issue 5 fuzzing): the CL array steps fold by fold (~5 ns each), so a
    // GEMM of 2^53 folds ran for minutes; and it counts cycles in u64, which `--m --k --n
    // 4294967295` on a 1x1 array overflowed (a panic). Under MAX_FOLDS a GEMM is busy for at
    // most 2^28 x (2^32 + the array's skew) < 2^62 cycles.
    if plan.folds() > MAX_FOLDS {
        return Err(format!("--m {} --k {} --n {}: {} folds on the {rows}x{cols} array; the CL array steps fold by fold, at most {MAX_FOLDS} folds (use a bigger --array or split the GEMM)", a.m, a.k, a.n, plan.folds()));
    }
    let (cycles, ctr) = simulate(&cfg, g);
    let util = |c: u64| if c == 0 { 0.0 } else { g.macs() as f64 / (cfg.macs() as f64 * c as f64) };
    let db = (timing == Timing::ScaleSim).then(|| simulate(&PeArrayCfg { timing: Timing::DoubleBuffered, ..cfg.clone() }, g).0);
    let out = PeOut {
        m: a.m,
        k: a.k,
        n: a.n,
        rows,
        cols,
        dataflow,
        timing,
        folds: plan.folds(),
        row_folds: plan.row_folds,
        col_folds: plan.col_folds,
        cycles,
        utilization: util(cycles),
        mac_ops: ctr.mac_ops,
        busy_cycles: ctr.busy_cycles,
        double_buffered_cycles: db,
        double_buffered_utilization: db.map(util),
    };
    println!(
        "pe {}x{} {} ({}): GEMM {}x{}x{} -> {} folds ({} row x {} col), {} per fold",
        rows,
        cols,
        dataflow.name(),
        timing.name(),
        a.m,
        a.k,
        a.n,
        out.folds,
        out.row_folds,
        out.col_folds,
        plan.fold_cycles(0)
    );
    println!("cycles {}   utilization {:.2} %", cycles, out.utilization * 100.0);
    if let Some(d) = db {
        println!("double-buffered: cycles {}   utilization {:.2} %", d, util(d) * 100.0);
    }
    if let Some(p) = &a.json {
        let s = serde_json::to_string_pretty(&out).map_err(|e| e.to_string())?;
        std::fs::write(p, s + "\n").map_err(|e| format!("--json: cannot write {}: {e}", p.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}
