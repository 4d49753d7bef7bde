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
const FST_FLUSH_AT: usize = 32 << 20;
/// Marks a declared signal that the filter dropped.
const UNSELECTED: u32 = u32::MAX;
/// VCD identifier codes are base-94; 5 characters cover 7e9 signals.
const MAX_ID_LEN: usize = 5;

/// Streaming waveform writer. Signals are declared up front; their order is the signal
/// index used by [`WaveWriter::change`].
pub struct WaveWriter {
    sink: Sink,
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

impl WaveWriter {
    /// `period_ps` = clock period in ps; timestamps are `cycle * period_ps` with a 1 ps
    /// timescale.
    pub fn create(
        path: &Path,
        format: WaveFormat,
        period_ps: u64,
        signals: &[SignalDecl],
        filter: &WaveFilter,
    ) -> Result<Self> {
        if period_ps == 0 {
            return Err(WaveError::Format {
                what: "clock period must be at least 1 ps".into(),
            });
        }
        check_decls(signals)?;
        let filter = filter.compile()?;
        let mut slot_of = vec![UNSELECTED; signals.len()];
        let mut selected = Vec::new();
        for (i, d) in signals.iter().enumerate() {
            if filter.selects(d) {
                slot_of[i] = selected.len() as u32;
                selected.push(d);
            }
        }
        let tree = ScopeTree::build(&selected);
        let sink = match format {
            WaveFormat::Vcd => Sink::Vcd(VcdSink::create(path, &tree, &selected)?),
            WaveFormat::Fst => Sink::Fst(FstSink::create(path, &tree, &selected)?),
        };
        Ok(WaveWriter {
            sink,
            period_ps,
            slot_of: slot_of.into(),
            width: selected.iter().map(|d| d.width).collect(),
            last: vec![0; selected.len()].into(),
            window: filter.window(),
            dumped: false,
            time_cycle: None,
            cycle_seen: 0,
        })
    }

    /// Number of signals that passed the glob filter.
    pub fn selected_count(&self) -> usize {
        self.width.len()
    }

    /// Value change of signal `sig` at `cycle`. Calls come in non-decreasing cycle order;
    /// within one cycle, in increasing `sig` order. Bits above the signal width are ignored.
    #[inline]
    pub fn change(&mut self, cycle: u64, sig: usize, value: u64) -> Result<()> {
        let slot = match self.slot_of.get(sig) {
            Some(&UNSELECTED) => return Ok(()),
            Some(&s) => s as usize,
            None => {
                return Err(WaveError::Signal {
                    what: format!(
                        "signal index {sig} out of range ({} declared)",
                        self.slot_of.len()
                    ),
                })
            }
        };
        // One compare per call buys a clear error instead of a file with time going backwards.
        if cycle < self.cycle_seen {
            return Err(WaveError::Format {
                what: format!("change at cycle {cycle} after cycle {}", self.cycle_seen),
            });
        }
        self.cycle_seen = cycle;
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
        if self.last[slot] == value {
            return Ok(());
        }
        self.last[slot] = value;
        if self.time_cycle != Some(cycle) {
            self.timestamp(cycle)?;
        }
        self.sink.value(slot, self.width[slot], value)
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
        self.sink.finish()
    }

    /// Writes the current value of every selected signal at `cycle` (`$dumpvars` in VCD).
    fn dump(&mut self, cycle: u64) -> Result<()> {
        self.dumped = true;
        self.timestamp(cycle)?;
        self.sink.begin_dump()?;
        for slot in 0..self.last.len() {
            self.sink.value(slot, self.width[slot], self.last[slot])?;
        }
        self.sink.end_dump()
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
        self.sink.timestamp(ps)
    }
}

#[inline]
fn mask(width: u32) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

/// Rejects declarations no viewer could show unambiguously.
fn check_decls(signals: &[SignalDecl]) -> Result<()> {
    let mut names = HashSet::with_capacity(signals.len());
    for d in signals {
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
        if !names.insert(d.full_name()) {
            return bad("declared twice");
        }
    }
    Ok(())
}

/// Scope hierarchy of the selected signals: one node per module instance, children and
/// signals in order of first declaration.
struct ScopeTree<'a> {
    /// Node 0 is the unnamed root.
    nodes: Vec<ScopeNode<'a>>,
}

struct ScopeNode<'a> {
    name: &'a str,
    items: Vec<Item>,
}

enum Item {
    Scope(usize),
    /// Slot of a selected signal.
    Var(usize),
}

