//! Verilog export: files, manifest, port order (S3: clock, reset, inputs, outputs), the
//! registry's selection by block and parameter, and the co-simulation files (no tools needed).

use rtl::prelude::*;

#[test]
fn export_all_writes_files_and_manifest() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("rtl/export_all");
    let _ = std::fs::remove_dir_all(&dir);
    let filter = ExportFilter {
        cycles: Some(64),
        ..Default::default()
    };
    let manifest = export_all(&dir, &filter).unwrap();
    let names: Vec<_> = manifest.modules.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["rr_arbiter_5", "rr_arbiter_10", "credit_counter_8", "route_compute_3", "router_ctrl_v2", "router_v2_d8", "bitonic_sorter_16", "iodie_scheduler_c4_e16", "ucie_replay_8", "ucie_crc32_64", "ring_buffer_s8", "chiplet_ctrl_s8_e16", "age_picker_8", "tag_fifo_q16_e16", "dist_only_predictor_e8_w16", "semmoe_lut_n8_d4", "mapping_ctrl_64", "pe_array_4x4", "pe_array_8x8", "load_seq_e16", "reload_list_q16_e16", "free_report_s8", "ni_balancer_8", "ni_trigger", "age_matrix_8", "slot_tags_8", "expert_table_e16", "slot_state_s8", "ring_alloc_s8"]);
    let mut listed = blocks();
    for b in &mut listed {
        // blocks() shows the default co-sim length; the export above was shortened.
        if let Some(c) = &mut b.cosim {
            c.cycles = 64;
        }
    }
    assert_eq!(
        manifest.modules, listed,
        "blocks() must list exactly what export_all writes"
    );

    // manifest.json round-trips to what export_all returned.
    let text = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
    let back: Manifest = serde_json::from_str(&text).unwrap();
    assert_eq!(back, manifest);
    // Each module carries its prototype clock and its modelled clock domain (scripts/verilog-check.sh
    // closes timing at the one and reports the slowest clock per the other).
    let raw: serde_json::Value = serde_json::from_str(&text).unwrap();
    for (m, r) in manifest.modules.iter().zip(raw["modules"].as_array().unwrap()) {
        assert_eq!(r["ecp5_clock_mhz"], m.ecp5_clock_mhz, "{}", m.name);
        let want = if m.name.starts_with("ucie_") {
            "pkg_ucie"
        } else if ["mapping_ctrl", "ni_", "dist_only", "semmoe"].iter().any(|p| m.name.starts_with(p)) {
            "wafer_core"
        } else {
            "pkg_core"
        };
        assert_eq!(r["domain"], want, "{}", m.name);
    }
    assert!(dir.join(&manifest.verilator_waivers).is_file());

    for m in &manifest.modules {
        // Every top and every leaf but the sorter (co-simulated inside the scheduler top)
        // registered a recorder: all co-sim files exist.
        assert_eq!(m.top, m.name.starts_with("iodie_scheduler") || m.name.starts_with("chiplet_ctrl") || m.name.starts_with("router_v2") || m.name.starts_with("pe_array"), "{}: top flag", m.name);
        let Some(c) = m.cosim.as_ref() else {
            assert_eq!(m.name, "bitonic_sorter_16", "only the sorter has no co-sim");
            continue;
        };
        for f in [&c.stim, &c.expect, &c.testbench, &c.rust_vcd] {
            assert!(dir.join(f).is_file(), "{}: {f} missing", m.name);
        }
        let stim = std::fs::read_to_string(dir.join(&c.stim)).unwrap();
        assert_eq!(
            stim.lines().count(),
            64,
            "{}: one stimulus word per cycle",
            m.name
        );
        let tb = std::fs::read_to_string(dir.join(&c.testbench)).unwrap();
        assert!(tb.contains(&format!("{} dut(", m.name)) && tb.contains("!=="));
        let v = std::fs::read_to_string(dir.join(&m.file)).unwrap();
        assert!(
            v.contains(&format!("module {}(", m.name)),
            "{}: root module not renamed",
            m.name
        );
        assert!(
            !v.contains("module top"),
            "{}: leftover rust-hdl root name",
            m.name
        );
        // S3 port order: clock, reset, then inputs, then outputs.
        assert_eq!(m.ports[0].name, "clock");
        assert_eq!(m.ports[1].name, "reset");
        let first_out = m
            .ports
            .iter()
            .position(|p| p.direction == PortDir::Output)
            .unwrap();
        assert!(m.ports[first_out..]
            .iter()
            .all(|p| p.direction == PortDir::Output));
        // The Verilog header lists the ports in the same order as the manifest.
        let header: Vec<String> = m.ports.iter().map(|p| p.name.clone()).collect();
        assert!(v.contains(&format!("module {}({});", m.name, header.join(","))));
        // The synchronous reset is really in the logic (no reliance on `initial`, S3).
        assert!(
            v.contains("if (reset) begin"),
            "{}: no synchronous reset",
            m.name
        );
    }
    let arb10 = &manifest.modules[1];
    assert_eq!(arb10.params["n"], 10);
    let widths: Vec<_> = arb10
        .ports
        .iter()
        .map(|p| (p.name.as_str(), p.width))
        .collect();
    assert_eq!(
        widths,
        [
            ("clock", 1),
            ("reset", 1),
            ("req", 10),
            ("fire", 1),
            ("grant", 10),
            ("grant_valid", 1)
        ]
    );
    let cc = &manifest.modules[2];
    assert_eq!((cc.params["width"], cc.params["depth"]), (4, 8));
}

