//! Activity of each chiplet over time (the paper's Fig. 11 and Fig. 13) and where each
//! chiplet's cycles went (the gap between a run and its roofline).
//!
//! Both are integrals of block state between evaluated edges: the package is stepped
//! event by event, and between two evaluations of a tile nothing it reports changes, so
//! `state × (now − last)` is exact whatever fast-forward skipped. The bins hold integers
//! (ticks, bytes, busy ticks per job rate) so their sums do not depend on where the
//! intervals were cut; they become the reported values once, at the end. Counters that
//! advance in steps are attributed to the bin of the tick they advance at: DDR bursts where
//! the channel issues them, D2D flits at the core edge the D2D engine moves them.
//!
//! The timeline has at most [`MAX_BINS`] bins: when a run outgrows them, neighbouring bins
//! are merged in pairs and the bin width doubles, so memory is bounded and the result does
//! not depend on knowing the latency in advance.

use serde::Serialize;

/// Bins of a timeline (per chiplet and signal).
pub const MAX_BINS: usize = 512;
/// Width of the first bins, core cycles.
pub const FIRST_BIN_CYCLES: u64 = 64;

/// Why a chiplet's PE array was or was not computing, per core cycle of the layer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct CycleBreakdown {
    /// The PE array computes.
    pub compute: u64,
    /// Before the first micro-slice is computed (first DDR load, first grant: pipeline fill).
    pub fill: u64,
    /// Idle with DDR loads outstanding and nothing to compute.
    pub ddr_wait: u64,
    /// Idle with granted micro-slices still to compute here and no DDR load outstanding:
    /// they are on the D2D links or in a peer (or, EP, tokens still arriving).
    pub d2d_wait: u64,
    /// Idle with nothing granted to compute here yet (waiting for the scheduler).
    pub sched_wait: u64,
    /// After this chiplet's last computation until the layer ends (imbalance, drain).
    pub tail: u64,
}

impl CycleBreakdown {
    pub fn total(&self) -> u64 {
        self.compute + self.fill + self.ddr_wait + self.d2d_wait + self.sched_wait + self.tail
    }
    pub fn add(&mut self, o: &CycleBreakdown) {
        self.compute += o.compute;
        self.fill += o.fill;
        self.ddr_wait += o.ddr_wait;
        self.d2d_wait += o.d2d_wait;
        self.sched_wait += o.sched_wait;
        self.tail += o.tail;
    }
}

/// The state a chiplet is in between two evaluations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PeState {
    #[default]
    Fill,
    Compute,
    DdrWait,
    D2dWait,
    SchedWait,
}

/// Integrates a chiplet's states into a [`CycleBreakdown`]; the cycles since the last
/// computation are held apart until the run ends (they are the tail if nothing follows).
#[derive(Debug, Clone, Default)]
pub struct BreakdownRec {
    done: CycleBreakdown,
    /// Since the last computation ended, by state (ticks).
    since: CycleBreakdown,
    computed: bool,
}

impl BreakdownRec {
    /// `dt` ticks spent in `s`.
    pub fn add(&mut self, s: PeState, dt: u64) {
        if dt == 0 {
            return;
        }
        let b = &mut self.since;
        match s {
            PeState::Compute => {
                // Idle gaps before this computation were not the tail.
                self.done.add(&std::mem::take(b));
                self.done.compute += dt;
                self.computed = true;
            }
            PeState::Fill => b.fill += dt,
            PeState::DdrWait => b.ddr_wait += dt,
            PeState::D2dWait => b.d2d_wait += dt,
            PeState::SchedWait => b.sched_wait += dt,
        }
    }

    /// The breakdown in core cycles of `tk` ticks, the run having lasted `total` cycles
    /// (rounding goes to the tail so the parts add up to the latency).
    pub fn finish(&self, tk: u64, total: u64) -> CycleBreakdown {
        let mut b = self.done;
        if !self.computed {
            b.add(&self.since);
        }
        let mut c = CycleBreakdown { compute: b.compute / tk, fill: b.fill / tk, ddr_wait: b.ddr_wait / tk, d2d_wait: b.d2d_wait / tk, sched_wait: b.sched_wait / tk, tail: 0 };
        // The latency counts up to the last edge, the integrals through its cycle: an excess
        // (one cycle) comes out of the idle states, never out of compute.
        let mut excess = c.total().saturating_sub(total);
        for part in [&mut c.sched_wait, &mut c.d2d_wait, &mut c.ddr_wait, &mut c.fill] {
            let d = excess.min(*part);
            *part -= d;
            excess -= d;
        }
        c.tail = total.saturating_sub(c.total());
        c
    }
}

