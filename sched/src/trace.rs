//! Routing traces: the SPEC §8 format `waferstream-trace/1`, its loader, writer, statistics
//! and importers for the real data in `shared/traces`.
//!
//! JSON Lines: a header line, then one line per token of one iteration:
//! ```text
//! {"format": "waferstream-trace/1", "model": "olmoe-1b-7b", "experts": 64, "top_k": 8, "layers": 16}
//! {"iter": 0, "req": 0, "pos": 17, "token_id": 1512, "layers": [[6, 8, 15, 23, 31, 37, 53, 63], ...]}
//! ```
//! The loader validates every line and returns either the whole trace or the first error
//! with its 1-based line number; nothing is half-loaded and no input panics.

use std::collections::BTreeSet;
use std::ops::Range;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The format tag of the header line.
pub const TRACE_FORMAT: &str = "waferstream-trace/1";
/// Largest expert count a header may declare (expert ids are `u16`).
pub const MAX_EXPERTS: u32 = 65536;
/// Largest MoE layer count a header may declare (guards memory on hostile input).
pub const MAX_LAYERS: u32 = 4096;

/// First line of a trace file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceHeader {
    pub format: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub experts: u32,
    pub top_k: u32,
    pub layers: u32,
}

impl TraceHeader {
    pub fn new(model: Option<&str>, experts: u32, top_k: u32, layers: u32) -> Self {
        TraceHeader { format: TRACE_FORMAT.into(), model: model.map(str::to_string), experts, top_k, layers }
    }

    /// Checks the header's own fields (format tag, ranges).
    pub fn validate(&self) -> crate::Result<()> {
        if self.format != TRACE_FORMAT {
            return Err(crate::Error::field("format", format!("expected \"{TRACE_FORMAT}\", found \"{}\"", self.format)));
        }
        if self.experts == 0 || self.experts > MAX_EXPERTS {
            return Err(crate::Error::field("experts", format!("{} outside 1..={MAX_EXPERTS}", self.experts)));
        }
        if self.top_k == 0 || self.top_k > self.experts {
            return Err(crate::Error::field("top_k", format!("{} outside 1..=experts ({})", self.top_k, self.experts)));
        }
        if self.layers == 0 || self.layers > MAX_LAYERS {
            return Err(crate::Error::field("layers", format!("{} outside 1..={MAX_LAYERS}", self.layers)));
        }
        Ok(())
    }
}

/// A token's per-layer rows (expert ids, or gate scores), stored flat: `top_k` values per MoE
/// layer in one allocation. A `Vec<Vec<u16>>` spent a 24-byte header and a heap block per
/// layer on 2 bytes of top-1 data, so a 200 MB trace of 4,096 layers took 2.9 GB (issue 19);
/// flat it is proportional to the ids. Reads like the nested vectors did: `len()`,
/// `[l]` (a slice), `get(l)`, `iter()`, `&rows` in a `for`; build it with `.into()` from a
/// `Vec<Vec<_>>`. Serializes as the nested JSON arrays of SPEC §8. Rows of differing lengths
/// (input the checks refuse) are kept as they came, with their ends, so the error can say
/// which layer is wrong.
#[derive(Clone, PartialEq, Default)]
pub struct Rows<T> {
    data: Vec<T>,
    rows: usize,
    /// Length of every row while they are all equal.
    width: usize,
    /// End of each row in `data`, only once rows differ in length (empty otherwise).
    ends: Vec<usize>,
}

impl<T> Rows<T> {
    pub fn new() -> Self {
        Rows { data: Vec::new(), rows: 0, width: 0, ends: Vec::new() }
    }

