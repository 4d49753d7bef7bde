//! The NI-Balancer's decision unit (CL): MoEntwine Algorithm 1 (topology-aware balancing into
//! shadow slots) as a controller that walks its tables one entry per cycle. Its FL twin is
//! `sched::balance::ni::topo_balance`; the decisions (moves, final placement, heats, slots)
//! must be equal (`tests/wafer.rs::ni_balancer_controller_equals_fl`), its cost is the cycles
//! below. The moves are carried over cold links by the migration engines (`migration.rs`);
//! `balance.rs` runs the whole loop.
//!
//! Micro-architecture — registers: per expert its load (`Load_e`, from the per-expert load
//! counters) and replica count `Num_e`; per device its experts (a sorted list: the shadow-slot
//! table), its heat and its free shadow slots; one accumulator. One state per step of
//! Algorithm 1:
//! 1. `Hottest`: one device per cycle, keeps the largest heat (ties → lower id);
//! 2. `Src`: one expert of the hottest device per cycle, keeps the largest `Load_e / Num_e`;
//! 3. `Cold`: one device per cycle for the slot / already-hosts checks; under the prose's cold
//!    rule (`HeatAfter`) the device's heat with the copy is re-summed by the accumulator, one
//!    term per cycle, in ascending expert order (the FL's order, so the comparison is the same
//!    to the last bit); the nearest cold device by XY hops from the hottest is kept;
//! 4. `Copy`: one cycle to write the tables;
//! 5. `Reheat`: the heats of the expert's hosts re-summed, one term per cycle.
//!
//! The datapath is f64 here so that it equals the FL bit for bit; an RTL twin would use
//! fixed-point counters and reach the same decisions whenever no two candidates tie within
//! its precision.

use crate::harness::{trace_to_end, SignalDecl, SignalSink};
use sched::balance::ni::{BalancePlan, ColdRule, Move};
use sched::wafer::WaferGeom;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BalState {
    Hottest,
    Src,
    Cold,
    ColdSum,
    Copy,
    Reheat,
    Done,
}

#[derive(Debug, Clone)]
pub struct NiBalancerCl {
    pub rule: ColdRule,
    geom: WaferGeom,
    load: Vec<f64>,
    pub placement: Vec<Vec<u32>>,
    hosts: Vec<Vec<u32>>,
    pub num: Vec<u32>,
    pub heats: Vec<f64>,
    pub slots: Vec<u32>,
    pub state: BalState,
    /// Cursors: device / list index, term index of the accumulator.
    i: usize,
    j: usize,
    acc: f64,
    added: bool,
    /// The decision registers of the current iteration.
    pub hot: u32,
    pub src: Option<u32>,
    peak: f64,
    pub dst: Option<(u32, u32)>,
    reheat: Vec<u32>,
    max_moves: u64,
    pub moves: Vec<Move>,
    pub cycles: u64,
}

impl NiBalancerCl {
    /// Loads the tables. Inputs are those of the FL (which validates them: call it, or
    /// `topo_balance`, first — the controller assumes a consistent table).
    pub fn new(load: &[f64], placement: &[Vec<u32>], shadow_slots: &[u32], geom: WaferGeom, rule: ColdRule) -> Self {
        let mut placement: Vec<Vec<u32>> = placement.to_vec();
        placement.iter_mut().for_each(|p| p.sort_unstable());
        let mut hosts = vec![Vec::new(); load.len()];
        for (d, p) in placement.iter().enumerate() {
            for &e in p {
                hosts[e as usize].push(d as u32);
            }
        }
        let num: Vec<u32> = hosts.iter().map(|h| h.len() as u32).collect();
        let heats = placement.iter().map(|p| p.iter().map(|&e| load[e as usize] / num[e as usize] as f64).fold(0.0, |a, x| a + x)).collect();
        let slots_total: u64 = shadow_slots.iter().map(|&s| s as u64).sum();
        NiBalancerCl {
            rule,
            geom,
            load: load.to_vec(),
            max_moves: slots_total.min(placement.len() as u64 * load.len() as u64),
            placement,
            hosts,
            num,
            heats,
            slots: shadow_slots.to_vec(),
            state: BalState::Hottest,
            i: 0,
            j: 0,
            acc: 0.0,
            added: false,
            hot: 0,
            src: None,
            peak: 0.0,
            dst: None,
            reheat: Vec::new(),
            moves: Vec::new(),
            cycles: 0,
        }
    }

