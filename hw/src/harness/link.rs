//! Registered point-to-point channel with a fixed latency (BookSim's `Channel`, S4's `Link<T>`).
//!
//! A value sent in cycle *t* is received in cycle *t + lat*, `lat ≥ 1`. At most one value
//! enters and one leaves per cycle (the link is one flit wide; wider links are modelled by
//! the sender's flit size). The link is a ring of N ≥ `lat + 1` slots indexed by cycle: the
//! sender in cycle *t* writes slot `(t + lat) mod N` and the receiver in cycle *t* reads slot
//! `t mod N`. As 0 < lat < N these are always different slots, so a sender and a receiver
//! evaluated concurrently in the same cycle never touch the same memory. This is why the
//! parallel stepper needs a single barrier per cycle and no copy-out/commit phase.
//!
//! Each slot carries the cycle its value is due (a stamp), so the receiver only *reads*: a
//! value is present in cycle *t* iff its stamp is *t*. Not clearing on receive halves the
//! stores on the hottest path and keeps the receiver from writing into cache lines the sender
//! owns.

use std::cell::UnsafeCell;

use super::{Cycle, NEVER};

/// Where one link's slots live in a [`LinkArena`]; modules keep these in their port tables, so
/// reaching a slot is one indexed load from the arena (no per-link indirection).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkId {
    base: u32,
    /// Ring size − 1 (a power of two ≥ lat + 1 minus one): slot selection is a mask, not a
    /// division, on the hot path of every module.
    mask: u16,
    lat: u16,
}

impl LinkId {
    /// An unconnected port.
    pub const NONE: LinkId = LinkId { base: u32::MAX, mask: 0, lat: 0 };

    #[inline]
    pub fn is_none(self) -> bool {
        self.base == u32::MAX
    }

    #[inline]
    pub fn latency(self) -> u32 {
        self.lat as u32
    }
}

/// The slots of many links of one payload type in one allocation (a system allocates its
/// links receiver by receiver, so a module's inputs sit side by side in memory).
pub struct LinkArena<T> {
    /// (cycle the value is due, value); `NEVER` = never written.
    slots: Vec<UnsafeCell<(Cycle, T)>>,
}

// SAFETY: the arena is shared between the threads of the links' senders and receivers. The
// access protocol (see `send`/`recv`) guarantees that in any cycle a link's sender and
// receiver touch different slots, every slot belongs to one link, and cycles are separated by
// a barrier (a happens-before edge) in the engine.
unsafe impl<T: Send> Sync for LinkArena<T> {}

/// Longest link (exclusive), in cycles: a link is a ring of slots indexed by a 16-bit mask,
/// so configs must keep every link's latency below this (`NocCfg::validate` does).
pub const MAX_LINK_LATENCY: u32 = 1 << 15;

impl<T: Copy + Default> Default for LinkArena<T> {
    fn default() -> Self {
        LinkArena { slots: Vec::new() }
    }
}

