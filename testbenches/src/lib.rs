//! Regression testbenches of waferstream, their runner, and the fuzz harness.
//!
//! Each [`regress::Case`] is a named, self-checking testbench; `waferstream regress` runs them
//! with filters, prints a pass/fail table and writes JUnit XML. The same cases run under
//! `cargo test` (tests/regress.rs), so CI and a user's bench run the very same checks.
//! [`fuzz`] is the seeded-mutation runner behind `tests/fuzz.rs` and the CLI fuzz target.

pub mod cases;
pub mod error;
pub mod fuzz;
pub mod regress;
pub mod run;

pub use error::{Error, Result};