    /// The copies allowed: `min(Σ shadow slots, devices · experts)`.
    pub fn max_moves(&self) -> u64 {
        self.max_moves
    }

    fn share(&self, e: u32) -> f64 {
        self.load[e as usize] / self.num[e as usize] as f64
    }

    fn next_iteration(&mut self) {
        self.i = 0;
        self.state = if (self.moves.len() as u64) < self.max_moves { BalState::Hottest } else { BalState::Done };
    }

    /// One clock cycle.
    pub fn step(&mut self) {
        if self.state == BalState::Done {
            return;
        }
        self.cycles += 1;
        let n = self.heats.len();
        match self.state {
            BalState::Hottest => {
                if self.i == 0 || self.heats[self.i] > self.heats[self.hot as usize] {
                    self.hot = self.i as u32;
                }
                self.i += 1;
                if self.i == n {
                    self.i = 0;
                    self.src = None;
                    self.state = BalState::Src;
                }
            }
            BalState::Src => {
                let p = &self.placement[self.hot as usize];
                if p.is_empty() {
                    self.state = BalState::Done;
                    return;
                }
                let e = p[self.i];
                if self.src.is_none_or(|b| self.share(e) > self.share(b)) {
                    self.src = Some(e);
                }
                self.i += 1;
                if self.i == self.placement[self.hot as usize].len() {
                    self.peak = self.heats[self.hot as usize];
                    self.i = 0;
                    self.dst = None;
                    self.state = BalState::Cold;
                }
            }
            BalState::Cold => {
                let (d, src) = (self.i, self.src.expect("a source"));
                if self.slots[d] == 0 || self.placement[d].binary_search(&src).is_ok() {
                    self.advance_cold();
                } else {
                    match self.rule {
                        ColdRule::ShareBefore => {
                            let cold = self.heats[d] < self.peak - self.share(src);
                            self.candidate(cold);
                        }
                        ColdRule::HeatAfter => {
                            self.j = 0;
                            self.acc = 0.0;
                            self.added = false;
                            self.state = BalState::ColdSum;
                        }
                    }
                }
            }
            BalState::ColdSum => {
                let (d, src) = (self.i, self.src.expect("a source"));
                let new_share = self.load[src as usize] / (self.num[src as usize] + 1) as f64;
                let p = &self.placement[d];
                if self.j < p.len() {
                    let e = p[self.j];
                    if !self.added && e > src {
                        self.acc += new_share;
                        self.added = true;
                    } else {
                        self.acc += self.share(e);
                        self.j += 1;
                    }
                } else if !self.added {
                    self.acc += new_share;
                    self.added = true;
                } else {
                    let cold = self.acc < self.peak;
                    self.state = BalState::Cold;
                    self.candidate(cold);
                }
            }
            BalState::Copy => {
                let (src, (_, dst)) = (self.src.expect("a source"), self.dst.expect("a destination"));
                let p = &mut self.placement[dst as usize];
                let at = p.binary_search(&src).unwrap_err();
                p.insert(at, src);
                let h = &mut self.hosts[src as usize];
                let at = h.binary_search(&dst).unwrap_err();
                h.insert(at, dst);
                self.num[src as usize] += 1;
                self.slots[dst as usize] -= 1;
                self.moves.push(Move { expert: src, src_device: self.hot, dst_device: dst });
                self.reheat = self.hosts[src as usize].clone();
                self.i = 0;
                self.j = 0;
                self.acc = 0.0;
                self.state = BalState::Reheat;
            }
            BalState::Reheat => {
                let d = self.reheat[self.i] as usize;
                let p = &self.placement[d];
                if self.j < p.len() {
                    self.acc += self.load[p[self.j] as usize] / self.num[p[self.j] as usize] as f64;
                    self.j += 1;
                }
                if self.j == self.placement[d].len() {
                    self.heats[d] = self.acc;
                    self.acc = 0.0;
                    self.j = 0;
                    self.i += 1;
                    if self.i == self.reheat.len() {
                        self.next_iteration();
                    }
                }
            }
            BalState::Done => {}
        }
    }

