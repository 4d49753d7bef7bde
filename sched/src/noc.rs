//! Mesh NoC functional models: dimension-order routing and synthetic traffic destinations.

use serde::{Deserialize, Serialize};

/// (x, y) position of a node in a k×k mesh; node id = y·k + x (BookSim's numbering).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Coord {
    pub x: u32,
    pub y: u32,
}

impl Coord {
    #[inline]
    pub fn of(node: u32, k: u32) -> Self {
        Coord { x: node % k, y: node / k }
    }
    #[inline]
    pub fn id(self, k: u32) -> u32 {
        self.y * k + self.x
    }
    /// Manhattan distance.
    #[inline]
    pub fn dist(self, o: Coord) -> u32 {
        self.x.abs_diff(o.x) + self.y.abs_diff(o.y)
    }
}

/// Router port directions, numbered as BookSim's mesh ports (0:+x, 1:−x, 2:+y, 3:−y, 4:local).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u8)]
pub enum Dir {
    XPlus = 0,
    XMinus = 1,
    YPlus = 2,
    YMinus = 3,
    Local = 4,
}

impl Dir {
    pub const ALL: [Dir; 5] = [Dir::XPlus, Dir::XMinus, Dir::YPlus, Dir::YMinus, Dir::Local];
    #[inline]
    pub fn idx(self) -> usize {
        self as usize
    }
    #[inline]
    pub fn from_idx(i: usize) -> Dir {
        Self::ALL[i]
    }
    /// The port on the neighbour that faces this one (+x ↔ −x, +y ↔ −y).
    #[inline]
    pub fn opposite(self) -> Dir {
        match self {
            Dir::XPlus => Dir::XMinus,
            Dir::XMinus => Dir::XPlus,
            Dir::YPlus => Dir::YMinus,
            Dir::YMinus => Dir::YPlus,
            Dir::Local => Dir::Local,
        }
    }
    /// Short name used in hierarchical signal names (`port_e`, `port_w`, ...).
    pub fn short(self) -> &'static str {
        match self {
            Dir::XPlus => "e",
            Dir::XMinus => "w",
            Dir::YPlus => "s",
            Dir::YMinus => "n",
            Dir::Local => "l",
        }
    }
}

/// Dimension-order routing, x first then y (BookSim `dor` on a mesh): the output port a flit
/// at `cur` takes towards `dest`. `Local` when it has arrived.
///
/// Computed with selects, not a chain of branches: routers call it once per packet with
/// random destinations, where each branch of the chain was often mispredicted.
#[inline]
pub fn route_xy_fl(cur: Coord, dest: Coord) -> Dir {
    let (x_off, x_minus) = (dest.x != cur.x, dest.x < cur.x);
    let (y_off, y_minus) = (dest.y != cur.y, dest.y < cur.y);
    // Y: YPlus (2) or YMinus (3) when off in y, else Local (4); X first: XPlus (0) or XMinus (1).
    let y = 4 - 2 * y_off as usize + y_minus as usize;
    let x = x_minus as usize;
    Dir::ALL[if x_off { x } else { y }]
}

/// The full XY path as the list of routers visited (source and destination included).
pub fn path_xy_fl(src: Coord, dest: Coord) -> Vec<Coord> {
    let mut p = vec![src];
    let mut c = src;
    loop {
        match route_xy_fl(c, dest) {
            Dir::XPlus => c.x += 1,
            Dir::XMinus => c.x -= 1,
            Dir::YPlus => c.y += 1,
            Dir::YMinus => c.y -= 1,
            Dir::Local => return p,
        }
        p.push(c);
    }
}

/// Synthetic traffic patterns with BookSim semantics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum TrafficPattern {
    /// Destination uniform over **all** nodes, the source included (BookSim `uniform`).
    Uniform,
    /// (x, y) → (y, x). For power-of-two k this is BookSim's bit-swap `transpose`.
    Transpose,
    /// (x, y) → (k−1−x, k−1−y). For power-of-two k this is BookSim's `bitcomp` (~src).
    BitComplement,
    /// With probability `fraction` the destination is drawn uniformly from `nodes`,
    /// otherwise uniformly over all nodes.
    Hotspot { nodes: Vec<u32>, fraction: f64 },
}

