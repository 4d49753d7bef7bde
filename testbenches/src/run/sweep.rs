//! The sweep engine: a grid of package scenarios, the points spread over threads (each
//! point single-threaded, until workers with no point left lend it their cores: see
//! [`run_points`]), one JSON line per point written as soon as it finishes.
//!
//! A grid file is a `run` scenario (`[scenario] kind = "package"`, `[package]`,
//! `[workload]`), the base, plus a `[grid]` table of axes. An axis key is a dotted path into
//! the scenario (`"workload.tokens" = [16, 64]`, `"package.pe.rows" = [16, 32]`); its value
//! is an array. An element that is a table is merged into the table at the path, so one axis
//! can move several keys together (`"package" = [{ rows = 2, cols = 2 }, { rows = 3, cols = 3 }]`).
//! `strategy = ["ep", "a3"]` is the one axis that is not a path: it sets
//! `workload.strategies` to that one strategy, since a point runs one strategy (one
//! `PkgResult`). Points are the cartesian product of the axes, in file order, the last axis
//! fastest; `[[grid]]` (several tables) concatenates the blocks' products in file order.
//!
//! Every point is built by setting its values in the base's TOML and reading the result with
//! the scenario's [`parse_scenario`] and [`check_package`], all points before anything runs,
//! so a bad path or value is refused naming the field. A point runs through the same
//! [`package_workload`] and [`PackageRun`] as `run`.
//!
//! Resume ([`resume`]): points whose id is in the output already are skipped; a last line
//! cut short by a crash is cut off and its point runs again. Sharding ([`parse_shard`]):
//! `I/N` runs the points with index % N == I-1. Lines do not depend on sharding
//! or threads except their wall-time fields (`wall_seconds`, `cycles_per_second`); their
//! order is the order points finish.

use std::collections::HashSet;
use std::fmt;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};

use hw::pkg::config::{PkgCfg, Strategy};
use hw::pkg::package::PkgRtl;
use hw::pkg::result::PkgResult;
use sched::models::ModelPreset;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

use super::package::PackageRun;
use super::scenario::{check_package, package_workload, parse_scenario, parse_toml, OutputCfg, ScenarioCfg, ScenarioKind, WorkloadCfg};
use super::{limits, RunOptions, SpareCores};
use crate::error::{Error, Result};

/// Points in a grid, at most (a typo such as an extra axis should not start a month of runs).
pub const MAX_POINTS: usize = limits::SWEEP_MAX_POINTS;
/// Points run at once, at most.
pub const MAX_THREADS: usize = limits::SWEEP_MAX_THREADS;
/// The axis that is not a path into the scenario.
pub const STRATEGY_AXIS: &str = "strategy";
/// Point failures printed one by one; the rest are counted.
const SHOWN_FAILURES: usize = 10;
/// Stack of a worker: a point runs as deep as on the main thread.
const WORKER_STACK: usize = 8 << 20;

/// A pre-formatted error (the messages name the grid file, the point and the field).
fn err<T>(s: String) -> Result<T> {
    Err(Error::Run(s))
}

#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    pub path: String,
    pub values: Vec<toml::Value>,
}

/// A grid file: the base scenario (its TOML without `grid`) and blocks of axes, each block a
/// cartesian product.
#[derive(Debug, Clone)]
pub struct Grid {
    pub base: toml::Table,
    pub blocks: Vec<Vec<Axis>>,
    /// Points per block.
    sizes: Vec<usize>,
}

/// One point of a grid, checked.
#[derive(Debug, Clone)]
pub struct Point {
    /// Index in the grid (the line's `id`).
    pub index: usize,
    /// `path=value` of every axis, comma-separated: stable across runs.
    pub key: String,
    pub values: Vec<(String, toml::Value)>,
    pub sc: ScenarioCfg,
    pub model: ModelPreset,
    pub strategy: Strategy,
}

// ---- the grid file ----

/// A `[grid]` entry as written: an axis, or a table of entries (unquoted dotted keys), in
/// file order (toml's own tables are sorted).
enum Node {
    Axis(Vec<toml::Value>),
    Table(Vec<(String, Node)>),
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Node;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an axis: an array of values (e.g. [16, 64])")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> std::result::Result<Node, A::Error> {
                let mut v = Vec::new();
                while let Some(x) = s.next_element::<toml::Value>()? {
                    v.push(x);
                }
                Ok(Node::Axis(v))
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> std::result::Result<Node, A::Error> {
                Ok(Node::Table(entries(m)?))
            }
        }
        d.deserialize_any(V)
    }
}

fn entries<'de, A: MapAccess<'de>>(mut m: A) -> std::result::Result<Vec<(String, Node)>, A::Error> {
    let mut v = Vec::new();
    while let Some(k) = m.next_key::<String>()? {
        let n = m.next_value::<Node>()?;
        v.push((k, n));
    }
    Ok(v)
}

/// `[grid]` (one block) or `[[grid]]` (several).
struct Blocks(Vec<Vec<(String, Node)>>);

