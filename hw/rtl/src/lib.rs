//! RTL level (S1): rust-hdl `LogicBlock`s for the blocks that are synthesized, and their
//! Verilog export. Each block is the twin of a CL model in the `hw` crate and is run in
//! lockstep against it by the `tests/rtl_<area>_<block>.rs` suites.
//!
//! Blocks: [`rr_arbiter::RrArbiterRtl`] (twin of `hw::noc::arbiter::RrArbiterCl`),
//! [`credit_counter::CreditCounterRtl`] (twin of `hw::noc::credit::CreditCounterCl`),
//! [`pkg::ucie_replay::UcieReplayRtl`] (twin of the replay controller of
//! `hw::pkg::ucie::UcieAdapterCl`) and [`pkg::ucie_crc::UcieCrc32Rtl`] (its CRC-32).

pub mod credit_counter;
pub mod export;
pub mod pkg;
pub mod rr_arbiter;

use std::path::PathBuf;

/// Errors of the RTL crate (one enum per crate, S2).
#[derive(Debug, thiserror::Error)]
pub enum RtlError {
    /// rust-hdl's structural checks (connectivity, write-before-read) rejected a block.
    #[error("rust-hdl check failed for block {block}: {detail}")]
    Check { block: String, detail: String },
    /// No standard block with this export name.
    #[error("unknown RTL block {0:?}")]
    UnknownBlock(String),
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
    pub use crate::credit_counter::{CreditCounter4Rtl, CreditCounter8Rtl, CreditCounterRtl};
    pub use crate::export::{
        blocks, export_all, verilog_of, BlockInfo, Manifest, PortDir, PortInfo,
    };
    pub use crate::pkg::ucie_crc::{UcieCrc32Rtl, UcieCrc32x1088Rtl, UcieCrc32x64Rtl};
    pub use crate::pkg::ucie_replay::{UcieReplay8Rtl, UcieReplayRtl, UcieReplayState};
    pub use crate::rr_arbiter::{RrArbiter10Rtl, RrArbiter5Rtl, RrArbiterRtl};
    pub use crate::RtlError;
}
