//! Corpus of configs that once broke something (DESIGN-NOTES S8, wellen's corpus style):
//! `testbenches/regress/<area>/issue<N>_<slug>.toml`, one line each below. Each NoC config
//! must run to completion with the stepping it names and give exactly the results of a
//! serial run without fast-forward.

use std::path::PathBuf;

use hw::noc::{run_point, NocCfg};

fn corpus(rel: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("regress").join(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let cfg: NocCfg = toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (a, ma) = run_point(&cfg, None, &mut |_| {}).expect("run as configured");
    let mut serial = cfg.clone();
    serial.sim.threads = 1;
    serial.sim.fast_forward = false;
    let (b, mb) = run_point(&serial, None, &mut |_| {}).expect("serial run");
    let key = |r: &hw::noc::PointResult| (r.avg_packet_latency.to_bits(), r.accepted_flit_rate.to_bits(), r.cycles, r.avg_hops.to_bits(), r.status);
    assert_eq!(key(&a), key(&b), "{rel}: configured stepping differs from serial");
    assert_eq!(ma.ni_totals(), mb.ni_totals(), "{rel}");
    assert_eq!(ma.router_totals(), mb.router_totals(), "{rel}");
}

#[test]
fn issue2_ff_even_jump_hang() { corpus("noc/issue2_ff_even_jump_hang.toml") }

/// More stepper threads than cores (`threads = 64` on a 2-core machine: 64 threads meeting at
/// a barrier every cycle ran 400x slower): the same results as serial, and the run never has
/// more OS threads than the machine has cores for its stepper. Counted, not timed: a watcher
/// samples the process's thread count (/proc/self/status) while the run goes; 64 stepper
/// threads would be alive for the whole run. The bound leaves room for the test harness's
/// threads and the other tests of this binary running beside it.
#[test]
fn issue5_threads_oversubscribed() {
    let threads_now = || -> usize {
        let s = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
        s.lines().find_map(|l| l.strip_prefix("Threads:")).expect("Threads: line").trim().parse().unwrap()
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // The stepper may use min(64, cores) threads; 24 more for everything else in the process.
    let bound = cores.min(64) + 24;
    let done = std::sync::atomic::AtomicBool::new(false);
    let peak = std::thread::scope(|sc| {
        let w = sc.spawn(|| {
            let mut peak = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(threads_now());
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            peak
        });
        corpus("noc/issue5_threads_oversubscribed.toml");
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        w.join().unwrap()
    });
    assert!(peak > 1, "the watcher ran");
    assert!(peak <= bound, "{peak} threads alive during a run configured with 64 stepper threads on {cores} cores");
}

/// A NoC config that once got past validation and panicked while building the mesh: now
/// refused by `validate`, naming the field.
fn refused_corpus(rel: &str, field: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("regress").join(rel);
    let cfg: NocCfg = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let e = cfg.validate().expect_err("accepted");
    assert_eq!(e.field, field, "{e}");
    assert!(hw::noc::Mesh::new(&cfg).is_err());
}

#[test]
fn issue5_link_latency_u32_wrap() { refused_corpus("noc/issue5_link_latency_u32_wrap.toml", "mesh.link_latency") }
#[test]
fn issue5_link_latency_past_link_ring() { refused_corpus("noc/issue5_link_latency_past_link_ring.toml", "mesh.link_latency") }

/// A malformed waveform (issue 5): refused with an error naming the file and the line or
/// byte offset, never a panic or an abort (the reader is contained and pre-checked).
/// The VCDs are a 2-signal dump (`vcd_check`'s test text) with line 13 broken; the FST is a
/// 2×2 `noc --fst` dump whose geometry block (offset 438) claims 6e11 signals, which made
/// fst-reader abort on the allocation before `fst_check` bounded it. `.gitignore` ignores
/// `*.vcd`/`*.fst` except under `testbenches/regress/`.
fn wave_corpus(rel: &str, needle: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("regress").join(rel);
    let e = waves::stats(&path).expect_err("malformed waveform accepted").to_string();
    assert!(e.contains(rel.rsplit('/').next().unwrap()) && e.contains(needle), "{e}");
    assert!(!e.contains('\n'), "one line: {e}");
}

#[test]
fn issue5_fst_geometry_huge_alloc() { wave_corpus("waves/issue5_fst_geometry_huge_alloc.fst", "offset") }
#[test]
fn issue5_vcd_undeclared_id() { wave_corpus("waves/issue5_vcd_undeclared_id.vcd", "line 13") }
#[test]
fn issue5_vcd_bad_value() { wave_corpus("waves/issue5_vcd_bad_value.vcd", "line 13") }
#[test]
fn issue5_vcd_time_backwards() { wave_corpus("waves/issue5_vcd_time_backwards.vcd", "backwards") }
#[test]
fn issue5_vcd_truncated() { wave_corpus("waves/issue5_vcd_truncated.vcd", "truncated") }

/// A package config that once passed validation (issue 5 fuzzing, the `pkgcfg` target's
/// oracle): refused, naming the field.
fn pkg_corpus(rel: &str, field: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("regress").join(rel);
    let text = std::fs::read_to_string(&path).unwrap();
    let c: hw::pkg::config::PkgCfg = toml::from_str(&text).unwrap();
    let r = std::panic::catch_unwind(|| c.validate());
    let e = r.unwrap_or_else(|_| panic!("{rel}: validate panicked")).expect_err("accepted");
    assert_eq!(e.field, field, "{e}");
}

#[test]
fn issue5_pkgcfg_rows_cols_overflow() { pkg_corpus("pkg/issue5_pkgcfg_rows_cols_overflow.toml", "rows") }

/// A routing trace that once loaded but could not be written back (issue 5 fuzzing, the
/// `trace` target's round-trip oracle): refused, naming the line.
fn trace_corpus(rel: &str, line: usize, needle: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("regress").join(rel);
    let e = sched::trace::load_trace(&path).expect_err("accepted");
    assert_eq!(e.line_no(), Some(line), "{e}");
    assert!(e.to_string().contains(needle), "{e}");
}

/// `"scores": [[1e40, ...]]`: 1e40 overflows f32 to infinity, written back as `null`.
#[test]
fn issue5_trace_score_overflows_f32() { trace_corpus("trace/issue5_trace_score_overflows_f32.jsonl", 2, "finite") }

/// Every corpus file has a test above.
#[test]
fn corpus_files_all_listed() {
    // CLI argument repros (`regress/cli/*.args`) are replayed by the root package's
    // tests/fuzz_cli.rs, where the binary is built.
    let me = [include_str!("regress_corpus.rs"), include_str!("../../tests/fuzz_cli.rs")].concat();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("regress");
    for area in std::fs::read_dir(&root).unwrap() {
        let area = area.unwrap().path();
        for f in std::fs::read_dir(&area).unwrap() {
            let f = f.unwrap().path();
            let rel = format!("{}/{}", area.file_name().unwrap().to_str().unwrap(), f.file_name().unwrap().to_str().unwrap());
            // The issue-19 package configs are run by hw/tests/config_runs.rs, which walks
            // `pkg/issue19_*.toml` (each file states "runs" or "refused FIELD" itself).
            if rel.starts_with("pkg/issue19_") && rel.ends_with(".toml") && include_str!("../../hw/tests/config_runs.rs").contains("starts_with(\"issue19_\")") {
                continue;
            }
            assert!(me.contains(&format!("corpus(\"{rel}\"")), "{rel} has no #[test] line in regress_corpus.rs");
        }
    }
}

/// Issue 19: waveform inputs that aborted, spun or passed silently. `wave stats`, `diff` and
/// `check` all refuse them with one line naming the file: a `$var` 4294967295 bits wide (the
/// reader allocated 4 GiB per value change), 9-byte files of block type 0 or 1 and length
/// 2^64-1 (the reader's FST detection seeked back to its start forever), and a package dump
/// with a header and no value change (`check` said "ok").
fn every_reader_corpus(rel: &str, needle: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("regress").join(rel);
    let name = rel.rsplit('/').next().unwrap();
    for e in [waves::stats(&path).map(drop), waves::diff(&path, &path).map(drop), waves::check_package(&path).map(drop)] {
        let e = e.expect_err("accepted").to_string();
        assert!(e.contains(name) && e.contains(needle) && !e.contains('\n'), "{e}");
    }
}

#[test]
fn issue19_vcd_width_4294967295() { every_reader_corpus("waves/issue19_vcd_width_4294967295.vcd", "wider than 65536 bits") }
#[test]
fn issue19_fst_9_bytes_header_len_ff() { every_reader_corpus("waves/issue19_fst_9_bytes_header_len_ff.fst", "not a VCD") }
#[test]
fn issue19_fst_9_bytes_vc_len_ff() { every_reader_corpus("waves/issue19_fst_9_bytes_vc_len_ff.fst", "not a VCD") }

/// `wave check` refuses the dump (it passed before), naming the file.
fn check_refused_corpus(rel: &str, needle: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("regress").join(rel);
    let e = waves::check_package(&path).expect_err("the checkers passed it").to_string();
    assert!(e.contains(rel.rsplit('/').next().unwrap()) && e.contains(needle), "{e}");
}

#[test]
fn issue19_vcd_header_only() { check_refused_corpus("waves/issue19_vcd_header_only.vcd", "no value changes") }
