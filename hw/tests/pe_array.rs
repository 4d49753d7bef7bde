//! PE array testbench: SCALE-Sim reference rows, CL == FL on random shapes, fast-forward
//! equality, config refusal, probe shape.

use hw::harness::{DomainClock, Probe, NEVER};
use hw::pkg::pe_array::{Dataflow, Gemm, PeArrayCfg, PeArrayCl, PeJob, Timing};
use proptest::prelude::*;
use sched::pkg::pe_array::{fold_plan_fl, gemm_cycles_fl};

/// shared/reference/scalesim/README.md on a 32×64 array: (M, K, N, dataflow, Total Cycles).
const REF: [(u32, u32, u32, Dataflow, u64); 12] = [
    (1, 2048, 96, Dataflow::Ws, 16255),
    (1, 2048, 96, Dataflow::Os, 4283),
    (16, 2048, 96, Dataflow::Ws, 18175),
    (16, 2048, 96, Dataflow::Os, 4283),
    (256, 2048, 96, Dataflow::Ws, 48895),
    (256, 2048, 96, Dataflow::Os, 34271),
    (16, 4096, 400, Dataflow::Ws, 127231),
    (16, 4096, 400, Dataflow::Os, 29329),
    (256, 4096, 400, Dataflow::Ws, 342271),
    (256, 4096, 400, Dataflow::Os, 234639),
    (16, 2048, 176, Dataflow::Ws, 27263),
    (16, 2048, 176, Dataflow::Os, 6425),
];

/// Issues `job` at tick `t0` (an edge) and steps every edge; returns (done tick, array).
fn run_every_edge(cfg: &PeArrayCfg, clk: DomainClock, t0: u64, job: PeJob) -> (u64, PeArrayCl) {
    let mut pe = PeArrayCl::new(cfg, clk).unwrap();
    let mut t = t0;
    let mut issue = Some(job);
    loop {
        if let Some(tag) = pe.eval(t, issue.take()) {
            assert_eq!(tag, job.tag);
            assert!(pe.ready());
            return (t, pe);
        }
        t = clk.edge_after(t);
    }
}

/// Same, visiting only the issue edge, `extra` intermediate edges and `next_event`.
fn run_fast_forward(cfg: &PeArrayCfg, clk: DomainClock, t0: u64, job: PeJob, extra: &[u64]) -> (u64, PeArrayCl) {
    let mut pe = PeArrayCl::new(cfg, clk).unwrap();
    assert_eq!(pe.eval(t0, Some(job)).is_some(), cfg.job_busy_cycles(&job) == 1);
    if cfg.job_busy_cycles(&job) == 1 {
        return (t0, pe);
    }
    let done = pe.next_event();
    let mut ticks: Vec<u64> = extra.iter().map(|&x| clk.next_edge(t0 + 1 + x % (done - t0))).collect();
    ticks.sort();
    ticks.dedup();
    for t in ticks {
        if t < done {
            assert_eq!(pe.eval(t, None), None);
        }
    }
    assert_eq!(pe.eval(done, None), Some(job.tag));
    assert_eq!(pe.next_event(), NEVER);
    (done, pe)
}

#[test]
fn every_reference_row_exact_both_dataflows() {
    for (m, k, n, df, cyc) in REF {
        let cfg = PeArrayCfg { dataflow: df, ..PeArrayCfg::default() };
        let job = PeJob::single(1, Gemm::new(m, k, n));
        let (done, pe) = run_every_edge(&cfg, DomainClock::UNIT, 0, job);
        assert_eq!(done, cyc, "{m}x{k}x{n} {df:?}");
        assert_eq!(pe.counters.mac_ops, m as u64 * k as u64 * n as u64);
        assert_eq!(pe.counters.busy_cycles, cyc + 1);
        let (ff, pe2) = run_fast_forward(&cfg, DomainClock::UNIT, 0, job, &[]);
        assert_eq!(ff, cyc);
        assert_eq!(pe2.counters, pe.counters);
    }
}

