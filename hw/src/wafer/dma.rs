//! The die's collective engine: a DMA that moves the layer's transfers (ring all-reduce
//! chunks, all-to-all dispatch and combine batches) through the die's router as real flits,
//! and counts the flits of the transfers addressed to it.
//!
//! Sending: the die's sequencer `start`s a transfer once its dependences are met; started
//! transfers wait in a queue of `queue` entries and are served round-robin one *packet*
//! (`packet_flits` flits) at a time, so a die feeding both directions of a bidirectional
//! ring, or many all-to-all peers, interleaves them. A packet holds one injection VC from
//! head to tail; a flit leaves when that VC has a credit (one flit per cycle: the injection
//! port is as wide as a flit, i.e. as wide as all four mesh links together at the default
//! serialization). The last flit of a transfer reports `tx_done`.
//!
//! Migration (`migration.rs`): the die's migration engine shares the injection port — its
//! packets travel on the wafer's migration VC (the router's last, which regular packets
//! never use), a migration flit leaving only in a cycle the regular packet cannot use — and
//! its flits
//! (`data` with `MIG_BIT`) are handed to it on ejection.
//!
//! Receiving: one flit per cycle from the router's ejection port; its credit goes back at
//! once (the die's SRAM/HBM absorbs at port rate). The flit's `data` names its transfer; the
//! transfer's last flit reports `rx_done`.

use std::collections::HashMap;

use super::migration::{MigPacket, MigrationEngineCl, MIG_BIT};
use crate::harness::{Cycle, LinkArena};
use crate::noc::credit::CreditCounterCl;
use crate::noc::flit::{make_pid, Credit, Flit};
use sched::noc::Coord;

/// The router's local port as seen by the engine: the NoC's network-interface ports.
pub use crate::noc::terminal::NiPorts as DmaPorts;

/// A transfer this engine sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxXfer {
    /// Global transfer id (carried in `Flit::data`).
    pub id: u32,
    pub dst: u32,
    pub flits: u32,
    /// Traffic class (phase).
    pub class: u8,
}

#[derive(Debug, Clone, Copy)]
struct Active {
    x: TxXfer,
    sent: u32,
}

/// What happened this cycle, for the sequencer.
#[derive(Debug, Clone, Default)]
pub struct DmaEvents {
    pub tx_done: Vec<u32>,
    pub rx_done: Vec<u32>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct DmaStats {
    pub tx_flits: u64,
    pub rx_flits: u64,
    pub tx_packets: u64,
    /// Cycles a flit was ready but its VC had no credit.
    pub credit_stall_cycles: u64,
}

pub struct CollectiveEngineCl {
    pub id: u32,
    cols: u32,
    ports: DmaPorts,
    packet_flits: u32,
    /// Started transfers, served round-robin by packet.
    active: Vec<Active>,
    /// The current regular packet: index into `active` of its transfer, its VC, its length
    /// and the flits left; the current migration packet likewise.
    cur: Option<(usize, u8, u32, u32)>,
    mig_cur: Option<(MigPacket, u8, u32, u32)>,
    rr: usize,
    vc_rr: u8,
    /// The injection VC reserved for migration packets (the router's last VC, when the wafer
    /// has a migration VC); regular packets never use it.
    pub mig_vc: Option<u8>,
    inj_credits: Vec<CreditCounterCl>,
    /// Incoming transfers: id → (flits expected, flits received).
    rx: HashMap<u32, (u32, u32)>,
    rx_open: u32,
    pkt_seq: u64,
    pub stats: DmaStats,
    /// Traced registers.
    pub queued: u32,
    pub last_tx: u32,
    pub last_rx: u32,
}

impl CollectiveEngineCl {
    pub fn new(id: u32, cols: u32, vcs: u32, vc_buf: u32, packet_flits: u32, ports: DmaPorts) -> Self {
        CollectiveEngineCl {
            id,
            cols,
            ports,
            packet_flits,
            active: Vec::new(),
            cur: None,
            mig_cur: None,
            rr: 0,
            vc_rr: 0,
            mig_vc: None,
            inj_credits: (0..vcs).map(|_| CreditCounterCl::new(vc_buf as u16)).collect(),
            rx: HashMap::new(),
            rx_open: 0,
            pkt_seq: 0,
            stats: DmaStats::default(),
            queued: 0,
            last_tx: 0,
            last_rx: 0,
        }
    }

    /// Declares an incoming transfer of `flits` flits (before the layer starts).
    pub fn expect(&mut self, id: u32, flits: u32) {
        self.rx.insert(id, (flits, 0));
        self.rx_open += 1;
    }

    /// Queues a transfer for sending (its dependences are met).
    pub fn start(&mut self, x: TxXfer) {
        self.active.push(Active { x, sent: 0 });
        self.queued = self.active.len() as u32;
    }

    /// Nothing to send and nothing expected.
    pub fn idle(&self) -> bool {
        self.active.is_empty() && self.rx_open == 0
    }

