//! Round-robin arbiter (CL), the building block of the separable iSLIP allocators.
//!
//! Mirrors BookSim2's `RoundRobinArbiter` and PyMTL's `RoundRobinArbiterEn`: the grant goes to
//! the first requester at or after the priority pointer; the pointer moves to one past the
//! granted requester **only when the grant is used** (`update_on_grant`), never on a mere
//! request. The RTL twin is `rtl::rr_arbiter::RrArbiterRtl`; the two are run in lockstep by
//! `hw/rtl/tests/rtl_noc_rr_arbiter.rs`.

/// Round-robin arbiter over up to 64 requesters, requests as a bitmask.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RrArbiterCl {
    /// Number of requesters.
    pub n: u32,
    /// Priority pointer: requester with highest priority this cycle.
    pub ptr: u32,
}

impl RrArbiterCl {
    pub fn new(n: u32) -> Self {
        assert!((1..=64).contains(&n), "arbiter width {n} outside 1..=64");
        Self { n, ptr: 0 }
    }

    /// Combinational grant for request mask `req` (bit i = requester i). Does not move the
    /// pointer.
    #[inline]
    pub fn arbitrate(&self, req: u64) -> Option<u32> {
        rr_pick(req, self.ptr, self.n)
    }

    /// Moves priority to one past `granted` (call only when the grant fired).
    #[inline]
    pub fn update_on_grant(&mut self, granted: u32) {
        debug_assert!(granted < self.n);
        self.ptr = if granted + 1 == self.n {
            0
        } else {
            granted + 1
        };
    }
}

/// First set bit of `req` at or after `ptr`, wrapping at `n`. Shared by the arbiter and the
/// allocators so they cannot disagree.
#[inline]
pub fn rr_pick(req: u64, ptr: u32, n: u32) -> Option<u32> {
    let mask = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
    let req = req & mask;
    if req == 0 {
        return None;
    }
    let hi = req & (u64::MAX << ptr);
    Some(if hi != 0 {
        hi.trailing_zeros()
    } else {
        req.trailing_zeros()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rotates_only_on_grant() {
        let mut a = RrArbiterCl::new(4);
        assert_eq!(a.arbitrate(0b1010), Some(1));
        assert_eq!(
            a.arbitrate(0b1010),
            Some(1),
            "no grant used, pointer must hold"
        );
        a.update_on_grant(1);
        assert_eq!(a.arbitrate(0b1010), Some(3));
        a.update_on_grant(3);
        assert_eq!(a.ptr, 0);
        assert_eq!(a.arbitrate(0b1010), Some(1));
        assert_eq!(a.arbitrate(0), None);
    }

    proptest! {
        /// Fairness: with all requesters asking every cycle, n consecutive grants cover all n.
        #[test]
        fn fair_under_full_load(n in 1u32..=64, start in 0u32..64) {
            let mut a = RrArbiterCl::new(n);
            a.ptr = start % n;
            let all = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
            let mut seen = 0u64;
            for _ in 0..n {
                let g = a.arbitrate(all).unwrap();
                seen |= 1 << g;
                a.update_on_grant(g);
            }
            prop_assert_eq!(seen, all);
        }

        /// The grant is always a requester, and it is the nearest one at or after the pointer.
        #[test]
        fn grant_is_nearest_requester(n in 1u32..=64, ptr in 0u32..64, req in any::<u64>()) {
            let ptr = ptr % n;
            let mask = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
            let g = rr_pick(req, ptr, n);
            match g {
                None => prop_assert_eq!(req & mask, 0),
                Some(g) => {
                    prop_assert!(req >> g & 1 == 1);
                    for d in 0..n {
                        let i = (ptr + d) % n;
                        if i == g { break; }
                        prop_assert!(req >> i & 1 == 0);
                    }
                }
            }
        }
    }
}