#[test]
fn double_buffered_never_slower_and_equal_for_one_fold() {
    for (m, k, n, df, cyc) in REF {
        let cfg = PeArrayCfg { dataflow: df, timing: Timing::DoubleBuffered, ..PeArrayCfg::default() };
        let (done, _) = run_fast_forward(&cfg, DomainClock::UNIT, 0, PeJob::single(1, Gemm::new(m, k, n)), &[]);
        assert!(done <= cyc);
    }
    let cfg = PeArrayCfg { dataflow: Dataflow::Ws, timing: Timing::DoubleBuffered, ..PeArrayCfg::default() };
    let (done, _) = run_every_edge(&cfg, DomainClock::UNIT, 0, PeJob::single(1, Gemm::new(5, 20, 60)));
    assert_eq!(done, gemm_cycles_fl(5, 20, 60, 32, 64, Dataflow::Ws));
}

#[test]
fn micro_slice_job_is_three_gemms_back_to_back_on_a_core_clock() {
    // Core 800 MHz on a 125 ps tick: div 10; start at a non-zero phase edge.
    let clk = DomainClock { div: 10, ph: 3 };
    let cfg = PeArrayCfg::default();
    let job = PeJob::micro_slice(9, 16, 2048, 96);
    let t0 = clk.edge(5);
    let busy: u64 = [Gemm::new(16, 2048, 96), Gemm::new(16, 2048, 96), Gemm::new(16, 96, 2048)]
        .iter()
        .map(|g| gemm_cycles_fl(g.m as u64, g.k as u64, g.n as u64, 32, 64, Dataflow::Os) + 1)
        .sum();
    let (done, pe) = run_every_edge(&cfg, clk, t0, job);
    assert_eq!(done, t0 + clk.ticks(busy - 1));
    assert_eq!(pe.counters.jobs, 1);
    assert_eq!(pe.counters.mac_ops, job.macs());
    let (ff, pe2) = run_fast_forward(&cfg, clk, t0, job, &[17, 4000, 9000, 9001, 20000]);
    assert_eq!((ff, pe2.counters), (done, pe.counters));
}

#[test]
fn back_to_back_jobs_have_no_bubble() {
    let mut pe = PeArrayCl::new(&PeArrayCfg { rows: 4, cols: 4, ..PeArrayCfg::default() }, DomainClock::UNIT).unwrap();
    let g = Gemm::new(5, 3, 9);
    let l = gemm_cycles_fl(5, 3, 9, 4, 4, Dataflow::Os) + 1;
    let mut t = 0;
    let mut dones = vec![];
    let mut issued = 0;
    while dones.len() < 3 {
        let issue = (pe.ready() && issued < 3).then(|| {
            issued += 1;
            PeJob::single(issued, g)
        });
        if let Some(tag) = pe.eval(t, issue) {
            dones.push((tag, t));
        }
        t += 1;
    }
    assert_eq!(dones, vec![(1, l - 1), (2, 2 * l - 1), (3, 3 * l - 1)]);
    assert_eq!(pe.counters.busy_cycles, 3 * l);
    let u = pe.counters.utilization(pe.cfg());
    assert!((u - (3 * 5 * 3 * 9) as f64 / (16.0 * 3.0 * l as f64)).abs() < 1e-12);
}

#[test]
fn empty_job_completes_at_once_and_empty_gemms_are_skipped() {
    let mut pe = PeArrayCl::new(&PeArrayCfg::default(), DomainClock::UNIT).unwrap();
    assert_eq!(pe.eval(3, Some(PeJob::single(4, Gemm::new(0, 5, 5)))), Some(4));
    assert!(pe.ready());
    let job = PeJob::from_gemms(5, &[Gemm::new(3, 0, 2), Gemm::new(3, 4, 2)]);
    let (done, _) = run_every_edge(&PeArrayCfg::default(), DomainClock::UNIT, 0, job);
    assert_eq!(done, gemm_cycles_fl(3, 4, 2, 32, 64, Dataflow::Os));
}

