//! The `mapping_ctrl` RTL block as the wafer's mapping controller, in place of the CL model
//! (`waferstream wafer ... --rtl mapping`): [`MappingDriver`] steps the block one clock edge
//! at a time (the lockstep test uses it too), [`mapping_ctrl_rtl`] is the
//! `hw::wafer::mapping::MappingCtrlFactory` that runs it to `done` and reads the tables back
//! through its read port into the FL's `Mapping` type.
//!
//! The host's part (what software does before `start`): the FL's parameter checks (the same
//! refusals as the CL), and the derived configuration registers (the layout grid, the tile
//! size, groups per wafer) — see [`MapRegs::of`]. Systems above 256 dies are refused by name
//! (the largest build's tables hold 256 entries).

use hw::wafer::mapping::MappingCtrl;
use rust_hdl::prelude::*;
use sched::wafer::{MapError, Mapping, MappingKind, WaferGeom};

use super::mapping::{MappingCtrlRtl, KIND_BASELINE, KIND_ER, KIND_HER};
use crate::cosim::settle;

/// The configuration registers the host loads on `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MapRegs {
    pub kind: u64,
    pub grid_cols: u32,
    pub grid_rows: u32,
    pub n: u32,
    pub tp: u32,
    pub dp: u32,
    pub cols: u32,
    pub dies: u32,
    pub wafers_x: u32,
    pub die_cols: u32,
    pub die_rows: u32,
    pub gpw: u32,
}

/// Largest system the RTL builds serve (the 256-entry tables).
pub const MAX_DIES: u32 = 256;

impl MapRegs {
    /// The registers of a request the FL accepts (as `MappingCtrlCl::new` derives them), or
    /// the FL's refusal, or the RTL's own limit (named `wafer`).
    pub fn of(kind: MappingKind, geom: WaferGeom, tp: u32, dp: u32, all_gather: bool) -> Result<MapRegs, MapError> {
        sched::wafer::map(kind, geom, tp, dp, all_gather)?;
        if geom.dies() > MAX_DIES {
            return Err(MapError::new("wafer", format!("mapping_ctrl rtl: mesh {geom} has {} dies; the RTL tables hold at most {MAX_DIES}", geom.dies())));
        }
        let (grid_cols, grid_rows, n, code) = match kind {
            MappingKind::Baseline => (geom.cols(), geom.rows(), tp, KIND_BASELINE),
            MappingKind::Er => (geom.cols(), geom.rows(), dp, KIND_ER),
            MappingKind::Her => (geom.die_cols, geom.die_rows, geom.dies_per_wafer() / tp, KIND_HER),
        };
        Ok(MapRegs {
            kind: code,
            grid_cols,
            grid_rows,
            n,
            tp,
            dp,
            cols: geom.cols(),
            dies: geom.dies(),
            wafers_x: geom.wafers_x,
            die_cols: geom.die_cols,
            die_rows: geom.die_rows,
            gpw: if kind == MappingKind::Her { geom.dies_per_wafer() / tp } else { 0 },
        })
    }
}

/// The block's outputs of one cycle (before its rising edge).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MapOut {
    pub state: u64,
    pub shape: Option<(u32, u32)>,
    /// Die-table write: (die, group, rank, ftd, Some(member) when the FTD slot is written).
    pub wr: Option<(u32, u32, u32, u32, Option<u32>)>,
    /// Ring inverse write: (address, data).
    pub inv: Option<(u32, u32)>,
    pub done: bool,
}

/// Steps a `MappingCtrlRtl<D>` one clock edge at a time.
pub struct MappingDriver<const D: usize> {
    pub uut: Box<MappingCtrlRtl<D>>,
}

impl<const D: usize> Default for MappingDriver<D> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const D: usize> MappingDriver<D> {
    /// A connected block, reset (one edge with `reset` high).
    pub fn new() -> Self {
        let mut uut = Box::new(MappingCtrlRtl::<D>::new());
        uut.connect_all();
        let mut d = MappingDriver { uut };
        d.uut.reset.next = true;
        d.edge();
        d.uut.reset.next = false;
        settle(&mut *d.uut).expect("mapping_ctrl settles");
        d
    }

    /// One rising + falling clock edge with the inputs as they are.
    pub fn edge(&mut self) {
        let u = &mut *self.uut;
        settle(u).expect("mapping_ctrl settles");
        u.clock.next = true.into();
        settle(u).expect("mapping_ctrl settles");
        u.clock.next = false.into();
        settle(u).expect("mapping_ctrl settles");
    }

    /// Drives the configuration inputs (they are sampled on a `start` edge).
    pub fn drive_cfg(&mut self, r: &MapRegs) {
        let u = &mut *self.uut;
        u.kind.next = r.kind.into();
        u.grid_cols.next = (r.grid_cols as u64).into();
        u.grid_rows.next = (r.grid_rows as u64).into();
        u.grid_dies.next = ((r.grid_cols * r.grid_rows) as u64).into();
        u.n.next = (r.n as u64).into();
        u.tp.next = (r.tp as u64).into();
        u.dp.next = (r.dp as u64).into();
        u.cols.next = (r.cols as u64).into();
        u.dies.next = (r.dies as u64).into();
        u.wafers_x.next = (r.wafers_x as u64).into();
        u.die_cols.next = (r.die_cols as u64).into();
        u.die_rows.next = (r.die_rows as u64).into();
        u.gpw.next = (r.gpw as u64).into();
    }

