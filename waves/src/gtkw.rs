//! GTKWave save files (`.gtkw`) that open a dump with its signals laid out by hardware block.
//!
//! The layout is read from the dump's own header (VCD or FST, through wellen), so it fits any
//! dump waferstream writes — package, NoC, wafer, balancer — and any `--trace` selection. Each
//! signal goes to the block instance of the deepest scope on its path that names a block:
//!
//! | kind | scope names |
//! |---|---|
//! | IO die | `iodie` |
//! | link | `link_*`, `ucie_*` (wafer mesh links, UCIe adapters) |
//! | router | `router`, `r_X_Y` (its ports `in_*`/`out_*` inside) |
//! | chiplet | `c_X_Y` (controller, ring, PE array, DDR, D2D engine) |
//! | die | `d_X_Y` (compute, DMA, mapping, migration) |
//! | NI | `ni` (NoC network interfaces) |
//! | other | anything else (`top`, the wafer's top scope) |
//!
//! Groups follow in that order of kinds, instances in name order; each is a collapsed GTKWave
//! group named `KIND PATH`, so the dump opens with one line per block to expand. Per-slot,
//! per-VC and per-stage sub-scopes (`slotN`, `vcN`, `stageN`: thousands of signals in a ring
//! of 16 k slots) are left out of the layout — they stay in the dump's signal tree — and the
//! group's comment line says how many were left out.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use wellen::LoadOptions;

use crate::reader::{check_readable, contained};
use crate::{Result, WaveError};

/// Block kinds in the order their groups appear.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum BlockKind {
    IoDie,
    Link,
    Router,
    Chiplet,
    Die,
    Ni,
    Other,
}

impl BlockKind {
    pub fn label(self) -> &'static str {
        match self {
            BlockKind::IoDie => "IO die",
            BlockKind::Link => "link",
            BlockKind::Router => "router",
            BlockKind::Chiplet => "chiplet",
            BlockKind::Die => "die",
            BlockKind::Ni => "NI",
            BlockKind::Other => "other",
        }
    }

    /// The kind a scope name denotes, if it names a block.
    pub fn of_scope(name: &str) -> Option<BlockKind> {
        let grid = |p: &str| name.strip_prefix(p).is_some_and(|r| r.split('_').count() == 2 && r.split('_').all(|x| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit())));
        Some(match name {
            "iodie" => BlockKind::IoDie,
            _ if name.starts_with("link_") || name.starts_with("ucie_") => BlockKind::Link,
            "router" => BlockKind::Router,
            _ if grid("r_") => BlockKind::Router,
            _ if grid("c_") => BlockKind::Chiplet,
            _ if grid("d_") => BlockKind::Die,
            "ni" => BlockKind::Ni,
            _ => return None,
        })
    }
}

/// A per-element sub-scope left out of the layout (`slot12`, `vc3`, `stage0`).
fn is_array_scope(name: &str) -> bool {
    ["slot", "vc", "stage"].iter().any(|p| name.strip_prefix(p).is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit())))
}

/// One signal of the layout: its full dotted name and width.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaidOut {
    pub name: String,
    pub width: u32,
}

/// One group of the layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub kind: BlockKind,
    /// Full dotted path of the block's scope (`top.pkg.c_0_1.router`).
    pub path: String,
    pub signals: Vec<LaidOut>,
    /// Signals under per-slot/VC/stage sub-scopes, not listed.
    pub left_out: usize,
}

