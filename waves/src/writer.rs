//! Streaming VCD/FST writer.
//!
//! The writer owns the filter decisions (made once at `create`), the last value of every
//! selected signal, and the window/initial-dump logic; the two sinks below only translate
//! "timestamp" and "value" into the `vcd` / `fst-writer` crates.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use fst_writer::{
    FstBodyWriter, FstFileType, FstInfo, FstScopeType, FstSignalId, FstSignalType, FstVarDirection,
    FstVarType, FstWriteError,
};

use crate::{Result, SignalDecl, WaveError, WaveFilter, WaveFormat};

/// Written into the file headers instead of a date/tool version, so that the same calls
/// always produce the same bytes.
const GENERATOR: &str = "waferstream-waves";
/// fst-writer keeps a whole value-change block in memory; cut a block at this size.
const FST_FLUSH_AT: usize = 4 << 20;
/// The ASCII bits of each byte value, most significant first.
const BYTE_BITS: [[u8; 8]; 256] = {
    let mut t = [[0u8; 8]; 256];
    let mut b = 0;
    while b < 256 {
        let mut i = 0;
        while i < 8 {
            t[b][i] = b'0' + ((b >> (7 - i)) & 1) as u8;
            i += 1;
        }
        b += 1;
    }
    t
};
/// Marks a declared signal that the filter dropped.
const UNSELECTED: u32 = u32::MAX;
/// VCD identifier codes are base-94; 5 characters cover 7e9 signals.
const MAX_ID_LEN: usize = 5;

/// The writer's state and its file's sink: the whole writer, on the caller's thread or on
/// the `wave-writer` thread ([`WaveWriter`]).
struct WriterCore {
    out: Sink,
    period_ps: u64,
    /// Per declared signal: its slot among the selected signals, or `UNSELECTED`.
    slot_of: Box<[u32]>,
    /// Per slot: bit width and the last value seen (also before the window opens).
    width: Box<[u32]>,
    last: Box<[u64]>,
    /// Cycles, inclusive start, exclusive end.
    window: (u64, u64),
    /// The initial value dump ($dumpvars) has been written at the window start.
    dumped: bool,
    /// Cycle of the last timestamp written.
    time_cycle: Option<u64>,
    /// Highest cycle passed to `change` (for selected signals).
    cycle_seen: u64,
}

impl WriterCore {
    /// See [`WaveWriter::create_from`].
    pub fn create_from(
        path: &Path,
        format: WaveFormat,
        period_ps: u64,
        signals: impl IntoIterator<Item = SignalDecl>,
        filter: &WaveFilter,
    ) -> Result<Self> {
        if period_ps == 0 {
            return Err(WaveError::Format {
                what: "clock period must be at least 1 ps".into(),
            });
        }
        let filter = filter.compile()?;
        let mut slot_of = Vec::new();
        // The selected names go straight into the scope tree (each scope name stored once):
        // a few tens of bytes per selected signal instead of its full `SignalDecl`.
        let mut tree = ScopeTree::new();
        for d in signals {
            check_decl(&d)?;
            if filter.selects(&d) {
                slot_of.push(tree.vars.len() as u32);
                tree.add(d);
            } else {
                slot_of.push(UNSELECTED);
            }
        }
        tree.check_unique()?;
        let sink = match format {
            WaveFormat::Vcd => Sink::Vcd(VcdSink::create(path, &tree)?),
            WaveFormat::Fst => Sink::Fst(FstSink::create(path, &tree)?),
        };
        let width: Box<[u32]> = tree.vars.iter().map(|v| v.1).collect();
        let n = width.len();
        Ok(WriterCore {
            out: sink,
            period_ps,
            slot_of: slot_of.into(),
            width,
            last: vec![0; n].into(),
            window: filter.window(),
            dumped: false,
            time_cycle: None,
            cycle_seen: 0,
        })
    }

    /// Value change of signal `sig` at `cycle`. Calls come in non-decreasing cycle order;
    /// within one cycle, in increasing `sig` order. Bits above the signal width are ignored.
    #[inline]
    pub fn change(&mut self, cycle: u64, sig: usize, value: u64) -> Result<()> {
        let Some(slot) = admit(&self.slot_of, &mut self.cycle_seen, cycle, sig)? else {
            return Ok(());
        };
        let value = value & mask(self.width[slot]);
        if cycle < self.window.0 {
            // Only remembered, so the dump at the window start is self-contained.
            self.last[slot] = value;
            return Ok(());
        }
        if cycle >= self.window.1 {
            return Ok(());
        }
        if !self.dumped {
            if cycle == self.window.0 {
                // The first in-window cycle is still being reported: it ends up in the dump.
                self.last[slot] = value;
                return Ok(());
            }
            self.dump(self.window.0)?;
        }
        self.write(cycle, slot, value)
    }

