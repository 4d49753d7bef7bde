//! `waferstream sweep` on testbenches/sweeps/smoke.toml (8 functional points): lines do not
//! depend on sharding or on the thread count (but for wall time); a rerun resumes, and a
//! last line cut short by a crash is repaired; bad grids and flags are refused before
//! anything runs, naming the path or flag.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn smoke() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testbenches/sweeps/smoke.toml")
}

fn dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn sweep(grid: &Path, out: &Path, extra: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_waferstream"))
        .env("RUST_LOG", "warn")
        .args(["sweep", grid.to_str().unwrap(), "--out", out.to_str().unwrap(), "--quiet"])
        .args(extra)
        .output()
        .unwrap();
    out
}

fn ok(o: Output) -> Output {
    assert!(o.status.success(), "{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    o
}

/// The lines of `files` by id, without their wall-time fields; each id once.
fn lines(files: &[&Path]) -> BTreeMap<u64, serde_json::Value> {
    let mut m = BTreeMap::new();
    for f in files {
        for l in std::fs::read_to_string(f).unwrap().lines() {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            let o = v.as_object_mut().unwrap();
            assert!(o.remove("wall_seconds").is_some() && o.remove("cycles_per_second").is_some(), "wall fields");
            let id = o["id"].as_u64().unwrap();
            assert!(m.insert(id, v).is_none(), "point {id} twice");
        }
    }
    m
}

#[test]
fn shard_union_equals_unsharded_run() {
    let d = dir("cli_sweep_shard");
    let all = d.join("all.jsonl");
    ok(sweep(&smoke(), &all, &["--threads", "2"]));
    let full = lines(&[&all]);
    assert_eq!(full.keys().copied().collect::<Vec<_>>(), (0..8).collect::<Vec<_>>());
    let (s1, s2, s3) = (d.join("s1.jsonl"), d.join("s2.jsonl"), d.join("s3.jsonl"));
    for (i, f) in [(1, &s1), (2, &s2), (3, &s3)] {
        ok(sweep(&smoke(), f, &["--shard", &format!("{i}/3"), "--threads", "2"]));
        assert!(lines(&[f]).keys().all(|id| id % 3 == i - 1), "shard {i}/3");
    }
    assert_eq!(lines(&[&s1, &s2, &s3]), full);
    // Every line carries the point, its config and the `package --json` result fields.
    let l = &full[&5];
    assert_eq!(l["key"], "workload.tokens=16,package={cols=2,rows=2},strategy=a3");
    assert_eq!(l["point"]["package"]["rows"], 2);
    assert_eq!(l["point"]["strategy"], "a3");
    assert_eq!(l["config"]["workload"]["strategies"], serde_json::json!(["a3"]));
    assert_eq!(l["config"]["package"]["micro_slices"], 4);
    assert_eq!((l["model"].as_str(), l["tokens"].as_u64(), l["strategy"].as_str()), (Some("functional"), Some(16), Some("a3")));
    for f in ["latency_cycles", "utilization", "roofline_cycles", "ddr_bytes", "d2d_bytes", "session", "chiplets"] {
        assert!(l.get(f).is_some(), "missing {f}");
    }
    assert!(full.values().all(|l| l["outputs_match_reference"] == true));
}

#[test]
fn thread_count_does_not_change_lines() {
    let d = dir("cli_sweep_threads");
    let (one, four) = (d.join("one.jsonl"), d.join("four.jsonl"));
    ok(sweep(&smoke(), &one, &["--threads", "1"]));
    ok(sweep(&smoke(), &four, &["--threads", "4"]));
    assert_eq!(lines(&[&one]), lines(&[&four]));
    // One thread finishes the points in grid order.
    let ids: Vec<u64> = std::fs::read_to_string(&one).unwrap().lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, (0..8).collect::<Vec<_>>());
}

