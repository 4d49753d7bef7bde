//! `waferstream noc`: BookSim-style latency/throughput sweep of a k×k mesh.

use std::path::PathBuf;

use clap::Args;
use hw::noc::{run_sweep_with, NocCfg, NocRtl, SweepResult, TrafficPattern, WaveOut};
use indicatif::{ProgressBar, ProgressStyle};

use super::{ensure_parent, CliResult};

#[derive(Args, Debug, Clone)]
pub struct NocArgs {
    /// Base config (TOML with the tables mesh, traffic, measure, sim); flags override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Routers per side.
    #[arg(long)]
    pub k: Option<u32>,
    #[arg(long)]
    pub vcs: Option<u32>,
    /// Flits per VC buffer.
    #[arg(long = "vc-buf")]
    pub vc_buf: Option<u32>,
    #[arg(long = "packet-size")]
    pub packet_size: Option<u32>,
    /// uniform | transpose | bitcomp | hotspot
    #[arg(long)]
    pub traffic: Option<String>,
    /// Hotspot nodes (comma list), with --traffic hotspot.
    #[arg(long = "hotspot-nodes", value_delimiter = ',')]
    pub hotspot_nodes: Vec<u32>,
    /// Share of packets sent to the hotspot nodes (default 0.2, or the config's).
    #[arg(long = "hotspot-fraction")]
    pub hotspot_fraction: Option<f64>,
    /// Injection rates in flits/node/cycle: a list `0.05,0.1` or a range `start:stop:step`.
    /// Default: the config's `traffic.rate` when --config is given, else 0.05:0.45:0.05.
    #[arg(long, allow_hyphen_values = true)]
    pub rates: Option<String>,
    #[arg(long)]
    pub seed: Option<u64>,
    /// Worker threads per simulation (results are identical for any count).
    #[arg(long)]
    pub threads: Option<u32>,
    #[arg(long = "routing-delay")]
    pub routing_delay: Option<u32>,
    #[arg(long = "va-delay")]
    pub va_delay: Option<u32>,
    #[arg(long = "sa-delay")]
    pub sa_delay: Option<u32>,
    #[arg(long = "st-delay")]
    pub st_delay: Option<u32>,
    #[arg(long = "link-latency")]
    pub link_latency: Option<u32>,
    #[arg(long = "credit-delay")]
    pub credit_delay: Option<u32>,
    /// Flit size in bytes (with --link-width: serialization over narrow links).
    #[arg(long = "flit-bytes")]
    pub flit_bytes: Option<u32>,
    /// Router-to-router link width in bytes per cycle.
    #[arg(long = "link-width")]
    pub link_width: Option<u32>,
    /// Step every cycle even when idle (results are identical; for checking that claim).
    #[arg(long = "no-fast-forward")]
    pub no_fast_forward: bool,
    /// Write the results as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub waves: WaveArgs,
    /// Write the load-latency curve as SVG.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Print a per-cycle line trace of the routers whose scope matches this glob (e.g.
    /// 'top.mesh.r_1_*'), streamed while the first rate runs, within --window (default
    /// 0..200; clamped to the run; a window starting after the run is an error).
    #[arg(long = "line-trace")]
    pub line_trace: Option<String>,
    /// Include every router's counters (hierarchical names) in the JSON.
    #[arg(long = "per-router")]
    pub per_router: bool,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Run this block's rust-hdl RTL twin in every tile in place of its CL model (same
    /// results and waveforms; slower) (default: none, every block CL).
    #[arg(long, value_enum)]
    pub rtl: Option<NocRtlBlock>,
}

/// Blocks with an RTL stand-in for `noc --rtl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NocRtlBlock {
    /// Every tile's router (`router`: VC buffers, allocators, crossbar).
    Router,
}

impl NocRtlBlock {
    pub fn factory(self) -> NocRtl {
        match self {
            NocRtlBlock::Router => NocRtl { router: Some(rtl::noc::router_swap::router_factory) },
        }
    }
}

