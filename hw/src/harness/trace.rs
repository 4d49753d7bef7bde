//! Tracing hooks: how a module exposes its registers and ports under hierarchical names, and
//! how value changes are collected per partition and merged deterministically.
//!
//! A module implements [`Probe`]: it declares its signals once (scope path, name, width) and
//! samples their values in the same order every cycle. Each partition keeps a [`ChangeLog`]
//! covering a contiguous range of global signal ids; since partitions hold contiguous ranges
//! in instance order, merging logs by (cycle, partition) gives the same change stream — and so
//! the same VCD/FST bytes — whatever the thread count. Cycles in which nothing changes write
//! nothing, which is why fast-forward over idle cycles leaves waveforms bit-identical.

pub use waves::SignalDecl;

use super::Cycle;
use crate::Error;

pub trait Probe {
    /// Appends this module's signals, in a fixed order, under `scope`.
    fn declare(&self, scope: &[String], out: &mut Vec<SignalDecl>);
    /// Appends the current values in declaration order.
    fn sample(&self, out: &mut Vec<u64>);
}

/// Where a block's sampled values go, in declaration order: a vector ([`Probe::sample`]) or,
/// in a traced run, one shared diff loop, from the values as given or from the log's block
/// buffer ([`ChangeLog::block_of`]).
pub trait SampleOut {
    fn put_slice(&mut self, vs: &[u64]);
    #[inline(always)]
    fn put_all<const N: usize>(&mut self, vs: [u64; N]) {
        self.put_slice(&vs);
    }
}

impl SampleOut for Vec<u64> {
    #[inline(always)]
    fn put_slice(&mut self, vs: &[u64]) {
        self.extend_from_slice(vs);
    }
}

/// A block whose values can be sampled into any [`SampleOut`] (the hot blocks of a traced
/// package: [`ChangeLog::block_of`] diffs them as given). Its [`Probe::sample`] is
/// `sample_to` into the vector, so both give the same values in the same order.
pub trait SampleBlock {
    fn sample_to<O: SampleOut>(&self, out: &mut O);
}

/// A block's values gathered into the log's block buffer (`scratch`), to be diffed after
/// ([`ChangeLog::block_of`]). A block given as one slice of all its values (most are: an
/// array of a few values, the router's stack buffer) is diffed from that slice, with no
/// copy (`done`).
struct Gather<'a> {
    log: &'a mut ChangeLog,
    n: usize,
    /// The block's declared signal count.
    len: usize,
    done: bool,
}

impl SampleOut for Gather<'_> {
    #[inline(always)]
    fn put_slice(&mut self, vs: &[u64]) {
        let n = self.n;
        if n == 0 && vs.len() == self.len {
            self.log.diff_from(vs);
            self.done = true;
        } else {
            // (A probe out of step with its declaration fails the count check after.)
            self.log.scratch.extend_from_slice(vs);
        }
        self.n = n + vs.len();
    }
}

/// The diff of one block: `vs` against its last values `prev` (taken), each difference
/// recorded as a change of signal `id + k` at `at`. One loop for every block, out of line:
/// a traced package's loop is larger than the core's instruction cache, and each block's
/// own inlined diff loop made it larger still.
#[inline(never)]
fn diff_values(prev: &mut [u64], vs: &[u64], at: Cycle, id: u32, changes: &mut Vec<(Cycle, u32, u64)>) {
    for (k, (p, &v)) in prev.iter_mut().zip(vs).enumerate() {
        if *p != v {
            *p = v;
            changes.push((at, id + k as u32, v));
        }
    }
}

