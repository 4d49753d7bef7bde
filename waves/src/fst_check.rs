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
/// LZ4's maximum expansion (a run costs one extra byte per 255 bytes of output).
const LZ4_RATIO: u64 = 256;
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
    // (offset, signal count) of each value-change block, and the geometry's signal count.
    let mut vc_handles: Vec<(usize, u64)> = Vec::new();
    let mut geometry_handles: Option<u64> = None;
    // (offset, signal handles declared) of each hierarchy block.
    let mut hier_handles: Vec<(usize, u64)> = Vec::new();
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
                geometry_handles = Some(handles);
            }
            // Hierarchy (gzip / LZ4 / LZ4 twice): uncompressed length first. Each format's
            // own maximum ratio: the reader allocates the claimed length up front.
            4 | 6 | 7 => {
                let unc = be(b, body).ok_or((at, "truncated hierarchy block".to_string()))?;
                let max = match ty {
                    4 => bound(len),
                    6 => len.saturating_mul(LZ4_RATIO).saturating_add(SLACK),
                    _ => len.saturating_mul(LZ4_RATIO * LZ4_RATIO).saturating_add(SLACK),
                };
                if unc > max {
                    return Err((at, format!("hierarchy block claims {unc} bytes from {len} bytes")));
                }
                let handles = check_hierarchy(b, ty, at, len as usize)?;
                hier_handles.push((at, handles));
            }
            // Value-change blocks: start, end, memory for traversal, then the bits section.
            1 | 5 | 8 => {
                // Times and memory (24), three varints, the time trailer (24), a chain length.
                if len < 24 + 3 + 24 + 8 {
                    return Err((at, format!("value-change block of {len} bytes is too short")));
                }
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
                // The time table ends the block: (uncompressed, compressed, count) in its last
                // 24 bytes, the compressed table before them, and the position chain's length
                // in the 8 bytes before that; the reader allocates all three as they say.
                let end = at + 1 + len as usize;
                let (t_unc, t_c, t_n) = (be(b, end - 24), be(b, end - 16), be(b, end - 8));
                let (Some(t_unc), Some(t_c), Some(t_n)) = (t_unc, t_c, t_n) else {
                    return Err((at, "truncated value-change block".to_string()));
                };
                let room = (end - 24).saturating_sub(p) as u64;
                if t_c.saturating_add(8) > room || t_unc > bound(t_c) || t_n > t_unc {
                    return Err((end - 24, format!("value-change block time table ({t_unc}/{t_c}/{t_n}) exceeds its {len} bytes")));
                }
                let chain_at = end - 24 - t_c as usize - 8;
                let chain_c = be(b, chain_at).unwrap_or(u64::MAX);
                if chain_c > (chain_at - p) as u64 {
                    return Err((chain_at, format!("value-change block position chain of {chain_c} bytes exceeds its {len} bytes")));
                }
                // The waves section: its signal count sizes three tables (checked against the
                // geometry after the walk), then each signal's packed values, whose claimed
                // unpacked length the reader allocates.
                let mut w = p.saturating_add(bits_c as usize);
                let max_handle = varint(b, &mut w).ok_or((w, "bad varint".to_string()))?;
                vc_handles.push((at, max_handle));
                let chain_start = chain_at - chain_c as usize;
                if w < chain_start {
                    check_signal_lengths(b, ty, w, &b[chain_start..chain_at], chain_start)?;
                }
            }
            // Blackouts: a count, then at least 2 bytes per blackout.
            2 => {
                let mut p = body;
                let count = varint(b, &mut p).ok_or((p, "bad varint".to_string()))?;
                if count > len {
                    return Err((at, format!("blackout block claims {count} blackouts in {len} bytes")));
                }
            }
            // Header (0), skip (255).
            0 | 255 => {}
            // The gzip wrapper makes the reader inflate the whole file into memory, to the
            // length the wrapper claims; no writer of ours produces it.
            254 => return Err((at, "gzip-wrapped FST (block type 254) is not supported: unwrap it first (e.g. fst2vcd | vcd2fst)".to_string())),
            _ => return Err((at, format!("unknown block type {ty}"))),
        }
        at += 1 + len as usize;
    }
    if let Some(g) = geometry_handles {
        if let Some(&(off, n)) = vc_handles.iter().find(|&&(_, n)| n > g) {
            return Err((off, format!("value-change block claims {n} signals, the geometry has {g}")));
        }
        if let Some(&(off, n)) = hier_handles.iter().find(|&&(_, n)| n > g) {
            return Err((off, format!("hierarchy declares {n} signals, the geometry has {g}")));
        }
    }
    Ok(())
}

