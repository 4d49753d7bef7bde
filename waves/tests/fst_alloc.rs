//! Issue 19: no size field of an FST makes the reader allocate more than the file can hold.
//! This binary's allocator refuses any single allocation over 1 GiB (the process then
//! aborts, failing the test) — what a memory limit did to `wave stats` on FSTs whose
//! per-signal unpacked length said 3 GB. Every 5-byte window of a real FST's value-change
//! blocks and hierarchy block is overwritten with a huge varint in turn, and every byte of
//! its decompressed hierarchy is mutated and the hierarchy re-compressed (gzip, LZ4, LZ4
//! twice); each result must be a value or a refusal.

use std::alloc::{GlobalAlloc, Layout, System};

struct Capped;

unsafe impl GlobalAlloc for Capped {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if l.size() > 1 << 30 { std::ptr::null_mut() } else { unsafe { System.alloc(l) } }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if l.size() > 1 << 30 { std::ptr::null_mut() } else { unsafe { System.alloc_zeroed(l) } }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static A: Capped = Capped;

use waves::prelude::*;

/// A small real FST (6 signals in `top.u`, 200 cycles).
fn good_fst(d: &std::path::Path) -> Vec<u8> {
    std::fs::create_dir_all(d).unwrap();
    let good = d.join("good.fst");
    let sigs: Vec<SignalDecl> = (0..6).map(|i| SignalDecl::new(["top", "u"], format!("s{i}"), 8 + 8 * i)).collect();
    let mut w = WaveWriter::create(&good, WaveFormat::Fst, 1000, &sigs, &WaveFilter::default()).unwrap();
    for c in 0..200u64 {
        for i in 0..6 {
            if (c + i as u64) % 3 == 0 {
                w.change(c, i, c * 2654435761 >> i).unwrap();
            }
        }
    }
    w.finish(200).unwrap();
    std::fs::read(&good).unwrap()
}

/// (type, start..end) of every block.
fn blocks(bytes: &[u8]) -> Vec<(u8, std::ops::Range<usize>)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 9 <= bytes.len() {
        let len = u64::from_be_bytes(bytes[at + 1..at + 9].try_into().unwrap()) as usize;
        out.push((bytes[at], at..at + 1 + len));
        at += 1 + len;
    }
    out
}

#[test]
fn a_huge_varint_anywhere_in_an_fst_is_read_or_refused() {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("fst_alloc");
    let bytes = good_fst(&d);
    let p = d.join("mutated.fst");
    let (mut read, mut refused) = (0, 0);
    // The value-change blocks (types 1, 5, 8) and the hierarchy block (4, 6, 7) as stored.
    let spans: Vec<_> = blocks(&bytes).into_iter().filter(|(t, _)| matches!(t, 1 | 5 | 8 | 4 | 6 | 7)).map(|(_, r)| r).collect();
    assert!(spans.len() >= 2, "no value-change or hierarchy block in the FST");
    for at in spans.into_iter().flatten().filter(|&a| a + 5 <= bytes.len()) {
        let mut b = bytes.clone();
        b[at..at + 5].copy_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        std::fs::write(&p, &b).unwrap();
        match waves::stats(&p) {
            Ok(_) => read += 1,
            Err(_) => refused += 1,
        }
    }
    eprintln!("stored bytes: {read} read, {refused} refused");
    assert!(read + refused > 100 && refused > 0, "{read} read, {refused} refused");
}

/// The hierarchy block of `bytes` re-encoded from `h` as block type `ty` (4 gzip, 6 LZ4,
/// 7 LZ4 twice), as fst-reader reads them.
fn with_hierarchy(bytes: &[u8], span: &std::ops::Range<usize>, ty: u8, h: &[u8]) -> Vec<u8> {
    let data = match ty {
        4 => {
            let mut v = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];
            v.extend(miniz_oxide::deflate::compress_to_vec(h, 4));
            v
        }
        6 => lz4_flex::compress(h),
        _ => {
            let lvl1 = lz4_flex::compress(h);
            let mut v = Vec::new();
            let mut n = lvl1.len() as u64;
            loop {
                let x = (n & 0x7f) as u8;
                n >>= 7;
                if n == 0 {
                    v.push(x);
                    break;
                }
                v.push(x | 0x80);
            }
            v.extend(lz4_flex::compress(&lvl1));
            v
        }
    };
    let mut out = bytes[..span.start].to_vec();
    out.push(ty);
    out.extend((16 + data.len() as u64).to_be_bytes());
    out.extend((h.len() as u64).to_be_bytes());
    out.extend(data);
    out.extend(&bytes[span.end..]);
    out
}

#[test]
fn a_mutated_fst_hierarchy_is_read_or_refused() {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("fst_alloc_hier");
    let bytes = good_fst(&d);
    let p = d.join("mutated.fst");
    let (ty, span) = blocks(&bytes).into_iter().find(|(t, _)| matches!(t, 4 | 6 | 7)).expect("no hierarchy block");
    assert_eq!(ty, 6, "fst-writer stores the hierarchy as LZ4");
    let unc = u64::from_be_bytes(bytes[span.start + 9..span.start + 17].try_into().unwrap()) as usize;
    let h = lz4_flex::decompress(&bytes[span.start + 17..span.end], unc).unwrap();
    assert_eq!(h.len(), unc);
    // Re-encoding the intact hierarchy in each format reads back.
    for ty in [4u8, 6, 7] {
        std::fs::write(&p, with_hierarchy(&bytes, &span, ty, &h)).unwrap();
        waves::stats(&p).unwrap_or_else(|e| panic!("re-encoded hierarchy (type {ty}) refused: {e}"));
    }
    let (mut read, mut refused, mut alias_refused) = (0, 0, 0);
    let mut run = |m: &[u8]| {
        for ty in [4u8, 6, 7] {
            std::fs::write(&p, with_hierarchy(&bytes, &span, ty, m)).unwrap();
            match waves::stats(&p) {
                Ok(_) => read += 1,
                Err(e) => {
                    refused += 1;
                    if e.to_string().contains("aliases signal handle") {
                        alias_refused += 1;
                    }
                }
            }
        }
    };
    for at in 0..h.len() {
        // A huge varint over every 5-byte window (cut at the end), and each byte set to a
        // few values (the record types, a continuation bit, the largest one-byte varint).
        let mut m = h.clone();
        let end = (at + 5).min(h.len());
        m[at..end].copy_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f][..end - at]);
        run(&m);
        for v in [0x00, 0x01, 0x7f, 0x80, 0xfc, 0xfe, 0xff, h[at].wrapping_add(1)] {
            let mut m = h.clone();
            m[at] = v;
            run(&m);
        }
    }
    eprintln!("hierarchy of {} bytes: {read} read, {refused} refused ({alias_refused} for an alias handle)", h.len());
    assert!(refused > 0 && alias_refused > 0 && read > 0, "{read} read, {refused} refused, {alias_refused} alias");
}
