//! `waferstream semmoe`: the JSON carries one result per placement with the LAR, the mesh's
//! all-to-all bytes and layer cycles; Sem-MoE's LAR beats round-robin's on a scenario with
//! token–expert affinity; the same seed gives the same JSON; bad input exits 2 naming the flag.

mod common;

use common::{json, s};

/// `waferstream semmoe ARGS`.
fn run(args: &[&str]) -> std::process::Output {
    common::run(&[&["semmoe"], args].concat())
}

fn tmp(name: &str) -> std::path::PathBuf {
    common::tmp("cli_semmoe", name)
}

const SMALL: &[&str] = &["--model", "olmoe-1b-7b", "--devices", "4", "--iters", "16", "--tokens-per-iter", "64", "--layers", "2", "--affinity", "0.8", "--quiet"];

#[test]
fn results_per_placement_and_sem_moe_beats_round_robin() {
    let d = tmp("dp");
    let j = d.join("out/s.json");
    for att in ["dp", "tp"] {
        let mut args = SMALL.to_vec();
        args.extend(["--attention", att, "--tp-batch", "64", "--json", s(&j)]);
        let out = run(&args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(out.stdout.is_empty());
        let v = json(&j);
        assert_eq!(v["attention"], att);
        let r = v["results"].as_array().unwrap();
        let names: Vec<&str> = r.iter().map(|x| x["placement"].as_str().unwrap()).collect();
        assert_eq!(names, ["round_robin", "load_only", "sem_moe"]);
        for x in r {
            let lar = x["local_activation_rate"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&lar), "{x}");
            assert!(x["a2a_bytes"].as_u64().unwrap() > 0, "{x}");
            assert!(x["layer_cycles"].as_f64().unwrap() > 0.0, "{x}");
            assert_eq!(x["mesh_runs"], 2);
        }
        let lar = |i: usize| r[i]["local_activation_rate"].as_f64().unwrap();
        assert!(lar(2) > lar(0), "{att}: sem-moe {} vs round-robin {}", lar(2), lar(0));
        // Fewer remote activations, fewer bytes on the mesh.
        assert!(r[2]["a2a_bytes"].as_u64() < r[0]["a2a_bytes"].as_u64(), "{att}");
        assert!(v["claim"]["lar_gain_relative_pct"].is_number());
    }
    // Determinism: the same seed, the same JSON apart from wall-clock fields.
    let strip = |mut v: serde_json::Value| {
        v["wall_seconds"] = 0.into();
        for x in v["results"].as_array_mut().unwrap() {
            x["wall_seconds"] = 0.into();
        }
        v
    };
    let mut args = SMALL.to_vec();
    args.extend(["--json", s(&j)]);
    assert!(run(&args).status.success());
    let a = strip(json(&j));
    assert!(run(&args).status.success());
    assert_eq!(a, strip(json(&j)));
}

