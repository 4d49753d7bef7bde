//! The k×k mesh: tiles (router + network interface) connected by links, stepped by the
//! harness engine in row-band partitions.
//!
//! Link numbering: tile i owns flit links `6i + p` (router output port p, p = 4 is the
//! ejection channel to its NI) and `6i + 5` (the NI's injection channel), and credit links
//! `6i + p` (credits from router input port p back upstream; p = 4 goes to the NI) and
//! `6i + 5` (the NI's ejection credits). Latencies follow BookSim's channel semantics — a flit
//! written to a latency-L channel in cycle t is processed in cycle t + L + 1 — so a
//! router-to-router link of `link_latency` L is a harness `Link` of latency L + 1, and
//! injection/ejection channels (latency 1) are harness links of latency 2. Credit links add
//! `credit_delay` where a router consumes them.

use sched::noc::{Coord, Dir};

use super::config::{CfgError, NocCfg};
use super::flit::{Credit, Flit};
use super::router::{RouterCl, RouterPorts, RouterStats, NO_LINK, NPORTS};
use super::terminal::{NiCtx, NiPorts, NiStats, TerminalCl};
use crate::harness::{
    run_partitions, ChangeLog, Control, Cycle, Link, PartStatus, Partition, Probe, SignalDecl, SignalSink, Step, Watchdog,
    WatchdogReport, NEVER,
};

/// Status counters reported by mesh partitions.
pub const C_MEASURED_GEN: usize = 0;
pub const C_MEASURED_RET: usize = 1;
pub const C_GEN_FLITS: usize = 2;
pub const C_RET_FLITS: usize = 3;

pub struct Tile {
    pub router: RouterCl,
    pub ni: TerminalCl,
    /// Last cycle anything was sent on one of this tile's links.
    last_send: Cycle,
}

impl Tile {
    pub fn scope(&self) -> String {
        format!("top.mesh.r_{}_{}", self.router.coord.y, self.router.coord.x)
    }
}

/// A band of consecutive tiles evaluated together.
pub struct MeshPart {
    pub first: usize,
    pub tiles: Vec<Tile>,
    log: Option<ChangeLog>,
    /// Longest link latency: a tile that sent something within this many cycles is busy.
    max_lat: u64,
}

/// All links of the mesh (shared by partitions under the link protocol).
pub struct MeshWires {
    pub flits: Vec<Link<Flit>>,
    pub credits: Vec<Link<Credit>>,
}

impl Partition for MeshPart {
    type Shared = MeshWires;
    type Ctx = NiCtx;

    fn eval(&mut self, now: Cycle, w: &MeshWires, ctx: &NiCtx) -> PartStatus {
        let mut st = PartStatus::default();
        for t in self.tiles.iter_mut() {
            // SAFETY: the engine calls eval for cycle `now` on every partition, with a barrier
            // between cycles; the mesh builder made each tile the sole sender/receiver of its
            // links.
            let (m1, s1) = unsafe { t.router.eval(now, &w.flits, &w.credits) };
            let (m2, s2) = unsafe { t.ni.eval(now, &w.flits, &w.credits, ctx) };
            if s1 || s2 {
                t.last_send = now;
            }
            st.progress += m1 + m2;
            let busy = t.router.occupancy() > 0 || t.ni.has_packet() || (t.last_send != NEVER && now < t.last_send + self.max_lat);
            st.busy |= busy;
            st.next_event = st.next_event.min(t.ni.next_event());
            // The per-buffer stall check runs every 1024 cycles: a stuck flit is reported at
            // most 1023 cycles late, and the hot path stays free of it. (Fast-forward only
            // skips cycles with no flit anywhere, when nothing can be stuck.)
            if now & 1023 == 0 && t.router.occupancy() > 0 {
                st.oldest_wait = st.oldest_wait.min(t.router.oldest_front());
            }
            let s = &t.ni.stats;
            st.counters[C_MEASURED_GEN] += s.measured_gen;
            st.counters[C_MEASURED_RET] += s.measured_ret;
            st.counters[C_GEN_FLITS] += s.gen_flits;
            st.counters[C_RET_FLITS] += s.ret_flits;
        }
        if let Some(log) = self.log.as_mut() {
            let buf = log.begin();
            for t in &self.tiles {
                t.router.sample(buf);
                t.ni.sample(buf);
            }
            log.commit(now);
        }
        st
    }
}

