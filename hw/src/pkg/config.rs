//! Parameters of the chiplet package (SPEC §3) and its strategy presets.
//!
//! Defaults are paper Table I where it gives a number (800 MHz, 2×2, 32×64 PE array, 16 MB
//! SRAM, DDR3-1600, UCIe, 8 micro-slices) and ours otherwise (SPEC §3 "ours").

use serde::{Deserialize, Serialize};

use crate::cfg::{err, CfgError};
use crate::harness::link::MAX_LINK_LATENCY;
use crate::harness::{ClockDomain, ClockSet, DomainClock};
use crate::noc::RouterCfg;
use crate::pkg::chiplet::CtrlKnobs;
use crate::pkg::ddr::DdrCfg;
use crate::pkg::pe_array::PeArrayCfg;
use crate::pkg::ucie::UcieCfg;

/// The strategies compared in the paper, as presets of the same machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// Expert parallelism: experts partitioned over chiplets (expert e on chiplet e mod N),
    /// tokens dispatched all-to-all to their experts' chiplets and combined back.
    Ep,
    /// The paper's EP (§VI-A, expert-streaming.txt L255, L282–284): whole experts, one
    /// resident per chiplet, loaded from DDR and then computed — EP on the same machine with
    /// one micro-slice per expert (the whole expert) and a ring whose DDR side holds one
    /// slot ([`PkgCfg::for_strategy`]). Placement and dispatch as [`Strategy::Ep`].
    EpPaper,
    /// The paper's Hydra (L257, L275): the paper's EP ([`Strategy::EpPaper`]'s whole-expert
    /// machine — the paper isolates Hydra's placement on top of its EP) whose placement
    /// balances the experts' token load *predicted* from earlier layer batches of the same
    /// run (never the counts of the layer being run; see `hw::pkg::session` for the
    /// predictor). No history: EP's placement.
    Hydra,
    /// EP placed by the exact token counts of the layer being run (greedy balance): an
    /// oracle, the upper bound of any popularity-driven placement. (Named `hydra` before.)
    HydraOracle,
    /// Naive FSE-DP: one slice per trajectory chiplet, store-and-forward, no eager use,
    /// experts in id order.
    A1,
    /// FSE-DP with micro-slice flows under Rules 1–4, experts in id order.
    A2,
    /// A2 + paired-load order.
    A3,
    /// A3 + Rule 5 (micro-slices loaded by the trajectory chiplet with the most free slots).
    A4,
    /// A3 + token buffering (slack from `sched.token_buffer_slack`).
    A5,
}

impl Strategy {
    pub const ALL: [Strategy; 9] = [Strategy::Ep, Strategy::EpPaper, Strategy::Hydra, Strategy::HydraOracle, Strategy::A1, Strategy::A2, Strategy::A3, Strategy::A4, Strategy::A5];

    pub fn name(self) -> &'static str {
        match self {
            Strategy::Ep => "ep",
            Strategy::EpPaper => "ep-paper",
            Strategy::Hydra => "hydra",
            Strategy::HydraOracle => "hydra-oracle",
            Strategy::A1 => "a1",
            Strategy::A2 => "a2",
            Strategy::A3 => "a3",
            Strategy::A4 => "a4",
            Strategy::A5 => "a5",
        }
    }

    /// Parses a CLI name (`ep`, `ep-paper`, `hydra`, `hydra-oracle`, `a1`…`a5`, `fse-dp` =
    /// a3).
    pub fn parse(s: &str) -> crate::Result<Strategy> {
        let s = s.trim().to_ascii_lowercase();
        Ok(match s.as_str() {
            "ep" => Strategy::Ep,
            "ep-paper" | "ep_paper" => Strategy::EpPaper,
            "hydra" => Strategy::Hydra,
            "hydra-oracle" | "hydra_oracle" => Strategy::HydraOracle,
            "a1" | "naive" => Strategy::A1,
            "a2" => Strategy::A2,
            "a3" | "fse-dp" | "fsedp" => Strategy::A3,
            "a4" => Strategy::A4,
            "a5" => Strategy::A5,
            other => return Err(crate::Error::Msg(format!("unknown strategy `{other}` (expected {}; fse-dp = a3)", Strategy::LIST))),
        })
    }

    /// Every strategy's name, comma-separated (the parse lists and help texts).
    pub const LIST: &'static str = "ep, ep-paper, hydra, hydra-oracle, a1, a2, a3, a4, a5";

    /// Experts travel as micro-slices along trajectories (FSE-DP), rather than staying on
    /// their owner with tokens moving (EP, the paper's EP, Hydra, Hydra's oracle).
    pub fn streams_experts(self) -> bool {
        !matches!(self, Strategy::Ep | Strategy::EpPaper | Strategy::Hydra | Strategy::HydraOracle)
    }

    /// Controller knobs of the preset.
    pub fn knobs(self, ddr_reserve: u32) -> CtrlKnobs {
        let naive = self == Strategy::A1;
        CtrlKnobs { eager: !naive, forward_with_compute: !naive, ddr_reserve, rule5: self == Strategy::A4, helpers: false, shard_reserve: false }
    }
}

