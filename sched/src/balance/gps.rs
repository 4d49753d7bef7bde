//! MoE-GPS, FL (seeds/moe-gps.txt; SPEC §5): prediction strategies for dynamic expert
//! duplication, as plain functions with no clock.
//!
//! The seed is one long text line (line 9); references below are `L9@offset`, the character
//! offset of the quoted passage inside that line.
//!
//! * **Distribution-Only** ([`DistOnlyPredictor`], L9@14783, Eq. 1 at L9@15750, Appendix A
//!   Eq. 6 at L9@46233): the MLE of expert popularity `p̂_i = n_i / N`, "a moving average" when
//!   data comes in batches (L9@15871). Built as hardware counters: a **window** moving average —
//!   one saturating counter per expert per iteration slot, `window` slots in a ring; the
//!   prediction is the window sum over the window total. No per-token overhead (L9@28647).
//! * **Token-to-Expert** ([`T2ePredictor`], L9@18590): a per-token guess with accuracy `a`. The
//!   paper does not publish its predictors' errors, only how their effect is modelled (Fig. 5,
//!   L9@21707); [`ErrorModel`] turns each of its three scenarios into a concrete generator of
//!   wrong guesses. Overhead ([`OverheadModel`]): the paper fits an exponential of accuracy to the
//!   measured overhead (L9@20974) and reports it as a **fraction of the layer runtime**
//!   (L9@35010), not in FLOPs — so we return a fraction, and cycles = ⌈fraction × layer cycles⌉.
//!   Curves for skewnesses between measured ones are interpolated (L9@28304).
//! * **Expert duplication** ([`duplicate`], [`duplicate_tokens`]): Algorithm 1 (L9@14016), prose
//!   at L9@13076.
//! * **Per-iteration loads** ([`estimate_iteration`]): what the cycle-level system runs for a
//!   strategy, given the true routing.
//! * Metrics: [`skewness`] (L9@8444), [`dist_error_rate`] (L9@16685), and the Fig. 5 bottleneck
//!   factors ([`bottleneck_factor`], L9@22789..23350).
//!
//! Top-k routing is handled as the paper says it generalises (L9@7037, "top-K experts"): the
//! routing is a flat list of *assignments* (token-major, `k` per token), each of which is one
//! "token" of Algorithm 1.
//!
//! # Ties and determinism (every decision)
//! * Algorithm 1: most loaded device → the **lower device id**; least loaded → the lower
//!   device id; heaviest expert on the most loaded device → the **lower expert id**; "the first
//!   ℓ tokens" → the lowest assignment indices; line 1's `min{g}` → the lowest hosting device.
//! * Apportionments (predicted loads from shares, Dist-Only dispatch over replicas) use largest
//!   remainders in exact integer arithmetic; equal remainders → the lower id.
//! * The T2E generators draw only from the caller's RNG, in the order documented on
//!   [`T2ePredictor::predict`]; the same seed gives the same guesses.

use rand::Rng;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// An input refused (never a panic): `field` names the offending argument or config field.
pub type GpsError = super::BalanceError;

// ---------------------------------------------------------------------------------------------
// Metrics
// ---------------------------------------------------------------------------------------------

/// Paper skewness (L9@8444): tokens of the most popular expert / mean tokens per expert.
/// 1.0 when there are no experts or no tokens.
pub fn skewness(counts: &[u64]) -> f64 {
    let total: u128 = counts.iter().map(|&c| c as u128).sum();
    if counts.is_empty() || total == 0 {
        return 1.0;
    }
    let max = *counts.iter().max().unwrap_or(&0) as f64;
    max * counts.len() as f64 / total as f64
}

/// Distribution-Only error rate (L9@16685; ε of §3.3): ‖p̂ − p‖₁ / number of experts.
pub fn dist_error_rate(predicted: &[f64], truth: &[f64]) -> Result<f64, GpsError> {
    if predicted.len() != truth.len() || predicted.is_empty() {
        return Err(GpsError::new(
            "predicted",
            format!("{} shares vs {} true shares (need equal, non-zero)", predicted.len(), truth.len()),
        ));
    }
    Ok(predicted.iter().zip(truth).map(|(a, b)| (a - b).abs()).sum::<f64>() / predicted.len() as f64)
}

/// Shares of a count vector; uniform when the total is 0.
pub fn shares(counts: &[u64]) -> Vec<f64> {
    let total: u128 = counts.iter().map(|&c| c as u128).sum();
    if total == 0 {
        return vec![1.0 / counts.len().max(1) as f64; counts.len()];
    }
    counts.iter().map(|&c| c as f64 / total as f64).collect()
}

