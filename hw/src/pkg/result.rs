//! What a package run reports (the JSON of `waferstream package`), and the hardware limit it
//! is measured against.

use serde::Serialize;

use super::chiplet::ChipletId;
use super::config::Strategy;
use super::timeline::{CycleBreakdown, Timeline};

/// Peak rates of the package, per core cycle (all chiplets together).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PeakRates {
    /// DDR bytes per core cycle over all channels.
    pub ddr_bytes_per_cycle: f64,
    /// MACs per core cycle over all PE arrays.
    pub macs_per_cycle: f64,
    /// D2D bytes per core cycle over all directed die-to-die links.
    pub d2d_bytes_per_cycle: f64,
}

/// The roofline of a run: the cycles the busiest resource needs at its peak rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Roofline {
    pub ddr_cycles: f64,
    pub compute_cycles: f64,
    pub d2d_cycles: f64,
    /// max of the three, rounded up.
    pub cycles: u64,
    /// Which one bounds: "ddr", "compute" or "d2d".
    pub bound: &'static str,
}

impl Roofline {
    pub fn of(ddr_bytes: u64, macs: u64, d2d_bytes: u64, peak: &PeakRates) -> Roofline {
        let ddr_cycles = ddr_bytes as f64 / peak.ddr_bytes_per_cycle;
        let compute_cycles = macs as f64 / peak.macs_per_cycle;
        let d2d_cycles = if peak.d2d_bytes_per_cycle > 0.0 { d2d_bytes as f64 / peak.d2d_bytes_per_cycle } else { 0.0 };
        let (m, bound) = [(ddr_cycles, "ddr"), (compute_cycles, "compute"), (d2d_cycles, "d2d")]
            .into_iter()
            .fold((0.0f64, "ddr"), |a, b| if b.0 > a.0 { b } else { a });
        Roofline { ddr_cycles, compute_cycles, d2d_cycles, cycles: m.ceil() as u64, bound }
    }
}

/// Per-chiplet counters of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct ChipletResult {
    pub id: ChipletId,
    pub pe_busy_cycles: u64,
    pub macs: u64,
    pub ddr_bytes: u64,
    pub d2d_tx_bytes: u64,
    pub peak_ring_slots: u32,
    pub peak_weight_bytes: u64,
    pub peak_token_bytes: u64,
    pub rule1_computes: u64,
    pub rule2_computes: u64,
    pub replays: u64,
    /// Deadlock-escape activity (chiplet.rs `evict`): slots freed for arrivals, computed
    /// slices handed to the next station, DDR reloads of dropped slices.
    pub evictions: u64,
    pub handoffs: u64,
    pub reloads: u64,
    /// DDR bytes of those reloads (part of `ddr_bytes`): what the escape cost.
    pub reload_bytes: u64,
    /// Sharded loading: micro-slices loaded for a trajectory this chiplet is not on and
    /// forwarded into it.
    pub forwards: u64,
    /// Cycles a D2D head waited for a ring slot.
    pub rx_stall_cycles: u64,
    /// Where the chiplet's cycles went (adds up to the latency).
    pub cycles: CycleBreakdown,
}

/// One strategy's run of one layer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PkgResult {
    pub strategy: Strategy,
    pub latency_cycles: u64,
    /// MACs / (all PE arrays' MACs per cycle × latency).
    pub utilization: f64,
    /// Mean over chiplets of the cycles the PE array is busy / latency (busy counts a
    /// whole fold however few of its PEs hold real work).
    pub pe_busy_fraction: f64,
    /// Peak on-chip weight bytes summed over chiplets (each chiplet's peak).
    pub peak_weight_bytes: u64,
    pub mean_weight_bytes: f64,
    pub peak_token_bytes: u64,
    pub ddr_bytes: u64,
    pub d2d_bytes: u64,
    pub macs: u64,
    /// Longest IO-die decision (cycles from the event that allows a grant to the grant).
    pub sched_decision_cycles_max: u64,
    pub roofline_cycles: u64,
    pub roofline: Roofline,
    /// latency / roofline.
    pub roofline_ratio: f64,
    pub cycles_per_second: f64,
    pub wall_seconds: f64,
    pub replays: u64,
    /// Functional mode: every token's output equals the FL reference, bit for bit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outputs_match_reference: Option<bool>,
    /// Rule 5 (A4): micro-slices the load arbiter gave to another member than their Rule-4
    /// loader.
    pub rule5_redirected: u64,
    /// Layer batches, iterations and token-buffering deferrals of the whole run.
    pub session: super::session::SessionStats,
    /// Where the cycles went, summed over chiplets (adds up to chiplets × latency).
    pub cycles: CycleBreakdown,
    pub chiplets: Vec<ChipletResult>,
    /// Activity per time bin (`package --plot`; first layer batch only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeline: Option<Timeline>,
}