/// Run policy of the mesh: end cycle, drain stop, fast-forward, watchdog.
#[derive(Debug, Clone)]
pub struct MeshControl {
    /// Last cycle to evaluate (inclusive).
    pub end: Cycle,
    pub stop_when_drained: bool,
    pub fast_forward: bool,
    pub watchdog: Watchdog,
    pub tripped: bool,
    pub drained: bool,
    /// Cycles actually evaluated (differs with fast-forward; not part of results).
    pub evaluated: u64,
}

impl Control for MeshControl {
    fn decide(&mut self, now: Cycle, st: &PartStatus) -> Step {
        self.evaluated += 1;
        if self.watchdog.observe(now, st.busy, st.progress, st.oldest_wait) {
            self.tripped = true;
            return Step::Stop;
        }
        if self.stop_when_drained && st.counters[C_MEASURED_GEN] == st.counters[C_MEASURED_RET] {
            self.drained = true;
            return Step::Stop;
        }
        if now >= self.end {
            return Step::Stop;
        }
        if self.fast_forward && !st.busy {
            let t = st.next_event.min(self.end).max(now + 1);
            return Step::Next(t);
        }
        Step::Next(now + 1)
    }
}

/// Why a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunEnd {
    /// Reached the end cycle.
    Done,
    /// All measured packets delivered.
    Drained,
}

#[derive(Debug, thiserror::Error)]
pub enum NocError {
    #[error(transparent)]
    Cfg(#[from] CfgError),
    #[error("{0}")]
    Watchdog(Box<WatchdogReport>),
    #[error("waveform: {0}")]
    Wave(String),
}

pub struct Mesh {
    pub cfg: NocCfg,
    pub parts: Vec<MeshPart>,
    pub wires: MeshWires,
    /// Next cycle to evaluate.
    now: Cycle,
    watchdog_limit: u64,
    /// Cycles evaluated (not skipped) so far.
    pub evaluated: u64,
}

impl Mesh {
    /// Builds the mesh; the config is validated first.
    pub fn new(cfg: &NocCfg) -> Result<Mesh, CfgError> {
        cfg.validate()?;
        let k = cfg.mesh.k;
        let n = (k * k) as usize;
        let r = &cfg.mesh.router;
        let l = cfg.mesh.link_latency;
        let cd = r.credit_delay;
        let mut flits = Vec::with_capacity(6 * n);
        let mut credits = Vec::with_capacity(6 * n);
        for _ in 0..n {
            for p in 0..NPORTS {
                flits.push(Link::new(if p == Dir::Local.idx() { 2 } else { l + 1 }));
                // Credits from input port p: to the NI (no credit_delay there) or upstream router.
                credits.push(Link::new(if p == Dir::Local.idx() { 2 } else { l + 1 + cd }));
            }
            flits.push(Link::new(2)); // NI injection channel
            credits.push(Link::new(2 + cd)); // NI ejection credits, consumed by the router
        }
        let max_lat = credits.iter().chain(std::iter::empty()).map(|c: &Link<Credit>| c.latency()).max().unwrap_or(1).max(l + 1) as u64;

        let neighbour = |i: u32, d: Dir| -> Option<u32> {
            let c = Coord::of(i, k);
            let (x, y) = (c.x as i64, c.y as i64);
            let (nx, ny) = match d {
                Dir::XPlus => (x + 1, y),
                Dir::XMinus => (x - 1, y),
                Dir::YPlus => (x, y + 1),
                Dir::YMinus => (x, y - 1),
                Dir::Local => return None,
            };
            (nx >= 0 && ny >= 0 && nx < k as i64 && ny < k as i64).then(|| Coord { x: nx as u32, y: ny as u32 }.id(k))
        };

        let mut tiles = Vec::with_capacity(n);
        for i in 0..n as u32 {
            let mut ports = RouterPorts {
                in_flit: [NO_LINK; NPORTS],
                out_flit: [NO_LINK; NPORTS],
                in_credit: [NO_LINK; NPORTS],
                out_credit: [NO_LINK; NPORTS],
            };
            for d in Dir::ALL {
                let p = d.idx();
                if d == Dir::Local {
                    ports.in_flit[p] = 6 * i + 5;
                    ports.out_flit[p] = 6 * i + 4;
                    ports.in_credit[p] = 6 * i + 5;
                    ports.out_credit[p] = 6 * i + 4;
                } else if let Some(nb) = neighbour(i, d) {
                    let q = d.opposite().idx() as u32;
                    ports.in_flit[p] = 6 * nb + q;
                    ports.out_flit[p] = 6 * i + p as u32;
                    ports.in_credit[p] = 6 * nb + q;
                    ports.out_credit[p] = 6 * i + p as u32;
                }
            }
            let router = RouterCl::new(i, k, r, ports);
            let ni = TerminalCl::new(
                i,
                k,
                r,
                &cfg.traffic,
                NiPorts { inj_flit: 6 * i + 5, inj_credit: 6 * i + 4, ej_flit: 6 * i + 4, ej_credit: 6 * i + 5 },
            );
            tiles.push(Tile { router, ni, last_send: NEVER });
        }
        // Row bands, one per thread.
        let threads = (cfg.sim.threads as usize).clamp(1, n);
        let mut parts = Vec::with_capacity(threads);
        let mut it = tiles.into_iter();
        let mut first = 0;
        for p in 0..threads {
            let take = (n - first) / (threads - p);
            let band: Vec<Tile> = it.by_ref().take(take).collect();
            parts.push(MeshPart { first, tiles: band, log: None, max_lat });
            first += take;
        }
        Ok(Mesh {
            cfg: cfg.clone(),
            parts,
            wires: MeshWires { flits, credits },
            now: 0,
            watchdog_limit: cfg.measure.watchdog_cycles,
            evaluated: 0,
        })
    }

