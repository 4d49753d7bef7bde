//! The one error type of the testbenches crate (the run layer, the regression cases, the
//! fuzz harness): what went wrong and where — the field, flag or line of bad input, the file
//! that could not be written, or the part of a run that stopped.

use std::path::Path;

/// An error of a run. Its `Display` is the one line the CLI prints after `error: `.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// Bad input, found before anything is simulated: the field, flag or line, and why
    /// ("FIELD: MSG"; just MSG when the error names no field of its own, as the model
    /// crates' errors, whose text already says what they are about).
    #[error("{}", input_line(field, msg))]
    Input { field: String, msg: String },
    /// A file that could not be read or written.
    #[error("{path}: {msg}")]
    Io { path: String, msg: String },
    /// A run that stopped (watchdog, max cycles, a failed check, a panicking part), with the
    /// model's own report (which may span several lines: a watchdog's state dump).
    #[error("{0}")]
    Run(String),
}

/// The result of every run-layer call.
pub type Result<T> = std::result::Result<T, Error>;

fn input_line(field: &str, msg: &str) -> String {
    if field.is_empty() {
        msg.to_string()
    } else {
        format!("{field}: {msg}")
    }
}

impl Error {
    /// Bad input: `field` names the field, flag or line (empty: the message says it all).
    pub fn input(field: impl Into<String>, msg: impl std::fmt::Display) -> Self {
        Error::Input { field: field.into(), msg: msg.to_string() }
    }

    /// A file that could not be read or written, and why.
    pub fn io(path: &Path, msg: impl Into<String>) -> Self {
        Error::Io { path: path.display().to_string(), msg: msg.into() }
    }

    /// The text without the field of an input error (for a caller that names the field
    /// itself, as the CLI's flag lists do); other errors' whole text.
    pub fn into_msg(self) -> String {
        match self {
            Error::Input { msg, .. } => msg,
            e => e.to_string(),
        }
    }

    /// Is this bad input (exit code 2) rather than a run that failed?
    pub fn is_input(&self) -> bool {
        matches!(self, Error::Input { .. })
    }
}

/// The errors of the model crates carry their own field or block; the run layer keeps their
/// text (the CLI's messages are unchanged by passing through here).
macro_rules! from_model_error {
    ($($t:ty => $variant:ident),* $(,)?) => {$(
        impl From<$t> for Error {
            fn from(e: $t) -> Self {
                from_model_error!(@make $variant, e)
            }
        }
    )*};
    (@make Input, $e:expr) => { Error::Input { field: String::new(), msg: $e.to_string() } };
    (@make Run, $e:expr) => { Error::Run($e.to_string()) };
}

/// A config field error keeps its field (`config field `X``) and its text.
impl From<hw::cfg::CfgError> for Error {
    fn from(e: hw::cfg::CfgError) -> Self {
        Error::Input { field: format!("config field `{}`", e.field), msg: e.reason }
    }
}

from_model_error! {
    hw::Error => Run,
    hw::noc::NocError => Run,
    hw::pkg::package::PkgError => Run,
    hw::wafer::wafer::WaferError => Run,
    sched::Error => Input,
    sched::trace::TraceError => Input,
    waves::WaveError => Run,
}

/// A generator config field error keeps its field and its text.
impl From<sched::workload::GenCfgError> for Error {
    fn from(e: sched::workload::GenCfgError) -> Self {
        Error::Input { field: format!("config field `{}`", e.field), msg: e.reason }
    }
}

/// Pre-formatted messages (the model crates' `String` errors) are carried as they are.
impl From<String> for Error {
    fn from(e: String) -> Self {
        Error::Run(e)
    }
}