impl<'a> ScopeTree<'a> {
    fn build(selected: &[&'a SignalDecl]) -> Self {
        let mut nodes = vec![ScopeNode {
            name: "",
            items: Vec::new(),
        }];
        let mut child: HashMap<(usize, &'a str), usize> = HashMap::new();
        for (slot, d) in selected.iter().enumerate() {
            let mut cur = 0;
            for name in &d.scope {
                cur = *child.entry((cur, name.as_str())).or_insert_with(|| {
                    nodes.push(ScopeNode {
                        name,
                        items: Vec::new(),
                    });
                    let id = nodes.len() - 1;
                    nodes[cur].items.push(Item::Scope(id));
                    id
                });
            }
            nodes[cur].items.push(Item::Var(slot));
        }
        ScopeTree { nodes }
    }

    /// Depth-first declaration order: `Open(name)`, `Var(slot)`, `Close`.
    fn events(&self) -> Vec<Event<'a>> {
        let mut out = Vec::new();
        self.push_events(0, &mut out);
        out
    }

    fn push_events(&self, node: usize, out: &mut Vec<Event<'a>>) {
        for item in &self.nodes[node].items {
            match *item {
                Item::Var(slot) => out.push(Event::Var(slot)),
                Item::Scope(id) => {
                    out.push(Event::Open(self.nodes[id].name));
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

// One per writer, so the size difference between the variants does not matter.
#[allow(clippy::large_enum_variant)]
enum Sink {
    Vcd(VcdSink),
    Fst(FstSink),
}

impl Sink {
    fn timestamp(&mut self, ps: u64) -> Result<()> {
        match self {
            Sink::Vcd(s) => Ok(s.w.timestamp(ps)?),
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
            Sink::Vcd(s) => Ok(s.w.begin(vcd::SimulationCommand::Dumpvars)?),
            Sink::Fst(_) => Ok(()),
        }
    }

    fn end_dump(&mut self) -> Result<()> {
        match self {
            Sink::Vcd(s) => Ok(s.w.end()?),
            Sink::Fst(_) => Ok(()),
        }
    }

    fn finish(self) -> Result<()> {
        match self {
            Sink::Vcd(mut s) => {
                s.w.flush()?;
                Ok(())
            }
            Sink::Fst(s) => {
                let mut out = s.w.finish().map_err(fst_err)?;
                std::io::Write::flush(&mut out)?;
                Ok(())
            }
        }
    }
}

struct VcdSink {
    w: vcd::Writer<BufWriter<File>>,
    /// Per slot: the identifier code as rendered by the `vcd` crate.
    ids: Box<[Box<str>]>,
}

impl VcdSink {
    fn create(path: &Path, tree: &ScopeTree, selected: &[&SignalDecl]) -> Result<Self> {
        let mut w = vcd::Writer::new(BufWriter::with_capacity(1 << 20, File::create(path)?));
        // No $date: it would make the bytes depend on the wall clock.
        w.version(GENERATOR)?;
        w.timescale(1, vcd::TimescaleUnit::PS)?;
        // The slot number is the identifier code, so ids are stable whatever the tree order.
        let ids: Vec<vcd::IdCode> = (0..selected.len())
            .map(|s| vcd::IdCode::from(s as u64))
            .collect();
        for ev in tree.events() {
            match ev {
                Event::Open(name) => w.add_module(name)?,
                Event::Var(slot) => {
                    let d = selected[slot];
                    w.var_def(vcd::VarType::Wire, d.width, ids[slot], &d.name, None)?
                }
                Event::Close => w.upscope()?,
            }
        }
        w.enddefinitions()?;
        let ids = ids
            .iter()
            .map(|id| id.to_string().into_boxed_str())
            .collect();
        Ok(VcdSink { w, ids })
    }

    /// Writes `0!`, `1!` or `b101 "` straight into the buffered output. `vcd::Writer`'s
    /// `change_vector` formats bit by bit through `fmt` (~250 ns per 16-bit change); this is
    /// the hot path, so the line is assembled in a stack buffer with the identifier code the
    /// `vcd` crate rendered at creation. Leading zeros are implied in VCD vectors
    /// (IEEE 1364 §18.2.1); dropping them keeps small counters in wide fields cheap.
    #[inline]
    fn value(&mut self, slot: usize, width: u32, value: u64) -> Result<()> {
        let id = &self.ids[slot];
        let mut line = [0u8; 1 + 64 + 1 + MAX_ID_LEN + 1];
        let mut n = 0;
        if width == 1 {
            line[0] = b'0' + (value & 1) as u8;
            n = 1;
        } else {
            line[0] = b'b';
            let top = 63u32.saturating_sub(value.leading_zeros());
            for b in (0..=top).rev() {
                n += 1;
                line[n] = b'0' + ((value >> b) & 1) as u8;
            }
            n += 1;
            line[n] = b' ';
            n += 1;
        }
        line[n..n + id.len()].copy_from_slice(id.as_bytes());
        n += id.len();
        line[n] = b'\n';
        self.w.writer().write_all(&line[..=n])?;
        Ok(())
    }
}

struct FstSink {
    w: FstBodyWriter<BufWriter<File>>,
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
    fn create(path: &Path, tree: &ScopeTree, selected: &[&SignalDecl]) -> Result<Self> {
        let info = FstInfo {
            start_time: 0,
            timescale_exponent: -12,
            version: GENERATOR.into(),
            // fst-writer writes this string verbatim; a real date would break determinism.
            date: String::new(),
            file_type: FstFileType::Verilog,
        };
        let mut h = fst_writer::open_fst(path, &info).map_err(fst_err)?;
        let mut ids: Vec<Option<FstSignalId>> = vec![None; selected.len()];
        for ev in tree.events() {
            match ev {
                Event::Open(name) => h.scope(name, "", FstScopeType::Module),
                Event::Var(slot) => {
                    let d = selected[slot];
                    let id = h.var(
                        &d.name,
                        FstSignalType::bit_vec(d.width),
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
        let w = h.finish().map_err(fst_err)?;
        let ids = ids
            .into_iter()
            .map(|id| id.expect("every slot is in the tree"))
            .collect();
        let base_size = w.size();
        Ok(FstSink {
            w,
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
        self.w.time_change(ps).map_err(fst_err)
    }

    #[inline]
    fn value(&mut self, slot: usize, width: u32, value: u64) -> Result<()> {
        let w = width as usize;
        for (i, c) in self.bits[..w].iter_mut().enumerate() {
            *c = b'0' + ((value >> (w - 1 - i)) & 1) as u8;
        }
        self.w
            .signal_change(self.ids[slot], &self.bits[..w])
            .map_err(fst_err)
    }
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
                if let Sink::Fst(s) = &mut w.sink {
                    s.flush_at = 16;
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
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
