//! `pe_array` (RTL) against `PeArrayCl` (CL) in lockstep: the same jobs issued at the same
//! edges, and after every edge the CL's ports and traced state (ready/busy, done and its tag,
//! current tag, GEMM index, fold row and column, the fold's last edge `next_change`) and its
//! counters (busy cycles, folds, jobs) equal the block's. The block's output matrices equal a
//! naive triple-loop GEMM written here, and each job's done edge equals the CL's (and, for a
//! single GEMM, SCALE-Sim's "Total Cycles" of the FL twin `gemm_cycles_fl`).

use std::collections::VecDeque;

use hw::harness::{DomainClock, Probe};
use hw::pkg::pe_array::{Dataflow, Gemm, PeArrayCfg, PeArrayCl, PeJob, Timing};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rtl::pkg::pe_array_twin::{build_block, GemmData, JobResult, OperandA, PeArrayDriver, RtlJob};
use sched::pkg::pe_array::gemm_cycles_fl;

/// The reference: `A (m×k) · B (k×n)` with int8 operands and wrapping i32 sums.
fn naive(a: &[i8], b: &[i8], m: usize, k: usize, n: usize) -> Vec<i32> {
    let mut c = vec![0i32; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut s = 0i32;
            for x in 0..k {
                s = s.wrapping_add(a[i * k + x] as i32 * b[x * n + j] as i32);
            }
            c[i * n + j] = s;
        }
    }
    c
}

/// A stand-in activation for derived operands (any function of the two outputs will do).
fn act(g: i32, u: i32) -> i8 {
    ((g >> 5) ^ (u >> 7)).clamp(-128, 127) as i8
}

/// A test job: its GEMMs' shapes and data (A given or derived from GEMMs 0 and 1).
#[derive(Debug, Clone)]
struct TJob {
    tag: u32,
    gemms: Vec<GemmData>,
    /// Cycles to wait after the array is ready before issuing it.
    gap: u64,
}

fn rand_mat(rng: &mut Xoshiro256PlusPlus, n: usize) -> Vec<i8> {
    (0..n).map(|_| rng.gen::<i8>()).collect()
}

/// Random jobs: 1..=3 GEMMs of dims `0..=max` (a zero now and then), or a micro-slice
/// `gate, up, down` whose down GEMM reads `act(gate, up)`.
fn random_jobs(rng: &mut Xoshiro256PlusPlus, count: usize, max: usize) -> Vec<TJob> {
    (0..count)
        .map(|t| {
            let gemms = if rng.gen_bool(0.3) {
                let (m, d, f) = (rng.gen_range(1..=max), rng.gen_range(1..=max), rng.gen_range(1..=max));
                let x = rand_mat(rng, m * d);
                vec![
                    GemmData { m, k: d, n: f, a: OperandA::Given(x.clone()), b: rand_mat(rng, d * f) },
                    GemmData { m, k: d, n: f, a: OperandA::Given(x), b: rand_mat(rng, d * f) },
                    GemmData { m, k: f, n: d, a: OperandA::Act { gate: 0, gate_col: 0, up: 1, up_col: 0, act }, b: rand_mat(rng, f * d) },
                ]
            } else {
                (0..rng.gen_range(1..=3))
                    .map(|_| {
                        let dim = |rng: &mut Xoshiro256PlusPlus| if rng.gen_bool(0.08) { 0 } else { rng.gen_range(1..=max) };
                        let (m, k, n) = (dim(rng), dim(rng), dim(rng));
                        GemmData { m, k, n, a: OperandA::Given(rand_mat(rng, m * k)), b: rand_mat(rng, k * n) }
                    })
                    .collect()
            };
            TJob { tag: 100 + t as u32, gemms, gap: if rng.gen_bool(0.5) { 0 } else { rng.gen_range(1..4) } }
        })
        .collect()
}

