//! Rule-5 load arbiter (A4, optional in the paper): "DDR sends micro-slices to the chiplet
//! with the greatest available storage among those processing the expert".
//!
//! Without Rule 5 every member of a trajectory loads a fixed share of the expert's
//! micro-slices (k mod |T_e|, Rule 4), however full its ring is. With Rule 5 the loader of
//! each micro-slice is chosen when the load is issued: this block, on the IO die beside the
//! scheduler, keeps a claim counter per expert and hands micro-slice k to the member with
//! the most free ring slots; the micro-slice's trajectory then starts at that chiplet and
//! visits every other member once (its tag carries the loader).
//!
//! ```text
//!  IO-die scheduler ──(snoop: Preload/Grant, mask)──► load list (expert, mask, next k, granted)
//!  chiplet c ──status (free for granted, free for pre-loads)──► free regs[c]
//!  each core cycle, load list oldest first:  c* = argmax free over members not cooling down
//!      ──Load{expert, k, loader = c*}──► chiplet c*   (cooldown: one claim per chiplet per
//!                                                      status round trip, so a stale count
//!                                                      is never spent twice)
//! ```
//!
//! The chiplets report free slots net of the loads they were handed and have not issued
//! yet, and report 0 pre-load room once pre-loads hold half their ring (Rule 4's cap), so
//! the arbiter never hands out more than fits. Reports travel only on change (a link value
//! per change, not per cycle), so an idle package still fast-forwards.

use std::collections::VecDeque;

use sched::pkg::iodie::SchedMsg;

use super::chiplet::{ChipletId, ExpertId, Trajectory};
/// The status link's value (sent by the chiplet controller, which owns it).
pub use super::chiplet::FreeReport;
use super::traj::PkgTraj;
use super::ring::SlotTag;
use crate::harness::{Cycle, DomainClock, LinkArena, LinkId, Probe, SignalDecl, NEVER};

#[derive(Debug, Clone, Copy)]
pub struct ArbiterPorts<'a> {
    /// Status from each chiplet.
    pub status_in: &'a [LinkId],
    /// Load assignments to each chiplet.
    pub load_out: &'a [LinkId],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    expert: ExpertId,
    mask: u16,
    granted: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ArbiterStats {
    pub assignments: u64,
    /// Assignments that went to another chiplet than the Rule-4 loader of that micro-slice.
    pub redirected: u64,
}

pub struct LoadArbiterCl {
    n: usize,
    /// Micro-slices per expert (0: not used this layer).
    m_of: Vec<u16>,
    /// The package's trajectories: ring order (ties go to the earliest) and the Rule-4
    /// loader (for the `redirected` counter).
    traj: PkgTraj,
    clk: DomainClock,
    status_in: Vec<LinkId>,
    load_out: Vec<LinkId>,
    /// Cycles between two claims of one chiplet: load link + status link + 1.
    cooldown: u64,
    // --- registers
    /// Claim counter per expert: next micro-slice to hand out.
    next_k: Vec<u16>,
    /// Experts with micro-slices left to hand out, in the scheduler's order.
    list: VecDeque<Entry>,
    free: Vec<FreeReport>,
    /// Tick before which chiplet c gets no new claim.
    until: Vec<Cycle>,
    /// Last assignment (for traces).
    last: Option<(SlotTag, ChipletId)>,
    /// Cached by `eval` (see `claim_times`).
    claim_at: Cycle,
    cool_end: Cycle,
    /// The last evaluated edge claimed (an entry may have run out of micro-slices then, and
    /// the next scan drops it).
    claimed: bool,
    pub stats: ArbiterStats,
}

impl LoadArbiterCl {
    /// `m_of`: micro-slices per expert; the chiplets report their room before the first
    /// claim (no room is assumed until then).
    pub fn new(n: usize, m_of: Vec<u16>, traj: PkgTraj, clk: DomainClock, ports: ArbiterPorts, cooldown_cycles: u64) -> Self {
        LoadArbiterCl {
            n,
            next_k: vec![0; m_of.len()],
            m_of,
            traj,
            clk,
            status_in: ports.status_in.to_vec(),
            load_out: ports.load_out.to_vec(),
            cooldown: cooldown_cycles.max(1),
            list: VecDeque::new(),
            free: vec![FreeReport::default(); n],
            until: vec![0; n],
            last: None,
            claim_at: NEVER,
            cool_end: NEVER,
            claimed: false,
            stats: ArbiterStats::default(),
        }
    }

    /// One core edge. `sent` = the scheduler's message of this edge.
    ///
    /// # Safety
    /// Engine protocol: sole receiver of the status links, sole sender of the load links.
    pub unsafe fn eval(&mut self, now: Cycle, sent: Option<SchedMsg>, status: &LinkArena<FreeReport>, loads: &LinkArena<SlotTag>) -> bool {
        // An edge with no status landing and no scheduler message, after an edge that claimed
        // nothing, can claim only if a cooldown has ended (`claim_at`, from the registers this
        // edge would read unchanged): otherwise the scan finds nothing, and drops nothing (an
        // entry runs out only by a claim, and the scan after that claim dropped it). Skipping
        // it changes no register but `last`. On A4 the scan over the load list at every core
        // edge was the run's largest cost.
        if sent.is_none() && !self.claimed && self.claim_at > now && !self.status_in.iter().any(|&l| status.arrives(l, now)) {
            self.last = None;
            return false;
        }
        let any = self.edge(now, sent, status, loads);
        self.claimed = any;
        (self.claim_at, self.cool_end) = self.claim_times();
        any
    }

