//! The wafer system: the paper's worked example (4×4, TP=4, DP=4) under baseline and
//! ER-Mapping, the hot/cold pattern of the links, conservation of flits, and results that
//! do not depend on threads or fast-forward.

use hw::wafer::program::{build, LayerProgram, Phase};
use hw::wafer::{classify_links, Heat, Wafer, WaferCfg, WaferRun};
use proptest::prelude::*;
use sched::models::{model_by_name, ModelPreset};
use sched::wafer::routing::generated_routing;
use sched::wafer::{map, Mapping, MappingKind};
use testbenches::run::wafer::{simulate, WaveEnd};
use testbenches::run::{RunOptions, WaveSink};

fn setup(c: &WaferCfg, model: &str) -> (ModelPreset, Mapping, LayerProgram) {
    let m = model_by_name(model).unwrap();
    let mp = map(c.mapping, c.geom(), c.tp, c.dp, c.all_gather).unwrap();
    let routing = generated_routing(&m, c.dp, c.tokens_per_group, 0.0, c.seed).unwrap();
    let prog = build(c, &m, &mp, &routing);
    (m, mp, prog)
}

/// Run options of `threads` stepper threads, fast-forward `ff`, at the wafer's default
/// bounds (`testbenches::run::limits`).
fn opts(threads: usize, ff: bool) -> RunOptions {
    RunOptions { threads: Some(threads as u32), fast_forward: Some(ff), ..RunOptions::default() }
}

/// Runs through the run layer's one wafer call ([`simulate`]), as every wafer run does.
fn run(c: &WaferCfg, prog: &LayerProgram, threads: usize, ff: bool) -> (WaferRun, Wafer) {
    let mut w = Wafer::new(c, prog, threads).unwrap();
    let r = simulate(&mut w, c, &opts(threads, ff), WaveEnd::Layer).unwrap();
    (r, w)
}

fn example(kind: MappingKind) -> WaferCfg {
    WaferCfg { mapping: kind, tokens_per_group: 64, micro_batches: 1, ..WaferCfg::default() }
}

/// Every flit sent was received, nothing is left in a router, and the DMA's injection credits
/// are all back (credits conserved end to end).
fn check_conservation(prog: &LayerProgram, r: &WaferRun, w: &Wafer) {
    let planned: u64 = prog.xfers.iter().map(|x| x.flits as u64).sum();
    let tx: u64 = w.tiles().map(|t| t.die.dma.stats.tx_flits).sum();
    let rx: u64 = w.tiles().map(|t| t.die.dma.stats.rx_flits).sum();
    assert_eq!(tx, planned, "flits sent vs planned");
    assert_eq!(rx, planned, "flits received vs planned");
    assert_eq!(r.tx_flits, planned);
    for t in w.tiles() {
        assert_eq!(t.router.occupancy(), 0, "die {} router still holds flits", t.die.id);
        assert!(t.die.done());
        assert!(t.die.dma.idle());
    }
}

#[test]
fn worked_example_er_halves_hops_and_all_to_all() {
    let b = example(MappingKind::Baseline);
    let e = example(MappingKind::Er);
    let (_, mb, pb) = setup(&b, "deepseek-v3");
    let (_, me, pe) = setup(&e, "deepseek-v3");
    assert!((mb.avg_a2a_hops() - 8.0 / 3.0).abs() < 1e-9);
    assert!((me.avg_a2a_hops() - 4.0 / 3.0).abs() < 1e-9);
    assert!(me.ftds_disjoint() && !mb.ftds_disjoint());
    let (rb, wb) = run(&b, &pb, 1, true);
    let (re, we) = run(&e, &pe, 1, true);
    check_conservation(&pb, &rb, &wb);
    check_conservation(&pe, &re, &we);
    // All-to-all: ER's FTD-local traffic is faster in both directions.
    for p in [Phase::Dispatch, Phase::Combine] {
        let (cb, ce) = (rb.phase_cycles(p), re.phase_cycles(p));
        assert!(ce * 4 < cb * 3, "{p:?}: ER {ce} cycles vs baseline {cb}");
    }
    // All-reduce: the entwined two-hop rings take longer than baseline's one-hop rings.
    let (ab, ae) = (rb.phase_cycles(Phase::AllReduce), re.phase_cycles(Phase::AllReduce));
    assert!(ae > ab, "all-reduce ER {ae} vs baseline {ab}");
    assert!(pe.a2a_hops * 2 == pb.a2a_hops || (pe.a2a_hops as f64) < pb.a2a_hops as f64 * 0.6, "hop sums ER {} baseline {}", pe.a2a_hops, pb.a2a_hops);
}