/// Waveform flags shared by `noc` and `run` (the dump covers the first rate's run).
#[derive(Args, Debug, Clone, Default)]
pub struct WaveArgs {
    /// Dump a VCD (default: none).
    #[arg(long)]
    pub vcd: Option<PathBuf>,
    /// Dump an FST (default: none).
    #[arg(long)]
    pub fst: Option<PathBuf>,
    /// Scope/signal globs to trace, e.g. 'top.mesh.r_3_*' (repeatable; default: everything).
    #[arg(long = "trace")]
    pub trace: Vec<String>,
    /// Cycle window to trace, e.g. 1000..5000 (default: the whole run).
    #[arg(long)]
    pub window: Option<String>,
    /// GTKWave save file for the dump: signals grouped by block (router, chiplet, IO die,
    /// die, link), one per waveform file (NAME-<part>.gtkw when there are several).
    #[arg(long)]
    pub gtkw: Option<PathBuf>,
}

/// Most rates one sweep may hold: each is a full simulation, so a longer list is a typo
/// (e.g. a step of 1e-12), refused before anything is allocated.
pub const MAX_RATES: usize = 1000;

/// The built-in sweep when neither --rates nor a config gives one.
pub const DEFAULT_RATES: &str = "0.05:0.45:0.05";

/// Parses `0.05,0.1` or `start:stop:step` (inclusive of stop within rounding); at most
/// [`MAX_RATES`] points, each finite and in 0..=1.
pub fn parse_rates(s: &str) -> CliResult<Vec<f64>> {
    let bad = |what: &str| format!("--rates `{s}`: {what}");
    let rates: Vec<f64> = if s.contains(':') {
        let parts: Vec<&str> = s.split(':').collect();
        if parts.len() != 3 {
            return Err(bad("a range is start:stop:step"));
        }
        let p: Vec<f64> = parts.iter().map(|x| x.trim().parse::<f64>().map_err(|_| bad(&format!("`{x}` is not a number")))).collect::<Result<_, _>>()?;
        let (a, b, st) = (p[0], p[1], p[2]);
        if let Some(x) = p.iter().find(|x| !x.is_finite()) {
            return Err(bad(&format!("{x} is not a finite number")));
        }
        if st <= 0.0 {
            return Err(bad("step must be > 0"));
        }
        // Count the points in floating point first: an absurd count is refused before
        // any allocation (a step of 1e-12 would otherwise ask for terabytes).
        let nf = ((b - a) / st + 1e-9).floor();
        if nf < 0.0 {
            return Err(bad("stop is below start"));
        }
        if nf + 1.0 > MAX_RATES as f64 {
            return Err(bad(&format!("{} points, at most {MAX_RATES} per sweep (raise the step)", nf + 1.0)));
        }
        let n = nf as i64;
        (0..=n).map(|i| ((a + i as f64 * st) * 1e9).round() / 1e9).collect()
    } else {
        let items: Vec<&str> = s.split(',').collect();
        if items.len() > MAX_RATES {
            return Err(bad(&format!("{} rates, at most {MAX_RATES} per sweep", items.len())));
        }
        items.iter().map(|x| x.trim().parse::<f64>().map_err(|_| bad(&format!("`{x}` is not a number")))).collect::<Result<_, _>>()?
    };
    if rates.is_empty() {
        return Err(bad("no rate given"));
    }
    if let Some(r) = rates.iter().find(|r| !(r.is_finite() && (0.0..=1.0).contains(*r))) {
        return Err(bad(&format!("rate {r} outside 0..=1 flits/node/cycle")));
    }
    Ok(rates)
}

pub fn load_toml<T: serde::de::DeserializeOwned>(path: &std::path::Path) -> CliResult<T> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    parse_toml(&text, &path.display().to_string())
}

/// Parses TOML into a config struct; errors name the origin, the field path (e.g.
/// `mesh.router.vc_buf`) and the line.
/// A config file's struct, or the defaults when no file is given.
pub fn load_toml_or_default<T: serde::de::DeserializeOwned + Default>(path: Option<&std::path::Path>) -> CliResult<T> {
    match path {
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
            parse_toml(&text, &p.display().to_string())
        }
        None => Ok(T::default()),
    }
}

/// Reads a TOML document into `T`; an error names `origin` and the field at fault
/// (`testbenches::run::scenario::parse_toml`).
pub fn parse_toml<T: serde::de::DeserializeOwned>(text: &str, origin: &str) -> CliResult<T> {
    testbenches::run::scenario::parse_toml(text, origin).map_err(|e| e.to_string())
}

