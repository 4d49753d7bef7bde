//! MoE-GPS (seeds/moe-gps.txt, SPEC §5) in the cycle-level system — which prediction
//! strategy wins where (paper Fig. 6/7), measured on the wafer model (`waferstream gps`).
//!
//! The system is the paper's (L9@5200, Fig. 2): attention tensor-parallel over every die
//! (one TP group, ring reduce-scatter — no all-gather, so after it die `t mod N` holds token
//! t, the paper's "random after scatter" made deterministic), experts expert-parallel (the
//! default placement, plus `spare_slots` free expert slots per die for duplicates). Per
//! iteration and strategy the FL (`sched::balance::gps`) decides where every token-expert
//! assignment is computed and where it starts; `hw::wafer::program::build_planned` turns that
//! into die programs and the wafer runs them cycle by cycle:
//!
//! * no prediction: every assignment from its holder to its expert's default host;
//! * Distribution-Only: Algorithm 1 on the CL predictor's Eq. 1 window counts
//!   (`hw::wafer::predictor`, warmed on `warmup` earlier iterations, updated after each
//!   held-out one); assignments dealt to the replicas by the plan's quota, still from their
//!   holder (the scatter is not saved);
//! * Token-to-Expert at each accuracy: Algorithm 1 on the guessed map; the reduce-scatter
//!   delivers each assignment to its guessed device (`src` = guessed device), so a right guess
//!   computed there never enters the network (`src == dst`) and a wrong one is forwarded; a
//!   Predict kernel of ⌈overhead fraction × no-prediction layer cycles⌉ runs on every die
//!   before attention.
//!
//! Build: [`GpsParams::check`] (the ranges, in [`limits`]), [`GpsExperiment::new`] (the
//! workloads, one config per bandwidth, the HBM fit, the mapping). Run: [`GpsExperiment::run`]
//! → one [`GpsPoint`] per (bandwidth, skewness) cell.

use std::path::{Path, PathBuf};

use hw::wafer::predictor::{dist_only_cl, DistOnlyFactory, DistOnlyModel};
use hw::wafer::program::{build_planned, LayerOpts};
use hw::wafer::{WaferCfg, WaferResult};
use sched::balance::gps::{dist_error_rate, duplicate_tokens, estimate_iteration, shares, skewness, DistOnlyCfg, DupSetup, ErrorModel, OverheadModel, Strategy, T2ePredictor};
use sched::balance::gps_workload::{expert_counts, max_skewness, skewed_iterations, t2e_predict_seeded};
use sched::models::ModelPreset;
use sched::trace::Trace;
use sched::wafer::dispatch::A2aXfer;
use sched::wafer::{expert_hosts, Mapping, MappingKind};
use serde::Serialize;

use super::limits;
use super::wafer::{check_fits, run_mapping_ctrl, run_program, text};
use super::{ensure_parent, Error, Result, RunOptions};

/// Flit size of the gps system: small enough that a PCIe-class link (32 B/cycle at 1 GHz)
/// stays within the router's 64 cycles per flit.
pub const FLIT_BYTES: u32 = 2048;
pub const CLOCK_MHZ: f64 = 1000.0;

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

impl Bandwidth {
    /// `gbps` per link and direction within [`limits::GPS_LINK_GBPS`] (a flit takes at most
    /// 64 cycles per link), or why not (an input error of `--bandwidth`).
    pub fn new(name: String, gbps: f64) -> Result<Self> {
        if !limits::GPS_LINK_GBPS.contains(&gbps) {
            return Err(Error::input(
                "--bandwidth",
                format!(
                    "{gbps} GB/s is outside {}..={} (a {FLIT_BYTES}-byte flit takes at most 64 cycles per link)",
                    limits::GPS_LINK_GBPS.start(),
                    limits::GPS_LINK_GBPS.end()
                ),
            ));
        }
        let lb = (gbps * 1000.0 / CLOCK_MHZ).round() as u32;
        let ser = FLIT_BYTES.div_ceil(lb).max(1);
        Ok(Bandwidth { name, bandwidth_gbps: gbps, link_bytes_per_cycle: lb, link_gbps_effective: FLIT_BYTES as f64 / ser as f64 * CLOCK_MHZ / 1000.0 })
    }
}

