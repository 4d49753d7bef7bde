//! Driving the `chiplet_ctrl` RTL block cycle by cycle with the CL's port structs: `CtrlIn`
//! onto the block's inputs, its outputs back into a `CtrlOut`, the layer start as table
//! writes, and the performance counters summed from its event outputs into `CtrlStats`.
//!
//! One driver serves the lockstep test, the co-simulation recorder and the package's
//! `--rtl chiplet-ctrl` swap, so all three drive the block the same way.

use rust_hdl::prelude::*;

use hw::pkg::chiplet::{ChipletId, CtrlIn, CtrlKnobs, CtrlOut, CtrlSched, CtrlStats, ExpertId};
use hw::pkg::ring::SlotTag;
use hw::pkg::rule5::FreeReport;

use super::chiplet::{ChipletCtrlParams, ChipletCtrlRtl};

/// The block's outputs of one cycle plus its registered state, as plain values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CtrlRtlOut {
    pub out: CtrlOut,
    pub ev_rule1: bool,
    pub ev_releases: u32,
    pub ev_evictions: u32,
    pub ev_reload: bool,
    pub ev_forwards: u32,
    pub ev_rx_stall: bool,
}

/// Registered state after an edge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CtrlRtlState {
    pub live: u64,
    pub landed: u64,
    pub computed: u64,
    pub d2d: u64,
    pub occ: u32,
    pub tail: u32,
    pub head: u32,
    pub pending: u32,
    pub pe_busy: bool,
    pub seq_len: u32,
    pub reload_len: u32,
    pub assigned_len: u32,
    pub quiescent: bool,
    pub error: bool,
}

/// Object-safe port access, so one driver serves every monomorphized size.
pub trait ChipletCtrlPorts: Send {
    /// Inputs of a normal cycle (no layer start, no table write).
    fn set_inputs(&mut self, i: &CtrlIn);
    /// A layer-start cycle (`layer_start`) or a table write (`cfg`), all other inputs idle.
    fn set_config(&mut self, reset: bool, begin: bool, cfg: Option<(u16, u16, u32)>);
    /// Settle the combinational logic (outputs of the cycle are valid after it).
    fn settle(&mut self);
    /// Rising edge, then settle (the next cycle's inputs follow).
    fn rise(&mut self);
    fn outputs(&self) -> CtrlRtlOut;
    fn state(&self) -> CtrlRtlState;
    /// Tag of a slot and whether its expert is granted (read port; settles).
    fn tag(&mut self, slot: u32) -> (SlotTag, bool);
    /// Ring slots that exist.
    fn slots(&self) -> u32;
}

fn settle_block<U: Block>(u: &mut U) {
    // The block is acyclic; rust-hdl converges in a few passes. Failing to is a model bug.
    assert!(simulate(u, 200), "chiplet_ctrl: combinational logic did not settle");
}

/// A block wrapped with its ring size (the `slots` parameter, ≤ S).
pub struct Sized<const S: usize, const E: usize, const Q: usize> {
    pub uut: ChipletCtrlRtl<S, E, Q>,
    slots: u32,
}

impl<const S: usize, const E: usize, const Q: usize> ChipletCtrlPorts for Sized<S, E, Q> {
    fn set_inputs(&mut self, i: &CtrlIn) {
        apply_inputs(&mut self.uut, i);
    }

    fn set_config(&mut self, reset: bool, begin: bool, cfg: Option<(u16, u16, u32)>) {
        apply_config(&mut self.uut, reset, begin, cfg);
    }

    fn settle(&mut self) {
        settle_block(&mut self.uut);
    }

    fn rise(&mut self) {
        self.uut.clock.next = true.into();
        settle_block(&mut self.uut);
    }

