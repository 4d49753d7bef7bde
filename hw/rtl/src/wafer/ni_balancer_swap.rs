//! The NI-Balancer's RTL blocks inside the balance run, in place of the CL models
//! (`waferstream balance ... --rtl balancer`): [`NiBalancerRtlModel`] implements
//! `hw::wafer::balancer::NiDecisionUnit` by clocking [`NiBalancerSwapRtl`] once per `step`,
//! [`NiTriggerRtlModel`] implements `NiTriggerUnit` with [`NiTriggerRtl`]. [`ni_units`] is the
//! pair of factories the CLI hands to the run.
//!
//! **Loading.** [`NiDecisionDriver::load`] writes the tables through the block's load ports
//! (one expert or device per cycle: `Load_e`; the device's experts as a row, its free shadow
//! slots and its mesh coordinates), then `go`; the block sums the heats (`Init`, not counted:
//! the CL's constructor) and each later edge is one CL step.
//!
//! **What is refused, and why** (before anything runs unless said otherwise; the error names
//! the cause):
//! * a load that is not a whole token count in 0..2^32, or loads summing to 2^32 or more (the
//!   32-bit load registers);
//! * more devices, experts than the build holds, coordinates ≥ 2^15, slots ≥ 2^16;
//! * `precision`: the f64 sums of the CL could round by half a heat unit (1/L token):
//!   `Σ Load · L · (2T + 4) ≥ 2^52`, T the most terms one heat can have (a device's experts
//!   plus its free slots, plus one). Below that bound every f64 comparison of the CL equals the
//!   exact one except at an exact tie (the block's doc comment);
//! * during the run: an exact tie (`tie`) whose f64 sides are not both exact in binary64
//!   (a term `Load_e / Num_e` with an odd part of `Num_e` that does not divide `Load_e`), since
//!   the CL's rounded sums could break it either way; a share with more than R replicas
//!   (`err_scale`: L = lcm(1..=R) has no `L / Num`);
//! * while tracing only: a heat exactly halfway between two whole tokens whose f64 is not
//!   exact (the waveform shows the heat rounded, and the CL's f64 could round either way).
//!
//! The trigger ([`NiTriggerRtlModel`]) refuses more than one layer, loads as above, an α whose
//! shortest decimal has more than 6 decimals (`α = a / 10^k`), `n · 10^k` or `10^k + a` of
//! 2^32 or more, `precision` (`sum · 10^k · (3n + α + 2) ≥ 2^52`: the CL's rounding of the
//! mean, the difference, the quotient and of α stays below one unit of the exact compare), and
//! during the run an exact tie of the imbalance with α ≠ 0 (with α = 0 a tie means equal
//! loads, which the f64 computes exactly).

use hw::harness::SignalDecl;
use hw::wafer::balancer::{decision_signals, NiDecisionUnit, NiTriggerUnit, NiUnits};
use rust_hdl::prelude::*;
use sched::balance::ni::{BalancePlan, ColdRule, Move, TriggerCfg};
use sched::wafer::WaferGeom;

use super::ni_balancer::{st, NiBalancerRtl};
use super::ni_trigger::NiTriggerRtl;

/// The build the swap runs: 64 devices, 256 experts, 16 replicas (L = 720 720).
pub type NiBalancerSwapRtl = NiBalancerRtl<64, 256, 16>;

fn refuse(what: &str, msg: impl std::fmt::Display) -> hw::Error {
    hw::Error::block("ni_balancer rtl", format!("{what}: {msg}"))
}

/// Whole token counts in 0..2^32, their sum below 2^32 (`what`: the table's name).
fn check_loads(what: &str, loads: &[f64]) -> Result<Vec<u64>, hw::Error> {
    let mut out = Vec::with_capacity(loads.len());
    for (i, &l) in loads.iter().enumerate() {
        if !(l.is_finite() && l >= 0.0 && l.fract() == 0.0 && l < 4294967296.0) {
            return Err(refuse(what, format!("entry {i} is {l}, not a whole token count in 0..2^32 (the 32-bit load registers)")));
        }
        out.push(l as u64);
    }
    let sum: u64 = out.iter().sum();
    if sum >= 1 << 32 {
        return Err(refuse(what, format!("the loads sum to {sum}, at least 2^32 (the 32-bit sum)")));
    }
    Ok(out)
}

