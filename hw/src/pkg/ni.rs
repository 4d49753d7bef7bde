//! D2D engine of a chiplet: the DMA between its ring buffer and the local port of its die
//! router (the mesh router of `noc`, reused unchanged).
//!
//! A micro-slice crosses the package as one packet: a header flit carrying the slice's tag
//! (expert, micro-slice) followed by `ceil(bytes / flit_bytes)` payload flits — the
//! "per-transfer header cost" the paper weighs against micro-slice size. Sending: the
//! controller starts a send (`tx_start`), the engine injects one flit per cycle when the
//! router's local input VC has a credit, and reports `tx_done` with the last flit.
//! Receiving: flits arriving from the router wait in the engine's ejection buffer (one per
//! VC, `vc_buf` deep — the router's credits for the local output port); a header waits there
//! until the controller gives it a ring slot (a full ring back-pressures the network, as in
//! hardware), payload flits are then drained one per cycle into the slot and their credits
//! returned; the tail reports `rx_landed`.
//!
//! Functional mode: the sender copies each 256-byte chunk of the slot into its payload pool
//! (append-only, read-only once written) and puts the chunk's index in `Flit::data`; the
//! receiver copies the chunk into its ring slot when it drains the flit.

use std::collections::VecDeque;

use super::chiplet::{ChipletId, ExpertId};
use super::ring::SlotTag;
use crate::harness::{Cycle, LinkArena, Probe, SignalDecl};
use crate::harness::trace::{SampleBlock, SampleOut};
use crate::noc::credit::CreditCounterCl;
use crate::noc::flit::{make_pid, Credit, Flit};

/// Functional-mode payload chunks of every chiplet's D2D engine, shared by all partitions
/// like the link arenas: chiplet c writes chunk `i mod N` of its own ring when it injects the
/// flit carrying it; the receiver reads it when it drains that flit. `N` exceeds the number
/// of flits that can be in flight from one sender (every buffer of the package), so a chunk
/// is never overwritten before it is read; writer and reader touch it in different cycles,
/// separated by the engine's barrier.
pub struct PayloadPools {
    chunk: usize,
    per: usize,
    bytes: Vec<std::cell::UnsafeCell<u8>>,
}

// SAFETY: see the type's doc: one writer per chunk, reads and writes in different cycles.
unsafe impl Sync for PayloadPools {}

impl PayloadPools {
    /// `per` chunks of `chunk` bytes for each of `senders` (0 chunks: timing mode).
    pub fn new(senders: usize, per: usize, chunk: usize) -> Self {
        PayloadPools { chunk, per, bytes: (0..senders * per * chunk).map(|_| std::cell::UnsafeCell::new(0)).collect() }
    }

    fn base(&self, sender: ChipletId, i: u32) -> usize {
        (sender.idx() * self.per + i as usize % self.per) * self.chunk
    }

    /// # Safety
    /// Only `sender`'s engine writes its chunks, in the cycle it injects the flit naming it.
    pub unsafe fn write(&self, sender: impl Into<ChipletId>, i: u32, data: &[u8]) {
        let b = self.base(sender.into(), i);
        for (j, &x) in data.iter().enumerate() {
            *self.bytes[b + j].get() = x;
        }
        for j in data.len()..self.chunk {
            *self.bytes[b + j].get() = 0;
        }
    }

    /// # Safety
    /// Read only the chunk a received flit names, in a later cycle than its write.
    pub unsafe fn read(&self, sender: impl Into<ChipletId>, i: u32, out: &mut [u8]) {
        // The sender is a flit's source field (a bare number at the UCIe seam) or a typed id.
        let b = self.base(sender.into(), i);
        for (j, o) in out.iter_mut().enumerate() {
            *o = *self.bytes[b + j].get();
        }
    }

    pub fn enabled(&self) -> bool {
        self.per > 0
    }
}

/// Link ids of the engine (the router's local port): the NoC's network-interface ports.
pub use crate::noc::terminal::NiPorts;

/// What a packet carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketKind {
    /// A micro-slice (into a ring slot).
    Slice,
    /// EP/Hydra: token activations to an expert's owner.
    Dispatch,
    /// EP/Hydra: expert outputs back to the tokens' home.
    Combine,
}

