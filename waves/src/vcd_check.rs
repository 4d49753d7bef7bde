//! Pre-validation of VCD text before it reaches the reader: the dependency (wellen) may
//! panic or silently misread malformed files, so every VCD is checked here first and refused
//! with the file and line at fault. Checked: balanced `$scope`/`$upscope`, every value
//! change names a declared id code, value syntax (scalar, `b` vector, `r` real), time never
//! going backwards, and a complete last line (a truncated dump). FST files (binary) are
//! left to the reader, whose panics are contained by the caller.

use std::collections::HashSet;
use std::path::Path;

use crate::{Result, WaveError};

/// Checks `path` if it looks like a VCD (text starting with `$`); other files pass through.
pub fn check_file(path: &Path) -> Result<()> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => return Err(WaveError::Parse { path: path.to_path_buf(), what: format!("cannot open: {e}") }),
    };
    if crate::fst_check::is_fst(&bytes) {
        return crate::fst_check::check_file(path, &bytes);
    }
    let first = bytes.iter().copied().find(|b| !b.is_ascii_whitespace());
    if first != Some(b'$') {
        return Ok(());
    }
    check_text(&bytes).map_err(|(line, what)| WaveError::Parse { path: path.to_path_buf(), what: format!("line {line}: {what}") })
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
    let mut ids: HashSet<&str> = HashSet::new();
    let mut depth: i64 = 0;
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
                    if v[1].parse::<u32>().map_or(true, |w| w == 0) {
                        return Err((line, format!("$var size `{}` is not a positive integer", v[1])));
                    }
                    ids.insert(v[2]);
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
                if !ids.contains(id) {
                    return Err((line, format!("undeclared id code `{}`", short(id))));
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
                    Some((_, id)) if ids.contains(id) => {}
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