/// Splits `total` over `weights` in proportion, exactly (largest remainder; equal remainders →
/// lower index). All-zero weights → everything on index 0. Empty weights → empty.
fn apportion(weights: &[u64], total: u64) -> Vec<u64> {
    let n = weights.len();
    let mut out = vec![0u64; n];
    if n == 0 {
        return out;
    }
    let wsum: u128 = weights.iter().map(|&w| w as u128).sum();
    if wsum == 0 {
        out[0] = total;
        return out;
    }
    let mut rem: Vec<(u128, usize)> = Vec::with_capacity(n);
    let mut given: u64 = 0;
    for (i, &w) in weights.iter().enumerate() {
        let num = w as u128 * total as u128;
        out[i] = (num / wsum) as u64;
        given += out[i];
        rem.push((num % wsum, i));
    }
    rem.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for &(_, i) in rem.iter().take((total - given) as usize) {
        out[i] += 1;
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Distribution-Only predictor
// ---------------------------------------------------------------------------------------------

/// Parameters of the Distribution-Only counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DistOnlyCfg {
    /// Iterations in the moving window (≥ 1). The estimate is Eq. 1 over the last `window`
    /// observed iterations.
    pub window: u32,
    /// Width of each per-expert, per-iteration counter (1..=32); a count saturates at
    /// 2^bits − 1.
    pub counter_bits: u8,
}

impl Default for DistOnlyCfg {
    fn default() -> Self {
        DistOnlyCfg {
            window: 16,
            counter_bits: 16,
        }
    }
}

/// Distribution-Only predictor as hardware counters: a ring of `window` slots, each with one
/// saturating counter per expert, plus one running sum per expert (the sum of the slots, so
/// it never saturates: window · (2^bits − 1) < 2^64).
#[derive(Debug, Clone, PartialEq)]
pub struct DistOnlyPredictor {
    cfg: DistOnlyCfg,
    experts: usize,
    slots: VecDeque<Vec<u64>>,
    sums: Vec<u64>,
}

impl DistOnlyPredictor {
    pub fn new(cfg: DistOnlyCfg, experts: usize) -> Result<Self, GpsError> {
        if cfg.window == 0 {
            return Err(GpsError::new("window", "must be at least 1"));
        }
        if cfg.counter_bits == 0 || cfg.counter_bits > 32 {
            return Err(GpsError::new("counter_bits", format!("{} is outside 1..=32", cfg.counter_bits)));
        }
        if experts == 0 {
            return Err(GpsError::new("experts", "must be at least 1"));
        }
        Ok(DistOnlyPredictor {
            cfg,
            experts,
            slots: VecDeque::new(),
            sums: vec![0; experts],
        })
    }

    pub fn cfg(&self) -> &DistOnlyCfg {
        &self.cfg
    }

    /// Largest value one counter holds.
    pub fn counter_max(&self) -> u64 {
        (1u64 << self.cfg.counter_bits) - 1
    }

    /// Records one iteration's per-expert counts (each saturated to [`Self::counter_max`]); the
    /// oldest slot leaves the window once it is full.
    pub fn observe(&mut self, iteration_expert_counts: &[u64]) -> Result<(), GpsError> {
        if iteration_expert_counts.len() != self.experts {
            return Err(GpsError::new(
                "iteration_expert_counts",
                format!("{} counts for {} experts", iteration_expert_counts.len(), self.experts),
            ));
        }
        let max = self.counter_max();
        let slot: Vec<u64> = iteration_expert_counts.iter().map(|&c| c.min(max)).collect();
        if self.slots.len() == self.cfg.window as usize {
            if let Some(old) = self.slots.pop_front() {
                for (s, o) in self.sums.iter_mut().zip(&old) {
                    *s -= o;
                }
            }
        }
        for (s, c) in self.sums.iter_mut().zip(&slot) {
            *s += c;
        }
        self.slots.push_back(slot);
        Ok(())
    }

    /// Iterations currently in the window.
    pub fn observed(&self) -> usize {
        self.slots.len()
    }

    /// The window sums (n_i of Eq. 1).
    pub fn counts(&self) -> &[u64] {
        &self.sums
    }

    /// Eq. 1: `p̂_i = n_i / N` over the window; uniform before any token was seen.
    pub fn predict(&self) -> Vec<f64> {
        shares(&self.sums)
    }

    /// Predicted per-expert token counts for an iteration of `tokens` assignments: `tokens`
    /// apportioned by the window counts, exactly (largest remainder, ties → lower expert id;
    /// uniform before any token was seen). Sums to `tokens`.
    pub fn predicted_loads(&self, tokens: u64) -> Vec<u64> {
        loads_from_counts(&self.sums, tokens)
    }
}

/// Eq. 1 as loads: `tokens` apportioned by window counts `sums` (largest remainder, ties →
/// lower expert id; uniform when every count is 0). What [`DistOnlyPredictor::predicted_loads`]
/// gives for its own sums — public so that a hardware twin holding the same counters
/// (`hw::wafer::predictor`) makes the same prediction.
pub fn loads_from_counts(sums: &[u64], tokens: u64) -> Vec<u64> {
    if sums.iter().all(|&s| s == 0) {
        return apportion(&vec![1; sums.len()], tokens);
    }
    apportion(sums, tokens)
}

// ---------------------------------------------------------------------------------------------
// Token-to-Expert predictor
// ---------------------------------------------------------------------------------------------

/// The paper's three error scenarios (Fig. 5, L9@22789..23350), as generators of wrong guesses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ErrorModel {
    /// "Errors still result in perfect load balancing": the wrong guesses are a relabelling of
    /// the wrong assignments' true experts, so the predicted per-expert histogram equals the
    /// true one (Algorithm 1 plans the same loads as with a perfect predictor).
    Optimistic,
    /// "Errors are uniformly distributed": a wrong guess is uniform over the other experts.
    /// The paper's default.
    Typical,
    /// "All errors occur on a single GPU": every wrong guess names one victim expert — the one
    /// with the fewest true assignments (ties → lower id); wrong assignments whose true expert
    /// *is* the victim name the runner-up (second fewest, ties → lower id).
    Pessimistic,
}

