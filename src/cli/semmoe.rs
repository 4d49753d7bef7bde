//! `waferstream semmoe`: Sem-MoE token–expert co-scheduling (`sched::balance::semmoe`) against
//! round-robin and load-only placement — the local activation rate on held-out tokens (FL),
//! then the same decisions as MoE layers on the cycle-level wafer mesh (all-to-all bytes and
//! layer cycles). `docs/semmoe.md` describes the experiment.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, ValueEnum};
use sched::models::model_by_name;
use testbenches::run::semmoe::{grid, workload, AttentionChoice, SemMoeExperiment, SemMoeParams, SemMoeSource};
use testbenches::run::RunOptions;

use super::{check_writable, ensure_parent, CliResult};

/// Which attention parallelism (and so which data scheduling) to model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AttentionArg {
    /// DP if every token has a token_id, else TP (the 2-gram table needs no ids).
    Auto,
    /// Attention-DP (TP=1, DP=devices): Algorithm 2 request scheduling.
    Dp,
    /// Attention-TP (TP=devices, DP=1): Algorithm 3 token re-batching.
    Tp,
}

#[derive(Args, Debug, Clone)]
pub struct SemMoeArgs {
    /// Model preset (experts, top-k, MoE layers, hidden size).
    #[arg(long, default_value = "qwen3-30b-a3b")]
    pub model: String,
    /// Devices = dies of the wafer (laid out as the squarest CxR mesh) = Sem-MoE clusters.
    #[arg(long, default_value_t = 8)]
    pub devices: u32,
    #[arg(long, value_enum, default_value_t = AttentionArg::Auto)]
    pub attention: AttentionArg,
    /// Routing trace (SPEC §8) instead of the generated scenario; it must match the model's
    /// experts and top-k.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Seed of the scenario and of Algorithm 1's swaps.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Scenario: iterations (decode steps).
    #[arg(long, default_value_t = 64)]
    pub iters: u32,
    /// Scenario: tokens per iteration (concurrent requests).
    #[arg(long, default_value_t = 256)]
    pub tokens_per_iter: u32,
    /// Scenario: MoE layers (default: the model's).
    #[arg(long)]
    pub layers: Option<u32>,
    /// Scenario: weight of the token-cluster expert preference, in [0, 1].
    #[arg(long, default_value_t = 0.5)]
    pub affinity: f64,
    /// Scenario: request-level topic coherence in [0, 1] — the probability that a token takes
    /// one of its request's clusters (Sem-MoE Appendix A.1); default off (every token's
    /// cluster drawn independently).
    #[arg(long)]
    pub coherence: Option<f64>,
    /// Scenario, with --coherence: clusters each request draws (1..=64; default 2).
    #[arg(long)]
    pub clusters_per_request: Option<u32>,
    /// Iterations profiled (the rest is held out for evaluation); default half.
    #[arg(long)]
    pub profile_iters: Option<u32>,
    /// Attention-TP: tokens per batch (one reduce-scatter).
    #[arg(long, default_value_t = 256)]
    pub tp_batch: u32,
    /// Held-out batches simulated on the mesh (DP: iterations; TP: batches), per layer.
    #[arg(long, default_value_t = 1)]
    pub mesh_batches: u32,
    /// MoE layers simulated on the mesh (the first N; default all).
    #[arg(long)]
    pub mesh_layers: Option<u32>,
    #[arg(long, default_value_t = 4)]
    pub micro_batches: u32,
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Attention-TP only: the waveform of the die's look-up and re-batching unit
    /// (`hw::wafer::semmoe_lut`) on the first evaluation batch at layer 1 (`top.semmoe_lut.*`:
    /// table hits, predicted device, counting sort, spill), checked equal to the FL decision.
    #[arg(long)]
    pub vcd: Option<PathBuf>,
    #[arg(long)]
    pub quiet: bool,
    /// Run this block's rust-hdl RTL twin in place of its CL model (attention-TP: the look-up
    /// unit on the first evaluation batch at layer 1, its ranks checked equal to the FL's; the
    /// same JSON and waveform) (default: none).
    #[arg(long, value_enum)]
    pub rtl: Option<SemMoeRtl>,
}

/// Blocks with an RTL stand-in for `semmoe --rtl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SemMoeRtl {
    /// The look-up and re-batching unit (`semmoe_lut`).
    SemmoeLut,
}

