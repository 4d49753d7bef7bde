//! Shared helpers for the RTL test suites: the CL golden models, a direct-drive stepper for
//! rust-hdl blocks, and the external-tool runners (verilator lint, Icarus co-simulation).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use rust_hdl::prelude::*;

// The CL golden models: the very structs the mesh router uses.
#[allow(unused_imports)] // each test binary uses one of the two
pub use hw::noc::{arbiter, credit};

/// Settles combinational logic after inputs changed (rust-hdl's own fixpoint loop).
pub fn settle<U: Block>(uut: &mut U) {
    assert!(simulate(uut, 100), "combinational logic failed to converge");
}

/// A fresh per-test scratch directory under cargo's target tmpdir.
pub fn scratch_dir(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("rtl")
        .join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs a tool, panicking with its full output when it cannot start or fails.
pub fn run_tool(cmd: &mut Command) -> String {
    let shown = format!("{cmd:?}");
    let out = cmd.output().unwrap_or_else(|e| {
        panic!(
            "cannot run {shown}: {e} (install with: apt-get install -y iverilog verilator yosys)"
        )
    });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{shown} failed:\n{text}");
    text
}

/// `verilator --lint-only -Wall` of one exported module. Returns the warning lines seen
/// *without* the waiver file (for the caller to check they are all waived rules), and asserts
/// the lint is clean *with* the waivers.
pub fn verilator_lint(dir: &Path, module: &str) -> Vec<String> {
    let file = format!("{module}.v");
    let raw = Command::new("verilator")
        .current_dir(dir)
        .args(["--lint-only", "-Wall", "--top-module", module, &file])
        .output()
        .expect("cannot run verilator (apt-get install -y verilator)");
    let raw = String::from_utf8_lossy(&raw.stderr).to_string();
    let warnings = raw
        .lines()
        .filter(|l| {
            l.starts_with("%Warning") || l.starts_with("%Error:") && !l.contains("Exiting due to")
        })
        .map(str::to_string)
        .collect();
    let out = run_tool(Command::new("verilator").current_dir(dir).args([
        "--lint-only",
        "-Wall",
        "--top-module",
        module,
        rtl::export::WAIVER_FILE,
        &file,
    ]));
    assert!(
        !out.contains("%Warning") && !out.contains("%Error"),
        "verilator lint of {module} not clean with waivers:\n{out}"
    );
    warnings
}

/// Compiles `tb.v` + `dut_file` with Icarus and runs it in `dir`; returns the lines the
/// testbench wrote to `actual.txt`.
pub fn icarus_run(dir: &Path, dut_file: &str) -> Vec<String> {
    let compile = run_tool(Command::new("iverilog").current_dir(dir).args([
        "-g2005", "-Wall", "-o", "tb.vvp", "-s", "tb", "tb.v", dut_file,
    ]));
    assert!(
        !compile.contains("warning"),
        "iverilog -Wall warned on the exported Verilog or the testbench:\n{compile}"
    );
    let out = run_tool(Command::new("vvp").current_dir(dir).args(["-n", "tb.vvp"]));
    assert!(!out.contains("ERROR"), "vvp reported an error:\n{out}");
    std::fs::read_to_string(dir.join("actual.txt"))
        .expect("testbench wrote no actual.txt")
        .lines()
        .map(str::to_string)
        .collect()
}

/// Parses a hex field written by `$fdisplay("%h")` (x/z are an immediate failure).
pub fn hex(field: &str, what: &str, cycle: usize) -> u64 {
    u64::from_str_radix(field, 16)
        .unwrap_or_else(|_| panic!("cycle {cycle}: {what} = {field:?} is not a known value"))
}

/// Exports every block into a scratch dir and asserts Verilator's lint of `modules` is clean
/// with the waiver file, and that without it only the waived rule (DECLFILENAME) fires, so the
/// waiver file stays narrow.
pub fn assert_lint_clean(scratch: &str, modules: &[&str]) {
    let dir = scratch_dir(scratch);
    rtl::export::export_all(&dir).unwrap();
    for name in modules {
        for w in &verilator_lint(&dir, name) {
            assert!(w.contains("DECLFILENAME"), "{name}: warning not covered by a waiver: {w}");
        }
    }
}

/// The exported (renamed) text, not just generate_verilog's, must pass yosys.
pub fn assert_exported_synthesizable(modules: &[&str]) {
    for name in modules {
        let v = rtl::export::verilog_of(name).unwrap();
        // yosys_validate expects the root to be called `top`.
        let v = v.replace(&format!("module {name}("), "module top(");
        yosys_validate(&format!("waferstream_export_{name}"), &v).unwrap();
    }
}
