//! FL (functional level, no clock) algorithms of the wafer-scale chip — MoEntwine
//! (seeds/moentwine.txt §IV; SPEC §4).
//!
//! The cycle-level wafer model (`hw::wafer`) calls these functions so that its mapping
//! controller, dispatch unit and collective engines reach exactly the decisions made here and
//! only add the cycles their micro-architecture takes:
//!
//! * [`mapping`] — where every TP group of the attention layers lives (baseline, ER-Mapping,
//!   HER-Mapping), the Full Token Domains (FTDs) that follow from it, and which die an expert
//!   fetches a token slice from ([`Mapping::holder`]).
//! * [`dispatch`] — expert placement and the MoE all-to-all dispatch/combine plan.
//! * [`collective`] — the attention all-reduce as explicit step-by-step transfers, and a
//!   functional executor that checks them.
//! * [`gpu`] — **analytical** alpha-beta models of the GPU baselines (DGX B200, NVL72).
//!
//! The reading of the paper fixed by this module is written down in `docs/wafer-mapping.md`.
//!
//! # Geometry
//! Dies form one global grid of `wafers_x × wafers_y` wafers of `die_cols × die_rows` dies;
//! die id = `y·cols + x` over the global grid (the same numbering as [`crate::noc::Coord`]),
//! so one XY-routed mesh spans all wafers and a hop is a hop whether or not it crosses a
//! wafer border ([`WaferGeom::crosses_wafer`] tells the CL which links are the cross-wafer
//! ones, which have their own bandwidth).

pub mod collective;
pub mod dispatch;
pub mod functional;
pub mod gpu;
pub mod mapping;
pub mod routing;

pub use collective::{allreduce_plan, execute_fl, ChunkId, CollectivePlan, Xfer};
pub use dispatch::{dispatch_plan, expert_hosts, try_dispatch_plan, try_dispatch_plan_split, A2aXfer, ReplicaSplit};
pub use gpu::GpuSystem;
pub use mapping::{map, Mapping};
pub use routing::Routing;

/// A set of dies, one bit per die id of the system (FTD areas, die groups). A `u64` mask would
/// stop at 64 dies; a wafer has up to 256 and a multi-wafer system up to 1,024.
pub type DieSet = bitvec::vec::BitVec<u64, bitvec::order::Lsb0>;

use crate::noc::Coord;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Largest grid [`mapping::map`] accepts (dies). Plans are `O(dies²)` in places; 2^20 dies is far
/// beyond any wafer system of the paper (256 dies) and keeps a typo from exhausting memory.
pub const MAX_DIES: u64 = 1 << 20;

/// Shape of the wafer system: `wafers_x × wafers_y` wafers, each `die_cols × die_rows` dies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaferGeom {
    pub wafers_x: u32,
    pub wafers_y: u32,
    pub die_cols: u32,
    pub die_rows: u32,
}

impl WaferGeom {
    /// One wafer of `cols × rows` dies.
    pub fn single(cols: u32, rows: u32) -> Self {
        WaferGeom { wafers_x: 1, wafers_y: 1, die_cols: cols, die_rows: rows }
    }
    /// Columns of the global die grid.
    #[inline]
    pub fn cols(&self) -> u32 {
        self.wafers_x * self.die_cols
    }
    /// Rows of the global die grid.
    #[inline]
    pub fn rows(&self) -> u32 {
        self.wafers_y * self.die_rows
    }
    #[inline]
    pub fn dies(&self) -> u32 {
        self.cols() * self.rows()
    }
    #[inline]
    pub fn wafers(&self) -> u32 {
        self.wafers_x * self.wafers_y
    }
    #[inline]
    pub fn dies_per_wafer(&self) -> u32 {
        self.die_cols * self.die_rows
    }
    #[inline]
    pub fn coord(&self, die: u32) -> Coord {
        Coord::of(die, self.cols())
    }
    /// Wafer index `wy·wafers_x + wx` of a die.
    pub fn wafer_of(&self, die: u32) -> u32 {
        let c = self.coord(die);
        (c.y / self.die_rows) * self.wafers_x + c.x / self.die_cols
    }
    /// Position of a die inside its wafer: `ly·die_cols + lx`.
    pub fn local_of(&self, die: u32) -> u32 {
        let c = self.coord(die);
        (c.y % self.die_rows) * self.die_cols + c.x % self.die_cols
    }
    /// Global id of the die at local position `local` of wafer `wafer` (inverse of
    /// [`Self::wafer_of`] + [`Self::local_of`]).
    pub fn global_of(&self, wafer: u32, local: u32) -> u32 {
        let (wx, wy) = (wafer % self.wafers_x, wafer / self.wafers_x);
        let (lx, ly) = (local % self.die_cols, local / self.die_cols);
        Coord { x: wx * self.die_cols + lx, y: wy * self.die_rows + ly }.id(self.cols())
    }
    /// Hops between two dies under XY routing = Manhattan distance on the global grid.
    pub fn hops(&self, a: u32, b: u32) -> u32 {
        self.coord(a).dist(self.coord(b))
    }
    /// True iff `a` and `b` are mesh neighbours (1 hop) on different wafers, i.e. the link
    /// between them is a cross-wafer link.
    pub fn crosses_wafer(&self, a: u32, b: u32) -> bool {
        self.hops(a, b) == 1 && self.wafer_of(a) != self.wafer_of(b)
    }
    /// Every field ≥ 1 and at most [`MAX_DIES`] dies; the error names the field.
    pub fn validate(&self) -> Result<(), MapError> {
        for (f, v) in [
            ("wafer.wafers_x", self.wafers_x),
            ("wafer.wafers_y", self.wafers_y),
            ("wafer.die_cols", self.die_cols),
            ("wafer.die_rows", self.die_rows),
        ] {
            if v == 0 {
                return Err(MapError::new(f, "must be at least 1"));
            }
        }
        let n = self.wafers_x as u64 * self.wafers_y as u64 * self.die_cols as u64 * self.die_rows as u64;
        if n > MAX_DIES {
            return Err(MapError::new("wafer", format!("{n} dies: at most {MAX_DIES} supported")));
        }
        Ok(())
    }
}

