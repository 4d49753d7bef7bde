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

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use wellen::simple::Waveform;
use wellen::{SignalRef, Time};

use crate::{Result, WaveError};

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

/// Runs every checker that applies to the dump (a checker whose signals are absent is
/// skipped, e.g. when a glob traced only part of the package). Reading errors name the file.
pub fn check_package(path: &Path) -> Result<Vec<CheckResult>> {
    let mut w = crate::reader::load(path)?;
    let names: BTreeMap<String, SignalRef> = {
        let h = w.hierarchy();
        h.all_vars().map(|v| (h[v].full_name(h), h[v].signal_ref())).collect()
    };
    let mut refs: Vec<SignalRef> = names.values().copied().collect();
    refs.sort();
    refs.dedup();
    w.load_signals_multi_threaded(&refs);
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
        for (t, v) in series(&w, occ) {
            checked += 1;
            if v > slots && bad.is_none() {
                bad = Some(format!("{c}.ring.occ = {v} > {slots} slots at time {t}"));
            }
        }
    }
    if checked > 0 {
        out.push(CheckResult { name: "ring_capacity", ok: bad.is_none(), detail: bad.unwrap_or(format!("{checked} occupancy changes within capacity on {} chiplets", chiplets.len())) });
    }

    // --- trajectory visits
    let mut visits: BTreeMap<(u64, u64), BTreeMap<String, u32>> = BTreeMap::new();
    let mut experts_on: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
    let mut m_of: BTreeMap<u64, u64> = BTreeMap::new();
    let mut have = false;
    for c in &chiplets {
        let (Some(&st), Some(&e), Some(&k)) =
            (names.get(&format!("{c}.ctrl.pe_starts")), names.get(&format!("{c}.ctrl.pe_expert")), names.get(&format!("{c}.ctrl.pe_k")))
        else {
            continue;
        };
        have = true;
        let (es, ks) = (series(&w, e), series(&w, k));
        let mut last = 0;
        for (t, n) in series(&w, st) {
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
            *m = (*m).max(kk + 1);
        }
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
    if let (Some(&g), Some(&s), Some(&icv)) = (names.get("top.pkg.iodie.grants"), names.get("top.pkg.iodie.grant_start"), names.get("top.pkg.iodie.icv")) {
        let (starts, icvs) = (series(&w, s), series(&w, icv));
        let mut bad: Option<String> = None;
        let mut n = 0;
        for (t, _) in series(&w, g).into_iter().filter(|&(_, v)| v > 0) {
            n += 1;
            let (c, v) = (at(&starts, t), before(&icvs, t));
            if v >> c & 1 == 0 && bad.is_none() {
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
    for (n, &cls) in names.iter().filter(|(n, _)| n.ends_with(".class") && n.contains(".link_")) {
        let Some((die, link)) = n.strip_suffix(".class").and_then(|p| p.rsplit_once('.')) else { continue };
        let Some(&idle) = names.get(&format!("{die}.map.{link}.idle")) else { continue };
        links += 1;
        let idle = series(&w, idle);
        let cold = names.get(&format!("{die}.map.{link}.cold")).map(|&c| series(&w, c));
        cold_links += cold.is_some() as u64;
        for (t, v) in series(&w, cls) {
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
            if at(&idle, t) >> (v - 1) & 1 == 1 && bad.is_none() {
                let what = ["all-reduce", "dispatch", "combine", "migration (Local)", "migration (Global)"].get(v as usize - 1).copied().unwrap_or("unknown");
                bad = Some(format!("{die}.{link} carried {what} traffic (class {v}) at time {t}, where the mapping marks it idle"));
            }
        }
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
        return Err(WaveError::Format {
            what: format!("{}: no package signals (top.pkg.c_R_C.ring.occ, .ctrl.pe_starts, top.pkg.iodie.icv) nor wafer links (top.wafer.….link_X.class) to check", path.display()),
        });
    }
    Ok(out)
}
