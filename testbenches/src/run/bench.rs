//! The speed suite of `waferstream bench`: every system timed on a fixed point, repeated, with
//! the run-to-run noise measured beside each figure, so that a saved suite can be compared
//! with a later one and only moves larger than the noise are flagged.
//!
//! Each [`Figure`] is one number per point (simulated cycles per second, a tracing slowdown,
//! sweep points per minute) with its min/max over the repetitions. [`compare`] flags a
//! figure whose relative change exceeds the larger of the two runs' measured spreads
//! (`(max − min) / median`) and a floor ([`NOISE_FLOOR`]): a spread measured on three runs
//! underestimates the noise of a loaded machine, so a change smaller than the floor is never
//! flagged.
//!
//! Speed is never asserted in tests: the suite is measured on demand and written in
//! docs/results-*.md with its command.

use std::path::Path;
use std::time::Instant;

use hw::noc::{run_point, NocCfg};
use hw::pkg::config::{PkgCfg, Strategy};
use hw::pkg::package::PkgRtl;
use hw::wafer::balance::{BalanceCfg, BalancerKind};
use hw::wafer::WaferCfg;
use sched::models::model_by_name;
use sched::wafer::MappingKind;
use serde::{Deserialize, Serialize};

use super::balance::{BalanceInput, BalanceSetup};
use super::package::{workload_from, PackageRun};
use super::wafer::{wafer_cfg, GridArg, LayerInput, WaferLayer, WaferOverrides};
use super::{limits, RunOptions, WaveSink};
use crate::error::{Error, Result};

/// Below this relative change a figure is never flagged, whatever spread was measured.
pub const NOISE_FLOOR: f64 = 0.05;

/// Wall times of repeated runs of one point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// Seconds, in run order.
    pub walls: Vec<f64>,
}

impl Timing {
    fn sorted(&self) -> Vec<f64> {
        let mut w = self.walls.clone();
        w.sort_by(|a, b| a.total_cmp(b));
        w
    }

    pub fn median(&self) -> f64 {
        let w = self.sorted();
        w[w.len() / 2]
    }

    pub fn min(&self) -> f64 {
        self.sorted()[0]
    }

    pub fn max(&self) -> f64 {
        *self.sorted().last().expect("at least one run")
    }
}

/// Runs `f` `repeat` times (at least once) and returns the wall times and the last result.
pub fn time<R>(repeat: u32, mut f: impl FnMut() -> Result<R>) -> Result<(Timing, R)> {
    let mut walls = Vec::new();
    let mut last = None;
    for _ in 0..repeat.max(1) {
        let t0 = Instant::now();
        let r = f()?;
        walls.push(t0.elapsed().as_secs_f64());
        last = Some(r);
    }
    Ok((Timing { walls }, last.expect("repeat >= 1")))
}

/// Which way is better for a figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    Higher,
    Lower,
}

/// One figure of the suite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// Stable key (`noc.8x8.t1`, `package.a3.256`, …): what [`compare`] matches on.
    pub name: String,
    /// What was run, in words.
    pub what: String,
    pub unit: String,
    pub better: Better,
    /// The figure at the median wall time, and at the fastest and slowest runs.
    pub value: f64,
    pub best: f64,
    pub worst: f64,
    /// Measured run-to-run spread, `(max − min) / median` of the wall times.
    pub noise: f64,
    pub runs: u32,
}

impl Figure {
    /// A rate `work / wall` (higher is better) from `t`.
    fn rate(name: &str, what: String, unit: &str, work: f64, t: &Timing) -> Figure {
        Figure {
            name: name.into(),
            what,
            unit: unit.into(),
            better: Better::Higher,
            value: work / t.median(),
            best: work / t.min(),
            worst: work / t.max(),
            noise: (t.max() - t.min()) / t.median(),
            runs: t.walls.len() as u32,
        }
    }

    /// A slowdown `t / base` (lower is better), its spread the sum of both spreads.
    fn ratio(name: &str, what: String, t: &Timing, base: &Timing) -> Figure {
        let spread = |x: &Timing| (x.max() - x.min()) / x.median();
        Figure {
            name: name.into(),
            what,
            unit: "x untraced".into(),
            better: Better::Lower,
            value: t.median() / base.median(),
            best: t.min() / base.median(),
            worst: t.max() / base.median(),
            noise: spread(t) + spread(base),
            runs: t.walls.len() as u32,
        }
    }
}