#[test]
fn er_links_are_complementary_hot_and_cold() {
    let c = example(MappingKind::Er);
    let (_, mp, prog) = setup(&c, "deepseek-v3");
    let (r, _) = run(&c, &prog, 1, true);
    let links = classify_links(&c, &r);
    let inter_ftd = |l: &hw::wafer::LinkUse| mp.ftd_of[l.from as usize] != mp.ftd_of[l.to as usize];
    // All-to-all stays inside the FTDs: the links between FTDs are idle in dispatch and combine.
    for l in links.iter().filter(|l| inter_ftd(l)) {
        assert_eq!(l.heat.dispatch, Heat::Idle, "dispatch on inter-FTD link {}->{}", l.from, l.to);
        assert_eq!(l.heat.combine, Heat::Idle, "combine on inter-FTD link {}->{}", l.from, l.to);
    }
    // All-reduce: the hot links are the ones between FTDs; intra-FTD links carry less.
    let max_intra = links.iter().filter(|l| !inter_ftd(l)).map(|l| l.flits.allreduce).max().unwrap();
    let min_inter = links.iter().filter(|l| inter_ftd(l)).map(|l| l.flits.allreduce).min().unwrap();
    assert!(max_intra < min_inter, "all-reduce: intra-FTD max {max_intra} vs inter-FTD min {min_inter}");
    for l in links.iter().filter(|l| !inter_ftd(l)) {
        assert_ne!(l.heat.allreduce, Heat::Hot, "intra-FTD link {}->{} hot in all-reduce", l.from, l.to);
    }
}

#[test]
fn her_runs_on_two_by_two_wafers() {
    let c = WaferCfg { die_cols: 4, die_rows: 4, wafers_x: 2, wafers_y: 2, tp: 16, dp: 4, mapping: MappingKind::Her, tokens_per_group: 64, micro_batches: 2, ..WaferCfg::default() };
    let (_, mp, prog) = setup(&c, "qwen3-235b");
    assert!(mp.ftds_disjoint());
    let (r, w) = run(&c, &prog, 2, true);
    check_conservation(&prog, &r, &w);
    // HER confines the all-to-all to each wafer: no dispatch or combine flit crosses a border.
    for l in classify_links(&c, &r).iter().filter(|l| l.cross_wafer) {
        assert_eq!(l.flits.dispatch + l.flits.combine, 0, "all-to-all crossed wafers on {}->{}", l.from, l.to);
    }
}

fn fingerprint(r: &WaferRun) -> (u64, Vec<hw::wafer::die::DieTimes>, Vec<[[u64; 5]; 5]>, hw::wafer::KernelBusy) {
    (r.layer_cycles, r.times.clone(), r.link_flits.clone(), r.kernel_busy)
}

#[test]
fn threads_and_fast_forward_do_not_change_results() {
    let c = WaferCfg { tokens_per_group: 32, micro_batches: 2, ..example(MappingKind::Er) };
    let (_, _, prog) = setup(&c, "qwen3-235b");
    let (a, _) = run(&c, &prog, 1, false);
    let (b, _) = run(&c, &prog, 1, true);
    let (d, _) = run(&c, &prog, 2, true);
    let (e, _) = run(&c, &prog, 4, false);
    assert_eq!(fingerprint(&a), fingerprint(&b));
    assert_eq!(fingerprint(&a), fingerprint(&d));
    assert_eq!(fingerprint(&a), fingerprint(&e));
    assert!(b.evaluated < a.evaluated, "fast-forward skipped nothing ({} vs {})", b.evaluated, a.evaluated);
}

