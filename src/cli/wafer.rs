//! `waferstream wafer`: one MoE layer on the wafer-scale chip, per mapping.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use hw::wafer::mapping::MappingCtrlCl;
use hw::wafer::program::{build, LayerProgram};
use hw::wafer::{Wafer, WaferCfg, WaferResult};
use sched::models::{model_by_name, ModelPreset};
use sched::trace::load_trace;
use sched::wafer::{map, Mapping, MappingKind};
use sched::wafer::routing::{generated_routing, trace_routing};

use super::{ensure_parent, CliResult};

#[derive(Args, Debug, Clone, Default)]
pub struct WaferArgs {
    /// Model preset (SPEC §4: deepseek-v3, qwen3-235b, deepseek-v2, dbrx, mixtral-8x22b).
    #[arg(long, default_value = "deepseek-v3")]
    pub model: String,
    /// Dies per wafer, CxR (4x4, 6x6, 8x8).
    #[arg(long)]
    pub wafer: Option<String>,
    /// Wafers, CxR (2x2 for the multi-wafer system).
    #[arg(long)]
    pub wafers: Option<String>,
    /// Tensor parallelism of attention (dies per TP group).
    #[arg(long)]
    pub tp: Option<u32>,
    /// Data parallelism (TP groups); default dies / TP.
    #[arg(long)]
    pub dp: Option<u32>,
    /// Mappings, comma-separated: baseline, er, her.
    #[arg(long, default_value = "baseline,er")]
    pub mapping: String,
    #[arg(long)]
    pub tokens_per_group: Option<u32>,
    #[arg(long)]
    pub micro_batches: Option<u32>,
    /// Drop the all-gather half of the all-reduce (the paper keeps it).
    #[arg(long)]
    pub no_all_gather: bool,
    /// Real values through the collectives (all-reduce chunks, dispatched tokens, expert
    /// outputs), checked against the FL reference after the run; timing is unchanged.
    #[arg(long)]
    pub functional: bool,
    /// Routing trace (SPEC §8): the first iteration's tokens, first layer, in order (reused
    /// cyclically when the layer needs more tokens than the iteration holds).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Zipf skew of the generated routing (0 = uniform).
    #[arg(long)]
    pub skew: Option<f64>,
    #[arg(long)]
    pub seed: Option<u64>,
    /// Wafer config (TOML, the `WaferCfg` fields); flags override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Stepper threads (row bands of dies).
    #[arg(long, default_value_t = 1)]
    pub threads: u32,
    /// Evaluate every cycle (results are identical; for checking).
    #[arg(long)]
    pub no_fast_forward: bool,
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Waveforms of the run (one file per mapping: NAME-<mapping>.vcd when several), scopes
    /// `top.wafer.w_I_J.d_R_C.*`.
    #[arg(long)]
    pub vcd: Option<PathBuf>,
    #[arg(long)]
    pub fst: Option<PathBuf>,
    /// Directory for the per-phase link heatmaps (SVG).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    #[arg(long)]
    pub quiet: bool,
}

fn parse_grid(s: &str, flag: &str) -> CliResult<(u32, u32)> {
    match super::split_grid(s) {
        Some((c, r)) if c > 0 && r > 0 => Ok((c, r)),
        Some(_) => Err(format!("{flag}: both sides must be at least 1 (got {s:?})")),
        None => Err(format!("{flag}: expected CxR in whole numbers, e.g. 4x4 (got {s:?})")),
    }
}

/// The config of the run: file, then flags.
pub fn wafer_cfg(a: &WaferArgs) -> CliResult<WaferCfg> {
    let mut c: WaferCfg = super::noc::load_toml_or_default(a.config.as_deref())?;
    if let Some(w) = &a.wafer {
        (c.die_cols, c.die_rows) = parse_grid(w, "--wafer")?;
    }
    if let Some(w) = &a.wafers {
        (c.wafers_x, c.wafers_y) = parse_grid(w, "--wafers")?;
    }
    // In 64 bits: the config's u32 products wrap (65536 x 65536 dies is "0 dies").
    let (cols, rows) = (c.die_cols as u64 * c.wafers_x as u64, c.die_rows as u64 * c.wafers_y as u64);
    if cols > 64 || rows > 64 {
        let what = match (&a.wafer, &a.wafers) {
            (Some(w), Some(ws)) => format!("--wafer {w} with --wafers {ws}"),
            (Some(w), None) => format!("--wafer {w}"),
            (None, Some(ws)) => format!("--wafers {ws}"),
            (None, None) => "config fields `die_cols`/`die_rows` x `wafers_x`/`wafers_y`".to_string(),
        };
        return Err(format!("{what}: the die grid is {cols}x{rows}; at most 64 dies per side"));
    }
    if let Some(tp) = a.tp {
        c.tp = tp;
    }
    match a.dp {
        Some(dp) => c.dp = dp,
        // Default: the rest of the dies (a config's dp is kept when it matches).
        None if c.tp > 0 && c.dies() % c.tp == 0 && c.tp * c.dp != c.dies() => c.dp = c.dies() / c.tp,
        None => {}
    }
    if let Some(t) = a.tokens_per_group {
        c.tokens_per_group = t;
    }
    if let Some(m) = a.micro_batches {
        c.micro_batches = m;
    }
    if a.no_all_gather {
        c.all_gather = false;
    }
    if let Some(s) = a.seed {
        c.seed = s;
    }
    c.validate().map_err(|e| e.to_string())?;
    Ok(c)
}

