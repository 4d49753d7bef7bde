//! Driving the `pe_array` RTL block edge by edge: the feeder (operand SRAMs and the systolic
//! skew, from the block's own fold counters), the drain (the OS result bank one row per cycle,
//! the WS bottom-row partial sums as they leave), and the job bookkeeping (issue and done
//! cycles, output matrices).
//!
//! One driver serves the lockstep test, the Verilog co-simulation recorder and the package's
//! `--rtl pe` stand-in, so all three drive the block the same way. The feeder's protocol is
//! documented in [`super::pe_array`].

use std::collections::VecDeque;

use rust_hdl::prelude::*;

use super::pe_array::{PeArrayRtl, GEMMS};

/// Control inputs of one edge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PeIn {
    pub reset: bool,
    pub start: bool,
    pub ws: bool,
    pub tag: u32,
    pub row_folds: [u16; GEMMS],
    pub col_folds: [u16; GEMMS],
    pub stream: [u32; GEMMS],
    pub res_row: u16,
}

/// Registered outputs after an edge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PeOut {
    pub busy: bool,
    pub done: bool,
    pub done_tag: u32,
    pub job_tag: u32,
    pub gemm_idx: u8,
    pub fold_row: u16,
    pub fold_col: u16,
    pub fold_cycle: u32,
    pub fold_done: bool,
}

/// The block's port access, object-safe so one driver serves every monomorphized size.
pub trait PeArrayRtlPorts: Send {
    fn rows(&self) -> usize;
    fn cols(&self) -> usize;
    fn set_ctrl(&mut self, i: &PeIn);
    /// Operand feed: `a.len() == rows`, `b.len() == cols`.
    fn set_feed(&mut self, a: &[i8], b: &[i8]);
    fn settle(&mut self);
    /// Rising edge, settle (inputs must be settled before; the clock falls with the next
    /// `set_ctrl`).
    fn clock_edge(&mut self);
    fn outputs(&self) -> PeOut;
    /// Result bank row `res_row` (comb) and the bottom row's partial sums.
    fn res(&self, out: &mut [i32]);
    fn col_out(&self, out: &mut [i32]);
}

fn settle_block<U: Block>(uut: &mut U) {
    assert!(simulate(uut, 200), "pe_array: combinational logic did not settle");
}

impl<const R: usize, const C: usize> PeArrayRtlPorts for PeArrayRtl<R, C> {
    fn rows(&self) -> usize {
        R
    }
    fn cols(&self) -> usize {
        C
    }
    fn set_ctrl(&mut self, i: &PeIn) {
        // The previous cycle's falling edge, settled with this cycle's inputs (one settle
        // less per cycle: the clock's fall changes no register).
        self.clock.next = false.into();
        self.reset.next = i.reset;
        self.start.next = i.start;
        self.ws.next = i.ws;
        self.tag.next = (i.tag as u64).into();
        for g in 0..GEMMS {
            self.row_folds[g].next = (i.row_folds[g] as u64).into();
            self.col_folds[g].next = (i.col_folds[g] as u64).into();
            self.stream[g].next = (i.stream[g] as u64).into();
        }
        self.res_row.next = (i.res_row as u64).into();
    }
    fn set_feed(&mut self, a: &[i8], b: &[i8]) {
        for (p, &v) in self.a_in.iter_mut().zip(a) {
            p.next = (v as u8 as u64).into();
        }
        for (p, &v) in self.b_in.iter_mut().zip(b) {
            p.next = (v as u8 as u64).into();
        }
    }
    fn settle(&mut self) {
        settle_block(self);
    }
    fn clock_edge(&mut self) {
        self.clock.next = true.into();
        settle_block(self);
    }
    fn outputs(&self) -> PeOut {
        PeOut {
            busy: self.busy.val(),
            done: self.done.val(),
            done_tag: self.done_tag.val().to_u64() as u32,
            job_tag: self.job_tag.val().to_u64() as u32,
            gemm_idx: self.gemm_idx.val().to_u64() as u8,
            fold_row: self.fold_row.val().to_u64() as u16,
            fold_col: self.fold_col.val().to_u64() as u16,
            fold_cycle: self.fold_cycle.val().to_u64() as u32,
            fold_done: self.fold_done.val(),
        }
    }
    fn res(&self, out: &mut [i32]) {
        for (o, p) in out.iter_mut().zip(&self.res) {
            *o = p.val().to_u64() as u32 as i32;
        }
    }
    fn col_out(&self, out: &mut [i32]) {
        for (o, p) in out.iter_mut().zip(&self.col_out) {
            *o = p.val().to_u64() as u32 as i32;
        }
    }
}

