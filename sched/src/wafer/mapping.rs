//! The mapping controller's decision: which dies form each TP group (and in which ring order
//! the all-reduce visits them), and the Full Token Domains (FTDs) that follow
//! (seeds/moentwine.txt §IV-A/B, Fig. 8, Fig. 10; docs/wafer-mapping.md).
//!
//! * **Baseline**: each TP group is a compact `tw × th` block; FTD `i` = the dies at relative
//!   position `i` of every block. The FTD die sets partition the mesh, but their *areas*
//!   (bounding rectangles, which contain every XY route between members) all overlap in the
//!   centre — the congestion the paper attributes to the baseline (Fig. 8(b)).
//! * **ER-Mapping**: the mesh is cut into `tp` compact `bw × bh` FTD blocks; position `j` of
//!   every block belongs to TP group `j`, so a TP group is spread over all blocks and its ring
//!   visits them in [`super::ring_order`] over the block grid: "entwined rings" whose steps are
//!   `bw` or `bh` hops (Fig. 8(d)).
//! * **HER-Mapping**: ER-Mapping on every wafer with wafer-local TP groups; after the intra-wafer
//!   reduce-scatter and the inter-wafer all-gather every wafer holds every token, so the FTDs
//!   are the wafers (§IV-B4, Fig. 10(c)).

use super::{ring_order, tile_shape, DieSet, MapError, MappingKind, WaferGeom};
use serde::Serialize;

/// One mapping of TP groups and FTDs onto the dies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mapping {
    pub kind: MappingKind,
    pub geom: WaferGeom,
    pub tp: u32,
    pub dp: u32,
    /// Whether the attention all-reduce keeps its all-gather (paper §IV-A keeps it; the switch
    /// drops it for the Fig. 9 / §VI-B6 comparison).
    pub all_gather: bool,
    /// `dp` TP groups; `groups[g][r]` = the die of rank `r`, in ring order.
    pub groups: Vec<Vec<u32>>,
    /// Die → its TP group.
    pub group_of: Vec<u32>,
    /// Die → its rank (position in its group's ring).
    pub rank_of: Vec<u32>,
    /// The FTDs. Under baseline and ER `ftds[i][g]` is the die of TP group `g` in FTD `i`
    /// (`tp` FTDs of `dp` dies each). Under HER `ftds[w]` = the dies of wafer `w`, ascending.
    pub ftds: Vec<Vec<u32>>,
    /// Die → its FTD.
    pub ftd_of: Vec<u32>,
}

/// Maps `tp × dp` = all dies with `kind`. Errors (never panics) name the field: `wafer.*` for a
/// bad geometry, `tp`/`dp` for a parallelism that does not fill the dies, `mapping` for a kind
/// that does not apply (HER on a single wafer, no rectangle tiling).
pub fn map(kind: MappingKind, geom: WaferGeom, tp: u32, dp: u32, all_gather: bool) -> Result<Mapping, MapError> {
    geom.validate()?;
    let dies = geom.dies();
    if tp == 0 {
        return Err(MapError::new("tp", format!("tp = 0: must be at least 1 (mesh {geom}, {dies} dies)")));
    }
    if dp == 0 {
        return Err(MapError::new("dp", format!("dp = 0: must be at least 1 (mesh {geom}, {dies} dies)")));
    }
    if tp as u64 * dp as u64 != dies as u64 {
        let field = if dies % tp == 0 { "dp" } else { "tp" };
        return Err(MapError::new(
            field,
            format!("tp*dp = {tp}*{dp} = {} but mesh {geom} has {dies} dies", tp as u64 * dp as u64),
        ));
    }
    let (cols, rows) = (geom.cols(), geom.rows());
    let (groups, ftds) = match kind {
        MappingKind::Baseline => layout_baseline(cols, rows, tp, dp)?,
        MappingKind::Er => layout_er(cols, rows, tp, dp)?,
        MappingKind::Her => {
            if geom.wafers() < 2 {
                return Err(MapError::new(
                    "mapping",
                    format!("her needs at least 2 wafers; mesh {geom} is a single wafer (use er)"),
                ));
            }
            let dpw = geom.dies_per_wafer();
            if dpw % tp != 0 {
                return Err(MapError::new(
                    "tp",
                    format!("tp = {tp}: HER TP groups are wafer-local, so tp must divide the {dpw} dies of a wafer"),
                ));
            }
            let gpw = dpw / tp;
            let (lgroups, _) = layout_er(geom.die_cols, geom.die_rows, tp, gpw)?;
            let mut groups = Vec::with_capacity(dp as usize);
            for w in 0..geom.wafers() {
                for lg in &lgroups {
                    groups.push(lg.iter().map(|&l| geom.global_of(w, l)).collect());
                }
            }
            let ftds = (0..geom.wafers())
                .map(|w| {
                    let mut v: Vec<u32> = (0..dpw).map(|l| geom.global_of(w, l)).collect();
                    v.sort_unstable();
                    v
                })
                .collect();
            (groups, ftds)
        }
    };
    let mut group_of = vec![0; dies as usize];
    let mut rank_of = vec![0; dies as usize];
    for (g, ring) in groups.iter().enumerate() {
        for (r, &d) in ring.iter().enumerate() {
            group_of[d as usize] = g as u32;
            rank_of[d as usize] = r as u32;
        }
    }
    let mut ftd_of = vec![0; dies as usize];
    for (i, f) in ftds.iter().enumerate() {
        for &d in f {
            ftd_of[d as usize] = i as u32;
        }
    }
    Ok(Mapping { kind, geom, tp, dp, all_gather, groups, group_of, rank_of, ftds, ftd_of })
}

