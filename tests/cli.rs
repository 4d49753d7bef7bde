//! The `waferstream` binary: bad input is refused up front with a non-zero exit code and a
//! message naming the field; the main subcommands produce their outputs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_waferstream"));
    c.env("RUST_LOG", "warn");
    c
}

fn tmp(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli").join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

struct Res {
    out: Output,
}

impl Res {
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.stdout).into_owned()
    }
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }
    fn code(&self) -> Option<i32> {
        self.out.status.code()
    }
    fn describe(&self) -> String {
        format!("exit {:?}\n--- stdout\n{}\n--- stderr\n{}", self.code(), self.stdout(), self.stderr())
    }
}

fn run(args: &[&str], cwd: Option<&Path>) -> Res {
    let mut c = bin();
    c.args(args);
    if let Some(d) = cwd {
        c.current_dir(d);
    }
    let out = c.output().expect("spawn waferstream");
    Res { out }
}

/// Refused: non-zero exit, stderr names every `needles`, nothing simulated (no result table
/// and no measurement line: a run prints its rows, cycles and cycles/s as it goes, so a
/// refusal after simulating would show them; no wall-clock bound, which a loaded machine
/// could break).
fn assert_refused(r: &Res, needles: &[&str]) {
    assert!(!r.out.status.success(), "expected failure\n{}", r.describe());
    assert_ne!(r.code(), Some(0));
    let err = r.stderr();
    for n in needles {
        assert!(err.contains(n), "stderr does not name `{n}`\n{}", r.describe());
    }
    let out = r.stdout();
    assert!(!out.contains("cycles/s") && !out.contains("pkt_lat"), "simulated before refusing\n{}", r.describe());
    assert!(!err.contains("cycles/s") && !err.contains("pkt_lat"), "simulated before refusing\n{}", r.describe());
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

// ----- refused input

#[test]
fn noc_config_unknown_key() {
    let d = tmp("unknown_key");
    let p = write(&d, "c.toml", "[mesh]\nkk = 3\n");
    let r = run(&["noc", "--config", p.to_str().unwrap(), "--quiet"], None);
    assert_refused(&r, &["kk"]);
    // The file is named so the user knows where to look.
    assert!(r.stderr().contains("c.toml"), "{}", r.describe());
}

#[test]
fn noc_config_wrong_type() {
    let d = tmp("wrong_type");
    let p = write(&d, "c.toml", "[mesh]\nk = \"eight\"\n");
    let r = run(&["noc", "--config", p.to_str().unwrap(), "--quiet"], None);
    assert_refused(&r, &["k", "eight"]);
    let err = r.stderr();
    assert!(err.contains("mesh.k") || err.contains("k = \"eight\""), "field not identified\n{}", r.describe());
}

#[test]
fn noc_config_invalid_value_in_file() {
    let d = tmp("bad_value");
    let p = write(&d, "c.toml", "[mesh]\nk = 4\n[mesh.router]\nva_delay = 0\n");
    let r = run(&["noc", "--config", p.to_str().unwrap(), "--quiet"], None);
    assert_refused(&r, &["mesh.router.va_delay"]);
}

#[test]
fn noc_k_zero() {
    let r = run(&["noc", "--k", "0", "--rates", "0.1", "--quiet"], None);
    assert_refused(&r, &["mesh.k"]);
}

#[test]
fn noc_vc_buf_zero() {
    let r = run(&["noc", "--k", "4", "--vc-buf", "0", "--rates", "0.1", "--quiet"], None);
    assert_refused(&r, &["mesh.router.vc_buf"]);
}

#[test]
fn noc_vcs_zero() {
    let r = run(&["noc", "--k", "4", "--vcs", "0", "--rates", "0.1", "--quiet"], None);
    assert_refused(&r, &["mesh.router.vcs"]);
}

#[test]
fn noc_link_latency_zero() {
    let r = run(&["noc", "--k", "4", "--link-latency", "0", "--rates", "0.1", "--quiet"], None);
    assert_refused(&r, &["mesh.link_latency"]);
}

#[test]
fn noc_rate_out_of_range() {
    for rates in ["1.5", "-0.1", "0.1,1.2", "0.5:1.5:0.5"] {
        let arg = format!("--rates={rates}"); // `=` so clap takes "-0.1" as a value
        let r = run(&["noc", "--k", "4", &arg, "--quiet"], None);
        assert_refused(&r, &["rate"]);
        assert!(r.stderr().contains("--rates"), "{}", r.describe());
    }
}

#[test]
fn noc_rates_bad_syntax() {
    for rates in ["abc", "0.1,,0.2", "0.1:0.2", "0.1:0.2:0", "0.3:0.1:0.1", "0.1;0.2"] {
        let arg = format!("--rates={rates}");
        let r = run(&["noc", "--k", "4", &arg, "--quiet"], None);
        assert_refused(&r, &["--rates"]);
    }
}

#[test]
fn noc_bad_traffic_and_window() {
    let r = run(&["noc", "--k", "4", "--rates", "0.1", "--traffic", "tornado", "--quiet"], None);
    assert_refused(&r, &["--traffic", "tornado"]);
    let r = run(&["noc", "--k", "4", "--rates", "0.1", "--traffic", "hotspot", "--hotspot-nodes", "99", "--quiet"], None);
    assert_refused(&r, &["traffic"]);
    let d = tmp("bad_window");
    let v = d.join("w.vcd");
    let r = run(&["noc", "--k", "4", "--rates", "0.1", "--vcd", v.to_str().unwrap(), "--window", "500..100", "--quiet"], None);
    assert_refused(&r, &["--window"]);
    let r = run(&["noc", "--k", "4", "--rates", "0.1", "--trace", "top.mesh.r_1_*", "--quiet"], None);
    assert_refused(&r, &["--trace"]);
}

#[test]
fn run_scenario_unknown_key() {
    let d = tmp("scenario_unknown");
    let p = write(
        &d,
        "s.toml",
        "[scenario]\nname = \"x\"\nkind = \"noc_sweep\"\nrates = [0.1]\n\n[noc.mesh]\nk = 4\nlink_latncy = 2\n",
    );
    let r = run(&["run", p.to_str().unwrap(), "--quiet"], None);
    assert_refused(&r, &["link_latncy"]);
    assert!(r.stderr().contains("s.toml"), "{}", r.describe());
}

#[test]
fn run_scenario_rate_out_of_range() {
    let d = tmp("scenario_rate");
    let p = write(&d, "s.toml", "[scenario]\nname = \"x\"\nkind = \"noc_sweep\"\n\n[noc.mesh]\nk = 4\n\n[noc.traffic]\nrate = 2.0\n");
    let r = run(&["run", p.to_str().unwrap(), "--quiet"], None);
    assert_refused(&r, &["noc.traffic.rate"]);
    let p = write(&d, "s2.toml", "[scenario]\nname = \"x\"\nkind = \"noc_sweep\"\nrates = [0.1, 3.0]\n\n[noc.mesh]\nk = 4\n");
    let r = run(&["run", p.to_str().unwrap(), "--quiet"], None);
    assert_refused(&r, &["scenario.rates"]);
}

#[test]
fn run_scenario_missing_file() {
    let d = tmp("scenario_missing");
    let p = d.join("nope.toml");
    let r = run(&["run", p.to_str().unwrap(), "--quiet"], None);
    assert_refused(&r, &["nope.toml"]);
}

// ----- positive paths

#[test]
fn noc_json_output() {
    let d = tmp("json");
    let j = d.join("x.json");
    let r = run(&["noc", "--k", "4", "--rates", "0.1", "--json", j.to_str().unwrap(), "--quiet"], None);
    assert!(r.out.status.success(), "{}", r.describe());
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&j).unwrap()).unwrap();
    let p0 = &v["points"][0];
    assert!(p0.is_object(), "no points[0] in {v}");
    for key in ["rate", "avg_packet_latency", "avg_network_latency", "accepted_flit_rate", "avg_hops", "saturated"] {
        assert!(p0.get(key).is_some(), "points[0] lacks `{key}`: {p0}");
    }
    for key in ["cycles", "wall_seconds", "cycles_per_second"] {
        assert!(v.get(key).is_some(), "top level lacks `{key}`");
    }
    assert_eq!(v["points"].as_array().unwrap().len(), 1);
    assert_eq!(p0["rate"].as_f64(), Some(0.1));
    assert_eq!(p0["saturated"].as_bool(), Some(false), "4x4 at 0.1 must not saturate: {p0}");
    let lat = p0["avg_packet_latency"].as_f64().unwrap();
    let net = p0["avg_network_latency"].as_f64().unwrap();
    assert!(lat >= net && net > 0.0, "latencies {lat} / {net}");
    let acc = p0["accepted_flit_rate"].as_f64().unwrap();
    assert!((acc - 0.1).abs() < 0.02, "accepted {acc} at offered 0.1");
    assert!(p0["avg_hops"].as_f64().unwrap() >= 1.0);
    assert!(v["cycles"].as_u64().unwrap() > 0);
    assert_eq!(v["k"].as_u64(), Some(4));
    // The table went to stdout too.
    assert!(r.stdout().contains("cycles/s"), "{}", r.describe());
}

