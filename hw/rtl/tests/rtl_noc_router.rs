//! `RouterRtl` (the full router: VC buffers, `router_ctrl`, crossbar) against `RouterCl` in
//! lockstep (S8 strength 3). The same random legal traffic (`RouterTb`: upstream senders
//! holding credits, downstream buffers draining at random) drives a real `RouterCl` through
//! its links and the RTL router through its ports; every cycle every port is compared:
//! * before the edge (registers after the previous cycle): per input VC the buffer occupancy,
//!   state, route and output VC; per output VC ownership and credits; every allocator
//!   pointer; `err`;
//! * the cycle's outputs: per output port whether a flit leaves, on which VC, and every field
//!   of it (head, tail, destination, hop count, migration class, payload); per input port the
//!   credit returned upstream and its VC; the statistics increments (flits switched, VA
//!   grants and stalls, SA credit stalls and conflicts) from the RTL's event masks.
//!
//! The migration-priority cases mark a third of the packets low priority (CL `class >=
//! low_class`), in every VC, with hold-offs of 0 and 5 cycles. A mismatch panics with the
//! case, the cycle, the port and both values (and writes both models' VCDs).

mod common;

use hw::harness::{LinkArena, LinkId};
use hw::noc::flit::{Credit, Flit};
use hw::noc::router::{RouterCl, RouterPorts, RouterStats, NPORTS};
use hw::noc::RouterCfg;
use rtl::noc::router::{stats_of, Router2Rtl, RouterIn, RouterParams, RtlFlit};
use rtl::noc::router_ctrl::{RouterTb, TbFlit, TrafficKnobs};
use rust_hdl::prelude::*;

const V: usize = 2;
const NV: usize = 10;
const CW: usize = 3;

#[derive(Debug, Clone)]
struct Case {
    name: String,
    cfg: RouterCfg,
    k: u32,
    cur: (u32, u32),
    knobs: TrafficKnobs,
    cycles: u64,
    seed: u64,
    /// Migration priority: `Some(low_idle)`.
    prio: Option<u64>,
}

#[derive(Debug, Default)]
struct Counts {
    stats: RouterStats,
    low_switched: u64,
    saturated_hops: u64,
}

fn clock(u: &mut Router2Rtl) {
    u.clock.next = true.into();
    common::settle(u);
    u.clock.next = false.into();
    common::settle(u);
}

/// The packet's migration class and payload, derived from its id (all flits of a packet
/// agree); a few packets start near the 8-bit hop limit to exercise the saturation.
fn flit_fields(f: &TbFlit, prio: bool) -> (bool, u64, u8) {
    let pkt = f.id >> 12;
    let low = prio && pkt % 3 == 0;
    let payload = (f.id ^ (f.id >> 7) ^ (f.id >> 12)) & 0xff;
    let hops = if pkt % 7 == 0 { 254 } else { (pkt % 5) as u8 };
    (low, payload, hops)
}

fn lockstep(case: &Case) -> Counts {
    // Both evaluations of the router: the branch-like one (the package's) and the branch-free
    // one the mesh uses (`RouterCl::set_branch_free`); each must match the RTL every cycle.
    lockstep_with(case, true);
    lockstep_with(case, false)
}