/// Where merged value changes go (a waveform writer, or a test's vector).
pub trait SignalSink {
    /// Takes one value change; a sink that cannot (a waveform write that failed) says why
    /// ([`Error::Wave`] for a waveform writer).
    fn change(&mut self, cycle: Cycle, sig: usize, value: u64) -> Result<(), Error>;
    /// A run of changes in (cycle, signal) order, as one call (a sink that can take them in
    /// a tight loop overrides this; the default passes them to `change` one by one).
    fn changes(&mut self, run: &[(Cycle, u32, u64)]) -> Result<(), Error> {
        for &(c, sig, v) in run {
            self.change(c, sig as usize, v)?;
        }
        Ok(())
    }
    /// Cycles whose changes the sink writes (start inclusive, end exclusive). Changes before
    /// the start only set the values it dumps at the start; the producer may fold them into
    /// one change per signal. After the end nothing is needed, so nothing is sampled.
    /// The changes in `v` as [`SignalSink::changes`], leaving `v` empty (a sink that can
    /// take the vector itself overrides this).
    fn take_changes(&mut self, v: &mut Vec<(Cycle, u32, u64)>) -> Result<(), Error> {
        let r = self.changes(v);
        v.clear();
        r
    }
    fn window(&self) -> (Cycle, Cycle) {
        (0, Cycle::MAX)
    }
    /// Whether the sink writes signal `sig` at all (a glob filter); changes of other signals
    /// need not be recorded.
    fn wants(&self, _sig: usize) -> bool {
        true
    }
}

/// Traces a block stepped on its own (a controller run between simulations) to its end: each
/// cycle, from 0, the signals `sample` gives that differ from the previous cycle's go into
/// `sink`; then, unless `done`, one `step`.
pub fn trace_to_end<B>(b: &mut B, sink: &mut dyn SignalSink, sample: impl Fn(&B, &mut Vec<u64>), done: impl Fn(&B) -> bool, step: impl Fn(&mut B)) -> Result<(), Error> {
    let (mut prev, mut cur): (Vec<u64>, Vec<u64>) = (Vec::new(), Vec::new());
    let mut t: Cycle = 0;
    loop {
        cur.clear();
        sample(b, &mut cur);
        for (i, &v) in cur.iter().enumerate() {
            if prev.get(i) != Some(&v) {
                sink.change(t, i, v)?;
            }
        }
        std::mem::swap(&mut prev, &mut cur);
        if done(b) {
            return Ok(());
        }
        step(b);
        t += 1;
    }
}

impl SignalSink for waves::WaveWriter {
    fn change(&mut self, cycle: Cycle, sig: usize, value: u64) -> Result<(), Error> {
        Ok(waves::WaveWriter::change(self, cycle, sig, value)?)
    }
    fn changes(&mut self, run: &[(Cycle, u32, u64)]) -> Result<(), Error> {
        Ok(waves::WaveWriter::change_run(self, run)?)
    }
    fn take_changes(&mut self, v: &mut Vec<(Cycle, u32, u64)>) -> Result<(), Error> {
        Ok(waves::WaveWriter::change_vec(self, v)?)
    }
    fn window(&self) -> (Cycle, Cycle) {
        waves::WaveWriter::window(self)
    }
    fn wants(&self, sig: usize) -> bool {
        waves::WaveWriter::selects(self, sig)
    }
}

impl SignalSink for Vec<(Cycle, usize, u64)> {
    fn change(&mut self, cycle: Cycle, sig: usize, value: u64) -> Result<(), Error> {
        self.push((cycle, sig, value));
        Ok(())
    }
}

/// Value changes of one partition's signals.
///
/// Memory is bounded by the sink's window and filter, not by the run: before the window only
/// the current values are kept (`prev`), and the changes that happened there are handed out
/// as one catch-up change per signal at the last cycle before the window (the writer folds
/// them into its dump at the window start); after the window nothing is sampled; signals the
/// sink does not want are never recorded. Per signal: 8 bytes of values, 8 of sample buffer,
/// 1 of filter; changes cost 16 bytes each until the next drain.
#[derive(Debug, Clone, Default)]
pub struct ChangeLog {
    /// Global id of this partition's first signal.
    pub base: usize,
    prev: Vec<u64>,
    cur: Vec<u64>,
    changes: Vec<(Cycle, u32, u64)>,
    /// Cycles whose changes are recorded (start inclusive, end exclusive).
    window: (Cycle, Cycle),
    /// Per signal: recorded at all (`None`: every signal).
    keep: Option<Box<[bool]>>,
    /// Last cycle committed before the window, while its values are not yet handed out.
    pre: Option<Cycle>,
    /// Block-wise sampling ([`ChangeLog::begin_blocks`]): each block's first signal in
    /// sampling order, then the end, learned at the first tick (where every block is sampled).
    seg_start: Vec<u32>,
    learned: bool,
    /// The blocks are learned and skips are not checked: an untouched block costs only its
    /// ordinal's increment.
    fast: bool,
    /// Blocks are diffed by one shared loop, as given or from the block buffer (`fast`, in the
    /// window, no filter: every value is recorded).
    direct: bool,
    /// The tick being sampled block by block, the next block's ordinal and first signal
    /// (`pos` counted while learning; afterwards it is `seg_start[seg_i]`).
    at: Cycle,
    seg_i: usize,
    pos: usize,
    /// One block's samples, the block buffer (small, stays in cache).
    scratch: Vec<u64>,
    /// The changes of blocks that ran ahead at the tick being sampled (signal, value), in
    /// signal order ([`ChangeLog::ahead_change`]), merged into its changes at
    /// [`ChangeLog::end_blocks`]; and where that tick's changes start in `changes`.
    due_now: Vec<(u32, u64)>,
    tick_start: usize,
    /// Test aid: a block reported untouched is sampled anyway and must not have changed
    /// (a panic names the signal). Off in runs.
    pub check_skips: bool,
}