impl<'de> Deserialize<'de> for Blocks {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Block(Vec<(String, Node)>);
        impl<'de> Deserialize<'de> for Block {
            fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
                match Node::deserialize(d)? {
                    Node::Table(t) => Ok(Block(t)),
                    Node::Axis(_) => Err(de::Error::custom("a [[grid]] entry is a table of axes")),
                }
            }
        }
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Blocks;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a [grid] table of axes, or [[grid]] tables")
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> std::result::Result<Blocks, A::Error> {
                Ok(Blocks(vec![entries(m)?]))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> std::result::Result<Blocks, A::Error> {
                let mut v = Vec::new();
                while let Some(b) = s.next_element::<Block>()? {
                    v.push(b.0);
                }
                Ok(Blocks(v))
            }
        }
        d.deserialize_any(V)
    }
}

/// The file: `grid` apart (in order), everything else the base scenario.
struct GridDoc {
    base: toml::Table,
    grid: Option<Blocks>,
}

impl<'de> Deserialize<'de> for GridDoc {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = GridDoc;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a scenario with a [grid] table")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> std::result::Result<GridDoc, A::Error> {
                let mut doc = GridDoc { base: toml::Table::new(), grid: None };
                while let Some(k) = m.next_key::<String>()? {
                    if k == "grid" {
                        doc.grid = Some(m.next_value()?);
                    } else {
                        let v = m.next_value::<toml::Value>()?;
                        doc.base.insert(k, v);
                    }
                }
                Ok(doc)
            }
        }
        d.deserialize_map(V)
    }
}

fn flatten(prefix: &str, entries: Vec<(String, Node)>, out: &mut Vec<Axis>) {
    for (k, n) in entries {
        let path = if prefix.is_empty() { k } else { format!("{prefix}.{k}") };
        match n {
            Node::Axis(values) => out.push(Axis { path, values }),
            Node::Table(t) => flatten(&path, t, out),
        }
    }
}

