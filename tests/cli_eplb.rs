//! `waferstream eplb`: the EPLB README's example gives its printed phy2log (JSON and table);
//! bad input is refused with exit 2 and one line naming the flag, before anything is written.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const README_W: &str = "[[ 90, 132,  40,  61, 104, 165,  39,   4,  73,  56, 183,  86],\n [ 20, 107, 104,  64,  19, 197, 187, 157, 172,  86,  16,  27]]\n";

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_waferstream")).arg("eplb").args(args).env("RUST_LOG", "warn").output().expect("spawn waferstream")
}

fn tmp(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli_eplb").join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn readme_example() {
    let d = tmp("readme");
    let w = d.join("w.json");
    std::fs::write(&w, README_W).unwrap();
    let json = d.join("out/eplb.json");
    let out = run(&["--weights", s(&w), "--replicas", "16", "--groups", "4", "--nodes", "2", "--devices", "8", "--json", s(&json)]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("hierarchical"), "{stdout}");
    assert!(stdout.contains("5 6 | 5 7 | 8 4 | 3 4 | 10 9 | 10 2 | 0 1 | 11 1"), "{stdout}");
    assert!(stdout.contains("7 10 | 6 8 | 6 11 | 8 9 | 2 4 | 5 1 | 5 0 | 3 1"), "{stdout}");

    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let expect = serde_json::json!([[5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1], [7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1]]);
    assert_eq!(v["phy2log"], expect);
    assert_eq!(v["logcnt"], serde_json::json!([[1, 2, 1, 1, 2, 2, 1, 1, 1, 1, 2, 1], [1, 2, 1, 1, 1, 2, 2, 1, 2, 1, 1, 1]]));
    assert_eq!(v["log2phy"][1][8], serde_json::json!([6, 3]));
    assert_eq!(v["log2phy"][0][0], serde_json::json!([12, -1]));
    assert_eq!((v["replicas"].as_u64(), v["groups"].as_u64(), v["nodes"].as_u64(), v["devices"].as_u64()), (Some(16), Some(4), Some(2), Some(8)));
    assert_eq!(v["policy"], "hierarchical");
    assert_eq!(v["weights"][1][5], 197.0);
    let mm = &v["max_over_mean_device_load"];
    let (b, a) = (mm["before"][0].as_f64().unwrap(), mm["after"][0].as_f64().unwrap());
    assert!((b - 239.0 / 129.125).abs() < 1e-12 && (a - 156.0 / 129.125).abs() < 1e-12, "{mm}");
    assert!(mm["after"][1].as_f64().unwrap() < mm["before"][1].as_f64().unwrap(), "{mm}");

    // --quiet prints nothing; groups not divisible by nodes -> the global policy
    let out = run(&["--weights", s(&w), "--replicas", "16", "--groups", "3", "--nodes", "2", "--devices", "8", "--quiet", "--json", s(&json)]);
    assert!(out.status.success() && out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["policy"], "global");
}

#[test]
fn bad_input_exits_2_naming_the_field() {
    let d = tmp("bad");
    let w = d.join("w.json");
    std::fs::write(&w, README_W).unwrap();
    let file = |name: &str, body: &str| {
        let p = d.join(name);
        std::fs::write(&p, body).unwrap();
        p.to_str().unwrap().to_string()
    };
    let ragged = file("ragged.json", "[[1, 2], [3]]");
    let string = file("string.json", "[[1, 2],\n [3, \"a\"]]");
    let cut = file("cut.json", "[[1, 2],\n [3, 4");
    let neg = file("neg.json", "[[1, -2]]");
    let empty = file("empty.json", "[]");
    let missing = d.join("missing.json").to_str().unwrap().to_string();
    let sz = |r: &str, g: &str, n: &str, dv: &str| vec!["--weights".to_string(), s(&w).into(), "--replicas".into(), r.into(), "--groups".into(), g.into(), "--nodes".into(), n.into(), "--devices".into(), dv.into()];
    let wf = |f: &str| vec!["--weights".to_string(), f.into(), "--replicas".into(), "2".into(), "--devices".into(), "2".into()];
    let cases: Vec<(Vec<String>, &[&str])> = vec![
        (wf(&missing), &["--weights", "cannot read", "missing.json"]),
        (wf(&ragged), &["--weights", "layer 1 has 1 experts"]),
        (wf(&string), &["--weights", "[1][1]", "line 2"]),
        (wf(&cut), &["--weights", "line 2"]),
        (wf(&neg), &["--weights", "negative"]),
        (wf(&empty), &["--weights", "no layers"]),
        (sz("18", "4", "2", "8"), &["--replicas", "18"]),
        (sz("8", "4", "2", "8"), &["--replicas", "12 experts"]),
        (sz("16", "5", "1", "8"), &["--groups", "5 equal groups"]),
        (sz("16", "4", "3", "8"), &["--devices", "3 nodes"]),
        (sz("16", "4", "0", "8"), &["--nodes", "at least 1"]),
        (sz("16", "4", "2", "0"), &["--devices", "at least 1"]),
    ];
    for (args, needles) in cases {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run(&a);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{a:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{a:?}: {err}");
        for n in needles {
            assert!(err.contains(n), "{a:?}: `{n}` not in {err}");
        }
    }
    // an unwritable --json is refused before computing, and bad sizes leave no file behind
    let out = run(&["--weights", s(&w), "--replicas", "16", "--devices", "8", "--json", s(&d)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--json"));
    let json = d.join("never/eplb.json");
    let out = run(&["--weights", s(&w), "--replicas", "18", "--devices", "8", "--json", s(&json)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!json.exists());
}
