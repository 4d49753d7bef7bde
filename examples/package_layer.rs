//! MoE layers of Qwen3-30B-A3B on the 2×2 FSE-DP chiplet package, EP against FSE-DP (A3),
//! driven from Rust through the run layer (`testbenches::run::package`) — the same calls
//! `waferstream package` makes.
//!
//! ```sh
//! cargo run --release --example package_layer                      # a few seconds
//! cargo run --release --example package_layer -- out/example.vcd  # + VCDs (about 360 MB)
//! ```
//!
//! Timing mode (the model's real dimensions, flits without payloads), 32 tokens per layer,
//! small enough to simulate in seconds. On SPEC's default array EP beats A3 at this size;
//! docs/results-fsedp.md shows where the order flips (wider PE arrays, sharded loading) and
//! why.

use hw::pkg::config::{PkgCfg, Strategy};
use hw::pkg::package::PkgRtl;
use testbenches::run::package::PackageInput;
use testbenches::run::{RunOptions, WaveSink};

fn main() -> Result<(), testbenches::Error> {
    // 1. The hardware. `PkgCfg::default()` is the package of SPEC §3: 2×2 chiplets at
    //    800 MHz, each with a 32×64 int8 PE array, a DDR3 channel and an 8 MiB weight
    //    buffer, UCIe links between them, and the IO die's trajectory scheduler. Every field
    //    can be changed here (or read from a TOML file, as `--config` does).
    let cfg = PkgCfg::default();

    // 2. The input: which model, how many tokens, and which layers. Without a trace the
    //    routing is generated (seeded Zipf, skew 1.0); `layers: 0..2` generates two MoE
    //    layers, run one after the other (a token's layer-1 work follows its layer 0).
    //    `None` fields take the defaults of `testbenches::run::limits`.
    let input = PackageInput { model: Some("qwen3-30b-a3b".into()), tokens: Some(32), layers: Some(0..2), ..Default::default() };

    // 3. Build: every check (config, model, tokens, strategies) happens here, before a
    //    cycle is simulated; a bad value comes back as `Error::Input` naming the field.
    //    `PkgRtl::default()` keeps the cycle-level (CL) models of both controllers.
    let run = input.build(cfg, vec![Strategy::Ep, Strategy::A3], PkgRtl::default())?;
    let w = run.workload();
    println!("{} on {}x{}: {} tokens x {} layers, {} experts top-{}", run.model().name, run.cfg().rows, run.cfg().cols, w.tokens(), w.layers(), w.experts(), run.model().top_k);

    // 4. Run. One `RunOptions` for every system: threads, fast-forward, cycle limits,
    //    progress bar, waveforms. With a path argument, the first layer of each strategy is
    //    dumped as VCD: `STEM-ep.vcd` and `STEM-a3.vcd` (one file per part of the run).
    let waves = std::env::args().nth(1).map(WaveSink::vcd);
    let opts = RunOptions { waves, verbose: true, ..Default::default() };
    let parts = run.run(&opts);

    // 5. The result: `Parts` splits the strategies into finished (`ok`: the strategy and
    //    its `PkgResult`) and failed (`failed`: the strategy and its error); one strategy
    //    failing (a watchdog, say) does not stop the other. Each `PkgResult` is already the
    //    merge of the run's layer batches (`session.layer_runs` of them).
    for (s, e) in &parts.failed {
        eprintln!("{}: failed: {e}", s.name());
    }
    println!("{:<8} {:>12} {:>7} {:>10} {:>10} {:>7}", "strategy", "latency_cyc", "util%", "ddr_MB", "d2d_MB", "layers");
    for (s, r) in &parts.ok {
        println!("{:<8} {:>12} {:>7.1} {:>10.2} {:>10.2} {:>7}", s.name(), r.latency_cycles, r.utilization * 100.0, r.ddr_bytes as f64 / 1e6, r.d2d_bytes as f64 / 1e6, r.session.layer_runs);
    }

    // 6. Merging by hand: results of the same strategy on the same package add up with
    //    `PkgResult::merge` (latencies, bytes and MACs add; peaks take the max; utilization
    //    is latency-weighted). Here: A3's two layers above, plus a third layer run on its
    //    own with other routing (another seed), as if it were the next iteration.
    let next = PackageInput { model: Some("qwen3-30b-a3b".into()), tokens: Some(32), seed: Some(2), ..Default::default() };
    let next = next.build(PkgCfg::default(), vec![Strategy::A3], PkgRtl::default())?.run_single(&RunOptions::default())?;
    if let Some((_, a3)) = parts.ok.iter().find(|(s, _)| *s == Strategy::A3) {
        let mut total = a3.clone();
        total.merge(next.clone());
        println!("a3, 2 layers + 1 more: {} + {} = {} cycles, utilization {:.1}%", a3.latency_cycles, next.latency_cycles, total.latency_cycles, total.utilization * 100.0);
    }
    if parts.failed.is_empty() {
        Ok(())
    } else {
        Err(testbenches::Error::Run(format!("{} strategy(ies) failed", parts.failed.len())))
    }
}
