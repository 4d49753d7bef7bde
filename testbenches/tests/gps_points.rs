//! MoE-GPS run layer: every point seeded on its own (a point alone equals the same point
//! inside a sweep, byte for byte), and the Distribution-Only train/test split never uses a
//! test iteration for its prediction.

use sched::balance::gps::{ErrorModel, OverheadModel};
use sched::models::model_by_name;
use testbenches::run::gps::{Bandwidth, DistEstimate, GpsExperiment, GpsParams, GpsSource};
use testbenches::run::RunOptions;

fn params(bws: &[(&str, f64)], accs: &[f64], est: DistEstimate) -> GpsParams {
    GpsParams {
        wafer: "2x2".into(),
        cols: 2,
        rows: 2,
        bandwidths: bws.iter().map(|&(n, g)| Bandwidth::new(n.into(), g).unwrap()).collect(),
        accuracies: accs.to_vec(),
        error_model: ErrorModel::Typical,
        overhead: OverheadModel::moe_gps_fig4(),
        seed: 7,
        tokens: Some(128),
        warmup: 4,
        iters: 2,
        window: 4,
        spare_slots: 1,
        predictor_vcd: None,
        dist_estimate: est,
        predictor: None,
    }
}

fn points(bws: &[(&str, f64)], skews: &[f64], accs: &[f64]) -> Vec<(String, f64, String)> {
    let m = model_by_name("mixtral-8x22b").unwrap();
    let e = GpsExperiment::new(params(bws, accs, DistEstimate::Online), m, &GpsSource::Generated { skews: skews.to_vec(), layer: 0 }).unwrap();
    e.run(&RunOptions::default()).unwrap().into_iter().map(|p| (p.bandwidth.clone(), p.skewness, serde_json::to_string(&p).unwrap())).collect()
}

#[test]
fn a_point_alone_equals_the_same_point_in_a_sweep() {
    let accs = [0.5, 0.9];
    let sweep = points(&[("slow", 32.0), ("fast", 300.0)], &[1.0, 1.4, 2.2], &accs);
    let alone = points(&[("fast", 300.0)], &[1.4], &accs);
    assert_eq!(alone.len(), 1);
    let inside = sweep.iter().find(|(b, s, _)| b == "fast" && *s == 1.4).unwrap();
    assert_eq!(alone[0].2, inside.2, "skew 1.4 / fast alone differs from inside the sweep");
    // The order of the other points does not matter either.
    let reordered = points(&[("fast", 300.0), ("slow", 32.0)], &[2.2, 1.4], &accs);
    let again = reordered.iter().find(|(b, s, _)| b == "fast" && *s == 1.4).unwrap();
    assert_eq!(again.2, inside.2);
    // An accuracy's guesses do not depend on the other accuracies tried.
    let one_acc = points(&[("fast", 300.0)], &[1.4], &[0.9]);
    let v: serde_json::Value = serde_json::from_str(&one_acc[0].2).unwrap();
    let w: serde_json::Value = serde_json::from_str(&inside.2).unwrap();
    assert_eq!(v["t2e"][0], w["t2e"][1]);
}

#[test]
fn split_never_uses_test_iterations_for_prediction() {
    let m = model_by_name("mixtral-8x22b").unwrap();
    let src = GpsSource::Generated { skews: vec![2.0], layer: 0 };
    let mut e = GpsExperiment::new(params(&[("fast", 300.0)], &[0.8], DistEstimate::Split), m.clone(), &src).unwrap();
    let warmup = e.params.warmup as usize;
    let before = e.dist_only_predictions().unwrap();
    // Reference, computed here: the MLE over the train iterations (window = warmup), each
    // test iteration's prediction its apportionment to the iteration's assignments.
    let mut train = vec![0u64; m.experts as usize];
    for it in &e.workloads[0].iterations[..warmup] {
        for es in it {
            for &x in es {
                train[x as usize] += 1;
            }
        }
    }
    let total: u64 = train.iter().sum();
    for (pred, counts) in &before[0] {
        let n: u64 = counts.iter().sum();
        assert_eq!(pred.iter().sum::<u64>(), n);
        for (p, t) in pred.iter().zip(&train) {
            let exact = n as f64 * *t as f64 / total as f64;
            assert!((*p as f64 - exact).abs() < 1.0 + 1e-9, "{p} vs {exact}");
        }
    }
    assert_eq!(before[0][0].0, before[0][1].0, "the predictor is frozen over the test part");
    // Replace the test iterations by routing to one expert: the predictions do not move.
    for it in &mut e.workloads[0].iterations[warmup..] {
        for (i, es) in it.iter_mut().enumerate() {
            *es = vec![0, 1 + (i % 7) as u16];
        }
    }
    let after = e.dist_only_predictions().unwrap();
    for (a, b) in before[0].iter().zip(&after[0]) {
        assert_eq!(a.0, b.0, "a test iteration reached the prediction");
    }
    // Online mode does use the first test iteration for the second one's prediction.
    let mut o = GpsExperiment::new(params(&[("fast", 300.0)], &[0.8], DistEstimate::Online), m, &src).unwrap();
    let b0 = o.dist_only_predictions().unwrap();
    for it in &mut o.workloads[0].iterations[warmup..] {
        for (i, es) in it.iter_mut().enumerate() {
            *es = vec![0, 1 + (i % 7) as u16];
        }
    }
    let b1 = o.dist_only_predictions().unwrap();
    assert_eq!(b0[0][0].0, b1[0][0].0);
    assert_ne!(b0[0][1].0, b1[0][1].0);
    // The split's pooled test error is reported.
    let pts = GpsExperiment::new(params(&[("fast", 300.0)], &[0.8], DistEstimate::Split), model_by_name("mixtral-8x22b").unwrap(), &src).unwrap().run(&RunOptions::default()).unwrap();
    assert!(pts[0].dist_only_test_error.is_some_and(|x| x > 0.0 && x < 0.5));
}
