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
//! decision. Each step ends in a [`PostBarrier`] exchange: every thread posts its group's
//! merged status, double-buffered by step parity so a fast thread writing the next step
//! never overwrites what a slow thread is still reading for this one, and waits for the
//! others' posts of the same step.

use super::barrier::{PostBarrier, POST_WORDS};
use super::{Cycle, NEVER};

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

impl PartStatus {
    /// As the words of a [`PostBarrier`] post.
    fn to_words(self) -> [u64; POST_WORDS] {
        let mut w = [0u64; POST_WORDS];
        w[0] = self.busy as u64;
        w[1] = self.next_event;
        w[2] = self.progress;
        w[3] = self.oldest_wait;
        w[4..4 + N_COUNTERS].copy_from_slice(&self.counters);
        w
    }
    fn from_words(w: &[u64; POST_WORDS]) -> Self {
        let mut counters = [0u64; N_COUNTERS];
        counters.copy_from_slice(&w[4..4 + N_COUNTERS]);
        PartStatus { busy: w[0] != 0, next_event: w[1], progress: w[2], oldest_wait: w[3], counters }
    }
}

/// The word of the leader's post that says the next step runs in serial mode.
const W_SERIAL: usize = 4 + N_COUNTERS;
const _: () = assert!(W_SERIAL + 1 == POST_WORDS, "a post carries one PartStatus and the mode");

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

    run_parallel(parts, shared, ctx, start, control, threads, Adapt::Measure)
}

/// How the parallel stepper chooses, epoch by epoch, between its threads and one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Adapt {
    /// Measure the wall time per step of each mode and run the faster; re-measure the other
    /// now and then.
    Measure,
    /// Switch mode at every epoch boundary (tests: every switch path, deterministically).
    #[cfg_attr(not(test), allow(dead_code))]
    Alternate,
}

/// Steps per epoch: the unit the mode is chosen for. Long enough that a switch (a park and
/// a wake of the other threads) is noise; short enough that a short run (a 6 690-cycle NoC
/// point) measures both modes early and spends most of its steps in the faster one, and that
/// a machine whose load changes is followed.
const EPOCH: usize = 256;
/// The mode not chosen runs one probe epoch after this many epochs, to notice that the
/// machine changed (a core freed or taken); each probe that confirms the choice doubles the
/// interval, up to [`PROBE_MAX`] (a losing mode's probe costs up to an epoch of its
/// slowness), and one that reverses it starts over.
const PROBE_FIRST: usize = 8;
const PROBE_MAX: usize = 512;
/// A parallel epoch that has already cost this many serial epochs ends early.
const ABORT: f64 = 2.0;

/// The leader's (thread 0's) choice of the next epoch's mode from measured wall times.
struct ModeChooser {
    policy: Adapt,
    epoch_start: std::time::Instant,
    /// Measured ns per step of the last epoch run in each mode (parallel, serial).
    ns: [Option<f64>; 2],
    /// The mode that measured faster at the last probe (what runs between probes).
    best_serial: bool,
    /// Epochs between probes, and the epoch of the next probe.
    interval: usize,
    next_probe: usize,
    /// Epochs run in each mode (parallel, serial): their sum numbers the epochs, and the
    /// end-of-run debug event reports them.
    epochs: [usize; 2],
    /// Steps of the running epoch.
    steps: usize,
}

impl ModeChooser {
    fn new(policy: Adapt) -> Self {
        ModeChooser { policy, epoch_start: std::time::Instant::now(), ns: [None, None], best_serial: false, interval: PROBE_FIRST, next_probe: 0, epochs: [0, 0], steps: 0 }
    }

    /// The end-of-run summary (`RUST_LOG=hw::harness::engine=debug`): how many epochs ran in
    /// each mode and the last wall time per step measured in each, so a user who sees no
    /// speed-up from `--threads` can tell whether the stepper chose one thread or two.
    fn report(&self, steps: usize) {
        let ns = |m: usize| self.ns[m].map_or(f64::NAN, |v| v);
        tracing::debug!(steps, epochs_parallel = self.epochs[0], epochs_serial = self.epochs[1], ns_per_step_parallel = ns(0), ns_per_step_serial = ns(1), "stepper modes");
    }

