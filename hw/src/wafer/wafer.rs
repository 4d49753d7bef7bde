//! The wafer system: a `cols`×`rows` mesh of dies (one or several wafers side by side), each
//! die a router of `noc` (the same `RouterCl` as the NoC and the package, with wide flits)
//! plus the die's sequencer, compute engine and collective engine (`die.rs`). Dies on
//! different wafers meet over cross-wafer links with their own latency and serialization.
//!
//! Stepped by the harness engine in row-band partitions (serial or parallel, bit-identical),
//! under the multi-clock control with one clock: idle stretches — every die computing, no
//! flit anywhere — are skipped (fast-forward) to the next kernel end.
//!
//! Logs (`tracing`, target `hw::wafer::wafer`): each run is an info span `wafer_run`
//! (mapping, dies, tokens per TP group, micro-batches) with an info event at its start
//! (threads, fast-forward, cycle limit) and at its end (layer and end cycles, cycles
//! evaluated, flits); the dies log their phase boundaries inside it at debug (`die.rs`).

use sched::noc::Dir;

use super::config::WaferCfg;
use super::die::{DieCl, DieTimes, MapRegs};
use super::payload::PayloadStore;
use super::compute::{KernelBusy, KernelKind};
use super::migration::{MigGate, MigrationEngineCl, MigrationPlan};
use super::program::{LayerProgram, Phase};
use crate::cfg::CfgError;
use crate::harness::{
    run_partitions, ChangeLog, ClockDomain, ClockSet, ClockedControl, Cycle, LinkArena, PartStatus, Partition, Probe, SignalDecl, SignalSink, C_FINISHED, NEVER,
};
use crate::noc::flit::{Credit, Flit, N_CLASSES};
use crate::noc::mesh::{neighbour_in, wire};
use crate::noc::router::{RouterCl, NPORTS};

pub struct WaferTile {
    pub router: RouterCl,
    pub die: DieCl,
    last_send: Cycle,
    /// Per mesh output (`Dir` index): bit p set when the mapping says the link leaving here
    /// carries no traffic of phase p (all-to-all phases on links between disjoint FTDs);
    /// traced as `map.link_X.idle`, checked against `link_X.class` by the waveform checker.
    pub idle_mask: [u8; 4],
    /// Per mesh output: bit p set when the mapping says the link is *cold* in phase p (carries
    /// less than the phase's hot links, or nothing): under disjoint FTDs, intra-FTD links in
    /// the all-reduce and inter-FTD links in the all-to-all (SPEC §4 "Hot/cold links"); every
    /// link in every phase during an invasive migration stall (no regular traffic). Traced as
    /// `map.link_X.cold`; migration flits may only use links cold in their step's phase
    /// (checker `links_cold_for_migration`).
    pub cold_mask: [u8; 4],
}

const LINK_DIRS: [Dir; 4] = [Dir::XPlus, Dir::XMinus, Dir::YPlus, Dir::YMinus];

impl WaferTile {
    fn declare(&self, scope: &[String], out: &mut Vec<SignalDecl>) {
        let mut rs = scope.to_vec();
        rs.push("router".into());
        self.router.declare(&rs, out);
        self.die.declare(scope, out);
        for d in LINK_DIRS {
            if self.router.ports.out_flit[d.idx()].is_none() {
                continue;
            }
            let mut sc = scope.to_vec();
            sc.push(format!("link_{}", d.short()));
            out.push(SignalDecl { scope: sc, name: "class".into(), width: 3 });
            let mut sc = scope.to_vec();
            sc.push("map".into());
            sc.push(format!("link_{}", d.short()));
            out.push(SignalDecl { scope: sc.clone(), name: "idle".into(), width: 4 });
            out.push(SignalDecl { scope: sc, name: "cold".into(), width: 3 });
        }
    }

    fn sample(&self, out: &mut Vec<u64>) {
        self.router.sample(out);
        self.die.sample(out);
        for d in LINK_DIRS {
            if self.router.ports.out_flit[d.idx()].is_none() {
                continue;
            }
            out.push(self.router.out_class[d.idx()] as u64);
            out.push(self.idle_mask[d.idx()] as u64);
            out.push(self.cold_mask[d.idx()] as u64);
        }
    }
}

