//! Micro-slice ring buffer of one chiplet (paper §IV-A: "a micro-slice–based ring buffer — a
//! mature hardware technique").
//!
//! S slots of one micro-slice each, a circular buffer with a valid bit per slot (as a
//! reorder buffer): the tail pointer allocates the first free slot at or after it (a
//! priority encoder over the free bits, starting at the tail), slots are released out of
//! order (Rule 3: right after their last use — computed here and, if the trajectory goes
//! on, sent to the next chiplet), and the head pointer follows the oldest live slot. A
//! strict head/tail FIFO (reuse only when the head passes) would let one micro-slice that
//! waits — e.g. a pre-loaded slice of an expert not yet granted — pin the head and starve
//! the trajectory that must finish before its grant (a deadlock the rules testbench
//! `hw/tests/pkg_rules_mesh.rs` found), so reuse is by free bit.
//!
//! Registers: `head`, `tail`, per slot `live` and the micro-slice it holds. The slot data
//! (functional mode) is a plain byte array of S × `slot_bytes`, written by DDR beats and D2D
//! flits and read by the PE array.

use crate::harness::{Probe, SignalDecl};
use sched::{ChipletId, ExpertId};

/// What a slot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SlotTag {
    pub expert: ExpertId,
    /// Micro-slice index within the expert.
    pub k: u16,
    /// Chiplet that loaded it from DDR: its trajectory starts there and visits every other
    /// member once (fixed by Rule 4, or chosen by the Rule-5 arbiter).
    pub loader: ChipletId,
}

/// One micro-slice ring buffer.
#[derive(Debug, Clone)]
pub struct RingBufferCl {
    slots: u32,
    /// Oldest live slot (trace) and the allocation pointer.
    head: u32,
    tail: u32,
    live: Vec<bool>,
    n_live: u32,
    tag: Vec<SlotTag>,
    /// Functional mode: `slots × slot_bytes` bytes (empty in timing mode).
    pub data: Vec<u8>,
    slot_bytes: usize,
    /// Highest occupancy seen.
    pub peak_occupancy: u32,
    pub allocs: u64,
    /// Allocations plus releases: the traced values (occupancy, head, tail, live bits, tags)
    /// change only when this moves (tracing skips the ring between changes).
    pub changes: u64,
}

impl RingBufferCl {
    /// `slot_bytes` > 0 allocates the functional-mode data array.
    pub fn new(slots: u32, slot_bytes: usize) -> Self {
        assert!(slots >= 1 && slots < 1 << 15, "ring slots {slots} (validated by the config)");
        let n = slots as usize;
        RingBufferCl {
            slots,
            head: 0,
            tail: 0,
            live: vec![false; n],
            n_live: 0,
            tag: vec![SlotTag::default(); n],
            data: vec![0; n * slot_bytes],
            slot_bytes,
            peak_occupancy: 0,
            allocs: 0,
            changes: 0,
        }
    }

    pub fn capacity(&self) -> u32 {
        self.slots
    }

    /// Live micro-slices.
    #[inline]
    pub fn occupancy(&self) -> u32 {
        self.n_live
    }

    #[inline]
    pub fn free(&self) -> u32 {
        self.slots - self.n_live
    }

    pub fn live_count(&self) -> u32 {
        self.n_live
    }

    pub fn is_live(&self, slot: u32) -> bool {
        self.live[slot as usize]
    }

    pub fn tag(&self, slot: u32) -> SlotTag {
        self.tag[slot as usize]
    }

    /// Allocates the first free slot at or after the tail for `tag`; `None` when full.
    pub fn alloc(&mut self, tag: SlotTag) -> Option<u32> {
        if self.free() == 0 {
            return None;
        }
        let mut s = self.tail;
        while self.live[s as usize] {
            s = (s + 1) % self.slots;
        }
        if self.n_live == 0 {
            self.head = s;
        }
        self.live[s as usize] = true;
        self.tag[s as usize] = tag;
        self.n_live += 1;
        self.tail = (s + 1) % self.slots;
        self.allocs += 1;
        self.changes += 1;
        self.peak_occupancy = self.peak_occupancy.max(self.n_live);
        Some(s)
    }

