//! Sharded loading with flow control on the wide array (testbenches/configs/
//! pkg-wide-sharded*.toml), through the run layer the CLI uses: the case of
//! docs/results-fsedp.md "Sharded loading with flow control".

use hw::pkg::config::{PkgCfg, ShardFlow, Strategy};
use hw::pkg::package::PkgRtl;
use testbenches::run::package::PackageInput;
use testbenches::run::RunOptions;

fn config(name: &str) -> PkgCfg {
    let p = format!("{}/configs/{name}", env!("CARGO_MANIFEST_DIR"));
    toml::from_str(&std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))).unwrap_or_else(|e| panic!("{p}: {e}"))
}

/// `waferstream package --model qwen3-30b-a3b --tokens 16 --strategy a3 --config
/// testbenches/configs/pkg-wide-sharded{,-reserve}.toml`. Before (push, today's default):
/// helpers push into full rings and the escape reloaded 6 micro-slices, 3 538 944 bytes
/// (measured 2026-11-26, commit 7de3f42). With flow control: no escape reload at all, the
/// DDR bytes are the expert bytes (EP's, which loads each expert once), and the same number
/// of slices is forwarded.
#[test]
fn flow_control_removes_the_escape_reloads_on_the_wide_array() {
    let run = |cfg: PkgCfg, s: Strategy| {
        PackageInput { model: Some("qwen3-30b-a3b".into()), tokens: Some(16), ..Default::default() }
            .build(cfg, vec![s], PkgRtl::default())
            .unwrap()
            .run_single(&RunOptions::default())
            .unwrap()
    };
    let push = run(config("pkg-wide-sharded.toml"), Strategy::A3);
    let res_cfg = config("pkg-wide-sharded-reserve.toml");
    assert_eq!(res_cfg.shard_flow, ShardFlow::Reserve);
    let res = run(res_cfg.clone(), Strategy::A3);
    let ep = run(res_cfg, Strategy::Ep);
    let reloads = |r: &hw::pkg::result::PkgResult| r.chiplets.iter().map(|c| c.reloads).sum::<u64>();
    let fwd = |r: &hw::pkg::result::PkgResult| r.chiplets.iter().map(|c| c.forwards).sum::<u64>();
    eprintln!("push: {} reloads, {} B, latency {}; reserve: {} reloads, latency {}", reloads(&push), push.reload_bytes(), push.latency_cycles, reloads(&res), res.latency_cycles);
    assert!(reloads(&push) > 0, "the case no longer reloads under push: pick another");
    assert_eq!(reloads(&res), 0);
    assert_eq!(res.reload_bytes(), 0);
    assert_eq!(res.ddr_bytes, ep.ddr_bytes, "every expert byte loaded once");
    assert_eq!(fwd(&res), fwd(&push));
    assert!(res.latency_cycles <= push.latency_cycles, "{} > {}", res.latency_cycles, push.latency_cycles);
}