#[derive(Debug, Clone, Copy)]
struct TxJob {
    kind: PacketKind,
    slot: u32,
    tag: SlotTag,
    /// Token packets: number of tokens carried.
    tokens: u32,
    dest: ChipletId,
    /// Flits of the packet (header + payload) and the next one to send.
    flits: u32,
    next: u32,
    vc: Option<u8>,
    pid: u64,
}

/// Reassembly state of one ejection VC.
#[derive(Debug, Clone, Copy, Default)]
struct RxVc {
    /// Ring slot of the packet being received (after its header got one).
    slot: Option<u32>,
    /// A token packet being received: (kind, expert, tokens).
    tokens: Option<(PacketKind, ExpertId, u32)>,
    /// Payload flits received so far.
    got: u32,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct NiStats {
    pub tx_packets: u64,
    pub tx_flits: u64,
    pub rx_packets: u64,
    pub rx_flits: u64,
    /// Cycles a header waited for a ring slot.
    pub rx_slot_wait_cycles: u64,
}

/// Events of one cycle towards the controller.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NiEvents {
    pub tx_done: Option<u32>,
    pub tx_ready: bool,
    /// A header waits for a slot (the controller answers with `grant_rx_slot`).
    pub rx_head: Option<SlotTag>,
    pub rx_landed: Option<u32>,
    /// A token packet arrived in full: (kind, expert, tokens).
    pub tokens_landed: Option<(PacketKind, ExpertId, u32)>,
}

pub struct D2dEngineCl {
    pub id: ChipletId,
    k: u32,
    pub ports: NiPorts,
    flit_bytes: usize,
    inj_credits: Vec<CreditCounterCl>,
    last_vc: u8,
    /// The packet being injected, the micro-slice send waiting for its turn, and queued
    /// token packets (dispatch/combine); slices and token packets alternate.
    tx: Option<TxJob>,
    slice_wait: Option<TxJob>,
    tok_q: VecDeque<TxJob>,
    prefer_tokens: bool,
    tx_seq: u64,
    /// Per ejection VC: buffered flits (bounded by the router's credits) and reassembly.
    ej_buf: Vec<VecDeque<Flit>>,
    rx: Vec<RxVc>,
    /// VC whose header asked for a slot this cycle.
    rx_asking: Option<u8>,
    /// Tick the waiting header first asked for a slot (its wait is counted in time, so the
    /// count does not depend on which edges were evaluated).
    ask_since: Option<Cycle>,
    /// Harness ticks per engine cycle (the core clock's divider).
    tk: u64,
    rr_rx: u8,
    /// Payload chunks written so far (functional mode), the index of the next one.
    chunks_sent: u32,
    pub stats: NiStats,
    /// Trace: flit injected / drained this cycle.
    inj_valid: bool,
    ej_valid: bool,
}

impl D2dEngineCl {
    pub fn new(id: ChipletId, k: u32, vcs: u32, vc_buf: u32, flit_bytes: u32, ports: NiPorts) -> Self {
        D2dEngineCl {
            id,
            k,
            ports,
            flit_bytes: flit_bytes as usize,
            inj_credits: vec![CreditCounterCl::new(vc_buf as u16); vcs as usize],
            last_vc: (vcs - 1) as u8,
            tx: None,
            slice_wait: None,
            tok_q: VecDeque::new(),
            prefer_tokens: false,
            tx_seq: 0,
            ej_buf: (0..vcs).map(|_| VecDeque::with_capacity(vc_buf as usize)).collect(),
            rx: vec![RxVc::default(); vcs as usize],
            rx_asking: None,
            ask_since: None,
            tk: 1,
            rr_rx: 0,
            chunks_sent: 0,
            stats: NiStats::default(),
            inj_valid: false,
            ej_valid: false,
        }
    }

    /// Flits of a micro-slice packet of `bytes` (header + payload).
    pub fn packet_flits(&self, bytes: usize) -> u32 {
        1 + bytes.div_ceil(self.flit_bytes) as u32
    }

    /// A micro-slice send is in progress or waiting (the controller may not start another).
    pub fn tx_busy(&self) -> bool {
        self.slice_wait.is_some() || self.tx.is_some_and(|j| j.kind == PacketKind::Slice)
    }

