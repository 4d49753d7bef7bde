//! Latency-mode measurement with BookSim2's semantics (reference/booksim §7): sample periods,
//! warm-up with stats clears, convergence of cumulative latency and accepted rate, abort above
//! the latency threshold, and a drain of the measured packets while traffic continues.

use std::time::Instant;

use serde::Serialize;

use super::config::NocCfg;
use super::mesh::{Mesh, NocError, RunEnd};
use super::terminal::{NiCtx, Phase};
use super::tile_router::NocRtl;
use crate::harness::{Cycle, SignalSink};

/// How a measurement ended (BookSim's messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PointStatus {
    /// Converged and every measured packet was delivered.
    Converged,
    /// Hit `max_samples` without three converged periods in a row (BookSim: still drained and
    /// reported; "Too many sample periods needed to converge" when still warming up).
    NotConverged,
    /// Average latency (delivered + in flight) exceeded `latency_thres`: unstable.
    Unstable,
    /// Near-zero load: fewer than [`MIN_MEASURED_PACKETS`] measured packets, so neither
    /// latency nor saturation can be judged (not saturated).
    TooFewPackets,
}

/// Fewest measured packets for a point's latency and saturation verdict to mean anything.
pub const MIN_MEASURED_PACKETS: u64 = 10;

/// One injection rate.
#[derive(Debug, Clone, Serialize)]
pub struct PointResult {
    pub rate: f64,
    pub status: PointStatus,
    /// Saturated: unstable, not converged, accepted < 95 % of offered, or source queueing
    /// above 10 % of network latency.
    pub saturated: bool,
    pub avg_packet_latency: f64,
    pub avg_network_latency: f64,
    pub avg_flit_latency: f64,
    pub max_packet_latency: u64,
    pub accepted_flit_rate: f64,
    pub injected_flit_rate: f64,
    pub avg_hops: f64,
    pub measured_packets: u64,
    pub sample_periods: u64,
    pub cycles: Cycle,
    /// Cycles actually evaluated (fewer than `cycles` when fast-forward skipped idle ones).
    pub evaluated_cycles: u64,
    pub wall_seconds: f64,
    /// Router event counters summed over the mesh (whole run).
    pub router: super::router::RouterStats,
    /// Per router, by hierarchical name (`top.mesh.r_0_1.router`), when
    /// `measure.per_router_stats` is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_router: Option<std::collections::BTreeMap<String, super::router::RouterStats>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SweepResult {
    pub k: u32,
    pub vcs: u32,
    pub vc_buf: u32,
    pub packet_size: u32,
    pub traffic: String,
    pub seed: u64,
    pub threads: u32,
    pub points: Vec<PointResult>,
    /// Lowest swept rate flagged saturated, if any.
    pub saturation_rate: Option<f64>,
    /// Highest accepted flit rate over the sweep (the throughput plateau when saturated).
    pub max_accepted_flit_rate: f64,
    pub cycles: Cycle,
    pub wall_seconds: f64,
    pub cycles_per_second: f64,
}

/// Waveform output of a run.
pub struct WaveOut<'a> {
    pub sink: &'a mut dyn SignalSink,
}

/// Line trace of a run (DESIGN-NOTES S4): one line per selected router per cycle of `window`
/// (start inclusive, end exclusive), handed to `sink` in (cycle, router) order while the run
/// goes. The window is clamped by the run itself: lines stop when the measurement ends.
pub struct LineTraceOut<'a> {
    /// Selects routers by scope (`top.mesh.r_1_2`).
    pub select: &'a dyn Fn(&str) -> bool,
    pub window: (Cycle, Cycle),
    /// Receives each line; an error (e.g. a closed output) ends the run with it
    /// ([`NocError::LineTrace`], same text).
    pub sink: &'a mut dyn FnMut(String) -> Result<(), crate::Error>,
}

/// While tracing, the mesh runs in pieces of at most this many cycles, and the recorded
/// changes and lines are handed out after each piece.
const TRACE_PIECE_MAX: u64 = 1024;
const TRACE_PIECE_MIN: u64 = 16;
/// Bounds on what one piece may hold in memory; the piece is shortened for wide traces:
/// at most TRACE_CHANGES value changes (16-24 bytes each, if every traced signal changed
/// every cycle) and TRACE_LINES line-trace lines (~100 bytes each).
const TRACE_CHANGES: u64 = 1 << 20;
const TRACE_LINES: u64 = 1 << 16;

