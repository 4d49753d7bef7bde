//! Reading waveforms back through wellen (VCD and FST alike): summary statistics, a
//! first-difference diff, and the scope list.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use wellen::simple::Waveform;
use wellen::{
    LoadOptions, Signal, SignalRef, SignalValueRef, States, Time, TimescaleUnit, WellenError,
};

use crate::{Result, WaveError};

/// How many signals [`WaveSummary::busiest`] lists.
const BUSIEST: usize = 10;

fn map_err(path: &Path, e: WellenError) -> WaveError {
    match e {
        WellenError::Io(e) => WaveError::Io(e),
        other => WaveError::parse(path, other),
    }
}

/// wellen `expect`s that the file opens; check first so a missing or unreadable file is an
/// error naming the path, not a panic.
pub(crate) fn check_readable(path: &Path) -> Result<()> {
    std::fs::File::open(path).map(drop).map_err(|e| WaveError::Parse { path: path.to_path_buf(), what: format!("cannot open: {e}") })
}

/// Runs a reader over `path` with any panic inside the dependency (wellen parses in worker
/// threads and may panic on malformed input) turned into a `WaveError::Parse` naming the
/// file. The panic hook is silenced for the call so stderr keeps a one-line message.
pub(crate) fn contained<T>(path: &Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
    use std::sync::Mutex;
    static HOOK: Mutex<()> = Mutex::new(());
    let _guard = HOOK.lock().unwrap_or_else(|e| e.into_inner());
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(prev);
    match r {
        Ok(r) => r,
        Err(p) => {
            let msg = p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_else(|| "reader panicked".into());
            let msg = msg.lines().next().unwrap_or("").to_string();
            Err(WaveError::Parse { path: path.to_path_buf(), what: format!("malformed waveform (reader failed: {msg})") })
        }
    }
}

/// Reads a whole waveform: the file is classified and checked first
/// ([`crate::vcd_check::check_file`]), then its header is bounded ([`bound_header`]), and
/// only then is the body read. Every call into the reader is inside [`contained`].
pub(crate) fn load(path: &Path) -> Result<Waveform> {
    check_readable(path)?;
    crate::vcd_check::check_file(path)?;
    contained(path, || {
        bound_header(path)?;
        wellen::simple::read(path).map_err(|e| map_err(path, e))
    })
}

/// Full signal names may total this many bytes per byte of the file (the checkers and the
/// diff hold every full name; a deep scope path repeated over many signals multiplies), on
/// top of [`NAME_SLACK`].
const NAME_BYTES_PER_BYTE: u64 = 64;
const NAME_SLACK: u64 = 1 << 24;

/// Bounds what the header declares before the body is read: every signal at most
/// `MAX_WIDTH` bits wide (the reader stores each change at full width; an FST's widths are
/// in its compressed hierarchy, so only the parsed header shows them), scopes at most
/// `MAX_DEPTH` deep, and all full signal names together proportional to the file.
pub(crate) fn bound_header(path: &Path) -> Result<()> {
    use crate::vcd_check::{MAX_DEPTH, MAX_WIDTH};
    let file_len = std::fs::metadata(path)?.len();
    let header = wellen::viewers::read_header_from_file(path, &LoadOptions::default()).map_err(|e| map_err(path, e))?;
    let h = &header.hierarchy;
    let refuse = |what: String| Err(WaveError::Parse { path: path.to_path_buf(), what });
    let mut stack: Vec<(wellen::ScopeRef, usize)> = h.scopes().map(|s| (s, 1)).collect();
    while let Some((s, depth)) = stack.pop() {
        if depth > MAX_DEPTH {
            return refuse(format!("scope {} nested more than {MAX_DEPTH} deep", h[s].name(h)));
        }
        stack.extend(h[s].scopes(h).map(|c| (c, depth + 1)));
    }
    let budget = file_len.saturating_mul(NAME_BYTES_PER_BYTE).saturating_add(NAME_SLACK);
    let mut names = 0u64;
    for v in h.all_vars() {
        let full = h[v].full_name(h);
        if let Some(w) = h[v].length(h).filter(|&w| w == 0 || w > MAX_WIDTH) {
            return refuse(format!("signal {full} is {w} bits wide (allowed 1..={MAX_WIDTH})"));
        }
        names += full.len() as u64;
        if names > budget {
            return refuse(format!("full signal names total more than {budget} bytes ({NAME_BYTES_PER_BYTE} per byte of the file)"));
        }
    }
    Ok(())
}

fn timescale(w: &Waveform) -> String {
    let Some(ts) = w.hierarchy().timescale() else {
        return "unknown".into();
    };
    let unit = match ts.unit {
        TimescaleUnit::ZeptoSeconds => "zs",
        TimescaleUnit::AttoSeconds => "as",
        TimescaleUnit::FemtoSeconds => "fs",
        TimescaleUnit::PicoSeconds => "ps",
        TimescaleUnit::NanoSeconds => "ns",
        TimescaleUnit::MicroSeconds => "us",
        TimescaleUnit::MilliSeconds => "ms",
        TimescaleUnit::Seconds => "s",
        TimescaleUnit::Unknown => "?",
    };
    format!("{}{unit}", ts.factor)
}

