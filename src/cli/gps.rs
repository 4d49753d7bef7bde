//! `waferstream gps`: MoE-GPS (seeds/moe-gps.txt, SPEC §5) in the cycle-level system — which
//! prediction strategy wins where (paper Fig. 6/7), measured on the wafer model. The
//! experiment is `testbenches::run::gps`; this parses the flags into it and prints the table.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use sched::balance::gps::{ErrorModel, OverheadCurve, OverheadModel};
use sched::models::{model_by_name, ModelPreset};
use sched::trace::load_trace;
use testbenches::run::gps::{check_skew, DistEstimate, error_model_name, Bandwidth, GpsExperiment, GpsParams, GpsSource, CLOCK_MHZ, FLIT_BYTES};
use testbenches::run::RunOptions;

use super::{check_writable, ensure_parent, CliResult};

const DEFAULT_SKEWS: &str = "1.0,1.2,1.4,1.6,1.8,2.0,2.2";
const DEFAULT_MODEL: &str = "mixtral-8x22b";

#[derive(Args, Debug, Clone)]
pub struct GpsArgs {
    /// Model preset (default mixtral-8x22b — the paper's Mixtral family — or the trace's).
    #[arg(long)]
    pub model: Option<String>,
    /// Routing trace (SPEC §8): iterations are consecutive batches of its tokens (one layer).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// MoE layer of the trace to use.
    #[arg(long, default_value_t = 0)]
    pub layer: u32,
    /// Target skewnesses (most popular expert's tokens / mean), comma-separated; generated
    /// routing only (default 1.0..2.2 step 0.2).
    #[arg(long)]
    pub skew: Option<String>,
    /// Link bandwidths, comma-separated: slow (PCIe 4.0-class, 32 GB/s), fast (NVLink
    /// 3.0-class, 300 GB/s), or GB/s per link and direction (32..=2048).
    #[arg(long, default_value = "slow,fast")]
    pub bandwidth: String,
    /// Token-to-Expert predictor accuracies to try, comma-separated, each in [0, 1].
    #[arg(long, default_value = "0.5,0.7,0.8,0.9,0.95")]
    pub accuracy: String,
    /// How a Token-to-Expert predictor is wrong (paper Fig. 5): optimistic, typical, pessimistic.
    #[arg(long, default_value = "typical")]
    pub error_model: String,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Dies, CxR (every die one rank of the attention TP group and one EP rank).
    #[arg(long, default_value = "4x2")]
    pub wafer: String,
    /// Tokens per iteration (default 2048 generated; with --trace, the trace split evenly over
    /// the warm-up and held-out iterations).
    #[arg(long)]
    pub tokens: Option<u32>,
    /// Iterations the Distribution-Only counters see before the first measured one.
    #[arg(long, default_value_t = 8)]
    pub warmup: u32,
    /// Held-out iterations measured (cycles are their mean).
    #[arg(long, default_value_t = 2)]
    pub iters: u32,
    /// Distribution-Only moving window, iterations.
    #[arg(long, default_value_t = 16)]
    pub window: u32,
    /// Free expert slots per die for duplicates (Algorithm 1's memory M_g).
    #[arg(long, default_value_t = 1)]
    pub spare_slots: u32,
    /// Token-to-Expert overhead fit: `assumed` (the default, docs/gps.md's reading of Fig. 4's
    /// scale), `fig4` (calibrated to the paper's reported predictor costs, docs/gps.md), or
    /// `SKEW:A:B` per curve (fraction = A·exp(B·accuracy)), comma-separated, skewness ascending.
    #[arg(long)]
    pub overhead: Option<String>,
    /// Distribution-Only estimate: `online` (window updated after every held-out iteration)
    /// or `split` (train on the warm-up iterations only, test on the held-out ones; the paper's
    /// train/test error, L9@16695).
    #[arg(long, default_value = "online")]
    pub dist_estimate: String,
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Waveform of the Distribution-Only predictor (its Eq. 1 counters) over the first
    /// workload's iterations, scope `top.gps.dist_only`.
    #[arg(long)]
    pub vcd: Option<PathBuf>,
    #[arg(long)]
    pub quiet: bool,
    /// Run this block's rust-hdl RTL twin in place of its CL model (same plans, points and
    /// waveform; slower) (default: none, every block CL).
    #[arg(long, value_enum)]
    pub rtl: Option<GpsRtl>,
}

/// Blocks with an RTL stand-in for `gps --rtl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GpsRtl {
    /// The Distribution-Only predictor (`dist_only_predictor`: the Eq. 1 window counters).
    Predictor,
}