/// The trace outputs of one run, and how to step the mesh so they stay bounded.
struct Outs<'a, 'b> {
    waves: Option<WaveOut<'a>>,
    lines: Option<LineTraceOut<'b>>,
    /// Cycles (union of the windows) in which anything is recorded.
    span: (Cycle, Cycle),
    piece: u64,
}

impl Outs<'_, '_> {
    /// Hands out what the mesh recorded so far.
    fn flush(&mut self, mesh: &mut Mesh) -> Result<(), NocError> {
        if let Some(w) = self.waves.as_mut() {
            mesh.drain_trace(w.sink)?;
        }
        if let Some(l) = self.lines.as_mut() {
            for line in mesh.drain_line_trace() {
                (l.sink)(line).map_err(|e| NocError::LineTrace(e.to_string()))?;
            }
        }
        Ok(())
    }

    /// `mesh.run(end, ..)`, cut into pieces while tracing so that at most one piece of trace
    /// output is held in memory; one watchdog spans the pieces, so it sees one run.
    fn run(&mut self, mesh: &mut Mesh, end: Cycle, ctx: &NiCtx, stop_when_drained: bool) -> Result<RunEnd, NocError> {
        let mut wd = mesh.watchdog();
        loop {
            let now = mesh.now();
            let tracing = now < self.span.1 && end >= self.span.0;
            let stop = if tracing { end.min(now.saturating_add(self.piece - 1)) } else { end };
            let r = mesh.run_watched(stop, ctx, stop_when_drained, &mut wd)?;
            self.flush(mesh)?;
            if r == RunEnd::Drained || mesh.now() > end {
                return Ok(r);
            }
        }
    }
}

/// Runs one injection rate to completion (BookSim `_SingleSim` + final drain).
/// `progress` is called with the current cycle after every sample period.
pub fn run_point(cfg: &NocCfg, waves: Option<WaveOut>, progress: &mut dyn FnMut(Cycle)) -> Result<(PointResult, Mesh), NocError> {
    run_point_traced(cfg, waves, None, progress)
}

/// [`run_point`] with a waveform and/or a line trace. Tracing never changes the results.
/// Trace memory is bounded by the window and the selection, whatever the run length: the
/// change logs record only the waveform's window and selected signals, and the mesh runs in
/// pieces while tracing, handing out changes and lines after each. With a line trace every
/// cycle is evaluated (fast-forward off: results are identical, and each cycle gets its line).
pub fn run_point_traced(
    cfg: &NocCfg,
    waves: Option<WaveOut>,
    lines: Option<LineTraceOut>,
    progress: &mut dyn FnMut(Cycle),
) -> Result<(PointResult, Mesh), NocError> {
    run_mesh(Mesh::new(cfg)?, waves, lines, progress)
}