#[test]
fn bad_configs_are_refused_with_the_field() {
    let e = |c: WaferCfg| c.validate().unwrap_err().to_string();
    assert!(e(WaferCfg { tp: 3, dp: 5, ..WaferCfg::default() }).contains("`tp`"));
    assert!(e(WaferCfg { tp: 4, dp: 3, ..WaferCfg::default() }).contains("`dp`"));
    assert!(e(WaferCfg { micro_batches: 0, ..WaferCfg::default() }).contains("micro_batches"));
    assert!(e(WaferCfg { link_bytes_per_cycle: 1, ..WaferCfg::default() }).contains("link_bytes_per_cycle"));
    assert!(e(WaferCfg { die: hw::wafer::DieCfg { hbm_tbps: 0.0, ..Default::default() }, ..WaferCfg::default() }).contains("die.hbm_tbps"));
    let her1 = map(MappingKind::Her, WaferCfg::default().geom(), 4, 4, true).unwrap_err();
    assert_eq!(her1.field, "mapping");
}

/// Every (cols, rows, TP, mapping, all-gather) of meshes up to 4×4 that the mapping accepts:
/// the proptest below draws from this list, so every case runs a wafer (none returns early on
/// a shape the mapping refuses).
fn mappable_shapes() -> Vec<(u32, u32, u32, MappingKind, bool)> {
    let mut v = Vec::new();
    for cols in 1..=4u32 {
        for rows in 1..=4u32 {
            let dies = cols * rows;
            for tp in (1..=dies).filter(|t| dies % t == 0) {
                for kind in [MappingKind::Baseline, MappingKind::Er] {
                    for ag in [false, true] {
                        let c = WaferCfg { die_cols: cols, die_rows: rows, tp, dp: dies / tp, mapping: kind, all_gather: ag, ..WaferCfg::default() };
                        if map(c.mapping, c.geom(), c.tp, c.dp, c.all_gather).is_ok() {
                            v.push((cols, rows, tp, kind, ag));
                        }
                    }
                }
            }
        }
    }
    // Both mappings, both all-gather settings and non-square meshes are in the draw.
    assert!(v.iter().any(|s| s.3 == MappingKind::Er) && v.iter().any(|s| s.3 == MappingKind::Baseline));
    assert!(v.iter().any(|s| s.4) && v.iter().any(|s| !s.4) && v.iter().any(|s| s.0 != s.1));
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Any small mesh, TP and mapping the mapping accepts: the layer completes (no watchdog),
    /// every flit arrives, and two threads give the serial result.
    #[test]
    fn small_wafers_complete_and_conserve(shape in prop::sample::select(mappable_shapes()), mbs in 1u32..=3, seed in 1u64..1000) {
        let (cols, rows, tp, mapping, ag) = shape;
        let dies = cols * rows;
        let c = WaferCfg { die_cols: cols, die_rows: rows, tp, dp: dies / tp, mapping, all_gather: ag, tokens_per_group: 8, micro_batches: mbs, seed, ..WaferCfg::default() };
        let m = model_by_name("olmoe-1b-7b").unwrap();
        let mp = map(c.mapping, c.geom(), c.tp, c.dp, c.all_gather).unwrap();
        let routing = generated_routing(&m, c.dp, c.tokens_per_group, 1.0, seed).unwrap();
        let prog = build(&c, &m, &mp, &routing);
        let (a, w) = run(&c, &prog, 1, true);
        check_conservation(&prog, &a, &w);
        let (b, _) = run(&c, &prog, 2, true);
        prop_assert_eq!(fingerprint(&a), fingerprint(&b));
    }
}

