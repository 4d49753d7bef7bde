//! Wake-up set: the ticks at which values a block has sent land at their receivers.
//!
//! A partition may be skipped by fast-forward only if no value lands in the skipped ticks
//! (a link delivers in exactly one tick: the receiver must be evaluated then). Staying busy
//! until every sent value has landed is correct but keeps a streaming partition awake at
//! every tick; recording the landing ticks instead lets the engine jump from landing to
//! landing. Landings within 64 ticks are a bit mask relative to the last evaluated tick
//! (one shift per evaluation); farther ones (none in the package's links) a single minimum.

use super::{Cycle, NEVER};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WakeSet {
    /// Tick of bit 0.
    base: Cycle,
    bits: u64,
    /// Earliest landing 64 or more ticks past `base` at the time it was added.
    far: Cycle,
}

impl Default for WakeSet {
    fn default() -> Self {
        WakeSet { base: 0, bits: 0, far: NEVER }
    }
}

impl WakeSet {
    /// Moves the window to `now` and forgets landings at or before it (they are being
    /// evaluated now).
    #[inline]
    pub fn advance(&mut self, now: Cycle) {
        let d = now.saturating_sub(self.base);
        self.bits = if d >= 64 { 0 } else { self.bits >> d } & !1;
        self.base = now;
        if self.far <= now {
            self.far = NEVER;
        }
    }

    /// A value sent at `now` (the last `advance`) lands at tick `at > now`.
    #[inline]
    pub fn add(&mut self, at: Cycle) {
        debug_assert!(at > self.base, "a link lands after it is sent");
        let d = at - self.base;
        if d < 64 {
            self.bits |= 1 << d;
        } else {
            self.far = self.far.min(at);
        }
    }

    /// Adds `now + d` for every set bit `d` of `offsets` (bit 0 ignored).
    #[inline]
    pub fn add_offsets(&mut self, offsets: u64) {
        self.bits |= offsets & !1;
    }

    /// The earliest pending landing after the last `advance`, or NEVER.
    #[inline]
    pub fn next(&self) -> Cycle {
        let near = if self.bits == 0 { NEVER } else { self.base + self.bits.trailing_zeros() as u64 };
        near.min(self.far)
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
        w.add_offsets(1 << 4 | 1);
        assert_eq!(w.next(), 17);
        w.advance(100);
        assert_eq!(w.next(), 200);
        w.advance(200);
        assert_eq!(w.next(), NEVER);
    }
}
