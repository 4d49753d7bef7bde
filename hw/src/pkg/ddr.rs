//! DDR channel: a DDR3-1600 memory controller and its devices, cycle by cycle on the DDR
//! command clock — request queue, address map, 8 banks with open rows, the JEDEC timing
//! constraints between commands, BL8 bursts on a shared data bus, and periodic refresh.
//!
//! ```text
//!  DdrReq (CDC) ─► request queue ─► burst queue (bank, row, column per BL8 burst, in order)
//!                                        │ one command per cycle on the command bus:
//!                                        │  RD   head burst: row open, tRCD, tCCD, data bus free
//!                                        │  ACT/PRE  bank preparation for the next `lookahead`
//!                                        │           bursts (tRP, tRAS, tRC, tRRD, tFAW, tRTP)
//!                                        │  PRE-all + REF every tREFI (tRFC busy)
//!                                        ▼
//!             data bus: RD at c ─► beats [c + tCL, c + tCL + BL/2) ─► last beat of a request
//!                                                                      ─► DdrResp (CDC)
//! ```
//!
//! Policy: open page; reads leave the data bus in request order (FCFS — the controller in
//! the chiplet asks for micro-slices in the order it needs them); bank preparation (PRE of
//! a conflicting row, ACT of the needed one) runs ahead for the next `lookahead` bursts, so
//! a stream that crosses into the next bank finds it open. Reads only: expert weights are
//! read-only during inference, so write timing (tWR, tWTR) is not modelled.
//!
//! Default: a 128-bit channel at DDR3-1600 (16 bytes per beat, two beats per 800 MHz clock:
//! 25.6 GB/s, SPEC §3 "25.6 GB/s per channel"), 11-11-11-28, 8 banks, 8 KiB pages, BL8 =
//! 128 bytes per burst, tREFI 7.8 µs, tRFC 260 ns (4 Gb devices). Address map
//! row : bank : column (a sequential stream fills a page, then moves to the next bank).
//!
//! Fast-forward: the channel is event-driven — it asks to be evaluated at the next cycle a
//! command can issue, a response leaves or a refresh falls due (each eligibility test is a
//! threshold on the cycle, so the earliest is exact); idle, it is woken at the next refresh
//! (every 6240 cycles). Results do not depend on the edges the engine skips (proptest).
//! It also runs its command bus ahead from one arrival or departure to the next
//! (`DdrChannelCl::run_ahead`): a stream of reads is then a few evaluations per request,
//! not one per burst. Traced, the registers the waveform shows (`cmd`, `open_banks`,
//! `refreshing`) go on a tape at the edges they change at while the bus runs ahead; the
//! owner takes each change into the change log at its own tick ([`DdrChannelCl::take_tape`]),
//! and the probe shows them as of the last change taken: the waveform of an evaluation at
//! every command edge.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::cfg::{err, CfgError};
use crate::harness::{Cycle, DomainClock, LinkArena, LinkId, Probe, SignalDecl};
use crate::harness::trace::{SampleBlock, SampleOut};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DdrCfg {
    /// Data bus width, bytes per beat (two beats per clock).
    pub bus_bytes: u32,
    /// Requests the controller queues (the chiplet keeps at most this many outstanding).
    pub queue_depth: u32,
    pub banks: u32,
    /// Row (page) size of the channel, bytes.
    pub page_bytes: u32,
    /// Beats per burst (BL8).
    pub burst_length: u32,
    /// Timing in DDR clock cycles (JEDEC DDR3-1600K 11-11-11).
    pub t_cl: u32,
    pub t_rcd: u32,
    pub t_rp: u32,
    pub t_ras: u32,
    pub t_rc: u32,
    pub t_rrd: u32,
    pub t_faw: u32,
    pub t_ccd: u32,
    pub t_rtp: u32,
    /// Refresh interval and refresh cycle time (0 = no refresh).
    pub t_refi: u32,
    pub t_rfc: u32,
    /// Bursts ahead of the head whose banks are prepared (PRE/ACT) early.
    pub lookahead: u32,
}

impl Default for DdrCfg {
    fn default() -> Self {
        DdrCfg {
            bus_bytes: 16,
            queue_depth: 8,
            banks: 8,
            page_bytes: 8192,
            burst_length: 8,
            t_cl: 11,
            t_rcd: 11,
            t_rp: 11,
            t_ras: 28,
            t_rc: 39,
            t_rrd: 5,
            t_faw: 24,
            t_ccd: 4,
            t_rtp: 6,
            t_refi: 6240,
            t_rfc: 208,
            lookahead: 8,
        }
    }
}

