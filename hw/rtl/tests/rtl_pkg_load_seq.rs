//! `LoadSeqRtl` (the chiplet controller's Rule-4 load sequencer) against a plain reference
//! written from the CL's description of `load_seq` / `load_next`: a list of pre-loads in
//! arrival order, each with its next own micro-slice k, stride and count; a grant marks the
//! held entries of its expert; the scan (when taken) issues the first entry with k < m that is
//! granted or, while the ring has room for pre-loads, any, advancing its k, and removes the
//! exhausted entries it passes; at most E pushes per layer (a clear), a further push is lost.
//! Random grants, pushes (repeated experts too), cap_full, take and clears; every output every
//! cycle.

mod common;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rtl::pkg::load_seq::LoadSeqRtl;
use rust_hdl::prelude::*;

use common::settle;

#[derive(Clone, Debug)]
struct Entry {
    expert: u16,
    k: u32,
    step: u32,
    m: u32,
    granted: bool,
}

/// The reference: the live entries in arrival order (exhausted ones really removed) and the
/// number of pushes since the last clear.
#[derive(Default)]
struct Reference {
    seq: Vec<Entry>,
    pushes: usize,
}

struct Out {
    found: Option<(u16, u32)>,
    own_granted: bool,
    overflow: bool,
    /// Exhausted entries the scan removed.
    dropped: usize,
}

impl Reference {
    fn cycle(&mut self, cap: usize, grant: Option<u16>, push: Option<Entry>, cap_full: bool, take: bool) -> Out {
        if let Some(g) = grant {
            for e in self.seq.iter_mut().filter(|e| e.expert == g) {
                e.granted = true;
            }
        }
        let mut overflow = false;
        if let Some(p) = push {
            if self.pushes < cap {
                self.seq.push(p);
                self.pushes += 1;
            } else {
                overflow = true;
            }
        }
        let own_granted = self.seq.iter().any(|e| e.granted && e.k < e.m);
        let mut found = None;
        let mut dropped = 0;
        if take {
            let mut i = 0;
            while i < self.seq.len() {
                let e = &mut self.seq[i];
                if e.k >= e.m {
                    self.seq.remove(i);
                    dropped += 1;
                    continue;
                }
                if e.granted || !cap_full {
                    found = Some((e.expert, e.k));
                    e.k += e.step;
                    break;
                }
                i += 1;
            }
        }
        Out { found, own_granted, overflow, dropped }
    }
}

fn run<const E: usize>(cycles: usize, seed: u64, p_push: f64, p_clear: f64) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut u = LoadSeqRtl::<E>::new();
    u.connect_all();
    u.reset.next = true;
    settle(&mut u);
    u.clock.next = true.into();
    settle(&mut u);
    u.clock.next = false.into();
    u.reset.next = false;
    let mut r = Reference::default();
    let (mut n_found, mut n_drop, mut n_over, mut n_capped) = (0, 0, 0, 0);
    for c in 0..cycles {
        let grant = rng.gen_bool(0.1).then(|| rng.gen_range(0..10u16));
        let push = rng.gen_bool(p_push).then(|| Entry {
            expert: rng.gen_range(0..10u16),
            k: rng.gen_range(0..4),
            step: rng.gen_range(1..5),
            m: if rng.gen_bool(0.05) { rng.gen_range(0..0x10000) } else { rng.gen_range(0..10) },
            granted: rng.gen_bool(0.3),
        });
        let cap_full = rng.gen_bool(0.4);
        let take = rng.gen_bool(0.6);
        let clear = rng.gen_bool(p_clear);
        u.grant.next = grant.is_some();
        u.grant_expert.next = (grant.unwrap_or(rng.gen()) as u64).into();
        let pe = push.clone().unwrap_or(Entry { expert: rng.gen(), k: rng.gen_range(0..4), step: 1, m: 3, granted: true });
        u.push.next = push.is_some();
        u.push_expert.next = (pe.expert as u64).into();
        u.push_k.next = (pe.k as u64).into();
        u.push_step.next = (pe.step as u64).into();
        u.push_m.next = (pe.m as u64).into();
        u.push_granted.next = pe.granted;
        u.cap_full.next = cap_full;
        u.take.next = take;
        u.clear.next = clear;
        settle(&mut u);
        assert_eq!(u.len.val().to_u64() as usize, r.seq.len(), "cycle {c}: len");
        let want = r.cycle(E, grant, push, cap_full, take);
        assert_eq!(u.overflow.val(), want.overflow, "cycle {c}: overflow");
        assert_eq!(u.own_granted.val(), want.own_granted, "cycle {c}: own_granted");
        let got = u.found.val().then(|| (u.expert.val().to_u64() as u16, u.k.val().to_u64() as u32));
        assert_eq!(got, want.found, "cycle {c}: the load");
        if got.is_none() {
            assert_eq!((u.expert.val().to_u64(), u.k.val().to_u64()), (0, 0), "cycle {c}: idle load fields");
        }
        n_found += want.found.is_some() as usize;
        n_over += want.overflow as usize;
        n_drop += want.dropped;
        n_capped += (take && cap_full && want.found.is_none() && !r.seq.is_empty()) as usize;
        if clear {
            r.seq.clear();
            r.pushes = 0;
        }
        u.clock.next = true.into();
        settle(&mut u);
        u.clock.next = false.into();
    }
    // The interesting cases were reached.
    assert!(n_found > cycles / 50, "{n_found} loads");
    assert!(n_drop > 0, "no exhausted entry dropped");
    assert!(n_capped > 0, "cap_full never held a load back");
    if E <= 16 {
        assert!(n_over > 0, "no overflow");
    }
}

#[test]
fn load_seq_e1() {
    run::<1>(3000, 1, 0.2, 0.02);
}

#[test]
fn load_seq_e5() {
    run::<5>(5000, 2, 0.15, 0.01);
}

#[test]
fn load_seq_e16() {
    run::<16>(10_000, 3, 0.1, 0.005);
    run::<16>(10_000, 4, 0.3, 0.002);
}

#[test]
fn load_seq_e64() {
    run::<64>(10_000, 5, 0.1, 0.002);
}