pub fn error_model_name(m: ErrorModel) -> &'static str {
    match m {
        ErrorModel::Optimistic => "optimistic",
        ErrorModel::Typical => "typical",
        ErrorModel::Pessimistic => "pessimistic",
    }
}

/// A target skewness of generated routing for `m`: within [1, experts / top-k), or why not
/// (an input error of `--skew`).
pub fn check_skew(v: f64, m: &ModelPreset) -> Result<f64> {
    let max = max_skewness(m.experts, m.top_k);
    if v >= 1.0 && v < max {
        Ok(v)
    } else {
        Err(Error::input("--skew", format!("{v} is outside [1, {max}) for {} ({} experts, top-{})", m.name, m.experts, m.top_k)))
    }
}

/// How the Distribution-Only predictor meets the measured iterations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DistEstimate {
    /// The moving window is updated after every held-out iteration (online; the default).
    #[default]
    Online,
    /// A train/test split (paper L9@16695–16900: the estimate on the train set, the error
    /// against the test set): the warm-up iterations are the train part, the held-out ones
    /// the test part; the predictor never sees a test iteration, and the error is also
    /// measured against the pooled test distribution (`dist_only_test_error`).
    Split,
}

/// The experiment's parameters (flags), checked by [`GpsParams::check`].
#[derive(Debug, Clone)]
pub struct GpsParams {
    /// `--wafer` as given (messages quote it).
    pub wafer: String,
    pub cols: u32,
    pub rows: u32,
    pub bandwidths: Vec<Bandwidth>,
    pub accuracies: Vec<f64>,
    pub error_model: ErrorModel,
    pub overhead: OverheadModel,
    pub seed: u64,
    /// Tokens per iteration (default 2048 generated; a trace split evenly).
    pub tokens: Option<u32>,
    /// Iterations the Distribution-Only counters see before the first measured one.
    pub warmup: u32,
    /// Held-out iterations measured.
    pub iters: u32,
    /// Distribution-Only moving window, iterations.
    pub window: u32,
    /// Free expert slots per die for duplicates.
    pub spare_slots: u32,
    /// Waveform of the Distribution-Only predictor over the first workload's iterations.
    pub predictor_vcd: Option<PathBuf>,
    /// Online window or a train/test split.
    pub dist_estimate: DistEstimate,
    /// The Distribution-Only predictor's builder: `None` = the CL model; an RTL stand-in
    /// (`gps --rtl predictor`) gives the same plans, points and waveform.
    pub predictor: Option<DistOnlyFactory>,
}

impl GpsParams {
    /// The ranges of [`limits`] (the first one outside, named by its flag).
    pub fn check(&self) -> Result<()> {
        let (lo, hi) = (*limits::GPS_ITERS.start(), *limits::GPS_ITERS.end());
        if !limits::GPS_ITERS.contains(&self.iters) {
            return Err(Error::input("--iters", format!("must be within {lo}..={hi} (got {})", self.iters)));
        }
        if self.warmup > limits::GPS_MAX_WARMUP {
            return Err(Error::input("--warmup", format!("at most {} (got {})", limits::GPS_MAX_WARMUP, self.warmup)));
        }
        if !limits::GPS_WINDOW.contains(&self.window) {
            return Err(Error::input("--window", format!("must be within {}..={} (got {})", limits::GPS_WINDOW.start(), limits::GPS_WINDOW.end(), self.window)));
        }
        if self.spare_slots > limits::GPS_MAX_SPARE_SLOTS {
            return Err(Error::input("--spare-slots", format!("at most {} (got {})", limits::GPS_MAX_SPARE_SLOTS, self.spare_slots)));
        }
        if self.dist_estimate == DistEstimate::Split && self.warmup == 0 {
            return Err(Error::input("--dist-estimate", "split needs a train part: --warmup at least 1"));
        }
        if let Some(t) = self.tokens {
            if !limits::GPS_TOKENS.contains(&t) {
                return Err(Error::input("--tokens", format!("must be within {}..={} (got {t})", limits::GPS_TOKENS.start(), limits::GPS_TOKENS.end())));
            }
        }
        Ok(())
    }
}

