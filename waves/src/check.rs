//! Waveform checkers: properties of a chiplet-package dump, checked on the dump itself (any
//! VCD or FST with the package's signal names), so a regression run proves them on what an
//! architect would look at, independently of the simulator's own asserts.
//!
//! * `ring_capacity`: no chiplet's ring buffer ever holds more micro-slices than it has slots
//!   (`top.pkg.c_R_C.ring.occ` against the number of `ring.slotN` scopes).
//! * `trajectory_visits`: each micro-slice of an expert is computed exactly once on each
//!   chiplet that computes the expert at all (PE starts: `ctrl.pe_starts` counts them, with
//!   `ctrl.pe_expert`/`ctrl.pe_k` naming the micro-slice).
//! * `icv_grants_idle`: every IO-die grant (`iodie.grants` counter, `iodie.grant_start`) names
//!   a chiplet whose ICV bit was set just before the grant (`iodie.icv`).
//! * `links_idle_as_mapped` (wafer): no die-to-die link carries a flit of a traffic class
//!   (`top.wafer.….d_R_C.link_X.class`: 0 none, 1 all-reduce, 2 dispatch, 3 combine, 4
//!   migration) in which the mapping controller marks it idle (`map.link_X.idle`, bit
//!   class − 1) — e.g. the links between disjoint FTDs during the all-to-all.
//! * `links_cold_for_migration` (wafer): every migration flit — class 4 (a Local step, sent
//!   during the all-reduce) or 5 (a Global step, sent during the all-to-all) — crosses a link
//!   the mapping marks cold in that phase (`map.link_X.cold`: bit 0 all-reduce, bits 1 and 2
//!   dispatch and combine; all set during an invasive stall).
//!
//! A dump without any value change is refused (a header alone proves nothing), and a
//! checker of the dump's kind whose signals are absent is reported as skipped with the
//! signals it looks for ([`CheckReport::skipped`], `skip` lines of `wave check`), never
//! dropped silently (issue 19).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use wellen::simple::Waveform;
use wellen::{SignalRef, Time};

use crate::{Result, WaveError};

const ICV: [&str; 3] = ["top.pkg.iodie.grants", "top.pkg.iodie.grant_start", "top.pkg.iodie.icv"];

/// The outcome of one checker.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CheckResult {
    pub name: &'static str,
    pub ok: bool,
    /// What was checked (counts) or the first violation.
    pub detail: String,
}

/// (time, value) changes of a signal; `None` values (x/z) are skipped.
fn series(w: &Waveform, s: SignalRef) -> Vec<(Time, u64)> {
    let tt = w.time_table();
    let Some(sig) = w.get_signal(s) else { return Vec::new() };
    sig.iter_changes()
        .filter_map(|(i, v)| {
            let bits = v.to_bit_string()?;
            let x = u64::from_str_radix(&bits, 2).ok()?;
            Some((tt[i as usize], x))
        })
        .collect()
}

/// Value of a series at time `t` (last change at or before `t`).
fn at(s: &[(Time, u64)], t: Time) -> u64 {
    match s.partition_point(|&(ti, _)| ti <= t) {
        0 => 0,
        i => s[i - 1].1,
    }
}

/// Value just before time `t` (last change strictly before `t`).
fn before(s: &[(Time, u64)], t: Time) -> u64 {
    match s.partition_point(|&(ti, _)| ti < t) {
        0 => 0,
        i => s[i - 1].1,
    }
}

/// What `wave check` found: the checkers that ran, and the checkers of the dump's kind
/// (package or wafer) that could not run because their signals are absent from the dump
/// (a glob that traced part of the design, or a renamed scope) — reported, never dropped.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CheckReport {
    pub results: Vec<CheckResult>,
    /// (checker, the signals it looks for that the dump lacks).
    pub skipped: Vec<(&'static str, String)>,
}

/// The checkers that ran on the dump (see [`check_dump`], which also says which were
/// skipped).
pub fn check_package(path: &Path) -> Result<Vec<CheckResult>> {
    check_dump(path).map(|r| r.results)
}

/// Runs every checker whose signals are in the dump and names the others of its kind.
/// Refused: a dump without any value change (a header alone proves nothing) and a dump with
/// neither package nor wafer signals. Reading errors name the file; reading, including the
/// signal loads, is inside the reader's panic containment.
pub fn check_dump(path: &Path) -> Result<CheckReport> {
    let mut w = crate::reader::load(path)?;
    crate::reader::contained(path, move || check_loaded(path, &mut w))
}

