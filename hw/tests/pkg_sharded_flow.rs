//! Sharded loading with flow control (`loaders = "all"`, `shard_flow = "reserve"`): a
//! helper sends a micro-slice only against its member's credit (a slot reserved there), and
//! Rule 5 delivers to the member with room while the slice's channel loads it. Functional
//! runs stay bit-exact; the DDR loads still spread over every channel; bad configs are
//! refused naming the field. (The controller-level protocol checks — no send without a
//! reservation, slot conservation — are the proptest in `hw/src/pkg/chiplet.rs`; zero
//! escape reloads on the wide array where push reloaded is in
//! `testbenches/tests/pkg_sharded_flow.rs`.)

use hw::pkg::config::{Loaders, PkgCfg, ShardFlow, Strategy};
use hw::pkg::package::{LayerInput, Package};
use sched::workload::{generate, GenCfg};

fn layer(tokens: u32, experts: u32, top_k: u32, d_model: u32, d_ffn: u32, seed: u64) -> LayerInput {
    let g = GenCfg { model: None, experts, top_k, layers: 1, tokens_per_iter: tokens, iters: 1, seed, ..Default::default() };
    let t = generate(&g).unwrap();
    LayerInput { routing: t.routing(0..t.tokens.len(), 0), experts: experts as usize, d_model, d_ffn, requests: None }
}

fn cfg(k: u32, flow: ShardFlow) -> PkgCfg {
    let mut c = PkgCfg { rows: k, cols: k, loaders: Loaders::All, shard_flow: flow, ..Default::default() };
    c.pe.rows = 8;
    c.pe.cols = 8;
    c.sim.max_cycles = 20_000_000;
    c.sim.watchdog_cycles = 20_000;
    c
}

/// Every strategy on 2x2 and 3x3, the default ring and a 4-slot one (where rings are full
/// most of the time and the protocol's waits and its stuck-ring rule are exercised):
/// outputs bit-exact; every helper-loaded micro-slice was forwarded against a credit.
#[test]
fn flow_control_is_bit_exact_for_every_strategy() {
    for k in [2, 3] {
        for slots in [0, 4] {
            let l = layer(24, 16, 2, 64, 48, 11);
            for s in Strategy::ALL {
                let mut c = cfg(k, ShardFlow::Reserve);
                c.ring_slots = slots;
                let r = Package::new(&c, s, &l, true).unwrap().run(None).unwrap_or_else(|e| panic!("{} {k}x{k} slots {slots}: {e}", s.name()));
                assert_eq!(r.outputs_match_reference, Some(true), "{} {k}x{k} slots {slots}", s.name());
                let rl: u64 = r.chiplets.iter().map(|x| x.reloads).sum();
                eprintln!("{} {k}x{k} slots {slots}: latency {} reloads {rl} reload bytes {}", s.name(), r.latency_cycles, r.reload_bytes());
            }
        }
    }
}

/// One token, top-2: both trajectories are the token's home alone. A3: the three other
/// chiplets load their quarter and forward it (2 experts × 3 helpers × 1 slice of 4), all
/// four channels load. A4 (Rule 5 with sharded loading): the arbiter delivers every slice to
/// the one member, which fetches it from the chiplet whose channel holds it — so the loads
/// spread over all four channels too (push A4 loads everything from the home's channel).
#[test]
fn flow_control_spreads_the_loads_for_a3_and_a4() {
    let l = layer(1, 16, 2, 64, 48, 3);
    for s in [Strategy::A3, Strategy::A4] {
        let mut c = cfg(2, ShardFlow::Reserve);
        c.micro_slices = 4;
        let r = Package::new(&c, s, &l, true).unwrap().run(None).unwrap();
        assert_eq!(r.outputs_match_reference, Some(true), "{}", s.name());
        let ddr: Vec<u64> = r.chiplets.iter().map(|x| x.ddr_bytes).collect();
        assert!(ddr.iter().all(|&b| b > 0), "{}: {ddr:?}", s.name());
        assert_eq!(r.chiplets.iter().map(|x| x.forwards).sum::<u64>(), 2 * 3, "{}", s.name());
        assert_eq!(r.reload_bytes(), 0, "{}", s.name());
        c.shard_flow = ShardFlow::Push;
        let p = Package::new(&c, s, &l, true).unwrap().run(None).unwrap();
        let busy = p.chiplets.iter().filter(|x| x.ddr_bytes > 0).count();
        assert_eq!(busy, if s == Strategy::A4 { 1 } else { 4 }, "{} push: {:?}", s.name(), p.chiplets.iter().map(|x| x.ddr_bytes).collect::<Vec<_>>());
    }
}

/// Rule 5 with sharded loading on small rings: slices go to the member with room (some
/// away from their Rule-4 loader), bit-exact.
#[test]
fn rule5_with_sharded_loading_redirects_bit_exact() {
    let l = layer(48, 16, 2, 64, 48, 11);
    for k in [2, 3] {
        let mut c = cfg(k, ShardFlow::Reserve);
        c.ring_slots = 6;
        let r = Package::new(&c, Strategy::A4, &l, true).unwrap().run(None).unwrap();
        assert_eq!(r.outputs_match_reference, Some(true), "{k}x{k}");
        assert!(r.rule5_redirected > 0, "{k}x{k}: no micro-slice was delivered away from its Rule-4 loader");
    }
}

/// `reserve` is flow control for sharded loading: without `loaders = "all"` it is refused
/// before anything is built, naming the field.
#[test]
fn reserve_without_sharded_loading_is_refused() {
    let mut c = cfg(2, ShardFlow::Reserve);
    c.loaders = Loaders::Trajectory;
    let e = c.validate().unwrap_err();
    assert_eq!(e.field, "shard_flow", "{e}");
    let l = layer(8, 16, 2, 64, 48, 1);
    let e = Package::new(&c, Strategy::A3, &l, true).err().expect("refused");
    assert!(e.to_string().contains("shard_flow"), "{e}");
    // The TOML spelling.
    let t: PkgCfg = toml::from_str("loaders = \"all\"\nshard_flow = \"reserve\"").unwrap();
    assert_eq!((t.loaders, t.shard_flow), (Loaders::All, ShardFlow::Reserve));
}

/// The protocol's sideband messages land where fast-forward and the partitions expect them:
/// results are identical stepping every edge or not, on one thread or three.
#[test]
fn flow_control_results_do_not_depend_on_stepping_or_threads() {
    let l = layer(48, 16, 2, 64, 48, 3);
    for s in [Strategy::A3, Strategy::A4] {
        let mut keys = Vec::new();
        for (ff, th) in [(false, 1), (true, 1), (true, 3)] {
            let mut c = cfg(3, ShardFlow::Reserve);
            c.ring_slots = 5;
            c.sim.fast_forward = ff;
            c.sim.threads = th;
            let r = Package::new(&c, s, &l, true).unwrap().run(None).unwrap();
            assert_eq!(r.outputs_match_reference, Some(true));
            keys.push(format!("{} {} {} {:?}", r.latency_cycles, r.ddr_bytes, r.d2d_bytes, r.chiplets));
        }
        assert!(keys.windows(2).all(|w| w[0] == w[1]), "{}: {keys:#?}", s.name());
    }
}
