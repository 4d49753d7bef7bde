//! `TagFifoRtl` (the chiplet controller's Rule-5 FIFO) against a `VecDeque` reference, as the
//! CL holds `assigned_q`: push behind, pop the front (after the push), the ungranted count of
//! the entries held after the edge, overflow. Random pushes, pops (only when not empty, as the
//! controller's k2) and granted sets; every output every cycle until the first overflow
//! (checked, then the run ends: the state past a lost push is not defined on).

mod common;

use std::collections::VecDeque;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rtl::pkg::tag_fifo::TagFifoRtl;
use rust_hdl::prelude::*;

use common::settle;

type Tag = (u16, u16, u8);

fn run<const Q: usize, const E: usize>(cycles: usize, seed: u64, p_push: f64, p_pop: f64) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut u = TagFifoRtl::<Q, E>::new();
    u.connect_all();
    u.reset.next = true;
    settle(&mut u);
    u.clock.next = true.into();
    settle(&mut u);
    u.clock.next = false.into();
    u.reset.next = false;
    let mut q: VecDeque<Tag> = VecDeque::new();
    let mut overflowed = false;
    for c in 0..cycles {
        let push = rng.gen_bool(p_push);
        let tag: Tag = (rng.gen_range(0..E as u16), rng.gen(), rng.gen_range(0..16));
        let granted: u64 = rng.gen::<u64>() & if E >= 64 { u64::MAX } else { (1 << E) - 1 };
        u.push.next = push;
        u.push_expert.next = (tag.0 as u64).into();
        u.push_k.next = (tag.1 as u64).into();
        u.push_loader.next = (tag.2 as u64).into();
        let mut gb: Bits<E> = 0.into();
        for e in 0..E.min(64) {
            if granted >> e & 1 == 1 {
                gb = gb.replace_bit(e, true);
            }
        }
        u.granted.next = gb;
        settle(&mut u);
        // Reference: the push lands behind, then the pop takes the front.
        let len = q.len();
        assert_eq!(u.len.val().to_u64() as usize, len, "cycle {c}: len");
        if push {
            q.push_back(tag);
        }
        assert_eq!(u.len_in.val().to_u64() as usize, q.len(), "cycle {c}: len_in");
        let over = q.len() > Q;
        assert_eq!(u.overflow.val(), over, "cycle {c}: overflow");
        if over {
            // The push is lost (the controller flags `error`); the state is not defined on.
            overflowed = true;
            break;
        }
        if let Some(f) = q.front() {
            let got = (u.front_expert.val().to_u64() as u16, u.front_k.val().to_u64() as u16, u.front_loader.val().to_u64() as u8);
            assert_eq!(got, *f, "cycle {c}: front");
        }
        let pop = !q.is_empty() && rng.gen_bool(p_pop);
        u.pop.next = pop;
        settle(&mut u);
        if pop {
            q.pop_front();
        }
        assert_eq!(u.len_next.val().to_u64() as usize, q.len(), "cycle {c}: len_next");
        let ung = q.iter().filter(|t| granted >> t.0 & 1 == 0).count();
        assert_eq!(u.ungranted.val().to_u64() as usize, ung, "cycle {c}: ungranted");
        u.clock.next = true.into();
        settle(&mut u);
        u.clock.next = false.into();
    }
    // The full case must have been reached in the push-heavy runs.
    if p_push > p_pop {
        assert!(overflowed, "the FIFO never filled");
    }
}

#[test]
fn tag_fifo_q1() {
    run::<1, 4>(3000, 1, 0.5, 0.5);
}

#[test]
fn tag_fifo_q16_e16() {
    run::<16, 16>(10_000, 2, 0.4, 0.5);
    run::<16, 16>(10_000, 3, 0.7, 0.3);
}

#[test]
fn tag_fifo_q64_e64() {
    run::<64, 64>(10_000, 4, 0.5, 0.45);
    run::<64, 64>(10_000, 5, 0.8, 0.2);
}
