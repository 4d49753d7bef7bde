//! `waferstream gps --rtl predictor`: the Distribution-Only predictor's rust-hdl twin runs in
//! place of its CL model and the JSON (but the wall clock) and the predictor's waveform are
//! byte-equal to the CL run; the real OLMoE trace (64 experts) too; a window the built block
//! cannot hold is refused naming the flag and the field.

mod common;

use common::{json, run, s};

fn tmp(name: &str) -> std::path::PathBuf {
    common::tmp("cli_gps_rtl", name)
}

/// cli_gps.rs's small sweep: two skews, both presets, two accuracies, one held-out iteration.
const SMALL: &[&str] = &["gps", "--skew", "1.4,2.2", "--warmup", "2", "--iters", "1", "--accuracy", "0.5,0.8", "--quiet"];

fn strip(mut v: serde_json::Value) -> serde_json::Value {
    v["wall_seconds"] = 0.into();
    v
}

fn same_with_and_without_rtl(name: &str, args: &[&str]) {
    let d = tmp(name);
    let (j_cl, j_rtl, w_cl, w_rtl) = (d.join("cl.json"), d.join("rtl.json"), d.join("cl.vcd"), d.join("rtl.vcd"));
    let mut a = args.to_vec();
    a.extend(["--json", s(&j_cl), "--vcd", s(&w_cl)]);
    let out = run(&a);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut a = args.to_vec();
    a.extend(["--rtl", "predictor", "--json", s(&j_rtl), "--vcd", s(&w_rtl)]);
    let out = run(&a);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(strip(json(&j_cl)), strip(json(&j_rtl)));
    assert_eq!(std::fs::read(&w_cl).unwrap(), std::fs::read(&w_rtl).unwrap(), "predictor waveforms differ");
}

#[test]
fn small_sweep_json_equal_to_cl() {
    same_with_and_without_rtl("small", SMALL);
}

#[test]
fn split_estimate_and_small_window_json_equal_to_cl() {
    same_with_and_without_rtl("split", &["gps", "--skew", "1.8", "--warmup", "6", "--iters", "2", "--window", "3", "--dist-estimate", "split", "--accuracy", "0.9", "--bandwidth", "fast", "--quiet"]);
}

#[test]
fn real_olmoe_trace_json_equal_to_cl() {
    let d = tmp("olmoe");
    let t = common::imported_olmoe(&d);
    same_with_and_without_rtl("olmoe_run", &["gps", "--trace", s(&t), "--model", "olmoe-1b-7b", "--bandwidth", "slow", "--accuracy", "0.5,0.9", "--quiet"]);
}

#[test]
fn refused_config_names_the_flag() {
    // 256 experts × a 1024-iteration window fits the 2^18-word SRAM exactly: accepted. The
    // limit the build adds is the 32-bit sum, which the gps counters (16 bits) never reach,
    // and the expert count; a bad --rtl value is clap's error.
    let out = run(&["gps", "--rtl", "scheduler"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--rtl"));
}
