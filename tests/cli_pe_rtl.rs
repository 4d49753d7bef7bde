//! `waferstream package --functional --rtl pe`: the functional package's PE arithmetic on the
//! `pe_array` RTL block gives the same JSON as the CL run (bit-exact outputs, the same cycle
//! counts — the stand-in errors if the RTL's busy cycles ever differ from the CL fold
//! timing), and `--rtl pe` without `--functional` is refused naming the flag.

mod common;

use std::path::{Path, PathBuf};

use common::run;

/// A fresh scratch directory for one test.
fn dir(name: &str) -> PathBuf {
    common::tmp("cli_pe_rtl", name)
}

/// The results JSON without the fields that measure the host (wall time, speed).
fn load(p: &Path) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    for r in v["results"].as_array_mut().unwrap() {
        let o = r.as_object_mut().unwrap();
        o.remove("wall_seconds");
        o.remove("cycles_per_second");
    }
    v
}

#[test]
fn rtl_pe_json_equals_the_cl_run() {
    let d = dir("cli_pe_rtl");
    let (cl, rtl) = (d.join("out/pe-cl.json"), d.join("out/pe-rtl.json"));
    let base = ["package", "--functional", "--array", "2x2", "--strategy", "a3", "--quiet", "--json"];
    let out = run(&[&base[..], &[cl.to_str().unwrap()]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = run(&[&base[..], &[rtl.to_str().unwrap(), "--rtl", "pe"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (a, b) = (load(&cl), load(&rtl));
    assert_eq!(b["results"][0]["outputs_match_reference"], true);
    assert_eq!(a, b, "--rtl pe JSON differs from the CL run's");
}

#[test]
fn rtl_pe_needs_functional() {
    let out = run(&["package", "--array", "2x2", "--strategy", "a3", "--rtl", "pe"]);
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("--rtl pe") && e.contains("--functional"), "{e}");
}

#[test]
fn rtl_pe_refuses_double_buffered_timing_by_name() {
    let d = dir("cli_pe_rtl_db");
    let cfg = d.join("pkg.toml");
    std::fs::write(&cfg, "[pe]\ntiming = \"double_buffered\"\n").unwrap();
    let out = run(&["package", "--functional", "--array", "2x2", "--strategy", "a3", "--quiet", "--config", cfg.to_str().unwrap(), "--rtl", "pe"]);
    assert_ne!(out.status.code(), Some(0));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("pe.timing") && e.contains("double"), "{e}");
}