#[test]
fn unknown_block_is_an_error() {
    let e = verilog_of("router_top").unwrap_err();
    assert!(matches!(e, RtlError::UnknownBlock { .. }));
    assert!(e.to_string().contains("rr_arbiter_5"), "{e}");
    // A bad selection is refused before the directory is created.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("rtl/export_refused");
    let _ = std::fs::remove_dir_all(&dir);
    let filter = ExportFilter {
        block: Some("rr_arbiter".into()),
        params: vec![("n".into(), "7".into())],
        ..Default::default()
    };
    let e = export_all(&dir, &filter).unwrap_err().to_string();
    assert!(e.contains("allowed values of n: 5, 10"), "{e}");
    assert!(!dir.exists(), "a refused export must not write anything");
}

#[test]
fn export_into_a_file_path_fails_cleanly() {
    let base = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("rtl/export_blocked");
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    let file = base.join("not_a_dir");
    std::fs::write(&file, "x").unwrap();
    assert!(matches!(
        export_all(&file, &ExportFilter::default()),
        Err(RtlError::Io { .. })
    ));
}

#[test]
fn export_one_block_by_param() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("rtl/export_one");
    let _ = std::fs::remove_dir_all(&dir);
    let filter = ExportFilter {
        block: Some("rr_arbiter".into()),
        params: vec![ExportFilter::parse_param("n=10").unwrap()],
        cycles: Some(16),
        seed: Some(3),
    };
    let m = export_all(&dir, &filter).unwrap();
    let names: Vec<_> = m.modules.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["rr_arbiter_10"]);
    assert_eq!(m.modules[0].cosim.as_ref().unwrap().seed, 3);
    assert!(!dir.join("rr_arbiter_5.v").exists());
}

/// The recorded trace follows the cycle convention: the reset in cycle 0 shows its effect in
/// the registered outputs of cycle 1, not before.
#[test]
fn trace_registered_outputs_lag_one_cycle() {
    let t = rtl::credit_counter::record_credit_counter::<4>("credit_counter_8", 8, 4, 1).unwrap();
    let names: Vec<_> = t.outputs.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["can_send", "credits", "err"]);
    assert_eq!(t.inputs[0].name, "reset");
    assert_eq!(t.cycles[0].inputs[0], 1, "recorder resets in cycle 0");
    assert_eq!(
        t.cycles[0].outputs,
        [0, 0, 0],
        "power-up value before the first edge"
    );
    assert_eq!(
        t.cycles[1].outputs[1], 8,
        "reset loaded the depth at the edge of cycle 0"
    );
}
