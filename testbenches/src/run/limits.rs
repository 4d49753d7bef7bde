//! Every default and accepted range of a run's parameters, in one place. The CLI's `--help`
//! quotes these; the run layer checks against them before simulating.

use std::ops::RangeInclusive;

use crate::error::{Error, Result};

/// Zipf skew of generated routing (the generator's own bound, `sched::workload::GenCfg`).
pub const SKEW: RangeInclusive<f64> = 0.0..=16.0;
/// Default Zipf skew of generated routing.
pub const DEFAULT_SKEW: f64 = 1.0;

/// Wafer runs: cycles of one layer before the run stops with an error.
pub const WAFER_MAX_CYCLES: u64 = 1 << 40;
/// Wafer runs: cycles without progress before the watchdog stops the run.
pub const WAFER_WATCHDOG_CYCLES: u64 = 2_000_000;

/// `x` within `r` (and finite), or an input error naming `field`.
pub fn check_f64(field: &str, x: f64, r: RangeInclusive<f64>) -> Result<f64> {
    if x.is_finite() && r.contains(&x) {
        Ok(x)
    } else {
        Err(Error::input(field, format!("{x} outside {}..={}", r.start(), r.end())))
    }
}

/// `x` within `r`, or an input error naming `field`.
pub fn check_u64(field: &str, x: u64, r: RangeInclusive<u64>) -> Result<u64> {
    if r.contains(&x) {
        Ok(x)
    } else {
        Err(Error::input(field, format!("{x} outside {}..={}", r.start(), r.end())))
    }
}