impl ChangeLog {
    /// `n` signals starting at global id `base`; all start at 0 (reset value).
    pub fn new(base: usize, n: usize) -> Self {
        ChangeLog { base, prev: vec![0; n], cur: Vec::with_capacity(n), window: (0, Cycle::MAX), ..Default::default() }
    }

    /// Like [`ChangeLog::new`], recording only what `sink` writes (its window and filter).
    pub fn for_sink(base: usize, n: usize, sink: &dyn SignalSink) -> Self {
        let mut l = ChangeLog::new(base, n);
        l.window = sink.window();
        let keep: Box<[bool]> = (0..n).map(|i| sink.wants(base + i)).collect();
        l.keep = (!keep.iter().all(|&k| k)).then_some(keep);
        l
    }

    /// Whether cycle `now` must be sampled (false once the window has ended).
    #[inline]
    pub fn active(&self, now: Cycle) -> bool {
        now < self.window.1
    }

    /// Buffer to sample into for this cycle (cleared).
    pub fn begin(&mut self) -> &mut Vec<u64> {
        self.cur.clear();
        &mut self.cur
    }

    /// Records the differences between this cycle's samples and the previous values.
    pub fn commit(&mut self, now: Cycle) {
        assert_eq!(self.cur.len(), self.prev.len(), "probe sampled a different signal count");
        if now >= self.window.1 {
            return;
        }
        if now < self.window.0 {
            // Before the window: values only.
            std::mem::swap(&mut self.prev, &mut self.cur);
            self.pre = Some(now);
            return;
        }
        // Catch-up: every value that left its reset 0 before the window, at the last cycle
        // before it (so in (cycle, signal) order ahead of this cycle's changes).
        self.flush_pre();
        diff_into(&mut self.prev, &self.cur, now, self.base, self.keep.as_deref(), Some(&mut self.changes));
    }

    /// Starts sampling tick `now` block by block: one [`ChangeLog::block`] per block, in
    /// declaration order, then [`ChangeLog::end_blocks`]. Returns false past the window
    /// (nothing to sample). The same changes as [`ChangeLog::begin`] + `commit` with every
    /// block sampled, at the cost of the blocks that were evaluated only.
    pub fn begin_blocks(&mut self, now: Cycle) -> bool {
        if now >= self.window.1 {
            return false;
        }
        if now < self.window.0 {
            self.pre = Some(now);
        } else {
            self.flush_pre();
        }
        self.tick_start = self.changes.len();
        (self.at, self.seg_i, self.pos) = (now, 0, 0);
        self.fast = self.learned && !self.check_skips;
        self.direct = self.fast && now >= self.window.0 && self.keep.is_none();
        true
    }

    /// [`ChangeLog::block`] for a [`SampleBlock`]: the same changes; in a full trace in its
    /// window, diffed from the values as given when they come as one slice.
    #[inline(always)]
    pub fn block_of<B: SampleBlock>(&mut self, touched: bool, b: &B) {
        if !touched && self.fast {
            self.seg_i += 1;
        } else if self.direct {
            self.block_diffed(b);
        } else {
            self.block_sampled(touched, |o| b.sample_to(o));
        }
    }