/// Fig. 5 bottleneck factor on the average per-device time `T`, for error rate ε on `devices`
/// devices: Optimistic 1, Typical 1 + ε, Pessimistic 1 + ε·(N − 1).
pub fn bottleneck_factor(model: ErrorModel, eps: f64, devices: u32) -> f64 {
    match model {
        ErrorModel::Optimistic => 1.0,
        ErrorModel::Typical => 1.0 + eps,
        ErrorModel::Pessimistic => 1.0 + eps * devices.saturating_sub(1) as f64,
    }
}

/// A Token-to-Expert predictor of given accuracy and error model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct T2ePredictor {
    /// Share of assignments guessed right, in [0, 1].
    pub accuracy: f64,
    pub model: ErrorModel,
}

/// One iteration's guesses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct T2ePrediction {
    /// Guessed expert per assignment, aligned with the true routing.
    pub experts: Vec<u32>,
    /// Assignments whose guess equals the truth. `round(accuracy · n)` except under
    /// `Optimistic` when more than half of the wrong set shares one expert: a histogram-
    /// preserving relabelling then must keep `2c − w` of them right (c = that expert's count in
    /// the wrong set of size w), and does keep exactly that many.
    pub correct: usize,
}

/// One point of the overhead fit: at skewness `skew`, overhead = `a · exp(b · accuracy)` as a
/// fraction of the layer runtime (L9@20974, L9@35010). The paper prints no coefficients.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverheadCurve {
    pub skew: f64,
    pub a: f64,
    pub b: f64,
}

/// Overhead of the cheapest Token-to-Expert predictor (Appendix B's probability model, a
/// look-up) as a fraction of the runtime — an inference (docs/gps.md).
pub const FIG4_FLOOR: f64 = 0.01;

/// Mixtral 8×7B (the paper's model, L9@16380): 8 experts (Appendix B's "8 expert logits",
/// L9@48911), top-2 (moe-gps.txt does not print k; sem-moe.txt L631: "For Mixtral-8x7B, each token is
/// routed to 2 out of 8 experts").
const MIXTRAL_EXPERTS: f64 = 8.0;
const MIXTRAL_TOP_K: f64 = 2.0;

/// (skew, (accuracy, overhead) of the probability model, (accuracy, overhead) at the top of
/// Fig. 4's axis) — see [`OverheadModel::moe_gps_fig4`].
pub const FIG4_ANCHORS: [(f64, (f64, f64), (f64, f64)); 2] = [
    (1.4, (1.4 * MIXTRAL_TOP_K / MIXTRAL_EXPERTS, FIG4_FLOOR), (0.95, 0.30)),
    (2.0, (2.0 * MIXTRAL_TOP_K / MIXTRAL_EXPERTS, FIG4_FLOOR), (0.95, 0.30)),
];

impl OverheadCurve {
    /// The exponential `a·exp(b·x)` through `(x0, y0)` and `(x1, y1)` (x0 ≠ x1, y > 0).
    pub fn through(skew: f64, (x0, y0): (f64, f64), (x1, y1): (f64, f64)) -> Self {
        let b = (y1 / y0).ln() / (x1 - x0);
        OverheadCurve { skew, a: y0 * (-b * x0).exp(), b }
    }
}

/// Overhead fits at measured skewnesses; between two, the fraction is linearly interpolated in
/// skewness (L9@28304); outside, the nearest curve is used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverheadModel {
    pub curves: Vec<OverheadCurve>,
}

