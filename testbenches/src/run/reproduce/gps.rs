//! The MoE-GPS claims (seeds/moe-gps.txt, SPEC §5), under the paper's setup and ours
//! (`testbenches/papers/gps.toml`). Each setup is one [`GpsExperiment`] (the run layer of
//! `waferstream gps`); the claims read its points.

use serde::Deserialize;

use sched::balance::gps::{ErrorModel, OverheadModel};
use sched::models::model_by_name;

use super::{parse_setup, setup_text, Claim, Measured, Paper, PaperReport, ReproOptions, Table, Verdict};
use crate::error::{Error, Result};
use crate::run::gps::{check_skew, Bandwidth, DistEstimate, GpsExperiment, GpsParams, GpsPoint, GpsSource};
use crate::run::RunOptions;

/// `testbenches/papers/gps.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpsSetup {
    pub paper: GpsSide,
    pub strong: GpsSide,
    pub quick: GpsQuick,
}

/// One setup: the flags of `waferstream gps`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpsSide {
    pub model: String,
    /// `CxR` dies.
    pub wafer: String,
    pub tokens: u32,
    /// GB/s per link and direction; the lowest is "slow", the highest "fast".
    pub bandwidths: Vec<f64>,
    pub skews: Vec<f64>,
    pub accuracies: Vec<f64>,
    pub error_model: ErrorModelName,
    pub overhead: OverheadName,
    pub dist_estimate: DistEstimateName,
    pub warmup: u32,
    pub iters: u32,
    pub window: u32,
    pub spare_slots: u32,
    pub seed: u64,
}

/// `--quick`: the skews kept and a token cap.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpsQuick {
    pub skews: Vec<f64>,
    pub max_tokens: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorModelName {
    Optimistic,
    Typical,
    Pessimistic,
}

/// The overhead fit: the calibrated one or the assumed one (docs/gps.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OverheadName {
    Fig4,
    Assumed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DistEstimateName {
    Online,
    Split,
}

const DOC: &str = "docs/gps.md#under-the-papers-setup-waferstream-reproduce-gps";

impl GpsSide {
    /// The experiment of this side (`quick`: its skews and token cap), checked.
    fn experiment(&self, side: &str, quick: Option<&GpsQuick>) -> Result<GpsExperiment> {
        let f = |field: &str| format!("gps setup field `{side}.{field}`");
        let model = model_by_name(&self.model).map_err(|e| Error::input(f("model"), e.to_string()))?;
        let (cols, rows) = self
            .wafer
            .split_once('x')
            .and_then(|(c, r)| Some((c.trim().parse::<u32>().ok()?, r.trim().parse::<u32>().ok()?)))
            .filter(|&(c, r)| c > 0 && r > 0 && c * r >= 2 && c <= 8 && r <= 8)
            .ok_or_else(|| Error::input(f("wafer"), format!("expected CxR with 2..=64 dies, at most 8 per side (got {:?})", self.wafer)))?;
        if self.bandwidths.len() != 2 || self.bandwidths[0] >= self.bandwidths[1] {
            return Err(Error::input(f("bandwidths"), "two values, slow then fast"));
        }
        let bandwidths = [("slow", self.bandwidths[0]), ("fast", self.bandwidths[1])]
            .into_iter()
            .map(|(n, g)| Bandwidth::new(n.into(), g).map_err(|e| Error::input(f("bandwidths"), e.to_string())))
            .collect::<Result<Vec<_>>>()?;
        if self.accuracies.is_empty() || self.accuracies.iter().any(|a| !(0.0..=1.0).contains(a)) {
            return Err(Error::input(f("accuracies"), "one or more accuracies, each in [0, 1]"));
        }
        let skews: Vec<f64> = match quick {
            Some(q) => q.skews.clone(),
            None => self.skews.clone(),
        };
        if skews.is_empty() {
            return Err(Error::input(f("skews"), "at least one skewness"));
        }
        for &s in &skews {
            check_skew(s, &model).map_err(|e| Error::input(f("skews"), e.to_string()))?;
        }
        let tokens = match quick {
            Some(q) => self.tokens.min(q.max_tokens),
            None => self.tokens,
        };
        let params = GpsParams {
            wafer: self.wafer.clone(),
            cols,
            rows,
            bandwidths,
            accuracies: self.accuracies.clone(),
            error_model: match self.error_model {
                ErrorModelName::Optimistic => ErrorModel::Optimistic,
                ErrorModelName::Typical => ErrorModel::Typical,
                ErrorModelName::Pessimistic => ErrorModel::Pessimistic,
            },
            overhead: match self.overhead {
                OverheadName::Fig4 => OverheadModel::moe_gps_fig4(),
                OverheadName::Assumed => OverheadModel::moe_gps_default(),
            },
            seed: self.seed,
            tokens: Some(tokens),
            warmup: self.warmup,
            iters: self.iters,
            window: self.window,
            spare_slots: self.spare_slots,
            predictor_vcd: None,
            dist_estimate: match self.dist_estimate {
                DistEstimateName::Online => DistEstimate::Online,
                DistEstimateName::Split => DistEstimate::Split,
            },
            predictor: None,
        };
        params.check().map_err(|e| Error::input(format!("gps setup `{side}`"), e.to_string()))?;
        GpsExperiment::new(params, model, &GpsSource::Generated { skews, layer: 0 })
    }