/// Where the routing comes from.
#[derive(Debug, Clone)]
pub enum GpsSource {
    /// A loaded trace (and its path, for messages): consecutive batches of its tokens of
    /// MoE layer `layer`.
    Trace { path: PathBuf, trace: Trace, layer: u32 },
    /// Generated at each target skewness (checked with [`check_skew`]); `layer` must be 0.
    Generated { skews: Vec<f64>, layer: u32 },
}

/// The gps system: `cols × rows` dies, all in one TP group for attention (reduce-scatter
/// only), experts on every die, one micro-batch (the paper's stages run in sequence).
fn gps_cfg(cols: u32, rows: u32, tokens: u32, bw: &Bandwidth, seed: u64) -> Result<WaferCfg> {
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
    c.validate().map_err(text)?;
    Ok(c)
}

/// One routing source at one skewness: the warm-up iterations, then the held-out ones.
#[derive(Debug, Clone)]
pub struct Workload {
    pub target_skew: Option<f64>,
    pub zipf: Option<f64>,
    pub iterations: Vec<Vec<Vec<u16>>>,
}

/// What one held-out iteration runs, per strategy: every assignment (src = die it starts on,
/// dst = die computing it).
struct IterPlans {
    skew: f64,
    dist_error: f64,
    /// Distribution-Only's predicted per-expert loads (what Algorithm 1 planned on).
    predicted: Vec<u64>,
    /// True per-expert counts of this iteration.
    counts: Vec<u64>,
    /// The predictor's window counts it predicted from (Eq. 1's n_i).
    window: Vec<u64>,
    none: Vec<A2aXfer>,
    dist: Vec<A2aXfer>,
    /// Per accuracy: the plan and the assignments forwarded after a wrong guess.
    t2e: Vec<(Vec<A2aXfer>, u64)>,
}

/// The T2E guesses' seed of one point's iteration and accuracy: from the base seed and the
/// point's own coordinates (the workload's key — its target skewness, or the trace layer —,
/// the held-out iteration, the accuracy), so a point's result does not depend on which
/// other points share its run. Bandwidth does not enter: the plans are bandwidth-independent.
pub fn point_seed(seed: u64, workload_key: u64, held_out: u64, accuracy: f64) -> u64 {
    seed_mix(seed, workload_key, held_out, accuracy.to_bits())
}

fn seed_mix(seed: u64, a: u64, b: u64, c: u64) -> u64 {
    let mut x = seed ^ a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.wrapping_mul(0xBF58_476D_1CE4_E5B9) ^ c.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    x.wrapping_mul(0xD6E8_FEB8_6659_FD93)
}

/// The sums of one strategy's runs over the held-out iterations ([`Sum::merge`] adds two).
#[derive(Debug, Default, Clone, Copy)]
pub struct Sum {
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
        self.merge(&Sum { cycles: r.layer_cycles, allreduce: r.allreduce_cycles, dispatch: r.a2a_dispatch_cycles, experts: r.expert_cycles, combine: r.a2a_combine_cycles, predict, network, n: 1 });
    }
    /// Adds another set of runs.
    pub fn merge(&mut self, o: &Sum) {
        self.cycles += o.cycles;
        self.allreduce += o.allreduce;
        self.dispatch += o.dispatch;
        self.experts += o.experts;
        self.combine += o.combine;
        self.predict += o.predict;
        self.network += o.network;
        self.n += o.n;
    }
    /// The mean run (rounded to the nearest cycle).
    pub fn mean(&self) -> StratCycles {
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
    /// of the no-prediction cycles: (T2E − Dist-Only) / none (> 0: Dist-Only better).
    pub dist_minus_t2e_saving: f64,
    /// Distribution-Only error rate ε (‖p̂ − p‖₁ / experts), mean.
    pub dist_only_error: f64,
    /// With `--dist-estimate split`: ε of the train estimate against the pooled test
    /// iterations (the paper's Table 1 error, L9@16695).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dist_only_test_error: Option<f64>,
    pub error_model: &'static str,
    pub no_prediction: StratCycles,
    pub dist_only: StratCycles,
    pub t2e: Vec<T2ePoint>,
}

/// The experiment, built and checked: workloads, one wafer config per bandwidth, the mapping.
pub struct GpsExperiment {
    pub params: GpsParams,
    pub model: ModelPreset,
    /// Tokens per iteration.
    pub tokens: u32,
    pub workloads: Vec<Workload>,
    pub dist_cfg: DistOnlyCfg,
    cfgs: Vec<WaferCfg>,
    mp: Mapping,
    map_cycles: u64,
}

