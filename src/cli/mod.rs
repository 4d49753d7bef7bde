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
mod reproduce;
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
    /// Waveform tools: diff, stats, check.
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
    /// Each paper's claims under the paper's own setup and under ours: claims.json, claims.md.
    Reproduce(reproduce::ReproduceArgs),
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
        Cmd::Reproduce(a) => reproduce::run(a),
    }
}

/// `AxB` (either case of x, spaces around the numbers allowed) as two whole numbers; `None`
/// otherwise. Each flag words its own error (and its own bounds).
pub fn split_grid(s: &str) -> Option<(u32, u32)> {
    let (a, b) = s.split_once(['x', 'X'])?;
    Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
}

/// Exit code of a run of several parts (strategies, points, balancers) in which some part
/// failed: the finished parts are written, each failed one is reported with its reason
/// (0 ok, 1 a failing check, 2 bad input; docs/user-guide.md "Exit codes").
pub const EXIT_PARTIAL: u8 = 3;

/// The reason of an error, without the model state dump a watchdog appends: its first
/// non-empty line, minus the "state then:" lead-in of the dump.
pub fn reason(e: &str) -> String {
    testbenches::run::package::reason(e)
}

/// The stderr line of a part (strategy, mapping, balancer) that failed in a multi-part run;
/// `prefix` is what the part's own error starts with and the line already says.
pub fn report_failed_part(kind: &str, name: &str, e: &str, prefix: &str) {
    eprintln!("error: {kind} {name} failed: {}", reason(e).trim_start_matches(prefix));
}

/// The JSON `failed` list of a multi-part run: `{KIND: name, reason, error}` per failed part.
pub fn failed_parts_json<'a>(kind: &str, failed: impl Iterator<Item = (&'a str, &'a String)>) -> serde_json::Value {
    failed.map(|(name, e)| serde_json::json!({ kind: name, "reason": reason(e), "error": e })).collect()
}

/// Creates the parent directory of an output file. When that fails because a path component
/// is a file, the error names that file ("File exists" alone does not say which).
pub fn ensure_parent(p: &std::path::Path) -> CliResult<()> {
    if let Some(d) = p.parent() {
        if !d.as_os_str().is_empty() {
            if let Err(e) = std::fs::create_dir_all(d) {
                if let Some(f) = d.ancestors().filter(|a| !a.as_os_str().is_empty()).find(|a| a.exists()) {
                    if !f.is_dir() {
                        return Err(format!("cannot create {}: {} is a file, not a directory", d.display(), f.display()));
                    }
                }
                return Err(format!("cannot create {}: {e}", d.display()));
            }
        }
    }
    Ok(())
}

/// Whether `p` names the file this process's standard output goes to (`/dev/stdout`, or the
/// file a shell redirected stdout to): what the run prints would be mixed into it.
fn is_stdout(p: &std::path::Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        use std::os::unix::fs::MetadataExt;
        let Ok(fd) = std::io::stdout().as_fd().try_clone_to_owned() else { return false };
        let (Ok(out), Ok(m)) = (std::fs::File::from(fd).metadata(), std::fs::metadata(p)) else { return false };
        out.dev() == m.dev() && out.ino() == m.ino()
    }
    #[cfg(not(unix))]
    {
        let _ = p;
        false
    }
}

/// The one check of an output path, run for every path a run will write before anything is
/// simulated: creates its parent directory and opens the file for writing (without
/// truncating an existing file; a file created only for the check is removed). Refused:
/// an empty path, a directory, the standard output (the run's own text would be mixed in),
/// and special files — devices, FIFOs, sockets — (`/dev/full` fails late, `/dev/zero` reads
/// endlessly on a resume, a FIFO blocks the open); `/dev/null` is accepted (output discarded).
/// The error names the path.
pub fn check_writable(p: &std::path::Path) -> CliResult<()> {
    if p.as_os_str().is_empty() {
        return Err("an output path is empty".into());
    }
    ensure_parent(p)?;
    if p.is_dir() {
        return Err(format!("cannot write {}: is a directory", p.display()));
    }
    if is_dev_null(p) {
        // Discarded, even when stdout goes there too.
        return Ok(());
    }
    if is_stdout(p) {
        return Err(format!("cannot write {}: it is the standard output, where the run prints its summary; give a file", p.display()));
    }
    if let Ok(m) = std::fs::metadata(p) {
        if !m.is_file() {
            return Err(format!("cannot write {}: not a regular file (a device, FIFO or socket); give a file path", p.display()));
        }
    }
    let existed = p.exists();
    std::fs::OpenOptions::new().write(true).create(true).truncate(false).open(p).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    if !existed {
        let _ = std::fs::remove_file(p);
    }
    Ok(())
}

