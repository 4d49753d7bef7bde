//! Driving the `iodie_scheduler` RTL block edge by edge: its gating source (the EIT stream
//! and the requests it pulls through `gate_addr`/`req_idx`), the stamp timebase, and the
//! performance counters summed from its event outputs into the CL's [`IoDieStats`].
//!
//! One driver serves the lockstep tests, the Verilog co-simulation recorder and the
//! package's `--rtl scheduler` swap, so all three drive the block the same way.

use rust_hdl::prelude::*;
use sched::pkg::iodie::{eit_fl, layer_counts_fl, EitEntryFl, RequestGatingFl};
use sched::{ChipletId, ExpertId, ReqId};

use hw::pkg::iodie::IoDieStats;

use super::iodie::{st, IoDieRtlParams, IoDieSchedulerRtl};

/// Inputs of one edge (everything but the gating source, which the driver supplies).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoDieIn {
    pub reset: bool,
    pub stamp: u32,
    pub start: bool,
    pub start_tb: bool,
    pub done: u16,
    pub host_op: u8,
    pub host_slot: u8,
    pub host_t: u32,
    pub host_c: u32,
}

/// The gating source's answer to `gate_addr`/`req_idx`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GateIn {
    pub gate_mask: u16,
    pub gate_count: u32,
    pub req_slot: u8,
    pub req_set: [u64; 4],
    pub req_last: bool,
}

/// Outputs after an edge (the registered outputs of the block).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoDieOut {
    pub state: u8,
    pub icv: u16,
    pub gate_addr: u8,
    pub req_idx: u16,
    pub eit_wr_valid: bool,
    pub eit_wr_addr: u8,
    pub eit_rd_valid: bool,
    pub eit_rd_addr: u8,
    pub eit_rd_mask: u16,
    pub sorter_stage: u8,
    pub order_len: u16,
    pub scan_ptr: u16,
    pub preload_valid: bool,
    pub preload_expert: u8,
    pub grant_valid: bool,
    pub grant_expert: u8,
    pub grant_mask: u16,
    pub grant_start: u8,
    pub grant_icv: u16,
    pub grants: u16,
    pub done_fifo_occ: u16,
    pub defer_valid: bool,
    pub grant_latency: u32,
    pub grant_release: bool,
    pub ev_busy: bool,
    pub ev_scan_start: bool,
    pub ev_scan: bool,
    pub ev_release: bool,
    pub ev_merge: bool,
    pub ev_stale_latch: u16,
    pub ev_stale_pop: u16,
}

impl IoDieOut {
    /// The CL's traced values in `IoDieSchedulerCl`'s Probe order (without the per-stage
    /// sorter bits, which derive from `state` and `sorter_stage`).
    pub fn traced(&self) -> [u64; 20] {
        [
            self.state as u64,
            self.icv as u64,
            self.eit_wr_valid as u64,
            self.eit_wr_addr as u64,
            self.eit_rd_valid as u64,
            self.eit_rd_addr as u64,
            self.eit_rd_mask as u64,
            self.sorter_stage as u64,
            self.order_len as u64,
            self.scan_ptr as u64,
            self.preload_valid as u64,
            self.preload_expert as u64,
            self.grant_valid as u64,
            self.grant_expert as u64,
            self.grant_mask as u64,
            self.grant_start as u64,
            self.grant_icv as u64,
            self.grants as u64,
            self.done_fifo_occ as u64,
            self.defer_valid as u64,
        ]
    }
}

/// The block's port access, object-safe so one driver serves every monomorphized size.
pub trait IoDieRtlPorts: Send {
    fn set_inputs(&mut self, i: &IoDieIn, g: &GateIn);
    /// Settle, rising edge, settle, falling edge (the EIT's read port), settle.
    fn clock_edge(&mut self);
    fn outputs(&self) -> IoDieOut;
    fn qos_slot(&self, slot: usize) -> (u32, u32);
    fn order_entry(&self, i: usize) -> u16;
}

fn settle<U: Block>(uut: &mut U) {
    assert!(simulate(uut, 200), "iodie_scheduler: combinational logic did not settle");
}