    /// The edge's logic ([`Self::eval`] without the cached wake-up times).
    unsafe fn edge(&mut self, now: Cycle, sent: Option<SchedMsg>, status: &LinkArena<FreeReport>, loads: &LinkArena<SlotTag>) -> bool {
        self.last = None;
        for (c, &l) in self.status_in.iter().enumerate() {
            if let Some(r) = status.recv(l, now) {
                self.free[c] = r;
            }
        }
        match sent {
            Some(SchedMsg::Preload { expert, mask }) => self.note(expert, mask, false),
            Some(SchedMsg::Grant { expert, mask, .. }) => self.note(expert, mask, true),
            None => {}
        }
        let mut any = false;
        let mut i = 0;
        while i < self.list.len() {
            let e = self.list[i];
            let k = self.next_k[e.expert.idx()];
            if k >= self.m_of[e.expert.idx()] {
                self.list.remove(i);
                continue;
            }
            let mut best: Option<(u16, u8, usize)> = None;
            for c in 0..self.n {
                if e.mask >> c & 1 == 0 || self.until[c] > now {
                    continue;
                }
                let f = self.free[c].room(e.granted);
                if f == 0 {
                    continue;
                }
                // Most free storage; ties to the earliest in ring order.
                let pos = self.traj.ring_position(ChipletId(c as u8));
                let better = match best {
                    None => true,
                    Some((bf, bp, _)) => f > bf || (f == bf && pos < bp),
                };
                if better {
                    best = Some((f, pos, c));
                }
            }
            if let Some((_, _, c)) = best {
                let cid = ChipletId(c as u8);
                let tag = SlotTag { expert: e.expert, k, loader: cid };
                loads.send(self.load_out[c], now, tag);
                if self.traj.loader(e.mask, k) != cid {
                    self.stats.redirected += 1;
                }
                self.stats.assignments += 1;
                self.until[c] = self.clk.edge(self.clk.cycle_of(now) + self.cooldown);
                let f = &mut self.free[c];
                f.granted = f.granted.saturating_sub(1);
                f.preload = f.preload.saturating_sub(1);
                self.next_k[e.expert.idx()] += 1;
                self.last = Some((tag, cid));
                any = true;
            }
            i += 1;
        }
        any
    }

    fn note(&mut self, expert: ExpertId, mask: u16, granted: bool) {
        if let Some(e) = self.list.iter_mut().find(|e| e.expert == expert) {
            e.granted |= granted;
            e.mask = mask;
        } else if self.m_of.get(expert.idx()).is_some_and(|&m| m > self.next_k[expert.idx()]) && mask != 0 {
            self.list.push_back(Entry { expert, mask, granted });
        }
    }

    /// A claim is possible at the next edge (some entry has a member with room that is not
    /// cooling down) — only then must the edge be evaluated without a landing status value.
    pub fn busy(&self, now: Cycle) -> bool {
        self.claim_at <= self.clk.edge_after(now)
    }

    /// The earliest cooldown end of a member with room (a claim becomes possible then).
    pub fn next_event(&self) -> Cycle {
        self.cool_end
    }

    /// Over the entries with micro-slices left and their members with room: the earliest
    /// cooldown end (0 for a member never claimed), and the earliest non-zero one. Only
    /// `eval` changes what they read, so it caches them.
    fn claim_times(&self) -> (Cycle, Cycle) {
        let (mut claim, mut cool) = (NEVER, NEVER);
        for e in &self.list {
            if self.next_k[e.expert.idx()] >= self.m_of[e.expert.idx()] {
                continue;
            }
            for c in 0..self.n {
                if e.mask >> c & 1 == 1 && self.free[c].room(e.granted) > 0 {
                    claim = claim.min(self.until[c]);
                    if self.until[c] != 0 {
                        cool = cool.min(self.until[c]);
                    }
                }
            }
        }
        (claim, cool)
    }
}

impl LoadArbiterCl {
    /// State for the watchdog report.
    pub fn report(&self) -> String {
        let pend: Vec<String> = self.list.iter().map(|e| format!("expert {} k {}/{} mask {:#b}{}", e.expert, self.next_k[e.expert.idx()], self.m_of[e.expert.idx()], e.mask, if e.granted { " granted" } else { "" })).collect();
        format!("{} experts to hand out [{}]; free {:?}; cooldown until {:?}", self.list.len(), pend.join("; "), self.free, self.until)
    }
}

impl Probe for LoadArbiterCl {
    fn declare(&self, scope: &[String], out: &mut Vec<SignalDecl>) {
        let mut sc = scope.to_vec();
        sc.push("rule5".into());
        for (name, width) in [("pending_experts", 16), ("assign_valid", 1), ("assign_expert", 16), ("assign_k", 16), ("assign_chiplet", 8)] {
            out.push(SignalDecl { scope: sc.clone(), name: name.into(), width });
        }
    }
    fn sample(&self, out: &mut Vec<u64>) {
        let (v, e, k, c) = match self.last {
            Some((t, c)) => (1, t.expert.0 as u64, t.k as u64, c.0 as u64),
            None => (0, 0, 0, 0),
        };
        out.extend([self.list.len() as u64, v, e, k, c]);
    }
}
