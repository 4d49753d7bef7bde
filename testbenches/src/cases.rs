//! The regression cases. Each states what it measures in its Ok message.

use hw::noc::{run_point, Mesh, NiCtx, NocCfg, TrafficPattern};

use crate::regress::Case;

pub fn cases() -> Vec<Case> {
    vec![
        Case { name: "noc/zero_load_latency_7_plus_5d", about: "every packet at 0.2 % load takes 7 + 5*D cycles (BookSim iq timing)", run: zero_load },
        Case { name: "noc/booksim_8x8_uniform_0.10", about: "8x8 uniform 0.10: packet latency within 10 % of BookSim2 34.09", run: booksim_010 },
        Case { name: "noc/booksim_8x8_uniform_0.25", about: "8x8 uniform 0.25: packet latency within 10 % of BookSim2 41.13", run: booksim_025 },
        Case { name: "noc/determinism_threads_ff", about: "stats identical: serial, 2 threads, no fast-forward", run: determinism },
        Case { name: "noc/credits_conserved", about: "credit conservation on every channel, every 5 cycles, 4x4 at 0.3", run: credits },
        Case { name: "noc/watchdog_names_blocked_buffer", about: "a port that never returns credits trips the watchdog with a diagnostic", run: watchdog },
        Case { name: "noc/transpose_bitcomp_hotspot", about: "every pattern delivers all packets on a 4x4 mesh", run: patterns },
        Case { name: "noc/serialization_narrow_links", about: "32-byte flits on 8-byte links: +3 cycles per link at zero load, plateau under the 0.125 bisection bound", run: serialization },
        Case { name: "wafer/worked_example_er_vs_baseline", about: "4x4 TP=4 DP=4 DeepSeek-V3: hops 8/3 -> 4/3, FTDs disjoint under ER, all-to-all faster, all-reduce slower", run: wafer_worked_example },
        Case { name: "wafer/functional_er_and_her", about: "all-reduce chunks, dispatched tokens and expert outputs equal the FL (ER 4x4, HER 2 wafers)", run: wafer_functional },
    ]
}

fn small(k: u32, rate: f64) -> NocCfg {
    let mut c = NocCfg::default();
    c.mesh.k = k;
    c.traffic.rate = rate;
    c
}

fn zero_load() -> Result<String, String> {
    let mut c = small(8, 0.002);
    c.traffic.seed = 3;
    // At 0.2 % load contention is rare: mean latency must be within 0.2 cycles of 7 + 5*E[D] measured
    // through hops (hops = D + 1).
    let (lat, hops, packets) = mean_latency_and_hops(&c)?;
    let expect = 2.0 + 5.0 * hops;
    if (lat - expect).abs() > 0.2 {
        return Err(format!("latency {lat:.3} vs 2 + 5*hops = {expect:.3}"));
    }
    Ok(format!("{packets} packets, latency {lat:.3} = 2 + 5 x {hops:.3} hops"))
}

/// Runs `c` for 20,000 cycles with all packets measured; mean packet latency, mean hops and
/// the number of packets delivered.
fn mean_latency_and_hops(c: &NocCfg) -> Result<(f64, f64, u64), String> {
    let mut mesh = Mesh::new(c).map_err(|e| e.to_string())?;
    mesh.run(20_000, &NiCtx::running(c.traffic.pattern.clone()), false).map_err(|e| e.to_string())?;
    let s = mesh.ni_totals();
    Ok((s.plat_sum as f64 / s.plat_count as f64, s.hops_sum as f64 / s.plat_count as f64, s.plat_count))
}

fn against_booksim(rate: f64, booksim: f64) -> Result<String, String> {
    let (r, _) = run_point(&small(8, rate), None, &mut |_| {}).map_err(|e| e.to_string())?;
    let err = (r.avg_packet_latency - booksim) / booksim;
    if err.abs() > 0.10 {
        return Err(format!("latency {:.2} vs BookSim2 {booksim} ({:+.1} %)", r.avg_packet_latency, 100.0 * err));
    }
    Ok(format!("latency {:.2} vs BookSim2 {booksim} ({:+.1} %), accepted {:.4}", r.avg_packet_latency, 100.0 * err, r.accepted_flit_rate))
}

fn booksim_010() -> Result<String, String> {
    against_booksim(0.10, 34.09)
}