    /// The start edge: the block loads `r` and enters `Shape` (the CL's state after `new`).
    pub fn start(&mut self, r: &MapRegs) {
        self.drive_cfg(r);
        self.uut.start.next = true;
        self.edge();
        self.uut.start.next = false;
        settle(&mut *self.uut).expect("mapping_ctrl settles");
    }

    /// The outputs now (settled).
    pub fn out(&self) -> MapOut {
        let u = &*self.uut;
        let v = |s: &Signal<Out, Bits<16>>| s.val().index() as u32;
        MapOut {
            state: u.state.val().index() as u64,
            shape: u.shape_valid.val().then(|| (v(&u.shape_w), v(&u.shape_h))),
            wr: u.wr_valid.val().then(|| (v(&u.wr_die), v(&u.wr_group), v(&u.wr_rank), v(&u.wr_ftd), u.wr_member_valid.val().then(|| v(&u.wr_member)))),
            inv: u.inv_valid.val().then(|| (v(&u.inv_addr), v(&u.inv_data))),
            done: u.done.val(),
        }
    }

    /// Read port: (group_of, rank_of, ftd_of, groups, ftds) at `addr`.
    pub fn read(&mut self, addr: u32) -> (u32, u32, u32, u32, u32) {
        let u = &mut *self.uut;
        u.rd_addr.next = (addr as u64).into();
        settle(u).expect("mapping_ctrl settles");
        let v = |s: &Signal<Out, Bits<16>>| s.val().index() as u32;
        (v(&u.rd_group_of), v(&u.rd_rank_of), v(&u.rd_ftd_of), v(&u.rd_groups), v(&u.rd_ftds))
    }

    /// Runs a started block to `done` (at most `limit` edges): the edges it took.
    pub fn run_to_done(&mut self, limit: u64) -> Result<u64, MapError> {
        let mut cycles = 0;
        while !self.out().done {
            if cycles == limit {
                return Err(MapError::new("mapping", format!("mapping_ctrl rtl: not done after {limit} cycles (state {})", self.out().state)));
            }
            self.edge();
            cycles += 1;
        }
        Ok(cycles)
    }

    /// The finished tables through the read port, as the FL's type.
    pub fn tables(&mut self, kind: MappingKind, geom: WaferGeom, tp: u32, dp: u32, all_gather: bool) -> Mapping {
        let dies = geom.dies();
        let rows: Vec<(u32, u32, u32, u32, u32)> = (0..dies).map(|a| self.read(a)).collect();
        let groups = (0..dp).map(|g| (0..tp).map(|r| rows[(g * tp + r) as usize].3).collect()).collect();
        let (nf, len) = match kind {
            MappingKind::Her => (geom.wafers(), geom.dies_per_wafer()),
            _ => (tp, dp),
        };
        let ftds = (0..nf).map(|f| (0..len).map(|j| rows[(f * len + j) as usize].4).collect()).collect();
        Mapping {
            kind,
            geom,
            tp,
            dp,
            all_gather,
            groups,
            group_of: rows.iter().map(|r| r.0).collect(),
            rank_of: rows.iter().map(|r| r.1).collect(),
            ftds,
            ftd_of: rows.iter().map(|r| r.2).collect(),
        }
    }
}

/// Cycle bound of one mapping: every shape candidate, ring cell and die twice over.
fn limit(r: &MapRegs) -> u64 {
    2 * (hw::wafer::mapping::SHAPE_CYCLES as u64 * r.n as u64 + 2 * r.dies as u64) + 16
}

/// The RTL controller of one request, built for the smallest table depth that holds it.
pub struct MappingCtrlRtlModel {
    regs: MapRegs,
    kind: MappingKind,
    geom: WaferGeom,
    all_gather: bool,
}

fn run_on<const D: usize>(m: &MappingCtrlRtlModel) -> Result<(Mapping, u64), MapError> {
    let mut drv = MappingDriver::<D>::new();
    drv.start(&m.regs);
    let cycles = drv.run_to_done(limit(&m.regs))?;
    Ok((drv.tables(m.kind, m.geom, m.regs.tp, m.regs.dp, m.all_gather), cycles))
}

impl MappingCtrl for MappingCtrlRtlModel {
    fn run_to_end(self: Box<Self>) -> Result<(Mapping, u64), MapError> {
        // rust-hdl's simulation needs stack for the 256-entry build's recursive settle.
        if self.regs.dies <= 64 {
            run_on::<64>(&self)
        } else {
            run_on::<256>(&self)
        }
    }
}

/// `hw::wafer::mapping::MappingCtrlFactory` of the RTL mapping controller.
pub fn mapping_ctrl_rtl(kind: MappingKind, geom: WaferGeom, tp: u32, dp: u32, all_gather: bool) -> Result<Box<dyn MappingCtrl>, MapError> {
    let regs = MapRegs::of(kind, geom, tp, dp, all_gather)?;
    Ok(Box::new(MappingCtrlRtlModel { regs, kind, geom, all_gather }))
}
