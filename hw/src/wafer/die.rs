//! One die of the wafer: its sequencer, compute engine and collective engine. The sequencer
//! holds the die's program (`program.rs`) as dependence counters — one per kernel and per
//! outgoing transfer — and a table of which counters each event decrements (a scoreboard):
//! a transfer whose counter reaches zero is handed to the collective engine, the next kernel
//! in stream order starts when its counter is zero and the compute engine is free.
//!
//! Logs (`tracing`, target `hw::wafer::die`, level debug): each die's phase boundaries —
//! per micro-batch the first transfer of a phase handed to the collective engine (`phase
//! start`) and the last one of the phase sent or received here (`phase end`), each kernel's
//! start and end (attention, gating, experts: the compute phases), and the die done. A
//! handful of events per die and micro-batch, none per cycle; with debug off each is one
//! level check.
//!
//! The three blocks sit in one module (one `eval`): the sequencer reacts to the engines'
//! events of the same cycle (comb inside the die); the die talks to the rest of the wafer
//! only through its router's local port.

use std::collections::HashMap;

use std::sync::Arc;

use super::compute::{ComputeEngineCl, Kernel, KernelKind};
use super::payload::{FuncDie, PayloadStore};
use super::dma::{CollectiveEngineCl, DmaEvents, DmaPorts, TxXfer};
use super::migration::MigrationEngineCl;
use super::program::{DieProgram, Ev, LayerProgram, PerPhase, Phase};
use crate::harness::{Cycle, LinkArena, NEVER};
use crate::noc::flit::{Credit, Flit};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Node {
    Kernel(u32),
    Tx(u32),
}

/// Per-phase and per-kernel-kind time stamps of one die (cycles; NEVER / 0 when none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DieTimes {
    /// Per micro-batch and phase: first transfer handed to the engine; last transfer finished
    /// (sent from or received here).
    pub phase_first: Vec<[Cycle; 3]>,
    pub phase_last: Vec<[Cycle; 3]>,
    pub kernel_first: [Cycle; KernelKind::ALL.len()],
    pub kernel_last: [Cycle; KernelKind::ALL.len()],
    pub done_at: Cycle,
    /// Transfers handed to the collective engine here (id, cycle), and transfers fully
    /// received here (id, cycle): each transfer's network latency.
    pub tx_start: Vec<(u32, Cycle)>,
    pub rx_done: Vec<(u32, Cycle)>,
}

impl DieTimes {
    fn new(mbs: usize) -> Self {
        DieTimes { phase_first: vec![[NEVER; 3]; mbs], phase_last: vec![[0; 3]; mbs], kernel_first: [NEVER; KernelKind::ALL.len()], kernel_last: [0; KernelKind::ALL.len()], done_at: NEVER, tx_start: Vec::new(), rx_done: Vec::new() }
    }
}

/// The mapping controller's table entries of one die (traced as `map.group`, `map.rank`,
/// `map.ftd`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MapRegs {
    /// TP group.
    pub group: u32,
    /// Rank in the group's ring.
    pub rank: u32,
    /// Full token domain (FTD).
    pub ftd: u32,
}

pub struct DieCl {
    pub id: u32,
    pub compute: ComputeEngineCl,
    pub dma: CollectiveEngineCl,
    /// The NI-Balancer's migration engine (empty unless a migration plan is loaded).
    pub mig: MigrationEngineCl,
    kernels: Vec<Kernel>,
    kernel_pending: Vec<u32>,
    next_kernel: usize,
    tx: Vec<TxXfer>,
    tx_phase: Vec<(Phase, u32)>,
    tx_step: Vec<u32>,
    tx_pending: Vec<u32>,
    /// Global transfer id → (phase, micro-batch), of the transfers sent or received here.
    phase_of: HashMap<u32, (Phase, u32)>,
    /// Per micro-batch and phase: transfers sent or received here not yet done (the phase
    /// ends on this die when its count reaches zero; for the `phase end` log).
    phase_left: Vec<PerPhase<u32>>,
    tx_flits_total: u64,
    dependents: HashMap<Ev, Vec<Node>>,
    tx_left: u32,
    rx_left: u32,
    /// The windows the migration engine is gated by: all-reduce transfers (sent or received
    /// here) not yet done, and dispatch/combine ones; each window opens with its first event
    /// (the first all-reduce transfer started, the first gate kernel finished).
    ar_left: u32,
    a2a_left: u32,
    ar_started: bool,
    a2a_started: bool,
    pub times: DieTimes,
    ev: DmaEvents,
    /// Traced: the phase of the newest transfer started (0 none, 1 + Phase), the micro-batch of
    /// the running kernel, flits left to send.
    pub cur_phase: u8,
    /// Traced: the collective step and micro-batch of the newest transfer started.
    pub cur_step: u32,
    pub cur_tx_mb: u32,
    /// The mapping controller's table entries of this die.
    pub map_regs: MapRegs,
    pub cur_mb: u32,
    pub flits_left: u64,
    /// Functional mode: the die's values and the program the payloads are built from.
    pub func: Option<FuncDie>,
    prog: Option<Arc<LayerProgram>>,
    /// Transfers handed to the engine this cycle (their payloads are captured at the end of
    /// the cycle's eval, when the store is at hand).
    started: Vec<u32>,
    /// Scratch: transfers whose last dependence an event just met.
    ready: Vec<u32>,
}

