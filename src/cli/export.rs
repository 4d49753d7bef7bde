//! `waferstream export-verilog`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use rtl::export::{export_all, select, ExportFilter, REGISTRY};

use super::CliResult;

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// Output directory (one .v per module, co-sim files, manifest.json, waiver file).
    #[arg(long, default_value = "out/verilog")]
    pub out: PathBuf,
    /// Export only this registered block (or one module name, e.g. rr_arbiter_5).
    #[arg(long)]
    pub block: Option<String>,
    /// KEY=VALUE: select among the block's registered parameter sets (repeatable; needs --block).
    #[arg(long = "param", value_name = "KEY=VALUE")]
    pub params: Vec<String>,
    /// Co-simulation cycles instead of each block's default.
    #[arg(long)]
    pub cycles: Option<usize>,
    /// Stimulus seed of the co-simulation recorders.
    #[arg(long)]
    pub seed: Option<u64>,
}

pub fn run(a: ExportArgs) -> CliResult<ExitCode> {
    let params = a
        .params
        .iter()
        .map(|p| ExportFilter::parse_param(p))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let filter = ExportFilter {
        block: a.block,
        params,
        cycles: a.cycles,
        seed: a.seed,
    };
    // Refuse a bad selection before the directory is touched (export_all checks it again).
    select(&filter).map_err(|e| e.to_string())?;
    let m = export_all(&a.out, &filter).map_err(|e| e.to_string())?;
    for b in &m.modules {
        match &b.cosim {
            Some(c) => println!("  {} (+ co-sim: {} cycles, {})", b.file, c.cycles, c.testbench),
            None => println!("  {}", b.file),
        }
    }
    println!(
        "wrote {} Verilog module(s) of {} registered block(s), manifest.json and {} to {}",
        m.modules.len(),
        REGISTRY.len(),
        m.verilator_waivers,
        a.out.display()
    );
    Ok(ExitCode::SUCCESS)
}