    fn line(&self, side: &str, e: &GpsExperiment) -> String {
        format!(
            "{side}: {} on {} dies ({}), {} tokens/iteration, links {} / {} GB/s, skews {:?}, T2E accuracies {:?} ({:?} errors), overhead fit {:?}, Dist-Only {:?} ({} train + {} test iterations, window {})",
            self.model,
            self.wafer,
            if side == "paper" { "paper: 4 A100s" } else { "ours" },
            e.tokens,
            self.bandwidths[0],
            self.bandwidths[1],
            e.workloads.iter().filter_map(|w| w.target_skew).collect::<Vec<_>>(),
            self.accuracies,
            self.error_model,
            self.overhead,
            self.dist_estimate,
            self.warmup,
            self.iters,
            self.window
        )
    }
}

/// The point at (bandwidth, skew) — the nearest skew.
fn at<'a>(pts: &'a [GpsPoint], bw: &str, skew: f64) -> Option<&'a GpsPoint> {
    pts.iter().filter(|p| p.bandwidth == bw).min_by(|a, b| (a.skewness - skew).abs().total_cmp(&(b.skewness - skew).abs()))
}

fn hi_skew(pts: &[GpsPoint]) -> f64 {
    pts.iter().map(|p| p.skewness).fold(f64::MIN, f64::max)
}

fn lo_skew(pts: &[GpsPoint]) -> f64 {
    pts.iter().map(|p| p.skewness).fold(f64::MAX, f64::min)
}

fn pct(x: f64) -> String {
    format!("{:+.1} %", 100.0 * x)
}

/// Dist-Only's error at a point: the train/test one when split, else the online mean.
fn dist_err(p: &GpsPoint) -> f64 {
    p.dist_only_test_error.unwrap_or(p.dist_only_error)
}

/// Claim 1: Dist-Only over the best T2E at skew 1.4, fast links: T2E cycles / Dist-Only − 1.
fn c1(pts: &[GpsPoint]) -> (Measured, String) {
    match at(pts, "fast", 1.4) {
        Some(p) => {
            let v = p.best_t2e_cycles as f64 / p.dist_only_cycles as f64 - 1.0;
            let b = p.t2e.iter().find(|t| t.accuracy == p.best_t2e_accuracy);
            let mech = match b {
                Some(b) => format!(
                    "skew {:.1} fast (winner {}): best T2E (accuracy {}) pays a {} predict kernel ({:.1} % overhead) and keeps {} of {} assignments off the network; Dist-Only: experts {} vs none {} cycles, combine {} vs {}",
                    p.skewness,
                    p.winner,
                    b.accuracy,
                    b.run.predict_cycles,
                    100.0 * b.overhead_fraction,
                    p.no_prediction.network_assignments - b.run.network_assignments,
                    p.no_prediction.network_assignments,
                    p.dist_only.expert_cycles,
                    p.no_prediction.expert_cycles,
                    p.dist_only.combine_cycles,
                    p.no_prediction.combine_cycles
                ),
                None => String::new(),
            };
            (Measured::new(100.0 * v, format!("{} (Dist-Only {} vs T2E {} cycles at accuracy {})", pct(v), p.dist_only_cycles, p.best_t2e_cycles, p.best_t2e_accuracy)), mech)
        }
        None => (Measured::none("no skew-1.4 fast point"), String::new()),
    }
}

