//! `SlotTagsRtl` (the chiplet controller's per-slot tag file) against a plain array of tags:
//! a write on port a, then one on port b (so b wins on the same slot), both seen from the
//! next cycle on; a write to an index ≥ S is dropped; a read port answers the slot's tag, 0
//! for an index ≥ S; every slot's expert and loader in parallel; a reset clears every tag
//! (over the writes). Every output every cycle, random resets, random writes (same slot on both ports now and then), S = 1, 3, 8, 14, 64 with 6 read
//! ports (the controller's) and 1, and a proptest over seeds at 8 / 16.

mod common;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rtl::pkg::slot_tags::SlotTagsRtl;
use rust_hdl::prelude::*;

use common::settle;

#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
struct Tag {
    expert: u16,
    k: u16,
    loader: u8,
}

fn run<const S: usize, const R: usize>(cycles: usize, seed: u64) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut u = SlotTagsRtl::<S, R>::new();
    u.connect_all();
    settle(&mut u);
    let mut tags = vec![Tag::default(); S];
    // Indices up to S + 2: out-of-range writes and reads occur.
    let idx = |rng: &mut Xoshiro256PlusPlus| rng.gen_range(0..S as u64 + 3);
    let tag = |rng: &mut Xoshiro256PlusPlus| Tag { expert: rng.gen(), k: rng.gen(), loader: rng.gen_range(0..16) };
    let (mut n_both_same, mut n_written, mut n_resets) = (0, 0, 0);
    for c in 0..cycles {
        let (wa, wb) = (rng.gen_bool(0.3).then(|| (idx(&mut rng), tag(&mut rng))), rng.gen_bool(0.3).then(|| (idx(&mut rng), tag(&mut rng))));
        let wb = match (wa, wb) {
            (Some((s, _)), Some((_, t))) if rng.gen_bool(0.2) => Some((s, t)),
            _ => wb,
        };
        let rd: Vec<u64> = (0..R).map(|_| idx(&mut rng)).collect();
        // One reset mid-run at least, so every seed covers a reset over written tags.
        let reset = c == cycles / 2 || rng.gen_ratio(1, 200);
        u.reset.next = reset;
        u.wa_en.next = wa.is_some();
        u.wb_en.next = wb.is_some();
        // A disabled port's data are random too (they must not matter).
        let (sa, ta) = wa.unwrap_or_else(|| (idx(&mut rng), tag(&mut rng)));
        let (sb, tb) = wb.unwrap_or_else(|| (idx(&mut rng), tag(&mut rng)));
        u.wa_slot.next = sa.into();
        u.wa_expert.next = (ta.expert as u64).into();
        u.wa_k.next = (ta.k as u64).into();
        u.wa_loader.next = (ta.loader as u64).into();
        u.wb_slot.next = sb.into();
        u.wb_expert.next = (tb.expert as u64).into();
        u.wb_k.next = (tb.k as u64).into();
        u.wb_loader.next = (tb.loader as u64).into();
        for r in 0..R {
            u.rd_slot[r].next = rd[r].into();
        }
        settle(&mut u);
        for i in 0..S {
            assert_eq!(u.expert[i].val().to_u64(), tags[i].expert as u64, "S {S} seed {seed} cycle {c}: expert[{i}]");
            assert_eq!(u.loader[i].val().to_u64(), tags[i].loader as u64, "S {S} seed {seed} cycle {c}: loader[{i}]");
        }
        for r in 0..R {
            let want = tags.get(rd[r] as usize).copied().unwrap_or_default();
            let got = Tag { expert: u.rd_expert[r].val().to_u64() as u16, k: u.rd_k[r].val().to_u64() as u16, loader: u.rd_loader[r].val().to_u64() as u8 };
            assert_eq!(got, want, "S {S} seed {seed} cycle {c}: read port {r} at slot {}", rd[r]);
        }
        n_both_same += matches!((wa, wb), (Some((a, _)), Some((b, _))) if a == b && (a as usize) < S) as usize;
        for (s, t) in [wa, wb].into_iter().flatten() {
            if let Some(x) = tags.get_mut(s as usize) {
                *x = t;
                n_written += 1;
            }
        }
        if reset {
            tags = vec![Tag::default(); S];
            n_resets += 1;
        }
        u.clock.next = true.into();
        settle(&mut u);
        u.clock.next = false.into();
    }
    assert!(n_both_same > 0 && n_written > cycles * S / (S + 3) / 4 && n_resets > 0, "coverage: same-slot writes {n_both_same}, writes {n_written}, resets {n_resets}");
}

#[test]
fn slot_tags_s1_s3() {
    run::<1, 6>(2000, 1);
    run::<3, 1>(3000, 2);
    run::<3, 6>(3000, 3);
}

#[test]
fn slot_tags_s8() {
    run::<8, 6>(10_000, 4);
}

#[test]
fn slot_tags_s14_s64() {
    run::<14, 6>(5000, 5);
    run::<64, 6>(3000, 6);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]
    /// Seeds at S = 8 (the exported size) and 16 (a package size).
    #[test]
    fn slot_tags_proptest(seed in any::<u64>(), wide in any::<bool>()) {
        if wide {
            run::<16, 6>(1500, seed);
        } else {
            run::<8, 6>(1500, seed);
        }
    }
}