/// A value as written in a key: strings bare when they can be, arrays `[a,b]`, tables
/// `{k=v}` (keys sorted).
pub fn render(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./+:".contains(c)) => s.clone(),
        toml::Value::Array(a) => format!("[{}]", a.iter().map(render).collect::<Vec<_>>().join(",")),
        toml::Value::Table(t) => format!("{{{}}}", t.iter().map(|(k, v)| format!("{k}={}", render(v))).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}

impl Grid {
    /// Reads a grid file (`origin` names it in errors): the axes are checked here, the
    /// points by [`Grid::point`].
    pub fn parse(text: &str, origin: &str) -> Result<Grid> {
        let doc: GridDoc = parse_toml(text, origin)?;
        let Some(Blocks(raw)) = doc.grid else {
            return err(format!("{origin}: no [grid] table: a sweep needs at least one axis (`waferstream run` runs one scenario)"));
        };
        if raw.is_empty() {
            return err(format!("{origin}: [[grid]] holds no table of axes"));
        }
        let mut blocks = Vec::new();
        let mut sizes = Vec::new();
        let mut total = 0usize;
        for (b, entries) in raw.into_iter().enumerate() {
            let at = if b == 0 { "grid".to_string() } else { format!("grid block {}", b + 1) };
            let mut axes = Vec::new();
            flatten("", entries, &mut axes);
            if axes.is_empty() {
                return err(format!("{origin}: {at}: no axis (give e.g. `\"workload.tokens\" = [16, 64]`)"));
            }
            let mut size = 1usize;
            for (i, a) in axes.iter().enumerate() {
                let field = format!("grid axis `{}`", a.path);
                if a.path.split('.').any(|c| c.trim().is_empty()) {
                    return err(format!("{origin}: {field}: a path of non-empty names joined by dots (e.g. \"package.pe.rows\")"));
                }
                if axes[..i].iter().any(|b| b.path == a.path) {
                    return err(format!("{origin}: {field}: given twice"));
                }
                if a.values.is_empty() {
                    return err(format!("{origin}: {field}: empty (a point needs a value of every axis)"));
                }
                for (j, v) in a.values.iter().enumerate() {
                    if a.values[..j].contains(v) {
                        return err(format!("{origin}: {field}: value {} given twice", render(v)));
                    }
                }
                if a.path == STRATEGY_AXIS {
                    for v in &a.values {
                        let s = v.as_str().ok_or_else(|| format!("{origin}: {field}: {v} is not a strategy name ({})", Strategy::LIST))?;
                        Strategy::parse(s).map_err(|e| format!("{origin}: {field}: {e}"))?;
                    }
                }
                size = size.checked_mul(a.values.len()).filter(|&n| n <= MAX_POINTS).ok_or_else(|| {
                    let dims: Vec<String> = axes.iter().map(|a| a.values.len().to_string()).collect();
                    format!("{origin}: {at}: {} points is more than {MAX_POINTS}; split the grid", dims.join(" x "))
                })?;
            }
            total = total.checked_add(size).filter(|&n| n <= MAX_POINTS).ok_or_else(|| format!("{origin}: more than {MAX_POINTS} points over the [[grid]] blocks; split the grid"))?;
            blocks.push(axes);
            sizes.push(size);
        }
        Ok(Grid { base: doc.base, blocks, sizes })
    }

    /// Points in the grid.
    pub fn count(&self) -> usize {
        self.sizes.iter().sum()
    }

    /// The axes and their values at point `i`: blocks in order, each the cartesian product
    /// of its axes with the last axis fastest.
    pub fn values(&self, mut i: usize) -> Vec<(&str, &toml::Value)> {
        let mut b = 0;
        while i >= self.sizes[b] {
            i -= self.sizes[b];
            b += 1;
        }
        let axes = &self.blocks[b];
        let mut v = vec![("", &axes[0].values[0]); axes.len()];
        for (slot, a) in v.iter_mut().zip(axes).rev() {
            *slot = (a.path.as_str(), &a.values[i % a.values.len()]);
            i /= a.values.len();
        }
        v
    }

    /// The checked point `i` (`origin` names the grid file in errors).
    pub fn point(&self, i: usize, origin: &str) -> Result<Point> {
        let vals = self.values(i);
        let key = vals.iter().map(|(p, v)| format!("{p}={}", render(v))).collect::<Vec<_>>().join(",");
        let at = format!("{origin}: point {i} ({key})");
        let mut t = self.base.clone();
        for (p, v) in &vals {
            let r = if *p == STRATEGY_AXIS {
                set(&mut t, &["workload", "strategies"], &toml::Value::Array(vec![(*v).clone()]), p)
            } else {
                set(&mut t, &p.split('.').collect::<Vec<_>>(), v, p)
            };
            r.map_err(|e| format!("{origin}: {e}"))?;
        }
        let text = toml::to_string(&t).map_err(|e| format!("{at}: {e}"))?;
        let sc = parse_scenario(&text, &at).map_err(|e| without_snippet(&e.to_string()))?;
        if sc.scenario.kind != ScenarioKind::Package {
            return err(format!("{at}: config field `scenario.kind`: a sweep runs package scenarios (kind = \"package\")"));
        }
        if sc.output != OutputCfg::default() {
            return err(format!("{at}: config field `output`: a sweep writes its points to --out; remove [output]"));
        }
        let (model, strategies) = check_package(&sc).map_err(|e| format!("{at}: {e}"))?;
        if strategies.len() != 1 {
            return err(format!("{at}: config field `workload.strategies`: a sweep point runs one strategy (got {}); give a `strategy` axis", sc.workload.strategies.join(", ")));
        }
        let values = vals.iter().map(|(p, v)| (p.to_string(), (*v).clone())).collect();
        Ok(Point { index: i, key, values, sc, model, strategy: strategies[0] })
    }

    /// Every point, checked, and every distinct workload generated once (then dropped), so
    /// that no error waits for the run. The tests' shorthand: `run` takes the two steps
    /// apart ([`Grid::points_unrun`], then [`check_workloads`]) so `--list` and the output
    /// checks come before the slow one.
    #[cfg(test)]
    pub fn points(&self, origin: &str) -> Result<Vec<Point>> {
        let points = self.points_unrun(origin)?;
        check_workloads(&points, origin)?;
        Ok(points)
    }

    /// Every point, its config checked (fast: no workload is generated, so `--list` and the
    /// output checks come before the slow part). Two points that would run the same config
    /// (e.g. an axis value equal to the base's in one block and the same point in another)
    /// are refused: the sweep would run it twice under two ids.
    pub fn points_unrun(&self, origin: &str) -> Result<Vec<Point>> {
        use std::hash::{Hash, Hasher};
        let points = (0..self.count()).map(|i| self.point(i, origin)).collect::<Result<Vec<_>>>()?;
        let config = |p: &Point| serde_json::to_string(&LineConfig::of(p)).map_err(|e| e.to_string());
        // By a hash of the config (a grid holds up to 100 000 points), confirmed on a match.
        let mut seen: std::collections::HashMap<u64, Vec<usize>> = std::collections::HashMap::new();
        for p in &points {
            let c = config(p)?;
            let mut h = std::collections::hash_map::DefaultHasher::new();
            c.hash(&mut h);
            let same = seen.entry(h.finish()).or_default();
            for &j in same.iter() {
                if config(&points[j])? == c {
                    return err(format!("{origin}: point {} ({}) runs the same config as point {j} ({}): remove the duplicate", p.index, p.key, points[j].key));
                }
            }
            same.push(p.index);
        }
        Ok(points)
    }
}

/// Generates every distinct workload of `points` once (then drops it), so that no error waits
/// for the run.
pub fn check_workloads(points: &[Point], origin: &str) -> Result<()> {
    let mut seen = HashSet::new();
    for p in points {
        let w = &p.sc.workload;
        if seen.insert((p.model.name.clone(), w.tokens, w.skew.to_bits(), w.seed, w.iters)) {
            package_workload(&p.sc, &p.model).map_err(|e| format!("{origin}: point {} ({}): {e}", p.index, p.key))?;
        }
    }
    Ok(())
}

/// A parse error of a point's TOML without toml's source excerpt: the text is generated, its
/// line numbers are nobody's file. The message is the excerpt's last line.
fn without_snippet(e: &str) -> String {
    match e.split_once("TOML parse error at line") {
        Some((head, rest)) => format!("{head}{}", rest.lines().rev().map(str::trim).find(|l| !l.is_empty()).unwrap_or("")),
        None => e.to_string(),
    }
}

/// Sets `path` in `t` to `v`; a table `v` is merged into the table there (deeply), so an axis
/// can set several keys of one table. Missing tables on the way are created (`parse_scenario`
/// refuses unknown names); a value on the way that is not a table is an error.
fn set(t: &mut toml::Table, path: &[&str], v: &toml::Value, axis: &str) -> Result<()> {
    let (last, parents) = path.split_last().expect("paths are checked non-empty");
    let mut cur = t;
    for (n, p) in parents.iter().enumerate() {
        let e = cur.entry(p.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        cur = match e {
            toml::Value::Table(t) => t,
            _ => return err(format!("grid axis `{axis}`: `{}` is not a table", path[..=n].join("."))),
        };
    }
    match (cur.get_mut(*last), v) {
        (Some(toml::Value::Table(dst)), toml::Value::Table(src)) => merge(dst, src),
        _ => {
            cur.insert(last.to_string(), v.clone());
        }
    }
    Ok(())
}

fn merge(dst: &mut toml::Table, src: &toml::Table) {
    for (k, v) in src {
        match (dst.get_mut(k), v) {
            (Some(toml::Value::Table(d)), toml::Value::Table(s)) => merge(d, s),
            _ => {
                dst.insert(k.clone(), v.clone());
            }
        }
    }
}

/// Parses `--shard I/N` (1-based I).
pub fn parse_shard(s: &str) -> Result<(usize, usize)> {
    let bad = || format!("--shard: `{s}` is not I/N (e.g. 1/4: the first of four shards)");
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    let i: usize = i.trim().parse().map_err(|_| bad())?;
    let n: usize = n.trim().parse().map_err(|_| bad())?;
    if n == 0 {
        return err(format!("--shard: `{s}`: at least 1 shard"));
    }
    if i == 0 || i > n {
        return err(format!("--shard: `{s}`: I must be within 1..={n} (shards count from 1)"));
    }
    Ok((i, n))
}

// ---- the output ----

/// The point's values in axis order (serde_json's maps are sorted).
struct Ordered<'a>(&'a [(String, toml::Value)]);

impl Serialize for Ordered<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

#[derive(Serialize)]
struct LineConfig<'a> {
    package: &'a PkgCfg,
    workload: &'a WorkloadCfg,
}