/// Signed LEB128, as the position chain of dynamic-alias-2 blocks stores offsets.
fn svarint(b: &[u8], at: &mut usize) -> Option<i64> {
    let mut v: i64 = 0;
    for shift in (0..64).step_by(7) {
        let x = *b.get(*at)?;
        *at += 1;
        v |= i64::from(x & 0x7f) << shift;
        if x & 0x80 == 0 {
            if x & 0x40 != 0 && shift + 7 < 64 {
                v |= -1i64 << (shift + 7);
            }
            return Some(v);
        }
    }
    None
}

/// Walks a block's position chain (the reader's two encodings: type 8 "alias 2", else
/// "alias") to each signal's packed values at `vc_start + offset`, whose first varint is the
/// unpacked length (0: stored as is); the length may not exceed what its packed bytes can
/// expand to. A chain the walk cannot follow is left to the (contained) reader.
fn check_signal_lengths(b: &[u8], ty: u8, vc_start: usize, chain: &[u8], chain_start: usize) -> std::result::Result<(), (usize, String)> {
    let mut offsets: Vec<u64> = Vec::new();
    let (mut c, mut cur) = (0usize, 0i64);
    while c < chain.len() {
        if ty == 8 {
            if chain[c] & 1 == 1 {
                let Some(v) = svarint(chain, &mut c) else { break };
                if v >> 1 > 0 {
                    cur = cur.saturating_add(v >> 1);
                    offsets.push(cur as u64);
                }
            } else if varint(chain, &mut c).is_none() {
                break;
            }
        } else {
            let Some(raw) = varint(chain, &mut c) else { break };
            if raw == 0 {
                if varint(chain, &mut c).is_none() {
                    break;
                }
            } else if raw & 1 == 1 {
                cur = cur.saturating_add((raw >> 1) as i64);
                offsets.push(cur as u64);
            }
        }
    }
    // Each signal's bytes run to the next offset (the last to the chain): offsets must rise
    // within the section, or the reader's u32 length wraps to gigabytes.
    let last = (chain_start - vc_start) as u64;
    for (i, &o) in offsets.iter().enumerate() {
        let end = offsets.get(i + 1).copied().unwrap_or(last);
        if o == 0 || o >= end || end > last {
            return Err((chain_start, format!("position chain: signal data at {o}..{end} outside the {last}-byte value section")));
        }
        let packed = end - o;
        let mut p = vc_start + o as usize;
        let at = p;
        let unpacked = varint(b, &mut p).ok_or((at, "bad varint".to_string()))?;
        if (p - at) as u64 > packed || unpacked > packed.saturating_mul(MAX_RATIO).saturating_add(SLACK) {
            return Err((at, format!("signal values claim {unpacked} bytes unpacked from {packed} bytes")));
        }
    }
    Ok(())
}

/// Longest scope, variable or attribute-argument name the reader accepts (fst-reader's
/// `HIERARCHY_NAME_MAX_SIZE`); longer names are refused here too.
const NAME_MAX: usize = 65536;
/// Longest misc-attribute string (fst-reader's `HIERARCHY_ATTRIBUTE_MAX_SIZE`).
const ATTRIBUTE_MAX: usize = 65536 + 4096;
/// Hierarchy records (scopes, variables, attributes) allowed per byte of the file, on top
/// of [`RECORD_SLACK`]: each becomes an entry of a table in the reader's hierarchy, and a
/// highly compressible hierarchy could otherwise declare hundreds of millions of them.
/// Real hierarchies take several compressed bytes per record.
const RECORDS_PER_BYTE: u64 = 16;
const RECORD_SLACK: u64 = 1 << 20;

