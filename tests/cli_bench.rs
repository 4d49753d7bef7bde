//! `bench --save` / `--compare`: the plumbing, not the speed (speed is never asserted). A
//! saved quick suite has every figure of the suite; a saved file doctored so that one figure
//! was 1000× faster with no noise makes `--compare` report that figure as slower and exit 1;
//! a file that is not a suite is refused before anything is measured.

use std::process::Command;

fn bench(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_waferstream")).arg("bench").args(args).env("RUST_LOG", "warn").output().expect("spawn waferstream")
}

#[test]
fn save_then_compare_flags_a_doctored_figure() {
    let dir = std::env::temp_dir().join(format!("ws-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let saved = dir.join("b.json");
    let out = bench(&["--quick", "--save", saved.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    let names: Vec<&str> = v["figures"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
    for prefix in ["noc.", "package.a3.", "package.paper.a3.", "package.traced.vcd", "package.traced.fst", "wafer.er.", "balance.topo-ni.", "sweep.smoke"] {
        assert!(names.iter().any(|n| n.starts_with(prefix)), "{prefix} missing from {names:?}");
    }
    // Doctor: the package figure 1000x higher, no noise.
    let mut d = v.clone();
    for f in d["figures"].as_array_mut().unwrap() {
        if f["name"].as_str().unwrap().starts_with("package.a3.") {
            let x = f["value"].as_f64().unwrap() * 1000.0;
            f["value"] = x.into();
            f["noise"] = 0.0.into();
        }
    }
    let doctored = dir.join("d.json");
    std::fs::write(&doctored, serde_json::to_string(&d).unwrap()).unwrap();
    let out = bench(&["--quick", "--compare", doctored.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.lines().any(|l| l.starts_with("SLOWER package.a3.")), "{text}");

    std::fs::write(&doctored, "{\"figures\": 3}").unwrap();
    let out = bench(&["--quick", "--compare", doctored.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stdout));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--compare") && err.contains("not a saved bench suite"), "{err}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("noc."), "measured before refusing the file");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `bench package --config`: the layer on a package config file (the paper's), flags over the
/// file's values (`--array`), the file named in the JSON; a file with an unknown key is
/// refused naming it, before anything is measured.
#[test]
fn package_bench_takes_a_config_and_flags_override_it() {
    let dir = std::env::temp_dir().join(format!("ws-bench-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let paper = concat!(env!("CARGO_MANIFEST_DIR"), "/testbenches/configs/pkg-wide-sharded-reserve.toml");
    let json = dir.join("bp.json");
    let run = |extra: &[&str]| {
        let mut args = vec!["package", "--config", paper, "--model", "functional", "--tokens", "8", "--repeat", "1", "--json", json.to_str().unwrap()];
        args.extend_from_slice(extra);
        let out = bench(&args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(&json).unwrap()).unwrap()
    };
    let v = run(&[]);
    assert_eq!(v["config"].as_str(), Some(paper));
    assert_eq!(v["array"].as_str(), Some("2x2"));
    let on_file = v["latency_cycles"].as_u64().unwrap();
    // The built-in package's layer differs (another PE array, loading by owner only).
    let out = bench(&["package", "--model", "functional", "--tokens", "8", "--repeat", "1", "--json", json.to_str().unwrap()]);
    assert!(out.status.success());
    let built_in: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(built_in.get("config").is_none());
    assert_ne!(built_in["latency_cycles"].as_u64().unwrap(), on_file, "the config file was not used");
    assert_eq!(run(&["--array", "3x3"])["array"].as_str(), Some("3x3"));

    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "rows = 2\nbogus = 1\n").unwrap();
    let out = bench(&["package", "--config", bad.to_str().unwrap(), "--repeat", "1"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bogus"), "{err}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("run 1"), "measured before refusing the file");
    let _ = std::fs::remove_dir_all(&dir);
}
