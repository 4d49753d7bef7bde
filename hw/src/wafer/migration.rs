//! The NI-Balancer's migration engine (CL): one per die, beside the collective engine, moving
//! expert weights into shadow slots as real flits of their own traffic classes (paper §V-D;
//! SPEC §4: "migration split into Local steps (intra-FTD, during all-reduce) and Global steps
//! (inter-FTD, during all-to-all), only on cold links, in its own stream").
//!
//! What moves: a [`MigrationPlan`] — every move of the decision unit (`balancer.rs`) cut into
//! chunks of `chunk_flits` flits; each chunk travels the move's XY route as the FL's steps
//! ([`sched::balance::ni::migration_steps`]): one transfer per (chunk, step), store-and-forward
//! at the die ending a step (the chunk lands in that die's HBM staging buffer, then is sent
//! on). A chunk's step s+1 starts at the die where step s ended, once the chunk has fully
//! arrived there, so chunks pipeline over the steps.
//!
//! When it may send ([`MigGate`]):
//! * `Windows` (non-invasive): a Local step only while the die is in its all-reduce window and
//!   not in its all-to-all window, a Global step only in the all-to-all window and not in the
//!   all-reduce one. The windows are the die's own (from its sequencer): all-reduce = from its
//!   first all-reduce transfer until every all-reduce transfer it sends or receives is done;
//!   all-to-all = from its first gate kernel's end until every dispatch/combine transfer it
//!   sends or receives is done. Under ER-Mapping a Local step's links are intra-FTD (cold
//!   during the all-reduce) and a Global step's inter-FTD (idle during the all-to-all); the
//!   waveform checker `links_cold_for_migration` proves it on the dump.
//! * `Always` (invasive balancers): inference is stalled, the plan's chunks go straight from
//!   source to destination over XY (one step), any link.
//!
//! The injection port is the collective engine's: a migration packet opens only when no
//! regular transfer is queued (regular traffic first), and holds the port for its
//! `packet_flits` flits. Flits carry `data = MIG_BIT | transfer id` so the receiving collective
//! engine hands them to this engine, and class 3 (Local) or 4 (Global).
//!
//! Across iterations the plan persists: an engine is loaded with what is left (a transfer
//! resumes at the flits already delivered) and reports what it delivered. A run with
//! migration ends when the layer is done *and* the network has drained, so no flit is lost
//! between iterations.

use bitvec::vec::BitVec;
use std::collections::{HashMap, VecDeque};

use sched::balance::ni::{migration_steps, MigKind, Move};
use sched::wafer::Mapping;
use serde::Serialize;

/// Marks a flit's `data` as a migration transfer id.
pub const MIG_BIT: u32 = 1 << 31;
/// Flit classes of migration traffic (the regular phases are 0..3).
pub const CLASS_MIG_LOCAL: u8 = 3;
pub const CLASS_MIG_GLOBAL: u8 = 4;

/// When the engine may open a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MigGate {
    /// Non-invasive: Local steps in the all-reduce window, Global ones in the all-to-all.
    Windows,
    /// Invasive: inference stalls; any time, any link.
    Always,
}

/// One (chunk, step) transfer of a migration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MigXfer {
    /// Index of the move in the plan.
    pub mv: u32,
    pub chunk: u32,
    pub step: u32,
    pub src: u32,
    pub dst: u32,
    pub flits: u32,
    pub kind: MigKind,
    /// The same chunk's next step (sent from `dst` once this one has arrived).
    pub next: Option<u32>,
}

/// The flit class of a step kind.
pub fn class_of(kind: MigKind) -> u8 {
    match kind {
        MigKind::Local => CLASS_MIG_LOCAL,
        MigKind::Global => CLASS_MIG_GLOBAL,
    }
}

/// Every transfer of a set of moves, and how far each got (persists across iterations).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MigrationPlan {
    pub moves: Vec<Move>,
    pub xfers: Vec<MigXfer>,
    /// Flits of each transfer delivered (received at its `dst`).
    pub delivered: Vec<u32>,
    /// Per move: its chunks' last-step transfers.
    last: Vec<Vec<u32>>,
}

impl MigrationPlan {
    /// Non-invasive: every move's weights (`expert_flits` flits) in chunks of `chunk_flits`,
    /// each chunk over the Local/Global steps of the move's XY route.
    pub fn stepwise(map: &Mapping, moves: &[Move], expert_flits: u32, chunk_flits: u32) -> Self {
        Self::build(moves, expert_flits, chunk_flits, |m| migration_steps(map, m.src_device, m.dst_device).into_iter().map(|s| (s.kind, s.path[0], *s.path.last().unwrap())).collect())
    }

