//! Routing generator: determinism, top-k distinctness, request structure, config refusals.

use proptest::prelude::*;
use sched::trace::{parse_trace, trace_stats, trace_to_string};
use sched::workload::{generate, GenCfg};

fn cfg(tokens: u32, seed: u64) -> GenCfg {
    GenCfg { experts: 32, top_k: 4, layers: 3, tokens_per_iter: tokens, iters: 6, prompt_len: [3, 40], decode_steps: [2, 9], seed, ..Default::default() }
}

#[test]
fn deterministic_per_seed() {
    let a = generate(&cfg(64, 7)).unwrap();
    assert_eq!(a, generate(&cfg(64, 7)).unwrap());
    assert_ne!(a, generate(&cfg(64, 8)).unwrap());
}

#[test]
fn valid_trace_with_request_structure() {
    for &t in &[16u32, 64, 256, 1024] {
        let tr = generate(&GenCfg { iters: 3, ..cfg(t, 3) }).unwrap();
        tr.validate().unwrap();
        assert_eq!(tr.tokens.len(), 3 * t as usize);
        assert_eq!(tr.iterations().len(), 3);
        // Round trip through the text format.
        assert_eq!(parse_trace(&trace_to_string(&tr)).unwrap(), tr);
        for (_, r) in tr.iterations() {
            let toks = &tr.tokens[r];
            // Each (req, pos) appears once in an iteration; a request's positions there are consecutive.
            let mut seen = std::collections::BTreeMap::<u32, Vec<u32>>::new();
            for x in toks {
                seen.entry(x.req).or_default().push(x.pos);
            }
            for ps in seen.values() {
                assert!(ps.windows(2).all(|w| w[1] == w[0] + 1), "{ps:?}");
            }
        }
    }
    // Mixed workload: later iterations hold decode requests (one token) and prefill chunks.
    let tr = generate(&GenCfg { iters: 20, ..cfg(64, 5) }).unwrap();
    let last = tr.iterations().last().unwrap().1.clone();
    let mut per_req = std::collections::BTreeMap::<u32, usize>::new();
    for x in &tr.tokens[last] {
        *per_req.entry(x.req).or_default() += 1;
    }
    assert!(per_req.values().any(|&n| n == 1) && per_req.values().any(|&n| n > 1), "{per_req:?}");
    assert!(trace_stats(&tr).requests > 10);
}

#[test]
fn pure_decode_and_pure_prefill() {
    let d = generate(&GenCfg { max_decode_frac: 1.0, ..cfg(16, 1) }).unwrap();
    for (_, r) in d.iterations() {
        let reqs: std::collections::BTreeSet<u32> = d.tokens[r].iter().map(|x| x.req).collect();
        assert_eq!(reqs.len(), 16);
    }
    let p = generate(&GenCfg { max_decode_frac: 0.0, prompt_len: [100, 100], ..cfg(16, 1) }).unwrap();
    assert!(p.tokens.iter().all(|x| x.pos < 100));
}

#[test]
fn skew_shapes_popularity() {
    let flat = trace_stats(&generate(&GenCfg { skew: 0.0, iters: 8, ..cfg(256, 2) }).unwrap());
    let hot = trace_stats(&generate(&GenCfg { skew: 1.5, iters: 8, ..cfg(256, 2) }).unwrap());
    for (f, h) in flat.per_layer_skewness.iter().zip(&hot.per_layer_skewness) {
        assert!(f < &1.3 && h > &2.0, "flat {f} hot {h}");
    }
    // Popularity differs per layer: the hottest expert is not the same at every layer.
    let tr = generate(&GenCfg { skew: 2.0, layers: 6, iters: 4, ..cfg(256, 9) }).unwrap();
    let hottest: std::collections::BTreeSet<usize> = (0..6)
        .map(|l| {
            let mut c = [0; 32];
            tr.tokens.iter().for_each(|t| t.layers[l].iter().for_each(|&e| c[e as usize] += 1));
            (0..32).max_by_key(|&e| (c[e], e)).unwrap()
        })
        .collect();
    assert!(hottest.len() > 1);
}

#[test]
fn popularity_override() {
    let mut w = vec![0.0; 32];
    for (e, x) in w.iter_mut().take(4).enumerate() {
        *x = 1.0 + e as f64;
    }
    let tr = generate(&GenCfg { popularity: Some(vec![w]), ..cfg(64, 4) }).unwrap();
    assert!(tr.tokens.iter().all(|t| t.layers.iter().all(|l| l == &vec![0, 1, 2, 3])));
}

#[test]
fn refuses_bad_config_naming_field() {
    let bad = |c: GenCfg, f: &str| {
        let e = c.validate().unwrap_err();
        assert_eq!(e.field, f, "{e}");
        assert!(generate(&c).is_err());
    };
    bad(GenCfg { experts: 0, ..cfg(16, 1) }, "experts");
    bad(GenCfg { top_k: 33, ..cfg(16, 1) }, "top_k");
    bad(GenCfg { layers: 0, ..cfg(16, 1) }, "layers");
    bad(GenCfg { tokens_per_iter: 0, ..cfg(16, 1) }, "tokens_per_iter");
    bad(GenCfg { iters: 0, ..cfg(16, 1) }, "iters");
    bad(GenCfg { prompt_len: [5, 2], ..cfg(16, 1) }, "prompt_len");
    bad(GenCfg { decode_steps: [0, 2], ..cfg(16, 1) }, "decode_steps");
    bad(GenCfg { max_decode_frac: 1.5, ..cfg(16, 1) }, "max_decode_frac");
    bad(GenCfg { skew: f64::NAN, ..cfg(16, 1) }, "skew");
    bad(GenCfg { popularity: Some(vec![vec![1.0; 31]]), ..cfg(16, 1) }, "popularity[0]");
    bad(GenCfg { popularity: Some(vec![vec![0.0; 32]]), ..cfg(16, 1) }, "popularity[0]");
    let e = serde_json::from_str::<GenCfg>(r#"{"expertz": 3}"#).unwrap_err().to_string();
    assert!(e.contains("expertz"), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn topk_distinct_in_range(experts in 1u32..40, k in 1u32..10, skew in 0.0f64..3.0, seed in any::<u64>(), t in 1u32..40) {
        let k = k.min(experts);
        let c = GenCfg { experts, top_k: k, layers: 2, tokens_per_iter: t, iters: 3, skew, seed, prompt_len: [1, 20], decode_steps: [1, 5], ..Default::default() };
        let tr = generate(&c).unwrap();
        prop_assert!(tr.validate().is_ok());
        prop_assert_eq!(tr.tokens.len(), 3 * t as usize);
    }
}

#[test]
fn full_size_generation_is_fast() {
    let m = sched::models::model_by_name("deepseek-v3").unwrap();
    let t = std::time::Instant::now();
    let tr = generate(&GenCfg { tokens_per_iter: 1024, iters: 1, ..GenCfg::for_model(&m) }).unwrap();
    assert_eq!(tr.tokens.len(), 1024);
    eprintln!("deepseek-v3 1024 tokens x {} layers: {:.3} s", m.layers, t.elapsed().as_secs_f64());
}