#[test]
fn bad_configs_are_refused_by_field() {
    let e = PeArrayCl::new(&PeArrayCfg { rows: 0, ..PeArrayCfg::default() }, DomainClock::UNIT).unwrap_err();
    assert_eq!(e.field, "rows");
    let e = PeArrayCfg { cols: 0, ..PeArrayCfg::default() }.validate().unwrap_err();
    assert_eq!(e.field, "cols");
    let e = PeArrayCfg { cols: 1 << 20, ..PeArrayCfg::default() }.validate().unwrap_err();
    assert_eq!(e.field, "cols");
    let c: PeArrayCfg = toml::from_str("rows = 8\ndataflow = \"ws\"\ntiming = \"double_buffered\"").unwrap();
    assert_eq!((c.rows, c.cols, c.dataflow, c.timing), (8, 64, Dataflow::Ws, Timing::DoubleBuffered));
    assert!(toml::from_str::<PeArrayCfg>("rowz = 8").is_err());
    assert!(toml::from_str::<PeArrayCfg>("dataflow = \"xy\"").is_err());
}

#[test]
fn probe_declares_what_it_samples_and_display_is_one_line() {
    let mut pe = PeArrayCl::new(&PeArrayCfg::default(), DomainClock::UNIT).unwrap();
    pe.eval(0, Some(PeJob::single(3, Gemm::new(40, 10, 70))));
    pe.eval(1, None);
    let mut decl = vec![];
    pe.declare(&["top".into(), "pe".into()], &mut decl);
    let mut v = vec![];
    pe.sample(&mut v);
    assert_eq!(decl.len(), v.len());
    let names: Vec<_> = decl.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["busy", "job_tag", "gemm_idx", "fold_row", "fold_col"]);
    assert_eq!(v, [1, 3, 0, 0, 0]);
    let s = pe.to_string();
    assert!(!s.contains('\n') && s.contains("tag=3"), "{s}");
}

