//! Regression testbenches of waferstream and their runner.
//!
//! Each [`regress::Case`] is a named, self-checking testbench; `waferstream regress` runs them
//! with filters, prints a pass/fail table and writes JUnit XML. The same cases run under
//! `cargo test` (tests/regress.rs), so CI and a user's bench run the very same checks.

pub mod cases;
pub mod fuzz;
pub mod regress;
