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
//!
//! Stamps and values are kept apart, and the links of one receiver can be allocated as a
//! group ([`LinkArena::add_group`]) whose rings are interleaved slot by slot: the stamps of
//! all of a receiver's inputs for one cycle then share one cache line, so polling its inputs
//! costs one line (not one per link), and a value's line is touched only when it arrives.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

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
    /// The receiver group whose [`LandingMarks`] a send stamps (`NO_GROUP`: none).
    grp: u16,
    /// log2 of the distance between the link's consecutive slots: 0 for a link of its own,
    /// log2 of the group's (power-of-two) width for a link of an interleaved group.
    shift: u8,
}

/// The slots of a group's first links in one cycle ([`LinkArena::row`]).
#[derive(Debug, Clone, Copy)]
pub struct LinkRow {
    i: usize,
    n: usize,
}

/// A link whose sends stamp no landing mark.
const NO_GROUP: u16 = u16::MAX;

impl LinkId {
    /// An unconnected port.
    pub const NONE: LinkId = LinkId { base: u32::MAX, mask: 0, lat: 0, grp: NO_GROUP, shift: 0 };

    #[inline]
    pub fn is_none(self) -> bool {
        self.base == u32::MAX
    }

    #[inline]
    pub fn latency(self) -> u32 {
        self.lat as u32
    }

    /// Whether this is link `j` of the group whose first link is `first`.
    pub fn is_in_group_at(self, first: LinkId, j: usize) -> bool {
        !first.is_none() && self.base as usize == first.base as usize + j && self.shift == first.shift && self.mask == first.mask && j < 1 << first.shift
    }
}

/// The slots of many links of one payload type in one allocation (a system allocates its
/// links receiver by receiver, so a module's inputs sit side by side in memory).
pub struct LinkArena<T> {
    /// Cycle each slot's value is due (`NEVER` = never written), in 64-byte-aligned lines of
    /// eight so a group's stamps of one cycle sit in one cache line. Slot `i` is stamp
    /// `i % 8` of line `i / 8`; lines exist for every slot below `vals.len()`, and at least
    /// one (stamp 0, which [`Self::lands`] reads for an id outside the arena).
    stamps: Vec<StampLine>,
    /// Each slot's value.
    vals: Vec<UnsafeCell<T>>,
    /// Landing marks stamped by the sends on links added with a group.
    marks: Option<Arc<LandingMarks>>,
}

/// Eight slot stamps, one cache line.
#[repr(C, align(64))]
struct StampLine([UnsafeCell<Cycle>; 8]);

impl StampLine {
    fn never() -> Self {
        StampLine(std::array::from_fn(|_| UnsafeCell::new(NEVER)))
    }
}

/// Per receiver group (a tile, a station), a ring of *landing marks*, one per tick, that a
/// send on any of the group's input links stamps with the tick its value lands: the group
/// knows whether anything at all lands on its inputs in tick `now` with one load, instead of
/// polling every input (the package's sideband, where a value lands now and then on one of
/// 3·(n − 1) links; a whole tile that sleeps until an input lands). The marks say exactly
/// what the links say as long as the ring is longer than any marked link's reach
/// ([`LandingMarks::new`]'s `span`): a mark is overwritten only by a landing `ring` ticks
/// later, sent after the first one landed.
///
/// Senders in different partitions may stamp the same mark in the same tick; they write the
/// same value, through a relaxed atomic store (the stepper's barrier orders it before the
/// receiving tick, as it does the link slots).
pub struct LandingMarks {
    /// Group `g`'s marks at `g * ring .. (g + 1) * ring`, slot `tick & (ring − 1)`.
    marks: Vec<AtomicU64>,
    ring: usize,
}

impl LandingMarks {
    /// `groups` receivers; `span`: the longest reach of a marked link, ticks (its latency,
    /// plus the receiver's period for a crossing).
    pub fn new(groups: usize, span: u32) -> Self {
        let ring = (span as usize + 1).next_power_of_two();
        LandingMarks { marks: (0..groups * ring).map(|_| AtomicU64::new(NEVER)).collect(), ring }
    }