impl<'a> LineConfig<'a> {
    fn of(p: &'a Point) -> Self {
        LineConfig { package: &p.sc.package, workload: &p.sc.workload }
    }
}

/// One output line: the point and its `package --json` result, flattened.
#[derive(Serialize)]
struct Line<'a> {
    id: usize,
    key: &'a str,
    point: Ordered<'a>,
    config: LineConfig<'a>,
    model: &'a str,
    /// Token lines run (all iterations), as `package --json`'s `tokens`.
    tokens: usize,
    layers_run: usize,
    #[serde(flatten)]
    result: &'a PkgResult,
}

/// Runs one point: its line and, in functional mode, whether the outputs matched.
/// `spare`: the sweep's idle cores, which the point's independent layer batches may borrow.
pub fn run_point(p: &Point, spare: Option<&Arc<SpareCores>>) -> Result<(String, Option<bool>)> {
    let work = package_workload(&p.sc, &p.model)?;
    let run = PackageRun::new(p.sc.package.clone(), p.model.clone(), work, vec![p.strategy], p.sc.workload.functional, PkgRtl::default())?;
    // The sweep runs points in parallel: one layer batch at a time inside a point, more once
    // other workers have run out of points.
    let r = run.run_single(&RunOptions { batch_jobs: Some(1), spare: spare.cloned(), ..RunOptions::default() })?;
    let work = run.workload();
    let line = Line {
        id: p.index,
        key: &p.key,
        point: Ordered(&p.values),
        config: LineConfig::of(p),
        model: &p.model.name,
        tokens: work.trace.tokens.len(),
        layers_run: work.trace.header.layers as usize,
        result: &r,
    };
    Ok((serde_json::to_string(&line).map_err(|e| e.to_string())?, r.outputs_match_reference))
}

/// A sweep line starts so (`Line`'s first field): a cut-short last line is repaired only
/// when it is the start of one, never a line of some other file.
const LINE_START: &str = "{\"id\":";
/// Bytes in a line, at most (a sweep line is a few KB): a file with longer lines is not a
/// sweep output, and is not read into memory whole.
const MAX_LINE: u64 = 16 << 20;