impl<const N: usize, const P: usize, const S: usize, const D: usize> IoDieRtlPorts for IoDieSchedulerRtl<N, P, S, D> {
    fn set_inputs(&mut self, i: &IoDieIn, g: &GateIn) {
        let m = |x: u16| -> Bits<N> { (x as u64 & ((1u64 << N) - 1)).into() };
        self.reset.next = i.reset;
        self.stamp.next = (i.stamp as u64).into();
        self.start.next = i.start;
        self.start_tb.next = i.start_tb;
        self.done.next = m(i.done);
        self.host_op.next = (i.host_op as u64).into();
        self.host_slot.next = (i.host_slot as u64).into();
        self.host_t.next = (i.host_t as u64).into();
        self.host_c.next = (i.host_c as u64).into();
        self.gate_mask.next = m(g.gate_mask);
        self.gate_count.next = (g.gate_count as u64).into();
        self.req_slot.next = (g.req_slot as u64).into();
        self.req_set0.next = g.req_set[0].into();
        self.req_set1.next = g.req_set[1].into();
        self.req_set2.next = g.req_set[2].into();
        self.req_set3.next = g.req_set[3].into();
        self.req_last.next = g.req_last;
    }

    fn clock_edge(&mut self) {
        settle(self);
        self.clock.next = true.into();
        settle(self);
        self.clock.next = false.into();
        settle(self);
    }

    fn outputs(&self) -> IoDieOut {
        IoDieOut {
            state: self.state.val().to_u64() as u8,
            icv: self.icv.val().to_u64() as u16,
            gate_addr: self.gate_addr.val().to_u64() as u8,
            req_idx: self.req_idx.val().to_u64() as u16,
            eit_wr_valid: self.eit_wr_valid.val(),
            eit_wr_addr: self.eit_wr_addr.val().to_u64() as u8,
            eit_rd_valid: self.eit_rd_valid.val(),
            eit_rd_addr: self.eit_rd_addr.val().to_u64() as u8,
            eit_rd_mask: self.eit_rd_mask.val().to_u64() as u16,
            sorter_stage: self.sorter_stage.val().to_u64() as u8,
            order_len: self.order_len.val().to_u64() as u16,
            scan_ptr: self.scan_ptr.val().to_u64() as u16,
            preload_valid: self.preload_valid.val(),
            preload_expert: self.preload_expert.val().to_u64() as u8,
            grant_valid: self.grant_valid.val(),
            grant_expert: self.grant_expert.val().to_u64() as u8,
            grant_mask: self.grant_mask.val().to_u64() as u16,
            grant_start: self.grant_start.val().to_u64() as u8,
            grant_icv: self.grant_icv.val().to_u64() as u16,
            grants: self.grants.val().to_u64() as u16,
            done_fifo_occ: self.done_fifo_occ.val().to_u64() as u16,
            defer_valid: self.defer_valid.val(),
            grant_latency: self.grant_latency.val().to_u64() as u32,
            grant_release: self.grant_release.val(),
            ev_busy: self.ev_busy.val(),
            ev_scan_start: self.ev_scan_start.val(),
            ev_scan: self.ev_scan.val(),
            ev_release: self.ev_release.val(),
            ev_merge: self.ev_merge.val(),
            ev_stale_latch: self.ev_stale_latch.val().to_u64() as u16,
            ev_stale_pop: self.ev_stale_pop.val().to_u64() as u16,
        }
    }

    fn qos_slot(&self, slot: usize) -> (u32, u32) {
        IoDieSchedulerRtl::qos_slot(self, slot)
    }

    fn order_entry(&self, i: usize) -> u16 {
        IoDieSchedulerRtl::order_entry(self, i)
    }
}