    /// Next cycle to be evaluated (= cycles simulated so far).
    pub fn now(&self) -> Cycle {
        self.now
    }

    pub fn tiles(&self) -> impl Iterator<Item = &Tile> {
        self.parts.iter().flat_map(|p| p.tiles.iter())
    }

    pub fn tiles_mut(&mut self) -> impl Iterator<Item = &mut Tile> {
        self.parts.iter_mut().flat_map(|p| p.tiles.iter_mut())
    }

    pub fn tile_mut(&mut self, i: usize) -> &mut Tile {
        self.tiles_mut().nth(i).expect("tile index")
    }

    /// Evaluates cycles `now ..= end` (or until all measured packets are delivered when
    /// `stop_when_drained`). Stops with the watchdog's diagnostic if nothing moves for
    /// `measure.watchdog_cycles` while flits wait.
    pub fn run(&mut self, end: Cycle, ctx: &NiCtx, stop_when_drained: bool) -> Result<RunEnd, NocError> {
        if end < self.now {
            return Ok(RunEnd::Done);
        }
        let ctl = MeshControl {
            end,
            stop_when_drained,
            fast_forward: self.cfg.sim.fast_forward,
            watchdog: Watchdog::new(self.watchdog_limit),
            tripped: false,
            drained: false,
            evaluated: 0,
        };
        let threads = self.cfg.sim.threads as usize;
        let (last, ctl) = run_partitions(&mut self.parts, &self.wires, ctx, self.now, ctl, threads);
        self.now = last + 1;
        self.evaluated += ctl.evaluated;
        if ctl.tripped {
            return Err(NocError::Watchdog(Box::new(self.watchdog_report(last, ctl.watchdog.stalled_for()))));
        }
        Ok(if ctl.drained { RunEnd::Drained } else { RunEnd::Done })
    }

    fn watchdog_report(&self, cycle: Cycle, stalled_for: u64) -> WatchdogReport {
        let mut blocked = Vec::new();
        let mut waiting = Vec::new();
        for t in self.tiles() {
            t.router.blocked_report(&t.scope(), &mut blocked, &mut waiting);
        }
        // Longest-waiting first: the stuck buffers lead the diagnostic.
        blocked.sort_by_key(|(since, _)| *since);
        waiting.sort_by_key(|(since, _)| *since);
        let strip = |v: Vec<(Cycle, String)>| v.into_iter().map(|(_, s)| s).collect();
        WatchdogReport { cycle, stalled_for, blocked: strip(blocked), waiting: strip(waiting) }
    }

    /// Sums of the terminals' statistics.
    pub fn ni_totals(&self) -> NiStats {
        let mut s = NiStats::default();
        for t in self.tiles() {
            s.add(&t.ni.stats);
        }
        s
    }

    pub fn router_totals(&self) -> RouterStats {
        let mut s = RouterStats::default();
        for t in self.tiles() {
            s.add(&t.router.stats);
        }
        s
    }

    /// BookSim `_ClearStats`: latency and throughput windows restart.
    pub fn clear_stats(&mut self) {
        for t in self.tiles_mut() {
            t.ni.stats.clear_window();
        }
    }

    /// Flits generated and not yet delivered, and the sum of their creation cycles.
    pub fn in_flight(&self) -> (u64, u64) {
        let s = self.ni_totals();
        (s.gen_flits - s.ret_flits, s.gen_ctime_sum - s.ret_ctime_sum)
    }

