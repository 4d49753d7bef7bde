//! `waferstream wafer --rtl mapping`: the mapping controller's RTL block in place of the CL
//! model gives the same JSON as the CL run (the wall-clock fields aside: wall_seconds, cycles_per_second, flits_per_second), for ER on one wafer
//! and for HER on a multi-wafer system; a system larger than the RTL's tables is refused
//! naming `--rtl mapping` and `wafer`.

mod common;

use common::{json, run, s};

fn tmp(name: &str) -> std::path::PathBuf {
    common::tmp("cli_wafer_rtl", name)
}

/// The JSON of `args` with and without `--rtl mapping`, wall-clock fields zeroed.
fn both(name: &str, args: &[&str]) -> (serde_json::Value, serde_json::Value) {
    let d = tmp(name);
    let (cl, rtl) = (d.join("w.json"), d.join("w-rtl.json"));
    let mut a = args.to_vec();
    a.extend(["--quiet", "--json", s(&cl)]);
    let out = run(&a);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut a = args.to_vec();
    a.extend(["--quiet", "--rtl", "mapping", "--json", s(&rtl)]);
    let out = run(&a);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let zero = |mut v: serde_json::Value| {
        v["wall_seconds"] = 0.into();
        v["cycles_per_second"] = 0.into();
        for r in v["results"].as_array_mut().unwrap() {
            r["wall_seconds"] = 0.into();
            r["cycles_per_second"] = 0.into();
            r["flits_per_second"] = 0.into();
        }
        v
    };
    (zero(json(&cl)), zero(json(&rtl)))
}

#[test]
fn wafer_rtl_mapping_er_json_equals_cl() {
    let (a, b) = both("er", &["wafer", "--model", "deepseek-v3", "--wafer", "4x4", "--tp", "4", "--mapping", "er"]);
    assert!(a["results"][0]["mapping_controller_cycles"].as_u64().unwrap() > 0);
    assert_eq!(a, b);
}

#[test]
fn wafer_rtl_mapping_her_and_baseline_json_equal_cl() {
    let (a, b) = both("her", &["wafer", "--model", "deepseek-v3", "--wafer", "2x2", "--wafers", "2x1", "--tp", "2", "--mapping", "baseline,her", "--tokens-per-group", "64"]);
    assert_eq!(a["results"].as_array().unwrap().len(), 2);
    assert_eq!(a, b);
}

#[test]
fn wafer_rtl_mapping_refuses_a_system_above_its_tables() {
    let out = run(&["wafer", "--wafer", "16x16", "--wafers", "2x1", "--tp", "4", "--mapping", "er", "--rtl", "mapping", "--quiet"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--rtl mapping") && err.contains("wafer") && err.contains("512 dies"), "{err}");
}
