//! `waferstream balance`: expert load balancing on the wafer, iteration by iteration, per
//! balancer (none, EPLB, topology-aware invasive, NI-Balancer), on a scenario workload with
//! time structure or a routing trace (`hw::wafer::balance`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use hw::wafer::balance::{decision_path, run_balance, BalanceCfg, BalancerKind, BalanceResult};
use hw::wafer::mapping::MappingCtrlCl;
use hw::wafer::WaferCfg;
use sched::models::model_by_name;
use sched::scenario::{generate_scenario, Mix, ScenarioCfg, SCENARIO_NAMES};
use sched::trace::{load_trace, Trace};
use sched::wafer::routing::{trace_iteration_routing, trace_stream_routing};
use sched::wafer::MappingKind;

use super::wafer::{wafer_cfg, WaferArgs};
use testbenches::run::wafer::check_fits;
use super::{check_writable, ensure_parent, CliResult};

#[derive(Args, Debug, Clone)]
pub struct BalanceArgs {
    /// Model preset (deepseek-v3, qwen3-235b, ...; must match --trace's experts and top-k).
    #[arg(long, default_value = "qwen3-235b")]
    pub model: String,
    /// Dies per wafer, CxR.
    #[arg(long)]
    pub wafer: Option<String>,
    #[arg(long)]
    pub tp: Option<u32>,
    #[arg(long)]
    pub dp: Option<u32>,
    /// Mapping of the TP groups (the non-invasive balancer needs disjoint FTDs: er or her).
    #[arg(long, default_value = "er")]
    pub mapping: String,
    /// Workload: `mixed` (requests of chat, coding, math and privacy with drifting shares) or
    /// one scenario (chat, coding, math, privacy, writing, translation).
    #[arg(long, default_value = "mixed")]
    pub scenario: String,
    /// Period of the mixed scenario's drift, iterations.
    #[arg(long, default_value_t = 50)]
    pub period: u32,
    /// Zipf skew of the scenarios' expert popularity.
    #[arg(long)]
    pub skew: Option<f64>,
    /// Balancers, comma-separated: none, eplb, topo, topo-ni.
    #[arg(long, default_value = "none,eplb,topo,topo-ni")]
    pub balancer: String,
    #[arg(long, default_value_t = 100)]
    pub iters: u32,
    /// Tokens per TP group per iteration (default 2048 without --config).
    #[arg(long)]
    pub tokens_per_group: Option<u32>,
    /// Micro-batches per layer (default 1 without --config).
    #[arg(long)]
    pub micro_batches: Option<u32>,
    /// Routing trace (SPEC §8) instead of the scenario: iteration i of the run takes the
    /// trace's iteration i (cyclically), first layer.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    #[arg(long)]
    pub seed: Option<u64>,
    /// Wafer config (TOML, `WaferCfg` fields); flags override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Balancer config (TOML, `BalanceCfg` fields: shadow_slots, alpha, invasive_beta_cycles,
    /// window_iters, chunk_flits, warmup_iters); the flags below override it.
    #[arg(long)]
    pub balance_config: Option<PathBuf>,
    #[arg(long)]
    pub shadow_slots: Option<u32>,
    #[arg(long)]
    pub alpha: Option<f64>,
    #[arg(long)]
    pub warmup: Option<u32>,
    #[arg(long, default_value_t = 1)]
    pub threads: u32,
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Waveforms of the non-invasive balancer (topo-ni must be among --balancer): the first
    /// iteration with a migration in flight (`top.wafer.…`, `mig.*`, `link_X.class`,
    /// `map.link_X.cold`), and NAME-decision.vcd/.fst: the decision unit's first run, cycle by
    /// cycle (`top.balancer.*`: state, hottest/source/destination, heats, slots, load counters).
    #[arg(long)]
    pub vcd: Option<PathBuf>,
    #[arg(long)]
    pub fst: Option<PathBuf>,
    #[arg(long)]
    pub quiet: bool,
}

