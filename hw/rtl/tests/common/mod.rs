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

/// The compared ports of a lockstep run, cycle by cycle, for both models: on a mismatch
/// [`LockstepTrace::dump`] writes `<test>.cl.vcd` and `<test>.rtl.vcd` (same signal names,
/// cycle i at i ns) so the two can be opened side by side or compared with `waferstream wave
/// diff`. Bounded: the last `keep` cycles are kept.
pub struct LockstepTrace {
    ports: Vec<(String, u32)>,
    first: u64,
    cl: std::collections::VecDeque<Vec<u64>>,
    rtl: std::collections::VecDeque<Vec<u64>>,
    keep: usize,
}

impl LockstepTrace {
    pub fn new<S: AsRef<str>>(ports: &[(S, u32)]) -> Self {
        LockstepTrace {
            ports: ports.iter().map(|(n, w)| (n.as_ref().to_string(), *w)).collect(),
            first: 0,
            cl: Default::default(),
            rtl: Default::default(),
            keep: 20_000,
        }
    }

    /// Records one cycle's values (port order as declared).
    pub fn push(&mut self, cl: Vec<u64>, rtl: Vec<u64>) {
        if self.cl.len() == self.keep {
            self.cl.pop_front();
            self.rtl.pop_front();
            self.first += 1;
        }
        self.cl.push_back(cl);
        self.rtl.push_back(rtl);
    }

    /// Writes both VCDs under the scratch directory of `test`; returns their paths as text
    /// for the failure message.
    pub fn dump(&self, test: &str) -> String {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("rtl").join("mismatch");
        let _ = std::fs::create_dir_all(&dir);
        let mut paths = Vec::new();
        for (side, rows) in [("cl", &self.cl), ("rtl", &self.rtl)] {
            let path = dir.join(format!("{test}.{side}.vcd"));
            let decls: Vec<waves::SignalDecl> = self
                .ports
                .iter()
                .map(|(n, w)| waves::SignalDecl::new(["lockstep"], n.as_str(), (*w).clamp(1, 64)))
                .collect();
            let written = (|| -> Result<(), waves::WaveError> {
                let mut w = waves::WaveWriter::create(&path, waves::WaveFormat::Vcd, 1000, &decls, &waves::WaveFilter::default())?;
                for (i, row) in rows.iter().enumerate() {
                    for (sig, &v) in row.iter().enumerate() {
                        w.change(self.first + i as u64, sig, v)?;
                    }
                }
                w.finish(self.first + rows.len() as u64)
            })();
            paths.push(match written {
                Ok(()) => path.display().to_string(),
                Err(e) => format!("(VCD not written: {e})"),
            });
        }
        format!("waveforms: {} {}", paths[0], paths[1])
    }
}