/// Groups the signals `(scope path components, signal name, width)` by block.
pub fn layout<'a>(vars: impl IntoIterator<Item = (Vec<&'a str>, &'a str, u32)>) -> Vec<Group> {
    let mut groups: BTreeMap<(BlockKind, String), Group> = BTreeMap::new();
    for (scopes, name, width) in vars {
        let deepest = scopes.iter().enumerate().rev().find_map(|(i, s)| BlockKind::of_scope(s).map(|k| (i, k)));
        let (kind, path) = match deepest {
            Some((i, k)) => (k, scopes[..=i].join(".")),
            // No block on the path: the signal's own scope is its group.
            None => (BlockKind::Other, scopes.join(".")),
        };
        let g = groups.entry((kind, path.clone())).or_insert_with(|| Group { kind, path, signals: Vec::new(), left_out: 0 });
        if scopes.iter().any(|s| is_array_scope(s)) {
            g.left_out += 1;
        } else {
            let full = if scopes.is_empty() { name.to_string() } else { format!("{}.{name}", scopes.join(".")) };
            g.signals.push(LaidOut { name: full, width });
        }
    }
    let mut out: Vec<Group> = groups.into_values().collect();
    for g in &mut out {
        g.signals.sort_by(|a, b| a.name.cmp(&b.name));
    }
    out
}

// GTKWave trace flags (gtkwave's analyzer.h): hex display, binary display, a comment line,
// and the collapsed-group open/close markers.
const TR_HEX: u32 = 0x22;
const TR_BIN: u32 = 0x28;
const TR_BLANK: u32 = 0x200;
const TR_GROUP_OPEN: u32 = 0x800000;
const TR_GROUP_CLOSE: u32 = 0x1000000;
const TR_CLOSED: u32 = 0x2000000;

/// The `.gtkw` text for `dump` (the path written into `[dumpfile]`) with `groups`.
pub fn render(dump: &str, groups: &[Group]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "[*] GTKWave save file written by waferstream (waves::gtkw): signals grouped by block");
    let _ = writeln!(s, "[dumpfile] \"{dump}\"");
    let _ = writeln!(s, "[savefile] \"\"");
    let _ = writeln!(s, "[timestart] 0");
    let _ = writeln!(s, "[size] 1600 900");
    let _ = writeln!(s, "[pos] -1 -1");
    let _ = writeln!(s, "[sst_width] 320");
    let _ = writeln!(s, "[signals_width] 360");
    let _ = writeln!(s, "[sst_expanded] 1");
    let _ = writeln!(s, "[sst_vpaned_height] 300");
    for g in groups.iter().filter(|g| !g.signals.is_empty()) {
        let title = format!("{} {}", g.kind.label(), g.path);
        let _ = writeln!(s, "@{:x}", TR_BLANK | TR_GROUP_OPEN | TR_CLOSED);
        let _ = writeln!(s, "-{title}");
        if g.left_out > 0 {
            let _ = writeln!(s, "@{:x}", TR_BLANK);
            let _ = writeln!(s, "-({} per-slot/VC/stage signals in the tree)", g.left_out);
        }
        let mut flag = 0;
        for x in &g.signals {
            let f = if x.width > 1 { TR_HEX } else { TR_BIN };
            if f != flag {
                let _ = writeln!(s, "@{f:x}");
                flag = f;
            }
            if x.width > 1 {
                let _ = writeln!(s, "{}[{}:0]", x.name, x.width - 1);
            } else {
                let _ = writeln!(s, "{}", x.name);
            }
        }
        let _ = writeln!(s, "@{:x}", TR_BLANK | TR_GROUP_CLOSE | TR_CLOSED);
        let _ = writeln!(s, "-{title}");
    }
    let _ = writeln!(s, "[pattern_trace] 1");
    let _ = writeln!(s, "[pattern_trace] 0");
    s
}

/// What [`write_gtkw`] laid out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GtkwSummary {
    pub groups: usize,
    pub signals: usize,
    pub left_out: usize,
}