fn booksim_025() -> Result<String, String> {
    against_booksim(0.25, 41.13)
}

fn determinism() -> Result<String, String> {
    let mut base = small(6, 0.25);
    base.traffic.packet_size = 3;
    let run = |threads: u32, ff: bool| {
        let mut c = base.clone();
        c.sim.threads = threads;
        c.sim.fast_forward = ff;
        let (r, m) = run_point(&c, None, &mut |_| {}).unwrap();
        (serde_json::to_string(&(r.avg_packet_latency, r.accepted_flit_rate, r.cycles, r.avg_hops)).unwrap(), m.ni_totals(), m.router_totals())
    };
    let a = run(1, true);
    for (t, ff) in [(2, true), (1, false), (2, false), (3, true)] {
        let b = run(t, ff);
        if a != b {
            return Err(format!("threads={t} ff={ff} differs: {} vs {}", b.0, a.0));
        }
    }
    Ok(format!("identical over 5 stepping modes: {}", a.0))
}

fn credits() -> Result<String, String> {
    let mut c = small(4, 0.3);
    c.traffic.packet_size = 4;
    c.mesh.router.vc_buf = 3;
    let mut mesh = Mesh::new(&c).map_err(|e| e.to_string())?;
    let ctx = NiCtx::running(TrafficPattern::Uniform);
    let mut checks = 0;
    while mesh.now() < 3000 {
        let end = mesh.now() + 4;
        mesh.run(end, &ctx, false).map_err(|e| e.to_string())?;
        mesh.check_credits()?;
        checks += 1;
    }
    Ok(format!("{checks} checks passed"))
}

fn watchdog() -> Result<String, String> {
    let mut c = small(3, 0.2);
    c.measure.watchdog_cycles = 500;
    let mut mesh = Mesh::new(&c).map_err(|e| e.to_string())?;
    mesh.tile_mut(4).router.fault_zero_credits(0); // centre router, +x output never gets credits
    let ctx = NiCtx::running(TrafficPattern::Uniform);
    match mesh.run(100_000, &ctx, false) {
        Err(hw::noc::NocError::Watchdog(r)) => {
            let text = r.to_string();
            if !text.contains("top.mesh.r_1_1.router.in_") || !text.contains("out_e") {
                return Err(format!("diagnostic does not name the blocked buffer:\n{text}"));
            }
            Ok(format!("tripped at cycle {} naming {} blocked buffer(s)", r.cycle, r.blocked.len()))
        }
        Err(e) => Err(format!("unexpected error {e}")),
        Ok(_) => Err("watchdog did not trip".into()),
    }
}

fn patterns() -> Result<String, String> {
    let mut out = Vec::new();
    for p in [TrafficPattern::Transpose, TrafficPattern::BitComplement, TrafficPattern::Hotspot { nodes: vec![5], fraction: 0.3 }] {
        let mut c = small(4, 0.15);
        c.traffic.pattern = p.clone();
        c.traffic.packet_size = 2;
        let (r, m) = run_point(&c, None, &mut |_| {}).map_err(|e| e.to_string())?;
        let s = m.ni_totals();
        if s.measured_gen != s.measured_ret {
            return Err(format!("{}: {} measured packets created, {} delivered", p.name(), s.measured_gen, s.measured_ret));
        }
        out.push(format!("{} lat {:.1}", p.name(), r.avg_packet_latency));
    }
    Ok(out.join(", "))
}

fn serialization() -> Result<String, String> {
    // Zero load: each of the D links adds ser - 1 = 3 cycles: T0 = 2 + 5H + 3D.
    let mut c = small(8, 0.002);
    c.mesh.flit_bytes = 32;
    c.mesh.link_width_bytes = 8;
    let (lat, hops, _) = mean_latency_and_hops(&c)?;
    let expect = 2.0 + 5.0 * hops + 3.0 * (hops - 1.0);
    if (lat - expect).abs() > 0.3 {
        return Err(format!("zero-load latency {lat:.3} vs 2 + 5H + 3D = {expect:.3}"));
    }
    // Saturation: a link carries one flit per 4 cycles, so uniform traffic on an 8x8 mesh is
    // bounded by the bisection: 4/k x 1/4 = 0.125 flits/node/cycle. With slow links the
    // router's allocation overheads hide behind serialization, so the plateau gets close to it.
    let mut hot = small(8, 0.2);
    hot.mesh.flit_bytes = 32;
    hot.mesh.link_width_bytes = 8;
    let (r, _) = run_point(&hot, None, &mut |_| {}).map_err(|e| e.to_string())?;
    if !(r.accepted_flit_rate > 0.09 && r.accepted_flit_rate <= 0.125 && r.saturated) {
        return Err(format!("accepted {:.4} at offered 0.2 (expected saturated, 0.09 ..= 0.125 bisection bound)", r.accepted_flit_rate));
    }
    Ok(format!("zero-load {lat:.2} = 2 + 5H + 3D; plateau {:.4} flits/node/cycle", r.accepted_flit_rate))
}

