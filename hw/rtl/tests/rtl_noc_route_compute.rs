//! `RouteComputeRtl` against the CL's routing function `sched::noc::route_xy_fl` (the one
//! `RouterCl` calls in RC): exhaustive over every router and every destination of k×k meshes,
//! k = 2..8, with the route register checked after the edge and held while `rc_en` is low.

mod common;

use rtl::noc::route_compute::{RouteCompute3Rtl, RouteComputeRtl};
use rust_hdl::prelude::*;
use sched::noc::{route_xy_fl, Coord};

fn clock<const CW: usize>(u: &mut RouteComputeRtl<CW>) {
    u.clock.next = true.into();
    common::settle(u);
    u.clock.next = false.into();
    common::settle(u);
}

#[test]
fn route_compute_exhaustive_k2_to_k8() {
    let mut u = RouteCompute3Rtl::new(8);
    u.connect_all();
    u.reset.next = true;
    u.rc_en.next = false;
    common::settle(&mut u);
    clock(&mut u);
    u.reset.next = false;
    assert_eq!(u.route.val().to_u64(), 0, "route register after reset");
    assert_eq!(u.route_oh.val().to_u64(), 1, "one-hot route register after reset");
    let mut checked = 0u64;
    for k in 2..=8u32 {
        for cy in 0..k {
            for cx in 0..k {
                for dy in 0..k {
                    for dx in 0..k {
                        let want = route_xy_fl(Coord { x: cx, y: cy }, Coord { x: dx, y: dy }) as u64;
                        u.cur_x.next = (cx as u64).into();
                        u.cur_y.next = (cy as u64).into();
                        u.dest_x.next = (dx as u64).into();
                        u.dest_y.next = (dy as u64).into();
                        u.rc_en.next = true;
                        common::settle(&mut u);
                        let got = u.port.val().to_u64();
                        assert_eq!(got, want, "k={k} router ({cx},{cy}) dest ({dx},{dy}): RTL port {got}, CL {want}");
                        clock(&mut u);
                        assert_eq!(u.route.val().to_u64(), want, "k={k} router ({cx},{cy}) dest ({dx},{dy}): route register");
                        assert_eq!(u.route_oh.val().to_u64(), 1 << want, "k={k} router ({cx},{cy}) dest ({dx},{dy}): one-hot route");
                        // With rc_en low the register holds whatever the destination does.
                        u.rc_en.next = false;
                        u.dest_x.next = (((dx + 1) % k) as u64).into();
                        common::settle(&mut u);
                        clock(&mut u);
                        assert_eq!(u.route.val().to_u64(), want, "k={k} router ({cx},{cy}) dest ({dx},{dy}): route must hold without rc_en");
                        checked += 1;
                    }
                }
            }
        }
    }
    // sum over k = 2..8 of k^4
    assert_eq!(checked, (2..=8u64).map(|k| k.pow(4)).sum::<u64>());
}