    // ----- tracing

    /// All traceable signals, in global id order (tiles in node order).
    pub fn signals(&self) -> Vec<SignalDecl> {
        let mut out = Vec::new();
        for t in self.tiles() {
            let scope: Vec<String> = t.scope().split('.').map(String::from).collect();
            t.router.declare(&scope, &mut out);
            t.ni.declare(&scope, &mut out);
        }
        out
    }

    /// Starts recording value changes (from the next evaluated cycle).
    pub fn enable_trace(&mut self) {
        let mut base = 0;
        for p in self.parts.iter_mut() {
            let mut decl = Vec::new();
            for t in &p.tiles {
                t.router.declare(&[], &mut decl);
                t.ni.declare(&[], &mut decl);
            }
            p.log = Some(ChangeLog::new(base, decl.len()));
            base += decl.len();
        }
    }

    /// Moves recorded changes into `sink`, merged in (cycle, signal) order.
    pub fn drain_trace(&mut self, sink: &mut dyn SignalSink) -> Result<(), NocError> {
        let mut logs: Vec<&mut ChangeLog> = self.parts.iter_mut().filter_map(|p| p.log.as_mut()).collect();
        ChangeLog::drain_merged(&mut logs, sink).map_err(NocError::Wave)
    }

    // ----- invariants (tests)

    /// Credit conservation on every channel: for each sender-side VC counter,
    /// `credits + flits in the crossbar + flits on the link + downstream occupancy + credits
    /// returning == depth`, and `0 <= credits <= depth`. Call between runs.
    pub fn check_credits(&mut self) -> Result<(), String> {
        let now = self.now;
        let k = self.cfg.mesh.k;
        let v = self.cfg.mesh.router.vcs as usize;
        let depth = self.cfg.mesh.router.vc_buf as usize;
        let n = (k * k) as usize;
        let mut flits_on: Vec<Vec<usize>> = vec![vec![0; v]; 6 * n];
        let mut credits_on: Vec<Vec<usize>> = vec![vec![0; v]; 6 * n];
        for (i, l) in self.wires.flits.iter_mut().enumerate() {
            for (_, f) in l.pending(now) {
                flits_on[i][f.vc as usize] += 1;
            }
        }
        for (i, l) in self.wires.credits.iter_mut().enumerate() {
            for (_, c) in l.pending(now) {
                credits_on[i][c.vc as usize] += 1;
            }
        }
        let tiles: Vec<&Tile> = self.parts.iter().flat_map(|p| p.tiles.iter()).collect();
        for (i, t) in tiles.iter().enumerate() {
            let r = &t.router;
            for p in 0..NPORTS {
                let out = r.ports.out_flit[p];
                if out == NO_LINK {
                    continue;
                }
                // Downstream buffer of output p: neighbour's input port, or the NI (no buffer).
                for vc in 0..v {
                    let credits = r.credits(p, vc) as usize;
                    let (occ, back) = if p == Dir::Local.idx() {
                        (0, credits_on[6 * i + 5][vc])
                    } else {
                        let d = Dir::from_idx(p);
                        let nb = r.ports.in_flit[p] as usize / 6; // the neighbour in direction p
                        let q = d.opposite().idx();
                        (tiles[nb].router.vc_occupancy(q, vc), credits_on[6 * nb + q][vc])
                    };
                    let total = credits + r.xbar_count(p, vc) + flits_on[out as usize][vc] + occ + back;
                    if total != depth || credits > depth {
                        return Err(format!(
                            "{}.out_{}.vc{}: credits {} + xbar {} + link {} + downstream {} + returning {} = {} != depth {}",
                            t.scope(),
                            Dir::from_idx(p).short(),
                            vc,
                            credits,
                            r.xbar_count(p, vc),
                            flits_on[out as usize][vc],
                            occ,
                            back,
                            total,
                            depth
                        ));
                    }
                }
            }
            // Injection channel: NI credits vs router input port 4.
            for vc in 0..v {
                let credits = t.ni.inj_credit(vc) as usize;
                let total = credits + flits_on[6 * i + 5][vc] + r.vc_occupancy(Dir::Local.idx(), vc) + credits_on[6 * i + 4][vc];
                if total != depth {
                    return Err(format!("{}.ni.inj vc{vc}: credits conservation {total} != {depth}", t.scope()));
                }
            }
        }
        Ok(())
    }
}
