//! Upstream view of a downstream input buffer: per-VC credit counters and VC ownership
//! (BookSim2's `BufferState`, Garnet's `OutVcState`).
//!
//! The sender decrements a VC's credits when it sends a flit (`on_send`) and increments them
//! when the receiver returns a credit (`on_credit`). Invariant checked by tests every cycle:
//! `credits + flits in flight + downstream occupancy == depth`, and `0 <= credits <= depth`.
//! An output VC is owned by one input VC from VC allocation until its tail flit is sent
//! (`wait_for_tail_credit = 0`, BookSim's default). RTL twin: `rtl::credit_counter`.

/// Credit counter for one VC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CreditCounterCl {
    /// Buffer depth downstream (flits).
    pub depth: u16,
    /// Credits available now.
    pub credits: u16,
}

impl CreditCounterCl {
    pub fn new(depth: u16) -> Self {
        Self {
            depth,
            credits: depth,
        }
    }
    #[inline]
    pub fn can_send(&self) -> bool {
        self.credits > 0
    }
    /// A flit was sent downstream. Panics (a model bug, never an input error) on underflow.
    #[inline]
    pub fn on_send(&mut self) {
        assert!(self.credits > 0, "credit underflow: sent without credit");
        self.credits -= 1;
    }
    /// A credit came back. Panics on overflow (more credits than buffer slots).
    #[inline]
    pub fn on_credit(&mut self) {
        assert!(
            self.credits < self.depth,
            "credit overflow: more credits than buffer depth"
        );
        self.credits += 1;
    }
    /// Send and credit in the same cycle cancel (the counter's next-state function).
    #[inline]
    pub fn next(&self, send: bool, credit: bool) -> u16 {
        self.credits + credit as u16 - send as u16
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
                if send { c.on_send(); in_flight += 1; }
                if credit { c.on_credit(); in_flight -= 1; }
                prop_assert_eq!(c.credits, nxt);
                prop_assert!(c.credits <= depth);
                prop_assert_eq!(c.credits + in_flight, depth);
            }
        }
    }
}