    /// Number of rows (MoE layers).
    pub fn len(&self) -> usize {
        self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    fn span(&self, i: usize) -> Option<Range<usize>> {
        if i >= self.rows {
            None
        } else if self.ends.is_empty() {
            Some(i * self.width..(i + 1) * self.width)
        } else {
            Some(if i == 0 { 0 } else { self.ends[i - 1] }..self.ends[i])
        }
    }

    pub fn get(&self, i: usize) -> Option<&[T]> {
        self.span(i).map(|r| &self.data[r])
    }

    pub fn get_mut(&mut self, i: usize) -> Option<&mut [T]> {
        self.span(i).map(|r| &mut self.data[r])
    }

    pub fn iter(&self) -> RowsIter<'_, T> {
        RowsIter { rows: self, next: 0, end: self.rows }
    }

    /// All values, row after row.
    pub fn flat(&self) -> &[T] {
        &self.data
    }

    /// Closes a row whose `n` values were just appended to `data`.
    fn end_row(&mut self, n: usize) {
        if self.ends.is_empty() && self.rows > 0 && n != self.width {
            self.ends = (1..=self.rows).map(|r| r * self.width).collect();
        }
        if self.rows == 0 {
            self.width = n;
        }
        if !self.ends.is_empty() {
            self.ends.push(self.data.len());
        }
        self.rows += 1;
    }
}

impl<T: Clone> Rows<T> {
    /// Appends one row.
    pub fn push(&mut self, row: &[T]) {
        self.data.extend_from_slice(row);
        self.end_row(row.len());
    }

    /// Rows `r` (clamped to the rows there are) as a new `Rows`.
    pub fn select(&self, r: Range<usize>) -> Rows<T> {
        let mut out = Rows::new();
        for i in r.start.min(self.rows)..r.end.min(self.rows) {
            out.push(&self[i]);
        }
        out
    }

    /// The nested form, for callers that own and reshape rows.
    pub fn to_vecs(&self) -> Vec<Vec<T>> {
        self.iter().map(<[T]>::to_vec).collect()
    }
}

impl<T: Clone> From<Vec<Vec<T>>> for Rows<T> {
    fn from(v: Vec<Vec<T>>) -> Self {
        let mut out = Rows { data: Vec::with_capacity(v.iter().map(Vec::len).sum()), ..Rows::new() };
        for row in &v {
            out.push(row);
        }
        out
    }
}

impl<T: Clone> FromIterator<Vec<T>> for Rows<T> {
    fn from_iter<I: IntoIterator<Item = Vec<T>>>(it: I) -> Self {
        let mut out = Rows::new();
        for row in it {
            out.push(&row);
        }
        out
    }
}

impl<T> std::ops::Index<usize> for Rows<T> {
    type Output = [T];
    fn index(&self, i: usize) -> &[T] {
        match self.span(i) {
            Some(r) => &self.data[r],
            None => panic!("row {i} of {}", self.rows),
        }
    }
}

impl<T> std::ops::IndexMut<usize> for Rows<T> {
    fn index_mut(&mut self, i: usize) -> &mut [T] {
        match self.span(i) {
            Some(r) => &mut self.data[r],
            None => panic!("row {i} of {}", self.rows),
        }
    }
}

impl<T: PartialEq> PartialEq<Vec<Vec<T>>> for Rows<T> {
    fn eq(&self, other: &Vec<Vec<T>>) -> bool {
        self.rows == other.len() && self.iter().zip(other).all(|(a, b)| a == b.as_slice())
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Rows<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Iterator over the rows of [`Rows`], as slices.
pub struct RowsIter<'a, T> {
    rows: &'a Rows<T>,
    next: usize,
    end: usize,
}

impl<'a, T> Iterator for RowsIter<'a, T> {
    type Item = &'a [T];
    fn next(&mut self) -> Option<&'a [T]> {
        if self.next >= self.end {
            return None;
        }
        self.next += 1;
        self.rows.get(self.next - 1)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.end - self.next, Some(self.end - self.next))
    }
}

impl<T> DoubleEndedIterator for RowsIter<'_, T> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.next >= self.end {
            return None;
        }
        self.end -= 1;
        self.rows.get(self.end)
    }
}

impl<T> ExactSizeIterator for RowsIter<'_, T> {}

