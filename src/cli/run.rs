//! `waferstream run [config.toml]`: a whole scenario from a config file, or the embedded
//! default (testbenches/configs/default.toml).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use hw::noc::{run_sweep, NocCfg};
use serde::{Deserialize, Serialize};

use hw::pkg::config::{PkgCfg, Strategy};
use sched::models::ModelPreset;

use super::noc::{print_table, progress_bar, sweep_progress, traced_point, wave_opts, WaveArgs};
use super::package::{Workload, WorkloadCfg};
use super::{ensure_parent, CliResult};

/// The embedded default scenario.
pub const DEFAULT_SCENARIO: &str = include_str!("../../testbenches/configs/default.toml");

/// Embedded named scenarios (`waferstream run NAME`).
pub const NAMED: [(&str, &str); 2] = [("default", DEFAULT_SCENARIO), ("noc-sweep", include_str!("../../testbenches/configs/noc_sweep.toml"))];

/// A scenario file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioCfg {
    pub scenario: ScenarioHeader,
    #[serde(default)]
    pub noc: NocCfg,
    /// `kind = "package"`: the package and what runs on it.
    #[serde(default)]
    pub package: PkgCfg,
    #[serde(default)]
    pub workload: WorkloadCfg,
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
    /// One MoE layer on the FSE-DP chiplet package, per strategy.
    Package,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct OutputCfg {
    pub json: Option<PathBuf>,
    /// Package scenarios: directory for the plots (SVG).
    pub plots: Option<PathBuf>,
    pub vcd: Option<PathBuf>,
    pub fst: Option<PathBuf>,
    pub trace: Vec<String>,
    pub window: Option<String>,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Scenario config (TOML), or an embedded scenario's name (default, noc-sweep); the
    /// embedded default when omitted.
    pub config: Option<PathBuf>,
    /// Override: JSON stats output.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Override: plot directory (package scenarios).
    #[arg(long)]
    pub plot: Option<PathBuf>,
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
    if s.scenario.kind == ScenarioKind::Package {
        s.package.validate().map_err(|e| format!("{origin}: {}", e.under("package")))?;
    }
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
    let named = a.config.as_ref().and_then(|p| p.to_str()).and_then(|n| NAMED.iter().find(|(k, _)| *k == n)).filter(|_| !a.config.as_ref().is_some_and(|p| p.exists()));
    let sc = match &a.config {
        Some(_) if named.is_some() => {
            let (n, text) = named.expect("checked");
            parse_scenario(text, &format!("embedded scenario `{n}`"))?
        }
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
    let plots = a.plot.clone().or(o.plots.clone());
    if sc.scenario.kind == ScenarioKind::Package {
        return run_package(&sc, json.as_deref(), plots.as_deref(), waves.as_ref(), a.quiet);
    }
    if plots.is_some() {
        return Err("--plot / config field `output.plots`: plots are drawn for package scenarios (a noc sweep writes its curve with `noc --plot`)".into());
    }
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

/// Checks a `kind = "package"` scenario beyond its parse: the model, the workload's ranges and
/// strategies, the package against the model. Each error names its field. `run` and `sweep`
/// both go through here.
pub(super) fn check_package(sc: &ScenarioCfg) -> CliResult<(ModelPreset, Vec<Strategy>)> {
    let w = &sc.workload;
    if !sc.scenario.rates.is_empty() {
        return Err("config field `scenario.rates`: a package scenario has no injection rates".into());
    }
    let model = sched::models::model_by_name(&w.model).map_err(|e| format!("config field `workload.model`: {e}"))?;
    sc.package.validate_for(model.d_ffn).map_err(|e| e.under("package").to_string())?;
    if w.tokens == 0 || w.tokens > 1 << 20 {
        return Err(format!("config field `workload.tokens`: {} outside 1..=1048576", w.tokens));
    }
    if !(w.skew.is_finite() && (0.0..=10.0).contains(&w.skew)) {
        return Err(format!("config field `workload.skew`: {} outside 0..=10", w.skew));
    }
    if w.iters == 0 {
        return Err("config field `workload.iters`: at least 1 iteration".into());
    }
    let strategies = super::package::parse_strategies(&w.strategies.join(",")).map_err(|e| e.replace("--strategy", "config field `workload.strategies`"))?;
    Ok((model, strategies))
}

/// The generated routing of a checked package scenario: `workload.iters` iterations of
/// `workload.tokens` tokens, one layer (the same `workload_from` as `package`).
pub(super) fn package_workload(sc: &ScenarioCfg, model: &ModelPreset) -> CliResult<Workload> {
    let w = &sc.workload;
    super::package::workload_from(model, w.tokens, w.skew, w.seed.max(1), None, Some(0..w.iters as usize), None, model.d_model, model.d_ffn)
        .map_err(|e| e.replace("--iters", "config field `workload.iters`"))
}

/// A `kind = "package"` scenario: the workload's strategies on the package, a comparison table
/// (and plots when asked).
fn run_package(sc: &ScenarioCfg, json: Option<&std::path::Path>, plots: Option<&std::path::Path>, waves: Option<&super::noc::WaveOpts>, quiet: bool) -> CliResult<ExitCode> {
    use super::package::{parts_outcome, print_results, run_parts, split_parts, write_json};
    let w = &sc.workload;
    if waves.is_some_and(|o| !o.globs.is_empty() || o.window.is_some()) {
        return Err("--trace/--window select mesh signals of a noc_sweep scenario; a package scenario traces every signal".into());
    }
    let (model, strategies) = check_package(sc)?;
    // One waveform per strategy (NAME-<strategy>.EXT when several): every one checked now.
    if let Some(o) = waves {
        let names: Vec<&str> = strategies.iter().map(|s| s.name()).collect();
        super::check_per_part(if o.format == waves::WaveFormat::Fst { "--fst" } else { "--vcd" }, &o.path, &names)?;
    }
    let work = package_workload(sc, &model)?;
    let mut cfg = sc.package.clone();
    if let Some(d) = plots {
        super::package::check_plot_dir(d)?;
        cfg.sim.timeline = true;
    }
    let iters = if w.iters > 1 { format!("{} iterations x ", w.iters) } else { String::new() };
    println!("{iters}{} tokens of {} on {}x{} chiplets, strategies {}", w.tokens, model.name, cfg.rows, cfg.cols, w.strategies.join(", "));
    let parts = run_parts(&cfg, &strategies, &work, w.functional, waves.map(|o| (o.path.as_path(), o.format)), quiet, hw::pkg::package::PkgRtl::default())?;
    let (results, failed) = split_parts(parts);
    if results.is_empty() {
        return parts_outcome(strategies.len() > 1, &failed).map(|c| c.unwrap_or(ExitCode::from(2)));
    }
    print_results(&results, &failed);
    if let Some(p) = json {
        // `tokens` as `package` and `sweep` count them: token lines run, every iteration.
        write_json(p, &cfg, &model, work.trace.tokens.len(), 1, &results, &failed)?;
        println!("wrote {}", p.display());
    }
    if let Some(d) = plots {
        let title = format!("{} {} tokens, {}x{}", model.name, w.tokens, cfg.rows, cfg.cols);
        let files = super::plot::package_plots(d, &title, &results)?;
        println!("wrote {} plots to {}: {}", files.len(), d.display(), files.iter().filter_map(|f| f.file_name()).map(|f| f.to_string_lossy().to_string()).collect::<Vec<_>>().join(", "));
    }
    if let Some(code) = parts_outcome(strategies.len() > 1, &failed)? {
        return Ok(code);
    }
    Ok(ExitCode::SUCCESS)
}
