//! Route computation (RC) of one input VC: XY dimension-order routing, the RTL twin of
//! `sched::noc::route_xy_fl` as `hw::noc::router::RouterCl` uses it.
//!
//! * `port` is combinational: the output port a head flit for (`dest_x`, `dest_y`) takes at
//!   the router (`cur_x`, `cur_y`), encoded as `sched::noc::Dir` (0 = +x, 1 = −x, 2 = +y,
//!   3 = −y, 4 = local). X first, then Y, local on arrival — exactly `route_xy_fl`, checked
//!   for every router and destination of k×k meshes, k = 2..8, by
//!   `tests/rtl_noc_route_compute.rs`.
//! * `route` / `route_oh` are the RC stage register (binary and one-hot): `port` latched at
//!   every edge where `rc_en` is high, held otherwise. The router control raises `rc_en` while
//!   a head flit waits at the front of the VC for RC, and reads `route` in VC and switch
//!   allocation. This is the per-VC `out_port` register of the CL (reset value 0, as there).
//!
//! The router's own coordinates are inputs (straps), so one Verilog module serves every router
//! of a mesh; a router ties them to constants and synthesis folds the comparators.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rust_hdl::prelude::*;

use crate::cosim::{record, PortTrace};
use crate::export::{boxed, BlockDef, ParamSet};
use crate::RtlError;

/// RC of one input VC for coordinates of `CW` bits (meshes up to 2^CW routers per side).
///
/// Port coupling: `port`: comb(cur_*, dest_*); `route`, `route_oh`: registered; `rc_en`,
/// `dest_*`: sampled at the rising clock edge.
#[derive(LogicBlock)]
pub struct RouteComputeRtl<const CW: usize> {
    /// Single clock; the route register updates on its rising edge.
    pub clock: Signal<In, Clock>,
    /// Synchronous, active-high reset: the route register returns to port 0.
    pub reset: Signal<In, Bit>,
    /// This router's coordinates (x = column, y = row).
    pub cur_x: Signal<In, Bits<CW>>,
    pub cur_y: Signal<In, Bits<CW>>,
    /// Destination of the head flit at the front of the VC.
    pub dest_x: Signal<In, Bits<CW>>,
    pub dest_y: Signal<In, Bits<CW>>,
    /// RC stage active this cycle: latch `port` into the route register.
    pub rc_en: Signal<In, Bit>,
    /// XY output port for (`dest_x`, `dest_y`). comb.
    pub port: Signal<Out, Bits<3>>,
    /// The route register (last latched `port`). registered.
    pub route: Signal<Out, Bits<3>>,
    /// The route register one-hot (bit p = port p), for the allocators' masks. registered.
    pub route_oh: Signal<Out, Bits<5>>,
    /// Route register (binary) and its one-hot copy, written together so they never disagree.
    route_q: DFF<Bits<3>>,
    route_oh_q: DFF<Bits<5>>,
    /// One-hot of `port`.
    port_oh: Signal<Local, Bits<5>>,
    /// Port codes (`Dir` order) and their one-hot forms, sized so the Verilog has no
    /// width-mismatched literals.
    dir: [Constant<Bits<3>>; 5],
    dir_oh: [Constant<Bits<5>>; 5],
}

impl<const CW: usize> RouteComputeRtl<CW> {
    /// Builds the RC for meshes of up to `k` routers per side (`k <= 2^CW`, k >= 1).
    pub fn new(k: usize) -> Self {
        assert!((1..=16).contains(&CW), "coordinate width {CW} outside 1..=16");
        assert!(
            (1..=(1usize << CW)).contains(&k),
            "a {k}x{k} mesh needs coordinates wider than {CW} bits"
        );
        Self {
            clock: Default::default(),
            reset: Default::default(),
            cur_x: Default::default(),
            cur_y: Default::default(),
            dest_x: Default::default(),
            dest_y: Default::default(),
            rc_en: Default::default(),
            port: Default::default(),
            route: Default::default(),
            route_oh: Default::default(),
            route_q: Default::default(),
            route_oh_q: Default::default(),
            port_oh: Default::default(),
            dir: std::array::from_fn(|d| Constant::new((d as u64).into())),
            dir_oh: std::array::from_fn(|d| Constant::new((1u64 << d).into())),
        }
    }
}