/// [`run_point_traced`] on a mesh built by the caller (fresh, from the point's config), e.g.
/// to declare its signals to a waveform writer without building a second mesh.
pub fn run_mesh(
    mut mesh: Mesh,
    waves: Option<WaveOut>,
    lines: Option<LineTraceOut>,
    progress: &mut dyn FnMut(Cycle),
) -> Result<(PointResult, Mesh), NocError> {
    let start = Instant::now();
    if lines.is_some() {
        mesh.cfg.sim.fast_forward = false;
    }
    let cfg = &mesh.cfg.clone();
    let mut span = (Cycle::MAX, 0);
    let mut piece = TRACE_PIECE_MAX;
    if let Some(w) = &waves {
        mesh.enable_trace_for(&*w.sink);
        let win = w.sink.window();
        span = (win.0, win.1);
        let n = mesh.signals_count();
        let wanted = (0..n).filter(|&i| w.sink.wants(i)).count() as u64;
        piece = piece.min(TRACE_CHANGES / wanted.max(1));
    }
    if let Some(l) = &lines {
        let n = mesh.enable_line_trace(l.select, l.window);
        if n == 0 {
            return Err(NocError::LineTrace("selects no router".into()));
        }
        span = (span.0.min(l.window.0), span.1.max(l.window.1));
        piece = piece.min(TRACE_LINES / n as u64);
    }
    let piece = piece.max(TRACE_PIECE_MIN);
    let mut outs = Outs { waves, lines, span, piece };
    let m = &cfg.measure;
    let nodes = cfg.mesh.nodes() as f64;
    let mut ctx = NiCtx { pattern: cfg.traffic.pattern.clone(), phase: Phase::WarmingUp, inject: true, log_deliveries: false };

    let mut total_phases = 0u64;
    let mut converged = 0u64;
    let mut prev_latency = 0.0f64;
    let mut prev_accepted = 0.0f64;
    let mut clear_last = false;
    let mut reset_time: Cycle = 0;
    let mut running_since: Cycle = 0;
    let mut aborted = false;

    // Average latency over delivered packets since the last clear plus every flit in flight
    // at its current age (BookSim's saturation test).
    let over_threshold = |mesh: &Mesh| -> bool {
        let s = mesh.ni_totals();
        let now = mesh.now();
        let (n_in, ctime_sum) = (s.gen_flits - s.ret_flits, s.gen_ctime_sum - s.ret_ctime_sum);
        let lat = s.plat_sum as f64 + (now as f64 * n_in as f64 - ctime_sum as f64);
        let cnt = (s.plat_count + n_in) as f64;
        cnt > 0.0 && lat / cnt > m.latency_thres
    };

    while total_phases < m.max_samples && (ctx.phase != Phase::Running || converged < 3) {
        if clear_last || (ctx.phase == Phase::WarmingUp && total_phases.is_multiple_of(2)) {
            clear_last = false;
            mesh.clear_stats();
            reset_time = mesh.now();
        }
        let end = mesh.now() + m.sample_period - 1;
        outs.run(&mut mesh, end, &ctx, false)?;
        progress(mesh.now());

        let s = mesh.ni_totals();
        let cur_latency = if s.plat_count > 0 { s.plat_sum as f64 / s.plat_count as f64 } else { 0.0 };
        let cur_accepted = s.accepted_flits as f64 / (mesh.now() - reset_time) as f64 / nodes;
        let rel = |cur: f64, prev: f64| if cur == 0.0 { if prev == 0.0 { 0.0 } else { f64::INFINITY } } else { ((cur - prev) / cur).abs() };
        let latency_change = rel(cur_latency, prev_latency);
        let accepted_change = rel(cur_accepted, prev_accepted);
        prev_latency = cur_latency;
        prev_accepted = cur_accepted;

        tracing::debug!(
            period = total_phases,
            cycle = mesh.now(),
            phase = ?ctx.phase,
            latency = cur_latency,
            accepted = cur_accepted,
            latency_change,
            accepted_change,
            "sample period"
        );
        if over_threshold(&mesh) {
            tracing::info!(cycle = mesh.now(), rate = cfg.traffic.rate, "average latency exceeded latency_thres: unstable");
            aborted = true;
            break;
        }
        match ctx.phase {
            Phase::WarmingUp => {
                if total_phases + 1 >= m.warmup_periods {
                    clear_last = true;
                    ctx.phase = Phase::Running;
                    running_since = mesh.now();
                }
            }
            Phase::Running => {
                if latency_change <= m.stopping_threshold && accepted_change <= m.acc_stopping_threshold {
                    converged += 1;
                } else {
                    converged = 0;
                }
            }
            Phase::Draining { .. } => unreachable!(),
        }
        total_phases += 1;
    }

    let mut status = PointStatus::NotConverged;
    // BookSim drains and reports a run that hit max_samples while running, but it did not
    // converge (its "finished, NOT converged" case).
    let converged_ok = converged >= 3;
    let drain_time = mesh.now();
    // Throughput window: end of warm-up to the end of the last sample period.
    let window = mesh.ni_totals();
    if !aborted && ctx.phase == Phase::Running {
        ctx.phase = Phase::Draining { drain_time };
        status = if converged_ok { PointStatus::Converged } else { PointStatus::NotConverged };
        // Keep injecting (unmeasured) traffic until every measured packet is delivered,
        // checking the latency threshold every 1000 cycles like BookSim.
        loop {
            let s = mesh.ni_totals();
            if s.measured_gen == s.measured_ret {
                break;
            }
            let end = mesh.now() + 999;
            let r = outs.run(&mut mesh, end, &ctx, true)?;
            progress(mesh.now());
            if r == RunEnd::Drained {
                break;
            }
            if over_threshold(&mesh) {
                aborted = true;
                break;
            }
        }
    }
    if let Some(w) = outs.waves.as_mut() {
        mesh.finish_trace(w.sink)?;
    }
    if aborted {
        status = PointStatus::Unstable;
    } else if mesh.ni_totals().plat_count < MIN_MEASURED_PACKETS {
        status = PointStatus::TooFewPackets;
    }
    tracing::info!(rate = cfg.traffic.rate, ?status, cycles = mesh.now(), evaluated = mesh.evaluated, "point done");
    let s = mesh.ni_totals();
    // Unstable runs report the window since the last stats clear, as BookSim's last
    // per-period print-out does.
    let (window, win_start, win_end) =
        if aborted { (s, reset_time, mesh.now()) } else { (window, running_since, drain_time) };
    let win_cycles = win_end.saturating_sub(win_start).max(1) as f64;
    let per_pkt = |x: u64| if s.plat_count > 0 { x as f64 / s.plat_count as f64 } else { 0.0 };
    let avg_packet_latency = per_pkt(s.plat_sum);
    let avg_network_latency = per_pkt(s.nlat_sum);
    let accepted = window.accepted_flits as f64 / win_cycles / nodes;
    let injected = window.injected_flits as f64 / win_cycles / nodes;
    let rate = cfg.traffic.rate;
    let saturated = status != PointStatus::Converged && status != PointStatus::TooFewPackets
        || (status == PointStatus::Converged && rate > 0.0 && accepted < 0.95 * rate)
        || (avg_packet_latency - avg_network_latency) > 0.1 * avg_network_latency;
    let r = PointResult {
        rate,
        status,
        saturated,
        avg_packet_latency,
        avg_network_latency,
        avg_flit_latency: if s.flat_count > 0 { s.flat_sum as f64 / s.flat_count as f64 } else { 0.0 },
        max_packet_latency: s.plat_max,
        accepted_flit_rate: accepted,
        injected_flit_rate: injected,
        avg_hops: per_pkt(s.hops_sum),
        measured_packets: s.plat_count,
        sample_periods: total_phases + (aborted as u64),
        cycles: mesh.now(),
        evaluated_cycles: mesh.evaluated,
        router: mesh.router_totals(),
        per_router: cfg.measure.per_router_stats.then(|| mesh.tiles().map(|t| (format!("{}.router", t.scope()), t.model().stats())).collect()),
        wall_seconds: start.elapsed().as_secs_f64(),
    };
    Ok((r, mesh))
}

