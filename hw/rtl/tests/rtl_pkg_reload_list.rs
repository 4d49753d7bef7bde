//! `ReloadListRtl` (the chiplet controller's reload list) against a plain `Vec` reference
//! written from the CL's description of `reload_q`: the hand-off, then the evicted slice, are
//! appended; the first entry whose expert is granted is the reload (removed when taken); the
//! escape's slice is appended after the removal; more than Q entries after the edge is an
//! overflow. The block searches the first Q entries of the list with its two appends (an
//! append behind a full list is seen from the next cycle on, and if nothing in front of it
//! is granted the list overflows anyway), so the reference's search window is Q entries.
//! Random appends on the three ports, take and granted sets; every output every cycle; after
//! an overflow (checked) both are reset and the run goes on.

mod common;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rtl::pkg::reload_list::ReloadListRtl;
use rust_hdl::prelude::*;

use common::settle;

type Tag = (u16, u16, u8);

fn reset<const Q: usize, const E: usize>(u: &mut ReloadListRtl<Q, E>) {
    u.reset.next = true;
    u.hand_valid.next = false;
    u.evict_valid.next = false;
    u.esc_valid.next = false;
    u.take.next = false;
    settle(u);
    u.clock.next = true.into();
    settle(u);
    u.clock.next = false.into();
    u.reset.next = false;
}

/// `p_app`: probability of an append on each of the three ports; `p_gr`: of each expert
/// being granted in a cycle.
fn run<const Q: usize, const E: usize>(cycles: usize, seed: u64, p_app: f64, p_gr: f64) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut u = ReloadListRtl::<Q, E>::new();
    u.connect_all();
    reset(&mut u);
    let mut list: Vec<Tag> = Vec::new();
    let (mut n_mid, mut n_over, mut n_boundary) = (0, 0, 0);
    for c in 0..cycles {
        let tag = |rng: &mut Xoshiro256PlusPlus| -> Tag { (rng.gen_range(0..E as u16), rng.gen(), rng.gen_range(0..16)) };
        let hand = (rng.gen_bool(p_app), tag(&mut rng));
        let evict = (rng.gen_bool(p_app), tag(&mut rng));
        let esc = (rng.gen_bool(p_app * 0.7), tag(&mut rng));
        let take = rng.gen_bool(0.6);
        let granted: Vec<bool> = (0..E).map(|_| rng.gen_bool(p_gr)).collect();
        u.hand_valid.next = hand.0;
        u.hand_expert.next = (hand.1 .0 as u64).into();
        u.hand_k.next = (hand.1 .1 as u64).into();
        u.hand_loader.next = (hand.1 .2 as u64).into();
        u.evict_valid.next = evict.0;
        u.evict_expert.next = (evict.1 .0 as u64).into();
        u.evict_k.next = (evict.1 .1 as u64).into();
        u.evict_loader.next = (evict.1 .2 as u64).into();
        u.esc_valid.next = esc.0;
        u.esc_expert.next = (esc.1 .0 as u64).into();
        u.esc_k.next = (esc.1 .1 as u64).into();
        u.esc_loader.next = (esc.1 .2 as u64).into();
        u.take.next = take;
        let mut gb: Bits<E> = 0.into();
        for (e, &g) in granted.iter().enumerate() {
            if g {
                gb = gb.replace_bit(e, true);
            }
        }
        u.granted.next = gb;
        settle(&mut u);

        // Reference.
        assert_eq!(u.len.val().to_u64() as usize, list.len(), "cycle {c}: len");
        let mut l1 = list.clone();
        for (v, t) in [hand, evict] {
            if v {
                l1.push(t);
            }
        }
        let first = l1.iter().take(Q).position(|t| granted[t.0 as usize]);
        assert_eq!(u.any_granted.val(), first.is_some(), "cycle {c}: any_granted");
        let front = first.map(|p| l1[p]).unwrap_or((0, 0, 0));
        let got = (u.expert.val().to_u64() as u16, u.k.val().to_u64() as u16, u.loader.val().to_u64() as u8);
        assert_eq!(got, front, "cycle {c}: first granted entry");
        let found = first.is_some() && take;
        assert_eq!(u.found.val(), found, "cycle {c}: found");
        if found {
            let p = first.unwrap();
            n_mid += (p > 0 && p + 1 < l1.len()) as usize;
            n_boundary += (l1.len() == Q + 1) as usize;
            l1.remove(p);
        }
        if esc.0 {
            l1.push(esc.1);
        }
        let over = l1.len() > Q;
        assert_eq!(u.overflow.val(), over, "cycle {c}: overflow");
        u.clock.next = true.into();
        settle(&mut u);
        u.clock.next = false.into();
        if over {
            // An append was lost (the controller flags `error`); start again.
            n_over += 1;
            reset(&mut u);
            list.clear();
        } else {
            list = l1;
        }
    }
    if Q > 2 {
        assert!(n_mid > 0, "no removal from the middle of the list");
    }
    if p_app > 0.3 {
        assert!(n_over > 0, "the list never overflowed");
        assert!(n_boundary > 0, "no removal with Q + 1 entries");
    }
}

#[test]
fn reload_list_q1() {
    run::<1, 4>(3000, 1, 0.4, 0.3);
}

#[test]
fn reload_list_q16_e16() {
    run::<16, 16>(10_000, 2, 0.25, 0.15);
    run::<16, 16>(10_000, 3, 0.45, 0.1);
}

#[test]
fn reload_list_q64_e64() {
    run::<64, 64>(10_000, 4, 0.3, 0.05);
    run::<64, 64>(10_000, 5, 0.5, 0.03);
}
