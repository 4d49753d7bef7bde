//! `NiBalancerRtl` against `NiBalancerCl` and `NiTriggerRtl` against `TriggerCl` in lockstep.
//!
//! Decision unit: random tables on a small build (8 devices, 24 experts, 8 replicas: L = 840)
//! — loads drawn from a few multiples (so heats, shares and the cold checks tie often) or at
//! random, random home placements plus replicas, 0..=3 shadow slots, random mesh shapes, both
//! cold rules. Every cycle: the CL's traced registers (state, hottest, source, destination,
//! moves), the cycle count, every device's heat (the block's exact heat / L against the CL's
//! f64) and free slots. At the end: the moves, the placement, `Num`, the slots, and the final
//! heats recomputed exactly from the CL's final placement (rationals, independent of both).
//! Runs the stand-in refuses (an exact tie with an inexact f64 side) are counted and must be
//! rare; a constructed inexact tie is refused by name.
//!
//! Trigger: random device loads (equal ones included), α from a set of decimals, Δt vs β on
//! both sides; the done flag and cycle count every cycle, the decision at the end; an exact
//! tie with α ≠ 0 is refused, and only then.

use hw::wafer::balancer::{run_decision, run_trigger, BalState, NiBalancerCl, TriggerCl};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rtl::wafer::ni_balancer_swap::{alpha_decimal, ni_decision_rtl, ni_trigger_rtl, NiDecisionDriver, NiTables};
use sched::balance::ni::{ColdRule, TriggerCfg};
use sched::wafer::WaferGeom;

const D: usize = 8;
const E: usize = 24;
const R: usize = 8;
type Drv = NiDecisionDriver<D, E, R>;

fn state_code(s: BalState) -> u64 {
    [BalState::Hottest, BalState::Src, BalState::Cold, BalState::ColdSum, BalState::Copy, BalState::Reheat, BalState::Done].iter().position(|&x| x == s).unwrap() as u64
}

struct Case {
    load: Vec<f64>,
    placement: Vec<Vec<u32>>,
    slots: Vec<u32>,
    geom: WaferGeom,
    rule: ColdRule,
}

fn random_case(rng: &mut Xoshiro256PlusPlus) -> Case {
    let d = rng.gen_range(1..=D);
    let e = rng.gen_range(1..=E);
    // Loads: a few multiples of a base (ties), or spread.
    let tied = rng.gen_bool(0.5);
    let base = rng.gen_range(1..=12u64);
    let load: Vec<f64> = (0..e).map(|_| if tied { (base * rng.gen_range(0..=4u64)) as f64 } else { rng.gen_range(0..5000u64) as f64 }).collect();
    let mut placement = vec![Vec::new(); d];
    for x in 0..e as u32 {
        placement[rng.gen_range(0..d)].push(x);
    }
    // Some replicas already placed.
    for _ in 0..rng.gen_range(0..=e / 2) {
        let (x, dev) = (rng.gen_range(0..e as u32), rng.gen_range(0..d));
        if !placement[dev].contains(&x) {
            placement[dev].push(x);
        }
    }
    let slots = (0..d).map(|_| rng.gen_range(0..=3u32)).collect();
    let cols = rng.gen_range(1..=d as u32);
    let rows = (d as u32).div_ceil(cols);
    let rule = if rng.gen_bool(0.5) { ColdRule::HeatAfter } else { ColdRule::ShareBefore };
    Case { load, placement, slots, geom: WaferGeom::single(cols, rows), rule }
}

/// Σ Load_e · L / Num_e over device d's experts, from a placement (exact; independent of both).
fn exact_heat(load: &[f64], placement: &[Vec<u32>], d: usize, l: u64) -> u64 {
    placement[d]
        .iter()
        .map(|&x| {
            let n = placement.iter().filter(|p| p.contains(&x)).count() as u64;
            load[x as usize] as u64 * l / n
        })
        .sum()
}