/// Runs a list of injection rates (one fresh network each, as BookSim runs one per config).
pub fn run_sweep(cfg: &NocCfg, rates: &[f64], progress: &mut dyn FnMut(usize, Cycle)) -> Result<SweepResult, NocError> {
    run_sweep_with(cfg, NocRtl::default(), rates, progress)
}

/// [`run_sweep`] with stand-ins for some blocks (`noc --rtl router`): same results.
pub fn run_sweep_with(cfg: &NocCfg, rtl: NocRtl, rates: &[f64], progress: &mut dyn FnMut(usize, Cycle)) -> Result<SweepResult, NocError> {
    let start = Instant::now();
    let mut points = Vec::new();
    for (i, &rate) in rates.iter().enumerate() {
        let mut c = cfg.clone();
        c.traffic.rate = rate;
        let (p, _) = run_mesh(Mesh::with_rtl(&c, rtl)?, None, None, &mut |cy| progress(i, cy))?;
        points.push(p);
    }
    let cycles: Cycle = points.iter().map(|p| p.cycles).sum();
    let wall = start.elapsed().as_secs_f64();
    Ok(SweepResult {
        k: cfg.mesh.k,
        vcs: cfg.mesh.router.vcs,
        vc_buf: cfg.mesh.router.vc_buf,
        packet_size: cfg.traffic.packet_size,
        traffic: cfg.traffic.pattern.name().into(),
        seed: cfg.traffic.seed,
        threads: cfg.sim.threads,
        saturation_rate: lowest_saturated(&points),
        max_accepted_flit_rate: points.iter().map(|p| p.accepted_flit_rate).fold(0.0, f64::max),
        points,
        cycles,
        wall_seconds: wall,
        cycles_per_second: cycles as f64 / wall.max(1e-9),
    })
}

/// The lowest swept rate flagged saturated (rates may be listed in any order).
pub fn lowest_saturated(points: &[PointResult]) -> Option<f64> {
    points.iter().filter(|p| p.saturated).map(|p| p.rate).min_by(f64::total_cmp)
}
