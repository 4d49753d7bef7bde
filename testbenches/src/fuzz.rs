//! Fuzz harness (issue 5), stable toolchain: seeded mutation of valid inputs. The targets
//! live in `testbenches/tests/fuzz.rs` (in-process: waveforms, TOML configs, routing traces)
//! and `tests/fuzz_cli.rs` (the `waferstream` binary, spawned); both use this runner.
//!
//! Property of every target: each input is accepted or refused with a short message; never a
//! panic, an abort, a case slower than its time bound, or one whose heap grows by more than
//! its memory bound. A failing case stops the run, its input is written to
//! `<dir>/fuzz-crash-<target>-<case>`, and the failure message names that file; copy it to
//! `testbenches/regress/<area>/issue<N>_<slug>.*` with a test in `regress_corpus.rs`.
//!
//! Each case runs on a worker thread; the runner waits at most the time bound for it, so a
//! case that never returns is reported (with its input) instead of hanging the suite. Before
//! each case its input is also written to `<dir>/fuzz-current-<target>`, so if a case aborts
//! the process (an allocation failure cannot be caught) the input is still on disk.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::cell::Cell;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::Error;

/// xorshift64*: enough for mutation, no dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
    /// The generator of case `i` (cases are independent: any one can be replayed alone).
    pub fn for_case(i: u64) -> Rng {
        Rng(0x9E37_79B9_7F4A_7C15 ^ (i + 1).wrapping_mul(0x1000_0000_01b3))
    }
}

/// Byte-level mutations (flip, insert, delete, truncate, duplicate a span, splice a token),
/// one to six of them.
pub fn mutate_bytes(seed: &[u8], rng: &mut Rng, tokens: &[&[u8]]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for _ in 0..1 + rng.below(6) {
        if b.is_empty() {
            b.push(b'0');
        }
        let p = rng.below(b.len());
        match rng.below(6) {
            0 => b[p] = rng.next() as u8,
            1 => b.insert(p, rng.next() as u8),
            2 => {
                b.remove(p);
            }
            3 => b.truncate(p),
            4 => {
                let e = (p + rng.below(64)).min(b.len());
                let span = b[p..e].to_vec();
                let q = rng.below(b.len());
                b.splice(q..q, span);
            }
            _ => {
                if !tokens.is_empty() {
                    let t = tokens[rng.below(tokens.len())];
                    b.splice(p..p, t.iter().copied());
                }
            }
        }
    }
    b
}

/// Values that sit on and beyond the edges of integer, float and JSON/TOML ranges.
pub const EDGE_VALUES: &[&str] = &[
    "0", "1", "-1", "2", "3", "7", "8", "16", "17", "255", "256", "4095", "4096", "4097", "65535", "65536", "4294967295", "4294967296",
    "18446744073709551615", "18446744073709551616", "1e308", "1e999", "-1e308", "nan", "inf", "-inf", "0.5", "1e-300", "1e40", "-0", "true",
    "\"x\"", "\"\"", "[]", "[0]", "null", "{}",
];

/// Line-structured mutation for text formats (TOML, JSON Lines), one to three operations:
/// replace a number in a line with an edge value, delete, duplicate or swap lines, insert a
/// token as a line; half of the cases fall back to [`mutate_bytes`]. Keeps most inputs
/// syntactically valid, so the checks behind the parser are reached.
pub fn mutate_lines(seed: &[u8], rng: &mut Rng, tokens: &[&[u8]]) -> Vec<u8> {
    if rng.below(2) == 0 {
        return mutate_bytes(seed, rng, tokens);
    }
    let mut lines: Vec<Vec<u8>> = seed.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
    for _ in 0..1 + rng.below(3) {
        let i = rng.below(lines.len());
        match rng.below(7) {
            0..=2 => {
                // The k-th number-like run of the line (digits, sign, dot, exponent).
                let l = &lines[i];
                let num = |b: u8| b.is_ascii_digit() || b == b'.' || b == b'-' || b == b'e' || b == b'+';
                let mut runs = vec![];
                let mut j = 0;
                while j < l.len() {
                    if l[j].is_ascii_digit() {
                        let s = j;
                        while j < l.len() && num(l[j]) {
                            j += 1;
                        }
                        runs.push((s, j));
                    } else {
                        j += 1;
                    }
                }
                if let Some(&(a, b)) = runs.get(rng.below(runs.len())) {
                    let v = rng.pick(EDGE_VALUES).as_bytes().to_vec();
                    lines[i].splice(a..b, v);
                }
            }
            3 if lines.len() > 1 => {
                lines.remove(i);
            }
            4 => {
                let l = lines[i].clone();
                lines.insert(rng.below(lines.len() + 1), l);
            }
            5 => {
                let j = rng.below(lines.len());
                lines.swap(i, j);
            }
            _ => {
                if !tokens.is_empty() {
                    let t = rng.pick(tokens).to_vec();
                    lines.insert(rng.below(lines.len() + 1), t);
                }
            }
        }
    }
    lines.join(&b'\n')
}