/// The CL mapping controller decides exactly what the FL mapping decides: every table, for
/// every single-wafer mesh up to 8×8, every TP dividing the dies, baseline and ER (where
/// defined), and HER on multi-wafer grids; it costs one cycle per shape candidate, ring cell
/// and die.
#[test]
fn mapping_controller_equals_fl() {
    use hw::wafer::mapping::MappingCtrlCl;
    use sched::wafer::WaferGeom;
    let mut checked = 0;
    let mut geoms: Vec<WaferGeom> = Vec::new();
    for c in 1..=8 {
        for r in 1..=8 {
            geoms.push(WaferGeom::single(c, r));
        }
    }
    for (wx, wy, c, r) in [(2, 2, 4, 4), (2, 1, 4, 4), (2, 2, 8, 8), (1, 2, 6, 6), (3, 1, 2, 4)] {
        geoms.push(WaferGeom { wafers_x: wx, wafers_y: wy, die_cols: c, die_rows: r });
    }
    for g in geoms {
        let dies = g.dies();
        for tp in (1..=dies).filter(|t| dies % t == 0) {
            for kind in MappingKind::ALL {
                for ag in [true, false] {
                    let fl = map(kind, g, tp, dies / tp, ag);
                    let cl = MappingCtrlCl::new(kind, g, tp, dies / tp, ag);
                    match (fl, cl) {
                        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                        (Ok(fl), Ok(cl)) => {
                            let (m, cycles) = cl.run();
                            let s = |m: &Mapping| serde_json::to_string(m).unwrap();
                            assert_eq!(s(&m), s(&fl), "{g:?} tp={tp} {kind:?}");
                            for h in 0..dies {
                                for grp in 0..fl.dp {
                                    for sl in 0..tp {
                                        assert_eq!(m.holder(h, grp, sl), fl.holder(h, grp, sl));
                                    }
                                }
                            }
                            assert!(cycles >= dies as u64 && cycles <= 3 * dies as u64 + hw::wafer::mapping::SHAPE_CYCLES as u64 * tp.max(dies / tp) as u64 + 1, "{cycles} cycles");
                            checked += 1;
                        }
                        (a, b) => panic!("{g:?} tp={tp} {kind:?}: FL {:?} vs CL {:?}", a.is_ok(), b.is_ok()),
                    }
                }
            }
        }
    }
    assert!(checked > 500, "{checked} mappings checked");
}

/// Functional mode: the all-reduce's values on every die, every dispatched token and every
/// expert output brought back equal the FL reference — for baseline, ER and HER, with and
/// without all-gather, several micro-batches; and the timing equals the timing-mode run.
#[test]
fn functional_values_match_fl() {
    let cases = [
        WaferCfg { tokens_per_group: 16, micro_batches: 2, ..example(MappingKind::Er) },
        WaferCfg { tokens_per_group: 16, micro_batches: 3, ..example(MappingKind::Baseline) },
        WaferCfg { tokens_per_group: 12, micro_batches: 2, all_gather: false, ..example(MappingKind::Er) },
        WaferCfg { die_cols: 3, die_rows: 2, tp: 2, dp: 3, tokens_per_group: 10, micro_batches: 2, ..example(MappingKind::Baseline) },
        WaferCfg { die_cols: 2, die_rows: 2, wafers_x: 2, wafers_y: 1, tp: 2, dp: 4, tokens_per_group: 8, micro_batches: 2, ..example(MappingKind::Her) },
    ];
    for c in cases {
        let (_, _, prog) = setup(&c, "olmoe-1b-7b");
        let mut w = Wafer::new_with(&c, &prog, 2, true).unwrap();
        let r = simulate(&mut w, &c, &opts(2, true), WaveEnd::Layer).unwrap();
        let rep = hw::wafer::functional::check(&prog, &w).unwrap_or_else(|e| panic!("{:?} ag={}: {e}", c.mapping, c.all_gather));
        assert!(rep.chunks_checked > 0 && rep.tokens_checked > 0 && rep.outputs_checked == rep.tokens_checked, "{rep:?}");
        let (t, _) = run(&c, &prog, 1, true);
        assert_eq!(fingerprint(&r), fingerprint(&t), "functional mode changed the timing");
    }
}

fn vcd_of(c: &WaferCfg, prog: &LayerProgram, threads: usize, ff: bool, path: &std::path::Path) -> Vec<u8> {
    let mut w = Wafer::new(c, prog, threads).unwrap();
    let o = RunOptions { waves: Some(WaveSink::vcd(path)), ..opts(threads, ff) };
    simulate(&mut w, c, &o, WaveEnd::Layer).unwrap();
    std::fs::read(path).unwrap()
}