    /// Device `i` was checked (cold or not): keep it if it is the nearest cold one, then move on.
    fn candidate(&mut self, cold: bool) {
        if cold {
            let d = self.i as u32;
            let h = self.geom.hops(self.hot, d);
            if self.dst.is_none_or(|(bh, _)| h < bh) {
                self.dst = Some((h, d));
            }
        }
        self.advance_cold();
    }

    fn advance_cold(&mut self) {
        self.i += 1;
        if self.i == self.heats.len() {
            self.i = 0;
            self.state = if self.dst.is_some() { BalState::Copy } else { BalState::Done };
        }
    }

    /// Runs to the end, writing every cycle's registers into `sink` (signals:
    /// [`NiBalancerCl::signals`], in that order).
    pub fn run_traced(mut self, sink: &mut dyn SignalSink) -> Result<(BalancePlan, u64), crate::Error> {
        trace_to_end(&mut self, sink, Self::sample, |b| b.state == BalState::Done || b.max_moves == 0, Self::step)?;
        Ok(self.run())
    }

    /// The decision unit's traced registers under `top.balancer`: `state` (0 hottest, 1
    /// source, 2 cold scan, 3 cold re-sum, 4 copy, 5 re-heat, 6 done), `hot` (the hottest
    /// device), `src` and `dst` (expert and destination device of the copy being decided, +1;
    /// 0 none), `moves`; per device `dev_D.heat` (Heat_d rounded to a whole token) and
    /// `dev_D.slots` (free shadow slots); per expert `load.e_E` (the load counter).
    pub fn signals(&self) -> Vec<SignalDecl> {
        decision_signals(self.heats.len(), self.load.len())
    }

    fn sample(&self, out: &mut Vec<u64>) {
        let st = [BalState::Hottest, BalState::Src, BalState::Cold, BalState::ColdSum, BalState::Copy, BalState::Reheat, BalState::Done].iter().position(|&s| s == self.state).unwrap_or(6);
        out.push(st as u64);
        out.push(self.hot as u64 & 0xffff);
        out.push(self.src.map_or(0, |e| e as u64 + 1) & 0xffff);
        out.push(self.dst.map_or(0, |(d, _)| d as u64 + 1) & 0xffff);
        out.push(self.moves.len() as u64 & 0xffff);
        for (h, s) in self.heats.iter().zip(&self.slots) {
            out.push(h.round().clamp(0.0, u32::MAX as f64) as u64);
            out.push(*s as u64 & 0xff);
        }
        for l in &self.load {
            out.push(l.round().clamp(0.0, u32::MAX as f64) as u64);
        }
    }

    /// Runs to the end; the decision as the FL's type, and the cycles it took.
    pub fn run(mut self) -> (BalancePlan, u64) {
        if self.max_moves == 0 {
            self.state = BalState::Done;
        }
        while self.state != BalState::Done {
            self.step();
        }
        let plan = BalancePlan { moves: self.moves, placement: self.placement, heats: self.heats, num: self.num, slots_left: self.slots };
        (plan, self.cycles)
    }
}

/// The decision unit's traced signals for `devices` and `experts` (see
/// [`NiBalancerCl::signals`]); the same list for the CL and an RTL stand-in, so their
/// waveforms compare signal by signal.
pub fn decision_signals(devices: usize, experts: usize) -> Vec<SignalDecl> {
    let sig = |sub: Option<String>, name: &str, width: u32| {
        let mut scope = vec!["top".to_string(), "balancer".to_string()];
        scope.extend(sub);
        SignalDecl { scope, name: name.into(), width }
    };
    let mut out = vec![sig(None, "state", 3), sig(None, "hot", 16), sig(None, "src", 16), sig(None, "dst", 16), sig(None, "moves", 16)];
    for d in 0..devices {
        out.push(sig(Some(format!("dev_{d}")), "heat", 32));
        out.push(sig(Some(format!("dev_{d}")), "slots", 8));
    }
    for e in 0..experts {
        out.push(sig(Some("load".into()), &format!("e_{e}"), 32));
    }
    out
}