/// A connected block of `rows × cols`; `None` for a size without a monomorphized variant
/// (built: the package's 32×64 and the sizes the tests and the export use).
pub fn build_block(rows: usize, cols: usize) -> Option<Box<dyn PeArrayRtlPorts>> {
    fn mk<const R: usize, const C: usize>() -> Box<dyn PeArrayRtlPorts> {
        let mut b = Box::new(PeArrayRtl::<R, C>::new(R, C));
        b.connect_all();
        b
    }
    Some(match (rows, cols) {
        (1, 1) => mk::<1, 1>(),
        (2, 2) => mk::<2, 2>(),
        (2, 3) => mk::<2, 3>(),
        (3, 2) => mk::<3, 2>(),
        (4, 4) => mk::<4, 4>(),
        (8, 8) => mk::<8, 8>(),
        (32, 64) => mk::<32, 64>(),
        _ => return None,
    })
}

/// The sizes [`build_block`] has, for error messages.
pub const SIZES: &str = "1x1, 2x2, 2x3, 3x2, 4x4, 8x8, 32x64";

/// The A operand of a GEMM.
#[derive(Debug, Clone)]
pub enum OperandA {
    /// `m × k`, row-major.
    Given(Vec<i8>),
    /// Derived from outputs of earlier GEMMs of the same job, read as the feeder needs them:
    /// `A[i][c] = act(out[gate][i][gate_col + c], out[up][i][up_col + c])` — the FFN's
    /// activation between gate/up and down, a vector unit beside the array. Reading an output
    /// not yet drained is an error (the schedule would be impossible in hardware).
    Act { gate: usize, gate_col: usize, up: usize, up_col: usize, act: fn(i32, i32) -> i8 },
}

/// One GEMM of a job with its operands: `A (m×k) · B (k×n)`.
#[derive(Debug, Clone)]
pub struct GemmData {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub a: OperandA,
    /// `k × n`, row-major.
    pub b: Vec<i8>,
}

/// A job of 1..=3 GEMMs.
#[derive(Debug, Clone)]
pub struct RtlJob {
    pub tag: u32,
    pub ws: bool,
    pub gemms: Vec<GemmData>,
}

/// A finished job: its outputs (per GEMM, `m × n` row-major) and its cycles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobResult {
    pub tag: u32,
    pub outs: Vec<Vec<i32>>,
    /// The edge the job was issued at (its first busy cycle) and its done edge.
    pub issue_cycle: u64,
    pub done_cycle: u64,
}

/// Fold plan of one GEMM on the array (the FL plan's fields, computed here independently).
#[derive(Debug, Clone, Copy)]
struct Plan {
    rf: u64,
    cf: u64,
    t: u64,
}

impl Plan {
    fn of(g: &GemmData, ws: bool, r: usize, c: usize) -> Plan {
        if g.m == 0 || g.k == 0 || g.n == 0 {
            return Plan { rf: 0, cf: 0, t: 0 };
        }
        let (sr, t) = if ws { (g.k, g.m) } else { (g.m, g.k) };
        Plan { rf: sr.div_ceil(r) as u64, cf: g.n.div_ceil(c) as u64, t: t as u64 }
    }
}