    /// The next `n` blocks, of which those whose bit is set in `touched` were evaluated:
    /// `f(log, k, touched)` gives block `k` with [`ChangeLog::block`] or
    /// [`ChangeLog::block_of`]. With skips not checked, only the touched blocks are visited
    /// (a tile at a DDR or UCIe edge has one or two of its eight); otherwise every block, in
    /// order, with its bit.
    #[inline(always)]
    pub fn blocks(&mut self, n: usize, touched: u64, mut f: impl FnMut(&mut Self, usize, bool)) {
        if self.fast {
            let start = self.seg_i;
            let mut m = touched;
            while m != 0 {
                let k = m.trailing_zeros() as usize;
                self.seg_i = start + k;
                f(self, k, true);
                m &= m - 1;
            }
            self.seg_i = start + n;
        } else {
            for k in 0..n {
                f(self, k, touched >> k & 1 == 1);
            }
        }
    }

    #[inline(always)]
    fn block_diffed<B: SampleBlock>(&mut self, b: &B) {
        let len = (self.seg_start[self.seg_i + 1] - self.seg_start[self.seg_i]) as usize;
        self.scratch.clear();
        let mut g = Gather { log: self, n: 0, len, done: false };
        b.sample_to(&mut g);
        let (n, done) = (g.n, g.done);
        if done {
            assert_eq!(n, len, "block {} sampled a different signal count", self.seg_i);
            self.seg_i += 1;
        } else {
            self.diff_gathered(n);
        }
    }

    /// The current block, given whole as `vs`, against its last values.
    fn diff_from(&mut self, vs: &[u64]) {
        let s = self.seg_start[self.seg_i] as usize;
        diff_values(&mut self.prev[s..s + vs.len()], vs, self.at, (self.base + s) as u32, &mut self.changes);
    }

    /// The current block, gathered into the block buffer (`n` values given), against its
    /// last values.
    fn diff_gathered(&mut self, n: usize) {
        let (s, e) = (self.seg_start[self.seg_i] as usize, self.seg_start[self.seg_i + 1] as usize);
        assert_eq!(n, e - s, "block {} sampled a different signal count", self.seg_i);
        diff_values(&mut self.prev[s..e], &self.scratch, self.at, (self.base + s) as u32, &mut self.changes);
        self.seg_i += 1;
    }

    /// One block's values. `touched` false says nothing has changed the block's state since
    /// its last sample (it was not evaluated), so its values cannot have changed: it is
    /// skipped. A block is always sampled at the first tick, which learns its signal count.
    ///
    /// Most blocks at most ticks are untouched (a tick is often a UCIe or DDR edge only), so
    /// the skip is inlined and the sampling is a call.
    #[inline(always)]
    pub fn block(&mut self, touched: bool, sample: impl FnOnce(&mut Vec<u64>)) {
        if !touched && self.fast {
            self.seg_i += 1;
        } else if self.direct {
            self.block_gathered(sample);
        } else {
            self.block_sampled(touched, sample);
        }
    }

    /// A full trace in its window: the values into the block buffer, and the shared diff.
    /// (Out of line: inlined into the stepper's loop at the IO die's samples, it changed
    /// what the compiler inlined there.)
    #[inline(never)]
    fn block_gathered(&mut self, sample: impl FnOnce(&mut Vec<u64>)) {
        self.scratch.clear();
        sample(&mut self.scratch);
        self.diff_gathered(self.scratch.len());
    }

    /// `n` blocks in a row that were all untouched (e.g. every block of a sleeping tile):
    /// skipped at once when skips are not checked (returns true); otherwise returns false and
    /// the caller goes through them with [`ChangeLog::block`].
    #[inline(always)]
    pub fn skip_blocks(&mut self, n: usize) -> bool {
        if self.fast {
            self.seg_i += n;
        }
        self.fast
    }