pub fn build_cfg(a: &NocArgs) -> CliResult<NocCfg> {
    let mut c: NocCfg = match &a.config {
        Some(p) => load_toml(p)?,
        None => NocCfg::default(),
    };
    let m = &mut c.mesh;
    macro_rules! set {
        ($dst:expr, $src:expr) => {
            if let Some(v) = $src {
                $dst = v;
            }
        };
    }
    set!(m.k, a.k);
    set!(m.router.vcs, a.vcs);
    set!(m.router.vc_buf, a.vc_buf);
    set!(m.router.routing_delay, a.routing_delay);
    set!(m.router.va_delay, a.va_delay);
    set!(m.router.sa_delay, a.sa_delay);
    set!(m.router.st_delay, a.st_delay);
    set!(m.router.credit_delay, a.credit_delay);
    set!(m.link_latency, a.link_latency);
    set!(m.flit_bytes, a.flit_bytes);
    set!(m.link_width_bytes, a.link_width);
    set!(c.traffic.packet_size, a.packet_size);
    set!(c.traffic.seed, a.seed);
    set!(c.sim.threads, a.threads);
    if a.per_router {
        c.measure.per_router_stats = true;
    }
    if a.no_fast_forward {
        c.sim.fast_forward = false;
    }
    if let Some(t) = &a.traffic {
        c.traffic.pattern = match t.as_str() {
            "uniform" => TrafficPattern::Uniform,
            "transpose" => TrafficPattern::Transpose,
            "bitcomp" | "bit-complement" => TrafficPattern::BitComplement,
            "hotspot" => {
                // Precedence: flag > config > built-in default (node 0, fraction 0.2).
                let (cfg_nodes, cfg_frac) = match &c.traffic.pattern {
                    TrafficPattern::Hotspot { nodes, fraction } => (Some(nodes.clone()), Some(*fraction)),
                    _ => (None, None),
                };
                let nodes = if !a.hotspot_nodes.is_empty() { a.hotspot_nodes.clone() } else { cfg_nodes.unwrap_or_else(|| vec![0]) };
                let fraction = a.hotspot_fraction.or(cfg_frac).unwrap_or(0.2);
                TrafficPattern::Hotspot { nodes, fraction }
            }
            other => return Err(format!("--traffic `{other}`: expected uniform, transpose, bitcomp or hotspot")),
        };
    } else if !a.hotspot_nodes.is_empty() || a.hotspot_fraction.is_some() {
        // Override the config's hotspot parameters, or refuse a flag that would do nothing.
        match &mut c.traffic.pattern {
            TrafficPattern::Hotspot { nodes, fraction } => {
                if !a.hotspot_nodes.is_empty() {
                    *nodes = a.hotspot_nodes.clone();
                }
                if let Some(f) = a.hotspot_fraction {
                    *fraction = f;
                }
            }
            _ => return Err("--hotspot-nodes/--hotspot-fraction need --traffic hotspot (or a config with a hotspot pattern)".into()),
        }
    }
    c.validate().map_err(|e| e.to_string())?;
    Ok(c)
}

/// Waveform options shared by `noc` and `run`.
pub struct WaveOpts {
    pub path: PathBuf,
    /// Chosen by the flag (--vcd / --fst), never by the file extension.
    pub format: waves::WaveFormat,
    pub globs: Vec<String>,
    pub window: Option<(u64, u64)>,
}

pub fn wave_opts(w: &WaveArgs) -> CliResult<Option<WaveOpts>> {
    let (trace, window) = (&w.trace, &w.window);
    let (path, format) = match (&w.vcd, &w.fst) {
        (Some(_), Some(_)) => return Err("give one of --vcd / --fst".into()),
        (Some(p), None) => (p.clone(), waves::WaveFormat::Vcd),
        (None, Some(p)) => (p.clone(), waves::WaveFormat::Fst),
        (None, None) => {
            if !trace.is_empty() || window.is_some() {
                return Err("--trace/--window need --vcd or --fst".into());
            }
            return Ok(None);
        }
    };
    let window = match window {
        Some(w) => Some(waves::WaveFilter::parse_window(w).map_err(|e| format!("--window: {e}"))?),
        None => None,
    };
    Ok(Some(WaveOpts { path, format, globs: trace.to_vec(), window }))
}

