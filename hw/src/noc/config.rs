//! Parameters of the mesh NoC, its traffic and its measurement, as serde config structs.
//! Defaults mirror BookSim2's `iq` router defaults (see docs/results-noc.md).

use serde::{Deserialize, Serialize};

pub use sched::noc::TrafficPattern;

pub use crate::cfg::CfgError;
use crate::cfg::err;

/// Input-queued virtual-channel router (BookSim2 `iq`). Per hop at zero load a flit spends
/// `routing_delay + va_delay + sa_delay + st_delay` cycles in the router plus `link_latency`
/// on the link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RouterCfg {
    /// Virtual channels per port (1..=12: allocator masks are 64 bits wide, 5 ports × 12).
    pub vcs: u32,
    /// Flits per VC buffer (private per VC).
    pub vc_buf: u32,
    /// Route computation (RC) cycles; 0 = lookahead routing.
    pub routing_delay: u32,
    /// VC allocation (VA) cycles, >= 1.
    pub va_delay: u32,
    /// Switch allocation (SA) cycles, >= 1.
    pub sa_delay: u32,
    /// Switch traversal (ST, crossbar) cycles, >= 1.
    pub st_delay: u32,
    /// Extra cycles before a returning credit is usable upstream.
    pub credit_delay: u32,
}

impl Default for RouterCfg {
    fn default() -> Self {
        RouterCfg { vcs: 2, vc_buf: 8, routing_delay: 1, va_delay: 1, sa_delay: 1, st_delay: 1, credit_delay: 0 }
    }
}

impl RouterCfg {
    /// Checks the router's own fields (field names relative to the router section).
    pub fn validate(&self) -> Result<(), CfgError> {
        let r = self;
        if r.vcs == 0 {
            return err("vcs", "a port needs at least 1 virtual channel (got 0)");
        }
        if r.vcs > 12 {
            return err("vcs", format!("at most 12 VCs per port (5 ports x 12 = 60 allocator inputs); got {}", r.vcs));
        }
        if r.vc_buf == 0 {
            return err("vc_buf", "VC buffers must hold at least 1 flit (got 0)");
        }
        if r.vc_buf > 255 {
            return err("vc_buf", format!("at most 255 flits per VC (got {})", r.vc_buf));
        }
        for (name, v) in [("va_delay", r.va_delay), ("sa_delay", r.sa_delay), ("st_delay", r.st_delay)] {
            if v == 0 {
                return err(name, "pipeline stage must take at least 1 cycle (got 0)");
            }
            if v > 64 {
                return err(name, format!("{v} cycles is implausible (max 64)"));
            }
        }
        if r.routing_delay > 64 || r.credit_delay > 1024 {
            return err("routing_delay", "routing_delay <= 64 and credit_delay <= 1024 cycles");
        }
        Ok(())
    }
}

/// A k×k 2D mesh of routers, one terminal (network interface) per router.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MeshCfg {
    /// Routers per side.
    pub k: u32,
    /// Router-to-router link latency, cycles (>= 1). Injection/ejection channels take 1.
    pub link_latency: u32,
    /// Clock for waveform timestamps, MHz.
    pub clock_mhz: f64,
    /// Flit size and router-to-router link width, bytes. A flit takes
    /// ceil(flit_bytes / link_width_bytes) cycles to cross a link (serialization): the output
    /// port is busy that long and the flit's last byte arrives that much later. A link carries
    /// at most one flit per cycle. Equal sizes (the default) are BookSim's one flit per cycle.
    pub flit_bytes: u32,
    pub link_width_bytes: u32,
    pub router: RouterCfg,
}

impl Default for MeshCfg {
    fn default() -> Self {
        MeshCfg { k: 8, link_latency: 1, clock_mhz: 1000.0, flit_bytes: 16, link_width_bytes: 16, router: RouterCfg::default() }
    }
}

