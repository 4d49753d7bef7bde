//! FL (functional level) of waferstream: algorithms as plain functions, no clock.
//!
//! The CL models in `hw` call these functions, or are tested to reach the same decisions, so
//! a cycle-level controller decides exactly what its FL algorithm decides (PyMTL's
//! ChecksumCL-reuses-ChecksumFL pattern). Contents: mesh routing and traffic ([`noc`]); the
//! FSE-DP IO-die scheduler, PE fold model, int8 MoE reference and baseline placements
//! ([`pkg`]); MoEntwine's ER/HER-Mapping, collective and dispatch plans and GPU baselines
//! ([`wafer`]); EPLB, NI-Balancer, MoE-GPS and Sem-MoE ([`balance`]); model presets, the
//! routing generator, scenarios and the SPEC §8 trace format (docs/architecture.md).

pub mod balance;
pub mod error;
pub mod ids;
pub mod models;
pub mod noc;
pub mod pkg;
pub mod scenario;
pub mod trace;
pub mod wafer;
pub mod workload;

pub use error::{Error, Result};
pub use ids::{ChipletId, DieId, ExpertId, ReqId, SlotId};

pub mod prelude {
    pub use crate::noc::{route_xy_fl, Coord, Dir, TrafficPattern};
}
