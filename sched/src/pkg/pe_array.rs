//! FL twin of the PE array: SCALE-Sim 3.0.0's fold model of a GEMM on an R×C systolic
//! array, and the int8 arithmetic the array performs.
//!
//! # SCALE-Sim's mechanism (read from `scalesim/compute/systolic_compute_{os,ws}.py`,
//! `single_layer_sim.py`, `memory/double_buffered_scratchpad_mem.py`)
//!
//! A GEMM `A (M×K) · B (K×N)` is IFMAP `M×K`, filter `K×N`, OFMAP `M×N`. The array has
//! `R` rows (ArrayHeight) and `C` columns (ArrayWidth). Each dataflow maps two GEMM
//! dimensions onto the array (`Sr` on rows, `Sc` on columns) and streams the third (`T`):
//!
//! | dataflow | Sr (rows) | Sc (cols) | T (streamed) |
//! |---|---|---|---|
//! | os | M | N | K |
//! | ws | K | N | M |
//!
//! Folds: `ceil(Sr/R) × ceil(Sc/C)`, visited column fold outer, row fold inner. A partial
//! fold (at the edge of `Sr` or `Sc`) is padded with null requests to the full array width,
//! so **every fold costs the same number of cycles whatever its fill** — partial folds only
//! lower utilization.
//!
//! Per fold SCALE-Sim builds demand matrices (one row per cycle) for IFMAP, filter and OFMAP;
//! all three have the same height, which is the fold's cycle count `L`:
//! * OS: IFMAP demand = `T` operand rows + `C−1` null rows (outputs drain before the next
//!   fold) skewed over `R` columns (`+R−1`, the systolic fill): `L = K + R + C − 2`.
//! * WS: IFMAP demand = `R` null rows (weights shift in) + `T` rows + `C−1` drain rows, skewed
//!   over `R` columns: `L = 2R + C + M − 2` (the filter and OFMAP demands give the same).
//!
//! The memory system walks the concatenated demand rows one per cycle; with SRAMs large
//! enough and CALC bandwidth nothing stalls, and "Total Cycles" of COMPUTE_REPORT.csv is the
//! cycle index of the last OFMAP line, i.e. `folds × L − 1` (0-based). "Overall Util %" is
//! `M·K·N·100 / (Total Cycles · R · C)`.
//!
//! We express a fold as `prefix + stream + skew` with `prefix` = stationary-operand load
//! (`R` for WS, 0 for OS), `stream = T`, `skew = R + C − 2` (fill + drain). Checked against
//! every row of `shared/reference/scalesim/README.md` (both dataflows) in the tests.
//!
//! # Double-buffered timing (ours, not SCALE-Sim)
//!
//! SCALE-Sim runs folds strictly one after another. A PE array with shadow registers (WS:
//! a second weight register per PE; OS: a second output register per PE on a drain chain)
//! can preload fold `j+1`'s stationary operand (or drain fold `j`'s outputs) while fold `j`
//! streams, and start fold `j+1`'s stream right behind fold `j`'s. Then fold `j < F−1` costs
//! the issue interval `max(T, R)` (the stream, or the `R`-cycle preload/drain if longer),
//! the first fold additionally pays the exposed `prefix`, and the last fold pays
//! `T + skew`. For one fold both timings are equal. GEMMs are not overlapped with each other
//! (the down projection depends on gate/up), so the double-buffered figure is per GEMM.

use serde::{Deserialize, Serialize};

/// Which operand stays in the PEs while the third dimension streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Dataflow {
    /// Output stationary (SCALE-Sim `os`): each PE accumulates one output.
    #[default]
    Os,
    /// Weight stationary (SCALE-Sim `ws`): each PE holds one weight.
    Ws,
}

impl Dataflow {
    pub fn name(self) -> &'static str {
        match self {
            Dataflow::Os => "os",
            Dataflow::Ws => "ws",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "os" => Some(Dataflow::Os),
            "ws" => Some(Dataflow::Ws),
            _ => None,
        }
    }
}

/// How consecutive folds are timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Timing {
    /// Folds strictly in sequence, each `prefix + stream + skew` cycles (SCALE-Sim 3.0.0).
    #[default]
    ScaleSim,
    /// Next fold's preload hidden behind the current fold's stream (see module doc).
    DoubleBuffered,
}