impl DieCl {
    pub fn new(id: u32, prog: &LayerProgram, ports: DmaPorts, cols: u32, vcs: u32, vc_buf: u32, packet_flits: u32) -> Self {
        let dp: &DieProgram = &prog.dies[id as usize];
        let mut dma = CollectiveEngineCl::new(id, cols, vcs, vc_buf, packet_flits, ports);
        let mut phase_of = HashMap::new();
        let mut phase_left = vec![PerPhase::<u32>::default(); prog.micro_batches as usize];
        for &x in dp.rx.iter().chain(&dp.tx) {
            let n = &prog.xfers[x as usize];
            phase_of.insert(x, (n.phase, n.mb));
            phase_left[n.mb as usize][n.phase] += 1;
        }
        for &x in &dp.rx {
            dma.expect(x, prog.xfers[x as usize].flits);
        }
        let mut dependents: HashMap<Ev, Vec<Node>> = HashMap::new();
        for (i, deps) in dp.kernel_deps.iter().enumerate() {
            for &e in deps {
                dependents.entry(e).or_default().push(Node::Kernel(i as u32));
            }
        }
        for (j, deps) in dp.tx_deps.iter().enumerate() {
            for &e in deps {
                dependents.entry(e).or_default().push(Node::Tx(j as u32));
            }
        }
        let tx: Vec<TxXfer> = dp
            .tx
            .iter()
            .map(|&x| {
                let n = &prog.xfers[x as usize];
                TxXfer { id: x, dst: n.dst, flits: n.flits, class: n.phase as u8 }
            })
            .collect();
        let flits_left = tx.iter().map(|t| t.flits as u64).sum();
        DieCl {
            id,
            compute: ComputeEngineCl::default(),
            dma,
            kernels: dp.kernels.clone(),
            kernel_pending: dp.kernel_deps.iter().map(|d| d.len() as u32).collect(),
            next_kernel: 0,
            tx_phase: dp.tx.iter().map(|&x| (prog.xfers[x as usize].phase, prog.xfers[x as usize].mb)).collect(),
            tx_step: dp.tx.iter().map(|&x| prog.xfers[x as usize].step).collect(),
            cur_step: 0,
            cur_tx_mb: 0,
            map_regs: MapRegs::default(),
            tx_pending: dp.tx_deps.iter().map(|d| d.len() as u32).collect(),
            tx_left: tx.len() as u32,
            rx_left: dp.rx.len() as u32,
            ar_left: dp.rx.iter().chain(&dp.tx).filter(|&&x| prog.xfers[x as usize].phase == Phase::AllReduce).count() as u32,
            a2a_left: dp.rx.iter().chain(&dp.tx).filter(|&&x| prog.xfers[x as usize].phase != Phase::AllReduce).count() as u32,
            ar_started: false,
            a2a_started: false,
            mig: MigrationEngineCl::default(),
            tx,
            phase_of,
            phase_left,
            tx_flits_total: flits_left,
            dependents,
            times: DieTimes::new(prog.micro_batches as usize),
            ev: DmaEvents::default(),
            cur_phase: 0,
            cur_mb: 0,
            flits_left,
            func: None,
            prog: None,
            started: Vec::new(),
            ready: Vec::new(),
        }
    }

    /// Functional mode: the die computes on real values (`prog` is the layer it runs).
    pub fn set_functional(&mut self, prog: Arc<LayerProgram>) {
        self.func = Some(FuncDie::new(self.id, &prog));
        self.prog = Some(prog);
    }

    /// Every kernel ran, every transfer went out and came in.
    pub fn done(&self) -> bool {
        self.next_kernel == self.kernels.len() && self.compute.running.is_none() && self.tx_left == 0 && self.rx_left == 0
    }

