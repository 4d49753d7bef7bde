//! Wake-up set: the ticks at which values a block has sent land at their receivers.
//!
//! A partition may be skipped by fast-forward only if no value lands in the skipped ticks
//! (a link delivers in exactly one tick: the receiver must be evaluated then). Staying busy
//! until every sent value has landed is correct but keeps a streaming partition awake at
//! every tick; recording the landing ticks instead lets the engine jump from landing to
//! landing. Landings within 64 ticks are a bit mask relative to the last evaluated tick
//! (one shift per evaluation, the hot path of every package); farther ones — long links
//! on a fine tick, e.g. a slow core clock beside a fast UCIe clock, a DDR phase of 1 ps or a
//! long FDI latency — go to an ordered set, so any link latency the arena can hold is
//! woken exactly (issue 19: a fixed 64-tick window was asserted instead, and configs that
//! validated panicked).

use std::collections::BTreeSet;

use super::{Cycle, NEVER};

/// Window of the bit mask, ticks.
const NEAR: u64 = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WakeSet {
    /// Tick of bit 0.
    base: Cycle,
    bits: u64,
    /// Landings 64 or more ticks past `base` at the time they were added.
    far: BTreeSet<Cycle>,
}

impl Default for WakeSet {
    fn default() -> Self {
        WakeSet { base: 0, bits: 0, far: BTreeSet::new() }
    }
}

/// Landing offsets of the sends of one edge, split into the bit mask and the far ones (built
/// once per system from its link latencies).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WakeOffsets {
    near: u64,
    far: Vec<u64>,
}

impl WakeOffsets {
    /// Offsets `d >= 1` ticks (0 is the sending tick itself and is dropped).
    pub fn of(offsets: impl IntoIterator<Item = u64>) -> Self {
        let mut w = WakeOffsets::default();
        for d in offsets {
            if d == 0 {
                continue;
            }
            if d < NEAR {
                w.near |= 1 << d;
            } else if !w.far.contains(&d) {
                w.far.push(d);
            }
        }
        w.far.sort_unstable();
        w
    }
}

impl WakeSet {
    /// Moves the window to `now` and forgets landings at or before it (they are being
    /// evaluated now).
    #[inline]
    pub fn advance(&mut self, now: Cycle) {
        let d = now.saturating_sub(self.base);
        self.bits = if d >= NEAR { 0 } else { self.bits >> d } & !1;
        self.base = now;
        while self.far.first().is_some_and(|&f| f <= now) {
            self.far.pop_first();
        }
    }

    /// A value sent at `now` (the last `advance`) lands at tick `at > now`.
    #[inline]
    pub fn add(&mut self, at: Cycle) {
        debug_assert!(at > self.base, "a link lands after it is sent");
        let d = at - self.base;
        if d < NEAR {
            self.bits |= 1 << d;
        } else {
            self.far.insert(at);
        }
    }

    /// Adds `now + d` for every offset `d` of `offsets`.
    #[inline]
    pub fn add_offsets(&mut self, offsets: &WakeOffsets) {
        self.bits |= offsets.near & !1;
        for &d in &offsets.far {
            self.far.insert(self.base + d);
        }
    }

    /// The earliest pending landing after the last `advance`, or NEVER.
    #[inline]
    pub fn next(&self) -> Cycle {
        let near = if self.bits == 0 { NEVER } else { self.base + self.bits.trailing_zeros() as u64 };
        near.min(self.far.first().copied().unwrap_or(NEVER))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn landings_in_order_across_skips() {
        let mut w = WakeSet::default();
        w.advance(10);
        w.add(13);
        w.add(11);
        w.add(200);
        assert_eq!(w.next(), 11);
        w.advance(11);
        assert_eq!(w.next(), 13);
        w.advance(13);
        assert_eq!(w.next(), 200);
        w.add_offsets(&WakeOffsets::of([4, 0]));
        assert_eq!(w.next(), 17);
        w.advance(100);
        assert_eq!(w.next(), 200);
        w.advance(200);
        assert_eq!(w.next(), NEVER);
    }

    /// Several landings beyond the bit window are each woken (regression, issue 19: the far
    /// part was a single minimum, so the second far landing was forgotten once the first
    /// was evaluated — and long links were refused by an assertion instead).
    #[test]
    fn every_far_landing_is_kept() {
        let mut w = WakeSet::default();
        let offs = WakeOffsets::of([2, 1250, 2500]);
        w.advance(0);
        w.add_offsets(&offs);
        w.advance(1);
        w.add_offsets(&offs);
        w.add(5000);
        let mut seen = Vec::new();
        while w.next() != NEVER {
            let t = w.next();
            seen.push(t);
            w.advance(t);
        }
        assert_eq!(seen, vec![2, 3, 1250, 1251, 2500, 2501, 5000]);
    }
}