/// Full dotted name -> (width, signal) of every variable. Loads all signals.
type VarMap = BTreeMap<String, (Option<u32>, SignalRef)>;

/// The [`VarMap`] of a waveform, after loading all its signals.
fn signals(w: &mut Waveform) -> VarMap {
    let h = w.hierarchy();
    let vars: BTreeMap<_, _> = h
        .all_vars()
        .map(|v| (h[v].full_name(h), (h[v].length(h), h[v].signal_ref())))
        .collect();
    let mut refs: Vec<SignalRef> = vars.values().map(|(_, s)| *s).collect();
    refs.sort();
    refs.dedup();
    w.load_signals_multi_threaded(&refs);
    vars
}

fn changes(w: &Waveform, s: SignalRef) -> u64 {
    w.get_signal(s).map_or(0, |s| s.time_indices().len() as u64)
}

/// Summary of one waveform file (`waferstream wave stats F`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WaveSummary {
    pub signals: usize,
    pub scopes: usize,
    /// First and last time in the file, in `timescale` units.
    pub start_time: u64,
    pub end_time: u64,
    pub timescale: String,
    /// Value changes over all signals; the initial value of a signal counts as one.
    pub changes: u64,
    /// Up to 10 signals with the most changes, most first (ties by name).
    pub busiest: Vec<(String, u64)>,
}

pub fn stats(path: &Path) -> Result<WaveSummary> {
    let mut w = load(path)?;
    contained(path, move || stats_of(&mut w))
}

fn stats_of(w: &mut Waveform) -> Result<WaveSummary> {

    let vars = signals(w);
    let mut per_signal: Vec<(String, u64)> = vars
        .into_iter()
        .map(|(name, (_, s))| (name, changes(w, s)))
        .collect();
    let total = per_signal.iter().map(|(_, n)| n).sum();
    let signals = per_signal.len();
    per_signal.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    per_signal.truncate(BUSIEST);
    let tt = w.time_table();
    Ok(WaveSummary {
        signals,
        scopes: w.hierarchy().all_scopes().count(),
        start_time: tt.first().copied().unwrap_or(0),
        end_time: tt.last().copied().unwrap_or(0),
        timescale: timescale(w),
        changes: total,
        busiest: per_signal,
    })
}

impl fmt::Display for WaveSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "signals  {} in {} scopes", self.signals, self.scopes)?;
        writeln!(
            f,
            "time     {} .. {} (x {})",
            self.start_time, self.end_time, self.timescale
        )?;
        writeln!(f, "changes  {}", self.changes)?;
        if !self.busiest.is_empty() {
            writeln!(f, "busiest:")?;
            let w = self.busiest[0].1.to_string().len();
            for (name, n) in &self.busiest {
                writeln!(f, "  {n:>w$}  {name}")?;
            }
        }
        Ok(())
    }
}

/// The first place two waveforms disagree.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WaveDiff {
    /// Full dotted signal name.
    pub signal: String,
    /// In file time units (ps for files from this crate).
    pub time: u64,
    /// Values as bit strings, `-` where the file has no value yet.
    pub a: String,
    pub b: String,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DiffResult {
    Same {
        signals: usize,
        changes: u64,
    },
    Differ(WaveDiff),
    /// Signal sets, widths or timescales differ; `what` names the first few.
    Structure {
        what: String,
    },
}

impl fmt::Display for DiffResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DiffResult::Same { signals, changes } => {
                write!(f, "same: {signals} signals, {changes} changes")
            }
            DiffResult::Differ(d) => write!(
                f,
                "first difference at time {}: {}\n  a: {}\n  b: {}",
                d.time, d.signal, d.a, d.b
            ),
            DiffResult::Structure { what } => write!(f, "different structure: {what}"),
        }
    }
}

/// Compares two waveforms (any mix of VCD and FST) by full signal name. Reports the first
/// differing (time, signal) in time order, ties broken by name.
pub fn diff(a: &Path, b: &Path) -> Result<DiffResult> {
    let (wa, wb) = (load(a)?, load(b)?);
    contained(a, move || diff_of(wa, wb))
}