/// One chiplet's activity per bin.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct ChipletTimeline {
    /// Cycles the PE array computed.
    pub pe_busy: Vec<f64>,
    /// MACs performed (a job's MACs spread evenly over its busy cycles).
    pub macs: Vec<f64>,
    /// Bytes read from DDR (data bursts issued).
    pub ddr_bytes: Vec<f64>,
    /// D2D bytes sent and received by the chiplet's adapters.
    pub d2d_tx_bytes: Vec<f64>,
    pub d2d_rx_bytes: Vec<f64>,
    /// Mean on-chip weight bytes (live ring slots × slot size).
    pub weight_bytes: Vec<f64>,
}

impl ChipletTimeline {
    fn series(&mut self) -> [&mut Vec<f64>; 6] {
        [&mut self.pe_busy, &mut self.macs, &mut self.ddr_bytes, &mut self.d2d_tx_bytes, &mut self.d2d_rx_bytes, &mut self.weight_bytes]
    }
}

/// Activity of every chiplet over the run, in bins of `bin_cycles` core cycles.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Timeline {
    pub bin_cycles: u64,
    pub bins: usize,
    /// MACs per cycle of one PE array (for utilization).
    pub pe_macs_per_cycle: u64,
    pub chiplets: Vec<ChipletTimeline>,
}

/// A job's MAC rate as the exact fraction `macs / busy_cycles` (its MACs spread evenly over
/// its busy cycles).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct MacRate {
    pub macs: u64,
    pub cycles: u64,
}

/// One bin of one chiplet, in integers: ticks, bytes, and busy ticks per job rate. Sums of
/// integers do not depend on how an interval was cut — by the edges that happened to be
/// evaluated, which fast-forward and sleeping tiles change — so the timeline is the same
/// with fast-forward on or off; the conversion to the reported floating-point values is
/// done once, at the end.
#[derive(Debug, Clone, Default)]
struct BinAcc {
    /// Busy ticks per MAC rate, in the order the rates first appear (their sum is the bin's
    /// busy ticks).
    rated: Vec<(MacRate, u64)>,
    ddr: u64,
    tx: u64,
    rx: u64,
    /// Time integral of the on-chip weight bytes (bytes × ticks).
    weight_ticks: u128,
}

impl BinAcc {
    fn add_rated(&mut self, r: MacRate, ticks: u64) {
        match self.rated.iter_mut().find(|(q, _)| *q == r) {
            Some((_, t)) => *t += ticks,
            None => self.rated.push((r, ticks)),
        }
    }

    fn absorb(&mut self, o: BinAcc) {
        for (r, t) in o.rated {
            self.add_rated(r, t);
        }
        self.ddr += o.ddr;
        self.tx += o.tx;
        self.rx += o.rx;
        self.weight_ticks += o.weight_ticks;
    }
}

/// Records a [`Timeline`] in ticks (`tk` ticks per core cycle).
#[derive(Debug, Clone)]
pub struct TimelineRec {
    tk: u64,
    /// Bin width, ticks.
    bin: u64,
    pe_macs: u64,
    /// Per chiplet, per bin.
    chiplets: Vec<Vec<BinAcc>>,
}

impl TimelineRec {
    pub fn new(chiplets: usize, tk: u64, pe_macs: u64) -> Self {
        TimelineRec { tk, bin: FIRST_BIN_CYCLES * tk, pe_macs, chiplets: vec![Vec::new(); chiplets] }
    }

    /// Halves the resolution: neighbouring bins merge, the width doubles.
    fn merge_pairs(&mut self) {
        for c in &mut self.chiplets {
            let bins = std::mem::take(c);
            let mut it = bins.into_iter();
            while let Some(mut a) = it.next() {
                if let Some(b) = it.next() {
                    a.absorb(b);
                }
                c.push(a);
            }
        }
        self.bin *= 2;
    }

    /// The bin of tick `at`, merging bins until it fits.
    fn bin_of(&mut self, at: u64) -> usize {
        while (at / self.bin) as usize >= MAX_BINS {
            self.merge_pairs();
        }
        let b = (at / self.bin) as usize;
        for c in &mut self.chiplets {
            if c.len() <= b {
                c.resize(b + 1, BinAcc::default());
            }
        }
        b
    }

    /// Chiplet `c` held this state over ticks `[from, to)`: PE busy (at `rate`) and
    /// `weight_bytes` on chip.
    pub fn interval(&mut self, c: usize, from: u64, to: u64, pe_busy: bool, rate: MacRate, weight_bytes: u64) {
        let mut a = from;
        while a < to {
            let b = self.bin_of(a);
            let end = ((b as u64 + 1) * self.bin).min(to);
            let ticks = end - a;
            let acc = &mut self.chiplets[c][b];
            if pe_busy {
                acc.add_rated(rate, ticks);
            }
            acc.weight_ticks += weight_bytes as u128 * ticks as u128;
            a = end;
        }
    }