impl<'a, T> IntoIterator for &'a Rows<T> {
    type Item = &'a [T];
    type IntoIter = RowsIter<'a, T>;
    fn into_iter(self) -> RowsIter<'a, T> {
        self.iter()
    }
}

impl<T: Serialize> Serialize for Rows<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

/// Reads the nested arrays straight into the flat vector: no per-row allocation.
impl<'de, T: Deserialize<'de> + Clone> Deserialize<'de> for Rows<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{DeserializeSeed, SeqAccess, Visitor};
        use std::marker::PhantomData;
        struct Row<'a, T>(&'a mut Vec<T>);
        impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for Row<'_, T> {
            type Value = usize;
            fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<usize, D::Error> {
                d.deserialize_seq(self)
            }
        }
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Row<'_, T> {
            type Value = usize;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a sequence")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<usize, A::Error> {
                let mut n = 0;
                while let Some(x) = a.next_element()? {
                    self.0.push(x);
                    n += 1;
                }
                Ok(n)
            }
        }
        struct Outer<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de> + Clone> Visitor<'de> for Outer<T> {
            type Value = Rows<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a sequence")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Rows<T>, A::Error> {
                let mut out = Rows::new();
                loop {
                    let before = out.data.len();
                    match a.next_element_seed(Row(&mut out.data))? {
                        Some(n) => {
                            debug_assert_eq!(out.data.len(), before + n);
                            out.end_row(n)
                        }
                        None => return Ok(out),
                    }
                }
            }
        }
        d.deserialize_seq(Outer(PhantomData))
    }
}

/// One token of one iteration: its top-k experts at every MoE layer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceToken {
    /// Iteration (forward pass) index; lines of one iteration are contiguous.
    pub iter: u32,
    /// Request id.
    pub req: u32,
    /// Position of this token in its request.
    pub pos: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_id: Option<u32>,
    /// `layers[l]`: exactly `top_k` distinct expert ids in `0..experts`.
    pub layers: Rows<u16>,
    /// Gate scores, same shape as `layers`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scores: Option<Rows<f32>>,
}

/// A whole trace: header and tokens in file order.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    pub header: TraceHeader,
    pub tokens: Vec<TraceToken>,
}

/// A refused trace: the 1-based line and what is wrong (line 0: the file itself).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum TraceError {
    #[error("{file}: {msg}")]
    Io { file: String, msg: String },
    #[error("{file}line {line}: {msg}")]
    Line { file: String, line: usize, msg: String },
}

impl TraceError {
    fn line(line: usize, msg: impl Into<String>) -> Self {
        TraceError::Line { file: String::new(), line, msg: msg.into() }
    }
    /// Prefixes the error with a file name ("FILE: line N: ...").
    pub fn in_file(self, path: &Path) -> Self {
        let f = path.display().to_string();
        match self {
            TraceError::Io { msg, .. } => TraceError::Io { file: f, msg },
            TraceError::Line { line, msg, .. } => TraceError::Line { file: format!("{f}: "), line, msg },
        }
    }
    /// The 1-based line number at fault, if any.
    pub fn line_no(&self) -> Option<usize> {
        match self {
            TraceError::Line { line, .. } => Some(*line),
            TraceError::Io { .. } => None,
        }
    }
}