/// The line trace requested with `--line-trace GLOB` (its window is `--window`, default
/// 0..200).
pub struct LineOpts {
    pub glob: String,
    pub window: (u64, u64),
}

/// Header printed before the line-trace lines.
fn line_trace_header(n: usize, window: (u64, u64)) -> String {
    let end = if window.1 == u64::MAX { "end of run".to_string() } else { window.1.to_string() };
    format!("line trace: {n} router(s), cycles {}..{end} of the first rate's run; per input port and VC: state (. idle, R route, V VC alloc, A active) + occupancy, # = holds a flit that did not leave this cycle; > outputs a flit was switched to; ni[i e q] = injected, ejected, packet queued", window.0)
}

/// A window that starts at or after the end of the run it traces: nothing was traced.
/// Windows count the cycles of the first rate's run, whose length is only known once it ran.
fn window_past_run(what: &str, window: (u64, u64), cycles: u64) -> Option<String> {
    (window.0 >= cycles).then(|| {
        format!("--window {}..{}: the traced run (first rate) ended at cycle {cycles}, before the window starts; {what} (other results were written)", window.0, if window.1 == u64::MAX { String::new() } else { window.1.to_string() })
    })
}

/// Outcome of the traced first rate: its result, and an error to report once every other
/// output is written (a window past the end of the run).
pub struct TracedPoint {
    pub result: hw::noc::PointResult,
    pub late_error: Option<String>,
}

/// Runs one rate with a waveform and/or a line trace (streamed to stdout as the run goes).
/// Windows are clamped by the run; one that starts after the run ended is reported.
pub fn traced_point(cfg: &NocCfg, rtl: NocRtl, w: Option<&WaveOpts>, line: Option<&LineOpts>, pb: &ProgressBar) -> CliResult<TracedPoint> {
    let mesh = hw::noc::Mesh::with_rtl(cfg, rtl).map_err(|e| e.to_string())?;
    let line_filter = match line {
        Some(l) => Some(waves::WaveFilter { globs: vec![l.glob.clone()], window: None }.compile().map_err(|e| format!("--line-trace: {e}"))?),
        None => None,
    };
    let select = |scope: &str| line_filter.as_ref().is_some_and(|f| f.selects(&waves::SignalDecl { scope: scope.split('.').map(String::from).collect(), name: "router".into(), width: 1 }));
    let routers = mesh.tiles().filter(|t| select(&t.scope())).count();
    if let Some(l) = line {
        if routers == 0 {
            return Err(format!("--line-trace `{}` selects no router (scopes look like top.mesh.r_1_2)", l.glob));
        }
    }
    let mut writer = match w {
        Some(w) => {
            let filter = waves::WaveFilter { globs: w.globs.clone(), window: w.window };
            ensure_parent(&w.path)?;
            // Names are streamed: the writer keeps only the selected ones.
            let writer = waves::WaveWriter::create_from(&w.path, w.format, cfg.mesh.period_ps(), mesh.signals_iter(), &filter).map_err(|e| format!("{}: {e}", w.path.display()))?;
            if writer.selected_count() == 0 {
                return Err(format!("--trace {:?} selects no signal (names look like top.mesh.r_0_0.router.in_e.vc0.occ)", w.globs));
            }
            Some(writer)
        }
        None => None,
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut sink = |l: String| -> Result<(), hw::Error> {
        use std::io::Write;
        writeln!(out, "{l}").map_err(|e| hw::Error::Msg(format!("cannot write to stdout: {e}")))
    };
    let lines = match line {
        Some(l) => {
            sink(line_trace_header(routers, l.window)).map_err(|e| e.to_string())?;
            Some(hw::noc::LineTraceOut { select: &select, window: l.window, sink: &mut sink })
        }
        None => None,
    };
    let waves_out = writer.as_mut().map(|w| WaveOut { sink: w });
    let (r, _mesh) = hw::noc::run_mesh(mesh, waves_out, lines, &mut |c| pb.set_message(format!("rate {}: cycle {c}", cfg.traffic.rate))).map_err(|e| e.to_string())?;
    drop(sink);
    std::io::Write::flush(&mut out).map_err(|e| format!("cannot write to stdout: {e}"))?;
    drop(out);
    if let Some(wr) = writer {
        wr.finish(r.cycles).map_err(|e| e.to_string())?;
    }
    let mut late = Vec::new();
    if let Some(l) = line {
        match window_past_run("no line was traced", l.window, r.cycles) {
            Some(e) => late.push(e),
            None if l.window.1 != u64::MAX && l.window.1 > r.cycles => {
                eprintln!("note: --window {}..{}: the run ended at cycle {}, so the line trace stops there", l.window.0, l.window.1, r.cycles)
            }
            None => {}
        }
    }
    if let Some(w) = w {
        if let Some(win) = w.window {
            late.extend(window_past_run(&format!("{} holds only the values at the end of the run", w.path.display()), win, r.cycles));
        }
    }
    Ok(TracedPoint { result: r, late_error: (!late.is_empty()).then(|| late.join("; ")) })
}

/// Progress of a sweep: the bar counts rates; the message shows the current rate's cycle, so
/// a single long rate still shows progress.
pub fn progress_bar(quiet: bool, len: u64, what: &str) -> ProgressBar {
    if quiet || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len);
    pb.set_style(progress_style());
    pb.set_prefix(what.to_string());
    pb
}