impl WaferTile {
    /// Hierarchical scope: `top.wafer.w_I_J.d_R_C` (wafer row/column, die row/column on it).
    pub fn scope(&self, cfg: &WaferCfg) -> String {
        let c = self.router.coord;
        format!("top.wafer.w_{}_{}.d_{}_{}", c.y / cfg.die_rows, c.x / cfg.die_cols, c.y % cfg.die_rows, c.x % cfg.die_cols)
    }
}

pub struct WaferPart {
    pub tiles: Vec<WaferTile>,
    max_lat: u64,
    log: Option<ChangeLog>,
    /// A migration plan is loaded: `Some(stall)`; the run then ends when the layer is done
    /// and the network has drained (and, in a stall, every migration transfer arrived).
    mig: Option<bool>,
}

pub struct WaferWires {
    pub flits: LinkArena<Flit>,
    pub credits: LinkArena<Credit>,
    /// Functional mode: the transfers' payloads.
    pub payloads: Option<PayloadStore>,
}

impl Partition for WaferPart {
    type Shared = WaferWires;
    type Ctx = ();

    fn eval(&mut self, now: Cycle, w: &WaferWires, _: &()) -> PartStatus {
        let mut st = PartStatus::default();
        let mut done = true;
        for t in self.tiles.iter_mut() {
            // SAFETY: the engine evaluates every partition for `now` with a barrier between
            // cycles; `wire` made each router and die the sole sender/receiver of its links.
            let (m1, s1) = unsafe { t.router.eval(now, &w.flits, &w.credits) };
            let (m2, s2) = unsafe { t.die.eval(now, &w.flits, &w.credits, w.payloads.as_ref()) };
            if s1 || s2 {
                t.last_send = now;
            }
            st.progress += m1 + m2;
            st.busy |= t.router.occupancy() > 0 || t.die.busy() || (t.last_send != NEVER && now < t.last_send + self.max_lat);
            st.next_event = st.next_event.min(t.die.next_event());
            if now & 1023 == 0 && t.router.occupancy() > 0 {
                st.oldest_wait = st.oldest_wait.min(t.router.oldest_front());
            }
            done &= match self.mig {
                None => t.die.done(),
                Some(stall) => t.die.quiet(stall) && t.router.occupancy() == 0 && (t.last_send == NEVER || now >= t.last_send + self.max_lat),
            };
        }
        st.counters[C_FINISHED] = done as u64;
        if let Some(log) = self.log.as_mut() {
            if log.active(now) {
                let buf = log.begin();
                for t in &self.tiles {
                    t.sample(buf);
                }
                log.commit(now);
            }
        }
        st
    }
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct WaferRun {
    /// Cycle the last die finished + 1.
    pub layer_cycles: u64,
    /// Cycle the run ended + 1 (with migration: the network drained; an invasive migration
    /// stall's length).
    pub end_cycle: u64,
    /// Migration flits injected.
    pub mig_flits: u64,
    /// Cycles evaluated (not skipped by fast-forward).
    pub evaluated: u64,
    pub times: Vec<DieTimes>,
    /// Flits per link (from die, direction 0..4 as `Dir`) and traffic class.
    pub link_flits: Vec<[[u64; N_CLASSES]; NPORTS]>,
    pub tx_flits: u64,
    pub flit_hops: u64,
    /// Busy cycles per kernel kind, summed over dies.
    pub kernel_busy: KernelBusy,
    /// Busy cycles per kernel kind of each die.
    pub die_busy: Vec<KernelBusy>,
}

impl WaferRun {
    /// Communication latency of a phase: per micro-batch, from the first transfer of the
    /// phase started anywhere to the last one finished anywhere, summed over micro-batches
    /// (the time the phase's traffic is in the network, whatever the compute around it).
    pub fn phase_cycles(&self, p: Phase) -> u64 {
        let i = p as usize;
        let mbs = self.times.first().map_or(0, |t| t.phase_first.len());
        (0..mbs)
            .map(|m| {
                let first = self.times.iter().map(|t| t.phase_first[m][i]).min().unwrap_or(NEVER);
                let last = self.times.iter().map(|t| t.phase_last[m][i]).max().unwrap_or(0);
                if first == NEVER {
                    0
                } else {
                    last.saturating_sub(first) + 1
                }
            })
            .sum()
    }
    /// Mean network latency of the layer's transfers: from the transfer handed to its
    /// sender's collective engine to its last flit received, averaged over every transfer
    /// (migration is not a transfer of the layer). 0 when there are none.
    pub fn mean_xfer_latency(&self) -> f64 {
        let start: std::collections::HashMap<u32, Cycle> = self.times.iter().flat_map(|t| t.tx_start.iter().copied()).collect();
        let (mut sum, mut n) = (0u64, 0u64);
        for &(x, t) in self.times.iter().flat_map(|t| t.rx_done.iter()) {
            if let Some(&s) = start.get(&x) {
                sum += t + 1 - s;
                n += 1;
            }
        }
        if n == 0 {
            0.0
        } else {
            sum as f64 / n as f64
        }
    }