/// Refuses a model whose weights do not fit the dies' HBM: per die, its experts of every MoE
/// layer (routed, by the placement; shared ones on every die) plus its 1/TP of the attention
/// weights (FP16, 4·d² per layer).
pub fn check_fits(c: &WaferCfg, m: &ModelPreset) -> CliResult<()> {
    let dies = c.dies() as u64;
    let per_die = (m.experts as u64).div_ceil(dies).max(1) + m.shared_experts as u64;
    let bytes = m.layers as u64 * (per_die * m.expert_bytes() + 8 * m.d_model as u64 * m.d_model as u64 / c.tp as u64);
    let cap = (c.die.hbm_gb * 1e9) as u64;
    if bytes > cap {
        return Err(format!(
            "--model {}: {:.1} GB of weights per die ({} experts x {} layers + attention / TP={}) exceed die.hbm_gb = {} GB on {} dies",
            m.name,
            bytes as f64 / 1e9,
            per_die,
            m.layers,
            c.tp,
            c.die.hbm_gb,
            dies
        ));
    }
    Ok(())
}

/// Routing of the layer: `[group][token]` → top-k experts (generated, or a trace's first
/// iteration, first layer).
pub fn layer_routing(c: &WaferCfg, m: &ModelPreset, trace: Option<&Path>, skew: f64) -> CliResult<Vec<Vec<Vec<u16>>>> {
    match trace {
        Some(p) => {
            let t = load_trace(p).map_err(|e| e.to_string())?;
            trace_routing(&t, m, 0, c.dp, c.tokens_per_group).map_err(|e| format!("--trace {}: {e}", p.display()))
        }
        None => generated_routing(m, c.dp, c.tokens_per_group, skew, c.seed).map_err(|e| format!("--tokens-per-group: {e}")),
    }
}

/// The mapping controller's (CL) decision for `c`: the tables the collective engines run on,
/// and the cycles it took.
pub fn run_mapping_ctrl(c: &WaferCfg) -> CliResult<(Mapping, u64)> {
    let ctrl = MappingCtrlCl::new(c.mapping, c.geom(), c.tp, c.dp, c.all_gather).map_err(|e| format!("--mapping {}: {e}", c.mapping.name()))?;
    Ok(ctrl.run())
}

/// One mapping end to end: the mapping controller's decision, the layer program, the run.
pub fn run_one(c: &WaferCfg, m: &ModelPreset, routing: &[Vec<Vec<u16>>], threads: usize, ff: bool, functional: bool, wave: Option<(&Path, waves::WaveFormat)>) -> CliResult<(WaferResult, LayerProgram)> {
    let (mp, map_cycles) = run_mapping_ctrl(c)?;
    let prog = build(c, m, &mp, routing);
    let r = run_program(c, &mp, map_cycles, &prog, threads, ff, functional, wave)?;
    Ok((r, prog))
}

/// Runs a built layer program on the wafer (optionally writing waveforms and checking the
/// functional payloads) and summarizes it.
#[allow(clippy::too_many_arguments)]
pub fn run_program(c: &WaferCfg, mp: &Mapping, map_cycles: u64, prog: &LayerProgram, threads: usize, ff: bool, functional: bool, wave: Option<(&Path, waves::WaveFormat)>) -> CliResult<WaferResult> {
    let mut w = Wafer::new_with(c, prog, threads, functional).map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    let run = match wave {
        Some((path, fmt)) => {
            ensure_parent(path)?;
            let period_ps = (1e6 / c.clock_mhz).round().max(1.0) as u64;
            let mut wr = waves::WaveWriter::create(path, fmt, period_ps, &w.signals(), &waves::WaveFilter::default()).map_err(|e| format!("{}: {e}", path.display()))?;
            let run = w.run_traced(threads, ff, 1 << 40, 2_000_000, Some(&mut wr)).map_err(|e| e.to_string())?;
            wr.finish(run.layer_cycles).map_err(|e| format!("{}: {e}", path.display()))?;
            run
        }
        None => w.run(threads, ff, 1 << 40, 2_000_000).map_err(|e| e.to_string())?,
    };
    let wall = t0.elapsed().as_secs_f64();
    let mut r = WaferResult::new(c, mp, prog, &run, wall);
    r.mapping_controller_cycles = map_cycles;
    if functional {
        let rep = hw::wafer::functional::check(prog, &w).map_err(|e| format!("functional check failed ({} mapping): {e}", c.mapping.name()))?;
        r.functional = Some(rep);
    }
    Ok(r)
}