/// Runs one case in lockstep; `Ok(false)`: the stand-in refused (a tie), checked as far as it
/// got.
fn lockstep(c: &Case) -> Result<bool, String> {
    let mut cl = NiBalancerCl::new(&c.load, &c.placement, &c.slots, c.geom, c.rule);
    let t = NiTables::new(&c.load, &c.placement, &c.slots, c.geom, c.rule, (D, E, R)).map_err(|e| e.to_string())?;
    let mut drv = Drv::load(t);
    let l = Drv::SCALE;
    let cl_done = |cl: &NiBalancerCl| cl.state == BalState::Done || cl.max_moves() == 0;
    let mut cycle = 0u64;
    loop {
        let u = &drv.uut;
        let at = format!("cycle {cycle}");
        assert_eq!(u.state.val().to_u64(), state_code(cl.state), "{at}: state");
        assert_eq!(u.hot.val().to_u64(), cl.hot as u64, "{at}: hot");
        assert_eq!(u.src.val().to_u64(), cl.src.map_or(0, |x| x as u64 + 1), "{at}: src");
        assert_eq!(u.dst.val().to_u64(), cl.dst.map_or(0, |(_, x)| x as u64 + 1), "{at}: dst");
        assert_eq!(u.moves.val().to_u64(), cl.moves.len() as u64, "{at}: moves");
        assert_eq!(u.cycles.val().to_u64(), cl.cycles, "{at}: cycles");
        assert_eq!(u.done.val(), cl_done(&cl), "{at}: done");
        for d in 0..c.placement.len() {
            let exact = drv.heats[d] as f64 / l as f64;
            assert!((exact - cl.heats[d]).abs() <= 1e-9 * cl.heats[d].abs().max(1.0), "{at}: heat of device {d}: exact {exact} vs CL {}", cl.heats[d]);
            assert_eq!(drv.tables.slots_now(d, &drv.moves), cl.slots[d] as u64, "{at}: slots of device {d}");
        }
        assert_eq!(drv.moves, cl.moves, "{at}: the moves");
        if cl_done(&cl) {
            break;
        }
        cl.step();
        if let Err(e) = drv.edge() {
            let e = e.to_string();
            assert!(e.contains("tie"), "{at}: refused other than by a tie: {e}");
            return Ok(false);
        }
        cycle += 1;
    }
    let (plan, cycles) = drv.plan();
    let (cplan, ccycles) = cl.clone().run();
    assert_eq!(cycles, ccycles, "cycles");
    assert_eq!(plan.moves, cplan.moves, "moves");
    assert_eq!(plan.placement, cplan.placement, "placement");
    assert_eq!(plan.num, cplan.num, "num");
    assert_eq!(plan.slots_left, cplan.slots_left, "slots");
    for d in 0..c.placement.len() {
        assert_eq!(drv.heats[d], exact_heat(&c.load, &cplan.placement, d, l), "final exact heat of device {d}");
    }
    Ok(true)
}

#[test]
fn decision_unit_lockstep_random_tables() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(23);
    let (mut ran, mut refused, mut rules, mut moved, mut ties) = (0, 0, [0; 2], 0, 0);
    for i in 0..1000 {
        let c = random_case(&mut rng);
        rules[(c.rule == ColdRule::HeatAfter) as usize] += 1;
        let tied = c.load.iter().filter(|&&x| x > 0.0).count() > c.load.iter().filter(|&&x| x > 0.0).map(|&x| x as u64).collect::<std::collections::BTreeSet<_>>().len();
        ties += tied as u32;
        match lockstep(&c) {
            Ok(true) => {
                ran += 1;
                moved += NiBalancerCl::new(&c.load, &c.placement, &c.slots, c.geom, c.rule).run().0.moves.len();
            }
            Ok(false) => refused += 1,
            Err(e) => panic!("case {i}: {e}"),
        }
    }
    eprintln!("{ran} cases in lockstep, {refused} refused (inexact ties), rules {rules:?}, {moved} moves, {ties} cases with tied loads");
    assert!(rules[0] > 50 && rules[1] > 50);
    assert!(moved > 200, "too few moves exercised: {moved}");
    // Refusals come from tied loads that are not multiples of the replica counts (thirds...).
    assert!(refused * 5 < ran, "{refused} refusals of {} cases", ran + refused);
}

/// The stand-in behind `NiDecisionUnit` gives the CL's plan and waveform samples on the swap
/// build (64 × 256 × 16).
#[test]
fn swap_build_equals_cl_through_the_trait() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    let mut ran = 0;
    for _ in 0..12 {
        let c = random_case(&mut rng);
        let cl = run_decision(Box::new(NiBalancerCl::new(&c.load, &c.placement, &c.slots, c.geom, c.rule)), None).unwrap();
        match run_decision(ni_decision_rtl(&c.load, &c.placement, &c.slots, c.geom, c.rule).unwrap(), None) {
            Ok(rtl) => {
                assert_eq!(rtl.1, cl.1, "cycles");
                assert_eq!(rtl.0.moves, cl.0.moves);
                assert_eq!(rtl.0.placement, cl.0.placement);
                assert_eq!(rtl.0.num, cl.0.num);
                assert_eq!(rtl.0.slots_left, cl.0.slots_left);
                ran += 1;
            }
            Err(e) => assert!(e.to_string().contains("tie"), "{e}"),
        }
    }
    assert!(ran >= 8, "{ran} of 12 ran");
}