    /// A run of changes, as [`WaveWriter::change`] one by one. Inside the window, after the
    /// initial dump, a change of a selected signal takes a short path inlined here (a traced
    /// package run hands over tens of millions of changes).
    pub fn change_run(&mut self, run: &[(u64, u32, u64)]) -> Result<()> {
        for &(cycle, sig, value) in run {
            let slot = self.slot_of.get(sig as usize).copied().unwrap_or(UNSELECTED);
            if !(self.dumped && cycle >= self.cycle_seen && cycle < self.window.1 && slot != UNSELECTED) {
                // Out of range, out of order, outside the window or before the dump: the
                // general path (which also says what is wrong).
                self.change(cycle, sig as usize, value)?;
                continue;
            }
            let slot = slot as usize;
            self.cycle_seen = cycle;
            self.write(cycle, slot, value & mask(self.width[slot]))?;
        }
        Ok(())
    }

    /// An in-window change of `slot` to `value` (masked), after the dump: written unless it
    /// equals the last value, behind a timestamp if it is the cycle's first.
    #[inline(always)]
    fn write(&mut self, cycle: u64, slot: usize, value: u64) -> Result<()> {
        if self.last[slot] == value {
            return Ok(());
        }
        self.last[slot] = value;
        if self.time_cycle != Some(cycle) {
            self.timestamp(cycle)?;
        }
        self.out.value(slot, self.width[slot], value)
    }

    /// Flushes and closes the file. The last timestamp is `end_cycle * period_ps`, clipped to
    /// the window end, so viewers show the final values for their full duration. If nothing
    /// was written yet (no change after the window start), the value dump is written now, at
    /// the window start or `end_cycle`, whichever is earlier.
    pub fn finish(mut self, end_cycle: u64) -> Result<()> {
        let end = end_cycle.min(self.window.1);
        if !self.dumped {
            self.dump(self.window.0.min(end))?;
        }
        if self.time_cycle.is_some_and(|t| t < end) {
            self.timestamp(end)?;
        }
        self.out.finish()
    }

    /// Writes the current value of every selected signal at `cycle` (`$dumpvars` in VCD).
    fn dump(&mut self, cycle: u64) -> Result<()> {
        self.dumped = true;
        self.timestamp(cycle)?;
        self.out.begin_dump()?;
        for slot in 0..self.last.len() {
            self.out.value(slot, self.width[slot], self.last[slot])?;
        }
        self.out.end_dump()
    }

    fn timestamp(&mut self, cycle: u64) -> Result<()> {
        self.time_cycle = Some(cycle);
        let ps = cycle
            .checked_mul(self.period_ps)
            .ok_or_else(|| WaveError::Format {
                what: format!(
                    "cycle {cycle} × {} ps overflows the 64-bit time",
                    self.period_ps
                ),
            })?;
        self.out.timestamp(ps)
    }
}

/// Where a change of declared signal `sig` at `cycle` goes: its slot, `None` when the filter
/// dropped the signal, or why it is refused (an index out of range; a cycle before the last
/// one seen, which would send time backwards in the file). Advances `cycle_seen`.
#[inline]
fn admit(slot_of: &[u32], cycle_seen: &mut u64, cycle: u64, sig: usize) -> Result<Option<usize>> {
    let slot = match slot_of.get(sig) {
        Some(&UNSELECTED) => return Ok(None),
        Some(&s) => s as usize,
        None => {
            return Err(WaveError::Signal {
                what: format!("signal index {sig} out of range ({} declared)", slot_of.len()),
            })
        }
    };
    // One compare per call buys a clear error instead of a file with time going backwards.
    if cycle < *cycle_seen {
        return Err(WaveError::Format {
            what: format!("change at cycle {cycle} after cycle {}", *cycle_seen),
        });
    }
    *cycle_seen = cycle;
    Ok(Some(slot))
}

#[inline]
fn mask(width: u32) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

/// Rejects declarations no viewer could show unambiguously (each valid, names unique).
fn check_decls(signals: &[SignalDecl]) -> Result<()> {
    // (scope, name) pairs by reference: no '.' inside names (checked), so equal pairs are
    // exactly equal full names, without allocating a string per signal.
    let mut names: HashSet<(&[String], &str)> = HashSet::with_capacity(signals.len());
    for d in signals {
        check_decl(d)?;
        if !names.insert((&d.scope, &d.name)) {
            return Err(WaveError::Signal {
                what: format!("`{}`: declared twice", d.full_name()),
            });
        }
    }
    Ok(())
}

