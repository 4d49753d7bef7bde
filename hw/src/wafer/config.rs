//! Parameters of the wafer-scale chip (SPEC §4) as serde config structs.
//!
//! Defaults are the paper's where it gives a number (B200-class die: 2250 TFLOPS FP16, 180 GB
//! HBM at 8 TB/s; 8 TB/s of die-to-die bandwidth per die; 9 TB/s per wafer border) and ours
//! otherwise (20 ns per hop, 4 KiB flits, 1 GHz router clock). See docs/wafer.md for the
//! reading of each number.
//!
//! Link bandwidth in flits: a router clock of `clock_mhz`, flits of `flit_bytes` and links
//! `link_bytes_per_cycle` wide give a mesh output one flit every `ceil(flit_bytes /
//! link_bytes_per_cycle)` cycles (the router's serialization), while the die's injection and
//! ejection ports carry one flit per cycle. With the defaults (4096 B flits, 1024 B/cycle at
//! 1 GHz) a mesh link moves 1.024 TB/s per direction and the die can feed all four of its
//! links at once (4 × 1.024 TB/s out + 4 × 1.024 TB/s in ≈ the paper's 8 TB/s per die).

use serde::{Deserialize, Serialize};

use crate::cfg::{err, CfgError};
use crate::noc::RouterCfg;

pub use sched::wafer::{MappingKind, ReplicaSplit};

/// The compute die (B200-class): a roofline engine per die (docs/wafer.md "Die").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DieCfg {
    /// Dense FP16 throughput (attention), TFLOPS.
    pub fp16_tflops: f64,
    /// Dense int8 throughput (the other linear ops: gating, experts), TOPS.
    pub int8_tops: f64,
    /// HBM capacity, GB (10^9 bytes).
    pub hbm_gb: f64,
    /// HBM bandwidth, TB/s.
    pub hbm_tbps: f64,
    /// Fraction of peak compute a GEMM reaches (both precisions).
    pub compute_efficiency: f64,
    /// Fraction of peak HBM bandwidth a weight stream reaches.
    pub hbm_efficiency: f64,
    /// Fixed cycles per kernel launch (a task on the die's engine).
    pub kernel_overhead_cycles: u32,
}

impl DieCfg {
    /// A rate or efficiency by its field path (`die.<name>`).
    pub fn rate(&self, field: &str) -> f64 {
        match field {
            "die.fp16_tflops" => self.fp16_tflops,
            "die.int8_tops" => self.int8_tops,
            "die.hbm_tbps" => self.hbm_tbps,
            "die.compute_efficiency" => self.compute_efficiency,
            "die.hbm_efficiency" => self.hbm_efficiency,
            _ => unreachable!("no die rate `{field}`"),
        }
    }

    /// Of a rate and the efficiency it is multiplied by, the field furthest below its
    /// default: the one a refusal names.
    pub fn starved_factor(&self, rate: &'static str, eff: &'static str) -> &'static str {
        let d = DieCfg::default();
        if self.rate(eff) / d.rate(eff) < self.rate(rate) / d.rate(rate) {
            eff
        } else {
            rate
        }
    }
}

impl Default for DieCfg {
    fn default() -> Self {
        DieCfg { fp16_tflops: 2250.0, int8_tops: 4500.0, hbm_gb: 180.0, hbm_tbps: 8.0, compute_efficiency: 0.7, hbm_efficiency: 0.8, kernel_overhead_cycles: 2000 }
    }
}