/// Which chiplets load an expert's micro-slices from DDR under FSE-DP (Rule 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Loaders {
    /// The trajectory's members, micro-slice k by member k mod |T_e| (a one-chiplet
    /// trajectory loads everything from its own channel).
    #[default]
    Trajectory,
    /// Every chiplet, micro-slice k by the chiplet at snake position k mod N: an expert's
    /// bytes come from all N channels ("fully sharded"); a loader off the trajectory only
    /// forwards the slice into it over D2D. EP and Hydra are unaffected (their owner loads).
    All,
}

/// How a helper of sharded loading (`loaders = "all"`) gets a micro-slice into its
/// trajectory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ShardFlow {
    /// The helper loads its share and pushes it to the first member; a full ring there
    /// makes room with the deadlock escape (drops and reloads). Today's model, and the only
    /// one the RTL chiplet controller implements.
    #[default]
    Push,
    /// Flow control: the member reserves a ring slot, then fetches the slice from the
    /// helper's channel; the helper loads only on a fetch and sends into the reserved slot
    /// (docs/fsedp-reading.md, "Who loads a micro-slice").
    Reserve,
}

impl ShardFlow {
    fn is_push(&self) -> bool {
        *self == ShardFlow::Push
    }
}

/// Package-level parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PkgCfg {
    /// Chiplet array, rows × columns (2×2 default; 3×3, 4×4 in the paper; at most 16 chiplets).
    pub rows: u32,
    pub cols: u32,
    /// Core clock, MHz (PE array, ring buffer, controllers, die routers, IO die).
    pub core_mhz: f64,
    /// Micro-slices per expert (paper: fewer than 10 preferred).
    pub micro_slices: u32,
    /// On-chip weight buffer per chiplet, bytes: the ring holds as many whole micro-slices as
    /// fit (at least 2). The rest of the 16 MB SRAM holds tokens.
    pub weight_buffer_bytes: u64,
    /// Ring slots per chiplet; 0 = derived from `weight_buffer_bytes`.
    pub ring_slots: u32,
    /// Rule 4 keeps this many ring slots for D2D arrivals.
    pub ddr_reserve: u32,
    /// FSE-DP loaders: `trajectory` (members) or `all` (sharded over every channel).
    pub loaders: Loaders,
    /// Sharded loading's flow control: `push` (default) or `reserve`. Left out of the
    /// written config when `push`, so results of earlier configs stay byte-identical.
    #[serde(skip_serializing_if = "ShardFlow::is_push")]
    pub shard_flow: ShardFlow,
    /// Token activations and outputs per element, bytes (int8 activations; outputs returned
    /// to the token's home chiplet by EP/Hydra as bf16).
    pub act_bytes: u32,
    pub out_bytes: u32,
    /// D2D flit size, bytes (UCIe 256-byte flits).
    pub flit_bytes: u32,
    pub seed: u64,
    /// UCIe adapter clock, MHz (a multiple of the core clock: the router's registered send
    /// lands on an adapter edge).
    pub ucie_mhz: f64,
    /// DDR controller clock, MHz, and its phase against the core clock, ps.
    pub ddr_mhz: f64,
    pub ddr_phase_ps: u64,
    /// Token buffering slack (A5), fraction of a forward pass in (0, 1]: sets the QoS
    /// threshold N_threshold (Algorithm 2).
    pub token_buffer_slack: f64,
    /// Cold-expert threshold θ_min of token buffering, tokens (A5).
    pub theta_min: u32,
    /// Slots of the IO die's QoS timer bank (requests tracked at once; slot 0 is shared by
    /// requests that found no free slot and are never deferred).
    pub qos_slots: u32,
    pub pe: PeArrayCfg,
    pub ddr: DdrCfg,
    pub ucie: UcieCfg,
    /// The die router (the mesh router of `noc`).
    pub router: RouterCfg,
    pub sim: PkgSimCfg,
}