    /// Puts the engine in a clock domain of `tk` harness ticks per cycle.
    pub fn set_ticks_per_cycle(&mut self, tk: u64) {
        self.tk = tk.max(1);
    }

    /// Nothing can move without the controller: nothing to send, and every ejection VC
    /// that holds flits has a micro-slice header at its front waiting for a ring slot. The
    /// engine's registers do not change until the controller grants a slot (fast-forward may
    /// skip such edges).
    pub fn waiting_for_slot_only(&self) -> bool {
        self.tx.is_none()
            && self.slice_wait.is_none()
            && self.tok_q.is_empty()
            && self.ej_buf.iter().zip(&self.rx).all(|(b, rx)| match b.front() {
                None => true,
                Some(f) => f.head && f.data >> 31 == 0 && rx.slot.is_none() && rx.tokens.is_none(),
            })
    }

    /// What the engine holds and waits for, one line per item (watchdog reports).
    pub fn report(&self, scope: &str, out: &mut Vec<String>) {
        if let Some(j) = &self.tx {
            let vc = j.vc.map_or("none free".to_string(), |v| format!("vc{v} ({} credits)", self.inj_credits[v as usize].credits));
            out.push(format!("{scope}: sending {:?} packet {:#x} to chiplet {}: flit {} of {}, injection {vc}", j.kind, j.pid, j.dest, j.next, j.flits));
        }
        if self.slice_wait.is_some() || !self.tok_q.is_empty() {
            out.push(format!("{scope}: {} micro-slice send(s) and {} token packet(s) queued behind the current one", self.slice_wait.is_some() as u32, self.tok_q.len()));
        }
        for (vc, (b, rx)) in self.ej_buf.iter().zip(&self.rx).enumerate() {
            if let Some(f) = b.front() {
                let what = if rx.slot.is_some() || rx.tokens.is_some() {
                    "draining"
                } else if f.head && f.data >> 31 == 0 {
                    "micro-slice header waits for a ring slot"
                } else {
                    "waits for the ejection port"
                };
                out.push(format!("{scope}: ejection vc{vc}: {} flit(s), packet {:#x} from chiplet {}: {what}", b.len(), f.pid, f.src()));
            }
        }
    }

    /// The last `eval` put something on a link: a flit into the router, or a credit back
    /// to it (a drained flit). The tile must be evaluated when it lands.
    pub fn sent_this_cycle(&self) -> bool {
        self.inj_valid || self.ej_valid
    }

    /// Flits waiting in the ejection buffers or anything to send.
    pub fn busy(&self) -> bool {
        self.tx.is_some() || self.slice_wait.is_some() || !self.tok_q.is_empty() || self.ej_buf.iter().any(|b| !b.is_empty())
    }

    /// Queues a token packet (EP/Hydra dispatch or combine) of `tokens` tokens of `expert`,
    /// `bytes` long, to chiplet `dest`.
    pub fn queue_tokens(&mut self, kind: PacketKind, expert: ExpertId, tokens: u32, bytes: usize, dest: ChipletId) {
        assert!(kind != PacketKind::Slice && tokens < 1 << 15);
        let pid = make_pid(self.id.0 as u32, self.tx_seq);
        self.tx_seq += 1;
        let tag = SlotTag { expert, k: 0, loader: ChipletId(0) };
        self.tok_q.push_back(TxJob { kind, slot: 0, tag, tokens, dest, flits: self.packet_flits(bytes), next: 0, vc: None, pid });
    }

    /// Starts sending `slot` (holding `tag`, `bytes` long) to chiplet `dest`.
    pub fn start_tx(&mut self, slot: u32, tag: SlotTag, bytes: usize, dest: ChipletId) {
        assert!(!self.tx_busy(), "d2d engine {}: send started while busy (controller bug)", self.id);
        let pid = make_pid(self.id.0 as u32, self.tx_seq);
        self.tx_seq += 1;
        self.slice_wait = Some(TxJob { kind: PacketKind::Slice, slot, tag, tokens: 0, dest, flits: self.packet_flits(bytes), next: 0, vc: None, pid });
    }