impl MeshCfg {
    pub fn nodes(&self) -> u32 {
        self.k * self.k
    }
    /// Cycles a flit occupies a router-to-router link (serialization), >= 1.
    pub fn ser_cycles(&self) -> u32 {
        self.flit_bytes.div_ceil(self.link_width_bytes).max(1)
    }
    /// Clock period in ps for waveform timestamps.
    pub fn period_ps(&self) -> u64 {
        (1e6 / self.clock_mhz).round() as u64
    }
}

/// Synthetic traffic with BookSim semantics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrafficCfg {
    pub pattern: TrafficPattern,
    /// Offered load in flits/node/cycle; a packet is created with probability
    /// `rate / packet_size` each cycle (Bernoulli).
    pub rate: f64,
    /// Flits per packet.
    pub packet_size: u32,
    pub seed: u64,
}

impl Default for TrafficCfg {
    fn default() -> Self {
        TrafficCfg { pattern: TrafficPattern::Uniform, rate: 0.1, packet_size: 1, seed: 0 }
    }
}

/// BookSim's latency-mode measurement: warm-up periods, then sample periods until latency
/// and throughput converge, then drain of the measured packets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MeasureCfg {
    pub sample_period: u64,
    pub warmup_periods: u64,
    pub max_samples: u64,
    /// Abort (saturated) when the average latency of delivered + in-flight packets exceeds this.
    pub latency_thres: f64,
    /// Relative change of latency / accepted rate between periods counted as converged.
    pub stopping_threshold: f64,
    pub acc_stopping_threshold: f64,
    /// Cycles without any flit moving, while flits wait, that stop the run (0 = off).
    pub watchdog_cycles: u64,
    /// Report every router's event counters under its hierarchical name.
    pub per_router_stats: bool,
}

impl Default for MeasureCfg {
    fn default() -> Self {
        MeasureCfg {
            sample_period: 1000,
            warmup_periods: 3,
            max_samples: 10,
            latency_thres: 500.0,
            stopping_threshold: 0.05,
            acc_stopping_threshold: 0.05,
            watchdog_cycles: 10_000,
            per_router_stats: false,
        }
    }
}

/// How the simulation is stepped (never changes results).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimCfg {
    /// Worker threads (1 = serial). Results are bit-identical for any value.
    pub threads: u32,
    /// Skip cycles in which nothing can happen. Results are bit-identical either way.
    pub fast_forward: bool,
}

impl Default for SimCfg {
    fn default() -> Self {
        SimCfg { threads: 1, fast_forward: true }
    }
}

/// Everything a NoC run needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct NocCfg {
    pub mesh: MeshCfg,
    pub traffic: TrafficCfg,
    pub measure: MeasureCfg,
    pub sim: SimCfg,
}

