//! Functional reference of the MoE FFN in int8 (docs/architecture.md, "design contract").
//!
//! Expert = SwiGLU FFN: `h = act(x·W_gate, x·W_up)`, `y = h·W_down`, with W_gate and W_up
//! `d_model×d_ffn` and W_down `d_ffn×d_model`, all int8, row-major (row = input dim).
//! Micro-slice k of M covers columns `[k·F/M, (k+1)·F/M)` (integer division) of W_gate and
//! W_up and the same rows of W_down. Because the activation is element-wise per FFN column
//! and the down projection is linear in its rows, the sum of a token's micro-slice partial
//! outputs equals the whole-expert output exactly (wrapping i32 arithmetic, any order).
//!
//! The CL PE array times the three GEMMs of a micro-slice job; the arithmetic of a finished
//! job is [`micro_slice_partial_fl`] on the bytes in the ring slot ([`MicroSliceWeights::from_bytes`]).

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Right shift of the gate accumulator before it indexes the sigmoid table: the table input
/// `g_q = clamp(g >> 4, -128, 127)` stands for the real value `g_q / 16` (range ±8).
pub const GATE_SHIFT: u32 = 4;
/// Right shift of the up accumulator: `u_q = clamp(u >> 4, -128, 127)`.
pub const UP_SHIFT: u32 = 4;
/// Right shift of `g_q · sigmoid_q8(g_q) · u_q`: 8 removes the Q8 of the sigmoid, 4 more
/// scale the product back into int8 range (then clamped).
pub const OUT_SHIFT: u32 = 12;

/// PLAN piecewise-linear sigmoid (Amin, Curtis, Hayes-Gill 1997) in Q8 for `x = i/16`,
/// computed with integers only, so the table is identical on every platform.
/// For `a = |i|`: a ≥ 80 → 256; 38 ≤ a < 80 → a/2 + 216; 16 ≤ a < 38 → 2a + 160;
/// a < 16 → 4a + 128; negative inputs use `256 − σ(|x|)`.
const fn plan_sigmoid_q8(i: i32) -> i32 {
    let a = if i < 0 { -i } else { i };
    let y = if a >= 80 {
        256
    } else if a >= 38 {
        a / 2 + 216
    } else if a >= 16 {
        2 * a + 160
    } else {
        4 * a + 128
    };
    if i < 0 {
        256 - y
    } else {
        y
    }
}

const fn build_sigmoid_lut() -> [i16; 256] {
    let mut t = [0i16; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = plan_sigmoid_q8(i as i32 - 128) as i16;
        i += 1;
    }
    t
}

/// `SIGMOID_LUT[g_q + 128]` = σ(g_q/16) in Q8 (0..=256).
pub const SIGMOID_LUT: [i16; 256] = build_sigmoid_lut();

fn clamp_i8(v: i64) -> i8 {
    v.clamp(-128, 127) as i8
}

/// Integer SwiGLU activation: ≈ SiLU(g)·u requantized to int8.
/// `g_q = sat8(g >> GATE_SHIFT)`, `u_q = sat8(u >> UP_SHIFT)`,
/// result `sat8((g_q · σ_q8(g_q) · u_q) >> OUT_SHIFT)` (arithmetic shifts, round toward −∞).
pub fn act_i8(g: i32, u: i32) -> i8 {
    let gq = clamp_i8((g >> GATE_SHIFT) as i64) as i64;
    let uq = clamp_i8((u >> UP_SHIFT) as i64) as i64;
    let s = SIGMOID_LUT[(gq + 128) as usize] as i64;
    clamp_i8((gq * s * uq) >> OUT_SHIFT)
}

