//! `SlotStateRtl` (the chiplet controller's per-slot state) against a plain per-slot record
//! (live, landed, computed, sent, next valid, next station, over D2D, the four queue
//! flags) and the PE's (busy, slot), stepped in the CL's program order: A the grant's batch
//! (to local_ready, forwarded with a next station, or released), B a DDR landing of one of
//! four kinds, C a D2D landing, D a PE done (to tx_q when it has a next station, without
//! forward with compute), F a send done, Rule 3's release of a landed + computed + sent slot,
//! then H's victim and D2D allocation, I's pick (next station or none, joining tx_q with
//! forward with compute), J's send, K's DDR allocation, L's escape; at the edge every
//! released, evicted, dropped or allocated slot's control bits clear. Every output every
//! cycle (the registered state, every intermediate set, the counts, the two next-station
//! reads), random events on random slots (collisions included: both models define them),
//! random resets; S = 1, 3, 8, 14, 64 with and without forward with compute, and a
//! proptest over seeds at 8 / 16.

mod common;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rtl::pkg::slot_state::SlotStateRtl;
use rust_hdl::prelude::*;

use common::settle;

#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
struct Slot {
    live: bool,
    landed: bool,
    computed: bool,
    sent: bool,
    next_valid: bool,
    next: u8,
    d2d: bool,
    rx: bool,
    lr: bool,
    lw: bool,
    tx: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Batch {
    Ready,
    Forward(u8),
    Release,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ddr {
    Wait,
    Ready,
    Forward,
    Release,
}

/// One cycle's events, slot indices < S.
#[derive(Clone, Debug, Default)]
struct Events {
    batch: Vec<(usize, Batch)>,
    batch_dest: Vec<u8>,
    ddr: Option<(usize, Ddr)>,
    ddr_dest: u8,
    rx_land: Option<usize>,
    pe_done: Option<usize>,
    tx_done: Option<usize>,
    victim: Option<usize>,
    rx_alloc: Option<usize>,
    /// (slot, has a next station, the next-hop unit's destination)
    pick: Option<(usize, bool)>,
    pick_dest: u8,
    send: Option<usize>,
    ld_alloc: Option<usize>,
    escape: Option<usize>,
    rd_victim: usize,
    rd_send: usize,
}

/// The sets and answers of one cycle (what the block's outputs must say).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Seen {
    live1: Vec<bool>,
    computed1: Vec<bool>,
    lw1: Vec<bool>,
    lr1: Vec<bool>,
    rx1: Vec<bool>,
    tx1: Vec<bool>,
    pe_tx: Vec<bool>,
    pe_busy_a: bool,
    pe_m: Vec<bool>,
    n_rel: u64,
    n_fwd: u64,
    live2: Vec<bool>,
    live3: Vec<bool>,
    rx2: Vec<bool>,
    lr2: Vec<bool>,
    tx3: Vec<bool>,
    lw3: Vec<bool>,
    live_n: Vec<bool>,
    victim_next: u64,
    send_next: u64,
}

/// One cycle of the reference: returns what is seen during the cycle and the state after
/// the edge.
fn step(slots: &[Slot], pe: (bool, usize), ev: &Events, fwc: bool, reset: bool) -> (Seen, Vec<Slot>, (bool, usize)) {
    let s_n = slots.len();
    let at = |o: Option<usize>, i: usize| o == Some(i);
    let batch_of = |i: usize| ev.batch.iter().find(|(j, _)| *j == i).map(|(_, k)| *k);
    let ddr_is = |i: usize, k: Ddr| ev.ddr == Some((i, k));
    let ddr_at = |i: usize| matches!(ev.ddr, Some((j, _)) if j == i);
    // D: a PE done with a next station (as registered) goes to tx_q, unless it went at the pick.
    let d_tx = !fwc && ev.pe_done.map_or(false, |p| slots[p].next_valid);
    let mut seen = Seen::default();
    let mut released = vec![false; s_n];
    let (mut landed1, mut sent1) = (vec![false; s_n], vec![false; s_n]);
    let mut next_ab = vec![0u8; s_n];
    for i in 0..s_n {
        let o = slots[i];
        let b = batch_of(i);
        let fwd = matches!(b, Some(Batch::Forward(_)));
        let rel = b == Some(Batch::Release);
        landed1[i] = o.landed || ddr_at(i) || at(ev.rx_land, i);
        let computed1 = o.computed || fwd || rel || at(ev.pe_done, i) || ddr_is(i, Ddr::Forward) || ddr_is(i, Ddr::Release);
        sent1[i] = o.sent || rel || at(ev.tx_done, i) || ddr_is(i, Ddr::Release);
        released[i] = rel || ddr_is(i, Ddr::Release) || ((at(ev.pe_done, i) || at(ev.tx_done, i)) && landed1[i] && computed1 && sent1[i] && o.live);
        seen.live1.push(o.live && !released[i]);
        seen.computed1.push(computed1);
        seen.lw1.push((o.lw && b.is_none()) || ddr_is(i, Ddr::Wait));
        seen.lr1.push(o.lr || b == Some(Batch::Ready) || ddr_is(i, Ddr::Ready));
        seen.rx1.push(o.rx || at(ev.rx_land, i));
        seen.tx1.push(o.tx || fwd || ddr_is(i, Ddr::Forward) || (d_tx && at(ev.pe_done, i)));
        seen.pe_tx.push(d_tx && at(ev.pe_done, i));
        next_ab[i] = if ddr_is(i, Ddr::Forward) {
            ev.ddr_dest
        } else if let Some(Batch::Forward(d)) = b {
            d
        } else {
            o.next
        };
    }
    seen.pe_busy_a = pe.0 && ev.pe_done.is_none();
    seen.pe_m = (0..s_n).map(|i| seen.pe_busy_a && pe.1 == i).collect();
    seen.n_rel = released.iter().filter(|&&r| r).count() as u64;
    seen.n_fwd = ev.batch.iter().filter(|(_, k)| matches!(k, Batch::Forward(_))).count() as u64 + matches!(ev.ddr, Some((_, Ddr::Forward))) as u64;
    seen.victim_next = next_ab[ev.rd_victim] as u64;
    let pick_at = |i: usize| matches!(ev.pick, Some((p, _)) if p == i);
    let pick_next = matches!(ev.pick, Some((_, true)));
    seen.send_next = if pick_at(ev.rd_send) { ev.pick_dest } else { next_ab[ev.rd_send] } as u64;
    for i in 0..s_n {
        let v = at(ev.victim, i);
        seen.live2.push(seen.live1[i] && !v);
        seen.live3.push(seen.live2[i] || at(ev.rx_alloc, i));
        seen.rx2.push(seen.rx1[i] && !v);
        seen.lr2.push(seen.lr1[i] && !v);
        seen.tx3.push((seen.tx1[i] && !v) || (pick_at(i) && pick_next && fwc));
        seen.lw3.push(seen.lw1[i] && !v);
        seen.live_n.push((seen.live3[i] || at(ev.ld_alloc, i)) && !at(ev.escape, i));
    }
    // The edge.
    let mut after = slots.to_vec();
    for i in 0..s_n {
        let o = slots[i];
        let clr = released[i] || at(ev.victim, i) || at(ev.escape, i) || at(ev.rx_alloc, i) || at(ev.ld_alloc, i);
        let fwd = matches!(batch_of(i), Some(Batch::Forward(_))) || ddr_is(i, Ddr::Forward);
        let mut x = Slot {
            live: seen.live_n[i],
            landed: landed1[i] && !clr,
            computed: seen.computed1[i] && !clr,
            sent: sent1[i] && !clr,
            next_valid: (o.next_valid || fwd) && !clr,
            next: next_ab[i],
            d2d: (o.d2d && !clr) || at(ev.rx_alloc, i),
            rx: seen.rx2[i] && !pick_at(i),
            lr: seen.lr2[i] && !pick_at(i),
            lw: seen.lw3[i] && !at(ev.escape, i),
            tx: seen.tx3[i] && !at(ev.send, i),
        };
        if pick_at(i) {
            // Rule 3: a slice with no next station needs no send.
            x.next_valid = pick_next;
            x.sent = !pick_next;
            x.next = ev.pick_dest;
        }
        if reset {
            x = Slot { next: x.next, ..Slot::default() };
        }
        after[i] = x;
    }
    let mut pe_n = (seen.pe_busy_a || ev.pick.is_some(), ev.pick.map_or(pe.1, |(p, _)| p));
    if reset {
        pe_n.0 = false;
    }
    (seen, after, pe_n)
}

fn mask(v: impl Iterator<Item = usize>) -> u64 {
    v.fold(0u64, |m, i| m | 1u64 << i)
}

fn read<const N: usize>(b: Bits<N>) -> Vec<bool> {
    (0..N).map(|i| b.get_bit(i)).collect()
}

fn run<const S: usize>(cycles: usize, seed: u64, fwc: bool) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut u = SlotStateRtl::<S>::new(fwc);
    u.connect_all();
    settle(&mut u);
    let mut slots = vec![Slot::default(); S];
    let mut pe = (false, 0usize);
    let (mut n_rel, mut n_dtx, mut n_pick_tx, mut n_look) = (0u64, 0, 0, 0);
    for c in 0..cycles {
        let reset = c == 0 || rng.gen_ratio(1, 300);
        let slot = |rng: &mut Xoshiro256PlusPlus| rng.gen_range(0..S);
        let opt = |rng: &mut Xoshiro256PlusPlus, p: f64| rng.gen_bool(p).then(|| rng.gen_range(0..S));
        let mut ev = Events::default();
        if rng.gen_bool(0.15) {
            let all_ready = rng.gen_bool(0.5);
            for i in 0..S {
                if rng.gen_bool(0.4) {
                    let k = if all_ready {
                        Batch::Ready
                    } else if rng.gen_bool(0.6) {
                        Batch::Forward(rng.gen_range(0..16))
                    } else {
                        Batch::Release
                    };
                    ev.batch.push((i, k));
                }
            }
        }
        ev.batch_dest = (0..S).map(|i| match ev.batch.iter().find(|(j, _)| *j == i) {
            Some((_, Batch::Forward(d))) => *d,
            _ => rng.gen_range(0..16),
        }).collect();
        ev.ddr = rng.gen_bool(0.3).then(|| (slot(&mut rng), [Ddr::Wait, Ddr::Ready, Ddr::Forward, Ddr::Release][rng.gen_range(0..4)]));
        ev.ddr_dest = rng.gen_range(0..16);
        ev.rx_land = opt(&mut rng, 0.25);
        ev.pe_done = opt(&mut rng, 0.25);
        ev.tx_done = opt(&mut rng, 0.25);
        ev.victim = opt(&mut rng, 0.1);
        ev.rx_alloc = opt(&mut rng, 0.25);
        ev.pick = rng.gen_bool(0.3).then(|| (slot(&mut rng), rng.gen_bool(0.6)));
        ev.pick_dest = rng.gen_range(0..16);
        ev.send = opt(&mut rng, 0.3);
        ev.ld_alloc = opt(&mut rng, 0.25);
        ev.escape = opt(&mut rng, 0.05);
        // Reads at this cycle's writes now and then (the look-through).
        ev.rd_victim = match (rng.gen_bool(0.3), ev.ddr, ev.batch.first()) {
            (true, Some((d, _)), _) => d,
            (true, None, Some((b, _))) => *b,
            _ => slot(&mut rng),
        };
        ev.rd_send = match (rng.gen_bool(0.3), ev.pick) {
            (true, Some((p, _))) => p,
            _ => slot(&mut rng),
        };

        u.reset.next = reset;
        u.batch.next = mask(ev.batch.iter().map(|(i, _)| *i)).into();
        u.batch_lr.next = mask(ev.batch.iter().filter(|(_, k)| *k == Batch::Ready).map(|(i, _)| *i)).into();
        u.batch_fwd.next = mask(ev.batch.iter().filter(|(_, k)| matches!(k, Batch::Forward(_))).map(|(i, _)| *i)).into();
        u.batch_rel.next = mask(ev.batch.iter().filter(|(_, k)| *k == Batch::Release).map(|(i, _)| *i)).into();
        for i in 0..S {
            u.batch_dest[i].next = (ev.batch_dest[i] as u64).into();
        }
        let (ds, dk) = ev.ddr.unwrap_or((slot(&mut rng), Ddr::Wait));
        u.ddr.next = mask(ev.ddr.iter().map(|(i, _)| *i)).into();
        u.ddr_slot.next = (ds as u64).into();
        u.ddr_lw.next = ev.ddr.is_some() && dk == Ddr::Wait;
        u.ddr_lr.next = ev.ddr.is_some() && dk == Ddr::Ready;
        u.ddr_fwd.next = ev.ddr.is_some() && dk == Ddr::Forward;
        u.ddr_rel.next = ev.ddr.is_some() && dk == Ddr::Release;
        u.ddr_dest.next = (ev.ddr_dest as u64).into();
        u.rx_land.next = mask(ev.rx_land.into_iter()).into();
        u.pe_done.next = mask(ev.pe_done.into_iter()).into();
        u.pe_done_valid.next = ev.pe_done.is_some();
        u.tx_done.next = mask(ev.tx_done.into_iter()).into();
        u.victim.next = mask(ev.victim.into_iter()).into();
        u.rx_alloc.next = mask(ev.rx_alloc.into_iter()).into();
        let (ps, pn) = ev.pick.unwrap_or((slot(&mut rng), rng.gen_bool(0.5)));
        u.pick.next = ev.pick.is_some();
        u.pick_slot.next = (ps as u64).into();
        u.pick_m.next = mask(ev.pick.iter().map(|(i, _)| *i)).into();
        u.pick_next.next = pn;
        u.pick_dest.next = (ev.pick_dest as u64).into();
        u.send.next = mask(ev.send.into_iter()).into();
        u.ld_alloc.next = mask(ev.ld_alloc.into_iter()).into();
        u.escape.next = mask(ev.escape.into_iter()).into();
        u.rd_victim.next = (ev.rd_victim as u64).into();
        u.rd_send.next = (ev.rd_send as u64).into();
        settle(&mut u);

        let (want, after, pe_n) = step(&slots, pe, &ev, fwc, reset);
        let ctx = format!("S {S} fwc {fwc} seed {seed} cycle {c}");
        let col = |f: fn(&Slot) -> bool| slots.iter().map(f).collect::<Vec<bool>>();
        assert_eq!(read(u.live.val()), col(|s| s.live), "{ctx}: live");
        assert_eq!(read(u.landed.val()), col(|s| s.landed), "{ctx}: landed");
        assert_eq!(read(u.computed.val()), col(|s| s.computed), "{ctx}: computed");
        assert_eq!(read(u.d2d.val()), col(|s| s.d2d), "{ctx}: d2d");
        assert_eq!(read(u.lw.val()), col(|s| s.lw), "{ctx}: lw");
        assert_eq!(u.occ.val().to_u64(), slots.iter().filter(|s| s.live).count() as u64, "{ctx}: occ");
        assert_eq!(u.pe_busy.val(), pe.0, "{ctx}: pe_busy");
        let got = Seen {
            live1: read(u.live1.val()),
            computed1: read(u.computed1.val()),
            lw1: read(u.lw1.val()),
            lr1: read(u.lr1.val()),
            rx1: read(u.rx1.val()),
            tx1: read(u.tx1.val()),
            pe_tx: read(u.pe_tx.val()),
            pe_busy_a: u.pe_busy_a.val(),
            pe_m: read(u.pe_m.val()),
            n_rel: u.n_rel.val().to_u64(),
            n_fwd: u.n_fwd.val().to_u64(),
            live2: read(u.live2.val()),
            live3: read(u.live3.val()),
            rx2: read(u.rx2.val()),
            lr2: read(u.lr2.val()),
            tx3: read(u.tx3.val()),
            lw3: read(u.lw3.val()),
            live_n: read(u.live_n.val()),
            victim_next: u.victim_next.val().to_u64(),
            send_next: u.send_next.val().to_u64(),
        };
        assert_eq!(got, want, "{ctx}: events {ev:?}");
        n_rel += want.n_rel;
        n_dtx += want.pe_tx.iter().any(|&b| b) as usize;
        n_pick_tx += matches!(ev.pick, Some((_, true))) as usize * fwc as usize;
        n_look += (ev.pick.map(|p| p.0) == Some(ev.rd_send)) as usize;
        // The state without an output of its own (sent, next valid, next station, the queue
        // flags) shows in the next cycles' sets and answers.
        slots = after;
        pe = pe_n;
        u.clock.next = true.into();
        settle(&mut u);
        u.clock.next = false.into();
    }
    assert!(n_rel > 0 && (fwc || n_dtx > 0) && (!fwc || n_pick_tx > 0) && n_look > 0, "coverage: releases {n_rel}, PE-done pushes {n_dtx}, pick pushes {n_pick_tx}, pick look-throughs {n_look}");
}

#[test]
fn slot_state_small() {
    run::<1>(2000, 1, true);
    run::<1>(2000, 2, false);
    run::<3>(5000, 3, true);
    run::<3>(5000, 4, false);
}

#[test]
fn slot_state_s8() {
    run::<8>(10_000, 5, true);
    run::<8>(10_000, 6, false);
}

#[test]
fn slot_state_wide() {
    run::<14>(5000, 7, true);
    run::<14>(5000, 8, false);
    run::<64>(3000, 9, true);
    run::<64>(3000, 10, false);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]
    /// Seeds at S = 8 (the exported size) and 16 (a package size), both knob settings.
    #[test]
    fn slot_state_proptest(seed in any::<u64>(), wide in any::<bool>(), fwc in any::<bool>()) {
        if wide {
            run::<16>(1500, seed, fwc);
        } else {
            run::<8>(1500, seed, fwc);
        }
    }
}
