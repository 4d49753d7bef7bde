//! One MoE layer of DeepSeek-V3 on a 4×4 wafer of dies, the baseline mapping against
//! ER-Mapping, driven from Rust through the run layer (`testbenches::run::wafer`) — the same
//! calls `waferstream wafer` makes.
//!
//! ```sh
//! cargo run --release --example wafer_layer
//! ```

use hw::wafer::WaferCfg;
use sched::models::model_by_name;
use sched::wafer::MappingKind;
use testbenches::run::wafer::{wafer_cfg, LayerInput, WaferLayer, WaferOverrides};
use testbenches::run::RunOptions;

fn main() -> Result<(), testbenches::Error> {
    // 1. The hardware. `WaferCfg::default()` is SPEC §4's wafer: 4×4 B200-class dies on one
    //    wafer, 1 GHz mesh routers, attention with tensor parallelism TP = 4 over DP = 4
    //    groups, 256 tokens per group. `wafer_cfg` applies overrides (the CLI's flags; none
    //    here) and validates the result.
    let cfg = wafer_cfg(WaferCfg::default(), &WaferOverrides::default())?;

    // 2. The model (its dimensions, experts and top-k; a `sched::Error` converts into the
    //    run layer's `testbenches::Error`) and where the layer's routing comes from: no
    //    trace, so it is generated (uniform without a skew).
    let model = model_by_name("deepseek-v3")?;
    let input = LayerInput::default();

    // 3. Build: `new` checks that the weights fit the dies' HBM and that every mapping's
    //    tables exist for this grid; `with_routing` then generates (or reads) the routing.
    //    Nothing is simulated yet. `false`: timing only (`true` carries real values
    //    through the collectives and checks them against the functional model).
    let layer = WaferLayer::new(cfg, model, vec![MappingKind::Baseline, MappingKind::Er], false, &input)?.with_routing(&input)?;

    // 4. Run each mapping: the mapping controller fills its tables, the layer program is
    //    built per die (attention, all-reduce, dispatch, experts, combine), and the mesh is
    //    simulated cycle by cycle. The closure sees each part as it finishes (the CLI prints
    //    there); `RunOptions::default()` = one thread, fast-forward, the wafer's limits.
    let parts = layer.run(&RunOptions::default(), |_part, _wave_file| Ok(()))?;

    // 5. The result: one `WaferResult` per finished mapping (`parts.ok`); a mapping that
    //    failed is in `parts.failed` with its error and did not stop the other.
    for (k, e) in &parts.failed {
        eprintln!("{}: failed: {e}", k.name());
    }
    println!("{:<9} {:>10} {:>10} {:>13} {:>12} {:>11} {:>9}", "mapping", "layer_cyc", "expert_cyc", "allreduce_cyc", "dispatch_cyc", "combine_cyc", "a2a_hops");
    for (k, r) in &parts.ok {
        println!("{:<9} {:>10} {:>10} {:>13} {:>12} {:>11} {:>9.2}", k.name(), r.layer_cycles, r.expert_cycles, r.allreduce_cycles, r.a2a_dispatch_cycles, r.a2a_combine_cycles, r.avg_a2a_hops);
    }
    // ER-Mapping shortens the collectives (fewer hops per all-to-all); the layer as a whole
    // is mostly attention and expert compute at this batch size.
    let comm = |r: &hw::wafer::WaferResult| r.allreduce_cycles + r.a2a_dispatch_cycles + r.a2a_combine_cycles;
    if let [(_, base), (_, er)] = parts.ok.as_slice() {
        println!("collectives: baseline {} vs ER {} cycles ({:.2}x); whole layer {:.2}x", comm(base), comm(er), comm(base) as f64 / comm(er) as f64, base.layer_cycles as f64 / er.layer_cycles as f64);
    }
    if parts.failed.is_empty() {
        Ok(())
    } else {
        Err(testbenches::Error::Run(format!("{} mapping(s) failed", parts.failed.len())))
    }
}