/// A measured suite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Suite {
    /// `quick` sizes (for checking the plumbing) or the full points.
    pub quick: bool,
    /// Cores the machine reports (the sweep figure scales with it).
    pub cores: usize,
    pub figures: Vec<Figure>,
}

/// How the suite runs.
#[derive(Debug, Clone, Default)]
pub struct SuiteOptions {
    /// Small points and two repetitions: seconds, for tests of save/compare (the figures
    /// mean nothing).
    pub quick: bool,
    /// Directory of the traced runs' waveforms (deleted after timing).
    pub wave_dir: Option<std::path::PathBuf>,
}

/// Runs the whole suite: the NoC (1 and 2 threads), the package layer untraced and with VCD
/// and FST tracing, the wafer layer, the balancer loop, and a sweep's points per minute.
/// `each` sees every figure as it is measured (the CLI prints it).
pub fn suite(o: &SuiteOptions, mut each: impl FnMut(&Figure)) -> Result<Suite> {
    let mut figures = Vec::new();
    let mut push = |f: Figure| {
        each(&f);
        figures.push(f);
    };
    let reps = if o.quick { 2 } else { 5 };
    let reps_long = if o.quick { 2 } else { 3 };

    // NoC: BookSim2's reference point (8x8, uniform 0.30).
    for threads in [1u32, 2] {
        let mut cfg = NocCfg::default();
        cfg.mesh.k = if o.quick { 4 } else { 8 };
        cfg.traffic.rate = 0.30;
        cfg.sim.threads = threads;
        cfg.validate().map_err(|e| Error::input("bench noc", e))?;
        let (t, cycles) = time(reps, || Ok(run_point(&cfg, None, &mut |_| {}).map_err(hw::Error::from)?.0.cycles))?;
        let k = cfg.mesh.k;
        push(Figure::rate(&format!("noc.{k}x{k}.t{threads}"), format!("NoC {k}x{k} uniform 0.30, {threads} thread(s)"), "cycles/s", cycles as f64, &t));
    }

    // The package: Qwen3-30B-A3B, A3, one thread (issue 7's layer), untraced.
    let model = model_by_name(limits::DEFAULT_MODEL)?;
    let tokens = if o.quick { 16 } else { limits::DEFAULT_TOKENS };
    let cfg = PkgCfg::default();
    let pkg = |tokens: u32| -> Result<PackageRun> {
        let work = workload_from(&model, tokens, limits::DEFAULT_SKEW, cfg.seed.max(1), None, None, None, model.d_model, model.d_ffn)?;
        PackageRun::new(cfg.clone(), model.clone(), work, vec![Strategy::A3], false, PkgRtl::default())
    };
    let run = pkg(tokens)?;
    let (t, r) = time(reps_long, || run.run_single(&RunOptions { batch_jobs: Some(1), ..Default::default() }))?;
    push(Figure::rate(&format!("package.a3.{tokens}"), format!("package {} {tokens} tokens 2x2 A3, 1 thread", model.name), "cycles/s", r.latency_cycles as f64, &t));

    // The same layer on the FSE-DP paper's package (its 8x256 PE array and sharded loading,
    // testbenches/configs/pkg-wide-sharded-reserve.toml): a shorter layer with two to three
    // times the D2D flits per cycle, so the per-flit cost shows.
    let paper: PkgCfg = super::scenario::parse_toml(include_str!("../../configs/pkg-wide-sharded-reserve.toml"), "testbenches/configs/pkg-wide-sharded-reserve.toml")?;
    let work = workload_from(&model, tokens, limits::DEFAULT_SKEW, paper.seed.max(1), None, None, None, model.d_model, model.d_ffn)?;
    let run = PackageRun::new(paper, model.clone(), work, vec![Strategy::A3], false, PkgRtl::default())?;
    let (t, r) = time(reps_long, || run.run_single(&RunOptions { batch_jobs: Some(1), ..Default::default() }))?;
    push(Figure::rate(&format!("package.paper.a3.{tokens}"), format!("package {} {tokens} tokens 2x2 A3, the paper's package, 1 thread", model.name), "cycles/s", r.latency_cycles as f64, &t));

    // Tracing cost on a smaller layer (the default layer's VCD is about 1 GB).
    let traced_tokens = if o.quick { 8 } else { 64 };
    let run = pkg(traced_tokens)?;
    let (base, _) = time(reps_long, || run.run_single(&RunOptions { batch_jobs: Some(1), ..Default::default() }))?;
    // Scratch files of the traced runs and the sweep (removed after timing; the directory
    // too unless the caller named it).
    let dir = o.wave_dir.clone().unwrap_or_else(|| std::env::temp_dir().join(format!("waferstream-bench-{}", std::process::id())));
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, format!("cannot create directory: {e}")))?;
    for (fmt, ext) in [(waves::WaveFormat::Vcd, "vcd"), (waves::WaveFormat::Fst, "fst")] {
        let path = dir.join(format!("bench-package.{ext}"));
        let opts = RunOptions { waves: Some(WaveSink { path: path.clone(), format: fmt }), batch_jobs: Some(1), ..Default::default() };
        let (t, _) = time(reps_long, || run.run_single(&opts))?;
        let _ = std::fs::remove_file(&path);
        push(Figure::ratio(&format!("package.traced.{ext}"), format!("package {traced_tokens} tokens A3, full {ext} tracing"), &t, &base));
    }

    // The wafer: DeepSeek-V3, one layer, ER (docs/results-wafer.md §7).
    let side = if o.quick { 4 } else { 8 };
    let wcfg = wafer_cfg(
        WaferCfg { mapping: MappingKind::Er, ..WaferCfg::default() },
        &WaferOverrides { wafer: Some(GridArg { cols: side, rows: side, text: format!("{side}x{side}") }), tp: Some(4), ..Default::default() },
    )?;
    let layer = WaferLayer::new(wcfg, model_by_name("deepseek-v3")?, vec![MappingKind::Er], false, &LayerInput::default())?.with_routing(&LayerInput::default())?;
    let (t, cycles) = time(reps_long, || {
        let parts = layer.run(&RunOptions::default(), |_, _| Ok(()))?;
        match (parts.ok.first(), parts.failed.first()) {
            (Some((_, r)), _) => Ok(r.layer_cycles),
            (_, Some((_, e))) => Err(e.clone()),
            _ => Err(Error::Run("bench wafer: no result".into())),
        }
    })?;
    push(Figure::rate(&format!("wafer.er.{side}x{side}"), format!("wafer DeepSeek-V3 {side}x{side} TP=4 ER, one layer"), "cycles/s", cycles as f64, &t));

    // The balancer loop: NI-Balancer over iterations on the default 4x4 wafer.
    let iters = if o.quick { 3 } else { 10 };
    let bcfg = WaferCfg { mapping: MappingKind::Er, ..WaferCfg::default() };
    let setup = BalanceSetup::new(bcfg, model_by_name("qwen3-235b")?, BalanceCfg { warmup_iters: 0, ..BalanceCfg::default() }, vec![BalancerKind::TopoNi], iters, false)?
        .with_workload(&BalanceInput { trace: None, scenario: "mixed".into(), period: 50, skew: None })?;
    let (t, _) = time(reps_long, || {
        let parts = setup.run(&RunOptions::default(), |_| Ok(()))?;
        match parts.failed.into_iter().next() {
            Some((_, e)) => Err(e),
            None => Ok(()),
        }
    })?;
    push(Figure::rate(&format!("balance.topo-ni.{iters}"), format!("balance Qwen3-235B 4x4 ER topo-ni, {iters} iterations"), "iterations/s", iters as f64, &t));

    // A sweep's points per minute on every core (the smoke grid: 8 functional points).
    let grid = super::sweep::Grid::parse(include_str!("../../sweeps/smoke.toml"), "testbenches/sweeps/smoke.toml")?;
    let points = grid.points_unrun("smoke")?;
    super::sweep::check_workloads(&points, "smoke")?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let out = dir.join("bench-sweep.jsonl");
    let (t, n) = time(reps_long, || {
        let mut file = super::sweep::open_output(&out)?;
        let pending: Vec<_> = points.iter().collect();
        super::sweep::run_points(&pending, cores, &mut file, &out, false)?;
        let _ = std::fs::remove_file(&out);
        Ok(points.len())
    })?;
    if o.wave_dir.is_none() {
        let _ = std::fs::remove_dir(&dir);
    }
    push(Figure::rate("sweep.smoke", format!("sweep testbenches/sweeps/smoke.toml ({n} points) on {cores} core(s)"), "points/min", n as f64 * 60.0, &t));

    Ok(Suite { quick: o.quick, cores, figures })
}