impl<T: Copy + Default> LinkArena<T> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a link of latency `lat` (1 ≤ lat < [`MAX_LINK_LATENCY`]) and returns its id.
    /// Configs are validated against these bounds first; a violation here is a model bug.
    pub fn add(&mut self, lat: u32) -> LinkId {
        assert!(lat >= 1, "links are registered: latency must be >= 1 (got {lat})");
        assert!(lat < MAX_LINK_LATENCY, "link latency {lat} too large");
        let n = (lat as usize + 1).next_power_of_two();
        let base = self.slots.len();
        assert!(base + n < u32::MAX as usize, "too many link slots");
        self.slots.extend((0..n).map(|_| UnsafeCell::new((NEVER, T::default()))));
        LinkId { base: base as u32, mask: (n - 1) as u16, lat: lat as u16 }
    }

    /// Adds a clock-domain-crossing link: its values are sent with [`LinkArena::send_at`] at a
    /// due time chosen by the sender (the receiver's next edge at or after `now + lat`), at
    /// most `lat + rx_period` ticks ahead. `rx_period` is the receiving domain's period in
    /// harness ticks ([`super::DomainClock::div`]).
    pub fn add_cdc(&mut self, lat: u32, rx_period: u32) -> LinkId {
        assert!(lat >= 1, "links are registered: latency must be >= 1 (got {lat})");
        let span = lat as usize + rx_period as usize;
        assert!(span < MAX_LINK_LATENCY as usize, "link latency {lat} + receiver period {rx_period} too large");
        let n = (span + 1).next_power_of_two();
        let base = self.slots.len();
        assert!(base + n < u32::MAX as usize, "too many link slots");
        self.slots.extend((0..n).map(|_| UnsafeCell::new((NEVER, T::default()))));
        LinkId { base: base as u32, mask: (n - 1) as u16, lat: lat as u16 }
    }

    #[inline]
    fn slot(&self, id: LinkId, t: Cycle) -> *mut (Cycle, T) {
        self.slots[id.base as usize + (t & id.mask as u64) as usize].get()
    }

    /// A value arrives on `id` in cycle `now` (what `recv` would return, without the copy).
    ///
    /// # Safety
    /// As [`Self::recv`].
    #[inline]
    pub unsafe fn arrives(&self, id: LinkId, now: Cycle) -> bool {
        (*self.slot(id, now)).0 == now
    }

    /// Receives the value arriving on `id` in cycle `now`, if any.
    ///
    /// # Safety
    /// Only the link's single receiver may call this, in cycle `now` of the engine's schedule
    /// (all threads in the same cycle, cycles separated by a barrier).
    #[inline]
    pub unsafe fn recv(&self, id: LinkId, now: Cycle) -> Option<T> {
        let slot = &*self.slot(id, now);
        if slot.0 == now {
            Some(slot.1)
        } else {
            None
        }
    }

    /// Sends `v` on `id` in cycle `now`; it is received in cycle `now + lat`.
    ///
    /// # Safety
    /// Only the link's single sender may call this, at most once per cycle, in cycle `now` of
    /// the engine's schedule.
    #[inline]
    pub unsafe fn send(&self, id: LinkId, now: Cycle, v: T) {
        let due = now + id.lat as u64;
        let slot = &mut *self.slot(id, due);
        assert!(slot.0 != due, "link written twice for the same cycle (two senders, or two sends in a cycle)");
        *slot = (due, v);
    }

    /// Sends `v` on `id` in tick `now`, to be received in tick `due` (a clock-domain
    /// crossing: the sender picks the receiver's edge). `now + lat <= due` and `due` within
    /// the ring (`add_cdc` sizes it for `lat + rx_period`).
    ///
    /// # Safety
    /// As [`LinkArena::send`]; at most one value may be due per tick.
    #[inline]
    pub unsafe fn send_at(&self, id: LinkId, now: Cycle, due: Cycle, v: T) {
        assert!(due >= now + id.lat as u64 && due - now <= id.mask as u64, "send_at: due {due} outside {}..={} (now {now})", now + id.lat as u64, now + id.mask as u64);
        let slot = &mut *self.slot(id, due);
        assert!(slot.0 != due, "link written twice for the same receive tick (a faster sender must rate-match a crossing)");
        *slot = (due, v);
    }

    /// Values in flight on `id` with the cycle each will be received, given the next cycle to
    /// be evaluated `now`, in delivery order. Exclusive access, between runs only.
    pub fn pending(&mut self, id: LinkId, now: Cycle) -> Vec<(Cycle, T)> {
        if id.is_none() {
            return Vec::new();
        }
        let n = id.mask as usize + 1;
        let mut out: Vec<(Cycle, T)> = self.slots[id.base as usize..id.base as usize + n]
            .iter_mut()
            .map(|s| *s.get_mut())
            .filter(|&(due, _)| due != NEVER && due >= now)
            .collect();
        out.sort_by_key(|&(due, _)| due);
        out
    }
}

