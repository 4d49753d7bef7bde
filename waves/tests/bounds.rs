//! Issue 19: the waveform readers bound every size a file declares (signal width, scope
//! depth, the bits its value changes expand to) and every format detection, and every call
//! into the reader — the checkers' signal loads included — is inside the panic containment.
//! Each case here aborted, spun, panicked or passed silently before.

use std::path::{Path, PathBuf};

use waves::prelude::*;

fn dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bounds");
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn file(name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir().join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// stats, diff (either side), check and list_scopes all refuse `p` with `what` in the message.
fn refused_everywhere(p: &Path, what: &str) {
    // One valid partner per case: tests run in parallel.
    let ok = file(&format!("ok-{}.vcd", p.file_name().unwrap().to_string_lossy()), OK.as_bytes());
    let errs = [
        waves::stats(p).map(drop).unwrap_err(),
        waves::diff(p, &ok).map(drop).unwrap_err(),
        waves::diff(&ok, p).map(drop).unwrap_err(),
        waves::check_package(p).map(drop).unwrap_err(),
        waves::list_scopes(p).map(drop).unwrap_err(),
    ];
    for e in errs {
        let m = e.to_string();
        assert!(m.contains(what) && m.contains(&p.display().to_string()), "{}: {m}", p.display());
    }
}

const OK: &str = "$timescale 1ps $end\n$scope module top $end\n$var wire 1 ! a $end\n$upscope $end\n$enddefinitions $end\n#0\n0!\n#10\n1!\n";

#[test]
fn a_signal_wider_than_64_kibit_is_refused_before_the_reader_allocates_it() {
    // 4294967295 bits: the reader allocated 4 GiB per value change and aborted.
    let p = file("huge_width.vcd", b"$timescale 1ps $end\n$scope module top $end\n$var wire 4294967295 ! s $end\n$upscope $end\n$enddefinitions $end\n#0\n1!\n#1\n0!\n");
    refused_everywhere(&p, "line 3: $var size 4294967295 is wider than 65536 bits");
    // 65536 bits is the limit and reads.
    let p = file("wide_ok.vcd", b"$timescale 1ps $end\n$scope module top $end\n$var wire 65536 ! s $end\n$upscope $end\n$enddefinitions $end\n#0\nb1 !\n#1\nb0 !\n");
    assert_eq!(waves::stats(&p).unwrap().changes, 2);
}

#[test]
fn value_changes_are_bounded_by_the_file_size() {
    // Each 4-byte `b1 !` line is stored as 65536 bits: 2^13 of them (32 KiB of text) expand
    // to 2^29 bits, far beyond 256 bits per byte of the file.
    let mut t = String::from("$timescale 1ps $end\n$scope module top $end\n$var wire 65536 ! s $end\n$upscope $end\n$enddefinitions $end\n");
    for i in 0..(1 << 13) {
        t.push_str(&format!("#{i}\nb1 !\n"));
    }
    let p = file("wide_many.vcd", t.as_bytes());
    refused_everywhere(&p, "value changes expand to more than");
}

#[test]
fn scopes_nested_too_deep_are_refused() {
    let mut t = String::from("$timescale 1ps $end\n");
    for i in 0..300 {
        t.push_str(&format!("$scope module s{i} $end\n"));
    }
    t.push_str("$var wire 1 ! a $end\n");
    t.push_str(&"$upscope $end\n".repeat(300));
    t.push_str("$enddefinitions $end\n#0\n1!\n");
    let p = file("deep.vcd", t.as_bytes());
    refused_everywhere(&p, "line 258: scopes nested more than 256 deep");
}

#[test]
fn a_file_the_reader_would_walk_as_fst_must_be_an_fst() {
    // 9 bytes: block type 0 or 1, length 2^64-1. The reader's format detection seeked back to
    // where it started, forever; the pre-check only looked at files starting like an FST.
    for (name, first) in [("h0.fst", 0u8), ("h1.fst", 1), ("h1.vcd", 1)] {
        let mut b = vec![first];
        b.extend([0xff; 8]);
        let p = file(name, &b);
        refused_everywhere(&p, "not a VCD (no `$` command at the start) nor an FST");
    }
    refused_everywhere(&file("empty.vcd", b""), "empty file");
    refused_everywhere(&file("blank.fst", b" \n\t"), "empty file");
    refused_everywhere(&file("ghw.fst", b"GHDLwave\n\x10\x00"), "GHW dumps are not supported");
}

/// A real FST from the writer, two blocks long.
fn small_fst(name: &str) -> PathBuf {
    let p = dir().join(name);
    let sigs = [SignalDecl::new(["top"], "a", 8)];
    let mut w = WaveWriter::create(&p, WaveFormat::Fst, 1000, &sigs, &WaveFilter::default()).unwrap();
    for c in 0..20 {
        w.change(c, 0, c * 7).unwrap();
    }
    w.finish(20).unwrap();
    p
}

#[test]
fn a_gzip_wrapped_or_unknown_fst_block_is_refused() {
    let good = std::fs::read(small_fst("plain.fst")).unwrap();
    // A gzip wrapper block (type 254) after the header: the reader inflates such a file into
    // memory to whatever length the wrapper claims.
    let mut b = good[..1 + 329].to_vec();
    b.push(254);
    b.extend(16u64.to_be_bytes());
    b.extend(u64::MAX.to_be_bytes());
    b.extend([0; 8]);
    refused_everywhere(&file("gzip.fst", &b), "offset 330: gzip-wrapped FST");
    b[330] = 77;
    refused_everywhere(&file("unknown.fst", &b), "offset 330: unknown block type 77");
}

#[test]
fn an_fst_signal_wider_than_64_kibit_is_refused_from_its_header() {
    use fst_writer::{FstFileType, FstInfo, FstSignalType, FstVarDirection, FstVarType};
    let p = dir().join("wide.fst");
    let info = FstInfo { start_time: 0, timescale_exponent: -12, version: "t".into(), date: String::new(), file_type: FstFileType::Verilog };
    let mut h = fst_writer::open_fst(&p, &info).unwrap();
    h.scope("top", "", fst_writer::FstScopeType::Module).unwrap();
    let id = h.var("s", FstSignalType::bit_vec(70_000), FstVarType::Wire, FstVarDirection::Implicit, None).unwrap();
    h.up_scope().unwrap();
    let mut w = h.finish().unwrap();
    w.time_change(0).unwrap();
    w.signal_change(id, &vec![b'1'; 70_000]).unwrap();
    w.finish().unwrap();
    refused_everywhere(&p, "signal top.s is 70000 bits wide (allowed 1..=65536)");
}
