//! The NI-Balancer around the wafer: the migration engines deliver every flit of a plan (no
//! flit lost or duplicated, across iterations), Local steps only on links cold in the
//! all-reduce and Global steps only on links idle in the all-to-all, the regular traffic
//! unperturbed, invasive stalls measured, and results independent of threads.

use hw::wafer::balance::{BalanceCfg, BalancerKind};
use hw::wafer::migration::{MigGate, MigrationPlan, CLASS_MIG_GLOBAL, CLASS_MIG_LOCAL};
use hw::wafer::program::{build, LayerProgram};
use hw::wafer::{Wafer, WaferCfg, WaferRun};
use proptest::prelude::*;
use sched::balance::ni::{migration_steps, Move};
use sched::models::{model_by_name, ModelPreset};
use sched::noc::Dir;
use sched::wafer::routing::generated_routing;
use sched::wafer::{map, Mapping, MappingKind};
use testbenches::run::balance::run_balance;
use testbenches::run::wafer::{simulate, WaveEnd};
use testbenches::run::RunOptions;

fn setup(c: &WaferCfg, skew: f64, seed: u64) -> (ModelPreset, Mapping, LayerProgram) {
    let m = model_by_name("qwen3-235b").unwrap();
    let mp = map(c.mapping, c.geom(), c.tp, c.dp, c.all_gather).unwrap();
    let routing = generated_routing(&m, c.dp, c.tokens_per_group, skew, seed).unwrap();
    (m.clone(), mp.clone(), build(c, &m, &mp, &routing))
}

fn cfg() -> WaferCfg {
    WaferCfg { mapping: MappingKind::Er, tokens_per_group: 128, micro_batches: 1, migration_vc: true, ..WaferCfg::default() }
}

/// Moves that cross FTDs and stay inside them (4×4 ER: FTDs are the 2×2 quadrants).
fn moves() -> Vec<Move> {
    vec![
        Move { expert: 3, src_device: 0, dst_device: 15 },
        Move { expert: 5, src_device: 5, dst_device: 4 },
        Move { expert: 9, src_device: 9, dst_device: 2 },
        Move { expert: 12, src_device: 12, dst_device: 13 },
    ]
}

/// Migration flits per link and class, and each link's cold mask.
fn check_cold(w: &Wafer, r: &WaferRun) -> (u64, u64) {
    let (mut local, mut global) = (0, 0);
    for (t, per_port) in w.tiles().zip(&r.link_flits) {
        for d in [Dir::XPlus, Dir::XMinus, Dir::YPlus, Dir::YMinus] {
            let (l, g) = (per_port[d.idx()][CLASS_MIG_LOCAL as usize], per_port[d.idx()][CLASS_MIG_GLOBAL as usize]);
            let cold = t.cold_mask[d.idx()];
            assert!(l == 0 || cold & 0b001 != 0, "die {} link {d:?}: {l} Local migration flits on a link hot in the all-reduce", t.die.id);
            assert!(g == 0 || cold & 0b110 == 0b110, "die {} link {d:?}: {g} Global migration flits on a link used by the all-to-all", t.die.id);
            local += l;
            global += g;
        }
    }
    (local, global)
}

/// A non-invasive plan carried over as many iterations as it takes: every flit arrives once,
/// Local/Global flits stay on their cold links, the plan completes, the regular traffic
/// latency moves by less than 1 %.
#[test]
fn non_invasive_migration_delivers_on_cold_links() {
    let c = cfg();
    let (m, mp, prog) = setup(&c, 1.0, 3);
    let expert_flits = 300;
    let mut plan = MigrationPlan::stepwise(&mp, &moves(), expert_flits, 64);
    let total = plan.flits_left();
    let (mut local, mut global) = (0, 0);
    let mut iters = 0;
    while !plan.done() {
        iters += 1;
        assert!(iters <= 40, "the plan did not complete in 40 iterations ({} flits left)", plan.flits_left());
        let before = plan.flits_left();
        let mut w = Wafer::new(&c, &prog, 1).unwrap();
        w.load_migration(&plan, MigGate::Windows);
        let r = simulate(&mut w, &c, &RunOptions::default(), WaveEnd::Run).unwrap();
        w.migration_delivered(&mut plan);
        let rx: u64 = w.tiles().map(|t| t.die.mig.rx_flits).sum();
        assert_eq!(r.mig_flits, rx, "migration flits sent vs received in iteration {iters}");
        assert_eq!(before - plan.flits_left(), rx, "delivered flits vs received");
        for t in w.tiles() {
            assert_eq!(t.router.occupancy(), 0, "die {} router still holds flits", t.die.id);
        }
        let (l, g) = check_cold(&w, &r);
        (local, global) = (local + l, global + g);
        // Regular traffic beside the migration vs alone.
        let mut w0 = Wafer::new(&c, &prog, 1).unwrap();
        let r0 = simulate(&mut w0, &c, &RunOptions::default(), WaveEnd::Layer).unwrap();
        let (a, b) = (r.mean_xfer_latency(), r0.mean_xfer_latency());
        // No added latency (it may drop a little: the migration shifts when dies reach a phase).
        assert!(a <= b * 1.01, "iteration {iters}: regular transfers' mean latency {a} cycles with migration, {b} without");
        let l = r.layer_cycles as f64 / r0.layer_cycles as f64;
        assert!((l - 1.0).abs() < 0.01, "iteration {iters}: layer {} cycles with migration, {} without", r.layer_cycles, r0.layer_cycles);
    }
    assert!(local > 0 && global > 0, "both step kinds ran ({local} Local, {global} Global flit-hops)");
    assert_eq!(plan.flits_left(), 0);
    assert!(total > 0 && m.experts > 0);
}