/// Ids of the points already in `out`. A last line cut short by a crash (no newline, the
/// start of a sweep line) is cut off the file, and its point runs again; any other line that
/// is not a point of this grid (same id, key and config), or a point given twice, is an error
/// naming the line: a resume never mixes two grids in one file, and never cuts or appends to
/// a file that is not a sweep output.
pub fn resume(out: &Path, points: &[Point], origin: &str, quiet: bool) -> Result<HashSet<usize>> {
    scan_lines(out, points, origin, CutLine::Repair { quiet }, &mut |_, _, _| Ok(()))
}

/// What [`scan_lines`] does with a last line cut short by a crash.
#[derive(Debug, Clone, Copy)]
enum CutLine {
    /// Cut it off the file (a resume: its point runs again); `quiet`: without a note.
    Repair { quiet: bool },
    /// Refuse the file (a merge only reads its shards).
    Refuse,
}

/// Reads a sweep output once, line by line, with the checks of a resume (each line a point of
/// this grid with its key and config, no point twice), handing each point's line to `each`
/// (id, line number, the line without its newline). Returns the ids seen. A missing file is
/// empty.
fn scan_lines(out: &Path, points: &[Point], origin: &str, cut: CutLine, each: &mut dyn FnMut(usize, usize, &str) -> Result<()>) -> Result<HashSet<usize>> {
    use std::io::{BufRead, Read};
    let mut done = std::collections::HashMap::new();
    let name = out.display();
    let file = match std::fs::File::open(out) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashSet::new()),
        Err(e) => return err(format!("cannot read {name}: {e}")),
    };
    let read_err = |e: std::io::Error| format!("cannot read {name}: {e}");
    let not_sweep = |n: usize, what: &str| format!("--out {name}: line {n} {what}: not a sweep output (a sweep appends to and repairs its own file only; use another --out)");
    // Line by line: a long sweep's output need not fit in memory twice.
    let mut r = std::io::BufReader::new(file);
    let (mut line, mut pos, mut n) = (Vec::new(), 0u64, 0);
    loop {
        line.clear();
        let len = (&mut r).take(MAX_LINE + 1).read_until(b'\n', &mut line).map_err(read_err)?;
        if len == 0 {
            break;
        }
        n += 1;
        if len as u64 > MAX_LINE {
            return err(not_sweep(n, &format!("is longer than {MAX_LINE} bytes")));
        }
        let complete = line.last() == Some(&b'\n');
        let last = r.fill_buf().map_err(read_err)?.is_empty();
        let text = std::str::from_utf8(&line).ok();
        let v = text.and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok());
        match v {
            _ if complete && line.iter().all(u8::is_ascii_whitespace) => {}
            Some(v) if complete => {
                let id = v.get("id").and_then(serde_json::Value::as_u64).ok_or_else(|| not_sweep(n, "has no point `id`"))?;
                let p = points.get(id as usize).ok_or_else(|| format!("{name}: line {n}: point {id}, but {origin} has {} points: another grid's output (use another --out)", points.len()))?;
                let key = v.get("key").and_then(serde_json::Value::as_str).unwrap_or("");
                if key != p.key {
                    return err(format!("{name}: line {n}: point {id} is `{key}` there but `{}` in {origin}: the grid changed (use another --out)", p.key));
                }
                let cfg = serde_json::to_value(LineConfig::of(p)).map_err(|e| e.to_string())?;
                if v.get("config") != Some(&cfg) {
                    return err(format!("{name}: line {n}: point {id} ({key}) ran with another config than {origin} gives it now (use another --out)"));
                }
                if let Some(first) = done.insert(id as usize, n) {
                    return err(format!("{name}: line {n}: point {id} ({key}) is also at line {first}: a file holds each point once (remove one, or use another --out)"));
                }
                let text = text.expect("parsed as JSON, so UTF-8");
                let text = text.strip_suffix('\n').unwrap_or(text);
                each(id as usize, n, text.strip_suffix('\r').unwrap_or(text))?;
            }
            _ if !complete && matches!(cut, CutLine::Refuse) => {
                return err(format!("{name}: its last line is cut short (an interrupted shard): rerun that shard with the same --out to repair and finish it"));
            }
            // A crash mid-write leaves the start of a line and no newline.
            _ if last && !complete && text.is_some_and(|t| t.starts_with(LINE_START) || LINE_START.starts_with(t)) => {
                let CutLine::Repair { quiet } = cut else { unreachable!("refused above") };
                // Cut the fragment so the next line starts on its own.
                let f = std::fs::OpenOptions::new().write(true).open(out).map_err(|e| format!("cannot repair {name}: {e}"))?;
                f.set_len(pos).map_err(|e| format!("cannot repair {name}: {e}"))?;
                if !quiet {
                    eprintln!("note: {name}: line {n} was cut short (an interrupted run); removed, its point runs again");
                }
            }
            _ if n == 1 => return err(not_sweep(n, "is not a JSON line of a sweep")),
            _ => return err(format!("{name}: line {n} is not a JSON line of a sweep (only the last line may be cut short); fix it or use another --out")),
        }
        pos += len as u64;
    }
    Ok(done.into_keys().collect())
}