    /// After each step the leader ran in mode `serial`: the next epoch's mode when the epoch
    /// ends here. A parallel epoch ends early once it has cost [`ABORT`] times a whole
    /// serial epoch: with a partner thread descheduled every step waits for it (tens of µs
    /// each on a busy machine), and a full probe epoch of that cost more than the probes
    /// could ever gain.
    fn step_done(&mut self, serial: bool) -> Option<bool> {
        self.steps += 1;
        let end = self.steps >= EPOCH
            || (!serial && self.policy == Adapt::Measure && self.steps.is_multiple_of(16) && self.ns[1].is_some_and(|q| self.epoch_start.elapsed().as_nanos() as f64 > ABORT * q * EPOCH as f64));
        if !end {
            return None;
        }
        let ns = self.epoch_start.elapsed().as_nanos() as f64 / self.steps as f64;
        self.steps = 0;
        self.epoch_start = std::time::Instant::now();
        Some(self.choose(serial, ns))
    }

    /// The end of an epoch run in mode `serial`, given its measured wall time per step: the
    /// next epoch's mode.
    fn choose(&mut self, serial: bool, ns: f64) -> bool {
        self.ns[serial as usize] = Some(ns);
        self.epochs[serial as usize] += 1;
        let epoch = self.epochs[0] + self.epochs[1];
        if self.policy == Adapt::Alternate {
            return !serial;
        }
        let (Some(p), Some(q)) = (self.ns[0], self.ns[1]) else {
            // Epoch 0 measured one mode (the leader alone, under `Measure`); epoch 1
            // measures the other.
            return !serial;
        };
        // Decide only on an epoch that measured the mode not chosen (a probe, or epoch 1),
        // against the epoch just before it in the chosen mode. (Comparing every epoch's
        // fresh time with the other mode's last, stale one let a phase of the run that is
        // lighter or heavier per step flip the choice: the 4×4 package on an idle machine
        // ran 20–40 % of its epochs on two threads at 1.9 µs per step against 1.4 µs alone.)
        let probed = self.next_probe == 0 || serial != self.best_serial;
        if probed {
            let best = q < p;
            if self.next_probe != 0 && best == self.best_serial {
                // The probe confirmed the choice.
                self.interval = (self.interval * 2).min(PROBE_MAX);
            } else {
                self.interval = PROBE_FIRST;
            }
            self.best_serial = best;
            self.next_probe = epoch + self.interval;
        }
        if epoch + 1 == self.next_probe {
            !self.best_serial
        } else {
            self.best_serial
        }
    }
}

/// The partitions, shared by the stepper threads under the stepping protocol: in parallel
/// mode thread t evaluates only its own contiguous group; in serial mode only the leader
/// evaluates, all of them, while the other threads are parked. Every hand-over goes through
/// the barrier or the handoff mutex, which order the accesses.
struct PartsPtr<P>(*mut P, usize);
unsafe impl<P: Send> Sync for PartsPtr<P> {}
unsafe impl<P: Send> Send for PartsPtr<P> {}

impl<P> PartsPtr<P> {
    /// # Safety
    /// `i < len`, and no other thread touches partition `i` until the next hand-over.
    #[allow(clippy::mut_from_ref)]
    unsafe fn get(&self, i: usize) -> &mut P {
        debug_assert!(i < self.1);
        &mut *self.0.add(i)
    }
}

/// What the leader hands the parked threads when it leaves serial mode: where the run is
/// (cycle, control state, step count), or that the run ended.
enum Handoff<C> {
    Serial,
    Resume { round: u64, now: Cycle, ctl: C, step: usize },
    Done { now: Cycle, ctl: C },
}