/// One declaration: width 1..=64, at least one scope, no empty, blank or dotted names.
fn check_decl(d: &SignalDecl) -> Result<()> {
    let bad = |why: &str| {
        Err(WaveError::Signal {
            what: format!("`{}`: {why}", d.full_name()),
        })
    };
    if !(1..=64).contains(&d.width) {
        return bad(&format!("width {} is outside 1..=64", d.width));
    }
    if d.scope.is_empty() {
        return bad("signals need at least one enclosing scope");
    }
    if d.name.is_empty() || d.scope.iter().any(|s| s.is_empty()) {
        return bad("empty scope or signal name");
    }
    if let Some(c) = d
        .scope
        .iter()
        .chain([&d.name])
        .flat_map(|s| s.chars())
        .find(|c| c.is_whitespace() || *c == '.')
    {
        return bad(&format!("names may not contain {c:?}"));
    }
    Ok(())
}

/// Scope hierarchy of the selected signals: one node per module instance, children and
/// signals in order of first declaration. Owns the names, so declarations can be streamed.
struct ScopeTree {
    /// Node 0 is the unnamed root.
    nodes: Vec<ScopeNode>,
    /// Per slot: signal name and width.
    vars: Vec<(Box<str>, u32)>,
    /// (parent node, scope name) -> node.
    child: HashMap<(usize, Box<str>), usize>,
    /// Scope path of the last signal added, as nodes (signals come grouped by scope, so most
    /// lookups end here without touching `child`).
    last_path: Vec<usize>,
}

struct ScopeNode {
    name: Box<str>,
    items: Vec<Item>,
}

enum Item {
    Scope(usize),
    /// Slot of a selected signal.
    Var(usize),
}

impl ScopeTree {
    fn new() -> Self {
        ScopeTree {
            nodes: vec![ScopeNode {
                name: "".into(),
                items: Vec::new(),
            }],
            vars: Vec::new(),
            child: HashMap::new(),
            last_path: Vec::new(),
        }
    }

    /// Adds a selected signal as the next slot.
    fn add(&mut self, d: SignalDecl) {
        let mut cur = 0;
        for (depth, name) in d.scope.iter().enumerate() {
            if let Some(&n) = self.last_path.get(depth) {
                if *self.nodes[n].name == **name && (depth == 0 || self.last_path[depth - 1] == cur) {
                    cur = n;
                    continue;
                }
            }
            self.last_path.truncate(depth);
            let nodes = &mut self.nodes;
            cur = *self.child.entry((cur, name.as_str().into())).or_insert_with(|| {
                nodes.push(ScopeNode {
                    name: name.as_str().into(),
                    items: Vec::new(),
                });
                let id = nodes.len() - 1;
                nodes[cur].items.push(Item::Scope(id));
                id
            });
            self.last_path.push(cur);
        }
        self.last_path.truncate(d.scope.len());
        let slot = self.vars.len();
        self.nodes[cur].items.push(Item::Var(slot));
        self.vars.push((d.name.into_boxed_str(), d.width));
    }

    /// Signal names are unique within their scope (= unique full names, as names hold no
    /// '.').
    fn check_unique(&self) -> Result<()> {
        let mut names: Vec<&str> = Vec::new();
        for (id, node) in self.nodes.iter().enumerate() {
            names.clear();
            names.extend(node.items.iter().filter_map(|i| match *i {
                Item::Var(slot) => Some(&*self.vars[slot].0),
                Item::Scope(_) => None,
            }));
            names.sort_unstable();
            if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
                return Err(WaveError::Signal {
                    what: format!("`{}.{}`: declared twice", self.path_of(id), w[0]),
                });
            }
        }
        Ok(())
    }

    /// Dotted path of a node (for messages).
    fn path_of(&self, node: usize) -> String {
        fn find(t: &ScopeTree, at: usize, want: usize, path: &mut Vec<usize>) -> bool {
            if at == want {
                return true;
            }
            for item in &t.nodes[at].items {
                if let Item::Scope(c) = *item {
                    path.push(c);
                    if find(t, c, want, path) {
                        return true;
                    }
                    path.pop();
                }
            }
            false
        }
        let mut path = Vec::new();
        find(self, 0, node, &mut path);
        path.iter().map(|&n| &*self.nodes[n].name).collect::<Vec<_>>().join(".")
    }

    /// Depth-first declaration order: `Open(name)`, `Var(slot)`, `Close`.
    fn events(&self) -> Vec<Event<'_>> {
        let mut out = Vec::new();
        self.push_events(0, &mut out);
        out
    }

    fn push_events<'a>(&'a self, node: usize, out: &mut Vec<Event<'a>>) {
        for item in &self.nodes[node].items {
            match *item {
                Item::Var(slot) => out.push(Event::Var(slot)),
                Item::Scope(id) => {
                    out.push(Event::Open(&self.nodes[id].name));
                    self.push_events(id, out);
                    out.push(Event::Close);
                }
            }
        }
    }
}

enum Event<'a> {
    Open(&'a str),
    Var(usize),
    Close,
}