/// Checks one token against the header; `Err` says what is wrong.
pub fn check_token(h: &TraceHeader, t: &TraceToken) -> crate::Result<()> {
    if t.layers.len() != h.layers as usize {
        return Err(crate::Error::field("layers", format!("{} MoE layers, header says {}", t.layers.len(), h.layers)));
    }
    let mut seen = BTreeSet::new();
    for (l, ids) in t.layers.iter().enumerate() {
        if ids.len() != h.top_k as usize {
            return Err(crate::Error::field(format!("layers[{l}]"), format!("{} experts, header top_k is {}", ids.len(), h.top_k)));
        }
        seen.clear();
        for &e in ids {
            if u32::from(e) >= h.experts {
                return Err(crate::Error::field(format!("layers[{l}]"), format!("expert id {e} out of range 0..{}", h.experts)));
            }
            if !seen.insert(e) {
                return Err(crate::Error::field(format!("layers[{l}]"), format!("duplicate expert {e}")));
            }
        }
    }
    if let Some(s) = &t.scores {
        if s.len() != t.layers.len() || s.iter().zip(&t.layers).any(|(a, b)| a.len() != b.len()) {
            return Err(crate::Error::field("scores", "shape differs from layers"));
        }
        // JSON numbers beyond f32 (e.g. 1e40) parse as infinity, which the writer can only
        // emit as `null`: such a trace would load but not survive a round trip (issue 5).
        for (l, row) in s.iter().enumerate() {
            if let Some(v) = row.iter().find(|v| !v.is_finite()) {
                return Err(crate::Error::field(format!("scores[{l}]"), format!("{v} is not a finite 32-bit float")));
            }
        }
    }
    Ok(())
}

/// The loader's state between lines: shared by [`parse_trace`] (text in memory) and
/// [`load_trace`] (a file read a line at a time, so the file's text is never held whole).
#[derive(Default)]
struct Loader {
    header: Option<TraceHeader>,
    tokens: Vec<TraceToken>,
    done_iters: BTreeSet<u32>,
    cur: Option<u32>,
}

impl Loader {
    /// Line `n` (0-based) of the input. Blank lines are skipped.
    fn line(&mut self, n: usize, l: &str) -> Result<(), TraceError> {
        if l.trim().is_empty() {
            return Ok(());
        }
        let Some(header) = &self.header else {
            let hv: serde_json::Value = serde_json::from_str(l).map_err(|e| TraceError::line(n + 1, format!("bad JSON: {e}")))?;
            if hv.get("format").is_none() {
                return Err(TraceError::line(n + 1, format!("header missing: first line has no \"format\" (expected \"{TRACE_FORMAT}\")")));
            }
            let header: TraceHeader = serde_json::from_value(hv).map_err(|e| TraceError::line(n + 1, format!("header: {e}")))?;
            header.validate().map_err(|m| TraceError::line(n + 1, format!("header: {m}")))?;
            self.header = Some(header);
            return Ok(());
        };
        let t: TraceToken = serde_json::from_str(l).map_err(|e| TraceError::line(n + 1, format!("bad token line: {e}")))?;
        check_token(header, &t).map_err(|m| TraceError::line(n + 1, m.to_string()))?;
        if self.cur != Some(t.iter) {
            if self.done_iters.contains(&t.iter) {
                return Err(TraceError::line(n + 1, format!("iter {}: lines of this iteration are not contiguous", t.iter)));
            }
            if let Some(c) = self.cur {
                self.done_iters.insert(c);
            }
            self.cur = Some(t.iter);
        }
        self.tokens.push(t);
        Ok(())
    }

    fn finish(mut self) -> Result<Trace, TraceError> {
        let header = self.header.ok_or_else(|| TraceError::line(1, "header missing: empty file"))?;
        self.tokens.shrink_to_fit();
        Ok(Trace { header, tokens: self.tokens })
    }
}

/// Parses a whole trace from text. Blank lines are skipped (they still count for line numbers).
pub fn parse_trace(text: &str) -> Result<Trace, TraceError> {
    let mut l = Loader::default();
    for (n, line) in text.lines().enumerate() {
        l.line(n, line)?;
    }
    l.finish()
}

