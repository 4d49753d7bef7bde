//! The mapping controller (CL): given the mesh, TP, DP and the mapping kind, it fills the
//! tables the collective engines are programmed from — per die its TP group, ring rank and
//! FTD; per group its ring (rank → die); per FTD its members (group → die) — one entry per
//! cycle, by address arithmetic rather than by search. Its FL twin is `sched::wafer::map`; the
//! decisions must be equal (tests/wafer.rs checks every mesh up to 8×8 and the multi-wafer
//! cases), its cost is the cycles below.
//!
//! Micro-architecture, one state per phase:
//! 1. `Shape`: the tile-shape unit tries the widths w = 1..=n and keeps the most square
//!    `w × n/w` rectangle that divides the grid (ties → wider). Each candidate takes
//!    [`SHAPE_CYCLES`] cycles: its three divisions run on radix-2 sequential dividers (one
//!    quotient bit per cycle, 16-bit operands), `n / w` and `cols / w` in the first 16 cycles,
//!    `rows / (n / w)` in the next 16, and the candidate is compared in the last: 32·n cycles.
//!    (A first version tried one width per cycle on combinational dividers; its RTL closed at
//!    3 MHz on an ECP5 — two chained 16-bit dividers, 519 logic levels — for a controller
//!    that runs once per mapping.)
//! 2. `Ring`: the ring-order sequencer writes the ring ROM of the block grid (the comb cycle
//!    of `sched::wafer::ring_order`; a fixed function of the grid size, so a ROM) and its
//!    inverse, one cell per cycle.
//! 3. `Dies`: one die per cycle: block coordinates and the position inside the block give the
//!    group, the ring rank (ROM inverse) and the FTD; the die is written into its group's ring
//!    slot and its FTD's member slot.
//!
//! HER: the same on one wafer's grid (groups and FTDs of the other wafers are the same tables
//! offset by the wafer), then one cycle per die to replicate the tables across wafers.

use sched::wafer::{ring_order, Mapping, MappingKind, MapError, WaferGeom};

/// Cycles per candidate width of the shape search: two chained 16-step sequential divisions
/// (`n / w` beside `cols / w`, then `rows / (n / w)`).
pub const SHAPE_CYCLES: u32 = 32;

/// Controller state (the FSM's phase).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapState {
    Shape,
    Ring,
    Dies,
    Replicate,
    Done,
}

/// The mapping controller's registers and tables.
#[derive(Debug, Clone)]
pub struct MappingCtrlCl {
    pub kind: MappingKind,
    pub geom: WaferGeom,
    pub tp: u32,
    pub dp: u32,
    pub all_gather: bool,
    pub state: MapState,
    /// The grid the layout unit works on (a wafer's under HER) and the tile size it searches.
    grid: (u32, u32),
    n: u32,
    /// Shape search: candidate width, the dividers' step within it, and the best shape so far.
    w: u32,
    k: u32,
    pub shape: Option<(u32, u32)>,
    /// Ring ROM of the block (baseline: of the TP block) grid, and its inverse.
    ring: Vec<(u32, u32)>,
    ring_inv: Vec<u32>,
    /// Cursor of the Ring / Dies / Replicate phases.
    i: u32,
    /// The tables (the controller's outputs).
    pub group_of: Vec<u32>,
    pub rank_of: Vec<u32>,
    pub ftd_of: Vec<u32>,
    pub groups: Vec<Vec<u32>>,
    pub ftds: Vec<Vec<u32>>,
    pub cycles: u64,
}