impl TrafficPattern {
    /// Destination for a packet from `src`; `u` and `v` are independent uniform draws in [0,1)
    /// (deterministic patterns ignore them).
    pub fn dest_fl(&self, src: u32, k: u32, u: f64, v: f64) -> u32 {
        let n = k * k;
        let pick = |w: f64, m: u32| ((w * m as f64) as u32).min(m - 1);
        match self {
            TrafficPattern::Uniform => pick(u, n),
            TrafficPattern::Transpose => {
                let c = Coord::of(src, k);
                Coord { x: c.y, y: c.x }.id(k)
            }
            TrafficPattern::BitComplement => {
                let c = Coord::of(src, k);
                Coord { x: k - 1 - c.x, y: k - 1 - c.y }.id(k)
            }
            TrafficPattern::Hotspot { nodes, fraction } => {
                if u < *fraction && !nodes.is_empty() {
                    nodes[pick(v, nodes.len() as u32) as usize]
                } else {
                    // Re-scale u so the uniform part still spans [0,1).
                    let w = if *fraction < 1.0 { (u - fraction) / (1.0 - fraction) } else { v };
                    pick(w.clamp(0.0, 0.999_999_999), n)
                }
            }
        }
    }

    /// Checks pattern parameters against the mesh; the message names the offending field.
    pub fn validate(&self, k: u32) -> crate::Result<()> {
        if let TrafficPattern::Hotspot { nodes, fraction } = self {
            if !(0.0..=1.0).contains(fraction) {
                return Err(crate::Error::value("traffic.hotspot.fraction", fraction, "must be in 0..=1"));
            }
            if nodes.is_empty() {
                return Err(crate::Error::field("traffic.hotspot.nodes", "must list at least one node"));
            }
            if let Some(bad) = nodes.iter().find(|&&x| x >= k * k) {
                return Err(crate::Error::field("traffic.hotspot.nodes", format!("node {bad} outside the {k}x{k} mesh")));
            }
        }
        Ok(())
    }

    pub fn name(&self) -> &'static str {
        match self {
            TrafficPattern::Uniform => "uniform",
            TrafficPattern::Transpose => "transpose",
            TrafficPattern::BitComplement => "bitcomp",
            TrafficPattern::Hotspot { .. } => "hotspot",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn xy_goes_x_first() {
        let p = path_xy_fl(Coord { x: 3, y: 6 }, Coord { x: 2, y: 7 });
        assert_eq!(p, vec![Coord { x: 3, y: 6 }, Coord { x: 2, y: 6 }, Coord { x: 2, y: 7 }]);
    }

    #[test]
    fn bitcomp_matches_booksim_for_pow2() {
        for k in [2u32, 4, 8] {
            for s in 0..k * k {
                assert_eq!(TrafficPattern::BitComplement.dest_fl(s, k, 0.0, 0.0), !s & (k * k - 1));
            }
        }
    }

    proptest! {
        #[test]
        fn xy_path_is_minimal(k in 1u32..12, a in 0u32..144, b in 0u32..144) {
            let (a, b) = (Coord::of(a % (k*k), k), Coord::of(b % (k*k), k));
            let p = path_xy_fl(a, b);
            prop_assert_eq!(p.len() as u32, a.dist(b) + 1);
            prop_assert_eq!(*p.last().unwrap(), b);
        }

        #[test]
        fn dests_in_range(k in 1u32..12, s in 0u32..144, u in 0.0f64..1.0, v in 0.0f64..1.0) {
            let s = s % (k*k);
            for p in [TrafficPattern::Uniform, TrafficPattern::Transpose, TrafficPattern::BitComplement,
                      TrafficPattern::Hotspot { nodes: vec![0], fraction: 0.3 }] {
                prop_assert!(p.dest_fl(s, k, u, v) < k*k);
            }
        }
    }
}