    /// Span of a kernel kind over the wafer.
    pub fn kernel_cycles(&self, k: KernelKind) -> u64 {
        let k = k.idx();
        let first = self.times.iter().map(|t| t.kernel_first[k]).min().unwrap_or(NEVER);
        let last = self.times.iter().map(|t| t.kernel_last[k]).max().unwrap_or(0);
        if first == NEVER {
            0
        } else {
            last.saturating_sub(first) + 1
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WaferError {
    #[error(transparent)]
    Cfg(#[from] CfgError),
    #[error("watchdog: no forward progress for {stalled} cycles at cycle {cycle}; dies not done: {dies}")]
    Watchdog { cycle: u64, stalled: u64, dies: String },
    #[error("the layer did not finish within {0} cycles")]
    Timeout(u64),
    #[error("waveform: {0}")]
    Wave(String),
    /// A controller between the layers (the balancer's trigger or decision unit, an RTL
    /// stand-in) refused its input or stopped; the text names the block and the cause.
    #[error("{0}")]
    Unit(String),
}

pub struct Wafer {
    pub cfg: WaferCfg,
    pub parts: Vec<WaferPart>,
    wires: WaferWires,
}

impl Wafer {
    /// Builds the wafer for one layer program (the config is validated first).
    pub fn new(cfg: &WaferCfg, prog: &LayerProgram, threads: usize) -> Result<Wafer, WaferError> {
        Self::new_with(cfg, prog, threads, false)
    }

    /// `functional`: the dies compute on real values, checked afterwards by
    /// [`super::functional::check`].
    pub fn new_with(cfg: &WaferCfg, prog: &LayerProgram, threads: usize, functional: bool) -> Result<Wafer, WaferError> {
        let shared = functional.then(|| std::sync::Arc::new(prog.clone()));
        cfg.validate()?;
        if let Some(e) = &prog.size_error {
            return Err(e.clone().into());
        }
        let (cols, rows) = (cfg.cols(), cfg.rows());
        let n = (cols * rows) as usize;
        // With a migration VC the routers (and the dies' injection credits) have one VC more.
        let rcfg = crate::noc::RouterCfg { vcs: cfg.router.vcs + cfg.migration_vc as u32, ..cfg.router.clone() };
        let r = &rcfg;
        let on_wafer = (cfg.link_cycles(), cfg.link_ser());
        let geom = cfg.geom();
        let link = |i: u32, d: Dir| -> (u32, u32) {
            match neighbour_in(i, d, cols, rows) {
                Some(nb) if geom.crosses_wafer(i, nb) => (cfg.border_cycles(), cfg.border_ser(matches!(d, Dir::XPlus | Dir::XMinus))),
                _ => on_wafer,
            }
        };
        let w = wire(cols, rows, r.st_delay, r.credit_delay, &link);
        let max_lat = w.max_lat;
        let mut tiles = Vec::with_capacity(n);
        for (i, (ports, np)) in w.routers.into_iter().zip(w.nis).enumerate() {
            let i = i as u32;
            let mut router = RouterCl::new(i, cols, r, on_wafer.1, ports);
            if cfg.migration_vc {
                // The migration stream: its own (last) VC, and every output yields to regular
                // traffic (docs/balance.md "Non-invasive by construction").
                router.low_class = super::migration::CLASS_MIG_LOCAL;
                router.low_idle = cfg.migration_idle_cycles as u64;
            }
            for d in [Dir::XPlus, Dir::XMinus, Dir::YPlus, Dir::YMinus] {
                if neighbour_in(i, d, cols, rows).is_some() {
                    router.set_port_ser(d.idx(), link(i, d).1);
                }
            }
            let mut die = DieCl::new(i, prog, np, cols, r.vcs, r.vc_buf, cfg.packet_flits);
            die.dma.mig_vc = cfg.migration_vc.then(|| r.vcs as u8 - 1);
            let mut cold_mask = [0u8; 4];
            if let Some(m) = &prog.mapping {
                die.map_regs = MapRegs { group: m.group_of[i as usize], rank: m.rank_of[i as usize], ftd: m.ftd_of[i as usize] };
                // Disjoint FTDs: intra-FTD links are cold in the all-reduce; with all-gather every
                // fetch stays inside its FTD, so links between FTDs are idle (hence cold) in
                // dispatch and combine.
                if m.ftds_disjoint() {
                    for d in LINK_DIRS {
                        if let Some(nb) = neighbour_in(i, d, cols, rows) {
                            let intra = m.ftd_of[i as usize] == m.ftd_of[nb as usize];
                            cold_mask[d.idx()] = if intra {
                                1 << Phase::AllReduce as u8
                            } else if m.all_gather {
                                1 << Phase::Dispatch as u8 | 1 << Phase::Combine as u8
                            } else {
                                0
                            };
                        }
                    }
                }
            }
            // The idle links are the all-to-all's cold ones (no cold link of the all-reduce is
            // idle: it carries half the ring's load).
            let idle_mask = cold_mask.map(|c| c & (1 << Phase::Dispatch as u8 | 1 << Phase::Combine as u8));
            if let Some(p) = &shared {
                die.set_functional(p.clone());
            }
            die.begin(0);
            tiles.push(WaferTile { router, die, last_send: NEVER, idle_mask, cold_mask });
        }
        // Row bands.
        let threads = threads.clamp(1, n);
        let mut parts = Vec::with_capacity(threads);
        let mut it = tiles.into_iter();
        let mut first = 0;
        for p in 0..threads {
            let take = (n - first) / (threads - p);
            parts.push(WaferPart { tiles: it.by_ref().take(take).collect(), max_lat, log: None, mig: None });
            first += take;
        }
        let payloads = functional.then(|| PayloadStore::new(prog.xfers.len()));
        Ok(Wafer { cfg: cfg.clone(), parts, wires: WaferWires { flits: w.flits, credits: w.credits, payloads } })
    }

    /// Loads every die's share of a migration plan (`gate`: non-invasive windows, or an
    /// invasive stall — then every link is cold in every phase, nothing else runs).
    pub fn load_migration(&mut self, plan: &MigrationPlan, gate: MigGate) {
        for p in self.parts.iter_mut() {
            p.mig = Some(gate == MigGate::Always);
            for t in p.tiles.iter_mut() {
                t.die.mig = MigrationEngineCl::load(t.die.id, plan, gate);
                if gate == MigGate::Always {
                    t.cold_mask = [0b111; 4];
                }
            }
        }
    }

    /// Writes what the migration engines received back into the plan (after a run).
    pub fn migration_delivered(&self, plan: &mut MigrationPlan) {
        for t in self.tiles() {
            for (id, got) in t.die.mig.received() {
                let d = &mut plan.delivered[id as usize];
                *d = (*d).max(got);
            }
        }
    }

    pub fn tiles(&self) -> impl Iterator<Item = &WaferTile> {
        self.parts.iter().flat_map(|p| p.tiles.iter())
    }

    /// Every traceable signal, in global id order (dies in id order): per die
    /// `top.wafer.w_I_J.d_R_C.{router.*, dma.*, compute.*, map.*, link_X.class, map.link_X.idle}`.
    pub fn signals(&self) -> Vec<SignalDecl> {
        let mut out = Vec::new();
        for t in self.tiles() {
            let scope: Vec<String> = t.scope(&self.cfg).split('.').map(String::from).collect();
            t.declare(&scope, &mut out);
        }
        out
    }

    /// Records what `sink` writes (its window and filter) from the next evaluated cycle.
    pub fn enable_trace_for(&mut self, sink: &dyn SignalSink) {
        let mut base = 0;
        let mut decl = Vec::new();
        for p in self.parts.iter_mut() {
            decl.clear();
            for t in &p.tiles {
                t.declare(&[], &mut decl);
            }
            p.log = Some(ChangeLog::for_sink(base, decl.len(), sink));
            base += decl.len();
        }
    }

    fn drain_trace(&mut self, sink: &mut dyn SignalSink, last: bool) -> Result<(), WaferError> {
        if last {
            for l in self.parts.iter_mut().filter_map(|p| p.log.as_mut()) {
                l.flush_pre();
            }
        }
        let mut logs: Vec<&mut ChangeLog> = self.parts.iter_mut().filter_map(|p| p.log.as_mut()).collect();
        ChangeLog::drain_merged(&mut logs, sink).map_err(|e| WaferError::Wave(e.to_string()))
    }

    /// Runs the layer to its end. With `sink`, value changes are drained into it every 2^16
    /// cycles (trace memory stays bounded).
    pub fn run(&mut self, threads: usize, fast_forward: bool, max_cycles: u64, watchdog: u64) -> Result<WaferRun, WaferError> {
        self.run_traced(threads, fast_forward, max_cycles, watchdog, None)
    }

    pub fn run_traced(&mut self, threads: usize, fast_forward: bool, max_cycles: u64, watchdog: u64, mut sink: Option<&mut dyn SignalSink>) -> Result<WaferRun, WaferError> {
        let span = tracing::info_span!("wafer_run", mapping = self.cfg.mapping.name(), dies = self.cfg.dies(), tokens_per_group = self.cfg.tokens_per_group, micro_batches = self.cfg.micro_batches);
        let _in_run = span.enter();
        tracing::info!(threads, fast_forward, max_cycles, watchdog, waves = sink.is_some(), "wafer run start");
        if let Some(s) = sink.as_deref() {
            self.enable_trace_for(s);
        }
        let period_ps = (1e6 / self.cfg.clock_mhz).round().max(1.0) as u64;
        let clocks = ClockSet::new(vec![ClockDomain::new("core", period_ps)]).expect("one clock");
        let mut ctl = ClockedControl::new(clocks, 0, self.parts.len(), fast_forward, watchdog);
        let mut now: Cycle = 0;
        let chunk = if sink.is_some() { 1u64 << 16 } else { max_cycles };
        let (end, ctl) = loop {
            ctl.end = now.saturating_add(chunk).min(max_cycles);
            let (last, c) = run_partitions(&mut self.parts, &self.wires, &(), now, ctl, threads);
            ctl = c;
            now = last + 1;
            let stop = ctl.tripped || ctl.finished || last >= max_cycles;
            if let Some(s) = sink.as_deref_mut() {
                self.drain_trace(s, stop)?;
            }
            if stop {
                break (last, ctl);
            }
        };
        if ctl.tripped {
            tracing::info!(cycle = end, stalled = watchdog, "wafer run stopped by the watchdog");
            let dies: Vec<String> = self.tiles().filter(|t| !t.die.done()).take(8).map(|t| t.scope(&self.cfg)).collect();
            return Err(WaferError::Watchdog { cycle: end, stalled: watchdog, dies: dies.join(", ") });
        }
        if !ctl.finished {
            tracing::info!(max_cycles, "wafer run timed out");
            return Err(WaferError::Timeout(max_cycles));
        }
        let end_cycle = end + 1;
        let times: Vec<DieTimes> = self.tiles().map(|t| t.die.times.clone()).collect();
        let layer_cycles = times.iter().map(|t| t.done_at).max().unwrap_or(0) + 1;
        let mut kernel_busy = KernelBusy::default();
        for t in self.tiles() {
            kernel_busy += t.die.compute.busy;
        }
        let link_flits: Vec<_> = self.tiles().map(|t| t.router.out_class_flits).collect();
        // Regular traffic's flit-hops (migration classes are counted apart).
        let flit_hops: u64 = link_flits.iter().map(|l| l[..4].iter().map(|c| c[..3].iter().sum::<u64>()).sum::<u64>()).sum();
        let tx_flits: u64 = self.tiles().map(|t| t.die.dma.stats.tx_flits).sum();
        let mig_flits: u64 = self.tiles().map(|t| t.die.mig.tx_flits).sum();
        tracing::info!(layer_cycles, end_cycle, evaluated = ctl.evaluated, tx_flits, flit_hops, mig_flits, "wafer run end");
        Ok(WaferRun {
            layer_cycles,
            end_cycle,
            mig_flits,
            evaluated: ctl.evaluated,
            times,
            tx_flits,
            flit_hops,
            link_flits,
            kernel_busy,
            die_busy: self.tiles().map(|t| t.die.compute.busy).collect(),
        })
    }
}
