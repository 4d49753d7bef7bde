//! `waferstream balance --rtl balancer`: the NI-Balancer's trigger and decision unit run as
//! their rust-hdl twins and the JSON (but the wall clock) and the decision unit's waveform
//! (NAME-decision.vcd) are byte-equal to the CL run — the acceptance command, the
//! invasive topo balancer and EPLB (whose trigger is the unit too), another scenario with more
//! shadow slots; a refused α names the
//! cause; a bad --rtl value is clap's error.

mod common;

use common::{json, run, s};

fn tmp(name: &str) -> std::path::PathBuf {
    common::tmp("cli_balance_rtl", name)
}

fn strip(mut v: serde_json::Value) -> serde_json::Value {
    v["wall_seconds"] = 0.into();
    v
}

/// Runs `args` with and without `--rtl balancer`; JSON equal but the wall clock, and with
/// `vcd` both decision waveforms byte-equal (and written).
fn same_with_and_without_rtl(name: &str, args: &[&str], vcd: bool) -> serde_json::Value {
    let d = tmp(name);
    let mut outs = Vec::new();
    for (tag, rtl) in [("cl", false), ("rtl", true)] {
        let (j, w) = (d.join(format!("{tag}.json")), d.join(format!("{tag}.vcd")));
        let mut a = args.to_vec();
        a.extend(["--json", s(&j), "--quiet"]);
        if vcd {
            a.extend(["--vcd", s(&w)]);
        }
        if rtl {
            a.extend(["--rtl", "balancer"]);
        }
        let out = run(&a);
        assert!(out.status.success(), "{tag}: {}", String::from_utf8_lossy(&out.stderr));
        outs.push(json(&j));
    }
    assert_eq!(strip(outs[0].clone()), strip(outs[1].clone()), "JSON differs with --rtl balancer");
    if vcd {
        let (a, b) = (std::fs::read(d.join("cl-decision.vcd")).unwrap(), std::fs::read(d.join("rtl-decision.vcd")).unwrap());
        assert!(!a.is_empty());
        assert_eq!(a, b, "decision waveforms differ");
    }
    outs.remove(0)
}

#[test]
fn acceptance_topo_ni_json_and_decision_waveform_equal_to_cl() {
    let v = same_with_and_without_rtl("accept", &["balance", "--balancer", "topo-ni", "--iters", "10"], true);
    // The run decided something (the trigger fired and the unit moved experts).
    let r = &v["results"][0];
    assert!(r["migrations"].as_u64().unwrap() >= 1 && r["moves"].as_u64().unwrap() >= 1, "{r}");
}

#[test]
fn invasive_topo_and_eplb_equal_to_cl() {
    let v = same_with_and_without_rtl("topo_eplb", &["balance", "--balancer", "topo,eplb", "--iters", "8", "--warmup", "2", "--shadow-slots", "3"], false);
    assert!(v["results"][0]["moves"].as_u64().unwrap() >= 1);
}

#[test]
fn other_scenario_more_slots_equal_to_cl() {
    // Another workload: a single scenario, more shadow slots, a lower α.
    let v = same_with_and_without_rtl("coding", &["balance", "--balancer", "topo-ni", "--iters", "8", "--warmup", "2", "--scenario", "coding", "--shadow-slots", "4", "--alpha", "0.05"], false);
    assert!(v["results"][0]["moves"].as_u64().unwrap() >= 1);
}

#[test]
fn refused_alpha_names_the_cause() {
    let d = tmp("alpha");
    let j = d.join("x.json");
    let out = run(&["balance", "--balancer", "topo-ni", "--iters", "3", "--warmup", "1", "--alpha", "0.1234567", "--rtl", "balancer", "--json", s(&j), "--quiet"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ni_trigger rtl") && err.contains("alpha"), "{err}");
    let out = run(&["balance", "--rtl", "nosuch"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--rtl"));
}
