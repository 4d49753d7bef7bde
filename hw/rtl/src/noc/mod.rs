//! Mesh router control in RTL (issue 8, item 1): the route computation of one input VC
//! ([`route_compute::RouteComputeRtl`]) and the router's allocator control
//! ([`router_ctrl::RouterCtrlRtl`]: VC states, VC and switch allocation, output-VC ownership,
//! credit counters), twins of the control half of `hw::noc::router::RouterCl`. The VC buffers
//! and the crossbar (the flit data path) stay outside: the control block sees the front of
//! each buffer and drives the pops and the crossbar selects.

pub mod route_compute;
pub mod router_ctrl;
pub mod vc_fifo;
// The full router (issue 23): VC buffers + `router_ctrl` + crossbar, and its mesh stand-in.
pub mod router;
pub mod router_swap;