impl DdrCfg {
    pub fn validate(&self) -> Result<(), CfgError> {
        if self.queue_depth == 0 || self.queue_depth > 256 {
            return err("queue_depth", format!("1..=256 (got {})", self.queue_depth));
        }
        if self.bus_bytes == 0 || self.bus_bytes > 256 {
            return err("bus_bytes", format!("1..=256 (got {})", self.bus_bytes));
        }
        if !(1..=64).contains(&self.banks) {
            return err("banks", format!("1..=64 (got {})", self.banks));
        }
        if self.burst_length == 0 || self.burst_length % 2 != 0 || self.burst_length > 64 {
            return err("burst_length", format!("an even number of beats in 2..=64 (got {})", self.burst_length));
        }
        if self.page_bytes < self.burst_bytes() || self.page_bytes % self.burst_bytes() != 0 || self.page_bytes > 1 << 20 {
            return err("page_bytes", format!("a multiple of the burst size ({} bytes), at most 1 MiB (got {})", self.burst_bytes(), self.page_bytes));
        }
        for (f, v) in [("t_cl", self.t_cl), ("t_rcd", self.t_rcd), ("t_rp", self.t_rp), ("t_ras", self.t_ras), ("t_rc", self.t_rc), ("t_rrd", self.t_rrd), ("t_faw", self.t_faw), ("t_ccd", self.t_ccd), ("t_rtp", self.t_rtp), ("t_rfc", self.t_rfc)] {
            if v > 100_000 {
                return err(f, format!("at most 100000 cycles (got {v})"));
            }
        }
        if self.t_ccd == 0 {
            return err("t_ccd", "at least 1 cycle between reads");
        }
        if self.t_refi != 0 && self.t_refi <= self.t_rfc + self.t_rp + self.t_ras {
            return err("t_refi", format!("the refresh interval must exceed t_rfc + t_rp + t_ras ({}) or be 0 (got {})", self.t_rfc + self.t_rp + self.t_ras, self.t_refi));
        }
        if self.lookahead == 0 || self.lookahead > 64 {
            return err("lookahead", format!("1..=64 bursts (got {})", self.lookahead));
        }
        Ok(())
    }

    pub fn burst_bytes(&self) -> u32 {
        self.bus_bytes * self.burst_length
    }

    /// Data-bus cycles of one burst (two beats per clock).
    pub fn burst_cycles(&self) -> u64 {
        self.burst_length as u64 / 2
    }

    /// (bank, row) of the burst holding byte `addr`: row : bank : column.
    pub fn map(&self, addr: u64) -> (u32, u64) {
        let per_page = (self.page_bytes / self.burst_bytes()) as u64;
        let b = addr / self.burst_bytes() as u64 / per_page;
        ((b % self.banks as u64) as u32, b / self.banks as u64)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DdrReq {
    pub id: u32,
    pub addr: u64,
    pub bytes: u32,
}
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DdrResp {
    pub id: u32,
}
#[derive(Debug, Clone, Copy)]
pub struct DdrPorts {
    pub req_in: LinkId,
    pub resp_out: LinkId,
}
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct DdrStats {
    pub requests: u64,
    pub bytes: u64,
    /// Data-bus cycles.
    pub busy_cycles: u64,
    pub queue_max: u32,
    pub reads: u64,
    /// Reads that found their row open without an ACT issued for them.
    pub row_hits: u64,
    pub activates: u64,
    pub precharges: u64,
    pub refreshes: u64,
    /// Requests beyond `queue_depth` (the chiplet's credit should prevent them; accepted).
    pub overflows: u64,
}

/// Never (no cycle).
const NO: u64 = u64::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bank {
    row: Option<u64>,
    /// Cycles of the last ACT, PRE and RD to this bank.
    act: u64,
    pre: u64,
    rd: u64,
    /// An ACT was issued for the burst that will read this row next (row hit accounting).
    fresh: bool,
}

/// A command of the DDR command bus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cmd {
    Pre(usize),
    Act(usize, u64),
    Rd,
    Ref,
}

/// `n` queued bursts of one request, one after the other in one row of one bank (a
/// request's bursts within a page): the controller queue in runs, since the look-ahead and
/// the RD of the head read only a run's bank and row. `last`: the run ends its request (its
/// final burst answers it). A 1 KiB slice of a page was 8 queue entries scanned one by one at
/// every command decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Burst {
    id: u32,
    bank: u32,
    row: u64,
    n: u32,
    last: bool,
}

