//! SVG plots: the NoC load-latency curve and the package plots (plotters' SVG backend: no
//! font or image dependencies; text is SVG `<text>` in sans-serif).

use std::fmt::Display;
use std::path::{Path, PathBuf};

use hw::noc::SweepResult;
use hw::pkg::config::Strategy;
use hw::pkg::result::PkgResult;
use hw::pkg::timeline::{ChipletTimeline, Timeline};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::CliResult;

/// Packet and network latency against offered load, with accepted throughput on a second
/// axis: the classic NoC load–latency curve.
pub fn latency_curve(r: &SweepResult, path: &Path) -> CliResult<()> {
    let e = |x: &dyn std::fmt::Display| format!("plot {}: {x}", path.display());
    let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let max_rate = r.points.iter().map(|p| p.rate).fold(0.0, f64::max).max(0.01) * 1.05;
    // Cap the latency axis so an unstable point does not flatten the curve.
    let max_lat = r.points.iter().map(|p| p.avg_packet_latency).fold(0.0, f64::max).min(600.0) * 1.1 + 1.0;
    let title = format!("{}x{} mesh, {} traffic, {} VCs x {} flits, {}-flit packets", r.k, r.k, r.traffic, r.vcs, r.vc_buf, r.packet_size);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(55)
        .right_y_label_area_size(55)
        .build_cartesian_2d(0.0..max_rate, 0.0..max_lat)
        .map_err(|x| e(&x))?
        .set_secondary_coord(0.0..max_rate, 0.0..max_rate);
    chart
        .configure_mesh()
        .x_desc("offered load (flits/node/cycle)")
        .y_desc("latency (cycles)")
        .draw()
        .map_err(|x| e(&x))?;
    chart.configure_secondary_axes().y_desc("accepted (flits/node/cycle)").draw().map_err(|x| e(&x))?;
    let pts = |f: &dyn Fn(&hw::noc::PointResult) -> f64| -> Vec<(f64, f64)> { r.points.iter().map(|p| (p.rate, f(p).min(max_lat))).collect() };
    let plat = pts(&|p| p.avg_packet_latency);
    let nlat = pts(&|p| p.avg_network_latency);
    chart.draw_series(LineSeries::new(plat.clone(), RED.stroke_width(2))).map_err(|x| e(&x))?.label("packet latency").legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
    chart.draw_series(plat.iter().map(|&(x, y)| Circle::new((x, y), 3, RED.filled()))).map_err(|x| e(&x))?;
    chart.draw_series(LineSeries::new(nlat, BLUE.stroke_width(2))).map_err(|x| e(&x))?.label("network latency").legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE));
    let acc: Vec<(f64, f64)> = r.points.iter().map(|p| (p.rate, p.accepted_flit_rate)).collect();
    chart
        .draw_secondary_series(LineSeries::new(acc, GREEN.stroke_width(2)))
        .map_err(|x| e(&x))?
        .label("accepted throughput (right axis)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], GREEN));
    chart.configure_series_labels().border_style(BLACK).background_style(WHITE).position(SeriesLabelPosition::UpperLeft).draw().map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Package plots (the paper's Fig. 9, 11, 12, 13 and a cycle breakdown).
//
// Layout is done in pixels where plotters' automatic labels would fall between categories:
// row labels, strategy names and legends are placed with `backend_coord`, so they stay at
// the bar or lane they name whatever tick positions plotters would choose.

/// One point of a token sweep: a strategy's layer latency at a batch size.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyPoint {
    pub model: String,
    pub tokens: u32,
    pub strategy: String,
    pub latency_cycles: u64,
}

const FONT: &str = "sans-serif";
/// Signals of the timeline lanes (fixed colours so every file reads the same way).
const PE_COLOR: RGBColor = RGBColor(44, 160, 44);
const TX_COLOR: RGBColor = RGBColor(255, 127, 14);
const RX_COLOR: RGBColor = RGBColor(148, 103, 189);
const DDR_COLOR: RGBColor = RGBColor(31, 119, 180);
const LANE_BG: RGBColor = RGBColor(240, 240, 240);

/// A bar series: legend label, colour and the value it reads from `T`.
type Entry<T, V> = (&'static str, RGBColor, fn(&T) -> V);

fn err(path: &Path, x: impl Display) -> String {
    format!("plot {}: {x}", path.display())
}

/// A strategy keeps its colour in every plot (index in `Strategy::ALL`); names outside it
/// (a sweep line of a future strategy) take the spare colours.
fn strategy_color(name: &str) -> RGBColor {
    const KNOWN: [RGBColor; 9] = [
        RGBColor(31, 119, 180),  // ep
        RGBColor(23, 80, 120),   // ep-paper
        RGBColor(197, 176, 213), // hydra
        RGBColor(148, 103, 189), // hydra-oracle (the colour `hydra` had before)
        RGBColor(140, 86, 75),   // a1
        RGBColor(255, 127, 14),  // a2
        RGBColor(44, 160, 44),   // a3
        RGBColor(214, 39, 40),   // a4
        RGBColor(23, 190, 207),  // a5
    ];
    const SPARE: [RGBColor; 3] = [RGBColor(127, 127, 127), RGBColor(188, 189, 34), RGBColor(227, 119, 194)];
    match Strategy::parse(name) {
        Ok(s) => KNOWN[Strategy::ALL.iter().position(|&a| a == s).unwrap_or(0) % KNOWN.len()],
        Err(_) => SPARE[name.bytes().map(usize::from).sum::<usize>() % SPARE.len()],
    }
}

/// Display names of the results: the strategy name, with `-2`, `-3`… for repeats so no two
/// files or bars share a name.
fn result_names(results: &[PkgResult]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(results.len());
    for r in results {
        let base = r.strategy.name();
        let mut name = base.to_string();
        let mut k = 2;
        while out.contains(&name) {
            name = format!("{base}-{k}");
            k += 1;
        }
        out.push(name);
    }
    out
}

/// Compact cycle counts for axis labels: 950, 12.5k, 1.2M.
fn fmt_count(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if a >= 1e4 {
        format!("{}k", trim(v / 1e3))
    } else {
        format!("{}", v.round() as i64)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.1}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

fn finite(v: f64) -> f64 {
    if v.is_finite() {
        v
    } else {
        0.0
    }
}

fn text_style(size: u32, h: HPos, v: VPos) -> TextStyle<'static> {
    (FONT, size).into_font().color(&BLACK).pos(Pos::new(h, v))
}

/// Where a run's timeline ends, core cycles: the latency, or the bins when the latency is 0.
fn run_end(r: &PkgResult, t: &Timeline) -> f64 {
    let bins_end = t.bins as f64 * t.bin_cycles.max(1) as f64;
    if r.latency_cycles > 0 {
        r.latency_cycles as f64
    } else {
        bins_end
    }
}

/// Start and width (core cycles) of bin `b`: the last bin stops at the run's end.
fn bin_span(t: &Timeline, b: usize, end: f64) -> (f64, f64) {
    let w = t.bin_cycles.max(1) as f64;
    let start = b as f64 * w;
    let width = (end.min(start + w) - start).max(0.0);
    (start, if width > 0.0 { width } else { w })
}

fn at(v: &[f64], b: usize) -> f64 {
    finite(v.get(b).copied().unwrap_or(0.0)).max(0.0)
}

/// Writes every package plot for `results` (one run: several strategies, same workload) into
/// `dir` (created if missing); returns the files written, in this order:
///
/// - `timeline-<strategy>.svg` per result with a timeline (Fig. 13): per chiplet, four lanes —
///   PE busy fraction, D2D bytes sent, D2D bytes received, DDR bytes read — per time bin, as
///   bars whose height is the fraction of the lane's scale (stated in the legend);
/// - `pe-utilization.svg` if any result has a timeline (Fig. 11): MACs per bin over the
///   package's peak MACs in that bin, one line per strategy on a common cycle axis;
/// - `memory.svg` (Fig. 12): peak and mean on-chip weight bytes and peak token bytes per
///   strategy, MB (10^6 bytes);
/// - `cycle-breakdown.svg`: per strategy, the share of chiplet-cycles in compute, fill, DDR
///   wait, D2D wait, scheduler wait and tail.
///
/// A strategy that appears twice gets `-2`, `-3`… after its name. Nothing is written for an
/// empty `results`.
pub fn package_plots(dir: &Path, title: &str, results: &[PkgResult]) -> CliResult<Vec<PathBuf>> {
    if results.is_empty() {
        return Ok(Vec::new());
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let names = result_names(results);
    let d2d_scale = d2d_scale(results);
    let mut out = Vec::new();
    for (r, name) in results.iter().zip(&names) {
        if let Some(t) = &r.timeline {
            let p = dir.join(format!("timeline-{name}.svg"));
            timeline_plot(&p, title, name, r, t, d2d_scale)?;
            out.push(p);
        }
    }
    if results.iter().any(|r| r.timeline.is_some()) {
        let p = dir.join("pe-utilization.svg");
        utilization_plot(&p, title, results, &names)?;
        out.push(p);
    }
    let p = dir.join("memory.svg");
    memory_plot(&p, title, results, &names)?;
    out.push(p);
    let p = dir.join("cycle-breakdown.svg");
    breakdown_plot(&p, title, results, &names)?;
    out.push(p);
    Ok(out)
}

/// D2D lanes' full scale, bytes per cycle: the busiest bin of any chiplet, direction and
/// strategy, so the timelines of one run compare lane for lane. (A chiplet's link peak
/// depends on its mesh degree, which the results do not carry.)
fn d2d_scale(results: &[PkgResult]) -> f64 {
    let tl = results.iter().filter_map(|r| r.timeline.as_ref().map(|t| (r, t)));
    tl.map(|(r, t)| busiest(t, run_end(r, t), |c| [&c.d2d_tx_bytes, &c.d2d_rx_bytes])).fold(0.0, f64::max)
}

/// The highest per-cycle rate of the chosen series over all chiplets and bins. A partial last
/// bin counts only when there is no full one: a flit or burst landing in a few-cycle tail
/// would otherwise set the scale and flatten every other bar.
fn busiest<'a, const K: usize>(t: &'a Timeline, end: f64, series: impl Fn(&'a ChipletTimeline) -> [&'a Vec<f64>; K]) -> f64 {
    let full = t.bin_cycles.max(1) as f64;
    let has_full = (0..t.bins).any(|b| bin_span(t, b, end).1 >= full);
    let mut m = 0.0f64;
    for c in &t.chiplets {
        for v in series(c) {
            for b in 0..t.bins {
                let (x0, w) = bin_span(t, b, end);
                if x0 < end && (w >= full || !has_full) {
                    m = m.max(at(v, b) / w);
                }
            }
        }
    }
    m
}

/// Fig. 13: one lane group per chiplet.
fn timeline_plot(path: &Path, title: &str, name: &str, r: &PkgResult, t: &Timeline, d2d_scale: f64) -> CliResult<()> {
    const LANES: usize = 4;
    const GROUP: f64 = LANES as f64 + 0.6; // lane units per chiplet, with a gap
    const LANE_PX: u32 = 16;
    let n = t.chiplets.len();
    let end = run_end(r, t).max(1.0);
    // DDR scale: the chiplet's DDR peak (the roofline's DDR time gives the package peak; the
    // chiplets are alike), else the busiest bin.
    let ddr_peak = if r.roofline.ddr_cycles > 0.0 && r.ddr_bytes > 0 && n > 0 { finite(r.ddr_bytes as f64 / r.roofline.ddr_cycles / n as f64) } else { 0.0 };
    let ddr_busiest = busiest(t, end, |c| [&c.ddr_bytes]);
    let (ddr_scale, ddr_note) = if ddr_peak > 0.0 { (ddr_peak, "DDR peak per chiplet") } else { (ddr_busiest, "busiest bin") };
    const LEGEND_PX: u32 = 95;
    let height = (n.max(1) as f64 * GROUP * LANE_PX as f64) as u32 + 120 + LEGEND_PX;
    let root = SVGBackend::new(path, (1200, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| err(path, x))?;
    let (main, legend) = root.split_vertically(height - LEGEND_PX);
    let ymax = n.max(1) as f64 * GROUP;
    let mut chart = ChartBuilder::on(&main)
        .caption(format!("{title}: {name} activity per chiplet ({} bins of {} cycles)", t.bins, t.bin_cycles), (FONT, 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(110)
        .right_y_label_area_size(90)
        .build_cartesian_2d(0.0..end, 0.0..ymax)
        .map_err(|x| err(path, x))?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .x_desc("time (core cycles)")
        .x_label_formatter(&|v| fmt_count(*v))
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .light_line_style(WHITE)
        .draw()
        .map_err(|x| err(path, x))?;
    // Lane `l` of chiplet `c` spans [y0, y0 + 1) with chiplet 0 at the top.
    let lane_y = |c: usize, l: usize| ymax - (c as f64 * GROUP + l as f64 + 1.0);
    let lane_names = ["PE busy", "D2D tx", "D2D rx", "DDR read"];
    let colors = [PE_COLOR, TX_COLOR, RX_COLOR, DDR_COLOR];
    for (c, ch) in t.chiplets.iter().enumerate() {
        for l in 0..LANES {
            let y0 = lane_y(c, l);
            chart.draw_series(std::iter::once(Rectangle::new([(0.0, y0 + 0.05), (end, y0 + 0.95)], LANE_BG.filled()))).map_err(|x| err(path, x))?;
            let (series, scale) = match l {
                0 => (&ch.pe_busy, 1.0),
                1 => (&ch.d2d_tx_bytes, d2d_scale),
                2 => (&ch.d2d_rx_bytes, d2d_scale),
                _ => (&ch.ddr_bytes, ddr_scale),
            };
            let bars = (0..t.bins).filter_map(|b| {
                let (x0, w) = bin_span(t, b, end);
                if x0 >= end {
                    return None;
                }
                let per_cycle = at(series, b) / w;
                let f = if scale > 0.0 { (per_cycle / scale).clamp(0.0, 1.0) } else { 0.0 };
                (f > 0.0).then(|| Rectangle::new([(x0, y0 + 0.05), (x0 + w, y0 + 0.05 + 0.9 * f)], colors[l].mix(0.9).filled()))
            });
            chart.draw_series(bars).map_err(|x| err(path, x))?;
            let (px, py) = chart.backend_coord(&(0.0, y0 + 0.5));
            let label = if l == 0 { format!("chiplet {c}  {}", lane_names[l]) } else { lane_names[l].to_string() };
            root.draw(&Text::new(label, (px - 6, py), text_style(12, HPos::Right, VPos::Center))).map_err(|x| err(path, x))?;
        }
        // The chiplet's busy share of the whole run, at the end of its PE lane.
        if let Some(cr) = r.chiplets.get(c) {
            if r.latency_cycles > 0 {
                let (px, py) = chart.backend_coord(&(end, lane_y(c, 0) + 0.5));
                let s = format!("busy {:.0}%", 100.0 * cr.pe_busy_cycles as f64 / r.latency_cycles as f64);
                root.draw(&Text::new(s, (px + 8, py), text_style(12, HPos::Left, VPos::Center))).map_err(|x| err(path, x))?;
            }
        }
    }
    if n == 0 {
        let (px, py) = chart.backend_coord(&(end / 2.0, ymax / 2.0));
        root.draw(&Text::new("no chiplets in the timeline", (px, py), text_style(14, HPos::Center, VPos::Center))).map_err(|x| err(path, x))?;
    }
    // One legend line per scale; tx and rx share one.
    let entries: [(&[RGBColor], String); 4] = [
        (&[PE_COLOR], "PE busy: fraction of the bin's cycles the PE array computes".to_string()),
        (&[TX_COLOR, RX_COLOR], scale_note("D2D tx, rx", d2d_scale, "the busiest bin of any chiplet and strategy of this run")),
        (&[DDR_COLOR], scale_note("DDR read", ddr_scale, ddr_note)),
        (&[], "Bar height = the fraction of the lane's scale (capped at 1); the grey band is the full height.".to_string()),
    ];
    for (k, (cols, s)) in entries.iter().enumerate() {
        let y = 14 + 22 * k as i32;
        for (j, col) in cols.iter().enumerate() {
            let x = 20 + 18 * j as i32;
            legend.draw(&Rectangle::new([(x, y - 7), (x + 14, y + 7)], col.filled())).map_err(|x| err(path, x))?;
        }
        legend.draw(&Text::new(s.clone(), (60, y), text_style(13, HPos::Left, VPos::Center))).map_err(|x| err(path, x))?;
    }
    root.present().map_err(|x| err(path, x))?;
    Ok(())
}

fn scale_note(lane: &str, scale: f64, why: &str) -> String {
    if scale > 0.0 {
        format!("{lane}: bytes per cycle / {} B/cycle ({why})", trim(scale))
    } else {
        format!("{lane}: no traffic")
    }
}

/// Fig. 11: PE utilization per bin, one step line per strategy.
fn utilization_plot(path: &Path, title: &str, results: &[PkgResult], names: &[String]) -> CliResult<()> {
    // Step lines first: the y axis fits the highest bin (a small batch rarely passes 20%).
    let mut lines = Vec::new();
    for (r, name) in results.iter().zip(names) {
        let Some(t) = &r.timeline else { continue };
        let end = run_end(r, t);
        let peak = t.pe_macs_per_cycle as f64 * t.chiplets.len() as f64;
        let mut pts = Vec::with_capacity(2 * t.bins);
        for b in 0..t.bins {
            let (x0, w) = bin_span(t, b, end);
            if x0 >= end {
                break;
            }
            let macs: f64 = t.chiplets.iter().map(|c| at(&c.macs, b)).sum();
            let u = if peak > 0.0 { (100.0 * macs / (peak * w)).min(105.0) } else { 0.0 };
            pts.push((x0, u));
            pts.push((x0 + w, u));
        }
        let label = format!("{name}: {} cycles, mean {:.1}%", fmt_count(r.latency_cycles as f64), 100.0 * finite(r.utilization));
        lines.push((pts, strategy_color(r.strategy.name()), label));
    }
    let xmax = results.iter().filter_map(|r| r.timeline.as_ref().map(|t| run_end(r, t))).fold(1.0, f64::max);
    let umax = lines.iter().flat_map(|l| l.0.iter().map(|p| p.1)).fold(0.0, f64::max);
    let ymax = (umax * 1.3).clamp(5.0, 105.0);
    let root = SVGBackend::new(path, (1000, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| err(path, x))?;
    let mut chart = plain_chart(&root, format!("{title}: PE utilization over time"), 0.0..xmax, 0.0..ymax, path)?;
    chart
        .configure_mesh()
        .x_desc("time (core cycles)")
        .y_desc("PE utilization (% of peak MACs)")
        .x_label_formatter(&|v| fmt_count(*v))
        .y_label_formatter(&|v| if *v <= 100.0 { trim(*v) } else { String::new() })
        .light_line_style(WHITE)
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .draw()
        .map_err(|x| err(path, x))?;
    for (pts, col, label) in lines {
        chart
            .draw_series(LineSeries::new(pts, col.stroke_width(2)))
            .map_err(|x| err(path, x))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(2)));
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight, path)?;
    root.present().map_err(|x| err(path, x))?;
    Ok(())
}

/// A chart of the package plots: caption, 15-pixel margin, label areas for one x and one y
/// axis, linear coordinates over `x` × `y`.
fn plain_chart<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, plotters::coord::Shift>,
    caption: String,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
    path: &Path,
) -> CliResult<ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>> {
    ChartBuilder::on(area).caption(caption, (FONT, 20)).margin(15).x_label_area_size(45).y_label_area_size(60).build_cartesian_2d(x, y).map_err(|x| err(path, x))
}

/// The series legend of a chart (framed, translucent white, at `pos`).
fn legend<'a, DB: DrawingBackend + 'a>(chart: &mut ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>, pos: SeriesLabelPosition, path: &Path) -> CliResult<()> {
    chart.configure_series_labels().label_font((FONT, 13)).border_style(BLACK).background_style(WHITE.mix(0.9)).position(pos).draw().map_err(|x| err(path, x))
}

/// Draws strategy names under category `i` (centred at x = i + 0.5) of a categorical chart.
fn category_labels<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    chart: &ChartContext<DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    names: &[String],
    path: &Path,
) -> CliResult<()> {
    for (i, name) in names.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
        root.draw(&Text::new(name.clone(), (px, py + 8), text_style(14, HPos::Center, VPos::Top))).map_err(|x| err(path, x))?;
    }
    Ok(())
}

/// Fig. 12: on-chip memory per strategy, grouped bars in MB.
fn memory_plot(path: &Path, title: &str, results: &[PkgResult], names: &[String]) -> CliResult<()> {
    let series: [Entry<PkgResult, f64>; 3] = [
        ("peak weight bytes (sum of chiplet peaks)", RGBColor(31, 119, 180), |r| r.peak_weight_bytes as f64),
        ("mean weight bytes", RGBColor(158, 202, 225), |r| finite(r.mean_weight_bytes)),
        ("peak token bytes", RGBColor(255, 127, 14), |r| r.peak_token_bytes as f64),
    ];
    let mb = |v: f64| v.max(0.0) / 1e6;
    let ymax = results.iter().flat_map(|r| series.iter().map(move |s| mb((s.2)(r)))).fold(0.0, f64::max);
    let ymax = if ymax > 0.0 { ymax * 1.25 } else { 1.0 };
    let w = (200 + 110 * results.len() as u32).max(700);
    let root = SVGBackend::new(path, (w, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| err(path, x))?;
    let n = results.len() as f64;
    let mut chart = plain_chart(&root, format!("{title}: on-chip memory"), 0.0..n, 0.0..ymax, path)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("MB (10^6 bytes)")
        .light_line_style(WHITE)
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .draw()
        .map_err(|x| err(path, x))?;
    let bar = 0.8 / series.len() as f64;
    for (k, (label, col, f)) in series.iter().enumerate() {
        let col = *col;
        let bars = results.iter().enumerate().map(|(i, r)| {
            let x0 = i as f64 + 0.1 + k as f64 * bar;
            Rectangle::new([(x0, 0.0), (x0 + bar * 0.92, mb(f(r)))], col.filled())
        });
        chart
            .draw_series(bars)
            .map_err(|x| err(path, x))?
            .label(*label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], col.filled()));
        // Values above the bars (small: there are three per strategy).
        for (i, r) in results.iter().enumerate() {
            let v = mb(f(r));
            let (px, py) = chart.backend_coord(&(i as f64 + 0.1 + (k as f64 + 0.46) * bar, v));
            root.draw(&Text::new(mb_label(v), (px, py - 3), text_style(11, HPos::Center, VPos::Bottom))).map_err(|x| err(path, x))?;
        }
    }
    category_labels(&root, &chart, names, path)?;
    legend(&mut chart, SeriesLabelPosition::UpperRight, path)?;
    root.present().map_err(|x| err(path, x))?;
    Ok(())
}