/// The reference outputs of a job (derived operands from the reference's own outputs).
fn reference(j: &TJob) -> Vec<Vec<i32>> {
    let mut outs: Vec<Vec<i32>> = Vec::new();
    for g in &j.gemms {
        let a: Vec<i8> = match &g.a {
            OperandA::Given(a) => a.clone(),
            &OperandA::Act { gate, gate_col, up, up_col, act } => {
                let (ng, nu) = (j.gemms[gate].n, j.gemms[up].n);
                (0..g.m).flat_map(|i| (0..g.k).map(move |c| (i, c))).map(|(i, c)| act(outs[gate][i * ng + gate_col + c], outs[up][i * nu + up_col + c])).collect()
            }
        };
        outs.push(naive(&a, &g.b, g.m, g.k, g.n));
    }
    outs
}

/// Runs the jobs on both levels; panics with edge/port/values on the first mismatch. Returns
/// the edges run.
fn lockstep(rows: usize, cols: usize, df: Dataflow, jobs: &[TJob]) -> u64 {
    let cfg = PeArrayCfg { rows: rows as u32, cols: cols as u32, dataflow: df, timing: Timing::ScaleSim, fuse_gate_up: false };
    let mut cl = PeArrayCl::new(&cfg, DomainClock::UNIT).unwrap();
    let mut rtl = PeArrayDriver::new(build_block(rows, cols).expect("a built size"));
    let ws = df == Dataflow::Ws;
    let mut queue: VecDeque<&TJob> = jobs.iter().collect();
    let mut wait = queue.front().map_or(0, |j| j.gap);
    let mut issued: Vec<(u32, u64, u64)> = Vec::new(); // (tag, issue edge, CL busy cycles)
    let mut cl_done: Vec<(u32, u64)> = Vec::new();
    let mut results: Vec<JobResult> = Vec::new();
    let mut t = 0u64;
    let mut sample = Vec::new();
    loop {
        assert_eq!(rtl.ready(), cl.ready(), "edge {t}: ready");
        let mut issue = None;
        if cl.ready() {
            if wait > 0 {
                wait -= 1;
            } else if let Some(j) = queue.pop_front() {
                issue = Some(j);
                wait = queue.front().map_or(0, |j| j.gap);
            }
        }
        let cl_job = issue.map(|j| PeJob::from_gemms(j.tag, &j.gemms.iter().map(|g| Gemm::new(g.m as u32, g.k as u32, g.n as u32)).collect::<Vec<_>>()));
        if let Some(job) = &cl_job {
            issued.push((job.tag, t, cfg.job_busy_cycles(job)));
        }
        let d = cl.eval(t, cl_job);
        let o = rtl.step(issue.map(|j| RtlJob { tag: j.tag, ws, gemms: j.gemms.clone() }));
        rtl.check().unwrap_or_else(|e| panic!("edge {t}: {e}"));
        // Ports and traced state.
        assert_eq!(o.busy, cl.busy(), "edge {t}: busy");
        assert_eq!(o.done.then_some(o.done_tag), d, "edge {t}: done/tag");
        assert_eq!(o.job_tag, cl.current_tag().unwrap_or(0), "edge {t}: job tag");
        sample.clear();
        cl.sample(&mut sample);
        let got = [o.busy as u64, o.job_tag as u64, o.gemm_idx as u64, o.fold_row as u64, o.fold_col as u64];
        assert_eq!(got.as_slice(), sample.as_slice(), "edge {t}: traced [busy, job_tag, gemm_idx, fold_row, fold_col]");
        if cl.busy() {
            let j = issued.last().unwrap();
            let job = jobs.iter().find(|x| x.tag == j.0).unwrap();
            let g = &job.gemms[o.gemm_idx as usize];
            let plan = cfg.plan(Gemm::new(g.m as u32, g.k as u32, g.n as u32));
            let fold = o.fold_col as u64 * plan.row_folds + o.fold_row as u64;
            assert_eq!(cl.next_change(), t + plan.fold_cycles(fold) - o.fold_cycle as u64, "edge {t}: fold cycle {} (CL's fold end)", o.fold_cycle);
        }
        // Counters.
        assert_eq!(rtl.busy_cycles, cl.counters.busy_cycles, "edge {t}: busy cycles");
        assert_eq!(rtl.folds, cl.counters.folds, "edge {t}: folds");
        assert_eq!(rtl.jobs_done, cl.counters.jobs, "edge {t}: jobs");
        if let Some(tag) = d {
            cl_done.push((tag, t));
        }
        while let Some(r) = rtl.take_finished() {
            results.push(r);
        }
        t += 1;
        if queue.is_empty() && rtl.idle() && cl.ready() {
            break;
        }
        assert!(t < 1_000_000, "lockstep did not finish");
    }
    // Outputs and done edges.
    assert_eq!(results.len(), jobs.len());
    for ((r, j), (&(tag, t0, busy), &(dtag, dt))) in results.iter().zip(jobs).zip(issued.iter().zip(&cl_done)) {
        assert_eq!((r.tag, tag, dtag), (j.tag, j.tag, j.tag));
        assert_eq!(r.issue_cycle, t0, "job {tag}: issue edge");
        assert_eq!(r.done_cycle, dt, "job {tag}: done edge vs CL");
        assert_eq!(r.done_cycle - r.issue_cycle, busy.saturating_sub(1), "job {tag}: busy cycles");
        let nonempty: Vec<&GemmData> = j.gemms.iter().filter(|g| g.m * g.k * g.n > 0).collect();
        if j.gemms.len() == 1 && nonempty.len() == 1 {
            let g = nonempty[0];
            assert_eq!(r.done_cycle - r.issue_cycle, gemm_cycles_fl(g.m as u64, g.k as u64, g.n as u64, rows as u64, cols as u64, df), "job {tag}: SCALE-Sim total cycles");
        }
        let want = reference(j);
        for (g, (o, w)) in r.outs.iter().zip(&want).enumerate() {
            assert_eq!(o, w, "job {tag} GEMM {g} ({}x{}x{}) outputs", j.gemms[g].m, j.gemms[g].k, j.gemms[g].n);
        }
    }
    t
}