pub struct DdrChannelCl {
    cfg: DdrCfg,
    clk: DomainClock,
    resp_clk: DomainClock,
    ports: DdrPorts,
    // --- registers
    bursts: VecDeque<Burst>,
    /// Bursts queued (the sum of the runs' `n`): what decides whether a request landing now
    /// can change a command the bus issues (see [`Self::run_ahead`]).
    queued_bursts: u64,
    /// Requests queued (for the queue-depth check and the probe).
    queued: u32,
    banks: Vec<Bank>,
    /// Banks with an open row, bit per bank (the traced `open_banks`; `banks[b].row` is the
    /// truth, this its summary, kept by ACT and PRE).
    open: u64,
    /// Last RD and ACT cycles, the last four ACTs (tFAW), data bus free cycle.
    last_rd: u64,
    last_act: u64,
    faw: VecDeque<u64>,
    data_free: u64,
    /// Next refresh due, and the end of the refresh in progress.
    next_ref: u64,
    ref_end: u64,
    /// Responses: (cycle the last beat is on the bus, id), in order.
    resp: VecDeque<(u64, u32)>,
    resp_free_at: Cycle,
    /// Command of the last evaluated cycle, for traces: 0 none, 1 ACT, 2 PRE, 3 RD, 4 REF.
    cmd: u8,
    /// Last evaluated DDR cycle.
    cycle: u64,
    /// The next cycle to evaluate, computed at the end of each evaluation (the state only
    /// changes there).
    next_c: u64,
    /// The command bus has run ahead of the engine through `cycle` ([`Self::run_ahead`]):
    /// an edge at or before it is one a request lands at, and only queues it.
    ahead: bool,
    /// Traced runs: the bus runs ahead keeping the traced registers' changes on `tape`.
    pub taping: bool,
    /// Changes of the traced registers at edges the bus ran ahead through, not taken yet:
    /// (tick, signal of the probe: [`SIG_CMD`], [`SIG_OPEN`], [`SIG_REFRESHING`], value), in
    /// (tick, signal) order. Only edges up to `cycle` (nothing that lands later can change
    /// them); the `cmd` pulse's fall after `cycle` and a refresh that ends after it are
    /// edges of their own ([`Self::traced_next_event`]).
    tape: VecDeque<(Cycle, u32, u64)>,
    /// The traced registers as of the last change taken off the tape (what the probe shows
    /// while the tape holds changes): `cmd`, `open_banks`, `refreshing`.
    shown: [u64; 3],
    stats: DdrStats,
}

/// The probe's signals the tape holds (indices in [`DdrChannelCl::declare`]'s order).
pub const SIG_CMD: u32 = 2;
pub const SIG_OPEN: u32 = 3;
pub const SIG_REFRESHING: u32 = 4;

impl DdrChannelCl {
    pub fn new(_id: u8, cfg: &DdrCfg, clk: DomainClock, resp_clk: DomainClock, ports: DdrPorts) -> Self {
        let bank = Bank { row: None, act: NO, pre: NO, rd: NO, fresh: false };
        DdrChannelCl {
            cfg: cfg.clone(),
            clk,
            resp_clk,
            ports,
            bursts: VecDeque::new(),
            queued_bursts: 0,
            queued: 0,
            banks: vec![bank; cfg.banks as usize],
            open: 0,
            last_rd: NO,
            last_act: NO,
            faw: VecDeque::with_capacity(4),
            data_free: 0,
            next_ref: if cfg.t_refi == 0 { NO } else { cfg.t_refi as u64 },
            ref_end: 0,
            resp: VecDeque::new(),
            resp_free_at: 0,
            cmd: 0,
            cycle: 0,
            next_c: if cfg.t_refi == 0 { NO } else { cfg.t_refi as u64 },
            ahead: false,
            taping: false,
            tape: VecDeque::new(),
            shown: [0; 3],
            stats: DdrStats::default(),
        }
    }

