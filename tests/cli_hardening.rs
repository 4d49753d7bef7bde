//! Issue 19 (Hardening II), the CLI's part: a multi-part run never throws away a finished
//! part (a failed strategy or point is reported with its reason beside the others' results,
//! exit 3), every output path is checked before anything simulates (per-strategy waveforms,
//! special files, the standard output, a file that is not a sweep output), and nonsense
//! input is refused with exit 2 naming the flag or field (overflows, silently ignored flags,
//! duplicates, NaN on the way to a JSON).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{json, run, s};

/// Exit code of a multi-part run in which some parts failed (docs/user-guide.md).
const PARTIAL: i32 = 3;

fn tmp(name: &str) -> PathBuf {
    common::tmp("cli_hardening", name)
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Exit 2 with `needle` in the one-line error.
fn refused(o: &Output, needle: &str) {
    let e = err(o);
    assert_eq!(o.status.code(), Some(2), "{needle}: exit {:?}; stderr: {e}", o.status.code());
    assert!(e.contains(needle), "`{needle}` not in: {e}");
    assert_eq!(e.trim().lines().count(), 1, "one line: {e}");
}

/// `waferstream ARGS` in `dir`, killed (and the test failed) if it runs longer than
/// `limit`: a run that blocks (a FIFO opened for writing) or reads forever (`/dev/zero`)
/// fails instead of hanging the suite. Not a timing assertion: the limit is far above a
/// refusal's cost.
fn run_bounded(dir: &Path, args: &[&str], limit: Duration) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_waferstream"))
        .args(args)
        .current_dir(dir)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn waferstream");
    let id = child.id();
    let t0 = Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    loop {
        if let Ok(o) = rx.try_recv() {
            return o.expect("wait");
        }
        if t0.elapsed() > limit {
            let _ = Command::new("kill").args(["-9", &id.to_string()]).status();
            panic!("no exit after {} s: {args:?}", limit.as_secs());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

const LIMIT: Duration = Duration::from_secs(120);

/// A package config whose watchdog stops A3 on the functional model at 8 tokens while EP
/// finishes (EP takes ~10 100 cycles).
fn tight(d: &Path) -> PathBuf {
    let p = d.join("mc.toml");
    std::fs::write(&p, "[sim]\nmax_cycles = 12000\n").unwrap();
    p
}

// ---- item 7: one failing strategy does not throw away the finished ones ----

#[test]
fn package_failed_strategy_is_reported_beside_the_finished_one() {
    let d = tmp("pkg_partial");
    let (mc, j) = (tight(&d), d.join("out.json"));
    let o = run(&["package", "--functional", "--tokens", "8", "--strategy", "ep,a3", "--config", s(&mc), "--json", s(&j)]);
    assert_eq!(o.status.code(), Some(PARTIAL), "{}{}", out(&o), err(&o));
    // The table has EP's row and A3's reason; stderr says which failed and why, in a line.
    let text = out(&o);
    assert!(text.lines().any(|l| l.starts_with("ep ") && l.contains("bit-exact")), "{text}");
    assert!(text.lines().any(|l| l.starts_with("a3 ") && l.contains("FAILED") && l.contains("sim.max_cycles")), "{text}");
    let e = err(&o);
    assert!(e.contains("strategy a3 failed") && e.contains("sim.max_cycles = 12000"), "{e}");
    assert!(!e.contains("blocked buffers"), "the reason, not the state dump: {e}");
    let v = json(&j);
    let rs = v["results"].as_array().unwrap();
    assert_eq!(rs.len(), 1);
    assert_eq!(rs[0]["strategy"], "ep");
    assert_eq!(rs[0]["outputs_match_reference"], true);
    let f = v["failed"].as_array().unwrap();
    assert_eq!((f.len(), f[0]["strategy"].as_str()), (1, Some("a3")));
    assert!(f[0]["reason"].as_str().unwrap().contains("sim.max_cycles"), "{f:?}");
    // A run where every strategy finishes has no `failed` key (its JSON is as before).
    let ok = d.join("ok.json");
    let o = run(&["package", "--functional", "--tokens", "8", "--strategy", "ep,a3", "--json", s(&ok), "--quiet"]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(json(&ok).get("failed").is_none());
    // One strategy that fails is the run failing: exit 2 with the reason, as before.
    let o = run(&["package", "--functional", "--tokens", "8", "--strategy", "a3", "--config", s(&mc)]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
}

#[test]
fn run_scenario_failed_strategy_keeps_the_finished_one() {
    let d = tmp("run_partial");
    let sc = d.join("sc.toml");
    std::fs::write(&sc, "[scenario]\nname = \"t\"\nkind = \"package\"\n[package.sim]\nmax_cycles = 12000\n[workload]\nmodel = \"functional\"\ntokens = 8\nstrategies = [\"ep\", \"a3\"]\nfunctional = true\n").unwrap();
    let j = d.join("r.json");
    let o = run(&["run", s(&sc), "--json", s(&j)]);
    assert_eq!(o.status.code(), Some(PARTIAL), "{}{}", out(&o), err(&o));
    let v = json(&j);
    assert_eq!(v["results"].as_array().unwrap().len(), 1);
    assert_eq!(v["failed"][0]["strategy"], "a3");
}

// ---- every output path checked first ----

#[test]
fn per_strategy_waveforms_are_checked_before_simulating() {
    let d = tmp("wave_paths");
    std::fs::create_dir_all(d.join("w-a3.vcd")).unwrap();
    let o = run(&["package", "--functional", "--tokens", "8", "--strategy", "ep,a3", "--vcd", s(&d.join("w.vcd"))]);
    refused(&o, "w-a3.vcd: is a directory");
    assert!(!d.join("w-ep.vcd").exists(), "ep was simulated before the check");
    // A special file as the base: refused, and nothing derived from it is created.
    let o = run(&["package", "--functional", "--tokens", "8", "--strategy", "ep,a3", "--vcd", "/dev/full"]);
    refused(&o, "--vcd: cannot write /dev/full: not a regular file");
    assert!(!Path::new("/dev/full-ep").exists());
    // /dev/null as the base of several files would put them in /dev.
    let o = run(&["package", "--functional", "--tokens", "8", "--strategy", "ep,a3", "--vcd", "/dev/null"]);
    refused(&o, "--vcd /dev/null: 2 parts write NAME-<part> files beside it");
    // The same for `run`'s package scenario.
    let sc = d.join("sc.toml");
    std::fs::write(&sc, "[scenario]\nname = \"t\"\nkind = \"package\"\n[workload]\nmodel = \"functional\"\ntokens = 8\nstrategies = [\"ep\", \"a3\"]\n").unwrap();
    let o = run(&["run", s(&sc), "--vcd", s(&d.join("w.vcd"))]);
    refused(&o, "w-a3.vcd: is a directory");
}

#[test]
fn special_files_are_refused_as_outputs() {
    let d = tmp("special");
    for dev in ["/dev/full", "/dev/zero"] {
        let o = run_bounded(&d, &["package", "--functional", "--tokens", "8", "--strategy", "ep", "--json", dev], LIMIT);
        refused(&o, &format!("--json: cannot write {dev}: not a regular file"));
        // Before: the resume read /dev/zero without end (~130 MB/s until out of memory).
        let o = run_bounded(&d, &["sweep", s(&smoke()), "--out", dev, "--quiet"], LIMIT);
        refused(&o, &format!("--out: cannot write {dev}: not a regular file"));
    }
    // A FIFO: opening it for writing would block until a reader came.
    let fifo = d.join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().expect("mkfifo").success());
    let o = run_bounded(&d, &["package", "--functional", "--tokens", "8", "--strategy", "ep", "--json", s(&fifo)], LIMIT);
    refused(&o, "not a regular file");
    // /dev/null stays an output that discards, also when stdout goes there too.
    let o = run(&["package", "--functional", "--tokens", "8", "--strategy", "ep", "--json", "/dev/null", "--quiet"]);
    assert!(o.status.success(), "{}", err(&o));
    let st = Command::new(env!("CARGO_BIN_EXE_waferstream"))
        .args(["package", "--functional", "--tokens", "8", "--strategy", "ep", "--json", "/dev/null"])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn an_output_under_a_file_names_the_file() {
    let d = tmp("parent_file");
    let f = d.join("file");
    std::fs::write(&f, "x").unwrap();
    let o = run(&["package", "--functional", "--tokens", "8", "--strategy", "ep", "--json", s(&f.join("sub/x.json"))]);
    refused(&o, &format!("{} is a file, not a directory", f.display()));
    assert!(!err(&o).contains("File exists"), "{}", err(&o));
}

// ---- sweep ----

fn smoke() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testbenches/sweeps/smoke.toml")
}

const GRID_HEAD: &str = "[scenario]\nname = \"t\"\nkind = \"package\"\n[workload]\nmodel = \"functional\"\ntokens = 8\nstrategies = [\"ep\"]\n";

#[test]
fn sweep_never_overwrites_a_file_that_is_not_a_sweep_output() {
    let d = tmp("sweep_foreign");
    for (name, text) in [("notes.txt", "my notes\n"), ("line.txt", "my notes"), ("other.json", "{\"a\": 1}\n")] {
        let f = d.join(name);
        std::fs::write(&f, text).unwrap();
        let o = sweep(&smoke(), &f, &[]);
        refused(&o, "not a sweep output");
        assert_eq!(std::fs::read_to_string(&f).unwrap(), text, "{name} changed");
    }
    // The start of a sweep line cut short by a crash is still repaired (tests/cli_sweep.rs).
    let f = d.join("cut.jsonl");
    std::fs::write(&f, "{\"id\":3,\"key\":\"work").unwrap();
    let o = sweep(&smoke(), &f, &["--shard", "4/8"]);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(std::fs::read_to_string(&f).unwrap().lines().count(), 1);
}

fn sweep(grid: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["sweep", s(grid), "--out", s(out), "--quiet"];
    args.extend(extra);
    run(&args)
}

#[test]
fn sweep_to_stdout_is_refused() {
    // The test's stdout is a pipe: the summary would be mixed into the JSON lines.
    let o = run(&["sweep", s(&smoke()), "--out", "/dev/stdout", "--quiet"]);
    refused(&o, "--out: cannot write /dev/stdout");
}

#[test]
fn sweep_list_generates_nothing_and_out_is_checked_before_workloads() {
    let d = tmp("sweep_list");
    // Point 1's workload fails only when generated (256 + 2 experts overflow the IO die's
    // EIT): `--list` does not generate, so it lists; a run checks `--out` before generating.
    let g = d.join("g.toml");
    std::fs::write(&g, format!("{GRID_HEAD}[grid]\n\"workload.model\" = [\"functional\", \"deepseek-v3\"]\n")).unwrap();
    let o = run(&["sweep", s(&g), "--list"]);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(out(&o).lines().count(), 2, "{}", out(&o));
    let o = run(&["sweep", s(&g), "--out", "/dev/full"]);
    refused(&o, "--out");
    let o = run(&["sweep", s(&g), "--out", s(&d.join("s.jsonl"))]);
    refused(&o, "EIT");
    assert!(!d.join("s.jsonl").exists());
    // `--list` writes nothing: an output flag with it would be ignored.
    let o = run(&["sweep", s(&g), "--list", "--out", s(&d.join("x.jsonl"))]);
    refused(&o, "--out: --list only prints the points");
    refused(&run(&["sweep", s(&g), "--list", "--threads", "2"]), "--threads: --list only prints the points");
}

#[test]
fn sweep_failed_point_prints_its_reason_and_the_rest_is_written() {
    let d = tmp("sweep_partial");
    let g = d.join("g.toml");
    std::fs::write(&g, format!("{GRID_HEAD}[package.sim]\nmax_cycles = 12000\n[grid]\nstrategy = [\"ep\", \"a3\"]\n")).unwrap();
    let f = d.join("s.jsonl");
    let o = sweep(&g, &f, &[]);
    assert_eq!(o.status.code(), Some(PARTIAL), "{}", err(&o));
    let e = err(&o);
    assert!(e.contains("point 1 (strategy=a3) failed: a3: the layer did not finish within sim.max_cycles = 12000"), "{e}");
    assert!(!e.contains("blocked buffers") && !e.contains("state then"), "a state dump: {e}");
    assert!(e.trim().lines().count() <= 2, "{e}");
    let lines = std::fs::read_to_string(&f).unwrap();
    assert_eq!(lines.lines().count(), 1);
    assert!(lines.contains("\"strategy\":\"ep\""));
}

#[test]
fn sweep_duplicates_are_refused() {
    let d = tmp("sweep_dups");
    // The same point from two blocks.
    let g = d.join("g.toml");
    std::fs::write(&g, format!("{GRID_HEAD}[[grid]]\n\"workload.tokens\" = [8, 16]\n[[grid]]\n\"workload.tokens\" = [16]\n")).unwrap();
    let o = run(&["sweep", s(&g), "--list"]);
    refused(&o, "point 2 (workload.tokens=16) runs the same config as point 1");
    // An axis value equal to the base's default and the base itself: the same config.
    std::fs::write(&g, format!("{GRID_HEAD}[[grid]]\n\"workload.tokens\" = [8]\n[[grid]]\n\"workload.seed\" = [1]\n")).unwrap();
    refused(&run(&["sweep", s(&g), "--list"]), "runs the same config as point 0");
    // A point twice in the output.
    let f = d.join("s.jsonl");
    let o = sweep(&smoke(), &f, &["--shard", "1/8"]);
    assert!(o.status.success(), "{}", err(&o));
    let line = std::fs::read_to_string(&f).unwrap();
    std::fs::write(&f, format!("{line}{line}")).unwrap();
    let o = sweep(&smoke(), &f, &[]);
    refused(&o, "line 2: point 0");
    assert!(err(&o).contains("also at line 1"), "{}", err(&o));
}

// ---- nonsense refused, naming the flag ----

#[test]
fn duplicates_in_lists_are_refused() {
    refused(&run(&["package", "--functional", "--tokens", "8", "--strategy", "ep,ep"]), "--strategy: ep given twice");
    refused(&run(&["package", "--functional", "--tokens", "8", "--strategy", "a3,fse-dp"]), "--strategy: a3 given twice");
    refused(&run(&["balance", "--balancer", "none,none", "--iters", "1", "--tokens-per-group", "8"]), "--balancer: none given twice");
}

#[test]
fn overflowing_inputs_are_refused_naming_the_flag() {
    let o = run(&["wafer", "--model", "qwen3-235b", "--wafer", "65536x1", "--wafers", "65536x1", "--quiet"]);
    refused(&o, "--wafer 65536x1 with --wafers 65536x1: the die grid is 4294967296x1");
    assert!(!err(&o).contains("0 dies"));
    let o = run(&["package", "--functional", "--tokens", "8", "--strategy", "ep", "--layers", "0..4294967297"]);
    refused(&o, "--layers: 4294967297 layers to generate");
    // item 13: loads whose sum overflows f64 gave a NaN imbalance (`null` in the JSON).
    let d = tmp("eplb_overflow");
    let (w, j) = (d.join("w.json"), d.join("p.json"));
    std::fs::write(&w, "[[1e308, 1e308, 1e308, 1e308]]").unwrap();
    let o = run(&["eplb", "--weights", s(&w), "--replicas", "4", "--devices", "2", "--json", s(&j)]);
    refused(&o, "--weights");
    assert!(err(&o).contains("layer 0: the loads sum past"), "{}", err(&o));
    assert!(!j.exists());
    // Large but summable loads are fine, and every number in the JSON is a number.
    std::fs::write(&w, "[[1e307, 2e307, 3e307, 1e307]]").unwrap();
    let o = run(&["eplb", "--weights", s(&w), "--replicas", "4", "--devices", "2", "--json", s(&j), "--quiet"]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(!std::fs::read_to_string(&j).unwrap().contains("null"));
}

#[test]
fn semmoe_mesh_batches_zero_is_refused() {
    // item 12: 0 simulated nothing and reported every mesh metric as 0 (wall_seconds -0.0).
    refused(&run(&["semmoe", "--mesh-batches", "0", "--iters", "4", "--tokens-per-iter", "16"]), "--mesh-batches: 0 outside 1..=64");
}

fn trace(d: &Path) -> PathBuf {
    let t = d.join("t.jsonl");
    let h = r#"{"format": "waferstream-trace/1", "model": "t", "experts": 8, "top_k": 2, "layers": 2}"#;
    std::fs::write(&t, format!("{h}\n{{\"iter\": 0, \"req\": 0, \"pos\": 0, \"layers\": [[0,1],[2,3]]}}\n{{\"iter\": 1, \"req\": 0, \"pos\": 1, \"layers\": [[4,5],[6,7]]}}\n")).unwrap();
    t
}

#[test]
fn flags_without_effect_are_refused() {
    let d = tmp("no_effect");
    let t = trace(&d);
    let base = ["package", "--trace", s(&t), "--model", "functional", "--strategy", "ep", "--quiet"];
    let with = |extra: &[&str]| run(&[&base[..], extra].concat());
    assert!(with(&[]).status.success());
    refused(&with(&["--skew", "3"]), "--skew: the trace decides the routing");
    refused(&with(&["--seed", "5"]), "--seed: with --trace the seed only drives");
    // With functional data the seed draws the weights and tokens: accepted.
    let o = with(&["--seed", "5", "--functional"]);
    assert!(o.status.success(), "{}", err(&o));
    let o = run(&["semmoe", "--trace", s(&t), "--layers", "2"]);
    refused(&o, "--layers: the trace decides the layers");
    // balance: more warm-up iterations than iterations.
    let o = run(&["balance", "--iters", "3", "--warmup", "5", "--tokens-per-group", "8", "--balancer", "none"]);
    refused(&o, "--warmup: 5 warm-up iterations of --iters 3");
}

#[test]
fn package_quiet_prints_nothing() {
    let o = run(&["package", "--functional", "--tokens", "8", "--strategy", "ep", "--quiet"]);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(out(&o), "", "--quiet printed");
}

// ---- item 14: tokens mean the same in run, package and sweep ----

#[test]
fn tokens_count_every_iteration_in_run_package_and_sweep() {
    let d = tmp("tokens");
    let sc = d.join("sc.toml");
    std::fs::write(&sc, format!("{GRID_HEAD}iters = 3\n")).unwrap();
    let rj = d.join("r.json");
    let o = run(&["run", s(&sc), "--json", s(&rj), "--quiet"]);
    assert!(o.status.success(), "{}", err(&o));
    let pj = d.join("p.json");
    let o = run(&["package", "--functional", "--tokens", "8", "--iters", "0..3", "--strategy", "ep", "--json", s(&pj), "--quiet"]);
    assert!(o.status.success(), "{}", err(&o));
    let g = d.join("g.toml");
    std::fs::write(&g, format!("{GRID_HEAD}iters = 3\n[grid]\nstrategy = [\"ep\"]\n")).unwrap();
    let sj = d.join("s.jsonl");
    assert!(sweep(&g, &sj, &[]).status.success());
    let line: serde_json::Value = serde_json::from_str(std::fs::read_to_string(&sj).unwrap().lines().next().unwrap()).unwrap();
    let (r, p) = (json(&rj), json(&pj));
    assert_eq!((r["tokens"].as_u64(), p["tokens"].as_u64(), line["tokens"].as_u64()), (Some(24), Some(24), Some(24)));
    assert_eq!((r["results"][0]["session"]["iterations"].as_u64(), p["results"][0]["session"]["iterations"].as_u64()), (Some(3), Some(3)));
    assert_eq!(line["config"]["workload"]["iters"], 3);
    // The same run, the same latency.
    assert_eq!(r["results"][0]["latency_cycles"], p["results"][0]["latency_cycles"]);
}

// ---- item 11: balance says which waveform it wrote ----

#[test]
fn balance_does_not_claim_waveforms_it_did_not_write() {
    let d = tmp("balance_waves");
    let v = d.join("bv.vcd");
    // One iteration: no later iteration can carry a migration, so the wafer waveform has
    // nothing to show; a huge alpha keeps the trigger from firing, so neither file.
    let o = run(&["balance", "--balancer", "topo-ni", "--iters", "1", "--tokens-per-group", "8", "--alpha", "1e9", "--vcd", s(&v)]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(!out(&o).contains("wrote"), "{}", out(&o));
    assert!(!v.exists() && !d.join("bv-decision.vcd").exists());
    let e = err(&o);
    assert!(e.contains("bv.vcd not written") && e.contains("bv-decision.vcd not written"), "{e}");
    // The decision file beside the waveform is checked before the run too.
    std::fs::create_dir_all(d.join("bv-decision.vcd")).unwrap();
    let o = run(&["balance", "--balancer", "topo-ni", "--iters", "1", "--tokens-per-group", "8", "--vcd", s(&v)]);
    refused(&o, "bv-decision.vcd: is a directory");
}

#[test]
fn wafer_checks_every_mapping_waveform_and_refuses_duplicates() {
    let d = tmp("wafer_paths");
    std::fs::create_dir_all(d.join("w-er.vcd")).unwrap();
    let base = ["wafer", "--model", "qwen3-235b", "--wafer", "2x2", "--tp", "2", "--tokens-per-group", "8", "--micro-batches", "2", "--quiet"];
    let with = |extra: &[&str]| run(&[&base[..], extra].concat());
    let o = with(&["--mapping", "baseline,er", "--vcd", s(&d.join("w.vcd"))]);
    refused(&o, "w-er.vcd: is a directory");
    assert!(!d.join("w-baseline.vcd").exists(), "baseline was simulated before the check");
    refused(&with(&["--mapping", "er,er"]), "--mapping: er given twice");
    let t = trace(&d);
    refused(&with(&["--trace", s(&t), "--skew", "1"]), "--skew: the trace decides the routing");
}

#[test]
fn pe_json_is_checked_by_the_one_checker() {
    let o = run(&["pe", "--m", "4", "--k", "4", "--n", "4", "--json", "/dev/full"]);
    refused(&o, "--json: cannot write /dev/full: not a regular file");
}
