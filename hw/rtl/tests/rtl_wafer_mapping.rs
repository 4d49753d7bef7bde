//! `MappingCtrlRtl` against `MappingCtrlCl` in lockstep (S8 strength 3): for every
//! single-wafer mesh up to 8×8, every TP dividing the dies and every mapping kind the FL
//! accepts, plus multi-wafer HER/ER/baseline grids up to 64 dies (and a 256-die system on the
//! 256-entry build), both controllers run from the same request and every cycle:
//! * the state and the shape register are equal;
//! * the block's write ports (die tables, FTD member slot, ring inverse) are applied to
//!   shadow tables, which must equal the CL's tables after the CL's step — so every write
//!   is checked in the cycle it happens;
//! * `done` rises in the cycle the CL reaches `Done`;
//! and at the end the block's tables, read back through its read port, equal the CL's
//! decision and the FL's (`sched::wafer::map`). One driver serves every case back to back
//! without reset (stale table entries of a previous mapping must not leak).

use hw::wafer::mapping::{MapState, MappingCtrlCl};
use rtl::wafer::mapping_swap::{mapping_ctrl_rtl, MapRegs, MappingDriver};
use sched::wafer::{map, MappingKind, WaferGeom};

fn code(s: MapState) -> u64 {
    match s {
        MapState::Shape => 1,
        MapState::Ring => 2,
        MapState::Dies => 3,
        MapState::Replicate => 4,
        MapState::Done => 5,
    }
}

/// Runs one request in lockstep; returns the cycles compared (0 when the FL refuses it, in
/// which case the RTL host refuses it with the CL's error).
fn lockstep<const D: usize>(drv: &mut MappingDriver<D>, kind: MappingKind, g: WaferGeom, tp: u32) -> u64 {
    let dies = g.dies();
    let dp = dies / tp;
    let tag = format!("{g:?} tp={tp} {kind:?}");
    let regs = MapRegs::of(kind, g, tp, dp, true);
    let cl = MappingCtrlCl::new(kind, g, tp, dp, true);
    let (regs, mut cl) = match (regs, cl) {
        (Ok(r), Ok(c)) => (r, c),
        (Err(a), Err(b)) => {
            assert_eq!(a.to_string(), b.to_string(), "{tag}");
            return 0;
        }
        (a, b) => panic!("{tag}: RTL host {:?} vs CL {:?}", a.is_ok(), b.is_ok()),
    };
    drv.start(&regs);
    let mut group_of = cl.group_of.clone();
    let mut rank_of = cl.rank_of.clone();
    let mut ftd_of = cl.ftd_of.clone();
    let mut groups = cl.groups.clone();
    let mut ftds = cl.ftds.clone();
    let mut inv = vec![0u32; D];
    let mut cycles = 0u64;
    loop {
        let o = drv.out();
        assert_eq!(o.state, code(cl.state), "{tag} cycle {cycles}: state");
        assert_eq!(o.shape, cl.shape, "{tag} cycle {cycles}: shape");
        assert_eq!(o.done, cl.state == MapState::Done, "{tag} cycle {cycles}: done");
        if o.done {
            break;
        }
        if let Some((d, grp, r, f, member)) = o.wr {
            group_of[d as usize] = grp;
            rank_of[d as usize] = r;
            ftd_of[d as usize] = f;
            groups[grp as usize][r as usize] = d;
            if let Some(m) = member {
                ftds[f as usize][m as usize] = d;
            }
        }
        if let Some((a, v)) = o.inv {
            inv[a as usize] = v;
        }
        cl.step();
        drv.edge();
        cycles += 1;
        assert_eq!(group_of, cl.group_of, "{tag} cycle {cycles}: group_of");
        assert_eq!(rank_of, cl.rank_of, "{tag} cycle {cycles}: rank_of");
        assert_eq!(ftd_of, cl.ftd_of, "{tag} cycle {cycles}: ftd_of");
        assert_eq!(groups, cl.groups, "{tag} cycle {cycles}: groups");
        assert_eq!(ftds, cl.ftds, "{tag} cycle {cycles}: ftds");
        let n = cl.ring_inv().len();
        assert_eq!(&inv[..n], cl.ring_inv(), "{tag} cycle {cycles}: ring_inv");
    }
    let got = drv.tables(kind, g, tp, dp, true);
    let fl = map(kind, g, tp, dp, true).unwrap();
    let (m, cl_cycles) = cl.run();
    assert_eq!(cl_cycles, cycles, "{tag}: cycles");
    assert_eq!(got, m, "{tag}: read-back tables vs CL");
    assert_eq!(got, fl, "{tag}: read-back tables vs FL");
    cycles
}