    fn fire(&mut self, e: Ev, now: Cycle) {
        let Some(nodes) = self.dependents.get(&e) else { return };
        let mut ready = std::mem::take(&mut self.ready);
        for &n in nodes {
            match n {
                Node::Kernel(i) => self.kernel_pending[i as usize] -= 1,
                Node::Tx(j) => {
                    let p = &mut self.tx_pending[j as usize];
                    *p -= 1;
                    if *p == 0 {
                        ready.push(j);
                    }
                }
            }
        }
        for j in ready.drain(..) {
            self.start_tx(j as usize, now);
        }
        self.ready = ready;
    }

    /// Hands transfer `j` (its dependences met) to the collective engine.
    fn start_tx(&mut self, j: usize, now: Cycle) {
        let (ph, mb) = self.tx_phase[j];
        let f = &mut self.times.phase_first[mb as usize][ph as usize];
        if *f == NEVER {
            tracing::debug!(die = self.id, phase = ph.name(), mb, cycle = now, "phase start");
        }
        *f = (*f).min(now);
        self.cur_phase = 1 + ph as u8;
        self.ar_started |= ph == Phase::AllReduce;
        self.cur_step = self.tx_step[j];
        self.cur_tx_mb = mb;
        self.dma.start(self.tx[j]);
        self.times.tx_start.push((self.tx[j].id, now));
        self.started.push(self.tx[j].id);
    }

    /// Starts what has no dependences (cycle 0).
    pub fn begin(&mut self, now: Cycle) {
        for j in 0..self.tx.len() {
            if self.tx_pending[j] == 0 {
                self.start_tx(j, now);
            }
        }
    }

    /// One cycle: returns (progress, sent anything).
    ///
    /// # Safety
    /// Link protocol: see [`CollectiveEngineCl::eval`].
    pub unsafe fn eval(&mut self, now: Cycle, flits: &LinkArena<Flit>, credits: &LinkArena<Credit>, store: Option<&PayloadStore>) -> (u64, bool) {
        if let (Some(st), Some(f), Some(p)) = (store, self.func.as_mut(), self.prog.as_ref()) {
            // Payloads of the transfers started at the end of the previous cycle (or at begin).
            for x in self.started.drain(..) {
                st.put(x, f.payload(self.id, x, p));
            }
        } else {
            self.started.clear();
        }
        let mut progress = 0;
        if let Some(i) = self.compute.finish(now) {
            let k = self.kernels[i];
            let kk = k.kind.idx();
            self.times.kernel_last[kk] = self.times.kernel_last[kk].max(now);
            tracing::debug!(die = self.id, kernel = k.kind.name(), mb = k.mb, cycle = now, "kernel end");
            self.a2a_started |= k.kind == KernelKind::Gate;
            progress += 1;
            self.fire(Ev::Kernel(i as u32), now);
        }
        let mut ev = std::mem::take(&mut self.ev);
        ev.tx_done.clear();
        ev.rx_done.clear();
        self.mig.ar_window = self.ar_started && self.ar_left > 0;
        self.mig.a2a_window = self.a2a_started && self.a2a_left > 0;
        let moved = self.dma.eval(now, flits, credits, &mut ev, &mut self.mig);
        progress += moved;
        self.flits_left = self.tx_flits_total - self.dma.stats.tx_flits;
        for &x in &ev.tx_done {
            let (ph, mb) = self.phase_of[&x];
            let l = &mut self.times.phase_last[mb as usize][ph as usize];
            *l = (*l).max(now);
            self.close_window(ph);
            self.phase_done(ph, mb, now);
            self.tx_left -= 1;
            self.fire(Ev::Tx(x), now);
        }
        for &x in &ev.rx_done {
            let (ph, mb) = self.phase_of[&x];
            let l = &mut self.times.phase_last[mb as usize][ph as usize];
            *l = (*l).max(now);
            self.close_window(ph);
            self.phase_done(ph, mb, now);
            self.times.rx_done.push((x, now));
            self.rx_left -= 1;
            if let (Some(st), Some(f), Some(p)) = (store, self.func.as_mut(), self.prog.as_ref()) {
                f.arrive(x, st.take(x), p);
            }
            self.fire(Ev::Rx(x), now);
        }
        self.ev = ev;
        // The next kernel in stream order.
        if self.compute.running.is_none() && self.next_kernel < self.kernels.len() && self.kernel_pending[self.next_kernel] == 0 {
            let i = self.next_kernel;
            let k = self.kernels[i];
            self.compute.start(i, &k, now);
            let kk = k.kind.idx();
            self.times.kernel_first[kk] = self.times.kernel_first[kk].min(now);
            tracing::debug!(die = self.id, kernel = k.kind.name(), mb = k.mb, cycle = now, cycles = k.cycles, "kernel start");
            self.cur_mb = k.mb;
            self.next_kernel += 1;
            progress += 1;
        }
        if self.times.done_at == NEVER && self.done() {
            self.times.done_at = now;
            tracing::debug!(die = self.id, cycle = now, "die done");
        }
        (progress, moved > 0)
    }