/// Loads a trace file; errors carry the file name and line number. Reads one line at a time:
/// memory is the compact trace plus the longest line, not the file's text.
pub fn load_trace(path: &Path) -> Result<Trace, TraceError> {
    use std::io::BufRead;
    let io = |e: std::io::Error| TraceError::Io { file: path.display().to_string(), msg: e.to_string() };
    let mut r = std::io::BufReader::new(std::fs::File::open(path).map_err(io)?);
    let mut l = Loader::default();
    let mut buf = Vec::new();
    for n in 0.. {
        buf.clear();
        if r.read_until(b'\n', &mut buf).map_err(io)? == 0 {
            break;
        }
        let line = std::str::from_utf8(&buf).map_err(|_| TraceError::line(n + 1, "not UTF-8 text").in_file(path))?;
        let line = line.strip_suffix('\n').map_or(line, |x| x.strip_suffix('\r').unwrap_or(x));
        l.line(n, line).map_err(|e| e.in_file(path))?;
    }
    l.finish().map_err(|e| e.in_file(path))
}

/// Serializes a trace to the SPEC §8 text.
pub fn trace_to_string(t: &Trace) -> String {
    let mut s = serde_json::to_string(&t.header).expect("header serializes");
    s.push('\n');
    for tok in &t.tokens {
        s.push_str(&serde_json::to_string(tok).expect("token serializes"));
        s.push('\n');
    }
    s
}

/// Writes a trace file.
pub fn write_trace(path: &Path, t: &Trace) -> std::io::Result<()> {
    std::fs::write(path, trace_to_string(t))
}

impl Trace {
    /// Checks every token against the header (the loader's rules; for generated traces).
    pub fn validate(&self) -> Result<(), TraceError> {
        self.header.validate().map_err(|m| TraceError::line(1, m.to_string()))?;
        for (i, t) in self.tokens.iter().enumerate() {
            check_token(&self.header, t).map_err(|m| TraceError::line(i + 2, m.to_string()))?;
        }
        Ok(())
    }

    /// Iterations as (iter id, contiguous token index range), in file order.
    pub fn iterations(&self) -> Vec<(u32, Range<usize>)> {
        let mut out: Vec<(u32, Range<usize>)> = Vec::new();
        for (i, t) in self.tokens.iter().enumerate() {
            match out.last_mut() {
                Some((it, r)) if *it == t.iter => r.end = i + 1,
                _ => out.push((t.iter, i..i + 1)),
            }
        }
        out
    }

    /// Keeps the iterations whose position (0-based, in file order) is in `r`.
    pub fn select_iters(&self, r: Range<usize>) -> crate::Result<Trace> {
        let its = self.iterations();
        if r.start >= r.end || r.end > its.len() {
            return Err(crate::Error::field(format!("iters {}..{}", r.start, r.end), format!("trace has {} iterations", its.len())));
        }
        let span = its[r.start].1.start..its[r.end - 1].1.end;
        Ok(Trace { header: self.header.clone(), tokens: self.tokens[span].to_vec() })
    }

    /// Keeps MoE layers `r` of every token (the header's layer count shrinks).
    pub fn select_layers(&self, r: Range<usize>) -> crate::Result<Trace> {
        if r.start >= r.end || r.end > self.header.layers as usize {
            return Err(crate::Error::field(format!("layers {}..{}", r.start, r.end), format!("trace has {} layers", self.header.layers)));
        }
        let mut header = self.header.clone();
        header.layers = (r.end - r.start) as u32;
        let tokens = self
            .tokens
            .iter()
            .map(|t| TraceToken {
                layers: t.layers.select(r.clone()),
                scores: t.scores.as_ref().map(|s| s.select(r.clone())),
                iter: t.iter,
                req: t.req,
                pos: t.pos,
                token_id: t.token_id,
            })
            .collect();
        Ok(Trace { header, tokens })
    }

    /// Routing of one layer of one iteration: top-k experts per token.
    pub fn routing(&self, tokens: Range<usize>, layer: usize) -> Vec<Vec<u16>> {
        self.tokens[tokens].iter().map(|t| t.layers[layer].to_vec()).collect()
    }
}

