//! `waferstream eplb`: DeepSeek's expert-parallel load balancer (`sched::balance::eplb`) on a
//! JSON matrix of per-layer expert loads; the placement, and the device-load imbalance before
//! (one replica per expert, in id order) and after.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use sched::balance::{EplbArg, EplbCfg, EplbError, Policy};
use testbenches::run::balance::{eplb, EplbRun};
use serde::Serialize;

use super::{check_writable, CliResult};

#[derive(Args, Debug, Clone)]
pub struct EplbArgs {
    /// JSON file `[[load, ...], ...]`: one row of expert loads (e.g. token counts) per MoE layer.
    #[arg(long)]
    pub weights: PathBuf,
    /// Physical expert slots per layer (num_replicas): a multiple of --devices, at least the expert count.
    #[arg(long)]
    pub replicas: usize,
    /// Expert groups (num_groups): consecutive ids, equal size.
    #[arg(long, default_value_t = 1)]
    pub groups: usize,
    /// Server nodes (num_nodes); the hierarchical policy runs when --nodes divides --groups.
    #[arg(long, default_value_t = 1)]
    pub nodes: usize,
    /// Devices (num_gpus): a multiple of --nodes.
    #[arg(long)]
    pub devices: usize,
    /// Write the plan as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Print nothing on success.
    #[arg(long)]
    pub quiet: bool,
}

#[derive(Serialize)]
struct Imbalance {
    /// Per layer: one replica per expert, experts in id order over the devices.
    before: Vec<f64>,
    /// Per layer: the EPLB placement, each replica carrying load / replicas of its expert.
    after: Vec<f64>,
}

#[derive(Serialize)]
struct EplbOut<'a> {
    weights: &'a [Vec<f64>],
    replicas: usize,
    groups: usize,
    nodes: usize,
    devices: usize,
    policy: Policy,
    phy2log: &'a [Vec<usize>],
    log2phy: &'a [Vec<Vec<i64>>],
    logcnt: &'a [Vec<usize>],
    max_over_mean_device_load: Imbalance,
}

/// The flag of each argument of `rebalance_experts`.
fn flag(a: EplbArg) -> &'static str {
    match a {
        EplbArg::Weight => "--weights",
        EplbArg::NumReplicas => "--replicas",
        EplbArg::NumGroups => "--groups",
        EplbArg::NumNodes => "--nodes",
        EplbArg::NumGpus => "--devices",
    }
}

fn cli_err(e: EplbError, weights: &Path) -> String {
    match e.arg {
        EplbArg::Weight => format!("--weights {}: {}", weights.display(), e.reason),
        a => format!("{}: {}", flag(a), e.reason),
    }
}

/// Reads `[[f64]]`; errors name the file, the element (`[1][3]`) and line and column.
fn load_weights(p: &Path) -> CliResult<Vec<Vec<f64>>> {
    let text = std::fs::read_to_string(p).map_err(|e| format!("--weights: cannot read {}: {e}", p.display()))?;
    let mut de = serde_json::Deserializer::from_str(&text);
    let w: Vec<Vec<f64>> = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path.is_empty() || path == "." {
            format!("--weights {}: {inner} (expected [[load, ...], ...], one row per layer)", p.display())
        } else {
            format!("--weights {}: element {path}: {inner}", p.display())
        }
    })?;
    de.end().map_err(|e| format!("--weights {}: {e}", p.display()))?;
    Ok(w)
}

pub fn run(a: EplbArgs) -> CliResult<ExitCode> {
    let w = load_weights(&a.weights)?;
    let cfg = EplbCfg { num_replicas: a.replicas, num_groups: a.groups, num_nodes: a.nodes, num_gpus: a.devices };
    cfg.validate(&w).map_err(|e| cli_err(e, &a.weights))?;
    if let Some(p) = &a.json {
        check_writable(p).map_err(|e| format!("--json: {e}"))?;
    }
    let EplbRun { plan, before, after } = eplb(&w, &cfg).map_err(|e| cli_err(e, &a.weights))?;

    if !a.quiet {
        let experts = w[0].len();
        println!(
            "eplb: {} layers x {experts} experts -> {} replicas on {} devices ({} nodes, {} groups), {} policy",
            w.len(),
            cfg.num_replicas,
            cfg.num_gpus,
            cfg.num_nodes,
            cfg.num_groups,
            plan.policy.name()
        );
        // phy2log per device (`|` between devices) while it fits on a line.
        let show = cfg.num_replicas <= 64;
        println!("max/mean device load: before = one replica per expert in id order, after = EPLB");
        println!("{:>5}  {:>8}  {:>8}{}", "layer", "before", "after", if show { "  phy2log by device" } else { "" });
        for l in 0..w.len() {
            let mut line = format!("{l:>5}  {:>8.3}  {:>8.3}", before[l], after[l]);
            if show {
                let devs: Vec<String> = plan.phy2log[l]
                    .chunks(cfg.slots_per_gpu())
                    .map(|d| d.iter().map(usize::to_string).collect::<Vec<_>>().join(" "))
                    .collect();
                line += &format!("  {}", devs.join(" | "));
            }
            println!("{line}");
        }
        if !show {
            println!("(phy2log omitted above 64 replicas; see --json)");
        }
    }
    if let Some(p) = &a.json {
        let out = EplbOut {
            weights: &w,
            replicas: cfg.num_replicas,
            groups: cfg.num_groups,
            nodes: cfg.num_nodes,
            devices: cfg.num_gpus,
            policy: plan.policy,
            phy2log: &plan.phy2log,
            log2phy: &plan.log2phy,
            logcnt: &plan.logcnt,
            max_over_mean_device_load: Imbalance { before, after },
        };
        let s = serde_json::to_string(&out).map_err(|e| e.to_string())?;
        std::fs::write(p, s + "\n").map_err(|e| format!("--json: cannot write {}: {e}", p.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}
