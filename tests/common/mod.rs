//! Helpers the CLI integration tests share: spawn the binary, a fresh scratch directory per
//! test, paths as `&str`, a JSON file read back.

#![allow(dead_code)] // each test binary uses its own subset

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `waferstream ARGS` (warnings only on stderr).
pub fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_waferstream")).args(args).env("RUST_LOG", "warn").output().expect("spawn waferstream")
}

/// A fresh directory `<target tmp>/<suite>/<name>`.
pub fn tmp(suite: &str, name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(suite).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

pub fn json(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// A vendored slice of the real routing data (testbenches/traces, see its README): the test
/// fails, never skips, when it is missing.
pub fn vendored_trace(name: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("testbenches/traces").join(name);
    assert!(p.is_file(), "{} missing: the real-trace test cannot run without it", p.display());
    p
}

/// The first 64 decode steps of the real OLMoE warp trace (vendored), imported into
/// `dir/olmoe.jsonl` by `trace import`.
pub fn imported_olmoe(dir: &Path) -> PathBuf {
    let src = vendored_trace("olmoe_warp_decode_64.jsonl");
    let t = dir.join("olmoe.jsonl");
    let out = run(&["trace", "import", s(&src), "--out", s(&t)]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    t
}