/// Claim 2: at the highest skew on slow links, Fig. 7's (T2E − Dist-Only) / none.
fn c2(pts: &[GpsPoint]) -> (Measured, String) {
    let s = hi_skew(pts);
    match at(pts, "slow", s) {
        Some(p) => {
            let b = p.t2e.iter().find(|t| t.accuracy == p.best_t2e_accuracy);
            let mech = b
                .map(|b| {
                    format!(
                        "skew {:.1} slow: T2E (accuracy {}) dispatch+combine {} cycles vs Dist-Only {} (it skips the scatter for right guesses), predict {} cycles",
                        p.skewness,
                        b.accuracy,
                        b.run.dispatch_cycles + b.run.combine_cycles,
                        p.dist_only.dispatch_cycles + p.dist_only.combine_cycles,
                        b.run.predict_cycles
                    )
                })
                .unwrap_or_default();
            (Measured::new(100.0 * p.dist_minus_t2e_saving, format!("{} of no-prediction at skew {:.1} (winner {})", pct(p.dist_minus_t2e_saving), p.skewness, p.winner)), mech)
        }
        None => (Measured::none("no slow point"), String::new()),
    }
}

/// Claim 3: Dist-Only ≥ best T2E at every fast point and every slow point of the lowest skew.
fn c3(pts: &[GpsPoint]) -> (Measured, String) {
    let lo = lo_skew(pts);
    let set: Vec<&GpsPoint> = pts.iter().filter(|p| p.bandwidth == "fast" || (p.skewness - lo).abs() < 1e-9).collect();
    let wins = set.iter().filter(|p| p.dist_minus_t2e_saving >= 0.0).count();
    let losers: Vec<String> = set.iter().filter(|p| p.dist_minus_t2e_saving < 0.0).map(|p| format!("{} {:.1} ({})", p.bandwidth, p.skewness, pct(p.dist_minus_t2e_saving))).collect();
    let mech = if losers.is_empty() {
        "Dist-Only is at least as fast as the best T2E at every such point".to_string()
    } else {
        format!("the best T2E beats Dist-Only at {}", losers.join(", "))
    };
    (Measured::new(100.0 * wins as f64 / set.len().max(1) as f64, format!("{wins} of {} points (fast: all skews; slow: skew {lo:.1})", set.len())), mech)
}

/// Claim 4: Fig. 7's saving at the highest skew minus at the lowest, per link (points).
fn c4(pts: &[GpsPoint]) -> (Measured, String, usize) {
    let (lo, hi) = (lo_skew(pts), hi_skew(pts));
    let mut parts = Vec::new();
    let mut down = 0;
    let mut slow_delta = None;
    for bw in ["slow", "fast"] {
        if let (Some(a), Some(b)) = (at(pts, bw, lo), at(pts, bw, hi)) {
            let d = b.dist_minus_t2e_saving - a.dist_minus_t2e_saving;
            down += usize::from(d < 0.0);
            parts.push(format!("{bw} {} → {}", pct(a.dist_minus_t2e_saving), pct(b.dist_minus_t2e_saving)));
            if bw == "slow" {
                slow_delta = Some(d);
            }
        }
    }
    let mech = format!(
        "best T2E accuracy {} → {} (slow), overhead at 0.8: {} → {} of the layer",
        at(pts, "slow", lo).map(|p| p.best_t2e_accuracy).unwrap_or(0.0),
        at(pts, "slow", hi).map(|p| p.best_t2e_accuracy).unwrap_or(0.0),
        at(pts, "slow", lo).and_then(|p| p.t2e.iter().find(|t| t.accuracy == 0.8)).map(|t| pct(t.overhead_fraction)).unwrap_or_else(|| "-".into()),
        at(pts, "slow", hi).and_then(|p| p.t2e.iter().find(|t| t.accuracy == 0.8)).map(|t| pct(t.overhead_fraction)).unwrap_or_else(|| "-".into()),
    );
    (Measured::new(100.0 * slow_delta.unwrap_or(0.0), format!("saving (Dist − T2E)/none from skew {lo:.1} to {hi:.1}: {}", parts.join("; "))), mech, down)
}

