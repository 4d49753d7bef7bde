//! The paper's baselines as presets of the package: `ep-paper` (whole experts, one resident
//! per chiplet) and `hydra` (placement by popularity predicted from earlier layers only).

use hw::pkg::config::{PkgCfg, Strategy};
use hw::pkg::package::{LayerInput, Package, PkgRtl};
use hw::pkg::session::Session;
use sched::pkg::iodie::TokenBufferCfgFl;
use sched::workload::{generate, GenCfg};

fn cfg() -> PkgCfg {
    let mut c = PkgCfg::default();
    c.pe.rows = 8;
    c.pe.cols = 8;
    c
}

fn layer(tokens: u32, seed: u64) -> LayerInput {
    let g = GenCfg { model: None, experts: 16, top_k: 2, layers: 1, tokens_per_iter: tokens, iters: 1, seed, ..Default::default() };
    let t = generate(&g).unwrap();
    LayerInput { routing: t.routing(0..t.tokens.len(), 0), experts: 16, d_model: 64, d_ffn: 48, requests: None }
}

/// ep-paper: every chiplet's peak is exactly one whole expert (3 · d_model · d_ffn bytes,
/// one ring slot), loaded and computed; functional outputs still match the reference.
#[test]
fn ep_paper_holds_one_whole_expert_per_chiplet() {
    let l = layer(64, 3);
    let whole = 3 * 64 * 48u64;
    let mut p = Package::new(&cfg(), Strategy::EpPaper, &l, true).unwrap();
    let r = p.run(None).unwrap();
    assert_eq!(r.outputs_match_reference, Some(true));
    for c in &r.chiplets {
        assert_eq!((c.peak_ring_slots, c.peak_weight_bytes), (1, whole), "chiplet {:?}", c.id);
    }
    assert_eq!(r.peak_weight_bytes, 4 * whole);
    // Every byte of every used expert is loaded once, as by our EP (same placement).
    let mut q = Package::new(&cfg(), Strategy::Ep, &l, false).unwrap();
    let e = q.run(None).unwrap();
    assert_eq!(r.ddr_bytes, e.ddr_bytes);
    assert_eq!(p.plan.owner, q.plan.owner);
}

/// The other strategies run on the config as given: `for_strategy` changes only the paper's
/// EP and Hydra.
#[test]
fn only_the_paper_baselines_change_the_machine() {
    let c = cfg();
    for s in Strategy::ALL {
        let f = c.for_strategy(s);
        if matches!(s, Strategy::EpPaper | Strategy::Hydra) {
            assert_eq!((f.micro_slices, f.ring_slots, f.ddr_reserve), (1, 2, 1));
        } else {
            assert_eq!(*f, c, "{}", s.name());
        }
    }
}

/// hydra's placement is the greedy balance of the *predicted* counts: changing the layer's
/// own routing does not move it; changing the prediction does. Without a prediction it is
/// EP's round robin.
#[test]
fn hydra_places_by_the_prediction_not_the_layer() {
    let (a, b) = (layer(64, 3), layer(64, 9));
    assert_ne!(a.routing, b.routing);
    let pred: Vec<u64> = (0..16).map(|e| if e < 4 { 100 } else { 1 }).collect();
    let own = |l: &LayerInput, p: Option<&[u64]>| Package::new_predicted(&cfg(), Strategy::Hydra, l, p, false, PkgRtl::default()).unwrap().plan.owner.unwrap();
    assert_eq!(own(&a, Some(&pred)), own(&b, Some(&pred)));
    // By hand: experts 0..3 (100 each) on chiplets 0..3, then the 12 of weight 1 round the
    // least-loaded chiplets (ties: lowest id): 4→0, 5→1, 6→2, 7→3, 8→0, …
    let want: Vec<u8> = (0..16).map(|e| (e % 4) as u8).collect();
    assert_eq!(own(&a, Some(&pred)), want);
    let pred2: Vec<u64> = (0..16).map(|e| if e == 5 { 1000 } else { 1 }).collect();
    assert_ne!(own(&a, Some(&pred2)), want);
    assert_eq!(own(&a, None), want, "no history: EP's placement");
    // The oracle does look at the layer.
    let oracle = |l: &LayerInput| Package::new(&cfg(), Strategy::HydraOracle, l, false).unwrap().plan.owner.unwrap();
    assert_ne!(oracle(&a), oracle(&b));
}

/// The session's prediction for a batch comes from committed batches only: the first batch
/// has none, layer 1 of iteration 0 gets layer 0's counts, layer 0 of iteration 1 gets
/// iteration 0's layer-0 counts — and rewriting a batch's own routing never changes its
/// prediction.
#[test]
fn session_predicts_from_earlier_batches_only() {
    let g = GenCfg { model: None, experts: 8, top_k: 2, layers: 2, tokens_per_iter: 16, iters: 2, seed: 4, ..Default::default() };
    let t = generate(&g).unwrap();
    let counts = |it: u32, l: usize| {
        let mut c = vec![0u64; 8];
        for x in t.tokens.iter().filter(|x| x.iter == it) {
            for &e in x.layers[l].iter() {
                c[e as usize] += 1;
            }
        }
        c
    };
    let mut s = Session::new(&t, 0, 8, 8, TokenBufferCfgFl::default()).unwrap();
    let mut preds = Vec::new();
    while s.next_layer().is_some() {
        preds.push(s.predicted().map(|p| p.to_vec()));
        s.commit(None).unwrap();
    }
    assert_eq!(preds, vec![None, Some(counts(0, 0)), Some(counts(0, 0)), Some(counts(0, 1))]);
    // Change iteration 1's layer-1 routing: its own prediction stays.
    let mut t2 = t.clone();
    for x in t2.tokens.iter_mut().filter(|x| x.iter == 1) {
        let mut rows: Vec<Vec<u16>> = (0..2).map(|l| x.layers[l].to_vec()).collect();
        rows[1] = vec![6, 7];
        x.layers = rows.into();
    }
    let mut s2 = Session::new(&t2, 0, 8, 8, TokenBufferCfgFl::default()).unwrap();
    let mut preds2 = Vec::new();
    while s2.next_layer().is_some() {
        preds2.push(s2.predicted().map(|p| p.to_vec()));
        s2.commit(None).unwrap();
    }
    assert_eq!(preds2, preds);
}