/// Tiny int8 GEMM: `a` (m×k) · `b` (k×n), row-major, wrapping i32 accumulation.
fn gemm_i8(a: &[i8], b: &[i8], m: usize, k: usize, n: usize) -> Vec<i32> {
    assert!(a.len() == m * k && b.len() == k * n, "gemm_i8: shape mismatch");
    let mut c = vec![0i32; m * n];
    for i in 0..m {
        let row = &mut c[i * n..(i + 1) * n];
        for p in 0..k {
            let av = a[i * k + p] as i32;
            if av == 0 {
                continue;
            }
            for (cv, &bv) in row.iter_mut().zip(&b[p * n..(p + 1) * n]) {
                *cv = cv.wrapping_add(av * bv as i32);
            }
        }
    }
    c
}

/// One expert's int8 weights.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpertWeights {
    pub d_model: usize,
    pub d_ffn: usize,
    /// d_model×d_ffn, row-major.
    pub w_gate: Vec<i8>,
    /// d_model×d_ffn, row-major.
    pub w_up: Vec<i8>,
    /// d_ffn×d_model, row-major.
    pub w_down: Vec<i8>,
}

/// Weight values of generated experts lie in `-8..=7` and token activations in `-16..=15`,
/// so that with the shifts above the gate/up accumulators of small models land inside the
/// sigmoid table's informative range instead of saturating.
pub const WEIGHT_RANGE: (i8, i8) = (-8, 7);
pub const ACT_RANGE: (i8, i8) = (-16, 15);

fn rng_for(seed: u64, stream: u64, index: u64) -> Xoshiro256PlusPlus {
    // SplitMix-style mixing so (seed, stream, index) triples give unrelated streams.
    let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ index.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    Xoshiro256PlusPlus::seed_from_u64(z ^ (z >> 31))
}

impl ExpertWeights {
    /// Deterministic weights of expert `expert` for a seed.
    pub fn generate(seed: u64, expert: u32, d_model: usize, d_ffn: usize) -> Self {
        let mut r = rng_for(seed, 1, expert as u64);
        let mut v = |n: usize| (0..n).map(|_| r.gen_range(WEIGHT_RANGE.0..=WEIGHT_RANGE.1)).collect::<Vec<i8>>();
        let w_gate = v(d_model * d_ffn);
        let w_up = v(d_model * d_ffn);
        let w_down = v(d_ffn * d_model);
        ExpertWeights { d_model, d_ffn, w_gate, w_up, w_down }
    }

    /// FFN column range of micro-slice k of m: `[k·F/m, (k+1)·F/m)`.
    pub fn slice_cols(d_ffn: usize, k: usize, m: usize) -> std::ops::Range<usize> {
        k * d_ffn / m..(k + 1) * d_ffn / m
    }

    /// Micro-slice k of m (requires `k < m`, `m ≥ 1`; may be empty when m > d_ffn).
    pub fn micro_slice(&self, k: usize, m: usize) -> MicroSliceWeights {
        assert!(m >= 1 && k < m, "micro_slice: k {k} of m {m}");
        let cols = Self::slice_cols(self.d_ffn, k, m);
        let (d, f) = (self.d_model, self.d_ffn);
        let take_cols = |w: &[i8]| (0..d).flat_map(|r| w[r * f + cols.start..r * f + cols.end].iter().copied()).collect();
        MicroSliceWeights {
            d_model: d,
            f: cols.len(),
            w_gate: take_cols(&self.w_gate),
            w_up: take_cols(&self.w_up),
            w_down: self.w_down[cols.start * d..cols.end * d].to_vec(),
        }
    }
}

/// The weights of one micro-slice: `f` FFN columns of W_gate and W_up and those rows of W_down.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MicroSliceWeights {
    pub d_model: usize,
    /// FFN columns in this slice.
    pub f: usize,
    /// d_model×f, row-major.
    pub w_gate: Vec<i8>,
    /// d_model×f, row-major.
    pub w_up: Vec<i8>,
    /// f×d_model, row-major.
    pub w_down: Vec<i8>,
}

