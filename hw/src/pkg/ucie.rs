//! UCIe D2D adapter, one direction of a die-to-die link (TX adapter, wire, RX adapter): 256-byte
//! flits serialized at lanes × rate, the FDI latency each way, a CRC on every flit, and
//! go-back-N replay from a retry buffer when the receiver's CRC check fails.
//!
//! ```text
//!  router ─► tx_q ─► [retry buffer: sent, not yet acked] ─► wire (lanes × GT/s, seeded bit errors)
//!                          ▲  rewind on NAK                          │ FDI latency
//!                          └──── ACK(seq) / NAK(seq) ◄── RX: CRC check, expected seq ◄─┘
//!                                 (FDI latency back)      │ in order, once
//!                                                         └─► rx_q ─► neighbour router
//! ```
//!
//! * **Errors.** Each transmitted bit flips with probability `ber`, independently: the
//!   distance to the next flipped bit is drawn from the geometric distribution (one draw
//!   per error, not per bit) with a generator seeded by (seed, adapter index), so a run is
//!   reproducible and the flipped positions are exact.
//! * **CRC.** The flit on the wire is its header fields, its 256 data bytes (in functional
//!   mode the payload chunk the D2D engine wrote; zeros in timing mode) and a CRC-32
//!   (ISO-HDLC) over them. A flit with flipped bits is checked as the receiver would: the
//!   CRC of the received bits against the received CRC field. A flit without flipped bits
//!   passes by construction, so the check is computed only when bits flipped (the result
//!   is the same, the cost is not). An error the CRC misses is counted
//!   (`undetected_errors`, expected 0) — the model then delivers the original flit.
//! * **Go-back-N.** The receiver accepts only the next expected sequence number. A CRC
//!   failure drops the flit and sends one NAK(expected); every later flit is dropped until
//!   the replay of `expected` arrives intact. The transmitter keeps each flit in the retry
//!   buffer until a cumulative ACK covers it; on a NAK it rewinds to the NAK'd flit and
//!   resends everything after it (`replays` counts rewinds, `retried_bytes` the bytes sent
//!   again). A full retry buffer stalls new flits. ACK/NAK travel on the sideband, which is
//!   taken as error-free (no replay timer is needed then).
//! * **Flow control.** The adapter's input is bounded by the upstream router's credits for
//!   the downstream router's buffers (the credits skip the adapter), so its queues are too.

use std::collections::VecDeque;

use bitvec::order::Lsb0;
use bitvec::BitArr;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

use super::ni::PayloadPools;
use crate::cfg::{err, CfgError};
use crate::harness::{Cycle, DomainClock, LinkArena, LinkId, Probe, SignalDecl, NEVER};
use crate::harness::trace::{SampleBlock, SampleOut};
use crate::noc::flit::Flit;

/// Data bytes of a flit (the package's `flit_bytes`).
pub const FLIT_DATA_BYTES: usize = 256;
/// Header fields carried with the data and covered by the CRC.
const HEADER_BYTES: usize = 16;
const CRC_BITS: u64 = 32;
/// Bytes the CRC covers: the header fields and the data (the CRC field follows them).
pub const CRC_COVERED_BYTES: usize = HEADER_BYTES + FLIT_DATA_BYTES;
/// Bits of one flit on the wire (header, data, CRC): each may flip.
pub const FRAME_BITS: u64 = (CRC_COVERED_BYTES * 8) as u64 + CRC_BITS;
/// One frame's bits in wire order (bit `i` is bit `i % 8` of byte `i / 8`: the header fields,
/// the data, the CRC, little-endian), as the transmitter builds it and as the error process
/// flips it; 2,208 bits, wider than any machine word.
type FrameBits = BitArr!(for FRAME_BITS as usize, in u8, Lsb0);

/// Below this chance of a flit passing its CRC the link is down, not noisy: go-back-N
/// replays whole windows for every flit that gets through, and at a BER of 5e-3 (a pass
/// chance of 1.6e-5) a layer never finishes (issue 19). UCIe specifies a BER of 1e-15 or
/// better; `validate` refuses a BER whose pass chance is below this.
pub const MIN_FLIT_PASS: f64 = 0.01;

