//! MoE-GPS workloads: iterations of routing at a **target skewness** (paper skewness, L9@8444:
//! tokens of the most popular expert / mean tokens per expert), for the strategy sweep of
//! Fig. 6/7 (`waferstream gps`).
//!
//! The routing comes from the seeded generator (`crate::workload::generate`: Zipf popularity
//! over a per-layer random permutation of the experts, top-k distinct experts per token); the
//! Zipf exponent is found by bisection so that a large calibration sample (same seed) has the
//! target skewness. Each iteration is then an independent batch from that popularity, so the
//! measured skewness of one iteration scatters around the target (sampling noise; it is
//! reported, not hidden). Deterministic per seed.

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use super::gps::{skewness, GpsError, T2ePrediction, T2ePredictor};
use crate::workload::{generate, GenCfg};

/// Tokens of the calibration sample.
const CALIB_TOKENS: u32 = 16_384;
/// Bisection steps on the Zipf exponent (interval [0, 16] → 1e-6).
const CALIB_STEPS: u32 = 24;

/// Iterations of routing from one popularity.
#[derive(Debug, Clone, PartialEq)]
pub struct SkewedIterations {
    /// Zipf exponent used (0 = uniform).
    pub zipf: f64,
    /// Skewness of the calibration sample at `zipf`.
    pub calibrated_skew: f64,
    /// `iterations[i][t]` = the top-k experts of token t of iteration i (ascending ids).
    pub iterations: Vec<Vec<Vec<u16>>>,
}

/// Per-expert counts of one iteration's routing (assignments).
pub fn expert_counts(routing: &[Vec<u16>], experts: u32) -> Vec<u64> {
    let mut c = vec![0u64; experts as usize];
    for es in routing {
        for &e in es {
            if let Some(x) = c.get_mut(e as usize) {
                *x += 1;
            }
        }
    }
    c
}

/// The largest skewness top-k routing can have: one expert in every token, experts / top_k.
pub fn max_skewness(experts: u32, top_k: u32) -> f64 {
    experts as f64 / top_k.max(1) as f64
}

fn gen(experts: u32, top_k: u32, tokens: u32, iters: u32, zipf: f64, seed: u64) -> Result<Vec<Vec<Vec<u16>>>, GpsError> {
    let g = GenCfg {
        model: None,
        experts,
        top_k,
        layers: 1,
        tokens_per_iter: tokens,
        iters,
        // Request structure does not matter here (one layer, popularity only).
        max_decode_frac: 1.0,
        skew: zipf,
        popularity: None,
        seed: seed.max(1),
        ..Default::default()
    };
    let t = generate(&g).map_err(|e| GpsError::new("tokens", e.to_string()))?;
    Ok(t.iterations().into_iter().map(|(_, r)| t.routing(r, 0)).collect())
}

/// `iters` iterations of `tokens` tokens whose popularity has skewness `target` (1 ≤ target <
/// experts / top_k). Target 1 (within 1e-9) is uniform popularity (Zipf 0).
pub fn skewed_iterations(experts: u32, top_k: u32, tokens: u32, iters: u32, target: f64, seed: u64) -> Result<SkewedIterations, GpsError> {
    let max = max_skewness(experts, top_k);
    if !(target.is_finite() && target >= 1.0 && target < max) {
        return Err(GpsError::new(
            "skew",
            format!("{target} is outside [1, {max}) for {experts} experts top-{top_k} (the most popular expert is in at most every token)"),
        ));
    }
    if tokens == 0 || iters == 0 {
        return Err(GpsError::new("tokens", "need at least one token and one iteration"));
    }
    let measure = |z: f64| -> Result<f64, GpsError> {
        let it = gen(experts, top_k, CALIB_TOKENS, 1, z, seed)?;
        Ok(skewness(&expert_counts(&it[0], experts)))
    };
    let (zipf, calibrated_skew) = if target - 1.0 < 1e-9 {
        (0.0, measure(0.0)?)
    } else {
        let (mut lo, mut hi) = (0.0f64, 16.0f64);
        if measure(hi)? < target {
            return Err(GpsError::new("skew", format!("{target} is not reachable with Zipf popularity up to exponent 16")));
        }
        for _ in 0..CALIB_STEPS {
            let mid = 0.5 * (lo + hi);
            if measure(mid)? < target {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        (hi, measure(hi)?)
    };
    let iterations = gen(experts, top_k, tokens, iters, zipf, seed.wrapping_add(0x9e37_79b9))?;
    Ok(SkewedIterations { zipf, calibrated_skew, iterations })
}

/// [`T2ePredictor::predict`] with its own RNG (Xoshiro256++ seeded with `seed`): the same seed
/// gives the same guesses.
pub fn t2e_predict_seeded(p: &T2ePredictor, truth: &[u32], experts: u32, seed: u64) -> Result<T2ePrediction, GpsError> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    p.predict(truth, experts, &mut rng)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_the_target_and_is_deterministic() {
        for target in [1.2, 1.6, 2.2] {
            let a = skewed_iterations(8, 2, 2048, 3, target, 7).unwrap();
            assert!((a.calibrated_skew - target).abs() < 0.01, "{target}: {}", a.calibrated_skew);
            for it in &a.iterations {
                assert_eq!(it.len(), 2048);
                let s = skewness(&expert_counts(it, 8));
                assert!((s - target).abs() < 0.15, "{target}: iteration skew {s}");
            }
            assert_eq!(a, skewed_iterations(8, 2, 2048, 3, target, 7).unwrap());
        }
    }

    #[test]
    fn refuses_unreachable_targets() {
        for t in [0.5, 4.0, 9.0, f64::NAN] {
            assert_eq!(skewed_iterations(8, 2, 64, 1, t, 1).unwrap_err().field, "skew");
        }
        assert_eq!(skewed_iterations(8, 2, 0, 1, 1.5, 1).unwrap_err().field, "tokens");
    }
}
