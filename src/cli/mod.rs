//! Subcommands.

mod balance;
mod bench;
mod eplb;
mod export;
mod gps;
mod noc;
mod package;
mod pe;
mod plot;
mod regress;
mod run;
mod semmoe;
mod sweep;
mod trace;
mod wafer;
mod wave;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Errors the CLI reports: one line naming the field, line or file at fault.
pub type CliResult<T> = Result<T, String>;

#[derive(Parser, Debug)]
#[command(name = "waferstream", version, about = "Cycle-accurate hardware model of MoE serving silicon: chiplet packages and wafer-scale meshes", long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Run a scenario: the embedded default, or a TOML config.
    Run(run::RunArgs),
    /// Mesh NoC latency/throughput sweep with BookSim2 semantics.
    Noc(Box<noc::NocArgs>),
    /// Waveform tools: diff, stats.
    #[command(subcommand)]
    Wave(wave::WaveCmd),
    /// Run the regression testbenches.
    Regress(regress::RegressArgs),
    /// Write the controllers' Verilog (one file per block) and a manifest.
    ExportVerilog(export::ExportArgs),
    /// Simulation speed (simulated cycles per wall second) against BookSim2's reference.
    Bench(bench::BenchArgs),
    /// One GEMM on the PE array: cycles and utilization (SCALE-Sim 3.0.0 fold model).
    Pe(pe::PeArgs),
    /// One MoE layer on the FSE-DP chiplet package, per strategy (timing or functional mode).
    Package(Box<package::PackageArgs>),
    /// Routing traces: import real data into the SPEC §8 format, statistics.
    #[command(subcommand)]
    Trace(trace::TraceCmd),
    /// A grid of package scenarios on all cores, one JSON line per point (resumable, shardable).
    Sweep(sweep::SweepArgs),
    /// One MoE layer on the wafer-scale chip (die mesh, collectives, FTDs), per mapping.
    Wafer(Box<wafer::WaferArgs>),
    /// DeepSeek's expert-parallel load balancer (EPLB) on per-layer expert loads: replicas and placement.
    Eplb(eplb::EplbArgs),
    /// Expert load balancing on the wafer over iterations: none, EPLB, topology-aware (invasive), NI-Balancer.
    Balance(Box<balance::BalanceArgs>),
    /// MoE-GPS: which expert-prediction strategy (none, Distribution-Only, Token-to-Expert) wins
    /// where, over skewness and link bandwidth, on the cycle-level wafer system.
    Gps(Box<gps::GpsArgs>),
    /// Sem-MoE token-expert co-scheduling vs round-robin and load-only placement: local activation rate, then measured on the wafer mesh.
    Semmoe(Box<semmoe::SemMoeArgs>),
}

pub fn dispatch(cli: Cli) -> CliResult<ExitCode> {
    match cli.cmd {
        Cmd::Run(a) => run::run(a),
        Cmd::Noc(a) => noc::run(*a),
        Cmd::Wave(w) => wave::run(w),
        Cmd::Regress(a) => regress::run(a),
        Cmd::ExportVerilog(a) => export::run(a),
        Cmd::Bench(a) => bench::run(a),
        Cmd::Pe(a) => pe::run(a),
        Cmd::Trace(t) => trace::run(t),
        Cmd::Package(a) => package::run(*a),
        Cmd::Sweep(a) => sweep::run(a),
        Cmd::Wafer(a) => wafer::run(*a),
        Cmd::Eplb(a) => eplb::run(a),
        Cmd::Balance(a) => balance::run(*a),
        Cmd::Gps(a) => gps::run(*a),
        Cmd::Semmoe(a) => semmoe::run(*a),
    }
}

/// `AxB` (either case of x, spaces around the numbers allowed) as two whole numbers; `None`
/// otherwise. Each flag words its own error (and its own bounds).
pub fn split_grid(s: &str) -> Option<(u32, u32)> {
    let (a, b) = s.split_once(['x', 'X'])?;
    Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
}

/// Creates the parent directory of an output file.
pub fn ensure_parent(p: &std::path::Path) -> CliResult<()> {
    if let Some(d) = p.parent() {
        if !d.as_os_str().is_empty() {
            std::fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
        }
    }
    Ok(())
}

/// Checks, before any simulation, that `p` can be written: creates its parent directory and
/// opens the file for writing (without truncating an existing file; a file created only for
/// the check is removed). The error names the path.
pub fn check_writable(p: &std::path::Path) -> CliResult<()> {
    ensure_parent(p)?;
    if p.is_dir() {
        return Err(format!("cannot write {}: is a directory", p.display()));
    }
    let existed = p.exists();
    std::fs::OpenOptions::new().write(true).create(true).truncate(false).open(p).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    if !existed {
        let _ = std::fs::remove_file(p);
    }
    Ok(())
}
