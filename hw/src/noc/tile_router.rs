//! The router of a mesh tile as the mesh sees it: [`RouterModel`], implemented by the CL
//! model [`RouterCl`] and by stand-ins from other crates — the rust-hdl RTL router runs in
//! the mesh this way (`waferstream noc --rtl router`, `rtl::noc::router_swap`) without `hw`
//! depending on rust-hdl. The stand-in is built by a [`RouterFactory`] handed to
//! [`super::Mesh::with_rtl`] in a [`NocRtl`] (the package's `PkgRtl` pattern).

use super::config::{CfgError, RouterCfg};
use super::router::{RouterCl, RouterPorts, RouterStats};
use crate::harness::{Cycle, LinkArena, Probe};
use super::flit::{Credit, Flit};

/// A tile's router: one cycle of evaluation on the mesh links, and what the mesh reads back
/// (occupancy for the busy/fast-forward decision, the watchdog's waits, statistics, the
/// credit-conservation check's probes, waveforms and line traces).
pub trait RouterModel: Probe + std::fmt::Display + Send {
    /// One router cycle (see [`RouterCl::eval`]): flits moved, and whether anything was sent.
    ///
    /// # Safety
    /// As [`RouterCl::eval`]: called by the engine in cycle `now`, the model the only
    /// sender/receiver of the links named in its ports.
    unsafe fn eval(&mut self, now: Cycle, flits: &LinkArena<Flit>, credits: &LinkArena<Credit>) -> (u64, bool);
    /// Flits held in the input buffers.
    fn occupancy(&self) -> u32;
    /// Since when the longest-waiting front flit has waited (`NEVER` if empty).
    fn oldest_front(&self) -> Cycle;
    /// Event counters since construction.
    fn stats(&self) -> RouterStats;
    /// Flits in input VC `vc` of `port`.
    fn vc_occupancy(&self, port: usize, vc: usize) -> usize;
    /// Credits of output VC `vc` of `port`.
    fn credits(&self, port: usize, vc: usize) -> u16;
    /// The watchdog's lines on blocked buffers and waiting packets (see
    /// [`RouterCl::blocked_report`]).
    fn blocked_report(&self, scope: &str, out: &mut Vec<(Cycle, String)>, waiting: &mut Vec<(Cycle, String)>);
}

impl RouterModel for RouterCl {
    unsafe fn eval(&mut self, now: Cycle, flits: &LinkArena<Flit>, credits: &LinkArena<Credit>) -> (u64, bool) {
        // SAFETY: forwarded under the caller's contract.
        unsafe { RouterCl::eval(self, now, flits, credits) }
    }
    fn occupancy(&self) -> u32 {
        RouterCl::occupancy(self)
    }
    fn oldest_front(&self) -> Cycle {
        RouterCl::oldest_front(self)
    }
    fn stats(&self) -> RouterStats {
        self.stats
    }
    fn vc_occupancy(&self, port: usize, vc: usize) -> usize {
        RouterCl::vc_occupancy(self, port, vc)
    }
    fn credits(&self, port: usize, vc: usize) -> u16 {
        RouterCl::credits(self, port, vc)
    }
    fn blocked_report(&self, scope: &str, out: &mut Vec<(Cycle, String)>, waiting: &mut Vec<(Cycle, String)>) {
        RouterCl::blocked_report(self, scope, out, waiting)
    }
}

/// Builds a tile's router stand-in: (router id, mesh side k, router config, serialization
/// cycles, ports). A configuration the stand-in cannot model is refused with the field.
pub type RouterFactory = fn(u32, u32, &RouterCfg, u32, RouterPorts) -> Result<Box<dyn RouterModel>, CfgError>;

/// Blocks of the NoC run by a stand-in instead of their CL model (default: none).
#[derive(Debug, Clone, Copy, Default)]
pub struct NocRtl {
    /// Every tile's router.
    pub router: Option<RouterFactory>,
}
