//! `waferstream run [config.toml]`: a whole scenario from a config file, an embedded
//! scenario's name, or the embedded default (testbenches/configs/default.toml). The file
//! format, its loading and checks are `testbenches::run::scenario`; this module applies the
//! flags, runs and prints.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use hw::noc::run_sweep;
use testbenches::run::scenario::{self, ScenarioCfg, ScenarioKind, DEFAULT_SCENARIO};
use testbenches::run::RunOptions;

use super::noc::{print_table, progress_bar, sweep_progress, traced_point, wave_opts, WaveArgs};
use super::{ensure_parent, CliResult};

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Scenario config (TOML), or an embedded scenario's name (default, noc-sweep, fsedp-paper) (default:
    /// the embedded `default`, a package scenario).
    pub config: Option<PathBuf>,
    /// Override: JSON stats output (default: the file's output.json).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Override: plot directory, package scenarios (default: the file's output.plots).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Override the file's output table's waveform settings.
    #[command(flatten)]
    pub waves: WaveArgs,
    /// Print the embedded default scenario and exit.
    #[arg(long = "print-default")]
    pub print_default: bool,
    /// No progress bars (and no `wrote` line per waveform).
    #[arg(long)]
    pub quiet: bool,
}

pub fn run(a: RunArgs) -> CliResult<ExitCode> {
    if a.print_default {
        print!("{DEFAULT_SCENARIO}");
        return Ok(ExitCode::SUCCESS);
    }
    let sc = scenario::load(a.config.as_deref()).map_err(|e| e.to_string())?;
    let o = &sc.output;
    let json = a.json.clone().or(o.json.clone());
    let w = &a.waves;
    let waves = wave_opts(&WaveArgs {
        vcd: w.vcd.clone().or(o.vcd.clone()),
        fst: w.fst.clone().or(o.fst.clone()),
        trace: if w.trace.is_empty() { o.trace.clone() } else { w.trace.clone() },
        window: w.window.clone().or(o.window.clone()),
        gtkw: w.gtkw.clone(),
    })?;
    super::check_gtkw(w.gtkw.as_deref(), waves.is_some(), &[""])?;
    for p in [json.as_ref(), waves.as_ref().map(|w| &w.path)].into_iter().flatten() {
        super::check_writable(p)?;
    }
    if sc.scenario.rates.len() > super::noc::MAX_RATES {
        return Err(format!("config field `scenario.rates`: {} rates, at most {}", sc.scenario.rates.len(), super::noc::MAX_RATES));
    }
    println!("scenario `{}` ({:?})", sc.scenario.name, sc.scenario.kind);
    tracing::info!(name = %sc.scenario.name, kind = ?sc.scenario.kind, "running scenario");
    let plots = a.plot.clone().or(o.plots.clone());
    if sc.scenario.kind == ScenarioKind::Package {
        return run_package(&sc, json.as_deref(), plots.as_deref(), waves.as_ref(), a.quiet);
    }
    if plots.is_some() {
        return Err("--plot / config field `output.plots`: plots are drawn for package scenarios (a noc sweep writes its curve with `noc --plot`)".into());
    }
    let rates = if sc.scenario.rates.is_empty() { vec![sc.noc.traffic.rate] } else { sc.scenario.rates.clone() };
    let pb = progress_bar(a.quiet, rates.len() as u64, &sc.scenario.name);
    let mut result = run_sweep(&sc.noc, &rates, &mut sweep_progress(&pb, &rates, 0)).map_err(|e| e.to_string())?;
    pb.finish_and_clear();
    let mut late_error = None;
    if let Some(w) = &waves {
        let mut c = sc.noc.clone();
        c.traffic.rate = rates[0];
        let t = traced_point(&c, hw::noc::NocRtl::default(), Some(w), None, &progress_bar(true, 0, ""))?;
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
        super::write_gtkw(&super::gtkw_pairs(Some(&w.path), a.waves.gtkw.as_deref(), &[""]), false)?;
    }
    if let Some(e) = late_error {
        return Err(e);
    }
    Ok(ExitCode::SUCCESS)
}

/// A `kind = "package"` scenario: the workload's strategies on the package, a comparison table
/// (and plots when asked).
fn run_package(sc: &ScenarioCfg, json: Option<&std::path::Path>, plots: Option<&std::path::Path>, waves: Option<&super::noc::WaveOpts>, quiet: bool) -> CliResult<ExitCode> {
    use super::package::{parts_outcome, print_results, split, write_json};
    let w = &sc.workload;
    if waves.is_some_and(|o| !o.globs.is_empty() || o.window.is_some()) {
        return Err("--trace/--window select mesh signals of a noc_sweep scenario; a package scenario traces every signal".into());
    }
    let (_, strategies) = scenario::check_package(sc).map_err(|e| e.to_string())?;
    // One waveform per strategy (NAME-<strategy>.EXT when several): every one checked now.
    if let Some(o) = waves {
        let names: Vec<&str> = strategies.iter().map(|s| s.name()).collect();
        super::check_per_part(if o.format == waves::WaveFormat::Fst { "--fst" } else { "--vcd" }, &o.path, &names)?;
    }
    let run = scenario::package_run(sc, plots.is_some()).map_err(|e| e.to_string())?;
    if let Some(d) = plots {
        super::package::check_plot_dir(d)?;
    }
    let (cfg, model, work) = (run.cfg(), run.model(), run.workload());
    let iters = if w.iters > 1 { format!("{} iterations x ", w.iters) } else { String::new() };
    let layers = if work.layers() > 1 { format!(", {} layers (latencies are their sum)", work.layers()) } else { String::new() };
    println!("{iters}{} tokens of {} on {}x{} chiplets, strategies {}{layers}", w.tokens, model.name, cfg.rows, cfg.cols, w.strategies.join(", "));
    let opts = RunOptions { progress: !quiet, verbose: !quiet, waves: waves.map(|o| testbenches::run::WaveSink { path: o.path.clone(), format: o.format }), ..Default::default() };
    let (results, failed) = split(run.run(&opts));
    if results.is_empty() {
        return parts_outcome(strategies.len() > 1, &failed).map(|c| c.unwrap_or(ExitCode::from(2)));
    }
    print_results(&results, &failed);
    if let Some(n) = &sc.scenario.note {
        println!("{n}");
    }
    if let Some(p) = json {
        // `tokens` as `package` and `sweep` count them: token lines run, every iteration.
        write_json(p, cfg, &model.name, work.tokens(), work.layers(), &results, &failed)?;
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
