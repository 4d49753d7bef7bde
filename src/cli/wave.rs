//! `waferstream wave diff|stats|check`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use super::CliResult;

#[derive(Subcommand, Debug)]
pub enum WaveCmd {
    /// First differing signal and time of two dumps (VCD or FST); exit code 1 if they differ.
    Diff { a: PathBuf, b: PathBuf },
    /// Signals, scopes, time range and the busiest signals of a dump.
    Stats { file: PathBuf },
    /// Runs every waveform checker that applies to the dump (package: ring capacity,
    /// trajectory visits, ICV grants; wafer: links idle where the mapping says so) and names
    /// those whose signals the dump lacks (`skip`); exit code 1 if one fails. A dump without
    /// value changes is refused.
    Check { file: PathBuf },
    /// Writes a GTKWave save file for a dump (VCD or FST): its signals grouped by block
    /// (IO die, link, router, chiplet, die, NI), each group collapsed, ready to open with
    /// `gtkwave -a OUT`.
    Gtkw {
        file: PathBuf,
        /// The save file (default: the dump's path with `.gtkw`).
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

pub fn run(c: WaveCmd) -> CliResult<ExitCode> {
    match c {
        WaveCmd::Diff { a, b } => {
            let r = waves::diff(&a, &b).map_err(|e| e.to_string())?;
            println!("{r}");
            Ok(match r {
                waves::DiffResult::Same { .. } => ExitCode::SUCCESS,
                _ => ExitCode::from(1),
            })
        }
        WaveCmd::Check { file } => {
            let report = waves::check_dump(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            let rs = &report.results;
            if rs.is_empty() {
                return Err(format!("{}: no checker applies to this dump", file.display()));
            }
            for r in rs {
                println!("{} {}: {}", if r.ok { "ok  " } else { "FAIL" }, r.name, r.detail);
            }
            // A checker whose signals are absent is named, not dropped (issue 19).
            for (name, why) in &report.skipped {
                println!("skip {name}: {why}");
            }
            Ok(if rs.iter().all(|r| r.ok) { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        WaveCmd::Gtkw { file, out } => {
            let out = out.unwrap_or_else(|| file.with_extension("gtkw"));
            super::check_writable(&out).map_err(|e| format!("--out: {e}"))?;
            if !file.is_file() {
                return Err(format!("{}: no such dump", file.display()));
            }
            super::write_gtkw(&[(file, out)], false)?;
            Ok(ExitCode::SUCCESS)
        }
        WaveCmd::Stats { file } => {
            let s = waves::stats(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            println!("{s}");
            Ok(ExitCode::SUCCESS)
        }
    }
}
