//! Structural pre-check of FST files. The FST reader (fst-reader, via wellen) trusts the
//! length fields of a file and allocates what they say: a corrupted length asks for
//! terabytes and the allocation failure aborts the process, which no `catch_unwind` can
//! contain. So every block is walked first: a block's length must fit in the file, and
//! every length that sizes an allocation is bounded by what its compressed bytes can hold
//! (zlib/LZ4 expand at most ~1 KiB per byte; we allow [`MAX_RATIO`]).

use std::path::Path;

use crate::{Result, WaveError};

/// Largest expansion of compressed bytes accepted (zlib's maximum is 1032:1).
const MAX_RATIO: u64 = 1100;
/// Slack for small blocks.
const SLACK: u64 = 1 << 20;

/// True when the file starts like an FST (header block: type 0, length 329).
pub fn is_fst(bytes: &[u8]) -> bool {
    bytes.len() >= 9 && bytes[0] == 0 && u64::from_be_bytes(bytes[1..9].try_into().unwrap()) == 329
}

pub fn check_file(path: &Path, bytes: &[u8]) -> Result<()> {
    check_bytes(bytes).map_err(|(off, what)| WaveError::Parse { path: path.to_path_buf(), what: format!("offset {off}: {what}") })
}

fn be(b: &[u8], at: usize) -> Option<u64> {
    b.get(at..at + 8).map(|s| u64::from_be_bytes(s.try_into().unwrap()))
}

fn varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        let x = *b.get(*at)?;
        *at += 1;
        v |= u64::from(x & 0x7f) << shift;
        if x & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Walks the blocks; the error is (byte offset, reason).
pub fn check_bytes(b: &[u8]) -> std::result::Result<(), (usize, String)> {
    let n = b.len() as u64;
    let mut at = 0usize;
    let bound = |compressed: u64| compressed.saturating_mul(MAX_RATIO).saturating_add(SLACK);
    while at < b.len() {
        let ty = b[at];
        let len = be(b, at + 1).ok_or((at, "truncated block header".to_string()))?;
        if len < 8 || len > n - at as u64 - 1 {
            return Err((at, format!("block type {ty} length {len} does not fit in the file ({n} bytes)")));
        }
        let body = at + 9; // after type and length
        match ty {
            // Geometry: uncompressed length, max handle; one varint (>= 1 byte) per handle.
            3 => {
                let unc = be(b, body).ok_or((at, "truncated geometry block".to_string()))?;
                let handles = be(b, body + 8).ok_or((at, "truncated geometry block".to_string()))?;
                if unc > bound(len) || handles > unc.max(len) {
                    return Err((at, format!("geometry block claims {unc} bytes / {handles} signals from {len} bytes")));
                }
            }
            // Hierarchy (gzip / LZ4 / LZ4 twice): uncompressed length first.
            4 | 6 | 7 => {
                let unc = be(b, body).ok_or((at, "truncated hierarchy block".to_string()))?;
                if unc > bound(bound(len)) {
                    return Err((at, format!("hierarchy block claims {unc} bytes from {len} bytes")));
                }
            }
            // Value-change blocks: start, end, memory for traversal, then the bits section.
            1 | 5 | 8 => {
                let mem = be(b, body + 16).ok_or((at, "truncated value-change block".to_string()))?;
                if mem > bound(len) {
                    return Err((at, format!("value-change block claims {mem} bytes of memory from {len} bytes")));
                }
                let mut p = body + 24;
                let bits_unc = varint(b, &mut p).ok_or((p, "bad varint".to_string()))?;
                let bits_c = varint(b, &mut p).ok_or((p, "bad varint".to_string()))?;
                let bits_count = varint(b, &mut p).ok_or((p, "bad varint".to_string()))?;
                if bits_unc > bound(len) || bits_c > len || bits_count > bound(len).saturating_mul(8) {
                    return Err((at, format!("value-change block bit section ({bits_unc}/{bits_c}/{bits_count}) exceeds its {len} bytes")));
                }
            }
            _ => {}
        }
        at += 1 + len as usize;
    }
    Ok(())
}