impl OverheadModel {
    /// Our default fit (docs/gps.md "Overhead fit"): the paper prints no coefficients, only the
    /// form `a·exp(b·accuracy)` (L9@20974), Fig. 4's axes (accuracy 0..1, overhead 0..30 % of
    /// the runtime) and two measured skewnesses — MMLU/Alpaca ≈ 1.4 (Fig. 4a) and SST2 ≈ 2.0
    /// (Fig. 4b) — where "it costs less for the predictor to acquire higher accuracy" at the
    /// higher skew (L9@21556). We take the steepness b = ln 100 (overhead ×100 from accuracy 0
    /// to 1, i.e. ×10 from 0.5 to 1.0), the skew-1.4 curve reaching the top of Fig. 4's axis
    /// (30 %) at accuracy 1, and the skew-2.0 curve half of it at every accuracy. These are a
    /// reading of the figure's scale and the prose, not digitised points.
    pub fn moe_gps_default() -> Self {
        let b = 100f64.ln();
        OverheadModel {
            curves: vec![OverheadCurve { skew: 1.4, a: 0.003, b }, OverheadCurve { skew: 2.0, a: 0.0015, b }],
        }
    }

    /// The fit calibrated to the predictor costs the paper reports (docs/gps.md "The overhead
    /// fit"): per measured skewness of Table 1 (L9@15204: MMLU 1.39 / Alpaca 1.40 → 1.4,
    /// SST2 1.99 → 2.0; Fig. 4a/4b) the exponential through two points of Fig. 4's reported
    /// range:
    /// * the *probability model* of Appendix B (L9@19279; Eq. 7–8 at L9@46855): every token guessed as the
    ///   globally most frequent expert — a look-up, so the cheapest predictor; its accuracy is
    ///   that expert's token share, `skew · top_k / experts` for Mixtral 8×7B's 8 experts top-2
    ///   (L9@16380; "8 expert logits" L9@48911) = 0.35 at 1.4 and 0.50 at 2.0. Its cost is taken as
    ///   [`FIG4_FLOOR`] (1 % of the runtime; inference: a table look-up, below what Fig. 4's
    ///   0.1-spaced axis resolves);
    /// * the most accurate predictor at the top of Fig. 4's overhead axis, 0.3 of the runtime
    ///   (both panels, L9@17429), at accuracy 0.95 — the highest accuracy the paper evaluates
    ///   the fit at (Fig. 6b/6d, L9@25181).
    ///
    /// Then `b = ln(y1/y0) / (x1 − x0)`, `a = y0·exp(−b·x0)`. Kept beside the assumed
    /// [`OverheadModel::moe_gps_default`]; not fitted to any end-to-end number.
    pub fn moe_gps_fig4() -> Self {
        OverheadModel {
            curves: FIG4_ANCHORS.iter().map(|&(skew, lo, hi)| OverheadCurve::through(skew, lo, hi)).collect(),
        }
    }

    fn check(&self) -> Result<(), GpsError> {
        if self.curves.is_empty() {
            return Err(GpsError::new("curves", "at least one curve is needed"));
        }
        for (i, c) in self.curves.iter().enumerate() {
            if !(c.skew.is_finite() && c.a.is_finite() && c.b.is_finite() && c.a >= 0.0) {
                return Err(GpsError::new("curves", format!("curve {i}: skew, a, b must be finite and a ≥ 0")));
            }
            if i > 0 && c.skew <= self.curves[i - 1].skew {
                return Err(GpsError::new(
                    "curves",
                    format!("curve {i}: skewnesses must be strictly increasing"),
                ));
            }
        }
        Ok(())
    }

    /// Overhead as a fraction of the layer runtime at `accuracy` and `skew`.
    pub fn fraction(&self, accuracy: f64, skew: f64) -> Result<f64, GpsError> {
        self.check()?;
        if !(0.0..=1.0).contains(&accuracy) {
            return Err(GpsError::new("accuracy", format!("{accuracy} is outside [0, 1]")));
        }
        if !skew.is_finite() {
            return Err(GpsError::new("skew", "must be finite"));
        }
        let f = |c: &OverheadCurve| c.a * (c.b * accuracy).exp();
        let cs = &self.curves;
        let i = cs.partition_point(|c| c.skew <= skew);
        let v = if i == 0 {
            f(&cs[0])
        } else if i == cs.len() {
            f(&cs[cs.len() - 1])
        } else {
            let (lo, hi) = (&cs[i - 1], &cs[i]);
            let t = (skew - lo.skew) / (hi.skew - lo.skew);
            f(lo) + t * (f(hi) - f(lo))
        };
        if !v.is_finite() {
            return Err(GpsError::new("curves", "the fit overflows at this accuracy"));
        }
        Ok(v)
    }
}

impl T2ePredictor {
    fn check(&self) -> Result<(), GpsError> {
        if !(0.0..=1.0).contains(&self.accuracy) {
            return Err(GpsError::new("accuracy", format!("{} is outside [0, 1]", self.accuracy)));
        }
        Ok(())
    }