fn traced(dir: &Path, name: &str, seed: &str) -> PathBuf {
    let v = dir.join(name);
    let r = run(
        &["noc", "--k", "4", "--rates", "0.05", "--seed", seed, "--vcd", v.to_str().unwrap(), "--trace", "top.mesh.r_1_*", "--window", "100..2000", "--quiet"],
        None,
    );
    assert!(r.out.status.success(), "{}", r.describe());
    assert!(v.exists());
    v
}

#[test]
fn noc_vcd_and_wave_tools() {
    let d = tmp("waves");
    let a = traced(&d, "a.vcd", "0");
    let a2 = traced(&d, "a2.vcd", "0");
    let b = traced(&d, "b.vcd", "1");
    let text = std::fs::read_to_string(&a).unwrap();
    assert!(text.contains("$timescale"), "not a VCD");
    assert!(text.contains("r_1_0") && text.contains("r_1_3"));
    assert!(!text.contains("r_0_0") && !text.contains("r_2_"), "--trace did not restrict scopes");
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&a2).unwrap(), "same seed, different VCD bytes");

    let s = run(&["wave", "stats", a.to_str().unwrap()], None);
    assert!(s.out.status.success(), "{}", s.describe());
    assert!(s.stdout().contains("signals") && s.stdout().contains("changes"), "{}", s.describe());

    let same = run(&["wave", "diff", a.to_str().unwrap(), a.to_str().unwrap()], None);
    assert_eq!(same.code(), Some(0), "{}", same.describe());
    assert!(same.stdout().contains("same"), "{}", same.describe());

    let differ = run(&["wave", "diff", a.to_str().unwrap(), b.to_str().unwrap()], None);
    assert_eq!(differ.code(), Some(1), "{}", differ.describe());
    assert!(differ.stdout().contains("top.mesh.r_1_"), "diff does not name a signal\n{}", differ.describe());

    // A file that is not a waveform is refused with the usual error exit (2), naming it.
    let junk = write(&d, "junk.vcd", "not a waveform\n");
    let bad = run(&["wave", "stats", junk.to_str().unwrap()], None);
    assert_eq!(bad.code(), Some(2), "{}", bad.describe());
    assert!(bad.stderr().contains("junk.vcd"), "{}", bad.describe());
}

