//! `AgeMatrixRtl` (the chiplet controller's queue-order state) against a plain reference in
//! logical time: every slot holds the timestamp of its last queue entry (0: none since
//! reset); each cycle the entry groups get fresh timestamps in their rank order — the grant's
//! batch one per distinct old timestamp of its members, in the old order; then the DDR, D2D
//! and PE-done groups one each; then, after the first answer, the PE pick — and row i bit j
//! of the matrix is "stamp(i) < stamp(j)". Every row of both answers (after the entries,
//! after the pick) every cycle, random resets; S = 1, 3, 8, 14, 64 and a proptest over seeds
//! at 8 / 16. Disjoint entry groups (the controller's precondition), single slots as the
//! controller drives them and wide groups.

mod common;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rtl::pkg::age_matrix::{random_entries, AgeMatrixRtl};
use rust_hdl::prelude::*;

use common::settle;

/// Timestamps of the last queue entry per slot (0: never since reset) and the clock.
struct Stamps {
    t: Vec<u64>,
    now: u64,
}

impl Stamps {
    fn bits(m: u64, s: usize) -> impl Iterator<Item = usize> {
        (0..s).filter(move |&i| m >> i & 1 == 1)
    }

    /// The stamps after the entry groups, in order; the batch keeps its members' old order.
    fn enter(&self, batch: u64, groups: &[u64]) -> (Vec<u64>, u64) {
        let s = self.t.len();
        let mut t = self.t.clone();
        let mut now = self.now;
        let mut old: Vec<u64> = Self::bits(batch, s).map(|i| self.t[i]).collect();
        old.sort_unstable();
        old.dedup();
        for o in old {
            now += 1;
            for i in Self::bits(batch, s).filter(|&i| self.t[i] == o) {
                t[i] = now;
            }
        }
        for &g in groups {
            if g != 0 {
                now += 1;
                for i in Self::bits(g, s) {
                    t[i] = now;
                }
            }
        }
        (t, now)
    }

    /// Row i, bit j: i's last entry is earlier than j's.
    fn matrix(t: &[u64]) -> Vec<u64> {
        (0..t.len()).map(|i| (0..t.len()).filter(|&j| t[i] < t[j]).fold(0u64, |m, j| m | 1 << j)).collect()
    }
}

fn set<const S: usize>(x: u64) -> Bits<S> {
    x.into()
}

fn run<const S: usize>(cycles: usize, seed: u64) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut u = AgeMatrixRtl::<S>::new();
    u.connect_all();
    let mut r = Stamps { t: vec![0; S], now: 0 };
    let (mut n_batch_order, mut n_pick_entered, mut n_resets, mut n_multi) = (0, 0, 0, 0);
    for c in 0..cycles {
        let reset = c == 0 || rng.gen_ratio(1, 400);
        let wide = rng.gen_bool(0.3);
        let (batch, ddr, d2d, pe_tx, mut pick) = random_entries(&mut rng, S, wide);
        // Now and then the pick is a slot that entered this cycle.
        let entered = batch | ddr | d2d | pe_tx;
        if entered != 0 && rng.gen_bool(0.2) {
            let pos: Vec<usize> = Stamps::bits(entered, S).collect();
            pick = 1 << pos[rng.gen_range(0..pos.len())];
        }
        u.reset.next = reset;
        u.batch.next = set::<S>(batch);
        u.ddr.next = set::<S>(ddr);
        u.d2d.next = set::<S>(d2d);
        u.pe_tx.next = set::<S>(pe_tx);
        u.pick.next = set::<S>(pick);
        settle(&mut u);

        let (te, now_e) = r.enter(batch, &[ddr, d2d, pe_tx]);
        let want_e = Stamps::matrix(&te);
        let (tp, now_p) = Stamps { t: te.clone(), now: now_e }.enter(0, &[pick]);
        let want_p = Stamps::matrix(&tp);
        for i in 0..S {
            assert_eq!(u.age_e[i].val().to_u64(), want_e[i], "S {S} seed {seed} cycle {c}: age_e row {i} (batch {batch:x} ddr {ddr:x} d2d {d2d:x} pe_tx {pe_tx:x})");
            assert_eq!(u.age_p[i].val().to_u64(), want_p[i], "S {S} seed {seed} cycle {c}: age_p row {i} (pick {pick:x})");
        }
        let olds: std::collections::BTreeSet<u64> = Stamps::bits(batch, S).map(|i| r.t[i]).collect();
        n_batch_order += (olds.len() > 1) as usize;
        n_pick_entered += (pick & entered != 0) as usize;
        n_multi += (ddr.count_ones() > 1 || d2d.count_ones() > 1) as usize;
        if reset {
            r = Stamps { t: vec![0; S], now: now_p };
            n_resets += 1;
        } else {
            r = Stamps { t: tp, now: now_p };
        }
        u.clock.next = true.into();
        settle(&mut u);
        u.clock.next = false.into();
    }
    assert!(n_resets > 1 || cycles < 2000, "{n_resets} resets");
    if S >= 3 {
        assert!(n_batch_order > 0 && n_pick_entered > 0 && n_multi > 0, "coverage: batch orders {n_batch_order}, picks of entries {n_pick_entered}, wide groups {n_multi}");
    }
}