/// One link from every station to every other, all of the same latency (the package's
/// control sideband: hand-offs, fetches, slot requests between chiplets), where each station
/// polls all its n − 1 inputs at every edge it is evaluated.
///
/// Polling n − 1 links costs n − 1 loads per station and edge although a value lands on one
/// of them only now and then (on the 4×4 package, 45 loads per tile and core edge were about
/// a tenth of the run). So beside the links, each receiver has a ring of *landing marks*,
/// one per tick, that a sender stamps with the tick its value lands: the receiver polls its
/// links only at a tick whose mark equals the tick. The marks say exactly what the links say
/// (a mark is stamped iff some input's slot is, with the same tick, and both rings have the
/// same size), so skipping a poll never misses a value and the order values are taken in —
/// the inputs in station order — is unchanged.
///
/// Senders in different partitions may stamp the same mark in the same tick; they write the
/// same value, through a relaxed atomic store (the stepper's barrier orders it before the
/// receiving tick, as it does the link slots).
pub struct AllToAll<T> {
    arena: LinkArena<T>,
    /// Link from station `i` to station `j` at `i * n + j` (the diagonal is unused).
    ids: Vec<LinkId>,
    n: usize,
    /// Receiver `j`'s marks at `j * ring .. (j + 1) * ring`, slot `tick & (ring − 1)`.
    marks: Vec<std::sync::atomic::AtomicU64>,
    ring: usize,
}

impl<T: Copy + Default> AllToAll<T> {
    /// `n` stations, every link `lat` ticks.
    pub fn new(n: usize, lat: u32) -> Self {
        let mut arena = LinkArena::new();
        let ids: Vec<LinkId> = (0..n * n).map(|_| arena.add(lat)).collect();
        // The same ring size as the links' (a power of two > lat): a mark is overwritten
        // exactly when the slot it summarises is.
        let ring = (lat as usize + 1).next_power_of_two();
        let marks = (0..n * ring).map(|_| std::sync::atomic::AtomicU64::new(NEVER)).collect();
        AllToAll { arena, ids, n, marks, ring }
    }

    /// # Safety
    /// Engine protocol: station `from` is the sole sender on its links, once per tick each.
    #[inline]
    pub unsafe fn send(&self, from: usize, to: usize, now: Cycle, v: T) {
        debug_assert!(from != to && from < self.n && to < self.n);
        let id = self.ids[from * self.n + to];
        self.arena.send(id, now, v);
        let due = now + id.latency() as u64;
        self.marks[to * self.ring + (due as usize & (self.ring - 1))].store(due, std::sync::atomic::Ordering::Relaxed);
    }

    /// Calls `f` with every value landing at station `to` in tick `now`, in the order of the
    /// sending stations.
    ///
    /// # Safety
    /// Engine protocol: station `to` is the sole receiver of its links.
    #[inline]
    pub unsafe fn recv_each(&self, to: usize, now: Cycle, mut f: impl FnMut(T)) {
        if self.marks[to * self.ring + (now as usize & (self.ring - 1))].load(std::sync::atomic::Ordering::Relaxed) != now {
            return;
        }
        for from in (0..self.n).filter(|&i| i != to) {
            if let Some(v) = self.arena.recv(self.ids[from * self.n + to], now) {
                f(v);
            }
        }
    }
}

/// A standalone link (its own one-link arena), for small systems and tests.
pub struct Link<T> {
    arena: LinkArena<T>,
    id: LinkId,
}

impl<T: Copy + Default> Link<T> {
    pub fn new(lat: u32) -> Self {
        let mut arena = LinkArena::new();
        let id = arena.add(lat);
        Link { arena, id }
    }

    #[inline]
    pub fn latency(&self) -> u32 {
        self.id.latency()
    }

    /// # Safety
    /// As [`LinkArena::recv`].
    #[inline]
    pub unsafe fn recv(&self, now: Cycle) -> Option<T> {
        self.arena.recv(self.id, now)
    }

