//! What every partition of a package run shares: the wires (the link arenas, written and
//! read under the harness's link protocol) and the run's read-only context (clocks, the
//! trajectories, micro-slice sizes, the functional-mode data).

use sched::pkg::moe::ExpertWeights;

use super::chiplet::FreeReport;
use super::ddr::{DdrReq, DdrResp};
use super::iodie::SchedMsgCl;
use super::ni::PayloadPools;
use super::ring::SlotTag;
use super::traj::PkgTraj;
use std::sync::Arc;

use crate::harness::{AllToAll, DomainClock, LandingMarks, LinkArena};
use crate::noc::flit::{Credit, Flit};

/// Link arenas of the package (shared by all partitions under the link protocol).
pub struct PkgWires {
    /// Per tile, whether anything lands on it from outside the tile in a tick (every link
    /// into a tile from a neighbour, the IO die or the sideband stamps it).
    pub inbox: Arc<LandingMarks>,
    pub flits: LinkArena<Flit>,
    pub credits: LinkArena<Credit>,
    pub msgs: LinkArena<SchedMsgCl>,
    pub done: LinkArena<u16>,
    pub ddr_req: LinkArena<DdrReq>,
    pub ddr_resp: LinkArena<DdrResp>,
    /// Control sideband: a micro-slice handed to the next station (deadlock escape).
    pub handoff: AllToAll<SlotTag>,
    /// Control sideband, flow control: credits and fetches (a member reserved a slot for the
    /// slice), and helpers' slot requests.
    pub fetch: AllToAll<SlotTag>,
    pub slot_req: AllToAll<SlotTag>,
    /// Rule 5: free-slot reports to the IO die's load arbiter and its load assignments.
    pub status: LinkArena<FreeReport>,
    pub loads: LinkArena<SlotTag>,
    pub pools: PayloadPools,
}

/// Read-only context of a run.
pub struct PkgCtx {
    pub traj: PkgTraj,
    pub core: DomainClock,
    pub ucie: DomainClock,
    pub ddr: DomainClock,
    /// The adapters may run their edge between two core edges at the first: the clocks
    /// allow it ([`crate::pkg::config::PkgTiming::ucie_runs_ahead`]) and the wire is
    /// error-free (`UcieAdapterCl::eval_ahead`).
    pub ucie_ahead: bool,
    pub d_model: u32,
    pub micro_slices: u16,
    /// FFN columns of micro-slice k.
    pub slice_f: Vec<u32>,
    /// Bytes of micro-slice k (3·d_model·f_k).
    pub slice_bytes: Vec<u32>,
    /// Largest micro-slice (a ring slot).
    pub slot_bytes: usize,
    pub act_bytes: u32,
    pub out_bytes: u32,
    /// Bytes of a DDR data burst and of a D2D flit (timeline counters).
    pub ddr_burst_bytes: u64,
    pub flit_bytes: u64,
    /// Functional mode: activations and the DDR image.
    pub func: Option<FuncData>,
}

/// Functional-mode data: token activations (T×d_model) and every expert's micro-slices as
/// bytes (the DDR image, the same in every chiplet's DDR).
pub struct FuncData {
    pub x: Vec<i8>,
    pub image: Vec<Vec<Vec<u8>>>,
    pub weights: Vec<ExpertWeights>,
}
