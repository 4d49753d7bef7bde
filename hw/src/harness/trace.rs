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

pub trait Probe {
    /// Appends this module's signals, in a fixed order, under `scope`.
    fn declare(&self, scope: &[String], out: &mut Vec<SignalDecl>);
    /// Appends the current values in declaration order.
    fn sample(&self, out: &mut Vec<u64>);
}

/// Where merged value changes go (a waveform writer, or a test's vector).
pub trait SignalSink {
    fn change(&mut self, cycle: Cycle, sig: usize, value: u64) -> Result<(), String>;
}

impl SignalSink for waves::WaveWriter {
    fn change(&mut self, cycle: Cycle, sig: usize, value: u64) -> Result<(), String> {
        waves::WaveWriter::change(self, cycle, sig, value).map_err(|e| e.to_string())
    }
}

impl SignalSink for Vec<(Cycle, usize, u64)> {
    fn change(&mut self, cycle: Cycle, sig: usize, value: u64) -> Result<(), String> {
        self.push((cycle, sig, value));
        Ok(())
    }
}

/// Value changes of one partition's signals.
#[derive(Debug, Clone, Default)]
pub struct ChangeLog {
    /// Global id of this partition's first signal.
    pub base: usize,
    prev: Vec<u64>,
    cur: Vec<u64>,
    changes: Vec<(Cycle, u32, u64)>,
}

impl ChangeLog {
    /// `n` signals starting at global id `base`; all start at 0 (reset value).
    pub fn new(base: usize, n: usize) -> Self {
        ChangeLog { base, prev: vec![0; n], cur: Vec::with_capacity(n), changes: Vec::new() }
    }

    /// Buffer to sample into for this cycle (cleared).
    pub fn begin(&mut self) -> &mut Vec<u64> {
        self.cur.clear();
        &mut self.cur
    }

    /// Records the differences between this cycle's samples and the previous values.
    pub fn commit(&mut self, now: Cycle) {
        assert_eq!(self.cur.len(), self.prev.len(), "probe sampled a different signal count");
        for (i, (p, c)) in self.prev.iter_mut().zip(self.cur.iter()).enumerate() {
            if *p != *c {
                *p = *c;
                self.changes.push((now, (self.base + i) as u32, *c));
            }
        }
    }

    pub fn pending(&self) -> usize {
        self.changes.len()
    }

    /// Merges the logs (given in partition order) into `sink` in (cycle, signal id) order and
    /// empties them.
    pub fn drain_merged(logs: &mut [&mut ChangeLog], sink: &mut dyn SignalSink) -> Result<(), String> {
        let mut pos = vec![0usize; logs.len()];
        loop {
            let t = logs
                .iter()
                .zip(pos.iter())
                .filter_map(|(l, &p)| l.changes.get(p).map(|c| c.0))
                .min();
            let Some(t) = t else { break };
            for (l, p) in logs.iter().zip(pos.iter_mut()) {
                while let Some(&(c, id, v)) = l.changes.get(*p) {
                    if c != t {
                        break;
                    }
                    sink.change(c, id as usize, v)?;
                    *p += 1;
                }
            }
        }
        for l in logs.iter_mut() {
            l.changes.clear();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
