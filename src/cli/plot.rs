//! SVG plots of sweep results (plotters' SVG backend: no font or image dependencies).

use std::path::Path;

use hw::noc::SweepResult;
use plotters::prelude::*;

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