#[test]
fn resume_skips_finished_points_and_repairs_a_cut_last_line() {
    let d = dir("cli_sweep_resume");
    let out = d.join("r.jsonl");
    ok(sweep(&smoke(), &out, &["--threads", "1"]));
    let full = lines(&[&out]);
    let text = std::fs::read_to_string(&out).unwrap();
    // Nothing left to run: the file is not touched.
    let o = ok(sweep(&smoke(), &out, &[]));
    assert!(String::from_utf8_lossy(&o.stdout).contains("wrote 0 line(s)"));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), text);
    // Keep 5 lines and half of the 6th (a crash mid-write): points 5..8 run again, 0..5 not.
    let ls: Vec<&str> = text.lines().collect();
    let cut = format!("{}\n{}", ls[..5].join("\n"), &ls[5][..ls[5].len() / 2]);
    std::fs::write(&out, &cut).unwrap();
    let o = ok(sweep(&smoke(), &out, &["--threads", "2"]));
    assert!(String::from_utf8_lossy(&o.stdout).contains("wrote 3 line(s)"), "{}", String::from_utf8_lossy(&o.stdout));
    let after = std::fs::read_to_string(&out).unwrap();
    assert!(after.starts_with(&format!("{}\n", ls[..5].join("\n"))), "finished lines kept as they were");
    assert_eq!(lines(&[&out]), full);
    // A cut line that is not the last one is not ours to repair.
    std::fs::write(&out, format!("{}\n{}\n", &ls[0][..10], ls[1])).unwrap();
    let o = sweep(&smoke(), &out, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("line 1 is not a JSON line"), "{}", String::from_utf8_lossy(&o.stderr));
    // Another grid's output is refused, naming the line.
    let other = d.join("other.toml");
    std::fs::write(&other, std::fs::read_to_string(smoke()).unwrap().replace("micro_slices = 4", "micro_slices = 2")).unwrap();
    std::fs::write(&out, &text).unwrap();
    let o = sweep(&other, &out, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("line 1: point 0"), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), text, "a refused resume leaves the file alone");
}

#[test]
fn bad_grids_and_flags_are_refused_before_running() {
    let d = dir("cli_sweep_bad");
    let out = d.join("never.jsonl");
    let base = std::fs::read_to_string(smoke()).unwrap();
    let refused = |grid_text: Option<&str>, extra: &[&str], needle: &str| {
        let g = d.join("g.toml");
        match grid_text {
            Some(t) => std::fs::write(&g, t).unwrap(),
            None => std::fs::copy(smoke(), &g).map(|_| ()).unwrap(),
        }
        let o = sweep(&g, &out, extra);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(needle), "`{needle}` not in {err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(!out.exists(), "nothing written");
    };
    let with = |from: &str, to: &str| base.replace(from, to);
    refused(Some(&with("\"workload.tokens\" = [8, 16]", "\"workload.tokenz\" = [8, 16]")), &[], "tokenz");
    refused(Some(&with("\"workload.tokens\" = [8, 16]", "\"package.pe.rowz\" = [8, 16]")), &[], "rowz");
    refused(Some(&with("\"workload.tokens\" = [8, 16]", "\"workload.tokens\" = []")), &[], "grid axis `workload.tokens`: empty");
    refused(Some(&with("\"workload.tokens\" = [8, 16]", "\"workload.tokens\" = [8, 0]")), &[], "point 4 (workload.tokens=0,");
    refused(Some(&with("strategy = [\"ep\", \"a3\"]", "strategy = [\"ep\", \"a9\"]")), &[], "grid axis `strategy`");
    refused(Some(&with("\"workload.tokens\" = [8, 16]", "\"package.micro_slices\" = [4, 4096]")), &[], "micro_slices");
    refused(Some(&with("[grid]", "[grud]")), &[], "no [grid]");
    refused(None, &["--shard", "0/2"], "--shard");
    refused(None, &["--shard", "3/2"], "--shard");
    refused(None, &["--shard", "a/b"], "--shard");
    refused(None, &["--threads", "0"], "--threads");
}