fn progress_style() -> ProgressStyle {
    ProgressStyle::with_template("{prefix} [{elapsed_precise}] {bar:30} {pos}/{len} rates  {msg}").unwrap()
}

/// The callback for `run_sweep`: rate `i` at `cycle` (the bar's position is the rates done).
pub fn sweep_progress<'a>(pb: &'a ProgressBar, rates: &'a [f64], offset: usize) -> impl FnMut(usize, u64) + 'a {
    move |i, cycle| {
        pb.set_position((i + offset) as u64);
        pb.set_message(format!("rate {}: cycle {cycle}", rates[i]));
    }
}

pub fn print_table(r: &SweepResult) {
    println!(
        "mesh {k}x{k}, {} VCs x {} flits, packet {} flit(s), {} traffic, seed {}",
        r.vcs,
        r.vc_buf,
        r.packet_size,
        r.traffic,
        r.seed,
        k = r.k
    );
    println!("{:>6} {:>10} {:>9} {:>9} {:>9} {:>9} {:>6} {:>13} {:>8}", "rate", "status", "pkt_lat", "net_lat", "flit_lat", "accepted", "hops", "sat", "cycles");
    for p in &r.points {
        println!(
            "{:>6.3} {:>10} {:>9.2} {:>9.2} {:>9.2} {:>9.4} {:>6.3} {:>13} {:>8}",
            p.rate,
            match p.status {
                // The JSON's name (`not_converged`), but the short form the column always had
                // for the near-zero-load status.
                hw::noc::measure::PointStatus::TooFewPackets => "too-few-pkts".to_string(),
                s => serde_json::to_value(s).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_else(|| format!("{s:?}").to_lowercase()),
            },
            p.avg_packet_latency,
            p.avg_network_latency,
            p.avg_flit_latency,
            p.accepted_flit_rate,
            p.avg_hops,
            if p.saturated { "SATURATED" } else { "-" },
            p.cycles
        );
    }
    match r.saturation_rate {
        Some(s) => println!("saturation: lowest saturated rate {s}, accepted-throughput plateau {:.4} flits/node/cycle", r.max_accepted_flit_rate),
        None => println!("no saturation in the swept range (max accepted {:.4})", r.max_accepted_flit_rate),
    }
    println!("{} cycles in {:.3} s = {:.0} cycles/s", r.cycles, r.wall_seconds, r.cycles_per_second);
}

