//! Scenario workloads: determinism, round trip, warm-up then stable loads, distinct hot sets
//! per scenario, cyclic drift, token→expert affinity, config refusals naming the field.

use proptest::prelude::*;
use sched::scenario::{
    cluster_of, generate_scenario, iteration_loads, layer_skewness, scenario_order, Mix, ScenarioCfg, SCENARIO_NAMES,
};
use sched::trace::{parse_trace, trace_to_string};

fn cfg(mix: Mix, seed: u64) -> ScenarioCfg {
    ScenarioCfg {
        experts: 64,
        top_k: 8,
        layers: 2,
        tokens_per_iter: 256,
        iters: 60,
        seed,
        scenarios: vec!["chat".into(), "coding".into(), "math".into(), "privacy".into()],
        mix,
        warmup_iters: 20,
        vocab: 32000,
        clusters: 64,
        affinity: 0.3,
        ..Default::default()
    }
}

fn fixed(name: &str) -> Mix {
    Mix::Fixed(name.into())
}

/// Sum of the rows `r` of per-iteration loads.
fn window(loads: &[Vec<u64>], r: std::ops::Range<usize>) -> Vec<f64> {
    let mut v = vec![0.0; loads[0].len()];
    for row in &loads[r] {
        for (a, &b) in v.iter_mut().zip(row) {
            *a += b as f64;
        }
    }
    v
}

fn cosine(a: &[f64], b: &[f64]) -> f64 {
    let d: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f64 = a.iter().map(|x| x * x).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| x * x).sum::<f64>().sqrt();
    d / (na * nb)
}

fn top(v: &[f64], n: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&a, &b| v[b].total_cmp(&v[a]).then(a.cmp(&b)));
    idx.truncate(n);
    idx
}