/// Streaming waveform writer. Signals are declared up front; their order is the signal
/// index used by [`WaveWriter::change`].
///
/// On a machine with more than one core, a `wave-writer` thread owns the writer's state and
/// its file (window, filter, last values, VCD text or fst-writer's encoding, the I/O) and takes
/// the changes in batches over a bounded channel, so a simulation hands over its changes and
/// goes on. The thread applies the same changes in the same order: the bytes do not depend on
/// it. A bad signal index or a change that goes back in time is refused by `change` at once; a
/// write error (and anything wrong inside a `change_run`) is returned by the next call that
/// hands over a batch, or by `finish`.
pub struct WaveWriter {
    /// Per declared signal: its slot among the selected signals, or `UNSELECTED`.
    slot_of: Box<[u32]>,
    window: (u64, u64),
    selected: usize,
    /// Writer thread: the highest cycle passed to `change` for a selected signal (so a change
    /// back in time is refused at once). Whether any change was passed at all.
    cycle_seen: u64,
    started: bool,
    mode: Mode,
}

enum Mode {
    Inline(Box<WriterCore>),
    Background(Background),
    /// Only while `set_background` swaps one for the other.
    Swapping,
}

/// Changes per batch: 8 K (192 KB), so a batch is still in cache when the thread takes it,
/// and large enough that the channel costs nothing per change.
const CHANGES_PER_BATCH: usize = 1 << 13;
/// Batches in flight: the caller runs ahead of the writer by at most this many.
const BATCHES_IN_FLIGHT: usize = 16;

type Batch = Vec<(u64, u32, u64)>;

struct Background {
    batch: Batch,
    /// `None` once the thread has been told to stop.
    tx: Option<crossbeam::channel::Sender<Batch>>,
    /// Emptied batches coming back, so a run allocates `BATCHES_IN_FLIGHT + 2` of them.
    recycled: crossbeam::channel::Receiver<Batch>,
    /// Hands the writer back when the channel closes, or the first error it hit.
    thread: Option<std::thread::JoinHandle<Result<Box<WriterCore>>>>,
}

impl WaveWriter {
    /// `period_ps` = clock period in ps; timestamps are `cycle * period_ps` with a 1 ps
    /// timescale.
    pub fn create(path: &Path, format: WaveFormat, period_ps: u64, signals: &[SignalDecl], filter: &WaveFilter) -> Result<Self> {
        check_decls(signals)?;
        Self::create_from(path, format, period_ps, signals.iter().cloned(), filter)
    }

    /// Like [`WaveWriter::create`], with the declarations streamed: only the selected ones
    /// are kept (until the header is written), so a narrow glob over a huge design costs 4
    /// bytes per declared signal instead of its name. Each declaration is checked; names
    /// must be unique among the selected signals.
    pub fn create_from(path: &Path, format: WaveFormat, period_ps: u64, signals: impl IntoIterator<Item = SignalDecl>, filter: &WaveFilter) -> Result<Self> {
        let core = WriterCore::create_from(path, format, period_ps, signals, filter)?;
        let mut w = WaveWriter {
            slot_of: core.slot_of.clone(),
            window: core.window,
            selected: core.width.len(),
            cycle_seen: 0,
            started: false,
            mode: Mode::Inline(Box::new(core)),
        };
        // A second core writes the file; on one core that thread would only add switches.
        if std::thread::available_parallelism().is_ok_and(|n| n.get() > 1) {
            w.set_background(true)?;
        }
        Ok(w)
    }

    /// Formats and writes the file on a writer thread (`true`; the default on a machine with
    /// more than one core) or on the caller's thread. The bytes are the same either way. Only
    /// before the first change.
    pub fn set_background(&mut self, on: bool) -> Result<()> {
        if self.started {
            return Err(WaveError::Format { what: "set_background after the first change".into() });
        }
        self.mode = match (std::mem::replace(&mut self.mode, Mode::Swapping), on) {
            (Mode::Inline(core), true) => Background::start(core),
            (Mode::Background(b), false) => Mode::Inline(b.stop()?),
            (mode, _) => mode,
        };
        Ok(())
    }

    /// The cycle window (start inclusive, end exclusive; `(0, u64::MAX)` without one).
    pub fn window(&self) -> (u64, u64) {
        self.window
    }

    /// Whether declared signal `sig` passed the glob filter (its changes are written).
    pub fn selects(&self, sig: usize) -> bool {
        self.slot_of.get(sig).is_some_and(|&s| s != UNSELECTED)
    }

    /// Number of signals that passed the glob filter.
    pub fn selected_count(&self) -> usize {
        self.selected
    }

    /// Value change of signal `sig` at `cycle`. Calls come in non-decreasing cycle order;
    /// within one cycle, in increasing `sig` order. Bits above the signal width are ignored.
    pub fn change(&mut self, cycle: u64, sig: usize, value: u64) -> Result<()> {
        self.started = true;
        match &mut self.mode {
            Mode::Inline(core) => core.change(cycle, sig, value),
            // The thread's writer checks again; checked here too, the refusal comes at once.
            Mode::Background(b) => match admit(&self.slot_of, &mut self.cycle_seen, cycle, sig)? {
                Some(_) => b.push(&[(cycle, sig as u32, value)]),
                None => Ok(()),
            },
            Mode::Swapping => unreachable!("the mode is only swapped inside set_background"),
        }
    }