const SIZES: [(usize, usize); 5] = [(1, 1), (2, 2), (2, 3), (3, 2), (4, 4)];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn lockstep_random_jobs(size in 0usize..SIZES.len(), ws: bool, seed: u64, count in 1usize..5) {
        let (r, c) = SIZES[size];
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let jobs = random_jobs(&mut rng, count, 9);
        lockstep(r, c, if ws { Dataflow::Ws } else { Dataflow::Os }, &jobs);
    }
}

/// A long deterministic run per dataflow on the exported 4×4 and on 8×8: many folds per GEMM
/// (dims up to 3–5 array sides), back-to-back and gapped jobs.
#[test]
fn lockstep_long_runs() {
    let mut edges = 0;
    let mut gemms = 0;
    for (r, c, jobs, max, seed) in [(4, 4, 40, 17, 1u64), (8, 8, 16, 30, 2)] {
        for df in [Dataflow::Os, Dataflow::Ws] {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
            let js = random_jobs(&mut rng, jobs, max);
            gemms += js.iter().map(|j| j.gemms.len()).sum::<usize>();
            edges += lockstep(r, c, df, &js);
        }
    }
    eprintln!("pe_array lockstep: {gemms} GEMMs, {edges} edges");
}

/// The SCALE-Sim reference row `16×2048×96` shape class at the package's size: one GEMM
/// (m×64)·(64×6) and its down projection on the 32×64 array the `--rtl pe` stand-in runs.
#[test]
fn lockstep_package_size() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    let x = rand_mat(&mut rng, 5 * 64);
    let job = TJob {
        tag: 7,
        gemms: vec![
            GemmData { m: 5, k: 64, n: 6, a: OperandA::Given(x.clone()), b: rand_mat(&mut rng, 64 * 6) },
            GemmData { m: 5, k: 64, n: 6, a: OperandA::Given(x), b: rand_mat(&mut rng, 64 * 6) },
            GemmData { m: 5, k: 6, n: 64, a: OperandA::Act { gate: 0, gate_col: 0, up: 1, up_col: 0, act }, b: rand_mat(&mut rng, 6 * 64) },
        ],
        gap: 0,
    };
    for df in [Dataflow::Os, Dataflow::Ws] {
        lockstep(32, 64, df, std::slice::from_ref(&job));
    }
}
