//! The stepper: evaluates partitions of a system cycle by cycle, serially or on several
//! threads, with bit-identical results.
//!
//! A system is split into [`Partition`]s (e.g. bands of mesh rows). In cycle *t* every
//! partition evaluates its modules; modules exchange data only through [`super::Link`]s, so
//! partitions can be evaluated in any order or concurrently. After evaluating, each partition
//! reports a [`PartStatus`]; the statuses are combined in partition order (sums and mins, so the
//! combination does not depend on thread timing) and a [`Control`] decides the next cycle to
//! evaluate — `now + 1`, a later cycle when everything is idle (fast-forward), or stop.
//!
//! On several threads, each thread owns a contiguous group of partitions and keeps its own
//! replica of the `Control`; all replicas see the same combined status and so take the same
//! decision. One spinning barrier per cycle separates cycles. Statuses are published in
//! atomics double-buffered by step parity, so a fast thread writing the next step never
//! overwrites what a slow thread is still reading for this one.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::{Cycle, SpinBarrier, NEVER};

/// Number of system-defined counters a partition reports each cycle.
pub const N_COUNTERS: usize = 6;

/// What a partition reports after evaluating one cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartStatus {
    /// Something in the partition can change state without a new external event.
    pub busy: bool,
    /// Earliest cycle at which an idle partition has something to do (`NEVER` if none).
    pub next_event: Cycle,
    /// Forward-progress events this cycle (flits moved), for the watchdog.
    pub progress: u64,
    /// Since when the longest-waiting item (e.g. a flit at the head of a buffer) has waited
    /// without moving (`NEVER` if nothing waits), for the watchdog.
    pub oldest_wait: Cycle,
    /// System-defined counters, summed over partitions (e.g. outstanding measured packets).
    pub counters: [u64; N_COUNTERS],
}

impl Default for PartStatus {
    fn default() -> Self {
        PartStatus { busy: false, next_event: NEVER, progress: 0, oldest_wait: NEVER, counters: [0; N_COUNTERS] }
    }
}

impl PartStatus {
    /// Order-independent combination.
    pub fn merge(&mut self, o: &PartStatus) {
        self.busy |= o.busy;
        self.next_event = self.next_event.min(o.next_event);
        self.progress += o.progress;
        self.oldest_wait = self.oldest_wait.min(o.oldest_wait);
        for (a, b) in self.counters.iter_mut().zip(o.counters.iter()) {
            *a += *b;
        }
    }
}

/// A group of modules evaluated together.
pub trait Partition: Send {
    /// State shared by all partitions (links), accessed through interior mutability under the
    /// link protocol.
    type Shared: Sync;
    /// Read-only run context (constant during one `run_partitions` call).
    type Ctx: Sync;
    fn eval(&mut self, now: Cycle, shared: &Self::Shared, ctx: &Self::Ctx) -> PartStatus;
}

/// What to do after a cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Evaluate this cycle next (must be > the current one).
    Next(Cycle),
    Stop,
}

/// The run policy: end cycle, stop conditions, fast-forward, watchdog. Must be a pure function
/// of its own state and the combined statuses, because each thread runs a replica.
pub trait Control: Clone + Send {
    fn decide(&mut self, now: Cycle, st: &PartStatus) -> Step;
}

struct AtomicStatus {
    busy: AtomicBool,
    next_event: AtomicU64,
    progress: AtomicU64,
    oldest_wait: AtomicU64,
    counters: [AtomicU64; N_COUNTERS],
}