/// A missing waveform file must be an ordinary error (exit 2, the path named), not a panic:
/// `wave diff` uses exit 1 for "differ", so a panic's 101 is easy to misread in scripts.
#[test]
fn wave_tools_missing_file_is_an_error_not_a_panic() {
    let d = tmp("waves_missing");
    let none = d.join("none.vcd");
    for args in [vec!["wave", "stats", none.to_str().unwrap()], vec!["wave", "diff", none.to_str().unwrap(), none.to_str().unwrap()]] {
        let r = run(&args, None);
        assert_eq!(r.code(), Some(2), "{}", r.describe());
        assert!(r.stderr().contains("none.vcd"), "{}", r.describe());
        assert!(!r.stderr().contains("panicked"), "{}", r.describe());
    }
}

#[test]
fn export_verilog_writes_manifest_and_modules() {
    let d = tmp("verilog");
    let r = run(&["export-verilog", "--out", d.to_str().unwrap()], None);
    assert!(r.out.status.success(), "{}", r.describe());
    let manifest = d.join("manifest.json");
    assert!(manifest.exists(), "no manifest.json\n{}", r.describe());
    let m: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).expect("manifest is JSON");
    assert!(m.is_object() || m.is_array());
    let vs: Vec<PathBuf> = std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "v")).collect();
    assert!(!vs.is_empty(), "no .v files in {}", d.display());
    for v in &vs {
        let t = std::fs::read_to_string(v).unwrap();
        assert!(t.contains("module") && t.contains("endmodule"), "{} is not Verilog", v.display());
        let name = v.file_name().unwrap().to_str().unwrap();
        assert!(m.to_string().contains(name), "manifest does not list {name}");
    }
}

