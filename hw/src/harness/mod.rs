//! The CL harness: what every timed block in waferstream is built on.
//!
//! * A module is registers + a next-state function, evaluated once per cycle of its clock.
//! * Modules talk only through [`Link`]s — registered channels with latency ≥ 1 cycle — and
//!   credits ([`crate::noc::credit::CreditCounterCl`]) for back-pressure. Because nothing a
//!   module writes in cycle *t* is visible to another module before *t + 1*, the order in which
//!   modules are evaluated inside a cycle cannot change any result; that is what makes the
//!   parallel stepper ([`engine`]) bit-identical to the serial one.
//! * Hardware state is bounded: every buffer is sized from the config at build time.
//! * Every register and port is traceable under a hierarchical name ([`trace`]).
//! * Idle cycles are skipped (fast-forward) only where nothing can change: see
//!   [`engine::Control`].
//! * A watchdog ([`watchdog`]) stops a run that makes no forward progress.
//! * Further clock domains: [`clock`].

pub mod barrier;
pub mod clock;
pub mod control;
pub mod engine;
pub mod link;
pub mod trace;
pub mod wake;
pub mod watchdog;

/// Global cycle count of the reference clock.
pub type Cycle = u64;

/// "No event scheduled" for next-event times.
pub const NEVER: Cycle = u64::MAX;

pub use barrier::PostBarrier;
pub use clock::{ClockDomain, ClockSet, DomainClock};
pub use control::{ClockedControl, C_AHEAD_PROGRESS, C_AHEAD_VISIT, C_FINISHED, C_STEADY_PROGRESS};
pub use engine::{run_partitions, Control, PartStatus, Partition, Step, N_COUNTERS};
pub use link::{AllToAll, LandingMarks, Link, LinkArena, LinkId, LinkRow};
pub use trace::{trace_to_end, ChangeLog, Probe, SignalDecl, SignalSink};
pub use wake::{WakeOffsets, WakeSet};
pub use watchdog::{Watchdog, WatchdogReport};
