//! `waferstream balance`: expert load balancing on the wafer, iteration by iteration, per
//! balancer (none, EPLB, topology-aware invasive, NI-Balancer), on a scenario workload with
//! time structure or a routing trace (`hw::wafer::balance`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use hw::wafer::balance::{BalanceCfg, BalanceResult, BalancerKind};
use hw::wafer::WaferCfg;
use sched::models::model_by_name;
use sched::wafer::MappingKind;
use testbenches::run::balance::{balance_cfg, decision_path, BalanceEvent, BalanceInput, BalanceOverrides, BalanceSetup};
use testbenches::run::wafer::check_fits;
use testbenches::run::{limits, RunOptions, WaveSink};

use super::wafer::{wafer_cfg, WaferArgs};
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
    /// Element of the dispatch: int8 (default) or fp16 (the paper's FP16 communication).
    #[arg(long)]
    pub comm_dtype: Option<String>,
    /// Replica a token goes to: nearest (default) or even (Algorithm 1's Load_e/Num_e).
    #[arg(long)]
    pub replica_split: Option<String>,
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
    /// GTKWave save file for the dump: signals grouped by block (router, chiplet, IO die,
    /// die, link); NAME-decision.gtkw beside it for the decision unit's dump.
    #[arg(long)]
    pub gtkw: Option<PathBuf>,
    #[arg(long)]
    pub quiet: bool,
    /// Run this block's rust-hdl RTL twin in place of its CL model (same JSON and decision
    /// waveform; slower) (default: none, every block CL).
    #[arg(long, value_enum)]
    pub rtl: Option<BalanceRtl>,
}

