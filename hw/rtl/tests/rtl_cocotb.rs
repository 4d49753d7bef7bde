//! The cocotb tests `export-verilog` writes beside the Verilog (`test_<module>.py`, run by
//! `run_cocotb.py`): every module with recorded vectors passes its replay under Icarus, and
//! an expected word edited by one bit makes that module's test fail with the cycle and port.
//! Needs Icarus and cocotb (scripts/test.sh installs both; feature `yosys` marks the tool
//! tests) — without cocotb this test fails, it does not skip.

mod common;

use std::path::Path;
use std::process::Command;

use rtl::prelude::*;

fn run_cocotb(dir: &Path, modules: &[&str]) -> (bool, String) {
    let out = Command::new("python3").arg("run_cocotb.py").args(modules).current_dir(dir).output().expect("python3");
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

#[test]
#[cfg_attr(not(feature = "yosys"), ignore = "needs iverilog and cocotb (enable feature `yosys`)")]
fn every_exported_module_passes_its_cocotb_replay() {
    let have = Command::new("python3").args(["-c", "import cocotb"]).output().is_ok_and(|o| o.status.success());
    assert!(have, "cocotb is not installed: scripts/test.sh installs it (python3 -m pip install cocotb)");
    let dir = common::scratch_dir("cocotb_all");
    let manifest = export_all(&dir, &ExportFilter::default()).unwrap();
    let (ok, out) = run_cocotb(&dir, &[]);
    assert!(ok, "run_cocotb.py failed:\n{out}");
    let with_vectors: Vec<_> = manifest.modules.iter().filter(|m| m.cosim.is_some()).collect();
    assert!(with_vectors.len() >= 10, "{} modules with vectors", with_vectors.len());
    for m in &with_vectors {
        let c = m.cosim.as_ref().unwrap();
        assert!(dir.join(&c.cocotb).is_file(), "{}: no {}", m.name, c.cocotb);
        assert!(out.contains(&format!("PASS {} ({} cycles, 1 test(s), 0 failed", m.name, c.cycles)), "{}:\n{out}", m.name);
    }

    // One bit of one expected output word flipped: the replay must name that cycle.
    let m = with_vectors.iter().find(|m| m.name == "rr_arbiter_5").expect("rr_arbiter_5 exported");
    let exp = dir.join(&m.cosim.as_ref().unwrap().expect);
    let text = std::fs::read_to_string(&exp).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let last = lines[100].pop().unwrap();
    lines[100].push(std::char::from_digit(last.to_digit(16).unwrap() ^ 1, 16).unwrap());
    std::fs::write(&exp, lines.join("\n") + "\n").unwrap();
    let (ok, out) = run_cocotb(&dir, &["rr_arbiter_5"]);
    assert!(!ok && out.contains("FAIL rr_arbiter_5"), "{out}");
    let log = std::fs::read_to_string(dir.join("sim_build/rr_arbiter_5/sim.log")).unwrap();
    assert!(log.contains("MISMATCH cycle 100 port"), "{log}");
}