impl MappingCtrlCl {
    /// Loads the controller's configuration registers; refuses what the FL refuses (same
    /// checks, same fields).
    pub fn new(kind: MappingKind, geom: WaferGeom, tp: u32, dp: u32, all_gather: bool) -> Result<Self, MapError> {
        // The parameter checks are the FL's (one place decides what is legal).
        sched::wafer::map(kind, geom, tp, dp, all_gather)?;
        let dies = geom.dies() as usize;
        let (grid, n) = match kind {
            MappingKind::Baseline => ((geom.cols(), geom.rows()), tp),
            MappingKind::Er => ((geom.cols(), geom.rows()), dp),
            MappingKind::Her => ((geom.die_cols, geom.die_rows), geom.dies_per_wafer() / tp),
        };
        let (ng, nf) = match kind {
            MappingKind::Her => (dp, geom.wafers()),
            _ => (dp, tp),
        };
        Ok(MappingCtrlCl {
            kind,
            geom,
            tp,
            dp,
            all_gather,
            state: MapState::Shape,
            grid,
            n,
            w: 1,
            k: 0,
            shape: None,
            ring: Vec::new(),
            ring_inv: Vec::new(),
            i: 0,
            group_of: vec![0; dies],
            rank_of: vec![0; dies],
            ftd_of: vec![0; dies],
            groups: vec![vec![0; tp as usize]; ng as usize],
            ftds: vec![vec![0; if kind == MappingKind::Her { geom.dies_per_wafer() as usize } else { dp as usize }]; nf as usize],
            cycles: 0,
        })
    }

    /// One clock cycle of the controller.
    pub fn step(&mut self) {
        if self.state == MapState::Done {
            return;
        }
        self.cycles += 1;
        let (cols, rows) = self.grid;
        match self.state {
            MapState::Shape => {
                // The dividers step; the candidate is decided at its last cycle.
                if self.k + 1 < SHAPE_CYCLES {
                    self.k += 1;
                    return;
                }
                self.k = 0;
                let (w, n) = (self.w, self.n);
                if n % w == 0 && cols % w == 0 && rows % (n / w) == 0 {
                    let h = n / w;
                    let better = match self.shape {
                        None => true,
                        Some((bw, bh)) => w.abs_diff(h) < bw.abs_diff(bh) || (w.abs_diff(h) == bw.abs_diff(bh) && w > bw),
                    };
                    if better {
                        self.shape = Some((w, h));
                    }
                }
                self.w += 1;
                if self.w > n {
                    let (bw, bh) = self.shape.expect("the FL accepted this tiling");
                    // Baseline rings run inside a TP block; ER rings over the grid of FTD blocks.
                    let (gw, gh) = if self.kind == MappingKind::Baseline { (bw, bh) } else { (cols / bw, rows / bh) };
                    self.ring = ring_order(gw, gh);
                    self.ring_inv = vec![0; (gw * gh) as usize];
                    self.i = 0;
                    self.state = MapState::Ring;
                }
            }
            MapState::Ring => {
                let (bw, _) = self.shape.unwrap();
                let gw = if self.kind == MappingKind::Baseline { bw } else { cols / bw };
                let (x, y) = self.ring[self.i as usize];
                self.ring_inv[(y * gw + x) as usize] = self.i;
                self.i += 1;
                if self.i as usize == self.ring.len() {
                    self.i = 0;
                    self.state = MapState::Dies;
                }
            }
            MapState::Dies => {
                let (bw, bh) = self.shape.unwrap();
                let d = self.i;
                let (x, y) = (d % cols, d / cols);
                let (bx, by, px, py) = (x / bw, y / bh, x % bw, y % bh);
                let (group, rank, ftd, member) = match self.kind {
                    // TP group = block (row-major); rank = position in the block's ring; FTD =
                    // position in the block (row-major); member index = group.
                    MappingKind::Baseline => {
                        let g = by * (cols / bw) + bx;
                        (g, self.ring_inv[(py * bw + px) as usize], py * bw + px, g)
                    }
                    // FTD = block (row-major); group = position in the block; rank = the block's
                    // place in the block-grid ring; member index = group.
                    MappingKind::Er | MappingKind::Her => {
                        let gw = cols / bw;
                        let g = py * bw + px;
                        (g, self.ring_inv[(by * gw + bx) as usize], by * gw + bx, g)
                    }
                };
                let id = if self.kind == MappingKind::Her { self.geom.global_of(0, d) } else { d };
                self.group_of[id as usize] = group;
                self.rank_of[id as usize] = rank;
                self.groups[group as usize][rank as usize] = id;
                if self.kind == MappingKind::Her {
                    self.ftd_of[id as usize] = 0;
                } else {
                    self.ftd_of[id as usize] = ftd;
                    self.ftds[ftd as usize][member as usize] = id;
                }
                self.i += 1;
                if self.i == cols * rows {
                    self.i = 0;
                    self.state = if self.kind == MappingKind::Her { MapState::Replicate } else { MapState::Done };
                }
            }
            MapState::Replicate => {
                // Die `i` of the whole system: copy wafer 0's entry at the same local position,
                // with the group offset by the wafer; the FTD is the wafer.
                let g = self.geom;
                let d = self.i;
                let (w, l) = (g.wafer_of(d), g.local_of(d));
                let src = g.global_of(0, l) as usize;
                let gpw = g.dies_per_wafer() / self.tp;
                let group = self.group_of[src] % gpw + w * gpw;
                let rank = self.rank_of[src];
                self.group_of[d as usize] = group;
                self.rank_of[d as usize] = rank;
                self.groups[group as usize][rank as usize] = d;
                self.ftd_of[d as usize] = w;
                // FTD member lists: every wafer's dies in id order (the FL's order). A wafer's
                // dies in id order are its local order (row-major inside the wafer), so die
                // `d` is member `l` of FTD `w`: one member write per die, like the RTL's.
                self.ftds[w as usize][l as usize] = d;
                self.i += 1;
                if self.i == g.dies() {
                    self.state = MapState::Done;
                }
            }
            MapState::Done => {}
        }
    }