pub fn run(a: SemMoeArgs) -> CliResult<ExitCode> {
    let t0 = Instant::now();
    let model = model_by_name(&a.model).map_err(|e| format!("--model: {e}"))?;
    let params = SemMoeParams {
        devices: a.devices,
        attention: match a.attention {
            AttentionArg::Auto => AttentionChoice::Auto,
            AttentionArg::Dp => AttentionChoice::Dp,
            AttentionArg::Tp => AttentionChoice::Tp,
        },
        seed: a.seed,
        profile_iters: a.profile_iters,
        tp_batch: a.tp_batch,
        mesh_batches: a.mesh_batches,
        mesh_layers: a.mesh_layers,
        micro_batches: a.micro_batches,
        vcd: a.vcd.clone(),
        lut: a.rtl.map(|r| match r {
            SemMoeRtl::SemmoeLut => rtl::wafer::semmoe_lut_swap::semmoe_lut_factory as hw::wafer::semmoe_lut::SemMoeLutFactory,
        }),
    };
    params.check().map_err(|e| e.to_string())?;
    if let Some(p) = &a.json {
        check_writable(p).map_err(|e| format!("--json: {e}"))?;
    }
    if let Some(p) = &a.vcd {
        check_writable(p).map_err(|e| format!("--vcd: {e}"))?;
    }
    if a.clusters_per_request.is_some() && a.coherence.is_none() {
        return Err("--clusters-per-request: only with --coherence (request coherence is off without it)".into());
    }
    if a.coherence.is_some() && a.trace.is_some() {
        return Err("--coherence: sizes the generated scenario only (not used with --trace)".into());
    }
    let src = match &a.trace {
        Some(p) => SemMoeSource::Trace { path: p.clone(), layers: a.layers },
        None => SemMoeSource::Scenario {
            layers: a.layers,
            tokens_per_iter: a.tokens_per_iter,
            iters: a.iters,
            affinity: a.affinity,
            coherence: a.coherence.map(|share| sched::scenario::Coherence { share, clusters_per_request: a.clusters_per_request.unwrap_or(2) }),
        },
    };
    let (trace, source) = workload(&src, &model, a.seed).map_err(|e| e.to_string())?;
    let exp = SemMoeExperiment::new(params, model, trace).map_err(|e| e.to_string())?;
    let outcomes = exp.evaluate().map_err(|e| e.to_string())?;
    if let Some((p, cycles)) = exp.lut_wave(&outcomes).map_err(|e| e.to_string())? {
        if !a.quiet {
            println!("wrote {} (look-up unit: {cycles} cycles for the first batch, ranks equal to the FL's)", p.display());
        }
    }
    let mesh = exp.mesh(&outcomes, &RunOptions::default()).map_err(|e| e.to_string())?;
    let (model, layers, pi, mesh_layers, dp) = (&exp.model, exp.layers, exp.profile_iters, exp.mesh_layers, exp.is_dp());
    let (profile, eval) = exp.split();
    let (cols, rows) = grid(a.devices);
    let (rows_out, claim, tokens_per_group, c) = (&mesh.rows, &mesh.claim, mesh.tokens_per_group, &mesh.wafer);
    let batches = &exp.batches;

    if !a.quiet {
        let mode = if dp { format!("attention-DP (TP=1, DP={})", a.devices) } else { format!("attention-TP (TP={}, batches of {})", a.devices, a.tp_batch) };
        println!(
            "semmoe {} on {} devices ({cols}x{rows} dies), {mode}: profiled {} tokens ({pi} iterations), evaluated {} held-out tokens x {layers} layers; mesh: {} batch(es) x {mesh_layers} layer(s), {} tokens per group",
            model.name,
            a.devices,
            profile.len(),
            eval.len(),
            batches.len(),
            tokens_per_group
        );
        println!("{:<12} {:>8} {:>9} {:>14} {:>12} {:>10} {:>10}", "placement", "LAR", "mesh LAR", "a2a bytes", "layer cyc", "dev tok", "exp load");
        for r in rows_out {
            println!(
                "{:<12} {:>8.4} {:>9.4} {:>14} {:>12.0} {:>10.3} {:>10.3}",
                r.placement, r.local_activation_rate, r.mesh_local_activation_rate, r.a2a_bytes, r.layer_cycles, r.device_token_max_over_mean, r.expert_load_max_over_mean
            );
        }
        println!(
            "Sem-MoE LAR vs best baseline ({}): {:+.1} % relative, {:+.2} points — paper claims +15.4 %: {}",
            claim.best_baseline,
            claim.lar_gain_relative_pct,
            claim.lar_gain_points,
            if claim.holds { "holds" } else { "does not hold" }
        );
    }
    if let Some(j) = &a.json {
        ensure_parent(j)?;
        let v = serde_json::json!({
            "command": "semmoe",
            "model": model.name,
            "devices": a.devices,
            "mesh": format!("{cols}x{rows}"),
            "attention": if dp { "dp" } else { "tp" },
            "workload": source,
            "profile_iters": pi,
            "profile_tokens": profile.len(),
            "eval_tokens": eval.len(),
            "layers": layers,
            "mesh_batches": batches.len(),
            "mesh_layers": mesh_layers,
            "semmoe": exp.cfg,
            "wafer": c,
            "results": rows_out,
            "claim": claim,
            "wall_seconds": t0.elapsed().as_secs_f64(),
        });
        std::fs::write(j, serde_json::to_string_pretty(&v).map_err(|e| e.to_string())? + "\n").map_err(|e| format!("--json: cannot write {}: {e}", j.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}
