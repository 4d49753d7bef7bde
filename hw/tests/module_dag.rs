//! The files of `hw/src/pkg` and of `hw/src/wafer` import each other as a DAG (issue 20):
//! a block's file names the blocks below it, never one that names it back. Read from the
//! sources with a deliberately naive scanner (no code shared with the crate): for each file
//! (mod.rs aside), the sibling modules it refers to through `use super::X`, `use
//! crate::<dir>::X`, `super::X::…` or `crate::<dir>::X::…` anywhere in its code, comments
//! and `#[cfg(test)]` modules left out (a test may use anything); then a depth-first search
//! that names the first cycle it finds.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The source with `//` comments (doc comments too) and `#[cfg(test)] mod … { … }` removed.
fn code_of(src: &str) -> String {
    let mut s = String::new();
    for line in src.lines() {
        // Naive: a `//` inside a string literal also cuts the line; it only loses text.
        let cut = line.find("//").map_or(line, |i| &line[..i]);
        s.push_str(cut);
        s.push('\n');
    }
    let mut out = String::new();
    let mut rest = s.as_str();
    while let Some(i) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..i]);
        let after = &rest[i + "#[cfg(test)]".len()..];
        let t = after.trim_start();
        if t.starts_with("mod ") || t.starts_with("pub mod ") {
            // Skip to the brace that closes the module.
            let open = match after.find('{') {
                Some(o) => o,
                None => break,
            };
            let mut depth = 0i32;
            let mut end = after.len();
            for (j, c) in after[open..].char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = open + j + 1;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            rest = &after[end..];
        } else {
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

fn ident_at(s: &str) -> &str {
    let end = s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(s.len());
    &s[..end]
}

/// The first path segments of a `{a, b::c, d::{e, f}}` group (top level only).
fn group_heads(s: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut at_start = true;
    for (i, c) in s.char_indices() {
        match c {
            '{' => {
                depth += 1;
                if depth == 1 {
                    at_start = true;
                    continue;
                }
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            ',' if depth == 1 => {
                at_start = true;
                continue;
            }
            _ => {}
        }
        if depth == 1 && at_start && !c.is_whitespace() {
            heads.push(ident_at(&s[i..]).to_string());
            at_start = false;
        }
    }
    heads
}

/// Sibling modules that `code` refers to, given the folder's name (`pkg`, `wafer`).
fn refs(code: &str, dir: &str, siblings: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let prefixes = ["super::".to_string(), format!("crate::{dir}::")];
    for p in &prefixes {
        let mut from = 0;
        while let Some(i) = code[from..].find(p.as_str()) {
            let at = from + i;
            from = at + p.len();
            // `crate::x::super::` or `foo_super::` are not ours.
            if p == "super::" && at > 0 {
                let prev = code[..at].chars().next_back().unwrap();
                if prev.is_ascii_alphanumeric() || prev == '_' || prev == ':' {
                    continue;
                }
            }
            let tail = &code[from..];
            let names = if tail.starts_with('{') { group_heads(tail) } else { vec![ident_at(tail).to_string()] };
            for n in names {
                if siblings.contains(&n) {
                    out.insert(n);
                }
            }
        }
    }
    out
}

/// The import graph of the files of `hw/src/<dir>` (mod.rs aside).
fn graph(dir: &str) -> BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(dir);
    let mut files = BTreeMap::new();
    for e in std::fs::read_dir(&root).expect("module folder") {
        let p = e.expect("entry").path();
        if p.extension().is_some_and(|x| x == "rs") {
            let name = p.file_stem().unwrap().to_string_lossy().to_string();
            if name != "mod" {
                files.insert(name, std::fs::read_to_string(&p).expect("source"));
            }
        }
    }
    let siblings: BTreeSet<String> = files.keys().cloned().collect();
    files
        .iter()
        .map(|(name, src)| {
            let mut r = refs(&code_of(src), dir, &siblings);
            r.remove(name);
            (name.clone(), r)
        })
        .collect()
}

/// The first cycle a depth-first search meets, as `a -> b -> … -> a`.
fn find_cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnStack,
        Done,
    }
    fn visit(n: &str, g: &BTreeMap<String, BTreeSet<String>>, mark: &mut BTreeMap<String, Mark>, stack: &mut Vec<String>) -> Option<Vec<String>> {
        mark.insert(n.to_string(), Mark::OnStack);
        stack.push(n.to_string());
        for m in g.get(n).into_iter().flatten() {
            match mark.get(m.as_str()).copied().unwrap_or(Mark::New) {
                Mark::OnStack => {
                    let i = stack.iter().position(|s| s == m).unwrap();
                    let mut c = stack[i..].to_vec();
                    c.push(m.clone());
                    return Some(c);
                }
                Mark::New => {
                    if let Some(c) = visit(m, g, mark, stack) {
                        return Some(c);
                    }
                }
                Mark::Done => {}
            }
        }
        stack.pop();
        mark.insert(n.to_string(), Mark::Done);
        None
    }
    let mut mark = BTreeMap::new();
    for n in g.keys() {
        if mark.get(n.as_str()).copied().unwrap_or(Mark::New) == Mark::New {
            if let Some(c) = visit(n, g, &mut mark, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

fn check(dir: &str) {
    let g = graph(dir);
    assert!(g.len() > 3, "read the files of hw/src/{dir}");
    if let Some(c) = find_cycle(&g) {
        let edges: Vec<String> = g.iter().map(|(k, v)| format!("  {k} -> {}", v.iter().cloned().collect::<Vec<_>>().join(", "))).collect();
        panic!("hw/src/{dir}: import cycle {}\nimports:\n{}", c.join(" -> "), edges.join("\n"));
    }
}

#[test]
fn pkg_files_import_as_a_dag() {
    check("pkg");
}

#[test]
fn wafer_files_import_as_a_dag() {
    check("wafer");
}

/// The scanner itself: it sees groups, paths in code, and not comments or test modules.
#[test]
fn scanner_finds_references_and_cycles() {
    let sib: BTreeSet<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
    let src = "use super::{a::X, b};\n// use super::c::Y;\nfn f() { crate::pkg::c::g(); }\n#[cfg(test)]\nmod tests { use super::a::*; }\n";
    let r = refs(&code_of(src), "pkg", &sib);
    assert_eq!(r, ["a", "b", "c"].iter().map(|s| s.to_string()).collect());
    let r = refs(&code_of("/// [`super::a::X`]\n#[cfg(test)]\nmod t {\n use super::b;\n}\nuse super::c;"), "pkg", &sib);
    assert_eq!(r, ["c".to_string()].into_iter().collect());
    let mut g = BTreeMap::new();
    g.insert("a".to_string(), ["b".to_string()].into_iter().collect::<BTreeSet<_>>());
    g.insert("b".to_string(), ["c".to_string()].into_iter().collect());
    g.insert("c".to_string(), BTreeSet::new());
    assert_eq!(find_cycle(&g), None);
    g.get_mut("c").unwrap().insert("a".to_string());
    assert_eq!(find_cycle(&g), Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]));
}