/// `l / n` is exact in binary64 (for l < 2^32, n < 2^16): n's odd part divides l.
fn share_exact(l: u64, n: u64) -> bool {
    n != 0 && l % (n >> n.trailing_zeros()) == 0
}

/// The decision unit's tables, checked against the build `<D, E, R>`.
#[derive(Debug, Clone)]
pub struct NiTables {
    pub load: Vec<u64>,
    /// Device → experts (ascending, as the CL sorts them).
    pub placement: Vec<Vec<u32>>,
    pub slots: Vec<u32>,
    pub coords: Vec<(u32, u32)>,
    pub rule: ColdRule,
    pub max_moves: u64,
}

impl NiTables {
    /// The tables of `NiBalancerCl::new(load, placement, shadow_slots, geom, rule)` for a
    /// build of `devices`, `experts`, `replicas`; refused naming the cause (module doc).
    pub fn new(load: &[f64], placement: &[Vec<u32>], shadow_slots: &[u32], geom: WaferGeom, rule: ColdRule, build: (usize, usize, usize)) -> Result<Self, hw::Error> {
        let (bd, be, br) = build;
        let load = check_loads("load", load)?;
        let (d, e) = (placement.len(), load.len());
        if d == 0 || d > bd {
            return Err(refuse("devices", format!("{d} devices; the built unit holds 1..={bd}")));
        }
        if e > be {
            return Err(refuse("experts", format!("{e} experts; the built unit holds at most {be}")));
        }
        if shadow_slots.len() != d {
            return Err(refuse("shadow_slots", format!("{} entries for {d} devices", shadow_slots.len())));
        }
        let mut pl: Vec<Vec<u32>> = placement.to_vec();
        for (dev, p) in pl.iter_mut().enumerate() {
            p.sort_unstable();
            if p.windows(2).any(|w| w[0] == w[1]) || p.iter().any(|&x| x as usize >= e) {
                return Err(refuse("placement", format!("device {dev}: {p:?} is not a set of experts below {e}")));
            }
        }
        if let Some(s) = shadow_slots.iter().find(|&&s| s >= 1 << 16) {
            return Err(refuse("shadow_slots", format!("{s} slots, at least 2^16 (16-bit counters)")));
        }
        let coords: Vec<(u32, u32)> = (0..d as u32).map(|x| geom.coord(x)).map(|c| (c.x, c.y)).collect();
        if let Some(c) = coords.iter().find(|c| c.0 >= 1 << 15 || c.1 >= 1 << 15) {
            return Err(refuse("geom", format!("coordinate {c:?} at least 2^15 (16-bit hop sums)")));
        }
        // The f64 sums' rounding below half a heat unit (module doc).
        let l = super::ni_balancer::lcm_upto(br as u64) as u128;
        let terms = pl.iter().zip(shadow_slots).map(|(p, &s)| p.len() as u128 + s as u128).max().unwrap_or(0).min(e as u128) + 1;
        let sum: u128 = load.iter().map(|&x| x as u128).sum();
        if sum * l * (2 * terms + 4) >= 1 << 52 {
            return Err(refuse(
                "precision",
                format!("Σ load {sum} × L {l} × (2·{terms} + 4) is at least 2^52: the CL's f64 heats could round by half a unit of the exact heats, and an exact decision could differ from it"),
            ));
        }
        let slots_total: u64 = shadow_slots.iter().map(|&s| s as u64).sum();
        let max_moves = slots_total.min(d as u64 * e as u64);
        if max_moves >= 1 << 32 {
            return Err(refuse("shadow_slots", format!("{max_moves} copies, at least 2^32")));
        }
        Ok(NiTables { load, placement: pl, slots: shadow_slots.to_vec(), coords, rule, max_moves })
    }
}

/// Drives one decision unit a cycle at a time (shared by the stand-in and the lockstep test).
pub struct NiDecisionDriver<const D: usize, const E: usize, const R: usize> {
    pub uut: Box<NiBalancerRtl<D, E, R>>,
    pub tables: NiTables,
    /// The heats as the block's write port reported them (scaled by L).
    pub heats: Vec<u64>,
    /// The copies as the block reported them.
    pub moves: Vec<Move>,
    /// Cycles of `Init` (not counted by the CL).
    pub init_cycles: u64,
}