#[test]
fn age_matrix_s1_s3() {
    run::<1>(2000, 1);
    run::<3>(5000, 2);
}

#[test]
fn age_matrix_s8() {
    run::<8>(10_000, 3);
}

#[test]
fn age_matrix_s14_s64() {
    run::<14>(6000, 4);
    run::<64>(3000, 5);
}

/// The controller's use, end to end: four queues as membership sets over the matrix, a
/// slot in at most one; the oldest / newest member read from `age_e` by the definition (a
/// double loop) must be the front / back of a `VecDeque` kept beside it.
#[test]
fn age_matrix_orders_queues() {
    const S: usize = 8;
    use std::collections::VecDeque;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(6);
    let mut u = AgeMatrixRtl::<S>::new();
    u.connect_all();
    u.reset.next = true;
    settle(&mut u);
    u.clock.next = true.into();
    settle(&mut u);
    u.clock.next = false.into();
    u.reset.next = false;
    // Queue 0 is the waiting list a grant's batch leaves (to queue 1).
    let mut qs: Vec<VecDeque<usize>> = vec![VecDeque::new(); 4];
    let oldest = |age: &[u64], q: &VecDeque<usize>, newest: bool| -> Option<usize> {
        q.iter().copied().find(|&i| q.iter().filter(|&&j| j != i).all(|&j| (age[i] >> j & 1 == 1) != newest))
    };
    let mut checked = 0;
    for c in 0..20_000 {
        let queued: u64 = qs.iter().flatten().fold(0, |m, &i| m | 1 << i);
        let idle: Vec<usize> = (0..S).filter(|&i| queued >> i & 1 == 0).collect();
        // The batch: a random subset of queue 0 (the granted expert's waiting slots).
        let batch: u64 = if rng.gen_bool(0.1) { qs[0].iter().filter(|_| rng.gen_bool(0.6)).fold(0, |m, &i| m | 1 << i) } else { 0 };
        // At most one idle slot per single entry (the landings, the PE done).
        let mut pool = idle.clone();
        let mut one = |rng: &mut Xoshiro256PlusPlus, p: f64| -> Option<usize> { (!pool.is_empty() && rng.gen_bool(p)).then(|| pool.swap_remove(rng.gen_range(0..pool.len()))) };
        let (ddr, d2d, pe) = (one(&mut rng, 0.3), one(&mut rng, 0.3), one(&mut rng, 0.2));
        let m = |x: Option<usize>| x.map_or(0u64, |i| 1 << i);
        u.batch.next = batch.into();
        u.ddr.next = m(ddr).into();
        u.d2d.next = m(d2d).into();
        u.pe_tx.next = m(pe).into();
        u.pick.next = 0u64.into();
        settle(&mut u);
        // The queues' push_backs in the same order.
        let moved: Vec<usize> = qs[0].iter().copied().filter(|&i| batch >> i & 1 == 1).collect();
        qs[0].retain(|&i| batch >> i & 1 == 0);
        qs[1].extend(moved);
        for (x, q) in [(ddr, 0), (d2d, 2), (pe, 3)] {
            if let Some(i) = x {
                qs[q].push_back(i);
            }
        }
        let age: Vec<u64> = (0..S).map(|i| u.age_e[i].val().to_u64()).collect();
        for q in &qs {
            assert_eq!(oldest(&age, q, false), q.front().copied(), "cycle {c}: oldest of {q:?}");
            assert_eq!(oldest(&age, q, true), q.back().copied(), "cycle {c}: newest of {q:?}");
            checked += (q.len() > 1) as usize;
        }
        // The pick: a queue's front leaves, and half the time re-enters queue 3 at once
        // (a PE pick pushed for its send) — as the newest of all.
        let from = rng.gen_range(0..4);
        let mut pick = 0u64;
        if let Some(i) = qs[from].front().copied() {
            if rng.gen_bool(0.5) {
                qs[from].pop_front();
                if rng.gen_bool(0.5) {
                    pick = 1 << i;
                    qs[3].push_back(i);
                }
            }
        }
        u.pick.next = pick.into();
        settle(&mut u);
        let age: Vec<u64> = (0..S).map(|i| u.age_p[i].val().to_u64()).collect();
        for q in &qs {
            assert_eq!(oldest(&age, q, false), q.front().copied(), "cycle {c}: oldest of {q:?} after the pick");
            assert_eq!(oldest(&age, q, true), q.back().copied(), "cycle {c}: newest of {q:?} after the pick");
        }
        // Random departures (sends, evictions, releases) from anywhere in a queue.
        for q in qs.iter_mut() {
            if !q.is_empty() && rng.gen_bool(0.15) {
                q.remove(rng.gen_range(0..q.len()));
            }
        }
        u.clock.next = true.into();
        settle(&mut u);
        u.clock.next = false.into();
    }
    assert!(checked > 10_000, "{checked} multi-member queue checks");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]
    /// Seeds at S = 8 (the exported size) and 16 (a package size).
    #[test]
    fn age_matrix_proptest(seed in any::<u64>(), wide in any::<bool>()) {
        if wide {
            run::<16>(1500, seed);
        } else {
            run::<8>(1500, seed);
        }
    }
}
