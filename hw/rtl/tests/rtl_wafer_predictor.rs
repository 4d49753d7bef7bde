//! `DistOnlyPredictorRtl` against `DistOnlyPredictorCl` (and through it the FL
//! `DistOnlyPredictor`) in lockstep: random configurations, iterations started back to back or
//! after gaps, starts while busy (the CL refuses them, the block ignores them), counts that
//! saturate. Every cycle: state, cursor, head, filled, the write port (`wr_en`, `wr_addr` =
//! head · experts + cursor, `wr_expert`, `wr_count`, `wr_sum` = the CL's new sum), `done`, and
//! the sum read port at a random expert; after every iteration every sum. Then the stand-in
//! (`predictor_swap`) against the CL through `hw::wafer::predictor::DistOnlyModel`, and its
//! refusals.

mod common;

use hw::wafer::predictor::{dist_only_cl, DistOnlyPredictorCl, PredState};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rtl::wafer::predictor::DistOnlyPredictorSwapRtl;
use rtl::wafer::predictor_swap::{check_cfg, dist_only_factory, DistOnlyDriver};
use sched::balance::gps::DistOnlyCfg;

/// `cycles` cycles; `p_start` in percent per cycle; counts below `count_max`.
fn lockstep(experts: usize, window: u32, bits: u8, cycles: usize, seed: u64, p_start: u32, count_max: u64) {
    let cfg = DistOnlyCfg { window, counter_bits: bits };
    check_cfg(&cfg, experts).unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut cl = DistOnlyPredictorCl::new(cfg, experts).unwrap();
    let mut drv = DistOnlyDriver::new(&cfg, experts);
    let mut tr = common::LockstepTrace::named(&format!("dist_only_e{experts}_w{window}_b{bits}_seed{seed}"));
    let mut input = vec![0u64; experts];
    let mut iterations = 0;
    for c in 0..cycles {
        tr.cycle(c as u64);
        let start = rng.gen_range(0..100) < p_start;
        // The write port's expected address: the CL's (head, cursor) before the step.
        let (head, cursor) = (cl.regs.head as u64, cl.regs.cursor as u64);
        let busy = cl.busy();
        if start && !busy {
            input = (0..experts).map(|_| if rng.gen_bool(0.05) { rng.gen::<u32>() as u64 } else { rng.gen_range(0..count_max) }).collect();
            cl.start(&input).unwrap();
        } else if start {
            assert!(cl.start(&input).is_err(), "the CL refuses a start while busy");
        }
        let rtl_cursor = drv.uut.cursor.val().index();
        let count = input[rtl_cursor.min(experts - 1)];
        drv.edge(start, count);
        cl.step();
        let u = &drv.uut;
        let active = start || busy;
        tr.expect("state", 1, (cl.regs.state == PredState::Update) as u64, u.state.val() as u64);
        tr.expect("cursor", 32, cl.regs.cursor as u64, u.cursor.val().to_u64());
        tr.expect("head", 32, cl.regs.head as u64, u.head.val().to_u64());
        tr.expect("filled", 32, cl.regs.filled as u64, u.filled.val().to_u64());
        tr.expect("wr_en", 1, active as u64, u.wr_en.val() as u64);
        tr.expect("wr_count", 32, cl.regs.wr_count, u.wr_count.val().to_u64());
        let done = active && cl.regs.state == PredState::Idle;
        tr.expect("done", 1, done as u64, u.done.val() as u64);
        if active {
            tr.expect("wr_addr", 32, head * experts as u64 + cursor, u.wr_addr.val().to_u64());
            tr.expect("wr_expert", 32, cursor, u.wr_expert.val().to_u64());
            tr.expect("wr_sum", 32, cl.counts()[cursor as usize], u.wr_sum.val().to_u64());
        } else {
            tr.expect("wr_sum", 32, 0, u.wr_sum.val().to_u64());
        }
        let e = rng.gen_range(0..experts + 2);
        let want = cl.counts().get(e).copied().unwrap_or(0);
        let got = drv.read_sum(e);
        tr.expect("rd_sum", 32, want, got);
        if done {
            iterations += 1;
            for e in 0..experts {
                let got = drv.read_sum(e);
                tr.expect(&format!("sum_e{e}"), 32, cl.counts()[e], got);
            }
        }
    }
    // Enough iterations to fill and wrap the window (and evict from it) several times.
    assert!(iterations as u64 > 2 * window as u64, "{iterations} iterations for a window of {window}");
}

