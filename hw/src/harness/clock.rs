//! Clock domains on one time base.
//!
//! The harness counts *ticks*. A single-clock system (the mesh NoC) has one tick per cycle.
//! A multi-clock system (the chiplet package: core 800 MHz, UCIe adapter, DDR controller)
//! takes as its tick the greatest common divisor of its domains' periods and phases in ps;
//! each domain then has a rising edge every `div` ticks from tick `ph` ([`DomainClock`]).
//! The engine visits only ticks at which some domain has an edge ([`ClockSet::next_edge`]),
//! a module is evaluated only at its own domain's edges, and links carry values between
//! ticks — so every edge is exact (no drift from rounding periods) and the edge order is
//! deterministic: by time, and within one tick every domain that ticks sees the registered
//! values of the tick before. Waveform timestamps are `tick × tick_ps`.

use serde::{Deserialize, Serialize};

use super::Cycle;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClockDomain {
    pub name: String,
    /// Period in picoseconds (800 MHz = 1250 ps).
    pub period_ps: u64,
    /// Phase offset of the first rising edge, ps (< period).
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
    pub fn with_phase(mut self, phase_ps: u64) -> Self {
        self.phase_ps = phase_ps;
        self
    }
    pub fn freq_mhz(&self) -> f64 {
        1e6 / self.period_ps as f64
    }
}

/// One domain on the harness time base: a rising edge every `div` ticks, the first at tick `ph`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DomainClock {
    /// Ticks per cycle (>= 1).
    pub div: u64,
    /// Tick of the first edge (< div).
    pub ph: u64,
}

impl DomainClock {
    /// A single-clock system: every tick is an edge.
    pub const UNIT: DomainClock = DomainClock { div: 1, ph: 0 };