impl<const D: usize, const E: usize, const R: usize> NiDecisionDriver<D, E, R> {
    pub const SCALE: u64 = NiBalancerRtl::<D, E, R>::SCALE;

    /// A reset block with `tables` loaded, started and past `Init`: the next [`Self::edge`] is
    /// the CL's first step.
    pub fn load(tables: NiTables) -> Self {
        let mut uut = std::thread::Builder::new()
            .stack_size(256 << 20)
            .spawn(|| Box::new(NiBalancerRtl::<D, E, R>::new()))
            .expect("spawn the builder thread")
            .join()
            .expect("build the decision unit");
        uut.connect_all();
        let (d, e) = (tables.placement.len(), tables.load.len());
        let mut drv = NiDecisionDriver { uut, heats: vec![0; d], moves: Vec::new(), init_cycles: 0, tables };
        let u = &mut drv.uut;
        u.reset.next = true;
        u.cfg_d.next = (d as u64).into();
        u.cfg_max_moves.next = drv.tables.max_moves.into();
        u.cfg_rule.next = drv.tables.rule == ColdRule::HeatAfter;
        drv.clock();
        drv.uut.reset.next = false;
        for x in 0..e {
            drv.uut.ld_exp_we.next = true;
            drv.uut.ld_exp.next = (x as u64).into();
            drv.uut.ld_load.next = drv.tables.load[x].into();
            drv.clock();
        }
        drv.uut.ld_exp_we.next = false;
        for dev in 0..d {
            let mut row = Bits::<E>::default();
            for &x in &drv.tables.placement[dev] {
                row = row.replace_bit(x as usize, true);
            }
            drv.uut.ld_dev_we.next = true;
            drv.uut.ld_dev.next = (dev as u64).into();
            drv.uut.ld_row.next = row;
            drv.uut.ld_slots.next = (drv.tables.slots[dev] as u64).into();
            drv.uut.ld_x.next = (drv.tables.coords[dev].0 as u64).into();
            drv.uut.ld_y.next = (drv.tables.coords[dev].1 as u64).into();
            drv.clock();
        }
        drv.uut.ld_dev_we.next = false;
        drv.uut.go.next = true;
        drv.clock();
        drv.uut.go.next = false;
        drv.settle();
        while drv.uut.state.val().to_u64() == st::INIT {
            drv.clock();
            drv.observe();
            drv.init_cycles += 1;
        }
        drv
    }

    pub fn settle(&mut self) {
        crate::cosim::settle(self.uut.as_mut()).expect("the decision unit settles");
    }

    /// One clock edge (rising, then falling) with the inputs as they are.
    fn clock(&mut self) {
        self.settle();
        self.uut.clock.next = true.into();
        self.settle();
        self.uut.clock.next = false.into();
        self.settle();
    }

    /// The heat write and the copy of the last edge into `heats` and `moves`.
    fn observe(&mut self) {
        let u = &self.uut;
        if u.hw_en.val() {
            let d = u.hw_dev.val().index();
            self.heats[d] = u.hw_heat.val().to_u64();
        }
        if u.mv.val() {
            let (e, hot, dst) = (u.src.val().to_u64() as u32 - 1, u.hot.val().to_u64() as u32, u.dst.val().to_u64() as u32 - 1);
            self.moves.push(Move { expert: e, src_device: hot, dst_device: dst });
        }
    }

    /// One CL step: an edge, its heat write and copy recorded, its tie and error checked.
    pub fn edge(&mut self) -> Result<(), hw::Error> {
        self.clock();
        self.observe();
        if self.uut.err_scale.val() {
            return Err(refuse("replicas", format!("an expert reached more than {R} replicas; the heat scale L = lcm(1..={R}) = {} has no L / Num for it", Self::SCALE)));
        }
        if self.uut.tie.val() {
            self.check_tie()?;
        }
        Ok(())
    }

    /// Device `d`'s experts and each one's replica count (the block's read ports).
    pub fn row(&mut self, d: usize) -> Vec<(u32, u64)> {
        self.uut.rd_dev.next = (d as u64).into();
        self.settle();
        let row = self.uut.rd_row.val();
        let experts: Vec<u32> = (0..self.tables.load.len()).filter(|&x| row.get_bit(x)).map(|x| x as u32).collect();
        experts.into_iter().map(|x| (x, self.num(x as usize))).collect()
    }

