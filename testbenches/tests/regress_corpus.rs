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

/// Every corpus file has a test above.
#[test]
fn corpus_files_all_listed() {
    let me = include_str!("regress_corpus.rs");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("regress");
    for area in std::fs::read_dir(&root).unwrap() {
        let area = area.unwrap().path();
        for f in std::fs::read_dir(&area).unwrap() {
            let f = f.unwrap().path();
            let rel = format!("{}/{}", area.file_name().unwrap().to_str().unwrap(), f.file_name().unwrap().to_str().unwrap());
            assert!(me.contains(&format!("corpus(\"{rel}\"")), "{rel} has no #[test] line in regress_corpus.rs");
        }
    }
}