fn lockstep_with(case: &Case, branch_free: bool) -> Counts {
    let c = case;
    let tag = &c.name;
    let params = RouterParams::of(&c.cfg, c.k, 1, V, 8, CW).expect("a configuration the RTL implements");
    let mut flits = LinkArena::<Flit>::new();
    let mut credits = LinkArena::<Credit>::new();
    let mut ports = RouterPorts { in_flit: [LinkId::NONE; NPORTS], out_flit: [LinkId::NONE; NPORTS], in_credit: [LinkId::NONE; NPORTS], out_credit: [LinkId::NONE; NPORTS] };
    for p in 0..NPORTS {
        ports.in_flit[p] = flits.add(1);
        ports.out_flit[p] = flits.add(1);
        ports.in_credit[p] = credits.add(1);
        ports.out_credit[p] = credits.add(1);
    }
    let id = c.cur.1 * c.k + c.cur.0;
    let mut cl = RouterCl::new(id, c.k, &c.cfg, 1, ports);
    cl.set_branch_free(branch_free);
    if let Some(idle) = c.prio {
        cl.low_class = 1;
        cl.low_idle = idle;
    }
    let cur = (c.cur.0 as u64, c.cur.1 as u64);
    let mut tb = RouterTb::new(params.ctrl, c.knobs, c.seed);
    let mut u = Router2Rtl::new(&params);
    u.connect_all();
    u.drive(cur, c.prio, true, &RouterIn::default());
    common::settle(&mut u);
    clock(&mut u);
    let mut n = Counts::default();
    let mut tr = common::LockstepTrace::named(tag);
    let pack = |f: &TbFlit| {
        let (low, payload, hops) = flit_fields(f, c.prio.is_some());
        RtlFlit { head: f.head, tail: f.tail, low, dest_x: f.dest_x, dest_y: f.dest_y, hops, payload }.pack(CW)
    };
    for cycle in 0..c.cycles {
        tr.cycle(cycle);
        let now = cycle + 1;
        tb.arrive();
        let input = RouterIn {
            flit: std::array::from_fn(|p| tb.arriving[p].map(|(vc, f)| (vc, pack(&f)))),
            credit: tb.credit_arriving,
        };
        u.drive(cur, c.prio, false, &input);
        common::settle(&mut u);
        // --- registers after the previous edge
        for iv in 0..NV {
            let (p, vc) = (iv / V, iv % V);
            let (port, ovc) = cl.vc_route(p, vc);
            tr.expect(&format!("in{p}.vc{vc}.occ"), 4, cl.vc_occupancy(p, vc) as u64, u.vc_occ[iv].val().to_u64());
            tr.expect(&format!("in{p}.vc{vc}.state"), 2, cl.vc_state(p, vc) as u64, u.vc_state[iv].val().to_u64());
            tr.expect(&format!("in{p}.vc{vc}.route"), 3, port as u64, u.vc_port[iv].val().to_u64());
            tr.expect(&format!("in{p}.vc{vc}.ovc"), 4, ovc as u64, u.vc_ovc[iv].val().to_u64());
        }
        let busy = u.ovc_busy.val().to_u64();
        for ov in 0..NV {
            let (o, vc) = (ov / V, ov % V);
            tr.expect(&format!("out{o}.vc{vc}.held"), 1, cl.ovc_busy(o, vc) as u64, busy >> ov & 1);
            tr.expect(&format!("out{o}.vc{vc}.credits"), 4, cl.credits(o, vc) as u64, u.credits[ov].val().to_u64());
        }
        let names = ["va_accept_ptr", "va_grant_ptr", "sa_grant_ptr", "sa_accept_ptr", "sa_vc_ptr"];
        for ((name, r), cp) in names.iter().zip(u.pointers()).zip(cl.alloc_pointers()) {
            for (i, (a, b)) in r.iter().zip(&cp).enumerate() {
                tr.expect(&format!("{name}{i}"), 8, *b as u64, *a as u64);
            }
        }
        tr.expect("err", 1, 0, u.err.val() as u64);

        // --- the cycle's outputs
        let before = cl.stats;
        // SAFETY: single-threaded; the test is the only other sender/receiver of the router's
        // links and reads its outputs one cycle ahead (latency 1).
        unsafe { cl.eval(now, &flits, &credits) };
        let out = u.outputs();
        for o in 0..NPORTS {
            // SAFETY: as above.
            let f = unsafe { flits.recv(ports.out_flit[o], now + 1) };
            tr.expect(&format!("out{o}.flit_vc_plus1"), 4, f.map_or(0, |f| f.vc as u64 + 1), out.flit[o].map_or(0, |(vc, _)| vc as u64 + 1));
            if let (Some(f), Some((_, w))) = (f, out.flit[o]) {
                let r = RtlFlit::unpack(w, CW);
                tr.expect(&format!("out{o}.head"), 1, f.head as u64, r.head as u64);
                tr.expect(&format!("out{o}.tail"), 1, f.tail as u64, r.tail as u64);
                tr.expect(&format!("out{o}.dest_x"), 8, f.dest_x as u64, r.dest_x as u64);
                tr.expect(&format!("out{o}.dest_y"), 8, f.dest_y as u64, r.dest_y as u64);
                tr.expect(&format!("out{o}.hops"), 8, f.hops as u64, r.hops as u64);
                tr.expect(&format!("out{o}.low"), 1, (f.class >= 1) as u64, r.low as u64);
                tr.expect(&format!("out{o}.payload"), 8, f.data as u64, r.payload);
                n.low_switched += r.low as u64;
                n.saturated_hops += (r.hops == 255) as u64;
            }
        }
        for p in 0..NPORTS {
            // SAFETY: as above.
            let cr = unsafe { credits.recv(ports.out_credit[p], now + 1) };
            tr.expect(&format!("in{p}.credit_vc_plus1"), 4, cr.map_or(0, |c| c.vc as u64 + 1), out.credit[p].map_or(0, |vc| vc as u64 + 1));
        }
        let d = stats_of(&out);
        let s = cl.stats;
        tr.expect("stats.flits_switched", 8, s.flits_switched - before.flits_switched, d.flits_switched);
        tr.expect("stats.va_grants", 8, s.va_grants - before.va_grants, d.va_grants);
        tr.expect("stats.va_stalls", 8, s.va_stalls - before.va_stalls, d.va_stalls);
        tr.expect("stats.sa_credit_stalls", 8, s.sa_credit_stalls - before.sa_credit_stalls, d.sa_credit_stalls);
        tr.expect("stats.sa_conflicts", 8, s.sa_conflicts - before.sa_conflicts, d.sa_conflicts);

        // --- next cycle's traffic, into both models
        let pops = (0..NPORTS).filter_map(|p| out.credit[p].map(|vc| 1u64 << (p * V + vc))).fold(0, |a, b| a | b);
        let sends = std::array::from_fn(|o| out.flit[o].map(|(vc, _)| vc));
        tb.step(pops, sends);
        let k = c.k as u16;
        for p in 0..NPORTS {
            if let Some((vc, f)) = tb.arriving[p] {
                let (low, payload, hops) = flit_fields(&f, c.prio.is_some());
                let flit = Flit {
                    pid: f.id,
                    dest: f.dest_y as u16 * k + f.dest_x as u16,
                    dest_x: f.dest_x,
                    dest_y: f.dest_y,
                    vc: vc as u8,
                    head: f.head,
                    tail: f.tail,
                    hops,
                    class: low as u8,
                    data: payload as u32,
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
    n.stats = cl.stats;
    n
}

fn base(name: &str, cfg: RouterCfg, cur: (u32, u32), seed: u64) -> Case {
    Case { name: name.into(), cfg, k: 4, cur, knobs: TrafficKnobs { p_inject: 0.5, p_drain: 0.6, max_pkt: 4 }, cycles: 10_000, seed, prio: None }
}

fn check(n: &Counts, c: &Case) {
    let s = &n.stats;
    assert!(s.flits_switched > c.cycles / 4, "{}: only {} flits switched in {} cycles", c.name, s.flits_switched, c.cycles);
    assert!(s.va_grants > c.cycles / 20, "{}: only {} VA grants", c.name, s.va_grants);
    assert!(n.saturated_hops > 0, "{}: no flit reached the hop limit", c.name);
    if c.prio.is_some() {
        assert!(n.low_switched > c.cycles / 50, "{}: only {} low-priority flits switched", c.name, n.low_switched);
    }
    eprintln!(
        "{}: {} cycles, {} flits switched ({} low priority), {} VA grants, {} VA stalls, {} SA credit stalls, {} SA conflicts",
        c.name, c.cycles, s.flits_switched, n.low_switched, s.va_grants, s.va_stalls, s.sa_credit_stalls, s.sa_conflicts
    );
}

#[test]
fn router_lockstep_default() {
    let c = base("router v2 default k4 (1,2)", RouterCfg::default(), (1, 2), 11);
    check(&lockstep(&c), &c);
}

#[test]
fn router_lockstep_congested_corner() {
    // Slow downstream, 4-flit buffers, long packets: credit stalls, VA and SA conflicts.
    let mut c = base("router v2 congested vc_buf 4 k8 (0,0)", RouterCfg { vc_buf: 4, ..Default::default() }, (0, 0), 12);
    c.k = 8;
    c.knobs = TrafficKnobs { p_inject: 0.9, p_drain: 0.35, max_pkt: 6 };
    check(&lockstep(&c), &c);
}

#[test]
fn router_lockstep_routing_delay_3_depth_2() {
    let c = base("router v2 routing_delay 3 vc_buf 2 k4 (3,3)", RouterCfg { routing_delay: 3, vc_buf: 2, ..Default::default() }, (3, 3), 13);
    check(&lockstep(&c), &c);
}

#[test]
fn router_lockstep_migration_priority() {
    let mut c = base("router v2 migration priority, no hold-off, k4 (2,1)", RouterCfg::default(), (2, 1), 14);
    c.prio = Some(0);
    c.knobs = TrafficKnobs { p_inject: 0.8, p_drain: 0.5, max_pkt: 4 };
    check(&lockstep(&c), &c);
}

#[test]
fn router_lockstep_migration_priority_hold_off() {
    let mut c = base("router v2 migration priority, 5-cycle hold-off, vc_buf 4, k8 (4,5)", RouterCfg { vc_buf: 4, ..Default::default() }, (4, 5), 15);
    c.k = 8;
    c.prio = Some(5);
    c.knobs = TrafficKnobs { p_inject: 0.7, p_drain: 0.45, max_pkt: 5 };
    check(&lockstep(&c), &c);
}

/// Configurations the RTL router does not model are refused by field name.
#[test]
fn router_refuses_what_it_does_not_model() {
    let d = RouterCfg::default();
    let cases = [
        (RouterCfg { vcs: 4, ..d.clone() }, 4, 1, "mesh.router.vcs"),
        (RouterCfg { vc_buf: 9, ..d.clone() }, 4, 1, "mesh.router.vc_buf"),
        (RouterCfg { va_delay: 2, ..d.clone() }, 4, 1, "mesh.router.va_delay"),
        (RouterCfg { sa_delay: 3, ..d.clone() }, 4, 1, "mesh.router.sa_delay"),
        (RouterCfg { routing_delay: 0, ..d.clone() }, 4, 1, "mesh.router.routing_delay"),
        (d.clone(), 16, 1, "mesh.k"),
        (d.clone(), 4, 2, "mesh.link_width_bytes"),
    ];
    for (cfg, k, ser, field) in cases {
        let e = RouterParams::of(&cfg, k, ser, V, 8, CW).unwrap_err();
        assert_eq!(e.field, field, "{cfg:?} k {k} ser {ser}: {e}");
        assert!(e.to_string().contains("cannot model"), "{e}");
    }
}
