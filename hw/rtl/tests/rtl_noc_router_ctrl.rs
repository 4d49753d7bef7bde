//! `RouterCtrlRtl` against `RouterCl` in lockstep (S8 strength 3): the same random legal
//! traffic drives a real `RouterCl` through its links and the RTL control block through the
//! buffer-front mirror of `RouterTb`; every cycle every control output is compared:
//! * before the edge (the registers after the previous cycle): per input VC the state, route
//!   and output VC, per output VC ownership and credits, every allocator pointer, `err`;
//! * the cycle's decisions: VA grants (an input VC entering Active), switch grants (the input
//!   VCs whose flit left, read from the CL's credit links), per output port whether a flit
//!   was sent, from which input port and on which output VC (read from the CL's flit links).
//!
//! A mismatch panics with the case, the cycle, the port / VC and both values.

mod common;

use hw::harness::{LinkArena, LinkId};
use hw::noc::flit::{Credit, Flit};
use hw::noc::router::{RouterCl, RouterPorts, VcState, NPORTS};
use hw::noc::RouterCfg;
use proptest::prelude::*;
use rtl::noc::router_ctrl::{
    decisions, RouterCtrlParams, RouterCtrlRtl, RouterTb, TrafficKnobs,
};
use rust_hdl::prelude::*;

/// One lockstep case.
#[derive(Debug, Clone)]
struct Case {
    name: String,
    cfg: RouterCfg,
    k: u32,
    /// Router coordinates (x, y).
    cur: (u32, u32),
    knobs: TrafficKnobs,
    cycles: u64,
    seed: u64,
}

/// What a run did (so a case that moved nothing cannot pass silently).
#[derive(Debug, Default)]
struct Counts {
    va_grants: u64,
    switched: u64,
    credit_stall_cycles: u64,
}

fn clock<const V: usize, const NV: usize>(u: &mut RouterCtrlRtl<V, NV, 3, 4>) {
    u.clock.next = true.into();
    common::settle(u);
    u.clock.next = false.into();
    common::settle(u);
}

fn lockstep<const V: usize, const NV: usize>(case: &Case) -> Counts {
    // Both evaluations of the router: the branch-like one (the package's) and the branch-free
    // one the mesh uses (`RouterCl::set_branch_free`); each must match the RTL every cycle.
    lockstep_with::<V, NV>(case, true);
    lockstep_with::<V, NV>(case, false)
}

