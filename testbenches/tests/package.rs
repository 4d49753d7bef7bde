//! The package run layer (`testbenches::run::package`) end to end: the session loop with
//! token buffering across layers and iterations, through the same `PackageRun` the CLI,
//! `sweep` and `bench` use.

use hw::pkg::config::{PkgCfg, Strategy};
use hw::pkg::package::PkgRtl;
use sched::workload::{generate, GenCfg};
use testbenches::run::package::{PackageRun, Workload};
use testbenches::run::RunOptions;

fn cfg(k: u32) -> PkgCfg {
    let mut c = PkgCfg { rows: k, cols: k, ..Default::default() };
    c.pe.rows = 8;
    c.pe.cols = 8;
    c.sim.max_cycles = 20_000_000;
    c.sim.watchdog_cycles = 20_000;
    c
}

/// Token buffering over many iterations: requests are paused at cold layers and resume in a
/// later iteration; every token-layer is computed exactly once (A5's MACs equal A3's, which
/// defers nothing, and both equal the dense count), bit-exact, and the IO die's decisions
/// equal Algorithm 2's FL twin at every boundary (checked inside the package's `run`).
#[test]
fn token_buffering_defers_and_finishes_every_token_bit_exact() {
    let g = GenCfg { model: None, experts: 16, top_k: 2, layers: 2, tokens_per_iter: 16, iters: 14, seed: 3, ..Default::default() };
    let t = generate(&g).unwrap();
    let model = sched::models::model_by_name("functional").unwrap();
    assert_eq!((model.d_model, model.d_ffn, model.experts, model.top_k), (64, 48, 16, 2));
    let work = Workload { trace: t.clone(), shared: 0, d_model: 64, d_ffn: 48 };
    let run = PackageRun::new(cfg(2), model, work, vec![Strategy::A3, Strategy::A5], true, PkgRtl::default()).unwrap();
    let parts = run.run(&RunOptions::default());
    assert!(parts.failed.is_empty(), "{:?}", parts.failed);
    let [(s3, a3), (s5, a5)] = <[_; 2]>::try_from(parts.ok).unwrap();
    assert_eq!((s3, s5), (Strategy::A3, Strategy::A5));
    for r in [&a3, &a5] {
        assert_eq!(r.outputs_match_reference, Some(true), "{}", r.strategy.name());
    }
    // Gate, up and down projections of every (token, layer, routed expert), once.
    let dense = t.tokens.len() as u64 * 2 * 2 * 3 * 64 * 48;
    assert_eq!(a3.macs, dense, "A3: every token-layer computed once");
    assert_eq!(a5.macs, dense, "A5: every token-layer computed once, deferred or not");
    assert_eq!(a3.session.deferrals, 0);
    assert_eq!(a3.session.iterations, 14);
    assert_eq!(a3.session.layer_runs, 14 * 2);
    assert!(a5.session.deferrals > 0, "A5 deferred nothing: {:?}", a5.session);
    assert!(a5.session.iterations >= 14);
}

/// Bad input is refused before anything runs, naming what is wrong.
#[test]
fn a_run_is_checked_before_it_starts() {
    let g = GenCfg { model: None, experts: 16, top_k: 2, layers: 1, tokens_per_iter: 8, iters: 1, seed: 1, ..Default::default() };
    let model = sched::models::model_by_name("functional").unwrap();
    let work = || Workload { trace: generate(&g).unwrap(), shared: 0, d_model: 64, d_ffn: 48 };
    let e = PackageRun::new(cfg(2), model.clone(), work(), vec![Strategy::Ep, Strategy::Ep], true, PkgRtl::default()).unwrap_err();
    assert_eq!(e.to_string(), "--strategy: ep given twice");
    let mut c = cfg(2);
    c.sim.threads = 0;
    let e = PackageRun::new(c, model.clone(), work(), vec![Strategy::Ep], true, PkgRtl::default()).unwrap_err();
    assert!(e.to_string().contains("sim.threads"), "{e}");
    // A RunOptions override is checked too: every part fails with the reason.
    let run = PackageRun::new(cfg(2), model, work(), vec![Strategy::Ep, Strategy::A3], true, PkgRtl::default()).unwrap();
    let p = run.run(&RunOptions { threads: Some(0), ..Default::default() });
    assert!(p.ok.is_empty() && p.failed.len() == 2 && p.failed[0].1.to_string().contains("sim.threads"), "{p:?}");
    let p = run.run(&RunOptions { batch_jobs: Some(65), ..Default::default() });
    assert!(p.ok.is_empty() && p.failed[0].1.to_string().contains("sim.batch_jobs"), "{p:?}");
}