/// An invasive stall: the copies straight over XY with nothing else running; every flit
/// arrives, the stall ends when the last one did.
#[test]
fn invasive_stall_delivers_everything() {
    let c = cfg();
    let (_, mp, _) = setup(&c, 1.0, 3);
    let mut plan = MigrationPlan::direct(&moves(), 500, 64);
    let total = plan.flits_left();
    let empty = LayerProgram { micro_batches: 1, mapping: Some(mp), dies: vec![Default::default(); 16], ..Default::default() };
    let mut w = Wafer::new(&c, &empty, 1).unwrap();
    w.load_migration(&plan, MigGate::Always);
    let r = simulate(&mut w, &c, &RunOptions::default(), WaveEnd::Run).unwrap();
    w.migration_delivered(&mut plan);
    assert!(plan.done());
    assert_eq!(r.mig_flits, total);
    // 4 moves of 500 flits at one flit per 4 cycles per link: at least 500 * 4 cycles.
    assert!(r.end_cycle >= 2000, "stall of {} cycles", r.end_cycle);
}

/// Iteration at which the workload drifts: before it the generator's seed 10 decides which
/// experts are hot, from it on seed 11 (another per-layer popularity permutation).
const DRIFT_AT: usize = 5;

fn small_balance(kind: BalancerKind, threads: usize) -> hw::wafer::balance::BalanceResult {
    let bal = BalanceCfg { warmup_iters: 2, window_iters: 2, ..BalanceCfg::default() };
    balance_run(kind, threads, &bal, true)
}

/// 10 iterations of 256 tokens per group at Zipf 1.2, drifting at [`DRIFT_AT`] or not.
fn balance_run(kind: BalancerKind, threads: usize, bal: &BalanceCfg, drift: bool) -> hw::wafer::balance::BalanceResult {
    let c = WaferCfg { tokens_per_group: 256, ..cfg() };
    let m = model_by_name("qwen3-235b").unwrap();
    let mp = map(c.mapping, c.geom(), c.tp, c.dp, c.all_gather).unwrap();
    let routing: Vec<_> = (0..10).map(|i| generated_routing(&m, c.dp, c.tokens_per_group, 1.2, if drift && i >= DRIFT_AT { 11 } else { 10 }).unwrap()).collect();
    run_balance(&c, &m, &mp, bal, kind, &routing, &RunOptions { threads: Some(threads as u32), ..RunOptions::default() }, None, &mut |_| {}).unwrap()
}

/// The balancer follows a drifting workload: with the hot experts changed at DRIFT_AT, the
/// topology-aware balancer (β = 0, so only the load decides) plans again after the drift and
/// the iterations after that re-plan are as balanced as before the drift, well below the
/// unbalanced run; on the same workload without drift it has nothing to re-plan after its
/// first decision. (The non-invasive balancer does not get to re-plan inside these 10
/// iterations: at this small batch its first migration is still landing when the drift
/// comes, and it waits for it.)
#[test]
fn balancer_follows_drift() {
    let bal = BalanceCfg { warmup_iters: 2, window_iters: 2, invasive_beta_cycles: 0, ..BalanceCfg::default() };
    let none = balance_run(BalancerKind::None, 1, &bal, true);
    let drift = balance_run(BalancerKind::Topo, 1, &bal, true);
    let fixed = balance_run(BalancerKind::Topo, 1, &bal, false);
    let show = |r: &hw::wafer::balance::BalanceResult| r.iterations.iter().map(|i| (i.iter, i.triggered, i.replicas, (i.max_over_mean * 100.0).round() / 100.0)).collect::<Vec<_>>();
    let ctx = format!("drift {:?}\nfixed {:?}\nnone {:?}", show(&drift), show(&fixed), show(&none));
    let it = |r: &hw::wafer::balance::BalanceResult, i: usize| r.iterations[i].clone();
    // Both runs plan once at the start; the same workload needs nothing more.
    assert!(it(&drift, 0).triggered && it(&fixed, 0).triggered, "{ctx}");
    assert!(fixed.iterations[1..].iter().all(|r| !r.triggered), "no drift, no new plan\n{ctx}");
    // The drift hurts the old plan, and the balancer re-plans within two iterations of it.
    assert!(it(&drift, DRIFT_AT).max_over_mean > it(&drift, DRIFT_AT - 1).max_over_mean + 0.3, "{ctx}");
    assert!(drift.iterations[DRIFT_AT..DRIFT_AT + 2].iter().any(|r| r.triggered), "no new plan after the drift\n{ctx}");
    // Once the new plan is in, the load is balanced again: within 0.1 of the pre-drift level
    // and at least 0.5 below the unbalanced run.
    let last = it(&drift, 9).max_over_mean;
    assert!(last < it(&drift, DRIFT_AT - 1).max_over_mean + 0.1, "{ctx}");
    assert!(last + 0.5 < it(&none, 9).max_over_mean, "{ctx}");
}