/// The wafer system: geometry, links, routers, dies, and the parallel mapping of one layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WaferCfg {
    /// Dies per wafer: columns × rows (`--wafer 4x4`).
    pub die_cols: u32,
    pub die_rows: u32,
    /// Wafers: columns × rows (`--wafers 2x2`).
    pub wafers_x: u32,
    pub wafers_y: u32,
    /// Router clock (one harness cycle), MHz.
    pub clock_mhz: f64,
    /// Flit size, bytes.
    pub flit_bytes: u32,
    /// On-wafer mesh link width per direction, bytes per cycle.
    pub link_bytes_per_cycle: u32,
    /// On-wafer link latency, ns (per hop, besides the router pipeline).
    pub link_latency_ns: f64,
    /// Bandwidth of one border between two neighbouring wafers, per direction, TB/s, shared
    /// evenly by the border's die-to-die links.
    pub border_tbps: f64,
    /// Cross-wafer link latency, ns.
    pub border_latency_ns: f64,
    /// Flits per packet at most (a transfer is cut into packets; the header travels in the
    /// first flit, so no extra flit).
    pub packet_flits: u32,
    pub router: RouterCfg,
    pub die: DieCfg,
    /// Tensor parallelism of attention (dies per TP group) and data parallelism (TP groups).
    pub tp: u32,
    pub dp: u32,
    pub mapping: MappingKind,
    /// Keep the all-gather half of the all-reduce (the paper keeps it; false drops it).
    pub all_gather: bool,
    /// Micro-batches the layer's tokens are split into (communication/computation overlap).
    pub micro_batches: u32,
    /// Tokens per TP group in the layer.
    pub tokens_per_group: u32,
    /// KV-cache length each token attends over (decode), tokens.
    pub context_len: u32,
    /// KV-cache bytes per cached token per layer, all heads (split over TP). 2048 B = a
    /// GQA-class model (4 KV heads x 128 x K,V x FP16); DeepSeek's MLA caches ~1.1 KB.
    pub kv_bytes_per_token: u32,
    /// Bytes per activation element dispatched to the experts (int8) and combined back (FP16).
    pub dispatch_elem_bytes: u32,
    pub combine_elem_bytes: u32,
    /// Which replica of a replicated expert serves a token: the one nearest the token's
    /// holder (default) or an even Load_e/Num_e share per replica (MoEntwine Algorithm 1's
    /// heats; `sched::wafer::dispatch::ReplicaSplit`). Left out of the serialized config
    /// at its default, so the JSON of a default run is what it always was.
    #[serde(skip_serializing_if = "ReplicaSplit::is_nearest")]
    pub replica_split: ReplicaSplit,
    /// A link is hot in a phase when it carried at least this fraction of the phase's busiest
    /// link's flits (docs/wafer.md "Hot and cold links").
    pub hot_fraction: f64,
    /// Give the routers one more VC, reserved for the NI-Balancer's migration stream, which
    /// yields every output to regular traffic (set by the balancing runs, with and without
    /// migration alike; docs/balance.md).
    pub migration_vc: bool,
    /// With `migration_vc`: cycles an output must go without regular requests before a
    /// migration flit may take it.
    pub migration_idle_cycles: u32,
    pub seed: u64,
}

impl Default for WaferCfg {
    fn default() -> Self {
        WaferCfg {
            die_cols: 4,
            die_rows: 4,
            wafers_x: 1,
            wafers_y: 1,
            clock_mhz: 1000.0,
            flit_bytes: 4096,
            link_bytes_per_cycle: 1024,
            link_latency_ns: 20.0,
            border_tbps: 9.0,
            border_latency_ns: 20.0,
            packet_flits: 4,
            router: RouterCfg { vcs: 2, vc_buf: 16, ..RouterCfg::default() },
            die: DieCfg::default(),
            tp: 4,
            dp: 4,
            mapping: MappingKind::Er,
            all_gather: true,
            micro_batches: 4,
            tokens_per_group: 256,
            context_len: 4096,
            kv_bytes_per_token: 2048,
            dispatch_elem_bytes: 1,
            combine_elem_bytes: 2,
            replica_split: ReplicaSplit::Nearest,
            hot_fraction: 0.75,
            migration_vc: false,
            migration_idle_cycles: 4,
            seed: 1,
        }
    }
}