    /// The ring ROM's inverse as written so far (cell `y·gw + x` → its place in the ring).
    pub fn ring_inv(&self) -> &[u32] {
        &self.ring_inv
    }

    /// Runs to completion; returns the decision as the FL's type.
    pub fn run(mut self) -> (Mapping, u64) {
        while self.state != MapState::Done {
            self.step();
        }
        let m = Mapping {
            kind: self.kind,
            geom: self.geom,
            tp: self.tp,
            dp: self.dp,
            all_gather: self.all_gather,
            groups: self.groups,
            group_of: self.group_of,
            rank_of: self.rank_of,
            ftds: self.ftds,
            ftd_of: self.ftd_of,
        };
        (m, self.cycles)
    }
}

/// A mapping controller a wafer run can swap (`wafer --rtl mapping`): the CL model above, or
/// an RTL stand-in (the rtl crate's `wafer::mapping_swap`), so `hw` does not depend on the
/// RTL crate.
pub trait MappingCtrl {
    /// Runs to completion: the tables as the FL's type, and the cycles it took.
    fn run_to_end(self: Box<Self>) -> Result<(Mapping, u64), MapError>;
}

impl MappingCtrl for MappingCtrlCl {
    fn run_to_end(self: Box<Self>) -> Result<(Mapping, u64), MapError> {
        Ok((*self).run())
    }
}

/// Builds a mapping controller for (kind, geometry, TP, DP, all-gather); refusals name the
/// field (the FL's checks, then the stand-in's own limits).
pub type MappingCtrlFactory = fn(MappingKind, WaferGeom, u32, u32, bool) -> Result<Box<dyn MappingCtrl>, MapError>;

/// [`MappingCtrlFactory`] of the CL model.
pub fn mapping_ctrl_cl(kind: MappingKind, geom: WaferGeom, tp: u32, dp: u32, all_gather: bool) -> Result<Box<dyn MappingCtrl>, MapError> {
    Ok(Box::new(MappingCtrlCl::new(kind, geom, tp, dp, all_gather)?))
}