/// Summary of a trace (`waferstream trace stats`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceStats {
    pub experts: u32,
    pub top_k: u32,
    pub layers: u32,
    pub tokens: usize,
    pub iterations: usize,
    /// Distinct request ids.
    pub requests: usize,
    /// Per MoE layer: max expert load / mean expert load over the whole file, where the mean
    /// is over *all* `experts` of the header (unused experts count as load 0), i.e.
    /// mean = tokens·top_k / experts. 0 for an empty trace.
    pub per_layer_skewness: Vec<f64>,
}

/// Per-layer expert load (token count per expert) over the whole trace.
pub fn expert_loads(t: &Trace) -> Vec<Vec<u64>> {
    let mut loads = vec![vec![0u64; t.header.experts as usize]; t.header.layers as usize];
    for tok in &t.tokens {
        for (l, ids) in tok.layers.iter().enumerate() {
            for &e in ids {
                loads[l][e as usize] += 1;
            }
        }
    }
    loads
}

/// Statistics of a trace; skewness = max load / mean load per layer (mean over all experts).
pub fn trace_stats(t: &Trace) -> TraceStats {
    // One layer's load vector at a time: a hostile header (65536 experts × 4096 layers)
    // must not make `stats` allocate gigabytes.
    let mut load = vec![0u64; t.header.experts as usize];
    let per_layer_skewness = (0..t.header.layers as usize)
        .map(|l| {
            load.iter_mut().for_each(|x| *x = 0);
            for tok in &t.tokens {
                for &e in &tok.layers[l] {
                    load[e as usize] += 1;
                }
            }
            let total: u64 = load.iter().sum();
            if total == 0 {
                0.0
            } else {
                *load.iter().max().unwrap_or(&0) as f64 * load.len() as f64 / total as f64
            }
        })
        .collect();
    let requests = t.tokens.iter().map(|x| x.req).collect::<BTreeSet<_>>().len();
    TraceStats {
        experts: t.header.experts,
        top_k: t.header.top_k,
        layers: t.header.layers,
        tokens: t.tokens.len(),
        iterations: t.iterations().len(),
        requests,
        per_layer_skewness,
    }
}

/// Imports the sqliteai/warp decode trace (`{"tok": N, "layers": [[..8 ids..] x16]}` per line,
/// OLMoE-1B-7B, batch-1 decode): each record is one decode step, so iter = tok-1, req 0,
/// pos = tok; no token ids, no scores. Validated like a native trace.
pub fn import_warp_decode_str(text: &str) -> Result<Trace, TraceError> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Rec {
        tok: u32,
        layers: Rows<u16>,
    }
    let header = TraceHeader::new(Some("olmoe-1b-7b"), 64, 8, 16);
    let mut tokens = Vec::new();
    for (n, l) in text.lines().enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        let r: Rec = serde_json::from_str(l).map_err(|e| TraceError::line(n + 1, format!("bad warp record: {e}")))?;
        if r.tok == 0 {
            return Err(TraceError::line(n + 1, "tok: 0 (warp steps start at 1)"));
        }
        let t = TraceToken { iter: r.tok - 1, req: 0, pos: r.tok, token_id: None, layers: r.layers, scores: None };
        check_token(&header, &t).map_err(|m| TraceError::line(n + 1, m.to_string()))?;
        if let Some(prev) = tokens.last().map(|p: &TraceToken| p.iter) {
            if t.iter <= prev {
                return Err(TraceError::line(n + 1, format!("tok {}: steps must increase", r.tok)));
            }
        }
        tokens.push(t);
    }
    Ok(Trace { header, tokens })
}

/// [`import_warp_decode_str`] on a file.
pub fn import_warp_decode(path: &Path) -> Result<Trace, TraceError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| TraceError::Io { file: path.display().to_string(), msg: e.to_string() })?;
    import_warp_decode_str(&text).map_err(|e| e.in_file(path))
}

