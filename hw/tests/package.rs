//! Testbench of the assembled package: functional mode bit-exact against the dense FL
//! reference for every strategy and array; determinism (threads, fast-forward, waveforms).

use hw::pkg::config::{PkgCfg, Strategy};
use hw::pkg::package::{LayerInput, Package};
use sched::workload::{generate, GenCfg};

fn layer(tokens: u32, experts: u32, top_k: u32, d_model: u32, d_ffn: u32, seed: u64) -> LayerInput {
    let g = GenCfg { model: None, experts, top_k, layers: 1, tokens_per_iter: tokens, iters: 1, seed, ..Default::default() };
    let t = generate(&g).unwrap();
    LayerInput { routing: t.routing(0..t.tokens.len(), 0), experts: experts as usize, d_model, d_ffn }
}

fn cfg(k: u32) -> PkgCfg {
    let mut c = PkgCfg { rows: k, cols: k, ..Default::default() };
    c.pe.rows = 8;
    c.pe.cols = 8;
    c.sim.max_cycles = 20_000_000;
    c.sim.watchdog_cycles = 20_000;
    c
}

#[test]
fn functional_2x2_every_strategy_bit_exact() {
    let l = layer(32, 16, 2, 64, 48, 7);
    for s in Strategy::ALL {
        let mut p = Package::new(&cfg(2), s, &l, true).unwrap();
        let r = p.run(None).unwrap_or_else(|e| panic!("{}: {e}", s.name()));
        assert_eq!(r.outputs_match_reference, Some(true), "{}", s.name());
        eprintln!("{} latency {} ddr {} d2d {}", s.name(), r.latency_cycles, r.ddr_bytes, r.d2d_bytes);
    }
}