/// The scale-out recipes of docs/user-guide.md ("Beyond one machine"), run as written on this
/// machine: the GNU parallel line and the merge, and scripts/sweep-slurm.sh with SLURM's array
/// variables set by hand; each merged file equals an unsharded run's lines in id order. GNU
/// parallel is installed by scripts/test.sh; without it this test fails (it does not skip).
#[test]
fn gnu_parallel_and_slurm_recipes_merge_to_the_unsharded_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let d = dir("cli_sweep_scaleout");
    let bin = env!("CARGO_BIN_EXE_waferstream");
    let all = d.join("all.jsonl");
    ok(sweep(&smoke(), &all, &["--threads", "2"]));
    let unsharded = std::fs::read_to_string(&all).unwrap();
    let mut sorted: Vec<&str> = unsharded.lines().collect();
    sorted.sort_by_key(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].as_u64().unwrap());
    let no_wall = |text: &str| -> Vec<serde_json::Value> {
        text.lines()
            .map(|l| {
                let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                v.as_object_mut().unwrap().retain(|k, _| k != "wall_seconds" && k != "cycles_per_second");
                v
            })
            .collect()
    };

    // The two lines of the guide, verbatim but for the binary's path and the directory.
    let guide = std::fs::read_to_string(root.join("docs/user-guide.md")).unwrap();
    let block = guide.split("<!-- parallel-line").nth(1).expect("the guide's parallel-line block").split("```sh\n").nth(1).unwrap().split("```").next().unwrap();
    let cmds: Vec<&str> = block.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(cmds.len(), 2, "{block}");
    assert!(cmds[0].starts_with("parallel waferstream sweep") && cmds[1].contains("--merge"), "{block}");
    let has_parallel = Command::new("parallel").arg("--version").output().is_ok_and(|o| o.status.success());
    assert!(has_parallel, "GNU parallel is not installed: scripts/test.sh installs it (apt-get install parallel)");
    std::fs::create_dir_all(d.join("out/shards")).unwrap();
    std::fs::create_dir_all(d.join("testbenches/sweeps")).unwrap();
    std::fs::copy(smoke(), d.join("testbenches/sweeps/smoke.toml")).unwrap();
    for c in &cmds {
        let c = match c.strip_prefix("parallel waferstream ") {
            Some(rest) => format!("parallel {bin} {rest}"),
            None => format!("{bin} {}", c.strip_prefix("waferstream ").expect("a waferstream line")),
        };
        ok(Command::new("sh").arg("-c").arg(&c).current_dir(&d).env("RUST_LOG", "warn").output().unwrap());
    }
    let merged = std::fs::read_to_string(d.join("out/smoke.jsonl")).unwrap();
    assert_eq!(no_wall(&merged), no_wall(&sorted.join("\n")), "GNU parallel shards merged");

    // The SLURM array script, tasks 1..=3 of 3.
    for i in 1..=3 {
        ok(Command::new(root.join("scripts/sweep-slurm.sh"))
            .args([smoke().to_str().unwrap(), d.join("slurm").to_str().unwrap()])
            .env("SLURM_ARRAY_TASK_ID", i.to_string())
            .env("SLURM_ARRAY_TASK_COUNT", "3")
            .env("SLURM_CPUS_PER_TASK", "1")
            .env("WAFERSTREAM", bin)
            .env("RUST_LOG", "warn")
            .output()
            .unwrap());
    }
    let shards: Vec<String> = (1..=3).map(|i| d.join(format!("slurm/smoke-{i}of3.jsonl")).display().to_string()).collect();
    let out = d.join("slurm.jsonl");
    let mut args: Vec<&str> = vec!["sweep", smoke().to_str().unwrap().to_owned().leak(), "--merge"];
    args.extend(shards.iter().map(String::as_str));
    args.extend(["--out", out.to_str().unwrap()]);
    ok(Command::new(bin).args(&args).env("RUST_LOG", "warn").output().unwrap());
    assert_eq!(no_wall(&std::fs::read_to_string(&out).unwrap()), no_wall(&sorted.join("\n")), "SLURM shards merged");

    // A point in two shards, or a shard cut short, is refused; a missing shard exits 3.
    let twice = Command::new(bin).args(["sweep", smoke().to_str().unwrap(), "--merge", &shards[0], &shards[0], "--out", d.join("x.jsonl").to_str().unwrap()]).output().unwrap();
    assert_eq!(twice.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&twice.stderr).contains("is also in"), "{}", String::from_utf8_lossy(&twice.stderr));
    let partial = Command::new(bin).args(["sweep", smoke().to_str().unwrap(), "--merge", &shards[0], "--out", d.join("y.jsonl").to_str().unwrap()]).output().unwrap();
    assert_eq!(partial.status.code(), Some(3));
    let cut = d.join("cut.jsonl");
    let s0 = std::fs::read_to_string(&shards[0]).unwrap();
    std::fs::write(&cut, &s0[..s0.len() - 10]).unwrap();
    let refused = Command::new(bin).args(["sweep", smoke().to_str().unwrap(), "--merge", cut.to_str().unwrap(), "--out", d.join("z.jsonl").to_str().unwrap()]).output().unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("cut short"));
    assert_eq!(std::fs::read_to_string(&cut).unwrap().len(), s0.len() - 10, "a merge never repairs (writes) a shard");
}