impl PkgCfg {
    /// The machine a strategy runs on: this config, except for the paper's EP and Hydra
    /// ([`Strategy::EpPaper`], [`Strategy::Hydra`]), whose expert is one micro-slice (the whole expert) in a ring of
    /// two whole-expert slots of which Rule 4 keeps one for D2D arrivals — which EP never
    /// has — so DDR fills one slot: one whole expert resident per chiplet, its load then its
    /// compute, the next load only once the slot is released. Every other strategy gets the
    /// config unchanged (the same bytes, so their results are too).
    pub fn for_strategy(&self, strategy: Strategy) -> std::borrow::Cow<'_, PkgCfg> {
        match strategy {
            Strategy::EpPaper | Strategy::Hydra => std::borrow::Cow::Owned(PkgCfg { micro_slices: 1, ring_slots: 2, ddr_reserve: 1, ..self.clone() }),
            _ => std::borrow::Cow::Borrowed(self),
        }
    }

    /// Token buffering (Algorithm 2) parameters of the IO die under `strategy`: on for A5
    /// (θ_min = `theta_min`, N_threshold from the slack), off (θ_min = 0) otherwise.
    pub fn token_buffer_cfg(&self, strategy: Strategy) -> Result<sched::pkg::iodie::TokenBufferCfgFl, CfgError> {
        let mut tb = sched::pkg::iodie::TokenBufferCfgFl { slots: self.qos_slots, ..Default::default() };
        if strategy == Strategy::A5 {
            tb.theta_min = self.theta_min;
            tb.n_threshold = sched::pkg::iodie::TokenBufferCfgFl::n_threshold_for_slack(self.token_buffer_slack)
                .map_err(|e| CfgError { field: "token_buffer_slack".into(), reason: e.to_string() })?;
        }
        Ok(tb)
    }
}

/// How a package run is stepped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PkgSimCfg {
    /// Partitions stepped in parallel (results do not depend on it).
    pub threads: u32,
    /// Skip edges at which nothing can change (results and waveforms do not depend on it).
    pub fast_forward: bool,
    /// Core cycles without progress that end the run with a report of the blocked buffers.
    pub watchdog_cycles: u64,
    /// Core cycles after which a run is stopped as unfinished.
    pub max_cycles: u64,
    /// Record each chiplet's activity per time bin into the result's `timeline` (for
    /// `package --plot`; results do not depend on it).
    pub timeline: bool,
    /// Layer batches of one strategy simulated at once, each on its own package, when they
    /// do not depend on each other (no token buffering: every strategy but A5); 0 = as many
    /// as the machine has cores ÷ `threads`. Results are merged in batch order, so they do
    /// not depend on it.
    pub batch_jobs: u32,
}

impl Default for PkgSimCfg {
    fn default() -> Self {
        PkgSimCfg { threads: 1, fast_forward: true, watchdog_cycles: 200_000, max_cycles: 2_000_000_000, timeline: false, batch_jobs: 0 }
    }
}

impl Default for PkgCfg {
    fn default() -> Self {
        PkgCfg {
            rows: 2,
            cols: 2,
            core_mhz: 800.0,
            micro_slices: 8,
            weight_buffer_bytes: 8 << 20,
            ring_slots: 0,
            ddr_reserve: 1,
            loaders: Loaders::Trajectory,
            shard_flow: ShardFlow::Push,
            act_bytes: 1,
            out_bytes: 2,
            flit_bytes: 256,
            seed: 0,
            ucie_mhz: 1600.0,
            ddr_mhz: 800.0,
            ddr_phase_ps: 625,
            token_buffer_slack: 0.2,
            theta_min: 2,
            qos_slots: 256,
            pe: PeArrayCfg::default(),
            ddr: DdrCfg::default(),
            ucie: UcieCfg::default(),
            router: RouterCfg { vcs: 2, vc_buf: 8, ..Default::default() },
            sim: PkgSimCfg::default(),
        }
    }
}

/// The package's clocks on the harness tick and the latencies of its links in ticks —
/// computed here once, for [`PkgCfg::validate`] (every link within what the link arena can
/// hold, so no config that validates reaches an engine assertion) and for
/// [`crate::pkg::package::Package::new`] (which builds exactly these links).
#[derive(Debug, Clone)]
pub struct PkgTiming {
    /// Core, UCIe and DDR domains.
    pub clocks: ClockSet,
    pub core: DomainClock,
    pub ucie: DomainClock,
    pub ddr: DomainClock,
    /// Ticks per core cycle, and the tick in ps.
    pub tk: u64,
    pub tick_ps: u64,
    /// FDI latency one way, ticks (the adapters' wire latency).
    pub fdi: u64,
    /// Sideband credit return of a die-to-die link, ticks (lands on a core edge).
    pub credit_lat: u64,
}

