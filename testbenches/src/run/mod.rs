//! The run layer: every kind of run waferstream does, as a library call.
//!
//! A testbench, in hardware terms, instantiates a device, drives it with stimulus and
//! collects what comes out. Each module here is one such testbench for one system, and every
//! one has the same shape:
//!
//! 1. **build** from a validated config and an input ([`package::PackageInput::build`],
//!    [`wafer::WaferLayer::new`], [`balance::BalanceSetup::new`], … — every check that can
//!    fail happens here, before a cycle is simulated; bad input is [`Error::Input`]);
//! 2. **run** with one [`RunOptions`] (threads, fast-forward, max cycles, watchdog, progress,
//!    waveform sink);
//! 3. get a **typed result**, one per part of the run in [`Parts`] (a strategy, a mapping, a
//!    balancer; a part that fails does not stop the others), that merges across layers and
//!    iterations (`hw::pkg::result::PkgResult::merge`).
//!
//! | module | system | input | result |
//! |---|---|---|---|
//! | [`package`] | FSE-DP chiplet package, one strategy per part | routing trace (generated or loaded), sessions with token buffering | `hw::pkg::result::PkgResult` per strategy |
//! | [`wafer`] | wafer-scale die mesh, one mapping per part | one MoE layer's routing | `hw::wafer::result::WaferResult` per mapping |
//! | [`balance`] | the wafer over iterations with a balancer | per-iteration routing | per-balancer series |
//! | [`gps`] | MoE-GPS prediction strategies on the wafer | skew × bandwidth grid | one point per cell |
//! | [`semmoe`] | Sem-MoE co-scheduling, FL rates then the wafer | clustered routing | rates and cycles per scheme |
//! | [`sweep`] | a grid of package scenarios on all cores | grid TOML | one JSON line per point |
//! | [`scenario`] | the `run` scenario file (`[package]` + `[workload]`) | scenario TOML | the package results |
//!
//! Defaults and accepted ranges of every parameter a run takes live in [`limits`], once.
//! The CLI (`src/cli`) only parses flags into these types, calls, and prints;
//! `examples/package_layer.rs` and `examples/wafer_layer.rs` in the repository make the
//! same calls from a few dozen lines of Rust:
//!
//! ```no_run
//! use hw::pkg::config::{PkgCfg, Strategy};
//! use testbenches::run::{package::PackageInput, RunOptions};
//!
//! let input = PackageInput { model: Some("qwen3-30b-a3b".into()), tokens: Some(32), ..Default::default() };
//! let run = input.build(PkgCfg::default(), vec![Strategy::Ep, Strategy::A3], Default::default())?;
//! let parts = run.run(&RunOptions::default());
//! for (strategy, r) in &parts.ok {
//!     println!("{}: {} cycles", strategy.name(), r.latency_cycles);
//! }
//! # Ok::<(), testbenches::Error>(())
//! ```

pub mod limits;

pub mod balance;
pub mod bench;
pub mod gps;
pub mod package;
pub mod reproduce;
pub mod scenario;
pub mod semmoe;
pub mod sweep;
pub mod wafer;

use std::path::{Path, PathBuf};

pub use crate::error::{Error, Result};

/// Where a run writes its waveforms. A run of several parts (strategies, mappings) writes
/// one file per part, `STEM-<part>.EXT` ([`WaveSink::part_path`]); a run of one part writes
/// `path` itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaveSink {
    pub path: PathBuf,
    pub format: waves::WaveFormat,
}

impl WaveSink {
    /// A VCD at `path` (or one per part, see [`WaveSink::part_path`]).
    pub fn vcd(path: impl Into<PathBuf>) -> Self {
        WaveSink { path: path.into(), format: waves::WaveFormat::Vcd }
    }

    /// An FST at `path` (or one per part, see [`WaveSink::part_path`]).
    pub fn fst(path: impl Into<PathBuf>) -> Self {
        WaveSink { path: path.into(), format: waves::WaveFormat::Fst }
    }

    /// The file of part `part` of a run: `STEM-<part>.EXT` when the run has several parts,
    /// the sink's own path when alone.
    pub fn part_path(&self, part: &str, several: bool) -> PathBuf {
        part_path(&self.path, part, several)
    }
}

/// `STEM-<part>.EXT` beside `base` when `several`, else `base` (see [`WaveSink::part_path`]).
pub fn part_path(base: &Path, part: &str, several: bool) -> PathBuf {
    if !several {
        return base.to_path_buf();
    }
    let stem = base.file_stem().map(|x| x.to_string_lossy().to_string()).unwrap_or_default();
    let ext = base.extension().map(|x| format!(".{}", x.to_string_lossy())).unwrap_or_default();
    base.with_file_name(format!("{stem}-{part}{ext}"))
}

/// How a run is simulated, the same struct for every system. `None` keeps the config's own
/// value (the package's `[sim]` table) or, for systems without one, the default in
/// [`limits`]. Precedence: a flag (set here by the CLI) > the config file > the default.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Worker threads of one simulation (results are identical for any count).
    pub threads: Option<u32>,
    /// Independent layer batches of one package strategy simulated at once (the package's
    /// `sim.batch_jobs`; 0 = all cores). Results are identical for any count. Callers that
    /// already run points in parallel (`sweep`, `bench`) pass 1.
    pub batch_jobs: Option<u32>,
    /// `Some(false)` steps every edge (results are identical; for checking).
    pub fast_forward: Option<bool>,
    /// Stop (an error) after this many cycles of one layer.
    pub max_cycles: Option<u64>,
    /// Stop (an error with a state dump) after this many cycles without progress.
    pub watchdog_cycles: Option<u64>,
    /// Draw a progress bar on stderr (only on a terminal) for runs of many steps.
    pub progress: bool,
    /// Print a line per file written (`wrote PATH`) on stdout.
    pub verbose: bool,
    /// Waveforms of the run (the first layer batch of each part).
    pub waves: Option<WaveSink>,
    /// Cores a caller that runs several simulations at once has left idle (`sweep` when it
    /// has no point left to start): a package strategy whose layer batches are independent
    /// borrows them batch window by batch window. Results are identical with and without.
    pub spare: Option<std::sync::Arc<SpareCores>>,
}