struct ActiveJob {
    seq: u64,
    tag: u32,
    ws: bool,
    gemms: Vec<GemmData>,
    outs: Vec<Vec<i32>>,
    /// Contributions drained per output element (OS: 1, WS: one per row fold).
    got: Vec<Vec<u32>>,
    need: Vec<u32>,
    issue_cycle: u64,
    done_cycle: Option<u64>,
}

/// A fold executed whose outputs are not all drained.
#[derive(Debug, Clone, Copy)]
struct Window {
    job: u64,
    g: usize,
    fr: usize,
    fc: usize,
    /// Cycle of the fold's cycle 0, and its last cycle.
    start: u64,
    end: u64,
}

/// The block plus its feeder, drain and job bookkeeping.
pub struct PeArrayDriver {
    pub uut: Box<dyn PeArrayRtlPorts>,
    r: usize,
    c: usize,
    /// Edges executed so far (the next edge's cycle number).
    pub cycle: u64,
    out: PeOut,
    jobs: VecDeque<ActiveJob>,
    windows: VecDeque<Window>,
    next_seq: u64,
    finished: VecDeque<JobResult>,
    /// The first feeder/drain inconsistency (an output read before it was drained).
    pub error: Option<String>,
    /// The inputs applied at the last edge (the co-simulation recorder replays them).
    pub last_in: PeIn,
    pub last_a: Vec<i8>,
    pub last_b: Vec<i8>,
    /// Busy cycles executed (the CL's `counters.busy_cycles`).
    pub busy_cycles: u64,
    /// Folds completed (`fold_done` pulses) and jobs done.
    pub folds: u64,
    pub jobs_done: u64,
    row_buf: Vec<i32>,
}

impl PeArrayDriver {
    /// A driver around a built block; applies one reset edge (not counted in `cycle`).
    pub fn new(uut: Box<dyn PeArrayRtlPorts>) -> Self {
        let (r, c) = (uut.rows(), uut.cols());
        let mut d = PeArrayDriver {
            uut,
            r,
            c,
            cycle: 0,
            out: PeOut::default(),
            jobs: VecDeque::new(),
            windows: VecDeque::new(),
            next_seq: 0,
            finished: VecDeque::new(),
            error: None,
            last_in: PeIn::default(),
            last_a: vec![0; r],
            last_b: vec![0; c],
            busy_cycles: 0,
            folds: 0,
            jobs_done: 0,
            row_buf: vec![0; c],
        };
        d.edge(PeIn { reset: true, ..Default::default() }, None);
        d.cycle = 0;
        d.busy_cycles = 0;
        d
    }

    pub fn rows(&self) -> usize {
        self.r
    }
    pub fn cols(&self) -> usize {
        self.c
    }
    /// Registered outputs after the last edge.
    pub fn outputs(&self) -> PeOut {
        self.out
    }
    /// A job may be issued at the next edge.
    pub fn ready(&self) -> bool {
        !self.out.busy
    }
    /// Oldest finished job whose outputs are all drained.
    pub fn take_finished(&mut self) -> Option<JobResult> {
        self.finished.pop_front()
    }
    /// Nothing running and nothing left to drain.
    pub fn idle(&self) -> bool {
        !self.out.busy && self.jobs.is_empty()
    }

    /// The fold descriptors of a job as the block's start ports take them.
    pub fn job_ports(&self, job: &RtlJob) -> PeIn {
        assert!((1..=GEMMS).contains(&job.gemms.len()), "a PE job holds 1 to 3 GEMMs");
        let mut p = PeIn { start: true, ws: job.ws, tag: job.tag, ..Default::default() };
        for (g, gd) in job.gemms.iter().enumerate() {
            let pl = Plan::of(gd, job.ws, self.r, self.c);
            p.row_folds[g] = pl.rf as u16;
            p.col_folds[g] = pl.cf as u16;
            p.stream[g] = pl.t as u32;
        }
        p
    }

