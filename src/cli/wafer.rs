//! `waferstream wafer`: one MoE layer on the wafer-scale chip, per mapping.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use hw::wafer::{WaferCfg, WaferResult};
use sched::models::model_by_name;
use sched::wafer::MappingKind;
use testbenches::run::wafer::{GridArg, LayerInput, WaferLayer, WaferOverrides};
use testbenches::run::{self, RunOptions, WaveSink};

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
    /// Tokens per die: tokens per TP group = this × TP, so the layer's tokens grow with TP
    /// (MoEntwine Fig. 13(c)); not with --tokens-per-group.
    #[arg(long)]
    pub tokens_per_die: Option<u32>,
    #[arg(long)]
    pub micro_batches: Option<u32>,
    /// Drop the all-gather half of the all-reduce (the paper keeps it).
    #[arg(long)]
    pub no_all_gather: bool,
    /// Element of the dispatch: int8 (default config) or fp16 (the paper's "FP16 for all
    /// communications"); the combine and all-reduce are FP16 either way.
    #[arg(long)]
    pub comm_dtype: Option<String>,
    /// Replica of a replicated expert a token goes to: nearest (to its holder; default) or
    /// even (Algorithm 1's Load_e/Num_e share per replica).
    #[arg(long)]
    pub replica_split: Option<String>,
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
    /// Waveforms of the run (one file per mapping: NAME-MAPPING.vcd when several), scopes
    /// `top.wafer.w_I_J.d_R_C.*`.
    #[arg(long)]
    pub vcd: Option<PathBuf>,
    #[arg(long)]
    pub fst: Option<PathBuf>,
    /// GTKWave save file for the dump: signals grouped by block (router, chiplet, IO die,
    /// die, link), one per waveform file (NAME-<part>.gtkw when there are several).
    #[arg(long)]
    pub gtkw: Option<PathBuf>,
    /// Directory for the per-phase link heatmaps (SVG).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    #[arg(long)]
    pub quiet: bool,
    /// Run this controller's rust-hdl RTL block in place of its CL model (same tables, same
    /// JSON; slower) (default: none, every block CL).
    #[arg(long, value_enum)]
    pub rtl: Option<WaferRtlBlock>,
}

/// Controllers with an RTL stand-in for `wafer --rtl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WaferRtlBlock {
    /// The mapping controller (`mapping_ctrl`): baseline / ER / HER tables.
    Mapping,
}

fn parse_grid(s: &str, flag: &str) -> CliResult<GridArg> {
    match super::split_grid(s) {
        Some((c, r)) if c > 0 && r > 0 => Ok(GridArg { cols: c, rows: r, text: s.to_string() }),
        Some(_) => Err(format!("{flag}: both sides must be at least 1 (got {s:?})")),
        None => Err(format!("{flag}: expected CxR in whole numbers, e.g. 4x4 (got {s:?})")),
    }
}

/// The config of the run: file, then flags.
pub fn wafer_cfg(a: &WaferArgs) -> CliResult<WaferCfg> {
    let base: WaferCfg = super::noc::load_toml_or_default(a.config.as_deref())?;
    let o = WaferOverrides {
        wafer: a.wafer.as_deref().map(|w| parse_grid(w, "--wafer")).transpose()?,
        wafers: a.wafers.as_deref().map(|w| parse_grid(w, "--wafers")).transpose()?,
        tp: a.tp,
        dp: a.dp,
        tokens_per_group: a.tokens_per_group,
        tokens_per_die: a.tokens_per_die,
        micro_batches: a.micro_batches,
        no_all_gather: a.no_all_gather,
        comm_dtype: a.comm_dtype.as_deref().map(|s| s.parse::<run::wafer::CommDtype>().map_err(|e| e.to_string())).transpose()?,
        replica_split: a.replica_split.as_deref().map(|s| s.parse::<hw::wafer::config::ReplicaSplit>().map_err(|e| format!("--replica-split: {e}"))).transpose()?,
        seed: a.seed,
    };
    run::wafer::wafer_cfg(base, &o).map_err(|e| e.to_string())
}

/// The run options of the flags.
fn run_options(a: &WaferArgs) -> RunOptions {
    let waves = match (&a.vcd, &a.fst) {
        (Some(p), _) => Some(WaveSink::vcd(p)),
        (_, Some(p)) => Some(WaveSink::fst(p)),
        _ => None,
    };
    RunOptions { threads: Some(a.threads.max(1)), fast_forward: Some(!a.no_fast_forward), waves, ..RunOptions::default() }
}

pub fn run(a: WaferArgs) -> CliResult<ExitCode> {
    let model = model_by_name(&a.model).map_err(|e| format!("--model: {e}"))?;
    let base = wafer_cfg(&a)?;
    let kinds: Vec<MappingKind> = a.mapping.split(',').map(|s| s.trim().parse::<MappingKind>().map_err(|e| format!("--mapping: {e}"))).collect::<Result<_, _>>()?;
    super::no_duplicates("--mapping", &kinds, |k| k.name().to_string())?;
    let input = LayerInput { trace: a.trace.clone(), skew: a.skew };
    let mut layer = WaferLayer::new(base.clone(), model.clone(), kinds.clone(), a.functional, &input).map_err(|e| e.to_string())?;
    if a.rtl == Some(WaferRtlBlock::Mapping) {
        layer = layer.with_mapping_ctrl("--rtl mapping", rtl::wafer::mapping_swap::mapping_ctrl_rtl).map_err(|e| e.to_string())?;
    }
    // One waveform per mapping (NAME-<mapping>.EXT when several): every one checked now.
    let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
    super::check_run_outputs(a.json.as_deref(), a.vcd.as_deref(), a.fst.as_deref(), &names)?;
    super::check_gtkw(a.gtkw.as_deref(), a.vcd.is_some() || a.fst.is_some(), &names)?;
    if let Some(d) = &a.plot {
        super::package::check_plot_dir(d)?;
    }
    let layer = layer.with_routing(&input).map_err(|e| e.to_string())?;
    let opts = run_options(&a);
    let threads = run::wafer::threads(&opts);
    let several = kinds.len() > 1;
    // A mapping that fails (a watchdog, a functional mismatch) does not stop the others;
    // one mapping alone: its error.
    let parts = layer
        .run(&opts, |part, wave_file| {
            let k = part.key;
            let r = match &part.result {
                Ok(r) => r,
                Err(e) if several => {
                    super::report_failed_part("mapping", k.name(), &e.to_string(), "");
                    return Ok(());
                }
                Err(e) => return Err(e.clone()),
            };
            let c = layer.cfg_of(k);
            if let (Some(p), false) = (wave_file, a.quiet) {
                println!("wrote {}", p.display());
            }
            if let (Some(p), Some(g)) = (wave_file, &a.gtkw) {
                let g = super::package::wave_path(g, k.name(), several);
                super::write_gtkw(&[(p.to_path_buf(), g)], a.quiet).map_err(|e| testbenches::Error::Run(e))?;
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
                super::plot::wafer_heatmaps(d, &c, r)?;
            }
            Ok(())
        })
        .map_err(|e| e.to_string())?;
    let results: Vec<WaferResult> = parts.ok.into_iter().map(|(_, r)| r).collect();
    let failed: Vec<(MappingKind, String)> = parts.failed.into_iter().map(|(k, e)| (k, e.to_string())).collect();
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
