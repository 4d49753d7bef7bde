//! The k×k mesh: tiles (router + network interface) connected by links, stepped by the
//! harness engine in row-band partitions.
//!
//! Links live in two arenas (flits, credits), allocated receiver by receiver so each
//! router's inputs sit side by side in memory. Latencies follow BookSim's channel semantics — a
//! flit written to a latency-L channel in cycle t is processed in cycle t + L + 1 — so a
//! router-to-router link of `link_latency` L is a harness link of latency L + 1, and
//! injection/ejection channels (latency 1) are harness links of latency 2. Credit links add
//! `credit_delay` where a router consumes them (the NI consumes credits at once, as BookSim's
//! traffic manager does).

use sched::noc::{Coord, Dir};

use super::config::{CfgError, NocCfg};
use super::flit::{Credit, Flit};
use super::router::{RouterCl, RouterPorts, RouterStats, NPORTS};
use super::terminal::{NiCtx, NiPorts, NiStats, TerminalCl};
use super::tile_router::{NocRtl, RouterModel};
use crate::harness::{
    run_partitions, ChangeLog, Control, Cycle, LinkArena, LinkId, PartStatus, Partition, Probe, SignalDecl, SignalSink, Step, Watchdog,
    WatchdogReport, NEVER,
};

/// Status counters reported by mesh partitions.
pub const C_MEASURED_GEN: usize = 0;
pub const C_MEASURED_RET: usize = 1;
pub const C_GEN_FLITS: usize = 2;
pub const C_RET_FLITS: usize = 3;

pub struct Tile {
    /// The CL router. With a stand-in (`rtl`) it is built (it names the tile, holds the
    /// ports) but never evaluated.
    pub router: RouterCl,
    /// The router's stand-in (`noc --rtl router`), evaluated instead of `router`.
    pub rtl: Option<Box<dyn RouterModel>>,
    pub ni: TerminalCl,
    /// Last cycle anything was sent on one of this tile's links.
    last_send: Cycle,
}

impl Tile {
    pub fn scope(&self) -> String {
        format!("top.mesh.r_{}_{}", self.router.coord.y, self.router.coord.x)
    }

    /// The router that runs: the stand-in, else the CL model.
    #[inline]
    pub fn model(&self) -> &dyn RouterModel {
        match &self.rtl {
            Some(m) => m.as_ref(),
            None => &self.router,
        }
    }

    /// Flits held by the running router (the hot path: no dynamic call for the CL model).
    #[inline]
    fn occupancy(&self) -> u32 {
        match &self.rtl {
            Some(m) => m.occupancy(),
            None => self.router.occupancy(),
        }
    }
}

/// A band of consecutive tiles evaluated together.
pub struct MeshPart {
    pub first: usize,
    pub tiles: Vec<Tile>,
    log: Option<ChangeLog>,
    /// Line trace (S4): selected tiles (by index in this part) and the cycle window; lines
    /// are collected here and drained in (cycle, tile) order.
    line_trace: Option<(Vec<usize>, (Cycle, Cycle))>,
    lines: Vec<(Cycle, usize, String)>,
    /// Longest link latency: a tile that sent something within this many cycles is busy.
    max_lat: u64,
}

/// All links of the mesh (shared by partitions under the link protocol).
pub struct MeshWires {
    pub flits: LinkArena<Flit>,
    pub credits: LinkArena<Credit>,
}

/// Neighbour of node `i` in direction `d` on a k×k mesh.
fn neighbour(i: u32, d: Dir, k: u32) -> Option<u32> {
    neighbour_in(i, d, k, k)
}

/// Neighbour of node `i` in direction `d` on a `cols`×`rows` mesh (node id = y·cols + x).
pub fn neighbour_in(i: u32, d: Dir, cols: u32, rows: u32) -> Option<u32> {
    let c = Coord::of(i, cols);
    let (x, y) = (c.x as i64, c.y as i64);
    let (nx, ny) = match d {
        Dir::XPlus => (x + 1, y),
        Dir::XMinus => (x - 1, y),
        Dir::YPlus => (x, y + 1),
        Dir::YMinus => (x, y - 1),
        Dir::Local => return None,
    };
    (nx >= 0 && ny >= 0 && nx < cols as i64 && ny < rows as i64).then(|| Coord { x: nx as u32, y: ny as u32 }.id(cols))
}