impl MicroSliceWeights {
    /// Bytes of a micro-slice as stored in DDR and ring slots: `3·d_model·f`.
    pub fn byte_len(d_model: usize, f: usize) -> usize {
        3 * d_model * f
    }

    /// DDR/ring byte layout: W_gate columns (d_model×f row-major), then W_up columns
    /// (same), then W_down rows (f×d_model row-major), contiguous, one byte per int8.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(Self::byte_len(self.d_model, self.f));
        for w in [&self.w_gate, &self.w_up, &self.w_down] {
            b.extend(w.iter().map(|&v| v as u8));
        }
        b
    }

    /// Inverse of [`to_bytes`](Self::to_bytes); refuses a buffer of the wrong length.
    pub fn from_bytes(bytes: &[u8], d_model: usize, f: usize) -> crate::Result<Self> {
        let n = d_model * f;
        if bytes.len() != 3 * n {
            return Err(crate::Error::field("micro-slice bytes", format!("{} bytes, expected 3·{d_model}·{f} = {}", bytes.len(), 3 * n)));
        }
        let s = |r: std::ops::Range<usize>| bytes[r].iter().map(|&v| v as i8).collect();
        Ok(MicroSliceWeights { d_model, f, w_gate: s(0..n), w_up: s(n..2 * n), w_down: s(2 * n..3 * n) })
    }
}

/// Deterministic int8 activations of `t` tokens (t×d_model, row-major) for a seed.
pub fn generate_tokens(seed: u64, t: usize, d_model: usize) -> Vec<i8> {
    let mut r = rng_for(seed, 2, 0);
    (0..t * d_model).map(|_| r.gen_range(ACT_RANGE.0..=ACT_RANGE.1)).collect()
}

/// Gate and up projections of `m` tokens over `f` FFN columns, then the activation:
/// returns `h` (m×f int8). `x` is m×d_model; `wg_cols`, `wu_cols` are d_model×f.
pub fn gate_up_fl(x: &[i8], m: usize, d_model: usize, wg_cols: &[i8], wu_cols: &[i8], f: usize) -> Vec<i8> {
    let g = gemm_i8(x, wg_cols, m, d_model, f);
    let u = gemm_i8(x, wu_cols, m, d_model, f);
    g.iter().zip(&u).map(|(&g, &u)| act_i8(g, u)).collect()
}

/// Partial output (m×d_model, i32) of `m` tokens through one micro-slice.
pub fn micro_slice_partial_fl(x: &[i8], m: usize, d_model: usize, ws: &MicroSliceWeights) -> Vec<i32> {
    assert_eq!(ws.d_model, d_model, "micro_slice_partial_fl: d_model mismatch");
    let h = gate_up_fl(x, m, d_model, &ws.w_gate, &ws.w_up, ws.f);
    gemm_i8(&h, &ws.w_down, m, ws.f, d_model)
}

/// Whole-expert output (m×d_model, i32) of `m` tokens.
pub fn expert_ffn_fl(x: &[i8], m: usize, w: &ExpertWeights) -> Vec<i32> {
    let h = gate_up_fl(x, m, w.d_model, &w.w_gate, &w.w_up, w.d_ffn);
    gemm_i8(&h, &w.w_down, m, w.d_ffn, w.d_model)
}