/// Reads the header of `dump` (VCD or FST) and writes a GTKWave save file `out` that opens
/// it with its signals grouped by block. `[dumpfile]` is the dump's absolute path.
pub fn write_gtkw(dump: &Path, out: &Path) -> Result<GtkwSummary> {
    check_readable(dump)?;
    crate::vcd_check::check_file(dump)?;
    let groups = contained(dump, || {
        crate::reader::bound_header(dump)?;
        let header = wellen::viewers::read_header_from_file(dump, &LoadOptions::default()).map_err(|e| WaveError::parse(dump, e))?;
        let h = &header.hierarchy;
        let vars: Vec<(Vec<String>, String, u32)> = h
            .all_vars()
            .map(|v| {
                let full = h[v].full_name(h);
                let name = h[v].name(h).to_string();
                let scope = full.strip_suffix(&name).unwrap_or(&full).trim_end_matches('.');
                let scopes = if scope.is_empty() { Vec::new() } else { scope.split('.').map(str::to_string).collect() };
                (scopes, name, h[v].length(h).unwrap_or(1))
            })
            .collect();
        Ok(layout(vars.iter().map(|(s, n, w)| (s.iter().map(String::as_str).collect(), n.as_str(), *w))))
    })?;
    let abs = std::fs::canonicalize(dump).unwrap_or_else(|_| dump.to_path_buf());
    std::fs::write(out, render(&abs.display().to_string(), &groups))?;
    Ok(GtkwSummary { groups: groups.iter().filter(|g| !g.signals.is_empty()).count(), signals: groups.iter().map(|g| g.signals.len()).sum(), left_out: groups.iter().map(|g| g.left_out).sum() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_names_map_to_block_kinds() {
        for (n, k) in [("iodie", Some(BlockKind::IoDie)), ("link_e", Some(BlockKind::Link)), ("ucie_n", Some(BlockKind::Link)), ("router", Some(BlockKind::Router)), ("r_3_12", Some(BlockKind::Router)), ("c_0_1", Some(BlockKind::Chiplet)), ("d_2_2", Some(BlockKind::Die)), ("ni", Some(BlockKind::Ni))] {
            assert_eq!(BlockKind::of_scope(n), k, "{n}");
        }
        for n in ["r_1", "c_x_1", "d__1", "top", "pkg", "ring", "in_e", "c_1_2_3"] {
            assert_eq!(BlockKind::of_scope(n), None, "{n}");
        }
    }

    #[test]
    fn deepest_block_wins_and_arrays_are_left_out() {
        // Hand-built hierarchy: a chiplet with a router inside, a ring with slots, an IO die.
        let v = vec![
            (vec!["top", "pkg", "c_0_0", "ctrl"], "busy", 1),
            (vec!["top", "pkg", "c_0_0", "router", "in_e"], "credits", 4),
            (vec!["top", "pkg", "c_0_0", "router", "in_e", "vc0"], "occ", 3),
            (vec!["top", "pkg", "c_0_0", "ring", "slot7"], "valid", 1),
            (vec!["top", "pkg", "iodie"], "icv", 4),
            (vec!["top"], "clk", 1),
        ];
        let g = layout(v);
        let got: Vec<(BlockKind, &str, Vec<&str>, usize)> = g.iter().map(|g| (g.kind, g.path.as_str(), g.signals.iter().map(|s| s.name.as_str()).collect(), g.left_out)).collect();
        assert_eq!(
            got,
            vec![
                (BlockKind::IoDie, "top.pkg.iodie", vec!["top.pkg.iodie.icv"], 0),
                (BlockKind::Router, "top.pkg.c_0_0.router", vec!["top.pkg.c_0_0.router.in_e.credits"], 1),
                (BlockKind::Chiplet, "top.pkg.c_0_0", vec!["top.pkg.c_0_0.ctrl.busy"], 1),
                (BlockKind::Other, "top", vec!["top.clk"], 0),
            ]
        );
        let text = render("/x.vcd", &g);
        // Vectors carry their range and hex display; groups open and close collapsed.
        assert!(text.contains("@22\ntop.pkg.iodie.icv[3:0]\n"), "{text}");
        assert!(text.contains("@2800200\n-IO die top.pkg.iodie\n"), "{text}");
        assert!(text.contains("@3000200\n-IO die top.pkg.iodie\n"), "{text}");
        assert!(text.contains("-(1 per-slot/VC/stage signals in the tree)"), "{text}");
        assert!(text.starts_with("[*] GTKWave") && text.contains("[dumpfile] \"/x.vcd\"\n"));
    }
}