fn diff_of(mut wa: Waveform, mut wb: Waveform) -> Result<DiffResult> {
    let (ts_a, ts_b) = (timescale(&wa), timescale(&wb));
    if ts_a != ts_b {
        return Ok(DiffResult::Structure {
            what: format!("timescale {ts_a} vs {ts_b}"),
        });
    }
    let (va, vb) = (signals(&mut wa), signals(&mut wb));
    if let Some(what) = structure_difference(&va, &vb) {
        return Ok(DiffResult::Structure { what });
    }
    let mut first: Option<WaveDiff> = None;
    let mut total = 0;
    for (name, (_, sa)) in &va {
        let (sa, sb) = (wa.get_signal(*sa), wb.get_signal(vb[name].1));
        total += sa.map_or(0, |s| s.time_indices().len() as u64);
        // Names are visited in order, so a strictly earlier time is needed to win a tie.
        let before = first.as_ref().map_or(Time::MAX, |d| d.time);
        if let Some((time, a, b)) =
            first_difference(sa, wa.time_table(), sb, wb.time_table(), before)
        {
            first = Some(WaveDiff {
                signal: name.clone(),
                time,
                a,
                b,
            });
        }
    }
    Ok(match first {
        Some(d) => DiffResult::Differ(d),
        None => DiffResult::Same {
            signals: va.len(),
            changes: total,
        },
    })
}

fn structure_difference(a: &VarMap, b: &VarMap) -> Option<String> {
    fn names<'m>(it: impl Iterator<Item = &'m String>) -> String {
        let all: Vec<&String> = it.collect();
        let shown: Vec<&str> = all.iter().take(5).map(|s| s.as_str()).collect();
        let more = if all.len() > 5 {
            format!(" (+{} more)", all.len() - 5)
        } else {
            String::new()
        };
        format!("{}{more}", shown.join(", "))
    }
    let only_a: Vec<_> = a.keys().filter(|n| !b.contains_key(*n)).collect();
    let only_b: Vec<_> = b.keys().filter(|n| !a.contains_key(*n)).collect();
    let mut parts = Vec::new();
    if !only_a.is_empty() {
        parts.push(format!("only in a: {}", names(only_a.into_iter())));
    }
    if !only_b.is_empty() {
        parts.push(format!("only in b: {}", names(only_b.into_iter())));
    }
    if parts.is_empty() {
        let widths: Vec<String> = a
            .iter()
            .filter(|(n, (w, _))| b[*n].0 != *w)
            .map(|(n, (w, _))| {
                let bits = |w: &Option<u32>| w.map_or("real/string".to_string(), |w| format!("{w} bits"));
                format!("{n} is {} in a, {} in b", bits(w), bits(&b[n].0))
            })
            .take(5)
            .collect();
        if !widths.is_empty() {
            parts.push(widths.join("; "));
        }
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// Earliest time before `before` at which the two signals hold different values.
fn first_difference(
    a: Option<&Signal>,
    ta: &[Time],
    b: Option<&Signal>,
    tb: &[Time],
    before: Time,
) -> Option<(Time, String, String)> {
    let (mut ia, mut ib) = (timed(a, ta).peekable(), timed(b, tb).peekable());
    let (mut va, mut vb): (Option<SignalValueRef>, Option<SignalValueRef>) = (None, None);
    loop {
        let t = match (ia.peek(), ib.peek()) {
            (None, None) => return None,
            (Some(x), None) => x.0,
            (None, Some(y)) => y.0,
            (Some(x), Some(y)) => x.0.min(y.0),
        };
        if t >= before {
            return None;
        }
        // Several changes at one time (e.g. $dumpvars then a change): the last one counts.
        while let Some((_, v)) = ia.next_if(|(ti, _)| *ti <= t) {
            va = Some(v);
        }
        while let Some((_, v)) = ib.next_if(|(ti, _)| *ti <= t) {
            vb = Some(v);
        }
        if !same_value(va, vb) {
            let show =
                |v: Option<SignalValueRef>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
            return Some((t, show(va), show(vb)));
        }
    }
}

/// Equal values, where "no value yet" equals all-`x`: an FST written with a window holds
/// `x` before the window start (the format starts every file at time 0), the VCD nothing.
fn same_value(a: Option<SignalValueRef>, b: Option<SignalValueRef>) -> bool {
    fn unknown(v: Option<SignalValueRef>) -> bool {
        match v {
            None => true,
            Some(SignalValueRef::BitVec(bv)) if bv.states() != States::Two => {
                bv.iter_msb_to_lsb().all(|bit| bit.as_ascii() == 'x')
            }
            Some(_) => false,
        }
    }
    a == b || (unknown(a) && unknown(b))
}

/// A signal's changes with their times (nothing for a signal without data).
fn timed<'s>(
    s: Option<&'s Signal>,
    tt: &'s [Time],
) -> impl Iterator<Item = (Time, SignalValueRef<'s>)> {
    s.into_iter()
        .flat_map(|s| s.iter_changes())
        .map(move |(i, v)| (tt[i as usize], v))
}

/// Full dotted names of all scopes, sorted. Reads only the header.
pub fn list_scopes(path: &Path) -> Result<Vec<String>> {
    check_readable(path)?;
    crate::vcd_check::check_file(path)?;
    contained(path, || {
        bound_header(path)?;
        let header = wellen::viewers::read_header_from_file(path, &LoadOptions::default()).map_err(|e| map_err(path, e))?;
        let h = &header.hierarchy;
        let mut scopes: Vec<String> = h.all_scopes().map(|s| h[s].full_name(h)).collect();
        scopes.sort();
        Ok(scopes)
    })
}