/// A figure that moved between two suites by more than their noise.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Moved {
    pub name: String,
    pub old: f64,
    pub new: f64,
    /// new / old − 1.
    pub change: f64,
    /// The relative change that would not have been flagged.
    pub threshold: f64,
    /// Worse in the figure's own direction (slower, costlier tracing).
    pub regression: bool,
}

/// Compares `new` against a saved `old`: every figure whose change exceeds
/// max(old noise, new noise, [`NOISE_FLOOR`]); and the figures found in only one of them
/// (as text, second).
pub fn compare(old: &Suite, new: &Suite) -> (Vec<Moved>, Vec<String>) {
    let mut moved = Vec::new();
    let mut notes = Vec::new();
    if old.quick != new.quick {
        notes.push(format!("the saved suite was measured with quick = {}, this one with quick = {}", old.quick, new.quick));
    }
    for f in &new.figures {
        let Some(o) = old.figures.iter().find(|o| o.name == f.name) else {
            notes.push(format!("{}: not in the saved suite", f.name));
            continue;
        };
        let change = f.value / o.value - 1.0;
        let threshold = o.noise.max(f.noise).max(NOISE_FLOOR);
        if change.abs() > threshold {
            let regression = match f.better {
                Better::Higher => change < 0.0,
                Better::Lower => change > 0.0,
            };
            moved.push(Moved { name: f.name.clone(), old: o.value, new: f.value, change, threshold, regression });
        }
    }
    for o in &old.figures {
        if !new.figures.iter().any(|f| f.name == o.name) {
            notes.push(format!("{}: in the saved suite, not measured now", o.name));
        }
    }
    (moved, notes)
}

