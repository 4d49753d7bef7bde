//! Network interface (terminal) of one mesh node: the traffic source and the ideal sink.
//!
//! Source (BookSim `TrafficManager::_Inject`/`_Step`): a Bernoulli trial every cycle with
//! probability `rate / packet_size` creates a packet; the source queue is unbounded and
//! implicit — only the packet at its head is materialised, with the creation cycle of its
//! successful trial, so queueing delay counts in packet latency. Trials are drawn as geometric
//! gaps from a per-node RNG stream (same distribution as a coin per cycle, O(1) per packet, and
//! independent of how cycles are stepped, which keeps fast-forward and parallel runs
//! bit-identical). A head flit takes an injection VC round-robin among VCs that are free and
//! have a credit; body flits follow on it; one flit per cycle.
//!
//! Sink: retires a flit the cycle it arrives and returns its credit at once. Checks that every
//! flit reaches its destination, in order within its packet.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use sched::noc::TrafficPattern;

use super::config::{RouterCfg, TrafficCfg};
use super::credit::CreditCounterCl;
use super::flit::{make_pid, Credit, Flit};
use crate::harness::{Cycle, LinkArena, LinkId, Probe, SignalDecl, NEVER};

/// Which packets the measurement counts (BookSim's `record`), set per run by the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Every delivered packet is sampled; none is "measured".
    WarmingUp,
    /// Packets materialised now are measured.
    Running,
    /// Only packets created before `drain_time` are measured.
    Draining { drain_time: Cycle },
}

/// Read-only context of a run.
#[derive(Debug, Clone)]
pub struct NiCtx {
    pub pattern: TrafficPattern,
    pub phase: Phase,
    /// False: no new packets are materialised (final drain).
    pub inject: bool,
    /// Keep a log of delivered (pid, seq) for loss/duplication checks (tests).
    pub log_deliveries: bool,
}

impl NiCtx {
    /// Traffic of `pattern` injected and measured (BookSim's running phase), no delivery log.
    pub fn running(pattern: TrafficPattern) -> Self {
        NiCtx { pattern, phase: Phase::Running, inject: true, log_deliveries: false }
    }
}

#[derive(Debug, Clone, Copy)]
struct SrcPacket {
    pid: u64,
    dest: u16,
    ctime: Cycle,
    record: bool,
    size: u16,
    next: u16,
    vc: Option<u8>,
}

/// Statistics of one terminal. `*_since_clear` fields are reset by the driver's
/// stats clears; the rest are conserved totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct NiStats {
    pub plat_sum: u64,
    pub plat_count: u64,
    pub plat_max: u64,
    pub nlat_sum: u64,
    pub flat_sum: u64,
    pub flat_count: u64,
    pub hops_sum: u64,
    pub accepted_flits: u64,
    pub injected_flits: u64,
    // Totals, never cleared.
    pub gen_flits: u64,
    pub gen_ctime_sum: u64,
    pub ret_flits: u64,
    pub ret_ctime_sum: u64,
    pub measured_gen: u64,
    pub measured_ret: u64,
}

impl NiStats {
    pub fn add(&mut self, o: &NiStats) {
        self.plat_sum += o.plat_sum;
        self.plat_count += o.plat_count;
        self.plat_max = self.plat_max.max(o.plat_max);
        self.nlat_sum += o.nlat_sum;
        self.flat_sum += o.flat_sum;
        self.flat_count += o.flat_count;
        self.hops_sum += o.hops_sum;
        self.accepted_flits += o.accepted_flits;
        self.injected_flits += o.injected_flits;
        self.gen_flits += o.gen_flits;
        self.gen_ctime_sum += o.gen_ctime_sum;
        self.ret_flits += o.ret_flits;
        self.ret_ctime_sum += o.ret_ctime_sum;
        self.measured_gen += o.measured_gen;
        self.measured_ret += o.measured_ret;
    }
    pub fn clear_window(&mut self) {
        let keep = *self;
        *self = NiStats {
            gen_flits: keep.gen_flits,
            gen_ctime_sum: keep.gen_ctime_sum,
            ret_flits: keep.ret_flits,
            ret_ctime_sum: keep.ret_ctime_sum,
            measured_gen: keep.measured_gen,
            measured_ret: keep.measured_ret,
            ..Default::default()
        };
    }
}

/// Link ids of the terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NiPorts {
    pub inj_flit: LinkId,
    pub inj_credit: LinkId,
    pub ej_flit: LinkId,
    pub ej_credit: LinkId,
}

pub struct TerminalCl {
    pub id: u32,
    k: u32,
    pub ports: NiPorts,
    rng: Xoshiro256PlusPlus,
    /// Trial success probability and ln(1 − p) for geometric gaps.
    p_trial: f64,
    ln_q: f64,
    packet_size: u16,
    /// Cycle of the next successful Bernoulli trial (head of the implicit source queue).
    next_ctime: Cycle,
    next_seq: u64,
    pkt: Option<SrcPacket>,
    inj_credits: Vec<CreditCounterCl>,
    inj_owned: u64,
    last_vc: u8,
    /// Per ejection VC: packet being received and the next flit index expected.
    ej_expect: Vec<Option<(u64, u16, Cycle)>>,
    pub stats: NiStats,
    pub deliveries: Vec<(u64, u16)>,
    /// Trace ids of the flit injected / ejected this cycle (0 = none).
    pub inj_trace: u64,
    pub ej_trace: u64,
}

