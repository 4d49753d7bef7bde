//! `waferstream pe`: the acceptance command reproduces SCALE-Sim's 34271 cycles; bad flags
//! are refused with exit 2 naming the flag.

use std::path::Path;
use std::process::Command;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_waferstream"));
    c.env("RUST_LOG", "warn");
    c
}

#[test]
fn acceptance_command_matches_scalesim() {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli_pe");
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let json = d.join("out/pe.json");
    let out = bin()
        .args(["pe", "--m", "256", "--k", "2048", "--n", "96", "--array", "32x64", "--dataflow", "os", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("34271") && stdout.contains("double-buffered"), "{stdout}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["cycles"], 34271);
    let u = v["utilization"].as_f64().unwrap();
    assert!((u * 100.0 - 71.71).abs() < 0.005, "{u}");
    assert_eq!(v["folds"], 16);
    assert_eq!(v["dataflow"], "os");
    assert!(v["double_buffered_cycles"].as_u64().unwrap() < 34271);
}

#[test]
fn ws_row_and_bad_flags() {
    let out = bin().args(["pe", "--m", "16", "--k", "4096", "--n", "400", "--dataflow", "ws"]).output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("cycles 127231"));
    for (args, flag) in [
        (&["--array", "0x64"][..], "--array"),
        (&["--dataflow", "xy"][..], "--dataflow"),
        (&["--timing", "fast"][..], "--timing"),
        (&["--m", "0"][..], "--m"),
    ] {
        let mut c = bin();
        c.args(["pe", "--k", "4", "--n", "4"]).args(args);
        if args[0] != "--m" {
            c.args(["--m", "4"]);
        }
        let out = c.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(flag) && err.trim().lines().count() == 1, "{args:?}: {err}");
    }
}