/// Probability that a flit crosses a wire of bit-error rate `ber` without a flipped bit.
pub fn flit_pass_probability(ber: f64) -> f64 {
    (FRAME_BITS as f64 * (-ber).ln_1p()).exp()
}

/// The largest bit-error rate `validate` accepts ([`MIN_FLIT_PASS`]).
pub fn max_ber() -> f64 {
    -(MIN_FLIT_PASS.ln() / FRAME_BITS as f64).exp_m1()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UcieCfg {
    /// Data lanes of the link (UCIe advanced package: 64).
    pub lanes: u32,
    /// Per-lane rate, GT/s.
    pub gt_per_s: f64,
    /// Adapter-to-adapter latency one way (FDI to FDI), ps.
    pub fdi_latency_ps: u64,
    /// Raw bit-error rate of the wire, [0, 1).
    pub ber: f64,
    /// Flits the transmitter keeps for replay (sent, not yet acknowledged).
    pub retry_buffer_flits: u32,
}

impl Default for UcieCfg {
    fn default() -> Self {
        UcieCfg { lanes: 64, gt_per_s: 18.0, fdi_latency_ps: 4020, ber: 0.0, retry_buffer_flits: 64 }
    }
}

impl UcieCfg {
    pub fn validate(&self) -> Result<(), CfgError> {
        if self.lanes == 0 || self.lanes > 1024 {
            return err("lanes", format!("1..=1024 (got {})", self.lanes));
        }
        if !(self.gt_per_s.is_finite() && self.gt_per_s > 0.0 && self.gt_per_s <= 1000.0) {
            return err("gt_per_s", format!("a rate in (0, 1000] GT/s (got {})", self.gt_per_s));
        }
        if self.fdi_latency_ps > 1_000_000_000 {
            return err("fdi_latency_ps", format!("at most 1 ms (got {} ps)", self.fdi_latency_ps));
        }
        if !(self.ber.is_finite() && (0.0..1.0).contains(&self.ber)) {
            return err("ber", format!("bit-error rate must be in [0, 1) (got {})", self.ber));
        }
        if flit_pass_probability(self.ber) < MIN_FLIT_PASS {
            return err(
                "ber",
                format!(
                    "at most {:.3e}: at {} a {FRAME_BITS}-bit flit passes its CRC with probability {:.1e}; below {}% the link is down rather than noisy (go-back-N replay would not get the layer through)",
                    max_ber(),
                    self.ber,
                    flit_pass_probability(self.ber),
                    MIN_FLIT_PASS * 100.0
                ),
            );
        }
        if self.retry_buffer_flits == 0 || self.retry_buffer_flits > 4096 {
            return err("retry_buffer_flits", format!("1..=4096 (got {})", self.retry_buffer_flits));
        }
        Ok(())
    }

    /// Raw wire rate, bytes per ps.
    pub fn bytes_per_ps(&self) -> f64 {
        self.lanes as f64 * self.gt_per_s / 8.0 / 1000.0
    }
}

#[derive(Debug, Clone, Copy)]
pub struct UciePorts {
    pub in_flit: LinkId,
    pub out_flit: LinkId,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct UcieStats {
    /// Flits sent the first time, and their data bytes.
    pub flits: u64,
    pub bytes: u64,
    /// Rewinds of the transmitter (one per NAK).
    pub replays: u64,
    /// Data bytes sent again by replays.
    pub retried_bytes: u64,
    /// Flits that arrived with flipped bits and failed the CRC.
    pub crc_errors: u64,
    /// Intact flits dropped because an earlier one was missing (go-back-N).
    pub discarded: u64,
    /// Flits with flipped bits that passed the CRC (expected 0).
    pub undetected_errors: u64,
    /// Rewinds by the replay timer (a NAK'd replay failed again).
    pub timeouts: u64,
    /// Flits delivered to the receiver's router.
    pub delivered: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ack {
    /// Everything up to and including this sequence number arrived.
    Ack(u64),
    /// Resend from this sequence number.
    Nak(u64),
}

pub struct UcieAdapterCl {
    clk: DomainClock,
    out_clk: DomainClock,
    ports: UciePorts,
    /// Ticks one flit occupies the wire (fractional: lanes × rate need not divide a cycle).
    flit_ticks: f64,
    /// FDI latency, ticks.
    lat: u64,
    retry_cap: usize,
    ber: f64,
    rng: Xoshiro256PlusPlus,
    /// Bits still to send before the next flipped bit.
    bits_to_error: u64,
    // --- TX registers
    tx_q: VecDeque<Flit>,
    /// Sent and not acknowledged, oldest first, with their sequence numbers.
    retry: VecDeque<(u64, Flit)>,
    /// Index in `retry` of the next flit to (re)send; `retry.len()`: a new one.
    send_idx: usize,
    next_seq: u64,
    /// Tick the wire finishes the flit on it (fractional: lanes × rate need not divide a
    /// cycle), and since when a flit has been waiting for it (None: nothing waits). A flit
    /// starts at the later of the two, so back-to-back flits keep the exact wire rate.
    wire_free: f64,
    waiting_since: Option<f64>,
    /// Replay timer: rewind if no acknowledgement progress by this tick (NEVER: stopped).
    timer: Cycle,
    timeout: u64,
    // --- wire and sideband
    /// (arrival tick, seq, flit, bits flipped) on the wire.
    wire: VecDeque<(Cycle, u64, Flit, bool)>,
    /// ACK/NAK in flight back to the transmitter: (arrival tick, message).
    back: VecDeque<(Cycle, Ack)>,
    /// NAKs among them (a NAK is always taken at its own edge: see [`Self::eval`]).
    naks_back: u32,
    // --- RX registers
    expect: u64,
    nak_sent: bool,
    rx_q: VecDeque<Flit>,
    out_free_at: Cycle,
    /// [`Self::next_event`] and [`Self::busy`] as of the last evaluation (only `eval`
    /// changes the registers they read).
    next_ev: Cycle,
    busy_reg: bool,
    stats: UcieStats,
}

impl UcieAdapterCl {
    /// `clk`: the UCIe domain; `out_clk`: the receiving router's domain; `tick_ps`: the
    /// harness tick.
    pub fn new(index: u32, cfg: &UcieCfg, seed: u64, clk: DomainClock, out_clk: DomainClock, ports: UciePorts, tick_ps: u64) -> Self {
        let flit_ticks = FLIT_DATA_BYTES as f64 / cfg.bytes_per_ps() / tick_ps as f64;
        let lat = cfg.fdi_latency_ps.div_ceil(tick_ps).max(1);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x5543_4945_0000_0000 ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let bits_to_error = geometric(&mut rng, cfg.ber);
        UcieAdapterCl {
            clk,
            out_clk,
            ports,
            flit_ticks,
            lat,
            retry_cap: cfg.retry_buffer_flits as usize,
            ber: cfg.ber,
            rng,
            bits_to_error,
            tx_q: VecDeque::new(),
            retry: VecDeque::new(),
            send_idx: 0,
            next_seq: 0,
            wire_free: 0.0,
            waiting_since: None,
            timer: NEVER,
            timeout: 3 * (2 * lat + flit_ticks.ceil() as u64 + 2 * clk.div),
            wire: VecDeque::new(),
            back: VecDeque::new(),
            naks_back: 0,
            expect: 0,
            nak_sent: false,
            rx_q: VecDeque::new(),
            out_free_at: 0,
            next_ev: NEVER,
            busy_reg: false,
            stats: UcieStats::default(),
        }
    }

    /// One UCIe edge; the tick a flit sent to the router lands there, if one was sent.
    ///
    /// `lazy_acks` (fast-forward on, untraced): an acknowledgement that only frees retry
    /// entries is not an event of its own; it is taken at the adapter's next evaluation,
    /// with the replay timer restarted from the acknowledgement's own edge, so every later
    /// decision is the one the eager adapter makes. Until then only the retry buffer's
    /// occupancy differs, which nothing reads but the trace (hence untraced only). It stays
    /// an event when taking it changes what the adapter does next: a NAK (rewind), or a full
    /// retry buffer with a flit waiting (the ack lets it go). About a sixth of the adapters'
    /// evaluations on a streaming layer did nothing else.
    ///
    /// # Safety
    /// At UCIe edges, sole receiver of `in_flit` and sender of `out_flit`.
    pub unsafe fn eval(&mut self, now: Cycle, flits: &LinkArena<Flit>, pools: &PayloadPools, lazy_acks: bool) -> Option<Cycle> {
        if let Some(f) = flits.recv(self.ports.in_flit, now) {
            self.tx_q.push_back(f);
        }
        let sent = self.edge(now, now, flits, pools);
        self.summarize(lazy_acks);
        sent
    }

    /// Caches [`Self::next_event`] and [`Self::busy`] after an edge (inlined into both
    /// evaluations, as the code it replaced was: a call here was 1–2 % of a layer).
    #[inline(always)]
    fn summarize(&mut self, lazy_acks: bool) {
        self.next_ev = self.compute_next_event(lazy_acks);
        self.busy_reg = !self.rx_q.is_empty() || self.sendable();
    }

    /// Whether the adapter has work at its edge `at` between two core edges, asked at the
    /// first of them ([`Self::eval_ahead`]): an event due or a flit for the router (nothing
    /// lands from the router there).
    pub fn due_ahead(&self, at: Cycle) -> bool {
        self.next_ev <= at || !self.rx_q.is_empty()
    }

    /// Evaluates the adapter's edge `at`, the UCIe edge after core edge `now` and before the
    /// next core edge, at `now` (lazy acknowledgements, as untraced). Exact there: the
    /// router's sends land on `in_flit` at core edges only (its latency is whole core
    /// cycles), the wire, the sideband and the timer are the adapter's own, and a flit for
    /// the router is due at the next core edge either way — sent at `now` instead of `at`,
    /// as the adapter's core-edge sends already are. Only an error-free wire: with bit errors
    /// a replay or a discard at `at` after the last core edge of a run would be counted.
    ///
    /// # Safety
    /// At core edge `now`, after the router's evaluation: sole sender of `out_flit`.
    pub unsafe fn eval_ahead(&mut self, now: Cycle, at: Cycle, flits: &LinkArena<Flit>, pools: &PayloadPools) -> Option<Cycle> {
        debug_assert!(self.ber == 0.0 && at > now && !self.out_clk.is_edge(at));
        debug_assert!(!flits.arrives(self.ports.in_flit, at), "a flit from the router lands between core edges");
        let sent = self.edge(at, now, flits, pools);
        self.summarize(true);
        sent
    }

    /// The edge's logic at edge `now` ([`Self::eval`] without the input from the router and
    /// the cached summaries), its sends made at tick `sent_at` (`now`, or the core edge
    /// before it when run ahead).
    unsafe fn edge(&mut self, now: Cycle, sent_at: Cycle, flits: &LinkArena<Flit>, pools: &PayloadPools) -> Option<Cycle> {
        // --- TX: acknowledgements that reached the transmitter
        while let Some(&(t, a)) = self.back.front() {
            if t > now {
                break;
            }
            self.back.pop_front();
            // The edge it reached the transmitter at: `now` unless it was taken lazily (the
            // first edge at or after `t`; edges are `div` ticks apart).
            let at = if now - t < self.clk.div { now } else { self.clk.next_edge(t) };
            match a {
                Ack::Ack(s) => self.drop_acked(Some(s), at),
                Ack::Nak(s) => {
                    self.naks_back -= 1;
                    self.drop_acked(s.checked_sub(1), at);
                    if self.retry.front().is_some_and(|&(q, _)| q == s) {
                        self.send_idx = 0;
                        self.stats.replays += 1;
                    }
                }
            }
        }
        // The replay timer: a replay that failed again gets no second NAK (the receiver
        // NAKs once until the expected flit arrives intact), so the transmitter rewinds.
        if self.timer <= now {
            if self.retry.is_empty() {
                self.timer = NEVER;
            } else {
                self.timer = now + self.timeout;
                self.send_idx = 0;
                self.stats.replays += 1;
                self.stats.timeouts += 1;
            }
        }
        // --- RX: flits that reached the receiver (CRC check, go-back-N)
        while let Some(&(t, seq, f, flipped)) = self.wire.front() {
            if t > now {
                break;
            }
            self.wire.pop_front();
            if flipped {
                self.stats.crc_errors += 1;
                if !self.nak_sent {
                    self.nak_sent = true;
                    self.back.push_back((now + self.lat, Ack::Nak(self.expect)));
                    self.naks_back += 1;
                }
            } else if seq == self.expect {
                self.expect += 1;
                self.nak_sent = false;
                self.rx_q.push_back(f);
                self.back.push_back((now + self.lat, Ack::Ack(seq)));
            } else {
                self.stats.discarded += 1;
            }
        }
        // --- TX: one flit onto the wire when it is free
        let t = now as f64;
        if self.sendable() && self.waiting_since.is_none() {
            self.waiting_since = Some(t);
        }
        let start = self.waiting_since.map(|w| w.max(self.wire_free));
        if start.is_some_and(|s| s <= t) {
            let next = if self.send_idx < self.retry.len() {
                let (seq, f) = self.retry[self.send_idx];
                self.stats.retried_bytes += FLIT_DATA_BYTES as u64;
                Some((seq, f))
            } else if !self.tx_q.is_empty() && self.retry.len() < self.retry_cap {
                let f = self.tx_q.pop_front().expect("non-empty");
                let seq = self.next_seq;
                self.next_seq += 1;
                self.retry.push_back((seq, f));
                self.stats.flits += 1;
                self.stats.bytes += FLIT_DATA_BYTES as u64;
                Some((seq, f))
            } else {
                None
            };
            if let Some((seq, f)) = next {
                self.send_idx += 1;
                if self.timer == NEVER {
                    self.timer = now + self.timeout;
                }
                self.wire_free = start.expect("checked") + self.flit_ticks;
                // The next flit, if one waits already, follows without a gap.
                self.waiting_since = if self.sendable() { Some(f64::NEG_INFINITY) } else { None };
                let flipped = self.transmit(&f, pools);
                let arrive = self.clk.next_edge(ceil_u64(self.wire_free) + self.lat);
                self.wire.push_back((arrive, seq, f, flipped));
            }
        }
        // --- RX: one flit per receiver-domain edge into the neighbour's router. The flit
        // leaves only when the receiver's next edge is free: a wire faster than the router
        // (lanes x rate above a flit per core cycle) keeps its flits here, in the bounded
        // rx queue, instead of booking receiver edges ever further ahead (issue 19: past
        // the crossing's ring, an assertion).
        let next_rx = self.out_clk.next_edge(now + 1);
        if next_rx >= self.out_free_at && !self.rx_q.is_empty() {
            let f = self.rx_q.pop_front().expect("non-empty");
            let due = next_rx;
            flits.send_at(self.ports.out_flit, sent_at, due, f);
            self.out_free_at = due + 1;
            self.stats.delivered += 1;
            return Some(due);
        }
        None
    }

    /// Frees the retry entries up to and including `s`; progress restarts the timer (from
    /// `now`, the edge the acknowledgement arrived at).
    fn drop_acked(&mut self, s: Option<u64>, now: Cycle) {
        let Some(s) = s else { return };
        let mut freed = false;
        while let Some(&(q, _)) = self.retry.front() {
            if q > s {
                break;
            }
            self.retry.pop_front();
            self.send_idx = self.send_idx.saturating_sub(1);
            freed = true;
        }
        if freed {
            self.timer = if self.retry.is_empty() { NEVER } else { now + self.timeout };
        }
    }

    /// Sends one flit's bits over the wire: flips the bits the error process hits and, if
    /// any, runs the receiver's CRC check on them. Returns whether the receiver rejects it.
    fn transmit(&mut self, f: &Flit, pools: &PayloadPools) -> bool {
        if self.bits_to_error >= FRAME_BITS {
            self.bits_to_error -= FRAME_BITS;
            return false;
        }
        // The error pattern: the bits of this frame the wire flips.
        let mut flips = FrameBits::ZERO;
        let mut at = self.bits_to_error;
        while at < FRAME_BITS {
            flips.set(at as usize, true);
            at += 1 + geometric(&mut self.rng, self.ber);
        }
        self.bits_to_error = at - FRAME_BITS;
        // The frame as sent: header, data, CRC.
        let mut frame = FrameBits::ZERO;
        let bytes = frame.as_raw_mut_slice();
        bytes[0..8].copy_from_slice(&f.pid.to_le_bytes());
        bytes[8..10].copy_from_slice(&f.dest.to_le_bytes());
        bytes[10..12].copy_from_slice(&f.seq.to_le_bytes());
        bytes[12..16].copy_from_slice(&f.data.to_le_bytes());
        bytes[15] ^= (f.head as u8) << 6 | (f.tail as u8) << 7;
        if pools.enabled() && !f.head {
            // SAFETY: the chunk was written by the sender's D2D engine when it injected this
            // flit and is not reused while the flit can still be replayed (PayloadPools sizing).
            unsafe { pools.read(f.src() as u8, f.data, &mut bytes[HEADER_BYTES..CRC_COVERED_BYTES]) };
        }
        let crc = CRC32.checksum(&bytes[..CRC_COVERED_BYTES]);
        bytes[CRC_COVERED_BYTES..].copy_from_slice(&crc.to_le_bytes());
        // What the receiver gets.
        frame ^= flips;
        let rx = frame.as_raw_slice();
        let ok = CRC32.checksum(&rx[..CRC_COVERED_BYTES]) == u32::from_le_bytes(rx[CRC_COVERED_BYTES..].try_into().expect("4 bytes"));
        if ok {
            self.stats.undetected_errors += 1;
        }
        !ok
    }

    /// Work at the next edge that `next_event` does not announce: a flit for the router, or
    /// one to put on the wire (evaluated every edge while sending: the wire frees at
    /// fractional ticks).
    pub fn busy(&self) -> bool {
        self.busy_reg
    }

    /// Flits wait for the neighbour's router: the adapter must be evaluated at its next edge
    /// (one flit leaves per edge).
    pub fn delivering(&self) -> bool {
        !self.rx_q.is_empty()
    }

    /// Whether an evaluation at `now` can change anything: a flit arrives from the router,
    /// one waits for the neighbour's router (one per edge), or `next_event` is due. At any
    /// other edge `eval` is a no-op, so a busy partition may skip it (untraced).
    ///
    /// # Safety
    /// Engine protocol: called by the adapter's owner in cycle `now`.
    pub unsafe fn due(&self, now: Cycle, flits: &LinkArena<Flit>) -> bool {
        self.next_ev <= now || !self.rx_q.is_empty() || flits.arrives(self.ports.in_flit, now)
    }

    fn sendable(&self) -> bool {
        self.send_idx < self.retry.len() || (!self.tx_q.is_empty() && self.retry.len() < self.retry_cap)
    }

    /// Earliest tick the adapter must be evaluated: the wire frees for a waiting flit, a
    /// flit or an acknowledgement lands.
    pub fn next_event(&self) -> Cycle {
        self.next_ev
    }

    fn compute_next_event(&self, lazy_acks: bool) -> Cycle {
        let mut t = self.timer;
        if self.sendable() {
            let start = self.waiting_since.map_or(self.wire_free, |w| w.max(self.wire_free));
            t = t.min(ceil_u64(start));
        }
        if let Some(&(a, ..)) = self.wire.front() {
            t = t.min(a);
        }
        t = if t == NEVER { NEVER } else { self.clk.next_edge(t) };
        if let Some(&(a, _)) = self.back.front() {
            // Lazy: only a NAK, or an ack that lets a waiting flit into a full retry buffer
            // (see `eval`). The front goes first in every case, so a NAK behind acks wakes
            // the adapter at the front's edge.
            let urgent = self.naks_back > 0 || (!self.tx_q.is_empty() && self.retry.len() >= self.retry_cap);
            if !lazy_acks || urgent {
                t = t.min(self.clk.next_edge(a));
            }
        }
        t
    }

    pub fn stats(&self) -> &UcieStats {
        &self.stats
    }

    /// What the adapter holds and waits for, for a watchdog report (`None`: empty).
    pub fn report(&self) -> Option<String> {
        if self.tx_q.is_empty() && self.retry.is_empty() && self.rx_q.is_empty() && self.wire.is_empty() {
            return None;
        }
        let s = &self.stats;
        let waits = if !self.rx_q.is_empty() {
            "the neighbour router's next edge".to_string()
        } else if !self.retry.is_empty() {
            format!("an intact copy of flit {} at the receiver (go-back-N replay)", self.expect)
        } else {
            "a free retry-buffer entry".to_string()
        };
        Some(format!(
            "{} flit(s) queued, {} sent and unacknowledged, {} for the router, {} replays ({} by timeout), {} CRC errors, {} delivered: waits for {waits} (at ber {} a flit passes its CRC with probability {:.1e})",
            self.tx_q.len(),
            self.retry.len(),
            self.rx_q.len(),
            s.replays,
            s.timeouts,
            s.crc_errors,
            s.delivered,
            self.ber,
            flit_pass_probability(self.ber)
        ))
    }

    /// Raw wire rate, data bytes per tick.
    pub fn bytes_per_tick(&self) -> f64 {
        FLIT_DATA_BYTES as f64 / self.flit_ticks
    }

    // --- Read-only views for the RTL twin's lockstep test (`hw/rtl/tests/rtl_pkg_ucie_replay.rs`,
    // twin `rtl::pkg::ucie_replay::UcieReplayRtl`). None of them changes a register.

    /// The replay controller's registers as of the last evaluation.
    pub fn ctrl_view(&self) -> UcieCtrlView {
        let head_seq = self.next_seq - self.retry.len() as u64;
        UcieCtrlView {
            head_seq,
            send_seq: head_seq + self.send_idx as u64,
            next_seq: self.next_seq,
            tx_queue: self.tx_q.len(),
            expect: self.expect,
            nak_sent: self.nak_sent,
            timer: self.timer,
            sideband: self.back.len(),
        }
    }

    /// The wire can start a flit at edge `now` (the serializer has finished the previous one:
    /// the same test `eval` makes before it sends; the start tick itself is fractional and
    /// stays outside the controller).
    pub fn wire_ready(&self, now: Cycle) -> bool {
        self.wire_free <= now as f64
    }

    /// Acknowledgements that reach the transmitter at edge `now`, oldest first:
    /// `(is_nak, seq)`.
    pub fn acks_due(&self, now: Cycle) -> Vec<(bool, u64)> {
        self.back
            .iter()
            .take_while(|&&(t, _)| t <= now)
            .map(|&(_, a)| match a {
                Ack::Ack(s) => (false, s),
                Ack::Nak(s) => (true, s),
            })
            .collect()
    }

    /// Flits that reach the receiver at edge `now`, oldest first: `(seq, crc_fails)`.
    pub fn flits_due(&self, now: Cycle) -> Vec<(u64, bool)> {
        self.wire.iter().take_while(|&&(t, ..)| t <= now).map(|&(_, seq, _, flipped)| (seq, flipped)).collect()
    }

    /// Sequence number of the newest flit on the wire (the one sent last).
    pub fn last_sent_seq(&self) -> Option<u64> {
        self.wire.back().map(|&(_, seq, ..)| seq)
    }

    /// The newest acknowledgement on the sideband: `(is_nak, seq)`.
    pub fn last_ack_out(&self) -> Option<(bool, u64)> {
        self.back.back().map(|&(_, a)| match a {
            Ack::Ack(s) => (false, s),
            Ack::Nak(s) => (true, s),
        })
    }

    /// Replay timeout, ticks (the timer is restarted to `now +` this).
    pub fn replay_timeout(&self) -> u64 {
        self.timeout
    }

    /// Ticks one flit occupies the wire (fractional).
    pub fn flit_ticks(&self) -> f64 {
        self.flit_ticks
    }
}

/// The UCIe adapter's replay-controller registers ([`UcieAdapterCl::ctrl_view`]), with the
/// CL's unbounded sequence numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UcieCtrlView {
    /// Oldest sent, not yet acknowledged sequence number (the retry buffer's head).
    pub head_seq: u64,
    /// Next sequence number to (re)send.
    pub send_seq: u64,
    /// Sequence number the next new flit gets (the retry buffer's tail).
    pub next_seq: u64,
    /// Flits waiting in the TX queue (not yet in the retry buffer).
    pub tx_queue: usize,
    /// RX: the next sequence number it accepts.
    pub expect: u64,
    /// RX: a NAK for `expect` was sent and the replay has not arrived intact yet.
    pub nak_sent: bool,
    /// Replay timer deadline, ticks ([`NEVER`]: stopped).
    pub timer: Cycle,
    /// Acknowledgements in flight on the sideband.
    pub sideband: usize,
}

/// CRC-32 (ISO-HDLC) of a frame, the function the adapter's transmitter and receiver use
/// (public for the RTL CRC unit's test).
pub fn frame_crc(frame: &[u8]) -> u32 {
    CRC32.checksum(frame)
}

/// `x.ceil() as u64` without libm's `ceil`, a call on x86-64 without SSE4.1 (1 % of a
/// layer's time, at every adapter evaluation): the cast truncates toward zero and
/// saturates, one more when it cut a fraction. Equal for every input: negative, NaN and
/// below-one values give 0 both ways, values at or past 2^64 saturate both ways.
#[inline]
fn ceil_u64(x: f64) -> u64 {
    let t = x as u64;
    t.saturating_add(((t as f64) < x) as u64)
}

/// Bits before the next flipped one when each flips with probability `p` (NEVER-like for 0).
fn geometric(rng: &mut Xoshiro256PlusPlus, p: f64) -> u64 {
    if p <= 0.0 {
        return u64::MAX / 2;
    }
    let u: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
    let k = (u.ln() / (-p).ln_1p()).floor();
    if k.is_finite() && k < (u64::MAX / 4) as f64 {
        k as u64
    } else {
        u64::MAX / 2
    }
}

const CRC32: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISO_HDLC);

#[cfg(test)]
mod ceil_tests {
    use super::ceil_u64;

    #[test]
    fn ceil_u64_is_the_cast_of_ceil() {
        let mut xs = vec![0.0, -0.0, 0.5, 1.0, 1.5, 2.999_999, 3.0, -0.5, -7.0, 1e15 + 0.5, 9_007_199_254_740_993.0, 1.8e19, 1.9e19, 1e300, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, f64::MIN_POSITIVE];
        // Fractional wire times as the adapter makes them (start + k * 256 / bytes per tick).
        xs.extend((0..10_000).map(|k| 12.5 + k as f64 * 2.844_444_444_444_444));
        for x in xs {
            assert_eq!(ceil_u64(x), x.ceil() as u64, "{x}");
        }
    }
}

impl Probe for UcieAdapterCl {
    fn declare(&self, scope: &[String], out: &mut Vec<SignalDecl>) {
        for (name, width) in [("tx_queue", 16), ("retry", 16), ("rx_queue", 16), ("replays", 32), ("crc_errors", 32), ("flits", 32)] {
            out.push(SignalDecl { scope: scope.to_vec(), name: name.into(), width });
        }
    }
    fn sample(&self, out: &mut Vec<u64>) {
        self.sample_to(out);
    }
}

impl SampleBlock for UcieAdapterCl {
    #[inline(always)]
    fn sample_to<O: SampleOut>(&self, out: &mut O) {
        out.put_all([
            self.tx_q.len() as u64,
            self.retry.len() as u64,
            self.rx_q.len() as u64 + self.wire.len() as u64,
            self.stats.replays & 0xffff_ffff,
            self.stats.crc_errors & 0xffff_ffff,
            self.stats.flits & 0xffff_ffff,
        ]);
    }
}