/// Inflates the hierarchy block at `at` (type 4 gzip, 6 LZ4, 7 LZ4 twice) exactly as the
/// reader does and walks its records. The reader sizes its per-signal table from each
/// variable's signal handle (an alias's handle is taken as is: a corrupted one asked for
/// 34 GB), so every alias must name a handle already declared. Returns the number of
/// handles the hierarchy declares (checked against the geometry after the walk).
fn check_hierarchy(b: &[u8], ty: u8, at: usize, len: usize) -> std::result::Result<u64, (usize, String)> {
    let body = at + 9;
    let end = at + 1 + len;
    if len < 16 {
        return Err((at, format!("hierarchy block of {len} bytes is too short")));
    }
    let unc = be(b, body).unwrap_or(0) as usize;
    let data = &b[body + 8..end];
    let refuse = |what: String| Err((at, format!("hierarchy block: {what}")));
    let h = match ty {
        4 => {
            // A gzip header the reader accepts (magic, deflate, no flags), then raw deflate.
            if data.len() < 10 || data[..4] != [0x1f, 0x8b, 8, 0] {
                return refuse("bad gzip header".into());
            }
            match miniz_oxide::inflate::decompress_to_vec_with_limit(&data[10..], unc) {
                Ok(v) => v,
                Err(e) => return refuse(format!("does not inflate to its {unc} bytes ({:?})", e.status)),
            }
        }
        6 => match lz4_flex::decompress(data, unc) {
            Ok(v) => v,
            Err(e) => return refuse(format!("does not decompress (LZ4: {e})")),
        },
        _ => {
            // The length after the first decompression, which the reader allocates.
            let mut p = 0;
            let lvl1_len = varint(data, &mut p).ok_or((body + 8, "bad varint".to_string()))?;
            let rest = &data[p..];
            if lvl1_len > (rest.len() as u64).saturating_mul(LZ4_RATIO).saturating_add(SLACK) {
                return refuse(format!("first LZ4 stage claims {lvl1_len} bytes from {} bytes", rest.len()));
            }
            let lvl1 = match lz4_flex::decompress(rest, lvl1_len as usize) {
                Ok(v) => v,
                Err(e) => return refuse(format!("does not decompress (first LZ4 stage: {e})")),
            };
            if lvl1.len() != lvl1_len as usize {
                return refuse(format!("first LZ4 stage gives {} bytes, not the {lvl1_len} claimed", lvl1.len()));
            }
            match lz4_flex::decompress(&lvl1, unc) {
                Ok(v) => v,
                Err(e) => return refuse(format!("does not decompress (second LZ4 stage: {e})")),
            }
        }
    };
    if h.len() != unc {
        return refuse(format!("decompresses to {} bytes, not the {unc} claimed", h.len()));
    }
    let max_records = (b.len() as u64).saturating_mul(RECORDS_PER_BYTE).saturating_add(RECORD_SLACK);
    walk_hierarchy(&h, max_records).map_err(|(p, what)| (at, format!("hierarchy byte {p} (decompressed): {what}")))
}

/// A zero-terminated name, its zero among the next `max` bytes (the reader's `read_c_str`).
fn c_str(h: &[u8], p: &mut usize, max: usize) -> std::result::Result<(), (usize, String)> {
    let start = *p;
    let rest = &h[start.min(h.len())..];
    match rest.iter().take(max).position(|&c| c == 0) {
        Some(n) => {
            *p = start + n + 1;
            Ok(())
        }
        None if rest.len() >= max => Err((start, format!("name of {max} bytes or more"))),
        None => Err((start, "truncated name".to_string())),
    }
}