fn no_tiling(what: &str, n: u32, cols: u32, rows: u32, tp: u32, dp: u32) -> MapError {
    MapError::new(
        "mapping",
        format!("mesh {cols}x{rows}, tp = {tp}, dp = {dp}: no {what} rectangle of {n} dies tiles the mesh"),
    )
}

/// Baseline on a `cols × rows` grid (ids `y·cols + x`): TP group = compact `tw × th` block
/// (blocks numbered row-major), ring = [`ring_order`] over the block; FTD `i` = relative position
/// `i` (row-major) of every block.
fn layout_baseline(cols: u32, rows: u32, tp: u32, dp: u32) -> Result<(Vec<Vec<u32>>, Vec<Vec<u32>>), MapError> {
    let (tw, th) = tile_shape(tp, cols, rows).ok_or_else(|| no_tiling("TP-group", tp, cols, rows, tp, dp))?;
    let bcols = cols / tw;
    let id = |x: u32, y: u32| y * cols + x;
    let order = ring_order(tw, th);
    let groups = (0..dp)
        .map(|g| {
            let (ox, oy) = ((g % bcols) * tw, (g / bcols) * th);
            order.iter().map(|&(x, y)| id(ox + x, oy + y)).collect()
        })
        .collect();
    let ftds = (0..tp)
        .map(|i| {
            let (x, y) = (i % tw, i / tw);
            (0..dp).map(|g| id((g % bcols) * tw + x, (g / bcols) * th + y)).collect()
        })
        .collect();
    Ok((groups, ftds))
}

/// ER-Mapping on a `cols × rows` grid: `tp` FTD blocks `bw × bh` (row-major), position `j`
/// (row-major) of every block → TP group `j`; group `g`'s ring visits the blocks in
/// [`ring_order`] over the block grid, rank `r` = the `r`-th block of that order.
fn layout_er(cols: u32, rows: u32, tp: u32, dp: u32) -> Result<(Vec<Vec<u32>>, Vec<Vec<u32>>), MapError> {
    let (bw, bh) = tile_shape(dp, cols, rows).ok_or_else(|| no_tiling("FTD", dp, cols, rows, tp, dp))?;
    let (gw, gh) = (cols / bw, rows / bh);
    let id = |x: u32, y: u32| y * cols + x;
    let block_order = ring_order(gw, gh);
    let groups = (0..dp)
        .map(|g| {
            let (px, py) = (g % bw, g / bw);
            block_order.iter().map(|&(bx, by)| id(bx * bw + px, by * bh + py)).collect()
        })
        .collect();
    let ftds = (0..tp)
        .map(|i| {
            let (ox, oy) = ((i % gw) * bw, (i / gw) * bh);
            (0..dp).map(|j| id(ox + j % bw, oy + j / bw)).collect()
        })
        .collect();
    Ok((groups, ftds))
}

impl Mapping {
    /// The die an expert hosted on `host` fetches slice `slice` of group `group`'s tokens from.
    ///
    /// * baseline / ER with all-gather: the die of `group` in host's FTD (its FTD partner);
    /// * without all-gather (any kind): the die of rank `slice` of `group` — the only die that
    ///   holds that slice after the reduce-scatter;
    /// * HER with all-gather: the die on host's wafer at the local position of
    ///   (group's wafer-local group, rank `slice`): every wafer uses the same ER layout and the
    ///   inter-wafer all-gather pairs equal local positions, so after it that die holds
    ///   (group, slice) on **every** wafer.
    ///
    /// `slice` is taken modulo `tp`. Panics if `host` or `group` is out of range.
    pub fn holder(&self, host: u32, group: u32, slice: u32) -> u32 {
        let s = (slice % self.tp) as usize;
        let ring = &self.groups[group as usize];
        if !self.all_gather {
            return ring[s];
        }
        match self.kind {
            MappingKind::Baseline | MappingKind::Er => self.ftds[self.ftd_of[host as usize] as usize][group as usize],
            MappingKind::Her => {
                let g = &self.geom;
                g.global_of(g.wafer_of(host), g.local_of(ring[s]))
            }
        }
    }

