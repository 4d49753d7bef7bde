//! Clock domains. The harness counts cycles of one reference clock; further domains are given
//! by their period in ps (or an integer ratio to the reference), and their edges are merged in
//! a deterministic order: by time, then by domain index (the order domains were added).
//! A chiplet package uses this for its 800 MHz compute clock against the UCIe adapter and DDR
//! clocks; the mesh NoC runs in one domain.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClockDomain {
    pub name: String,
    /// Period in picoseconds (800 MHz = 1250 ps).
    pub period_ps: u64,
    /// Phase offset of the first rising edge, ps.
    #[serde(default)]
    pub phase_ps: u64,
}

impl ClockDomain {
    pub fn new(name: &str, period_ps: u64) -> Self {
        assert!(period_ps > 0, "clock {name}: period must be > 0 ps");
        ClockDomain { name: name.into(), period_ps, phase_ps: 0 }
    }
    /// A domain running at `num/den` times the frequency of `reference`.
    pub fn ratio(name: &str, reference: &ClockDomain, num: u64, den: u64) -> Self {
        assert!(num > 0 && den > 0);
        let p = reference.period_ps * den;
        assert!(p.is_multiple_of(num), "clock {name}: ratio {num}/{den} gives a non-integer period in ps");
        ClockDomain::new(name, p / num)
    }
    pub fn freq_mhz(&self) -> f64 {
        1e6 / self.period_ps as f64
    }
}

/// The merged edge sequence of several domains.
#[derive(Debug, Clone)]
pub struct ClockSet {
    pub domains: Vec<ClockDomain>,
    next_edge: Vec<u64>,
    /// Cycle count per domain (edges seen so far).
    pub cycles: Vec<u64>,
}

impl ClockSet {
    pub fn new(domains: Vec<ClockDomain>) -> Self {
        let next_edge = domains.iter().map(|d| d.phase_ps).collect();
        let cycles = vec![0; domains.len()];
        ClockSet { domains, next_edge, cycles }
    }

    /// Advances to the next time any domain has a rising edge. Returns that time (ps) and a
    /// bitmask of the domains that tick, lowest index first when evaluated.
    pub fn advance(&mut self) -> (u64, u64) {
        let t = *self.next_edge.iter().min().expect("ClockSet with no domain");
        let mut mask = 0u64;
        for (i, d) in self.domains.iter().enumerate() {
            if self.next_edge[i] == t {
                mask |= 1 << i;
                self.next_edge[i] += d.period_ps;
                self.cycles[i] += 1;
            }
        }
        (t, mask)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_edges_are_ordered_and_deterministic() {
        let core = ClockDomain::new("core", 1250); // 800 MHz
        let ucie = ClockDomain::ratio("ucie", &core, 2, 1); // 1.6 GHz
        let ddr = ClockDomain::new("ddr", 1500);
        let mut cs = ClockSet::new(vec![core, ucie, ddr]);
        let mut last = 0;
        let mut seq = Vec::new();
        for _ in 0..12 {
            let (t, m) = cs.advance();
            assert!(t >= last);
            last = t;
            seq.push((t, m));
        }
        // t=0 all three tick together; ucie ticks twice per core tick.
        assert_eq!(seq[0], (0, 0b111));
        assert_eq!(seq[1], (625, 0b010));
        assert_eq!(seq[2], (1250, 0b011));
        assert_eq!(seq[3], (1500, 0b100));
        let mut again = ClockSet::new(cs.domains.clone());
        let seq2: Vec<_> = (0..12).map(|_| again.advance()).collect();
        assert_eq!(seq, seq2);
    }
}