impl<const CW: usize> Logic for RouteComputeRtl<CW> {
    #[hdl_gen]
    fn update(&mut self) {
        // 1. Clock the route register; hold by default.
        dff_setup!(self, clock, route_q, route_oh_q);
        // 2./3. Dimension order: x first, then y, local when both match (`route_xy_fl`).
        self.port.next = self.dir[4].val();
        self.port_oh.next = self.dir_oh[4].val();
        if self.dest_x.val() > self.cur_x.val() {
            self.port.next = self.dir[0].val();
            self.port_oh.next = self.dir_oh[0].val();
        } else if self.dest_x.val() < self.cur_x.val() {
            self.port.next = self.dir[1].val();
            self.port_oh.next = self.dir_oh[1].val();
        } else if self.dest_y.val() > self.cur_y.val() {
            self.port.next = self.dir[2].val();
            self.port_oh.next = self.dir_oh[2].val();
        } else if self.dest_y.val() < self.cur_y.val() {
            self.port.next = self.dir[3].val();
            self.port_oh.next = self.dir_oh[3].val();
        }
        if self.rc_en.val() {
            self.route_q.d.next = self.port.val();
            self.route_oh_q.d.next = self.port_oh.val();
        }
        if self.reset.val() {
            // Port 0, as the CL's `out_port` before any packet.
            self.route_q.d.next = self.dir[0].val();
            self.route_oh_q.d.next = self.dir_oh[0].val();
        }
        // 4. Registered outputs.
        self.route.next = self.route_q.q.val();
        self.route_oh.next = self.route_oh_q.q.val();
    }
}

/// Declares a named alias for a standard RC configuration (S3).
#[macro_export]
macro_rules! declare_route_compute {
    ($name: ident, $cw: expr) => {
        #[doc = concat!("XY route computation, ", stringify!($cw), "-bit coordinates.")]
        pub type $name = $crate::noc::route_compute::RouteComputeRtl<$cw>;
    };
}

// Meshes up to 8x8 (the package and the NoC benchmarks).
declare_route_compute!(RouteCompute3Rtl, 3);

/// Co-sim recorder: a router at random coordinates of a `k`x`k` mesh (changed every few
/// dozen cycles), random destinations and `rc_en`, reset in cycle 0 and rarely after.
pub fn record_route_compute<const CW: usize>(
    module: &str,
    k: u64,
    cycles: usize,
    seed: u64,
) -> Result<PortTrace, RtlError> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut cur = (0u64, 0u64);
    record(
        module,
        RouteComputeRtl::<CW>::new(k as usize),
        cycles,
        |u| &mut u.clock,
        move |c, u| {
            if c % 31 == 0 {
                cur = (rng.gen_range(0..k), rng.gen_range(0..k));
            }
            u.reset.next = c == 0 || rng.gen_bool(0.01);
            u.cur_x.next = cur.0.into();
            u.cur_y.next = cur.1.into();
            u.dest_x.next = rng.gen_range(0..k).into();
            u.dest_y.next = rng.gen_range(0..k).into();
            u.rc_en.next = rng.gen_bool(0.5);
        },
    )
}

/// Export registration: RC of an 8x8 mesh.
pub const EXPORT: BlockDef = BlockDef {
    name: "route_compute",
    top: false,
    domain: crate::export::ModelDomain::PkgCore,
    cosim_cycles: 4096,
    sets: &[ParamSet {
        module: "route_compute_3",
        rust_type: "RouteCompute3Rtl",
        params: &[("coord_bits", 3)],
        ecp5_clock_mhz: 100,
        build: || boxed(RouteCompute3Rtl::new(8)),
        recorder: Some(|cycles, seed| {
            record_route_compute::<3>("route_compute_3", 8, cycles, seed)
        }),
    }],
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(
        not(feature = "yosys"),
        ignore = "needs yosys (enable feature `yosys`)"
    )]
    fn route_compute_synthesizable() {
        let mut uut = RouteCompute3Rtl::new(8);
        uut.connect_all();
        let vlog = generate_verilog(&uut);
        yosys_validate("waferstream_route_compute_3", &vlog).unwrap();
    }
}