    #[inline(never)]
    fn block_sampled(&mut self, touched: bool, sample: impl FnOnce(&mut Vec<u64>)) {
        let learning = !self.learned;
        if learning {
            self.seg_start.push(self.pos as u32);
        } else {
            self.pos = self.seg_start[self.seg_i] as usize;
        }
        self.scratch.clear();
        sample(&mut self.scratch);
        let n = self.scratch.len();
        if !learning {
            let declared = (self.seg_start[self.seg_i + 1] - self.seg_start[self.seg_i]) as usize;
            assert_eq!(n, declared, "block {} sampled a different signal count", self.seg_i);
        }
        assert!(self.pos + n <= self.prev.len(), "probe sampled more signals than declared");
        let prev = &mut self.prev[self.pos..self.pos + n];
        if !touched && !learning {
            if let Some(i) = (0..n).find(|&i| prev[i] != self.scratch[i]) {
                panic!("signal {} changed at tick {} in a block reported untouched (block {}, {} -> {})", self.base + self.pos + i, self.at, self.seg_i, prev[i], self.scratch[i]);
            }
        }
        // Before the window: values only.
        let changes = (self.at >= self.window.0).then_some(&mut self.changes);
        diff_into(prev, &self.scratch, self.at, self.base + self.pos, self.keep.as_deref().map(|k| &k[self.pos..self.pos + n]), changes);
        self.pos += n;
        self.seg_i += 1;
    }

    /// Ends a tick sampled block by block (checks every declared signal was covered).
    pub fn end_blocks(&mut self) {
        if !self.learned {
            assert_eq!(self.pos, self.prev.len(), "probe sampled a different signal count");
            self.seg_start.push(self.pos as u32);
            self.learned = true;
        }
        assert_eq!(self.seg_i + 1, self.seg_start.len(), "a different number of blocks sampled");
        if !self.due_now.is_empty() {
            self.merge_due_now();
        }
    }

    /// A change of signal `sig` (of this log, counted from `base`) to `value` at tick `t`,
    /// made by a block that ran ahead of the engine: its registers are past ticks the engine
    /// may never visit, so the changes they made there are handed in here, each at its own
    /// tick, as if the block had been sampled there. Handed in (tick, signal) order, before
    /// the tick `now` they are not after is sampled ([`ChangeLog::begin_blocks`]) or the log
    /// drained; a change at `now` itself takes its place among that tick's changes in signal
    /// order. The block, sampled at a tick, must give its values as of that tick (the
    /// changes handed in so far), so that a change is never recorded twice.
    #[inline]
    pub fn ahead_change(&mut self, t: Cycle, sig: u32, value: u64, now: Cycle) {
        debug_assert!(t <= now, "a change ahead of the tick being sampled");
        let i = sig as usize;
        if t >= self.window.1 || self.prev[i] == value {
            return;
        }
        if t < self.window.0 {
            self.prev[i] = value;
            self.pre = Some(self.pre.map_or(t, |p| p.max(t)));
            return;
        }
        // In the window: the catch-up first (the values before the window, at a cycle before
        // it).
        self.flush_pre();
        self.prev[i] = value;
        if self.keep.as_ref().is_some_and(|k| !k[i]) {
            return;
        }
        if t == now {
            self.due_now.push((sig, value));
        } else {
            self.changes.push((t, (self.base + i) as u32, value));
        }
    }

    /// The changes ahead at the tick just sampled, into its changes in signal order (few:
    /// each is put in place).
    #[cold]
    fn merge_due_now(&mut self) {
        let mut at = self.tick_start;
        let changes = &mut self.changes;
        for &(s, v) in &self.due_now {
            let g = (self.base + s as usize) as u32;
            while at < changes.len() && changes[at].1 < g {
                at += 1;
            }
            changes.insert(at, (self.at, g, v));
            at += 1;
        }
        // (Cleared, not taken: its room is kept for the next tick.)
        self.due_now.clear();
    }

    /// Hands out the values held since before the window as catch-up changes, once: at the
    /// first cycle in the window, or at the end of a run that never reached it (so the sink's
    /// dump shows the final values, not the reset ones).
    pub fn flush_pre(&mut self) {
        if let Some(p) = self.pre.take() {
            for (i, &v) in self.prev.iter().enumerate() {
                if v != 0 && self.keep.as_ref().is_none_or(|k| k[i]) {
                    self.changes.push((p, (self.base + i) as u32, v));
                }
            }
        }
    }

    pub fn pending(&self) -> usize {
        self.changes.len()
    }