/// Claim 5: Dist-Only's error at skew ~2.0 over that at 1.4 (Table 1's trend).
fn c5(pts: &[GpsPoint], tokens: u32, top_k: u32, experts: u32, train: u32) -> (Measured, String) {
    let hi = if pts.iter().any(|p| (p.skewness - 2.0).abs() < 1e-9) { 2.0 } else { hi_skew(pts) };
    match (at(pts, "fast", 1.4), at(pts, "fast", hi)) {
        (Some(a), Some(b)) => {
            let (ea, eb) = (dist_err(a), dist_err(b));
            let kind = if a.dist_only_test_error.is_some() { "train/test split" } else { "online window, per iteration" };
            (
                Measured::new(if ea > 0.0 { eb / ea } else { 0.0 }, format!("ε {:.2} % at skew 1.4, {:.2} % at {hi:.1} ({kind}): ×{:.2}", 100.0 * ea, 100.0 * eb, if ea > 0.0 { eb / ea } else { 0.0 })),
                format!("generated iterations are i.i.d. draws of one popularity: ε is the sampling noise of {train} × {tokens} tokens × top-{top_k} over {experts} experts (no drift between train and test), larger where the cold experts get fewer tokens"),
            )
        }
        _ => (Measured::none("no skew-1.4 point"), String::new()),
    }
}

fn table(title: &str, pts: &[GpsPoint]) -> Table {
    Table {
        title: title.into(),
        header: ["link", "skew (measured)", "none", "Dist-Only", "best T2E (acc)", "winner", "saving (T2E − Dist)/none", "Dist-Only ε"].iter().map(|s| s.to_string()).collect(),
        rows: pts
            .iter()
            .map(|p| {
                vec![
                    format!("{} {} GB/s", p.bandwidth, p.bandwidth_gbps),
                    format!("{:.1} ({:.3})", p.skewness, p.measured_skewness),
                    p.no_prediction_cycles.to_string(),
                    p.dist_only_cycles.to_string(),
                    format!("{} ({})", p.best_t2e_cycles, p.best_t2e_accuracy),
                    p.winner.to_string(),
                    pct(p.dist_minus_t2e_saving),
                    format!("{:.2} %", 100.0 * dist_err(p)),
                ]
            })
            .collect(),
    }
}

