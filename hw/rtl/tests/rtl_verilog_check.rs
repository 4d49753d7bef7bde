//! The exported Verilog against the Rust model, through the one checking mechanism
//! `scripts/verilog-check.sh` (verilator lint, Icarus co-sim of the generated testbench,
//! `wave diff` of the Rust and Icarus VCDs, yosys elaboration, and generic + iCE40 synthesis on
//! the credit counter). Needs the tools:
//! feature `yosys`, which scripts/test.sh turns on after installing them.

mod common;

use std::path::Path;
use std::process::Command;

use rtl::prelude::*;

/// Runs scripts/verilog-check.sh on `dir` with its synthesis step `synth` ("quick":
/// elaboration only; "full": yosys generic + iCE40 and nextpnr); returns (success, stdout +
/// stderr). The wave diff runs through `cargo run` unless the release binary exists in this
/// target dir.
fn verilog_check(dir: &Path, synth: &str) -> (bool, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // The Fmax column is an estimate: a shorter place-and-route budget keeps the suite short.
    let pnr = std::env::var("NEXTPNR_SECONDS").unwrap_or_else(|_| "120".into());
    let out = Command::new(root.join("scripts/verilog-check.sh"))
        .arg(dir)
        .env("NEXTPNR_SECONDS", pnr)
        .env("VERILOG_CHECK_SYNTH", synth)
        .output()
        .expect("cannot run scripts/verilog-check.sh");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
#[cfg_attr(
    not(feature = "yosys"),
    ignore = "needs verilator, iverilog, yosys (enable feature `yosys`)"
)]
fn standard_blocks_pass_verilog_check() {
    let dir = common::scratch_dir("verilog_check_all");
    let manifest = export_all(&dir, &ExportFilter::default()).unwrap();
    // Every module is linted, co-simulated and wave-diffed; yosys only elaborates here (the
    // full synthesis of the two tops takes ~7 of the 9 minutes this check would take on two
    // cores: docs/rtl.md's numbers come from the acceptance command's full flow, and
    // `edited_expectation_is_reported` below runs the full flow on the credit counter).
    // VERILOG_CHECK_SYNTH=full cargo test ... runs everything.
    let synth = std::env::var("VERILOG_CHECK_SYNTH").unwrap_or_else(|_| "quick".into());
    let (ok, out) = verilog_check(&dir, &synth);
    assert!(ok, "verilog-check failed:\n{out}");
    for m in &manifest.modules {
        // A leaf block without a recorder (the sorter: co-simulated inside the scheduler
        // top) is linted and synthesized only.
        let Some(c) = m.cosim.as_ref() else {
            assert!(!m.top, "{}: a top without co-sim", m.name);
            assert!(out.contains(&format!("ok   {}: lint ok, no co-sim", m.name)), "{}:\n{out}", m.name);
            continue;
        };
        assert!(
            out.contains(&format!(
                "ok   {}: lint ok, cosim PASS {} cycles, wave same",
                m.name, c.cycles
            )),
            "{}: no passing summary line:\n{out}",
            m.name
        );
    }
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("yosys-report.json")).unwrap())
            .unwrap();
    assert_eq!(
        report["modules"].as_array().unwrap().len(),
        manifest.modules.len()
    );
    assert!(dir.join("yosys-report.md").is_file());

    // The wave diff names the first differing port and time: corrupt one output of the
    // Rust trace and compare with the Icarus dump of the passing run.
    let m = &manifest.modules[0];
    let c = m.cosim.as_ref().unwrap();
    let mut trace = (select(&ExportFilter {
        block: Some(m.name.clone()),
        ..Default::default()
    })
    .unwrap()[0]
        .1
        .recorder
        .unwrap())(c.cycles, c.seed)
    .unwrap();
    let same = dir.join("same.rust.vcd");
    trace.write_vcd(&same).unwrap();
    let icarus = dir.join(&c.icarus_vcd);
    assert!(matches!(
        waves::diff(&same, &icarus).unwrap(),
        waves::DiffResult::Same { .. }
    ));
    let port = trace.outputs[0].name.clone();
    trace.cycles[123].outputs[0] ^= 1;
    let bad = dir.join("bad.rust.vcd");
    trace.write_vcd(&bad).unwrap();
    match waves::diff(&bad, &icarus).unwrap() {
        waves::DiffResult::Differ(d) => {
            assert_eq!(d.signal, format!("tb_{}.probe.{port}", m.name));
            assert_eq!(d.time, 123 * rtl::cosim::PERIOD_PS);
        }
        other => panic!("corrupted trace not reported: {other}"),
    }
}

/// One wrong expected value: the testbench stops at that cycle naming the port, and the
/// script fails with that line.
#[test]
#[cfg_attr(
    not(feature = "yosys"),
    ignore = "needs verilator, iverilog, yosys (enable feature `yosys`)"
)]
fn edited_expectation_is_reported() {
    let dir = common::scratch_dir("verilog_check_mismatch");
    let filter = ExportFilter {
        block: Some("credit_counter".into()),
        cycles: Some(300),
        ..Default::default()
    };
    let manifest = export_all(&dir, &filter).unwrap();
    let c = manifest.modules[0].cosim.as_ref().unwrap();
    // Packed {can_send, credits[3:0], err}: flip can_send in cycle 200.
    let path = dir.join(&c.expect);
    let mut lines: Vec<String> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let word = u64::from_str_radix(&lines[200], 16).unwrap() ^ 0b10_0000;
    lines[200] = format!("{word:02x}");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    // And a prototype clock the block cannot reach (it closes at ~360 MHz): the ECP5 timing
    // check must fail too, naming the clock, while the row still says it meets 100 MHz.
    let mpath = dir.join("manifest.json");
    let mut mj: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&mpath).unwrap()).unwrap();
    assert_eq!(mj["modules"][0]["ecp5_clock_mhz"], 100, "the counter's declared clock");
    mj["modules"][0]["ecp5_clock_mhz"] = 1000.into();
    std::fs::write(&mpath, serde_json::to_string_pretty(&mj).unwrap()).unwrap();
    let (ok, out) = verilog_check(&dir, "full");
    assert!(!ok, "a wrong expectation passed:\n{out}");
    assert!(
        out.contains(
            "FAIL credit_counter_8: lint ok, FAIL cosim: MISMATCH cycle 200 port can_send expected"
        ),
        "mismatch not reported:\n{out}"
    );
    assert!(out.contains("verilog-check: FAILED"), "{out}");
    // The full synthesis flow still ran on the failing module: generic and iCE40 counts.
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("yosys-report.json")).unwrap())
            .unwrap();
    let row = &report["modules"][0];
    assert!(row["generic_cells"].as_u64().unwrap() > 0, "{row}");
    assert!(row["ice40_lut4"].as_u64().unwrap() > 0, "{row}");
    assert!(row["fmax"].is_string(), "{row}");
    assert_eq!(row["ecp5_clock_mhz"], 1000, "{row}");
    assert_eq!(row["domain"], "pkg_core", "{row}");
    // nextpnr-ecp5 is installed by the script unless it cannot be (then the check is n/a).
    if report["fpga_parts"]["ecp5"]["nextpnr"].is_string() {
        assert_eq!(row["ecp5_timing_met"], false, "{row}");
        assert_eq!(row["ecp5_meets_100mhz"], true, "{row}");
        assert!(out.contains("FAIL ecp5 timing: ") && out.contains("misses the 1000 MHz prototype clock"), "{out}");
        assert!(out.contains("verilog-check: prototype clock pkg_core: 1000 MHz (set by credit_counter_8"), "{out}");
    }
}