    /// One edge; `issue` is a job to start at it (only when [`Self::ready`]).
    pub fn step(&mut self, issue: Option<RtlJob>) -> PeOut {
        let mut ctl = PeIn::default();
        let mut fold = None;
        if let Some(job) = issue {
            assert!(self.ready(), "pe_array: job {} issued while busy", job.tag);
            ctl = self.job_ports(&job);
            let first = (0..job.gemms.len()).find(|&g| ctl.row_folds[g] > 0 && ctl.col_folds[g] > 0);
            let need = job.gemms.iter().enumerate().map(|(g, _)| if job.ws { ctl.row_folds[g] as u32 } else { 1 }).collect();
            let seq = self.next_seq;
            self.next_seq += 1;
            self.jobs.push_back(ActiveJob {
                seq,
                tag: job.tag,
                ws: job.ws,
                outs: job.gemms.iter().map(|g| vec![0; g.m * g.n]).collect(),
                got: job.gemms.iter().map(|g| vec![0; g.m * g.n]).collect(),
                need,
                gemms: job.gemms,
                issue_cycle: self.cycle,
                done_cycle: None,
            });
            fold = first.map(|g| (g, 0usize, 0usize, 0u64));
        } else if self.out.busy {
            let o = self.out;
            fold = Some((o.gemm_idx as usize, o.fold_row as usize, o.fold_col as usize, o.fold_cycle as u64));
        }
        self.edge(ctl, fold);
        self.out
    }

