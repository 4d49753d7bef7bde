//! The one error type of the `hw` crate at its boundary. Each system keeps its own error
//! with the detail only it has — the config field ([`CfgError`]), the watchdog's report of
//! blocked buffers and waiting packets ([`NocError`], [`PkgError`]), the dies not done
//! ([`WaferError`]) — and every one converts into [`Error`] with `?`; functions that are not
//! one system's (waveform sinks, clock domains, the controllers' traced runs) return
//! [`Error`] directly, naming the block they are about.

pub use crate::cfg::CfgError;
pub use crate::noc::NocError;
pub use crate::pkg::package::PkgError;
pub use crate::wafer::wafer::WaferError;

/// An error of a CL model: bad input (a config field, a layer that does not fit) or a run
/// that stopped (watchdog, max cycles, a waveform write, a failed check).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A config value that cannot be simulated: the field and why.
    #[error(transparent)]
    Cfg(#[from] CfgError),
    /// The mesh NoC.
    #[error(transparent)]
    Noc(#[from] NocError),
    /// The chiplet package.
    #[error(transparent)]
    Pkg(#[from] PkgError),
    /// The wafer.
    #[error(transparent)]
    Wafer(#[from] WaferError),
    /// An FL input the CL model hands to its twin (a trace, a mapping, a schedule).
    #[error(transparent)]
    Sched(#[from] sched::Error),
    /// A waveform sink that could not take a value change (`block`: the sink).
    #[error(transparent)]
    Wave(#[from] waves::WaveError),
    /// A block that refused its input or stopped: the block (`"clock"`, `"semmoe_lut"`,
    /// `"credit check"`, ...) and why.
    #[error("{block}: {msg}")]
    Block { block: String, msg: String },
    /// A name that is none of the known ones: what it names (`field`: `"balancer"`), the
    /// name given and the known names.
    #[error("unknown {field} {name:?} (known: {known})")]
    Unknown { field: String, name: String, known: String },
    /// A CL result that differs from its FL reference: where (`at`: a die, a micro-batch's
    /// chunk or token) and how.
    #[error("{at}: {msg}")]
    Mismatch { at: String, msg: String },
    /// A message already worded by a model (its text is the whole line).
    #[error("{0}")]
    Msg(String),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn block(block: impl Into<String>, msg: impl std::fmt::Display) -> Self {
        Error::Block { block: block.into(), msg: msg.to_string() }
    }
}

impl From<String> for Error {
    fn from(s: String) -> Self {
        Error::Msg(s)
    }
}

impl From<&str> for Error {
    fn from(s: &str) -> Self {
        Error::Msg(s.to_string())
    }
}