    /// # Safety
    /// As [`LinkArena::send`].
    #[inline]
    pub unsafe fn send(&self, now: Cycle, v: T) {
        self.arena.send(self.id, now, v)
    }

    pub fn pending(&mut self, now: Cycle) -> Vec<(Cycle, T)> {
        self.arena.pending(self.id, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivers_after_latency() {
        for lat in 1..5u32 {
            let l = Link::<u32>::new(lat);
            let mut got = Vec::new();
            for t in 0..20u64 {
                // Receiver and sender in the same cycle: order must not matter.
                unsafe {
                    if let Some(v) = l.recv(t) {
                        got.push((t, v));
                    }
                    if t % 3 == 0 {
                        l.send(t, t as u32);
                    }
                }
            }
            for (t, v) in got {
                assert_eq!(t, v as u64 + lat as u64);
            }
        }
    }

    /// A 2 GHz sender (every 4 ticks) into an 800 MHz receiver (every 10 ticks, phase 5):
    /// each value lands on the receiver's first edge at least `lat` ticks later.
    /// `AllToAll` delivers what n × n separate `Link`s deliver, in sender order, with the
    /// poll skipped where nothing lands: random sends (at most one per link and tick, as
    /// the protocol allows) on several latencies and sizes, including receivers that are
    /// evaluated only at some ticks (a value landing between is lost by both alike).
    #[test]
    fn all_to_all_equals_separate_links() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = move |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for (n, lat, every) in [(2usize, 1u32, 1u64), (4, 4, 1), (5, 3, 2), (16, 4, 1), (3, 7, 3)] {
            let a = AllToAll::<u32>::new(n, lat);
            let naive: Vec<Vec<Link<u32>>> = (0..n).map(|_| (0..n).map(|_| Link::new(lat)).collect()).collect();
            let (mut got_a, mut got_n) = (Vec::new(), Vec::new());
            for t in 0..3000u64 {
                for to in 0..n {
                    if t % every != 0 {
                        continue;
                    }
                    unsafe { a.recv_each(to, t, |v| got_a.push((t, to, v))) };
                    for (from, row) in naive.iter().enumerate() {
                        if from != to {
                            if let Some(v) = unsafe { row[to].recv(t) } {
                                got_n.push((t, to, v));
                            }
                        }
                    }
                }
                for from in 0..n {
                    for to in 0..n {
                        if from != to && rnd(5) == 0 {
                            let v = (t as u32) << 8 | (from as u32) << 4 | to as u32;
                            unsafe {
                                a.send(from, to, t, v);
                                naive[from][to].send(t, v);
                            }
                        }
                    }
                }
            }
            assert!(got_n.len() > 100, "n={n}: too few deliveries to mean anything");
            assert_eq!(got_a, got_n, "n={n} lat={lat} every={every}");
        }
    }

    #[test]
    fn cdc_lands_on_receiver_edges() {
        use crate::harness::DomainClock;
        let (tx, rx) = (DomainClock { div: 4, ph: 0 }, DomainClock { div: 10, ph: 5 });
        let mut a = LinkArena::<u64>::new();
        let id = a.add_cdc(3, rx.div as u32);
        let mut got = Vec::new();
        let mut next_send = 0;
        for t in 0..400u64 {
            unsafe {
                if rx.is_edge(t) {
                    if let Some(v) = a.recv(id, t) {
                        got.push((v, t));
                    }
                }
                // Rate-matched sender: at most one value per receiver cycle.
                if tx.is_edge(t) && t >= next_send {
                    let due = rx.next_edge(t + 3);
                    a.send_at(id, t, due, t);
                    next_send = due;
                }
            }
        }
        assert!(got.len() > 30);
        for (sent, at) in got {
            assert!(rx.is_edge(at) && at >= sent + 3 && at < sent + 3 + rx.div);
        }
    }

    #[test]
    #[should_panic(expected = "latency must be >= 1")]
    fn zero_latency_refused() {
        let _ = Link::<u8>::new(0);
    }
}