impl PkgTiming {
    /// Whether the adapters' one edge between two core edges may be run at the first of them
    /// (`UcieAdapterCl::eval_ahead`): a UCIe clock at twice the core clock, both in phase, and
    /// no edge of any clock between a core edge and that UCIe edge — which is then the next
    /// tick the engine would visit, the tick the watchdog observes in its stead
    /// ([`crate::harness::control::C_AHEAD_VISIT`]). True for the defaults (800 MHz core,
    /// 1600 MHz UCIe, DDR at 800 MHz on the odd ticks).
    pub fn ucie_runs_ahead(&self) -> bool {
        let (core, ucie) = (self.core, self.ucie);
        if core.ph != 0 || ucie.ph != 0 || 2 * ucie.div != core.div {
            return false;
        }
        // The DDR's edges relative to the core's repeat after `ddr.div` core edges.
        let n = self.ddr.div.min(1 << 16);
        n == self.ddr.div && (0..n).all(|k| self.clocks.next_edge(k * core.div + 1) == k * core.div + ucie.div)
    }

    /// `c` core cycles in ticks.
    pub fn cl(&self, c: u64) -> u64 {
        c * self.tk
    }
}

impl PkgCfg {
    /// The clocks and link latencies of the package (see [`PkgTiming`]); refuses, naming
    /// the field that sets it, any link longer than a link can be ([`MAX_LINK_LATENCY`]
    /// ticks). The tick is the gcd of the three clock periods and the DDR phase, so a phase
    /// of 1 ps makes every latency 1250 ticks per core cycle: the bounds below are in ps or
    /// cycles for the clocks as given.
    pub fn timing(&self) -> Result<PkgTiming, CfgError> {
        let core_dom = ClockDomain { name: "core".into(), period_ps: self.core_period_ps(), phase_ps: 0 };
        let ucie_dom = ClockDomain { name: "ucie".into(), period_ps: (1e6 / self.ucie_mhz).round() as u64, phase_ps: 0 };
        let ddr_dom = ClockDomain { name: "ddr".into(), period_ps: (1e6 / self.ddr_mhz).round() as u64, phase_ps: self.ddr_phase_ps };
        let clocks = ClockSet::new(vec![core_dom, ucie_dom, ddr_dom]).map_err(|e| CfgError { field: "ddr_phase_ps".into(), reason: e.to_string() })?;
        let (core, ucie, ddr) = (clocks.clock(0), clocks.clock(1), clocks.clock(2));
        let (tk, tick_ps) = (core.div, clocks.tick_ps());
        let max = MAX_LINK_LATENCY as u64 - 1;
        let why = format!("a link holds at most {max} ticks, and a tick is {tick_ps} ps here (the gcd of the core, UCIe and DDR periods and ddr_phase_ps)");
        // Core-domain links of 2 cycles (scheduler, D2D port, hand-off, Rule 5) and the
        // crossing from an adapter into the router (1 tick + a core period).
        if 2 * tk > max {
            return err("core_mhz", format!("a {} MHz core cycle is {tk} ticks and a 2-cycle link {} ticks; {why}", self.core_mhz, 2 * tk));
        }
        // The DDR request crossing (1 tick + a DDR period).
        if 1 + ddr.div > max {
            return err("ddr_mhz", format!("a {} MHz DDR cycle is {} ticks; {why}", self.ddr_mhz, ddr.div));
        }
        let st = self.router.st_delay as u64;
        if (st + 2) * tk > max {
            return err("router.st_delay", format!("{st} cycles of switch traversal make the ejection link {} ticks; at most {} cycles with these clocks: {why}", (st + 2) * tk, (max / tk).saturating_sub(2)));
        }
        let fdi = self.ucie.fdi_latency_ps.div_ceil(tick_ps).max(1);
        // Sideband credits land on a core edge.
        let credit_lat = (fdi + tk).div_ceil(tk) * tk;
        if credit_lat > max {
            let max_ps = ((max / tk).saturating_sub(1) * tk * tick_ps).max(tick_ps);
            return err("ucie.fdi_latency_ps", format!("{} ps is {fdi} ticks, the credit return {credit_lat} ticks; at most {max_ps} ps with these clocks: {why}", self.ucie.fdi_latency_ps));
        }
        Ok(PkgTiming { clocks, core, ucie, ddr, tk, tick_ps, fdi, credit_lat })
    }
}