#[test]
fn regress_list() {
    let r = run(&["regress", "--list"], None);
    assert!(r.out.status.success(), "{}", r.describe());
    assert!(r.stdout().contains("noc/"), "{}", r.describe());
}

#[test]
fn run_print_default() {
    let r = run(&["run", "--print-default"], None);
    assert!(r.out.status.success(), "{}", r.describe());
    let out = r.stdout();
    assert!(out.contains("[scenario]"), "{out}");
    let v: toml::Value = toml::from_str(&out).expect("printed default is TOML");
    assert!(v.get("scenario").is_some() && v.get("package").is_some() && v.get("workload").is_some());
}

#[test]
fn unknown_subcommand_and_flag() {
    let r = run(&["frobnicate"], None);
    assert!(!r.out.status.success());
    let r = run(&["noc", "--kk", "4"], None);
    assert!(!r.out.status.success());
    assert!(r.stderr().contains("--kk"), "{}", r.describe());
}

#[test]
fn noc_plot_and_per_router_stats() {
    let d = tmp("plot");
    let svg = d.join("curve.svg");
    let json = d.join("pr.json");
    let r = run(&["noc", "--k", "3", "--rates", "0.05,0.2", "--quiet", "--plot", svg.to_str().unwrap(), "--per-router", "--json", json.to_str().unwrap()], None);
    assert!(r.out.status.success(), "{}", r.describe());
    let text = std::fs::read_to_string(&svg).expect("svg written");
    assert!(text.starts_with("<svg") && text.contains("packet latency"), "not an SVG plot");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let pr = v["points"][0]["per_router"].as_object().expect("per_router map");
    assert_eq!(pr.len(), 9);
    assert!(pr.contains_key("top.mesh.r_2_1.router"));
    let sum: u64 = pr.values().map(|s| s["flits_switched"].as_u64().unwrap()).sum();
    assert_eq!(sum, v["points"][0]["router"]["flits_switched"].as_u64().unwrap());
}

#[test]
fn run_default_scenario_with_fst_window() {
    let d = tmp("run_fst");
    let fst = d.join("run.fst");
    let json = d.join("run.json");
    let r = run(&["run", "noc-sweep", "--quiet", "--json", json.to_str().unwrap(), "--fst", fst.to_str().unwrap(), "--trace", "top.mesh.r_0_*", "--window", "2000..2500"], None);
    assert!(r.out.status.success(), "{}", r.describe());
    assert!(r.stdout().contains("mesh8x8-uniform"), "{}", r.describe());
    let s = run(&["wave", "stats", fst.to_str().unwrap()], None);
    assert!(s.out.status.success(), "{}", s.describe());
    assert!(s.stdout().contains("top.mesh.r_0_"), "{}", s.describe());
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["result"]["points"].as_array().unwrap().len(), 4);
}

#[test]
fn noc_line_trace() {
    let r = run(&["noc", "--k", "4", "--rates", "0.3", "--line-trace", "top.mesh.r_1_1", "--window", "3000..3010", "--quiet"], None);
    assert!(r.out.status.success(), "{}", r.describe());
    let lines: Vec<String> = r.stdout().lines().filter(|l| l.contains(" r_1_1 ")).map(String::from).collect();
    assert_eq!(lines.len(), 10, "{}", r.describe());
    assert!(lines[0].trim_start().starts_with("3000 r_1_1 e["), "{}", lines[0]);
    let bad = run(&["noc", "--k", "4", "--rates", "0.3", "--line-trace", "top.mesh.r_9_*"], None);
    assert_eq!(bad.code(), Some(2), "{}", bad.describe());
    assert!(bad.stderr().contains("selects no router"), "{}", bad.describe());
}

// ----- issue 5: hardening

#[test]
fn issue5_rate_lists_that_explode_are_refused() {
    for (rates, needle) in [("0:1:1e-12", "at most 1000"), ("0:inf:0.1", "finite"), ("0.1:0.3:1e-7", "at most 1000"), ("nan", "outside")] {
        let r = run(&["noc", "--k", "2", "--rates", rates, "--quiet"], None);
        assert_refused(&r, &[needle]);
        assert_eq!(r.code(), Some(2), "{}", r.describe());
        assert_eq!(r.stderr().lines().count(), 1, "one-line message\n{}", r.describe());
    }
}