    /// Guesses for one iteration's true routing (`truth[i]` < `experts`).
    ///
    /// Exactly `w = n − round(accuracy · n)` assignments are picked to be wrong, by a partial
    /// Fisher–Yates shuffle of the indices (w draws from `rng`), then:
    /// * `Optimistic`: the wrong set sorted by (true expert, index) takes the true experts of
    ///   the same list rotated by c (the largest expert count in the set) — no draws;
    /// * `Typical`: one draw per wrong assignment in ascending index, uniform over the other
    ///   `experts − 1` experts;
    /// * `Pessimistic`: the victim rule of [`ErrorModel::Pessimistic`] — no draws.
    pub fn predict<R: Rng + ?Sized>(&self, truth: &[u32], experts: u32, rng: &mut R) -> Result<T2ePrediction, GpsError> {
        self.check()?;
        if experts == 0 {
            return Err(GpsError::new("experts", "must be at least 1"));
        }
        if let Some((i, &e)) = truth.iter().enumerate().find(|(_, &e)| e >= experts) {
            return Err(GpsError::new(
                "truth",
                format!("assignment {i}: expert {e} but only {experts} experts"),
            ));
        }
        let n = truth.len();
        let right = ((self.accuracy * n as f64).round() as usize).min(n);
        let w = n - right;
        if w > 0 && experts < 2 {
            return Err(GpsError::new("experts", "a wrong guess needs at least 2 experts"));
        }
        let mut idx: Vec<usize> = (0..n).collect();
        for i in 0..w {
            let j = rng.gen_range(i..n);
            idx.swap(i, j);
        }
        let mut wrong: Vec<usize> = idx[..w].to_vec();
        wrong.sort_unstable();
        let mut pred = truth.to_vec();
        if w > 0 {
            match self.model {
                ErrorModel::Typical => {
                    for &t in &wrong {
                        let r = rng.gen_range(0..experts - 1);
                        pred[t] = if r >= truth[t] { r + 1 } else { r };
                    }
                }
                ErrorModel::Pessimistic => {
                    let mut cnt = vec![0u64; experts as usize];
                    for &e in truth {
                        cnt[e as usize] += 1;
                    }
                    let mut order: Vec<u32> = (0..experts).collect();
                    order.sort_by(|&a, &b| cnt[a as usize].cmp(&cnt[b as usize]).then(a.cmp(&b)));
                    let (v, v2) = (order[0], order[1]);
                    for &t in &wrong {
                        pred[t] = if truth[t] == v { v2 } else { v };
                    }
                }
                ErrorModel::Optimistic => {
                    let mut s = wrong.clone();
                    s.sort_by_key(|&t| (truth[t], t));
                    let mut c = 0usize;
                    let mut run = 0usize;
                    for k in 0..s.len() {
                        run = if k > 0 && truth[s[k]] == truth[s[k - 1]] { run + 1 } else { 1 };
                        c = c.max(run);
                    }
                    for k in 0..s.len() {
                        pred[s[k]] = truth[s[(k + c) % s.len()]];
                    }
                }
            }
        }
        let correct = pred.iter().zip(truth).filter(|(a, b)| a == b).count();
        Ok(T2ePrediction { experts: pred, correct })
    }

    /// Overhead of this predictor as a fraction of the layer runtime (paper's exponential fit).
    pub fn overhead(&self, model: &OverheadModel, skew: f64) -> Result<f64, GpsError> {
        self.check()?;
        model.fraction(self.accuracy, skew)
    }

    /// Overhead in cycles: ⌈fraction · `layer_cycles`⌉ (saturating at u64::MAX).
    pub fn overhead_cycles(&self, model: &OverheadModel, skew: f64, layer_cycles: u64) -> Result<u64, GpsError> {
        let f = self.overhead(model, skew)?;
        Ok((f * layer_cycles as f64).ceil().min(u64::MAX as f64) as u64)
    }
}

// ---------------------------------------------------------------------------------------------
// Algorithm 1
// ---------------------------------------------------------------------------------------------

/// Devices and memory for Algorithm 1.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DupSetup {
    pub experts: u32,
    /// Initial placement P: device → hosted experts. Every expert must be hosted somewhere.
    pub initial: Vec<Vec<u32>>,
    /// M_g in expert slots (experts are taken equal in size, params(e) = 1 slot): the most
    /// experts device g may host, copies included; at least its initial count.
    pub capacity: Vec<u32>,
    /// C_max: the most devices one expert may be hosted on (the original included), ≥ 1.
    pub max_copies: u32,
}

impl DupSetup {
    /// Expert e on device e mod `devices`; `capacity` slots on every device.
    pub fn round_robin(experts: u32, devices: u32, capacity: u32, max_copies: u32) -> Self {
        let mut initial = vec![Vec::new(); devices as usize];
        if devices > 0 {
            for e in 0..experts {
                initial[(e % devices) as usize].push(e);
            }
        }
        DupSetup {
            experts,
            initial,
            capacity: vec![capacity; devices as usize],
            max_copies,
        }
    }

    pub fn devices(&self) -> usize {
        self.initial.len()
    }

