//! `waferstream reproduce [fsedp|moentwine|gps|semmoe|all] [--quick] --out DIR`: each paper's
//! claims under the paper's setup and under ours, written as `claims.json` and `claims.md`
//! (`testbenches::run::reproduce`; setups in `testbenches/papers/`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use testbenches::run::reproduce::{self, Paper, ReproOptions};

use super::CliResult;

#[derive(Args, Debug)]
pub struct ReproduceArgs {
    /// Which paper: fsedp, moentwine, gps, semmoe, or all.
    #[arg(default_value = "all")]
    pub paper: String,
    /// Smaller sizes of the same setups (a few minutes for all four papers).
    #[arg(long)]
    pub quick: bool,
    /// Output directory (claims.json, claims.md).
    #[arg(long)]
    pub out: PathBuf,
    /// A setup file replacing the paper's embedded one (`testbenches/papers/NAME.toml`
    /// format); one paper only.
    #[arg(long)]
    pub setup: Option<PathBuf>,
    /// Worker threads (default: all cores); results do not depend on it.
    #[arg(long)]
    pub threads: Option<u32>,
    /// Compare with the committed reports in a directory (`NAME.json` per paper, e.g.
    /// testbenches/papers/quick); exit 1 and list every claim that changed.
    #[arg(long)]
    pub compare: Option<PathBuf>,
    /// Print the paper's embedded setup file and exit.
    #[arg(long = "print-setup")]
    pub print_setup: bool,
}

pub fn run(a: ReproduceArgs) -> CliResult<ExitCode> {
    let papers = Paper::parse_list(&a.paper).map_err(|e| e.to_string())?;
    if a.print_setup {
        for p in &papers {
            print!("{}", p.setup_toml());
        }
        return Ok(ExitCode::SUCCESS);
    }
    if a.threads == Some(0) {
        return Err("--threads: must be at least 1".into());
    }
    super::check_writable(&a.out.join("claims.json"))?;
    if let Some(c) = &a.compare {
        if !c.is_dir() {
            return Err(format!("--compare: {} is not a directory", c.display()));
        }
    }
    let o = ReproOptions { quick: a.quick, threads: a.threads, setup: a.setup.as_ref().map(|p| p.display().to_string()) };
    let parts = reproduce::run(&papers, &o).map_err(|e| e.to_string())?;
    let reports: Vec<_> = parts.ok.iter().map(|(_, r)| r.clone()).collect();
    reproduce::write(&reports, &a.out).map_err(|e| e.to_string())?;
    print!("{}", reproduce::markdown(&reports).split("\n## ").next().unwrap_or(""));
    println!("wrote {} and {}", a.out.join("claims.json").display(), a.out.join("claims.md").display());
    for (p, e) in &parts.failed {
        eprintln!("error: {}: {e}", p.name());
    }
    let mut code = if parts.failed.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(3) };
    if let Some(c) = &a.compare {
        let diffs = reproduce::compare(&reports, c).map_err(|e| e.to_string())?;
        if diffs.is_empty() {
            println!("compare: every claim equals {}", c.display());
        } else {
            println!("compare: {} difference(s) from {}:", diffs.len(), c.display());
            for d in &diffs {
                println!("  {d}");
            }
            code = ExitCode::from(1);
        }
    }
    Ok(code)
}