fn lockstep_with<const V: usize, const NV: usize>(case: &Case, branch_free: bool) -> Counts {
    let c = case;
    let tag = &c.name;
    let params = RouterCtrlParams::of(&c.cfg, c.k, 1).expect("case uses a configuration the RTL implements");
    // The single router under test, all five ports linked to the test's neighbours.
    let mut flits = LinkArena::<Flit>::new();
    let mut credits = LinkArena::<Credit>::new();
    let mut ports = RouterPorts {
        in_flit: [LinkId::NONE; NPORTS],
        out_flit: [LinkId::NONE; NPORTS],
        in_credit: [LinkId::NONE; NPORTS],
        out_credit: [LinkId::NONE; NPORTS],
    };
    for p in 0..NPORTS {
        ports.in_flit[p] = flits.add(1);
        ports.out_flit[p] = flits.add(1);
        ports.in_credit[p] = credits.add(1);
        ports.out_credit[p] = credits.add(1);
    }
    let id = c.cur.1 * c.k + c.cur.0;
    let mut cl = RouterCl::new(id, c.k, &c.cfg, 1, ports);
    cl.set_branch_free(branch_free);
    let cur = (c.cur.0 as u64, c.cur.1 as u64);
    let mut tb = RouterTb::new(params, c.knobs, c.seed);
    let mut u = RouterCtrlRtl::<V, NV, 3, 4>::new(&params);
    u.connect_all();
    tb.drive(&mut u, cur, true);
    common::settle(&mut u);
    clock(&mut u);
    let mut n = Counts::default();
    let mut tr = common::LockstepTrace::named(tag);
    // Every compared port is recorded; a mismatch panics with the case, the cycle, the port and
    // both values, and writes both models' VCDs (`LockstepTrace::expect`).
    for cycle in 0..c.cycles {
        tr.cycle(cycle);
        let now = cycle + 1;
        tb.arrive();
        // --- registers after the previous edge
        let before: Vec<VcState> = (0..NV).map(|iv| cl.vc_state(iv / V, iv % V)).collect();
        tb.drive(&mut u, cur, false);
        common::settle(&mut u);
        for (iv, &cl_state) in before.iter().enumerate() {
            let (p, vc) = (iv / V, iv % V);
            let (port, ovc) = cl.vc_route(p, vc);
            tr.expect(&format!("in{p}.vc{vc}.state"), 3, cl_state as u64, u.vc_state[iv].val().to_u64());
            tr.expect(&format!("in{p}.vc{vc}.route"), 3, port as u64, u.vc_port[iv].val().to_u64());
            tr.expect(&format!("in{p}.vc{vc}.ovc"), 8, ovc as u64, u.vc_ovc[iv].val().to_u64());
        }
        let busy = u.ovc_busy.val().to_u64();
        for ov in 0..NV {
            let (o, vc) = (ov / V, ov % V);
            tr.expect(&format!("out{o}.vc{vc}.held"), 1, cl.ovc_busy(o, vc) as u64, busy >> ov & 1);
            let cr = u.credits[ov].val().to_u64();
            tr.expect(&format!("out{o}.vc{vc}.credits"), 16, cl.credits(o, vc) as u64, cr);
            if cr == 0 && tb.buf.iter().any(|b| !b.is_empty()) {
                n.credit_stall_cycles += 1;
            }
        }
        // VA accept per input VC, VA grant per output VC, SA grant per output port, SA accept
        // and SA VC select per input port.
        let names = ["va_accept_ptr", "va_grant_ptr", "sa_grant_ptr", "sa_accept_ptr", "sa_vc_ptr"];
        for ((name, r), cp) in names.iter().zip(u.pointers()).zip(cl.alloc_pointers()) {
            for (i, (a, b)) in r.iter().zip(&cp).enumerate() {
                tr.expect(&format!("{name}{i}"), 8, *b as u64, *a as u64);
            }
        }
        // Legal traffic: the RTL's error flag stays low (the CL has none).
        tr.expect("err", 1, 0, u.err.val() as u64);

        // --- the cycle's decisions
        // SAFETY: single-threaded; this test is the only sender/receiver of the router's links
        // besides the router, and reads the router's outputs one cycle ahead (latency 1).
        unsafe { cl.eval(now, &flits, &credits) };
        let mut cl_pops = 0u64;
        for p in 0..NPORTS {
            // SAFETY: as above.
            if let Some(cr) = unsafe { credits.recv(ports.out_credit[p], now + 1) } {
                cl_pops |= 1 << (p * V + cr.vc as usize);
            }
        }
        let mut cl_sends = [None; NPORTS];
        let mut cl_from = [None; NPORTS];
        for o in 0..NPORTS {
            // SAFETY: as above.
            if let Some(f) = unsafe { flits.recv(ports.out_flit[o], now + 1) } {
                cl_sends[o] = Some(f.vc as usize);
                let iv = (0..NV).find(|&iv| cl_pops >> iv & 1 == 1 && tb.buf[iv].front().map(|x| x.id) == Some(f.pid));
                let iv = iv.unwrap_or_else(|| panic!("{tag} cycle {cycle}: CL sent flit {:#x} on out port {o} that is at no popped buffer front", f.pid));
                cl_from[o] = Some(iv / V);
            }
        }
        let mut cl_va = 0u64;
        for (iv, b) in before.iter().enumerate() {
            if matches!(b, VcState::Routing | VcState::VcAlloc) && cl.vc_state(iv / V, iv % V) == VcState::Active {
                cl_va |= 1 << iv;
            }
        }
        let rtl_va = u.va_grant.val().to_u64();
        for iv in 0..NV {
            tr.expect(&format!("in{}.vc{}.va_grant", iv / V, iv % V), 1, cl_va >> iv & 1, rtl_va >> iv & 1);
        }
        let (rtl_pops, rtl_sends) = decisions(&u);
        for iv in 0..NV {
            tr.expect(&format!("in{}.vc{}.sa_grant", iv / V, iv % V), 1, cl_pops >> iv & 1, rtl_pops >> iv & 1);
        }
        for o in 0..NPORTS {
            // A send is its output VC + 1; 0 when the port sent nothing.
            let sent = |s: Option<usize>| s.map_or(0, |vc| vc as u64 + 1);
            tr.expect(&format!("out{o}.sent_vc_plus1"), 8, sent(cl_sends[o]), sent(rtl_sends[o]));
            if let Some(p) = cl_from[o] {
                tr.expect(&format!("out{o}.xbar_in"), 3, p as u64, u.st_in_port[o].val().to_u64());
            }
        }
        n.va_grants += cl_va.count_ones() as u64;
        n.switched += cl_pops.count_ones() as u64;

        // --- next cycle's traffic, into both models
        tb.step(rtl_pops, rtl_sends);
        let k = c.k as u16;
        for p in 0..NPORTS {
            if let Some((vc, f)) = tb.arriving[p] {
                let flit = Flit {
                    pid: f.id,
                    dest: f.dest_y as u16 * k + f.dest_x as u16,
                    dest_x: f.dest_x,
                    dest_y: f.dest_y,
                    vc: vc as u8,
                    head: f.head,
                    tail: f.tail,
                    ..Default::default()
                };
                // SAFETY: as above; the test is the upstream sender of input port p.
                unsafe { flits.send(ports.in_flit[p], now, flit) };
            }
            if let Some(vc) = tb.credit_arriving[p] {
                // SAFETY: as above; the test is the downstream router of output port p.
                unsafe { credits.send(ports.in_credit[p], now, Credit { vc: vc as u8 }) };
            }
        }
        clock(&mut u);
    }
    n
}

