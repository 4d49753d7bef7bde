//! `RrArbiterRtl` against its CL golden model `RrArbiterCl` (S8 strength 3: lockstep, every
//! port every cycle), plus the tool-backed checks of the exported Verilog (verilator lint,
//! Icarus co-simulation against the CL model), which need the `yosys` feature.

mod common;

use common::arbiter::RrArbiterCl;
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rtl::prelude::*;
use rust_hdl::prelude::*;

/// One cycle of stimulus.
#[derive(Debug, Clone, Copy)]
struct Stim {
    reset: bool,
    req: u64,
    fire: bool,
}

fn mask(n: usize) -> u64 {
    if n == 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// Random stimulus: reset for the first cycle, then requests whose density changes every few
/// dozen cycles (sparse masks exercise the wrap, dense ones the fairness), random `fire` and
/// rare mid-run resets.
fn stimulus(n: usize, cycles: usize, seed: u64) -> Vec<Stim> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut density = 0.5;
    (0..cycles)
        .map(|c| {
            if c % 37 == 0 {
                density = [0.05, 0.2, 0.5, 0.9][rng.gen_range(0..4)];
            }
            let mut req = 0u64;
            for i in 0..n {
                if rng.gen_bool(density) {
                    req |= 1 << i;
                }
            }
            Stim {
                reset: c == 0 || rng.gen_bool(0.01),
                req: req & mask(n),
                fire: rng.gen_bool(0.7),
            }
        })
        .collect()
}

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
    for (cycle, s) in stim.iter().enumerate() {
        uut.reset.next = s.reset;
        uut.req.next = s.req.into();
        uut.fire.next = s.fire;
        common::settle(&mut uut);
        let (grant, valid, ptr) = cl_step(&mut cl, *s);
        prop_assert_eq!(
            uut.grant.val().to_u64(),
            grant,
            "N={} cycle {} {:?}",
            N,
            cycle,
            s
        );
        prop_assert_eq!(uut.grant_valid.val(), valid, "N={} cycle {}", N, cycle);
        prop_assert_eq!(uut.ptr(), ptr, "N={} cycle {}", N, cycle);
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

// ---- exported Verilog: tool-backed checks (feature `yosys`) -------------------------------

/// Icarus co-simulation of the exported module `name` (N requesters): the Rust side writes the
/// input vectors and computes the expected outputs with the CL model; the Verilog testbench
/// applies one vector per cycle and dumps the outputs and the pointer register; every cycle
/// must match.
fn cosim<const N: usize>(name: &str, cycles: usize, seed: u64) {
    let dir = common::scratch_dir(&format!("cosim_{name}"));
    std::fs::write(dir.join(format!("{name}.v")), verilog_of(name).unwrap()).unwrap();
    let stim = stimulus(N, cycles, seed);
    let digits = (N + 2).div_ceil(4);
    let vectors: String = stim
        .iter()
        .map(|s| {
            let word = ((s.reset as u128) << (N + 1)) | ((s.fire as u128) << N) | s.req as u128;
            format!("{word:0digits$x}\n")
        })
        .collect();
    std::fs::write(dir.join("vectors.hex"), vectors).unwrap();
    let tb = format!(
        r#"// Generated by rtl_noc_rr_arbiter.rs: applies vectors.hex, dumps outputs to actual.txt.
module tb;
    reg clock = 1'b0;
    reg reset, fire;
    reg [{n1}:0] req;
    wire [{n1}:0] grant;
    wire grant_valid;
    reg [{w1}:0] vec [0:{c1}];
    integer i, fd;
    {name} dut(.clock(clock), .reset(reset), .req(req), .fire(fire),
               .grant(grant), .grant_valid(grant_valid));
    initial begin
        $readmemh("vectors.hex", vec);
        fd = $fopen("actual.txt", "w");
        for (i = 0; i < {cycles}; i = i + 1) begin
            {{reset, fire, req}} = vec[i];
            #2;  // let the combinational grant settle, then sample
            $fdisplay(fd, "%0d %h %h %h", i, grant, grant_valid, dut.ptr_oh$q);
            #3 clock = 1'b1;
            #5 clock = 1'b0;
        end
        $fclose(fd);
        $finish;
    end
endmodule
"#,
        n1 = N - 1,
        w1 = N + 1,
        c1 = cycles - 1,
    );
    std::fs::write(dir.join("tb.v"), tb).unwrap();
    let actual = common::icarus_run(&dir, &format!("{name}.v"));
    assert_eq!(
        actual.len(),
        cycles,
        "testbench ran {} of {cycles} cycles",
        actual.len()
    );
    let mut cl = RrArbiterCl::new(N as u32);
    for (cycle, (s, line)) in stim.iter().zip(&actual).enumerate() {
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f.len(), 4, "bad line {line:?}");
        let (grant, valid, ptr) = cl_step(&mut cl, *s);
        let ptr_oh = common::hex(f[3], "ptr_oh", cycle);
        assert!(
            ptr_oh.count_ones() <= 1,
            "cycle {cycle}: pointer {ptr_oh:#x} not one-hot"
        );
        let v_ptr = if ptr_oh == 0 {
            0
        } else {
            ptr_oh.trailing_zeros()
        };
        assert_eq!(
            (
                common::hex(f[1], "grant", cycle),
                common::hex(f[2], "grant_valid", cycle) == 1,
                v_ptr
            ),
            (grant, valid, ptr),
            "{name} cycle {cycle}: Verilog (grant, grant_valid, ptr) != CL; stimulus {s:?}"
        );
    }
}

#[test]
#[cfg_attr(
    not(feature = "yosys"),
    ignore = "needs iverilog (enable feature `yosys`)"
)]
fn rr_arbiter_icarus_cosim_cl() {
    cosim::<5>("rr_arbiter_5", 1000, 55);
    cosim::<10>("rr_arbiter_10", 1000, 1010);
}

#[test]
#[cfg_attr(
    not(feature = "yosys"),
    ignore = "needs verilator (enable feature `yosys`)"
)]
fn rr_arbiter_verilator_lint() {
    common::assert_lint_clean("lint_rr_arbiter", &["rr_arbiter_5", "rr_arbiter_10"]);
}

#[test]
#[cfg_attr(
    not(feature = "yosys"),
    ignore = "needs yosys (enable feature `yosys`)"
)]
fn rr_arbiter_exported_synthesizable() {
    common::assert_exported_synthesizable(&["rr_arbiter_5", "rr_arbiter_10"]);
}
