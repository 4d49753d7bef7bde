//! The run policy of a multi-clock system (the chiplet package, later the wafer): visit the
//! next tick at which some clock domain has an edge, skip idle stretches to the next event
//! (fast-forward), stop when the system reports it is finished or at an end tick, and trip
//! the watchdog when work is pending but nothing moves.
//!
//! Fast-forward is exact for the same reason as the mesh's: a partition that is not busy
//! cannot change state before its reported next event, and next events are ticks on the
//! reporting module's own clock edges; traces record changes only.

use super::engine::{Control, PartStatus, Step};
use super::{ClockSet, Cycle, Watchdog, NEVER};

/// Index of the status counter a system uses to say "finished" (non-zero when every
/// partition is done): partitions report 1 there when they are finished, and the control
/// stops once the sum equals `parts`.
pub const C_FINISHED: usize = 5;

/// Status counters of blocks that evaluated their edge at the next tick ahead, at this one
/// (the package's UCIe adapters, `UcieAdapterCl::eval_ahead`), so the engine need not visit
/// that tick: how many such edges (non-zero: the engine would have visited it), the
/// progress they made there, and the progress the system reports at every tick its state
/// holds (the package's DDR channels holding requests). The watchdog observes that tick as
/// the engine would have — at its visit if it is visited anyway, else in its stead — so a
/// stalled run trips at the same tick with the same stall as when the edges are evaluated
/// at their own tick.
pub const C_AHEAD_VISIT: usize = 2;
pub const C_AHEAD_PROGRESS: usize = 3;
pub const C_STEADY_PROGRESS: usize = 4;

#[derive(Debug, Clone)]
pub struct ClockedControl {
    pub clocks: ClockSet,
    /// Last tick to evaluate (inclusive).
    pub end: Cycle,
    /// Number of partitions that must report finished.
    pub parts: u64,
    pub fast_forward: bool,
    pub watchdog: Watchdog,
    /// The watchdog counts every evaluated stretch of an unfinished system without progress
    /// as a stall, not only busy ones: in a system of event-driven blocks (the package) a
    /// livelock — a link replaying forever, a DDR woken for refresh beside a deadlocked
    /// network — is never "busy" (nothing is due at the next tick) yet always has a next
    /// event, so a busy-only watchdog never counts it (issue 19: such runs went on to
    /// `max_cycles`). Only for systems whose progress counts every kind of work (the
    /// package's includes PE compute and DDR service); the wafer's counts flits only, so a
    /// long kernel would look like a stall there.
    pub watch_unfinished: bool,
    pub tripped: bool,
    pub finished: bool,
    /// Ticks evaluated (not skipped).
    pub evaluated: u64,
    /// The next tick, visited, and the progress made there ahead ([`C_AHEAD_VISIT`]).
    ahead_due: Option<(Cycle, u64)>,
}

impl ClockedControl {
    pub fn new(clocks: ClockSet, end: Cycle, parts: usize, fast_forward: bool, watchdog_ticks: u64) -> Self {
        ClockedControl { clocks, end, parts: parts as u64, fast_forward, watchdog: Watchdog::new(watchdog_ticks), watch_unfinished: false, tripped: false, finished: false, evaluated: 0, ahead_due: None }
    }
}

