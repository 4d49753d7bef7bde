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

pub struct Link<T> {
    lat: u32,
    /// Ring size − 1; the ring has the next power of two ≥ lat + 1 slots so that slot
    /// selection is a mask, not a division (this is on the hot path of every module).
    mask: u64,
    /// (cycle the value is due, value); `NEVER` = never written.
    slots: Box<[UnsafeCell<(Cycle, T)>]>,
}

// SAFETY: a `Link` is shared between the thread of its sender and the thread of its receiver.
// The access protocol (see `send`/`recv`) guarantees that in any cycle the two touch disjoint
// slots, and cycles are separated by a barrier (a happens-before edge) in the engine.
unsafe impl<T: Send> Sync for Link<T> {}

impl<T: Copy + Default> Link<T> {
    pub fn new(lat: u32) -> Self {
        assert!(lat >= 1, "links are registered: latency must be >= 1 (got {lat})");
        let n = (lat as u64 + 1).next_power_of_two();
        let slots = (0..n).map(|_| UnsafeCell::new((NEVER, T::default()))).collect();
        Link { lat, mask: n - 1, slots }
    }

    #[inline]
    pub fn latency(&self) -> u32 {
        self.lat
    }

    #[inline]
    fn n(&self) -> u64 {
        self.mask + 1
    }

    /// Receives the value arriving in cycle `now`, if any.
    ///
    /// # Safety
    /// Only the link's single receiver may call this, once per cycle at most, in cycle `now`
    /// of the engine's schedule (all threads in the same cycle, cycles separated by a barrier).
    #[inline]
    pub unsafe fn recv(&self, now: Cycle) -> Option<T> {
        let slot = &*self.slots[(now & self.mask) as usize].get();
        if slot.0 == now {
            Some(slot.1)
        } else {
            None
        }
    }

    /// Sends `v` in cycle `now`; it is received in cycle `now + lat`.
    ///
    /// # Safety
    /// Only the link's single sender may call this, at most once per cycle, in cycle `now` of
    /// the engine's schedule.
    #[inline]
    pub unsafe fn send(&self, now: Cycle, v: T) {
        let due = now + self.lat as u64;
        let slot = &mut *self.slots[(due & self.mask) as usize].get();
        assert!(slot.0 != due, "link written twice for the same cycle (two senders, or two sends in a cycle)");
        *slot = (due, v);
    }

    /// Values in flight with the cycle each will be received, given the current cycle `now`
    /// (the next cycle to be evaluated), in delivery order. Exclusive access, between runs.
    pub fn pending(&mut self, now: Cycle) -> Vec<(Cycle, T)> {
        let mut out: Vec<(Cycle, T)> =
            self.slots.iter_mut().map(|s| *s.get_mut()).filter(|&(due, _)| due != NEVER && due >= now).collect();
        out.sort_by_key(|&(due, _)| due);
        debug_assert!(out.len() as u64 <= self.n());
        out
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

    #[test]
    #[should_panic(expected = "latency must be >= 1")]
    fn zero_latency_refused() {
        let _ = Link::<u8>::new(0);
    }
}