    /// One cycle: injection, ejection, and the events for the controller. `grant_rx_slot` is
    /// the controller's answer (this cycle) to last cycle's `rx_head`; `ring_data` the ring
    /// data array (functional mode) and its slot size.
    ///
    /// # Safety
    /// Called by the engine at a core edge `now`, sole sender/receiver of its links.
    pub unsafe fn eval(
        &mut self,
        now: Cycle,
        flits: &LinkArena<Flit>,
        credits: &LinkArena<Credit>,
        grant_rx_slot: Option<u32>,
        ring_data: &mut [u8],
        slot_bytes: usize,
        pools: &PayloadPools,
    ) -> NiEvents {
        let mut ev = NiEvents::default();
        self.inj_valid = false;
        self.ej_valid = false;
        // --- arrivals into the ejection buffers; credits for injection
        if let Some(f) = flits.recv(self.ports.ej_flit, now) {
            self.ej_buf[f.vc as usize].push_back(f);
        }
        if let Some(c) = credits.recv(self.ports.inj_credit, now) {
            self.inj_credits[c.vc as usize].on_credit();
        }
        // --- the controller's answer to last cycle's header
        if let (Some(vc), Some(slot)) = (self.rx_asking.take(), grant_rx_slot) {
            if let Some(t0) = self.ask_since.take() {
                self.stats.rx_slot_wait_cycles += (now - t0) / self.tk;
            }
            let f = self.ej_buf[vc as usize].pop_front().expect("header still buffered");
            debug_assert!(f.head);
            self.rx[vc as usize] = RxVc { slot: Some(slot), tokens: None, got: 0 };
            credits.send(self.ports.ej_credit, now, Credit { vc });
            self.ej_valid = true;
            if f.tail {
                // Header-only packet (zero-byte slice): landed at once.
                self.rx[vc as usize] = RxVc::default();
                ev.rx_landed = Some(slot);
                self.stats.rx_packets += 1;
            }
        } else {
            // --- drain one payload flit (round-robin over VCs with a slot), else ask for a slot
            let nvc = self.ej_buf.len();
            // (The round-robin position wraps by a compare, not a division per visit.)
            let mut vc = self.rr_rx as usize + nvc.saturating_sub(1);
            for _ in 0..nvc {
                vc += 1;
                if vc >= nvc {
                    vc -= nvc;
                }
                let Some(&f) = self.ej_buf[vc].front() else { continue };
                if f.head && f.data >> 31 == 1 && self.rx[vc].slot.is_none() && self.rx[vc].tokens.is_none() && !self.ej_valid {
                    // Token packet header: lands in the token buffer, no ring slot needed.
                    let kind = if f.data >> 30 & 1 == 0 { PacketKind::Dispatch } else { PacketKind::Combine };
                    self.ej_buf[vc].pop_front();
                    self.rx[vc].tokens = Some((kind, ExpertId((f.data >> 15 & 0x7fff) as u16), f.data & 0x7fff));
                    credits.send(self.ports.ej_credit, now, Credit { vc: vc as u8 });
                    self.ej_valid = true;
                    if f.tail {
                        ev.tokens_landed = self.rx[vc].tokens.take();
                    }
                    break;
                }
                if let (Some(t), false) = (self.rx[vc].tokens, self.ej_valid) {
                    self.ej_buf[vc].pop_front();
                    credits.send(self.ports.ej_credit, now, Credit { vc: vc as u8 });
                    self.ej_valid = true;
                    self.stats.rx_flits += 1;
                    if f.tail {
                        self.rx[vc].tokens = None;
                        ev.tokens_landed = Some(t);
                        self.stats.rx_packets += 1;
                    }
                    self.rr_rx = if vc + 1 == nvc { 0 } else { vc as u8 + 1 };
                    break;
                }
                match self.rx[vc].slot {
                    Some(slot) if !self.ej_valid => {
                        self.ej_buf[vc].pop_front();
                        if pools.enabled() {
                            let off = self.rx[vc].got as usize * self.flit_bytes;
                            let n = self.flit_bytes.min(slot_bytes.saturating_sub(off));
                            let b = slot as usize * slot_bytes + off;
                            // SAFETY: the chunk was written when this flit was injected, at
                            // least one link latency ago (see PayloadPools).
                            pools.read(f.src() as u8, f.data, &mut ring_data[b..b + n]);
                        }
                        self.rx[vc].got += 1;
                        credits.send(self.ports.ej_credit, now, Credit { vc: vc as u8 });
                        self.ej_valid = true;
                        self.stats.rx_flits += 1;
                        if f.tail {
                            self.rx[vc] = RxVc::default();
                            ev.rx_landed = Some(slot);
                            self.stats.rx_packets += 1;
                        }
                        self.rr_rx = if vc + 1 == nvc { 0 } else { vc as u8 + 1 };
                        break;
                    }
                    None if f.head && self.rx_asking.is_none() => {
                        ev.rx_head = Some(unpack_tag(f.data));
                        self.rx_asking = Some(vc as u8);
                        self.ask_since.get_or_insert(now);
                    }
                    _ => {}
                }
            }
        }
        // --- pick the next packet: micro-slices and token packets alternate
        if self.tx.is_none() {
            let tok_first = self.prefer_tokens || self.slice_wait.is_none();
            self.tx = if tok_first && !self.tok_q.is_empty() { self.tok_q.pop_front() } else { self.slice_wait.take() };
            if let Some(j) = self.tx {
                self.prefer_tokens = j.kind == PacketKind::Slice;
            }
        }
        // --- inject one flit of the current send
        if let Some(job) = self.tx.as_mut() {
            let nvc = self.inj_credits.len();
            if job.vc.is_none() {
                for i in 1..=nvc {
                    let vc = (self.last_vc as usize + i) % nvc;
                    if self.inj_credits[vc].can_send() {
                        job.vc = Some(vc as u8);
                        self.last_vc = vc as u8;
                        break;
                    }
                }
            }
            if let Some(vc) = job.vc {
                if self.inj_credits[vc as usize].can_send() {
                    let head = job.next == 0;
                    let f = Flit {
                        pid: job.pid,
                        ctime: now,
                        itime: now,
                        dest: job.dest.0 as u16,
                        dest_x: (job.dest.0 as u32 % self.k) as u8,
                        dest_y: (job.dest.0 as u32 / self.k) as u8,
                        seq: job.next as u16,
                        vc,
                        hops: 0,
                        head,
                        tail: job.next + 1 == job.flits,
                        record: true,
                        class: 0,
                        data: match (head, job.kind) {
                            (true, PacketKind::Slice) => pack_tag(job.tag),
                            (true, k) => 1 << 31 | ((k == PacketKind::Combine) as u32) << 30 | (job.tag.expert.0 as u32 & 0x7fff) << 15 | job.tokens,
                            (false, _) => self.chunks_sent,
                        },
                    };
                    if !head && job.kind == PacketKind::Slice {
                        if pools.enabled() {
                            let off = (job.next as usize - 1) * self.flit_bytes;
                            let n = self.flit_bytes.min(slot_bytes.saturating_sub(off));
                            let b = job.slot as usize * slot_bytes + off;
                            // SAFETY: this engine is the only writer of its chunks.
                            pools.write(self.id, self.chunks_sent, &ring_data[b..b + n]);
                        }
                        self.chunks_sent = self.chunks_sent.wrapping_add(1);
                    }
                    self.inj_credits[vc as usize].on_send();
                    flits.send(self.ports.inj_flit, now, f);
                    self.inj_valid = true;
                    self.stats.tx_flits += 1;
                    job.next += 1;
                    if f.tail {
                        if job.kind == PacketKind::Slice {
                            ev.tx_done = Some(job.slot);
                        }
                        self.stats.tx_packets += 1;
                        self.tx = None;
                    }
                }
            }
        }
        ev.tx_ready = !self.tx_busy();
        ev
    }
}