impl Control for ClockedControl {
    fn decide(&mut self, now: Cycle, st: &PartStatus) -> Step {
        self.evaluated += 1;
        // Nothing busy, nothing scheduled, yet not finished: no event can ever come (a
        // deadlock among waiting blocks) — the watchdog counts it as a stall.
        let unfinished = st.counters[C_FINISHED] < self.parts;
        let stuck = !st.busy && st.next_event == NEVER && unfinished;
        let pending = if self.watch_unfinished { unfinished } else { st.busy || stuck };
        // Progress made at this tick ahead, at the last one (`C_AHEAD_PROGRESS`).
        let early = match self.ahead_due.take() {
            Some((at, p)) if at == now => p,
            _ => 0,
        };
        if self.watchdog.observe(now, pending, st.progress + early, st.oldest_wait) {
            self.tripped = true;
            return Step::Stop;
        }
        if st.counters[C_FINISHED] >= self.parts {
            self.finished = true;
            return Step::Stop;
        }
        let next = self.clocks.next_edge(now + 1);
        // Edges of the next tick evaluated at this one: observed at its visit, or here.
        let ahead = st.counters[C_AHEAD_VISIT] > 0;
        if now >= self.end {
            if ahead {
                // The next run of the engine starts there.
                self.ahead_due = Some((next, st.counters[C_AHEAD_PROGRESS]));
            }
            return Step::Stop;
        }
        let step = if self.fast_forward && !st.busy && st.next_event != NEVER {
            // Never before the next edge; the event is itself on an edge of its domain.
            let t = st.next_event.max(next).min(self.end);
            self.clocks.next_edge(t)
        } else {
            next.min(self.end.max(now + 1))
        };
        if ahead {
            if step == next {
                self.ahead_due = Some((next, st.counters[C_AHEAD_PROGRESS]));
            } else if self.watchdog.observe(next, pending, st.counters[C_AHEAD_PROGRESS] + st.counters[C_STEADY_PROGRESS], st.oldest_wait) {
                // Not visited: nothing else changes there, so the steady progress is the
                // system's whole progress besides the edges run ahead.
                self.tripped = true;
                return Step::Stop;
            }
        }
        Step::Next(step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::{run_partitions, ClockDomain, DomainClock, Partition};

    /// A counter module per domain; each counts its own edges until a deadline, idle
    /// between bursts: the edge counts and the finish tick are the same with and without
    /// fast-forward, and fast-forward evaluates fewer ticks.
    struct Counter {
        clk: DomainClock,
        edges: u64,
        bursts: Vec<(Cycle, Cycle)>,
    }
    impl Partition for Counter {
        type Shared = ();
        type Ctx = ();
        fn eval(&mut self, now: Cycle, _: &(), _: &()) -> PartStatus {
            let mut st = PartStatus::default();
            let active = self.bursts.iter().any(|&(a, b)| now >= a && now < b);
            if self.clk.is_edge(now) && active {
                self.edges += 1;
            }
            st.busy = active;
            st.progress = active as u64;
            st.next_event = self.bursts.iter().map(|&(a, _)| a).filter(|&a| a > now).map(|a| self.clk.next_edge(a)).min().unwrap_or(NEVER);
            st.counters[C_FINISHED] = self.bursts.iter().all(|&(_, b)| now >= b) as u64;
            st
        }
    }

    fn run(ff: bool) -> (Vec<u64>, Cycle, u64) {
        let cs = ClockSet::new(vec![ClockDomain::new("core", 1250), ClockDomain::new("ucie", 625), ClockDomain::new("ddr", 1250).with_phase(625)]).unwrap();
        let mut parts: Vec<Counter> = (0..3)
            .map(|i| Counter { clk: cs.clock(i), edges: 0, bursts: vec![(10 + i as u64, 40), (400, 430 + 7 * i as u64)] })
            .collect();
        let ctl = ClockedControl::new(cs, 1_000_000, 3, ff, 0);
        let (end, ctl) = run_partitions(&mut parts, &(), &(), 0, ctl, 1);
        assert!(ctl.finished);
        (parts.iter().map(|p| p.edges).collect(), end, ctl.evaluated)
    }

    /// An unfinished system whose only activity is a periodic wake-up (a DDR refresh beside
    /// a deadlocked network, a link replaying): never busy, never stuck, no progress. The
    /// watchdog counts it when told to watch unfinished systems (issue 19), and not otherwise.
    struct Sleeper;
    impl Partition for Sleeper {
        type Shared = ();
        type Ctx = ();
        fn eval(&mut self, now: Cycle, _: &(), _: &()) -> PartStatus {
            PartStatus { next_event: (now / 100 + 1) * 100, ..PartStatus::default() }
        }
    }

    #[test]
    fn watchdog_counts_an_unfinished_system_between_events() {
        let cs = || ClockSet::new(vec![ClockDomain::new("core", 1000)]).unwrap();
        let mut ctl = ClockedControl::new(cs(), 100_000, 1, true, 1000);
        ctl.watch_unfinished = true;
        let (end, ctl) = run_partitions(&mut [Sleeper], &(), &(), 0, ctl, 1);
        assert!(ctl.tripped && end <= 1100, "tripped {} at {end}", ctl.tripped);
        let (end, ctl) = run_partitions(&mut [Sleeper], &(), &(), 0, ClockedControl::new(cs(), 100_000, 1, true, 1000), 1);
        assert!(!ctl.tripped && end == 100_000);
    }

    /// A block with edges between core edges (ticks of 625 ps, core edges on the even
    /// ones): at each event tick it makes the given progress (0: an edge that changes
    /// something but moves nothing), and it is busy (visited at the next tick) at the ticks
    /// listed; between `steady` bounds (even ticks) it progresses at every visited tick.
    /// `ahead`: at a core edge it is visited at anyway, it runs the next tick's event there
    /// and reports it ([`C_AHEAD_VISIT`]), as the package's adapters do.
    struct MidEdges {
        events: Vec<(Cycle, u64)>,
        busy: Vec<Cycle>,
        steady: (Cycle, Cycle),
        ahead: bool,
        /// Events up to this tick ran ahead.
        ahead_to: Cycle,
    }
    impl Partition for MidEdges {
        type Shared = ();
        type Ctx = ();
        fn eval(&mut self, now: Cycle, _: &(), _: &()) -> PartStatus {
            let mut st = PartStatus::default();
            let steady = |t: Cycle| (self.steady.0..self.steady.1).contains(&t) as u64;
            let at = |t: Cycle| self.events.iter().find(|e| e.0 == t).map(|e| e.1);
            st.busy = self.busy.contains(&now);
            st.progress = steady(now);
            if now > self.ahead_to {
                st.progress += at(now).unwrap_or(0);
            }
            if self.ahead && now % 2 == 0 {
                if let Some(p) = at(now + 1) {
                    st.counters[C_AHEAD_VISIT] = 1;
                    st.counters[C_AHEAD_PROGRESS] = p;
                }
                st.counters[C_STEADY_PROGRESS] = steady(now);
                self.ahead_to = now + 1;
            }
            st.next_event = self.events.iter().map(|e| e.0).filter(|&e| e > now.max(self.ahead_to)).min().unwrap_or(NEVER);
            st
        }
    }

    /// Runs in chunks of `chunk` ticks as the package does; (tripped, core cycle of the last
    /// tick, stall, ticks evaluated).
    fn run_mid(p: MidEdges, limit: u64, chunk: u64) -> (bool, Cycle, u64, u64) {
        let cs = ClockSet::new(vec![ClockDomain::new("core", 1250), ClockDomain::new("ucie", 625)]).unwrap();
        let mut ctl = ClockedControl::new(cs.clone(), 0, 1, true, limit);
        ctl.watch_unfinished = true;
        let mut parts = [p];
        let mut now = 0;
        loop {
            ctl.end = now + chunk;
            let (last, c) = run_partitions(&mut parts, &(), &(), now, ctl, 1);
            ctl = c;
            if ctl.tripped || last >= 20_000 {
                return (ctl.tripped, last / 2, ctl.watchdog.stalled_for(), ctl.evaluated);
            }
            now = cs.next_edge(last + 1);
        }
    }

    proptest::proptest! {
        /// Events run ahead and reported at the core edge before: the watchdog trips at the
        /// same core cycle with the same stall as when each is evaluated at its own tick,
        /// whether the tick is visited anyway (busy before it) or not, and across the
        /// engine's chunks.
        #[test]
        fn edges_run_ahead_trip_the_watchdog_as_at_their_tick(
            ev in proptest::collection::vec((0u64..100, 0u64..2), 1..24),
            busy in proptest::collection::vec(0u64..200, 0..12),
            steady in (0u64..100, 0u64..8),
            limit in 2u64..40,
            chunk in 1u64..50,
        ) {
            let mut events: Vec<(Cycle, u64)> = ev.iter().map(|&(t, p)| (2 * t + 1, p)).collect();
            events.sort();
            events.dedup_by_key(|e| e.0);
            let steady = (2 * steady.0, 2 * (steady.0 + steady.1));
            let mk = |ahead| MidEdges { events: events.clone(), busy: busy.clone(), steady, ahead, ahead_to: 0 };
            let at_tick = run_mid(mk(false), limit, chunk);
            let ahead = run_mid(mk(true), limit, chunk);
            proptest::prop_assert!(at_tick.0, "the stall trips the watchdog");
            proptest::prop_assert_eq!((at_tick.0, at_tick.1, at_tick.2), (ahead.0, ahead.1, ahead.2));
            proptest::prop_assert!(ahead.3 <= at_tick.3);
        }
    }

    #[test]
    fn fast_forward_across_domains_is_exact() {
        let (e1, t1, n1) = run(false);
        let (e2, t2, n2) = run(true);
        assert_eq!((e1, t1), (e2, t2));
        assert!(n2 < n1 / 3, "fast-forward skipped the idle stretch ({n2} vs {n1} ticks)");
    }
}