/// Builds a connected block with 16-bit masks, `slots` QoS slots and `fifo` done-FIFO entries
/// for `p.experts` experts. `None` for a size without a monomorphized variant (built: the
/// package's 256 or 64 slots with 32 entries, and the small sizes the tests use).
pub fn build_block(p: &IoDieRtlParams, slots: usize, fifo: usize) -> Option<Box<dyn IoDieRtlPorts>> {
    fn mk<const P: usize, const S: usize, const D: usize>(p: &IoDieRtlParams) -> Box<dyn IoDieRtlPorts> {
        let mut b = IoDieSchedulerRtl::<16, P, S, D>::new(p);
        b.connect_all();
        Box::new(b)
    }
    macro_rules! by_lanes {
        ($s:literal, $d:literal) => {
            match p.experts.next_power_of_two().max(2) {
                2 => mk::<2, $s, $d>(p),
                4 => mk::<4, $s, $d>(p),
                8 => mk::<8, $s, $d>(p),
                16 => mk::<16, $s, $d>(p),
                32 => mk::<32, $s, $d>(p),
                64 => mk::<64, $s, $d>(p),
                128 => mk::<128, $s, $d>(p),
                256 => mk::<256, $s, $d>(p),
                _ => return None,
            }
        };
    }
    Some(match (slots, fifo) {
        (64, 32) => by_lanes!(64, 32),
        (256, 32) => by_lanes!(256, 32),
        (4, 2) => by_lanes!(4, 2),
        (4, 32) => by_lanes!(4, 32),
        (8, 1) => by_lanes!(8, 1),
        _ => return None,
    })
}

/// The gating source of a layer: the EIT of the first pass, and with token buffering the
/// requests and the rewrite computed from the block's own deferrals.
#[derive(Debug, Clone, Default)]
struct Source {
    first: Vec<EitEntryFl>,
    reqs: Vec<RequestGatingFl>,
    /// A(r) bitmap of each request, built once per layer (the source drives one per edge).
    sets: Vec<[u64; 4]>,
    deferred: Vec<bool>,
    rewrite: Vec<EitEntryFl>,
    chiplets: usize,
    experts: usize,
}

/// The block plus its gating source and performance counters.
pub struct IoDieDriver {
    pub uut: Box<dyn IoDieRtlPorts>,
    src: Source,
    out: IoDieOut,
    pub stats: IoDieStats,
    layer_start_stamp: u32,
    first_grant_done: bool,
    pending_start: Option<bool>,
    /// The inputs applied at the last edge (the co-simulation recorder replays them).
    pub last_in: (IoDieIn, GateIn),
}

impl IoDieDriver {
    /// A driver around a built block; applies one reset edge.
    pub fn new(uut: Box<dyn IoDieRtlPorts>, chiplets: usize, experts: usize) -> Self {
        let mut d = IoDieDriver {
            uut,
            src: Source { chiplets, experts, ..Source::default() },
            out: IoDieOut::default(),
            stats: IoDieStats::default(),
            layer_start_stamp: 0,
            first_grant_done: true,
            pending_start: None,
            last_in: Default::default(),
        };
        d.uut.set_inputs(&IoDieIn { reset: true, ..IoDieIn::default() }, &GateIn::default());
        d.uut.clock_edge();
        d.out = d.uut.outputs();
        d
    }

    /// The next edge starts a layer from its EIT (missing entries are zero).
    pub fn begin_layer(&mut self, eit: &[EitEntryFl]) {
        let mut first = eit.to_vec();
        first.resize(self.src.experts, EitEntryFl::default());
        self.src.first = first;
        self.src.reqs.clear();
        self.src.sets.clear();
        self.src.deferred.clear();
        self.pending_start = Some(false);
    }

    /// The next edge starts a layer from its requests (token buffering when `tb`).
    pub fn begin_layer_requests(&mut self, reqs: &[RequestGatingFl], tb: bool) {
        let (e, n) = (self.src.experts, self.src.chiplets);
        let none = vec![false; reqs.len()];
        self.src.first = eit_fl(&layer_counts_fl(reqs, &none, e, n).expect("checked by the CL"), n).expect("checked by the CL");
        self.src.reqs = reqs.to_vec();
        self.src.sets = reqs.iter().map(RequestGatingFl::expert_set).collect();
        self.src.deferred = none;
        self.pending_start = Some(tb && !reqs.is_empty());
    }