/// Per-node RNG seed: SplitMix64 of (seed, node), so streams do not overlap.
fn node_seed(seed: u64, node: u32) -> u64 {
    let mut z = seed ^ (node as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl TerminalCl {
    pub fn new(id: u32, k: u32, router: &RouterCfg, traffic: &TrafficCfg, ports: NiPorts) -> Self {
        let (vcs, vc_buf, packet_size) = (router.vcs, router.vc_buf, traffic.packet_size);
        let p = (traffic.rate / packet_size as f64).min(1.0);
        let mut t = TerminalCl {
            id,
            k,
            ports,
            rng: Xoshiro256PlusPlus::seed_from_u64(node_seed(traffic.seed, id)),
            p_trial: p,
            ln_q: (1.0 - p).ln(),
            packet_size: packet_size as u16,
            next_ctime: NEVER,
            next_seq: 0,
            pkt: None,
            inj_credits: vec![CreditCounterCl::new(vc_buf as u16); vcs as usize],
            inj_owned: 0,
            last_vc: (vcs - 1) as u8,
            ej_expect: vec![None; vcs as usize],
            stats: NiStats::default(),
            deliveries: Vec::new(),
            inj_trace: 0,
            ej_trace: 0,
        };
        t.next_ctime = t.trial_after(0);
        t
    }

    /// Cycle of the first successful trial at or after `from`.
    fn trial_after(&mut self, from: Cycle) -> Cycle {
        if self.p_trial <= 0.0 {
            return NEVER;
        }
        if self.p_trial >= 1.0 {
            return from;
        }
        // Failures before the first success ~ Geometric(p): floor(ln U / ln(1 − p)), U in (0,1].
        // (Without `floor`, a libm call here, for the same result: the bound is a whole
        // number, so `x >= bound` iff `floor(x) >= bound`, and below it `x as u64` truncates,
        // which is floor for x >= 0 and 0 for both when x < 0 or NaN.)
        let u: f64 = 1.0 - self.rng.gen::<f64>();
        let gap = u.ln() / self.ln_q;
        if gap >= (NEVER - from) as f64 {
            NEVER
        } else {
            from + gap as u64
        }
    }

    pub fn has_packet(&self) -> bool {
        self.pkt.is_some()
    }

    /// Next cycle this terminal has something to do on its own (a packet to create).
    pub fn next_event(&self) -> Cycle {
        if self.pkt.is_some() {
            0
        } else {
            self.next_ctime
        }
    }

    pub fn inj_credit(&self, vc: usize) -> u16 {
        self.inj_credits[vc].credits
    }

    /// One cycle. Returns (flits moved, sent anything on a link).
    ///
    /// # Safety
    /// As [`super::router::RouterCl::eval`]: called by the engine in cycle `now`, sole
    /// sender/receiver of its links.
    pub unsafe fn eval(&mut self, now: Cycle, flits: &LinkArena<Flit>, credits: &LinkArena<Credit>, ctx: &NiCtx) -> (u64, bool) {
        let mut moved = 0;
        let mut sent = false;
        self.inj_trace = 0;
        self.ej_trace = 0;
        // --- sink: retire the arriving flit, return its credit at once.
        if let Some(f) = flits.recv(self.ports.ej_flit, now) {
            self.retire(f, now, ctx);
            credits.send(self.ports.ej_credit, now, Credit { vc: f.vc });
            sent = true;
            moved += 1;
        }
        // (`on_credit` masked by whether a credit landed: that is random, and this was a
        // mispredicted branch.)
        let (hit, c) = credits.lands_value(self.ports.inj_credit, now);
        let cc = &mut self.inj_credits[core::hint::select_unpredictable(hit, c.vc as usize, 0)];
        let room = cc.credits < cc.depth;
        cc.credits += (hit & room) as u16;
        cc.err |= hit & !room;
        // --- source: materialise the head of the implicit queue.
        if self.pkt.is_none() && ctx.inject && self.next_ctime <= now {
            let ctime = self.next_ctime;
            let u: f64 = self.rng.gen();
            let v: f64 = self.rng.gen();
            let dest = ctx.pattern.dest_fl(self.id, self.k, u, v) as u16;
            let record = match ctx.phase {
                Phase::WarmingUp => false,
                Phase::Running => true,
                Phase::Draining { drain_time } => ctime < drain_time,
            };
            let pid = make_pid(self.id, self.next_seq);
            self.next_seq += 1;
            self.pkt = Some(SrcPacket { pid, dest, ctime, record, size: self.packet_size, next: 0, vc: None });
            self.stats.gen_flits += self.packet_size as u64;
            self.stats.gen_ctime_sum += ctime * self.packet_size as u64;
            self.stats.measured_gen += record as u64;
            self.next_ctime = self.trial_after(ctime + 1);
        }
        // --- inject at most one flit.
        if let Some(pkt) = self.pkt.as_mut() {
            let nvc = self.inj_credits.len();
            if pkt.vc.is_none() {
                // VC (last_vc + i) mod nvc for i = 1..=nvc, stepped without a division.
                let mut vc = self.last_vc as usize;
                for _ in 0..nvc {
                    vc = if vc + 1 >= nvc { 0 } else { vc + 1 };
                    if self.inj_owned >> vc & 1 == 0 && self.inj_credits[vc].can_send() {
                        pkt.vc = Some(vc as u8);
                        break;
                    }
                }
            }
            if let Some(vc) = pkt.vc {
                if self.inj_credits[vc as usize].can_send() {
                    let f = Flit {
                        pid: pkt.pid,
                        ctime: pkt.ctime,
                        itime: now,
                        dest: pkt.dest,
                        dest_x: (pkt.dest as u32 % self.k) as u8,
                        dest_y: (pkt.dest as u32 / self.k) as u8,
                        seq: pkt.next,
                        vc,
                        hops: 0,
                        head: pkt.next == 0,
                        tail: pkt.next + 1 == pkt.size,
                        record: pkt.record,
                        class: 0,
                        data: 0,
                    };
                    self.inj_credits[vc as usize].on_send();
                    if f.head {
                        self.inj_owned |= 1 << vc;
                        self.last_vc = vc;
                    }
                    if f.tail {
                        self.inj_owned &= !(1 << vc);
                        self.pkt = None;
                    } else {
                        pkt.next += 1;
                    }
                    flits.send(self.ports.inj_flit, now, f);
                    self.inj_trace = f.trace_id();
                    self.stats.injected_flits += 1;
                    sent = true;
                    moved += 1;
                }
            }
        }
        (moved, sent)
    }

    fn retire(&mut self, f: Flit, now: Cycle, ctx: &NiCtx) {
        assert_eq!(f.dest as u32, self.id, "flit {:#x} delivered to node {} instead of {}", f.pid, self.id, f.dest);
        let slot = &mut self.ej_expect[f.vc as usize];
        match *slot {
            None => assert!(f.head && f.seq == 0, "node {}: flit {:#x}.{} arrived without its head", self.id, f.pid, f.seq),
            Some((pid, seq, _)) => assert!(
                f.pid == pid && f.seq == seq,
                "node {}: flit {:#x}.{} out of order (expected {:#x}.{})",
                self.id,
                f.pid,
                f.seq,
                pid,
                seq
            ),
        }
        let head_itime = if f.head { f.itime } else { slot.unwrap().2 };
        *slot = if f.tail { None } else { Some((f.pid, f.seq + 1, head_itime)) };
        self.ej_trace = f.trace_id();
        let s = &mut self.stats;
        s.accepted_flits += 1;
        s.ret_flits += 1;
        s.ret_ctime_sum += f.ctime;
        s.flat_sum += now - f.itime;
        s.flat_count += 1;
        if ctx.log_deliveries {
            self.deliveries.push((f.pid, f.seq));
        }
        if f.tail {
            if ctx.phase == Phase::WarmingUp || f.record {
                let plat = now - f.ctime;
                s.plat_sum += plat;
                s.plat_count += 1;
                s.plat_max = s.plat_max.max(plat);
                s.nlat_sum += now - head_itime;
                s.hops_sum += f.hops as u64;
            }
            s.measured_ret += f.record as u64;
        }
    }
}

impl Probe for TerminalCl {
    fn declare(&self, scope: &[String], out: &mut Vec<SignalDecl>) {
        let mut sc = scope.to_vec();
        sc.push("ni".into());
        for name in ["inj_valid", "inj_id", "ej_valid", "ej_id"] {
            let width = if name.ends_with("valid") { 1 } else { 32 };
            out.push(SignalDecl { scope: sc.clone(), name: name.into(), width });
        }
        for vc in 0..self.inj_credits.len() {
            out.push(SignalDecl { scope: sc.clone(), name: format!("inj_credits_vc{vc}"), width: 8 });
        }
    }

    fn sample(&self, out: &mut Vec<u64>) {
        out.extend([(self.inj_trace != 0) as u64, self.inj_trace, (self.ej_trace != 0) as u64, self.ej_trace]);
        out.extend(self.inj_credits.iter().map(|c| c.credits as u64));
    }
}

/// One-line trace: `ni[i e q]`: `i` a flit injected this cycle, `e` one ejected, `q` a packet
/// waiting at the source (`.` for none of them).
impl std::fmt::Display for TerminalCl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = |b: bool, ch: char| if b { ch } else { '.' };
        write!(f, "ni[{}{}{}]", c(self.inj_trace != 0, 'i'), c(self.ej_trace != 0, 'e'), c(self.pkt.is_some() && self.inj_trace == 0, 'q'))
    }
}