    /// One DDR edge; the tick a response sent to the chiplet lands there, if one was sent.
    ///
    /// `run_ahead` (fast-forward on, untraced, no timeline): afterwards the command bus runs
    /// on through the edges at which it only issues commands, up to the next edge a response
    /// leaves at ([`Self::run_ahead`]), so the engine visits the channel at its arrivals and
    /// departures instead of at every command. A request landing in between is queued at its
    /// edge and changes none of the commands run ahead. Off, every command is an evaluation
    /// of its own (traced: the `cmd` pulse and the bank registers are sampled at their edge).
    ///
    /// # Safety
    /// At DDR edges, sole receiver of `req_in` and sender of `resp_out`.
    pub unsafe fn eval(&mut self, now: Cycle, reqs: &LinkArena<DdrReq>, resps: &LinkArena<DdrResp>, run_ahead: bool) -> Option<Cycle> {
        debug_assert!(self.tape_next() > now, "the tape's changes up to this tick are taken first");
        let c = self.clk.cycle_of(now);
        if self.ahead && c <= self.cycle {
            // The bus has already issued this edge's command (if any): the request that
            // lands here only joins the queue, behind at least `lookahead` bursts, so no
            // command issued from here to `cycle` would have looked at it. The next command
            // may (the queue can be shorter after `cycle`'s): asked again, with it queued.
            if let Some(r) = reqs.recv(self.ports.req_in, now) {
                self.accept(r);
            }
            self.next_c = self.next_cycle();
            if run_ahead {
                self.run_ahead();
            }
            return None;
        }
        debug_assert!(self.tape.is_empty(), "an evaluation past the edges run ahead finds the tape passed");
        self.ahead = false;
        self.cycle = c;
        self.cmd = 0;
        if let Some(r) = reqs.recv(self.ports.req_in, now) {
            self.accept(r);
        }
        self.command(c);
        // The request whose last beat has left the bus goes back to the chiplet.
        let mut sent = None;
        // One response per edge of the chiplet's clock: a DDR faster than the core holds
        // the next one until the crossing is free (issue 19: booking core edges ever
        // further ahead overran the crossing's ring).
        let next_rx = self.resp_clk.next_edge(now + 1);
        if let Some(&(done, id)) = self.resp.front() {
            if c >= done && next_rx >= self.resp_free_at {
                self.resp.pop_front();
                self.queued -= 1;
                let due = next_rx;
                resps.send_at(self.ports.resp_out, now, due, DdrResp { id });
                self.resp_free_at = due + 1;
                sent = Some(due);
            }
        }
        self.next_c = self.next_cycle();
        if run_ahead {
            self.run_ahead();
        }
        sent
    }

    /// Issues the commands of the edges to come, as evaluations there would, while nothing
    /// outside the channel can change them: it stops at the first edge a response leaves
    /// at (the engine's edge: it sends), and once fewer than `lookahead` bursts are queued
    /// (from there a request landing would be among the bursts the bank preparation looks
    /// at; with at least that many queued its bursts are behind all it looks at, and the
    /// head burst and refresh do not look at the queue's tail). The stop is the next event.
    /// A streaming channel issues hundreds of commands between two requests or responses,
    /// each of which was an evaluation of the tile and a tick of the engine.
    ///
    /// [`Self::stats`] then include the commands run ahead.
    ///
    /// Taping (traced), the changes of the traced registers at each edge run through go on
    /// the tape, as an evaluation there would have shown them.
    fn run_ahead(&mut self) {
        let deep = self.cfg.lookahead.max(1) as u64;
        if self.taping && self.tape.is_empty() {
            self.shown = self.regs();
        }
        while self.next_c != NO && self.queued_bursts >= deep {
            let x = self.next_c;
            if let Some(&(done, _)) = self.resp.front() {
                // `eval`'s departure test at edge x (the command of x cannot change it: a
                // response it queues leaves after tCL).
                if x >= done && self.resp_clk.next_edge(self.clk.edge(x) + 1) >= self.resp_free_at {
                    break;
                }
            }
            let before = if self.taping { Some(self.tape_gap(x)) } else { None };
            self.cycle = x;
            self.cmd = 0;
            self.command(x);
            self.ahead = true;
            if let Some(before) = before {
                let (at, now) = (self.clk.edge(x), self.regs());
                for (k, (b, v)) in before.into_iter().zip(now).enumerate() {
                    if b != v {
                        self.tape.push_back((at, SIG_CMD + k as u32, v));
                    }
                }
            }
            self.next_c = self.next_cycle();
        }
    }