impl PkgCfg {
    pub fn chiplets(&self) -> u32 {
        self.rows * self.cols
    }

    /// Core clock period, ps (refused by `validate` unless it is a whole number of ps).
    pub fn core_period_ps(&self) -> u64 {
        (1e6 / self.core_mhz).round() as u64
    }

    /// Ring slots for micro-slices of `slot_bytes`.
    pub fn slots_for(&self, slot_bytes: u64) -> u32 {
        if self.ring_slots > 0 {
            self.ring_slots
        } else {
            (self.weight_buffer_bytes / slot_bytes.max(1)).clamp(2, 1 << 12) as u32
        }
    }

    /// Checks that need the model: micro-slices against d_ffn, ring capacity.
    pub fn validate_for(&self, d_ffn: u32) -> Result<(), CfgError> {
        if self.micro_slices > d_ffn {
            return err("micro_slices", format!("{} micro-slices of a d_ffn of {d_ffn} leaves empty slices (at most {d_ffn})", self.micro_slices));
        }
        Ok(())
    }

    pub fn validate(&self) -> Result<(), CfgError> {
        if self.rows == 0 || self.cols == 0 {
            return err(if self.rows == 0 { "rows" } else { "cols" }, "the chiplet array needs at least 1 row and 1 column");
        }
        if self.rows > 16 || self.cols > 16 || self.rows as u64 * self.cols as u64 > 16 {
            return err("rows", format!("at most 16 chiplets (trajectory masks are 16 bits); got {}x{}", self.rows, self.cols));
        }
        if self.rows != self.cols {
            return err("cols", format!("the die mesh is square (k x k, as the mesh NoC); got {}x{}", self.rows, self.cols));
        }
        if !(self.core_mhz.is_finite() && self.core_mhz >= 1.0 && self.core_mhz <= 10_000.0) {
            return err("core_mhz", format!("must be within 1..=10000 MHz (got {})", self.core_mhz));
        }
        let p = 1e6 / self.core_mhz;
        if (p - p.round()).abs() > 1e-6 {
            return err("core_mhz", format!("{} MHz has a period of {p:.4} ps; choose a clock whose period is a whole number of ps so every edge is exact", self.core_mhz));
        }
        if self.shard_flow == ShardFlow::Reserve && self.loaders != Loaders::All {
            return err("shard_flow", "`reserve` is flow control for sharded loading: it needs loaders = \"all\"");
        }
        if self.micro_slices == 0 {
            return err("micro_slices", "an expert has at least 1 micro-slice (got 0)");
        }
        if self.micro_slices > 4096 {
            return err("micro_slices", format!("at most 4096 micro-slices per expert (got {})", self.micro_slices));
        }
        if self.ring_slots == 1 || (self.ring_slots > 0 && self.ring_slots <= self.ddr_reserve) {
            return err("ring_slots", format!("need more slots than ddr_reserve ({}) and at least 2 (got {})", self.ddr_reserve, self.ring_slots));
        }
        if self.ring_slots > 4096 {
            return err("ring_slots", format!("at most 4096 slots (got {})", self.ring_slots));
        }
        if self.weight_buffer_bytes == 0 {
            return err("weight_buffer_bytes", "the weight buffer needs at least one byte (got 0)");
        }
        if self.ddr_reserve > 64 {
            return err("ddr_reserve", format!("at most 64 reserved slots (got {})", self.ddr_reserve));
        }
        if self.act_bytes == 0 || self.act_bytes > 4 {
            return err("act_bytes", format!("1..=4 bytes per element (got {})", self.act_bytes));
        }
        if self.out_bytes == 0 || self.out_bytes > 4 {
            return err("out_bytes", format!("1..=4 bytes per element (got {})", self.out_bytes));
        }
        if self.flit_bytes != 256 {
            return err("flit_bytes", format!("UCIe flits are 256 bytes (got {})", self.flit_bytes));
        }
        for (f, mhz) in [("ucie_mhz", self.ucie_mhz), ("ddr_mhz", self.ddr_mhz)] {
            if !(mhz.is_finite() && (1.0..=10_000.0).contains(&mhz)) {
                return err(f, format!("must be within 1..=10000 MHz (got {mhz})"));
            }
            let p = 1e6 / mhz;
            if (p - p.round()).abs() > 1e-6 {
                return err(f, format!("{mhz} MHz has a period of {p:.4} ps; choose a whole number of ps"));
            }
        }
        let (core, ucie) = (self.core_period_ps(), (1e6 / self.ucie_mhz).round() as u64);
        if core % ucie != 0 {
            return err("ucie_mhz", format!("the UCIe clock must be a multiple of the core clock ({} MHz)", self.core_mhz));
        }
        if self.ddr_phase_ps >= (1e6 / self.ddr_mhz).round() as u64 {
            return err("ddr_phase_ps", format!("the phase must be below the DDR period (got {} ps)", self.ddr_phase_ps));
        }
        if !(self.token_buffer_slack.is_finite() && self.token_buffer_slack > 0.0 && self.token_buffer_slack <= 1.0) {
            return err("token_buffer_slack", format!("a fraction in (0, 1] (got {})", self.token_buffer_slack));
        }
        if self.theta_min > 1 << 20 {
            return err("theta_min", format!("at most 2^20 tokens (got {})", self.theta_min));
        }
        if self.qos_slots < 2 || self.qos_slots > 1 << 16 {
            return err("qos_slots", format!("2..=65536 (got {})", self.qos_slots));
        }
        self.pe.validate().map_err(|e| e.under("pe"))?;
        self.ddr.validate().map_err(|e| e.under("ddr"))?;
        self.ucie.validate().map_err(|e| e.under("ucie"))?;
        self.router.validate().map_err(|e| e.under("router"))?;
        if self.sim.threads == 0 || self.sim.threads > 64 {
            return err("sim.threads", format!("1..=64 (got {})", self.sim.threads));
        }
        if self.sim.batch_jobs > 64 {
            return err("sim.batch_jobs", format!("0 (all cores) or 1..=64 (got {})", self.sim.batch_jobs));
        }
        if self.sim.watchdog_cycles == 0 {
            return err("sim.watchdog_cycles", "0 would never end a stuck run; give a cycle count");
        }
        if self.sim.max_cycles == 0 || self.sim.max_cycles > 1 << 50 {
            return err("sim.max_cycles", format!("1..=2^50 (got {})", self.sim.max_cycles));
        }
        self.timing().map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The adapters' mid-cycle edge runs ahead only where it is the one tick between two
    /// core edges (hand-checked clock plans).
    #[test]
    fn ucie_runs_ahead_only_with_one_tick_between_core_edges() {
        let runs = |f: &dyn Fn(&mut PkgCfg)| {
            let mut c = PkgCfg::default();
            f(&mut c);
            c.timing().unwrap().ucie_runs_ahead()
        };
        // 800 / 1600 / 800 MHz, DDR at 625 ps: ticks of 625 ps, DDR on the UCIe mid edges.
        assert!(runs(&|_| {}));
        // DDR in phase with the core: still nothing else between.
        assert!(runs(&|c| c.ddr_phase_ps = 0));
        // A DDR edge 300 ps after a core edge comes before the UCIe edge at 625 ps.
        assert!(!runs(&|c| c.ddr_phase_ps = 300));
        // UCIe at three times the core clock: two UCIe edges between core edges.
        assert!(!runs(&|c| c.ucie_mhz = 2400.0));
        // UCIe at the core clock: no edge between.
        assert!(!runs(&|c| c.ucie_mhz = 800.0));
    }

    #[test]
    fn impossible_values_name_their_field() {
        let bad = |f: &dyn Fn(&mut PkgCfg), field: &str| {
            let mut c = PkgCfg::default();
            f(&mut c);
            let e = c.validate().unwrap_err();
            assert_eq!(e.field, field, "{e}");
        };
        bad(&|c| c.rows = 0, "rows");
        bad(&|c| c.cols = 0, "cols");
        bad(&|c| c.micro_slices = 0, "micro_slices");
        bad(&|c| c.ring_slots = 1, "ring_slots");
        bad(&|c| c.core_mhz = 3.0, "core_mhz");
        bad(&|c| c.core_mhz = f64::NAN, "core_mhz");
        bad(&|c| { c.rows = 5; c.cols = 5 }, "rows");
        assert!(PkgCfg::default().validate().is_ok());
        assert_eq!(PkgCfg::default().validate_for(4).unwrap_err().field, "micro_slices");
    }

    #[test]
    fn strategies_parse_and_name() {
        for s in Strategy::ALL {
            assert_eq!(Strategy::parse(s.name()).unwrap(), s);
        }
        assert!(Strategy::parse("xx").unwrap_err().to_string().contains("a5"));
    }
}