    /// A layer start is waiting for the next edge.
    pub fn start_pending(&self) -> bool {
        self.pending_start.is_some()
    }

    /// Requests deferred at the current layer (valid once `TBUF` is over).
    pub fn deferred(&self) -> &[bool] {
        &self.src.deferred
    }

    pub fn out(&self) -> &IoDieOut {
        &self.out
    }

    /// What the gating source drives for the next edge.
    fn gate(&self, starting: bool) -> GateIn {
        let o = &self.out;
        let rewrite = o.state as u64 == st::REIT && !starting;
        let stream = if rewrite { &self.src.rewrite } else { &self.src.first };
        let a = if starting { 0 } else { o.gate_addr as usize };
        let x = stream.get(a).copied().unwrap_or_default();
        let mut g = GateIn { gate_mask: x.mask, gate_count: x.count, ..GateIn::default() };
        if let Some(r) = self.src.reqs.get(o.req_idx as usize) {
            g.req_slot = r.slot.0 as u8;
            g.req_set = self.src.sets[o.req_idx as usize];
            g.req_last = o.req_idx as usize + 1 == self.src.reqs.len();
        }
        g
    }

    /// One edge at core-cycle `stamp` with `done` arriving and a QoS host operation.
    pub fn edge(&mut self, mut i: IoDieIn) -> &IoDieOut {
        let starting = self.pending_start.take();
        if let Some(tb) = starting {
            i.start = true;
            i.start_tb = tb;
        }
        let g = self.gate(starting.is_some());
        let tbuf_req = (self.out.state as u64 == st::TBUF).then_some(self.out.req_idx as usize);
        self.uut.set_inputs(&i, &g);
        self.last_in = (i, g);
        self.uut.clock_edge();
        let o = self.uut.outputs();
        self.out = o;
        // Gating source: record deferrals; after the last request, the rewrite stream.
        if let Some(r) = tbuf_req {
            if let Some(d) = self.src.deferred.get_mut(r) {
                *d = o.defer_valid;
            }
            if o.state as u64 == st::REIT {
                let (e, n) = (self.src.experts, self.src.chiplets);
                let kept = layer_counts_fl(&self.src.reqs, &self.src.deferred, e, n).expect("checked by the CL");
                self.src.rewrite = eit_fl(&kept, n).expect("checked by the CL");
            }
        }
        // Performance counters (the CL's IoDieStats).
        let s = &mut self.stats;
        if i.start {
            s.layers += 1;
            self.layer_start_stamp = i.stamp;
            self.first_grant_done = false;
        }
        s.layer_sched_cycles += o.ev_busy as u64 + o.ev_scan_start as u64;
        s.scan_cycles += o.ev_scan as u64;
        s.releases += o.ev_release as u64;
        s.done_fifo_merges += o.ev_merge as u64;
        s.stale_done_bits += (o.ev_stale_latch.count_ones() + o.ev_stale_pop.count_ones()) as u64;
        s.deferred += o.defer_valid as u64;
        s.preloads += o.preload_valid as u64;
        if o.grant_valid {
            let dc = o.grant_latency as u64;
            s.decisions += 1;
            s.decision_cycles_sum += dc;
            s.decision_cycles_max = s.decision_cycles_max.max(dc);
            if o.grant_release {
                s.release_decision_cycles_max = s.release_decision_cycles_max.max(dc);
            }
            if !self.first_grant_done {
                self.first_grant_done = true;
                s.first_grant_cycles_max = s.first_grant_cycles_max.max(i.stamp.wrapping_sub(self.layer_start_stamp) as u64);
            }
        }
        &self.out
    }
}

/// The chiplets as the scheduler sees them: the members of a grant's trajectory work until a
/// cycle, then report done; a chiplet may also re-report idle (a spurious pulse, which
/// exercises the stale-done rule and the done FIFO).
pub struct BusyChiplets {
    /// Cycle each chiplet's work ends (`u64::MAX`: idle).
    until: Vec<u64>,
}

impl BusyChiplets {
    pub fn new(chiplets: usize) -> Self {
        BusyChiplets { until: vec![u64::MAX; chiplets] }
    }