    /// Byte counts seen at tick `at`.
    pub fn count(&mut self, c: usize, at: u64, ddr: u64, tx: u64, rx: u64) {
        if ddr == 0 && tx == 0 && rx == 0 {
            return;
        }
        let b = self.bin_of(at);
        let acc = &mut self.chiplets[c][b];
        acc.ddr += ddr;
        acc.tx += tx;
        acc.rx += rx;
    }

    /// The reported values of one chiplet's bins, `bins` of them.
    fn convert(&self, c: &[BinAcc], bins: usize) -> ChipletTimeline {
        let tk = self.tk as f64;
        let mut out = ChipletTimeline::default();
        for s in out.series() {
            s.resize(bins, 0.0);
        }
        for (b, acc) in c.iter().enumerate().take(bins) {
            out.pe_busy[b] = acc.rated.iter().map(|&(_, t)| t).sum::<u64>() as f64 / tk;
            // In rate order, so the floating-point sum has one order.
            let mut rated = acc.rated.clone();
            rated.sort_unstable();
            out.macs[b] = rated.iter().map(|&(r, t)| (r.macs as u128 * t as u128) as f64 / (r.cycles.max(1) as u128 * self.tk as u128) as f64).sum();
            out.ddr_bytes[b] = acc.ddr as f64;
            out.d2d_tx_bytes[b] = acc.tx as f64;
            out.d2d_rx_bytes[b] = acc.rx as f64;
            out.weight_bytes[b] = acc.weight_ticks as f64 / self.bin as f64;
        }
        out
    }

    pub fn finish(self) -> Timeline {
        let bins = self.chiplets.iter().map(Vec::len).max().unwrap_or(0);
        let chiplets = self.chiplets.iter().map(|c| self.convert(c, bins)).collect();
        Timeline { bin_cycles: self.bin / self.tk, bins, pe_macs_per_cycle: self.pe_macs, chiplets }
    }

    /// One timeline of several chiplets' recorders (each of one chiplet), at the coarsest
    /// bin width among them, over the run's `total_cycles`.
    pub fn join(mut recs: Vec<TimelineRec>, total_cycles: u64) -> Timeline {
        let Some(first) = recs.first() else { return Timeline::default() };
        let (tk, pe) = (first.tk, first.pe_macs);
        let mut width = recs.iter().map(|r| r.bin).max().unwrap_or(1);
        while (total_cycles * tk).div_ceil(width) as usize > MAX_BINS {
            width *= 2;
        }
        let mut out = Timeline { bin_cycles: width / tk, bins: (total_cycles * tk).div_ceil(width) as usize, pe_macs_per_cycle: pe, chiplets: Vec::new() };
        for r in recs.iter_mut() {
            while r.bin < width {
                r.merge_pairs();
            }
            for c in &r.chiplets {
                out.chiplets.push(r.convert(c, out.bins));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn breakdown_adds_up_and_finds_the_tail() {
        let mut r = BreakdownRec::default();
        r.add(PeState::Fill, 20);
        r.add(PeState::Compute, 100);
        r.add(PeState::DdrWait, 10);
        r.add(PeState::Compute, 50);
        r.add(PeState::SchedWait, 40);
        let b = r.finish(2, 120);
        assert_eq!((b.fill, b.compute, b.ddr_wait, b.sched_wait, b.tail), (10, 75, 5, 0, 30));
        assert_eq!(b.total(), 120);
    }

    #[test]
    fn bins_merge_and_keep_totals() {
        let mut r = TimelineRec::new(1, 2, 8);
        let span = 2 * FIRST_BIN_CYCLES * MAX_BINS as u64 * 3; // ticks: forces merging
        r.interval(0, 0, span, true, MacRate { macs: 8, cycles: 1 }, 100);
        r.count(0, span - 1, 64, 256, 0);
        let t = r.finish();
        assert!(t.bins <= MAX_BINS);
        let busy: f64 = t.chiplets[0].pe_busy.iter().sum();
        assert_eq!(busy, (span / 2) as f64);
        assert_eq!(t.chiplets[0].macs.iter().sum::<f64>(), 8.0 * (span / 2) as f64);
        assert_eq!(t.chiplets[0].ddr_bytes.iter().sum::<f64>(), 64.0);
        // A constant weight level stays constant through the merges.
        assert!(t.chiplets[0].weight_bytes[..t.bins - 1].iter().all(|&w| (w - 100.0).abs() < 1e-9), "{:?}", &t.chiplets[0].weight_bytes[..4]);
    }
}