impl GpsExperiment {
    /// The workloads (a trace checked against the model; or one per target skewness), one
    /// config per bandwidth, the HBM fit and the mapping controller's tables.
    pub fn new(params: GpsParams, model: ModelPreset, source: &GpsSource) -> Result<Self> {
        let total_iters = (params.warmup + params.iters) as usize;
        let mut workloads: Vec<Workload> = Vec::new();
        let tokens: u32;
        match source {
            GpsSource::Trace { path, trace: t, layer } => {
                for (field, have, want) in [("experts", t.header.experts, model.experts), ("top_k", t.header.top_k, model.top_k)] {
                    if have != want {
                        return Err(Error::input(format!("--trace {}", path.display()), format!("header field `{field}` is {have} but --model {} has {field} = {want}", model.name)));
                    }
                }
                if *layer >= t.header.layers {
                    return Err(Error::input("--layer", format!("{} but the trace has {} layers", layer, t.header.layers)));
                }
                let stream: Vec<Vec<u16>> = t.routing(0..t.tokens.len(), *layer as usize);
                if stream.is_empty() {
                    return Err(Error::input(format!("--trace {}", path.display()), "no tokens"));
                }
                tokens = params.tokens.unwrap_or_else(|| (stream.len() / total_iters).clamp(1, *limits::GPS_TOKENS.end() as usize) as u32);
                let iterations = (0..total_iters).map(|i| (0..tokens as usize).map(|j| stream[(i * tokens as usize + j) % stream.len()].clone()).collect()).collect();
                workloads.push(Workload { target_skew: None, zipf: None, iterations });
            }
            GpsSource::Generated { skews, layer } => {
                if *layer != 0 {
                    return Err(Error::input("--layer", "only with --trace"));
                }
                tokens = params.tokens.unwrap_or(2048);
                for &s in skews {
                    let w = skewed_iterations(model.experts, model.top_k, tokens, total_iters as u32, s, params.seed).map_err(|e| Error::input(format!("--skew {s}"), e.to_string()))?;
                    workloads.push(Workload { target_skew: Some(s), zipf: Some(w.zipf), iterations: w.iterations });
                }
            }
        }
        // One config per bandwidth (checked before the first run).
        let cfgs: Vec<WaferCfg> = params.bandwidths.iter().map(|b| gps_cfg(params.cols, params.rows, tokens, b, params.seed)).collect::<Result<_>>()?;
        check_fits(&cfgs[0], &model)?;
        let (mp, map_cycles) = run_mapping_ctrl(&cfgs[0]).map_err(|e| Error::input(format!("--wafer {}", params.wafer), e.to_string()))?;
        let dist_cfg = DistOnlyCfg { window: params.window, ..DistOnlyCfg::default() };
        Ok(GpsExperiment { params, model, tokens, workloads, dist_cfg, cfgs, mp, map_cycles })
    }

    /// Plans every held-out iteration per strategy (bandwidth-independent; the predictor's
    /// waveform is written here), then runs each plan on the wafer at every bandwidth.
    pub fn run(&self, opts: &RunOptions) -> Result<Vec<GpsPoint>> {
        let p = &self.params;
        let model = &self.model;
        tracing::info!(model = %model.name, dies = p.cols * p.rows, workloads = self.workloads.len(), bandwidths = p.bandwidths.len(), "gps run start");
        let all_plans = self.plan()?;
        self.simulate(&all_plans, opts)
    }

    /// Distribution-Only's predicted per-expert loads, per workload and held-out iteration
    /// (what Algorithm 1 planned on), with the iteration's true counts.
    pub fn dist_only_predictions(&self) -> Result<Vec<Vec<(Vec<u64>, Vec<u64>)>>> {
        Ok(self.plan()?.into_iter().map(|w| w.into_iter().map(|ip| (ip.predicted, ip.counts)).collect()).collect())
    }

