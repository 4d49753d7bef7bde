//! `CreditCounterRtl` against its CL golden model `CreditCounterCl` (S8 strength 3: lockstep,
//! every port every cycle) under legal random traffic, checking the S5 conservation invariant
//! `credits + in_flight == depth`, and under partly illegal traffic, checking the guard
//! (saturate + sticky `err`, issue 5) agrees. The exported Verilog is checked against this
//! Rust model by the generic co-simulation (`tests/rtl_verilog_check.rs`).

mod common;

use common::credit::CreditCounterCl;
use proptest::prelude::*;
use rtl::credit_counter::wishes;
use rtl::prelude::*;
use rust_hdl::prelude::*;

/// One cycle of stimulus (legal unless the wish was marked illegal: `send` only with a
/// credit, `credit` only with a flit in flight).
#[derive(Debug, Clone, Copy)]
struct Stim {
    reset: bool,
    send: bool,
    credit: bool,
}

/// Expected outputs shown during a cycle: (credits, can_send, err).
type Expect = (u16, bool, bool);

/// One wish per cycle: (reset, want_send, want_credit, illegal). A legal wish is turned into
/// legal traffic by the CL model (a send only if the counter allows it, a credit only if a
/// flit is downstream); an illegal one is applied as is, exercising the guard (saturate +
/// sticky `err`). Returns the stimulus and the expected outputs during each cycle.
fn legalize(depth: u16, wishes: &[(bool, bool, bool, bool)]) -> (Vec<Stim>, Vec<Expect>) {
    let mut cl = CreditCounterCl::new(depth);
    let mut in_flight = 0u16;
    let mut stim = vec![];
    let mut expect = vec![];
    for (c, &(reset, want_send, want_credit, illegal)) in wishes.iter().enumerate() {
        let reset = reset || c == 0;
        let send = want_send && (illegal || cl.can_send());
        let credit = want_credit && (illegal || in_flight > 0);
        expect.push((cl.credits, cl.can_send(), cl.err));
        stim.push(Stim {
            reset,
            send,
            credit,
        });
        if reset {
            // Reset models a link re-train: downstream buffers are flushed too.
            cl = CreditCounterCl::new(depth);
            in_flight = 0;
            continue;
        }
        let nxt = cl.next(send, credit);
        // The credit is applied before the send (the router's order).
        if credit {
            cl.on_credit();
            in_flight = in_flight.saturating_sub(1);
        }
        if send {
            cl.on_send();
            in_flight += 1;
        }
        assert_eq!(
            (cl.credits, cl.err),
            nxt,
            "CL next() disagrees with on_credit/on_send"
        );
        assert!(cl.credits <= depth, "the guard saturates at depth");
        if !cl.err {
            assert_eq!(cl.credits + in_flight, depth, "credit conservation (S5)");
        }
    }
    (stim, expect)
}

/// Lockstep in rust-hdl's `Simulation` (S8 `simple_sim!`, `sim_assert_eq!`).
fn lockstep_sim<const W: usize>(depth: u16, cycles: usize, seed: u64, illegal_p: f64) {
    let (stim, expect) = legalize(depth, &wishes(cycles, seed, illegal_p));
    let mut uut = CreditCounterRtl::<W>::new(depth as u64);
    uut.connect_all();
    let mut sim = simple_sim!(CreditCounterRtl<W>, clock, 100_000_000, ep, {
        let mut x = ep.init()?;
        for (cycle, (s, (credits, can_send, err))) in stim.iter().zip(&expect).enumerate() {
            x.reset.next = s.reset;
            x.send.next = s.send;
            x.credit.next = s.credit;
            x = ep.wait(2_000, x)?;
            // Cycle 0 is before the first reset edge: the register is still at its power-up 0.
            if cycle > 0 {
                sim_assert_eq!(ep, x.credits.val().to_u64(), *credits as u64, x);
                sim_assert_eq!(ep, x.can_send.val(), *can_send, x);
                sim_assert_eq!(ep, x.err.val(), *err, x);
            }
            wait_clock_true!(ep, clock, x);
            wait_clock_false!(ep, clock, x);
        }
        ep.done(x)
    });
    sim.run(Box::new(uut), (cycles as u64 + 4) * 10_000)
        .unwrap_or_else(|e| panic!("W={W} depth={depth} seed={seed}: lockstep failed: {e:?}"));
}

#[test]
fn credit_counter_lockstep_cl() {
    lockstep_sim::<1>(1, 300, 1, 0.0);
    lockstep_sim::<2>(3, 500, 2, 0.0);
    lockstep_sim::<4>(8, 800, 8, 0.0);
    lockstep_sim::<4>(15, 800, 15, 0.0);
    lockstep_sim::<8>(200, 800, 200, 0.0);
    // Illegal traffic: the guard (saturate + sticky err) agrees with CL every cycle, also at
    // a full-width depth (2^W - 1) where a wrap would be invisible in the count alone.
    lockstep_sim::<1>(1, 300, 101, 0.2);
    lockstep_sim::<2>(3, 500, 102, 0.1);
    lockstep_sim::<4>(15, 800, 115, 0.05);
}

