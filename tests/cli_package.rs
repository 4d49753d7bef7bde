//! `waferstream package`: the functional acceptance command is bit-exact for every strategy;
//! a timing run writes every JSON field the issue names; impossible inputs are refused
//! before simulating with the field named (exit 2).

mod common;

use std::path::PathBuf;

use common::run;

/// A fresh scratch directory for one test.
fn dir(name: &str) -> PathBuf {
    common::tmp("cli_package", name)
}

#[test]
fn functional_acceptance_command_is_bit_exact() {
    let d = dir("cli_pkg_func");
    let json = d.join("out/func.json");
    let out = run(&["package", "--functional", "--array", "3x3", "--ber", "1e-6", "--strategy", "ep,ep-paper,hydra,hydra-oracle,a1,a2,a3,a4,a5", "--json", json.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rs = v["results"].as_array().unwrap();
    assert_eq!(rs.len(), 9);
    for r in rs {
        assert_eq!(r["outputs_match_reference"], true, "{}", r["strategy"]);
        assert!(r.get("replays").is_some());
    }
}

#[test]
fn timing_json_has_every_field() {
    let d = dir("cli_pkg_timing");
    let json = d.join("pkg.json");
    // A small timing run (full model width, few tokens, a small PE array).
    let cfg = d.join("pkg.toml");
    std::fs::write(&cfg, "micro_slices = 4\n[pe]\nrows = 16\ncols = 16\n").unwrap();
    let out = run(&["package", "--model", "functional", "--d-model", "256", "--d-ffn", "128", "--tokens", "64", "--strategy", "ep,a3", "--config", cfg.to_str().unwrap(), "--json", json.to_str().unwrap(), "--quiet"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for r in v["results"].as_array().unwrap() {
        for f in ["strategy", "latency_cycles", "utilization", "peak_weight_bytes", "peak_token_bytes", "ddr_bytes", "d2d_bytes", "sched_decision_cycles_max", "roofline_cycles", "cycles_per_second"] {
            assert!(r.get(f).is_some(), "missing {f}");
        }
        assert!(r["latency_cycles"].as_u64().unwrap() >= r["roofline_cycles"].as_u64().unwrap());
        assert!(r.get("outputs_match_reference").is_none(), "timing runs do not claim a check");
    }
}

#[test]
fn impossible_inputs_are_refused_naming_the_field() {
    let d = dir("cli_pkg_bad");
    let refused = |args: &[&str], needle: &str| {
        let out = run(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: `{needle}` not in {err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    };
    refused(&["package", "--array", "0x2"], "rows");
    refused(&["package", "--array", "2x3"], "cols");
    refused(&["package", "--micro-slices", "0"], "micro_slices");
    refused(&["package", "--micro-slices", "5000"], "micro_slices");
    refused(&["package", "--ring-slots", "1"], "ring_slots");
    refused(&["package", "--ber", "1.5"], "ber");
    refused(&["package", "--ber", "NaN"], "ber");
    refused(&["package", "--strategy", "ep,zz"], "zz");
    refused(&["package", "--model", "gpt-5"], "--model");
    refused(&["package", "--functional", "--micro-slices", "49"], "micro_slices");
    let bad = d.join("bad.toml");
    std::fs::write(&bad, "rows = 2\nring_slotz = 3\n").unwrap();
    refused(&["package", "--config", bad.to_str().unwrap()], "ring_slotz");
    let json_dir = d.join("adir");
    std::fs::create_dir_all(&json_dir).unwrap();
    refused(&["package", "--json", json_dir.to_str().unwrap()], "adir");
}

/// `run` with a package scenario prints the comparison table and writes its JSON.
#[test]
fn run_default_scenario_prints_the_table() {
    let d = dir("cli_pkg_run");
    let sc = d.join("s.toml");
    std::fs::write(&sc, "[scenario]\nname = \"small\"\nkind = \"package\"\n[workload]\nmodel = \"functional\"\ntokens = 32\nstrategies = [\"ep\", \"a3\"]\nfunctional = true\n[package]\nrows = 2\ncols = 2\n").unwrap();
    let json = d.join("s.json");
    let out = run(&["run", sc.to_str().unwrap(), "--json", json.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("strategy") && s.contains("a3") && s.contains("bit-exact"), "{s}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["results"].as_array().unwrap().len(), 2);
}

/// `--plot DIR` writes the package plots (timeline per strategy, PE utilization, memory,
/// cycle breakdown) and the JSON carries the timeline and the cycle breakdown; `bench
/// package` reports its speed figures; a plot path that is a file is refused before running.
#[test]
fn plots_bench_and_breakdown() {
    let d = dir("cli_pkg_plot");
    let plots = d.join("plots");
    let json = d.join("p.json");
    let out = run(&["package", "--functional", "--array", "2x2", "--strategy", "ep,a3", "--plot", plots.to_str().unwrap(), "--json", json.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for f in ["timeline-ep.svg", "timeline-a3.svg", "pe-utilization.svg", "memory.svg", "cycle-breakdown.svg"] {
        let t = std::fs::read_to_string(plots.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(t.starts_with("<svg") && t.len() > 500, "{f}");
    }
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for r in v["results"].as_array().unwrap() {
        assert!(r["timeline"]["bins"].as_u64().unwrap() > 0);
        let c = &r["cycles"];
        let sum: u64 = ["compute", "fill", "ddr_wait", "d2d_wait", "sched_wait", "tail"].iter().map(|k| c[k].as_u64().unwrap()).sum();
        assert_eq!(sum, 4 * r["latency_cycles"].as_u64().unwrap());
    }
    let bad = run(&["package", "--functional", "--plot", json.to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--plot"), "{}", String::from_utf8_lossy(&bad.stderr));
    let bj = d.join("bench.json");
    let out = run(&["bench", "package", "--model", "functional", "--tokens", "8", "--repeat", "1", "--wave-dir", d.join("w").to_str().unwrap(), "--json", bj.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let b: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&bj).unwrap()).unwrap();
    assert!(b["cycles_per_second"].as_f64().unwrap() > 0.0 && b["d2d_flits"].as_u64().is_some());
    assert!(b["fst"]["bytes"].as_u64().unwrap() < b["vcd"]["bytes"].as_u64().unwrap());
}