    /// A run of changes, as [`WaveWriter::change`] one by one (on the writer thread, an error
    /// in the run is returned by a later call).
    pub fn change_run(&mut self, run: &[(u64, u32, u64)]) -> Result<()> {
        if run.is_empty() {
            return Ok(());
        }
        self.started = true;
        match &mut self.mode {
            Mode::Inline(core) => core.change_run(run),
            Mode::Background(b) => b.push(run),
            Mode::Swapping => unreachable!("the mode is only swapped inside set_background"),
        }
    }

    /// The changes in `v`, as [`WaveWriter::change_run`], leaving `v` empty. On the writer
    /// thread a run of at least a batch goes over as it is: `v` becomes the batch and gets a
    /// recycled vector back, so a traced package's log is handed over without a copy.
    pub fn change_vec(&mut self, v: &mut Vec<(u64, u32, u64)>) -> Result<()> {
        match &mut self.mode {
            Mode::Background(b) if v.len() >= CHANGES_PER_BATCH => {
                self.started = true;
                b.send_vec(v)
            }
            _ => {
                let r = self.change_run(v);
                v.clear();
                r
            }
        }
    }

    /// Flushes and closes the file. The last timestamp is `end_cycle * period_ps`, clipped to
    /// the window end, so viewers show the final values for their full duration. If nothing
    /// was written yet (no change after the window start), the value dump is written now, at
    /// the window start or `end_cycle`, whichever is earlier.
    pub fn finish(mut self, end_cycle: u64) -> Result<()> {
        match std::mem::replace(&mut self.mode, Mode::Swapping) {
            Mode::Inline(core) => core.finish(end_cycle),
            Mode::Background(b) => b.stop()?.finish(end_cycle),
            Mode::Swapping => unreachable!("the mode is only swapped inside set_background"),
        }
    }
}

impl Background {
    fn start(core: Box<WriterCore>) -> Mode {
        let (tx, rx) = crossbeam::channel::bounded::<Batch>(BATCHES_IN_FLIGHT);
        let (back_tx, recycled) = crossbeam::channel::bounded::<Batch>(BATCHES_IN_FLIGHT + 1);
        // The writer goes over only once the thread exists, so a failed spawn keeps it here.
        let (core_tx, core_rx) = crossbeam::channel::bounded::<Box<WriterCore>>(1);
        let thread = std::thread::Builder::new().name("wave-writer".into()).spawn(move || {
            let Ok(mut core) = core_rx.recv() else {
                return Err(WaveError::Format { what: "the wave-writer thread got no writer".into() });
            };
            for mut batch in rx {
                core.change_run(&batch)?;
                batch.clear();
                let _ = back_tx.try_send(batch);
            }
            Ok(core)
        });
        match thread {
            Ok(t) => match core_tx.send(core) {
                Ok(()) => Mode::Background(Background { batch: Vec::with_capacity(CHANGES_PER_BATCH), tx: Some(tx), recycled, thread: Some(t) }),
                Err(back) => Mode::Inline(back.0),
            },
            // No thread to be had (a process limit): the caller's thread writes.
            Err(_) => Mode::Inline(core),
        }
    }

    #[inline]
    fn push(&mut self, mut run: &[(u64, u32, u64)]) -> Result<()> {
        while !run.is_empty() {
            let n = run.len().min(CHANGES_PER_BATCH - self.batch.len());
            self.batch.extend_from_slice(&run[..n]);
            run = &run[n..];
            if self.batch.len() >= CHANGES_PER_BATCH {
                self.send()?;
            }
        }
        Ok(())
    }

    /// Hands `v` to the thread as one batch (after the batch being filled, so the order
    /// holds) and leaves a recycled vector in its place.
    fn send_vec(&mut self, v: &mut Batch) -> Result<()> {
        if !self.batch.is_empty() {
            self.send()?;
        }
        std::mem::swap(&mut self.batch, v);
        self.send()?;
        std::mem::swap(&mut self.batch, v);
        Ok(())
    }

    /// Hands the batch to the thread. If the thread has stopped, it stopped on an error:
    /// that error is returned.
    #[inline(never)]
    fn send(&mut self) -> Result<()> {
        let next = self.recycled.try_recv().unwrap_or_else(|_| Vec::with_capacity(CHANGES_PER_BATCH));
        let batch = std::mem::replace(&mut self.batch, next);
        let sent = self.tx.as_ref().map(|tx| tx.send(batch).is_ok());
        if sent != Some(true) {
            self.join()?;
            return Err(WaveError::Format { what: "the wave-writer thread stopped early".into() });
        }
        Ok(())
    }