    fn outputs(&self) -> CtrlRtlOut {
        let u = &self.uut;
        let tag = |e: u64, k: u64, l: u64| SlotTag { expert: ExpertId(e as u16), k: k as u16, loader: ChipletId(l as u8) };
        let out = CtrlOut {
            ddr_req: u.ddr_req_valid.val().then(|| {
                (u.ddr_req_slot.val().to_u64() as u32, tag(u.ddr_req_expert.val().to_u64(), u.ddr_req_k.val().to_u64(), u.ddr_req_loader.val().to_u64()))
            }),
            rx_slot: u.rx_slot_valid.val().then(|| u.rx_slot.val().to_u64() as u32),
            pe_start: u.pe_start_valid.val().then(|| {
                (u.pe_start_slot.val().to_u64() as u32, tag(u.pe_start_expert.val().to_u64(), u.pe_start_k.val().to_u64(), u.pe_start_loader.val().to_u64()))
            }),
            tx_start: u.tx_start_valid.val().then(|| (u.tx_start_slot.val().to_u64() as u32, ChipletId(u.tx_start_dest.val().to_u64() as u8))),
            done: u.done.val(),
            expert_done: u.expert_done_valid.val().then(|| ExpertId(u.expert_done.val().to_u64() as u16)),
            handoff: u.handoff_valid.val().then(|| {
                (tag(u.handoff_expert.val().to_u64(), u.handoff_k.val().to_u64(), u.handoff_loader.val().to_u64()), ChipletId(u.handoff_dest.val().to_u64() as u8))
            }),
            free: u
                .free_valid
                .val()
                .then(|| FreeReport { granted: u.free_granted.val().to_u64() as u16, preload: u.free_preload.val().to_u64() as u16 }),
            // Flow control's fetch is CL-only (the twin refuses `shard_reserve`).
            fetch: None,
            slot_req: None,
        };
        CtrlRtlOut {
            out,
            ev_rule1: u.ev_rule1.val(),
            ev_releases: u.ev_releases.val().to_u64() as u32,
            ev_evictions: u.ev_evictions.val().to_u64() as u32,
            ev_reload: u.ev_reload.val(),
            ev_forwards: u.ev_forwards.val().to_u64() as u32,
            ev_rx_stall: u.ev_rx_stall.val(),
        }
    }

    fn state(&self) -> CtrlRtlState {
        let u = &self.uut;
        CtrlRtlState {
            live: u.live.val().to_u64(),
            landed: u.landed_bits.val().to_u64(),
            computed: u.computed_bits.val().to_u64(),
            d2d: u.d2d_bits.val().to_u64(),
            occ: u.occ.val().to_u64() as u32,
            tail: u.tail.val().to_u64() as u32,
            head: u.head.val().to_u64() as u32,
            pending: u.pending.val().to_u64() as u32,
            pe_busy: u.pe_busy.val(),
            seq_len: u.seq_len.val().to_u64() as u32,
            reload_len: u.reload_len.val().to_u64() as u32,
            assigned_len: u.assigned_len.val().to_u64() as u32,
            quiescent: u.quiescent.val(),
            error: u.error.val(),
        }
    }

    fn tag(&mut self, slot: u32) -> (SlotTag, bool) {
        self.uut.rd_slot.next = (slot as u64).into();
        settle_block(&mut self.uut);
        let u = &self.uut;
        (SlotTag { expert: ExpertId(u.rd_expert.val().to_u64() as u16), k: u.rd_k.val().to_u64() as u16, loader: ChipletId(u.rd_loader.val().to_u64() as u8) }, u.rd_granted.val())
    }

    fn slots(&self) -> u32 {
        self.slots
    }
}

/// Drives a normal cycle's inputs (clock low; no layer start, no table write).
pub fn apply_inputs<const S: usize, const E: usize, const Q: usize>(u: &mut ChipletCtrlRtl<S, E, Q>, i: &CtrlIn) {
    u.reset.next = false;
    u.layer_start.next = false;
    u.cfg_we.next = false;
    let (sv, sg, se, sm) = match i.sched {
        Some(CtrlSched::Preload { expert, mask }) => (true, false, expert, mask),
        Some(CtrlSched::Grant { expert, mask }) => (true, true, expert, mask),
        None => (false, false, ExpertId(0), 0),
    };
    u.sched_valid.next = sv;
    u.sched_grant.next = sg;
    u.sched_expert.next = (se.0 as u64).into();
    u.sched_mask.next = (sm as u64).into();
    u.ddr_ready.next = i.ddr_ready;
    u.ddr_landed_valid.next = i.ddr_landed.is_some();
    u.ddr_landed_slot.next = (i.ddr_landed.unwrap_or(0) as u64).into();
    let h = i.rx_head.unwrap_or_default();
    u.rx_head_valid.next = i.rx_head.is_some();
    u.rx_head_expert.next = (h.expert.0 as u64).into();
    u.rx_head_k.next = (h.k as u64).into();
    u.rx_head_loader.next = (h.loader.0 as u64 & 15).into();
    u.rx_landed_valid.next = i.rx_landed.is_some();
    u.rx_landed_slot.next = (i.rx_landed.unwrap_or(0) as u64).into();
    u.pe_done_valid.next = i.pe_done.is_some();
    u.pe_done_slot.next = (i.pe_done.unwrap_or(0) as u64).into();
    u.tx_done_valid.next = i.tx_done.is_some();
    u.tx_done_slot.next = (i.tx_done.unwrap_or(0) as u64).into();
    u.tx_ready.next = i.tx_ready;
    let (te, tn) = i.tokens_arrived.unwrap_or((ExpertId(0), 0));
    u.tok_valid.next = i.tokens_arrived.is_some();
    u.tok_expert.next = (te.0 as u64).into();
    u.tok_n.next = (tn as u64).into();
    let ho = i.handoff.unwrap_or_default();
    u.handoff_in_valid.next = i.handoff.is_some();
    u.handoff_in_expert.next = (ho.expert.0 as u64).into();
    u.handoff_in_k.next = (ho.k as u64).into();
    u.handoff_in_loader.next = (ho.loader.0 as u64 & 15).into();
    let ld = i.load.unwrap_or_default();
    u.load_valid.next = i.load.is_some();
    u.load_expert.next = (ld.expert.0 as u64).into();
    u.load_k.next = (ld.k as u64).into();
    u.load_loader.next = (ld.loader.0 as u64 & 15).into();
    u.clock.next = false.into();
}