/// One input kind: how to make seeds, mutate them and check a case.
pub struct Target {
    pub name: &'static str,
    /// Valid inputs to mutate (may write helper files into the given directory).
    pub seeds: fn(&Path) -> Vec<Vec<u8>>,
    /// Format tokens spliced in by the byte mutator.
    pub tokens: &'static [&'static [u8]],
    /// `None`: [`mutate_bytes`]; else a structure-aware mutator.
    pub mutate: Option<fn(&[u8], &mut Rng, &[&[u8]]) -> Vec<u8>>,
    /// Ok(()) accepted, Err(message) refused; a panic, an over-long or over-large case is the
    /// failure. Runs on a worker thread; the directory is the target's scratch space.
    pub check: fn(&Path, &[u8]) -> Result<(), String>,
    /// Refusal messages may span lines (TOML errors draw a caret under the column; the CLI
    /// folds them onto one line).
    pub multiline_ok: bool,
    /// Wall time per case.
    pub time_limit: Duration,
    /// Heap growth per case, measured by [`CountingAlloc`] when the test binary installs it:
    /// the peak growth of the worker thread that ran the check (per thread, so concurrent
    /// targets do not count each other's allocations).
    pub mem_limit: usize,
    /// Open findings that cannot be fixed here yet: (text of the panic, its corpus file).
    /// A case failing with one of them is counted and reported, and the run goes on to look
    /// for others. Empty once they are fixed.
    pub known: &'static [(&'static str, &'static str)],
}

/// Outcome of a clean run.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub cases: u64,
    pub accepted: u64,
    pub refused: u64,
    pub seconds: f64,
    /// Largest heap growth of one case (bytes; 0 without the counting allocator).
    pub max_case_heap: usize,
    pub slowest_case: Duration,
    /// Cases that hit a known open finding, by its corpus file.
    pub known: Vec<(&'static str, u64)>,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} cases ({} accepted, {} refused) in {:.1} s, 0 failures; slowest case {:.3} s, largest case heap {:.1} MiB",
            self.cases,
            self.accepted,
            self.refused,
            self.seconds,
            self.slowest_case.as_secs_f64(),
            self.max_case_heap as f64 / (1 << 20) as f64
        )?;
        for (file, n) in &self.known {
            write!(f, "; {n} case(s) hit the known open finding {file}")?;
        }
        Ok(())
    }
}

/// Heap accounting for the memory bound, per thread: each thread's live bytes and their
/// peak since its last [`heap_mark`]. Per thread so that targets fuzzed concurrently (the test
/// harness runs tests on several threads) do not see each other's allocations: a case's bound
/// is the growth of the thread that ran it. Bytes freed on another thread than the one that
/// allocated them lower that thread's count (it may go negative), so a hand-over between
/// threads is not a leak on either side. Threads a dependency runs work on (a global pool)
/// are not counted for the case.
pub struct CountingAlloc;

thread_local! {
    // `const` and Drop-free, so using them inside the allocator never allocates.
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn grow(n: usize) {
    // `try_with`: nothing is counted while the thread's locals are being torn down.
    let _ = LIVE.try_with(|l| {
        let now = l.get().wrapping_add(n as isize);
        l.set(now);
        let _ = PEAK.try_with(|p| p.set(p.get().max(now)));
    });
}

fn shrink(n: usize) {
    let _ = LIVE.try_with(|l| l.set(l.get().wrapping_sub(n as isize)));
}

/// Starts a measurement on this thread: the peak is reset to the current live bytes, which
/// are returned (the base for [`heap_growth`]).
pub fn heap_mark() -> isize {
    let live = LIVE.try_with(Cell::get).unwrap_or(0);
    let _ = PEAK.try_with(|p| p.set(live));
    live
}

/// This thread's peak heap growth since the [`heap_mark`] that returned `base` (0 without the
/// counting allocator).
pub fn heap_growth(base: isize) -> usize {
    PEAK.try_with(Cell::get).unwrap_or(0).saturating_sub(base).max(0) as usize
}

// SAFETY: forwards to the system allocator; the counters are plain thread-local cells.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            grow(l.size());
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        shrink(l.size());
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            if new >= l.size() {
                grow(new - l.size());
            } else {
                shrink(l.size() - new);
            }
        }
        q
    }
}

