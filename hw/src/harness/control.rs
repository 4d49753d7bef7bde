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
}

impl ClockedControl {
    pub fn new(clocks: ClockSet, end: Cycle, parts: usize, fast_forward: bool, watchdog_ticks: u64) -> Self {
        ClockedControl { clocks, end, parts: parts as u64, fast_forward, watchdog: Watchdog::new(watchdog_ticks), watch_unfinished: false, tripped: false, finished: false, evaluated: 0 }
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
        if self.watchdog.observe(now, pending, st.progress, st.oldest_wait) {
            self.tripped = true;
            return Step::Stop;
        }
        if st.counters[C_FINISHED] >= self.parts {
            self.finished = true;
            return Step::Stop;
        }
        if now >= self.end {
            return Step::Stop;
        }
        let next = self.clocks.next_edge(now + 1);
        if self.fast_forward && !st.busy && st.next_event != NEVER {
            // Never before the next edge; the event is itself on an edge of its domain.
            let t = st.next_event.max(next).min(self.end);
            return Step::Next(self.clocks.next_edge(t));
        }
        Step::Next(next.min(self.end.max(now + 1)))
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

    #[test]
    fn fast_forward_across_domains_is_exact() {
        let (e1, t1, n1) = run(false);
        let (e2, t2, n2) = run(true);
        assert_eq!((e1, t1), (e2, t2));
        assert!(n2 < n1 / 3, "fast-forward skipped the idle stretch ({n2} vs {n1} ticks)");
    }
}