/// The NI-Balancer's trigger (CL): paper Eq. 2 on the load counters, one device per cycle —
/// Σ over layers of (max − mean) / mean of the device loads above α, and the cycles since the
/// last migration above β. Twin of `sched::balance::ni::should_migrate`, to the last bit
/// (the same f64 operations in the same order: the sum and the max accumulated in device
/// order, one divide and one add per layer; `tests/wafer_balance.rs`).
#[derive(Debug, Clone)]
pub struct TriggerCl {
    alpha: f64,
    /// β passed (`Δt > β`), evaluated in the first cycle.
    pub dt_ok: bool,
    loads: Vec<Vec<f64>>,
    /// Cursors and accumulators.
    layer: usize,
    dev: usize,
    sum: f64,
    max: f64,
    /// Σ (max − mean) / mean so far.
    pub imbalance: f64,
    pub done: bool,
    pub cycles: u64,
}

impl TriggerCl {
    pub fn new(cfg: &sched::balance::ni::TriggerCfg, loads: &[Vec<f64>], cycles_since_last_migration: u64) -> Self {
        TriggerCl { alpha: cfg.alpha, dt_ok: cycles_since_last_migration > cfg.beta_cycles, loads: loads.to_vec(), layer: 0, dev: 0, sum: -0.0, max: f64::MIN, imbalance: 0.0, done: false, cycles: 0 }
    }

    /// One clock cycle: the next device's counter into the sum and the max, or (after a
    /// layer's last device) the layer's term.
    pub fn step(&mut self) {
        if self.done {
            return;
        }
        self.cycles += 1;
        if !self.dt_ok || self.layer == self.loads.len() {
            self.done = true;
            return;
        }
        let l = &self.loads[self.layer];
        if self.dev < l.len() {
            self.sum += l[self.dev];
            self.max = self.max.max(l[self.dev]);
            self.dev += 1;
            return;
        }
        if !l.is_empty() {
            let mean = self.sum / l.len() as f64;
            if mean.is_nan() {
                self.imbalance = f64::NAN;
                self.done = true;
                return;
            }
            if mean > 0.0 {
                self.imbalance += (self.max - mean) / mean;
            }
        }
        (self.layer, self.dev, self.sum, self.max) = (self.layer + 1, 0, -0.0, f64::MIN);
    }

    /// Runs to the end: whether to migrate, and the cycles it took.
    pub fn run(mut self) -> (bool, u64) {
        while !self.done {
            self.step();
        }
        (self.dt_ok && self.imbalance > self.alpha, self.cycles)
    }
}

/// The NI-Balancer's decision unit as the balance loop runs it: the CL model
/// ([`NiBalancerCl`]) or an RTL stand-in (`waferstream balance --rtl balancer`,
/// `rtl::wafer::ni_balancer_swap`), built through a [`NiUnits`] factory so `hw` does not
/// depend on the RTL crate. Same cycle semantics as [`NiBalancerCl`]: each `step` is one clock
/// cycle of Algorithm 1; the tables are loaded by the factory (not counted).
pub trait NiDecisionUnit {
    /// One clock cycle. A stand-in that meets a case it cannot decide as the CL does (an exact
    /// tie its f64 twin could break either way, a value its registers cannot hold) refuses
    /// here, naming the cause.
    fn step(&mut self) -> Result<(), crate::Error>;
    /// Nothing left to decide (`Done`, or no shadow slot at all).
    fn done(&self) -> bool;
    /// Traced signals (as [`NiBalancerCl::signals`]).
    fn signals(&self) -> Vec<SignalDecl>;
    /// Values in `signals` order (a stand-in may refuse a value it cannot show as the CL does).
    fn sample(&self, out: &mut Vec<u64>) -> Result<(), crate::Error>;
    /// The decision as the FL's type and the cycles taken.
    fn finish(self: Box<Self>) -> Result<(BalancePlan, u64), crate::Error>;
}

/// The NI-Balancer's Eq. 2 trigger as the balance loop runs it (the CL [`TriggerCl`] or an RTL
/// stand-in); each `step` is one clock cycle.
pub trait NiTriggerUnit {
    fn step(&mut self) -> Result<(), crate::Error>;
    fn done(&self) -> bool;
    /// Whether to migrate, and the cycles taken.
    fn finish(self: Box<Self>) -> Result<(bool, u64), crate::Error>;
}