fn check_loaded(path: &Path, w: &mut Waveform) -> Result<CheckReport> {
    let names: BTreeMap<String, SignalRef> = {
        let h = w.hierarchy();
        h.all_vars().map(|v| (h[v].full_name(h), h[v].signal_ref())).collect()
    };
    let mut refs: Vec<SignalRef> = names.values().copied().collect();
    refs.sort();
    refs.dedup();
    w.load_signals_multi_threaded(&refs);
    let w = &*w;
    let changes: u64 = refs.iter().filter_map(|&r| w.get_signal(r)).map(|s| s.time_indices().len() as u64).sum();
    if changes == 0 {
        return Err(WaveError::Format { what: format!("{}: no value changes ({} signals declared): nothing to check", path.display(), names.len()) });
    }
    let mut skipped: Vec<(&'static str, String)> = Vec::new();
    // Chiplets: prefixes `top.pkg.c_R_C`.
    let chiplets: BTreeSet<String> = names
        .keys()
        .filter_map(|n| n.strip_suffix(".ctrl.pe_starts").or_else(|| n.strip_suffix(".ring.occ")))
        .map(String::from)
        .collect();
    let mut out = Vec::new();

    // --- ring capacity
    let mut checked = 0;
    let mut bad: Option<String> = None;
    for c in &chiplets {
        let Some(&occ) = names.get(&format!("{c}.ring.occ")) else { continue };
        let slots = names.keys().filter(|n| n.starts_with(&format!("{c}.ring.slot")) && n.ends_with(".live")).count() as u64;
        for (t, v) in series(w, occ) {
            checked += 1;
            if v > slots && bad.is_none() {
                bad = Some(format!("{c}.ring.occ = {v} > {slots} slots at time {t}"));
            }
        }
    }
    if checked == 0 {
        skipped.push(("ring_capacity", "no top.pkg.c_R_C.ring.occ values".into()));
    } else {
        out.push(CheckResult { name: "ring_capacity", ok: bad.is_none(), detail: bad.unwrap_or(format!("{checked} occupancy changes within capacity on {} chiplets", chiplets.len())) });
    }

    // --- trajectory visits
    let mut visits: BTreeMap<(u64, u64), BTreeMap<String, u32>> = BTreeMap::new();
    let mut experts_on: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
    let mut m_of: BTreeMap<u64, u64> = BTreeMap::new();
    let mut have = false;
    let mut partial: Vec<String> = Vec::new();
    for c in &chiplets {
        let (Some(&st), Some(&e), Some(&k)) =
            (names.get(&format!("{c}.ctrl.pe_starts")), names.get(&format!("{c}.ctrl.pe_expert")), names.get(&format!("{c}.ctrl.pe_k")))
        else {
            let absent: Vec<String> = ["pe_starts", "pe_expert", "pe_k"].iter().map(|s| format!("{c}.ctrl.{s}")).filter(|n| !names.contains_key(n)).collect();
            partial.push(absent.join(", "));
            continue;
        };
        have = true;
        let (es, ks) = (series(w, e), series(w, k));
        let mut last = 0;
        for (t, n) in series(w, st) {
            // The counter wraps at its width; each change is one start (or several if the
            // dump skipped cycles — count the difference).
            let starts = n.wrapping_sub(last) & 0xffff;
            last = n;
            if starts == 0 {
                continue; // the initial value dump
            }
            let (ee, kk) = (at(&es, t), at(&ks, t));
            *visits.entry((ee, kk)).or_default().entry(c.clone()).or_default() += starts as u32;
            experts_on.entry(ee).or_default().insert(c.clone());
            let m = m_of.entry(ee).or_default();
            *m = (*m).max(kk.saturating_add(1));
        }
    }
    if !partial.is_empty() {
        // Chiplets whose PE starts cannot be checked are named, whether or not others ran.
        let more = if partial.len() > 3 { format!(" (+{} chiplets more)", partial.len() - 3) } else { String::new() };
        skipped.push(("trajectory_visits", format!("absent: {}{more}", partial[..partial.len().min(3)].join("; "))));
    }
    if have {
        let mut bad: Option<String> = None;
        let mut n = 0;
        'outer: for (&e, on) in &experts_on {
            for k in 0..m_of[&e] {
                let v = visits.get(&(e, k));
                for c in on {
                    let times = v.and_then(|v| v.get(c)).copied().unwrap_or(0);
                    n += 1;
                    if times != 1 {
                        bad = Some(format!("expert {e} micro-slice {k} computed {times} times on {c} (trajectory: {})", on.iter().cloned().collect::<Vec<_>>().join(", ")));
                        break 'outer;
                    }
                }
            }
        }
        out.push(CheckResult { name: "trajectory_visits", ok: bad.is_none(), detail: bad.unwrap_or(format!("{n} (micro-slice, chiplet) visits, each exactly once, {} experts", experts_on.len())) });
    }

    // --- ICV never grants a busy chiplet
    let absent: Vec<&str> = ICV.iter().copied().filter(|n| !names.contains_key(*n)).collect();
    if !absent.is_empty() {
        skipped.push(("icv_grants_idle", format!("absent: {}", absent.join(", "))));
    }
    if let (Some(&g), Some(&s), Some(&icv)) = (names.get(ICV[0]), names.get(ICV[1]), names.get(ICV[2])) {
        let (starts, icvs) = (series(w, s), series(w, icv));
        let mut bad: Option<String> = None;
        let mut n = 0;
        for (t, _) in series(w, g).into_iter().filter(|&(_, v)| v > 0) {
            n += 1;
            let (c, v) = (at(&starts, t), before(&icvs, t));
            if v.checked_shr(c.min(64) as u32).unwrap_or(0) & 1 == 0 && bad.is_none() {
                bad = Some(format!("grant at time {t} to chiplet {c} while ICV was {v:b}"));
            }
        }
        out.push(CheckResult { name: "icv_grants_idle", ok: bad.is_none(), detail: bad.unwrap_or(format!("{n} grants, each to an idle chiplet")) });
    }
    // --- wafer links idle where the mapping says so
    let mut flits = 0u64;
    let mut links = 0u64;
    let mut bad: Option<String> = None;
    let (mut mig_flits, mut mig_bad): (u64, Option<String>) = (0, None);
    let mut cold_links = 0u64;
    let mut unmapped: Vec<String> = Vec::new();
    for (n, &cls) in names.iter().filter(|(n, _)| n.ends_with(".class") && n.contains(".link_")) {
        let Some((die, link)) = n.strip_suffix(".class").and_then(|p| p.rsplit_once('.')) else { continue };
        let Some(&idle) = names.get(&format!("{die}.map.{link}.idle")) else {
            unmapped.push(format!("{die}.map.{link}.idle"));
            continue;
        };
        links += 1;
        let idle = series(w, idle);
        let cold = names.get(&format!("{die}.map.{link}.cold")).map(|&c| series(w, c));
        cold_links += cold.is_some() as u64;
        for (t, v) in series(w, cls) {
            if v == 0 {
                continue;
            }
            if let (Some(cold), 4 | 5) = (&cold, v) {
                mig_flits += 1;
                let need = if v == 4 { 0b001 } else { 0b110 };
                if at(cold, t) & need != need && mig_bad.is_none() {
                    let what = if v == 4 { "a Local migration step (all-reduce window)" } else { "a Global migration step (all-to-all window)" };
                    mig_bad = Some(format!("{die}.{link} carried {what} at time {t}, where the mapping marks it hot (cold mask {:03b})", at(cold, t)));
                }
            }
            flits += 1;
            if at(&idle, t).checked_shr((v - 1).min(64) as u32).unwrap_or(0) & 1 == 1 && bad.is_none() {
                let what = ["all-reduce", "dispatch", "combine", "migration (Local)", "migration (Global)"].get(v as usize - 1).copied().unwrap_or("unknown");
                bad = Some(format!("{die}.{link} carried {what} traffic (class {v}) at time {t}, where the mapping marks it idle"));
            }
        }
    }
    if !unmapped.is_empty() {
        let more = if unmapped.len() > 3 { format!(" (+{} more)", unmapped.len() - 3) } else { String::new() };
        skipped.push(("links_idle_as_mapped", format!("absent: {}{more}", unmapped[..unmapped.len().min(3)].join(", "))));
    }
    if links > 0 && cold_links == 0 {
        skipped.push(("links_cold_for_migration", "absent: every ….map.link_X.cold".into()));
    }
    if links > 0 {
        out.push(CheckResult { name: "links_idle_as_mapped", ok: bad.is_none(), detail: bad.unwrap_or(format!("{flits} link bursts on {links} links, none in a phase its mapping marks idle")) });
    }
    if cold_links > 0 {
        out.push(CheckResult {
            name: "links_cold_for_migration",
            ok: mig_bad.is_none(),
            detail: mig_bad.unwrap_or(format!("{mig_flits} migration link bursts on {cold_links} links, each on a link cold in its step's phase")),
        });
    }
    if out.is_empty() {
        let why: Vec<String> = skipped.iter().map(|(c, w)| format!("{c}: {w}")).collect();
        return Err(WaveError::Format {
            what: format!(
                "{}: no package signals (top.pkg.c_R_C.ring.occ, .ctrl.pe_starts, top.pkg.iodie.icv) nor wafer links (top.wafer.….link_X.class) to check{}",
                path.display(),
                if why.is_empty() { String::new() } else { format!(" ({})", why.join("; ")) }
            ),
        });
    }
    // A package dump says nothing of the wafer checkers and the reverse: only the skips of
    // the dump's own kind are reported.
    let package = out.iter().any(|r| !r.name.starts_with("links_"));
    skipped.retain(|(c, _)| c.starts_with("links_") != package);
    Ok(CheckReport { results: out, skipped })
}