/// Direct-drive lockstep for proptest.
fn lockstep_direct<const W: usize>(
    depth: u16,
    raw: &[(bool, bool, bool, bool)],
) -> Result<(), TestCaseError> {
    let (stim, expect) = legalize(depth, raw);
    let mut uut = CreditCounterRtl::<W>::new(depth as u64);
    uut.connect_all();
    let mut tr = common::LockstepTrace::named(&format!("credit_counter_w{W}_depth{depth}"));
    for (cycle, (s, &(credits, can_send, err))) in stim.iter().zip(&expect).enumerate() {
        uut.reset.next = s.reset;
        uut.send.next = s.send;
        uut.credit.next = s.credit;
        common::settle(&mut uut);
        if cycle > 0 {
            // A mismatch fails with the cycle, port and both values and writes both VCDs.
            tr.cycle(cycle as u64);
            let f = TestCaseError::fail;
            tr.cmp("credits", W as u32, credits as u64, uut.credits.val().to_u64()).map_err(f)?;
            tr.cmp("can_send", 1, can_send as u64, uut.can_send.val() as u64).map_err(f)?;
            tr.cmp("err", 1, err as u64, uut.err.val() as u64).map_err(f)?;
        }
        uut.clock.next = true.into();
        common::settle(&mut uut);
        uut.clock.next = false.into();
        common::settle(&mut uut);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn credit_counter_lockstep_prop(
        depth in 1u16..16,
        raw in proptest::collection::vec((0u8..100, any::<bool>(), any::<bool>(), 0u8..100), 1..400),
        illegal_pct in prop_oneof![Just(0u8), 1u8..30],
    ) {
        let raw: Vec<_> = raw.into_iter().map(|(r, s, c, i)| (r == 0, s, c, i < illegal_pct)).collect();
        lockstep_direct::<4>(depth, &raw)?;
    }
}

/// The guard, cycle by cycle against CL: a send at 0 credits leaves 0 (a 2-bit counter
/// would otherwise wrap to 3) and raises the sticky `err`; a credit at full depth is dropped;
/// a send using the credit of the same cycle is legal; reset clears `err`.
#[test]
fn credit_counter_guard_saturates_and_flags() {
    // (reset, send, credit) per cycle, and the (credits, err) expected after it.
    let seq: &[((bool, bool, bool), (u64, bool))] = &[
        ((true, false, false), (3, false)),
        ((false, true, false), (2, false)),
        ((false, true, false), (1, false)),
        ((false, true, false), (0, false)),
        ((false, true, true), (0, false)),  // send with the same cycle's credit: legal
        ((false, true, false), (0, true)),  // send at 0 credits: saturates, err
        ((false, false, false), (0, true)), // sticky
        ((false, false, true), (1, true)),
        ((false, false, true), (2, true)),
        ((false, false, true), (3, true)),
        ((true, false, false), (3, false)), // reset clears err
        ((false, false, true), (3, true)),  // credit at full depth: dropped, err
        ((true, false, false), (3, false)),
        ((false, true, true), (2, true)),   // credit at depth dropped, the send counts
    ];
    let mut uut = CreditCounterRtl::<2>::new(3);
    uut.connect_all();
    let mut cl = CreditCounterCl::new(3);
    for (cycle, &((reset, send, credit), (credits, err))) in seq.iter().enumerate() {
        uut.reset.next = reset;
        uut.send.next = send;
        uut.credit.next = credit;
        common::settle(&mut uut);
        uut.clock.next = true.into();
        common::settle(&mut uut);
        uut.clock.next = false.into();
        common::settle(&mut uut);
        if reset {
            cl = CreditCounterCl::new(3);
        } else {
            if credit {
                cl.on_credit();
            }
            if send {
                cl.on_send();
            }
        }
        assert_eq!((cl.credits as u64, cl.err), (credits, err), "CL after cycle {cycle}");
        assert_eq!(
            (uut.credits.val().to_u64(), uut.err.val(), uut.can_send.val()),
            (credits, err, credits != 0),
            "RTL after cycle {cycle}"
        );
    }
}

#[test]
#[should_panic(expected = "does not fit")]
fn credit_counter_new_checks_depth_fits_width() {
    let _ = CreditCounterRtl::<4>::new(16);
}

#[test]
#[should_panic(expected = "depth must be >= 1")]
fn credit_counter_new_rejects_zero_depth() {
    let _ = CreditCounterRtl::<4>::new(0);
}

#[test]
fn credit_counter_depth_accessor() {
    assert_eq!(CreditCounter4Rtl::new(8).depth(), 8);
}

/// 10 000 cycles per depth in lockstep, legal and illegal traffic (the proptest cases above
/// are short and many).
#[test]
fn credit_counter_lockstep_10k_cycles() {
    for (depth, seed, illegal_p) in [(3u16, 1u64, 0.0), (15, 2, 0.0), (8, 3, 0.05)] {
        lockstep_direct::<4>(depth, &wishes(10_000, seed, illegal_p)).unwrap();
    }
}