#[test]
fn deterministic_per_seed_and_round_trip() {
    let c = ScenarioCfg { iters: 12, ..cfg(Mix::Mixed { period_iters: 6 }, 7) };
    let a = generate_scenario(&c).unwrap();
    assert_eq!(a, generate_scenario(&c).unwrap());
    assert_ne!(a, generate_scenario(&ScenarioCfg { seed: 8, ..c.clone() }).unwrap());
    a.validate().unwrap();
    assert_eq!(a.tokens.len(), 12 * 256);
    assert_eq!(a.iterations().len(), 12);
    assert!(a.tokens.iter().all(|t| t.token_id.is_some_and(|id| id < c.vocab)));
    let text = trace_to_string(&a);
    let b = parse_trace(&text).unwrap();
    assert_eq!(b, a);
    assert_eq!(trace_to_string(&b), text);
    // Each request's positions advance by one per iteration.
    let mut last = std::collections::BTreeMap::<u32, (u32, u32)>::new();
    for t in &a.tokens {
        if let Some(&(it, pos)) = last.get(&t.req) {
            assert_eq!((t.iter, t.pos), (it + 1, pos + 1));
        } else {
            assert_eq!(t.pos, 0);
        }
        last.insert(t.req, (t.iter, t.pos));
    }
    // The config round-trips through JSON and refuses unknown fields.
    let j = serde_json::to_string(&c).unwrap();
    assert_eq!(serde_json::from_str::<ScenarioCfg>(&j).unwrap(), c);
    let bad = j.replacen("\"vocab\"", "\"vocabulary\"", 1);
    assert!(serde_json::from_str::<ScenarioCfg>(&bad).unwrap_err().to_string().contains("vocabulary"));
    let m: ScenarioCfg = serde_json::from_str(r#"{"scenarios": ["math"], "mix": {"fixed": "math"}}"#).unwrap();
    assert_eq!(m.mix, fixed("math"));
    let m: ScenarioCfg = serde_json::from_str(r#"{"mix": {"mixed": {"period_iters": 9}}}"#).unwrap();
    assert_eq!(m.mix, Mix::Mixed { period_iters: 9 });
}

#[test]
fn fixed_scenario_settles_after_warmup() {
    let tr = generate_scenario(&cfg(fixed("math"), 3)).unwrap();
    for l in 0..2 {
        let loads = iteration_loads(&tr, l);
        assert_eq!(loads.len(), 60);
        // Windows of 10 iterations: after warm-up (iteration 20) consecutive windows agree.
        let post: Vec<f64> = (2..5).map(|w| cosine(&window(&loads, w * 10..w * 10 + 10), &window(&loads, w * 10 + 10..w * 10 + 20))).collect();
        // During warm-up the load vector moves: the first window is far from the settled one.
        let warm = cosine(&window(&loads, 0..10), &window(&loads, 50..60));
        let warm2 = cosine(&window(&loads, 0..5), &window(&loads, 15..20));
        eprintln!("layer {l}: post {post:?} warm {warm:.4} warm2 {warm2:.4}");
        assert!(post.iter().all(|&c| c > 0.99), "{post:?}");
        assert!(warm < 0.9, "{warm}");
        assert!(warm2 < post.iter().cloned().fold(1.0, f64::min), "{warm2}");
    }
    let sk = layer_skewness(&tr);
    eprintln!("skewness {sk:?}");
    assert!(sk.iter().all(|&s| s > 1.5), "{sk:?}");
}

#[test]
fn scenarios_have_different_hot_sets() {
    let names = ["chat", "coding", "math", "privacy"];
    let hot: Vec<Vec<Vec<usize>>> = names
        .iter()
        .map(|n| {
            let tr = generate_scenario(&ScenarioCfg { iters: 40, ..cfg(fixed(n), 5) }).unwrap();
            (0..2).map(|l| top(&window(&iteration_loads(&tr, l), 20..40), 8)).collect()
        })
        .collect();
    for i in 0..names.len() {
        for j in i + 1..names.len() {
            for l in 0..2 {
                let ov = hot[i][l].iter().filter(|e| hot[j][l].contains(e)).count();
                eprintln!("{} vs {} layer {l}: top-8 overlap {ov}", names[i], names[j]);
                assert!(ov < 8, "{} vs {} layer {l}", names[i], names[j]);
            }
        }
    }
    // The overlap rule: the shared hot experts sit at the even ranks of every scenario.
    for l in 0..4 {
        let orders: Vec<Vec<usize>> = SCENARIO_NAMES.iter().map(|n| scenario_order(n, l, 64, 8)).collect();
        for o in &orders {
            let mut s = o.clone();
            s.sort_unstable();
            assert_eq!(s, (0..64).collect::<Vec<_>>());
            for r in [0, 2, 4, 6] {
                assert_eq!(o[r], orders[0][r]);
            }
        }
        assert!(orders.iter().skip(1).any(|o| o[1] != orders[0][1]));
    }
}

#[test]
fn mixed_pool_drifts_cyclically() {
    let p = 80;
    let c = ScenarioCfg { iters: 200, warmup_iters: 0, scenarios: vec!["chat".into(), "math".into()], req_len: [4, 16], ..cfg(Mix::Mixed { period_iters: p }, 9) };
    let tr = generate_scenario(&c).unwrap();
    let loads = iteration_loads(&tr, 0);
    let w = 5;
    let mut near = Vec::new();
    let mut half = Vec::new();
    let mut full = Vec::new();
    for s in (0..200 - p as usize - w).step_by(10) {
        let a = window(&loads, s..s + w);
        near.push(cosine(&a, &window(&loads, s + w..s + 2 * w)));
        half.push(cosine(&a, &window(&loads, s + p as usize / 2..s + p as usize / 2 + w)));
        full.push(cosine(&a, &window(&loads, s + p as usize..s + p as usize + w)));
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    eprintln!("near {:.4} half {:.4} full {:.4}", mean(&near), mean(&half), mean(&full));
    assert!(mean(&half) + 0.05 < mean(&near));
    assert!(mean(&half) + 0.05 < mean(&full));
    // At a peak of one scenario's share (t = 0 mod P) half a period later is the other
    // scenario's peak: there the gap is widest. (At the quarter points both shares are 1/2
    // half a period apart, so the similarity is high there: the average is what drifts.)
    for s in [0usize, p as usize] {
        let a = window(&loads, s..s + w);
        let n = cosine(&a, &window(&loads, s + w..s + 2 * w));
        let h = cosine(&a, &window(&loads, s + p as usize / 2..s + p as usize / 2 + w));
        eprintln!("peak at {s}: near {n:.4} half {h:.4}");
        assert!(n > 0.98 && h < 0.85, "{n} {h}");
    }
}

/// Share of a cluster's expert picks that fall on its `top_k` most picked experts, averaged
/// over clusters with enough tokens.
fn cluster_concentration(affinity: f64) -> f64 {
    let c = ScenarioCfg { iters: 40, warmup_iters: 0, clusters: 16, affinity, ..cfg(fixed("coding"), 11) };
    let tr = generate_scenario(&c).unwrap();
    let mut counts = vec![vec![0.0f64; 64]; 16];
    for t in &tr.tokens {
        let cl = cluster_of(&c, t.token_id.unwrap()) as usize;
        for &e in &t.layers[1] {
            counts[cl][e as usize] += 1.0;
        }
    }
    let mut shares = Vec::new();
    for row in &counts {
        let tot: f64 = row.iter().sum();
        if tot < 8.0 * 200.0 {
            continue;
        }
        let t: f64 = top(row, 8).iter().map(|&e| row[e]).sum();
        shares.push(t / tot);
    }
    assert!(shares.len() >= 3, "{}", shares.len());
    shares.iter().sum::<f64>() / shares.len() as f64
}

#[test]
fn affinity_concentrates_experts_per_cluster() {
    let hi = cluster_concentration(0.9);
    let lo = cluster_concentration(0.0);
    eprintln!("top-8 coverage: affinity 0.9 {hi:.3}, affinity 0 {lo:.3}");
    assert!(hi > 0.75, "{hi}");
    assert!(hi > lo + 0.3, "{hi} vs {lo}");
}

#[test]
fn bad_configs_name_their_field() {
    let ok = cfg(fixed("math"), 1);
    ok.validate().unwrap();
    let cases: Vec<(&str, ScenarioCfg)> = vec![
        ("experts", ScenarioCfg { experts: 0, ..ok.clone() }),
        ("experts", ScenarioCfg { experts: 70000, ..ok.clone() }),
        ("top_k", ScenarioCfg { top_k: 65, ..ok.clone() }),
        ("top_k", ScenarioCfg { top_k: 0, ..ok.clone() }),
        ("layers", ScenarioCfg { layers: 0, ..ok.clone() }),
        ("tokens_per_iter", ScenarioCfg { tokens_per_iter: 0, ..ok.clone() }),
        ("iters", ScenarioCfg { iters: 0, ..ok.clone() }),
        ("iters", ScenarioCfg { iters: u32::MAX, ..ok.clone() }),
        ("scenarios", ScenarioCfg { scenarios: vec![], ..ok.clone() }),
        ("scenarios[1]", ScenarioCfg { scenarios: vec!["math".into(), "poetry".into()], ..ok.clone() }),
        ("scenarios[1]", ScenarioCfg { scenarios: vec!["math".into(), "math".into()], ..ok.clone() }),
        ("mix.fixed", ScenarioCfg { mix: fixed("chat"), scenarios: vec!["math".into()], ..ok.clone() }),
        ("mix.mixed.period_iters", ScenarioCfg { mix: Mix::Mixed { period_iters: 1 }, ..ok.clone() }),
        ("vocab", ScenarioCfg { vocab: 0, clusters: 0, ..ok.clone() }),
        ("clusters", ScenarioCfg { clusters: 0, ..ok.clone() }),
        ("clusters", ScenarioCfg { vocab: 10, clusters: 11, ..ok.clone() }),
        ("clusters", ScenarioCfg { vocab: u32::MAX, clusters: (1 << 20) + 1, ..ok.clone() }),
        ("affinity", ScenarioCfg { affinity: 1.5, ..ok.clone() }),
        ("affinity", ScenarioCfg { affinity: f64::NAN, ..ok.clone() }),
        ("skew", ScenarioCfg { skew: -1.0, ..ok.clone() }),
        ("req_len", ScenarioCfg { req_len: [0, 4], ..ok.clone() }),
        ("req_len", ScenarioCfg { req_len: [5, 4], ..ok.clone() }),
    ];
    for (field, c) in cases {
        let e = generate_scenario(&c).unwrap_err();
        assert_eq!(e.field, field, "{e}");
        assert!(e.to_string().contains(field));
    }
}

#[test]
fn empty_and_out_of_range_queries() {
    let tr = generate_scenario(&ScenarioCfg { iters: 2, ..cfg(fixed("math"), 1) }).unwrap();
    assert!(iteration_loads(&tr, 2).is_empty());
    let empty = sched::trace::Trace { header: tr.header.clone(), tokens: vec![] };
    assert_eq!(layer_skewness(&empty), vec![0.0, 0.0]);
    assert!(iteration_loads(&empty, 0).is_empty());
    // Loads per iteration sum to tokens × top_k.
    for row in iteration_loads(&tr, 0) {
        assert_eq!(row.iter().sum::<u64>(), 256 * 8);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    #[test]
    fn never_panics(experts in 0u32..20, top_k in 0u32..22, layers in 0u32..3, tpi in 0u32..9, iters in 0u32..6,
                    vocab in 0u32..40, clusters in 0u32..45, affinity in -0.5f64..1.5, warm in 0u32..4,
                    period in 0u32..5, nscen in 0usize..4, fixed_i in 0usize..7, lo in 0u32..4, hi in 0u32..6,
                    skew in -1.0f64..3.0, seed in any::<u64>(), mixed in any::<bool>(), coh in 0usize..6) {
        let scenarios: Vec<String> = SCENARIO_NAMES.iter().take(nscen).map(|s| s.to_string()).collect();
        let mix = if mixed { Mix::Mixed { period_iters: period } } else { Mix::Fixed(["chat", "coding", "math", "privacy", "writing", "translation", "x"][fixed_i].into()) };
        let c = ScenarioCfg { experts, top_k, layers, tokens_per_iter: tpi, iters, seed, scenarios, mix, warmup_iters: warm,
                              vocab, clusters, affinity, skew, req_len: [lo, hi], model: None,
                              coherence: [None, Some((0.0, 1)), Some((1.0, 2)), Some((0.5, 0)), Some((1.5, 1)), Some((0.7, 50))][coh]
                                  .map(|(share, clusters_per_request)| sched::scenario::Coherence { share, clusters_per_request }) };
        match generate_scenario(&c) {
            Ok(tr) => {
                tr.validate().unwrap();
                prop_assert_eq!(tr.tokens.len(), (tpi * iters) as usize);
                prop_assert_eq!(parse_trace(&trace_to_string(&tr)).unwrap(), tr.clone());
                prop_assert_eq!(layer_skewness(&tr).len(), layers as usize);
                for t in &tr.tokens {
                    prop_assert!(t.token_id.unwrap() < vocab);
                }
            }
            Err(e) => {
                let known = ["experts", "top_k", "layers", "tokens_per_iter", "iters", "scenarios", "mix.fixed",
                             "mix.mixed.period_iters", "vocab", "clusters", "affinity", "skew", "req_len",
                             "coherence.share", "coherence.clusters_per_request"];
                prop_assert!(known.contains(&e.field.as_str()) || e.field.starts_with("scenarios["), "{}", e);
            }
        }
    }
}
