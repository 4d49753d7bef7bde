//! `waferstream run [config.toml]`: a whole scenario from a config file, or the embedded
//! default (testbenches/configs/default.toml).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use hw::noc::{run_sweep, NocCfg};
use serde::{Deserialize, Serialize};

use super::noc::{print_table, progress_bar, sweep_progress, traced_point, wave_opts, WaveArgs};
use super::{ensure_parent, CliResult};

/// The embedded default scenario.
pub const DEFAULT_SCENARIO: &str = include_str!("../../testbenches/configs/default.toml");

/// A scenario file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioCfg {
    pub scenario: ScenarioHeader,
    #[serde(default)]
    pub noc: NocCfg,
    #[serde(default)]
    pub output: OutputCfg,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioHeader {
    pub name: String,
    pub kind: ScenarioKind,
    /// Injection rates to sweep (flits/node/cycle); the config's traffic.rate if empty.
    #[serde(default)]
    pub rates: Vec<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScenarioKind {
    /// Mesh NoC under synthetic traffic.
    NocSweep,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct OutputCfg {
    pub json: Option<PathBuf>,
    pub vcd: Option<PathBuf>,
    pub fst: Option<PathBuf>,
    pub trace: Vec<String>,
    pub window: Option<String>,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Scenario config (TOML); the embedded default when omitted.
    pub config: Option<PathBuf>,
    /// Override: JSON stats output.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Override the file's [output] waveform settings.
    #[command(flatten)]
    pub waves: WaveArgs,
    /// Print the embedded default scenario and exit.
    #[arg(long = "print-default")]
    pub print_default: bool,
    #[arg(long)]
    pub quiet: bool,
}

pub fn parse_scenario(text: &str, origin: &str) -> CliResult<ScenarioCfg> {
    let s: ScenarioCfg = super::noc::parse_toml(text, origin)?;
    s.noc.validate().map_err(|e| format!("{origin}: {}", e.to_string().replacen("config field `", "config field `noc.", 1)))?;
    if let Some(r) = s.scenario.rates.iter().find(|r| !(r.is_finite() && (0.0..=1.0).contains(*r))) {
        return Err(format!("{origin}: config field `scenario.rates`: rate {r} outside 0..=1 flits/node/cycle"));
    }
    Ok(s)
}

pub fn run(a: RunArgs) -> CliResult<ExitCode> {
    if a.print_default {
        print!("{DEFAULT_SCENARIO}");
        return Ok(ExitCode::SUCCESS);
    }
    let sc = match &a.config {
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
            parse_scenario(&text, &p.display().to_string())?
        }
        None => parse_scenario(DEFAULT_SCENARIO, "embedded default scenario")?,
    };
    let o = &sc.output;
    let json = a.json.clone().or(o.json.clone());
    let w = &a.waves;
    let waves = wave_opts(&WaveArgs {
        vcd: w.vcd.clone().or(o.vcd.clone()),
        fst: w.fst.clone().or(o.fst.clone()),
        trace: if w.trace.is_empty() { o.trace.clone() } else { w.trace.clone() },
        window: w.window.clone().or(o.window.clone()),
    })?;
    for p in [json.as_ref(), waves.as_ref().map(|w| &w.path)].into_iter().flatten() {
        super::check_writable(p)?;
    }
    if sc.scenario.rates.len() > super::noc::MAX_RATES {
        return Err(format!("config field `scenario.rates`: {} rates, at most {}", sc.scenario.rates.len(), super::noc::MAX_RATES));
    }
    println!("scenario `{}` ({:?})", sc.scenario.name, sc.scenario.kind);
    tracing::info!(name = %sc.scenario.name, "running scenario");
    let rates = if sc.scenario.rates.is_empty() { vec![sc.noc.traffic.rate] } else { sc.scenario.rates.clone() };
    let pb = progress_bar(a.quiet, rates.len() as u64, &sc.scenario.name);
    let mut result = run_sweep(&sc.noc, &rates, &mut sweep_progress(&pb, &rates, 0)).map_err(|e| e.to_string())?;
    pb.finish_and_clear();
    let mut late_error = None;
    if let Some(w) = &waves {
        let mut c = sc.noc.clone();
        c.traffic.rate = rates[0];
        let t = traced_point(&c, Some(w), None, &progress_bar(true, 0, ""))?;
        late_error = t.late_error;
        let p = t.result;
        // Tracing never changes results.
        if p.avg_packet_latency != result.points[0].avg_packet_latency || p.cycles != result.points[0].cycles {
            return Err("internal: traced run differs from untraced run".into());
        }
        result.points[0] = p;
    }
    print_table(&result);
    if let Some(p) = &json {
        ensure_parent(p)?;
        let v = serde_json::json!({ "scenario": sc.scenario, "config": sc.noc, "result": result });
        std::fs::write(p, serde_json::to_string_pretty(&v).map_err(|e| e.to_string())? + "\n").map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        println!("wrote {}", p.display());
    }
    if let Some(w) = &waves {
        println!("wrote {}", w.path.display());
    }
    if let Some(e) = late_error {
        return Err(e);
    }
    Ok(ExitCode::SUCCESS)
}
