//! `waferstream gps`: MoE-GPS (seeds/moe-gps.txt, SPEC §5) in the cycle-level system — which
//! prediction strategy wins where (paper Fig. 6/7), measured on the wafer model.
//!
//! The system is the paper's (L9@5200, Fig. 2): attention tensor-parallel over every die
//! (one TP group, ring reduce-scatter — no all-gather, so after it die `t mod N` holds token
//! t, the paper's "random after scatter" made deterministic), experts expert-parallel (the
//! default placement, plus `--spare-slots` free expert slots per die for duplicates). Per
//! iteration and strategy the FL (`sched::balance::gps`) decides where every token-expert
//! assignment is computed and where it starts; `hw::wafer::program::build_planned` turns that
//! into die programs and the wafer runs them cycle by cycle:
//!
//! * no prediction: every assignment from its holder to its expert's default host;
//! * Distribution-Only: Algorithm 1 on the CL predictor's Eq. 1 window counts
//!   (`hw::wafer::predictor`, warmed on `--warmup` earlier iterations, updated after each
//!   held-out one); assignments dealt to the replicas by the plan's quota, still from their
//!   holder (the scatter is not saved);
//! * Token-to-Expert at each `--accuracy`: Algorithm 1 on the guessed map; the reduce-scatter
//!   delivers each assignment to its guessed device (`src` = guessed device), so a right guess
//!   computed there never enters the network (`src == dst`) and a wrong one is forwarded; a
//!   Predict kernel of ⌈overhead fraction × no-prediction layer cycles⌉ runs on every die
//!   before attention.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use hw::wafer::predictor::DistOnlyPredictorCl;
use hw::wafer::program::{build_planned, LayerOpts};
use hw::wafer::{WaferCfg, WaferResult};
use sched::balance::gps::{dist_error_rate, duplicate_tokens, estimate_iteration, shares, skewness, DistOnlyCfg, DupSetup, ErrorModel, OverheadCurve, OverheadModel, Strategy, T2ePredictor};
use sched::balance::gps_workload::{expert_counts, max_skewness, skewed_iterations, t2e_predict_seeded};
use sched::models::{model_by_name, ModelPreset};
use sched::trace::load_trace;
use sched::wafer::dispatch::A2aXfer;
use sched::wafer::{expert_hosts, MappingKind};
use serde::Serialize;

use super::wafer::{check_fits, run_mapping_ctrl, run_program};
use super::{check_writable, ensure_parent, CliResult};

/// Flit size of the gps system: small enough that a PCIe-class link (32 B/cycle at 1 GHz)
/// stays within the router's 64 cycles per flit.
const FLIT_BYTES: u32 = 2048;
const CLOCK_MHZ: f64 = 1000.0;
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
    /// Token-to-Expert overhead fit, `SKEW:A:B` per curve (fraction = A·exp(B·accuracy)),
    /// comma-separated, skewness ascending; default docs/gps.md's.
    #[arg(long)]
    pub overhead: Option<String>,
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Waveform of the Distribution-Only predictor (its Eq. 1 counters) over the first
    /// workload's iterations, scope `top.gps.dist_only`.
    #[arg(long)]
    pub vcd: Option<PathBuf>,
    #[arg(long)]
    pub quiet: bool,
}