    /// Merges the logs (given in partition order) into `sink` in (cycle, signal id) order and
    /// empties them.
    pub fn drain_merged(logs: &mut [&mut ChangeLog], sink: &mut dyn SignalSink) -> Result<(), Error> {
        if let [only] = logs {
            // One partition: its log is already in (cycle, signal) order.
            return sink.take_changes(&mut only.changes);
        }
        let mut pos = vec![0usize; logs.len()];
        loop {
            let t = logs
                .iter()
                .zip(pos.iter())
                .filter_map(|(l, &p)| l.changes.get(p).map(|c| c.0))
                .min();
            let Some(t) = t else { break };
            // Each log's run of changes at `t`, in partition order (signal ids ascend with it).
            for (l, p) in logs.iter().zip(pos.iter_mut()) {
                let run = l.changes[*p..].iter().take_while(|c| c.0 == t).count();
                sink.changes(&l.changes[*p..*p + run])?;
                *p += run;
            }
        }
        for l in logs.iter_mut() {
            l.changes.clear();
        }
        Ok(())
    }
}

/// Takes `cur` into `prev` (signals `base`.. of the log) and records, at `now`, each value that
/// differs (of the signals `keep` selects, all without a filter) into `changes` (`None`:
/// values only).
#[inline(always)]
fn diff_into(prev: &mut [u64], cur: &[u64], now: Cycle, base: usize, keep: Option<&[bool]>, mut changes: Option<&mut Vec<(Cycle, u32, u64)>>) {
    if let (None, Some(ch)) = (keep, changes.as_deref_mut()) {
        // Every signal recorded (a full trace): the loop without the filter's branch.
        for (i, (p, &c)) in prev.iter_mut().zip(cur.iter()).enumerate() {
            if *p != c {
                *p = c;
                ch.push((now, (base + i) as u32, c));
            }
        }
        return;
    }
    for (i, (p, &c)) in prev.iter_mut().zip(cur.iter()).enumerate() {
        if *p != c {
            *p = c;
            if let Some(ch) = changes.as_deref_mut() {
                if keep.is_none_or(|k| k[i]) {
                    ch.push((now, (base + i) as u32, c));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink with a window (ticks 3..40) and a filter (every fifth signal left out).
    struct Win;
    impl SignalSink for Win {
        fn change(&mut self, _: Cycle, _: usize, _: u64) -> Result<(), Error> {
            Ok(())
        }
        fn window(&self) -> (Cycle, Cycle) {
            (3, 40)
        }
        fn wants(&self, s: usize) -> bool {
            s % 5 != 2
        }
    }

    /// Tick `t` of a random trace of blocks of `lens` values: the blocks touched at random
    /// (all at tick 0), as a bit mask; only a touched block's values may change after tick 0
    /// (and do, at random, sometimes back to an earlier value). `x`: the xorshift state.
    fn touch_at_random(t: Cycle, lens: &[usize], vals: &mut [u64], x: &mut u64) -> u64 {
        let mut rnd = || {
            *x ^= *x << 13;
            *x ^= *x >> 7;
            *x ^= *x << 17;
            *x
        };
        let mut mask = 0u64;
        let mut at = 0;
        for (b, &len) in lens.iter().enumerate() {
            if t == 0 || rnd() % 3 == 0 {
                mask |= 1 << b;
                if t > 0 {
                    for v in &mut vals[at..at + len] {
                        if rnd() % 2 == 0 {
                            *v = rnd() % 3;
                        }
                    }
                }
            }
            at += len;
        }
        mask
    }

    #[test]
    fn merge_is_by_cycle_then_partition() {
        let mut a = ChangeLog::new(0, 2);
        let mut b = ChangeLog::new(2, 1);
        for t in 0..3u64 {
            a.begin().extend([t, 1]);
            a.commit(t);
            b.begin().push(t * 2);
            b.commit(t);
        }
        let mut out: Vec<(Cycle, usize, u64)> = Vec::new();
        ChangeLog::drain_merged(&mut [&mut a, &mut b], &mut out).unwrap();
        assert_eq!(out, vec![(0, 1, 1), (1, 0, 1), (1, 2, 2), (2, 0, 2), (2, 2, 4)]);
        assert_eq!(a.pending() + b.pending(), 0);
    }

    /// Sampling block by block, skipping the untouched blocks, records exactly the changes of
    /// sampling everything (`begin` + `commit`, the reference), inside and around a window,
    /// with a filter; a block is sampled at the first tick whatever `touched` says.
    #[test]
    fn blocks_skipped_when_untouched_record_the_same_changes() {
        let lens = [3usize, 1, 4, 2];
        let n: usize = lens.iter().sum();
        let mut vals = vec![7u64; n];
        let (mut full, mut blocks) = (ChangeLog::for_sink(10, n, &Win), ChangeLog::for_sink(10, n, &Win));
        let mut x = 12345u64;
        for t in 0..50u64 {
            let touched = touch_at_random(t, &lens, &mut vals, &mut x);
            if full.active(t) {
                full.begin().extend(&vals);
                full.commit(t);
            }
            if blocks.begin_blocks(t) {
                let mut at = 0;
                for (b, &len) in lens.iter().enumerate() {
                    // The first tick says "untouched" for block 1: sampled anyway.
                    let said = if t == 0 { b != 1 } else { touched >> b & 1 == 1 };
                    blocks.block(said, |o| o.extend(&vals[at..at + len]));
                    at += len;
                }
                blocks.end_blocks();
            }
        }
        for l in [&mut full, &mut blocks] {
            l.flush_pre();
        }
        assert!(full.pending() > 20);
        assert_eq!(full.changes, blocks.changes);
    }

    /// Touched blocks visited by mask ([`ChangeLog::blocks`]) and given as [`SampleBlock`]s
    /// ([`ChangeLog::block_of`]: diffed as sampled in a full trace, through the buffer with a
    /// window and a filter) record exactly the changes of sampling everything.
    #[test]
    fn masked_blocks_diffed_as_sampled_record_the_same_changes() {
        /// One value on its own, the rest as a slice (as the router gives them).
        struct Vals<'a>(&'a [u64]);
        impl SampleBlock for Vals<'_> {
            fn sample_to<O: SampleOut>(&self, out: &mut O) {
                let (first, rest) = self.0.split_first().unwrap();
                out.put_all([*first]);
                out.put_slice(rest);
            }
        }
        let lens = [3usize, 1, 4, 2, 6];
        let n: usize = lens.iter().sum();
        for windowed in [false, true] {
            let (mut full, mut masked) = if windowed { (ChangeLog::for_sink(10, n, &Win), ChangeLog::for_sink(10, n, &Win)) } else { (ChangeLog::new(10, n), ChangeLog::new(10, n)) };
            let mut vals = vec![7u64; n];
            let mut x = 99991u64;
            for t in 0..60u64 {
                let mask = touch_at_random(t, &lens, &mut vals, &mut x);
                if full.active(t) {
                    full.begin().extend(&vals);
                    full.commit(t);
                }
                if masked.begin_blocks(t) {
                    // The first tick says "untouched" for block 1: sampled anyway.
                    let said = if t == 0 { mask & !2 } else { mask };
                    masked.blocks(lens.len(), said, |log, b, touched| {
                        let at: usize = lens[..b].iter().sum();
                        log.block_of(touched, &Vals(&vals[at..at + lens[b]]));
                    });
                    masked.end_blocks();
                }
            }
            for l in [&mut full, &mut masked] {
                l.flush_pre();
            }
            assert!(full.pending() > 20);
            assert_eq!(full.changes, masked.changes, "windowed: {windowed}");
        }
    }

    /// A block that runs ahead (its values known at every tick, handed in with
    /// [`ChangeLog::ahead_change`] at the next sampled tick: the ticks in between, never
    /// sampled, and that tick itself, among the other blocks' changes there), between blocks
    /// sampled at the visited ticks only: the changes of sampling every block at every tick,
    /// with and without a window and a filter (the catch-up before the window may come at a
    /// different cycle: the sink folds it into its dump either way).
    #[test]
    fn changes_ahead_give_the_changes_of_sampling_every_tick() {
        // Blocks 0 and 2 change at visited ticks only; block 1 runs ahead.
        let lens = [3usize, 2, 2];
        let n: usize = lens.iter().sum();
        let (ahead, end) = (3..5, 60u64);
        for windowed in [false, true] {
            let mut x = 777u64 + windowed as u64;
            let mut rnd = move || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            // Values at every tick, the visited ticks and the blocks touched there.
            let mut vals = vec![vec![0u64; n]];
            let mut visits = vec![(0u64, 0b111u64)];
            for t in 1..end {
                let mut v = vals[(t - 1) as usize].clone();
                for s in ahead.clone() {
                    if rnd() % 3 == 0 {
                        v[s] = rnd() % 3;
                    }
                }
                if rnd() % 3 == 0 {
                    let touched = rnd() & 0b111;
                    let mut at = 0;
                    for (b, &len) in lens.iter().enumerate() {
                        if touched >> b & 1 == 1 && b != 1 {
                            for x in &mut v[at..at + len] {
                                if rnd() % 2 == 0 {
                                    *x = rnd() % 3;
                                }
                            }
                        }
                        at += len;
                    }
                    visits.push((t, touched));
                }
                vals.push(v);
            }
            let new = |_: ()| if windowed { ChangeLog::for_sink(10, n, &Win) } else { ChangeLog::new(10, n) };
            let (mut full, mut log) = (new(()), new(()));
            for t in 0..end {
                if full.active(t) {
                    full.begin().extend(&vals[t as usize]);
                    full.commit(t);
                }
            }
            let hand = |log: &mut ChangeLog, from: u64, to: u64, now: u64| {
                for t in from..to {
                    for s in ahead.clone() {
                        let v = vals[t as usize][s];
                        if t == 0 || vals[t as usize - 1][s] != v {
                            log.ahead_change(t, s as u32, v, now);
                        }
                    }
                }
            };
            let mut handed = 1;
            for &(t, touched) in &visits {
                hand(&mut log, handed, t + 1, t);
                handed = t + 1;
                if log.begin_blocks(t) {
                    let mut at = 0;
                    for (b, &len) in lens.iter().enumerate() {
                        log.block(touched >> b & 1 == 1, |o| o.extend(&vals[t as usize][at..at + len]));
                        at += len;
                    }
                    log.end_blocks();
                }
            }
            hand(&mut log, handed, end, end);
            for l in [&mut full, &mut log] {
                l.flush_pre();
            }
            let fold = |v: &[(Cycle, u32, u64)]| -> Vec<(Cycle, u32, u64)> { v.iter().map(|&(t, s, x)| (if windowed { t.max(2) } else { t }, s, x)).collect() };
            assert!(full.pending() > 20);
            assert_eq!(fold(&full.changes), fold(&log.changes), "windowed: {windowed}");
        }
    }

    /// The check mode samples an untouched block anyway and names a signal that changed.
    #[test]
    #[should_panic(expected = "signal 12 changed at tick 1 in a block reported untouched")]
    fn check_mode_catches_a_change_in_an_untouched_block() {
        let mut l = ChangeLog::new(10, 3);
        l.check_skips = true;
        for (t, v) in [(0u64, 0u64), (1, 5)] {
            assert!(l.begin_blocks(t));
            l.block(true, |o| o.extend([t, t]));
            l.block(t == 0, |o| o.push(v));
            l.end_blocks();
        }
    }

    /// A windowed, filtered log hands the sink exactly what a full log would after the
    /// writer's own window/filter logic: the values at the window start, then the changes in
    /// the window, of the wanted signals only.
    #[test]
    fn window_and_filter_bound_the_log() {
        struct Win(Vec<(Cycle, usize, u64)>);
        impl SignalSink for Win {
            fn change(&mut self, c: Cycle, s: usize, v: u64) -> Result<(), Error> {
                self.0.push((c, s, v));
                Ok(())
            }
            fn window(&self) -> (Cycle, Cycle) {
                (5, 8)
            }
            fn wants(&self, s: usize) -> bool {
                s != 1
            }
        }
        let mut sink = Win(vec![]);
        let mut l = ChangeLog::for_sink(0, 3, &sink);
        for t in 0..20u64 {
            if !l.active(t) {
                assert!(t >= 8);
                continue;
            }
            l.begin().extend([t, t, if t == 2 { 9 } else { 0 }]);
            l.commit(t);
            assert!(l.pending() <= 3 * 2, "nothing piles up before the window");
        }
        ChangeLog::drain_merged(&mut [&mut l], &mut sink).unwrap();
        // Catch-up at cycle 4 (signal 2 went 9 -> 0 before the window: no catch-up needed),
        // then cycles 5..8; signal 1 never.
        assert_eq!(sink.0, vec![(4, 0, 4), (5, 0, 5), (6, 0, 6), (7, 0, 7)]);
    }
}