/// Drives a reset, layer-start or table-write cycle (all other inputs idle).
pub fn apply_config<const S: usize, const E: usize, const Q: usize>(u: &mut ChipletCtrlRtl<S, E, Q>, reset: bool, begin: bool, cfg: Option<(u16, u16, u32)>) {
    apply_inputs(u, &CtrlIn::default());
    u.reset.next = reset;
    u.layer_start.next = begin;
    let (e, m, t) = cfg.unwrap_or((0, 0, 0));
    u.cfg_we.next = cfg.is_some();
    u.cfg_expert.next = (e as u64).into();
    u.cfg_m.next = (m as u64).into();
    u.cfg_tokens.next = (t as u64).into();
}

/// Why a controller cannot be built as RTL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CtrlBuildError {
    #[error("chiplet_ctrl RTL: {slots} ring slots; the built sizes hold at most 64 (and at least 2)")]
    Slots { slots: u32 },
    #[error("chiplet_ctrl RTL: {experts} experts per layer; the built sizes hold at most 256")]
    Experts { experts: usize },
    #[error("chiplet_ctrl RTL: ddr_reserve {reserve} must be below the ring's {slots} slots")]
    Reserve { reserve: u32, slots: u32 },
    #[error("chiplet_ctrl RTL: a {rows}x{cols} package (at most 16 chiplets)")]
    Shape { rows: usize, cols: usize },
    /// The fetch/reservation protocol of sharded loading is modelled in the CL controller
    /// only (docs/rtl.md, "Chiplet controller").
    #[error("chiplet_ctrl RTL: shard_flow = \"reserve\" (sharded loading with flow control) is not implemented in the RTL controller; use shard_flow = \"push\" or run without --rtl chiplet-ctrl")]
    ShardFlow,
}

/// Builds a connected block for `slots` ring slots and `experts` experts: the smallest
/// monomorphized (S, E) that holds them, Q = 64-entry reload and Rule-5 queues (a 3-slot
/// ring under heavy hand-off traffic in the lockstep needed 17).
pub fn build_block(p: &ChipletCtrlParams, experts: usize) -> Result<Box<dyn ChipletCtrlPorts>, CtrlBuildError> {
    fn mk<const S: usize, const E: usize, const Q: usize>(p: &ChipletCtrlParams) -> Box<dyn ChipletCtrlPorts> {
        let mut uut = ChipletCtrlRtl::<S, E, Q>::new(p);
        uut.connect_all();
        Box::new(Sized { uut, slots: p.slots as u32 })
    }
    if !(2..=64).contains(&p.slots) {
        return Err(CtrlBuildError::Slots { slots: p.slots as u32 });
    }
    if experts == 0 || experts > 256 {
        return Err(CtrlBuildError::Experts { experts });
    }
    if p.ddr_reserve as usize >= p.slots {
        return Err(CtrlBuildError::Reserve { reserve: p.ddr_reserve, slots: p.slots as u32 });
    }
    if p.rows == 0 || p.cols == 0 || p.rows * p.cols > 16 {
        return Err(CtrlBuildError::Shape { rows: p.rows, cols: p.cols });
    }
    macro_rules! by_experts {
        ($s:literal, $q:literal) => {
            match experts {
                0..=16 => mk::<$s, 16, $q>(p),
                17..=64 => mk::<$s, 64, $q>(p),
                65..=128 => mk::<$s, 128, $q>(p),
                _ => mk::<$s, 256, $q>(p),
            }
        };
    }
    Ok(match p.slots {
        0..=8 => by_experts!(8, 64),
        9..=16 => by_experts!(16, 64),
        17..=32 => by_experts!(32, 64),
        _ => by_experts!(64, 64),
    })
}