/// Head-flit tag field: expert (12 bits, ≤ 4096 experts) | loader (4 bits, ≤ 16 chiplets) |
/// micro-slice (16 bits).
fn pack_tag(t: SlotTag) -> u32 {
    (t.expert.0 as u32 & 0xfff) << 20 | (t.loader.0 as u32 & 0xf) << 16 | t.k as u32
}

fn unpack_tag(d: u32) -> SlotTag {
    SlotTag { expert: ExpertId((d >> 20) as u16), loader: ChipletId((d >> 16 & 0xf) as u8), k: d as u16 }
}

impl Probe for D2dEngineCl {
    fn declare(&self, scope: &[String], out: &mut Vec<SignalDecl>) {
        let mut sc = scope.to_vec();
        sc.push("d2d".into());
        for (name, width) in [("tx_busy", 1), ("inj_valid", 1), ("ej_valid", 1), ("rx_wait_slot", 1)] {
            out.push(SignalDecl { scope: sc.clone(), name: name.into(), width });
        }
    }
    fn sample(&self, out: &mut Vec<u64>) {
        self.sample_to(out);
    }
}

impl SampleBlock for D2dEngineCl {
    #[inline(always)]
    fn sample_to<O: SampleOut>(&self, out: &mut O) {
        out.put_all([self.tx.is_some() as u64, self.inj_valid as u64, self.ej_valid as u64, self.rx_asking.is_some() as u64]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Engine 0 sends two micro-slices straight into engine 1 (its injection channel is
    /// 1's ejection channel, credits back): every byte lands in the granted slot, the header
    /// asks for a slot once, and a withheld slot stalls the transfer (back-pressure).
    #[test]
    fn micro_slice_crosses_with_its_bytes() {
        let (vcs, buf, fb) = (2u32, 4u32, 256u32);
        let mut flits = LinkArena::<Flit>::new();
        let mut credits = LinkArena::<Credit>::new();
        let a2b = flits.add(2);
        let b2a = credits.add(2);
        let (unused_f, unused_c) = (flits.add(1), credits.add(1));
        let a_ports = NiPorts { inj_flit: a2b, inj_credit: b2a, ej_flit: unused_f, ej_credit: unused_c };
        let (unused_f2, unused_c2) = (flits.add(1), credits.add(1));
        let b_ports = NiPorts { inj_flit: unused_f2, inj_credit: unused_c2, ej_flit: a2b, ej_credit: b2a };
        let mut a = D2dEngineCl::new(ChipletId(0), 2, vcs, buf, fb, a_ports);
        let mut b = D2dEngineCl::new(ChipletId(1), 2, vcs, buf, fb, b_ports);
        let slot_bytes = 1000usize;
        let pools = PayloadPools::new(2, 64, fb as usize);
        let mut ring_a: Vec<u8> = (0..2 * slot_bytes).map(|i| (i * 7 % 251) as u8).collect();
        let mut ring_b = vec![0u8; 2 * slot_bytes];
        a.start_tx(1, SlotTag { expert: ExpertId(3), k: 5, loader: ChipletId(1) }, slot_bytes, ChipletId(1));
        let mut answer = None;
        let mut landed = None;
        let mut asks = 0;
        for t in 0..200u64 {
            unsafe {
                let ea = a.eval(t, &flits, &credits, None, &mut ring_a, slot_bytes, &pools);
                let eb = b.eval(t, &flits, &credits, answer.take(), &mut ring_b, slot_bytes, &pools);
                if let Some(tag) = eb.rx_head {
                    assert_eq!(tag, SlotTag { expert: ExpertId(3), k: 5, loader: ChipletId(1) });
                    asks += 1;
                    // The ring is "full" for the first 20 cycles.
                    if t > 20 {
                        answer = Some(0);
                    }
                }
                if eb.rx_landed.is_some() {
                    landed = Some((t, eb.rx_landed.unwrap()));
                }
                if let Some(s) = ea.tx_done {
                    assert_eq!(s, 1);
                }
            }
        }
        let (t, s) = landed.expect("landed");
        assert_eq!(s, 0);
        assert!(t > 20 + 4, "held back by the withheld slot");
        assert!(asks >= 19, "the header asked every cycle it waited ({asks})");
        assert_eq!(&ring_b[..slot_bytes], &ring_a[slot_bytes..2 * slot_bytes]);
        assert_eq!(a.stats.tx_flits, 1 + 4);
        assert_eq!(b.stats.rx_flits, 4);
        assert!(!a.busy() && !b.busy());
    }
}