fn list<T>(s: &str, flag: &str, max: usize, f: impl Fn(&str) -> Result<T, String>) -> CliResult<Vec<T>> {
    let items: Vec<&str> = s.split(',').map(str::trim).collect();
    if items.iter().any(|x| x.is_empty()) {
        return Err(format!("{flag}: empty entry in {s:?}"));
    }
    if items.len() > max {
        return Err(format!("{flag}: at most {max} entries (got {})", items.len()));
    }
    items.into_iter().map(|x| f(x).map_err(|e| format!("{flag}: {e}"))).collect()
}

fn num(x: &str) -> Result<f64, String> {
    x.parse::<f64>().ok().filter(|v| v.is_finite()).ok_or_else(|| format!("{x:?} is not a number"))
}

fn parse_bandwidths(s: &str) -> CliResult<Vec<Bandwidth>> {
    let bws = list(s, "--bandwidth", 8, |x| {
        let (name, gbps) = match x.to_ascii_lowercase().as_str() {
            "slow" | "pcie" => ("slow".to_string(), 32.0),
            "fast" | "nvlink" => ("fast".to_string(), 300.0),
            _ => {
                let v = num(x).map_err(|e| format!("{e}; give slow, fast or GB/s"))?;
                (format!("{v}gbps"), v)
            }
        };
        Bandwidth::new(name, gbps).map_err(testbenches::Error::into_msg)
    })?;
    for (i, b) in bws.iter().enumerate() {
        if bws[..i].iter().any(|x| x.name == b.name || x.link_bytes_per_cycle == b.link_bytes_per_cycle) {
            return Err(format!("--bandwidth: {} is given twice", b.name));
        }
    }
    Ok(bws)
}

fn parse_error_model(s: &str) -> CliResult<ErrorModel> {
    match s.trim().to_ascii_lowercase().as_str() {
        "optimistic" => Ok(ErrorModel::Optimistic),
        "typical" => Ok(ErrorModel::Typical),
        "pessimistic" => Ok(ErrorModel::Pessimistic),
        _ => Err(format!("--error-model: {s:?} is not one of optimistic, typical, pessimistic")),
    }
}

fn parse_overhead(s: &str) -> CliResult<OverheadModel> {
    match s.trim().to_ascii_lowercase().as_str() {
        "assumed" => return Ok(OverheadModel::moe_gps_default()),
        "fig4" => return Ok(OverheadModel::moe_gps_fig4()),
        _ => {}
    }
    let curves = list(s, "--overhead", 16, |x| {
        let p: Vec<&str> = x.split(':').collect();
        if p.len() != 3 {
            return Err(format!("{x:?}: expected assumed, fig4 or SKEW:A:B"));
        }
        Ok(OverheadCurve { skew: num(p[0])?, a: num(p[1])?, b: num(p[2])? })
    })?;
    let m = OverheadModel { curves };
    // The fit's own checks (order, finiteness, a ≥ 0) and no overflow over [0, 1].
    for acc in [0.0, 1.0] {
        for c in &m.curves {
            m.fraction(acc, c.skew).map_err(|e| format!("--overhead: {e}"))?;
        }
    }
    Ok(m)
}

