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
    let mut w = WaveWriter::create(path, WaveFormat::Vcd, 1250, &sigs, &WaveFilter::default()).unwrap();
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
