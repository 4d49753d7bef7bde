//! The wafer-scale chip (SPEC §4, MoEntwine): a mesh of dies on one or several wafers, the
//! collective engines that move a MoE layer's all-reduce and all-to-all as real flits through
//! the `noc` routers, the dies' compute engines, and the mapping controller. FL twins of the
//! decisions live in `sched::wafer` under the same names.

pub mod balance;
pub mod balancer;
pub mod compute;
pub mod config;
pub mod die;
pub mod dma;
pub mod functional;
pub mod mapping;
pub mod migration;
pub mod payload;
pub mod predictor;
pub mod program;
pub mod result;
pub mod semmoe_lut;
#[allow(clippy::module_inception)]
pub mod wafer;

pub use config::{DieCfg, WaferCfg};
pub use compute::KernelBusy;
pub use program::{PerPhase, Phase};
pub use result::{classify_links, Heat, LinkUse, WaferResult};
pub use wafer::{Wafer, WaferError, WaferRun};