    /// A transfer of (`ph`, micro-batch `mb`) sent or received here is done.
    fn phase_done(&mut self, ph: Phase, mb: u32, now: Cycle) {
        let left = &mut self.phase_left[mb as usize][ph];
        *left -= 1;
        if *left == 0 {
            tracing::debug!(die = self.id, phase = ph.name(), mb, cycle = now, "phase end");
        }
    }

    fn close_window(&mut self, ph: Phase) {
        match ph {
            Phase::AllReduce => self.ar_left -= 1,
            _ => self.a2a_left -= 1,
        }
    }

    /// Something can change without an arrival: a transfer to send (regular or migration).
    pub fn busy(&self) -> bool {
        self.dma.busy() || self.mig.can_send() || self.mig.mid_packet
    }

    /// The layer is done here and the migration engine is between packets; with
    /// `stall` (an invasive migration run) also every migration transfer it sends or
    /// receives is complete.
    pub fn quiet(&self, stall: bool) -> bool {
        self.done() && !self.mig.mid_packet && (!stall || self.mig.finished())
    }

    pub fn next_event(&self) -> Cycle {
        self.compute.next_event()
    }
}

impl crate::harness::Probe for DieCl {
    /// `dma.*`: the collective engine (phase of the newest transfer started: 0 none, 1
    /// all-reduce, 2 dispatch, 3 combine; its step and micro-batch; transfers queued; flits
    /// left to send); `compute.*`: the kernel running (0 idle, 1 attention, 2 gate, 3 experts,
    /// 4 predictor) and its micro-batch; `map.*`: the mapping controller's entries for this
    /// die; `mig.*`: the migration engine (kind of the newest packet: 0 none, 1 Local, 2
    /// Global; its move, chunk and step; transfers queued; flits sent and received; the
    /// windows it is gated by: bit 0 all-reduce, bit 1 all-to-all).
    fn declare(&self, scope: &[String], out: &mut Vec<crate::harness::SignalDecl>) {
        let sig = |sub: &str, name: &str, width: u32| {
            let mut sc = scope.to_vec();
            sc.push(sub.into());
            crate::harness::SignalDecl { scope: sc, name: name.into(), width }
        };
        out.push(sig("dma", "phase", 2));
        out.push(sig("dma", "step", 8));
        out.push(sig("dma", "mb", 8));
        out.push(sig("dma", "queued", 16));
        out.push(sig("dma", "flits_left", 32));
        out.push(sig("compute", "kernel", 3));
        out.push(sig("compute", "mb", 8));
        out.push(sig("map", "group", 16));
        out.push(sig("map", "rank", 16));
        out.push(sig("map", "ftd", 16));
        out.push(sig("mig", "kind", 2));
        out.push(sig("mig", "move", 16));
        out.push(sig("mig", "chunk", 16));
        out.push(sig("mig", "step", 8));
        out.push(sig("mig", "queued", 16));
        out.push(sig("mig", "tx_flits", 32));
        out.push(sig("mig", "rx_flits", 32));
        out.push(sig("mig", "windows", 2));
    }

    fn sample(&self, out: &mut Vec<u64>) {
        out.push(self.cur_phase as u64);
        out.push(self.cur_step as u64 & 0xff);
        out.push(self.cur_tx_mb as u64 & 0xff);
        out.push(self.dma.queued as u64 & 0xffff);
        out.push(self.flits_left & 0xffff_ffff);
        out.push(self.compute.running.map_or(0, |i| self.kernels[i].kind.idx() as u64 + 1));
        out.push(self.compute.running.map_or(0, |i| self.kernels[i].mb as u64 & 0xff));
        let r = &self.map_regs;
        out.push(r.group as u64 & 0xffff);
        out.push(r.rank as u64 & 0xffff);
        out.push(r.ftd as u64 & 0xffff);
        let m = &self.mig;
        out.push(m.cur_kind as u64);
        out.push(m.cur_move as u64 & 0xffff);
        out.push(m.cur_chunk as u64 & 0xffff);
        out.push(m.cur_step as u64 & 0xff);
        out.push(m.queued() as u64 & 0xffff);
        out.push(m.tx_flits & 0xffff_ffff);
        out.push(m.rx_flits & 0xffff_ffff);
        out.push(m.ar_window as u64 | (m.a2a_window as u64) << 1);
    }
}