/// Waveforms: the same bytes serial, parallel and without fast-forward; the scopes follow
/// `top.wafer.w_I_J.d_R_C`; the link checker passes on ER and fails on a dump where a link
/// the mapping marks idle carries dispatch traffic.
#[test]
fn waveforms_are_deterministic_and_checked() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("wafer-waves");
    std::fs::create_dir_all(&dir).unwrap();
    let c = WaferCfg { tokens_per_group: 16, micro_batches: 2, ..example(MappingKind::Er) };
    let (_, _, prog) = setup(&c, "qwen3-235b");
    let a = vcd_of(&c, &prog, 1, true, &dir.join("a.vcd"));
    let b = vcd_of(&c, &prog, 2, true, &dir.join("b.vcd"));
    let n = vcd_of(&c, &prog, 1, false, &dir.join("n.vcd"));
    assert!(a == b && a == n, "waveform bytes differ between serial, parallel and no fast-forward");
    let text = String::from_utf8_lossy(&a);
    for s in ["scope module wafer", "scope module w_0_0", "scope module d_3_2", "scope module dma", "scope module map", "link_e"] {
        assert!(text.contains(s), "no `{s}` in the VCD");
    }
    let checks = waves::check_package(&dir.join("a.vcd")).unwrap();
    let l = checks.iter().find(|r| r.name == "links_idle_as_mapped").expect("the wafer checker ran");
    assert!(l.ok, "{}", l.detail);
    // A hand-made dump: link_e of a die carries class 2 (dispatch) at 5 ns while its idle mask
    // has the dispatch bit.
    let decls = vec![
        waves::SignalDecl::new(["top", "wafer", "w_0_0", "d_0_0", "link_e"], "class", 3),
        waves::SignalDecl::new(["top", "wafer", "w_0_0", "d_0_0", "map", "link_e"], "idle", 4),
    ];
    let bad = dir.join("bad.vcd");
    let mut w = waves::WaveWriter::create(&bad, waves::WaveFormat::Vcd, 1000, &decls, &waves::WaveFilter::default()).unwrap();
    w.change(0, 1, 0b110).unwrap();
    w.change(3, 0, 1).unwrap();
    w.change(4, 0, 0).unwrap();
    w.change(5, 0, 2).unwrap();
    w.change(6, 0, 0).unwrap();
    w.finish(10).unwrap();
    let checks = waves::check_package(&bad).unwrap();
    let l = checks.iter().find(|r| r.name == "links_idle_as_mapped").unwrap();
    assert!(!l.ok && l.detail.contains("dispatch") && l.detail.contains("d_0_0.link_e"), "{}", l.detail);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// The NI-Balancer's decision unit (CL) decides exactly what Algorithm 1's FL decides —
    /// moves, final placement, heats (bit for bit), replica counts and slots — under both
    /// cold rules, with ties (integer loads) and replicas already placed.
    #[test]
    fn ni_balancer_controller_equals_fl(cols in 1u32..=4, rows in 1u32..=4, experts in 1usize..24, seed in any::<u64>(), slots_max in 0u32..4, heat_after in any::<bool>(), ints in any::<bool>()) {
        use hw::wafer::balancer::NiBalancerCl;
        use sched::balance::ni::{topo_balance, ColdRule};
        use sched::wafer::WaferGeom;
        let geom = WaferGeom::single(cols, rows);
        let dies = (cols * rows) as usize;
        let mut x = seed | 1;
        let mut rnd = |n: u64| { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x % n.max(1) };
        let load: Vec<f64> = (0..experts).map(|_| if ints { rnd(8) as f64 } else { rnd(1_000_000) as f64 / 997.0 }).collect();
        let mut placement = vec![Vec::new(); dies];
        for e in 0..experts as u32 {
            placement[rnd(dies as u64) as usize].push(e);
            if rnd(4) == 0 {
                let d = rnd(dies as u64) as usize;
                if !placement[d].contains(&e) {
                    placement[d].push(e);
                }
            }
        }
        let slots: Vec<u32> = (0..dies).map(|_| rnd(slots_max as u64 + 1) as u32).collect();
        let rule = if heat_after { ColdRule::HeatAfter } else { ColdRule::ShareBefore };
        let fl = topo_balance(&load, &placement, &slots, &geom, rule).unwrap();
        let (cl, cycles) = NiBalancerCl::new(&load, &placement, &slots, geom, rule).run();
        prop_assert_eq!(&cl.moves, &fl.moves);
        prop_assert_eq!(&cl.placement, &fl.placement);
        prop_assert_eq!(&cl.num, &fl.num);
        prop_assert_eq!(&cl.slots_left, &fl.slots_left);
        prop_assert!(cl.heats.iter().zip(&fl.heats).all(|(a, b)| a.to_bits() == b.to_bits()), "heats {:?} vs {:?}", cl.heats, fl.heats);
        // Each move costs at least a scan of the devices for the hottest and one for the
        // destination.
        prop_assert!(cycles >= 2 * dies as u64 * fl.moves.len() as u64, "{} cycles for {} moves", cycles, fl.moves.len());
    }
}