/// Builds a decision unit for `(load, placement, shadow_slots, geom, rule)` (the arguments of
/// [`NiBalancerCl::new`]); a stand-in refuses tables its build cannot hold, naming the field.
pub type NiDecisionFactory = fn(&[f64], &[Vec<u32>], &[u32], WaferGeom, ColdRule) -> Result<Box<dyn NiDecisionUnit>, crate::Error>;
/// Builds a trigger for `(cfg, loads, cycles_since_last_migration)` (as [`TriggerCl::new`]).
pub type NiTriggerFactory = fn(&sched::balance::ni::TriggerCfg, &[Vec<f64>], u64) -> Result<Box<dyn NiTriggerUnit>, crate::Error>;

/// The NI-Balancer's two controllers, as factories (the CL's by default).
#[derive(Debug, Clone, Copy)]
pub struct NiUnits {
    pub decision: NiDecisionFactory,
    pub trigger: NiTriggerFactory,
}

impl NiUnits {
    /// The CL models.
    pub const CL: NiUnits = NiUnits { decision: ni_decision_cl, trigger: ni_trigger_cl };
}

impl Default for NiUnits {
    fn default() -> Self {
        NiUnits::CL
    }
}

/// [`NiDecisionFactory`] of the CL model.
pub fn ni_decision_cl(load: &[f64], placement: &[Vec<u32>], shadow_slots: &[u32], geom: WaferGeom, rule: ColdRule) -> Result<Box<dyn NiDecisionUnit>, crate::Error> {
    Ok(Box::new(NiBalancerCl::new(load, placement, shadow_slots, geom, rule)))
}

/// [`NiTriggerFactory`] of the CL model.
pub fn ni_trigger_cl(cfg: &sched::balance::ni::TriggerCfg, loads: &[Vec<f64>], since: u64) -> Result<Box<dyn NiTriggerUnit>, crate::Error> {
    Ok(Box::new(TriggerCl::new(cfg, loads, since)))
}

impl NiDecisionUnit for NiBalancerCl {
    fn step(&mut self) -> Result<(), crate::Error> {
        NiBalancerCl::step(self);
        Ok(())
    }
    fn done(&self) -> bool {
        self.state == BalState::Done || self.max_moves == 0
    }
    fn signals(&self) -> Vec<SignalDecl> {
        NiBalancerCl::signals(self)
    }
    fn sample(&self, out: &mut Vec<u64>) -> Result<(), crate::Error> {
        NiBalancerCl::sample(self, out);
        Ok(())
    }
    fn finish(self: Box<Self>) -> Result<(BalancePlan, u64), crate::Error> {
        Ok((*self).run())
    }
}

impl NiTriggerUnit for TriggerCl {
    fn step(&mut self) -> Result<(), crate::Error> {
        TriggerCl::step(self);
        Ok(())
    }
    fn done(&self) -> bool {
        self.done
    }
    fn finish(self: Box<Self>) -> Result<(bool, u64), crate::Error> {
        Ok((*self).run())
    }
}

/// Runs a decision unit to the end; with `sink`, each cycle's changed signals go into it (as
/// [`NiBalancerCl::run_traced`]: sample, then unless done one step).
pub fn run_decision(mut unit: Box<dyn NiDecisionUnit>, sink: Option<&mut dyn SignalSink>) -> Result<(BalancePlan, u64), crate::Error> {
    match sink {
        Some(sink) => {
            let (mut prev, mut cur): (Vec<u64>, Vec<u64>) = (Vec::new(), Vec::new());
            let mut t: crate::harness::Cycle = 0;
            loop {
                cur.clear();
                unit.sample(&mut cur)?;
                for (i, &v) in cur.iter().enumerate() {
                    if prev.get(i) != Some(&v) {
                        sink.change(t, i, v)?;
                    }
                }
                std::mem::swap(&mut prev, &mut cur);
                if unit.done() {
                    break;
                }
                unit.step()?;
                t += 1;
            }
        }
        None => {
            while !unit.done() {
                unit.step()?;
            }
        }
    }
    unit.finish()
}

/// Runs a trigger to the end: whether to migrate, and the cycles.
pub fn run_trigger(mut unit: Box<dyn NiTriggerUnit>) -> Result<(bool, u64), crate::Error> {
    while !unit.done() {
        unit.step()?;
    }
    unit.finish()
}
