//! The FSE-DP chiplet package (SPEC §3, seeds/expert-streaming.txt): one file per block.
//! See docs/architecture.md "The chiplet package".
//!
//! Blocks: the PE array (`pe_array`), the micro-slice ring buffer (`ring`), the DDR channel
//! (`ddr`), the UCIe adapter (`ucie`), the D2D engine (`ni`), the chiplet controller
//! (`chiplet`), the IO-die scheduler (`iodie`) and the Rule-5 load arbiter (`rule5`), with
//! the trajectories they follow (`traj`). The package system: one chiplet with its glue
//! (`tile`), what the partitions share (`wires`), the top that steps and runs them
//! (`package`) and its construction (`builder`); its input (`layer`, `plan`), output
//! (`result`, `timeline`), configuration (`config`) and the multi-layer session (`session`).
//! The files import each other as a DAG (hw/tests/module_dag.rs).

pub mod builder;
pub mod chiplet;
pub mod config;
pub mod ddr;
pub mod iodie;
pub mod layer;
pub mod ni;
pub mod package;
pub mod pe_array;
pub mod plan;
pub mod result;
pub mod ring;
pub mod rule5;
pub mod session;
pub mod tile;
pub mod timeline;
pub mod traj;
pub mod ucie;
pub mod wires;