    /// `x % div`: a mask for the power-of-two ratios of most systems (a 64-bit division
    /// costs tens of cycles and runs several times per block per tick).
    #[inline]
    fn rem(&self, x: u64) -> u64 {
        if self.div.is_power_of_two() {
            x & (self.div - 1)
        } else {
            x % self.div
        }
    }
    #[inline]
    pub fn is_edge(&self, t: Cycle) -> bool {
        t >= self.ph && self.rem(t - self.ph) == 0
    }
    /// First edge at or after `t` (saturates at `u64::MAX`).
    #[inline]
    pub fn next_edge(&self, t: Cycle) -> Cycle {
        if t <= self.ph {
            return self.ph;
        }
        let r = self.rem(t - self.ph);
        if r == 0 {
            t
        } else {
            t.saturating_add(self.div - r)
        }
    }
    /// First edge strictly after `t`.
    #[inline]
    pub fn edge_after(&self, t: Cycle) -> Cycle {
        self.next_edge(t.saturating_add(1))
    }
    /// Number of this domain's edges at ticks `< t` (its cycle count at tick `t`).
    #[inline]
    pub fn cycle_of(&self, t: Cycle) -> u64 {
        if t <= self.ph {
            0
        } else if self.div.is_power_of_two() {
            // (A shift, not a division: the DDR channel asks at every edge it runs.)
            let x = t - self.ph;
            (x >> self.div.trailing_zeros()) + (x & (self.div - 1) != 0) as u64
        } else {
            (t - self.ph).div_ceil(self.div)
        }
    }
    /// Tick of this domain's edge number `n` (0-based).
    #[inline]
    pub fn edge(&self, n: u64) -> Cycle {
        self.ph + n * self.div
    }
    /// `n` cycles of this domain, in ticks.
    #[inline]
    pub fn ticks(&self, n: u64) -> Cycle {
        n * self.div
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The domains of one system on a common tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClockSet {
    pub domains: Vec<ClockDomain>,
    tick_ps: u64,
    clocks: Vec<DomainClock>,
    /// Some domain has an edge at every tick (the package's UCIe clock is its tick), so
    /// every tick is an edge: [`ClockSet::next_edge`] is the identity, asked once per step.
    every_tick: bool,
}

impl ClockSet {
    /// Fails (naming the domain: block `clock NAME`) on a zero period, a phase not below the
    /// period, or no domain.
    pub fn new(domains: Vec<ClockDomain>) -> Result<Self, crate::Error> {
        if domains.is_empty() {
            return Err("a clock set needs at least one domain".into());
        }
        let mut g = 0;
        for d in &domains {
            let block = || format!("clock {}", d.name);
            if d.period_ps == 0 {
                return Err(crate::Error::block(block(), "period must be > 0 ps"));
            }
            if d.phase_ps >= d.period_ps {
                return Err(crate::Error::block(block(), format!("phase {} ps must be below the period {} ps", d.phase_ps, d.period_ps)));
            }
            g = gcd(gcd(g, d.period_ps), d.phase_ps);
        }
        let clocks: Vec<DomainClock> = domains.iter().map(|d| DomainClock { div: d.period_ps / g, ph: d.phase_ps / g }).collect();
        let every_tick = clocks.iter().any(|c| c.div == 1);
        Ok(ClockSet { domains, tick_ps: g, clocks, every_tick })
    }

    /// Length of one harness tick, ps (gcd of all periods and phases).
    pub fn tick_ps(&self) -> u64 {
        self.tick_ps
    }

    pub fn clock(&self, i: usize) -> DomainClock {
        self.clocks[i]
    }

    pub fn clocks(&self) -> &[DomainClock] {
        &self.clocks
    }

    /// First tick at or after `t` at which any domain has an edge.
    pub fn next_edge(&self, t: Cycle) -> Cycle {
        if self.every_tick {
            return t;
        }
        self.clocks.iter().map(|c| c.next_edge(t)).min().unwrap_or(t)
    }

    /// Domains with an edge at tick `t`, as a bitmask (bit i = domain i).
    pub fn edges_at(&self, t: Cycle) -> u64 {
        self.clocks.iter().enumerate().filter(|(_, c)| c.is_edge(t)).fold(0, |m, (i, _)| m | 1 << i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_edges_are_exact_and_ordered() {
        let core = ClockDomain::new("core", 1250); // 800 MHz
        let ucie = ClockDomain::ratio("ucie", &core, 5, 2); // 2 GHz
        let ddr = ClockDomain::new("ddr", 1250).with_phase(625); // 800 MHz, half a cycle late
        let cs = ClockSet::new(vec![core, ucie, ddr]).unwrap();
        assert_eq!(cs.tick_ps(), 125);
        assert_eq!(cs.clock(0), DomainClock { div: 10, ph: 0 });
        assert_eq!(cs.clock(1), DomainClock { div: 4, ph: 0 });
        assert_eq!(cs.clock(2), DomainClock { div: 10, ph: 5 });
        let mut seq = Vec::new();
        let mut t = 0;
        for _ in 0..8 {
            t = cs.next_edge(t);
            seq.push((t * cs.tick_ps(), cs.edges_at(t)));
            t += 1;
        }
        assert_eq!(
            seq,
            vec![(0, 0b011), (500, 0b010), (625, 0b100), (1000, 0b010), (1250, 0b001), (1500, 0b010), (1875, 0b100), (2000, 0b010)]
        );
    }

    #[test]
    fn domain_clock_arithmetic() {
        let c = DomainClock { div: 10, ph: 5 };
        assert!(!c.is_edge(0) && c.is_edge(5) && c.is_edge(15) && !c.is_edge(10));
        assert_eq!(c.next_edge(0), 5);
        assert_eq!(c.next_edge(5), 5);
        assert_eq!(c.next_edge(6), 15);
        assert_eq!(c.edge_after(5), 15);
        assert_eq!(c.cycle_of(5), 0);
        assert_eq!(c.cycle_of(6), 1);
        assert_eq!(c.cycle_of(15), 1);
        assert_eq!(c.edge(3), 35);
        assert_eq!(DomainClock::UNIT.next_edge(7), 7);
        assert_eq!(DomainClock::UNIT.cycle_of(7), 7);
    }

    /// `cycle_of` (shift for power-of-two ratios) and `next_edge` of a set with a
    /// every-tick domain against counting edges one tick at a time.
    #[test]
    fn cycle_of_and_next_edge_count_edges() {
        for (div, ph) in [(1u64, 0u64), (2, 0), (2, 1), (4, 3), (8, 5), (10, 5), (3, 2)] {
            let c = DomainClock { div, ph };
            let mut edges = 0;
            for t in 0..200u64 {
                assert_eq!(c.cycle_of(t), edges, "div {div} ph {ph} t {t}");
                if (t >= ph) && (t - ph) % div == 0 {
                    edges += 1;
                }
            }
        }
        let cs = ClockSet::new(vec![ClockDomain::new("core", 1250), ClockDomain::new("ucie", 625), ClockDomain::new("ddr", 1250).with_phase(625)]).unwrap();
        for t in 0..50 {
            assert_eq!(cs.next_edge(t), t);
            assert_ne!(cs.edges_at(t), 0);
        }
    }

    #[test]
    fn bad_domains_are_named() {
        assert!(ClockSet::new(vec![ClockDomain { name: "ddr".into(), period_ps: 0, phase_ps: 0 }]).unwrap_err().to_string().contains("ddr"));
        assert!(ClockSet::new(vec![ClockDomain::new("x", 100).with_phase(100)]).unwrap_err().to_string().contains("phase"));
    }
}