    /// Sends what is left, closes the channel and takes the writer back (or the thread's
    /// error).
    fn stop(mut self) -> Result<Box<WriterCore>> {
        if !self.batch.is_empty() {
            if let Some(tx) = &self.tx {
                let _ = tx.send(std::mem::take(&mut self.batch));
            }
        }
        self.join()
    }

    fn join(&mut self) -> Result<Box<WriterCore>> {
        self.tx = None;
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            None => Err(WaveError::Format { what: "the wave-writer thread already stopped".into() }),
        }
    }
}

/// A writer dropped without `finish` (a run that stopped on an error) still writes what it
/// was given, as an inline writer's buffers do when dropped.
impl Drop for Background {
    fn drop(&mut self) {
        if self.thread.is_some() {
            if let Some(tx) = &self.tx {
                let _ = tx.send(std::mem::take(&mut self.batch));
            }
            let _ = self.join();
        }
    }
}

// One per writer, so the size difference between the variants does not matter.
#[allow(clippy::large_enum_variant)]
enum Sink {
    Vcd(VcdSink),
    Fst(FstSink),
}

impl Sink {
    fn timestamp(&mut self, ps: u64) -> Result<()> {
        match self {
            Sink::Vcd(s) => s.timestamp(ps),
            Sink::Fst(s) => s.timestamp(ps),
        }
    }

    #[inline]
    fn value(&mut self, slot: usize, width: u32, value: u64) -> Result<()> {
        match self {
            Sink::Vcd(s) => s.value(slot, width, value),
            Sink::Fst(s) => s.value(slot, width, value),
        }
    }

    fn begin_dump(&mut self) -> Result<()> {
        match self {
            Sink::Vcd(s) => {
                s.spill()?;
                Ok(s.w.begin(vcd::SimulationCommand::Dumpvars)?)
            }
            Sink::Fst(_) => Ok(()),
        }
    }

    fn end_dump(&mut self) -> Result<()> {
        match self {
            Sink::Vcd(s) => {
                s.spill()?;
                Ok(s.w.end()?)
            }
            Sink::Fst(_) => Ok(()),
        }
    }

    fn finish(self) -> Result<()> {
        match self {
            Sink::Vcd(mut s) => {
                s.spill()?;
                s.w.flush()?;
                Ok(())
            }
            Sink::Fst(s) => {
                let mut out = s.w.finish().map_err(fst_err)?;
                std::io::Write::flush(&mut out)?;
                drop(out);
                match s.first_ps {
                    Some(t) if t > 0 => set_fst_start(&s.path, t),
                    _ => Ok(()),
                }
            }
        }
    }
}

struct VcdSink {
    w: vcd::Writer<BufWriter<File>>,
    /// Per slot: the identifier code as rendered by the `vcd` crate, zero-padded to
    /// `MAX_ID_LEN` bytes, and its length.
    ids: Box<[([u8; MAX_ID_LEN], u8)]>,
    /// The body's text is assembled here and handed to `w` in large pieces: a value line is
    /// 3-12 bytes, and handing each to `BufWriter::write_all` cost a `memmove` call per line
    /// (5 % of a traced package run). Every line is written with fixed-size copies into
    /// `VCD_LINE_MAX` bytes of room, so `pos` stays at most `out.len() - VCD_LINE_MAX`.
    out: Box<[u8]>,
    pos: usize,
}

/// A sink dropped without `finish` (a run that stopped on an error) still leaves the text
/// assembled so far in the file, as the `BufWriter` underneath does.
impl Drop for VcdSink {
    fn drop(&mut self) {
        let _ = self.spill();
    }
}

/// The longest line the body writes: `b` + 64 bits + space + identifier + newline, or `#` and
/// a 20-digit time and a newline.
const VCD_LINE_MAX: usize = 1 + 64 + 1 + MAX_ID_LEN + 1;
const VCD_OUT_BYTES: usize = 1 << 20;

impl VcdSink {
    fn create(path: &Path, tree: &ScopeTree) -> Result<Self> {
        let mut w = vcd::Writer::new(BufWriter::with_capacity(1 << 16, File::create(path)?));
        // No $date: it would make the bytes depend on the wall clock.
        w.version(GENERATOR)?;
        w.timescale(1, vcd::TimescaleUnit::PS)?;
        // The slot number is the identifier code, so ids are stable whatever the tree order.
        let ids: Vec<vcd::IdCode> = (0..tree.vars.len())
            .map(|s| vcd::IdCode::from(s as u64))
            .collect();
        for ev in tree.events() {
            match ev {
                Event::Open(name) => w.add_module(name)?,
                Event::Var(slot) => {
                    let (name, width) = &tree.vars[slot];
                    w.var_def(vcd::VarType::Wire, *width, ids[slot], name, None)?
                }
                Event::Close => w.upscope()?,
            }
        }
        w.enddefinitions()?;
        let ids = ids
            .iter()
            .map(|id| {
                let s = id.to_string();
                let mut pad = [0u8; MAX_ID_LEN];
                pad[..s.len()].copy_from_slice(s.as_bytes());
                (pad, s.len() as u8)
            })
            .collect();
        Ok(VcdSink { w, ids, out: vec![0; VCD_OUT_BYTES].into_boxed_slice(), pos: 0 })
    }