/// Cases per target: `FUZZ_CASES` (scripts/fuzz.sh), else `default`.
pub fn cases(default: u64) -> u64 {
    std::env::var("FUZZ_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// Runs `cases` mutated inputs of `t`, using `dir` as scratch space. Err names the failing
/// case, why it failed, and the file its input was saved to ([`Error::Run`]; [`Error::Io`] for
/// the scratch directory).
pub fn run(t: &Target, cases: u64, dir: &Path) -> crate::Result<Summary> {
    quiet_workers();
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e.to_string()))?;
    let seeds = (t.seeds)(dir);
    assert!(!seeds.is_empty(), "{}: no seeds", t.name);
    let current = dir.join(format!("fuzz-current-{}", t.name));
    // The worker: runs checks in order, reporting each result (a panic is caught there).
    let (to_worker, inbox) = mpsc::channel::<Vec<u8>>();
    // With each result, the worker thread's peak heap growth during the check.
    let (to_runner, results) = mpsc::channel::<(std::thread::Result<Result<(), String>>, usize)>();
    let (check, wdir) = (t.check, dir.to_path_buf());
    std::thread::Builder::new()
        .name(format!("fuzz-{}", t.name))
        .spawn(move || {
            for input in inbox {
                let base = heap_mark();
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&wdir, &input)));
                let heap = heap_growth(base);
                if to_runner.send((r, heap)).is_err() {
                    break;
                }
            }
        })
        .map_err(|e| Error::Run(e.to_string()))?;
    let start = Instant::now();
    let mut s = Summary { cases, accepted: 0, refused: 0, seconds: 0.0, max_case_heap: 0, slowest_case: Duration::ZERO, known: vec![] };
    for i in 0..cases {
        let mut rng = Rng::for_case(i);
        let seed = &seeds[rng.below(seeds.len())];
        let input = match t.mutate {
            Some(m) => m(seed, &mut rng, t.tokens),
            None => mutate_bytes(seed, &mut rng, t.tokens),
        };
        let _ = std::fs::write(&current, &input);
        let t0 = Instant::now();
        to_worker.send(input.clone()).map_err(|_| Error::Run(format!("{}: worker gone", t.name)))?;
        let (r, heap) = match results.recv_timeout(t.time_limit) {
            Ok((r, heap)) => (Ok(r), heap),
            Err(e) => (Err(e), 0),
        };
        let dt = t0.elapsed();
        let fail = |why: String| -> Error {
            let crash = dir.join(format!("fuzz-crash-{}-{i}", t.name));
            let _ = std::fs::write(&crash, &input);
            Error::Run(format!("{} case {i}: {why}; input saved to {}", t.name, crash.display()))
        };
        match r {
            Err(_) => return Err(fail(format!("no result after {:.1} s (hang?)", t.time_limit.as_secs_f64()))),
            Ok(Err(p)) => {
                let msg = p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_default();
                let msg: String = msg.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" | ").chars().take(600).collect();
                match t.known.iter().find(|(needle, _)| msg.contains(needle)) {
                    Some(&(_, file)) => match s.known.iter_mut().find(|(f, _)| *f == file) {
                        Some((_, n)) => *n += 1,
                        None => s.known.push((file, 1)),
                    },
                    None => return Err(fail(format!("panic: {msg}"))),
                }
                continue;
            }
            Ok(Ok(Err(msg))) => {
                if msg.trim().is_empty() || (!t.multiline_ok && msg.trim_end().contains('\n')) {
                    return Err(fail(format!("refusal is not a one-line message: {msg:?}")));
                }
                s.refused += 1;
            }
            Ok(Ok(Ok(()))) => s.accepted += 1,
        }
        if heap > t.mem_limit {
            return Err(fail(format!("heap grew by {} MiB (bound {} MiB)", heap >> 20, t.mem_limit >> 20)));
        }
        s.max_case_heap = s.max_case_heap.max(heap);
        s.slowest_case = s.slowest_case.max(dt);
    }
    let _ = std::fs::remove_file(&current);
    s.seconds = start.elapsed().as_secs_f64();
    Ok(s)
}

/// Panics on the fuzz worker threads are findings the runner reports with their input: the
/// panic hook stays quiet for them (installed once; other threads keep the default hook, so
/// a failing test still prints its message).
fn quiet_workers() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !std::thread::current().name().is_some_and(|n| n.starts_with("fuzz-")) {
                prev(info);
            }
        }));
    });
}

/// Runs a target and panics with the failure (for `#[test]`s); prints the summary line.
pub fn fuzz_test(t: &Target, default_cases: u64, dir: PathBuf) {
    match run(t, cases(default_cases), &dir) {
        Ok(s) => eprintln!("fuzz {}: {s}", t.name),
        Err(e) => panic!("{e}"),
    }
}