#[test]
fn trace_without_token_ids_runs_tp_and_refuses_dp() {
    let d = tmp("trace");
    let t = d.join("t.jsonl");
    let mut text = String::from("{\"format\": \"waferstream-trace/1\", \"model\": \"olmoe-1b-7b\", \"experts\": 64, \"top_k\": 8, \"layers\": 2}\n");
    for i in 0..40u32 {
        let l = |o: u32| (0..8).map(|k| ((i % 5) * 8 + k * 3 + o) % 64).map(|x| x.to_string()).collect::<Vec<_>>().join(",");
        text += &format!("{{\"iter\": {i}, \"req\": 0, \"pos\": {i}, \"layers\": [[{}], [{}]]}}\n", l(0), l(1));
    }
    std::fs::write(&t, text).unwrap();
    let j = d.join("o.json");
    let out = run(&["--model", "olmoe", "--trace", s(&t), "--devices", "4", "--tp-batch", "16", "--json", s(&j)]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(json(&j)["attention"], "tp");
    let out = run(&["--model", "olmoe", "--trace", s(&t), "--devices", "4", "--attention", "dp"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("token_id"));
    // The model must match the trace's experts / top-k.
    let out = run(&["--model", "qwen3-30b-a3b", "--trace", s(&t)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("experts"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn bad_input_exits_2_naming_the_flag() {
    let d = tmp("bad");
    for (args, needle) in [
        (vec!["--devices", "1"], "--devices"),
        (vec!["--devices", "67"], "--devices"),
        (vec!["--model", "gpt-5"], "--model"),
        (vec!["--affinity", "2", "--layers", "1"], "--affinity"),
        (vec!["--profile-iters", "64", "--layers", "1"], "--profile-iters"),
        (vec!["--trace", "/nonexistent/t.jsonl"], "--trace"),
        (vec!["--json", "/proc/1/nope/x.json"], "--json"),
        (vec!["--mesh-layers", "0", "--layers", "1", "--iters", "4", "--tokens-per-iter", "16"], "--mesh-layers"),
        (vec!["--coherence", "1.5", "--layers", "1"], "--coherence"),
        (vec!["--coherence", "nan", "--layers", "1"], "--coherence"),
        (vec!["--coherence", "0.5", "--clusters-per-request", "0", "--layers", "1"], "--clusters-per-request"),
        (vec!["--coherence", "0.5", "--clusters-per-request", "65", "--layers", "1"], "--clusters-per-request"),
        (vec!["--clusters-per-request", "3", "--layers", "1"], "--clusters-per-request"),
        (vec!["--coherence", "0.5", "--trace", "/nonexistent/t.jsonl"], "--coherence"),
    ] {
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let _ = d;
}

/// `--rtl semmoe-lut`: the look-up unit's rust-hdl twin runs on the first evaluation batch in
/// place of the CL model (its ranks checked against the FL's, as the CL's are); the JSON (but
/// the wall clock) and the unit's waveform are byte-equal to the CL run. Attention-DP has no
/// such unit: refused naming the flag.
#[test]
fn rtl_semmoe_lut_same_json_and_waveform() {
    let d = tmp("rtl");
    let strip = |mut v: serde_json::Value| {
        v["wall_seconds"] = 0.into();
        for x in v["results"].as_array_mut().unwrap() {
            x["wall_seconds"] = 0.into();
        }
        v
    };
    for (name, extra) in [("tp64", &["--tp-batch", "64"][..]), ("tp128", &["--tp-batch", "128", "--devices", "8"][..])] {
        let (j_cl, j_rtl, w_cl, w_rtl) = (d.join(format!("{name}-cl.json")), d.join(format!("{name}-rtl.json")), d.join(format!("{name}-cl.vcd")), d.join(format!("{name}-rtl.vcd")));
        // SMALL with its --devices replaced by the case's (an option given twice is an error).
        let mut base: Vec<&str> = SMALL.to_vec();
        if let Some(i) = extra.iter().position(|x| *x == "--devices") {
            let at = base.iter().position(|x| *x == "--devices").unwrap();
            base[at + 1] = extra[i + 1];
        }
        base.extend(["--attention", "tp"]);
        base.extend(extra.iter().take_while(|x| **x != "--devices"));
        let mut a = base.clone();
        a.extend(["--json", s(&j_cl), "--vcd", s(&w_cl)]);
        let out = run(&a);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let mut a = base.clone();
        a.extend(["--rtl", "semmoe-lut", "--json", s(&j_rtl), "--vcd", s(&w_rtl)]);
        let out = run(&a);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(strip(json(&j_cl)), strip(json(&j_rtl)), "{name}");
        assert_eq!(std::fs::read(&w_cl).unwrap(), std::fs::read(&w_rtl).unwrap(), "{name}: look-up unit waveforms differ");
        // Without a waveform the RTL unit still runs (and is checked against the FL).
        let mut a = base.clone();
        a.extend(["--rtl", "semmoe-lut", "--json", s(&j_rtl)]);
        assert!(run(&a).status.success());
        assert_eq!(strip(json(&j_cl)), strip(json(&j_rtl)), "{name}");
    }
    let mut a = SMALL.to_vec();
    a.extend(["--attention", "dp", "--rtl", "semmoe-lut"]);
    let out = run(&a);
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("--rtl semmoe-lut") && e.contains("attention-TP") && !e.contains("panicked"), "{e}");
}