    fn check(&self) -> Result<(), GpsError> {
        let g = self.initial.len();
        if g == 0 {
            return Err(GpsError::new("initial", "no devices"));
        }
        if self.capacity.len() != g {
            return Err(GpsError::new(
                "capacity",
                format!("{} entries for {g} devices", self.capacity.len()),
            ));
        }
        if self.max_copies == 0 {
            return Err(GpsError::new("max_copies", "must be at least 1"));
        }
        let mut hosted = vec![false; self.experts as usize];
        for (d, list) in self.initial.iter().enumerate() {
            if list.len() as u64 > self.capacity[d] as u64 {
                return Err(GpsError::new(
                    "capacity",
                    format!("device {d}: {} experts placed but {} slots", list.len(), self.capacity[d]),
                ));
            }
            let mut seen = list.clone();
            seen.sort_unstable();
            if seen.windows(2).any(|w| w[0] == w[1]) {
                return Err(GpsError::new("initial", format!("device {d}: an expert is listed twice")));
            }
            for &e in list {
                if e >= self.experts {
                    return Err(GpsError::new(
                        "initial",
                        format!("device {d}: expert {e} but only {} experts", self.experts),
                    ));
                }
                hosted[e as usize] = true;
            }
        }
        if let Some(e) = hosted.iter().position(|h| !h) {
            return Err(GpsError::new("initial", format!("expert {e} is hosted on no device")));
        }
        Ok(())
    }
}

/// Why Algorithm 1 stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum StopReason {
    /// Line 3's condition failed: max L − min L ≤ 1.
    Balanced,
    /// Line 7 failed while `expert` is not on `device` (the least loaded one): the printed loop
    /// would spin forever (nothing changes), so we stop here.
    Blocked { expert: u32, device: u32 },
}

/// One reassignment of Algorithm 1 (lines 8–10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DupStep {
    pub expert: u32,
    pub from: u32,
    pub to: u32,
    /// Assignments moved: min(ℓ, tokens of the expert on `from`).
    pub tokens: u64,
    /// Line 8 ran: the expert was copied to `to` in this step.
    pub copied: bool,
}

/// Algorithm 1's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DupPlan {
    /// Final P: device → hosted experts, ascending.
    pub placement: Vec<Vec<u32>>,
    /// Dispatch counts: `quota[e][g]` assignments of expert e go to device g.
    pub quota: Vec<Vec<u64>>,
    /// L_g: assignments per device.
    pub loads: Vec<u64>,
    pub steps: Vec<DupStep>,
    pub stop: StopReason,
}

impl DupPlan {
    /// Whether device `g` hosts expert `e` in the final placement (false for an unknown device).
    pub fn hosts(&self, e: u32, g: usize) -> bool {
        self.placement.get(g).is_some_and(|l| l.binary_search(&e).is_ok())
    }
}

/// Paper Algorithm 1 on per-expert counts (tokens are interchangeable, so the counts decide
/// everything but token identities; [`duplicate_tokens`] adds those).
///
/// Line 1: every count goes to the lowest device hosting its expert. Lines 3–10: while
/// max L − min L > 1: g_h = argmax L, g_c = argmin L (ties → lower id); ℓ = ⌈(L_gh − L_gc)/2⌉;
/// e* = argmax over experts hosted on g_h of its count there (ties → lower id); if e* is not on
/// g_c, copy it when copies(e*) < C_max and g_c has a free slot, otherwise stop
/// ([`StopReason::Blocked`]); move min(ℓ, count of e* on g_h) to g_c. Each move takes m with
/// 1 ≤ m ≤ ⌈D/2⌉ < D (D = L_gh − L_gc ≥ 2), so Σ L² falls by 2m(D − m) > 0: the loop ends.
pub fn duplicate(predicted_loads: &[u64], setup: &DupSetup) -> Result<DupPlan, GpsError> {
    setup.check()?;
    if predicted_loads.len() != setup.experts as usize {
        return Err(GpsError::new(
            "predicted_loads",
            format!("{} loads for {} experts", predicted_loads.len(), setup.experts),
        ));
    }
    if predicted_loads.iter().try_fold(0u64, |a, &x| a.checked_add(x)).is_none() {
        return Err(GpsError::new("predicted_loads", "the total does not fit in a u64"));
    }
    let ne = setup.experts as usize;
    let ng = setup.devices();
    let mut placement: Vec<Vec<u32>> = setup
        .initial
        .iter()
        .map(|l| {
            let mut v = l.clone();
            v.sort_unstable();
            v
        })
        .collect();
    let mut copies = vec![0u32; ne];
    let mut first_host = vec![usize::MAX; ne];
    for (g, l) in placement.iter().enumerate() {
        for &e in l {
            copies[e as usize] += 1;
            first_host[e as usize] = first_host[e as usize].min(g);
        }
    }
    let mut quota = vec![vec![0u64; ng]; ne];
    let mut loads = vec![0u64; ng];
    for e in 0..ne {
        quota[e][first_host[e]] = predicted_loads[e];
        loads[first_host[e]] += predicted_loads[e];
    }
    let mut steps = Vec::new();
    let stop = loop {
        let (mut gh, mut gc) = (0usize, 0usize);
        for g in 1..ng {
            if loads[g] > loads[gh] {
                gh = g;
            }
            if loads[g] < loads[gc] {
                gc = g;
            }
        }
        if loads[gh] - loads[gc] <= 1 {
            break StopReason::Balanced;
        }
        let ell = (loads[gh] - loads[gc]).div_ceil(2);
        let mut es = placement[gh][0];
        for &e in &placement[gh] {
            if quota[e as usize][gh] > quota[es as usize][gh] {
                es = e;
            }
        }
        let eu = es as usize;
        let mut copied = false;
        if placement[gc].binary_search(&es).is_err() {
            if copies[eu] < setup.max_copies && (placement[gc].len() as u64) < setup.capacity[gc] as u64 {
                let pos = placement[gc].binary_search(&es).unwrap_err();
                placement[gc].insert(pos, es);
                copies[eu] += 1;
                copied = true;
            } else {
                break StopReason::Blocked {
                    expert: es,
                    device: gc as u32,
                };
            }
        }
        let m = ell.min(quota[eu][gh]);
        quota[eu][gh] -= m;
        quota[eu][gc] += m;
        loads[gh] -= m;
        loads[gc] += m;
        steps.push(DupStep {
            expert: es,
            from: gh as u32,
            to: gc as u32,
            tokens: m,
            copied,
        });
    };
    Ok(DupPlan {
        placement,
        quota,
        loads,
        steps,
        stop,
    })
}

