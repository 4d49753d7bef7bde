//! Shared helpers for the RTL test suites: the CL golden models, a direct-drive stepper for
//! rust-hdl blocks and scratch directories. The tool-backed checks of the exported Verilog
//! (lint, Icarus co-sim, wave diff, yosys) are one mechanism, `scripts/verilog-check.sh`, run
//! by `tests/rtl_verilog_check.rs`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use rust_hdl::prelude::Block;

// The CL golden models: the very structs the mesh router uses.
#[allow(unused_imports)] // each test binary uses one of the two
pub use hw::noc::{arbiter, credit};

/// Settles combinational logic after inputs changed (rust-hdl's own fixpoint loop).
pub fn settle<U: Block>(uut: &mut U) {
    rtl::cosim::settle(uut).unwrap();
}

/// A fresh per-test scratch directory under cargo's target tmpdir.
pub fn scratch_dir(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("rtl")
        .join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