    /// Applies the control inputs and the feed of `fold` (gemm, fold row, fold col, cycle of
    /// the fold executed this cycle), drains, and clocks once.
    fn edge(&mut self, mut ctl: PeIn, fold: Option<(usize, usize, usize, u64)>) {
        let (r, c) = (self.r, self.c);
        let mut a = vec![0i8; r];
        let mut b = vec![0i8; c];
        let mut undrained = None;
        if let Some((g, fr, fc, cyc)) = fold {
            self.busy_cycles += 1;
            let job = self.jobs.back().expect("a fold runs for the newest job");
            let gd = &job.gemms[g];
            let len = self.fold_len(gd, job.ws);
            if cyc == 0 {
                self.windows.push_back(Window { job: job.seq, g, fr, fc, start: self.cycle, end: self.cycle + len - 1 });
            }
            let (rb, cb, cyc) = (fr * r, fc * c, cyc as i64);
            if !job.ws {
                for (i, v) in a.iter_mut().enumerate() {
                    let kk = cyc - i as i64;
                    if rb + i < gd.m && kk >= 0 && (kk as usize) < gd.k {
                        *v = Self::a_elem(job, g, rb + i, kk as usize).unwrap_or_else(|e| {
                            undrained.get_or_insert(e);
                            0
                        });
                    }
                }
                for (j, v) in b.iter_mut().enumerate() {
                    let kk = cyc - j as i64;
                    if cb + j < gd.n && kk >= 0 && (kk as usize) < gd.k {
                        *v = gd.b[kk as usize * gd.n + cb + j];
                    }
                }
            } else if cyc < r as i64 {
                // Preload: the weights shift down, bottom row's first.
                let kk = rb + r - 1 - cyc as usize;
                for (j, v) in b.iter_mut().enumerate() {
                    if kk < gd.k && cb + j < gd.n {
                        *v = gd.b[kk * gd.n + cb + j];
                    }
                }
            } else {
                for (i, v) in a.iter_mut().enumerate() {
                    let mm = cyc - r as i64 - i as i64;
                    if rb + i < gd.k && mm >= 0 && (mm as usize) < gd.m {
                        *v = Self::a_elem(job, g, mm as usize, rb + i).unwrap_or_else(|e| {
                            undrained.get_or_insert(e);
                            0
                        });
                    }
                }
            }
        }
        if let Some((g, i, kk)) = undrained {
            let cyc = self.cycle;
            self.fail(format!("cycle {cyc}: GEMM {g} read its A[{i}][{kk}] from an output not yet drained"));
        }
        // OS drain: the oldest OS fold that has ended (or ends at this edge), one
        // result-bank row per cycle, read after the edge — so row i of a fold ending at edge e
        // is read after edge e+i, before the cycle in which a derived operand may need it.
        let os_drain = self.windows.iter().position(|w| w.end <= self.cycle && !self.job_of(w.job).ws);
        if let Some(wi) = os_drain {
            ctl.res_row = (self.cycle - self.windows[wi].end) as u16;
        }
        self.uut.set_ctrl(&ctl);
        self.uut.set_feed(&a, &b);
        self.uut.settle();
        self.uut.clock_edge();
        if let Some(wi) = os_drain {
            let w = self.windows[wi];
            let i = ctl.res_row as usize;
            let mut row = std::mem::take(&mut self.row_buf);
            self.uut.res(&mut row);
            let job = self.job_of_mut(w.job);
            let gd = &job.gemms[w.g];
            let (m, n) = (gd.m, gd.n);
            let ri = w.fr * r + i;
            if ri < m {
                for (j, &v) in row.iter().enumerate() {
                    let cj = w.fc * c + j;
                    if cj < n {
                        job.outs[w.g][ri * n + cj] = v;
                        job.got[w.g][ri * n + cj] += 1;
                    }
                }
            }
            self.row_buf = row;
            if i + 1 == r {
                self.windows.remove(wi);
            }
        }
        self.last_in = ctl;
        self.last_a = a;
        self.last_b = b;
        self.out = self.uut.outputs();
        // WS drain: the bottom row's partial sums that left at this edge.
        let mut k = 0;
        while k < self.windows.len() {
            let w = self.windows[k];
            if !self.job_of(w.job).ws || w.start > self.cycle {
                k += 1;
                continue;
            }
            let mut row = std::mem::take(&mut self.row_buf);
            self.uut.col_out(&mut row);
            let now = self.cycle as i64;
            let job = self.job_of_mut(w.job);
            let gd = &job.gemms[w.g];
            let (m, n) = (gd.m as i64, gd.n);
            for (j, &v) in row.iter().enumerate() {
                let mm = now - w.start as i64 - (2 * r as i64 - 1) - j as i64;
                let cj = w.fc * c + j;
                if mm >= 0 && mm < m && cj < n {
                    let idx = mm as usize * n + cj;
                    job.outs[w.g][idx] = job.outs[w.g][idx].wrapping_add(v);
                    job.got[w.g][idx] += 1;
                }
            }
            self.row_buf = row;
            if self.cycle >= w.end {
                self.windows.remove(k);
            } else {
                k += 1;
            }
        }
        if self.out.fold_done {
            self.folds += 1;
        }
        if self.out.done {
            self.jobs_done += 1;
            let cycle = self.cycle;
            let tag = self.out.done_tag;
            match self.jobs.iter_mut().find(|j| j.done_cycle.is_none()) {
                Some(j) if j.tag == tag => j.done_cycle = Some(cycle),
                _ => self.fail(format!("cycle {cycle}: done with tag {tag} for no running job of that tag")),
            }
        }
        // Jobs done and fully drained are finished.
        while let Some(j) = self.jobs.front() {
            if j.done_cycle.is_none() || self.windows.iter().any(|w| w.job == j.seq) {
                break;
            }
            let j = self.jobs.pop_front().unwrap();
            self.finished.push_back(JobResult { tag: j.tag, outs: j.outs, issue_cycle: j.issue_cycle, done_cycle: j.done_cycle.unwrap() });
        }
        self.cycle += 1;
    }

    fn fold_len(&self, gd: &GemmData, ws: bool) -> u64 {
        let p = Plan::of(gd, ws, self.r, self.c);
        let prefix = if ws { self.r as u64 } else { 0 };
        prefix + p.t + (self.r + self.c - 2) as u64
    }

