//! `FreeReportRtl` (the chiplet controller's Rule-5 free-slot report) against a plain
//! reference written from the CL's `free_report` and its `reported` register: room for a
//! granted expert = free slots beyond the reserve, net of the Rule-5 FIFO (floored at 0);
//! room for pre-loads = that room capped at half the ring minus the ungranted slices (ring and
//! FIFO), 0 once they hold half; a report goes out (with `enable`) when the pair changed or on
//! `resend`. Random masks (held for a few cycles, so unchanged pairs occur), FIFO lengths,
//! enable and resend; every output every cycle; S = 1, 5, 8, 14, 64 with several reserves.

mod common;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rtl::pkg::free_report::FreeReportRtl;
use rust_hdl::prelude::*;

use common::settle;

fn run<const S: usize>(slots: usize, reserve: u32, cycles: usize, seed: u64) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut u = FreeReportRtl::<S>::new(slots, reserve);
    u.connect_all();
    u.reset.next = true;
    settle(&mut u);
    u.clock.next = true.into();
    settle(&mut u);
    u.clock.next = false.into();
    u.reset.next = false;
    let exist: u64 = if slots == 64 { u64::MAX } else { (1 << slots) - 1 };
    let half = slots.div_ceil(2) as u32;
    let mut reported = (0u32, 0u32);
    let mut cur = (0u64, 0u64, 0u32, 0u32);
    let (mut n_valid, mut n_quiet, mut n_pre_capped) = (0, 0, 0);
    for c in 0..cycles {
        if rng.gen_bool(0.3) {
            let free = rng.gen::<u64>() & rng.gen::<u64>() & exist;
            let ung = rng.gen::<u64>() & !free & exist;
            let len = rng.gen_range(0..=slots as u32);
            cur = (free, ung, len, rng.gen_range(0..=len));
        }
        let (free, ung, len, fung) = cur;
        let enable = rng.gen_bool(0.9);
        let resend = rng.gen_bool(0.1);
        let mut fb: Bits<S> = 0.into();
        let mut ub: Bits<S> = 0.into();
        for i in 0..S {
            fb = fb.replace_bit(i, free >> i & 1 == 1);
            ub = ub.replace_bit(i, ung >> i & 1 == 1);
        }
        u.free.next = fb;
        u.ung.next = ub;
        u.fifo_len.next = (len as u64).into();
        u.fifo_ung.next = (fung as u64).into();
        u.enable.next = enable;
        u.resend.next = resend;
        settle(&mut u);
        // Reference (the CL's arithmetic on plain integers).
        let net = (free.count_ones()).saturating_sub(reserve).saturating_sub(len);
        let ung_n = ung.count_ones() + fung;
        let pre = if ung_n >= half { 0 } else { net.min(half - ung_n) };
        let send = enable && ((net, pre) != reported || resend);
        assert_eq!(u.valid.val(), send, "cycle {c}: valid");
        if send {
            assert_eq!((u.granted.val().to_u64() as u32, u.preload.val().to_u64() as u32), (net, pre), "cycle {c}: report");
            reported = (net, pre);
            n_valid += 1;
            n_pre_capped += (pre < net) as usize;
        } else {
            assert_eq!((u.granted.val().to_u64(), u.preload.val().to_u64()), (0, 0), "cycle {c}: idle report");
            n_quiet += enable as usize;
        }
        u.clock.next = true.into();
        settle(&mut u);
        u.clock.next = false.into();
    }
    assert!(n_valid > 0 && n_quiet > 0, "{n_valid} reports, {n_quiet} unchanged");
    if slots > 2 {
        assert!(n_pre_capped > 0, "the pre-load cap never bit");
    }
}

#[test]
fn free_report_s1() {
    run::<1>(1, 0, 2000, 1);
}

#[test]
fn free_report_s5() {
    run::<5>(5, 0, 4000, 2);
    run::<5>(4, 1, 4000, 3);
}

#[test]
fn free_report_s8() {
    run::<8>(8, 1, 6000, 4);
    run::<8>(8, 3, 6000, 5);
}

#[test]
fn free_report_s14_s64() {
    run::<14>(12, 2, 6000, 6);
    run::<64>(64, 2, 6000, 7);
    run::<64>(40, 5, 6000, 8);
}