    /// Every held-out iteration's plan per strategy (bandwidth-independent; the predictor's
    /// waveform is written here).
    fn plan(&self) -> Result<Vec<Vec<IterPlans>>> {
        let p = &self.params;
        let model = &self.model;
        let dies = p.cols * p.rows;
        let mp = &self.mp;
        let hosts = expert_hosts(model.experts, dies);
        let mut initial = vec![Vec::new(); dies as usize];
        for (e, hs) in hosts.iter().enumerate() {
            for &h in hs {
                initial[h as usize].push(e as u32);
            }
        }
        let setup = DupSetup { experts: model.experts, capacity: initial.iter().map(|l| l.len() as u32 + p.spare_slots).collect(), initial, max_copies: dies };

        // --- Plans per workload and held-out iteration (bandwidth-independent).
        let mut all_plans: Vec<Vec<IterPlans>> = Vec::new();
        for (wi, w) in self.workloads.iter().enumerate() {
            // The point's own key (never its position in the sweep).
            let wkey = match w.target_skew {
                Some(s) => s.to_bits(),
                None => 0x7472_6163_6500_0000,
            };
            let mut pred = match p.predictor {
                Some(f) => f(self.dist_cfg, model.experts as usize).map_err(|e| Error::input("--rtl predictor", e.to_string()))?,
                None => dist_only_cl(self.dist_cfg, model.experts as usize).map_err(|e| Error::input("--window", e.to_string()))?,
            };
            let trace_it = wi == 0 && p.predictor_vcd.is_some();
            let mut samples: Vec<Vec<u64>> = Vec::new();
            let observe = |pred: &mut dyn DistOnlyModel, counts: &[u64], samples: &mut Vec<Vec<u64>>| -> Result<()> {
                pred.start(counts).map_err(text)?;
                while pred.busy() {
                    pred.step();
                    if trace_it {
                        let mut v = Vec::new();
                        pred.sample(&mut v);
                        samples.push(v);
                    }
                }
                // One idle cycle between iterations.
                pred.step();
                if trace_it {
                    let mut v = Vec::new();
                    pred.sample(&mut v);
                    samples.push(v);
                }
                Ok(())
            };
            for it in &w.iterations[..p.warmup as usize] {
                observe(pred.as_mut(), &expert_counts(it, model.experts), &mut samples)?;
            }
            let mut plans = Vec::new();
            for (hi, it) in w.iterations[p.warmup as usize..].iter().enumerate() {
                let truth: Vec<u32> = it.iter().flat_map(|es| es.iter().map(|&e| e as u32)).collect();
                let k = model.top_k as usize;
                let holder = |assign: usize| mp.holder(0, 0, (assign / k) as u32);
                let to_xfers = |src: &dyn Fn(usize) -> u32, device: &[u32]| -> Vec<A2aXfer> {
                    truth.iter().enumerate().map(|(i, &e)| A2aXfer { group: 0, token: (i / k) as u32, expert: e, src: src(i), dst: device[i] }).collect()
                };
                let counts = expert_counts(it, model.experts);
                let n = truth.len() as u64;
                let none = estimate_iteration(&truth, &setup, Strategy::NoPrediction).map_err(text)?;
                let predicted = pred.predicted_loads(n);
                let dist_error = dist_error_rate(&shares(pred.counts()), &shares(&counts)).map_err(text)?;
                let dist = estimate_iteration(&truth, &setup, Strategy::DistOnly { predicted_loads: &predicted }).map_err(text)?;
                let mut t2e = Vec::new();
                for &acc in p.accuracies.iter() {
                    let pr = T2ePredictor { accuracy: acc, model: p.error_model };
                    let guess = t2e_predict_seeded(&pr, &truth, model.experts, point_seed(p.seed, wkey, hi as u64, acc)).map_err(|e| Error::input(format!("--accuracy {acc}"), e.to_string()))?;
                    let (_, sent) = duplicate_tokens(&guess.experts, &setup).map_err(text)?;
                    let l = estimate_iteration(&truth, &setup, Strategy::TokenToExpert { predicted: &guess.experts }).map_err(text)?;
                    t2e.push((to_xfers(&|i| sent[i], &l.device), l.forwarded));
                }
                plans.push(IterPlans { skew: skewness(&counts), dist_error, none: to_xfers(&holder, &none.device), dist: to_xfers(&holder, &dist.device), t2e, predicted, counts: counts.clone(), window: pred.counts().to_vec() });
                // Split: a test iteration is never shown to the predictor.
                if p.dist_estimate == DistEstimate::Online {
                    observe(pred.as_mut(), &counts, &mut samples)?;
                }
            }
            if let (0, Some(path)) = (wi, &p.predictor_vcd) {
                write_predictor_vcd(path, pred.as_ref(), &samples)?;
            }
            all_plans.push(plans);
        }
        Ok(all_plans)
    }