    /// A value for group `g` lands in tick `due`.
    #[inline]
    pub fn stamp(&self, g: usize, due: Cycle) {
        self.marks[g * self.ring + (due as usize & (self.ring - 1))].store(due, Ordering::Relaxed);
    }

    /// Whether anything lands on group `g`'s inputs in tick `now`.
    #[inline]
    pub fn lands(&self, g: usize, now: Cycle) -> bool {
        self.marks[g * self.ring + (now as usize & (self.ring - 1))].load(Ordering::Relaxed) == now
    }

    /// Reach a ring of this size covers.
    pub fn span(&self) -> u32 {
        (self.ring - 1) as u32
    }
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
        LinkArena { stamps: vec![StampLine::never()], vals: Vec::new(), marks: None }
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
        let base = self.grow(0, n);
        LinkId { base: base as u32, mask: (n - 1) as u16, lat: lat as u16, grp: NO_GROUP, shift: 0 }
    }

    /// Adds the input links of one receiver, of latencies `lats` (each as for [`Self::add`]),
    /// as one group: the rings share one size (the longest link's) and are interleaved slot
    /// by slot, so the receiver's stamps of one cycle are adjacent — in one cache line for up
    /// to eight links. Returns the ids in the order of `lats`. Each link behaves exactly as
    /// one added alone (a longer ring only keeps old values longer).
    pub fn add_group(&mut self, lats: &[u32]) -> Vec<LinkId> {
        let links: Vec<(u32, u32)> = lats.iter().map(|&lat| (lat, 0)).collect();
        self.add_group_cdc(&links)
    }

    /// [`Self::add_group`] for links of which some cross into the receiver's clock domain:
    /// `(lat, rx_period)` per link, each as for [`Self::add_cdc`] (`rx_period` 0: a link as
    /// [`Self::add`] makes it). The package groups a router's inputs so: its neighbours'
    /// adapters cross into the core domain, its D2D engine does not.
    pub fn add_group_cdc(&mut self, links: &[(u32, u32)]) -> Vec<LinkId> {
        assert!(!links.is_empty());
        for &(lat, rx) in links {
            assert!(lat >= 1, "links are registered: latency must be >= 1 (got {lat})");
            assert!(((lat + rx) as usize) < MAX_LINK_LATENCY as usize, "link latency {lat} + receiver period {rx} too large");
        }
        let n = links.iter().map(|&(lat, rx)| ((lat + rx) as usize + 1).next_power_of_two()).max().unwrap();
        let width = links.len().next_power_of_two();
        assert!(n <= 1 << 16 && width <= 1 << 8, "link group too large");
        // Aligned to its width (up to a line of 8 stamps), a group's slot never straddles lines.
        let base = self.grow(width.min(8), n * width);
        links
            .iter()
            .enumerate()
            .map(|(j, &(lat, _))| LinkId { base: (base + j) as u32, mask: (n - 1) as u16, lat: lat as u16, grp: NO_GROUP, shift: width.trailing_zeros() as u8 })
            .collect()
    }

    /// Appends `n` never-written slots starting at a multiple of `align` (when > 0); returns
    /// the first one.
    fn grow(&mut self, align: usize, n: usize) -> usize {
        let mut base = self.vals.len();
        if align > 1 {
            base = base.next_multiple_of(align);
        }
        assert!(base + n < u32::MAX as usize, "too many link slots");
        self.vals.resize_with(base + n, || UnsafeCell::new(T::default()));
        self.stamps.resize_with((base + n).div_ceil(8), StampLine::never);
        base
    }

    /// Sends on links added with [`Self::marked`] stamp `marks` (shared by the arenas whose
    /// links end in the same receivers).
    pub fn with_marks(marks: Arc<LandingMarks>) -> Self {
        LinkArena { stamps: vec![StampLine::never()], vals: Vec::new(), marks: Some(marks) }
    }

    /// `id` (a link of this arena) with its sends stamping group `g`'s landing marks. The
    /// arena must have marks ([`Self::with_marks`]) that reach as far as the link.
    pub fn marked(&self, id: LinkId, g: usize) -> LinkId {
        let m = self.marks.as_ref().expect("an arena with landing marks");
        assert!(id.mask as u32 <= m.span() && g < NO_GROUP as usize, "landing marks shorter than the link, or group {g} out of range");
        LinkId { grp: g as u16, ..id }
    }

    #[inline]
    fn stamp(&self, id: LinkId, due: Cycle) {
        if id.grp != NO_GROUP {
            if let Some(m) = &self.marks {
                m.stamp(id.grp as usize, due);
            }
        }
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
        let base = self.grow(0, n);
        LinkId { base: base as u32, mask: (n - 1) as u16, lat: lat as u16, grp: NO_GROUP, shift: 0 }
    }

    /// Index of `id`'s slot for cycle `t`.
    #[inline]
    fn index(&self, id: LinkId, t: Cycle) -> usize {
        id.base as usize + (((t & id.mask as u64) as usize) << id.shift)
    }

    /// Stamp and value of slot `i` (bounds-checked: `i` below `vals.len()`, so its stamp
    /// line exists too).
    #[inline]
    fn slot(&self, i: usize) -> (*mut Cycle, *mut T) {
        let v = self.vals[i].get();
        // SAFETY: `stamps` holds `vals.len()` stamps or more, laid out contiguously
        // (`StampLine` is eight `Cycle`s, no padding).
        let s = unsafe { (*(self.stamps.as_ptr() as *const UnsafeCell<Cycle>).add(i)).get() };
        (s, v)
    }

    /// A value arrives on `id` in cycle `now` (what `recv` would return, without the copy).
    ///
    /// # Safety
    /// As [`Self::recv`].
    #[inline]
    pub unsafe fn arrives(&self, id: LinkId, now: Cycle) -> bool {
        *self.slot(self.index(id, now)).0 == now
    }

    /// [`Self::arrives`] without a branch, for a module polling several inputs whose arrivals
    /// are random (a branch per poll would often be mispredicted): `false` for
    /// [`LinkId::NONE`] (or any id outside the arena) instead of a panic.
    ///
    /// # Safety
    /// As [`Self::recv`].
    #[inline]
    pub unsafe fn lands(&self, id: LinkId, now: Cycle) -> bool {
        let i = self.index(id, now);
        let inside = i < self.vals.len();
        // Stamp 0 always exists: an id outside the arena reads it (a select, not a branch)
        // and the answer is masked.
        let i = if inside { i } else { 0 };
        let s = *(*(self.stamps.as_ptr() as *const UnsafeCell<Cycle>).add(i)).get();
        inside & (s == now)
    }

    /// [`Self::lands`] together with the slot's value, without a branch: the value is the
    /// one landing when the answer is `true`, and an arbitrary value of the arena (or
    /// `T::default()` in an empty arena) otherwise, for a receiver that applies small values
    /// (credits) of every input masked by the answer instead of branching per input.
    ///
    /// # Safety
    /// As [`Self::recv`].
    #[inline]
    pub unsafe fn lands_value(&self, id: LinkId, now: Cycle) -> (bool, T) {
        if self.vals.is_empty() {
            return (false, T::default());
        }
        let i = self.index(id, now);
        let inside = i < self.vals.len();
        let i = core::hint::select_unpredictable(inside, i, 0);
        let (s, v) = self.slot(i);
        (inside & (*s == now), *v)
    }

    /// The slots of a group's first `n` links in cycle `now` (`first`: the group's first
    /// link, as [`Self::add_group`] returned it; `n` at most the group's size), for a receiver
    /// that polls all of them in every cycle: one index computation for the row instead of one
    /// per link, and no per-link id to load ([`Self::row_lands`], [`Self::row_value`]).
    #[inline]
    pub fn row(&self, first: LinkId, now: Cycle, n: usize) -> LinkRow {
        let i = self.index(first, now);
        // (Checked once here, so the accesses of the row's slots need no bound check.)
        assert!(first.shift as u32 >= usize::BITS - (n.max(1) - 1).leading_zeros() && i + n <= self.vals.len(), "row of {n} links outside its group");
        LinkRow { i, n }
    }

    /// [`Self::lands_value`] of link `j` of `row`: whether a value lands on it now, and the
    /// value (arbitrary when none does), without a branch. `j < row.n`.
    ///
    /// # Safety
    /// As [`Self::recv`], for every link of the row; `row` from this arena's [`Self::row`].
    #[inline]
    pub unsafe fn row_lands_value(&self, row: LinkRow, j: usize, now: Cycle) -> (bool, T) {
        assert!(j < row.n);
        let (s, v) = self.slot_unchecked(row.i + j);
        (*s == now, *v)
    }

    /// [`Self::lands`] of link `j` of `row`. `j < row.n`.
    ///
    /// # Safety
    /// As [`Self::recv`], for every link of the row; `row` from this arena's [`Self::row`].
    #[inline]
    pub unsafe fn row_lands(&self, row: LinkRow, j: usize, now: Cycle) -> bool {
        assert!(j < row.n);
        *self.slot_unchecked(row.i + j).0 == now
    }

    /// The value landing on link `j` of `row` (only valid when [`Self::row_lands`]).
    ///
    /// # Safety
    /// As [`Self::recv`], for every link of the row; `row` from this arena's [`Self::row`].
    #[inline]
    pub unsafe fn row_value(&self, row: LinkRow, j: usize) -> T {
        assert!(j < row.n);
        *self.slot_unchecked(row.i + j).1
    }

    /// [`Self::slot`] without the bound check, for an index below `vals.len()` ([`Self::row`]
    /// checked its row).
    #[inline]
    unsafe fn slot_unchecked(&self, i: usize) -> (*mut Cycle, *mut T) {
        debug_assert!(i < self.vals.len());
        let v = (*self.vals.as_ptr().add(i)).get();
        let s = (*(self.stamps.as_ptr() as *const UnsafeCell<Cycle>).add(i)).get();
        (s, v)
    }

    /// The value that [`Self::lands`] on `id` in cycle `now` (only valid when it does).
    ///
    /// # Safety
    /// As [`Self::recv`].
    #[inline]
    pub unsafe fn landed(&self, id: LinkId, now: Cycle) -> T {
        let i = self.index(id, now);
        debug_assert!(*self.slot(i).0 == now);
        *self.vals[i].get()
    }

    /// Receives the value arriving on `id` in cycle `now`, if any.
    ///
    /// # Safety
    /// Only the link's single receiver may call this, in cycle `now` of the engine's schedule
    /// (all threads in the same cycle, cycles separated by a barrier).
    #[inline]
    pub unsafe fn recv(&self, id: LinkId, now: Cycle) -> Option<T> {
        let (s, v) = self.slot(self.index(id, now));
        if *s == now {
            Some(*v)
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
        let (s, val) = self.slot(self.index(id, due));
        assert!(*s != due, "link written twice for the same cycle (two senders, or two sends in a cycle)");
        *s = due;
        *val = v;
        self.stamp(id, due);
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
        let (s, val) = self.slot(self.index(id, due));
        assert!(*s != due, "link written twice for the same receive tick (a faster sender must rate-match a crossing)");
        *s = due;
        *val = v;
        self.stamp(id, due);
    }

    /// Values in flight on `id` with the cycle each will be received, given the next cycle to
    /// be evaluated `now`, in delivery order. Exclusive access, between runs only.
    pub fn pending(&mut self, id: LinkId, now: Cycle) -> Vec<(Cycle, T)> {
        if id.is_none() {
            return Vec::new();
        }
        let n = id.mask as usize + 1;
        let mut out: Vec<(Cycle, T)> = (0..n)
            .map(|j| {
                let (s, v) = self.slot(id.base as usize + (j << id.shift));
                // SAFETY: exclusive access (`&mut self`).
                unsafe { (*s, *v) }
            })
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
/// a tenth of the run). So the links stamp [`LandingMarks`], one group per receiver: the
/// receiver polls its links only at a tick whose mark equals the tick. The marks say exactly
/// what the links say (same ring size), so skipping a poll never misses a value and the
/// order values are taken in — the inputs in station order — is unchanged. A send also
/// stamps the receiver's group in `inbox` when given (the package's per-tile marks, which
/// say whether anything at all lands on a tile).
pub struct AllToAll<T> {
    arena: LinkArena<T>,
    /// Link from station `i` to station `j` at `i * n + j` (the diagonal is unused).
    ids: Vec<LinkId>,
    n: usize,
    marks: Arc<LandingMarks>,
    inbox: Option<Arc<LandingMarks>>,
}

impl<T: Copy + Default> AllToAll<T> {
    /// `n` stations, every link `lat` ticks; `inbox`: further marks stamped with the
    /// receiving station as the group (covering at least `lat`).
    pub fn new(n: usize, lat: u32, inbox: Option<Arc<LandingMarks>>) -> Self {
        // The same ring size as the links' (a power of two > lat): a mark is overwritten
        // exactly when the slot it summarises is.
        let marks = Arc::new(LandingMarks::new(n, lat));
        let mut arena = LinkArena::with_marks(marks.clone());
        let ids: Vec<LinkId> = (0..n * n)
            .map(|k| {
                let id = arena.add(lat);
                arena.marked(id, k % n)
            })
            .collect();
        if let Some(m) = &inbox {
            assert!(m.span() >= lat, "inbox marks shorter than the links");
        }
        AllToAll { arena, ids, n, marks, inbox }
    }

    /// # Safety
    /// Engine protocol: station `from` is the sole sender on its links, once per tick each.
    #[inline]
    pub unsafe fn send(&self, from: usize, to: usize, now: Cycle, v: T) {
        debug_assert!(from != to && from < self.n && to < self.n);
        let id = self.ids[from * self.n + to];
        self.arena.send(id, now, v);
        if let Some(m) = &self.inbox {
            m.stamp(to, now + id.latency() as u64);
        }
    }

    /// Calls `f` with every value landing at station `to` in tick `now`, in the order of the
    /// sending stations.
    ///
    /// # Safety
    /// Engine protocol: station `to` is the sole receiver of its links.
    #[inline]
    pub unsafe fn recv_each(&self, to: usize, now: Cycle, mut f: impl FnMut(T)) {
        if !self.marks.lands(to, now) {
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
            let a = AllToAll::<u32>::new(n, lat, None);
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

    /// A group of links of unequal latencies (interleaved rings of the longest one's size)
    /// delivers what the same links added one by one deliver, `lands`/`landed` agree with
    /// `recv`, `lands` is false for an unconnected port, and `pending` lists the same values.
    #[test]
    fn group_equals_separate_links() {
        let lats = [2u32, 3, 1, 5, 2, 3];
        let mut g = LinkArena::<u32>::new();
        let mut single = LinkArena::<u32>::new();
        let _ = g.add(4); // a link before the group: the group starts aligned after it
        let gid = g.add_group(&lats);
        let sid: Vec<LinkId> = lats.iter().map(|&l| single.add(l)).collect();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let (mut got_g, mut got_s) = (Vec::new(), Vec::new());
        for t in 0..2000u64 {
            for j in 0..lats.len() {
                unsafe {
                    let r = g.recv(gid[j], t);
                    assert_eq!(r.is_some(), g.lands(gid[j], t));
                    if let Some(v) = r {
                        assert_eq!(g.landed(gid[j], t), v);
                        got_g.push((t, j, v));
                    }
                    if let Some(v) = single.recv(sid[j], t) {
                        got_s.push((t, j, v));
                    }
                    assert!(!g.lands(LinkId::NONE, t));
                }
            }
            for j in 0..lats.len() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if x % 3 == 0 {
                    unsafe {
                        g.send(gid[j], t, (t as u32) << 3 | j as u32);
                        single.send(sid[j], t, (t as u32) << 3 | j as u32);
                    }
                }
            }
            if t % 97 == 0 {
                for j in 0..lats.len() {
                    assert_eq!(g.pending(gid[j], t + 1), single.pending(sid[j], t + 1));
                }
            }
        }
        assert!(got_g.len() > 1000);
        assert_eq!(got_g, got_s);
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
