//! The package's trajectories (FSE-DP Rule 4): which chiplet loads micro-slice k of an
//! expert and where the micro-slice goes next — the die's next-hop table, asked by the
//! chiplet controller every cycle and by the Rule-5 load arbiter.

use sched::pkg::iodie::in_mask;

use super::chiplet::{ChipletId, Trajectory};

/// Trajectories of the package: ring order = snake order of the members, micro-slice k
/// loaded by ring member k mod |T_e| (counted from the ring's first member), then visiting
/// every member once (docs/fsedp-reading.md). The die's next-hop logic: the same functions
/// as `sched::pkg::iodie::{loader_fl, next_station_fl}` (checked exhaustively in the tests)
/// over a fixed snake-order table, without allocating — the controller asks every cycle.
#[derive(Debug, Clone, Copy)]
pub struct PkgTraj {
    pub rows: usize,
    pub cols: usize,
    snake: [ChipletId; 16],
    /// Sharded loading (`loaders = "all"`): every chiplet loads its share of every expert.
    shard: bool,
}

impl PkgTraj {
    pub fn new(rows: usize, cols: usize) -> Self {
        let mut snake = [ChipletId(0); 16];
        for (i, c) in sched::pkg::iodie::snake_order(rows, cols).into_iter().take(16).enumerate() {
            snake[i] = c;
        }
        PkgTraj { rows, cols, snake, shard: false }
    }

    /// The same package with sharded loading (as `sched::pkg::iodie::{shard_loader_fl,
    /// shard_next_station_fl}`).
    pub fn sharded(mut self) -> Self {
        self.shard = true;
        self
    }

    /// Position of chiplet `c` in the snake order (the ring order of every trajectory).
    pub fn ring_position(&self, c: ChipletId) -> u8 {
        self.snake.iter().position(|&x| x == c).unwrap_or(usize::MAX) as u8
    }

    /// Ring members of `mask` in snake order, and how many.
    fn ring(&self, mask: u16) -> ([ChipletId; 16], usize) {
        let mut r = [ChipletId(0); 16];
        let mut n = 0;
        for &c in &self.snake[..(self.rows * self.cols).min(16)] {
            if in_mask(mask, c) {
                r[n] = c;
                n += 1;
            }
        }
        (r, n)
    }
}

impl Trajectory for PkgTraj {
    fn loader(&self, mask: u16, k: u16) -> ChipletId {
        if self.shard {
            return self.snake[k as usize % (self.rows * self.cols).min(16)];
        }
        let (r, n) = self.ring(mask);
        assert!(n > 0, "loader of an empty trajectory");
        r[k as usize % n]
    }
    fn next_station(&self, mask: u16, loader: ChipletId, at: ChipletId) -> Option<ChipletId> {
        let (r, n) = self.ring(mask);
        if self.shard && !in_mask(mask, loader) {
            // A helper loader: into the ring at the first member after it in snake order,
            // which is then where the ring closes.
            let lp = self.ring_position(loader) as usize;
            let first = r[..n].iter().copied().find(|&c| self.ring_position(c) as usize > lp).or(r[..n].first().copied())?;
            if at == loader {
                return Some(first);
            }
            let p = r[..n].iter().position(|&c| c == at)?;
            let nxt = r[(p + 1) % n];
            return (n > 1 && nxt != first).then_some(nxt);
        }
        let p = r[..n].iter().position(|&c| c == at)?;
        if n < 2 {
            return None;
        }
        let nxt = r[(p + 1) % n];
        (nxt != loader && in_mask(mask, loader)).then_some(nxt)
    }
}

#[cfg(test)]
mod traj_tests {
    use super::*;
    use sched::pkg::iodie::{loader_fl, next_station_fl, shard_loader_fl, shard_next_station_fl};

    #[test]
    fn next_hop_logic_equals_the_fl_functions() {
        for (rows, cols) in [(1, 2), (2, 2), (3, 3), (2, 3)] {
            let t = PkgTraj::new(rows, cols);
            let ts = PkgTraj::new(rows, cols).sharded();
            let n = rows * cols;
            for mask in 1u16..(1 << n) {
                for k in 0..7u16 {
                    assert_eq!(Some(t.loader(mask, k)), loader_fl(mask, ChipletId(u8::MAX), k as usize, rows, cols));
                }
                for l in (0..n as u8).map(ChipletId) {
                    for at in (0..n as u8).map(ChipletId) {
                        assert_eq!(t.next_station(mask, l, at), next_station_fl(mask, l, at, rows, cols), "{rows}x{cols} mask {mask:#b} loader {l} at {at}");
                        assert_eq!(ts.next_station(mask, l, at), shard_next_station_fl(mask, l, at, rows, cols), "sharded {rows}x{cols} mask {mask:#b} loader {l} at {at}");
                    }
                }
                for k in 0..7u16 {
                    assert_eq!(ts.loader(mask, k), shard_loader_fl(k as usize, rows, cols));
                }
            }
        }
    }
}