/// The RTL controller behind the CL's interface: ports, layer start, statistics.
pub struct ChipletCtrlTwin {
    pub uut: Box<dyn ChipletCtrlPorts>,
    pub params: ChipletCtrlParams,
    pub stats: CtrlStats,
    /// Last cycle's outputs.
    pub out: CtrlOut,
    pub state: CtrlRtlState,
    pub peak_occupancy: u32,
    pub allocs: u64,
    /// Configuration edges spent on layer starts (not core cycles).
    pub config_edges: u64,
    /// Clock gating while idle (default on): after two cycles with the same quiet inputs
    /// and no output or event, the block is at a fixed point (the only silent change, the
    /// load sequence dropping exhausted entries, is done by then), so further cycles with
    /// those inputs are not clocked. The package's fast-forward does the same for the CL.
    pub gate_idle: bool,
    last_in: CtrlIn,
    idle_run: u32,
    /// Cycles answered by the gate without clocking the block.
    pub gated_cycles: u64,
}

impl ChipletCtrlTwin {
    /// Builds the block for chiplet `id` and applies one reset edge.
    pub fn new(id: u8, rows: usize, cols: usize, slots: u32, experts: usize, knobs: CtrlKnobs) -> Result<Self, CtrlBuildError> {
        if knobs.shard_reserve {
            return Err(CtrlBuildError::ShardFlow);
        }
        let params = ChipletCtrlParams {
            id,
            rows,
            cols,
            slots: slots as usize,
            eager: knobs.eager,
            forward_with_compute: knobs.forward_with_compute,
            ddr_reserve: knobs.ddr_reserve,
            rule5: knobs.rule5,
            helpers: knobs.helpers,
        };
        let uut = build_block(&params, experts)?;
        let mut t = ChipletCtrlTwin {
            uut,
            params,
            stats: CtrlStats::default(),
            out: CtrlOut::default(),
            state: CtrlRtlState::default(),
            peak_occupancy: 0,
            allocs: 0,
            config_edges: 0,
            gate_idle: true,
            last_in: CtrlIn::default(),
            idle_run: 0,
            gated_cycles: 0,
        };
        t.config_edge(true, false, None);
        Ok(t)
    }

    fn config_edge(&mut self, reset: bool, begin: bool, cfg: Option<(u16, u16, u32)>) {
        self.uut.set_config(reset, begin, cfg);
        self.uut.settle();
        self.uut.rise();
        self.state = self.uut.state();
        self.config_edges += 1;
    }

    /// The CL's `begin_layer`: a clear edge, then one table write per expert.
    pub fn begin_layer(&mut self, m_of: &[u16], tokens_missing: &[u32]) {
        self.idle_run = 0;
        self.config_edge(false, true, None);
        for (e, &m) in m_of.iter().enumerate() {
            self.config_edge(false, false, Some((e as u16, m, tokens_missing.get(e).copied().unwrap_or(0))));
        }
    }

    /// One core cycle: the CL's `step`.
    pub fn step(&mut self, inp: &CtrlIn) -> CtrlOut {
        if self.gate_idle && self.idle_run >= 2 && *inp == self.last_in {
            self.gated_cycles += 1;
            self.out = CtrlOut::default();
            return self.out;
        }
        self.uut.set_inputs(inp);
        self.uut.settle();
        let o = self.uut.outputs();
        self.uut.rise();
        self.state = self.uut.state();
        let s = &mut self.stats;
        if o.out.pe_start.is_some() {
            if o.ev_rule1 {
                s.rule1_computes += 1;
            } else {
                s.rule2_computes += 1;
            }
        }
        s.ddr_loads += o.out.ddr_req.is_some() as u64;
        s.sends += o.out.tx_start.is_some() as u64;
        s.receives += inp.rx_landed.is_some() as u64;
        s.releases += o.ev_releases as u64;
        s.rx_stall_cycles += o.ev_rx_stall as u64;
        s.done_pulses += o.out.done as u64;
        s.evictions += o.ev_evictions as u64;
        s.handoffs_out += o.out.handoff.is_some() as u64;
        s.handoffs_in += inp.handoff.is_some() as u64;
        s.reloads += o.ev_reload as u64;
        s.forwards += o.ev_forwards as u64;
        self.allocs += o.out.ddr_req.is_some() as u64 + o.out.rx_slot.is_some() as u64;
        self.peak_occupancy = self.peak_occupancy.max(self.state.occ);
        self.out = o.out;
        let quiet = CtrlIn { ddr_ready: inp.ddr_ready, tx_ready: inp.tx_ready, ..CtrlIn::default() };
        if o == CtrlRtlOut::default() && *inp == quiet {
            self.idle_run = if *inp == self.last_in { self.idle_run + 1 } else { 1 };
        } else {
            self.idle_run = 0;
        }
        self.last_in = *inp;
        o.out
    }

    /// Tag of a slot (the ring's tag RAM, through the read port).
    pub fn tag(&mut self, slot: u32) -> SlotTag {
        self.uut.tag(slot).0
    }
}
