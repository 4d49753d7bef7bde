//! MoE FFN functional reference: micro-slice partial sums equal the whole expert for any M,
//! byte layout round trip, MoE layer = sum over routed experts, determinism.

use proptest::prelude::*;
use sched::pkg::moe::*;

#[test]
fn micro_slices_sum_to_expert_for_every_m() {
    let (d, f, m) = (64, 48, 5);
    let w = ExpertWeights::generate(11, 3, d, f);
    let x = generate_tokens(12, m, d);
    let whole = expert_ffn_fl(&x, m, &w);
    assert!(whole.iter().any(|&v| v != 0), "non-trivial output");
    for mm in 1..=f {
        let mut acc = vec![0i32; m * d];
        // Any order: reverse.
        for k in (0..mm).rev() {
            let p = micro_slice_partial_fl(&x, m, d, &w.micro_slice(k, mm));
            acc.iter_mut().zip(&p).for_each(|(a, b)| *a = a.wrapping_add(*b));
        }
        assert_eq!(acc, whole, "M = {mm}");
    }
}

#[test]
fn generators_are_deterministic() {
    assert_eq!(ExpertWeights::generate(1, 2, 8, 6), ExpertWeights::generate(1, 2, 8, 6));
    assert_ne!(ExpertWeights::generate(1, 2, 8, 6), ExpertWeights::generate(1, 3, 8, 6));
    assert_eq!(generate_tokens(5, 3, 8), generate_tokens(5, 3, 8));
    let w = ExpertWeights::generate(1, 0, 8, 6);
    assert!(w.w_gate.iter().all(|&v| (WEIGHT_RANGE.0..=WEIGHT_RANGE.1).contains(&v)));
}

/// A token's expert output written out as plain loops over the contract (module doc of
/// sched::pkg::moe): g, u = x·W_gate, x·W_up (i64), h = act(g, u), y = h·W_down wrapped to
/// i32. It shares only `act_i8` with the code under test, and `act_i8` itself is checked
/// against numpy's frozen table in moe_vectors.rs.
fn naive_expert(x: &[i8], w: &ExpertWeights) -> Vec<i64> {
    let (d, f) = (w.d_model, w.d_ffn);
    let h: Vec<i64> = (0..f)
        .map(|j| {
            let g: i64 = (0..d).map(|i| x[i] as i64 * w.w_gate[i * f + j] as i64).sum();
            let u: i64 = (0..d).map(|i| x[i] as i64 * w.w_up[i * f + j] as i64).sum();
            act_i8(g as i32, u as i32) as i64
        })
        .collect();
    (0..d).map(|c| (0..f).map(|j| h[j] * w.w_down[j * d + c] as i64).sum()).collect()
}

#[test]
fn moe_layer_is_sum_of_routed_experts() {
    let (d, f, e, t) = (16, 12, 6, 5);
    let ws: Vec<_> = (0..e).map(|i| ExpertWeights::generate(9, i, d, f)).collect();
    let x = generate_tokens(9, t, d);
    let routing: Vec<Vec<u16>> = vec![vec![0, 1], vec![5, 2], vec![1, 0], vec![3, 4], vec![2, 5]];
    let out = moe_layer_ref_fl(&x, &routing, &ws);
    for (ti, ids) in routing.iter().enumerate() {
        let xt = &x[ti * d..(ti + 1) * d];
        let mut want = vec![0i64; d];
        for &ei in ids {
            let y = naive_expert(xt, &ws[ei as usize]);
            want.iter_mut().zip(&y).for_each(|(a, b)| *a += b);
        }
        let want: Vec<i32> = want.iter().map(|&v| v as i32).collect();
        assert_eq!(&out[ti * d..(ti + 1) * d], &want[..]);
    }
    assert!(out.iter().any(|&v| v != 0), "non-trivial output");
    assert!(MicroSliceWeights::from_bytes(&[0u8; 5], 2, 1).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn partial_sums_equal_expert(d in 1usize..24, f in 1usize..24, m in 1usize..6, seed in any::<u64>(), mm_pick in any::<usize>()) {
        let w = ExpertWeights::generate(seed, 0, d, f);
        let x = generate_tokens(seed ^ 1, m, d);
        let mm = 1 + mm_pick % f;
        let mut acc = vec![0i32; m * d];
        for k in 0..mm {
            let s = w.micro_slice(k, mm);
            // Through the DDR/ring byte layout.
            let b = s.to_bytes();
            prop_assert_eq!(b.len(), MicroSliceWeights::byte_len(d, s.f));
            let s2 = MicroSliceWeights::from_bytes(&b, d, s.f).unwrap();
            prop_assert_eq!(&s2, &s);
            let p = micro_slice_partial_fl(&x, m, d, &s2);
            acc.iter_mut().zip(&p).for_each(|(a, b)| *a = a.wrapping_add(*b));
        }
        prop_assert_eq!(acc, expert_ffn_fl(&x, m, &w));
    }

    #[test]
    fn act_is_total(g in any::<i32>(), u in any::<i32>()) {
        let a = act_i8(g, u);
        // Sign: SiLU(g)·u has the sign of u for g > 0 and is ~0 for very negative g.
        if g >= 16 && u >= 16 { prop_assert!(a >= 0); }
    }
}
