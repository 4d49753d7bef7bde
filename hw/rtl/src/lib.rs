//! RTL level (S1): rust-hdl `LogicBlock`s for the blocks that are synthesized, and their
//! Verilog export. Each block is the twin of a CL model in the `hw` crate and is run in
//! lockstep against it by the `tests/rtl_<area>_<block>.rs` suites.
//!
//! Blocks: [`rr_arbiter::RrArbiterRtl`] (twin of `hw::noc::arbiter::RrArbiterCl`),
//! [`credit_counter::CreditCounterRtl`] (twin of `hw::noc::credit::CreditCounterCl`),
//! [`noc::route_compute::RouteComputeRtl`] and [`noc::router_ctrl::RouterCtrlRtl`] (the
//! route computation and allocator control of `hw::noc::router::RouterCl`),
//! [`pkg::ucie_replay::UcieReplayRtl`] (twin of the replay controller of
//! `hw::pkg::ucie::UcieAdapterCl`) and [`pkg::ucie_crc::UcieCrc32Rtl`] (its CRC-32).

pub mod cosim;
pub mod credit_counter;
pub mod export;
pub mod lutram;
pub mod noc;
pub mod pkg;
pub mod rr_arbiter;
pub mod wafer;

use std::path::PathBuf;

/// Errors of the RTL crate (one enum per crate, S2).
#[derive(Debug, thiserror::Error)]
pub enum RtlError {
    /// rust-hdl's structural checks (connectivity, write-before-read) rejected a block.
    #[error("rust-hdl check failed for block {block}: {detail}")]
    Check { block: String, detail: String },
    /// No registered block (or module) with this name; `known` lists the registered ones.
    #[error("unknown RTL block {name:?}; known: {known}")]
    UnknownBlock { name: String, known: String },
    /// `--param` names a key the block's parameter sets do not have.
    #[error("block {block}: unknown parameter {key:?}; allowed: {allowed}")]
    UnknownParam {
        block: String,
        key: String,
        allowed: String,
    },
    /// `--param KEY=VALUE` with a value no registered parameter set has.
    #[error("block {block}: parameter {key} = {value:?} is not registered; allowed values of {key}: {allowed}")]
    BadParamValue {
        block: String,
        key: String,
        value: String,
        allowed: String,
    },
    /// Every value exists, but no single parameter set has them all.
    #[error("block {block}: no parameter set has {wanted}; registered sets: {sets}")]
    NoParamSet {
        block: String,
        wanted: String,
        sets: String,
    },
    /// `--param` without `--block`: parameter keys are per block.
    #[error("--param {key}=...: parameters select among one block's sets; add --block NAME")]
    ParamWithoutBlock { key: String },
    /// `--cycles` outside 1..=max.
    #[error("--cycles {cycles}: co-simulation length must be in 1..={max}")]
    Cycles { cycles: usize, max: usize },
    /// A `--param` argument that is not `KEY=VALUE`.
    #[error("--param expects KEY=VALUE, got {0:?}")]
    ParamSyntax(String),
    /// A recorded port trace cannot be co-simulated (width, inout, mismatch with the export).
    #[error("co-sim trace of {module}: {detail}")]
    Trace { module: String, detail: String },
    /// Writing the Rust-side VCD of a trace failed.
    #[error("cannot write waveform {path}: {source}")]
    Wave {
        path: PathBuf,
        #[source]
        source: waves::WaveError,
    },
    /// Writing an exported file failed.
    #[error("cannot write {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Serializing the manifest failed.
    #[error("cannot serialize manifest: {0}")]
    Json(#[from] serde_json::Error),
}

/// Curated prelude: the blocks, their standard aliases and the export API.
pub mod prelude {
    pub use crate::cosim::{record, CosimFiles, CycleIo, PortTrace};
    pub use crate::credit_counter::{CreditCounter4Rtl, CreditCounter8Rtl, CreditCounterRtl};
    pub use crate::export::{
        blocks, boxed, export_all, select, verilog_of, BlockDef, BlockInfo, ExportFilter, Manifest,
        ModelDomain, ParamSet, PortDir, PortInfo, Recorder, REGISTRY,
    };
    pub use crate::noc::route_compute::{RouteCompute3Rtl, RouteComputeRtl};
    pub use crate::noc::router_ctrl::{RouterCtrl2Rtl, RouterCtrl4Rtl, RouterCtrlParams, RouterCtrlRtl};
    pub use crate::pkg::ucie_crc::{UcieCrc32Rtl, UcieCrc32x1088Rtl, UcieCrc32x64Rtl};
    pub use crate::pkg::ucie_replay::{UcieReplay8Rtl, UcieReplayRtl, UcieReplayState};
    pub use crate::rr_arbiter::{RrArbiter10Rtl, RrArbiter5Rtl, RrArbiterRtl};
    pub use crate::RtlError;
}