/// The MoE-GPS Distribution-Only predictor (CL) by hand: a window of 2, 4-bit counters.
/// Iterations [3, 20, 0] (20 saturates to 15), [1, 1, 1], [5, 0, 0] (the first leaves the
/// window): sums [6, 1, 1]; each iteration costs one cycle per expert; a busy predictor and a
/// wrong count vector are refused.
#[test]
fn dist_only_predictor_cl_by_hand() {
    use hw::wafer::predictor::DistOnlyPredictorCl;
    use sched::balance::gps::DistOnlyCfg;
    let mut p = DistOnlyPredictorCl::new(DistOnlyCfg { window: 2, counter_bits: 4 }, 3).unwrap();
    assert_eq!(p.predicted_loads(9), vec![3, 3, 3], "uniform before any token");
    assert_eq!(p.observe(&[3, 20, 0]).unwrap(), 3);
    assert_eq!(p.counts(), &[3, 15, 0]);
    p.observe(&[1, 1, 1]).unwrap();
    assert_eq!(p.counts(), &[4, 16, 1]);
    p.observe(&[5, 0, 0]).unwrap();
    assert_eq!(p.counts(), &[6, 1, 1]);
    assert_eq!(p.window_slots(), vec![vec![1, 1, 1], vec![5, 0, 0]]);
    assert_eq!(p.predicted_loads(8), vec![6, 1, 1]);
    assert_eq!(p.cycles, 9);
    p.start(&[1, 1, 1]).unwrap();
    assert_eq!(p.start(&[1, 1, 1]).unwrap_err().field, "iteration_expert_counts");
    p.step();
    let mut sig = Vec::new();
    p.sample(&mut sig);
    let mut decl = Vec::new();
    p.declare(&["top".to_string()], &mut decl);
    assert_eq!(sig.len(), decl.len());
    assert_eq!(sig[..5], [1, 1, 1, 2, 1], "state, cursor, head, filled, wr_count");
    assert!(DistOnlyPredictorCl::new(DistOnlyCfg { window: 0, counter_bits: 4 }, 3).is_err());
    let mut q = DistOnlyPredictorCl::new(DistOnlyCfg::default(), 3).unwrap();
    assert_eq!(q.observe(&[1, 2]).unwrap_err().field, "iteration_expert_counts");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// The Distribution-Only predictor's registers (CL, one expert per cycle) hold exactly the
    /// FL's Eq. 1 window counts after every iteration — window slots, saturation, the oldest
    /// iteration leaving — and predict the same loads.
    #[test]
    fn dist_only_predictor_cl_equals_fl(window in 1u32..6, bits in 1u8..=12, experts in 1usize..12, iters in prop::collection::vec(prop::collection::vec(0u64..5000, 12), 0..14), tokens in 0u64..10_000) {
        use hw::wafer::predictor::DistOnlyPredictorCl;
        use sched::balance::gps::{DistOnlyCfg, DistOnlyPredictor};
        let cfg = DistOnlyCfg { window, counter_bits: bits };
        let mut fl = DistOnlyPredictor::new(cfg, experts).unwrap();
        let mut cl = DistOnlyPredictorCl::new(cfg, experts).unwrap();
        for (i, it) in iters.iter().enumerate() {
            let counts = &it[..experts];
            fl.observe(counts).unwrap();
            let c = cl.observe(counts).unwrap();
            prop_assert_eq!(c, experts as u64);
            prop_assert_eq!(cl.counts(), fl.counts());
            prop_assert_eq!(cl.window_slots().len(), fl.observed());
            let lo = (i + 1).saturating_sub(window as usize);
            let expect: Vec<Vec<u64>> = iters[lo..=i].iter().map(|x| x[..experts].iter().map(|&v| v.min((1 << bits) - 1)).collect()).collect();
            prop_assert_eq!(cl.window_slots(), expect);
        }
        prop_assert_eq!(cl.predicted_loads(tokens), fl.predicted_loads(tokens));
    }
}