/// `/dev/null` (by any path): the one special file accepted as an output.
pub fn is_dev_null(p: &std::path::Path) -> bool {
    std::fs::canonicalize(p).is_ok_and(|c| c == std::path::Path::new("/dev/null"))
}

/// Checks the files a run writes from one base path, one per part (`NAME-<part>.EXT` when
/// there are several, see [`package::wave_path`]): the base itself must be a plain path
/// (the per-part names are derived beside it), then every per-part path. `flag` names the
/// option in errors.
pub fn check_per_part(flag: &str, base: &std::path::Path, parts: &[&str]) -> CliResult<()> {
    check_writable(base).map_err(|e| format!("{flag}: {e}"))?;
    if parts.len() > 1 {
        if base.exists() && !std::fs::metadata(base).is_ok_and(|m| m.is_file()) {
            return Err(format!("{flag} {}: {} parts write NAME-<part> files beside it; give a file path", base.display(), parts.len()));
        }
        for part in parts {
            check_writable(&package::wave_path(base, part, true)).map_err(|e| format!("{flag}: {e}"))?;
        }
    }
    Ok(())
}

/// Every file a multi-part run (package strategies, wafer mappings) will write, checked
/// before it simulates: at most one of `--vcd`/`--fst`, the JSON, and each part's waveform
/// (see [`check_per_part`]).
pub fn check_run_outputs(json: Option<&std::path::Path>, vcd: Option<&std::path::Path>, fst: Option<&std::path::Path>, parts: &[&str]) -> CliResult<()> {
    if vcd.is_some() && fst.is_some() {
        return Err("give --vcd or --fst, not both".into());
    }
    if let Some(p) = json {
        check_writable(p).map_err(|e| format!("--json: {e}"))?;
    }
    for (flag, p) in [("--vcd", vcd), ("--fst", fst)] {
        if let Some(p) = p {
            check_per_part(flag, p, parts)?;
        }
    }
    Ok(())
}

/// Refuses a comma-separated list that names an item twice (`--strategy ep,ep`): it would
/// run the same thing twice and report it as two results.
pub fn no_duplicates<T: PartialEq>(flag: &str, items: &[T], name: impl Fn(&T) -> String) -> CliResult<()> {
    testbenches::run::limits::check_distinct(flag, items, name).map_err(|e| e.to_string())
}

/// `--gtkw FILE`, checked before the run: it needs a waveform (`--vcd`/`--fst`), and its
/// per-part files (`NAME-<part>.gtkw` when there are several parts) must be writable.
pub fn check_gtkw(gtkw: Option<&std::path::Path>, has_waves: bool, parts: &[&str]) -> CliResult<()> {
    let Some(g) = gtkw else { return Ok(()) };
    if !has_waves {
        return Err("--gtkw: a GTKWave save file lays out a dump; give --vcd or --fst too".into());
    }
    check_per_part("--gtkw", g, parts)
}

/// After the run: a GTKWave save file for each waveform the run wrote, `pairs` of (dump,
/// save file); a dump that was not written (a part that failed) gets none.
pub fn write_gtkw(pairs: &[(std::path::PathBuf, std::path::PathBuf)], quiet: bool) -> CliResult<()> {
    for (dump, g) in pairs {
        if !dump.is_file() {
            continue;
        }
        ensure_parent(g)?;
        let s = waves::write_gtkw(dump, g).map_err(|e| format!("--gtkw {}: {e}", g.display()))?;
        if !quiet {
            println!("wrote {} ({} blocks, {} signals laid out)", g.display(), s.groups, s.signals);
        }
    }
    Ok(())
}

/// The (dump, save file) pairs of a multi-part run's `--gtkw`.
pub fn gtkw_pairs(wave: Option<&std::path::Path>, gtkw: Option<&std::path::Path>, parts: &[&str]) -> Vec<(std::path::PathBuf, std::path::PathBuf)> {
    match (wave, gtkw) {
        (Some(w), Some(g)) => parts.iter().map(|p| (package::wave_path(w, p, parts.len() > 1), package::wave_path(g, p, parts.len() > 1))).collect(),
        _ => Vec::new(),
    }
}