/// Dense reference MoE layer: token t's output (row t of the T×d_model result) is the
/// wrapping i32 sum over its routed experts of the expert output (no gate-score weighting:
/// int8 functional mode checks the dataflow, not the model's numerics).
/// `routing[t]` holds t's expert ids, each `< weights.len()` (validated upstream).
pub fn moe_layer_ref_fl(x: &[i8], routing: &[Vec<u16>], weights: &[ExpertWeights]) -> Vec<i32> {
    let t = routing.len();
    let d = weights.first().map_or(0, |w| w.d_model);
    assert_eq!(x.len(), t * d, "moe_layer_ref_fl: x is not T×d_model");
    let mut out = vec![0i32; t * d];
    // Group tokens by expert (ascending ids: deterministic), one GEMM per expert.
    let mut by_expert: Vec<Vec<usize>> = vec![Vec::new(); weights.len()];
    for (ti, ids) in routing.iter().enumerate() {
        for &e in ids {
            assert!((e as usize) < weights.len(), "moe_layer_ref_fl: expert {e} has no weights");
            by_expert[e as usize].push(ti);
        }
    }
    for (e, toks) in by_expert.iter().enumerate() {
        if toks.is_empty() {
            continue;
        }
        let xs: Vec<i8> = toks.iter().flat_map(|&ti| x[ti * d..(ti + 1) * d].iter().copied()).collect();
        let y = expert_ffn_fl(&xs, toks.len(), &weights[e]);
        for (j, &ti) in toks.iter().enumerate() {
            for (o, &v) in out[ti * d..(ti + 1) * d].iter_mut().zip(&y[j * d..(j + 1) * d]) {
                *o = o.wrapping_add(v);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigmoid_table_is_monotone_and_symmetric() {
        assert_eq!(SIGMOID_LUT[128], 128);
        assert_eq!(SIGMOID_LUT[0], 0);
        assert!(SIGMOID_LUT.windows(2).all(|w| w[0] <= w[1]));
        for i in 1..128 {
            assert_eq!(SIGMOID_LUT[128 + i] + SIGMOID_LUT[128 - i], 256);
        }
    }

    #[test]
    fn act_approximates_silu_times_u() {
        assert_eq!(act_i8(0, 1000), 0);
        // g=u=16·16 -> g_q=u_q=16 (x=1.0): silu(1)=0.73; 16·192·16>>12 = 12
        assert_eq!(act_i8(256, 256), 12);
        assert!(act_i8(-256 * 8, 256) <= 0);
        assert_eq!(act_i8(i32::MAX, i32::MAX), 127);
        assert_eq!(act_i8(i32::MIN, i32::MAX), 0);
    }
}

#[cfg(test)]
mod gemm_tests {
    use super::gemm_i8;
    use proptest::prelude::*;

    /// The textbook triple loop in i64, wrapped to i32 once at the end (wrapping addition is
    /// associative, so this equals wrapping at every step in any order).
    fn naive(a: &[i8], b: &[i8], m: usize, k: usize, n: usize) -> Vec<i32> {
        let mut c = Vec::with_capacity(m * n);
        for i in 0..m {
            for j in 0..n {
                let s: i64 = (0..k).map(|p| a[i * k + p] as i64 * b[p * n + j] as i64).sum();
                c.push(s as i32); // `as` truncates: two's-complement wrap
            }
        }
        c
    }

    #[test]
    fn gemm_wraps_like_i32() {
        // 140,000 × (−128·−128) = 2,293,760,000 > i32::MAX: the accumulator must wrap.
        let k = 140_000;
        let (a, b) = (vec![-128i8; k], vec![-128i8; k]);
        let c = gemm_i8(&a, &b, 1, k, 1);
        assert_eq!(c, vec![(2_293_760_000i64 - (1i64 << 32)) as i32]);
        assert_eq!(c, naive(&a, &b, 1, k, 1));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn gemm_equals_naive_loop(m in 1usize..7, k in 1usize..40, n in 1usize..9, seed in any::<u64>(), zeros in 0u8..3) {
            // Full int8 range, with some zero rows of `a` (the kernel skips them).
            let mut r = super::rng_for(seed, 9, 0);
            use rand::Rng;
            let a: Vec<i8> = (0..m * k).map(|i| if zeros > 0 && (i / k) % 3 == 0 { 0 } else { r.gen() }).collect();
            let b: Vec<i8> = (0..k * n).map(|_| r.gen()).collect();
            prop_assert_eq!(gemm_i8(&a, &b, m, k, n), naive(&a, &b, m, k, n));
        }
    }
}