/// Per-layer expert popularity from aggregate counts (AllenAI `expert_counts.csv`).
///
/// The CSV holds only per-expert token counts at a few layers: it cannot give per-token
/// routing. What it gives is a popularity distribution per recorded layer, which the
/// generator consumes as `GenCfg::popularity` (each token then samples `top_k` distinct
/// experts by these weights). Layers of the model that the CSV does not record are not
/// invented: `layers` lists which model layers the rows stand for.
///
/// Approximation: the generator draws top-k *without replacement* with these weights as
/// draw weights, which flattens the head (an expert cannot be picked twice by one token),
/// so a sampled trace is less skewed than the counts: OLMoE arxiv top-k counts have
/// max/mean 7.8 / 6.3 / 7.5 at layers 0/7/15, a 1024-token sampled trace 5.5 / 5.0 / 5.4.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PopularityProfile {
    pub model: String,
    pub domain: String,
    pub selection: String,
    /// Model layer index of each row of `weights`.
    pub layers: Vec<u32>,
    /// `weights[i][e]`: count of expert e at layer `layers[i]`, normalised to sum 1.
    pub weights: Vec<Vec<f64>>,
}

/// Reads `expert_counts.csv` (`model,domain,selection,layer,expert,count`) and keeps the rows
/// of one (model, domain, selection), e.g. ("olmoe", "arxiv", "topk"). Lines are 1-based.
pub fn import_expert_counts_str(text: &str, model: &str, domain: &str, selection: &str) -> Result<PopularityProfile, TraceError> {
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, h)) if h.trim() == "model,domain,selection,layer,expert,count" => {}
        _ => return Err(TraceError::line(1, "header: expected model,domain,selection,layer,expert,count")),
    }
    let mut by_layer: std::collections::BTreeMap<u32, Vec<(u32, u64)>> = Default::default();
    for (n, l) in lines {
        if l.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = l.split(',').map(str::trim).collect();
        if f.len() != 6 {
            return Err(TraceError::line(n + 1, format!("{} fields, expected 6", f.len())));
        }
        if f[0] != model || f[1] != domain || f[2] != selection {
            continue;
        }
        let num = |i: usize, name: &str| {
            f[i].parse::<u64>().map_err(|_| {
                let why = match f[i].parse::<i128>() {
                    Ok(v) if v < 0 => format!("{v} is negative (a non-negative integer is needed)"),
                    Ok(v) => format!("{v} is too large"),
                    Err(_) => format!("not a number: {:?}", f[i]),
                };
                TraceError::line(n + 1, format!("{name}: {why}"))
            })
        };
        let layer = num(3, "layer")?;
        let expert = num(4, "expert")?;
        let count = num(5, "count")?;
        if layer >= MAX_LAYERS as u64 || expert >= MAX_EXPERTS as u64 {
            return Err(TraceError::line(n + 1, "layer or expert out of range"));
        }
        by_layer.entry(layer as u32).or_default().push((expert as u32, count));
    }
    if by_layer.is_empty() {
        return Err(TraceError::line(0, format!("no rows for model {model:?} domain {domain:?} selection {selection:?}")));
    }
    let mut layers = Vec::new();
    let mut weights = Vec::new();
    for (layer, rows) in by_layer {
        let n = rows.iter().map(|r| r.0).max().unwrap_or(0) as usize + 1;
        let mut w = vec![0f64; n];
        for (e, c) in rows {
            w[e as usize] += c as f64;
        }
        let s: f64 = w.iter().sum();
        if s > 0.0 {
            w.iter_mut().for_each(|x| *x /= s);
        }
        layers.push(layer);
        weights.push(w);
    }
    Ok(PopularityProfile { model: model.into(), domain: domain.into(), selection: selection.into(), layers, weights })
}

/// [`import_expert_counts_str`] on a file.
pub fn import_expert_counts(path: &Path, model: &str, domain: &str, selection: &str) -> Result<PopularityProfile, TraceError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| TraceError::Io { file: path.display().to_string(), msg: e.to_string() })?;
    import_expert_counts_str(&text, model, domain, selection).map_err(|e| e.in_file(path))
}