    fn job_of(&self, seq: u64) -> &ActiveJob {
        self.jobs.iter().find(|j| j.seq == seq).expect("window of a live job")
    }
    fn job_of_mut(&mut self, seq: u64) -> &mut ActiveJob {
        self.jobs.iter_mut().find(|j| j.seq == seq).expect("window of a live job")
    }

    fn fail(&mut self, e: String) {
        if self.error.is_none() {
            self.error = Some(e);
        }
    }

    /// Element `A[i][kk]` of GEMM `g` of `job` as the feeder reads it (`Err((g, i, kk))`: it
    /// derives from an output not yet drained).
    fn a_elem(job: &ActiveJob, g: usize, i: usize, kk: usize) -> Result<i8, (usize, usize, usize)> {
        let gd = &job.gemms[g];
        match &gd.a {
            OperandA::Given(a) => Ok(a[i * gd.k + kk]),
            &OperandA::Act { gate, gate_col, up, up_col, act } => {
                let (ng, nu) = (job.gemms[gate].n, job.gemms[up].n);
                let (ig, iu) = (i * ng + gate_col + kk, i * nu + up_col + kk);
                if job.got[gate][ig] < job.need[gate] || job.got[up][iu] < job.need[up] {
                    return Err((g, i, kk));
                }
                Ok(act(job.outs[gate][ig], job.outs[up][iu]))
            }
        }
    }

    /// Runs edges until every job issued is finished; returns them in issue order. `limit`
    /// bounds the edges (a hung block is an error, not a hang).
    pub fn run_to_idle(&mut self, limit: u64) -> Result<Vec<JobResult>, String> {
        let stop = self.cycle + limit;
        while !self.idle() {
            if self.cycle >= stop {
                return Err(format!("pe_array: not idle after {limit} cycles"));
            }
            self.step(None);
            self.check()?;
        }
        Ok(self.finished.drain(..).collect())
    }

    /// The first feeder/drain error, if any.
    pub fn check(&self) -> Result<(), String> {
        match &self.error {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}

/// A random job (the co-simulation recorder's stimulus): 1..=3 GEMMs of dims `0..=max` (a
/// zero now and then), or with probability 0.3 a micro-slice `gate, up, down` whose down GEMM
/// reads `act_i8(gate, up)`.
pub fn random_job(rng: &mut impl rand::Rng, tag: u32, ws: bool, max: usize) -> RtlJob {
    let mat = |rng: &mut dyn rand::RngCore, n: usize| -> Vec<i8> { (0..n).map(|_| rng.next_u32() as i8).collect() };
    let gemms = if rng.gen_bool(0.3) {
        let (m, d, f) = (rng.gen_range(1..=max), rng.gen_range(1..=max), rng.gen_range(1..=max));
        let x = mat(rng, m * d);
        vec![
            GemmData { m, k: d, n: f, a: OperandA::Given(x.clone()), b: mat(rng, d * f) },
            GemmData { m, k: d, n: f, a: OperandA::Given(x), b: mat(rng, d * f) },
            GemmData { m, k: f, n: d, a: OperandA::Act { gate: 0, gate_col: 0, up: 1, up_col: 0, act: sched::pkg::moe::act_i8 }, b: mat(rng, f * d) },
        ]
    } else {
        (0..rng.gen_range(1..=3))
            .map(|_| {
                let dim = |rng: &mut dyn rand::RngCore| if rng.next_u32() % 12 == 0 { 0 } else { 1 + rng.next_u32() as usize % max };
                let (m, k, n) = (dim(rng), dim(rng), dim(rng));
                GemmData { m, k, n, a: OperandA::Given(mat(rng, m * k)), b: mat(rng, k * n) }
            })
            .collect()
    };
    RtlJob { tag, ws, gemms }
}
