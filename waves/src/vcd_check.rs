//! Pre-validation of every waveform file before it reaches the reader: the dependency
//! (wellen) may panic, spin or allocate what a corrupt size field says, so each file is first
//! classified exactly as the reader would classify it, then checked, and refused with the
//! file and line (VCD) or byte offset (FST) at fault.
//!
//! Detection mirrors wellen's: a file whose first byte after spaces, tabs and line breaks is
//! `$` is a VCD; anything else the reader would walk as FST blocks (a 9-byte file of `0xff`
//! lengths made that walk seek back to where it started, forever), so anything else must
//! pass the FST block walk of [`crate::fst_check`], starting with its header block.
//!
//! VCD checks: balanced `$scope`/`$upscope` at most [`MAX_DEPTH`] deep, signal widths in
//! `1..=`[`MAX_WIDTH`], every value change names a declared id code, value syntax (scalar,
//! `b` vector, `r` real), time never going backwards, a complete last line (a truncated
//! dump), and the bits the reader expands the value changes to (each change is stored at
//! its signal's full width) at most [`MAX_BITS_PER_BYTE`] per byte of the file.

use std::collections::HashMap;
use std::path::Path;

use crate::{Result, WaveError};

/// Widest signal accepted, in bits. IEEE 1364 requires tools to support vectors of at least
/// 2^16 bits; the reader allocates a signal's width in bytes for each change of it, so
/// `$var wire 4294967295` asked for 4 GiB per change.
pub const MAX_WIDTH: u32 = 1 << 16;
/// Deepest scope nesting accepted (package and wafer dumps nest 5 to 7 deep).
pub const MAX_DEPTH: usize = 256;
/// Value bits the reader may expand the file to, per byte of file (a 64-bit bus written as
/// `b0 !` is 13 bits per byte), on top of [`SLACK_BITS`]. Bounds the reader's memory by the
/// file's size.
pub const MAX_BITS_PER_BYTE: u64 = 256;
/// Value bits always allowed (small files with wide signals).
pub const SLACK_BITS: u64 = 1 << 26;

/// What a waveform file is, as the reader will see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Detected {
    Vcd,
    Fst,
}

/// Classifies `path` as the reader would and checks it; every file the reader would open is
/// either checked here or refused.
pub fn check_file(path: &Path) -> Result<Detected> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => return Err(WaveError::Parse { path: path.to_path_buf(), what: format!("cannot open: {e}") }),
    };
    let parse_err = |what: String| WaveError::Parse { path: path.to_path_buf(), what };
    // wellen's `skip_whitespace`: exactly these four bytes.
    let first = bytes.iter().copied().find(|b| !matches!(b, b' ' | b'\n' | b'\r' | b'\t'));
    match first {
        None => Err(parse_err("empty file: not a VCD or FST dump".into())),
        Some(b'$') => {
            check_text(&bytes).map_err(|(line, what)| parse_err(format!("line {line}: {what}")))?;
            Ok(Detected::Vcd)
        }
        Some(_) if crate::fst_check::is_fst(&bytes) => {
            crate::fst_check::check_file(path, &bytes)?;
            Ok(Detected::Fst)
        }
        Some(_) => Err(parse_err(format!(
            "not a VCD (no `$` command at the start) nor an FST (no 329-byte header block at offset 0){}",
            if bytes.starts_with(b"GHDLwave") { "; GHW dumps are not supported" } else { "" }
        ))),
    }
}