/// Runs the gps claims.
pub fn run(o: &ReproOptions) -> Result<PaperReport> {
    let text = setup_text(Paper::Gps, o)?;
    let setup: GpsSetup = parse_setup(Paper::Gps, &text)?;
    let q = o.quick.then_some(&setup.quick);
    let (ep, es) = (setup.paper.experiment("paper", q)?, setup.strong.experiment("strong", q)?);
    let ropts = RunOptions { threads: o.threads, ..RunOptions::default() };
    let pp = ep.run(&ropts)?;
    let ps = es.run(&ropts)?;

    let mut claims = Vec::new();
    let mk = |id: &str, claim: &str, paper_value: &str, p: Measured, s: Measured, verdict: Verdict, rule: &str, mech: String| Claim {
        paper: Paper::Gps,
        id: format!("gps.{id}"),
        claim: claim.into(),
        paper_value: paper_value.into(),
        paper_setup: p,
        strong_setup: s,
        verdict,
        rule: rule.into(),
        mechanism: mech,
        doc: DOC.into(),
    };

    let ((p1, m1), (s1, _)) = (c1(&pp), c1(&ps));
    let v1 = match p1.value {
        Some(v) => Verdict::for_gain(1.0 + v / 100.0, 1.23, 0.05),
        None => Verdict::DoesNotHold,
    };
    claims.push(mk(
        "dist_beats_t2e_skew14_fast",
        "Distribution-Only beats the best Token-to-Expert configuration at skew 1.4 on NVLink (Fig. 6b, L9@29384)",
        "23 % speedup",
        p1,
        s1,
        v1,
        "speedup = T2E cycles / Dist-Only cycles − 1; holds if ≥ 23 % − 5 % of 1.23 (≥ 16.9 %), partly if > 0, else does not hold",
        m1,
    ));

    let ((p2, m2), (s2, _)) = (c2(&pp), c2(&ps));
    let v2 = match p2.value {
        Some(v) if v < 0.0 => Verdict::Holds,
        _ => Verdict::DoesNotHold,
    };
    claims.push(mk(
        "t2e_wins_high_skew_slow",
        "Token-to-Expert wins at high skew on slow (PCIe-class) links (Fig. 6d/7, L9@29663; SPEC §5)",
        "Fig. 7 bar below zero at high skew, 64 GB/s",
        p2,
        s2,
        v2,
        "Fig. 7's (Dist-Only saving − best T2E saving) at the highest skew on the slow link; holds if < 0 (T2E better), else does not hold",
        m2,
    ));

    let ((p3, m3), (s3, _)) = (c3(&pp), c3(&ps));
    let v3 = match p3.value {
        Some(v) if v >= 100.0 => Verdict::Holds,
        Some(v) if v >= 50.0 => Verdict::Partly,
        _ => Verdict::DoesNotHold,
    };
    claims.push(mk(
        "dist_preferred_low_skew_or_fast",
        "Distribution-Only is preferred when skewness is low or communication is not a bottleneck (Fig. 1/7, L9@31241; SPEC §5)",
        "Fig. 7 bars ≥ 0 at low skew and on NVLink",
        p3,
        s3,
        v3,
        "share of points (fast link, every skew; slow link, lowest skew) where Dist-Only ≥ best T2E; holds at 100 %, partly ≥ 50 %, else does not hold",
        m3,
    ));

    let ((p4, m4, down_p), (s4, _, _)) = (c4(&pp), c4(&ps));
    let v4 = match down_p {
        2 => Verdict::Holds,
        1 => Verdict::Partly,
        _ => Verdict::DoesNotHold,
    };
    claims.push(mk(
        "t2e_gains_with_skew",
        "Token-to-Expert becomes more effective as skewness increases (Fig. 7, L9@31241)",
        "Fig. 7 bars fall with skew",
        p4,
        s4,
        v4,
        "value = change of (Dist − T2E)/none from the lowest to the highest skew on the slow link, points; holds if it falls on both links, partly on one, else does not hold",
        m4,
    ));

    let ((p5, m5), (s5, _)) = (
        c5(&pp, ep.tokens, ep.model.top_k, ep.model.experts, ep.params.warmup),
        c5(&ps, es.tokens, es.model.top_k, es.model.experts, es.params.warmup),
    );
    let v5 = match p5.value {
        Some(v) => Verdict::for_gain(v, 8.9, 0.05),
        None => Verdict::DoesNotHold,
    };
    claims.push(mk(
        "dist_error_grows_with_skew",
        "Higher skewness leads to a higher Distribution-Only error rate (Table 1, L9@15204)",
        "1.80 % / 0.98 % (skew 1.39 / 1.40) → 16.00 % (1.99): ×8.9–16",
        p5,
        s5,
        v5,
        "ratio of Dist-Only's error ε at skew 2.0 (or the highest) to skew 1.4 on the fast link; holds if ≥ the paper's ×8.9 − 5 %, partly if > 1, else does not hold",
        m5,
    ));

    Ok(PaperReport {
        paper: Paper::Gps,
        quick: o.quick,
        setups: vec![setup.paper.line("paper", &ep), setup.strong.line("strong", &es)],
        claims,
        tables: vec![table("Paper's setup: per point (layer cycles, mean of the test iterations)", &pp), table("Strong setup: per point", &ps)],
    })
}