#[test]
fn issue5_unwritable_output_is_refused_before_simulating() {
    let d = tmp("unwritable");
    let file = write(&d, "f", "x");
    let bad = file.join("sub").join("out.json"); // parent is a regular file
    let b = bad.to_str().unwrap();
    for flag in ["--json", "--plot", "--vcd", "--fst"] {
        let r = run(&["noc", "--k", "2", "--rates", "0.1", flag, b, "--quiet"], None);
        assert_refused(&r, &["cannot"]);
        assert!(r.stderr().contains(&d.join("f").display().to_string()), "names the path\n{}", r.describe());
    }
    let r = run(&["bench", "noc", "--k", "2", "--repeat", "1", "--json", b], None);
    assert_refused(&r, &["cannot"]);
    let r = run(&["bench", "noc", "--k", "2", "--repeat", "0"], None);
    assert_refused(&r, &["--repeat 0"]);
}

#[test]
fn issue5_flag_decides_wave_format() {
    let d = tmp("fmt");
    let fst = d.join("x.wave");
    let r = run(&["noc", "--k", "2", "--rates", "0.1", "--fst", fst.to_str().unwrap(), "--window", "0..20", "--quiet"], None);
    assert!(r.out.status.success(), "{}", r.describe());
    let bytes = std::fs::read(&fst).unwrap();
    assert!(!bytes.starts_with(b"$"), "--fst wrote a VCD");
    let vcd = d.join("y.fst");
    let r = run(&["noc", "--k", "2", "--rates", "0.1", "--vcd", vcd.to_str().unwrap(), "--window", "0..20", "--quiet"], None);
    assert!(r.out.status.success(), "{}", r.describe());
    let text = std::fs::read_to_string(&vcd).unwrap();
    assert!(text.starts_with('$'), "--vcd did not write a VCD");
}

#[test]
fn issue5_closed_stdout_exits_quietly() {
    use std::io::Read;
    use std::process::Stdio;
    let mut c = bin();
    c.args(["noc", "--k", "2", "--rates", "0.05:0.5:0.05", "--quiet"]).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    drop(child.stdout.take()); // the reader goes away at once, like `| head -0`
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let st = child.wait().unwrap();
    assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "stderr: {err}");
    assert_ne!(st.code(), Some(101));
}

#[test]
fn issue5_config_rate_wins_over_default_sweep_and_hotspot_flags_need_hotspot() {
    let d = tmp("precedence");
    let p = write(&d, "c.toml", "[mesh]\nk = 2\n[traffic]\nrate = 0.2\n");
    let r = run(&["noc", "--config", p.to_str().unwrap(), "--quiet"], None);
    assert!(r.out.status.success(), "{}", r.describe());
    let rows = r.stdout().lines().filter(|l| l.trim_start().starts_with("0.")).count();
    assert_eq!(rows, 1, "one rate from the config, not the default sweep\n{}", r.describe());
    assert!(r.stdout().contains("0.200"), "{}", r.describe());
    let r = run(&["noc", "--k", "2", "--rates", "0.1", "--hotspot-nodes", "1", "--quiet"], None);
    assert_refused(&r, &["--traffic hotspot"]);
    // --traffic hotspot keeps the config's nodes: node 3 (router r_1_1) receives half of all
    // packets on top of its uniform share, so its router switches the most flits, and the
    // default hotspot (node 0) would have made r_0_0 the busiest instead.
    let h = write(&d, "h.toml", "[mesh]\nk = 2\n[traffic]\nrate = 0.1\n[traffic.pattern]\nhotspot = { nodes = [3], fraction = 0.5 }\n[measure]\nper_router_stats = true\n");
    let j = d.join("h.json");
    let r = run(&["noc", "--config", h.to_str().unwrap(), "--traffic", "hotspot", "--json", j.to_str().unwrap(), "--quiet"], None);
    assert!(r.out.status.success(), "{}", r.describe());
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&j).unwrap()).unwrap();
    assert_eq!(v["traffic"], "hotspot", "{v}");
    let per = v["points"][0]["per_router"].as_object().unwrap_or_else(|| panic!("no per_router stats: {v}"));
    let switched = |xy: &str| per[&format!("top.mesh.r_{xy}.router")]["flits_switched"].as_u64().unwrap();
    let hot = switched("1_1");
    for other in ["0_0", "0_1", "1_0"] {
        assert!(hot > switched(other), "r_1_1 switched {hot} flits, r_{other} {}: {v}", switched(other));
    }
}

