//! Progress watchdog: ends a run in which work is pending but nothing has moved for `limit`
//! cycles — globally (deadlock), or for one waiting item such as a flit stuck at the head of
//! its buffer while the rest of the system still moves (a lost credit, starvation) — so the
//! run fails fast with a diagnostic instead of spinning to the cycle limit. The system supplies the diagnostic (which buffers are blocked, which
//! packets wait) in a [`WatchdogReport`].

use std::fmt;

use super::Cycle;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watchdog {
    /// Cycles without progress that trip the watchdog (0 = disabled).
    pub limit: u64,
    stalled: u64,
    last_cycle: Option<Cycle>,
}

impl Watchdog {
    pub fn new(limit: u64) -> Self {
        Watchdog { limit, stalled: 0, last_cycle: None }
    }

    /// Feeds one evaluated cycle; `oldest_wait` is since when the longest-waiting item has
    /// not moved (`NEVER`: nothing waits). Returns true when the watchdog trips.
    pub fn observe(&mut self, now: Cycle, busy: bool, progress: u64, oldest_wait: Cycle) -> bool {
        let elapsed = self.last_cycle.map_or(1, |l| now - l);
        self.last_cycle = Some(now);
        if self.limit == 0 {
            return false;
        }
        if oldest_wait != super::NEVER && now.saturating_sub(oldest_wait) >= self.limit {
            self.stalled = now - oldest_wait;
            tracing::warn!(cycle = now, waiting_since = oldest_wait, limit = self.limit, "watchdog: one item has not moved");
            return true;
        }
        if !busy || progress > 0 {
            self.stalled = 0;
            return false;
        }
        self.stalled += elapsed;
        let tripped = self.stalled >= self.limit;
        if tripped {
            tracing::warn!(cycle = now, stalled_for = self.stalled, limit = self.limit, "watchdog: busy without progress");
        }
        tripped
    }

    pub fn stalled_for(&self) -> u64 {
        self.stalled
    }
}

/// Diagnostic of a stuck run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchdogReport {
    pub cycle: Cycle,
    pub stalled_for: u64,
    /// One line per blocked buffer: hierarchical name, occupancy, state, what it waits for.
    pub blocked: Vec<String>,
    /// Waiting packets (id, source, destination, where).
    pub waiting: Vec<String>,
}

impl WatchdogReport {
    /// The blocked buffers and waiting packets, without the watchdog's headline (for a run
    /// stopped for another reason, e.g. its cycle limit, in that reason's own words).
    pub fn state(&self) -> ReportState<'_> {
        ReportState(self)
    }
}

/// [`WatchdogReport::state`].
pub struct ReportState<'a>(&'a WatchdogReport);

impl fmt::Display for ReportState<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.0;
        writeln!(f, "blocked buffers ({}):", r.blocked.len())?;
        for b in r.blocked.iter().take(32) {
            writeln!(f, "  {b}")?;
        }
        if r.blocked.len() > 32 {
            writeln!(f, "  ... {} more", r.blocked.len() - 32)?;
        }
        writeln!(f, "waiting packets ({}):", r.waiting.len())?;
        for w in r.waiting.iter().take(32) {
            writeln!(f, "  {w}")?;
        }
        if r.waiting.len() > 32 {
            writeln!(f, "  ... {} more", r.waiting.len() - 32)?;
        }
        Ok(())
    }
}

impl fmt::Display for WatchdogReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "watchdog: no forward progress for {} cycles (at cycle {})",
            self.stalled_for, self.cycle
        )?;
        write!(f, "{}", self.state())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::NEVER;

    #[test]
    fn trips_only_when_busy_without_progress() {
        let mut w = Watchdog::new(10);
        for t in 0..100 {
            assert!(!w.observe(t, false, 0, NEVER), "idle never trips");
        }
        for t in 100..109 {
            assert!(!w.observe(t, true, 0, NEVER));
        }
        assert!(w.observe(109, true, 0, NEVER));
        assert!(!w.observe(110, true, 1, NEVER), "progress resets");
    }

    #[test]
    fn trips_on_one_stuck_item_while_others_move() {
        let mut w = Watchdog::new(10);
        for t in 0..10 {
            assert!(!w.observe(t, true, 5, 0));
        }
        assert!(w.observe(10, true, 5, 0));
        assert_eq!(w.stalled_for(), 10);
    }
}