    /// The traced registers as the probe shows them: `cmd`, `open_banks`, `refreshing`.
    fn regs(&self) -> [u64; 3] {
        [self.cmd as u64, self.open, (self.ref_end > self.cycle) as u64]
    }

    /// Taping, before the command edge `x` run ahead to from `cycle`: the changes of the
    /// edges in between, where no command issues (the `cmd` pulse falls at the edge after
    /// `cycle`'s command; `refreshing` falls at the refresh's end); returns the registers as
    /// of the edge before `x`.
    fn tape_gap(&mut self, x: u64) -> [u64; 3] {
        let f = self.cycle;
        let mut r = self.regs();
        if r[0] != 0 && f + 1 < x {
            self.tape.push_back((self.clk.edge(f + 1), SIG_CMD, 0));
            r[0] = 0;
        }
        if r[2] != 0 && self.ref_end < x {
            self.tape.push_back((self.clk.edge(self.ref_end), SIG_REFRESHING, 0));
            r[2] = 0;
        }
        r
    }

    /// The tick of the tape's first change (`Cycle::MAX`: none).
    #[inline]
    pub fn tape_next(&self) -> Cycle {
        self.tape.front().map_or(Cycle::MAX, |e| e.0)
    }

    /// Takes the tape's changes at ticks before `end` to `f` (tick, signal, value), in order:
    /// the owner hands them to the change log before it samples or drains (and before it
    /// evaluates the channel at a tick it has run ahead through).
    #[inline]
    pub fn take_tape(&mut self, end: Cycle, mut f: impl FnMut(Cycle, u32, u64)) {
        while let Some(&(t, k, v)) = self.tape.front() {
            if t >= end {
                break;
            }
            self.shown[(k - SIG_CMD) as usize] = v;
            self.tape.pop_front();
            f(t, k, v);
        }
    }

    fn accept(&mut self, r: DdrReq) {
        self.queued += 1;
        if self.queued > self.cfg.queue_depth {
            self.stats.overflows += 1;
        }
        self.stats.queue_max = self.stats.queue_max.max(self.queued);
        self.stats.requests += 1;
        self.stats.bytes += r.bytes as u64;
        let bb = self.cfg.burst_bytes() as u64;
        let first = r.addr / bb;
        let last = (r.addr + r.bytes.max(1) as u64 - 1) / bb;
        self.queued_bursts += last - first + 1;
        // One run per page the request touches (the map is row : bank : column, so the
        // bursts of a page share bank and row, and two pages never do).
        let per_page = (self.cfg.page_bytes / self.cfg.burst_bytes()) as u64;
        let mut b = first;
        while b <= last {
            let end = (b / per_page * per_page + per_page - 1).min(last);
            let (bank, row) = self.cfg.map(b * bb);
            self.bursts.push_back(Burst { id: r.id, bank, row, n: (end - b + 1) as u32, last: end == last });
            b = end + 1;
        }
    }

    /// The first cycle at which `t` cycles have passed since `at` (an event that never
    /// happened is long past).
    fn at(at: u64, t: u32) -> u64 {
        if at == NO {
            0
        } else {
            at + t as u64
        }
    }