fn balance_cfg(a: &BalanceArgs) -> CliResult<BalanceCfg> {
    let mut b: BalanceCfg = super::noc::load_toml_or_default(a.balance_config.as_deref())?;
    if let Some(s) = a.shadow_slots {
        b.shadow_slots = s;
    }
    if let Some(x) = a.alpha {
        b.alpha = x;
    }
    if let Some(w) = a.warmup {
        b.warmup_iters = w;
    }
    b.validate().map_err(|e| e.to_string())?;
    Ok(b)
}

/// The workload: per iteration, `[group][token]` → top-k; the per-layer skewness of its
/// source; how a trace was read.
#[allow(clippy::type_complexity)]
fn workload(a: &BalanceArgs, c: &WaferCfg, m: &sched::models::ModelPreset, warmup: u32) -> CliResult<(Vec<Vec<Vec<Vec<u16>>>>, Vec<f64>, &'static str)> {
    let trace: Trace = match &a.trace {
        Some(p) => load_trace(p).map_err(|e| e.to_string())?,
        None => {
            let mix = if a.scenario == "mixed" {
                Mix::Mixed { period_iters: a.period }
            } else if SCENARIO_NAMES.contains(&a.scenario.as_str()) {
                Mix::Fixed(a.scenario.clone())
            } else {
                return Err(format!("--scenario: unknown {:?} (mixed, {})", a.scenario, SCENARIO_NAMES.join(", ")));
            };
            let scenarios = match &mix {
                Mix::Fixed(s) => vec![s.clone()],
                Mix::Mixed { .. } => ScenarioCfg::default().scenarios,
            };
            let mut s = ScenarioCfg {
                model: Some(m.name.clone()),
                experts: m.experts,
                top_k: m.top_k,
                layers: 1,
                tokens_per_iter: c.dp.saturating_mul(c.tokens_per_group),
                iters: a.iters,
                seed: c.seed,
                scenarios,
                mix,
                warmup_iters: warmup,
                ..ScenarioCfg::default()
            };
            if let Some(k) = a.skew {
                s.skew = k;
            }
            s.validate().map_err(|e| format!("--scenario: {e}"))?;
            generate_scenario(&s).map_err(|e| format!("--scenario: {e}"))?
        }
    };
    let skew = sched::scenario::layer_skewness(&trace);
    let what = a.trace.as_ref().map_or("--scenario".to_string(), |p| format!("--trace {}", p.display()));
    // A trace whose iterations each hold the tokens of a run iteration gives one per
    // iteration; a smaller one (a decode trace: one token per iteration) is read as a stream.
    let need = c.dp as usize * c.tokens_per_group as usize;
    let stream = trace.iterations().iter().any(|(_, r)| r.len() < need);
    let routing = (0..a.iters as usize)
        .map(|k| if stream { trace_stream_routing(&trace, m, 0, k, c.dp, c.tokens_per_group) } else { trace_iteration_routing(&trace, m, 0, k, c.dp, c.tokens_per_group) }.map_err(|e| format!("{what}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((routing, skew, if stream { "stream" } else { "iterations" }))
}

pub fn run(a: BalanceArgs) -> CliResult<ExitCode> {
    let model = model_by_name(&a.model).map_err(|e| format!("--model: {e}"))?;
    let kinds: Vec<BalancerKind> = a.balancer.split(',').map(|s| s.trim().parse::<BalancerKind>().map_err(|e| format!("--balancer: {e}"))).collect::<Result<_, _>>()?;
    if kinds.is_empty() {
        return Err("--balancer: give at least one of none, eplb, topo, topo-ni".into());
    }
    super::no_duplicates("--balancer", &kinds, |k| k.name().to_string())?;
    if a.trace.is_some() && a.skew.is_some() {
        return Err("--skew: the trace decides the routing; --skew shapes the generated scenario only".into());
    }
    if a.iters == 0 || a.iters > 100_000 {
        return Err(format!("--iters: {} outside 1..=100000", a.iters));
    }
    let mapping: MappingKind = a.mapping.parse().map_err(|e| format!("--mapping: {e}"))?;
    // Without a config: a large-batch decode step (2048 tokens per TP group, no micro-batches),
    // where the experts are compute-bound and the token balance decides the slowest die
    // (docs/balance.md "Regime"). A config's values, and flags, override these.
    let (tpg, mbs) = match &a.config {
        None => (a.tokens_per_group.or(Some(2048)), a.micro_batches.or(Some(1))),
        Some(_) => (a.tokens_per_group, a.micro_batches),
    };
    let wa = WaferArgs { model: a.model.clone(), wafer: a.wafer.clone(), tp: a.tp, dp: a.dp, tokens_per_group: tpg, micro_batches: mbs, seed: a.seed, config: a.config.clone(), ..Default::default() };
    let c = WaferCfg { mapping, ..wafer_cfg(&wa)? };
    c.validate().map_err(|e| e.to_string())?;
    check_fits(&c, &model).map_err(|e| e.to_string())?;
    let bal = balance_cfg(&a)?;
    // Warm-up iterations are left out of the mean imbalance; with none left after them, the
    // mean would silently fall back to every iteration. (The default's 10 is the paper's
    // setting and only applies when the run is long enough.)
    if bal.warmup_iters >= a.iters && (a.warmup.is_some() || bal.warmup_iters != BalanceCfg::default().warmup_iters) {
        let what = if a.warmup.is_some() { "--warmup" } else { "warmup_iters of --balance-config" };
        return Err(format!("{what}: {} warm-up iterations of --iters {}: none left to measure (give fewer, or more --iters)", bal.warmup_iters, a.iters));
    }
    // Shadow slots hold whole experts: they must fit beside the home experts.
    let per_die = model.layers as u64 * ((model.experts as u64).div_ceil(c.dies() as u64) + bal.shadow_slots as u64) * model.expert_bytes();
    if per_die as f64 > c.die.hbm_gb * 1e9 {
        return Err(format!("--shadow-slots {}: {:.1} GB of expert weights per die exceed die.hbm_gb = {} GB", bal.shadow_slots, per_die as f64 / 1e9, c.die.hbm_gb));
    }
    let ctrl = MappingCtrlCl::new(c.mapping, c.geom(), c.tp, c.dp, c.all_gather).map_err(|e| format!("--mapping {}: {e}", c.mapping.name()))?;
    let (map, _) = ctrl.run();
    if kinds.contains(&BalancerKind::TopoNi) && !(map.ftds_disjoint() && map.all_gather) {
        return Err(format!("--balancer topo-ni: the {} mapping's FTDs are not disjoint (or the all-gather is off), so no links are cold in the all-to-all; use --mapping er or her", c.mapping.name()));
    }
    if a.vcd.is_some() && a.fst.is_some() {
        return Err("give --vcd or --fst, not both".into());
    }
    if let Some(p) = &a.json {
        check_writable(p).map_err(|e| format!("--json: {e}"))?;
    }
    // Both waveform files: the wafer's and the decision unit's beside it.
    for (flag, p) in [("--vcd", &a.vcd), ("--fst", &a.fst)] {
        if let Some(p) = p {
            for f in [p.clone(), decision_path(p)] {
                check_writable(&f).map_err(|e| format!("{flag}: {e}"))?;
            }
        }
    }
    let wave = match (&a.vcd, &a.fst) {
        (Some(p), _) => Some((p.clone(), waves::WaveFormat::Vcd)),
        (_, Some(p)) => Some((p.clone(), waves::WaveFormat::Fst)),
        _ => None,
    };
    if wave.is_some() && !kinds.contains(&BalancerKind::TopoNi) {
        return Err("--vcd/--fst: the waveform is of the non-invasive balancer; add topo-ni to --balancer".into());
    }
    let (routing, skew, trace_mode) = workload(&a, &c, &model, bal.warmup_iters)?;
    let threads = a.threads.max(1) as usize;
    // The waveforms are written only when there is something to trace (a decision, a
    // migration in flight): what each file was before the run tells whether it was written.
    let stamp = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let before: Vec<(PathBuf, Option<std::time::SystemTime>)> = wave.as_ref().map_or(Vec::new(), |(p, _)| [p.clone(), decision_path(p)].into_iter().map(|f| {
        let t = stamp(&f);
        (f, t)
    }).collect());
    let mut results: Vec<BalanceResult> = Vec::new();
    let mut failed: Vec<(BalancerKind, String)> = Vec::new();
    let t0 = Instant::now();
    for &k in &kinds {
        let bar = (!a.quiet).then(|| {
            let b = indicatif::ProgressBar::new(routing.len() as u64);
            b.set_style(indicatif::ProgressStyle::with_template("{prefix:>8} [{bar:30}] {pos}/{len} iterations {msg}").unwrap().progress_chars("=> "));
            b.set_prefix(k.name());
            b
        });
        let wave_k = wave.as_ref().filter(|_| k == BalancerKind::TopoNi).map(|(p, f)| (p.as_path(), *f));
        let r = run_balance(&c, &model, &map, &bal, k, &routing, threads, wave_k, |rec| {
            if let Some(b) = &bar {
                b.set_message(format!("max/mean {:.2}", rec.max_over_mean));
                b.inc(1);
            }
        })
        .map_err(|e| format!("balance {}: {e}", k.name()));
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        // A balancer that fails does not stop the others (one balancer alone: the error).
        let r = match r {
            Ok(r) => r,
            Err(e) if kinds.len() > 1 => {
                super::report_failed_part("balancer", k.name(), &e, &format!("balance {}: ", k.name()));
                failed.push((k, e));
                continue;
            }
            Err(e) => return Err(e),
        };
        if !a.quiet {
            let reg = r.regular_traffic_cycles / r.regular_traffic_cycles_no_migration.max(1e-9);
            println!(
                "{:>8}: max/mean load {:.2}, MoE compute {} cyc, all-to-all {} cyc, regular transfers {:.0} cyc ({:+.2} % vs without migration), stalls {} cyc, {} migrations / {} moves",
                r.balancer,
                r.max_over_mean_load,
                r.moe_compute_cycles,
                r.a2a_cycles,
                r.regular_traffic_cycles,
                (reg - 1.0) * 100.0,
                r.migration_stall_cycles,
                r.migrations,
                r.moves
            );
        }
        results.push(r);
    }
    if wave.is_some() {
        let (written, missing): (Vec<&(PathBuf, _)>, Vec<&(PathBuf, _)>) = before.iter().partition(|(f, t)| stamp(f).is_some_and(|now| Some(now) != *t));
        if !written.is_empty() && !a.quiet {
            println!("wrote {}", written.iter().map(|(f, _)| f.display().to_string()).collect::<Vec<_>>().join(" and "));
        }
        for (i, (f, _)) in before.iter().enumerate().filter(|(_, x)| missing.contains(x)) {
            let why = if i == 0 { "no migration of topo-ni was in flight in an iteration after its decision" } else { "topo-ni's trigger never fired, so its decision unit never ran" };
            // Results are right; only the waveform had nothing to show.
            let stale = if f.exists() { "; the file there is from an earlier run" } else { "" };
            eprintln!("note: {} not written: {why} ({} iterations; nothing to trace){stale}", f.display(), a.iters);
        }
    }
    if results.is_empty() {
        return Ok(ExitCode::from(super::EXIT_PARTIAL));
    }
    if let Some(j) = &a.json {
        ensure_parent(j)?;
        let mut v = serde_json::json!({
            "model": model.name,
            "config": c,
            "balance": bal,
            "scenario": if a.trace.is_some() { serde_json::Value::Null } else { serde_json::json!({"name": a.scenario, "period_iters": a.period}) },
            "trace": a.trace,
            "trace_read_as": a.trace.is_some().then_some(trace_mode),
            "layer_skewness": skew,
            "iters": a.iters,
            "results": results,
            "wall_seconds": t0.elapsed().as_secs_f64(),
        });
        if !failed.is_empty() {
            v["failed"] = super::failed_parts_json("balancer", failed.iter().map(|(k, e)| (k.name(), e)));
        }
        std::fs::write(j, serde_json::to_string_pretty(&v).map_err(|e| e.to_string())? + "\n").map_err(|e| format!("cannot write {}: {e}", j.display()))?;
    }
    if !failed.is_empty() {
        return Ok(ExitCode::from(super::EXIT_PARTIAL));
    }
    Ok(ExitCode::SUCCESS)
}