/// Paper Algorithm 1 on a token→expert map `f` (`f[t]` < experts): the plan of [`duplicate`]
/// on the counts of `f`, plus the dispatch d: line 1's lowest hosting device, then each step
/// reassigns the lowest-indexed `tokens` assignments of its expert that are on `from`.
pub fn duplicate_tokens(f: &[u32], setup: &DupSetup) -> Result<(DupPlan, Vec<u32>), GpsError> {
    setup.check()?;
    let ne = setup.experts as usize;
    let mut counts = vec![0u64; ne];
    for (t, &e) in f.iter().enumerate() {
        if e >= setup.experts {
            return Err(GpsError::new("f", format!("assignment {t}: expert {e} but only {ne} experts")));
        }
        counts[e as usize] += 1;
    }
    let plan = duplicate(&counts, setup)?;
    let mut by_expert: Vec<Vec<usize>> = vec![Vec::new(); ne];
    for (t, &e) in f.iter().enumerate() {
        by_expert[e as usize].push(t);
    }
    let mut first_host = vec![u32::MAX; ne];
    for (g, l) in setup.initial.iter().enumerate() {
        for &e in l {
            first_host[e as usize] = first_host[e as usize].min(g as u32);
        }
    }
    let mut d: Vec<u32> = f.iter().map(|&e| first_host[e as usize]).collect();
    for s in &plan.steps {
        let mut left = s.tokens;
        for &t in &by_expert[s.expert as usize] {
            if left == 0 {
                break;
            }
            if d[t] == s.from {
                d[t] = s.to;
                left -= 1;
            }
        }
    }
    Ok((plan, d))
}

// ---------------------------------------------------------------------------------------------
// What one iteration runs
// ---------------------------------------------------------------------------------------------

/// A strategy with its prediction for this iteration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Strategy<'a> {
    /// The initial placement, no duplication; every assignment goes to the lowest host of its
    /// expert.
    NoPrediction,
    /// Algorithm 1 on predicted per-expert counts (e.g. [`DistOnlyPredictor::predicted_loads`]).
    DistOnly { predicted_loads: &'a [u64] },
    /// Algorithm 1 on the guessed token→expert map (aligned with the true routing).
    TokenToExpert { predicted: &'a [u32] },
}

/// Per-device work of one iteration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IterationLoads {
    /// The placement used.
    pub placement: Vec<Vec<u32>>,
    /// Assignments computed per device (FFN compute). Sums to the number of assignments.
    pub compute: Vec<u64>,
    /// Assignments each device receives over the interconnect for the dispatch (the combine
    /// after the FFN sends the same number back).
    pub recv: Vec<u64>,
    /// Device each assignment is computed on.
    pub device: Vec<u32>,
    /// T2E: assignments forwarded from their guessed device d̂(t) to another (Σ `recv`); 0 for
    /// the other strategies.
    pub forwarded: u64,
}