impl fmt::Display for WaferGeom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.wafers() == 1 {
            write!(f, "{}x{}", self.die_cols, self.die_rows)
        } else {
            write!(f, "{}x{} wafers of {}x{}", self.wafers_x, self.wafers_y, self.die_cols, self.die_rows)
        }
    }
}

/// The mapping controller's strategies (paper §IV).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MappingKind {
    /// Each TP group a compact block (the paper's baseline, Fig. 8(b)).
    Baseline,
    /// Entwined Ring Mapping: compact, disjoint FTDs (Fig. 8(c)(d)).
    Er,
    /// Hierarchical ER-Mapping for multi-wafer systems (Fig. 10(c), §IV-B4).
    Her,
}

impl MappingKind {
    pub const ALL: [MappingKind; 3] = [MappingKind::Baseline, MappingKind::Er, MappingKind::Her];
    pub fn name(self) -> &'static str {
        match self {
            MappingKind::Baseline => "baseline",
            MappingKind::Er => "er",
            MappingKind::Her => "her",
        }
    }
}

impl fmt::Display for MappingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for MappingKind {
    type Err = MapError;
    /// Case-insensitive; unknown names are an error listing the known ones.
    fn from_str(s: &str) -> Result<Self, MapError> {
        let n = s.trim().to_ascii_lowercase();
        MappingKind::ALL.into_iter().find(|k| k.name() == n).ok_or_else(|| {
            MapError::new("mapping", format!("unknown mapping {s:?}; known: baseline, er, her"))
        })
    }
}

/// A mapping request that cannot be satisfied (never a panic). `field` names the offending
/// input: `tp`, `dp`, `mapping`, `wafer`, `wafer.die_cols`, `routing`, ...
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct MapError {
    pub field: String,
    pub reason: String,
}

impl MapError {
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        MapError { field: field.into(), reason: reason.into() }
    }
}

/// True iff [`ring_order`] of a `w × h` grid is a closed cycle whose every step is one hop:
/// both sides > 1 and one of them even (a grid graph with both sides odd has an odd number of
/// cells and, being bipartite, no Hamiltonian cycle), or a line of at most 2 cells.
pub fn ring_is_closed(w: u32, h: u32) -> bool {
    (w > 1 && h > 1 && (w % 2 == 0 || h % 2 == 0)) || w * h <= 2
}