impl WaferCfg {
    pub fn geom(&self) -> sched::wafer::WaferGeom {
        sched::wafer::WaferGeom { wafers_x: self.wafers_x, wafers_y: self.wafers_y, die_cols: self.die_cols, die_rows: self.die_rows }
    }
    pub fn dies(&self) -> u32 {
        self.die_cols * self.die_rows * self.wafers_x * self.wafers_y
    }
    pub fn cols(&self) -> u32 {
        self.die_cols * self.wafers_x
    }
    pub fn rows(&self) -> u32 {
        self.die_rows * self.wafers_y
    }
    /// Cycles per ns.
    pub fn cycles_per_ns(&self) -> f64 {
        self.clock_mhz / 1000.0
    }
    /// Router-to-router link latency in cycles (>= 1).
    pub fn link_cycles(&self) -> u32 {
        (self.link_latency_ns * self.cycles_per_ns()).round().max(1.0) as u32
    }
    pub fn border_cycles(&self) -> u32 {
        (self.border_latency_ns * self.cycles_per_ns()).round().max(1.0) as u32
    }
    /// Serialization of an on-wafer mesh output (cycles per flit).
    pub fn link_ser(&self) -> u32 {
        self.flit_bytes.div_ceil(self.link_bytes_per_cycle).max(1)
    }
    /// Die-to-die links on one border between two wafers stacked along x (a vertical border:
    /// `die_rows` links) or along y (`die_cols` links).
    pub fn border_links(&self, vertical: bool) -> u32 {
        if vertical {
            self.die_rows
        } else {
            self.die_cols
        }
    }
    /// Serialization of a cross-wafer link: the border's bandwidth shared by its links.
    pub fn border_ser(&self, vertical: bool) -> u32 {
        let bytes_per_cycle = self.border_tbps * 1e12 / (self.clock_mhz * 1e6) / self.border_links(vertical) as f64;
        ((self.flit_bytes as f64 / bytes_per_cycle).ceil() as u32).max(1)
    }