    /// Invasive: each chunk straight from source to destination (one step; class Local, whose
    /// meaning — "no regular traffic beside it" — holds during a stall).
    pub fn direct(moves: &[Move], expert_flits: u32, chunk_flits: u32) -> Self {
        Self::build(moves, expert_flits, chunk_flits, |m| vec![(MigKind::Local, m.src_device, m.dst_device)])
    }

    fn build(moves: &[Move], expert_flits: u32, chunk_flits: u32, steps_of: impl Fn(&Move) -> Vec<(MigKind, u32, u32)>) -> Self {
        let chunk_flits = chunk_flits.max(1);
        let chunks = expert_flits.div_ceil(chunk_flits).max(1);
        let mut p = MigrationPlan { moves: moves.to_vec(), ..Default::default() };
        for (k, m) in moves.iter().enumerate() {
            let steps = steps_of(m);
            let mut last = Vec::new();
            for c in 0..chunks {
                let flits = chunk_flits.min(expert_flits.max(1) - c * chunk_flits);
                let first = p.xfers.len() as u32;
                for (s, &(kind, src, dst)) in steps.iter().enumerate() {
                    let next = (s + 1 < steps.len()).then(|| first + s as u32 + 1);
                    p.xfers.push(MigXfer { mv: k as u32, chunk: c, step: s as u32, src, dst, flits, kind, next });
                }
                if !steps.is_empty() {
                    last.push(first + steps.len() as u32 - 1);
                }
            }
            p.last.push(last);
        }
        p.delivered = vec![0; p.xfers.len()];
        p
    }

    fn complete(&self, x: u32) -> bool {
        self.delivered[x as usize] >= self.xfers[x as usize].flits
    }

    /// Every chunk of move `k` reached its destination.
    pub fn move_done(&self, k: usize) -> bool {
        self.last[k].iter().all(|&x| self.complete(x))
    }

    pub fn done(&self) -> bool {
        (0..self.moves.len()).all(|k| self.move_done(k))
    }

    /// Flits still to deliver, summed over every transfer.
    pub fn flits_left(&self) -> u64 {
        self.xfers.iter().zip(&self.delivered).map(|(x, &d)| (x.flits - d.min(x.flits)) as u64).sum()
    }

    /// Transfers that can be sent now, one bit per transfer (a rebalance moves hundreds of
    /// chunks): incomplete, and the chunk's previous step complete.
    fn ready(&self) -> BitVec {
        let mut ready: BitVec = self.xfers.iter().map(|x| x.step == 0).collect();
        for (i, x) in self.xfers.iter().enumerate() {
            if let Some(n) = x.next {
                ready.set(n as usize, self.complete(i as u32));
            }
        }
        for i in 0..ready.len() {
            if self.complete(i as u32) {
                ready.set(i, false);
            }
        }
        ready
    }
}

/// A transfer queued at its source engine.
#[derive(Debug, Clone, Copy)]
struct Queued {
    id: u32,
    dst: u32,
    flits: u32,
    sent: u32,
    kind: MigKind,
}

/// A packet the collective engine opens for this engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MigPacket {
    /// Flit `data`: `MIG_BIT | id`.
    pub data: u32,
    pub dst: u32,
    pub class: u8,
    pub flits: u32,
}

/// The migration engine of one die.
#[derive(Debug, Clone)]
pub struct MigrationEngineCl {
    pub gate: MigGate,
    /// Transfers to send, one FIFO per destination (chunks in order, so the first chunk of a
    /// step completes first and goes on to its next step while the later ones follow:
    /// the steps pipeline), served round-robin over the destinations (different links).
    queue: std::collections::BTreeMap<u32, std::collections::VecDeque<Queued>>,
    rr: u32,
    /// Incoming transfers: id → (flits expected, received, the next step's transfer to queue
    /// here on completion).
    rx: HashMap<u32, (u32, u32, Option<Queued>)>,
    /// Inputs from the die's sequencer, this cycle.
    pub ar_window: bool,
    pub a2a_window: bool,
    /// Traced registers: the step kind of the newest packet (0 none, 1 Local, 2 Global), its
    /// move, chunk and step; transfers queued; flits sent and received.
    pub cur_kind: u8,
    pub cur_move: u32,
    pub cur_chunk: u32,
    pub cur_step: u32,
    pub tx_flits: u64,
    pub rx_flits: u64,
    /// Migration flits of a packet opened but not all sent (the drain condition).
    pub mid_packet: bool,
    /// Transfer → (move, chunk, step), for the traced registers.
    meta: HashMap<u32, (u32, u32, u32)>,
}

impl Default for MigrationEngineCl {
    fn default() -> Self {
        MigrationEngineCl {
            gate: MigGate::Windows,
            queue: Default::default(),
            rr: 0,
            rx: HashMap::new(),
            ar_window: false,
            a2a_window: false,
            cur_kind: 0,
            cur_move: 0,
            cur_chunk: 0,
            cur_step: 0,
            tx_flits: 0,
            rx_flits: 0,
            mid_packet: false,
            meta: HashMap::new(),
        }
    }
}