/// Idle cores, lent between the simulations a caller runs at once: a `sweep` worker with no
/// point left to start gives its core here, and a running point whose layer batches do not
/// depend on each other takes what is there for its next window of batches and gives it
/// back after (so a sweep's last, long points finish on every core, not on one).
#[derive(Debug, Default)]
pub struct SpareCores(std::sync::atomic::AtomicUsize);

impl SpareCores {
    /// Takes every spare core (0 if none).
    pub fn take_all(&self) -> usize {
        self.0.swap(0, std::sync::atomic::Ordering::AcqRel)
    }

    /// Gives `n` cores back (or for the first time).
    pub fn give(&self, n: usize) {
        if n > 0 {
            self.0.fetch_add(n, std::sync::atomic::Ordering::AcqRel);
        }
    }

    /// Takes every spare core until the returned loan drops, which gives them back: also
    /// when the work done with them panics (a sweep contains a point's panic and goes on, and
    /// must not go on without the cores).
    pub fn lend(&self) -> LentCores<'_> {
        LentCores { from: self, n: self.take_all() }
    }
}

/// Cores taken from [`SpareCores::lend`], given back on drop.
#[derive(Debug)]
pub struct LentCores<'a> {
    from: &'a SpareCores,
    /// How many were taken.
    pub n: usize,
}

impl Drop for LentCores<'_> {
    fn drop(&mut self) {
        self.from.give(self.n);
    }
}

/// One part of a multi-part run (a strategy, a mapping, a balancer): its result, or why it
/// failed. The other parts run whatever one of them does.
#[derive(Debug)]
pub struct Part<K, R> {
    /// Which part: a `Strategy`, a `MappingKind`, a `BalancerKind`.
    pub key: K,
    pub result: Result<R>,
}

/// The parts of a run split into the finished ones and the failed ones.
#[derive(Debug)]
pub struct Parts<K, R> {
    /// The finished parts and their results, in the run's order.
    pub ok: Vec<(K, R)>,
    /// The parts that failed and why (the CLI's exit code 3 when some finished).
    pub failed: Vec<(K, Error)>,
}

impl<K, R> FromIterator<Part<K, R>> for Parts<K, R> {
    fn from_iter<I: IntoIterator<Item = Part<K, R>>>(it: I) -> Self {
        let mut p = Parts { ok: Vec::new(), failed: Vec::new() };
        for x in it {
            match x.result {
                Ok(r) => p.ok.push((x.key, r)),
                Err(e) => p.failed.push((x.key, e)),
            }
        }
        p
    }
}

/// Runs `f` catching a panic: a model bug fails this part, not the others ("NAME: panicked").
pub fn contained<R>(name: &str, f: impl FnOnce() -> Result<R>) -> Result<R> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|_| Err(Error::Run(format!("{name}: panicked (see above)"))))
}

/// Runs `f` on every item on up to `threads` workers (scoped threads taking the next item
/// in order) and returns the results in item order. After an item fails no worker takes a
/// new one: every item before the first failure has run (they were taken before it), the
/// ones not taken are `None`. So the first error in item order is the one a loop would have
/// stopped at.
pub fn run_in_order<T: Sync, R: Send>(items: &[T], threads: usize, f: impl Fn(&T) -> Result<R> + Sync) -> Vec<Option<Result<R>>> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let out: Vec<std::sync::Mutex<Option<Result<R>>>> = items.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|sc| {
        for _ in 0..threads.clamp(1, items.len().max(1)) {
            // The stack of a sweep worker (a layer batch runs as deep there as on the main
            // thread); a sweep point's batches may run here on lent cores.
            let b = std::thread::Builder::new().stack_size(8 << 20);
            b.spawn_scoped(sc, || {
                while !failed.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let r = f(item);
                    failed.fetch_or(r.is_err(), Ordering::Relaxed);
                    *out[i].lock().expect("no panic while held") = Some(r);
                }
            })
            .expect("a worker thread starts");
        }
    });
    out.into_iter().map(|m| m.into_inner().expect("no panic while held")).collect()
}

/// Creates the parent directory of an output file.
pub fn ensure_parent(p: &Path) -> Result<()> {
    if let Some(d) = p.parent() {
        if !d.as_os_str().is_empty() {
            std::fs::create_dir_all(d).map_err(|e| Error::io(d, format!("cannot create directory: {e}")))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::SpareCores;

    /// Lent cores come back when the loan ends, and also when the work done with them
    /// panics (the sweep contains the panic and goes on).
    #[test]
    fn lent_cores_come_back_even_after_a_panic() {
        let spare = SpareCores::default();
        spare.give(2);
        {
            let l = spare.lend();
            assert_eq!(l.n, 2);
            assert_eq!(spare.take_all(), 0, "taken while lent");
        }
        assert_eq!(spare.take_all(), 2);
        spare.give(2);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _l = spare.lend();
            panic!("a batch panics");
        }));
        assert!(r.is_err());
        assert_eq!(spare.take_all(), 2, "cores lost to a panic");
    }
}