    pub fn num(&mut self, e: usize) -> u64 {
        self.uut.rd_exp.next = (e as u64).into();
        self.settle();
        self.uut.rd_num.val().to_u64()
    }

    pub fn slots(&mut self, d: usize) -> u64 {
        self.uut.rd_dev.next = (d as u64).into();
        self.settle();
        self.uut.rd_slots.val().to_u64()
    }

    /// Device `d`'s heat is exact in binary64 (every term `Load_e / Num_e` is).
    fn heat_exact(&mut self, d: usize) -> Result<(), (u32, u64, u64)> {
        for (x, n) in self.row(d) {
            let l = self.tables.load[x as usize];
            if !share_exact(l, n) {
                return Err((x, l, n));
            }
        }
        Ok(())
    }

    /// An exact tie the CL's f64 could break either way is refused; one whose sides are both
    /// exact in binary64 (so equal in the CL too) is not.
    fn check_tie(&mut self) -> Result<(), hw::Error> {
        let (kind, dev, hot) = (self.uut.tie_kind.val().to_u64(), self.uut.tie_dev.val().index(), self.uut.hot.val().index());
        let src = self.uut.src.val().to_u64().wrapping_sub(1) as usize;
        let what = match kind {
            1 => "the hottest-device scan",
            2 => "the cold check (ShareBefore: heat + share = peak)",
            _ => "the cold check (HeatAfter: heat with the copy = peak)",
        };
        let mut bad = self.heat_exact(dev).err().or_else(|| self.heat_exact(hot).err());
        if bad.is_none() && kind >= 2 {
            let l = self.tables.load[src];
            let n = self.num(src) + u64::from(kind == 3);
            if !share_exact(l, n) {
                bad = Some((src as u32, l, n));
            }
        }
        match bad {
            None => Ok(()),
            Some((x, l, n)) => Err(refuse(
                "tie",
                format!("an exact tie of devices {dev} and {hot} (hottest) in {what}, with the term Load/Num = {l}/{n} of expert {x} inexact in binary64: the CL's f64 sums could break it either way"),
            )),
        }
    }

    /// The decision as the FL's type (from the block's read ports; heats: the exact heats,
    /// correctly rounded to f64) and the cycles counted.
    pub fn plan(&mut self) -> (BalancePlan, u64) {
        let (d, e) = (self.tables.placement.len(), self.tables.load.len());
        let placement: Vec<Vec<u32>> = (0..d).map(|x| self.row(x).into_iter().map(|(y, _)| y).collect()).collect();
        let num: Vec<u32> = (0..e).map(|x| self.num(x) as u32).collect();
        let slots_left: Vec<u32> = (0..d).map(|x| self.slots(x) as u32).collect();
        let heats = self.heats.iter().map(|&h| h as f64 / Self::SCALE as f64).collect();
        let cycles = self.uut.cycles.val().to_u64();
        (BalancePlan { moves: self.moves.clone(), placement, heats, num, slots_left }, cycles)
    }

    /// Heat of device `d` rounded to a whole token as the CL's waveform shows it (f64 `round`:
    /// halves away from zero); a half whose f64 is inexact is refused.
    pub fn heat_rounded(&mut self, d: usize) -> Result<u64, hw::Error> {
        let (h, l) = (self.heats[d] as u128, Self::SCALE as u128);
        if (2 * h) % (2 * l) == l {
            if let Err((x, ld, n)) = self.heat_exact(d) {
                return Err(refuse("tie", format!("device {d}'s heat is exactly {}.5 tokens with the term {ld}/{n} of expert {x} inexact in binary64: the CL's rounded heat could show either neighbour", h / l)));
            }
        }
        Ok(((2 * h + l) / (2 * l)).min(u32::MAX as u128) as u64)
    }
}

/// The RTL decision unit as the balance loop's `NiDecisionUnit`.
pub struct NiBalancerRtlModel {
    drv: NiDecisionDriver<64, 256, 16>,
    /// The CL traces `dst` as the first field of its `(hops, device)` register + 1, i.e. the
    /// hop count of the nearest cold device so far (not its id, as its doc says). The same
    /// value from the block's ports: latched whenever `dst` changes (in Cold/ColdSum, while
    /// `hot` holds), from the two devices' coordinates — the block's `dhops` register.
    dst_traced: u64,
}