#[test]
fn exact_ties_with_dyadic_terms_run() {
    // Four devices with heat 2 each from shares 4/2 and 1 + 1: every hottest comparison ties,
    // every term is exact in binary64, so the stand-in runs to the CL's result.
    let geom = WaferGeom::single(2, 2);
    let placement = vec![vec![0], vec![0], vec![1, 2], vec![3]];
    let slots = vec![1, 1, 1, 1];
    let load = vec![4.0, 1.0, 1.0, 2.0];
    for rule in [ColdRule::HeatAfter, ColdRule::ShareBefore] {
        let c = Case { load: load.clone(), placement: placement.clone(), slots: slots.clone(), geom, rule };
        assert_eq!(lockstep(&c), Ok(true), "{rule:?}");
    }
}

#[test]
fn thirds_tie_is_refused() {
    // Expert 0 (load 1) on devices 0, 1, 2: share 1/3 (inexact in binary64); expert 1 (load 2)
    // on devices 0, 1, 2 too: 2/3. Devices 0..2 have heat 1/3 + 2/3 = 1 exactly, device 3
    // holds expert 2 with load 1: heat 1. The hottest scan compares 1 (inexact sum) with 1.
    let geom = WaferGeom::single(2, 2);
    let placement = vec![vec![0, 1], vec![0, 1], vec![0, 1], vec![2]];
    let slots = vec![1, 1, 1, 1];
    let load = vec![1.0, 2.0, 1.0];
    let t = NiTables::new(&load, &placement, &slots, geom, ColdRule::HeatAfter, (D, E, R)).unwrap();
    let mut drv = Drv::load(t);
    let mut err = None;
    while !drv.uut.done.val() {
        if let Err(e) = drv.edge() {
            err = Some(e.to_string());
            break;
        }
    }
    let e = err.expect("an inexact tie must be refused");
    assert!(e.contains("tie") && e.contains("inexact"), "{e}");
}

#[test]
fn refusals_name_the_cause() {
    let geom = WaferGeom::single(2, 2);
    let p = vec![vec![0], vec![1]];
    let err = |load: &[f64], slots: &[u32]| NiTables::new(load, &p, slots, geom, ColdRule::HeatAfter, (D, E, R)).unwrap_err().to_string();
    assert!(err(&[1.5, 2.0], &[1, 1]).contains("load"));
    assert!(err(&[-1.0, 2.0], &[1, 1]).contains("load"));
    assert!(err(&[4e9, 4e9], &[1, 1]).contains("2^32"));
    assert!(err(&[1.0, 2.0], &[1 << 16, 1]).contains("shadow_slots"));
    // Σ load · L · (2T + 4) ≥ 2^52 with the swap build's L = 720 720.
    let big = NiTables::new(&[4.0e9, 1.0], &p, &[64, 64], geom, ColdRule::HeatAfter, (64, 256, 16)).unwrap_err().to_string();
    assert!(big.contains("precision"), "{big}");
    let many = NiTables::new(&vec![1.0; 300], &[(0..300).collect()], &[1], geom, ColdRule::HeatAfter, (64, 256, 16)).unwrap_err().to_string();
    assert!(many.contains("experts"), "{many}");
}

#[test]
fn replicas_beyond_the_scale_are_refused() {
    // The exported build (8 devices, 8 experts, R = 4: L = 12): one hot expert copied until a
    // fifth replica's share (L / 5) is needed.
    let geom = WaferGeom::single(4, 2);
    let placement = vec![vec![0], vec![], vec![], vec![], vec![], vec![], vec![], vec![]];
    let slots = vec![0, 1, 1, 1, 1, 1, 1, 1];
    // 120 / n is exact for n ≤ 5 (the hosts' heats tie, exactly, on the way).
    let t = NiTables::new(&[120.0], &placement, &slots, geom, ColdRule::HeatAfter, (8, 8, 4)).unwrap();
    let mut drv = NiDecisionDriver::<8, 8, 4>::load(t);
    let mut err = None;
    while !drv.uut.done.val() {
        if let Err(e) = drv.edge() {
            err = Some(e.to_string());
            break;
        }
    }
    let e = err.expect("a fifth replica must be refused");
    assert!(e.contains("replicas"), "{e}");
    assert_eq!(drv.moves.len(), 3, "three copies (4 replicas) before the refusal");
}

