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
    /// Port name → column, for the name-keyed [`LockstepTrace::cmp`] form.
    index: std::collections::HashMap<String, usize>,
    /// The test name the VCDs are written under (name-keyed form).
    test: String,
    /// The cycle of the row being filled (name-keyed form).
    cycle: u64,
    first: u64,
    cl: std::collections::VecDeque<Vec<u64>>,
    rtl: std::collections::VecDeque<Vec<u64>>,
    keep: usize,
}

impl LockstepTrace {
    pub fn new<S: AsRef<str>>(ports: &[(S, u32)]) -> Self {
        LockstepTrace {
            ports: ports.iter().map(|(n, w)| (n.as_ref().to_string(), *w)).collect(),
            index: Default::default(),
            test: String::new(),
            cycle: 0,
            first: 0,
            cl: Default::default(),
            rtl: Default::default(),
            keep: 20_000,
        }
    }

    /// The name-keyed form, for suites whose compared ports depend on the case (the router's
    /// VCs, the UCIe adapter's optional timer): ports are declared on first use, each cycle's
    /// row starts as a copy of the previous one (a port not compared this cycle holds its
    /// value in the waveform), and [`LockstepTrace::cmp`] compares and records in one call.
    pub fn named(test: &str) -> Self {
        let mut t = LockstepTrace::new::<&str>(&[]);
        t.test = test.to_string();
        t
    }

    /// Starts the row of `cycle` (name-keyed form).
    pub fn cycle(&mut self, cycle: u64) {
        let row_cl = self.cl.back().cloned().unwrap_or_default();
        let row_rtl = self.rtl.back().cloned().unwrap_or_default();
        if self.cl.is_empty() {
            self.first = cycle;
        }
        self.push(row_cl, row_rtl);
        self.cycle = cycle;
    }

    /// Records `port` (`width` bits) of both models in this cycle's row and compares them; on
    /// a difference returns the message naming the test, cycle, port and both values, with
    /// the paths of the two VCDs it wrote.
    pub fn cmp(&mut self, port: &str, width: u32, cl: u64, rtl: u64) -> Result<(), String> {
        let col = match self.index.get(port) {
            Some(&c) => c,
            None => {
                self.ports.push((port.to_string(), width));
                self.index.insert(port.to_string(), self.ports.len() - 1);
                self.ports.len() - 1
            }
        };
        if self.cl.is_empty() {
            self.cycle(self.cycle);
        }
        for (rows, v) in [(&mut self.cl, cl), (&mut self.rtl, rtl)] {
            let row = rows.back_mut().expect("a row was started");
            if row.len() <= col {
                row.resize(col + 1, 0);
            }
            row[col] = v;
        }
        if cl == rtl {
            return Ok(());
        }
        Err(format!("{} cycle {} {port}: RTL {rtl} CL {cl}; {}", self.test, self.cycle, self.dump(&self.test)))
    }

    /// [`LockstepTrace::cmp`] for suites that stop at the first difference: panics with its
    /// message (cycle, port, both values, the two VCDs' paths).
    pub fn expect(&mut self, port: &str, width: u32, cl: u64, rtl: u64) {
        if let Err(e) = self.cmp(port, width, cl, rtl) {
            panic!("{e}");
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
                .map(|(n, w)| {
                    // VCD identifiers: "state.head" / "in 1 vc 0" become state_head / in_1_vc_0.
                    let id: String = n.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
                    waves::SignalDecl::new(["lockstep"], id.as_str(), (*w).clamp(1, 64))
                })
                .collect();
            let written = (|| -> Result<(), waves::WaveError> {
                let mut w = waves::WaveWriter::create(&path, waves::WaveFormat::Vcd, 1000, &decls, &waves::WaveFilter::default())?;
                for (i, row) in rows.iter().enumerate() {
                    // Rows of the name-keyed form may predate a port's first use: 0 there.
                    for sig in 0..self.ports.len() {
                        let bits = self.ports[sig].1.clamp(1, 64);
                        let mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
                        w.change(self.first + i as u64, sig, row.get(sig).copied().unwrap_or(0) & mask)?;
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