    /// Checks every field before anything is built (field names as in the TOML/JSON config).
    pub fn validate(&self) -> Result<(), CfgError> {
        let c = self;
        for (name, v) in [("die_cols", c.die_cols), ("die_rows", c.die_rows), ("wafers_x", c.wafers_x), ("wafers_y", c.wafers_y)] {
            if v == 0 {
                return err(name, "must be at least 1");
            }
        }
        if c.cols() > 64 || c.rows() > 64 {
            return err("die_cols", format!("the die grid is {}x{}; at most 64 dies per side (flit coordinates are 8-bit, link tables sized for 4096 dies)", c.cols(), c.rows()));
        }
        crate::cfg::clock_period_ps("clock_mhz", c.clock_mhz)?;
        if c.flit_bytes == 0 || c.flit_bytes > 1 << 20 {
            return err("flit_bytes", format!("must be within 1..=1048576 (got {})", c.flit_bytes));
        }
        if c.link_bytes_per_cycle == 0 {
            return err("link_bytes_per_cycle", "must be at least 1");
        }
        if c.link_ser() > 64 {
            return err("link_bytes_per_cycle", format!("a {}-byte flit would take {} cycles per link (max 64): widen the link or shrink the flit", c.flit_bytes, c.link_ser()));
        }
        for (name, v) in [("link_latency_ns", c.link_latency_ns), ("border_latency_ns", c.border_latency_ns)] {
            if !(v.is_finite() && v > 0.0) {
                return err(name, format!("must be a positive number of ns (got {v})"));
            }
            if v * c.cycles_per_ns() >= 10_000.0 {
                return err(name, format!("{v} ns is {} cycles; at most 10000", v * c.cycles_per_ns()));
            }
        }
        if !(c.border_tbps.is_finite() && c.border_tbps > 0.0) {
            return err("border_tbps", format!("must be positive (got {})", c.border_tbps));
        }
        if c.wafers_x * c.wafers_y > 1 && c.border_ser(true).max(c.border_ser(false)) > 64 {
            return err("border_tbps", format!("{} TB/s per border leaves a {}-byte flit over 64 cycles per cross-wafer link", c.border_tbps, c.flit_bytes));
        }
        if c.packet_flits == 0 || c.packet_flits > 1024 {
            return err("packet_flits", format!("must be within 1..=1024 (got {})", c.packet_flits));
        }
        c.router.validate().map_err(|e| e.under("router"))?;
        if c.migration_vc && c.router.vcs >= 12 {
            return err("router.vcs", format!("{} VCs leave no room for the migration VC (migration_vc: at most 11, the router takes 12)", c.router.vcs));
        }
        if c.migration_idle_cycles > 1_000_000 {
            return err("migration_idle_cycles", format!("{} above 1000000", c.migration_idle_cycles));
        }
        let d = &c.die;
        for (name, v) in [("die.fp16_tflops", d.fp16_tflops), ("die.int8_tops", d.int8_tops), ("die.hbm_gb", d.hbm_gb), ("die.hbm_tbps", d.hbm_tbps)] {
            if !(v.is_finite() && v > 0.0) {
                return err(name, format!("must be positive (got {v})"));
            }
        }
        for (name, v) in [("die.compute_efficiency", d.compute_efficiency), ("die.hbm_efficiency", d.hbm_efficiency)] {
            if !(v.is_finite() && v > 0.0 && v <= 1.0) {
                return err(name, format!("must be in (0, 1] (got {v})"));
            }
        }
        // A die that does less than one operation, or reads less than one HBM byte, per
        // cycle of its clock is no die (the B200-class default: 1.6e6 FP16 FLOPs and 6400
        // bytes per 1 GHz cycle); such rates make kernel times overflow their cycle counts
        // (issue 19: 1e-15 TFLOPS saturated a cast, wrapped, and the starved die ran
        // faster). Kernels past the counting bound for other reasons are refused when the
        // program is built (`KernelCost::checked_cycles`).
        let per_cycle = c.clock_mhz * 1e6;
        for (rate, eff, what, unit) in [
            ("die.fp16_tflops", "die.compute_efficiency", "FP16 operations", 1e12),
            ("die.int8_tops", "die.compute_efficiency", "int8 operations", 1e12),
            ("die.hbm_tbps", "die.hbm_efficiency", "HBM bytes", 1e12),
        ] {
            let (r, e) = (d.rate(rate), d.rate(eff));
            let per_s = r * unit * e;
            if !(per_s >= per_cycle) {
                return err(
                    d.starved_factor(rate, eff),
                    format!("{rate} x {eff} = {per_s:.3e} {what}/s, less than one per cycle of the {} MHz clock: a die that slow is no die, and its kernel times would overflow", c.clock_mhz),
                );
            }
        }
        if c.tp == 0 {
            return err("tp", "must be at least 1");
        }
        if c.dies() % c.tp != 0 {
            return err("tp", format!("TP={} does not divide the {} dies", c.tp, c.dies()));
        }
        if c.dp == 0 || c.tp * c.dp != c.dies() {
            return err("dp", format!("TP x DP must equal the {} dies (TP={}, DP={})", c.dies(), c.tp, c.dp));
        }
        if c.micro_batches == 0 || c.micro_batches > 64 {
            return err("micro_batches", format!("must be within 1..=64 (got {})", c.micro_batches));
        }
        if c.tokens_per_group == 0 || c.tokens_per_group > 65_536 {
            return err("tokens_per_group", format!("must be within 1..=65536 (got {})", c.tokens_per_group));
        }
        // The layer program holds every token-expert assignment (and its payload in
        // functional mode): bound the layer, not the machine's memory.
        if c.tokens_per_group as u64 * c.dp as u64 > 1 << 20 {
            return err("tokens_per_group", format!("{} tokens per group x {} groups is more than 1048576 tokens in the layer", c.tokens_per_group, c.dp));
        }
        if c.micro_batches > c.tokens_per_group {
            return err("micro_batches", format!("{} micro-batches of {} tokens per group leave some empty", c.micro_batches, c.tokens_per_group));
        }
        if c.context_len > 1 << 20 {
            return err("context_len", format!("at most 1048576 tokens (got {})", c.context_len));
        }
        if c.kv_bytes_per_token > 1 << 24 {
            return err("kv_bytes_per_token", format!("at most 16 MiB per token (got {})", c.kv_bytes_per_token));
        }
        for (name, v) in [("dispatch_elem_bytes", c.dispatch_elem_bytes), ("combine_elem_bytes", c.combine_elem_bytes)] {
            // An element is an int8, a bf16/fp16 or an fp32 value: 3 bytes is no number format.
            if ![1, 2, 4].contains(&v) {
                return err(name, format!("must be 1, 2 or 4 bytes (int8, 16-bit or 32-bit elements; got {v})"));
            }
        }
        if !(c.hot_fraction.is_finite() && c.hot_fraction > 0.0 && c.hot_fraction <= 1.0) {
            return err("hot_fraction", format!("must be in (0, 1] (got {})", c.hot_fraction));
        }
        Ok(())
    }
}
