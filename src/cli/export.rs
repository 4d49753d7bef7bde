//! `waferstream export-verilog`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::CliResult;

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// Output directory (one .v per block + manifest.json).
    #[arg(long, default_value = "out/verilog")]
    pub out: PathBuf,
}

pub fn run(a: ExportArgs) -> CliResult<ExitCode> {
    let m = rtl::export::export_all(&a.out).map_err(|e| e.to_string())?;
    for b in &m.modules {
        println!("  {}", b.file);
    }
    println!("wrote {} Verilog module(s), manifest.json and {} to {}", m.modules.len(), m.verilator_waivers, a.out.display());
    Ok(ExitCode::SUCCESS)
}
