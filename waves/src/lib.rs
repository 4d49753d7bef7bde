//! Waveforms for waferstream: streaming VCD/FST writers with scope globs and cycle
//! windows, a format-independent reader (`stats`, `diff`, `list_scopes`) built on `wellen`
//! behind bounded pre-checks of every input file, and property checkers that run on a
//! package or wafer dump (`check_dump`).
//!
//! Timestamps are always `cycle × period_ps` with a 1 ps timescale (DESIGN-NOTES S9), so
//! cycle-level dumps line up with RTL dumps in GTKWave/Surfer and can be diffed.
//!
//! ```no_run
//! use waves::prelude::*;
//! # fn main() -> waves::Result<()> {
//! let sigs = [SignalDecl::new(["uut", "fifo"], "occ", 4)];
//! let mut w = WaveWriter::create("fifo.fst".as_ref(), WaveFormat::Fst, 1000, &sigs, &WaveFilter::default())?;
//! w.change(3, 0, 1)?;
//! w.finish(10)?;
//! # Ok(()) }
//! ```

mod check;
mod filter;
mod reader;
mod vcd_check;
mod fst_check;
pub mod gtkw;
mod writer;

use std::path::{Path, PathBuf};

pub use check::{check_dump, check_package, CheckReport, CheckResult};
pub use filter::{CompiledFilter, WaveFilter};
pub use reader::{diff, list_scopes, stats, DiffResult, WaveDiff, WaveSummary};
pub use writer::WaveWriter;
pub use gtkw::write_gtkw;

/// The names most users need: `use waves::prelude::*;`.
pub mod prelude {
    pub use crate::{
        diff, list_scopes, stats, DiffResult, SignalDecl, WaveDiff, WaveError, WaveFilter,
        WaveFormat, WaveSummary, WaveWriter,
    };
}

pub type Result<T> = std::result::Result<T, WaveError>;

#[derive(Debug, thiserror::Error)]
pub enum WaveError {
    #[error("waveform I/O failed: {0}")]
    Io(#[from] std::io::Error),
    /// A waveform file could not be read back (wellen rejected it).
    #[error("cannot read waveform {path}: {what}")]
    Parse { path: PathBuf, what: String },
    /// Unsupported file type or content the writer/reader cannot represent.
    #[error("waveform format: {what}")]
    Format { what: String },
    /// Bad glob or window text; `what` names the offending text.
    #[error("wave filter: {what}")]
    Filter { what: String },
    /// A signal declaration the writer cannot emit (width, empty scope, duplicate name).
    #[error("signal declaration: {what}")]
    Signal { what: String },
}

impl WaveError {
    pub(crate) fn parse(path: &Path, what: impl std::fmt::Display) -> Self {
        WaveError::Parse {
            path: path.to_path_buf(),
            // One line: the reader's messages span several.
            what: what.to_string().lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(": "),
        }
    }
}

/// One traced signal: hierarchical scope path + name + bit width (1..=64).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SignalDecl {
    pub scope: Vec<String>,
    pub name: String,
    pub width: u32,
}

impl SignalDecl {
    pub fn new<S: Into<String>>(
        scope: impl IntoIterator<Item = S>,
        name: impl Into<String>,
        width: u32,
    ) -> Self {
        SignalDecl {
            scope: scope.into_iter().map(Into::into).collect(),
            name: name.into(),
            width,
        }
    }

    /// Scope path and name joined by '.', e.g. `top.mesh.r_3_4.in_p0.vc0.occ`.
    pub fn full_name(&self) -> String {
        let mut s = self.scope.join(".");
        if !s.is_empty() {
            s.push('.');
        }
        s.push_str(&self.name);
        s
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WaveFormat {
    Vcd,
    Fst,
}

impl WaveFormat {
    /// By file extension (`.vcd` / `.fst`, case-insensitive).
    pub fn from_path(p: &Path) -> Option<Self> {
        let ext = p.extension()?.to_str()?;
        if ext.eq_ignore_ascii_case("vcd") {
            Some(WaveFormat::Vcd)
        } else if ext.eq_ignore_ascii_case("fst") {
            Some(WaveFormat::Fst)
        } else {
            None
        }
    }
}