impl Timing {
    pub fn name(self) -> &'static str {
        match self {
            Timing::ScaleSim => "scalesim",
            Timing::DoubleBuffered => "double-buffered",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "scalesim" | "scale_sim" | "scale-sim" => Some(Timing::ScaleSim),
            "double-buffered" | "double_buffered" | "db" => Some(Timing::DoubleBuffered),
            _ => None,
        }
    }
}

/// How one GEMM folds onto the array and what each fold costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FoldPlan {
    pub dataflow: Dataflow,
    pub timing: Timing,
    /// Folds along the array rows: `ceil(Sr / R)`.
    pub row_folds: u64,
    /// Folds along the array columns: `ceil(Sc / C)`.
    pub col_folds: u64,
    /// Stationary-operand load exposed at the start of a fold (WS: `R`, OS: 0).
    pub prefix: u64,
    /// Streamed dimension `T` (OS: K, WS: M).
    pub stream: u64,
    /// Systolic fill + drain skew, `R + C − 2`.
    pub skew: u64,
    /// Issue interval of a non-last fold under double buffering, `max(T, R)`.
    pub interval: u64,
}

impl FoldPlan {
    pub fn folds(&self) -> u64 {
        self.row_folds * self.col_folds
    }
    /// Cycles fold `j` (0-based, column fold outer) occupies the array.
    pub fn fold_cycles(&self, j: u64) -> u64 {
        let f = self.folds();
        debug_assert!(j < f);
        match self.timing {
            Timing::ScaleSim => self.prefix + self.stream + self.skew,
            Timing::DoubleBuffered => {
                let first = if j == 0 { self.prefix } else { 0 };
                first + if j + 1 < f { self.interval } else { self.stream + self.skew }
            }
        }
    }
    /// Cycles the array is busy with this GEMM (sum of the folds).
    pub fn busy_cycles(&self) -> u64 {
        let f = self.folds();
        if f == 0 {
            return 0;
        }
        match self.timing {
            Timing::ScaleSim => f * (self.prefix + self.stream + self.skew),
            Timing::DoubleBuffered => self.prefix + (f - 1) * self.interval + self.stream + self.skew,
        }
    }
    /// SCALE-Sim's "Total Cycles": the 0-based index of the last busy cycle.
    pub fn total_cycles(&self) -> u64 {
        self.busy_cycles().saturating_sub(1)
    }
}

/// The fold plan of `(m×k)·(k×n)` on a `rows×cols` array. A zero dimension gives no folds.
pub fn fold_plan_fl(m: u64, k: u64, n: u64, rows: u64, cols: u64, dataflow: Dataflow, timing: Timing) -> FoldPlan {
    assert!(rows > 0 && cols > 0, "array dimensions are validated by the config");
    let (sr, sc, t, prefix) = match dataflow {
        Dataflow::Os => (m, n, k, 0),
        Dataflow::Ws => (k, n, m, rows),
    };
    let empty = m == 0 || k == 0 || n == 0;
    FoldPlan {
        dataflow,
        timing,
        row_folds: if empty { 0 } else { sr.div_ceil(rows) },
        col_folds: if empty { 0 } else { sc.div_ceil(cols) },
        prefix,
        stream: t,
        skew: rows + cols - 2,
        interval: t.max(rows),
    }
}

/// SCALE-Sim 3.0.0's "Total Cycles" (COMPUTE_REPORT.csv) for the GEMM.
pub fn gemm_cycles_fl(m: u64, k: u64, n: u64, rows: u64, cols: u64, dataflow: Dataflow) -> u64 {
    fold_plan_fl(m, k, n, rows, cols, dataflow, Timing::ScaleSim).total_cycles()
}

/// SCALE-Sim's "Overall Util %" / 100: `m·k·n / (Total Cycles · rows · cols)` (0 if no cycles).
pub fn utilization(m: u64, k: u64, n: u64, rows: u64, cols: u64, dataflow: Dataflow) -> f64 {
    let c = gemm_cycles_fl(m, k, n, rows, cols, dataflow);
    if c == 0 {
        return 0.0;
    }
    (m as f64 * k as f64 * n as f64) / (c as f64 * rows as f64 * cols as f64)
}