/// Layer batches run at once (`sim.batch_jobs`), each on its own package, merge to the same
/// result as one after the other: every field but the wall clock, outputs bit-exact, for
/// strategies without token buffering (run at once) and A5 (one after the other whatever
/// the setting). Also when a batch fails: the first failing batch in order is the error.
#[test]
fn batches_run_at_once_merge_to_the_serial_result() {
    let g = GenCfg { model: None, experts: 16, top_k: 2, layers: 2, tokens_per_iter: 8, iters: 7, seed: 5, ..Default::default() };
    let model = sched::models::model_by_name("functional").unwrap();
    let work = Workload { trace: generate(&g).unwrap(), shared: 0, d_model: 64, d_ffn: 48 };
    let run = PackageRun::new(cfg(2), model, work, vec![Strategy::Ep, Strategy::A3, Strategy::A5], true, PkgRtl::default()).unwrap();
    let strip = |r: &hw::pkg::result::PkgResult| {
        let mut v = serde_json::to_value(r).unwrap();
        let m = v.as_object_mut().unwrap();
        assert!(m.remove("wall_seconds").is_some() && m.remove("cycles_per_second").is_some());
        v
    };
    let serial = run.run(&RunOptions { batch_jobs: Some(1), ..Default::default() });
    assert!(serial.failed.is_empty(), "{:?}", serial.failed);
    // Also one batch job with cores lent (a sweep's idle workers): none, one, two spare
    // from the start, and one that a sweep worker gives while the run is going (`late`).
    for (jobs, lent, late) in [(2, None, false), (3, None, false), (5, None, false), (1, Some(0), false), (1, Some(1), false), (1, Some(2), false), (1, Some(0), true)] {
        let spare = lent.map(|n| {
            let c = std::sync::Arc::new(testbenches::run::SpareCores::default());
            c.give(n);
            c
        });
        let giver = late.then(|| {
            let c = spare.clone().unwrap();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(30));
                c.give(1);
            })
        });
        let par = run.run(&RunOptions { batch_jobs: Some(jobs), spare: spare.clone(), ..Default::default() });
        if let Some(g) = giver {
            g.join().unwrap();
        }
        // Every lent core came back.
        if let (Some(c), Some(n)) = (&spare, lent) {
            assert_eq!(c.take_all(), n + late as usize, "spare cores given back");
        }
        assert!(par.failed.is_empty(), "{:?}", par.failed);
        assert_eq!(par.ok.len(), 3);
        for ((s1, r1), (s2, r2)) in serial.ok.iter().zip(&par.ok) {
            assert_eq!(s1, s2);
            assert_eq!(r1.outputs_match_reference, Some(true));
            // A5 may defer a request: more batches than 7 iterations × 2 layers.
            assert!(r1.session.layer_runs == 14 || (*s1 == Strategy::A5 && r1.session.layer_runs > 14), "{}: {:?}", s1.name(), r1.session);
            assert_eq!(strip(r1), strip(r2), "{} with {jobs} batch jobs, {lent:?} spare", s1.name());
        }
    }
    // A cycle limit that some batches exceed: the same error as one after the other.
    let errs: Vec<String> = [1, 4]
        .iter()
        .map(|&j| {
            let p = run.run(&RunOptions { batch_jobs: Some(j), max_cycles: Some(3_000), ..Default::default() });
            assert!(p.ok.is_empty(), "every strategy stops at its first batch over the limit");
            p.failed.iter().map(|(s, e)| format!("{}: {e}", s.name())).collect::<Vec<_>>().join("; ")
        })
        .collect();
    assert_eq!(errs[0], errs[1]);
}

/// The skew bound is the generator's (0..=16, `limits::SKEW`), for `package` and for a
/// scenario's `workload.skew` alike.
#[test]
fn skew_is_checked_against_the_generators_bound() {
    use testbenches::run::package::PackageInput;
    let build = |skew: f64| PackageInput { skew: Some(skew), functional: true, tokens: Some(8), ..Default::default() }.build(cfg(2), vec![Strategy::A3], PkgRtl::default());
    assert_eq!(build(17.0).unwrap_err().to_string(), "--skew: 17 outside 0..=16");
    assert_eq!(build(f64::NAN).unwrap_err().to_string(), "--skew: NaN outside 0..=16");
    let run = build(12.0).unwrap();
    assert_eq!(run.workload().tokens(), 8);
    let mut sc = testbenches::run::scenario::load(None).unwrap();
    sc.workload.skew = 16.5;
    let e = testbenches::run::scenario::check_package(&sc).unwrap_err().to_string();
    assert_eq!(e, "config field `workload.skew`: 16.5 outside 0..=16");
}

/// `waferstream run NAME` with a name that is neither a file nor an embedded scenario lists
/// the embedded ones.
#[test]
fn an_unknown_scenario_name_lists_the_embedded_ones() {
    let e = testbenches::run::scenario::load(Some(std::path::Path::new("nosuch"))).unwrap_err().to_string();
    assert!(e.starts_with("cannot read nosuch: ") && e.ends_with("not an embedded scenario either (embedded: default, noc-sweep, fsedp-paper)"), "{e}");
    let sc = testbenches::run::scenario::load(Some(std::path::Path::new("noc-sweep"))).unwrap();
    assert_eq!(sc.scenario.kind, testbenches::run::scenario::ScenarioKind::NocSweep);
}