/// Validates VCD text; the error is (1-based line, reason).
pub fn check_text(bytes: &[u8]) -> std::result::Result<(), (usize, String)> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let line = 1 + bytes[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count();
        (line, "not UTF-8 text".to_string())
    })?;
    let lines = text.lines().count().max(1);
    if !text.ends_with('\n') && !text.trim_end().ends_with("$end") {
        return Err((lines, "truncated last line (no newline at end of file)".into()));
    }
    let mut toks = text.lines().enumerate().flat_map(|(i, l)| l.split_ascii_whitespace().map(move |t| (i + 1, t))).peekable();
    // Id code -> width in bits (the widest declaration of a shared id code).
    let mut ids: HashMap<&str, u32> = HashMap::new();
    let mut depth: i64 = 0;
    let budget = (bytes.len() as u64).saturating_mul(MAX_BITS_PER_BYTE).saturating_add(SLACK_BITS);
    let mut bits: u64 = 0;
    // Counts one change of `id` against the budget; the error names the line.
    let mut spend = |line: usize, width: u32| -> std::result::Result<(), (usize, String)> {
        bits += u64::from(width);
        if bits > budget {
            return Err((line, format!("value changes expand to more than {budget} bits ({MAX_BITS_PER_BYTE} per byte of the file): too large for the reader")));
        }
        Ok(())
    };
    let mut header = true;
    let mut last_time: Option<u64> = None;
    let mut last_line = 1;
    // Skips to the `$end` closing a command; the command's tokens are returned.
    macro_rules! until_end {
        ($what:expr, $line:expr) => {{
            let mut v = Vec::new();
            loop {
                match toks.next() {
                    Some((_, "$end")) => break,
                    Some((_, t)) => v.push(t),
                    None => return Err(($line, format!("{} without $end (truncated file?)", $what))),
                }
            }
            v
        }};
    }
    while let Some((line, tok)) = toks.next() {
        last_line = line;
        if header {
            match tok {
                "$scope" => {
                    until_end!("$scope", line);
                    depth += 1;
                    if depth as usize > MAX_DEPTH {
                        return Err((line, format!("scopes nested more than {MAX_DEPTH} deep")));
                    }
                }
                "$upscope" => {
                    until_end!("$upscope", line);
                    depth -= 1;
                    if depth < 0 {
                        return Err((line, "$upscope without a matching $scope".into()));
                    }
                }
                "$var" => {
                    let v = until_end!("$var", line);
                    if v.len() < 4 {
                        return Err((line, "$var needs type, size, id code and name".into()));
                    }
                    let width = match v[1].parse::<u64>() {
                        Ok(w) if (1..=u64::from(MAX_WIDTH)).contains(&w) => w as u32,
                        Ok(w) if w > 0 => return Err((line, format!("$var size {w} is wider than {MAX_WIDTH} bits"))),
                        _ => return Err((line, format!("$var size `{}` is not a positive integer", short(v[1])))),
                    };
                    let w = ids.entry(v[2]).or_insert(0);
                    *w = (*w).max(width);
                }
                "$enddefinitions" => {
                    until_end!("$enddefinitions", line);
                    if depth != 0 {
                        return Err((line, format!("{depth} $scope(s) not closed by $upscope")));
                    }
                    header = false;
                }
                t if t.starts_with('$') => {
                    until_end!(t, line);
                }
                t => return Err((line, format!("unexpected `{}` in the header", short(t)))),
            }
            continue;
        }
        let c = tok.as_bytes()[0];
        match c {
            b'$' => match tok {
                "$dumpvars" | "$dumpall" | "$dumpon" | "$dumpoff" | "$end" => {}
                "$comment" => {
                    until_end!("$comment", line);
                }
                t => return Err((line, format!("unexpected `{}` after $enddefinitions", short(t)))),
            },
            b'#' => {
                let t: u64 = tok[1..].parse().map_err(|_| (line, format!("bad time `{}`", short(tok))))?;
                if let Some(p) = last_time {
                    if t < p {
                        return Err((line, format!("time goes backwards (#{t} after #{p})")));
                    }
                }
                last_time = Some(t);
            }
            b'0' | b'1' | b'x' | b'X' | b'z' | b'Z' => {
                let id = &tok[1..];
                if id.is_empty() {
                    return Err((line, format!("value `{}` names no id code", short(tok))));
                }
                match ids.get(id) {
                    Some(&w) => spend(line, w)?,
                    None => return Err((line, format!("undeclared id code `{}`", short(id)))),
                }
            }
            b'b' | b'B' | b'r' | b'R' | b's' | b'S' => {
                let val = &tok[1..];
                let ok = match c {
                    b'b' | b'B' => !val.is_empty() && val.bytes().all(|b| b"01xXzZuUwWlLhH-".contains(&b)),
                    b'r' | b'R' => val.parse::<f64>().is_ok(),
                    _ => true,
                };
                if !ok {
                    return Err((line, format!("bad value `{}`", short(tok))));
                }
                match toks.next() {
                    Some((l, id)) if ids.contains_key(id) => spend(l, ids[id])?,
                    Some((l, id)) => return Err((l, format!("undeclared id code `{}`", short(id)))),
                    None => return Err((line, format!("value `{}` without an id code (truncated file?)", short(tok)))),
                }
            }
            _ => return Err((line, format!("unexpected `{}`", short(tok)))),
        }
    }
    if header {
        return Err((last_line, "no $enddefinitions (truncated header?)".into()));
    }
    Ok(())
}

fn short(t: &str) -> String {
    t.chars().take(24).map(|c| if c.is_control() { '?' } else { c }).collect()
}

#[cfg(test)]
mod tests {
    use super::check_text;

    const OK: &str = "$timescale 1ps $end\n$scope module top $end\n$var wire 1 ! a $end\n$var wire 4 \" b $end\n$upscope $end\n$enddefinitions $end\n#0\n$dumpvars\n0!\nb0000 \"\n$end\n#10\n1!\nbx1z0 \"\n";

    #[test]
    fn valid_passes() {
        check_text(OK.as_bytes()).unwrap();
    }

    #[test]
    fn malformed_is_refused_with_line() {
        for (bad, line, what) in [
            (OK.replace("1!\n", "1#\n"), 13, "undeclared"),
            (OK.replace("bx1z0 \"", "bXYZ !"), 14, "bad value"),
            (OK.replace("#10", "#-1"), 12, "bad time"),
            (OK.replace("#10\n", "#10\n#5\n"), 13, "backwards"),
            (OK.replace("$upscope $end\n", ""), 5, "not closed"),
            (OK.trim_end().to_string(), 14, "truncated"),
        ] {
            let (l, w) = check_text(bad.as_bytes()).unwrap_err();
            assert!(w.contains(what), "{w}");
            assert_eq!(l, line, "{w}");
        }
    }
}