    /// One cycle.
    ///
    /// # Safety
    /// Link protocol: this engine is the only sender on `inj_flit`/`ej_credit` and the only
    /// receiver of `ej_flit`/`inj_credit`.
    pub unsafe fn eval(&mut self, now: Cycle, flits: &LinkArena<Flit>, credits: &LinkArena<Credit>, ev: &mut DmaEvents, mig: &mut MigrationEngineCl) -> u64 {
        let mut progress = 0;
        // Credits back from the router's local input VCs.
        if let Some(c) = credits.recv(self.ports.inj_credit, now) {
            self.inj_credits[c.vc as usize].on_credit();
        }
        // Ejection.
        if let Some(f) = flits.recv(self.ports.ej_flit, now) {
            credits.send(self.ports.ej_credit, now, Credit { vc: f.vc });
            progress += 1;
            if f.data & MIG_BIT != 0 {
                mig.on_flit(f.data & !MIG_BIT);
            } else if let Some(e) = self.rx.get_mut(&f.data) {
                self.stats.rx_flits += 1;
                e.1 += 1;
                if e.1 == e.0 {
                    ev.rx_done.push(f.data);
                    self.rx_open -= 1;
                    self.last_rx = f.data.wrapping_add(1);
                }
            }
        }
        // Injection: continue the current packets, or open the next ones — a regular packet
        // round-robin over the started transfers, a migration packet from the migration
        // engine on its own VC. One flit per cycle leaves, the regular one first: a migration
        // flit only takes the cycles the regular packet cannot use (no transfer, or its VC
        // out of credits).
        let nv = self.inj_credits.len() as u8;
        if self.cur.is_none() && !self.active.is_empty() {
            let reserved = self.mig_vc;
            if let Some(vc) = (0..nv).map(|i| (self.vc_rr + i) % nv).find(|&v| self.inj_credits[v as usize].can_send() && Some(v) != reserved) {
                let i = self.rr % self.active.len();
                let a = &self.active[i];
                let n = (a.x.flits - a.sent).min(self.packet_flits);
                self.cur = Some((i, vc, n, n));
                self.vc_rr = (vc + 1) % nv;
                self.pkt_seq += 1;
                self.stats.tx_packets += 1;
            } else {
                self.stats.credit_stall_cycles += 1;
            }
        }
        if let (None, Some(vc)) = (self.mig_cur, self.mig_vc) {
            if self.inj_credits[vc as usize].can_send() {
                if let Some(p) = mig.open(self.packet_flits) {
                    self.mig_cur = Some((p, vc, p.flits, p.flits));
                    self.pkt_seq += 1;
                }
            }
        }
        let mut sent = false;
        if let Some((i, vc, n, left)) = self.cur {
            if self.inj_credits[vc as usize].can_send() {
                sent = true;
                let f = self.flit(now, self.active[i].x.dst, vc, n, left, self.active[i].x.class, self.active[i].x.id);
                let a = &mut self.active[i];
                flits.send(self.ports.inj_flit, now, f);
                self.inj_credits[vc as usize].on_send();
                a.sent += 1;
                self.stats.tx_flits += 1;
                progress += 1;
                if left == 1 {
                    self.cur = None;
                    if a.sent == a.x.flits {
                        ev.tx_done.push(a.x.id);
                        self.last_tx = a.x.id.wrapping_add(1);
                        self.active.remove(i);
                        self.queued = self.active.len() as u32;
                        // The next packet goes to the transfer after this one.
                        self.rr = i;
                    } else {
                        self.rr = i + 1;
                    }
                } else {
                    self.cur = Some((i, vc, n, left - 1));
                }
            } else {
                self.stats.credit_stall_cycles += 1;
            }
        }
        if let (false, Some((p, vc, n, left))) = (sent, self.mig_cur) {
            if self.inj_credits[vc as usize].can_send() {
                let f = self.flit(now, p.dst, vc, n, left, p.class, p.data);
                flits.send(self.ports.inj_flit, now, f);
                self.inj_credits[vc as usize].on_send();
                mig.on_sent(left == 1);
                progress += 1;
                self.mig_cur = if left == 1 { None } else { Some((p, vc, n, left - 1)) };
            }
        }
        progress
    }

    /// Flit `n − left` of an `n`-flit packet to `dst` on `vc`.
    #[allow(clippy::too_many_arguments)]
    fn flit(&self, now: Cycle, dst: u32, vc: u8, n: u32, left: u32, class: u8, data: u32) -> Flit {
        let d = Coord::of(dst, self.cols);
        Flit {
            pid: make_pid(self.id, self.pkt_seq),
            ctime: now,
            itime: now,
            dest: dst as u16,
            dest_x: d.x as u8,
            dest_y: d.y as u8,
            seq: (n - left) as u16,
            vc,
            head: left == n,
            tail: left == 1,
            class,
            data,
            ..Default::default()
        }
    }

    /// Busy: something can be sent (credits permitting) — the engine must be evaluated every
    /// cycle; otherwise it only wakes on arrivals (flits or credits), which its links bring.
    pub fn busy(&self) -> bool {
        !self.active.is_empty() || self.cur.is_some() || self.mig_cur.is_some()
    }
}