    /// Commands the controller may issue next, in priority order, each with the first cycle
    /// its timing allows; `f` returns true to stop. Both the command bus ([`Self::command`]:
    /// the first one allowed now) and the wake-up ([`Self::next_cycle`]: the earliest of
    /// them) read this one list, so skipping cycles can never disagree with issuing.
    fn candidates(&self, c: u64, mut f: impl FnMut(u64, Cmd) -> bool) {
        let cfg = &self.cfg;
        // --- refresh due: close every bank (first open one first), then REF; nothing else
        if c >= self.next_ref {
            match self.banks.iter().position(|b| b.row.is_some()) {
                Some(b) => f(self.pre_at(b), Cmd::Pre(b)),
                None => f(self.banks.iter().map(|b| Self::at(b.pre, cfg.t_rp)).max().unwrap_or(0).max(self.data_free), Cmd::Ref),
            };
            return;
        }
        // Nothing issues during a refresh.
        let gate = self.ref_end;
        // --- RD of the head burst
        if let Some(h) = self.bursts.front() {
            let k = self.banks[h.bank as usize];
            if k.row == Some(h.row) {
                let rd = Self::at(k.act, cfg.t_rcd).max(Self::at(self.last_rd, cfg.t_ccd)).max(self.data_free.saturating_sub(cfg.t_cl as u64));
                if f(rd.max(gate), Cmd::Rd) {
                    return;
                }
            }
        }
        // --- bank preparation for the next bursts, earliest first; only the first pending
        // burst of a bank decides what that bank does
        // (banks ≤ 64, validated: the banks already decided are a bit set, not a scan of
        // the bursts before each one; once every bank is decided the rest are skipped)
        let all = u64::MAX >> (64 - cfg.banks);
        let mut seen = 0u64;
        // The first `lookahead` bursts: the runs that start among them (a run's later bursts
        // are its bank's, already decided by its first).
        let mut ahead = 0u32;
        for &b in self.bursts.iter() {
            if ahead >= cfg.lookahead {
                return;
            }
            ahead += b.n;
            let bi = b.bank as usize;
            if seen & (1 << bi) != 0 {
                continue;
            }
            seen |= 1 << bi;
            let k = self.banks[bi];
            let stop = match k.row {
                Some(r) if r == b.row => false,
                Some(_) => f(self.pre_at(bi).max(gate), Cmd::Pre(bi)),
                None => {
                    let faw = if self.faw.len() < 4 { 0 } else { Self::at(self.faw[0], cfg.t_faw) };
                    let act = Self::at(k.pre, cfg.t_rp).max(Self::at(k.act, cfg.t_rc)).max(Self::at(self.last_act, cfg.t_rrd)).max(faw);
                    f(act.max(gate), Cmd::Act(bi, b.row))
                }
            };
            if stop || seen == all {
                return;
            }
        }
    }

    /// First cycle bank `b` may be precharged (tRAS after its ACT, tRTP after its last RD).
    fn pre_at(&self, b: usize) -> u64 {
        let k = self.banks[b];
        Self::at(k.act, self.cfg.t_ras).max(Self::at(k.rd, self.cfg.t_rtp))
    }

    /// The command bus: at most one command this cycle, the first candidate allowed now.
    fn command(&mut self, c: u64) {
        let mut pick = None;
        self.candidates(c, |at, cmd| {
            if at <= c {
                pick = Some(cmd);
            }
            pick.is_some()
        });
        let cfg = &self.cfg;
        match pick {
            None => {}
            Some(Cmd::Pre(b)) => self.precharge(b, c),
            Some(Cmd::Ref) => {
                self.ref_end = c + cfg.t_rfc as u64;
                self.next_ref += cfg.t_refi as u64;
                self.stats.refreshes += 1;
                self.cmd = 4;
            }
            Some(Cmd::Act(b, row)) => {
                let bank = &mut self.banks[b];
                bank.row = Some(row);
                bank.act = c;
                bank.fresh = true;
                self.open |= 1 << b;
                self.last_act = c;
                if self.faw.len() == 4 {
                    self.faw.pop_front();
                }
                self.faw.push_back(c);
                self.stats.activates += 1;
                self.cmd = 1;
            }
            Some(Cmd::Rd) => {
                let q = self.bursts.front_mut().expect("RD is a candidate only with a head burst");
                q.n -= 1;
                self.queued_bursts -= 1;
                let h = Burst { last: q.last && q.n == 0, ..*q };
                if q.n == 0 {
                    self.bursts.pop_front();
                }
                self.data_free = c + cfg.t_cl as u64 + cfg.burst_cycles();
                self.last_rd = c;
                let bank = &mut self.banks[h.bank as usize];
                bank.rd = c;
                if !bank.fresh {
                    self.stats.row_hits += 1;
                }
                bank.fresh = false;
                self.stats.reads += 1;
                self.stats.busy_cycles += cfg.burst_cycles();
                if h.last {
                    self.resp.push_back((self.data_free, h.id));
                }
                self.cmd = 3;
            }
        }
    }

    fn precharge(&mut self, b: usize, c: u64) {
        let k = &mut self.banks[b];
        k.row = None;
        k.pre = c;
        k.fresh = false;
        self.open &= !(1 << b);
        self.stats.precharges += 1;
        self.cmd = 2;
    }

    /// Holds requests (queued or being answered).
    /// Whether an evaluation at `now` can change anything: a request arrives or the next
    /// event is due. At any other edge `eval` changes only the traced `cmd` register, so a
    /// busy partition may skip it when untraced.
    ///
    /// # Safety
    /// Engine protocol: called by the channel's owner in cycle `now`.
    pub unsafe fn due(&self, now: Cycle, reqs: &LinkArena<DdrReq>) -> bool {
        reqs.arrives(self.ports.req_in, now) || self.next_event() <= now
    }