impl AtomicStatus {
    fn new() -> Self {
        AtomicStatus {
            busy: AtomicBool::new(false),
            next_event: AtomicU64::new(NEVER),
            progress: AtomicU64::new(0),
            oldest_wait: AtomicU64::new(NEVER),
            counters: Default::default(),
        }
    }
    fn store(&self, s: &PartStatus) {
        self.busy.store(s.busy, Ordering::Relaxed);
        self.next_event.store(s.next_event, Ordering::Relaxed);
        self.progress.store(s.progress, Ordering::Relaxed);
        self.oldest_wait.store(s.oldest_wait, Ordering::Relaxed);
        for (a, v) in self.counters.iter().zip(s.counters.iter()) {
            a.store(*v, Ordering::Relaxed);
        }
    }
    fn load(&self) -> PartStatus {
        let mut counters = [0; N_COUNTERS];
        for (c, a) in counters.iter_mut().zip(self.counters.iter()) {
            *c = a.load(Ordering::Relaxed);
        }
        PartStatus {
            busy: self.busy.load(Ordering::Relaxed),
            next_event: self.next_event.load(Ordering::Relaxed),
            progress: self.progress.load(Ordering::Relaxed),
            oldest_wait: self.oldest_wait.load(Ordering::Relaxed),
            counters,
        }
    }
}