impl PkgResult {
    /// DDR bytes the deadlock escape reloaded, over every chiplet.
    pub fn reload_bytes(&self) -> u64 {
        self.chiplets.iter().map(|c| c.reload_bytes).sum()
    }

    /// Adds the next layer batch `r` of the same run (the same strategy on the same
    /// package) to this result: latencies, bytes, MACs, roofline cycles, replays and wall
    /// time add; peaks take the max; utilization, PE-busy fraction and mean weight bytes are
    /// latency-weighted means; the cycle breakdowns (package and per chiplet) add; outputs
    /// match only when every batch's did. What stays the first batch's: the per-chiplet
    /// counters other than the breakdown and `reload_bytes` (which add), the `roofline` detail, the timeline (first batch
    /// only, see `timeline`) and `session` (the caller sets the whole run's).
    pub fn merge(&mut self, r: PkgResult) {
        let a = self;
        let lat = a.latency_cycles + r.latency_cycles;
        a.utilization = (a.utilization * a.latency_cycles as f64 + r.utilization * r.latency_cycles as f64) / lat as f64;
        a.pe_busy_fraction = (a.pe_busy_fraction * a.latency_cycles as f64 + r.pe_busy_fraction * r.latency_cycles as f64) / lat as f64;
        a.cycles.add(&r.cycles);
        for (c, rc) in a.chiplets.iter_mut().zip(&r.chiplets) {
            c.cycles.add(&rc.cycles);
            c.reload_bytes += rc.reload_bytes;
        }
        a.mean_weight_bytes = (a.mean_weight_bytes * a.latency_cycles as f64 + r.mean_weight_bytes * r.latency_cycles as f64) / lat as f64;
        a.latency_cycles = lat;
        a.peak_weight_bytes = a.peak_weight_bytes.max(r.peak_weight_bytes);
        a.peak_token_bytes = a.peak_token_bytes.max(r.peak_token_bytes);
        a.ddr_bytes += r.ddr_bytes;
        a.d2d_bytes += r.d2d_bytes;
        a.macs += r.macs;
        a.sched_decision_cycles_max = a.sched_decision_cycles_max.max(r.sched_decision_cycles_max);
        a.roofline_cycles += r.roofline_cycles;
        a.roofline_ratio = a.latency_cycles as f64 / a.roofline_cycles.max(1) as f64;
        a.wall_seconds += r.wall_seconds;
        a.cycles_per_second = a.latency_cycles as f64 / a.wall_seconds.max(1e-9);
        a.replays += r.replays;
        a.rule5_redirected += r.rule5_redirected;
        a.outputs_match_reference = match (a.outputs_match_reference, r.outputs_match_reference) {
            (Some(x), Some(y)) => Some(x && y),
            _ => None,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roofline_takes_the_binding_resource() {
        let peak = PeakRates { ddr_bytes_per_cycle: 128.0, macs_per_cycle: 8192.0, d2d_bytes_per_cycle: 1440.0 };
        let r = Roofline::of(128_000, 8192 * 500, 0, &peak);
        assert_eq!((r.cycles, r.bound), (1000, "ddr"));
        let r = Roofline::of(128, 8192 * 5000, 0, &peak);
        assert_eq!((r.cycles, r.bound), (5000, "compute"));
    }
}