fn wafer_layer(c: &hw::wafer::WaferCfg, model: &str, functional: bool) -> Result<(sched::wafer::Mapping, hw::wafer::program::LayerProgram, hw::wafer::WaferRun, hw::wafer::Wafer), String> {
    let m = sched::models::model_by_name(model)?;
    let mp = sched::wafer::map(c.mapping, c.geom(), c.tp, c.dp, c.all_gather).map_err(|e| e.to_string())?;
    let routing = sched::wafer::routing::generated_routing(&m, c.dp, c.tokens_per_group, 0.0, c.seed)?;
    let prog = hw::wafer::program::build(c, &m, &mp, &routing);
    let mut w = hw::wafer::Wafer::new_with(c, &prog, 1, functional).map_err(|e| e.to_string())?;
    let r = w.run(1, true, 1 << 34, 500_000).map_err(|e| e.to_string())?;
    Ok((mp, prog, r, w))
}

fn wafer_worked_example() -> Result<String, String> {
    use hw::wafer::program::Phase;
    use sched::wafer::MappingKind;
    let cfg = |k| hw::wafer::WaferCfg { mapping: k, tokens_per_group: 64, micro_batches: 1, ..Default::default() };
    let (mb, _, rb, _) = wafer_layer(&cfg(MappingKind::Baseline), "deepseek-v3", false)?;
    let (me, _, re, _) = wafer_layer(&cfg(MappingKind::Er), "deepseek-v3", false)?;
    let (hb, he) = (mb.avg_a2a_hops(), me.avg_a2a_hops());
    if (hb - 8.0 / 3.0).abs() > 1e-9 || (he - 4.0 / 3.0).abs() > 1e-9 {
        return Err(format!("hops {hb} / {he}, want 8/3 / 4/3"));
    }
    if !me.ftds_disjoint() || mb.ftds_disjoint() {
        return Err("FTDs: want disjoint under ER only".into());
    }
    let a2a = |r: &hw::wafer::WaferRun| r.phase_cycles(Phase::Dispatch) + r.phase_cycles(Phase::Combine);
    let (ab, ae) = (a2a(&rb), a2a(&re));
    let (arb, are) = (rb.phase_cycles(Phase::AllReduce), re.phase_cycles(Phase::AllReduce));
    if ae >= ab || are <= arb {
        return Err(format!("all-to-all ER {ae} vs baseline {ab}; all-reduce ER {are} vs baseline {arb}"));
    }
    Ok(format!("hops 2.67 -> 1.33; all-to-all {ab} -> {ae} cycles ({:.2}x); all-reduce {arb} -> {are} cycles", ab as f64 / ae as f64))
}

fn wafer_functional() -> Result<String, String> {
    use sched::wafer::MappingKind;
    let er = hw::wafer::WaferCfg { mapping: MappingKind::Er, tokens_per_group: 16, micro_batches: 2, ..Default::default() };
    let her = hw::wafer::WaferCfg { die_cols: 2, die_rows: 2, wafers_x: 2, tp: 2, dp: 4, mapping: MappingKind::Her, tokens_per_group: 8, micro_batches: 2, ..Default::default() };
    let mut msg = Vec::new();
    for c in [er, her] {
        let (_, prog, _, w) = wafer_layer(&c, "qwen3-235b", true)?;
        let rep = hw::wafer::functional::check(&prog, &w)?;
        msg.push(format!("{}: {} chunks, {} tokens, {} outputs", c.mapping.name(), rep.chunks_checked, rep.tokens_checked, rep.outputs_checked));
    }
    Ok(msg.join("; "))
}
