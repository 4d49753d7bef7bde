//! Upstream view of a downstream input buffer: per-VC credit counters and VC ownership
//! (BookSim2's `BufferState`, Garnet's `OutVcState`).
//!
//! The sender decrements a VC's credits when it sends a flit (`on_send`) and increments them
//! when the receiver returns a credit (`on_credit`). Invariant checked by tests every cycle:
//! `credits + flits in flight + downstream occupancy == depth`, and `0 <= credits <= depth`.
//! Illegal traffic saturates and raises a sticky `err` flag (never wraps, never panics).
//! An output VC is owned by one input VC from VC allocation until its tail flit is sent
//! (`wait_for_tail_credit = 0`, BookSim's default). RTL twin: `rtl::credit_counter`.

/// Credit counter for one VC.
///
/// Illegal traffic — a send with no credit, or a credit returned when all `depth` are
/// already here — is a bug in the counter's user (the router or NI checks `can_send`). It is
/// guarded identically here and in the RTL twin (issue 5): the count saturates (the illegal
/// event is dropped, so it never wraps to 65535 or 2^W − 1) and the sticky error flag `err`
/// is raised until reset. Within a cycle a returned credit is applied before a send (the
/// router's order), so a send that uses the credit arriving in the same cycle is legal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CreditCounterCl {
    /// Buffer depth downstream (flits).
    pub depth: u16,
    /// Credits available now.
    pub credits: u16,
    /// Sticky: a send without credit or a credit beyond `depth` happened since reset.
    pub err: bool,
}

impl CreditCounterCl {
    pub fn new(depth: u16) -> Self {
        Self {
            depth,
            credits: depth,
            err: false,
        }
    }
    #[inline]
    pub fn can_send(&self) -> bool {
        self.credits > 0
    }
    /// A flit was sent downstream. Without a credit the send is not counted (saturates at 0)
    /// and `err` is raised.
    #[inline]
    pub fn on_send(&mut self) {
        if self.credits == 0 {
            self.err = true;
        } else {
            self.credits -= 1;
        }
    }
    /// A credit came back. Beyond `depth` it is dropped (saturates) and `err` is raised.
    #[inline]
    pub fn on_credit(&mut self) {
        if self.credits >= self.depth {
            self.err = true;
        } else {
            self.credits += 1;
        }
    }
    /// The counter's next-state function: `credit` applied before `send`, both guarded, so a
    /// send and a credit in the same cycle cancel whenever both are legal. Returns the next
    /// (credits, err); equal to calling `on_credit` then `on_send`.
    #[inline]
    pub fn next(&self, send: bool, credit: bool) -> (u16, bool) {
        let mut c = *self;
        if credit {
            c.on_credit();
        }
        if send {
            c.on_send();
        }
        (c.credits, c.err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Random legal send/credit traffic keeps 0 <= credits <= depth and conserves
        /// credits + in_flight == depth.
        #[test]
        fn conserved(depth in 1u16..32, ops in proptest::collection::vec(any::<(bool, bool)>(), 0..400)) {
            let mut c = CreditCounterCl::new(depth);
            let mut in_flight = 0u16;
            for (want_send, want_credit) in ops {
                let send = want_send && c.can_send();
                let credit = want_credit && in_flight > 0;
                let nxt = c.next(send, credit);
                if credit { c.on_credit(); in_flight -= 1; }
                if send { c.on_send(); in_flight += 1; }
                prop_assert_eq!((c.credits, c.err), nxt);
                prop_assert!(c.credits <= depth);
                prop_assert!(!c.err);
                prop_assert_eq!(c.credits + in_flight, depth);
            }
        }
    }

    /// The guard (issue 5): a send at 0 credits and a credit at full depth saturate and raise
    /// the sticky flag; a send using a credit returned in the same cycle is legal; reset
    /// (a new counter) clears the flag.
    #[test]
    fn illegal_traffic_saturates_and_flags() {
        let mut c = CreditCounterCl::new(2);
        assert_eq!(c.next(false, true), (2, true), "credit at full depth");
        c.on_credit();
        assert_eq!((c.credits, c.err), (2, true));
        let mut c = CreditCounterCl::new(2);
        c.on_send();
        c.on_send();
        assert_eq!((c.credits, c.err), (0, false));
        assert_eq!(c.next(true, true), (0, false), "send with the credit of the same cycle");
        assert_eq!(c.next(true, false), (0, true), "send at 0 credits");
        c.on_send();
        assert_eq!((c.credits, c.err), (0, true), "saturates at 0, no wrap to 65535");
        c.on_credit();
        assert_eq!((c.credits, c.err), (1, true), "sticky until reset");
        let mut full = CreditCounterCl::new(3);
        assert_eq!(full.next(true, true), (2, true), "credit at depth dropped, send counted");
        full.on_credit();
        full.on_send();
        assert_eq!((full.credits, full.err), (2, true));
        assert!(!CreditCounterCl::new(3).err);
    }
}