/// Output-stationary systolic emulation: PE (i,j) holds acc[i][j]; A enters row i skewed by
/// i cycles from the left, B enters column j skewed by j cycles from the top; operands move
/// one PE per cycle. The last MAC of a fold happens at cycle K + R + C − 3 of the fold (0-based),
/// inside SCALE-Sim's K + R + C − 2 cycle fold; the result equals gemm_i8_fl.
fn systolic_os(a: &[i8], b: &[i8], m: usize, k: usize, n: usize, r: usize, c: usize) -> (Vec<i32>, usize) {
    let mut out = vec![0i32; m * n];
    let mut last_mac = 0;
    for fc in 0..n.div_ceil(c) {
        for fr in 0..m.div_ceil(r) {
            let mut acc = vec![0i32; r * c];
            let mut a_reg: Vec<Option<i8>> = vec![None; r * c];
            let mut b_reg: Vec<Option<i8>> = vec![None; r * c];
            for cyc in 0..(k + r + c - 2) {
                // Shift: A moves right, B moves down (registers of the previous cycle).
                let (pa, pb) = (a_reg.clone(), b_reg.clone());
                for i in 0..r {
                    for j in 0..c {
                        a_reg[i * c + j] = if j == 0 {
                            let t = cyc as isize - i as isize;
                            let row = fr * r + i;
                            (t >= 0 && (t as usize) < k && row < m).then(|| a[row * k + t as usize])
                        } else {
                            pa[i * c + j - 1]
                        };
                        b_reg[i * c + j] = if i == 0 {
                            let t = cyc as isize - j as isize;
                            let col = fc * c + j;
                            (t >= 0 && (t as usize) < k && col < n).then(|| b[t as usize * n + col])
                        } else {
                            pb[(i - 1) * c + j]
                        };
                        if let (Some(x), Some(y)) = (a_reg[i * c + j], b_reg[i * c + j]) {
                            acc[i * c + j] = acc[i * c + j].wrapping_add(x as i32 * y as i32);
                            last_mac = last_mac.max(cyc);
                        }
                    }
                }
            }
            for i in 0..r {
                for j in 0..c {
                    let (row, col) = (fr * r + i, fc * c + j);
                    if row < m && col < n {
                        out[row * n + col] = acc[i * c + j];
                    }
                }
            }
        }
    }
    (out, last_mac)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn cl_done_equals_fl(m in 1u32..200, k in 1u32..200, n in 1u32..200, rows in 1u32..24, cols in 1u32..24, ws: bool, db: bool, t0 in 0u64..50) {
        let dataflow = if ws { Dataflow::Ws } else { Dataflow::Os };
        let timing = if db { Timing::DoubleBuffered } else { Timing::ScaleSim };
        let cfg = PeArrayCfg { rows, cols, dataflow, timing, fuse_gate_up: false };
        let job = PeJob::single(11, Gemm::new(m, k, n));
        let (done, pe) = run_every_edge(&cfg, DomainClock::UNIT, t0, job);
        let plan = fold_plan_fl(m as u64, k as u64, n as u64, rows as u64, cols as u64, dataflow, timing);
        prop_assert_eq!(done - t0, plan.total_cycles());
        if !db {
            prop_assert_eq!(done - t0, gemm_cycles_fl(m as u64, k as u64, n as u64, rows as u64, cols as u64, dataflow));
        }
        prop_assert_eq!(pe.counters.folds, plan.folds());
        prop_assert_eq!(pe.counters.busy_cycles, plan.busy_cycles());
    }

    #[test]
    fn degenerate_shapes_one_by_one_arrays_and_m1(k in 1u32..64, n in 1u32..64, ws: bool) {
        let dataflow = if ws { Dataflow::Ws } else { Dataflow::Os };
        for (rows, cols, m) in [(1, 1, 1), (1, 1, 7), (1, 9, 1), (9, 1, 1)] {
            let cfg = PeArrayCfg { rows, cols, dataflow, ..PeArrayCfg::default() };
            let (done, _) = run_every_edge(&cfg, DomainClock::UNIT, 0, PeJob::single(0, Gemm::new(m, k, n)));
            prop_assert_eq!(done, gemm_cycles_fl(m as u64, k as u64, n as u64, rows as u64, cols as u64, dataflow));
        }
    }

    #[test]
    fn fast_forward_equals_every_edge(m in 1u32..120, d in 1u32..120, f in 1u32..120, rows in 1u32..20, cols in 1u32..20,
                                      ws: bool, db: bool, div in 1u64..12, extra in proptest::collection::vec(0u64..1_000_000, 0..6)) {
        let dataflow = if ws { Dataflow::Ws } else { Dataflow::Os };
        let timing = if db { Timing::DoubleBuffered } else { Timing::ScaleSim };
        let cfg = PeArrayCfg { rows, cols, dataflow, timing, fuse_gate_up: false };
        let clk = DomainClock { div, ph: div / 2 };
        let job = PeJob::micro_slice(5, m, d, f);
        let t0 = clk.edge(3);
        let (a, pa) = run_every_edge(&cfg, clk, t0, job);
        let (b, pb) = run_fast_forward(&cfg, clk, t0, job, &extra);
        prop_assert_eq!(a, b);
        prop_assert_eq!(pa.counters, pb.counters);
        prop_assert_eq!(a, t0 + clk.ticks(cfg.job_busy_cycles(&job) - 1));
    }

    #[test]
    fn gemm_i8_equals_naive_and_systolic(m in 1usize..12, k in 1usize..12, n in 1usize..12, r in 1usize..6, c in 1usize..6, seed in any::<u64>()) {
        let mut s = seed | 1;
        let mut rnd = || { s ^= s << 13; s ^= s >> 7; s ^= s << 17; (s >> 24) as i8 };
        let a: Vec<i8> = (0..m * k).map(|_| rnd()).collect();
        let b: Vec<i8> = (0..k * n).map(|_| rnd()).collect();
        let got = sched::pkg::pe_array::gemm_i8_fl(&a, &b, m, k, n);
        for i in 0..m {
            for j in 0..n {
                let e: i32 = (0..k).map(|x| a[i * k + x] as i32 * b[x * n + j] as i32).sum();
                prop_assert_eq!(got[i * n + j], e);
            }
        }
        let (sys, last_mac) = systolic_os(&a, &b, m, k, n, r, c);
        prop_assert_eq!(&sys, &got);
        // The fold's last MAC is within SCALE-Sim's per-fold cycle budget.
        prop_assert!(last_mac < k + r + c - 2);
    }
}