    /// Releases `slot` (Rule 3); the head moves on to the next live slot.
    pub fn release(&mut self, slot: u32) {
        assert!(self.live[slot as usize], "ring: release of a free slot {slot} (model bug)");
        self.live[slot as usize] = false;
        self.n_live -= 1;
        self.changes += 1;
        if self.n_live > 0 {
            while !self.live[self.head as usize] {
                self.head = (self.head + 1) % self.slots;
            }
        } else {
            self.head = self.tail;
        }
    }

    /// The functional-mode bytes of `slot`.
    pub fn slot_data(&self, slot: u32) -> &[u8] {
        let b = slot as usize * self.slot_bytes;
        &self.data[b..b + self.slot_bytes]
    }

    pub fn slot_data_mut(&mut self, slot: u32) -> &mut [u8] {
        let b = slot as usize * self.slot_bytes;
        &mut self.data[b..b + self.slot_bytes]
    }

    pub fn head(&self) -> u32 {
        self.head
    }

    pub fn tail(&self) -> u32 {
        self.tail
    }
}

fn bits_for(max: u64) -> u32 {
    (64 - max.leading_zeros()).max(1)
}

/// A ring of `slots` slots' signals: `occ`, `head`, `tail`, and per slot
/// `slot{i}.{live,expert,k}` (slot contents). Shared with the RTL stand-in, so both runs'
/// waveforms declare the same signals.
pub fn declare_signals(scope: &[String], slots: u32, out: &mut Vec<SignalDecl>) {
    let w = bits_for(slots as u64);
    for name in ["occ", "head", "tail"] {
        out.push(SignalDecl { scope: scope.to_vec(), name: name.into(), width: w + 1 });
    }
    for i in 0..slots {
        let mut sc = scope.to_vec();
        sc.push(format!("slot{i}"));
        out.push(SignalDecl { scope: sc.clone(), name: "live".into(), width: 1 });
        out.push(SignalDecl { scope: sc.clone(), name: "expert".into(), width: 16 });
        out.push(SignalDecl { scope: sc, name: "k".into(), width: 16 });
    }
}

impl Probe for RingBufferCl {
    /// See [`declare_signals`].
    fn declare(&self, scope: &[String], out: &mut Vec<SignalDecl>) {
        declare_signals(scope, self.slots, out);
    }

    fn sample(&self, out: &mut Vec<u64>) {
        out.extend([self.occupancy() as u64, self.head() as u64, self.tail() as u64]);
        for i in 0..self.slots as usize {
            out.extend([self.live[i] as u64, self.tag[i].expert.0 as u64, self.tag[i].k as u64]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn released_slots_are_reused_out_of_order() {
        let mut r = RingBufferCl::new(3, 0);
        let a = r.alloc(SlotTag { expert: ExpertId(1), k: 0, loader: ChipletId(0) }).unwrap();
        let b = r.alloc(SlotTag { expert: ExpertId(1), k: 1, loader: ChipletId(0) }).unwrap();
        let c = r.alloc(SlotTag { expert: ExpertId(2), k: 0, loader: ChipletId(0) }).unwrap();
        assert_eq!((a, b, c), (0, 1, 2));
        assert!(r.alloc(SlotTag::default()).is_none(), "full");
        r.release(b);
        assert_eq!(r.occupancy(), 2);
        assert_eq!(r.head(), 0, "the oldest live slot");
        assert_eq!(r.alloc(SlotTag { expert: ExpertId(3), k: 0, loader: ChipletId(0) }), Some(1), "a hole is reused while slot 0 waits");
        r.release(a);
        assert_eq!(r.head(), 1);
        assert_eq!(r.peak_occupancy, 3);
    }

    proptest! {
        /// Random alloc/release: never more live slices than slots, occupancy = tail − head
        /// covers every live slot, and a full ring refuses.
        #[test]
        fn never_overfilled(slots in 1u32..9, ops in proptest::collection::vec(any::<(bool, u8)>(), 0..300)) {
            let mut r = RingBufferCl::new(slots, 0);
            let mut live: Vec<u32> = Vec::new();
            for (alloc, pick) in ops {
                if alloc {
                    match r.alloc(SlotTag::default()) {
                        Some(s) => { prop_assert!(!live.contains(&s)); live.push(s) }
                        None => prop_assert_eq!(r.free(), 0),
                    }
                } else if !live.is_empty() {
                    let s = live.remove(pick as usize % live.len());
                    r.release(s);
                }
                prop_assert!(r.live_count() as usize == live.len());
                prop_assert!(r.occupancy() == r.live_count() && r.occupancy() <= slots);
            }
        }
    }
}