/// Reads a suite saved with `bench --save`.
pub fn load(p: &Path) -> Result<Suite> {
    let text = std::fs::read_to_string(p).map_err(|e| Error::io(p, format!("cannot read: {e}")))?;
    serde_json::from_str(&text).map_err(|e| Error::input(p.display().to_string(), format!("not a saved bench suite: {e}")))
}

/// Saves a suite (pretty JSON).
pub fn save(s: &Suite, p: &Path) -> Result<()> {
    super::ensure_parent(p)?;
    let text = serde_json::to_string_pretty(s).map_err(|e| Error::Run(e.to_string()))?;
    std::fs::write(p, text + "\n").map_err(|e| Error::io(p, format!("cannot write: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(name: &str, value: f64, noise: f64, better: Better) -> Figure {
        Figure { name: name.into(), what: String::new(), unit: String::new(), better, value, best: value, worst: value, noise, runs: 3 }
    }

    #[test]
    fn timing_median_min_max() {
        let t = Timing { walls: vec![3.0, 1.0, 2.0] };
        assert_eq!((t.min(), t.median(), t.max()), (1.0, 2.0, 3.0));
    }

    #[test]
    fn compare_flags_only_moves_beyond_noise() {
        let old = Suite { quick: false, cores: 2, figures: vec![fig("a", 100.0, 0.02, Better::Higher), fig("b", 100.0, 0.20, Better::Higher), fig("c", 2.0, 0.01, Better::Lower), fig("gone", 1.0, 0.0, Better::Higher)] };
        let new = Suite { quick: false, cores: 2, figures: vec![fig("a", 90.0, 0.02, Better::Higher), fig("b", 85.0, 0.02, Better::Higher), fig("c", 1.5, 0.01, Better::Lower), fig("new", 1.0, 0.0, Better::Higher)] };
        let (moved, notes) = compare(&old, &new);
        // a: −10 % beyond the 5 % floor, a regression; b: −15 % within its 20 % noise;
        // c: −25 % of a lower-is-better figure, an improvement.
        let names: Vec<_> = moved.iter().map(|m| (m.name.as_str(), m.regression)).collect();
        assert_eq!(names, vec![("a", true), ("c", false)]);
        assert!((moved[0].change + 0.10).abs() < 1e-12 && (moved[0].threshold - NOISE_FLOOR).abs() < 1e-12);
        assert_eq!(notes.len(), 2, "{notes:?}");
    }
}
