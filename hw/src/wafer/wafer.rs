//! The wafer system: a `cols`×`rows` mesh of dies (one or several wafers side by side), each
//! die a router of `noc` (the same `RouterCl` as the NoC and the package, with wide flits)
//! plus the die's sequencer, compute engine and collective engine (`die.rs`). Dies on
//! different wafers meet over cross-wafer links with their own latency and serialization.
//!
//! Stepped by the harness engine in row-band partitions (serial or parallel, bit-identical),
//! under the multi-clock control with one clock: idle stretches — every die computing, no
//! flit anywhere — are skipped (fast-forward) to the next kernel end.

use sched::noc::Dir;

use super::config::WaferCfg;
use super::die::{DieCl, DieTimes};
use super::functional::PayloadStore;
use super::program::{LayerProgram, Phase};
use crate::cfg::CfgError;
use crate::harness::{run_partitions, ClockDomain, ClockSet, ClockedControl, Cycle, LinkArena, PartStatus, Partition, C_FINISHED, NEVER};
use crate::noc::flit::{Credit, Flit, N_CLASSES};
use crate::noc::mesh::{neighbour_in, wire};
use crate::noc::router::{RouterCl, NPORTS};

pub struct WaferTile {
    pub router: RouterCl,
    pub die: DieCl,
    last_send: Cycle,
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
            done &= t.die.done();
        }
        st.counters[C_FINISHED] = done as u64;
        st
    }
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct WaferRun {
    /// Cycle the last die finished + 1.
    pub layer_cycles: u64,
    /// Cycles evaluated (not skipped by fast-forward).
    pub evaluated: u64,
    pub times: Vec<DieTimes>,
    /// Flits per link (from die, direction 0..4 as `Dir`) and traffic class.
    pub link_flits: Vec<[[u64; N_CLASSES]; NPORTS]>,
    pub tx_flits: u64,
    pub flit_hops: u64,
    /// Busy cycles per kernel kind, summed over dies.
    pub kernel_busy: [u64; 3],
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
    /// Span of a kernel kind over the wafer.
    pub fn kernel_cycles(&self, k: usize) -> u64 {
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
        let (cols, rows) = (cfg.cols(), cfg.rows());
        let n = (cols * rows) as usize;
        let r = &cfg.router;
        let on_wafer = (cfg.link_cycles(), cfg.link_ser());
        let wafer_of = |i: u32| (i % cols / cfg.die_cols, i / cols / cfg.die_rows);
        let link = |i: u32, d: Dir| -> (u32, u32) {
            match neighbour_in(i, d, cols, rows) {
                Some(nb) if wafer_of(nb) != wafer_of(i) => (cfg.border_cycles(), cfg.border_ser(matches!(d, Dir::XPlus | Dir::XMinus))),
                _ => on_wafer,
            }
        };
        let w = wire(cols, rows, r.st_delay, r.credit_delay, &link);
        let max_lat = w.max_lat;
        let mut tiles = Vec::with_capacity(n);
        for (i, (ports, np)) in w.routers.into_iter().zip(w.nis).enumerate() {
            let i = i as u32;
            let mut router = RouterCl::new(i, cols, r, on_wafer.1, ports);
            for d in [Dir::XPlus, Dir::XMinus, Dir::YPlus, Dir::YMinus] {
                if neighbour_in(i, d, cols, rows).is_some() {
                    router.set_port_ser(d.idx(), link(i, d).1);
                }
            }
            let mut die = DieCl::new(i, prog, np, cols, r.vcs, r.vc_buf, cfg.packet_flits);
            if let Some(p) = &shared {
                die.set_functional(p.clone());
            }
            die.begin(0);
            tiles.push(WaferTile { router, die, last_send: NEVER });
        }
        // Row bands.
        let threads = threads.clamp(1, n);
        let mut parts = Vec::with_capacity(threads);
        let mut it = tiles.into_iter();
        let mut first = 0;
        for p in 0..threads {
            let take = (n - first) / (threads - p);
            parts.push(WaferPart { tiles: it.by_ref().take(take).collect(), max_lat });
            first += take;
        }
        let payloads = functional.then(|| PayloadStore::new(prog.xfers.len()));
        Ok(Wafer { cfg: cfg.clone(), parts, wires: WaferWires { flits: w.flits, credits: w.credits, payloads } })
    }

    pub fn tiles(&self) -> impl Iterator<Item = &WaferTile> {
        self.parts.iter().flat_map(|p| p.tiles.iter())
    }

    /// Runs the layer to its end.
    pub fn run(&mut self, threads: usize, fast_forward: bool, max_cycles: u64, watchdog: u64) -> Result<WaferRun, WaferError> {
        let period_ps = (1e6 / self.cfg.clock_mhz).round().max(1.0) as u64;
        let clocks = ClockSet::new(vec![ClockDomain::new("core", period_ps)]).expect("one clock");
        let ctl = ClockedControl::new(clocks, max_cycles, self.parts.len(), fast_forward, watchdog);
        let (end, ctl) = run_partitions(&mut self.parts, &self.wires, &(), 0, ctl, threads);
        if ctl.tripped {
            let dies: Vec<String> = self.tiles().filter(|t| !t.die.done()).take(8).map(|t| t.scope(&self.cfg)).collect();
            return Err(WaferError::Watchdog { cycle: end, stalled: watchdog, dies: dies.join(", ") });
        }
        if !ctl.finished {
            return Err(WaferError::Timeout(max_cycles));
        }
        let times: Vec<DieTimes> = self.tiles().map(|t| t.die.times.clone()).collect();
        let layer_cycles = times.iter().map(|t| t.done_at).max().unwrap_or(0) + 1;
        let mut kernel_busy = [0u64; 3];
        for t in self.tiles() {
            for (a, b) in kernel_busy.iter_mut().zip(t.die.compute.busy) {
                *a += b;
            }
        }
        let link_flits: Vec<_> = self.tiles().map(|t| t.router.out_class_flits).collect();
        let flit_hops = link_flits.iter().map(|l| l[..4].iter().flatten().sum::<u64>()).sum();
        Ok(WaferRun {
            layer_cycles,
            evaluated: ctl.evaluated,
            times,
            tx_flits: self.tiles().map(|t| t.die.dma.stats.tx_flits).sum(),
            flit_hops,
            link_flits,
            kernel_busy,
        })
    }
}