/// The parallel stepper. Each thread owns a contiguous group of partitions and a replica of
/// the control; statuses are exchanged and combined at the end of each step. The leader's
/// post of each step carries the mode it chose for the next (it changes at the end of an
/// epoch, or of a parallel epoch cut short), so all threads switch after the same step: in
/// serial mode the other threads park, and the leader steps every
/// partition alone — as the one-thread loop does — until it chooses parallel again or the
/// run stops. On a loaded machine a barrier per cycle costs more than the second thread
/// gains (a descheduled partner turns every cycle into a wake-up), so the leader's measured
/// wall time per step makes more threads never much slower than one. Results do not depend
/// on the mode: every step evaluates every partition once, in any order.
fn run_parallel<P: Partition, C: Control>(parts: &mut [P], shared: &P::Shared, ctx: &P::Ctx, start: Cycle, control: C, threads: usize, policy: Adapt) -> (Cycle, C) {
    use std::sync::{Condvar, Mutex};
    let n_parts = parts.len();
    let posts = PostBarrier::new(threads);
    // Contiguous groups of partitions, as even as possible: (first, count).
    let mut groups: Vec<(usize, usize)> = Vec::with_capacity(threads);
    let mut first = 0;
    for t in 0..threads {
        let take = (n_parts - first) / (threads - t);
        groups.push((first, take));
        first += take;
    }
    let ptr = PartsPtr(parts.as_mut_ptr(), n_parts);
    // The handoff and how many threads are parked on it: the leader starts a serial phase
    // only once every other thread is parked, so none can still be reading the mode flag the
    // phase's end resets (a thread descheduled for a whole epoch would otherwise miss it).
    let handoff: Mutex<(Handoff<C>, usize)> = Mutex::new((Handoff::Serial, 0));
    let wake = Condvar::new();

    let worker = |t: usize, mut ctl: C| -> (Cycle, C) {
        let (first, count) = groups[t];
        let mut now = start;
        // Parity of the *step* (not the cycle: fast-forward may jump by an even number of
        // cycles, and the slot of the step before must stay untouched until everyone read it).
        let mut step = 0usize;
        let mut chooser = (t == 0).then(|| ModeChooser::new(policy));
        let mut round = 0u64;
        // Whether the leader's last post (or, at the start, the policy) says the next step
        // runs serially. It travels in the post, so every thread switches after the same
        // step. `Measure` starts with the leader alone: a machine whose other core is busy
        // then pays only the short, abortable parallel probes.
        let mut go_serial = policy == Adapt::Measure;
        loop {
            if go_serial {
                go_serial = false;
                if let Some(ch) = chooser.as_mut() {
                    // Wait for every other thread to park, then the leader alone, every
                    // partition, until it picks parallel or stops.
                    {
                        let mut h = handoff.lock().unwrap();
                        while h.1 < threads - 1 {
                            h = wake.wait(h).unwrap();
                        }
                    }
                    loop {
                        let mut total = PartStatus::default();
                        for i in 0..n_parts {
                            // SAFETY: the other threads are parked (they passed the exchange
                            // ending the epoch and wait for the handoff).
                            total.merge(&unsafe { ptr.get(i) }.eval(now, shared, ctx));
                        }
                        step += 1;
                        match ctl.decide(now, &total) {
                            Step::Next(next) => now = next,
                            Step::Stop => {
                                *handoff.lock().unwrap() = (Handoff::Done { now, ctl: ctl.clone() }, 0);
                                wake.notify_all();
                                ch.report(step);
                                return (now, ctl);
                            }
                        }
                        if ch.step_done(true) == Some(false) {
                            break;
                        }
                    }
                    round += 1;
                    *handoff.lock().unwrap() = (Handoff::Resume { round, now, ctl: ctl.clone(), step }, 0);
                    wake.notify_all();
                } else {
                    let mut h = handoff.lock().unwrap();
                    h.1 += 1;
                    wake.notify_all();
                    loop {
                        match &h.0 {
                            Handoff::Resume { round: r, now: n, ctl: c, step: s } if *r > round => {
                                (round, now, ctl, step) = (*r, *n, c.clone(), *s);
                                break;
                            }
                            Handoff::Done { now: n, ctl: c } => return (*n, c.clone()),
                            _ => h = wake.wait(h).unwrap(),
                        }
                    }
                }
            }
            step += 1;
            // The merge is order-independent (or, min, sums), so a thread's group merged
            // first and then the other threads' gives the partition-order result.
            let mut total = PartStatus::default();
            for i in first..first + count {
                // SAFETY: in parallel mode thread t alone evaluates its group.
                total.merge(&unsafe { ptr.get(i) }.eval(now, shared, ctx));
            }
            let mut mine = total.to_words();
            if let Some(ch) = chooser.as_mut() {
                go_serial = ch.step_done(false) == Some(true);
                mine[W_SERIAL] = go_serial as u64;
            }
            posts.exchange(t, step as u64, &mine, |from, w| {
                total.merge(&PartStatus::from_words(w));
                if from == 0 {
                    go_serial = w[W_SERIAL] != 0;
                }
            });
            match ctl.decide(now, &total) {
                Step::Next(t) => now = t,
                Step::Stop => {
                    if let Some(ch) = &chooser {
                        ch.report(step);
                    }
                    return (now, ctl);
                }
            }
        }
    };

    crossbeam::thread::scope(|s| {
        let handles: Vec<_> = (1..threads)
            .map(|t| {
                let c = control.clone();
                let w = &worker;
                s.spawn(move |_| w(t, c))
            })
            .collect();
        let r0 = worker(0, control.clone());
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

    /// The ring of 12 counters in `parts` partitions, run until `end` by `run`: the end cycle
    /// and every accumulator.
    fn ring_with(parts: usize, end: Cycle, run: impl FnOnce(&mut [RingPart], &Ring, Until) -> Cycle) -> (Cycle, Vec<u64>) {
        let n = 12;
        let sh = Ring { links: (0..n).map(|i| Link::new(1 + (i % 3) as u32)).collect() };
        let mut ps: Vec<RingPart> = (0..parts)
            .map(|p| {
                let ids: Vec<usize> = (0..n).filter(|i| i * parts / n == p).collect();
                RingPart { acc: vec![0; ids.len()], ids }
            })
            .collect();
        let last = run(&mut ps, &sh, Until(end));
        (last, ps.into_iter().flat_map(|p| p.acc).collect())
    }

    fn run_ring(threads: usize, parts: usize) -> Vec<u64> {
        let (end, acc) = ring_with(parts, 500, |ps, sh, ctl| run_partitions(ps, sh, &(), 0, ctl, threads).0);
        assert_eq!(end, 500);
        acc
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
    fn mode_switches_change_nothing() {
        // Alternate: every epoch boundary switches between the threads and the leader alone,
        // through every hand-over path (park, resume, a stop in either mode).
        for (threads, parts, end) in [(2usize, 2usize, 5 * EPOCH as u64 + 17), (3, 6, 4 * EPOCH as u64), (2, 4, 2 * EPOCH as u64 - 1)] {
            let alternating = ring_with(parts, end, |ps, sh, ctl| run_parallel(ps, sh, &(), 0, ctl, threads, Adapt::Alternate).0);
            let serial = ring_with(parts, end, |ps, sh, ctl| run_partitions(ps, sh, &(), 0, ctl, 1).0);
            assert_eq!(alternating, serial, "threads={threads} parts={parts} end={end}");
        }
        // Jumps of the control across mode switches.
        let mut ps: Vec<Counter> = (0..4).map(|id| Counter { seen: vec![], id }).collect();
        let (end, _) = run_parallel(&mut ps, &(), &(), 0, Jumpy(40_000), 2, Adapt::Alternate);
        let alt = (end, ps.into_iter().map(|p| p.seen).collect::<Vec<_>>());
        let mut ps: Vec<Counter> = (0..4).map(|id| Counter { seen: vec![], id }).collect();
        let (end, _) = run_partitions(&mut ps, &(), &(), 0, Jumpy(40_000), 1);
        assert_eq!(alt, (end, ps.into_iter().map(|p| p.seen).collect::<Vec<_>>()));
    }

    /// The chooser on synthetic timings: one thread is 1.4 units per step, all threads 1.9,
    /// both scaled by a load that swings by 2× over the run (phases of a layer). The faster
    /// mode must run every epoch but the probes, whose interval grows while they confirm
    /// it; and when the machine changes (all threads become faster), the choice follows
    /// within one probe interval of the change.
    #[test]
    fn chooser_follows_the_faster_mode_through_phases() {
        let mut ch = ModeChooser::new(Adapt::Measure);
        let phase = |e: usize| 1.0 + 0.5 * (1.0 + ((e as f64) / 7.0).sin());
        let (mut serial, mut runs) = (false, [0usize; 2]);
        for e in 0..2000 {
            let ns = phase(e) * if serial { 1.4 } else { 1.9 };
            runs[serial as usize] += 1;
            serial = ch.choose(serial, ns);
        }
        // Epoch 0 and the probes (8, 16, 32, … up to every 512 epochs) only.
        assert!(runs[0] <= 10, "parallel ran {} of 2000 epochs", runs[0]);
        // Now two threads win by far: the next probe switches.
        let mut switched_at = None;
        for e in 2000..3200 {
            let ns = phase(e) * if serial { 1.4 } else { 0.8 };
            serial = ch.choose(serial, ns);
            if !serial && switched_at.is_none() {
                switched_at = Some(e);
            }
        }
        let at = switched_at.expect("the chooser never tried the faster mode");
        assert!(at < 2000 + PROBE_MAX + 1, "switched at epoch {at}");
        assert!(!serial, "the faster mode (all threads) must be the choice at the end");
    }

    #[test]
    fn parallel_equals_serial() {
        let reference = run_ring(1, 1);
        for (t, p) in [(1, 4), (2, 2), (2, 4), (3, 6)] {
            assert_eq!(run_ring(t, p), reference, "threads={t} parts={p}");
        }
    }
}
