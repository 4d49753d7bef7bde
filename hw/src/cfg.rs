//! The one config-error type of every CL block's config struct (`<Block>Cfg::validate`).

/// A config value that cannot be simulated: names the field path and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("config field `{field}`: {reason}")]
pub struct CfgError {
    pub field: String,
    pub reason: String,
}

impl CfgError {
    /// The same error with its field path under `prefix` (a section of a larger config).
    pub fn under(mut self, prefix: &str) -> Self {
        self.field = format!("{prefix}.{}", self.field);
        self
    }
}

/// `Err(CfgError)` for `field` with `reason`.
pub fn err<T>(field: &str, reason: impl Into<String>) -> Result<T, CfgError> {
    Err(CfgError { field: field.into(), reason: reason.into() })
}

/// The period in whole ps of a clock of `mhz` in 1..=10000 MHz, or an error naming `field`:
/// every harness tick is a whole number of ps, so a clock whose period is not (3 MHz:
/// 333333.33 ps) would have its waveform times and link latencies drift from the
/// frequency asked for. One check for every clock of the package and the wafer.
pub fn clock_period_ps(field: &str, mhz: f64) -> Result<u64, CfgError> {
    if !(mhz.is_finite() && (1.0..=10_000.0).contains(&mhz)) {
        return err(field, format!("must be within 1..=10000 MHz (got {mhz})"));
    }
    let p = 1e6 / mhz;
    if (p - p.round()).abs() > 1e-6 {
        return err(field, format!("{mhz} MHz has a period of {p:.4} ps; choose a clock whose period is a whole number of ps so every edge is exact (e.g. 1000, 800, 500, 250 or 1 MHz)"));
    }
    Ok(p.round() as u64)
}