/// Blocks with an RTL stand-in for `balance --rtl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BalanceRtl {
    /// The NI-Balancer's Eq. 2 trigger and Algorithm 1 decision unit (`ni_trigger`,
    /// `ni_balancer`): every balancer's trigger, topo's and topo-ni's decisions.
    Balancer,
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
    limits::check_u64("--iters", a.iters as u64, limits::BALANCE_ITERS).map_err(|e| e.to_string())?;
    let mapping: MappingKind = a.mapping.parse().map_err(|e| format!("--mapping: {e}"))?;
    // Without a config: a large-batch decode step (2048 tokens per TP group, no micro-batches),
    // where the experts are compute-bound and the token balance decides the slowest die
    // (docs/balance.md "Regime"). A config's values, and flags, override these.
    let (tpg, mbs) = match &a.config {
        None => (a.tokens_per_group.or(Some(2048)), a.micro_batches.or(Some(1))),
        Some(_) => (a.tokens_per_group, a.micro_batches),
    };
    let wa = WaferArgs { model: a.model.clone(), wafer: a.wafer.clone(), tp: a.tp, dp: a.dp, tokens_per_group: tpg, micro_batches: mbs, seed: a.seed, config: a.config.clone(), comm_dtype: a.comm_dtype.clone(), replica_split: a.replica_split.clone(), ..Default::default() };
    let c = WaferCfg { mapping, ..wafer_cfg(&wa)? };
    c.validate().map_err(|e| e.to_string())?;
    check_fits(&c, &model).map_err(|e| e.to_string())?;
    let base: BalanceCfg = super::noc::load_toml_or_default(a.balance_config.as_deref())?;
    let bal = balance_cfg(base, &BalanceOverrides { shadow_slots: a.shadow_slots, alpha: a.alpha, warmup: a.warmup }).map_err(|e| e.to_string())?;
    let mut setup = BalanceSetup::new(c.clone(), model.clone(), bal.clone(), kinds.clone(), a.iters, a.warmup.is_some()).map_err(|e| e.to_string())?;
    if let Some(BalanceRtl::Balancer) = a.rtl {
        setup.units = rtl::wafer::ni_balancer_swap::ni_units();
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
    super::check_gtkw(a.gtkw.as_deref(), a.vcd.is_some() || a.fst.is_some(), &[""])?;
    if let Some(g) = &a.gtkw {
        check_writable(&decision_path(g)).map_err(|e| format!("--gtkw: {e}"))?;
    }
    let wave = match (&a.vcd, &a.fst) {
        (Some(p), _) => Some(WaveSink::vcd(p)),
        (_, Some(p)) => Some(WaveSink::fst(p)),
        _ => None,
    };
    if wave.is_some() && !kinds.contains(&BalancerKind::TopoNi) {
        return Err("--vcd/--fst: the waveform is of the non-invasive balancer; add topo-ni to --balancer".into());
    }
    let input = BalanceInput { trace: a.trace.clone(), scenario: a.scenario.clone(), period: a.period, skew: a.skew };
    let setup = setup.with_workload(&input).map_err(|e| e.to_string())?;
    let w = setup.workload.as_ref().expect("built above");
    let (skew, trace_mode) = (&w.layer_skewness, w.read_as);
    // The waveforms are written only when there is something to trace (a decision, a
    // migration in flight): what each file was before the run tells whether it was written.
    let stamp = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let before: Vec<(PathBuf, Option<std::time::SystemTime>)> = wave.as_ref().map_or(Vec::new(), |s| [s.path.clone(), decision_path(&s.path)].into_iter().map(|f| {
        let t = stamp(&f);
        (f, t)
    }).collect());
    let opts = RunOptions { threads: Some(a.threads.max(1)), waves: wave.clone(), ..RunOptions::default() };
    let several = kinds.len() > 1;
    let t0 = Instant::now();
    let mut bar: Option<indicatif::ProgressBar> = None;
    let parts = setup
        .run(&opts, |ev| {
            match ev {
                BalanceEvent::Start(k, n) => {
                    bar = (!a.quiet).then(|| {
                        let b = indicatif::ProgressBar::new(n as u64);
                        b.set_style(indicatif::ProgressStyle::with_template("{prefix:>8} [{bar:30}] {pos}/{len} iterations {msg}").unwrap().progress_chars("=> "));
                        b.set_prefix(k.name());
                        b
                    });
                }
                BalanceEvent::Iter(rec) => {
                    if let Some(b) = &bar {
                        b.set_message(format!("max/mean {:.2}", rec.max_over_mean));
                        b.inc(1);
                    }
                }
                BalanceEvent::Done(part) => {
                    if let Some(b) = bar.take() {
                        b.finish_and_clear();
                    }
                    let k = part.key;
                    // A balancer that fails does not stop the others (one balancer alone: the error).
                    let r = match &part.result {
                        Ok(r) => r,
                        Err(e) if several => {
                            super::report_failed_part("balancer", k.name(), &e.to_string(), &format!("balance {}: ", k.name()));
                            return Ok(());
                        }
                        Err(e) => return Err(e.clone()),
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
                }
            }
            Ok(())
        })
        .map_err(|e| e.to_string())?;
    let results: Vec<BalanceResult> = parts.ok.into_iter().map(|(_, r)| r).collect();
    let failed: Vec<(BalancerKind, String)> = parts.failed.into_iter().map(|(k, e)| (k, e.to_string())).collect();
    if wave.is_some() {
        let (written, missing): (Vec<&(PathBuf, _)>, Vec<&(PathBuf, _)>) = before.iter().partition(|(f, t)| stamp(f).is_some_and(|now| Some(now) != *t));
        if !written.is_empty() && !a.quiet {
            println!("wrote {}", written.iter().map(|(f, _)| f.display().to_string()).collect::<Vec<_>>().join(" and "));
        }
        if let Some(g) = &a.gtkw {
            let pairs: Vec<(PathBuf, PathBuf)> = written.iter().map(|(f, _)| (f.clone(), if *f == before[0].0 { g.clone() } else { decision_path(g) })).collect();
            super::write_gtkw(&pairs, a.quiet)?;
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
