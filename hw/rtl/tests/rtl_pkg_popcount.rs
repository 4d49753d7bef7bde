//! `PopCountRtl` (the rings' and the chiplet controller's slot-mask population count) against
//! `u64::count_ones`, which shares nothing with the block's adder tree: a seeded loop of
//! masks of every density (sparse, dense, single bits, all ones, zero) at S = 1, 5, 8, 13,
//! 33, 64, plus a proptest over arbitrary 64- and 8-bit masks.

mod common;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rtl::pkg::popcount::PopCountRtl;
use rust_hdl::prelude::*;

use common::settle;

fn mask_of(s: usize) -> u64 {
    if s == 64 {
        u64::MAX
    } else {
        (1u64 << s) - 1
    }
}

/// One settled evaluation: the block's count of `bits` (already within S bits).
fn count<const S: usize>(u: &mut PopCountRtl<S>, bits: u64) -> u64 {
    u.bits.next = bits.into();
    settle(u);
    u.count.val().to_u64()
}

fn check<const S: usize>(cases: usize, seed: u64) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut u = PopCountRtl::<S>::new();
    u.connect_all();
    let mask = mask_of(S);
    for c in 0..cases {
        let bits = match c % 6 {
            0 => rng.gen::<u64>(),
            1 => rng.gen::<u64>() & rng.gen::<u64>() & rng.gen::<u64>(),
            2 => rng.gen::<u64>() | rng.gen::<u64>() | rng.gen::<u64>(),
            3 => 1u64 << rng.gen_range(0..S),
            4 => u64::MAX,
            _ => 0,
        } & mask;
        assert_eq!(count(&mut u, bits), bits.count_ones() as u64, "S {S} case {c}: bits {bits:#x}");
    }
}

#[test]
fn popcount_matches_count_ones() {
    check::<1>(200, 1);
    check::<5>(500, 2);
    check::<8>(2_000, 3);
    check::<13>(2_000, 4);
    check::<33>(2_000, 5);
    check::<64>(5_000, 6);
}

proptest! {
    #[test]
    fn popcount_64_any_mask(bits in any::<u64>()) {
        let mut u = PopCountRtl::<64>::new();
        u.connect_all();
        prop_assert_eq!(count(&mut u, bits), bits.count_ones() as u64);
    }

    #[test]
    fn popcount_8_any_mask(bits in 0u64..256) {
        let mut u = PopCountRtl::<8>::new();
        u.connect_all();
        prop_assert_eq!(count(&mut u, bits), bits.count_ones() as u64);
    }
}