fn base(name: &str, cfg: RouterCfg, cur: (u32, u32), seed: u64) -> Case {
    Case {
        name: name.into(),
        cfg,
        k: 4,
        cur,
        knobs: TrafficKnobs { p_inject: 0.5, p_drain: 0.6, max_pkt: 4 },
        cycles: 10_000,
        seed,
    }
}

fn check(n: &Counts, c: &Case) {
    // Enough happened for the comparison to mean something (the congested case drains at
    // 0.35 flits per output and cycle, so a quarter of the cycles).
    assert!(n.switched > c.cycles / 4, "{}: only {} flits switched in {} cycles", c.name, n.switched, c.cycles);
    assert!(n.va_grants > c.cycles / 20, "{}: only {} VA grants", c.name, n.va_grants);
    eprintln!("{}: {} cycles, {} flits switched, {} VA grants, {} output-VC cycles at 0 credits", c.name, c.cycles, n.switched, n.va_grants, n.credit_stall_cycles);
}

#[test]
fn router_ctrl_lockstep_v2_default() {
    let c = base("v2 default k4 (1,2)", RouterCfg::default(), (1, 2), 1);
    check(&lockstep::<2, 10>(&c), &c);
}

#[test]
fn router_ctrl_lockstep_v2_congested_corner() {
    // Downstream slow: credits run out, VA and SA conflicts pile up; a corner router of 8x8.
    let mut c = base("v2 congested k8 (0,0)", RouterCfg { vc_buf: 4, ..Default::default() }, (0, 0), 2);
    c.k = 8;
    c.knobs = TrafficKnobs { p_inject: 0.9, p_drain: 0.35, max_pkt: 6 };
    check(&lockstep::<2, 10>(&c), &c);
}

#[test]
fn router_ctrl_lockstep_v4() {
    let c = base("v4 k4 (2,1)", RouterCfg { vcs: 4, vc_buf: 4, ..Default::default() }, (2, 1), 3);
    check(&lockstep::<4, 20>(&c), &c);
}

#[test]
fn router_ctrl_lockstep_routing_delay_3() {
    let c = base("v2 routing_delay 3 k4 (3,3)", RouterCfg { routing_delay: 3, ..Default::default() }, (3, 3), 4);
    check(&lockstep::<2, 10>(&c), &c);
}

#[test]
fn router_ctrl_refuses_unimplemented_delays() {
    for cfg in [
        RouterCfg { va_delay: 2, ..Default::default() },
        RouterCfg { sa_delay: 2, ..Default::default() },
        RouterCfg { routing_delay: 0, ..Default::default() },
    ] {
        assert!(RouterCtrlParams::of(&cfg, 4, 1).is_none(), "{cfg:?}");
    }
    assert!(RouterCtrlParams::of(&RouterCfg::default(), 4, 2).is_none(), "serialized outputs");
    assert!(RouterCtrlParams::of(&RouterCfg::default(), 4, 1).is_some());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    /// Random router position, load, drain rate, packet length, buffer depth and seed.
    #[test]
    fn router_ctrl_lockstep_random(
        k in 2u32..=8,
        x in 0u32..8,
        y in 0u32..8,
        p_inject in 0.1f64..1.0,
        p_drain in 0.2f64..1.0,
        max_pkt in 1u32..=8,
        vc_buf in 1u32..=15,
        seed in any::<u64>(),
    ) {
        let mut c = base("proptest", RouterCfg { vc_buf, ..Default::default() }, (x % k, y % k), seed);
        c.k = k;
        c.knobs = TrafficKnobs { p_inject, p_drain, max_pkt };
        c.name = format!("{c:?}");
        let n = lockstep::<2, 10>(&c);
        prop_assert!(n.switched > 0);
    }
}

/// The name-keyed lockstep trace (used here and by the UCIe replay suite) writes both models'
/// VCDs on a mismatch, with every port compared so far, under VCD-safe names.
#[test]
fn named_lockstep_mismatch_writes_both_vcds() {
    let mut tr = common::LockstepTrace::named("named_selftest");
    for cycle in 0..3u64 {
        tr.cycle(cycle);
        tr.cmp("in0.vc1.state", 3, cycle, cycle).unwrap();
    }
    tr.cycle(3);
    let e = tr.cmp("out2.credits", 16, 4, 5).unwrap_err();
    assert!(e.contains("named_selftest cycle 3 out2.credits: RTL 5 CL 4"), "{e}");
    for side in ["cl", "rtl"] {
        let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("rtl/mismatch/named_selftest.{side}.vcd"));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("in0_vc1_state") && text.contains("out2_credits"), "{side}: {text}");
        assert!(e.contains(&path.display().to_string()), "{e}");
    }
}