/// Per-device loads of one iteration with the true routing `truth` under `strategy`.
///
/// * No prediction / Distribution-Only: assignment t starts on device t mod G (the paper's
///   "completely random after scatter", L9@9171, made deterministic). The assignments of expert e, in
///   index order, are dealt to e's hosts in ascending device order, in counts apportioned to
///   the plan's quota (largest remainder; no quota → all on its lowest host). An assignment
///   computed away from its start device counts once in `recv` of the computing device.
/// * Token-to-Expert: assignment t goes straight to its guessed dispatch d̂(t) (scatter
///   skipped, no transfer). The plan's quota is then enforced by the receiving devices, in
///   three passes, each in index order: (1) computed on d̂(t) if it hosts the true expert and
///   the expert's quota there is not used up; (2) otherwise forwarded to the lowest host of the
///   true expert with quota left; (3) beyond all of its expert's quota: computed on d̂(t) if it
///   hosts the true expert, else forwarded to its lowest host. A forward is one `recv` on the
///   computing device. With a histogram-preserving (optimistic) guess every assignment finds
///   quota, so `compute` equals the plan's loads exactly.
pub fn estimate_iteration(truth: &[u32], setup: &DupSetup, strategy: Strategy<'_>) -> Result<IterationLoads, GpsError> {
    setup.check()?;
    let ne = setup.experts as usize;
    let ng = setup.devices();
    let mut counts = vec![0u64; ne];
    for (t, &e) in truth.iter().enumerate() {
        if e >= setup.experts {
            return Err(GpsError::new("truth", format!("assignment {t}: expert {e} but only {ne} experts")));
        }
        counts[e as usize] += 1;
    }
    let (plan, dispatch) = match strategy {
        Strategy::NoPrediction => {
            let zero = vec![0u64; ne];
            let mut p = duplicate(&zero, setup)?;
            // Quotas of "no duplication": all on the lowest host (line 1).
            for (e, (q, &c)) in p.quota.iter_mut().zip(&counts).enumerate() {
                let g = (0..ng).find(|&g| p.placement[g].binary_search(&(e as u32)).is_ok()).unwrap_or(0);
                q[g] = c;
            }
            (p, None)
        }
        Strategy::DistOnly { predicted_loads } => (duplicate(predicted_loads, setup)?, None),
        Strategy::TokenToExpert { predicted } => {
            if predicted.len() != truth.len() {
                return Err(GpsError::new(
                    "predicted",
                    format!("{} guesses for {} assignments", predicted.len(), truth.len()),
                ));
            }
            let (p, d) =
                duplicate_tokens(predicted, setup).map_err(|e| if e.field == "f" { GpsError::new("predicted", e.reason) } else { e })?;
            (p, Some(d))
        }
    };
    let hosts: Vec<Vec<usize>> = (0..ne).map(|e| (0..ng).filter(|&g| plan.hosts(e as u32, g)).collect()).collect();
    let mut device = vec![0u32; truth.len()];
    let mut compute = vec![0u64; ng];
    let mut recv = vec![0u64; ng];
    let mut forwarded = 0u64;
    match dispatch {
        None => {
            let mut left: Vec<Vec<u64>> = (0..ne)
                .map(|e| {
                    let w: Vec<u64> = hosts[e].iter().map(|&g| plan.quota[e][g]).collect();
                    apportion(&w, counts[e])
                })
                .collect();
            let mut cursor = vec![0usize; ne];
            for (t, &e) in truth.iter().enumerate() {
                let e = e as usize;
                while left[e][cursor[e]] == 0 {
                    cursor[e] += 1;
                }
                left[e][cursor[e]] -= 1;
                let g = hosts[e][cursor[e]];
                device[t] = g as u32;
                compute[g] += 1;
                if g != t % ng {
                    recv[g] += 1;
                }
            }
        }
        Some(d) => {
            let mut used = vec![vec![0u64; ng]; ne];
            let mut rest = Vec::new();
            for (t, &e) in truth.iter().enumerate() {
                let (g, eu) = (d[t] as usize, e as usize);
                if plan.hosts(e, g) && used[eu][g] < plan.quota[eu][g] {
                    device[t] = g as u32;
                    used[eu][g] += 1;
                    compute[g] += 1;
                } else {
                    rest.push(t);
                }
            }
            let mut over = Vec::new();
            for t in rest {
                let e = truth[t] as usize;
                match hosts[e].iter().copied().find(|&g| used[e][g] < plan.quota[e][g]) {
                    Some(g) => {
                        used[e][g] += 1;
                        device[t] = g as u32;
                        compute[g] += 1;
                        recv[g] += 1;
                        forwarded += 1;
                    }
                    None => over.push(t),
                }
            }
            for t in over {
                let e = truth[t];
                let g = if plan.hosts(e, d[t] as usize) {
                    d[t] as usize
                } else {
                    hosts[e as usize][0]
                };
                device[t] = g as u32;
                compute[g] += 1;
                if g != d[t] as usize {
                    recv[g] += 1;
                    forwarded += 1;
                }
            }
        }
    }
    Ok(IterationLoads {
        placement: plan.placement,
        compute,
        recv,
        device,
        forwarded,
    })
}
