//! Every run of waferstream as a library call, the regression testbenches, their runner,
//! and the fuzz harness.
//!
//! * [`run`] — the run layer: one module per system ([`run::package`], [`run::wafer`],
//!   [`run::balance`], [`run::gps`], [`run::semmoe`], [`run::sweep`], [`run::scenario`]),
//!   each built from a config and an input (every check before a cycle is simulated), run
//!   with one [`run::RunOptions`], and returning typed results ([`run::Parts`] when a run
//!   has several parts) that merge across layers and iterations. Defaults and ranges live
//!   in [`run::limits`]. The CLI (`src/cli`) only parses flags, calls these and prints;
//!   `examples/package_layer.rs` and `examples/wafer_layer.rs` in the repository show
//!   them driven from Rust.
//! * [`Error`] — the crate's one error type: bad input ([`Error::Input`], naming the field
//!   or flag), a file ([`Error::Io`]), a run that stopped ([`Error::Run`]); the model
//!   crates' errors (`sched::Error`, `hw::Error`, `waves::WaveError`) convert into it with
//!   `?`, their text unchanged.
//! * [`regress`] — each [`regress::Case`] (in [`cases`]) is a named, self-checking
//!   testbench; `waferstream regress` runs them with filters, prints a pass/fail table and
//!   writes JUnit XML. The same cases run under `cargo test` (tests/regress.rs), so CI and a
//!   user's bench run the very same checks.
//! * [`fuzz`] — the seeded-mutation runner behind `tests/fuzz.rs` and the CLI fuzz target.

pub mod cases;
pub mod error;
pub mod fuzz;
pub mod regress;
pub mod run;

pub use error::{Error, Result};
