//! `waferstream wave diff|stats`.

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
        WaveCmd::Stats { file } => {
            let s = waves::stats(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            println!("{s}");
            Ok(ExitCode::SUCCESS)
        }
    }
}