/// [`hw::wafer::balancer::NiDecisionFactory`] of the RTL decision unit.
pub fn ni_decision_rtl(load: &[f64], placement: &[Vec<u32>], shadow_slots: &[u32], geom: WaferGeom, rule: ColdRule) -> Result<Box<dyn NiDecisionUnit>, hw::Error> {
    let t = NiTables::new(load, placement, shadow_slots, geom, rule, (NiBalancerSwapRtl::DEVICES, NiBalancerSwapRtl::EXPERTS, NiBalancerSwapRtl::REPLICAS))?;
    Ok(Box::new(NiBalancerRtlModel { drv: NiDecisionDriver::load(t), dst_traced: 0 }))
}

impl NiDecisionUnit for NiBalancerRtlModel {
    fn step(&mut self) -> Result<(), hw::Error> {
        let before = self.drv.uut.dst.val().to_u64();
        self.drv.edge()?;
        let u = &self.drv.uut;
        let dst = u.dst.val().to_u64();
        if dst != before {
            self.dst_traced = match dst {
                0 => 0,
                x => {
                    let ((hx, hy), (dx, dy)) = (self.drv.tables.coords[u.hot.val().index()], self.drv.tables.coords[x as usize - 1]);
                    (hx.abs_diff(dx) + hy.abs_diff(dy)) as u64 + 1
                }
            };
        }
        Ok(())
    }
    fn done(&self) -> bool {
        self.drv.uut.done.val()
    }
    fn signals(&self) -> Vec<SignalDecl> {
        decision_signals(self.drv.tables.placement.len(), self.drv.tables.load.len())
    }
    fn sample(&self, out: &mut Vec<u64>) -> Result<(), hw::Error> {
        let u = &self.drv.uut;
        out.push(u.state.val().to_u64().min(st::DONE));
        out.push(u.hot.val().to_u64() & 0xffff);
        out.push(u.src.val().to_u64() & 0xffff);
        out.push(self.dst_traced & 0xffff);
        out.push(u.moves.val().to_u64() & 0xffff);
        // The rounded heats need the read ports only at an exact half: a copy of the driver's
        // view is enough otherwise.
        let l = NiDecisionDriver::<64, 256, 16>::SCALE as u128;
        let d = self.drv.heats.len();
        for x in 0..d {
            let h = self.drv.heats[x] as u128;
            if (2 * h) % (2 * l) == l {
                if let Some((y, ld, n)) = self.drv.tables.inexact_term(x, &self.drv.moves) {
                    return Err(refuse("tie", format!("device {x}'s heat is exactly {}.5 tokens with the term {ld}/{n} of expert {y} inexact in binary64: the CL's rounded heat could show either neighbour", h / l)));
                }
            }
            out.push(((2 * h + l) / (2 * l)).min(u32::MAX as u128) as u64);
            out.push(self.drv.tables.slots_now(x, &self.drv.moves) & 0xff);
        }
        out.extend(self.drv.tables.load.iter().map(|&x| x.min(u32::MAX as u64)));
        Ok(())
    }
    fn finish(mut self: Box<Self>) -> Result<(BalancePlan, u64), hw::Error> {
        Ok(self.drv.plan())
    }
}

impl NiTables {
    /// A term `Load_e / Num_e` of device `d`'s heat after `moves` (the copies the block
    /// reported) that is inexact in binary64, if any.
    pub fn inexact_term(&self, d: usize, moves: &[Move]) -> Option<(u32, u64, u64)> {
        let mut row = self.placement[d].clone();
        row.extend(moves.iter().filter(|m| m.dst_device as usize == d).map(|m| m.expert));
        row.into_iter().find_map(|x| {
            let n = self.placement.iter().filter(|p| p.contains(&x)).count() as u64 + moves.iter().filter(|m| m.expert == x).count() as u64;
            let l = self.load[x as usize];
            (!share_exact(l, n)).then_some((x, l, n))
        })
    }

    /// Device `d`'s free slots after `moves`.
    pub fn slots_now(&self, d: usize, moves: &[Move]) -> u64 {
        self.slots[d] as u64 - moves.iter().filter(|m| m.dst_device as usize == d).count() as u64
    }
}

/// α as `(a, P)` with α = a / P, P = 10^k, from its shortest decimal (`0.2` → (2, 10)).
pub fn alpha_decimal(alpha: f64) -> Option<(u64, u64)> {
    let s = format!("{alpha}");
    let (int, frac) = s.split_once('.').unwrap_or((s.as_str(), ""));
    if frac.len() > 6 || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let a: u64 = format!("{int}{frac}").parse().ok()?;
    Some((a, 10u64.pow(frac.len() as u32)))
}