pub fn run(a: NocArgs) -> CliResult<std::process::ExitCode> {
    let cfg = build_cfg(&a)?;
    let rtl = a.rtl.map(NocRtlBlock::factory).unwrap_or_default();
    if rtl.router.is_some() {
        // A configuration the stand-in cannot model is refused before anything runs.
        hw::noc::Mesh::with_rtl(&cfg, rtl).map_err(|e| format!("--rtl router: {e}"))?;
    }
    let rates = match (&a.rates, &a.config) {
        (Some(r), _) => parse_rates(r)?,
        // A config's `traffic.rate` is one point; it wins over the built-in sweep.
        (None, Some(_)) => vec![cfg.traffic.rate],
        (None, None) => parse_rates(DEFAULT_RATES)?,
    };
    // Every output path is checked before simulating, so a typo never loses a sweep.
    for p in [&a.json, &a.plot, &a.waves.vcd, &a.waves.fst].into_iter().flatten() {
        super::check_writable(p)?;
    }
    super::check_gtkw(a.waves.gtkw.as_deref(), a.waves.vcd.is_some() || a.waves.fst.is_some(), &[""])?;
    let line = match &a.line_trace {
        Some(glob) => {
            let window = match &a.waves.window {
                Some(w) => waves::WaveFilter::parse_window(w).map_err(|e| format!("--window: {e}"))?,
                None => (0, 200),
            };
            Some(LineOpts { glob: glob.clone(), window })
        }
        None => None,
    };
    let mut wave_args = a.waves.clone();
    if a.line_trace.is_some() && wave_args.vcd.is_none() && wave_args.fst.is_none() {
        wave_args.window = None; // the window was the line trace's
    }
    let waves = wave_opts(&wave_args)?;
    let pb = progress_bar(a.quiet, rates.len() as u64, "noc");
    let mut late_error = None;
    let result = if waves.is_some() || line.is_some() {
        // The first rate with waves and/or the line trace (streamed as it runs), the others
        // without; one table.
        let mut c = cfg.clone();
        c.traffic.rate = rates[0];
        let start = std::time::Instant::now();
        let t = traced_point(&c, rtl, waves.as_ref(), line.as_ref(), &pb)?;
        late_error = t.late_error;
        pb.inc(1);
        let rest = run_sweep_with(&cfg, rtl, &rates[1..], &mut sweep_progress(&pb, &rates[1..], 1)).map_err(|e| e.to_string())?;
        let mut r = rest;
        r.points.insert(0, t.result);
        r.cycles = r.points.iter().map(|p| p.cycles).sum();
        r.wall_seconds = start.elapsed().as_secs_f64();
        r.cycles_per_second = r.cycles as f64 / r.wall_seconds;
        r.saturation_rate = hw::noc::measure::lowest_saturated(&r.points);
        r.max_accepted_flit_rate = r.points.iter().map(|p| p.accepted_flit_rate).fold(0.0, f64::max);
        r
    } else {
        run_sweep_with(&cfg, rtl, &rates, &mut sweep_progress(&pb, &rates, 0)).map_err(|e| e.to_string())?
    };
    pb.finish_and_clear();
    print_table(&result);
    if let Some(p) = &a.json {
        ensure_parent(p)?;
        let text = serde_json::to_string_pretty(&result).map_err(|e| e.to_string())?;
        std::fs::write(p, text + "\n").map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        println!("wrote {}", p.display());
    }
    if let Some(w) = &waves {
        println!("wrote {}", w.path.display());
        super::write_gtkw(&super::gtkw_pairs(Some(&w.path), a.waves.gtkw.as_deref(), &[""]), false)?;
    }
    if let Some(p) = &a.plot {
        ensure_parent(p)?;
        super::plot::latency_curve(&result, p)?;
        println!("wrote {}", p.display());
    }
    if let Some(e) = late_error {
        return Err(e);
    }
    Ok(std::process::ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Item 11: a single long rate shows its progress in cycles, not a 0/1 bar.
    #[test]
    fn progress_shows_cycles_of_the_current_rate() {
        let pb = ProgressBar::hidden();
        pb.set_style(progress_style());
        pb.set_length(1);
        let rates = [0.3];
        let mut cb = sweep_progress(&pb, &rates, 0);
        cb(0, 1000);
        cb(0, 5000);
        assert_eq!(pb.position(), 0);
        assert_eq!(pb.message(), "rate 0.3: cycle 5000");
        let rates = [0.1, 0.2];
        let mut cb = sweep_progress(&pb, &rates, 1);
        cb(1, 42);
        assert_eq!((pb.position(), pb.message().as_str()), (2, "rate 0.2: cycle 42"));
    }
}