/// The arithmetic of the array: `a (m×k, row-major) · b (k×n, row-major)` with int8 operands
/// and 32-bit wrapping accumulators (as the PEs' accumulator registers), `m×n` row-major.
pub fn gemm_i8_fl(a: &[i8], b: &[i8], m: usize, k: usize, n: usize) -> Vec<i32> {
    assert_eq!(a.len(), m * k, "A must be m×k");
    assert_eq!(b.len(), k * n, "B must be k×n");
    let mut out = vec![0i32; m * n];
    for i in 0..m {
        let row = &mut out[i * n..(i + 1) * n];
        for (kk, &av) in a[i * k..(i + 1) * k].iter().enumerate() {
            let av = av as i32;
            for (o, &bv) in row.iter_mut().zip(&b[kk * n..(kk + 1) * n]) {
                *o = o.wrapping_add(av * bv as i32);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// shared/reference/scalesim/README.md: (M, K, N, dataflow, Total Cycles, util %).
    pub const REF: [(u64, u64, u64, Dataflow, u64, f64); 12] = [
        (1, 2048, 96, Dataflow::Ws, 16255, 0.59),
        (1, 2048, 96, Dataflow::Os, 4283, 2.24),
        (16, 2048, 96, Dataflow::Ws, 18175, 8.45),
        (16, 2048, 96, Dataflow::Os, 4283, 35.86),
        (256, 2048, 96, Dataflow::Ws, 48895, 50.26),
        (256, 2048, 96, Dataflow::Os, 34271, 71.71),
        (16, 4096, 400, Dataflow::Ws, 127231, 10.06),
        (16, 4096, 400, Dataflow::Os, 29329, 43.64),
        (256, 4096, 400, Dataflow::Ws, 342271, 59.84),
        (256, 4096, 400, Dataflow::Os, 234639, 87.28),
        (16, 2048, 176, Dataflow::Ws, 27263, 10.33),
        (16, 2048, 176, Dataflow::Os, 6425, 43.83),
    ];

    #[test]
    fn every_reference_row_is_exact() {
        for (m, k, n, df, cyc, util) in REF {
            assert_eq!(gemm_cycles_fl(m, k, n, 32, 64, df), cyc, "{m}x{k}x{n} {df:?}");
            let u = utilization(m, k, n, 32, 64, df) * 100.0;
            assert!((u - util).abs() < 0.005 + 1e-9, "{m}x{k}x{n} {df:?}: util {u} vs {util}");
        }
    }

    #[test]
    fn single_fold_timings_agree_and_db_never_slower() {
        let p = fold_plan_fl(16, 20, 30, 32, 64, Dataflow::Ws, Timing::DoubleBuffered);
        assert_eq!(p.folds(), 1);
        assert_eq!(p.total_cycles(), gemm_cycles_fl(16, 20, 30, 32, 64, Dataflow::Ws));
    }

    #[test]
    fn gemm_matches_naive() {
        let (m, k, n) = (3, 5, 4);
        let a: Vec<i8> = (0..m * k).map(|i| (i as i32 * 37 - 90) as i8).collect();
        let b: Vec<i8> = (0..k * n).map(|i| (i as i32 * 53 - 120) as i8).collect();
        let c = gemm_i8_fl(&a, &b, m, k, n);
        for i in 0..m {
            for j in 0..n {
                let s: i32 = (0..k).map(|x| a[i * k + x] as i32 * b[x * n + j] as i32).sum();
                assert_eq!(c[i * n + j], s);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn fold_sum_equals_total(m in 1u64..300, k in 1u64..300, n in 1u64..300, r in 1u64..40, c in 1u64..70, ws: bool, db: bool) {
            let df = if ws { Dataflow::Ws } else { Dataflow::Os };
            let t = if db { Timing::DoubleBuffered } else { Timing::ScaleSim };
            let p = fold_plan_fl(m, k, n, r, c, df, t);
            let s: u64 = (0..p.folds()).map(|j| p.fold_cycles(j)).sum();
            prop_assert_eq!(s, p.busy_cycles());
            let ss = fold_plan_fl(m, k, n, r, c, df, Timing::ScaleSim);
            prop_assert!(p.busy_cycles() <= ss.busy_cycles());
        }
    }
}