    /// Runs every plan on the wafer at every bandwidth.
    fn simulate(&self, all_plans: &[Vec<IterPlans>], opts: &RunOptions) -> Result<Vec<GpsPoint>> {
        let p = &self.params;
        let model = &self.model;
        let mp = &self.mp;

        // --- Cycle-level runs (the predictor's waveform is the only one of this run).
        let o = RunOptions { waves: None, ..opts.clone() };
        let run = |c: &WaferCfg, plan: &[A2aXfer], predict: u64| -> Result<WaferResult> {
            let prog = build_planned(c, model, mp, vec![plan.to_vec()], &LayerOpts { predict_cycles: predict });
            run_program(c, mp, self.map_cycles, &prog, false, &o)
        };
        let net = |p: &[A2aXfer]| p.iter().filter(|x| x.src != x.dst).count() as u64;
        let accs = &p.accuracies;
        let mut points = Vec::new();
        for (bw, c) in p.bandwidths.iter().zip(&self.cfgs) {
            for (w, plans) in self.workloads.iter().zip(all_plans) {
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
                        let frac = p.overhead.fraction(accs[ai], ip.skew).map_err(|e| Error::input("--overhead", e.to_string()))?;
                        let predict = (frac * r0.layer_cycles as f64).ceil().min(1e15) as u64;
                        let r = run(c, plan, predict)?;
                        t2e[ai].0.add(&r, predict, net(plan));
                        t2e[ai].1 += fwd;
                        t2e[ai].2 += frac;
                    }
                }
                let h = plans.len().max(1) as f64;
                let measured = skew_sum / h;
                // Split: the frozen train estimate against the pooled test iterations.
                let test_error = match (p.dist_estimate, plans.first()) {
                    (DistEstimate::Split, Some(first)) => {
                        let mut pooled = vec![0u64; model.experts as usize];
                        for ip in plans {
                            pooled.iter_mut().zip(&ip.counts).for_each(|(a, b)| *a += b);
                        }
                        Some(dist_error_rate(&shares(&first.window), &shares(&pooled)).map_err(text)?)
                    }
                    _ => None,
                };
                let t2e_points: Vec<T2ePoint> = t2e
                    .iter()
                    .zip(accs)
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
                tracing::debug!(bandwidth = %bw.name, skew = w.target_skew.unwrap_or(measured), winner, none = nc.cycles, dist_only = dc.cycles, best_t2e = bc, "gps point done");
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
                    dist_only_test_error: test_error,
                    error_model: error_model_name(p.error_model),
                    no_prediction: nc,
                    dist_only: dc,
                    t2e: t2e_points,
                });
            }
        }
        Ok(points)
    }
}

/// The Distribution-Only predictor's registers, one sample per cycle, as a VCD.
fn write_predictor_vcd(path: &Path, pred: &dyn DistOnlyModel, samples: &[Vec<u64>]) -> Result<()> {
    ensure_parent(path)?;
    let scope: Vec<String> = ["top", "gps", "dist_only"].iter().map(|s| s.to_string()).collect();
    let mut decl = Vec::new();
    pred.declare(&scope, &mut decl);
    let period_ps = (1e6 / CLOCK_MHZ).round() as u64;
    let werr = |e: waves::WaveError| Error::io(path, e.to_string());
    let mut wr = waves::WaveWriter::create(path, waves::WaveFormat::Vcd, period_ps, &decl, &waves::WaveFilter::default()).map_err(werr)?;
    let mut prev: Option<&Vec<u64>> = None;
    for (cyc, s) in samples.iter().enumerate() {
        for (i, &v) in s.iter().enumerate() {
            if prev.is_none_or(|p| p.get(i) != Some(&v)) {
                wr.change(cyc as u64, i, v).map_err(werr)?;
            }
        }
        prev = Some(s);
    }
    wr.finish(samples.len() as u64).map_err(werr)
}
