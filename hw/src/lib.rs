//! CL (cycle-level) models of waferstream: the harness every timed block stands on, and the
//! blocks themselves. Today: the harness and the mesh NoC; the chiplet package (PE array,
//! micro-slice ring buffer, DDR, UCIe, chiplet controller, IO-die scheduler) and the wafer
//! build on the same harness (docs/architecture.md).

pub mod cfg;
pub mod harness;
pub mod pkg;
pub mod noc;
pub mod wafer;

pub mod prelude {
    pub use crate::harness::{Cycle, Link, PartStatus, Partition, Probe, SignalSink, Step};
    pub use crate::noc::{Mesh, NocCfg, NocError, PointResult, SweepResult};
}