/// A link bandwidth preset.
#[derive(Debug, Clone, Serialize)]
pub struct Bandwidth {
    pub name: String,
    /// GB/s per link and direction, as asked.
    pub bandwidth_gbps: f64,
    pub link_bytes_per_cycle: u32,
    /// What the router's flit serialization gives: flit bytes / ⌈flit / link width⌉ cycles.
    pub link_gbps_effective: f64,
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
        if !(32.0..=2048.0).contains(&gbps) {
            return Err(format!("{gbps} GB/s is outside 32..=2048 (a {FLIT_BYTES}-byte flit takes at most 64 cycles per link)"));
        }
        let lb = (gbps * 1000.0 / CLOCK_MHZ).round() as u32;
        let ser = FLIT_BYTES.div_ceil(lb).max(1);
        Ok(Bandwidth { name, bandwidth_gbps: gbps, link_bytes_per_cycle: lb, link_gbps_effective: FLIT_BYTES as f64 / ser as f64 * CLOCK_MHZ / 1000.0 })
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
    let curves = list(s, "--overhead", 16, |x| {
        let p: Vec<&str> = x.split(':').collect();
        if p.len() != 3 {
            return Err(format!("{x:?}: expected SKEW:A:B"));
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

fn error_model_name(m: ErrorModel) -> &'static str {
    match m {
        ErrorModel::Optimistic => "optimistic",
        ErrorModel::Typical => "typical",
        ErrorModel::Pessimistic => "pessimistic",
    }
}

/// The gps system: `cols × rows` dies, all in one TP group for attention (reduce-scatter
/// only), experts on every die, one micro-batch (the paper's stages run in sequence).
fn gps_cfg(cols: u32, rows: u32, tokens: u32, bw: &Bandwidth, seed: u64) -> CliResult<WaferCfg> {
    let c = WaferCfg {
        die_cols: cols,
        die_rows: rows,
        tp: cols * rows,
        dp: 1,
        all_gather: false,
        micro_batches: 1,
        tokens_per_group: tokens,
        flit_bytes: FLIT_BYTES,
        clock_mhz: CLOCK_MHZ,
        link_bytes_per_cycle: bw.link_bytes_per_cycle,
        mapping: MappingKind::Baseline,
        seed,
        ..WaferCfg::default()
    };
    c.validate().map_err(|e| e.to_string())?;
    Ok(c)
}

/// One routing source at one skewness: the warm-up iterations, then the held-out ones.
struct Workload {
    target_skew: Option<f64>,
    zipf: Option<f64>,
    iterations: Vec<Vec<Vec<u16>>>,
}

/// What one held-out iteration runs, per strategy: every assignment (src = die it starts on,
/// dst = die computing it).
struct IterPlans {
    skew: f64,
    dist_error: f64,
    none: Vec<A2aXfer>,
    dist: Vec<A2aXfer>,
    /// Per accuracy: the plan and the assignments forwarded after a wrong guess.
    t2e: Vec<(Vec<A2aXfer>, u64)>,
}

fn seed_mix(seed: u64, a: u64, b: u64, c: u64) -> u64 {
    let mut x = seed ^ a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.wrapping_mul(0xBF58_476D_1CE4_E5B9) ^ c.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    x.wrapping_mul(0xD6E8_FEB8_6659_FD93)
}

#[derive(Default, Clone, Copy)]
struct Sum {
    cycles: u64,
    allreduce: u64,
    dispatch: u64,
    experts: u64,
    combine: u64,
    predict: u64,
    network: u64,
    n: u64,
}

impl Sum {
    fn add(&mut self, r: &WaferResult, predict: u64, network: u64) {
        self.cycles += r.layer_cycles;
        self.allreduce += r.allreduce_cycles;
        self.dispatch += r.a2a_dispatch_cycles;
        self.experts += r.expert_cycles;
        self.combine += r.a2a_combine_cycles;
        self.predict += predict;
        self.network += network;
        self.n += 1;
    }
    fn mean(&self) -> StratCycles {
        let m = |x: u64| (x + self.n / 2) / self.n.max(1);
        StratCycles { cycles: m(self.cycles), allreduce_cycles: m(self.allreduce), dispatch_cycles: m(self.dispatch), expert_cycles: m(self.experts), combine_cycles: m(self.combine), predict_cycles: m(self.predict), network_assignments: m(self.network) }
    }
}

/// Mean over the held-out iterations of one strategy's run.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct StratCycles {
    /// Layer cycles (the last die's end).
    pub cycles: u64,
    pub allreduce_cycles: u64,
    pub dispatch_cycles: u64,
    pub expert_cycles: u64,
    pub combine_cycles: u64,
    /// The Token-to-Expert predictor kernel (0 for the others).
    pub predict_cycles: u64,
    /// Assignments that crossed the network (src ≠ dst).
    pub network_assignments: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct T2ePoint {
    pub accuracy: f64,
    pub overhead_fraction: f64,
    /// Assignments forwarded after a wrong guess (mean).
    pub forwarded: u64,
    #[serde(flatten)]
    pub run: StratCycles,
}

#[derive(Debug, Clone, Serialize)]
pub struct GpsPoint {
    /// Target skewness (generated) or the measured one (trace).
    pub skewness: f64,
    /// Mean measured skewness of the held-out iterations.
    pub measured_skewness: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zipf: Option<f64>,
    pub bandwidth: String,
    pub bandwidth_gbps: f64,
    /// `dist_only`, `token_to_expert` or `no_prediction`: the fewest cycles (ties → in that order).
    pub winner: &'static str,
    pub no_prediction_cycles: u64,
    pub dist_only_cycles: u64,
    pub best_t2e_cycles: u64,
    pub best_t2e_accuracy: f64,
    /// Paper Fig. 7: Dist-Only's saving over no prediction minus the best T2E's, as a fraction
    /// of the no-prediction cycles (> 0: Dist-Only better).
    pub dist_minus_t2e_saving: f64,
    /// Distribution-Only error rate ε (‖p̂ − p‖₁ / experts), mean.
    pub dist_only_error: f64,
    pub error_model: &'static str,
    pub no_prediction: StratCycles,
    pub dist_only: StratCycles,
    pub t2e: Vec<T2ePoint>,
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
    if a.iters == 0 || a.iters > 16 {
        return Err(format!("--iters: must be within 1..=16 (got {})", a.iters));
    }
    if a.warmup > 256 {
        return Err(format!("--warmup: at most 256 (got {})", a.warmup));
    }
    if a.window == 0 || a.window > 1024 {
        return Err(format!("--window: must be within 1..=1024 (got {})", a.window));
    }
    if a.spare_slots > 64 {
        return Err(format!("--spare-slots: at most 64 (got {})", a.spare_slots));
    }
    if let Some(t) = a.tokens {
        if t == 0 || t > 65_536 {
            return Err(format!("--tokens: must be within 1..=65536 (got {t})"));
        }
    }
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
    let total_iters = (a.warmup + a.iters) as usize;

    // --- Workloads.
    let mut workloads: Vec<Workload> = Vec::new();
    let tokens: u32;
    match (&trace, &a.trace) {
        (Some(t), Some(path)) => {
            for (field, have, want) in [("experts", t.header.experts, model.experts), ("top_k", t.header.top_k, model.top_k)] {
                if have != want {
                    return Err(format!("--trace {}: header field `{field}` is {have} but --model {} has {field} = {want}", path.display(), model.name));
                }
            }
            if a.layer >= t.header.layers {
                return Err(format!("--layer: {} but the trace has {} layers", a.layer, t.header.layers));
            }
            let stream: Vec<Vec<u16>> = t.routing(0..t.tokens.len(), a.layer as usize);
            if stream.is_empty() {
                return Err(format!("--trace {}: no tokens", path.display()));
            }
            tokens = a.tokens.unwrap_or_else(|| (stream.len() / total_iters).clamp(1, 65_536) as u32);
            let iterations = (0..total_iters).map(|i| (0..tokens as usize).map(|j| stream[(i * tokens as usize + j) % stream.len()].clone()).collect()).collect();
            workloads.push(Workload { target_skew: None, zipf: None, iterations });
        }
        _ => {
            if a.layer != 0 {
                return Err("--layer: only with --trace".into());
            }
            tokens = a.tokens.unwrap_or(2048);
            let max = max_skewness(model.experts, model.top_k);
            let skews = list(a.skew.as_deref().unwrap_or(DEFAULT_SKEWS), "--skew", 32, |x| {
                let v = num(x)?;
                if v >= 1.0 && v < max {
                    Ok(v)
                } else {
                    Err(format!("{v} is outside [1, {max}) for {} ({} experts, top-{})", model.name, model.experts, model.top_k))
                }
            })?;
            for &s in &skews {
                let w = skewed_iterations(model.experts, model.top_k, tokens, total_iters as u32, s, a.seed).map_err(|e| format!("--skew {s}: {e}"))?;
                workloads.push(Workload { target_skew: Some(s), zipf: Some(w.zipf), iterations: w.iterations });
            }
        }
    }

    // --- The system: one config per bandwidth (checked before the first run).
    let cfgs: Vec<WaferCfg> = bws.iter().map(|b| gps_cfg(cols, rows, tokens, b, a.seed)).collect::<CliResult<_>>()?;
    check_fits(&cfgs[0], &model)?;
    let (mp, map_cycles) = run_mapping_ctrl(&cfgs[0]).map_err(|e| format!("--wafer {}: {e}", a.wafer))?;
    let hosts = expert_hosts(model.experts, dies);
    let mut initial = vec![Vec::new(); dies as usize];
    for (e, hs) in hosts.iter().enumerate() {
        for &h in hs {
            initial[h as usize].push(e as u32);
        }
    }
    let setup = DupSetup { experts: model.experts, capacity: initial.iter().map(|l| l.len() as u32 + a.spare_slots).collect(), initial, max_copies: dies };
    let dist_cfg = DistOnlyCfg { window: a.window, ..DistOnlyCfg::default() };

    // --- Plans per workload and held-out iteration (bandwidth-independent).
    let mut all_plans: Vec<Vec<IterPlans>> = Vec::new();
    for (wi, w) in workloads.iter().enumerate() {
        let mut pred = DistOnlyPredictorCl::new(dist_cfg, model.experts as usize).map_err(|e| format!("--window: {e}"))?;
        let mut samples: Vec<Vec<u64>> = Vec::new();
        let observe = |pred: &mut DistOnlyPredictorCl, counts: &[u64], samples: &mut Vec<Vec<u64>>| -> CliResult<()> {
            pred.start(counts).map_err(|e| e.to_string())?;
            while pred.busy() {
                pred.step();
                if wi == 0 && a.vcd.is_some() {
                    let mut v = Vec::new();
                    pred.sample(&mut v);
                    samples.push(v);
                }
            }
            // One idle cycle between iterations.
            pred.step();
            if wi == 0 && a.vcd.is_some() {
                let mut v = Vec::new();
                pred.sample(&mut v);
                samples.push(v);
            }
            Ok(())
        };
        for it in &w.iterations[..a.warmup as usize] {
            observe(&mut pred, &expert_counts(it, model.experts), &mut samples)?;
        }
        let mut plans = Vec::new();
        for (hi, it) in w.iterations[a.warmup as usize..].iter().enumerate() {
            let truth: Vec<u32> = it.iter().flat_map(|es| es.iter().map(|&e| e as u32)).collect();
            let k = model.top_k as usize;
            let holder = |assign: usize| mp.holder(0, 0, (assign / k) as u32);
            let to_xfers = |src: &dyn Fn(usize) -> u32, device: &[u32]| -> Vec<A2aXfer> {
                truth.iter().enumerate().map(|(i, &e)| A2aXfer { group: 0, token: (i / k) as u32, expert: e, src: src(i), dst: device[i] }).collect()
            };
            let counts = expert_counts(it, model.experts);
            let n = truth.len() as u64;
            let none = estimate_iteration(&truth, &setup, Strategy::NoPrediction).map_err(|e| e.to_string())?;
            let predicted = pred.predicted_loads(n);
            let dist_error = dist_error_rate(&shares(pred.counts()), &shares(&counts)).map_err(|e| e.to_string())?;
            let dist = estimate_iteration(&truth, &setup, Strategy::DistOnly { predicted_loads: &predicted }).map_err(|e| e.to_string())?;
            let mut t2e = Vec::new();
            for (ai, &acc) in accs.iter().enumerate() {
                let p = T2ePredictor { accuracy: acc, model: emodel };
                let guess = t2e_predict_seeded(&p, &truth, model.experts, seed_mix(a.seed, wi as u64, hi as u64, ai as u64)).map_err(|e| format!("--accuracy {acc}: {e}"))?;
                let (_, sent) = duplicate_tokens(&guess.experts, &setup).map_err(|e| e.to_string())?;
                let l = estimate_iteration(&truth, &setup, Strategy::TokenToExpert { predicted: &guess.experts }).map_err(|e| e.to_string())?;
                t2e.push((to_xfers(&|i| sent[i], &l.device), l.forwarded));
            }
            plans.push(IterPlans { skew: skewness(&counts), dist_error, none: to_xfers(&holder, &none.device), dist: to_xfers(&holder, &dist.device), t2e });
            observe(&mut pred, &counts, &mut samples)?;
        }
        if let (0, Some(path)) = (wi, &a.vcd) {
            write_predictor_vcd(path, &pred, &samples)?;
        }
        all_plans.push(plans);
    }

    // --- Cycle-level runs.
    let run = |c: &WaferCfg, plan: &[A2aXfer], predict: u64| -> CliResult<WaferResult> {
        let prog = build_planned(c, &model, &mp, vec![plan.to_vec()], &LayerOpts { predict_cycles: predict });
        run_program(c, &mp, map_cycles, &prog, 1, true, false, None)
    };
    let net = |p: &[A2aXfer]| p.iter().filter(|x| x.src != x.dst).count() as u64;
    let mut points = Vec::new();
    for (bw, c) in bws.iter().zip(&cfgs) {
        for (w, plans) in workloads.iter().zip(&all_plans) {
            let (mut none, mut dist) = (Sum::default(), Sum::default());
            let mut t2e = vec![(Sum::default(), 0u64, 0.0f64); accs.len()];
            let (mut skew_sum, mut err_sum) = (0.0, 0.0);
            for ip in plans {
                skew_sum += ip.skew;
                err_sum += ip.dist_error;
                let r0 = run(c, &ip.none, 0)?;
                none.add(&r0, 0, net(&ip.none));
                let r1 = run(c, &ip.dist, 0)?;
                dist.add(&r1, 0, net(&ip.dist));
                for (ai, (plan, fwd)) in ip.t2e.iter().enumerate() {
                    let frac = overhead.fraction(accs[ai], ip.skew).map_err(|e| format!("--overhead: {e}"))?;
                    let predict = (frac * r0.layer_cycles as f64).ceil().min(1e15) as u64;
                    let r = run(c, plan, predict)?;
                    t2e[ai].0.add(&r, predict, net(plan));
                    t2e[ai].1 += fwd;
                    t2e[ai].2 += frac;
                }
            }
            let h = plans.len().max(1) as f64;
            let measured = skew_sum / h;
            let t2e_points: Vec<T2ePoint> = t2e
                .iter()
                .zip(&accs)
                .map(|((s, fwd, frac), &acc)| T2ePoint { accuracy: acc, overhead_fraction: frac / h, forwarded: (fwd + s.n / 2) / s.n.max(1), run: s.mean() })
                .collect();
            // Best T2E: fewest cycles, ties → the lower accuracy (cheaper predictor).
            let best = t2e_points.iter().min_by(|x, y| x.run.cycles.cmp(&y.run.cycles).then(x.accuracy.total_cmp(&y.accuracy))).cloned();
            let (nc, dc) = (none.mean(), dist.mean());
            let (bc, ba) = best.map(|b| (b.run.cycles, b.accuracy)).unwrap_or((u64::MAX, 0.0));
            let winner = if dc.cycles <= bc && dc.cycles <= nc.cycles {
                "dist_only"
            } else if bc <= nc.cycles {
                "token_to_expert"
            } else {
                "no_prediction"
            };
            points.push(GpsPoint {
                skewness: w.target_skew.unwrap_or(measured),
                measured_skewness: measured,
                zipf: w.zipf,
                bandwidth: bw.name.clone(),
                bandwidth_gbps: bw.bandwidth_gbps,
                winner,
                no_prediction_cycles: nc.cycles,
                dist_only_cycles: dc.cycles,
                best_t2e_cycles: bc,
                best_t2e_accuracy: ba,
                dist_minus_t2e_saving: (bc as f64 - dc.cycles as f64) / nc.cycles.max(1) as f64,
                dist_only_error: err_sum / h,
                error_model: error_model_name(emodel),
                no_prediction: nc,
                dist_only: dc,
                t2e: t2e_points,
            });
        }
    }

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
        for bw in &bws {
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
        let v = serde_json::json!({
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
        std::fs::write(j, serde_json::to_string_pretty(&v).map_err(|e| e.to_string())? + "\n").map_err(|e| format!("cannot write {}: {e}", j.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The Distribution-Only predictor's registers, one sample per cycle, as a VCD.
fn write_predictor_vcd(path: &std::path::Path, pred: &DistOnlyPredictorCl, samples: &[Vec<u64>]) -> CliResult<()> {
    ensure_parent(path)?;
    let scope: Vec<String> = ["top", "gps", "dist_only"].iter().map(|s| s.to_string()).collect();
    let mut decl = Vec::new();
    pred.declare(&scope, &mut decl);
    let period_ps = (1e6 / CLOCK_MHZ).round() as u64;
    let mut wr = waves::WaveWriter::create(path, waves::WaveFormat::Vcd, period_ps, &decl, &waves::WaveFilter::default()).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut prev: Option<&Vec<u64>> = None;
    for (cyc, s) in samples.iter().enumerate() {
        for (i, &v) in s.iter().enumerate() {
            if prev.is_none_or(|p| p.get(i) != Some(&v)) {
                wr.change(cyc as u64, i, v).map_err(|e| format!("{}: {e}", path.display()))?;
            }
        }
        prev = Some(s);
    }
    wr.finish(samples.len() as u64).map_err(|e| format!("{}: {e}", path.display()))
}