/// What [`merge_shards`] wrote: lines, and the grid's points found in no shard.
#[derive(Debug, Default)]
pub struct MergeReport {
    pub lines: usize,
    pub missing: Vec<usize>,
}

/// Merges shard outputs (`sweep --shard I/N` on one machine or many) into `out`, one line per
/// point in id order — the lines of an unsharded run, sorted. Every shard is checked as a
/// resume checks its file (each line a point of this grid, with its key and config; no point
/// twice in a file), and across shards: a point in two shards is refused, and so is a shard
/// whose last line was cut short (rerun that shard: its resume repairs it). The shards are
/// only read. Points in no shard are listed in the report (the merge is then partial).
pub fn merge_shards(points: &[Point], origin: &str, shards: &[PathBuf], out: &Path) -> Result<MergeReport> {
    use std::io::Write;
    let mut lines: std::collections::BTreeMap<usize, (String, usize)> = std::collections::BTreeMap::new();
    for (si, shard) in shards.iter().enumerate() {
        let name = shard.display();
        if std::fs::canonicalize(shard).ok().is_some_and(|c| std::fs::canonicalize(out).ok().as_ref() == Some(&c)) {
            return err(format!("--merge {name}: is also --out (write the merge to a new file)"));
        }
        // A missing shard is an error here (a resume starts a missing file afresh).
        std::fs::File::open(shard).map_err(|e| Error::io(shard, format!("cannot read: {e}")))?;
        // One read: the resume's checks, and each point's line collected.
        let mut collect = |id: usize, n: usize, line: &str| -> Result<()> {
            if let Some((_, other)) = lines.insert(id, (line.to_string(), si)) {
                return err(format!("--merge {name}: line {n}: point {id} is also in {}: shards of one grid hold disjoint points", shards[other].display()));
            }
            Ok(())
        };
        scan_lines(shard, points, origin, CutLine::Refuse, &mut collect).map_err(|e| match e {
            Error::Run(m) if !m.starts_with("--merge ") => Error::Run(format!("--merge {m}")),
            e => e,
        })?;
    }
    let missing: Vec<usize> = points.iter().map(|p| p.index).filter(|i| !lines.contains_key(i)).collect();
    let mut f = std::fs::File::create(out).map_err(|e| Error::io(out, format!("cannot write: {e}")))?;
    let mut buf = String::new();
    for (line, _) in lines.values() {
        buf.push_str(line);
        buf.push('\n');
    }
    f.write_all(buf.as_bytes()).map_err(|e| Error::io(out, format!("cannot write: {e}")))?;
    Ok(MergeReport { lines: lines.len(), missing })
}

pub fn default_out(grid: &Path, shard: Option<(usize, usize)>) -> PathBuf {
    let stem = grid.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "grid".into());
    match shard {
        Some((i, n)) => PathBuf::from(format!("out/sweep-{stem}-{i}of{n}.jsonl")),
        None => PathBuf::from(format!("out/sweep-{stem}.jsonl")),
    }
}

/// What a sweep run did: lines written, failed points (index, key, reason) and functional
/// points whose outputs differ from the reference.
#[derive(Debug, Default)]
pub struct SweepReport {
    pub written: usize,
    pub failed: Vec<(usize, String, String)>,
    pub differ: usize,
}

/// Opens the output for appending (created when missing).
pub fn open_output(out: &Path) -> Result<File> {
    std::fs::OpenOptions::new().append(true).create(true).open(out).map_err(|e| Error::Run(format!("cannot write {}: {e}", out.display())))
}