impl NocCfg {
    /// Collects the invariants a simulation needs; the first violated one is returned with
    /// its field path.
    pub fn validate(&self) -> Result<(), CfgError> {
        let m = &self.mesh;
        let r = &m.router;
        if m.k == 0 {
            return err("mesh.k", "mesh must have at least 1 router per side (got 0)");
        }
        if m.k > 128 {
            // Flits count hops in 8 bits; the longest XY path on a 128x128 mesh is 255 routers.
            return err("mesh.k", format!("at most 128 routers per side (8-bit hop counts in flits); got {}", m.k));
        }
        if m.link_latency == 0 {
            return err("mesh.link_latency", "links are registered: latency must be >= 1 cycle (got 0)");
        }
        if m.flit_bytes == 0 {
            return err("mesh.flit_bytes", "a flit has at least 1 byte (got 0)");
        }
        if m.link_width_bytes == 0 {
            return err("mesh.link_width_bytes", "a link is at least 1 byte wide (got 0)");
        }
        if m.ser_cycles() > 4096 {
            return err("mesh.link_width_bytes", format!("a {}-byte flit on a {}-byte link takes {} cycles (max 4096)", m.flit_bytes, m.link_width_bytes, m.ser_cycles()));
        }
        if !(m.clock_mhz.is_finite() && m.clock_mhz > 0.0) {
            return err("mesh.clock_mhz", format!("must be a positive frequency (got {})", m.clock_mhz));
        }
        // Waveform times are cycle x period in whole picoseconds: the period must be a whole
        // number of ps (>= 1 ps, <= 1 s), or every timestamp would drift by the rounding.
        let period = 1e6 / m.clock_mhz;
        if !(1.0..=1e12).contains(&period) || (period - period.round()).abs() > 1e-6 {
            return err("mesh.clock_mhz", format!("period 1e6/{} = {period} ps is not a whole number of ps in 1..=1e12 (waveform times would drift); e.g. 1000, 800, 500, 250 or 1 MHz", m.clock_mhz));
        }
        r.validate().map_err(|e| e.under("mesh.router"))?;
        let t = &self.traffic;
        if !(t.rate.is_finite() && (0.0..=1.0).contains(&t.rate)) {
            return err("traffic.rate", format!("injection rate must be in 0..=1 flits/node/cycle (got {})", t.rate));
        }
        if t.packet_size == 0 {
            return err("traffic.packet_size", "packets need at least 1 flit (got 0)");
        }
        if t.packet_size > 4096 {
            return err("traffic.packet_size", format!("at most 4096 flits per packet (got {})", t.packet_size));
        }
        t.pattern.validate(m.k).map_err(|reason| CfgError { field: "traffic.pattern".into(), reason: reason.to_string() })?;
        let s = &self.measure;
        if s.sample_period == 0 {
            return err("measure.sample_period", "must be >= 1 cycle (got 0)");
        }
        if s.max_samples == 0 || s.max_samples < s.warmup_periods {
            return err("measure.max_samples", format!("must be >= 1 and >= warmup_periods ({})", s.warmup_periods));
        }
        if s.latency_thres.is_nan() || s.latency_thres <= 0.0 {
            return err("measure.latency_thres", "must be > 0 cycles");
        }
        let negative = |x: f64| x.is_nan() || x < 0.0;
        if negative(s.stopping_threshold) || negative(s.acc_stopping_threshold) {
            return err("measure.stopping_threshold", "thresholds must be >= 0");
        }
        // Summed in u64: a u32 sum of a huge link_latency wraps (issue 5 fuzzing).
        let (l, cd, st) = (m.link_latency as u64, r.credit_delay as u64, r.st_delay as u64);
        let max_lat = (l + 1 + cd) + (r.routing_delay as u64 + r.va_delay as u64 + r.sa_delay as u64 + st) + m.ser_cycles() as u64;
        if s.watchdog_cycles != 0 && s.watchdog_cycles <= max_lat {
            // Name the field the user most likely changed: the watchdog if it is not the
            // default, else the latencies that outgrew it.
            if s.watchdog_cycles != MeasureCfg::default().watchdog_cycles {
                return err("measure.watchdog_cycles", format!("must exceed the longest pipeline+link latency ({max_lat} cycles) or be 0 to disable"));
            }
            return err(
                "mesh.link_latency",
                format!("link {} + router pipeline gives a {max_lat}-cycle latency, not below measure.watchdog_cycles ({}): lower it or raise/disable (0) the watchdog", m.link_latency, s.watchdog_cycles),
            );
        }
        // Each link of the mesh is a harness link of bounded depth: the router-to-router flit
        // link carries switch traversal + channel + serialization, the credit link the channel
        // + credit delay (mesh.rs). Reached with the watchdog off (0).
        let deepest = (st + l + m.ser_cycles() as u64).max(l + 1 + cd);
        let limit = crate::harness::link::MAX_LINK_LATENCY as u64;
        if deepest >= limit {
            return err("mesh.link_latency", format!("{} cycles make a {deepest}-cycle link (switch traversal + link + serialization, or link + credit delay); at most {} cycles", m.link_latency, limit - 1));
        }
        if self.sim.threads == 0 {
            return err("sim.threads", "must be >= 1 (got 0)");
        }
        Ok(())
    }
}
