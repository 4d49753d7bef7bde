//! `RrArbiterRtl` against its CL golden model `RrArbiterCl` (S8 strength 3: lockstep, every
//! port every cycle). The exported Verilog is checked against this Rust model by the generic
//! co-simulation (`tests/rtl_verilog_check.rs`), so Verilog == RTL == CL.

mod common;

use common::arbiter::RrArbiterCl;
use proptest::prelude::*;
use rtl::prelude::*;
use rtl::rr_arbiter::{req_mask as mask, stimulus, RrArbiterStim as Stim};
use rust_hdl::prelude::*;

/// CL expectation for one cycle: (grant one-hot, grant_valid, ptr this cycle). Advances `cl`.
fn cl_step(cl: &mut RrArbiterCl, s: Stim) -> (u64, bool, u32) {
    let g = cl.arbitrate(s.req);
    let out = (g.map_or(0, |g| 1u64 << g), g.is_some(), cl.ptr);
    if s.reset {
        *cl = RrArbiterCl::new(cl.n);
    } else if let (true, Some(g)) = (s.fire, g) {
        cl.update_on_grant(g);
    }
    out
}

/// Lockstep in rust-hdl's `Simulation` (S8: `simple_sim!`, `sim_assert_eq!`): inputs are
/// applied after the falling edge, outputs compared mid-low-phase, then the rising edge
/// updates both models.
fn lockstep_sim<const N: usize>(cycles: usize, seed: u64) {
    let stim = stimulus(N, cycles, seed);
    let mut uut = RrArbiterRtl::<N>::new(N);
    uut.connect_all();
    let mut sim = simple_sim!(RrArbiterRtl<N>, clock, 100_000_000, ep, {
        let mut x = ep.init()?;
        let mut cl = RrArbiterCl::new(N as u32);
        for s in &stim {
            x.reset.next = s.reset;
            x.req.next = s.req.into();
            x.fire.next = s.fire;
            x = ep.wait(2_000, x)?;
            let (grant, valid, ptr) = cl_step(&mut cl, *s);
            sim_assert_eq!(ep, x.grant.val().to_u64(), grant, x);
            sim_assert_eq!(ep, x.grant_valid.val(), valid, x);
            sim_assert_eq!(ep, x.ptr(), ptr, x);
            wait_clock_true!(ep, clock, x);
            wait_clock_false!(ep, clock, x);
        }
        ep.done(x)
    });
    sim.run(Box::new(uut), (cycles as u64 + 4) * 10_000)
        .unwrap_or_else(|e| panic!("N={N} seed={seed}: lockstep failed: {e:?}"));
}

#[test]
fn rr_arbiter_lockstep_cl_small() {
    lockstep_sim::<1>(200, 1);
    lockstep_sim::<2>(400, 2);
    lockstep_sim::<3>(400, 3);
}

#[test]
fn rr_arbiter_lockstep_cl_router() {
    lockstep_sim::<5>(800, 5);
    lockstep_sim::<10>(800, 10);
}

#[test]
fn rr_arbiter_lockstep_cl_wide() {
    // 32/33 straddle rust-hdl's short/long bit-vector representations; 64 is the CL maximum.
    lockstep_sim::<32>(400, 32);
    lockstep_sim::<33>(400, 33);
    lockstep_sim::<64>(400, 64);
}

/// Direct-drive lockstep (rust-hdl's settle loop, no simulator threads): fast enough for
/// proptest to explore many sequences.
fn lockstep_direct<const N: usize>(stim: &[Stim]) -> Result<(), TestCaseError> {
    let mut uut = RrArbiterRtl::<N>::new(N);
    uut.connect_all();
    let mut cl = RrArbiterCl::new(N as u32);
    let mut tr = common::LockstepTrace::named(&format!("rr_arbiter_{N}"));
    for (cycle, s) in stim.iter().enumerate() {
        uut.reset.next = s.reset;
        uut.req.next = s.req.into();
        uut.fire.next = s.fire;
        common::settle(&mut uut);
        let (grant, valid, ptr) = cl_step(&mut cl, *s);
        // A mismatch fails with the cycle, port and both values and writes both VCDs.
        tr.cycle(cycle as u64);
        let f = TestCaseError::fail;
        tr.cmp("grant", N as u32, grant, uut.grant.val().to_u64()).map_err(f)?;
        tr.cmp("grant_valid", 1, valid as u64, uut.grant_valid.val() as u64).map_err(f)?;
        tr.cmp("ptr", 8, ptr as u64, uut.ptr() as u64).map_err(f)?;
        uut.clock.next = true.into();
        common::settle(&mut uut);
        uut.clock.next = false.into();
        common::settle(&mut uut);
    }
    Ok(())
}

fn stim_strategy(n: usize) -> impl Strategy<Value = Vec<Stim>> {
    proptest::collection::vec((any::<u64>(), any::<bool>(), 0u8..100), 1..300).prop_map(move |v| {
        v.into_iter()
            .enumerate()
            .map(|(c, (req, fire, r))| Stim {
                reset: c == 0 || r == 0,
                req: req & mask(n),
                fire,
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn rr_arbiter_lockstep_prop_5(stim in stim_strategy(5)) {
        lockstep_direct::<5>(&stim)?;
    }

    #[test]
    fn rr_arbiter_lockstep_prop_10(stim in stim_strategy(10)) {
        lockstep_direct::<10>(&stim)?;
    }

    #[test]
    fn rr_arbiter_lockstep_prop_7(stim in stim_strategy(7)) {
        lockstep_direct::<7>(&stim)?;
    }
}

#[test]
fn rr_arbiter_fire_without_grant_holds_pointer() {
    // fire with no request must not move priority (grant_valid gates the update).
    let mut uut = RrArbiter5Rtl::new(5);
    uut.connect_all();
    let cycle = |uut: &mut RrArbiter5Rtl, reset: bool, req: u64, fire: bool| {
        uut.reset.next = reset;
        uut.req.next = req.into();
        uut.fire.next = fire;
        common::settle(uut);
        let g = uut.grant.val().to_u64();
        uut.clock.next = true.into();
        common::settle(uut);
        uut.clock.next = false.into();
        common::settle(uut);
        g
    };
    cycle(&mut uut, true, 0, false);
    assert_eq!(cycle(&mut uut, false, 0b00100, true), 0b00100);
    assert_eq!(uut.ptr(), 3);
    assert_eq!(cycle(&mut uut, false, 0, true), 0);
    assert_eq!(uut.ptr(), 3, "fire without a grant moved the pointer");
    assert_eq!(cycle(&mut uut, false, 0b10001, false), 0b10000);
    assert_eq!(uut.ptr(), 3, "grant not used, pointer must hold");
    assert_eq!(cycle(&mut uut, false, 0b10001, true), 0b10000);
    assert_eq!(uut.ptr(), 0, "grant to the last requester wraps to 0");
}

#[test]
#[should_panic(expected = "!= RTL width")]
fn rr_arbiter_new_checks_width() {
    let _ = RrArbiterRtl::<5>::new(4);
}

/// 10 000 cycles per width in lockstep (the proptest cases above are short and many).
#[test]
fn rr_arbiter_lockstep_10k_cycles() {
    lockstep_direct::<5>(&stimulus(5, 10_000, 105)).unwrap();
    lockstep_direct::<10>(&stimulus(10, 10_000, 110)).unwrap();
    lockstep_direct::<64>(&stimulus(64, 10_000, 164)).unwrap();
}