#[test]
fn mapping_ctrl_lockstep_every_mesh_to_64_dies() {
    let mut geoms: Vec<WaferGeom> = Vec::new();
    for c in 1..=8 {
        for r in 1..=8 {
            geoms.push(WaferGeom::single(c, r));
        }
    }
    for (wx, wy, c, r) in [(2, 2, 4, 4), (2, 1, 4, 4), (3, 1, 2, 4), (1, 2, 6, 4), (2, 2, 2, 3), (4, 1, 2, 2)] {
        geoms.push(WaferGeom { wafers_x: wx, wafers_y: wy, die_cols: c, die_rows: r });
    }
    let mut drv = MappingDriver::<64>::new();
    let (mut runs, mut cycles) = (0, 0);
    let mut per_kind = [0u32; 3];
    for g in geoms {
        let dies = g.dies();
        for tp in (1..=dies).filter(|t| dies % t == 0) {
            for (k, kind) in MappingKind::ALL.into_iter().enumerate() {
                let c = lockstep(&mut drv, kind, g, tp);
                if c > 0 {
                    runs += 1;
                    cycles += c;
                    per_kind[k] += 1;
                }
            }
        }
    }
    eprintln!("mapping_ctrl lockstep: {runs} mappings, {cycles} cycles (baseline {}, er {}, her {})", per_kind[0], per_kind[1], per_kind[2]);
    assert!(runs > 400 && per_kind.iter().all(|&n| n > 10), "{runs} mappings {per_kind:?}");
}

/// The 256-entry build: a 2×2 system of 8×8 wafers (HER, ER, baseline at a few TPs).
#[test]
fn mapping_ctrl_lockstep_256_dies() {
    let g = WaferGeom { wafers_x: 2, wafers_y: 2, die_cols: 8, die_rows: 8 };
    let mut drv = MappingDriver::<256>::new();
    let mut cycles = 0;
    for tp in [4, 16] {
        for kind in MappingKind::ALL {
            cycles += lockstep(&mut drv, kind, g, tp);
        }
    }
    assert!(cycles > 1000, "{cycles}");
}

/// The swap factory refuses what the FL refuses (the same error) and systems above its tables
/// by name; it returns the FL's decision otherwise.
#[test]
fn mapping_ctrl_rtl_factory() {
    let g = WaferGeom { wafers_x: 2, wafers_y: 2, die_cols: 16, die_rows: 16 };
    let e = mapping_ctrl_rtl(MappingKind::Her, g, 16, 64, true).err().unwrap();
    assert_eq!(e.field, "wafer");
    assert!(e.reason.contains("mapping_ctrl rtl") && e.reason.contains("1024 dies"), "{e}");
    let one = WaferGeom::single(4, 4);
    let e = mapping_ctrl_rtl(MappingKind::Her, one, 4, 4, true).err().unwrap();
    assert_eq!(e, map(MappingKind::Her, one, 4, 4, true).unwrap_err());
    let (m, cycles) = mapping_ctrl_rtl(MappingKind::Er, one, 4, 4, false).unwrap().run_to_end().unwrap();
    assert_eq!(m, map(MappingKind::Er, one, 4, 4, false).unwrap());
    assert_eq!(cycles, MappingCtrlCl::new(MappingKind::Er, one, 4, 4, false).unwrap().run().1);
}

/// rust-hdl's structural checks (connectivity, write-before-read) pass on both builds.
#[test]
fn mapping_ctrl_passes_rust_hdl_checks() {
    use rust_hdl::prelude::*;
    let mut u = rtl::wafer::mapping::MappingCtrl64Rtl::new();
    u.connect_all();
    check_all(&u).unwrap();
}
