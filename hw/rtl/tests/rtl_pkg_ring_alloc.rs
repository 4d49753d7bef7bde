//! `RingAllocRtl` (the chiplet controller's ring pointers) against a plain model of a ring
//! of `slots` slots: the D2D arrival takes the first free slot at/after the tail, the DDR
//! load the first free slot at/after the slot past it (or the tail), each moving the tail
//! past it (wrapping at the last slot); the free count is taken after the D2D allocation;
//! the head moves to the first live slot at/after it (live bits after the releases), onto
//! the first allocation when nothing was live, then — with an escape — to the first slot at/after
//! that which is still live at the end (the tail when none). Traffic as the controller makes
//! it: random live bits of existing slots, random requests, `live_n` = the live bits with the
//! cycle's allocations, minus the escape's slot; random resets. S / slots = 1/1, 3/2, 8/8,
//! 8/5, 14/14, 64/64, 64/37, and a proptest over seeds at 8 / 16.

mod common;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rtl::pkg::ring_alloc::RingAllocRtl;
use rust_hdl::prelude::*;

use common::settle;

/// First slot at/after `from` (circularly over `n` slots) whose flag is set.
fn first_from(flags: &[bool], from: usize, n: usize) -> Option<usize> {
    (0..n).map(|k| (from + k) % n).find(|&i| flags[i])
}

fn to_mask(flags: &[bool]) -> u64 {
    flags.iter().enumerate().fold(0u64, |m, (i, &f)| m | (f as u64) << i)
}

fn run<const S: usize>(slots: usize, cycles: usize, seed: u64) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut u = RingAllocRtl::<S>::new(slots);
    u.connect_all();
    settle(&mut u);
    let (mut tail, mut head) = (0usize, 0usize);
    let (mut n_both, mut n_wrap, mut n_esc_empty, mut n_empty_alloc) = (0, 0, 0, 0);
    for c in 0..cycles {
        let reset = c == 0 || rng.gen_ratio(1, 300);
        // Live bits of existing slots: often nearly full, sometimes empty.
        let p_live = [0.0, 0.3, 0.7, 0.95][rng.gen_range(0..4)];
        let live2: Vec<bool> = (0..slots).map(|_| rng.gen_bool(p_live)).collect();
        let (rx_want, ld_want, escape) = (rng.gen_bool(0.5), rng.gen_bool(0.5), rng.gen_bool(0.15));
        u.reset.next = reset;
        u.live2.next = to_mask(&live2).into();
        u.rx_want.next = rx_want;
        u.ld_want.next = ld_want;
        u.escape.next = escape;
        u.live_n.next = 0u64.into();
        settle(&mut u);

        // The reference.
        let ctx = format!("S {S} slots {slots} seed {seed} cycle {c}");
        let next = |s: usize| if s == slots - 1 { 0 } else { s + 1 };
        let free2: Vec<bool> = live2.iter().map(|&l| !l).collect();
        let rx = if rx_want { first_from(&free2, tail, slots) } else { None };
        let tail2 = rx.map_or(tail, next);
        let mut free3 = free2.clone();
        if let Some(s) = rx {
            free3[s] = false;
        }
        let ld = if ld_want { first_from(&free3, tail2, slots) } else { None };
        let tail_n = ld.map_or(tail2, next);
        let mut hd_a = first_from(&live2, head, slots).unwrap_or(tail);
        if !live2.iter().any(|&l| l) {
            n_empty_alloc += (rx.is_some() || ld.is_some()) as usize;
            hd_a = rx.or(ld).unwrap_or(hd_a);
        }
        assert_eq!(u.tail.val().to_u64(), tail as u64, "{ctx}: tail");
        assert_eq!(u.head.val().to_u64(), head as u64, "{ctx}: head");
        assert_eq!(u.rx_ok.val(), rx.is_some(), "{ctx}: rx_ok");
        assert_eq!(u.rx_m.val().to_u64(), rx.map_or(0, |s| 1u64 << s), "{ctx}: rx_m");
        if let Some(s) = rx {
            assert_eq!(u.rx_slot.val().to_u64(), s as u64, "{ctx}: rx_slot");
        }
        assert_eq!(u.free.val().to_u64(), free3.iter().filter(|&&f| f).count() as u64, "{ctx}: free");
        assert_eq!(u.ld_ok.val(), ld.is_some(), "{ctx}: ld_ok");
        assert_eq!(u.ld_m.val().to_u64(), ld.map_or(0, |s| 1u64 << s), "{ctx}: ld_m");
        if let Some(s) = ld {
            assert_eq!(u.ld_slot.val().to_u64(), s as u64, "{ctx}: ld_slot");
        }
        n_both += (rx.is_some() && ld.is_some()) as usize;
        n_wrap += (tail_n < tail) as usize;

        // The escape drops one live slot (if any) after the allocations.
        let mut live_n = live2.clone();
        for s in rx.into_iter().chain(ld) {
            live_n[s] = true;
        }
        if escape {
            let live: Vec<usize> = (0..slots).filter(|&i| live_n[i]).collect();
            if !live.is_empty() {
                live_n[live[rng.gen_range(0..live.len())]] = false;
            }
        }
        u.live_n.next = to_mask(&live_n).into();
        settle(&mut u);
        let head_n = if escape {
            let h = first_from(&live_n, hd_a, slots);
            n_esc_empty += h.is_none() as usize;
            h.unwrap_or(tail_n)
        } else {
            hd_a
        };
        (tail, head) = if reset { (0, 0) } else { (tail_n, head_n) };
        u.clock.next = true.into();
        settle(&mut u);
        u.clock.next = false.into();
    }
    assert!((slots < 2 || n_both > 0 && n_wrap > 0) && n_esc_empty > 0 && n_empty_alloc > 0, "coverage: two allocations {n_both}, wraps {n_wrap}, escapes emptying the ring {n_esc_empty}, allocations into an empty ring {n_empty_alloc}");
}

#[test]
fn ring_alloc_small() {
    run::<1>(1, 2000, 1);
    run::<3>(2, 4000, 2);
}

#[test]
fn ring_alloc_s8() {
    run::<8>(8, 10_000, 3);
    run::<8>(5, 5000, 4);
}

#[test]
fn ring_alloc_wide() {
    run::<14>(14, 5000, 5);
    run::<64>(64, 3000, 6);
    run::<64>(37, 3000, 7);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]
    /// Seeds at S = 8 (the exported size) and 16 (a package size), every ring size up to S.
    #[test]
    fn ring_alloc_proptest(seed in any::<u64>(), wide in any::<bool>(), cut in 0usize..8) {
        if wide {
            run::<16>(16 - cut, 1500, seed);
        } else {
            run::<8>(8 - cut, 1500, seed);
        }
    }
}
