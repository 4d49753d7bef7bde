//! The FSE-DP chiplet package (SPEC §3, seeds/expert-streaming.txt): one file per block.
//! See docs/architecture.md "The chiplet package".

pub mod chiplet;
pub mod config;
pub mod ddr;
pub mod iodie;
pub mod ni;
pub mod package;
pub mod pe_array;
pub mod plan;
pub mod result;
pub mod ring;
pub mod rule5;
pub mod session;
pub mod timeline;
pub mod ucie;