pub fn run(a: WaferArgs) -> CliResult<ExitCode> {
    let model = model_by_name(&a.model).map_err(|e| format!("--model: {e}"))?;
    let base = wafer_cfg(&a)?;
    let kinds: Vec<MappingKind> = a.mapping.split(',').map(|s| s.trim().parse::<MappingKind>().map_err(|e| format!("--mapping: {e}"))).collect::<Result<_, _>>()?;
    if kinds.is_empty() {
        return Err("--mapping: give at least one of baseline, er, her".into());
    }
    super::no_duplicates("--mapping", &kinds, |k| k.name().to_string())?;
    check_fits(&base, &model)?;
    // Every mapping is checked before the first simulation.
    for &k in &kinds {
        map(k, base.geom(), base.tp, base.dp, base.all_gather).map_err(|e| format!("--mapping {}: {e}", k.name()))?;
    }
    let skew = a.skew.unwrap_or(0.0);
    if !(skew.is_finite() && (0.0..=4.0).contains(&skew)) {
        return Err(format!("--skew: must be within 0..=4 (got {skew})"));
    }
    if a.trace.is_some() && a.skew.is_some() {
        return Err("--skew: the trace decides the routing; --skew shapes generated routing only".into());
    }
    // One waveform per mapping (NAME-<mapping>.EXT when several): every one checked now.
    let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
    super::check_run_outputs(a.json.as_deref(), a.vcd.as_deref(), a.fst.as_deref(), &names)?;
    let waves = match (&a.vcd, &a.fst) {
        (Some(p), _) => Some((p.as_path(), waves::WaveFormat::Vcd)),
        (_, Some(p)) => Some((p.as_path(), waves::WaveFormat::Fst)),
        _ => None,
    };
    if let Some(d) = &a.plot {
        super::package::check_plot_dir(d)?;
    }
    let routing = layer_routing(&base, &model, a.trace.as_deref(), skew)?;
    let threads = a.threads.max(1) as usize;
    let mut results = Vec::new();
    // A mapping that fails (a watchdog, a functional mismatch) does not stop the others.
    let mut failed: Vec<(MappingKind, String)> = Vec::new();
    for &k in &kinds {
        let c = WaferCfg { mapping: k, ..base.clone() };
        let wave_file = waves.map(|(p, f)| (super::package::wave_path(p, k.name(), kinds.len() > 1), f));
        let r = match run_one(&c, &model, &routing, threads, !a.no_fast_forward, a.functional, wave_file.as_ref().map(|(p, f)| (p.as_path(), *f))) {
            Ok((r, _)) => r,
            Err(e) if kinds.len() > 1 => {
                super::report_failed_part("mapping", k.name(), &e, "");
                failed.push((k, e));
                continue;
            }
            Err(e) => return Err(e),
        };
        if let (Some((p, _)), false) = (&wave_file, a.quiet) {
            println!("wrote {}", p.display());
        }
        if let (Some(f), false) = (&r.functional, a.quiet) {
            println!("functional ({}): {} all-reduce chunks, {} dispatched tokens, {} expert outputs equal to the FL reference", r.mapping, f.chunks_checked, f.tokens_checked, f.outputs_checked);
        }
        if !a.quiet {
            println!(
                "wafer {}x{} x {}x{} {} TP={} DP={} {}: hops {:.2} (FTDs disjoint: {}), all-reduce {} cyc, dispatch {} cyc, experts {} cyc, combine {} cyc, layer {} cyc ({:.2} s, {:.2e} cyc/s)",
                c.die_cols,
                c.die_rows,
                c.wafers_x,
                c.wafers_y,
                model.name,
                c.tp,
                c.dp,
                r.mapping,
                r.avg_a2a_hops,
                r.ftds_disjoint,
                r.allreduce_cycles,
                r.a2a_dispatch_cycles,
                r.expert_cycles,
                r.a2a_combine_cycles,
                r.layer_cycles,
                r.wall_seconds,
                r.cycles_per_second
            );
        }
        if let Some(d) = &a.plot {
            super::plot::wafer_heatmaps(d, &c, &r)?;
        }
        results.push(r);
    }
    if results.is_empty() {
        return Ok(ExitCode::from(super::EXIT_PARTIAL));
    }
    if let Some(j) = &a.json {
        ensure_parent(j)?;
        let wall: f64 = results.iter().map(|r| r.wall_seconds).sum();
        let cycles: u64 = results.iter().map(|r| r.layer_cycles).sum();
        let mut v = serde_json::json!({
            "model": model.name,
            "config": base,
            "threads": threads,
            "results": results,
            "wall_seconds": wall,
            "cycles_per_second": cycles as f64 / wall.max(1e-9),
        });
        if !failed.is_empty() {
            v["failed"] = super::failed_parts_json("mapping", failed.iter().map(|(k, e)| (k.name(), e)));
        }
        std::fs::write(j, serde_json::to_string_pretty(&v).map_err(|e| e.to_string())? + "\n").map_err(|e| format!("cannot write {}: {e}", j.display()))?;
    }
    if !failed.is_empty() {
        return Ok(ExitCode::from(super::EXIT_PARTIAL));
    }
    Ok(ExitCode::SUCCESS)
}