/// OS threads the stepper may use: the machine's parallelism (read once).
pub fn max_threads() -> usize {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *N.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Runs from cycle `start` until the control says stop. Returns the last evaluated cycle and
/// the control's final state. `threads` is clamped to the number of partitions and to
/// [`max_threads`]: every cycle ends in a barrier, so more stepper threads than cores turn
/// each cycle into a round of context switches (issue 5 fuzzing: `--threads 64` on 2 cores
/// ran 400x slower). Partitions are then grouped onto fewer threads, which changes no
/// result (results never depend on the thread count).
pub fn run_partitions<P: Partition, C: Control>(
    parts: &mut [P],
    shared: &P::Shared,
    ctx: &P::Ctx,
    start: Cycle,
    control: C,
    threads: usize,
) -> (Cycle, C) {
    let threads = threads.clamp(1, parts.len().max(1)).min(max_threads());
    if threads == 1 {
        let mut ctl = control;
        let mut now = start;
        loop {
            let mut total = PartStatus::default();
            for p in parts.iter_mut() {
                total.merge(&p.eval(now, shared, ctx));
            }
            match ctl.decide(now, &total) {
                Step::Next(t) => {
                    debug_assert!(t > now);
                    now = t
                }
                Step::Stop => return (now, ctl),
            }
        }
    }

    let n_parts = parts.len();
    let status: Vec<[AtomicStatus; 2]> =
        (0..n_parts).map(|_| [AtomicStatus::new(), AtomicStatus::new()]).collect();
    let barrier = SpinBarrier::new(threads);
    // Contiguous groups of partitions, as even as possible.
    let mut groups: Vec<(usize, &mut [P])> = Vec::with_capacity(threads);
    let mut rest = parts;
    let mut first = 0;
    for t in 0..threads {
        let take = (n_parts - first) / (threads - t);
        let (g, r) = rest.split_at_mut(take);
        groups.push((first, g));
        first += take;
        rest = r;
    }

    let worker = |first: usize, group: &mut [P], mut ctl: C| -> (Cycle, C) {
        let mut now = start;
        // Parity of the *step* (not the cycle: fast-forward may jump by an even number of
        // cycles, and the slot of the step before must stay untouched until everyone read it).
        let mut step = 0usize;
        loop {
            let par = step & 1;
            step += 1;
            for (i, p) in group.iter_mut().enumerate() {
                let s = p.eval(now, shared, ctx);
                status[first + i][par].store(&s);
            }
            barrier.wait();
            let mut total = PartStatus::default();
            for s in status.iter() {
                total.merge(&s[par].load());
            }
            match ctl.decide(now, &total) {
                Step::Next(t) => now = t,
                Step::Stop => return (now, ctl),
            }
        }
    };

    crossbeam::thread::scope(|s| {
        let mut it = groups.into_iter();
        let (f0, g0) = it.next().unwrap();
        let handles: Vec<_> = it
            .map(|(f, g)| {
                let c = control.clone();
                let w = &worker;
                s.spawn(move |_| w(f, g, c))
            })
            .collect();
        let r0 = worker(f0, g0, control.clone());
        for h in handles {
            let r = h.join().expect("stepper thread panicked");
            debug_assert_eq!(r.0, r0.0, "threads disagreed on the stop cycle");
        }
        r0
    })
    .expect("stepper thread panicked")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::Link;

    /// A ring of counters: module i adds what it receives from i-1 and forwards it. The result
    /// must be the same for any thread count.
    struct RingPart {
        ids: Vec<usize>,
        acc: Vec<u64>,
    }
    struct Ring {
        links: Vec<Link<u64>>,
    }
    impl Partition for RingPart {
        type Shared = Ring;
        type Ctx = ();
        fn eval(&mut self, now: Cycle, sh: &Ring, _: &()) -> PartStatus {
            let n = sh.links.len();
            for (j, &i) in self.ids.iter().enumerate() {
                let got = unsafe { sh.links[(i + n - 1) % n].recv(now) }.unwrap_or(i as u64);
                self.acc[j] = self.acc[j].wrapping_mul(31).wrapping_add(got);
                unsafe { sh.links[i].send(now, got.wrapping_add(now)) };
            }
            PartStatus { busy: true, progress: 1, ..Default::default() }
        }
    }
    #[derive(Clone)]
    struct Until(Cycle);
    impl Control for Until {
        fn decide(&mut self, now: Cycle, _: &PartStatus) -> Step {
            if now >= self.0 { Step::Stop } else { Step::Next(now + 1) }
        }
    }

    fn run_ring(threads: usize, parts: usize) -> Vec<u64> {
        let n = 12;
        let sh = Ring { links: (0..n).map(|i| Link::new(1 + (i % 3) as u32)).collect() };
        let mut ps: Vec<RingPart> = (0..parts)
            .map(|p| {
                let ids: Vec<usize> = (0..n).filter(|i| i * parts / n == p).collect();
                RingPart { acc: vec![0; ids.len()], ids }
            })
            .collect();
        let (end, _) = run_partitions(&mut ps, &sh, &(), 0, Until(500), threads);
        assert_eq!(end, 500);
        ps.into_iter().flat_map(|p| p.acc).collect()
    }

    /// Partitions without links, under a control that jumps by 1, 2 or 4 cycles depending on
    /// the combined status: every thread must take the same jumps (regression: statuses used
    /// to be double-buffered by cycle parity, which an even jump aliased, hanging threads).
    struct Counter {
        seen: Vec<Cycle>,
        id: u64,
    }
    impl Partition for Counter {
        type Shared = ();
        type Ctx = ();
        fn eval(&mut self, now: Cycle, _: &(), _: &()) -> PartStatus {
            self.seen.push(now);
            let mut s = PartStatus::default();
            s.counters[0] = (now * 7 + self.id) % 5;
            s
        }
    }
    #[derive(Clone)]
    struct Jumpy(Cycle);
    impl Control for Jumpy {
        fn decide(&mut self, now: Cycle, st: &PartStatus) -> Step {
            if now >= self.0 {
                return Step::Stop;
            }
            Step::Next(now + [1, 2, 4][(st.counters[0] % 3) as usize])
        }
    }

    #[test]
    fn parallel_fast_forward_jumps_agree() {
        let run = |threads: usize| {
            let mut ps: Vec<Counter> = (0..4).map(|id| Counter { seen: vec![], id }).collect();
            let (end, _) = run_partitions(&mut ps, &(), &(), 0, Jumpy(20_000), threads);
            (end, ps.into_iter().map(|p| p.seen).collect::<Vec<_>>())
        };
        let serial = run(1);
        assert!(serial.1[0].len() < 15_000, "the control must have jumped");
        assert_eq!(run(2), serial);
        assert_eq!(run(4), serial);
    }

    #[test]
    fn parallel_equals_serial() {
        let reference = run_ring(1, 1);
        for (t, p) in [(1, 4), (2, 2), (2, 4), (3, 6)] {
            assert_eq!(run_ring(t, p), reference, "threads={t} parts={p}");
        }
    }
}