    pub fn has_requests(&self) -> bool {
        self.queued > 0
    }

    /// Work at the next edge that [`Self::next_event`] does not announce: none — the
    /// channel is event-driven (the next command, response and refresh cycles are exact).
    pub fn busy(&self) -> bool {
        false
    }

    /// The earliest cycle after the current one at which a command can issue, the head
    /// response leaves, or a refresh falls due, with no new request arriving (arrivals are
    /// evaluated anyway): the smallest ready cycle of [`Self::candidates`].
    fn next_cycle(&self) -> u64 {
        let c1 = self.cycle + 1;
        let mut t = self.next_ref;
        if let Some(&(done, _)) = self.resp.front() {
            t = t.min(done);
        }
        let mut m = NO;
        // A candidate allowed by the next cycle decides it: nothing can be earlier.
        self.candidates(self.cycle, |at, _| {
            m = m.min(at);
            m <= c1
        });
        m.max(c1).min(t.max(c1))
    }

    /// Traced runs, at an edge [`Self::traced_next_event`] asks for but [`Self::due`] does
    /// not: what `eval` does there. No request arrives and nothing is due, so no command
    /// issues, no response leaves and the next event stays; only the `cmd` pulse falls and
    /// the cycle (hence `refreshing`) moves on. A full `eval` here cost as much as a due
    /// one, and a traced A3 layer had about as many of these edges as due ones.
    ///
    /// Out of line on purpose: inlined into the tile loop it left the instruction count
    /// unchanged but made the untraced layer about 5 % slower (code layout;
    /// docs/results-speed.md, "sixth session").
    #[inline(never)]
    pub fn settle(&mut self, now: Cycle) {
        debug_assert!(self.tape.is_empty(), "settle inside the edges run ahead");
        self.cycle = self.clk.cycle_of(now);
        debug_assert!(self.next_c > self.cycle, "settle at a due edge");
        self.cmd = 0;
    }

    /// Traced runs: the next edge at which a traced register changes, with or without an
    /// event — [`Self::next_event`], the edge after a command (`cmd` returns to 0), the end
    /// of a refresh (tRFC).
    pub fn traced_next_event(&self) -> Cycle {
        let mut t = self.next_event();
        if self.cmd != 0 {
            t = t.min(self.clk.edge(self.cycle + 1));
        }
        if self.ref_end > self.cycle {
            t = t.min(self.clk.edge(self.ref_end));
        }
        t
    }

    /// The edge of `next_cycle`; idle, the next refresh (the channel is woken for
    /// it, so refresh timing is exact whichever edges are skipped).
    pub fn next_event(&self) -> Cycle {
        let c = self.next_c;
        if c == NO {
            crate::harness::NEVER
        } else {
            self.clk.edge(c)
        }
    }

    /// Counters of the commands issued so far: with the bus run ahead ([`Self::eval`]),
    /// up to the next response's edge.
    pub fn stats(&self) -> &DdrStats {
        &self.stats
    }

    /// Peak data rate in bytes per tick.
    pub fn peak_bytes_per_tick(&self) -> f64 {
        2.0 * self.cfg.bus_bytes as f64 / self.clk.div as f64
    }
}

impl Probe for DdrChannelCl {
    fn declare(&self, scope: &[String], out: &mut Vec<SignalDecl>) {
        let mut sc = scope.to_vec();
        sc.push("ddr".into());
        for (name, width) in [("queue", 16), ("busy", 1), ("cmd", 3), ("open_banks", 64), ("refreshing", 1)] {
            out.push(SignalDecl { scope: sc.clone(), name: name.into(), width });
        }
    }
    fn sample(&self, out: &mut Vec<u64>) {
        self.sample_to(out);
    }
}

impl SampleBlock for DdrChannelCl {
    #[inline(always)]
    fn sample_to<O: SampleOut>(&self, out: &mut O) {
        debug_assert_eq!(self.open, self.banks.iter().enumerate().fold(0u64, |m, (i, b)| m | (b.row.is_some() as u64) << i));
        // While the bus has run ahead, the traced registers as of the last change taken (the
        // queue changes only at evaluations, which are never run ahead).
        let [cmd, open, refreshing] = if self.tape.is_empty() { self.regs() } else { self.shown };
        out.put_all([self.queued as u64, (self.queued > 0) as u64, cmd, open, refreshing]);
    }
}
