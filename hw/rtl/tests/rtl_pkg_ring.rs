//! `RingBufferRtl` against `RingBufferCl` in lockstep: random out-of-order releases of live
//! slots and allocations with random tags, ≥ 10 000 cycles per case; the allocation answer
//! (comb) and the registered live bits, occupancy, head, tail and every live slot's tag are
//! compared every cycle. A mismatch names the cycle, the port and both values and writes both
//! models' VCDs.

mod common;

use hw::pkg::ring::{RingBufferCl, SlotTag};
use sched::{ChipletId, ExpertId};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rtl::pkg::ring::RingBufferRtl;
use rust_hdl::prelude::*;

use common::settle;

fn edge<U: Block>(u: &mut U, clock: fn(&mut U) -> &mut Signal<In, Clock>) {
    settle(u);
    clock(u).next = true.into();
    settle(u);
    clock(u).next = false.into();
    settle(u);
}

/// `cycles` cycles of random traffic on an S-slot ring; `p_alloc`/`p_rel` in percent.
fn run<const S: usize>(cycles: usize, seed: u64, p_alloc: u32, p_rel: u32) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut cl = RingBufferCl::new(S as u32, 0);
    let mut u = RingBufferRtl::<S>::new();
    u.connect_all();
    u.reset.next = true;
    edge(&mut u, |u| &mut u.clock);
    u.reset.next = false;
    let mut tr = common::LockstepTrace::named(&format!("ring_s{S}_seed{seed}"));
    for c in 0..cycles {
        tr.cycle(c as u64);
        // Releases: each live slot with probability p_rel (out of order), in slot order.
        let mut rel = 0u64;
        for s in 0..S as u32 {
            if cl.is_live(s) && rng.gen_range(0..100) < p_rel {
                rel |= 1 << s;
                cl.release(s);
            }
        }
        let alloc = rng.gen_range(0..100) < p_alloc;
        let tag = SlotTag { expert: ExpertId(rng.gen::<u16>()), k: rng.gen(), loader: ChipletId(rng.gen_range(0..16u8)) };
        let got = if alloc { cl.alloc(tag) } else { None };
        u.release_mask.next = rel.into();
        u.alloc.next = alloc;
        u.alloc_expert.next = (tag.expert.0 as u64).into();
        u.alloc_k.next = (tag.k as u64).into();
        u.alloc_loader.next = (tag.loader.0 as u64).into();
        settle(&mut u);
        tr.expect("alloc_ok", 1, got.is_some() as u64, u.alloc_ok.val() as u64);
        if let Some(s) = got {
            tr.expect("alloc_slot", 8, s as u64, u.alloc_slot.val().to_u64());
        }
        edge(&mut u, |u| &mut u.clock);
        let live: u64 = (0..S as u32).filter(|&s| cl.is_live(s)).map(|s| 1u64 << s).sum();
        tr.expect("live", S as u32, live, u.live.val().to_u64());
        tr.expect("occ", 8, cl.occupancy() as u64, u.occ.val().to_u64());
        tr.expect("head", 8, cl.head() as u64, u.head.val().to_u64());
        tr.expect("tail", 8, cl.tail() as u64, u.tail.val().to_u64());
        for s in 0..S as u32 {
            if cl.is_live(s) {
                u.rd_slot.next = (s as u64).into();
                settle(&mut u);
                let t = cl.tag(s);
                tr.expect(&format!("tag{s}.expert"), 16, t.expert.0 as u64, u.rd_expert.val().to_u64());
                tr.expect(&format!("tag{s}.k"), 16, t.k as u64, u.rd_k.val().to_u64());
                tr.expect(&format!("tag{s}.loader"), 8, t.loader.0 as u64, u.rd_loader.val().to_u64());
            }
        }
    }
}

#[test]
fn ring_fixed_sizes_10k_cycles() {
    run::<1>(10_000, 1, 50, 30);
    run::<2>(10_000, 2, 60, 30);
    run::<8>(10_000, 3, 70, 10);
    run::<14>(10_000, 4, 40, 5);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]
    /// Random load mixes: from mostly-full (many allocations, few releases) to mostly-empty.
    #[test]
    fn ring_lockstep_random(seed in any::<u64>(), p_alloc in 5u32..100, p_rel in 1u32..60) {
        run::<5>(10_000, seed, p_alloc, p_rel);
        run::<16>(10_000, seed ^ 0x9e37, p_alloc, p_rel);
    }
}

/// `RingScanRtl` (the ring's circular priority encoder, shared with the chiplet controller)
/// against a reference by rotation: the first set bit among from, from+1, …, S-1, then the
/// first set bit overall; pointers beyond S-1 included (they find no "at/after" bit). The
/// pointer goes in as its thermometer (bit i: i ≥ from), the winner comes out as one too.
fn scan_check<const S: usize>(cases: usize, seed: u64) {
    use rtl::pkg::ring::RingScanRtl;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut u = RingScanRtl::<S>::new();
    u.connect_all();
    let mask = if S == 64 { u64::MAX } else { (1u64 << S) - 1 };
    for c in 0..cases {
        let bits = match c % 3 {
            0 => rng.gen::<u64>() & mask,
            1 => rng.gen::<u64>() & rng.gen::<u64>() & rng.gen::<u64>() & mask,
            _ => 0,
        };
        let from = rng.gen_range(0..S as u64 + 3);
        let set = |i: u64| bits >> i & 1 == 1;
        let want = (from..S as u64).find(|&i| set(i)).or_else(|| (0..S as u64).find(|&i| set(i)));
        let ge = |p: u64| (p..S as u64).fold(0u64, |m, i| m | 1 << i);
        u.bits.next = bits.into();
        u.from_ge.next = ge(from).into();
        settle(&mut u);
        let got = u.found.val().then(|| u.slot.val().to_u64());
        assert_eq!(got, want, "S {S} case {c}: bits {bits:#x} from {from}");
        assert_eq!(u.slot_ge.val().to_u64(), want.map_or(0, ge), "S {S} case {c}: slot_ge");
        if want.is_none() {
            assert_eq!(u.slot.val().to_u64(), 0, "slot 0 when none");
        }
    }
}

#[test]
fn ring_scan_reference() {
    scan_check::<1>(100, 1);
    scan_check::<5>(3000, 2);
    scan_check::<8>(5000, 3);
    scan_check::<14>(5000, 4);
    scan_check::<64>(3000, 5);
}