#[test]
fn issue5_line_trace_window_is_clamped_to_the_run_and_regress_list_filters() {
    // The window that used to run for ever: the trace covers the first rate's run and stops
    // with it (the last line is the run's last cycle).
    let r = run(&["noc", "--k", "4", "--line-trace", "top.mesh.r_1_1", "--window", "0..18446744073709551615", "--rates", "0.1", "--quiet"], None);
    assert!(r.out.status.success(), "{}", r.describe());
    let out = r.stdout();
    let cycles: u64 = out.lines().find(|l| l.trim_start().starts_with("0.100")).unwrap().split_whitespace().last().unwrap().parse().unwrap();
    // Bounded by counted cycles, not wall time: the run converges (3 warm-up + a few sample
    // periods of 1000 cycles, BookSim's schedule) and the trace stops with it.
    assert!((3000..=20_000).contains(&cycles), "{cycles} cycles\n{}", r.describe());
    let traced: Vec<u64> = out.lines().filter(|l| l.contains(" r_1_1 ")).map(|l| l.split_whitespace().next().unwrap().parse().unwrap()).collect();
    assert_eq!(traced.len() as u64, cycles, "one line per cycle of the run\n{}", r.describe());
    assert_eq!(*traced.last().unwrap(), cycles - 1);
    // A window past the run: every result is still printed, then a one-line error, exit 2.
    let r = run(&["noc", "--k", "4", "--line-trace", "top.mesh.r_1_*", "--window", "100000..100005", "--rates", "0.1", "--quiet"], None);
    assert_eq!(r.code(), Some(2), "{}", r.describe());
    assert!(r.stdout().contains("pkt_lat"), "{}", r.describe());
    assert!(r.stderr().contains("--window 100000..100005") && r.stderr().contains("ended at cycle"), "{}", r.describe());
    assert_eq!(r.stderr().lines().count(), 1, "{}", r.describe());
    // A window past its end is clamped, with a note.
    let r = run(&["noc", "--k", "2", "--line-trace", "top.mesh.r_0_0", "--window", "5000..1000000", "--rates", "0.1", "--quiet"], None);
    assert!(r.out.status.success(), "{}", r.describe());
    assert!(r.stderr().contains("stops there"), "{}", r.describe());
    let r = run(&["regress", "no_such_case", "--list"], None);
    assert_eq!(r.code(), Some(2), "{}", r.describe());
    let all = run(&["regress", "--list"], None);
    let first = all.stdout().lines().next().unwrap().split_whitespace().next().unwrap().to_string();
    let one = run(&["regress", &first, "--list"], None);
    assert!(one.out.status.success());
    assert!(one.stdout().lines().count() < all.stdout().lines().count() || all.stdout().lines().count() == 1, "{}", one.describe());
}

/// Item 4: the line trace is streamed while the run goes, not held until its end. Every
/// router of a 12×12 mesh for the whole run is ~870 000 lines (~60 MB of text, ~100 MB as
/// strings in memory); the process's peak resident memory stays far below the text.
#[cfg(target_os = "linux")]
#[test]
fn issue5_line_trace_is_streamed() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let mut c = bin();
    c.args(["noc", "--k", "12", "--line-trace", "top.mesh.*", "--window", "0..", "--rates", "0.1", "--quiet"]).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let pid = child.id();
    let hwm = || -> Option<u64> {
        let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let l = s.lines().find(|l| l.starts_with("VmHWM:"))?;
        l.split_whitespace().nth(1)?.parse().ok()
    };
    let (mut lines, mut bytes, mut peak_kb) = (0u64, 0u64, 0u64);
    for l in BufReader::new(child.stdout.take().unwrap()).lines() {
        let l = l.unwrap();
        lines += 1;
        bytes += l.len() as u64 + 1;
        if lines % 20_000 == 0 {
            peak_kb = peak_kb.max(hwm().unwrap_or(0));
        }
    }
    assert!(child.wait().unwrap().success());
    assert!(lines > 500_000, "{lines} lines");
    assert!(peak_kb > 0, "VmHWM not sampled");
    assert!(peak_kb * 1024 < bytes / 2, "peak RSS {peak_kb} KB for {bytes} bytes of line trace: not streamed");
}