/// The links of a `cols`×`rows` mesh of routers with one network interface each, allocated
/// receiver by receiver: the k×k NoC and the wafer's die mesh are wired by this one function.
pub struct MeshWiring {
    pub flits: LinkArena<Flit>,
    pub credits: LinkArena<Credit>,
    /// Each router's ports.
    pub routers: Vec<RouterPorts>,
    /// Each router's local-port peer (NI / die engine).
    pub nis: Vec<NiPorts>,
    /// Longest link latency, cycles: a tile that sent within this many cycles may still have
    /// something arriving somewhere.
    pub max_lat: u64,
    /// Each tile's first flit and first credit input link (the heads of its two link groups,
    /// router input port p at position p: see [`RouterCl::set_input_rows`]).
    pub rows: Vec<[LinkId; 2]>,
}

/// Wires the mesh. `link(i, d)` gives the router-to-router link leaving node i in direction
/// d: (latency L in cycles, serialization in cycles per flit). Latencies follow BookSim's
/// channel semantics (see the module doc): the flit link carries switch traversal `st`, L + 1
/// and the serialization tail; credits L + 1 + `cd`; injection/ejection 1 (+1).
pub fn wire(cols: u32, rows: u32, st: u32, cd: u32, link: &dyn Fn(u32, Dir) -> (u32, u32)) -> MeshWiring {
    let n = (cols * rows) as usize;
    let mut flits = LinkArena::new();
    let mut credits = LinkArena::new();
    let mut flit_in = vec![[LinkId::NONE; NPORTS]; n];
    let mut credit_in = vec![[LinkId::NONE; NPORTS]; n];
    let mut ej = vec![LinkId::NONE; n];
    let mut inj_credit = vec![LinkId::NONE; n];
    let mut max_lat = (2 + cd).max(st + 2) as u64;
    let mut heads = Vec::with_capacity(n);
    for i in 0..n {
        // The tile's inputs (the router's, then the NI's) form one link group per arena: the
        // stamps the tile polls each cycle share a cache line (see `LinkArena::add_group`).
        // Router input port p is link p of the group (a port on the mesh edge gets a link that
        // is never sent on), so the router polls the group's row at once; the NI's is link 5.
        let (mut ports, mut flit_lat, mut credit_lat) = (Vec::new(), Vec::new(), Vec::new());
        for d in Dir::ALL {
            debug_assert_eq!(d.idx(), flit_lat.len());
            if d == Dir::Local {
                flit_lat.push(2); // NI injection channel
                credit_lat.push(2 + cd); // NI ejection credits
            } else if let Some(nb) = neighbour_in(i as u32, d, cols, rows) {
                // The link arriving here from the neighbour leaves it in the opposite direction.
                let (l, ser) = link(nb, d.opposite());
                flit_lat.push(st + l + 1 + (ser - 1));
                credit_lat.push(l + 1 + cd);
                max_lat = max_lat.max((l + 1 + cd).max(st + l + ser) as u64);
            } else {
                flit_lat.push(1);
                credit_lat.push(1);
                continue;
            }
            ports.push(d.idx());
        }
        flit_lat.push(st + 2); // ejection channel
        credit_lat.push(2); // injection credits
        let (f, c) = (flits.add_group(&flit_lat), credits.add_group(&credit_lat));
        for &p in &ports {
            flit_in[i][p] = f[p];
            credit_in[i][p] = c[p];
        }
        ej[i] = f[NPORTS];
        inj_credit[i] = c[NPORTS];
        heads.push([f[0], c[0]]);
    }
    let mut routers = Vec::with_capacity(n);
    let mut nis = Vec::with_capacity(n);
    for i in 0..n {
        let mut ports = RouterPorts { in_flit: flit_in[i], out_flit: [LinkId::NONE; NPORTS], in_credit: credit_in[i], out_credit: [LinkId::NONE; NPORTS] };
        for d in Dir::ALL {
            let p = d.idx();
            if d == Dir::Local {
                ports.out_flit[p] = ej[i];
                ports.out_credit[p] = inj_credit[i];
            } else if let Some(nb) = neighbour_in(i as u32, d, cols, rows) {
                // My output p feeds the neighbour's input on the facing side; credits for my
                // input p go back to the neighbour's output on that side.
                let q = d.opposite().idx();
                ports.out_flit[p] = flit_in[nb as usize][q];
                ports.out_credit[p] = credit_in[nb as usize][q];
            }
        }
        routers.push(ports);
        nis.push(NiPorts { inj_flit: flit_in[i][Dir::Local.idx()], inj_credit: inj_credit[i], ej_flit: ej[i], ej_credit: credit_in[i][Dir::Local.idx()] });
    }
    MeshWiring { flits, credits, routers, nis, max_lat, rows: heads }
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
            let (m1, s1) = unsafe {
                match t.rtl.as_mut() {
                    Some(m) => m.eval(now, &w.flits, &w.credits),
                    None => t.router.eval(now, &w.flits, &w.credits),
                }
            };
            let (m2, s2) = unsafe { t.ni.eval(now, &w.flits, &w.credits, ctx) };
            if s1 || s2 {
                t.last_send = now;
            }
            st.progress += m1 + m2;
            // (Once one tile is busy the part is: the others need not be asked.)
            if !st.busy {
                st.busy = t.occupancy() > 0 || t.ni.has_packet() || (t.last_send != NEVER && now < t.last_send + self.max_lat);
            }
            st.next_event = st.next_event.min(t.ni.next_event());
            // The per-buffer stall check runs every 1024 cycles: a stuck flit is reported at
            // most 1023 cycles late, and the hot path stays free of it. (Fast-forward only
            // skips cycles with no flit anywhere, when nothing can be stuck.)
            if now & 1023 == 0 && t.occupancy() > 0 {
                st.oldest_wait = st.oldest_wait.min(t.model().oldest_front());
            }
            let s = &t.ni.stats;
            st.counters[C_MEASURED_GEN] += s.measured_gen;
            st.counters[C_MEASURED_RET] += s.measured_ret;
            st.counters[C_GEN_FLITS] += s.gen_flits;
            st.counters[C_RET_FLITS] += s.ret_flits;
        }
        if let Some(log) = self.log.as_mut() {
            // Past the waveform window nothing is sampled (tracing then costs nothing).
            if log.active(now) {
                let buf = log.begin();
                for t in &self.tiles {
                    t.model().sample(buf);
                    t.ni.sample(buf);
                }
                log.commit(now);
            }
        }
        if let Some((sel, (a, b))) = &self.line_trace {
            if now >= *a && now < *b {
                for &i in sel {
                    let t = &self.tiles[i];
                    self.lines.push((now, self.first + i, format!("{:>8} {}  {}", now, t.model(), t.ni)));
                }
            }
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
    #[error("line trace: {0}")]
    LineTrace(String),
    /// Credit conservation broken on a channel ([`Mesh::check_credits`]): the channel
    /// (`top.mesh.r_1_2.out_e.vc0`) and the counts.
    #[error("{channel}: {msg}")]
    Credits { channel: String, msg: String },
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
        Mesh::with_rtl(cfg, NocRtl::default())
    }

    /// [`Mesh::new`] with stand-ins for some blocks (`noc --rtl router`); a stand-in that
    /// cannot model the config refuses it (the error names the field).
    pub fn with_rtl(cfg: &NocCfg, rtl: NocRtl) -> Result<Mesh, CfgError> {
        cfg.validate()?;
        let k = cfg.mesh.k;
        let n = (k * k) as usize;
        let r = &cfg.mesh.router;
        let l = cfg.mesh.link_latency;
        // A router hands a flit to its output link at switch allocation; the link's latency
        // covers switch traversal (`st_delay`) plus the channel. Serialization: the flit's last
        // byte arrives ser − 1 cycles after its first.
        let ser = cfg.mesh.ser_cycles();
        let w = wire(k, k, r.st_delay, r.credit_delay, &|_, _| (l, ser));
        let max_lat = w.max_lat;
        let mut tiles = Vec::with_capacity(n);
        for (i, (ports, np)) in w.routers.into_iter().zip(w.nis).enumerate() {
            let mut router = RouterCl::new(i as u32, k, r, ser, ports);
            // Dense traffic (BookSim's reference point): the branch-free allocators.
            router.set_branch_free(true);
            router.set_input_rows(w.rows[i][0], w.rows[i][1]);
            let i = i as u32;
            let rtl = match rtl.router {
                Some(f) => Some(f(i, k, r, ser, ports)?),
                None => None,
            };
            let ni = TerminalCl::new(i, k, r, &cfg.traffic, np);
            tiles.push(Tile { router, rtl, ni, last_send: NEVER });
        }
        let (flits, credits) = (w.flits, w.credits);
        // Row bands, one per thread.
        let threads = (cfg.sim.threads as usize).clamp(1, n);
        let mut parts = Vec::with_capacity(threads);
        let mut it = tiles.into_iter();
        let mut first = 0;
        for p in 0..threads {
            let take = (n - first) / (threads - p);
            let band: Vec<Tile> = it.by_ref().take(take).collect();
            parts.push(MeshPart { first, tiles: band, log: None, line_trace: None, lines: Vec::new(), max_lat });
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
        let mut wd = self.watchdog();
        self.run_watched(end, ctx, stop_when_drained, &mut wd)
    }

    /// A fresh watchdog with the configured limit.
    pub fn watchdog(&self) -> Watchdog {
        Watchdog::new(self.watchdog_limit)
    }

    /// [`Mesh::run`] with the caller's watchdog, so a span cut into several runs (to hand out
    /// trace output between them) is watched exactly like one run.
    pub fn run_watched(&mut self, end: Cycle, ctx: &NiCtx, stop_when_drained: bool, wd: &mut Watchdog) -> Result<RunEnd, NocError> {
        if end < self.now {
            return Ok(RunEnd::Done);
        }
        let ctl = MeshControl {
            end,
            stop_when_drained,
            fast_forward: self.cfg.sim.fast_forward,
            watchdog: *wd,
            tripped: false,
            drained: false,
            evaluated: 0,
        };
        let threads = self.cfg.sim.threads as usize;
        let (last, ctl) = run_partitions(&mut self.parts, &self.wires, ctx, self.now, ctl, threads);
        self.now = last + 1;
        self.evaluated += ctl.evaluated;
        *wd = ctl.watchdog;
        if ctl.tripped {
            return Err(NocError::Watchdog(Box::new(self.watchdog_report(last, ctl.watchdog.stalled_for()))));
        }
        Ok(if ctl.drained { RunEnd::Drained } else { RunEnd::Done })
    }

    fn watchdog_report(&self, cycle: Cycle, stalled_for: u64) -> WatchdogReport {
        let mut blocked = Vec::new();
        let mut waiting = Vec::new();
        for t in self.tiles() {
            t.model().blocked_report(&format!("{}.router", t.scope()), &mut blocked, &mut waiting);
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
            s.add(&t.model().stats());
        }
        s
    }

    /// BookSim `_ClearStats`: latency and throughput windows restart.
    pub fn clear_stats(&mut self) {
        for t in self.tiles_mut() {
            t.ni.stats.clear_window();
        }
    }

    // ----- tracing

    /// All traceable signals, in global id order (tiles in node order).
    pub fn signals(&self) -> Vec<SignalDecl> {
        self.signals_iter().collect()
    }

    /// [`Mesh::signals`], built one tile at a time (a waveform writer keeps only the names it
    /// selects, so a big mesh never holds every name at once).
    pub fn signals_iter(&self) -> impl Iterator<Item = SignalDecl> + '_ {
        self.tiles().flat_map(|t| {
            let mut out = Vec::new();
            let scope: Vec<String> = t.scope().split('.').map(String::from).collect();
            let mut rscope = scope.clone();
            rscope.push("router".into());
            t.model().declare(&rscope, &mut out);
            t.ni.declare(&scope, &mut out);
            out
        })
    }

    /// Number of traceable signals (the length of [`Mesh::signals`], without building names).
    pub fn signals_count(&self) -> usize {
        let mut decl = Vec::new();
        let mut n = 0;
        for t in self.tiles() {
            decl.clear();
            t.model().declare(&[], &mut decl);
            t.ni.declare(&[], &mut decl);
            n += decl.len();
        }
        n
    }

    /// Starts recording value changes of every signal (from the next evaluated cycle).
    pub fn enable_trace(&mut self) {
        self.enable_trace_with(&|base, n| ChangeLog::new(base, n));
    }

    /// Starts recording only what `sink` writes: its cycle window and selected signals
    /// (trace memory then follows the window and the filter, not the run or the mesh).
    pub fn enable_trace_for(&mut self, sink: &dyn SignalSink) {
        self.enable_trace_with(&|base, n| ChangeLog::for_sink(base, n, sink));
    }

    fn enable_trace_with(&mut self, log: &dyn Fn(usize, usize) -> ChangeLog) {
        let mut base = 0;
        let mut decl = Vec::new();
        for p in self.parts.iter_mut() {
            let mut n = 0;
            for t in &p.tiles {
                decl.clear();
                t.model().declare(&[], &mut decl);
                t.ni.declare(&[], &mut decl);
                n += decl.len();
            }
            p.log = Some(log(base, n));
            base += n;
        }
    }

    /// Starts a per-cycle line trace (PyMTL style, one line per selected router per cycle) of
    /// the tiles whose scope `select` accepts, in cycles `window.0 .. window.1`.
    pub fn enable_line_trace(&mut self, select: &dyn Fn(&str) -> bool, window: (Cycle, Cycle)) -> usize {
        let mut n = 0;
        for p in self.parts.iter_mut() {
            let sel: Vec<usize> = p.tiles.iter().enumerate().filter(|(_, t)| select(&t.scope())).map(|(i, _)| i).collect();
            n += sel.len();
            p.line_trace = Some((sel, window));
        }
        n
    }

    /// Line-trace lines recorded so far, in (cycle, tile) order; empties the buffers.
    pub fn drain_line_trace(&mut self) -> Vec<String> {
        let mut all: Vec<(Cycle, usize, String)> = self.parts.iter_mut().flat_map(|p| std::mem::take(&mut p.lines)).collect();
        all.sort_by_key(|(c, t, _)| (*c, *t));
        all.into_iter().map(|(_, _, l)| l).collect()
    }

    /// Moves recorded changes into `sink`, merged in (cycle, signal) order.
    pub fn drain_trace(&mut self, sink: &mut dyn SignalSink) -> Result<(), NocError> {
        let mut logs: Vec<&mut ChangeLog> = self.parts.iter_mut().filter_map(|p| p.log.as_mut()).collect();
        ChangeLog::drain_merged(&mut logs, sink).map_err(|e| NocError::Wave(e.to_string()))
    }

    /// The last drain of a run: also hands out the values held for a window the run never
    /// reached (see [`ChangeLog::flush_pre`]).
    pub fn finish_trace(&mut self, sink: &mut dyn SignalSink) -> Result<(), NocError> {
        for l in self.parts.iter_mut().filter_map(|p| p.log.as_mut()) {
            l.flush_pre();
        }
        self.drain_trace(sink)
    }

    // ----- invariants (tests)

    /// Credit conservation on every channel: for each sender-side VC counter,
    /// `credits + flits in switch traversal or on the link + downstream occupancy + credits
    /// returning == depth`, and `0 <= credits <= depth`. Call between runs.
    #[allow(clippy::needless_range_loop)] // vc indexes per-VC counts of several channels
    pub fn check_credits(&mut self) -> Result<(), NocError> {
        let now = self.now;
        let k = self.cfg.mesh.k;
        let v = self.cfg.mesh.router.vcs as usize;
        let depth = self.cfg.mesh.router.vc_buf as usize;
        let wires = &mut self.wires;
        // Values in flight on a link, per VC.
        let mut per_vc_f = |id: LinkId| {
            let mut c = vec![0usize; v];
            for (_, f) in wires.flits.pending(id, now) {
                c[f.vc as usize] += 1;
            }
            c
        };
        let tiles: Vec<&Tile> = self.parts.iter().flat_map(|p| p.tiles.iter()).collect();
        let mut flits_on = Vec::with_capacity(tiles.len());
        for t in &tiles {
            let r = &t.router;
            let out: Vec<Vec<usize>> = (0..NPORTS).map(|p| per_vc_f(r.ports.out_flit[p])).collect();
            flits_on.push((out, per_vc_f(t.ni.ports.inj_flit)));
        }
        let mut per_vc_c = |id: LinkId| {
            let mut c = vec![0usize; v];
            for (_, cr) in wires.credits.pending(id, now) {
                c[cr.vc as usize] += 1;
            }
            c
        };
        for (i, t) in tiles.iter().enumerate() {
            let r = &t.router;
            for p in 0..NPORTS {
                if r.ports.out_flit[p].is_none() {
                    continue;
                }
                let back = per_vc_c(r.ports.in_credit[p]);
                for vc in 0..v {
                    let credits = t.model().credits(p, vc) as usize;
                    // Downstream buffer of output p: the neighbour's facing input, or the NI
                    // (which retires on arrival: no buffer).
                    let d = Dir::from_idx(p);
                    let occ = match neighbour(i as u32, d, k) {
                        Some(nb) => tiles[nb as usize].model().vc_occupancy(d.opposite().idx(), vc),
                        None => 0,
                    };
                    let link = flits_on[i].0[p][vc];
                    let total = credits + link + occ + back[vc];
                    if total != depth || credits > depth {
                        return Err(NocError::Credits {
                            channel: format!("{}.out_{}.vc{}", t.scope(), d.short(), vc),
                            msg: format!("credits {credits} + switch/link {link} + downstream {occ} + returning {} = {total} != depth {depth}", back[vc]),
                        });
                    }
                }
            }
            // Injection channel: NI credits vs router input port l.
            let back = per_vc_c(t.ni.ports.inj_credit);
            for vc in 0..v {
                let credits = t.ni.inj_credit(vc) as usize;
                let total = credits + flits_on[i].1[vc] + t.model().vc_occupancy(Dir::Local.idx(), vc) + back[vc];
                if total != depth {
                    return Err(NocError::Credits { channel: format!("{}.ni.inj vc{vc}", t.scope()), msg: format!("credits conservation {total} != {depth}") });
                }
            }
        }
        Ok(())
    }
}
