//! `waferstream balance`: a small run of every balancer gives the JSON fields, the
//! non-invasive balancer never stalls and adds no latency to the regular traffic, invasive
//! ones stall, the same seed gives the same JSON, the waveforms pass the migration checker,
//! the real OLMoE trace runs end to end, and bad input exits 2 naming the flag or field.

mod common;

use common::{json, run, s};

fn tmp(name: &str) -> std::path::PathBuf {
    common::tmp("cli_balance", name)
}

const SMALL: &[&str] = &["balance", "--iters", "10", "--tokens-per-group", "1024", "--warmup", "2", "--alpha", "0.1", "--quiet"];

#[test]
fn small_run_fields_claims_waves_and_determinism() {
    let d = tmp("small");
    let (j1, j2, vcd) = (d.join("a/b.json"), d.join("b.json"), d.join("w/ni.vcd"));
    let mut args = SMALL.to_vec();
    args.extend(["--json", s(&j1), "--vcd", s(&vcd)]);
    let out = run(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout.is_empty(), "--quiet prints nothing");
    let v = json(&j1);
    let rs = v["results"].as_array().unwrap();
    let names: Vec<&str> = rs.iter().map(|r| r["balancer"].as_str().unwrap()).collect();
    assert_eq!(names, ["none", "eplb", "topo", "topo-ni"]);
    for r in rs {
        for f in ["max_over_mean_load", "migration_stall_cycles", "moe_compute_cycles", "a2a_cycles", "regular_traffic_cycles", "regular_traffic_cycles_no_migration"] {
            assert!(r[f].is_number(), "{} has no number {f}", r["balancer"]);
        }
        assert_eq!(r["iterations"].as_array().unwrap().len(), 10);
    }
    let by = |n: &str| rs.iter().find(|r| r["balancer"] == n).unwrap();
    let f = |n: &str, k: &str| by(n)[k].as_f64().unwrap();
    assert_eq!(f("none", "migration_stall_cycles"), 0.0);
    assert_eq!(f("topo-ni", "migration_stall_cycles"), 0.0);
    assert!(f("topo", "migration_stall_cycles") > 0.0 && f("eplb", "migration_stall_cycles") > 0.0);
    for n in ["eplb", "topo", "topo-ni"] {
        assert!(f(n, "max_over_mean_load") < f("none", "max_over_mean_load"), "{n} did not balance");
    }
    assert!(f("topo-ni", "regular_traffic_cycles") <= 1.01 * f("topo-ni", "regular_traffic_cycles_no_migration"));
    // The waveforms: the wafer iteration with a migration in flight, the decision unit.
    let dec = d.join("w/ni-decision.vcd");
    assert!(vcd.exists() && dec.exists());
    let out = run(&["wave", "check", s(&vcd)]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("ok   links_cold_for_migration"), "{text}");
    let dtext = std::fs::read_to_string(&dec).unwrap();
    for sig in ["balancer", "dev_0", "heat", "slots", "e_0"] {
        assert!(dtext.contains(sig), "no {sig} in the decision unit's VCD");
    }
    // Determinism.
    let mut args = SMALL.to_vec();
    args.extend(["--json", s(&j2)]);
    assert!(run(&args).status.success());
    let (mut a, mut b) = (v, json(&j2));
    a["wall_seconds"] = 0.into();
    b["wall_seconds"] = 0.into();
    assert_eq!(a, b);
}

#[test]
fn real_olmoe_trace_end_to_end() {
    let d = tmp("olmoe");
    let t = common::imported_olmoe(&d);
    let j = d.join("b.json");
    let out = run(&["balance", "--trace", s(&t), "--model", "olmoe-1b-7b", "--iters", "6", "--tokens-per-group", "32", "--warmup", "1", "--json", s(&j), "--quiet"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v = json(&j);
    assert_eq!(v["trace_read_as"], "stream");
    assert_eq!(v["results"].as_array().unwrap().len(), 4);
    let out = run(&["balance", "--trace", s(&t), "--model", "qwen3-235b", "--iters", "2"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--trace"));
}

#[test]
fn bad_input_exits_2_naming_the_flag() {
    let d = tmp("bad");
    let cfg = d.join("bal.toml");
    std::fs::write(&cfg, "alpha = 0.1\nbogus = 3\n").unwrap();
    let xvcd = d.join("x.vcd");
    let cases: &[(&[&str], &str)] = &[
        (&["--balancer", "greedy"], "--balancer"),
        (&["--balancer", ""], "--balancer"),
        (&["--iters", "0"], "--iters"),
        (&["--scenario", "poetry"], "--scenario"),
        (&["--mapping", "baseline"], "topo-ni"),
        (&["--shadow-slots", "65"], "shadow_slots"),
        (&["--alpha=-1"], "alpha"),
        (&["--model", "gpt-5"], "--model"),
        (&["--wafer", "0x4"], "--wafer"),
        (&["--tp", "3"], "tp"),
        (&["--balance-config", s(&cfg)], "bogus"),
        (&["--vcd", "/proc/1/nope.vcd"], "cannot write"),
        (&["--balancer", "none", "--vcd", s(&xvcd)], "topo-ni"),
    ];
    for (extra, needle) in cases {
        let mut args = vec!["balance", "--iters", "1", "--tokens-per-group", "8"];
        args.extend_from_slice(extra);
        let out = run(&args);
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {e}");
        assert!(e.contains(needle), "{extra:?}: `{needle}` not in {e}");
    }
}
