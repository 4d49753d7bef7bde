//! `waferstream trace import|stats`: real routing data into the SPEC §8 format, and its summary.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Subcommand, ValueEnum};
use sched::trace::{import_expert_counts, import_warp_decode, load_trace, trace_stats, write_trace};
use sched::workload::{generate, GenCfg};

use super::{ensure_parent, CliResult};

#[derive(Subcommand, Debug)]
pub enum TraceCmd {
    /// Convert real routing data to `waferstream-trace/1` (JSON Lines).
    Import(ImportArgs),
    /// Experts, top-k, layers, tokens, iterations, requests and per-layer skewness of a trace.
    Stats {
        file: PathBuf,
        /// Also write the statistics as JSON.
        #[arg(long)]
        json: Option<PathBuf>,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImportFormat {
    /// sqliteai/warp decode trace (`{"tok", "layers"}` per decode step), OLMoE-1B-7B.
    Warp,
    /// AllenAI `expert_counts.csv` (aggregates only): a trace *sampled* from its per-layer
    /// popularity with the routing generator; not real per-token routing.
    Counts,
}

#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    /// Source file.
    pub src: PathBuf,
    /// Output trace file.
    #[arg(long)]
    pub out: PathBuf,
    /// Source format (default: `counts` for .csv, `warp` otherwise).
    #[arg(long, value_enum)]
    pub format: Option<ImportFormat>,
    /// counts: the `model` column to keep (`olmoe`, `mistral`, ...).
    #[arg(long, default_value = "olmoe")]
    pub counts_model: String,
    /// counts: the `domain` column to keep.
    #[arg(long, default_value = "arxiv")]
    pub domain: String,
    /// counts: the `selection` column to keep.
    #[arg(long, default_value = "topk")]
    pub selection: String,
    /// counts: experts per token (default: 8 for OLMoE, 2 for Mixtral).
    #[arg(long)]
    pub top_k: Option<u32>,
    /// counts: tokens per iteration of the sampled trace.
    #[arg(long, default_value_t = 256)]
    pub tokens_per_iter: u32,
    /// counts: iterations of the sampled trace.
    #[arg(long, default_value_t = 4)]
    pub iters: u32,
    /// counts: generator seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

pub fn run(c: TraceCmd) -> CliResult<ExitCode> {
    match c {
        TraceCmd::Import(a) => import(a),
        TraceCmd::Stats { file, json } => stats(&file, json.as_deref()),
    }
}

fn import(a: ImportArgs) -> CliResult<ExitCode> {
    let fmt = a.format.unwrap_or(if a.src.extension().is_some_and(|e| e == "csv") { ImportFormat::Counts } else { ImportFormat::Warp });
    let trace = match fmt {
        ImportFormat::Warp => import_warp_decode(&a.src).map_err(|e| e.to_string())?,
        ImportFormat::Counts => {
            let prof = import_expert_counts(&a.src, &a.counts_model, &a.domain, &a.selection).map_err(|e| e.to_string())?;
            let experts = prof.weights.iter().map(Vec::len).max().unwrap_or(0) as u32;
            let (name, k) = match a.counts_model.as_str() {
                m if m.starts_with("olmoe") => ("olmoe-1b-7b", 8),
                m if m.starts_with("mistral") || m.starts_with("mixtral") => ("mixtral-8x7b", 2),
                _ => ("unknown", 2),
            };
            let popularity = prof.weights.iter().map(|w| {
                let mut w = w.clone();
                w.resize(experts as usize, 0.0);
                w
            });
            let cfg = GenCfg {
                model: Some(name.into()),
                experts,
                top_k: a.top_k.unwrap_or(k),
                layers: prof.layers.len() as u32,
                tokens_per_iter: a.tokens_per_iter,
                iters: a.iters,
                popularity: Some(popularity.collect()),
                seed: a.seed,
                ..GenCfg::default()
            };
            eprintln!(
                "note: {} holds aggregate counts only; the trace is sampled from its popularity at model layers {:?} (trace layers 0..{})",
                a.src.display(),
                prof.layers,
                prof.layers.len()
            );
            // The generator names its config fields; here they are flags or the CSV's content.
            generate(&cfg).map_err(|e| {
                let k_default = if a.top_k.is_none() { format!(" (the default for --counts-model {})", a.counts_model) } else { String::new() };
                match e.field.as_str() {
                    "top_k" => format!("--top-k: {}{k_default} outside 1..={experts} (the experts in the rows of {})", cfg.top_k, a.src.display()),
                    "tokens_per_iter" => format!("--tokens-per-iter: {}", e.reason),
                    "iters" => format!("--iters: {}", e.reason.replace("tokens_per_iter × iters", "--tokens-per-iter × --iters")),
                    "seed" => format!("--seed: {}", e.reason),
                    f => format!("{}: rows of --counts-model {} --domain {} --selection {}: {f}: {}", a.src.display(), a.counts_model, a.domain, a.selection, e.reason),
                }
            })?
        }
    };
    ensure_parent(&a.out)?;
    write_trace(&a.out, &trace).map_err(|e| format!("cannot write {}: {e}", a.out.display()))?;
    println!(
        "{}: {} tokens, {} iterations, {} experts, top-{}, {} layers -> {}",
        a.src.display(),
        trace.tokens.len(),
        trace.iterations().len(),
        trace.header.experts,
        trace.header.top_k,
        trace.header.layers,
        a.out.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn stats(file: &Path, json: Option<&Path>) -> CliResult<ExitCode> {
    let t = load_trace(file).map_err(|e| e.to_string())?;
    let s = trace_stats(&t);
    println!("trace {}", file.display());
    println!("  model       {}", t.header.model.as_deref().unwrap_or("-"));
    println!("  experts     {}", s.experts);
    println!("  top_k       {}", s.top_k);
    println!("  layers      {}", s.layers);
    println!("  tokens      {}", s.tokens);
    println!("  iterations  {}", s.iterations);
    println!("  requests    {}", s.requests);
    let sk = &s.per_layer_skewness;
    let mean = if sk.is_empty() { 0.0 } else { sk.iter().sum::<f64>() / sk.len() as f64 };
    let max = sk.iter().cloned().fold(0.0, f64::max);
    println!("  skewness    mean {mean:.3}, max {max:.3} (max expert load / mean load per layer)");
    println!("  per layer   {}", sk.iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>().join(" "));
    if let Some(p) = json {
        ensure_parent(p)?;
        let body = serde_json::to_string_pretty(&s).map_err(|e| e.to_string())?;
        std::fs::write(p, body + "\n").map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}
