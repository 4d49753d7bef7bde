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
