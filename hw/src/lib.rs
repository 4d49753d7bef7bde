//! CL (cycle-level) models of waferstream: the harness every timed block stands on
//! ([`harness`]: registered links, clock domains, parallel partitions, fast-forward, watchdog,
//! tracing), the blocks, and the systems built from them — the BookSim-like mesh NoC
//! ([`noc`]), the FSE-DP chiplet package ([`pkg`]: PE array, ring buffer, DDR, UCIe, chiplet
//! controller, IO-die scheduler, session) and the wafer-scale chip ([`wafer`]: dies, collective
//! and migration engines, mapping controller, balance loop, predictor, Sem-MoE unit).
//! Decisions come from the FL twins in `sched`; RTL twins can stand in for the package's
//! controllers through the `IoDieModel`/`ChipletCtrlModel` seams (docs/architecture.md).

pub mod cfg;
pub mod error;
pub mod harness;
pub mod pkg;
pub mod noc;
pub mod wafer;

pub use error::{Error, Result};

pub mod prelude {
    pub use crate::harness::{Cycle, Link, PartStatus, Partition, Probe, SignalSink, Step};
    pub use crate::noc::{Mesh, NocCfg, NocError, PointResult, SweepResult};
}
