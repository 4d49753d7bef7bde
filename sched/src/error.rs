//! The one error type of the `sched` crate. Every public function that can refuse its input
//! returns [`Error`]; each variant carries what the error is about — the field or argument,
//! the trace line, the IO-die input — so a caller can report it or match on it. The module
//! error types ([`TraceError`] with its line, [`GenCfgError`], [`BalanceError`], [`EplbError`],
//! [`MapError`] with their field, [`IoDieError`] with its EIT/request detail) are the
//! variants' payloads and convert with `?`.

pub use crate::balance::{BalanceError, EplbError};
pub use crate::pkg::iodie::IoDieError;
pub use crate::trace::TraceError;
pub use crate::wafer::MapError;
pub use crate::workload::GenCfgError;

/// An input `sched` refuses. Its `Display` is the one line a user reads.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// A field (or argument) and why it is refused: "experts: 0 outside 1..=65535".
    #[error("{field}: {msg}")]
    Field { field: String, msg: String },
    /// A field, the value given and why it is refused: "gpu.ib_gbps = -1: must be ...".
    #[error("{field} = {value}: {msg}")]
    Value { field: String, value: String, msg: String },
    /// A model name no preset answers to; `known` lists the presets.
    #[error("unknown model {name:?}; known: {known}")]
    UnknownModel { name: String, known: String },
    /// An input as a whole does not fit the request (`about` names the input: "trace").
    #[error("{msg}")]
    Mismatch { about: &'static str, msg: String },
    /// A trace line (or the trace file).
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// A routing-generator or scenario config field.
    #[error(transparent)]
    Gen(#[from] GenCfgError),
    /// A balancer (NI-Balancer, MoE-GPS, Sem-MoE) argument or config field.
    #[error(transparent)]
    Balance(#[from] BalanceError),
    /// An EPLB argument.
    #[error(transparent)]
    Eplb(#[from] EplbError),
    /// A wafer mapping input (`tp`, `dp`, `wafer`, `routing`, ...).
    #[error(transparent)]
    Map(#[from] MapError),
    /// IO-die scheduler input (EIT entries, requests, slots).
    #[error(transparent)]
    IoDie(#[from] IoDieError),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn field(field: impl Into<String>, msg: impl Into<String>) -> Self {
        Error::Field { field: field.into(), msg: msg.into() }
    }

    pub fn value(field: impl Into<String>, value: impl std::fmt::Display, msg: impl Into<String>) -> Self {
        Error::Value { field: field.into(), value: value.to_string(), msg: msg.into() }
    }

    pub fn mismatch(about: &'static str, msg: impl Into<String>) -> Self {
        Error::Mismatch { about, msg: msg.into() }
    }

    /// The field, argument or input the error is about ("" when the error is about a trace
    /// line or an IO-die entry: see the variant).
    pub fn about(&self) -> String {
        match self {
            Error::Field { field, .. } | Error::Value { field, .. } => field.clone(),
            Error::UnknownModel { .. } => "model".into(),
            Error::Mismatch { about, .. } => (*about).into(),
            Error::Gen(e) => e.field.clone(),
            Error::Balance(e) => e.field.into(),
            Error::Eplb(e) => e.arg.name().into(),
            Error::Map(e) => e.field.clone(),
            Error::Trace(_) | Error::IoDie(_) => String::new(),
        }
    }
}
