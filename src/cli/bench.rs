//! `waferstream bench`: simulation speed, measured the way the BookSim2 reference was
//! (reference/booksim "Speed": 8x8 mesh, 1-flit packets, uniform 0.30, one deterministic run,
//! min/median/max wall time of repeated runs).

use std::process::ExitCode;

use clap::Args;
use hw::noc::{run_point, NocCfg};
use serde::Serialize;

use super::{ensure_parent, CliResult};

/// BookSim2's rate on the same kind of machine at 0.30 (reference/booksim/README.md).
pub const BOOKSIM_CYCLES_PER_S: f64 = 6550.0;

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Routers per side.
    #[arg(long, default_value_t = 8)]
    pub k: u32,
    /// Injection rate (flits/node/cycle).
    #[arg(long, default_value_t = 0.30)]
    pub rate: f64,
    /// Thread counts to measure.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub threads: Vec<u32>,
    /// Repetitions per thread count.
    #[arg(long, default_value_t = 5)]
    pub repeat: u32,
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
}

#[derive(Serialize)]
struct BenchRow {
    k: u32,
    rate: f64,
    threads: u32,
    cycles: u64,
    wall_min: f64,
    wall_median: f64,
    wall_max: f64,
    cycles_per_second: f64,
    router_cycles_per_second: f64,
    /// Only on BookSim2's reference configuration (8x8 at 0.30); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    vs_booksim: Option<f64>,
}

pub fn run(a: BenchArgs) -> CliResult<ExitCode> {
    if a.repeat == 0 {
        return Err("--repeat 0: at least one repetition is needed".into());
    }
    if a.threads.is_empty() || a.threads.contains(&0) {
        return Err("--threads: thread counts must be >= 1".into());
    }
    if let Some(p) = &a.json {
        super::check_writable(p)?;
    }
    // BookSim2's figure was measured on 8x8 at 0.30 only; elsewhere a ratio means nothing.
    let reference = a.k == 8 && (a.rate - 0.30).abs() < 1e-12;
    let mut rows = Vec::new();
    println!("{:>7} {:>7} {:>9} {:>9} {:>9} {:>12} {:>14} {:>9}", "threads", "cycles", "min s", "median s", "max s", "cycles/s", "router-cyc/s", "x BookSim");
    for &t in &a.threads {
        let mut cfg = NocCfg::default();
        cfg.mesh.k = a.k;
        cfg.traffic.rate = a.rate;
        cfg.sim.threads = t;
        cfg.validate().map_err(|e| e.to_string())?;
        let mut walls = Vec::new();
        let mut cycles = 0;
        for _ in 0..a.repeat.max(1) {
            let start = std::time::Instant::now();
            let (r, _) = run_point(&cfg, None, &mut |_| {}).map_err(|e| e.to_string())?;
            walls.push(start.elapsed().as_secs_f64());
            cycles = r.cycles;
        }
        walls.sort_by(|x, y| x.partial_cmp(y).unwrap());
        let med = walls[walls.len() / 2];
        let cps = cycles as f64 / med;
        let row = BenchRow {
            k: a.k,
            rate: a.rate,
            threads: t,
            cycles,
            wall_min: walls[0],
            wall_median: med,
            wall_max: *walls.last().unwrap(),
            cycles_per_second: cps,
            router_cycles_per_second: cps * (a.k * a.k) as f64,
            vs_booksim: reference.then(|| cps / BOOKSIM_CYCLES_PER_S),
        };
        println!(
            "{:>7} {:>7} {:>9.4} {:>9.4} {:>9.4} {:>12.0} {:>14.0} {:>9}",
            row.threads, row.cycles, row.wall_min, row.wall_median, row.wall_max, row.cycles_per_second, row.router_cycles_per_second, row.vs_booksim.map_or("-".to_string(), |v| format!("{v:.1}"))
        );
        rows.push(row);
    }
    if reference {
        println!("(median wall time incl. network construction; BookSim2 reference: {BOOKSIM_CYCLES_PER_S} cycles/s at 0.30 on 8x8)");
    } else {
        println!("(median wall time incl. network construction; absolute figures: BookSim2's reference is 8x8 at 0.30 only, so no ratio for k={} rate={})", a.k, a.rate);
    }
    if let Some(p) = &a.json {
        ensure_parent(p)?;
        std::fs::write(p, serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())? + "\n").map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}
