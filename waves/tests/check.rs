//! The package waveform checkers on hand-made dumps: a clean one passes every checker, and
//! each violation is caught with the signal and time named.

use waves::prelude::*;
use waves::CheckResult;

fn sig(scope: &str, name: &str, width: u32) -> SignalDecl {
    SignalDecl::new(scope.split('.'), name, width)
}

/// Two chiplets; expert 3 with 2 micro-slices visits both. `extra` adds a violation.
fn dump(path: &std::path::Path, extra: &str) {
    let mut sigs = Vec::new();
    for c in ["top.pkg.c_0_0", "top.pkg.c_0_1"] {
        sigs.push(sig(&format!("{c}.ring"), "occ", 3));
        for s in 0..2 {
            sigs.push(sig(&format!("{c}.ring.slot{s}"), "live", 1));
        }
        sigs.push(sig(&format!("{c}.ctrl"), "pe_starts", 16));
        sigs.push(sig(&format!("{c}.ctrl"), "pe_expert", 16));
        sigs.push(sig(&format!("{c}.ctrl"), "pe_k", 16));
    }
    sigs.push(sig("top.pkg.iodie", "icv", 2));
    sigs.push(sig("top.pkg.iodie", "grants", 16));
    sigs.push(sig("top.pkg.iodie", "grant_start", 4));
    let mut ch: Vec<(u64, usize, u64)> = Vec::new();
    // ids: c0: occ 0, slot 1,2, starts 3, expert 4, k 5; c1: 6..11; icv 12, grants 13, start 14
    ch.push((0, 12, 0b11));
    ch.push((1, 12, 0b00));
    ch.push((1, 13, 1));
    ch.push((1, 14, 0));
    for (c, base) in [(0u64, 0usize), (1, 6)] {
        ch.push((2 + c, base, 2));
        ch.push((3 + c, base + 3, 1));
        ch.push((3 + c, base + 4, 3));
        ch.push((3 + c, base + 5, c));
        ch.push((9 + c, base + 3, 2));
        ch.push((9 + c, base + 5, 1 - c));
    }
    match extra {
        "overfull" => ch.push((20, 0, 3)),
        "twice" => {
            ch.push((20, 3, 3));
            ch.push((20, 5, 0));
        }
        "busy_grant" => {
            ch.push((30, 13, 2));
            ch.push((30, 14, 1));
        }
        _ => {}
    }
    ch.sort_by_key(|&(t, i, _)| (t, i));
    if extra == "renamed_iodie" {
        for s in sigs.iter_mut().filter(|s| s.scope.last().is_some_and(|l| l == "iodie")) {
            *s.scope.last_mut().unwrap() = "io".into();
        }
    }
    let fmt = WaveFormat::from_path(path).unwrap();
    let mut w = WaveWriter::create(path, fmt, 1250, &sigs, &WaveFilter::default()).unwrap();
    for (t, i, v) in ch {
        w.change(t, i, v).unwrap();
    }
    w.finish(40).unwrap();
}

fn run(extra: &str) -> Vec<CheckResult> {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("check");
    std::fs::create_dir_all(&d).unwrap();
    let p = d.join(format!("pkg_{extra}.vcd"));
    dump(&p, extra);
    waves::check_package(&p).unwrap()
}

#[test]
fn clean_dump_passes_every_checker() {
    let r = run("clean");
    assert_eq!(r.len(), 3, "{r:?}");
    assert!(r.iter().all(|c| c.ok), "{r:?}");
}

#[test]
fn each_violation_is_caught() {
    let failed = |extra: &str| run(extra).into_iter().filter(|c| !c.ok).map(|c| (c.name, c.detail)).collect::<Vec<_>>();
    let f = failed("overfull");
    assert_eq!(f[0].0, "ring_capacity", "{f:?}");
    assert!(f[0].1.contains("c_0_0.ring.occ = 3"), "{f:?}");
    let f = failed("twice");
    assert_eq!(f[0].0, "trajectory_visits", "{f:?}");
    let f = failed("busy_grant");
    assert_eq!(f[0].0, "icv_grants_idle", "{f:?}");
    assert!(f[0].1.contains("chiplet 1"), "{f:?}");
}

/// Issue 19: a dump without any value change proves nothing and is refused; a checker whose
/// signals are absent (the IO-die scope renamed) is reported as skipped, not dropped.
#[test]
fn a_header_only_dump_is_refused_and_an_absent_checker_is_named() {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("check");
    std::fs::create_dir_all(&d).unwrap();
    let full = d.join("pkg_clean.vcd");
    dump(&full, "clean");
    let text = std::fs::read_to_string(&full).unwrap();
    let end = text.find("$enddefinitions $end\n").unwrap() + "$enddefinitions $end\n".len();
    let header = d.join("pkg_header_only.vcd");
    std::fs::write(&header, &text[..end]).unwrap();
    let e = waves::check_package(&header).unwrap_err().to_string();
    assert!(e.contains("no value changes") && e.contains("pkg_header_only.vcd"), "{e}");

    let p = d.join("pkg_renamed_iodie.vcd");
    dump(&p, "renamed_iodie");
    let r = waves::check_dump(&p).unwrap();
    assert_eq!(r.results.iter().map(|c| c.name).collect::<Vec<_>>(), ["ring_capacity", "trajectory_visits"], "{r:?}");
    assert!(r.results.iter().all(|c| c.ok), "{r:?}");
    assert_eq!(r.skipped.len(), 1, "{r:?}");
    assert_eq!(r.skipped[0].0, "icv_grants_idle");
    assert!(r.skipped[0].1.contains("top.pkg.iodie.icv"), "{r:?}");
    // The clean dump skips nothing (and names no wafer checker).
    let r = waves::check_dump(&full).unwrap();
    assert!(r.skipped.is_empty(), "{r:?}");
}

/// Issue 19: `check` loaded the signals of a corrupt FST outside the reader's panic
/// containment, so mutations that `stats` refused made `check` panic. Every single-byte
/// mutation of a package FST is now accepted or refused, and some are refused from a
/// contained reader panic (the path that used to escape).
#[test]
fn check_contains_reader_panics_on_corrupt_fsts() {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("check");
    std::fs::create_dir_all(&d).unwrap();
    let good = d.join("pkg_clean.fst");
    dump(&good, "clean");
    let r = waves::check_package(&good).unwrap();
    assert!(r.len() == 3 && r.iter().all(|c| c.ok), "{r:?}");
    let bytes = std::fs::read(&good).unwrap();
    let p = d.join("pkg_mutated.fst");
    let mut contained = 0;
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..bytes.len() {
        let mut b = bytes.clone();
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        b[i] ^= (seed as u8) | 1;
        std::fs::write(&p, &b).unwrap();
        if let Err(e) = waves::check_package(&p) {
            contained += e.to_string().contains("reader failed") as usize;
        }
    }
    assert!(contained > 0, "no mutation reached a reader panic: the test no longer covers the containment");
}
