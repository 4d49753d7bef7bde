//! `waferstream gps`: MoE-GPS on the cycle-level wafer system. A small sweep gives the JSON
//! fields and the paper's two claims (Dist-Only beats Token-to-Expert at skew 1.4 on the fast
//! links; Token-to-Expert wins at the highest skew on the slow links), the same seed gives the
//! same JSON, the real OLMoE trace runs end to end, and bad input exits 2 naming the flag.

mod common;

use common::{json, run, s};

fn tmp(name: &str) -> std::path::PathBuf {
    common::tmp("cli_gps", name)
}

/// Two skews, both presets, two accuracies, one held-out iteration: 16 wafer runs.
const SMALL: &[&str] = &["gps", "--skew", "1.4,2.2", "--warmup", "2", "--iters", "1", "--accuracy", "0.5,0.8", "--quiet"];

#[test]
fn small_sweep_fields_claims_and_determinism() {
    let d = tmp("small");
    let (j1, j2, vcd) = (d.join("a/gps.json"), d.join("b.json"), d.join("w/pred.vcd"));
    let mut args = SMALL.to_vec();
    args.extend(["--json", s(&j1), "--vcd", s(&vcd)]);
    let out = run(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout.is_empty(), "--quiet prints nothing");
    let v = json(&j1);
    let pts = v["points"].as_array().unwrap();
    assert_eq!(pts.len(), 4);
    for p in pts {
        for f in ["skewness", "bandwidth_gbps", "dist_only_cycles", "best_t2e_cycles", "best_t2e_accuracy", "no_prediction_cycles", "measured_skewness"] {
            assert!(p[f].as_f64().is_some(), "{f} in {p}");
        }
        let w = p["winner"].as_str().unwrap();
        assert!(["dist_only", "token_to_expert", "no_prediction"].contains(&w), "{w}");
        assert_eq!(p["t2e"].as_array().unwrap().len(), 2);
        assert_eq!(p["error_model"], "typical");
        // The best T2E is the fewest cycles over the accuracies tried.
        let min = p["t2e"].as_array().unwrap().iter().map(|t| t["cycles"].as_u64().unwrap()).min().unwrap();
        assert_eq!(p["best_t2e_cycles"].as_u64().unwrap(), min);
        // A right guess never enters the network: fewer network assignments than no prediction.
        for t in p["t2e"].as_array().unwrap() {
            assert!(t["network_assignments"].as_u64() < p["no_prediction"]["network_assignments"].as_u64(), "{p}");
            assert!(t["predict_cycles"].as_u64().unwrap() > 0);
        }
    }
    let pt = |skew: f64, bw: &str| pts.iter().find(|p| p["skewness"].as_f64() == Some(skew) && p["bandwidth"] == bw).unwrap();
    let cyc = |p: &serde_json::Value, f: &str| p[f].as_u64().unwrap();
    // The paper's claims (Fig. 6/7), as measured on this system.
    let fast14 = pt(1.4, "fast");
    assert!(cyc(fast14, "dist_only_cycles") < cyc(fast14, "best_t2e_cycles"), "{fast14}");
    let slow22 = pt(2.2, "slow");
    assert_eq!(slow22["winner"], "token_to_expert", "{slow22}");
    // Sanity: imbalance costs cycles without prediction; Dist-Only removes most of it.
    for bw in ["slow", "fast"] {
        assert!(cyc(pt(2.2, bw), "no_prediction_cycles") > cyc(pt(1.4, bw), "no_prediction_cycles"));
        assert!(cyc(pt(2.2, bw), "dist_only_cycles") < cyc(pt(2.2, bw), "no_prediction_cycles"));
    }
    // Slower links, more cycles.
    assert!(cyc(pt(1.4, "slow"), "no_prediction_cycles") > cyc(fast14, "no_prediction_cycles"));
    assert_eq!(v["bandwidths"][0]["bandwidth_gbps"], 32.0);
    assert_eq!(v["bandwidths"][1]["bandwidth_gbps"], 300.0);

    // The predictor's waveform holds its Eq. 1 counters.
    let w = std::fs::read_to_string(&vcd).unwrap();
    assert!(w.contains("dist_only") && w.contains("sum_e0") && w.contains("sum_e7"), "{}", &w[..w.len().min(600)]);

    // Same seed, same JSON (but the wall clock).
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
    let j = d.join("g.json");
    let out = run(&["gps", "--trace", s(&t), "--model", "olmoe-1b-7b", "--bandwidth", "slow", "--accuracy", "0.5,0.9", "--json", s(&j)]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v = json(&j);
    assert_eq!(v["source"], "trace");
    assert_eq!(v["model"], "olmoe-1b-7b");
    let p = &v["points"][0];
    assert!(p["measured_skewness"].as_f64().unwrap() > 1.0);
    assert_eq!(p["skewness"], p["measured_skewness"]);
    // A model that does not match the trace is refused, naming the header field.
    let out = run(&["gps", "--trace", s(&t), "--model", "mixtral-8x22b"]);
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("`experts`") && e.contains("--trace"), "{e}");
}

#[test]
fn bad_input_exits_2_naming_the_flag() {
    let d = tmp("bad");
    let file = d.join("file");
    std::fs::write(&file, "x").unwrap();
    let under_file = format!("{}/sub/x.json", s(&file));
    let cases: &[(&[&str], &str)] = &[
        (&["--skew", "0.5"], "--skew"),
        (&["--dist-estimate", "window"], "--dist-estimate"),
        (&["--dist-estimate", "split", "--warmup", "0"], "--dist-estimate"),
        (&["--overhead", "fig5"], "--overhead"),
        (&["--skew", "4"], "--skew"),
        (&["--skew", "1.2,,1.4"], "--skew"),
        (&["--skew", "nan"], "--skew"),
        (&["--bandwidth", "10"], "--bandwidth"),
        (&["--bandwidth", "warp"], "--bandwidth"),
        (&["--bandwidth", "slow,pcie"], "--bandwidth"),
        (&["--accuracy", "1.5"], "--accuracy"),
        (&["--accuracy", ""], "--accuracy"),
        (&["--error-model", "worst"], "--error-model"),
        (&["--wafer", "1x1"], "--wafer"),
        (&["--wafer", "9x1"], "--wafer"),
        (&["--tokens", "0"], "--tokens"),
        (&["--iters", "0"], "--iters"),
        (&["--window", "0"], "--window"),
        (&["--overhead", "1.4:0.1"], "--overhead"),
        (&["--overhead", "2:0.1:1,1:0.1:1"], "--overhead"),
        (&["--overhead", "1:0.1:1e308"], "--overhead"),
        (&["--model", "gpt-5"], "--model"),
        (&["--trace", "/nonexistent/t.jsonl"], "--trace"),
        (&["--layer", "3"], "--layer"),
        (&["--json", &under_file], "cannot create"),
    ];
    for (args, flag) in cases {
        let mut a = vec!["gps"];
        a.extend_from_slice(args);
        let out = run(&a);
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(flag) && e.lines().count() == 1 && !e.contains("panicked"), "{args:?}: {e}");
    }
}