    /// The paper's hop metric (§IV-A "Hops"): mean over hosts `h`, groups `g ≠ group_of(h)` and
    /// slices `s` of `hops(h, holder(h, g, s))`, i.e. every die fetches an equal share of every
    /// other group's tokens (balanced experts). 8/3 (baseline) and 4/3 (ER) in the 4×4, TP=4,
    /// DP=4 worked example. 0 when there is one group.
    pub fn avg_a2a_hops(&self) -> f64 {
        if self.dp < 2 {
            return 0.0;
        }
        let mut sum = 0u64;
        let mut n = 0u64;
        for h in 0..self.geom.dies() {
            let own = self.group_of[h as usize];
            for g in (0..self.dp).filter(|&g| g != own) {
                for s in 0..self.tp {
                    sum += self.geom.hops(h, self.holder(h, g, s)) as u64;
                    n += 1;
                }
            }
        }
        sum as f64 / n as f64
    }

    /// Bounding rectangle `(x0, y0, x1, y1)` (inclusive) of FTD `i`: every XY route between two
    /// members stays inside it, so it is the region the FTD's all-to-all traffic occupies.
    pub fn ftd_bbox(&self, i: u32) -> (u32, u32, u32, u32) {
        let mut b = (u32::MAX, u32::MAX, 0, 0);
        for &d in &self.ftds[i as usize] {
            let c = self.geom.coord(d);
            b = (b.0.min(c.x), b.1.min(c.y), b.2.max(c.x), b.3.max(c.y));
        }
        b
    }

    /// The dies inside FTD `i`'s bounding rectangle ([`Self::ftd_bbox`]), ascending: the
    /// paper's "3×3 area FTDs" of the baseline (Fig. 8(b)).
    pub fn ftd_area(&self, i: u32) -> Vec<u32> {
        let (x0, y0, x1, y1) = self.ftd_bbox(i);
        let cols = self.geom.cols();
        (y0..=y1).flat_map(|y| (x0..=x1).map(move |x| y * cols + x)).collect()
    }

    /// The dies inside FTD `i`'s bounding rectangle as a die set (one bit per die of the
    /// system: 256 per 16×16 wafer, 1,024 on a 2×2 wafer system — more than a machine word).
    pub fn ftd_area_set(&self, i: u32) -> DieSet {
        let mut set = DieSet::repeat(false, self.geom.dies() as usize);
        for d in self.ftd_area(i) {
            set.set(d as usize, true);
        }
        set
    }

    /// True iff no two FTD areas ([`Self::ftd_area`]) overlap — the paper's "eliminates all FTD
    /// intersections" (ER, HER: true; baseline with ≥ 2 blocks per axis: false). The FTD die
    /// sets themselves always partition the dies. Checked as die sets: a die claimed by two
    /// areas is an intersection.
    pub fn ftds_disjoint(&self) -> bool {
        let mut claimed = DieSet::repeat(false, self.geom.dies() as usize);
        for i in 0..self.ftds.len() as u32 {
            let area = self.ftd_area_set(i);
            if (claimed.clone() & &area).any() {
                return false;
            }
            claimed |= area;
        }
        true
    }

    /// The ring neighbours `(next, prev)` of a die in its TP group (clockwise = rank + 1).
    pub fn ring_neighbours(&self, die: u32) -> (u32, u32) {
        let ring = &self.groups[self.group_of[die as usize] as usize];
        let (r, p) = (self.rank_of[die as usize] as usize, ring.len());
        (ring[(r + 1) % p], ring[(r + p - 1) % p])
    }

    /// TP groups per wafer (`dp` on a single wafer; `dp / wafers` under HER).
    pub fn groups_per_wafer(&self) -> u32 {
        match self.kind {
            MappingKind::Her => self.dp / self.geom.wafers(),
            _ => self.dp,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn er_4x4_layout() {
        let m = map(MappingKind::Er, WaferGeom::single(4, 4), 4, 4, true).unwrap();
        // group 0 = top-left die of every quadrant, ring TL → TR → BR → BL
        assert_eq!(m.groups[0], vec![0, 2, 10, 8]);
        assert_eq!(m.ftds[0], vec![0, 1, 4, 5]);
        assert_eq!(m.ring_neighbours(0), (2, 8));
        let b = map(MappingKind::Baseline, WaferGeom::single(4, 4), 4, 4, true).unwrap();
        assert_eq!(b.groups[0], vec![0, 1, 5, 4]);
        assert_eq!(b.ftds[0], vec![0, 2, 8, 10]);
    }
}