pub fn run(a: GpsArgs) -> CliResult<ExitCode> {
    let t_start = Instant::now();
    // --- Flags (all checked before any output or simulation).
    let (cols, rows) = match super::split_grid(&a.wafer) {
        Some((c, r)) if c > 0 && r > 0 && c * r >= 2 && c <= 8 && r <= 8 => (c, r),
        _ => return Err(format!("--wafer: expected CxR with 2..=64 dies, at most 8 per side, e.g. 4x2 (got {:?})", a.wafer)),
    };
    let bws = parse_bandwidths(&a.bandwidth)?;
    let accs = list(&a.accuracy, "--accuracy", 16, |x| {
        let v = num(x)?;
        if (0.0..=1.0).contains(&v) {
            Ok(v)
        } else {
            Err(format!("{v} is outside [0, 1]"))
        }
    })?;
    let emodel = parse_error_model(&a.error_model)?;
    let overhead = match &a.overhead {
        Some(s) => parse_overhead(s)?,
        None => OverheadModel::moe_gps_default(),
    };
    let dist_estimate = match a.dist_estimate.trim().to_ascii_lowercase().as_str() {
        "online" => DistEstimate::Online,
        "split" => DistEstimate::Split,
        other => return Err(format!("--dist-estimate: {other:?} is not one of online, split")),
    };
    let params = GpsParams {
        wafer: a.wafer.clone(),
        cols,
        rows,
        bandwidths: bws,
        accuracies: accs,
        error_model: emodel,
        overhead,
        seed: a.seed,
        tokens: a.tokens,
        warmup: a.warmup,
        iters: a.iters,
        window: a.window,
        spare_slots: a.spare_slots,
        predictor_vcd: a.vcd.clone(),
        dist_estimate,
        predictor: a.rtl.map(|r| match r {
            GpsRtl::Predictor => rtl::wafer::predictor_swap::dist_only_factory as hw::wafer::predictor::DistOnlyFactory,
        }),
    };
    params.check().map_err(|e| e.to_string())?;
    if a.trace.is_some() && a.skew.is_some() {
        return Err("--skew: not used with --trace (the trace's routing sets the skewness)".into());
    }
    for p in [a.json.as_ref(), a.vcd.as_ref()].into_iter().flatten() {
        check_writable(p)?;
    }
    let trace = match &a.trace {
        Some(p) => Some(load_trace(p).map_err(|e| format!("--trace: {e}"))?),
        None => None,
    };
    let model: ModelPreset = match (&a.model, &trace) {
        (Some(m), _) => model_by_name(m).map_err(|e| format!("--model: {e}"))?,
        (None, Some(t)) => match &t.header.model {
            Some(m) => model_by_name(m).map_err(|e| format!("--trace: header model {m:?} is not a preset ({e}); give --model"))?,
            None => return Err("--trace: the header names no model; give --model".into()),
        },
        (None, None) => model_by_name(DEFAULT_MODEL).map_err(|e| format!("--model: {e}"))?,
    };
    let dies = cols * rows;
    let source = match (trace, &a.trace) {
        (Some(trace), Some(path)) => GpsSource::Trace { path: path.clone(), trace, layer: a.layer },
        _ => {
            let skews = if a.layer != 0 { Vec::new() } else { list(a.skew.as_deref().unwrap_or(DEFAULT_SKEWS), "--skew", 32, |x| check_skew(num(x)?, &model).map_err(testbenches::Error::into_msg))? };
            GpsSource::Generated { skews, layer: a.layer }
        }
    };
    let exp = GpsExperiment::new(params, model, &source).map_err(|e| e.to_string())?;
    let points = exp.run(&RunOptions::default()).map_err(|e| e.to_string())?;
    let (model, tokens, bws, accs, overhead, dist_cfg) = (&exp.model, exp.tokens, &exp.params.bandwidths, &exp.params.accuracies, &exp.params.overhead, exp.dist_cfg);

    // --- Report.
    if !a.quiet {
        println!(
            "gps: {} on {}x{} dies (attention TP={dies} with ring reduce-scatter, experts EP over {dies} dies, {} spare slot(s) each), {tokens} tokens/iteration, {} warm-up + {} held-out iterations, {} T2E errors",
            model.name,
            cols,
            rows,
            a.spare_slots,
            a.warmup,
            a.iters,
            error_model_name(emodel)
        );
        println!("cycles = mean layer cycles of the held-out iterations; T2E = its best accuracy; saving = (T2E - Dist-Only) / none");
        for bw in bws {
            println!("bandwidth {} ({} GB/s per link and direction):", bw.name, bw.bandwidth_gbps);
            println!("  skew  measured   none        dist-only   best T2E (acc)       winner           saving");
            for p in points.iter().filter(|p| p.bandwidth == bw.name) {
                println!(
                    "  {:>4.2}  {:>8.3}   {:>10}  {:>10}  {:>10} ({:>4.2})  {:<15}  {:>+6.1}%",
                    p.skewness,
                    p.measured_skewness,
                    p.no_prediction_cycles,
                    p.dist_only_cycles,
                    p.best_t2e_cycles,
                    p.best_t2e_accuracy,
                    p.winner,
                    100.0 * p.dist_minus_t2e_saving
                );
            }
        }
        if let Some(v) = &a.vcd {
            println!("wrote {}", v.display());
        }
    }
    if let Some(j) = &a.json {
        ensure_parent(j)?;
        let mut v = serde_json::json!({
            "command": "gps",
            "model": model.name,
            "wafer": format!("{cols}x{rows}"),
            "dies": dies,
            "source": if a.trace.is_some() { "trace" } else { "generated" },
            "trace": a.trace.as_ref().map(|p| p.display().to_string()),
            "layer": a.layer,
            "tokens_per_iteration": tokens,
            "warmup_iterations": a.warmup,
            "held_out_iterations": a.iters,
            "seed": a.seed,
            "error_model": error_model_name(emodel),
            "accuracies": accs,
            "overhead_model": overhead,
            "dist_only": dist_cfg,
            "spare_slots": a.spare_slots,
            "flit_bytes": FLIT_BYTES,
            "clock_mhz": CLOCK_MHZ,
            "bandwidths": bws,
            "points": points,
            "wall_seconds": t_start.elapsed().as_secs_f64(),
        });
        // Only when not the default, so default outputs keep their bytes.
        if dist_estimate == DistEstimate::Split {
            v["dist_estimate"] = serde_json::json!("split");
        }
        std::fs::write(j, serde_json::to_string_pretty(&v).map_err(|e| e.to_string())? + "\n").map_err(|e| format!("cannot write {}: {e}", j.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}