/// Ring order over a `w × h` grid, as `(x, y)` cells.
///
/// * `h` even, `w > 1`: row 0 left→right, then rows 1..h snake over columns 1..w
///   (row 1 right→left, row 2 left→right, …), then back up column 0 — the "comb" Hamiltonian
///   cycle; every step, the closing one included, is one cell.
/// * `h` odd, `w` even, `h > 1`: row 0 left→right, then columns w−1..1 snake over rows 1..h
///   (column w−1 down, column w−2 up, …), then back up column 0.
/// * both odd (> 1): the row snake (boustrophedon) path; the closing step from the last cell
///   back to (0, 0) is then longer than one cell (the CL routes it XY).
/// * `1 × n` / `n × 1`: the line order (closing step n−1 cells).
pub fn ring_order(w: u32, h: u32) -> Vec<(u32, u32)> {
    let mut v = Vec::with_capacity((w * h) as usize);
    if w <= 1 || h <= 1 {
        for y in 0..h {
            for x in 0..w {
                v.push((x, y));
            }
        }
    } else if h % 2 == 0 {
        v.extend((0..w).map(|x| (x, 0)));
        for y in 1..h {
            if y % 2 == 1 {
                v.extend((1..w).rev().map(|x| (x, y)));
            } else {
                v.extend((1..w).map(|x| (x, y)));
            }
        }
        v.extend((1..h).rev().map(|y| (0, y)));
    } else if w % 2 == 0 {
        v.extend((0..w).map(|x| (x, 0)));
        for x in (1..w).rev() {
            if (w - 1 - x) % 2 == 0 {
                v.extend((1..h).map(|y| (x, y)));
            } else {
                v.extend((1..h).rev().map(|y| (x, y)));
            }
        }
        v.extend((1..h).rev().map(|y| (0, y)));
    } else {
        for y in 0..h {
            if y % 2 == 0 {
                v.extend((0..w).map(|x| (x, y)));
            } else {
                v.extend((0..w).rev().map(|x| (x, y)));
            }
        }
    }
    v
}

/// The most square `w × h` rectangle with `w·h = n`, `w | cols`, `h | rows` (ties → wider).
/// `None` if none tiles the grid (cannot happen when `n | cols·rows`, but callers still check).
pub fn tile_shape(n: u32, cols: u32, rows: u32) -> Option<(u32, u32)> {
    let mut best: Option<(u32, u32)> = None;
    for w in 1..=n {
        if n % w != 0 || cols % w != 0 {
            continue;
        }
        let h = n / w;
        if rows % h != 0 {
            continue;
        }
        let better = match best {
            None => true,
            Some((bw, bh)) => {
                let (d, bd) = (w.abs_diff(h), bw.abs_diff(bh));
                d < bd || (d == bd && w > bw)
            }
        };
        if better {
            best = Some((w, h));
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_perm(v: &[(u32, u32)], w: u32, h: u32) -> bool {
        let mut s: Vec<_> = v.to_vec();
        s.sort();
        s.dedup();
        s.len() == (w * h) as usize && v.len() == s.len() && v.iter().all(|&(x, y)| x < w && y < h)
    }

    #[test]
    fn ring_orders_are_cycles_when_claimed() {
        for w in 1..=9 {
            for h in 1..=9 {
                let r = ring_order(w, h);
                assert!(is_perm(&r, w, h), "{w}x{h}");
                let d = |a: (u32, u32), b: (u32, u32)| a.0.abs_diff(b.0) + a.1.abs_diff(b.1);
                // every non-closing step is one cell
                for i in 1..r.len() {
                    assert_eq!(d(r[i - 1], r[i]), 1, "{w}x{h} step {i}");
                }
                if ring_is_closed(w, h) && r.len() > 1 {
                    assert!(d(*r.last().unwrap(), r[0]) <= 1, "{w}x{h} closing");
                }
            }
        }
        assert_eq!(ring_order(2, 2), vec![(0, 0), (1, 0), (1, 1), (0, 1)]);
    }

    #[test]
    fn tiles() {
        assert_eq!(tile_shape(4, 4, 4), Some((2, 2)));
        assert_eq!(tile_shape(8, 8, 8), Some((4, 2)));
        assert_eq!(tile_shape(2, 1, 8), Some((1, 2)));
        assert_eq!(tile_shape(3, 4, 4), None);
    }

    #[test]
    fn geometry() {
        let g = WaferGeom { wafers_x: 2, wafers_y: 2, die_cols: 4, die_rows: 3 };
        assert_eq!((g.cols(), g.rows(), g.dies(), g.wafers()), (8, 6, 48, 4));
        for d in 0..g.dies() {
            assert_eq!(g.global_of(g.wafer_of(d), g.local_of(d)), d);
        }
        assert_eq!(g.wafer_of(Coord { x: 4, y: 2 }.id(8)), 1);
        assert_eq!(g.wafer_of(Coord { x: 3, y: 3 }.id(8)), 2);
        assert!(g.crosses_wafer(3, 4));
        assert!(!g.crosses_wafer(2, 3));
        assert!(!g.crosses_wafer(3, 5));
        assert!("ER".parse::<MappingKind>().unwrap() == MappingKind::Er);
        let e = "ring".parse::<MappingKind>().unwrap_err();
        assert!(e.to_string().contains("baseline, er, her"), "{e}");
    }
}
