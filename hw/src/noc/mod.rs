//! Mesh network-on-chip: the network that connects chiplets in a package (SPEC §3) and dies
//! on a wafer (SPEC §4). Validated against BookSim2 (docs/results-noc.md).

pub mod arbiter;
pub mod config;
pub mod credit;
pub mod flit;
pub mod measure;
pub mod mesh;
pub mod router;
pub mod terminal;
pub mod tile_router;

pub use config::{CfgError, MeasureCfg, MeshCfg, NocCfg, RouterCfg, SimCfg, TrafficCfg, TrafficPattern};
pub use measure::{run_mesh, run_point, run_point_traced, run_sweep, run_sweep_with, LineTraceOut, PointResult, SweepResult, WaveOut};
pub use mesh::{Mesh, NocError, RunEnd};
pub use terminal::{NiCtx, Phase};
pub use tile_router::{NocRtl, RouterFactory, RouterModel};