fn mb_label(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Share of chiplet-cycles per state, one stacked bar per strategy.
fn breakdown_plot(path: &Path, title: &str, results: &[PkgResult], names: &[String]) -> CliResult<()> {
    let parts: [Entry<hw::pkg::timeline::CycleBreakdown, u64>; 6] = [
        ("compute", RGBColor(44, 160, 44), |c| c.compute),
        ("fill", RGBColor(199, 199, 199), |c| c.fill),
        ("DDR wait", RGBColor(31, 119, 180), |c| c.ddr_wait),
        ("D2D wait", RGBColor(255, 127, 14), |c| c.d2d_wait),
        ("scheduler wait", RGBColor(148, 103, 189), |c| c.sched_wait),
        ("tail", RGBColor(127, 127, 127), |c| c.tail),
    ];
    let w = (260 + 110 * results.len() as u32).max(700);
    let root = SVGBackend::new(path, (w, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| err(path, x))?;
    let (main, legend) = root.split_horizontally(w - 170);
    let n = results.len() as f64;
    let mut chart = plain_chart(&main, format!("{title}: where the chiplet-cycles go"), 0.0..n, 0.0..110.0, path)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("% of chiplets x latency")
        .light_line_style(WHITE)
        .y_label_formatter(&|v| if *v <= 100.0 { format!("{v:.0}") } else { String::new() })
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .draw()
        .map_err(|x| err(path, x))?;
    for (i, r) in results.iter().enumerate() {
        let denom = match (r.chiplets.len() as u64).saturating_mul(r.latency_cycles) {
            0 => r.cycles.total(),
            d => d,
        };
        let (x0, x1) = (i as f64 + 0.2, i as f64 + 0.8);
        if denom == 0 {
            let (px, py) = chart.backend_coord(&(i as f64 + 0.5, 50.0));
            root.draw(&Text::new("no cycles", (px, py), text_style(13, HPos::Center, VPos::Center))).map_err(|x| err(path, x))?;
            continue;
        }
        let mut y = 0.0;
        for (_, col, f) in &parts {
            let h = 100.0 * f(&r.cycles) as f64 / denom as f64;
            if h <= 0.0 {
                continue;
            }
            let top = (y + h).min(100.0);
            chart.draw_series(std::iter::once(Rectangle::new([(x0, y), (x1, top)], col.filled()))).map_err(|x| err(path, x))?;
            chart.draw_series(std::iter::once(Rectangle::new([(x0, y), (x1, top)], WHITE.stroke_width(1)))).map_err(|x| err(path, x))?;
            if h >= 4.0 {
                let (px, py) = chart.backend_coord(&(i as f64 + 0.5, (y + top) / 2.0));
                let s = (FONT, 12).into_font().color(&WHITE).pos(Pos::new(HPos::Center, VPos::Center));
                root.draw(&Text::new(format!("{h:.0}%"), (px, py), s)).map_err(|x| err(path, x))?;
            }
            y = top;
        }
        let (px, py) = chart.backend_coord(&(i as f64 + 0.5, y.min(100.0)));
        root.draw(&Text::new(format!("{} cyc", fmt_count(r.latency_cycles as f64)), (px, py - 4), text_style(12, HPos::Center, VPos::Bottom))).map_err(|x| err(path, x))?;
    }
    category_labels(&root, &chart, names, path)?;
    // Legend top-down in stacking order reversed, so it reads like the bars.
    for (k, (label, col, _)) in parts.iter().rev().enumerate() {
        let y = 80 + 26 * k as i32;
        legend.draw(&Rectangle::new([(5, y - 8), (21, y + 8)], col.filled())).map_err(|x| err(path, x))?;
        legend.draw(&Text::new(*label, (28, y), text_style(13, HPos::Left, VPos::Center))).map_err(|x| err(path, x))?;
    }
    root.present().map_err(|x| err(path, x))?;
    Ok(())
}

/// Fig. 9 style: layer latency (core cycles) against tokens, one line per strategy, one panel
/// per model (in first-seen order, two panels a row) in the one file `path`. The token axis is
/// log2; the latency axis is logarithmic when a panel's latencies span 20x or more, linear
/// otherwise. Tokens of 0 plot at 1 and latencies of 0 at 1 cycle on a log axis.
pub fn latency_vs_tokens(path: &Path, points: &[LatencyPoint]) -> CliResult<()> {
    super::ensure_parent(path)?;
    let mut models: Vec<&str> = Vec::new();
    for p in points {
        if !models.contains(&p.model.as_str()) {
            models.push(&p.model);
        }
    }
    let cols = models.len().clamp(1, 2);
    let rows = models.len().div_ceil(cols).max(1);
    let root = SVGBackend::new(path, (620 * cols as u32, 440 * rows as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| err(path, x))?;
    if models.is_empty() {
        root.draw(&Text::new("no sweep points", (310, 220), text_style(16, HPos::Center, VPos::Center))).map_err(|x| err(path, x))?;
    }
    let panels = root.split_evenly((rows, cols));
    for (model, area) in models.iter().zip(&panels) {
        let pts: Vec<&LatencyPoint> = points.iter().filter(|p| p.model == *model).collect();
        latency_panel(area, model, &pts, path)?;
    }
    root.present().map_err(|x| err(path, x))?;
    Ok(())
}

/// Ticks of a log axis over `[lo, hi]` (values, not logs): 1-2-5 per decade, or only the
/// powers of ten when that would crowd the axis.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let (d0, d1) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let within = |m: &[f64]| -> Vec<f64> { (d0..=d1).flat_map(|d| m.iter().map(move |k| k * 10f64.powi(d))).filter(|v| *v >= lo && *v <= hi).collect() };
    let fine = within(&[1.0, 2.0, 5.0]);
    if fine.len() > 10 {
        within(&[1.0])
    } else {
        fine
    }
}

/// One model's panel. On a log latency axis the chart's y holds log10(cycles) and the ticks
/// are drawn here (plotters' own log ticks skip everything below the first power of ten).
fn latency_panel(area: &DrawingArea<SVGBackend, plotters::coord::Shift>, model: &str, pts: &[&LatencyPoint], path: &Path) -> CliResult<()> {
    let l2 = |t: u32| f64::from(t.max(1)).log2();
    let lo = pts.iter().map(|p| l2(p.tokens)).fold(f64::INFINITY, f64::min).floor();
    let hi = pts.iter().map(|p| l2(p.tokens)).fold(f64::NEG_INFINITY, f64::max).ceil();
    let (lo, hi) = if lo < hi { (lo, hi) } else { (lo - 1.0, lo + 1.0) };
    let lat = |p: &LatencyPoint| (p.latency_cycles as f64).max(1.0);
    let lmin = pts.iter().map(|p| lat(p)).fold(f64::INFINITY, f64::min);
    let lmax = pts.iter().map(|p| lat(p)).fold(1.0, f64::max);
    let log = lmax / lmin >= 20.0;
    let (y_lo, y_hi) = if log { (lmin / 1.5, lmax * 1.5) } else { (0.0, lmax * 1.15) };
    let ty = |v: f64| if log { v.max(1.0).log10() } else { v };
    let mut chart = ChartBuilder::on(area)
        .caption(model, (FONT, 18))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d(lo - 0.25..hi + 0.25, ty(y_lo)..ty(y_hi))
        .map_err(|x| err(path, x))?;
    let mut mesh = chart.configure_mesh();
    mesh.x_labels((hi - lo) as usize + 2)
        .x_label_formatter(&|v| if (v - v.round()).abs() < 1e-6 { format!("{}", 2f64.powf(v.round())) } else { String::new() })
        .y_label_formatter(&|v| fmt_count(*v))
        .x_desc("tokens (log2)")
        .y_desc(if log { "layer latency (core cycles, log)" } else { "layer latency (core cycles)" })
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .light_line_style(WHITE);
    if log {
        mesh.y_labels(0).disable_y_mesh();
    }
    mesh.draw().map_err(|x| err(path, x))?;
    if log {
        let base = area.get_base_pixel();
        for v in log_ticks(y_lo, y_hi) {
            let y = v.log10();
            chart.draw_series(std::iter::once(PathElement::new(vec![(lo - 0.25, y), (hi + 0.25, y)], BLACK.mix(0.15)))).map_err(|x| err(path, x))?;
            let (px, py) = chart.backend_coord(&(lo - 0.25, y));
            let at = (px - base.0 - 8, py - base.1);
            area.draw(&Text::new(fmt_count(v), at, text_style(13, HPos::Right, VPos::Center))).map_err(|x| err(path, x))?;
            area.draw(&PathElement::new(vec![(at.0 + 3, at.1), (at.0 + 8, at.1)], BLACK)).map_err(|x| err(path, x))?;
        }
    }
    let mut strategies: Vec<&str> = Vec::new();
    for p in pts {
        if !strategies.contains(&p.strategy.as_str()) {
            strategies.push(&p.strategy);
        }
    }
    // A series name is a strategy, then the settings of other grid axes (a sweep's variant):
    // the strategy picks the colour, the variant the line weight and the marker, so every
    // series is told apart and a strategy's variants read as one family.
    let mut variants: Vec<&str> = Vec::new();
    for s in &strategies {
        let v = s.split_once(' ').map_or("", |x| x.1);
        if !variants.contains(&v) {
            variants.push(v);
        }
    }
    for s in strategies {
        let mut line: Vec<(f64, f64)> = pts.iter().filter(|p| p.strategy == s).map(|p| (l2(p.tokens), ty(p.latency_cycles as f64))).collect();
        line.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (base, var) = s.split_once(' ').unwrap_or((s, ""));
        let vi = variants.iter().position(|&v| v == var).unwrap_or(0);
        let col = strategy_color(base);
        let style = col.mix([1.0, 0.8, 0.55, 0.9][vi % 4]).stroke_width([3, 2, 1, 1][vi % 4]);
        chart
            .draw_series(LineSeries::new(line.clone(), style))
            .map_err(|x| err(path, x))?
            .label(s)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        match vi % 4 {
            0 => chart.draw_series(line.into_iter().map(|p| Circle::new(p, 3, col.filled()))).map_err(|x| err(path, x))?,
            1 => chart.draw_series(line.into_iter().map(|p| TriangleMarker::new(p, 4, col.filled()))).map_err(|x| err(path, x))?,
            2 => chart.draw_series(line.into_iter().map(|p| Cross::new(p, 4, col.stroke_width(1)))).map_err(|x| err(path, x))?,
            _ => chart.draw_series(line.into_iter().map(|p| Circle::new(p, 4, col.stroke_width(1)))).map_err(|x| err(path, x))?,
        };
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft, path)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hw::pkg::result::{ChipletResult, Roofline};
    use hw::pkg::timeline::CycleBreakdown;

    /// A run of `latency` cycles on four chiplets; `bins` timeline bins of 64 cycles (none
    /// when `bins` is None), activity made up but consistent with the counters.
    fn fake(strategy: Strategy, latency: u64, bins: Option<usize>) -> PkgResult {
        let n = 4usize;
        let per = CycleBreakdown { compute: latency / 2, fill: latency / 10, ddr_wait: latency / 8, d2d_wait: latency / 10, sched_wait: latency / 20, tail: 0 };
        let per = CycleBreakdown { tail: latency.saturating_sub(per.total()), ..per };
        let chiplets: Vec<ChipletResult> = (0..n).map(|i| ChipletResult { id: sched::ChipletId(i as u8), pe_busy_cycles: per.compute, cycles: per, ..Default::default() }).collect();
        let mut cycles = CycleBreakdown::default();
        chiplets.iter().for_each(|c| cycles.add(&c.cycles));
        let timeline = bins.map(|bins| Timeline {
            bin_cycles: 64,
            bins,
            pe_macs_per_cycle: 1024,
            chiplets: (0..n)
                .map(|c| {
                    // The last bin holds only the cycles of the run that fall in it.
                    let part = |b: usize| ((latency as f64 - b as f64 * 64.0) / 64.0).clamp(0.0, 1.0);
                    let wave = |k: f64| (0..bins).map(|b| (((b + c) as f64 * k).sin() * 0.5 + 0.5) * part(b)).collect::<Vec<f64>>();
                    ChipletTimeline {
                        pe_busy: wave(0.3).iter().map(|f| f * 64.0).collect(),
                        macs: wave(0.3).iter().map(|f| f * 64.0 * 1024.0 * 0.8).collect(),
                        ddr_bytes: wave(0.7).iter().map(|f| f * 64.0 * 32.0).collect(),
                        d2d_tx_bytes: wave(0.5).iter().map(|f| f * 64.0 * 16.0).collect(),
                        d2d_rx_bytes: wave(0.9).iter().map(|f| f * 64.0 * 16.0).collect(),
                        weight_bytes: wave(0.1).iter().map(|f| f * 4e6).collect(),
                    }
                })
                .collect(),
        });
        let ddr_bytes = 64 * 32 * bins.unwrap_or(0) as u64 * n as u64 / 2;
        PkgResult {
            strategy,
            latency_cycles: latency,
            utilization: 0.4,
            pe_busy_fraction: 0.5,
            peak_weight_bytes: 12_000_000,
            mean_weight_bytes: 7.5e6,
            peak_token_bytes: 1_500_000,
            ddr_bytes,
            d2d_bytes: 1 << 20,
            macs: 1 << 30,
            sched_decision_cycles_max: 3,
            roofline_cycles: latency / 2,
            roofline: Roofline { ddr_cycles: ddr_bytes as f64 / (64.0 * n as f64), compute_cycles: 1.0, d2d_cycles: 1.0, cycles: latency / 2, bound: "ddr" },
            roofline_ratio: 2.0,
            cycles_per_second: 1e6,
            wall_seconds: 1.0,
            replays: 0,
            outputs_match_reference: None,
            rule5_redirected: 0,
            session: Default::default(),
            cycles,
            chiplets,
            timeline,
        }
    }

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("waferstream-plot-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn svg(p: &Path) -> String {
        let s = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert!(s.trim_start().starts_with("<svg"), "{} does not start with <svg", p.display());
        assert!(s.trim_end().ends_with("</svg>"), "{} is not closed", p.display());
        s
    }

    /// Whether the SVG has a <text> element reading exactly `t` (plotters puts the text on
    /// its own line).
    fn has_text(svg: &str, t: &str) -> bool {
        svg.contains(&format!(">{t}<")) || svg.contains(&format!(">\n{t}\n<"))
    }

    #[test]
    fn package_plots_write_every_file_with_the_strategies() {
        let dir = tmp("pkg");
        // 100 bins, the last one partial (latency not a multiple of the bin width).
        let rs = vec![fake(Strategy::Ep, 6_380, Some(100)), fake(Strategy::A3, 4_100, Some(65)), fake(Strategy::A5, 4_500, None)];
        let files = package_plots(&dir, "test layer", &rs).expect("plots");
        let names: Vec<String> = files.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(names, ["timeline-ep.svg", "timeline-a3.svg", "pe-utilization.svg", "memory.svg", "cycle-breakdown.svg"]);
        for f in &files {
            assert!(std::fs::metadata(f).expect("written").len() > 500, "{} is nearly empty", f.display());
            svg(f);
        }
        assert!(svg(&dir.join("timeline-a3.svg")).contains("chiplet 3"));
        for f in ["memory.svg", "cycle-breakdown.svg"] {
            let s = svg(&dir.join(f));
            for st in ["ep", "a3", "a5"] {
                assert!(has_text(&s, st), "{f} lacks {st}");
            }
        }
        let u = svg(&dir.join("pe-utilization.svg"));
        assert!(u.contains("ep: ") && u.contains("a3: ") && !u.contains("a5: "), "utilization legend");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn edge_cases_do_not_panic() {
        let dir = tmp("edge");
        // Nothing to plot: nothing written.
        assert!(package_plots(&dir, "empty", &[]).expect("empty").is_empty());
        // One strategy, no timeline: memory and breakdown only.
        let files = package_plots(&dir, "one", &[fake(Strategy::A1, 1000, None)]).expect("one");
        assert_eq!(files.len(), 2);
        // Zero bins, zero latency, empty vectors, a timeline with no chiplets, a repeated strategy.
        let mut z = fake(Strategy::A3, 0, Some(0));
        z.chiplets.clear();
        z.cycles = CycleBreakdown::default();
        z.mean_weight_bytes = f64::NAN;
        z.utilization = f64::NAN;
        let mut e = fake(Strategy::A3, 500, Some(3));
        e.timeline.as_mut().unwrap().chiplets.iter_mut().for_each(|c| *c = ChipletTimeline::default());
        let mut nochip = fake(Strategy::Ep, 10, Some(1));
        nochip.timeline = Some(Timeline::default());
        let files = package_plots(&dir, "edge", &[z, e, nochip]).expect("edge");
        let names: Vec<String> = files.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(names, ["timeline-a3.svg", "timeline-a3-2.svg", "timeline-ep.svg", "pe-utilization.svg", "memory.svg", "cycle-breakdown.svg"]);
        files.iter().for_each(|f| drop(svg(f)));
        // An unwritable directory is an error naming it, not a panic.
        let blocker = dir.join("file");
        std::fs::write(&blocker, "x").expect("blocker");
        let e = package_plots(&blocker.join("sub"), "x", &[fake(Strategy::A1, 10, None)]).expect_err("unwritable");
        assert!(e.contains("file"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn latency_vs_tokens_panels_per_model() {
        let dir = tmp("lvt");
        let mut pts = Vec::new();
        for (m, scale) in [("qwen3", 1u64), ("olmoe", 3)] {
            for t in [16u32, 32, 64, 128, 256, 512, 1024] {
                for (s, k) in [("ep", 3u64), ("a3", 2), ("a5", 2)] {
                    pts.push(LatencyPoint { model: m.into(), tokens: t, strategy: s.into(), latency_cycles: scale * k * (2000 + 40 * t as u64) });
                }
            }
        }
        let p = dir.join("latency.svg");
        latency_vs_tokens(&p, &pts).expect("plot");
        let s = svg(&p);
        for w in ["qwen3", "olmoe", "ep", "a3", "a5", "16", "1024"] {
            assert!(has_text(&s, w), "lacks {w}");
        }
        // Log latency axis (20x span), one point, zero tokens and latency, no points at all.
        let mut wide = pts.clone();
        wide.push(LatencyPoint { model: "qwen3".into(), tokens: 2048, strategy: "ep".into(), latency_cycles: 10_000_000 });
        latency_vs_tokens(&dir.join("wide.svg"), &wide).expect("wide");
        latency_vs_tokens(&dir.join("one.svg"), &[LatencyPoint { model: "m".into(), tokens: 0, strategy: "x".into(), latency_cycles: 0 }]).expect("one");
        latency_vs_tokens(&dir.join("none.svg"), &[]).expect("none");
        for f in ["wide.svg", "one.svg", "none.svg"] {
            svg(&dir.join(f));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Per-phase link-utilization heatmaps of a wafer run (paper Fig. 11): one SVG per phase,
/// dies as grey squares, each die-to-die link as a bar between them, shaded by the flits it
/// carried in that phase (the busier direction) relative to the phase's busiest link; hot
/// links (`hot_fraction`) are outlined, cross-wafer links drawn dashed-dark at their ends.
pub fn wafer_heatmaps(dir: &Path, cfg: &hw::wafer::WaferCfg, r: &hw::wafer::WaferResult) -> CliResult<Vec<PathBuf>> {
    let (cols, rows) = (cfg.cols(), cfg.rows());
    let cell = (560 / cols.max(rows)).clamp(16, 90) as i32;
    let pad = 40;
    let (w, h) = (cols as i32 * cell + 2 * pad, rows as i32 * cell + 2 * pad + 30);
    let mut out = Vec::new();
    for p in hw::wafer::Phase::ALL {
        let phase = p.name();
        let path = dir.join(format!("wafer-{}-{phase}.svg", r.mapping));
        let root = SVGBackend::new(&path, (w as u32, h as u32)).into_drawing_area();
        root.fill(&WHITE).map_err(|x| err(&path, x))?;
        let max = r.links.iter().map(|l| l.flits[p]).max().unwrap_or(0).max(1) as f64;
        let title = format!("{} mapping, {phase}: link flits (max {})", r.mapping, max as u64);
        root.draw(&Text::new(title, (pad, 8), ("sans-serif", 16))).map_err(|x| err(&path, x))?;
        let center = |d: u32| (pad + (d % cols) as i32 * cell + cell / 2, pad + 30 + (d / cols) as i32 * cell + cell / 2);
        let die = cell * 2 / 5;
        // Links first (an undirected bar per neighbour pair, the busier direction's count).
        for l in r.links.iter().filter(|l| l.from < l.to) {
            let back = r.links.iter().find(|b| b.from == l.to && b.to == l.from);
            let f = l.flits[p].max(back.map_or(0, |b| b.flits[p])) as f64;
            let hot = l.heat[p] == hw::wafer::Heat::Hot || back.is_some_and(|b| b.heat[p] == hw::wafer::Heat::Hot);
            let x = (f / max).clamp(0.0, 1.0);
            let color = RGBColor((255.0 - 40.0 * x) as u8, (255.0 - 200.0 * x) as u8, (255.0 - 230.0 * x) as u8);
            let (a, b) = (center(l.from), center(l.to));
            let t = (cell / 6).max(3);
            let rect = if a.1 == b.1 { [(a.0 + die / 2, a.1 - t), (b.0 - die / 2, b.1 + t)] } else { [(a.0 - t, a.1 + die / 2), (b.0 + t, b.1 - die / 2)] };
            root.draw(&Rectangle::new(rect, color.filled())).map_err(|x| err(&path, x))?;
            if hot {
                root.draw(&Rectangle::new(rect, BLACK.stroke_width(2))).map_err(|x| err(&path, x))?;
            } else if l.cross_wafer {
                root.draw(&Rectangle::new(rect, RGBColor(90, 90, 200).stroke_width(1))).map_err(|x| err(&path, x))?;
            }
        }
        for d in 0..cols * rows {
            let (x, y) = center(d);
            root.draw(&Rectangle::new([(x - die / 2, y - die / 2), (x + die / 2, y + die / 2)], RGBColor(200, 200, 200).filled())).map_err(|x| err(&path, x))?;
        }
        root.present().map_err(|x| err(&path, x))?;
        drop(root);
        out.push(path);
    }
    Ok(out)
}