fn trigger_case(rng: &mut Xoshiro256PlusPlus) -> (TriggerCfg, Vec<f64>, u64) {
    let n = rng.gen_range(0..=10);
    // Equal loads, small loads (exact ties with α happen), or spread ones.
    let mode = rng.gen_range(0..3);
    let v = rng.gen_range(0..1000u64);
    let loads: Vec<f64> = (0..n).map(|_| [v, rng.gen_range(0..=4u64), rng.gen_range(0..1000u64)][mode] as f64).collect();
    let alphas = [0.0, 0.1, 0.2, 0.25, 0.5, 1.0, 1.5, 0.05, 3.0];
    let alpha = if rng.gen_bool(0.5) { alphas[rng.gen_range(0..alphas.len())] } else { rng.gen_range(0..300u64) as f64 / 100.0 };
    let beta = rng.gen_range(0..4u64);
    let since = rng.gen_range(0..6u64);
    (TriggerCfg { alpha, beta_cycles: beta }, loads, since)
}

#[test]
fn trigger_lockstep_random_loads() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    let (mut fired, mut quiet, mut ties) = (0, 0, 0);
    for _ in 0..2000 {
        let (cfg, loads, since) = trigger_case(&mut rng);
        let layers = vec![loads.clone()];
        let mut cl = TriggerCl::new(&cfg, &layers, since);
        let mut rtl = ni_trigger_rtl(&cfg, &layers, since).unwrap();
        // An exact tie, computed here from the integers (α = a / P).
        let (a, p) = alpha_decimal(cfg.alpha).unwrap();
        let (sum, max, n) = (loads.iter().sum::<f64>() as u128, loads.iter().fold(0.0f64, |m, &x| m.max(x)) as u128, loads.len() as u128);
        let tie = since > cfg.beta_cycles && sum > 0 && max * n * p as u128 == sum * (p + a) as u128;
        let mut refused = false;
        while !cl.done {
            assert!(!rtl.done());
            cl.step();
            if let Err(e) = rtl.step() {
                assert!(tie && a != 0, "refused without an exact tie: {e}");
                refused = true;
                break;
            }
            assert_eq!(rtl.done(), cl.done);
        }
        if refused {
            ties += 1;
            continue;
        }
        assert!(!(tie && a != 0), "an exact tie with α ≠ 0 was not refused: {cfg:?} {loads:?}");
        let c = cl.clone().run();
        let r = rtl.finish().unwrap();
        assert_eq!(r, c, "{cfg:?} {loads:?} since {since}");
        if c.0 {
            fired += 1;
        } else {
            quiet += 1;
        }
    }
    eprintln!("trigger: {fired} fired, {quiet} quiet, {ties} exact ties refused");
    assert!(fired > 200 && quiet > 200 && ties > 0);
    // And through run_trigger.
    let cfg = TriggerCfg { alpha: 0.2, beta_cycles: 0 };
    let layers = vec![vec![10.0, 20.0, 30.0]];
    assert_eq!(run_trigger(ni_trigger_rtl(&cfg, &layers, 1).unwrap()).unwrap(), TriggerCl::new(&cfg, &layers, 1).run());
}

#[test]
fn trigger_refusals_name_the_cause() {
    let cfg = TriggerCfg { alpha: 0.2, beta_cycles: 0 };
    let e = |cfg: &TriggerCfg, l: Vec<Vec<f64>>| ni_trigger_rtl(cfg, &l, 5).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e(&cfg, vec![vec![1.0], vec![2.0]]).contains("layers"));
    assert!(e(&cfg, vec![vec![1.5, 2.0]]).contains("load"));
    assert!(e(&TriggerCfg { alpha: 0.1234567, beta_cycles: 0 }, vec![vec![1.0]]).contains("alpha"));
    assert!(e(&TriggerCfg { alpha: 0.123456, beta_cycles: 0 }, vec![vec![1e9, 1e9, 1e9, 1e9]]).contains("precision"));
    // Δt ≤ β: the loads are not read, nothing to refuse.
    assert!(ni_trigger_rtl(&cfg, &[vec![1.5]], 0).is_ok());
}

#[test]
fn heat_scale_and_multiplier() {
    use rust_hdl::prelude::*;
    assert_eq!([1, 2, 3, 4, 8, 16].map(rtl::wafer::ni_balancer::lcm_upto), [1, 2, 6, 12, 840, 720_720]);
    let mut uut = rtl::wafer::mul::Mul32Rtl::default();
    uut.connect_all();
    for (a, b) in [(0u64, 0u64), (1, 1), (0xffff_ffff, 0xffff_ffff), (0x1234_5678, 0x9abc_def0), (720_720, 262_144), (65_535, 65_537)] {
        uut.a.next = a.into();
        uut.b.next = b.into();
        rtl::cosim::settle(&mut uut).unwrap();
        assert_eq!(uut.p.val().to_u64(), a * b, "{a} · {b}");
    }
}