/// Item 11: a windowed FST and VCD of the same run read back alike in `wave stats` (the FST
/// no longer has an all-x block from 0 to the window start); a waveform window entirely past
/// the run is an error (exit 2) after every output is written.
#[test]
fn issue5_windowed_fst_and_vcd_agree_and_window_past_run_is_refused() {
    let d = tmp("window_fst_vcd");
    let (vcd, fst) = (d.join("a.vcd"), d.join("a.fst"));
    for (flag, p) in [("--vcd", &vcd), ("--fst", &fst)] {
        let r = run(&["noc", "--k", "2", "--rates", "0.2", flag, p.to_str().unwrap(), "--window", "100..110", "--quiet"], None);
        assert!(r.out.status.success(), "{}", r.describe());
    }
    let (a, b) = (run(&["wave", "stats", vcd.to_str().unwrap()], None), run(&["wave", "stats", fst.to_str().unwrap()], None));
    assert!(a.out.status.success() && b.out.status.success(), "{}\n{}", a.describe(), b.describe());
    assert_eq!(a.stdout(), b.stdout());
    assert!(a.stdout().contains("time     100000 .. 110000"), "{}", a.describe());
    let diff = run(&["wave", "diff", vcd.to_str().unwrap(), fst.to_str().unwrap()], None);
    assert_eq!(diff.code(), Some(0), "{}", diff.describe());
    let late = d.join("late.fst");
    let j = d.join("late.json");
    let r = run(&["noc", "--k", "2", "--rates", "0.2", "--fst", late.to_str().unwrap(), "--window", "100000..100010", "--json", j.to_str().unwrap(), "--quiet"], None);
    assert_eq!(r.code(), Some(2), "{}", r.describe());
    assert!(r.stderr().contains("ended at cycle") && r.stderr().contains("late.fst"), "{}", r.describe());
    assert_eq!(r.stderr().lines().count(), 1, "{}", r.describe());
    assert!(j.exists() && late.exists(), "the other outputs are written");
    let r = run(&["run", "noc-sweep", "--fst", late.to_str().unwrap(), "--window", "100000..", "--quiet"], None);
    assert_eq!(r.code(), Some(2), "{}", r.describe());
    assert!(r.stderr().contains("ended at cycle"), "{}", r.describe());
}

#[test]
fn issue5_near_zero_load_is_too_few_packets_not_saturated() {
    let r = run(&["noc", "--k", "4", "--rates", "1e-6,1e-4,0.3", "--quiet"], None);
    assert!(r.out.status.success(), "{}", r.describe());
    let out = r.stdout();
    assert_eq!(out.matches("too-few-pkts").count(), 2, "{out}");
    assert!(!out.contains("SATURATED") && out.contains("no saturation"), "{out}");
}

#[test]
fn issue5_bench_ratio_only_on_reference_config() {
    let d = tmp("bench");
    let j = d.join("b.json");
    let r = run(&["bench", "noc", "--k", "2", "--rate", "0.1", "--repeat", "1", "--threads", "1", "--json", j.to_str().unwrap()], None);
    assert!(r.out.status.success(), "{}", r.describe());
    assert!(r.stdout().contains("no ratio"), "{}", r.describe());
    let v = std::fs::read_to_string(&j).unwrap();
    assert!(v.contains("\"k\": 2") && v.contains("\"rate\": 0.1") && !v.contains("vs_booksim"), "{v}");
}

#[test]
fn issue5_clock_must_give_whole_ps_period() {
    let d = tmp("clock");
    for c in ["1e12", "3"] {
        let p = write(&d, "c.toml", &format!("[mesh]\nk = 2\nclock_mhz = {c}\n"));
        let r = run(&["noc", "--config", p.to_str().unwrap(), "--quiet"], None);
        assert_refused(&r, &["mesh.clock_mhz", "whole number of ps"]);
        assert_eq!(r.code(), Some(2));
    }
}

#[test]
fn issue5_limits_name_the_right_field() {
    let r = run(&["noc", "--k", "2", "--rates", "0.1", "--packet-size", "4097", "--quiet"], None);
    assert_refused(&r, &["traffic.packet_size", "at most 4096"]);
    let r = run(&["noc", "--k", "2", "--rates", "0.1", "--link-latency", "100000", "--quiet"], None);
    assert_refused(&r, &["mesh.link_latency", "watchdog"]);
}
