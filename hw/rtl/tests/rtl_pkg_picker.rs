//! `AgePickerRtl` (the chiplet controller's oldest/newest picker) against a naive reference:
//! random sets and random age matrices — consistent ones (a random total order, checked
//! against "the member with the smallest / largest rank") and arbitrary bits (checked against
//! the definition, lowest qualifying slot first) — at S = 1, 3, 8, 14, 64, plus the exported
//! registered wrapper's one-cycle-late copy.

mod common;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rtl::pkg::picker::{random_age, AgePickerRegRtl, AgePickerRtl};
use rust_hdl::prelude::*;

use common::settle;

/// Reference by the definition: the lowest member i that is older than every other member
/// (oldest) or older than none (newest). Independent of the block's code: a double loop over
/// pairs, no masks.
fn reference(req: u64, newest: bool, age: &[u64]) -> Option<usize> {
    let s = age.len();
    let member = |i: usize| req >> i & 1 == 1;
    let older = |i: usize, j: usize| age[i] >> j & 1 == 1;
    (0..s).find(|&i| {
        member(i)
            && (0..s).filter(|&j| j != i && member(j)).all(|j| if newest { !older(i, j) } else { older(i, j) })
    })
}

/// Reference for a consistent matrix given by ranks (rank[i] < rank[j]: i entered first).
fn by_rank(req: u64, newest: bool, rank: &[u32]) -> Option<usize> {
    let members = (0..rank.len()).filter(|&i| req >> i & 1 == 1);
    if newest {
        members.max_by_key(|&i| rank[i])
    } else {
        members.min_by_key(|&i| rank[i])
    }
}

fn check<const S: usize>(cases: usize, seed: u64) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut u = AgePickerRtl::<S>::new();
    u.connect_all();
    let mask = if S == 64 { u64::MAX } else { (1u64 << S) - 1 };
    for c in 0..cases {
        let req = match c % 4 {
            0 => rng.gen::<u64>() & mask,
            1 => rng.gen::<u64>() & rng.gen::<u64>() & rng.gen::<u64>() & mask,
            2 => 1u64 << rng.gen_range(0..S),
            _ => mask,
        };
        let newest = rng.gen_bool(0.5);
        // Half of the cases from ranks (the controller's situation), the rest arbitrary bits.
        let (age, want) = if c % 2 == 0 {
            let mut rank: Vec<u32> = (0..S as u32).collect();
            for i in (1..S).rev() {
                rank.swap(i, rng.gen_range(0..=i));
            }
            let age: Vec<u64> = (0..S).map(|i| (0..S).filter(|&j| rank[i] < rank[j]).fold(0u64, |m, j| m | 1 << j)).collect();
            let want = by_rank(req, newest, &rank);
            assert_eq!(want, reference(req, newest, &age), "reference disagrees with the ranks");
            (age, want)
        } else {
            let age = random_age(&mut rng, S);
            let want = reference(req, newest, &age);
            (age, want)
        };
        u.req.next = req.into();
        u.newest.next = newest;
        for i in 0..S {
            u.age[i].next = age[i].into();
        }
        settle(&mut u);
        let got = u.found.val().then(|| u.slot.val().to_u64() as usize);
        assert_eq!(got, want, "S {S} case {c}: req {req:#x} newest {newest} age {age:x?}");
        let oh = u.onehot.val().to_u64();
        assert_eq!(oh, want.map_or(0, |i| 1u64 << i), "S {S} case {c}: onehot");
    }
}

#[test]
fn picker_s1() {
    check::<1>(200, 1);
}

#[test]
fn picker_s3() {
    check::<3>(4000, 2);
}

#[test]
fn picker_s8() {
    check::<8>(20_000, 3);
}

#[test]
fn picker_s14() {
    check::<14>(10_000, 4);
}

#[test]
fn picker_s64() {
    check::<64>(3000, 5);
}

/// The exported wrapper: the same comb answer, and last cycle's answer on `found_q`/`slot_q`.
#[test]
fn picker_reg_wrapper() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
    let mut u = AgePickerRegRtl::<8>::default();
    u.connect_all();
    let mut last = None;
    for c in 0..2000 {
        let req = rng.gen::<u64>() & 0xff;
        let newest = rng.gen_bool(0.5);
        let age = random_age(&mut rng, 8);
        u.req.next = req.into();
        u.newest.next = newest;
        for i in 0..8 {
            u.age[i].next = age[i].into();
        }
        settle(&mut u);
        let got = u.found.val().then(|| u.slot.val().to_u64() as usize);
        assert_eq!(got, reference(req, newest, &age), "cycle {c}");
        if c > 0 {
            let q = u.found_q.val().then(|| u.slot_q.val().to_u64() as usize);
            assert_eq!(q, last, "cycle {c}: registered copy");
        }
        last = got;
        u.clock.next = true.into();
        settle(&mut u);
        u.clock.next = false.into();
        settle(&mut u);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    /// Random sizes' worth of seeds at S = 8 and 16 (the exported and a package size).
    #[test]
    fn picker_proptest(seed in any::<u64>(), wide in any::<bool>()) {
        if wide {
            check::<16>(500, seed);
        } else {
            check::<8>(500, seed);
        }
    }
}