    /// The members of `mask` start work ending at the cycle `end` gives (called per member).
    pub fn grant(&mut self, mask: u16, mut end: impl FnMut() -> u64) {
        for (c, u) in self.until.iter_mut().enumerate() {
            if mask >> c & 1 == 1 {
                *u = end();
            }
        }
    }

    /// Done bits at cycle `t`: the chiplets whose work ended, and those `spurious` picks among
    /// the others (asked once per such chiplet).
    pub fn done(&mut self, t: u64, mut spurious: impl FnMut() -> bool) -> u16 {
        let mut d = 0u16;
        for (c, u) in self.until.iter_mut().enumerate() {
            let finished = *u <= t;
            if finished || spurious() {
                if finished {
                    *u = u64::MAX;
                }
                d |= 1 << c;
            }
        }
        d
    }
}

/// A random EIT of `e` experts on `n` chiplets: a density drawn per layer, and few distinct
/// counts so ties exercise the id tie-break.
pub fn random_eit(rng: &mut impl rand::Rng, n: usize, e: usize) -> Vec<EitEntryFl> {
    let density = [0.1, 0.4, 0.9][rng.gen_range(0..3)];
    (0..e)
        .map(|_| {
            if rng.gen_bool(density) {
                let mask = rng.gen_range(1..(1u32 << n)) as u16;
                let hi = [3, 40][rng.gen_range(0..2)];
                let count = mask.count_ones() + rng.gen_range(0..hi);
                EitEntryFl { mask, count }
            } else {
                EitEntryFl::default()
            }
        })
        .collect()
}

/// 1–9 random requests' gating results over `e` experts, `n` chiplets and `slots` QoS slots.
pub fn random_reqs(rng: &mut impl rand::Rng, n: usize, e: usize, slots: u32) -> Vec<RequestGatingFl> {
    (0..rng.gen_range(1..10))
        .map(|_| RequestGatingFl {
            slot: ReqId(rng.gen_range(0..slots)),
            counts: (0..rng.gen_range(1..5)).map(|_| (ExpertId(rng.gen_range(0..e) as u16), ChipletId(rng.gen_range(0..n) as u8), rng.gen_range(1..4u32))).collect(),
        })
        .collect()
}

/// Closed-loop stimulus for the co-simulation vectors: random layers (EIT or, with token
/// buffering, requests), chiplets that report done a random while after each grant, spurious
/// done pulses and QoS host writes — the inputs the block saw at each edge after its reset.
/// Built with the export's 4 QoS slots (the layers have 4 requests; host writes go to slots 0..3).
pub fn closed_loop_stimulus(p: &IoDieRtlParams, cycles: usize, seed: u64) -> Vec<(IoDieIn, GateIn)> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let n = p.rows * p.cols;
    let block = build_block(p, 4, 32).expect("the 4-slot, 32-entry build exists for every size");
    let mut drv = IoDieDriver::new(block, n, p.experts);
    let mut chips = BusyChiplets::new(n);
    let mut out = Vec::with_capacity(cycles);
    for t in 0..cycles as u32 {
        let o = *drv.out();
        if o.grant_valid {
            chips.grant(o.grant_mask, || t as u64 + rng.gen_range(2..24));
        }
        let done = chips.done(t as u64, || rng.gen_bool(0.005));
        let mut i = IoDieIn { stamp: t, done, ..IoDieIn::default() };
        if p.theta_min > 0 && o.state as u64 != st::TBUF && rng.gen_bool(0.03) {
            i.host_op = rng.gen_range(2..4);
            i.host_slot = rng.gen_range(0..4);
        }
        if o.state as u64 == st::DONE && !drv.start_pending() && rng.gen_bool(0.2) {
            if p.theta_min > 0 && rng.gen_bool(0.5) {
                drv.begin_layer_requests(&random_reqs(&mut rng, n, p.experts, 4), true);
            } else {
                drv.begin_layer(&random_eit(&mut rng, n, p.experts));
            }
        }
        drv.edge(i);
        out.push(drv.last_in);
    }
    out
}