/// The reader's 32-bit LEB128 (at most 5 bytes; high bits of the fifth dropped).
fn varint32(h: &[u8], p: &mut usize) -> Option<u32> {
    let mut v = 0u32;
    for i in 0..5 {
        let x = *h.get(*p)?;
        *p += 1;
        v |= u32::from(x & 0x7f) << (7 * i);
        if x & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Walks the records of a decompressed hierarchy as fst-reader's `read_hierarchy_entry`
/// parses them; the error is (byte offset in `h`, reason). Returns the handles declared.
fn walk_hierarchy(h: &[u8], max_records: u64) -> std::result::Result<u64, (usize, String)> {
    let (mut p, mut records, mut handles) = (0usize, 0u64, 0u64);
    let byte = |p: &mut usize| -> std::result::Result<u8, (usize, String)> {
        let x = *h.get(*p).ok_or((*p, "truncated record".to_string()))?;
        *p += 1;
        Ok(x)
    };
    while p < h.len() {
        let rec = p;
        records += 1;
        if records > max_records {
            return Err((rec, format!("more than {max_records} hierarchy records ({RECORDS_PER_BYTE} per byte of the file)")));
        }
        match byte(&mut p)? {
            // Scope: scope type, name, component.
            254 => {
                byte(&mut p)?;
                c_str(h, &mut p, NAME_MAX)?;
                c_str(h, &mut p, NAME_MAX)?;
            }
            // Variable: direction, name, length, alias (0: a new handle, else an existing one).
            0..=29 => {
                byte(&mut p)?;
                c_str(h, &mut p, NAME_MAX)?;
                varint32(h, &mut p).ok_or((p, "bad varint".to_string()))?;
                let a = p;
                let alias = varint32(h, &mut p).ok_or((p, "bad varint".to_string()))?;
                if alias == 0 {
                    handles += 1;
                } else if u64::from(alias) > handles {
                    return Err((a, format!("variable aliases signal handle {alias}, only {handles} declared before it")));
                }
            }
            // Upscope, attribute end.
            255 | 253 => {}
            // Attribute: type, subtype, then a name and a varint argument (source stems: an
            // argument and a zero in place of the name).
            252 => {
                let tpe = byte(&mut p)?;
                let sub = byte(&mut p)?;
                if tpe == 0 && matches!(sub, 4 | 5) {
                    varint(h, &mut p).ok_or((p, "bad varint".to_string()))?;
                    if byte(&mut p)? != 0 {
                        return Err((p - 1, "source-stem attribute argument not zero-terminated".to_string()));
                    }
                } else {
                    c_str(h, &mut p, if tpe == 0 { ATTRIBUTE_MAX } else { NAME_MAX })?;
                }
                varint(h, &mut p).ok_or((p, "bad varint".to_string()))?;
            }
            other => return Err((rec, format!("unknown hierarchy record type {other}"))),
        }
    }
    Ok(handles)
}

#[cfg(test)]
mod tests {
    use super::walk_hierarchy;

    /// Scope `top`, var `a` (new handle 1), var `b` aliasing handle `alias`, upscope.
    fn hier(alias: u8) -> Vec<u8> {
        let mut h = vec![254, 0, b't', b'o', b'p', 0, 0];
        h.extend([17, 0, b'a', 0, 8, 0]);
        h.extend([17, 0, b'b', 0, 8, alias]);
        h.push(255);
        h
    }

    #[test]
    fn aliases_must_name_a_declared_handle() {
        assert_eq!(walk_hierarchy(&hier(0), 100), Ok(2));
        assert_eq!(walk_hierarchy(&hier(1), 100), Ok(1));
        let e = walk_hierarchy(&hier(2), 100).unwrap_err();
        assert!(e.1.contains("aliases signal handle 2, only 1 declared"), "{e:?}");
    }

    #[test]
    fn names_records_and_types_are_bounded() {
        let mut long = vec![17, 0];
        long.extend(std::iter::repeat_n(b'x', 70000));
        long.extend([0, 8, 0]);
        assert!(walk_hierarchy(&long, 100).unwrap_err().1.contains("name of 65536 bytes or more"));
        assert!(walk_hierarchy(&hier(0), 3).unwrap_err().1.contains("more than 3 hierarchy records"));
        assert!(walk_hierarchy(&[100], 100).unwrap_err().1.contains("unknown hierarchy record type 100"));
        assert!(walk_hierarchy(&hier(0)[..9], 100).unwrap_err().1.contains("truncated"));
    }
}