    /// Hands the assembled text to the file's writer (before anything else writes to it).
    fn spill(&mut self) -> Result<()> {
        self.w.writer().write_all(&self.out[..self.pos])?;
        self.pos = 0;
        Ok(())
    }

    /// Room for one more line.
    #[inline]
    fn room(&mut self) -> Result<()> {
        if self.pos + VCD_LINE_MAX > self.out.len() {
            self.spill()?;
        }
        Ok(())
    }

    /// `#<ps>` (what `vcd::Writer::timestamp` writes), without `fmt`.
    fn timestamp(&mut self, ps: u64) -> Result<()> {
        self.room()?;
        let mut digits = [0u8; 20];
        let (mut v, mut k) = (ps, digits.len());
        loop {
            k -= 1;
            digits[k] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        let out = &mut self.out[self.pos..self.pos + VCD_LINE_MAX];
        out[0] = b'#';
        let n = digits.len() - k;
        out[1..1 + n].copy_from_slice(&digits[k..]);
        out[1 + n] = b'\n';
        self.pos += n + 2;
        Ok(())
    }

    /// Writes `0!`, `1!` or `b101 "`. `vcd::Writer`'s `change_vector` formats bit by bit
    /// through `fmt` (~250 ns per 16-bit change); this is the hot path, so the line is
    /// assembled in place with the identifier code the `vcd` crate rendered at creation.
    /// Leading zeros are implied in VCD vectors (IEEE 1364 §18.2.1); dropping them keeps small
    /// counters in wide fields cheap.
    #[inline]
    fn value(&mut self, slot: usize, width: u32, value: u64) -> Result<()> {
        self.room()?;
        let (id, id_len) = self.ids[slot];
        let out = &mut self.out[self.pos..self.pos + VCD_LINE_MAX];
        let mut n;
        if width == 1 {
            out[0] = b'0' + (value & 1) as u8;
            n = 1;
        } else {
            out[0] = b'b';
            let bits = 64 - value.leading_zeros().min(63) as usize;
            for (i, c) in out[1..1 + bits].iter_mut().enumerate() {
                *c = b'0' + ((value >> (bits - 1 - i)) & 1) as u8;
            }
            out[1 + bits] = b' ';
            n = bits + 2;
        }
        out[n..n + MAX_ID_LEN].copy_from_slice(&id);
        n += id_len as usize;
        out[n] = b'\n';
        self.pos += n + 1;
        Ok(())
    }
}

struct FstSink {
    w: FstBodyWriter<BufWriter<File>>,
    path: std::path::PathBuf,
    /// The first timestamp written (the window start, or the run's end if earlier).
    first_ps: Option<u64>,
    /// Per slot.
    ids: Box<[FstSignalId]>,
    /// Scratch for the ASCII bit string fst-writer takes.
    bits: [u8; 64],
    /// `size()` of the empty buffer: fst-writer counts 4 bytes per signal in it.
    base_size: usize,
    /// Cut a value-change block once this many bytes of changes are buffered.
    flush_at: usize,
}

impl FstSink {
    fn create(path: &Path, tree: &ScopeTree) -> Result<Self> {
        let info = FstInfo {
            start_time: 0,
            timescale_exponent: -12,
            version: GENERATOR.into(),
            // fst-writer writes this string verbatim; a real date would break determinism.
            date: String::new(),
            file_type: FstFileType::Verilog,
        };
        let mut h = fst_writer::open_fst(path, &info).map_err(fst_err)?;
        let mut ids: Vec<Option<FstSignalId>> = vec![None; tree.vars.len()];
        for ev in tree.events() {
            match ev {
                Event::Open(name) => h.scope(name, "", FstScopeType::Module),
                Event::Var(slot) => {
                    let (name, width) = &tree.vars[slot];
                    let id = h.var(
                        name,
                        FstSignalType::bit_vec(*width),
                        FstVarType::Wire,
                        FstVarDirection::Implicit,
                        None,
                    );
                    id.map(|id| ids[slot] = Some(id))
                }
                Event::Close => h.up_scope(),
            }
            .map_err(fst_err)?;
        }
        let mut w = h.finish().map_err(fst_err)?;
        let ids = ids
            .into_iter()
            .map(|id| id.expect("every slot is in the tree"))
            .collect();
        // `WaveWriter::change` passes a value only when it differs from the slot's last one,
        // which is the value fst-writer holds: its own byte compare of every change would
        // never drop one.
        w.set_deduplicate(false);
        let base_size = w.size();
        Ok(FstSink {
            w,
            path: path.to_path_buf(),
            first_ps: None,
            ids,
            bits: [b'0'; 64],
            base_size,
            flush_at: FST_FLUSH_AT,
        })
    }

