//! `noc --rtl router`: every tile's router is the rust-hdl RTL router (VC buffers,
//! `router_ctrl`, crossbar), and the run's results, waveforms and line trace equal the CL
//! run's (issue 23). The router's port-by-port lockstep is `hw/rtl/tests/rtl_noc_router.rs`.

mod common;

use common::{json, run, s, tmp};
use serde_json::Value;

/// The JSON without its wall-clock fields (the only ones that may differ between two runs).
fn results(p: &std::path::Path) -> Value {
    let mut v = json(p);
    let strip = |o: &mut Value| {
        let m = o.as_object_mut().unwrap();
        m.remove("wall_seconds");
        m.remove("cycles_per_second");
    };
    strip(&mut v);
    for p in v["points"].as_array_mut().unwrap() {
        strip(p);
    }
    v
}

fn noc(args: &[&str]) -> std::process::Output {
    let out = run(args);
    assert!(out.status.success(), "noc {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

/// The acceptance command (k = 4, rate 0.2), and a rate near saturation with every router's
/// counters: the JSON equals the CL run's.
#[test]
fn rtl_router_json_equals_cl() {
    let d = tmp("cli_noc_rtl", "json");
    for (name, extra) in [("r02", &["--rates", "0.2"][..]), ("r04", &["--rates", "0.4", "--per-router"][..])] {
        let cl = d.join(format!("{name}-cl.json"));
        let rt = d.join(format!("{name}-rtl.json"));
        let mut a = vec!["noc", "--k", "4", "--quiet", "--json", s(&cl)];
        a.extend_from_slice(extra);
        noc(&a);
        let mut b = vec!["noc", "--k", "4", "--quiet", "--rtl", "router", "--json", s(&rt)];
        b.extend_from_slice(extra);
        noc(&b);
        let (x, y) = (results(&cl), results(&rt));
        assert_eq!(x, y, "{name}: the RTL routers' results differ from the CL routers'");
        let p = &x["points"][0];
        assert!(p["router"]["flits_switched"].as_u64().unwrap() > 10_000, "{name}: too little traffic: {p}");
        if name == "r04" {
            assert!(p["router"]["sa_conflicts"].as_u64().unwrap() > 0 && p["router"]["va_stalls"].as_u64().unwrap() > 0, "{p}");
        }
    }
}

/// A short traced run: the VCD (every router signal) and the line trace equal the CL run's.
#[test]
fn rtl_router_waves_and_line_trace_equal_cl() {
    let d = tmp("cli_noc_rtl", "waves");
    let mut vcds = vec![];
    let mut lines = vec![];
    for rtl in [false, true] {
        let vcd = d.join(format!("n-{rtl}.vcd"));
        let mut a = vec!["noc", "--k", "3", "--rates", "0.3", "--quiet", "--vcd", s(&vcd), "--window", "0..400"];
        if rtl {
            a.extend_from_slice(&["--rtl", "router"]);
        }
        noc(&a);
        let text = std::fs::read_to_string(&vcd).unwrap();
        // The header's date line is the only run-dependent text.
        vcds.push(text.lines().filter(|l| !l.contains("$date") && !l.contains(" UTC") && !l.trim_start().starts_with("Date")).collect::<Vec<_>>().join("\n"));
        let mut a = vec!["noc", "--k", "3", "--rates", "0.3", "--quiet", "--line-trace", "top.mesh.r_1_*", "--window", "100..160"];
        if rtl {
            a.extend_from_slice(&["--rtl", "router"]);
        }
        let out = noc(&a);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        lines.push(text.lines().filter(|l| l.contains(" r_1_")).map(String::from).collect::<Vec<_>>());
    }
    assert!(vcds[0].len() > 10_000, "VCD too short");
    assert!(vcds[0] == vcds[1], "the RTL routers' VCD differs from the CL routers'");
    assert_eq!(lines[0].len(), 3 * 60, "one line per router of row 1 per cycle");
    assert_eq!(lines[0], lines[1], "line traces differ");
}

/// A configuration the RTL router cannot model is refused by field, before anything runs.
#[test]
fn rtl_router_refuses_by_field() {
    for (flags, field) in [(&["--vcs", "3"][..], "mesh.router.vcs"), (&["--vc-buf", "16"][..], "mesh.router.vc_buf"), (&["--k", "9"][..], "mesh.k"), (&["--flit-bytes", "32"][..], "mesh.link_width_bytes")] {
        let mut a = vec!["noc", "--rates", "0.1", "--quiet", "--rtl", "router"];
        a.extend_from_slice(flags);
        let out = run(&a);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(field) && err.contains("cannot model"), "{flags:?}: {err}");
    }
}