#[test]
fn gps_default_mixtral_10k_cycles() {
    // 8 experts, the gps window (16) and counter width (16), counts that saturate.
    lockstep(8, 16, 16, 10_000, 1, 60, 1 << 17);
}

#[test]
fn small_counters_and_windows() {
    lockstep(3, 1, 1, 3_000, 2, 50, 4);
    lockstep(1, 5, 4, 3_000, 3, 80, 40);
    lockstep(17, 2, 8, 10_000, 4, 100, 300);
}

#[test]
fn large_builds_olmoe_and_deepseek_v3() {
    lockstep(64, 8, 16, 10_000, 5, 70, 1 << 16);
    lockstep(256, 4, 16, 10_000, 6, 100, 2048);
    // 32-bit counters with a one-iteration window (the sum bound: 1 · (2^32 − 1) < 2^32).
    lockstep(5, 1, 32, 2_000, 7, 50, u32::MAX as u64);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]
    #[test]
    fn random_configurations(experts in 1usize..=40, window in 1u32..=20, bits in 1u8..=16, seed in any::<u64>(), p_start in 10u32..=100) {
        lockstep(experts, window, bits, 5_000, seed, p_start, 1 << 17);
    }
}

/// The stand-in behind `DistOnlyModel` gives the CL's samples and window sums every cycle of
/// an observe loop as the gps experiment runs it (start, steps while busy, one idle step).
#[test]
fn stand_in_equals_cl_through_the_trait() {
    let cfg = DistOnlyCfg { window: 16, counter_bits: 16 };
    for experts in [8usize, 64] {
        let mut cl = dist_only_cl(cfg, experts).unwrap();
        let mut rtl = dist_only_factory(cfg, experts).unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(experts as u64);
        for it in 0..40 {
            let counts: Vec<u64> = (0..experts).map(|_| rng.gen_range(0..5000)).collect();
            cl.start(&counts).unwrap();
            rtl.start(&counts).unwrap();
            assert!(rtl.start(&counts).is_err() && rtl.busy());
            let mut c = 0;
            loop {
                let busy = cl.busy();
                assert_eq!(busy, rtl.busy(), "iteration {it} cycle {c}");
                cl.step();
                rtl.step();
                let (mut a, mut b) = (Vec::new(), Vec::new());
                cl.sample(&mut a);
                rtl.sample(&mut b);
                assert_eq!(a, b, "iteration {it} cycle {c}");
                c += 1;
                if !busy {
                    break;
                }
            }
            assert_eq!(cl.counts(), rtl.counts());
            assert_eq!(cl.predicted_loads(4096), rtl.predicted_loads(4096));
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        cl.declare(&["top".into()], &mut a);
        rtl.declare(&["top".into()], &mut b);
        assert_eq!(a, b);
    }
}

#[test]
fn stand_in_refuses_what_it_was_not_built_for() {
    let ok = DistOnlyCfg { window: 16, counter_bits: 16 };
    let e = dist_only_factory(ok, DistOnlyPredictorSwapRtl::EXPERTS + 1).err().unwrap();
    assert_eq!(e.field, "experts");
    assert!(e.reason.contains("257 experts") && e.reason.contains("256"), "{}", e.reason);
    let e = dist_only_factory(DistOnlyCfg { window: 2048, counter_bits: 8 }, 256).err().unwrap();
    assert_eq!(e.field, "window");
    let e = dist_only_factory(DistOnlyCfg { window: 2, counter_bits: 32 }, 8).err().unwrap();
    assert_eq!(e.field, "counter_bits");
    // The FL's own checks come first.
    let e = dist_only_factory(DistOnlyCfg { window: 0, counter_bits: 16 }, 8).err().unwrap();
    assert_eq!(e.field, "window");
}