    fn timestamp(&mut self, ps: u64) -> Result<()> {
        // Blocks are only cut right before a time change (fst-writer requires it). The first
        // block never holds buffered changes before its second time step, so it is never cut
        // with an empty time table (which would lose the initial values).
        if self.w.size() - self.base_size >= self.flush_at {
            self.w.flush().map_err(fst_err)?;
        }
        self.first_ps.get_or_insert(ps);
        self.w.time_change(ps).map_err(fst_err)
    }

    /// fst-writer takes the value as ASCII bits, most significant first; they are rendered a
    /// byte at a time from a table (`value` is already masked to `width`).
    #[inline]
    fn value(&mut self, slot: usize, width: u32, value: u64) -> Result<()> {
        let w = width as usize;
        let nbytes = w.div_ceil(8);
        for k in 0..nbytes {
            let byte = (value >> (8 * (nbytes - 1 - k))) as u8;
            self.bits[8 * k..8 * k + 8].copy_from_slice(&BYTE_BITS[byte as usize]);
        }
        self.w
            .signal_change(self.ids[slot], &self.bits[8 * nbytes - w..8 * nbytes])
            .map_err(fst_err)
    }
}

/// Makes a windowed FST start where its data starts, as the VCD does. fst-writer always
/// writes start time 0 into the header and the first value-change block, with an all-`x`
/// initial frame there, so readers showed a block of `x` from 0 to the window start (and
/// `wave stats` of a windowed FST and VCD disagreed). Setting both start times to the first
/// timestamp makes the first block's time table begin at its start time, so readers take the
/// values dumped there and skip the unused frame.
fn set_fst_start(path: &Path, ps: u64) -> Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::OpenOptions::new().read(true).write(true).open(path)?;
    let len = f.metadata()?.len();
    let mut at = 0u64;
    let mut head = [0u8; 9];
    let mut patched_block = false;
    while at + 9 <= len {
        f.seek(SeekFrom::Start(at))?;
        f.read_exact(&mut head)?;
        let (ty, blen) = (head[0], u64::from_be_bytes(head[1..9].try_into().unwrap()));
        // Header (0) and value-change blocks (1, 5, 8): start time right after type + length.
        if ty == 0 || (matches!(ty, 1 | 5 | 8) && !patched_block) {
            f.seek(SeekFrom::Start(at + 9))?;
            f.write_all(&ps.to_be_bytes())?;
            patched_block |= ty != 0;
        }
        if patched_block || blen == 0 {
            break;
        }
        at += 1 + blen;
    }
    if !patched_block {
        return Err(WaveError::Format { what: format!("FST {}: no value-change block to start at {ps} ps", path.display()) });
    }
    f.flush()?;
    Ok(())
}

fn fst_err(e: FstWriteError) -> WaveError {
    match e {
        FstWriteError::Io(e) => WaveError::Io(e),
        other => WaveError::Format {
            what: format!("FST: {other}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FST files cut into many value-change blocks read back like a single-block VCD.
    #[test]
    fn fst_blocks() {
        let dir = std::env::temp_dir().join(format!("waves-fst-blocks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let decls: Vec<SignalDecl> = (0..6)
            .map(|i| SignalDecl::new(["top", "blk"], format!("s{i}"), 1 + 12 * i))
            .collect();
        for window in [None, Some((40, 170))] {
            let filter = WaveFilter {
                globs: vec![],
                window,
            };
            let mut paths = Vec::new();
            for (format, name) in [(WaveFormat::Vcd, "a.vcd"), (WaveFormat::Fst, "b.fst")] {
                let path = dir.join(name);
                let mut w = WaveWriter::create(&path, format, 10, &decls, &filter).unwrap();
                w.set_background(false).unwrap();
                if let Mode::Inline(core) = &mut w.mode {
                    if let Sink::Fst(s) = &mut core.out {
                        s.flush_at = 16;
                    }
                }
                for c in 0..200u64 {
                    for s in 0..decls.len() {
                        if !(c + s as u64).is_multiple_of(3) {
                            w.change(c, s, c * 7919 + s as u64).unwrap();
                        }
                    }
                }
                w.finish(200).unwrap();
                paths.push(path);
            }
            let d = crate::diff(&paths[0], &paths[1]).unwrap();
            assert!(
                matches!(d, crate::DiffResult::Same { signals: 6, .. }),
                "{window:?}: {d}"
            );
            // Same summary too: a windowed FST starts at the window (no all-x block from 0).
            let (sv, sf) = (crate::stats(&paths[0]).unwrap(), crate::stats(&paths[1]).unwrap());
            assert_eq!(sv, sf, "{window:?}");
            assert_eq!(sf.start_time, window.map_or(0, |w| w.0 * 10));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
