//! `waferstream trace import|stats` on the real data: import, stats JSON, bad line refused
//! with its number and exit code 2.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Vendored slices of the real data (testbenches/traces/README.md): the first 64 decode steps
/// of the OLMoE warp trace, and the arxiv top-k rows of the AllenAI counts. A missing slice
/// fails the test.
fn vendored(name: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("testbenches/traces").join(name);
    assert!(p.is_file(), "{} missing: the real-trace test cannot run without it", p.display());
    p
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_waferstream")).args(args).env("RUST_LOG", "warn").output().expect("spawn waferstream")
}

fn tmp(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli_trace").join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn import_and_stats_real_trace() {
    let warp = vendored("olmoe_warp_decode_64.jsonl");
    let d = tmp("warp");
    let tr = d.join("TRACE.jsonl");
    let o = run(&["trace", "import", s(&warp), "--out", s(&tr)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let json = d.join("out/trace.json");
    let o = run(&["trace", "stats", s(&tr), "--json", s(&json)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["experts"], 64);
    assert_eq!(v["top_k"], 8);
    assert_eq!(v["layers"], 16);
    assert_eq!(v["tokens"], 64);
    assert_eq!(v["iterations"], 64);
    assert_eq!(v["requests"], 1);
    // Busiest expert's count per layer, counted from the JSON lines outside the project
    // (512 picks over 64 experts: skewness = count / 8).
    let busiest = [50, 55, 58, 60, 51, 53, 54, 40, 33, 46, 28, 53, 47, 58, 56, 57];
    let sk: Vec<f64> = v["per_layer_skewness"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    assert_eq!(sk, busiest.iter().map(|&c| c as f64 / 8.0).collect::<Vec<_>>());

    // A bad line (9 experts at layer 0 of line 5) is refused with file and line, exit 2.
    let text = std::fs::read_to_string(&tr).unwrap();
    let bad: Vec<String> = text
        .lines()
        .enumerate()
        .map(|(i, l)| if i == 4 { l.replacen("\"layers\":[[", "\"layers\":[[1,", 1) } else { l.to_string() })
        .collect();
    let badp = d.join("bad.jsonl");
    std::fs::write(&badp, bad.join("\n")).unwrap();
    let o = run(&["trace", "stats", s(&badp), "--json", s(&d.join("bad.json"))]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bad.jsonl") && err.contains("line 5"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(!d.join("bad.json").exists());
}

#[test]
fn import_counts_and_refusals() {
    let d = tmp("counts");
    let counts = vendored("olmoe_mixtral_arxiv_counts.csv");
    let tr = d.join("c.jsonl");
    let o = run(&["trace", "import", s(&counts), "--out", s(&tr), "--tokens-per-iter", "64", "--iters", "2"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = run(&["trace", "stats", s(&tr), "--json", s(&d.join("c.json"))]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("tokens      128"));
    // The slice's OLMoE rows: 64 experts, top-8, model layers 0/7/15 as trace layers 0..3.
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(d.join("c.json")).unwrap()).unwrap();
    assert_eq!((v["experts"].as_u64(), v["top_k"].as_u64(), v["layers"].as_u64()), (Some(64), Some(8), Some(3)));
    let o = run(&["trace", "stats", s(&d.join("missing.jsonl"))]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("missing.jsonl"));
    let garbage = d.join("g.jsonl");
    std::fs::write(&garbage, "{\"tok\": 1, \"layers\": [[1,2,3]]}\n").unwrap();
    let o = run(&["trace", "import", s(&garbage), "--format", "warp", "--out", s(&d.join("o.jsonl"))]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("line 1"));
    assert!(!d.join("o.jsonl").exists());
}