impl MigrationEngineCl {
    /// Loads die `die`'s share of `plan`: the ready transfers it sends (resuming at their
    /// delivered flits), and the incomplete transfers it receives.
    pub fn load(die: u32, plan: &MigrationPlan, gate: MigGate) -> Self {
        let mut e = MigrationEngineCl { gate, ..Default::default() };
        let ready = plan.ready();
        for (i, x) in plan.xfers.iter().enumerate() {
            let id = i as u32;
            let done = plan.delivered[i];
            if x.src == die && ready[i] {
                e.push(Queued { id, dst: x.dst, flits: x.flits, sent: done, kind: x.kind });
            }
            if x.dst == die && done < x.flits {
                let next = x.next.map(|n| {
                    let y = &plan.xfers[n as usize];
                    Queued { id: n, dst: y.dst, flits: y.flits, sent: plan.delivered[n as usize], kind: y.kind }
                });
                e.rx.insert(id, (x.flits, done, next));
            }
            if x.src == die || x.dst == die {
                e.meta.insert(id, (x.mv, x.chunk, x.step));
            }
        }
        e
    }

    fn allowed(&self, k: MigKind) -> bool {
        match self.gate {
            MigGate::Always => true,
            MigGate::Windows => match k {
                MigKind::Local => self.ar_window && !self.a2a_window,
                MigKind::Global => self.a2a_window && !self.ar_window,
            },
        }
    }

    fn push(&mut self, q: Queued) {
        self.queue.entry(q.dst).or_default().push_back(q);
    }

    /// The next packet to send: the head transfer of the next destination (round-robin from
    /// the one after the last served) whose step the windows allow, `packet_flits` at most;
    /// `None` when none may go. Called by the collective engine only when it has no regular
    /// transfer to send.
    pub fn open(&mut self, packet_flits: u32) -> Option<MigPacket> {
        let allowed = |q: &VecDeque<Queued>| q.front().is_some_and(|h| self.allowed(h.kind));
        let dst = self.queue.range(self.rr..).find(|(_, q)| allowed(q)).or_else(|| self.queue.range(..self.rr).find(|(_, q)| allowed(q))).map(|(&d, _)| d)?;
        let fifo = self.queue.get_mut(&dst).expect("picked");
        let q = fifo.front_mut().expect("non-empty");
        let flits = (q.flits - q.sent).min(packet_flits.max(1));
        q.sent += flits;
        let pkt = MigPacket { data: MIG_BIT | q.id, dst: q.dst, class: class_of(q.kind), flits };
        let (mv, ch, st) = self.meta.get(&q.id).copied().unwrap_or_default();
        (self.cur_kind, self.cur_move, self.cur_chunk, self.cur_step) = (1 + (q.kind == MigKind::Global) as u8, mv, ch, st);
        if q.sent == q.flits {
            fifo.pop_front();
            if fifo.is_empty() {
                self.queue.remove(&dst);
            }
        }
        self.rr = dst + 1;
        self.mid_packet = true;
        Some(pkt)
    }

    /// One migration flit sent (the last of the packet: `tail`).
    pub fn on_sent(&mut self, tail: bool) {
        self.tx_flits += 1;
        if tail {
            self.mid_packet = false;
        }
    }

    /// One migration flit arrived (its `data` without `MIG_BIT`). Returns true when it
    /// completed the transfer.
    pub fn on_flit(&mut self, id: u32) -> bool {
        self.rx_flits += 1;
        let Some(e) = self.rx.get_mut(&id) else { return false };
        e.1 += 1;
        if e.1 < e.0 {
            return false;
        }
        tracing::debug!(transfer = id, flits = e.0, "migration: transfer complete at its destination");
        if let Some(n) = e.2.take() {
            self.push(n);
        }
        true
    }

    /// Something queued the windows let through now (the die must be evaluated every cycle).
    pub fn can_send(&self) -> bool {
        self.queue.values().any(|q| q.front().is_some_and(|h| self.allowed(h.kind)))
    }

    /// Nothing queued and every expected transfer complete (stall runs end on this).
    pub fn finished(&self) -> bool {
        self.queue.is_empty() && !self.mid_packet && self.rx.values().all(|e| e.1 >= e.0)
    }

    pub fn queued(&self) -> u32 {
        self.queue.values().map(|q| q.len() as u32).sum()
    }

    /// Flits received per incoming transfer (for [`MigrationPlan::delivered`]).
    pub fn received(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.rx.iter().map(|(&id, e)| (id, e.1))
    }
}
