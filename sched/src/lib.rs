//! FL (functional level) of waferstream: algorithms as plain functions, no clock.
//!
//! The CL models in `hw` call these functions so that a cycle-level controller reaches
//! exactly the decision its FL algorithm reaches (PyMTL's ChecksumCL-reuses-ChecksumFL
//! pattern). Today: mesh routing and synthetic traffic patterns; the FSE-DP trajectory
//! scheduler, ER/HER-Mapping, NI-Balancer, MoE-GPS and Sem-MoE land here next.

pub mod balance;
pub mod models;
pub mod noc;
pub mod pkg;
pub mod scenario;
pub mod trace;
pub mod wafer;
pub mod workload;

pub mod prelude {
    pub use crate::noc::{route_xy_fl, Coord, Dir, TrafficPattern};
}