/// The RTL trigger as the balance loop's `NiTriggerUnit`.
pub struct NiTriggerRtlModel {
    pub uut: Box<NiTriggerRtl>,
    loads: Vec<u64>,
    /// α's numerator (a tie with α = 0 is exact).
    alpha_num: u64,
}

impl NiTriggerRtlModel {
    fn settle(&mut self) {
        crate::cosim::settle(self.uut.as_mut()).expect("the trigger settles");
    }
    fn clock(&mut self) {
        self.settle();
        self.uut.clock.next = true.into();
        self.settle();
        self.uut.clock.next = false.into();
        self.settle();
    }
}

/// [`hw::wafer::balancer::NiTriggerFactory`] of the RTL trigger.
pub fn ni_trigger_rtl(cfg: &TriggerCfg, loads: &[Vec<f64>], since: u64) -> Result<Box<dyn NiTriggerUnit>, hw::Error> {
    let refuse = |what: &str, msg: String| hw::Error::block("ni_trigger rtl", format!("{what}: {msg}"));
    if loads.len() != 1 {
        return Err(refuse("layers", format!("{} layers; the built trigger takes one", loads.len())));
    }
    let n = loads[0].len();
    if n >= 1 << 16 {
        return Err(refuse("devices", format!("{n} devices, at least 2^16")));
    }
    let (a, p) = alpha_decimal(cfg.alpha).ok_or_else(|| refuse("alpha", format!("{} is not a decimal with at most 6 decimals", cfg.alpha)))?;
    let dt_ok = since > cfg.beta_cycles;
    // With Δt ≤ β the loads are not read.
    let l = if dt_ok { check_loads("device loads", &loads[0]).map_err(|e| refuse("device loads", e.to_string()))? } else { vec![0; n] };
    let (np, pa) = (n as u64 * p, p + a);
    if np >= 1 << 32 || pa >= 1 << 32 {
        return Err(refuse("alpha", format!("n·10^k = {np} or 10^k + a = {pa} is at least 2^32 (α = {a}/{p}, n = {n})")));
    }
    let sum: u128 = l.iter().map(|&x| x as u128).sum();
    if dt_ok && sum * p as u128 * (3 * n as u128 + (a / p) as u128 + 3) >= 1 << 52 {
        return Err(refuse("precision", format!("Σ load {sum} × 10^k {p} × (3n + α + 2) is at least 2^52: the CL's f64 imbalance could round across α where the exact one does not")));
    }
    let mut uut = Box::new(NiTriggerRtl::default());
    uut.connect_all();
    let mut m = NiTriggerRtlModel { uut, loads: l, alpha_num: a };
    m.uut.reset.next = true;
    m.clock();
    m.uut.reset.next = false;
    m.uut.cfg_n.next = (n as u64).into();
    m.uut.cfg_np.next = np.into();
    m.uut.cfg_pa.next = pa.into();
    m.uut.cfg_beta.next = cfg.beta_cycles.into();
    m.uut.since.next = since.into();
    m.uut.go.next = true;
    m.clock();
    m.uut.go.next = false;
    m.settle();
    Ok(Box::new(m))
}

impl NiTriggerUnit for NiTriggerRtlModel {
    fn step(&mut self) -> Result<(), hw::Error> {
        let dev = self.uut.dev.val().index();
        self.uut.in_load.next = self.loads.get(dev).copied().unwrap_or(0).into();
        self.clock();
        if self.uut.tie.val() && self.alpha_num != 0 {
            return Err(hw::Error::block("ni_trigger rtl", "tie: the imbalance equals α exactly; the CL's f64 imbalance and α could compare either way"));
        }
        Ok(())
    }
    fn done(&self) -> bool {
        self.uut.done.val()
    }
    fn finish(self: Box<Self>) -> Result<(bool, u64), hw::Error> {
        Ok((self.uut.fire.val(), self.uut.cycles.val().to_u64()))
    }
}

/// The RTL trigger and decision unit (`balance --rtl balancer`).
pub fn ni_units() -> NiUnits {
    NiUnits { decision: ni_decision_rtl, trigger: ni_trigger_rtl }
}
