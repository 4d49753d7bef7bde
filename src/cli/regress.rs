//! `waferstream regress`: the testbenches crate's regression suite.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::{ensure_parent, CliResult};

#[derive(Args, Debug)]
pub struct RegressArgs {
    /// Run only cases whose name contains one of these substrings.
    pub filter: Vec<String>,
    /// Write a JUnit XML report.
    #[arg(long)]
    pub junit: Option<PathBuf>,
    /// List the cases and exit.
    #[arg(long)]
    pub list: bool,
}

pub fn run(a: RegressArgs) -> CliResult<ExitCode> {
    let cases = testbenches::regress::cases();
    if let Some(p) = &a.junit {
        super::check_writable(p)?;
    }
    if a.list {
        let shown: Vec<_> = cases.iter().filter(|c| a.filter.is_empty() || a.filter.iter().any(|f| c.name.contains(f.as_str()))).collect();
        if shown.is_empty() {
            return Err(format!("no regression case matches {:?}", a.filter));
        }
        for c in shown {
            println!("{:<40} {}", c.name, c.about);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let report = testbenches::regress::run(&cases, &a.filter, &mut |name, ok, secs| {
        eprintln!("{} {name} ({secs:.2} s)", if ok { "PASS" } else { "FAIL" });
    });
    if report.results.is_empty() {
        return Err(format!("no regression case matches {:?} (try --list)", a.filter));
    }
    print!("{}", report.table());
    if let Some(p) = &a.junit {
        ensure_parent(p)?;
        std::fs::write(p, report.junit_xml()).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        println!("wrote {}", p.display());
    }
    Ok(if report.failed() == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