/// The drift is real: the hottest experts before and after it are different ones.
#[test]
fn drift_changes_the_hot_experts() {
    let c = WaferCfg { tokens_per_group: 256, ..cfg() };
    let m = model_by_name("qwen3-235b").unwrap();
    let top = |seed: u64| {
        let mut n = vec![0u32; m.experts as usize];
        for g in generated_routing(&m, c.dp, c.tokens_per_group, 1.2, seed).unwrap() {
            for t in g {
                for e in t {
                    n[e.idx()] += 1;
                }
            }
        }
        let mut idx: Vec<usize> = (0..n.len()).collect();
        idx.sort_by_key(|&e| std::cmp::Reverse(n[e]));
        idx.truncate(8);
        idx.sort();
        idx
    };
    let (a, b) = (top(10), top(11));
    let common = a.iter().filter(|e| b.contains(e)).count();
    assert!(common <= 2, "top-8 before {a:?} and after {b:?} share {common}");
}

/// The balancers on a skewed workload: balancing lowers the peak device load; the
/// non-invasive one never stalls and its regular traffic stays within 2 % of the same layers
/// without migration; invasive ones stall; threads change nothing.
#[test]
fn balancers_balance_and_ni_does_not_stall() {
    let none = small_balance(BalancerKind::None, 1);
    let topo = small_balance(BalancerKind::Topo, 1);
    let ni = small_balance(BalancerKind::TopoNi, 1);
    assert!(topo.max_over_mean_load < none.max_over_mean_load, "topo {} vs none {}", topo.max_over_mean_load, none.max_over_mean_load);
    assert!(ni.max_over_mean_load < none.max_over_mean_load, "topo-ni {} vs none {}", ni.max_over_mean_load, none.max_over_mean_load);
    assert!(topo.migration_stall_cycles > 0 && topo.moves > 0);
    assert_eq!(ni.migration_stall_cycles, 0);
    assert!(ni.moves > 0 && ni.iterations.iter().any(|r| r.migration_flits > 0));
    // At this small batch (256 tokens per group) the all-reduce window is short and the
    // regular transfers' mean latency moves by up to ~1.3 %; the 1 % claim is measured at the
    // balance command's default batch (docs/results-balance.md). Bounded here at 2 %.
    let rel = ni.regular_traffic_cycles / ni.regular_traffic_cycles_no_migration - 1.0;
    assert!(rel < 0.02, "regular traffic {:+.3} % with migration", rel * 100.0);
    assert_eq!(none.regular_traffic_cycles, none.regular_traffic_cycles_no_migration);
    let ni2 = small_balance(BalancerKind::TopoNi, 2);
    assert_eq!(ni, ni2, "threads changed the balancer run");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    /// A stepwise plan: each chunk walks the move's Local/Global steps end to end, chunks sum
    /// to the expert, every step's kind matches the FL's.
    #[test]
    fn stepwise_plan_follows_the_fl_steps(src in 0u32..16, dst in 0u32..16, flits in 1u32..700, chunk in 1u32..200) {
        prop_assume!(src != dst);
        let c = cfg();
        let mp = map(c.mapping, c.geom(), c.tp, c.dp, c.all_gather).unwrap();
        let mv = Move { expert: 0, src_device: src, dst_device: dst };
        let plan = MigrationPlan::stepwise(&mp, &[mv], flits, chunk);
        let steps = migration_steps(&mp, src, dst);
        let chunks = flits.div_ceil(chunk);
        prop_assert_eq!(plan.xfers.len() as u32, chunks * steps.len() as u32);
        let mut sum = 0;
        for x in plan.xfers.iter().filter(|x| x.step == 0) {
            sum += x.flits;
        }
        prop_assert_eq!(sum, flits);
        for x in &plan.xfers {
            let s = &steps[x.step as usize];
            prop_assert_eq!(x.kind, s.kind);
            prop_assert_eq!(x.src, s.path[0]);
            prop_assert_eq!(x.dst, *s.path.last().unwrap());
            prop_assert_eq!(x.next.is_some(), (x.step as usize) + 1 < steps.len());
        }
        prop_assert_eq!(plan.flits_left(), flits as u64 * steps.len() as u64);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]
    /// Sem-MoE's look-up and re-batching unit equals the FL: Algorithm 3's table look-ups
    /// (token table with nearest-id fallback, n-gram table, `T_p > A_p`), the aligned
    /// re-batching and each token's rank, for random tables and batches.
    #[test]
    fn semmoe_lut_equals_fl(devices in 2u32..6, lookback in 0u32..3, layer in 0usize..4, seed in any::<u64>(), n in 0usize..40, n_ids in 0usize..12, ids_on in any::<bool>()) {
        use hw::wafer::semmoe_lut::{LutToken, SemMoeLutCl};
        use sched::balance::semmoe::{choose_device, rank_of_tokens, rebatch, NGramTable, TokenDevTable};
        use std::collections::BTreeMap;
        let mut x = seed | 1;
        let mut rnd = move |m: u64| { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x % m.max(1) };
        let d = devices as usize;
        let mut rows = BTreeMap::new();
        for _ in 0..n_ids {
            // Values from a small set so ties happen.
            rows.insert(rnd(64) as u32, (0..d).map(|_| rnd(5) as f64 / 4.0).collect::<Vec<f64>>());
        }
        let table = TokenDevTable { devices, rows };
        let mut nrows = vec![BTreeMap::new(); layer + 1];
        for (l, m) in nrows.iter_mut().enumerate() {
            let k = (lookback as usize).min(l);
            for _ in 0..6 {
                let key: Vec<u32> = (0..k).map(|_| rnd(devices as u64) as u32).collect();
                m.insert(key, (0..d).map(|_| rnd(5) as f64 / 4.0).collect::<Vec<f64>>());
            }
        }
        let ngram = NGramTable { devices, lookback, rows: nrows };
        let tokens: Vec<LutToken> = (0..n).map(|_| LutToken { token_id: ids_on.then(|| rnd(70) as u32), history: (0..layer).map(|_| rnd(devices as u64) as u32).collect() }).collect();
        // FL.
        let plain = rank_of_tokens(&(0..n).collect::<Vec<_>>(), devices);
        let pred: Vec<u32> = tokens.iter().enumerate().map(|(j, t)| choose_device(t.token_id.and_then(|id| table.lookup(id)), ngram.lookup(layer, &t.history), plain[j])).collect();
        let shf = rebatch(&pred, devices).unwrap();
        let rank = rank_of_tokens(&shf, devices);
        // CL.
        let (cshf, crank, cycles) = SemMoeLutCl::new(Some(&table), &ngram, layer, devices, tokens).run();
        prop_assert_eq!(cshf, shf);
        prop_assert_eq!(crank, rank);
        prop_assert!(n == 0 || cycles >= 3 * n as u64 + d as u64);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]
    /// The trigger (CL) equals Eq. 2's FL to the last bit: loads with zeros, ties and the odd
    /// NaN, α around the imbalance, β on both sides of Δt.
    #[test]
    fn trigger_equals_fl(loads in proptest::collection::vec(proptest::collection::vec(prop_oneof![8 => 0u32..50, 1 => Just(0u32), 1 => Just(u32::MAX)], 0..9), 0..4), alpha in 0.0f64..3.0, on_the_edge in any::<bool>(), beta in 0u64..10, since in 0u64..12) {
        use hw::wafer::balancer::TriggerCl;
        use sched::balance::ni::{imbalance, should_migrate, TriggerCfg};
        let loads: Vec<Vec<f64>> = loads.iter().map(|l| l.iter().map(|&x| if x == u32::MAX { f64::NAN } else { x as f64 }).collect()).collect();
        // Half the cases put α exactly on the imbalance: the strict comparison decides.
        let alpha = if on_the_edge && imbalance(&loads).is_finite() { imbalance(&loads) } else { alpha };
        let cfg = TriggerCfg { alpha, beta_cycles: beta };
        let (fire, cycles) = TriggerCl::new(&cfg, &loads, since).run();
        prop_assert_eq!(fire, should_migrate(&cfg, &loads, since));
        let devs: usize = loads.iter().map(Vec::len).sum();
        // One cycle per device counter at least (a NaN mean stops the scan early).
        prop_assert!(since <= beta || loads.iter().flatten().any(|x| x.is_nan()) || cycles as usize >= devs);
    }
}