/// Runs `pending` on `threads` workers (each point single-threaded; a panicking point fails
/// that point, not the sweep) and appends each finished point's line to `file` (`out`
/// names it in errors) as soon as it finishes, one write and a flush per line. A failed
/// point is printed on stderr (the first few, with their reason) and counted; a write error
/// stops the sweep. `progress` draws a bar on stderr (on a terminal only).
pub fn run_points(pending: &[&Point], threads: usize, file: &mut File, out: &Path, progress: bool) -> Result<SweepReport> {
    let asked = threads.max(1);
    let threads = threads.min(pending.len()).max(1);
    // Points whose layer batches must run one after the other (token buffering: each batch
    // takes the deferrals of the one before) start first; the others can spread over the
    // cores that fall idle at the end (`SpareCores`). Only the order lines are written in
    // changes (it is the order points finish anyway).
    let sequential = |p: &Point| p.sc.package.token_buffer_cfg(p.strategy).is_ok_and(|tb| tb.theta_min > 0);
    let order: Vec<usize> = (0..pending.len()).filter(|&i| sequential(pending[i])).chain((0..pending.len()).filter(|&i| !sequential(pending[i]))).collect();
    let spare = Arc::new(SpareCores::default());
    // Fewer points than threads: the rest are spare from the start.
    spare.give(asked - threads);
    let pb = if !progress || !std::io::IsTerminal::is_terminal(&std::io::stderr()) { indicatif::ProgressBar::hidden() } else { indicatif::ProgressBar::new(pending.len() as u64) };
    pb.set_prefix("sweep");
    pb.set_style(indicatif::ProgressStyle::with_template("{prefix} [{elapsed_precise}] {bar:30} {pos}/{len} points, eta {eta}  {wide_msg}").expect("valid template"));
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let mut rep = SweepReport::default();
    let mut write_error = None;
    tracing::info!(points = pending.len(), threads, out = %out.display(), "sweep");
    std::thread::scope(|s| -> Result<()> {
        let (tx, rx) = mpsc::channel::<(usize, Result<(String, Option<bool>)>)>();
        for w in 0..threads {
            let (tx, next, stop, order, spare) = (tx.clone(), &next, &stop, &order, &spare);
            std::thread::Builder::new()
                .name(format!("sweep-{w}"))
                .stack_size(WORKER_STACK)
                .spawn_scoped(s, move || {
                    while !stop.load(Ordering::Relaxed) {
                        let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) else {
                            // No point left to start: this core helps the running ones.
                            spare.give(1);
                            break;
                        };
                        let p = pending[i];
                        // A panicking point (a model bug) fails that point, not the sweep.
                        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_point(p, Some(spare)))).unwrap_or_else(|_| err("panicked (see above)".into()));
                        if tx.send((i, r)).is_err() {
                            break;
                        }
                    }
                })
                .map_err(|e| Error::Run(format!("cannot start a sweep thread: {e}")))?;
        }
        drop(tx);
        for (i, r) in rx {
            let p = pending[i];
            match r {
                Ok((line, ok)) => {
                    // One write per line, then flush: a crash leaves at most a cut-short last
                    // line, which the next run repairs.
                    if let Err(e) = file.write_all(format!("{line}\n").as_bytes()).and_then(|_| file.flush()) {
                        write_error.get_or_insert(format!("cannot write {}: {e}", out.display()));
                        stop.store(true, Ordering::Relaxed);
                        continue;
                    }
                    rep.written += 1;
                    rep.differ += usize::from(ok == Some(false));
                }
                Err(e) => {
                    // The reason, not the model's state dump.
                    let e = super::package::reason(&e.to_string());
                    if rep.failed.len() < SHOWN_FAILURES {
                        pb.suspend(|| eprintln!("point {} ({}) failed: {e}", p.index, p.key));
                    }
                    rep.failed.push((p.index, p.key.clone(), e));
                }
            }
            pb.set_message(p.key.clone());
            pb.inc(1);
        }
        Ok(())
    })?;
    pb.finish_and_clear();
    if let Some(e) = write_error {
        return err(e);
    }
    Ok(rep)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "[scenario]\nname = \"t\"\nkind = \"package\"\n[workload]\nmodel = \"functional\"\ntokens = 8\nstrategies = [\"ep\"]\n";

    fn grid(g: &str) -> Result<Grid> {
        Grid::parse(&format!("{BASE}{g}"), "g.toml")
    }

    fn keys(g: &Grid) -> Vec<String> {
        g.points("g.toml").unwrap().into_iter().map(|p| p.key).collect()
    }

    #[test]
    fn points_are_the_product_in_file_order_last_axis_fastest() {
        let g = grid("[grid]\n\"workload.tokens\" = [8, 16]\nstrategy = [\"ep\", \"a3\", \"hydra\"]\n\"package.micro_slices\" = [2, 4]\n").unwrap();
        assert_eq!(g.count(), 12);
        let k = keys(&g);
        assert_eq!(k[0], "workload.tokens=8,strategy=ep,package.micro_slices=2");
        assert_eq!(k[1], "workload.tokens=8,strategy=ep,package.micro_slices=4");
        assert_eq!(k[2], "workload.tokens=8,strategy=a3,package.micro_slices=2");
        assert_eq!(k[11], "workload.tokens=16,strategy=hydra,package.micro_slices=4");
        let p = g.point(7, "g.toml").unwrap();
        assert_eq!((p.sc.workload.tokens, p.strategy, p.sc.package.micro_slices), (16, Strategy::Ep, 4));
        assert_eq!(p.sc.workload.strategies, ["ep"]);
        // Values the grid does not touch come from the base.
        assert_eq!(p.sc.workload.model, "functional");
        assert_eq!(p.values[1], ("strategy".to_string(), toml::Value::String("ep".into())));
    }

    #[test]
    fn unquoted_dotted_keys_and_table_values_merge() {
        let g = grid("[package]\nmicro_slices = 4\n[grid]\npackage = [{ rows = 2, cols = 2 }, { rows = 3, cols = 3, pe = { rows = 8 } }]\nworkload.tokens = [8]\n").unwrap();
        let k = keys(&g);
        assert_eq!(k, ["package={cols=2,rows=2},workload.tokens=8", "package={cols=3,pe={rows=8},rows=3},workload.tokens=8"]);
        let p = g.point(1, "g.toml").unwrap();
        assert_eq!((p.sc.package.rows, p.sc.package.cols, p.sc.package.pe.rows, p.sc.package.micro_slices), (3, 3, 8, 4));
        // A deep merge: the PE array keeps its other fields.
        assert_eq!(p.sc.package.pe.cols, hw::pkg::config::PkgCfg::default().pe.cols);
    }

    #[test]
    fn grid_blocks_concatenate() {
        let g = grid("[[grid]]\nstrategy = [\"a1\", \"a2\"]\n[[grid]]\nstrategy = [\"a5\"]\n\"package.token_buffer_slack\" = [0.1, 0.3]\n").unwrap();
        assert_eq!(keys(&g), ["strategy=a1", "strategy=a2", "strategy=a5,package.token_buffer_slack=0.1", "strategy=a5,package.token_buffer_slack=0.3"]);
    }

    #[test]
    fn bad_grids_name_the_path() {
        let bad = |g: &str, needle: &str| {
            let e = grid(g).and_then(|g| g.points("g.toml").map(|_| ())).unwrap_err();
            let e = e.to_string();
            assert!(e.contains(needle), "`{needle}` not in {e}");
            assert!(e.starts_with("g.toml"), "{e}");
        };
        bad("", "no [grid]");
        bad("[grid]\n", "no axis");
        bad("[grid]\n\"workload.tokens\" = []\n", "grid axis `workload.tokens`: empty");
        bad("[grid]\n\"workload.tokens\" = 16\n", "grid.workload.tokens");
        bad("[grid]\n\"workload.tokenz\" = [16]\n", "config field `workload.tokenz`: unknown field `tokenz`");
        // The generated TOML's line numbers would point into nobody's file.
        let e = grid("[grid]\n\"package.pe.rowz\" = [16]\n").unwrap().points("g.toml").unwrap_err().to_string();
        assert!(e.contains("config field `package.pe.rowz`: unknown field `rowz`") && !e.contains("line"), "{e}");
        bad("[grid]\n\"package.bogus.x\" = [16]\n", "bogus");
        bad("[grid]\n\"workload.tokens.x\" = [16]\n", "`workload.tokens` is not a table");
        bad("[grid]\n\"workload..x\" = [16]\n", "non-empty names");
        bad("[grid]\n\"workload.tokens\" = [\"many\"]\n", "workload.tokens");
        bad("[grid]\n\"workload.tokens\" = [0]\n", "workload.tokens");
        bad("[grid]\n\"package.micro_slices\" = [4, 49]\n", "point 1 (package.micro_slices=49)");
        bad("[grid]\n\"workload.tokens\" = [8, 8]\n", "value 8 given twice");
        bad("[grid]\nstrategy = [\"ep\", \"zz\"]\n", "grid axis `strategy`: unknown strategy `zz`");
        bad("[grid]\n\"workload.strategies\" = [[\"ep\", \"a3\"]]\n", "one strategy");
        bad("[grid]\n\"scenario.kind\" = [\"noc_sweep\"]\n", "scenario.kind");
        bad("[output]\njson = \"x.json\"\n[grid]\nstrategy = [\"ep\"]\n", "config field `output`");
        bad("[grid]\n\"workload.iters\" = [0]\n", "workload.iters");
        bad("[grid]\n\"workload.model\" = [\"deepseek-v3\"]\n\"workload.tokens\" = [8]\n", "EIT");
        let big = (0..400).map(|i| i.to_string()).collect::<Vec<_>>().join(",");
        bad(&format!("[grid]\n\"workload.seed\" = [{big}]\n\"package.seed\" = [{big}]\n"), "400 x 400 points is more than 100000");
    }

    #[test]
    fn shards_are_validated() {
        assert_eq!(parse_shard("2/3").unwrap(), (2, 3));
        for (s, needle) in [("0/2", "1..=2"), ("3/2", "1..=2"), ("1/0", "at least 1 shard"), ("x", "I/N"), ("1/", "I/N"), ("-1/2", "I/N")] {
            let e = parse_shard(s).unwrap_err().to_string();
            assert!(e.contains(needle), "{s}: {e}");
        }
    }

    /// The shipped grids (testbenches/sweeps) expand and check.
    #[test]
    fn shipped_grids_check() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("sweeps");
        for (name, n) in [("fig9", 192), ("fig15", 7), ("fig17", 16), ("fig18", 18), ("roofline", 14), ("smoke", 8)] {
            let path = dir.join(format!("{name}.toml"));
            let g = Grid::parse(&std::fs::read_to_string(&path).unwrap(), name).unwrap();
            assert_eq!(g.points(name).unwrap().len(), n, "{name}");
        }
    }
}

