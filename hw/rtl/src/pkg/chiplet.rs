//! Chiplet controller top `chiplet_ctrl` (RTL twin of `hw::pkg::chiplet::ChipletCtrlCl`, the
//! Rules 1–5 controller of paper §IV-C). Cycle for cycle the CL's `step` on every `CtrlOut`
//! field; read the CL's module doc first (the rules, the deadlock escapes). This file says
//! how each of its queues is built.
//!
//! ```text
//!  sched ─► next-hop table (nh mask/expert), granted bits ─┐     cfg ─► m, tokens per expert
//!  ddr_landed/rx_landed/pe_done/tx_done ─► per-slot ctl bits (landed, computed, sent, next)
//!          └─► queue-membership bits rx|lr|lw|tx per slot + S×S age matrix ─► pickers
//!  rx_head ─► full? ─► evict picker (lw newest ▸ tx oldest computed ▸ lr ▸ rx) ─► alloc
//!  PE picker: rx newest (eager) / oldest ▸ lr oldest with its tokens here ─► next-hop ─► tx
//!  tx picker: tx oldest ─► tx_start
//!  Rule 4: reload list (first granted) ▸ Rule-5 FIFO ▸ load sequence (first issuable) ─► alloc
//!  load-side escape: lw newest dropped ─► reload list;  Rule-5 free report;  done
//! ```
//!
//! Hierarchy (docs/rtl.md, "Hierarchy"): this top holds the stage glue (which event of a
//! stage happens, from the sub-blocks' answers); the ring's pointers, the per-slot
//! state (live, control and queue-membership bits, next station, the PE's slot), the
//! per-expert tables, the slots' tag file, the age matrix (the queues' order), the
//! selection circuits, the next-hop units, the Rule-5 FIFO, the reload list, the load
//! sequencer and the Rule-5 report are sub-blocks, each tested on its own.
//!
//! Hardware mapping of the CL's containers:
//! * **Ring** — per-slot live bit (in `ss`), tag (expert, k, loader:
//!   [`super::slot_tags::SlotTagsRtl`], `tg`, written by the two allocations, read by slot
//!   index), the allocation pointer and the head ([`super::ring_alloc::RingAllocRtl`], `rp`);
//!   two allocations per cycle (D2D arrival, then a DDR load), each the first free slot
//!   at/after the pointer: a [`super::ring::RingScanRtl`], the encoder
//!   [`super::ring::RingBufferRtl`] uses (`rp`'s `sc_rx`, `sc_ld`; `sc_hd`, `sc_he` move the
//!   head). `capacity` ≤ S slots exist (a constant mask), so one monomorphization serves every
//!   ring size up to S. The DDR port's room test and the load sequencer's cap count their
//!   slot masks with [`super::popcount::PopCountRtl`] (`pf`: free slots, `pu`: live slots
//!   of ungranted experts), the adder tree that also counts `rp`'s `free` and the ring
//!   buffer's `occ`.
//! * **rx_ready / local_ready / local_wait / tx_q** — a slot is in at most one of them, so
//!   each is a membership bit vector, and one S×S age matrix (`age[i]` bit j: i entered its
//!   queue before j) orders them all: [`super::age_matrix::AgeMatrixRtl`] (`am`), whose
//!   insert ports take the cycle's entries. Oldest of a set X: the i ∈ X older than every other
//!   member; newest: older than none — [`super::picker::AgePickerRtl`], one instance per
//!   selection of the cycle (`sel_ev`, `sel_pe`, `sel_tx`, `sel_esc`). Several slots may
//!   enter queues in one cycle (a grant
//!   moves every waiting pre-load of its expert, then a DDR landing, a D2D landing, a PE
//!   done); they rank after every earlier entry in that order, and the moved pre-loads keep
//!   their mutual order — the CL's `push_back`s in program order. A slot that enters a queue
//!   gets a fresh row and column, so stale bits of slots that left never matter.
//!   `tx_q`'s destination is the slot's `next` register (the CL stores the same value twice).
//! * **reload_q** — [`super::reload_list::ReloadListRtl`] (`rq`), a compacting list of Q
//!   tags (one removal per cycle at the first granted entry, appends behind);
//!   **assigned_q** — [`super::tag_fifo::TagFifoRtl`] (`aq`), a Q-entry FIFO with a
//!   look-through front. Overflow sets `error`.
//! * **load_seq** — [`super::load_seq::LoadSeqRtl`] (`ls`): one entry per pre-load in
//!   arrival order (E positions, valid bits, no compaction): expert, next own micro-slice k,
//!   step and count. This chiplet's share of an expert under Rule 4 is k ≡ p (mod n) — p its
//!   index in the trajectory's ring and n the ring's size (sharded loading: its snake
//!   position and the chiplet count) — so the top pushes k = p and step = n (`ls_p`,
//!   `ls_n`, from the mask and constants) and the sequencer never divides.
//! * **Per expert** — micro-slices `m`, left to compute, tokens missing (and a tokens-here
//!   bit), next-hop mask, granted bit: [`super::expert_table::ExpertTableRtl`] (`xt`),
//!   written through the `cfg_*` port at the layer start (the CL's `begin_layer`) and by the
//!   scheduler messages.
//! * **Per slot** — live bit, control bits, queue membership, next station and the PE's
//!   slot: [`super::slot_state::SlotStateRtl`] (`ss`); the stages hand it their events as
//!   slot masks and read back the sets the next stage chooses from.
//! * **Next-hop logic** — [`super::nexthop::NextHopRtl`]: one per slot for a grant's batch of
//!   forwarded pre-loads (sharded loading), one for a DDR landing, one for the PE pick.
//!
//! Outputs answer the cycle's inputs combinationally (the CL's `step` returns them for the
//! same inputs); state changes at the edge. Event outputs (`ev_*`) feed the twin's
//! `CtrlStats`.
//!
//! Assumptions (what the package guarantees, and the lockstep stimulus obeys): an expert is
//! pre-loaded at most once per layer and before its grant, and granted at most once;
//! `helpers` (sharded loading) comes with sharded trajectories.

use rust_hdl::prelude::*;

use super::age_matrix::AgeMatrixRtl;
use super::expert_table::ExpertTableRtl;
use super::free_report::FreeReportRtl;
use super::load_seq::LoadSeqRtl;
use super::nexthop::{NextHopParams, NextHopRtl};
use super::picker::AgePickerRtl;
use super::popcount::PopCountRtl;
use super::reload_list::ReloadListRtl;
use super::ring_alloc::RingAllocRtl;
use super::slot_state::SlotStateRtl;
use super::slot_tags::SlotTagsRtl;
use super::tag_fifo::TagFifoRtl;

/// Run-time parameters baked into the Verilog as constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChipletCtrlParams {
    pub id: u8,
    pub rows: usize,
    pub cols: usize,
    /// Ring slots that exist (≤ S).
    pub slots: usize,
    pub eager: bool,
    pub forward_with_compute: bool,
    pub ddr_reserve: u32,
    pub rule5: bool,
    /// Sharded loading (helpers, with the sharded trajectories).
    pub helpers: bool,
}

/// The chiplet controller: `S` ring slots at most, `E` experts, `Q`-entry reload and Rule-5
/// queues.
#[derive(LogicBlock)]
pub struct ChipletCtrlRtl<const S: usize, const E: usize, const Q: usize> {
    pub clock: Signal<In, Clock>,
    /// Synchronous reset: empty ring and queues.
    pub reset: Signal<In, Bit>,
    /// Layer start (the CL's `begin_layer` clear; no other input in that cycle).
    pub layer_start: Signal<In, Bit>,
    /// Per-expert table write (layer start): micro-slices and tokens still to arrive.
    pub cfg_we: Signal<In, Bit>,
    pub cfg_expert: Signal<In, Bits<16>>,
    pub cfg_m: Signal<In, Bits<16>>,
    pub cfg_tokens: Signal<In, Bits<32>>,
    /// Scheduler message: Preload (grant = 0) or Grant (1).
    pub sched_valid: Signal<In, Bit>,
    pub sched_grant: Signal<In, Bit>,
    pub sched_expert: Signal<In, Bits<16>>,
    pub sched_mask: Signal<In, Bits<16>>,
    pub ddr_ready: Signal<In, Bit>,
    pub ddr_landed_valid: Signal<In, Bit>,
    pub ddr_landed_slot: Signal<In, Bits<8>>,
    pub rx_head_valid: Signal<In, Bit>,
    pub rx_head_expert: Signal<In, Bits<16>>,
    pub rx_head_k: Signal<In, Bits<16>>,
    pub rx_head_loader: Signal<In, Bits<4>>,
    pub rx_landed_valid: Signal<In, Bit>,
    pub rx_landed_slot: Signal<In, Bits<8>>,
    pub pe_done_valid: Signal<In, Bit>,
    pub pe_done_slot: Signal<In, Bits<8>>,
    pub tx_done_valid: Signal<In, Bit>,
    pub tx_done_slot: Signal<In, Bits<8>>,
    pub tx_ready: Signal<In, Bit>,
    pub tok_valid: Signal<In, Bit>,
    pub tok_expert: Signal<In, Bits<16>>,
    pub tok_n: Signal<In, Bits<32>>,
    pub handoff_in_valid: Signal<In, Bit>,
    pub handoff_in_expert: Signal<In, Bits<16>>,
    pub handoff_in_k: Signal<In, Bits<16>>,
    pub handoff_in_loader: Signal<In, Bits<4>>,
    pub load_valid: Signal<In, Bit>,
    pub load_expert: Signal<In, Bits<16>>,
    pub load_k: Signal<In, Bits<16>>,
    pub load_loader: Signal<In, Bits<4>>,
    /// Tag read port (the package's `ring.tag(slot)`).
    pub rd_slot: Signal<In, Bits<8>>,

    // --- outputs of the cycle (comb)
    pub ddr_req_valid: Signal<Out, Bit>,
    pub ddr_req_slot: Signal<Out, Bits<8>>,
    pub ddr_req_expert: Signal<Out, Bits<16>>,
    pub ddr_req_k: Signal<Out, Bits<16>>,
    pub ddr_req_loader: Signal<Out, Bits<4>>,
    pub rx_slot_valid: Signal<Out, Bit>,
    pub rx_slot: Signal<Out, Bits<8>>,
    pub pe_start_valid: Signal<Out, Bit>,
    pub pe_start_slot: Signal<Out, Bits<8>>,
    pub pe_start_expert: Signal<Out, Bits<16>>,
    pub pe_start_k: Signal<Out, Bits<16>>,
    pub pe_start_loader: Signal<Out, Bits<4>>,
    pub tx_start_valid: Signal<Out, Bit>,
    pub tx_start_slot: Signal<Out, Bits<8>>,
    pub tx_start_dest: Signal<Out, Bits<4>>,
    pub done: Signal<Out, Bit>,
    pub expert_done_valid: Signal<Out, Bit>,
    pub expert_done: Signal<Out, Bits<16>>,
    pub handoff_valid: Signal<Out, Bit>,
    pub handoff_expert: Signal<Out, Bits<16>>,
    pub handoff_k: Signal<Out, Bits<16>>,
    pub handoff_loader: Signal<Out, Bits<4>>,
    pub handoff_dest: Signal<Out, Bits<4>>,
    pub free_valid: Signal<Out, Bit>,
    pub free_granted: Signal<Out, Bits<16>>,
    pub free_preload: Signal<Out, Bits<16>>,
    /// Performance-counter events of the cycle.
    pub ev_rule1: Signal<Out, Bit>,
    pub ev_releases: Signal<Out, Bits<8>>,
    pub ev_evictions: Signal<Out, Bits<2>>,
    pub ev_reload: Signal<Out, Bit>,
    pub ev_forwards: Signal<Out, Bits<8>>,
    pub ev_rx_stall: Signal<Out, Bit>,
    // --- registered state (after the last edge)
    pub live: Signal<Out, Bits<S>>,
    pub landed_bits: Signal<Out, Bits<S>>,
    pub computed_bits: Signal<Out, Bits<S>>,
    pub d2d_bits: Signal<Out, Bits<S>>,
    pub occ: Signal<Out, Bits<8>>,
    pub tail: Signal<Out, Bits<8>>,
    pub head: Signal<Out, Bits<8>>,
    pub pending: Signal<Out, Bits<32>>,
    pub pe_busy: Signal<Out, Bit>,
    pub seq_len: Signal<Out, Bits<16>>,
    pub reload_len: Signal<Out, Bits<8>>,
    pub assigned_len: Signal<Out, Bits<8>>,
    pub quiescent: Signal<Out, Bit>,
    /// Sticky: a queue overflowed (load sequence, reload list or Rule-5 FIFO).
    pub error: Signal<Out, Bit>,
    pub rd_expert: Signal<Out, Bits<16>>,
    pub rd_k: Signal<Out, Bits<16>>,
    pub rd_loader: Signal<Out, Bits<4>>,
    pub rd_granted: Signal<Out, Bit>,

    // --- next-hop logic
    nhb: [NextHopRtl; S],
    nhd: NextHopRtl,
    nhp: NextHopRtl,
    // --- the per-expert tables (m, left, tokens missing, next-hop mask, granted)
    xt: ExpertTableRtl<E>,
    // --- the per-slot state (live, control bits, queue membership, next station, the PE's
    // slot), updated by the stages' event masks
    ss: SlotStateRtl<S>,
    // --- the slots' tags: written by the two allocations, read by slot index (B landing,
    // D PE done, H victim, I pick, L escape, the rd port) and all at once
    tg: SlotTagsRtl<S, 6>,
    // --- the queues' order: the age matrix with the cycle's entries as insert ports
    am: AgeMatrixRtl<S>,
    // --- oldest / newest pickers over the age matrix (one per selection of the cycle)
    /// H: the eviction victim (lw newest ▸ tx oldest computed ▸ lr oldest ▸ rx oldest).
    sel_ev: AgePickerRtl<S>,
    /// I: the PE's next slice (rx newest when eager, else oldest ▸ lr oldest with tokens).
    sel_pe: AgePickerRtl<S>,
    /// J: the D2D send (tx oldest, after the PE pick).
    sel_tx: AgePickerRtl<S>,
    /// L: the load-side escape (lw newest).
    sel_esc: AgePickerRtl<S>,
    // --- the ring's pointers: the two allocations (H: D2D arrival, K: DDR load) and the
    // head, with the ring's circular priority encoders (`RingScanRtl`, as in `RingBufferRtl`)
    rp: RingAllocRtl<S>,
    // --- the Rule-5 tag FIFO (the CL's `assigned_q`)
    aq: TagFifoRtl<Q, E>,
    // --- Rule 4's two sources of DDR loads
    /// The reload list (the CL's `reload_q`): first granted entry first.
    rq: ReloadListRtl<Q, E>,
    /// The load sequence (the CL's `load_seq` / `load_next`): first issuable pre-load.
    ls: LoadSeqRtl<E>,
    // --- M: the Rule-5 free-slot report (the CL's `free_report` and `reported`)
    fr: FreeReportRtl<S>,

    // --- registers: counters
    pending_q: DFF<Bits<32>>,
    had_work: DFF<Bit>,
    err_q: DFF<Bit>,

    // --- combinational locals (stage letters as in the CL's `step`)
    // A: scheduler message
    g: Signal<Local, Bit>,
    pl: Signal<Local, Bit>,
    on_s: Signal<Local, Bit>,
    push_ls: Signal<Local, Bit>,
    ls_p: Signal<Local, Bits<17>>,
    ls_n: Signal<Local, Bits<5>>,
    mset: Signal<Local, Bits<S>>,
    m_lr: Signal<Local, Bits<S>>,
    m_fwd: Signal<Local, Bits<S>>,
    m_rel: Signal<Local, Bits<S>>,
    pending_a: Signal<Local, Bits<32>>,
    had_a: Signal<Local, Bit>,
    // B: DDR landing
    bm: Signal<Local, Bits<S>>,
    eb: Signal<Local, Bits<16>>,
    ldb: Signal<Local, Bits<4>>,
    b_gr: Signal<Local, Bit>,
    nh_b: Signal<Local, Bits<16>>,
    b_lw: Signal<Local, Bit>,
    b_lr: Signal<Local, Bit>,
    b_fwd: Signal<Local, Bit>,
    b_rel: Signal<Local, Bit>,
    // C, D, E, F
    cm: Signal<Local, Bits<S>>,
    dm: Signal<Local, Bits<S>>,
    ed: Signal<Local, Bits<16>>,
    pending_d: Signal<Local, Bits<32>>,
    fm: Signal<Local, Bits<S>>,
    // the eviction picker's set
    px: Signal<Local, Bits<S>>,
    // H: D2D arrival, eviction
    evict: Signal<Local, Bit>,
    v_kind: Signal<Local, Bits<3>>,
    v_found: Signal<Local, Bit>,
    v_slot: Signal<Local, Bits<8>>,
    vm: Signal<Local, Bits<S>>,
    v_e: Signal<Local, Bits<16>>,
    v_k: Signal<Local, Bits<16>>,
    v_ld: Signal<Local, Bits<4>>,
    vr: Signal<Local, Bit>,
    ram: Signal<Local, Bits<S>>,
    // I: PE pick
    tokslot: Signal<Local, Bits<S>>,
    px_pe: Signal<Local, Bits<S>>,
    new_pe: Signal<Local, Bit>,
    pick: Signal<Local, Bit>,
    rule1: Signal<Local, Bit>,
    pk: Signal<Local, Bits<8>>,
    pm: Signal<Local, Bits<S>>,
    pk_e: Signal<Local, Bits<16>>,
    pk_k: Signal<Local, Bits<16>>,
    pk_ld: Signal<Local, Bits<4>>,
    // J: send
    tx_go: Signal<Local, Bit>,
    tslot: Signal<Local, Bits<8>>,
    tm: Signal<Local, Bits<S>>,
    // K: Rule 4 / 5 loads
    kc: Signal<Local, Bit>,
    k2: Signal<Local, Bit>,
    /// Free slots after A..F (`exist & !live1`), counted by the shared adder tree (`pf`,
    /// [`PopCountRtl`]), and whether there is one: the DDR port's room test (`kfree`: free
    /// slots beyond the reserve after the D2D allocation) without the eviction and the
    /// allocation's scan.
    pf: PopCountRtl<S>,
    f_any: Signal<Local, Bit>,
    kfree: Signal<Local, Bit>,
    /// Each slot's expert granted (`gs_tag`), the RX head's (`g_rx`); the live slots of
    /// ungranted experts after A..F (`pu`, the shared adder tree), less the victim (`d_v`), plus
    /// the D2D arrival's (`a_rx`, `rx_okf`: the allocation succeeds).
    gs_tag: Signal<Local, Bits<S>>,
    g_rx: Signal<Local, Bit>,
    pu: PopCountRtl<S>,
    rx_okf: Signal<Local, Bit>,
    d_v: Signal<Local, Bit>,
    a_rx: Signal<Local, Bit>,
    capf: Signal<Local, Bit>,
    issue: Signal<Local, Bit>,
    is_e: Signal<Local, Bits<16>>,
    is_k: Signal<Local, Bits<16>>,
    is_ld: Signal<Local, Bits<4>>,
    kam: Signal<Local, Bits<S>>,
    // L: load-side escape
    esc: Signal<Local, Bit>,
    v2m: Signal<Local, Bits<S>>,
    v2m_pre: Signal<Local, Bits<S>>,
    v2_slot: Signal<Local, Bits<8>>,
    v2_e: Signal<Local, Bits<16>>,
    v2_k: Signal<Local, Bits<16>>,
    v2_ld: Signal<Local, Bits<4>>,
    // M, N: final state, Rule-5 report, done
    te_n: Signal<Local, Bits<16>>,
    um: Signal<Local, Bits<S>>,

    // --- constants
    one8: Constant<Bits<8>>,
    /// The reserve plus the D2D arrival's slot; half the ring (rounded up) and one more.
    reserve1: Constant<Bits<8>>,
    half: Constant<Bits<8>>,
    half1: Constant<Bits<8>>,
    id: Constant<Bits<4>>,
    exist: Constant<Bits<S>>,
    reserve: Constant<Bits<8>>,
    eager: Constant<Bit>,
    rule5: Constant<Bit>,
    helpers: Constant<Bit>,
    all_chips: Constant<Bits<16>>,
    before_me: Constant<Bits<16>>,
    my_pos: Constant<Bits<17>>,
    nchip: Constant<Bits<5>>,
}

impl<const S: usize, const E: usize, const Q: usize> ChipletCtrlRtl<S, E, Q> {
    pub fn new(p: &ChipletCtrlParams) -> Self {
        assert!((1..=64).contains(&S) && (2..=S).contains(&p.slots), "{} ring slots in a {S}-slot controller", p.slots);
        assert!((1..=256).contains(&E) && (1..=64).contains(&Q), "E {E}, Q {Q}");
        assert!((p.ddr_reserve as usize) < p.slots, "ddr_reserve {} of {} slots", p.ddr_reserve, p.slots);
        let nhp = NextHopParams { rows: p.rows, cols: p.cols, id: p.id, shard: p.helpers };
        let n = nhp.chiplets();
        let (_, pos) = nhp.tables();
        let my = nhp.my_pos();
        let before: u64 = (0..n as u64).filter(|&c| (pos >> (4 * c)) & 15 < my).map(|c| 1 << c).sum();
        let exist: u64 = if p.slots >= 64 { u64::MAX } else { (1u64 << p.slots) - 1 };
        let all: u64 = if n >= 16 { 0xffff } else { (1u64 << n) - 1 };
        Self {
            clock: Default::default(),
            reset: Default::default(),
            layer_start: Default::default(),
            cfg_we: Default::default(),
            cfg_expert: Default::default(),
            cfg_m: Default::default(),
            cfg_tokens: Default::default(),
            sched_valid: Default::default(),
            sched_grant: Default::default(),
            sched_expert: Default::default(),
            sched_mask: Default::default(),
            ddr_ready: Default::default(),
            ddr_landed_valid: Default::default(),
            ddr_landed_slot: Default::default(),
            rx_head_valid: Default::default(),
            rx_head_expert: Default::default(),
            rx_head_k: Default::default(),
            rx_head_loader: Default::default(),
            rx_landed_valid: Default::default(),
            rx_landed_slot: Default::default(),
            pe_done_valid: Default::default(),
            pe_done_slot: Default::default(),
            tx_done_valid: Default::default(),
            tx_done_slot: Default::default(),
            tx_ready: Default::default(),
            tok_valid: Default::default(),
            tok_expert: Default::default(),
            tok_n: Default::default(),
            handoff_in_valid: Default::default(),
            handoff_in_expert: Default::default(),
            handoff_in_k: Default::default(),
            handoff_in_loader: Default::default(),
            load_valid: Default::default(),
            load_expert: Default::default(),
            load_k: Default::default(),
            load_loader: Default::default(),
            rd_slot: Default::default(),
            ddr_req_valid: Default::default(),
            ddr_req_slot: Default::default(),
            ddr_req_expert: Default::default(),
            ddr_req_k: Default::default(),
            ddr_req_loader: Default::default(),
            rx_slot_valid: Default::default(),
            rx_slot: Default::default(),
            pe_start_valid: Default::default(),
            pe_start_slot: Default::default(),
            pe_start_expert: Default::default(),
            pe_start_k: Default::default(),
            pe_start_loader: Default::default(),
            tx_start_valid: Default::default(),
            tx_start_slot: Default::default(),
            tx_start_dest: Default::default(),
            done: Default::default(),
            expert_done_valid: Default::default(),
            expert_done: Default::default(),
            handoff_valid: Default::default(),
            handoff_expert: Default::default(),
            handoff_k: Default::default(),
            handoff_loader: Default::default(),
            handoff_dest: Default::default(),
            free_valid: Default::default(),
            free_granted: Default::default(),
            free_preload: Default::default(),
            ev_rule1: Default::default(),
            ev_releases: Default::default(),
            ev_evictions: Default::default(),
            ev_reload: Default::default(),
            ev_forwards: Default::default(),
            ev_rx_stall: Default::default(),
            live: Default::default(),
            landed_bits: Default::default(),
            computed_bits: Default::default(),
            d2d_bits: Default::default(),
            occ: Default::default(),
            tail: Default::default(),
            head: Default::default(),
            pending: Default::default(),
            pe_busy: Default::default(),
            seq_len: Default::default(),
            reload_len: Default::default(),
            assigned_len: Default::default(),
            quiescent: Default::default(),
            error: Default::default(),
            rd_expert: Default::default(),
            rd_k: Default::default(),
            rd_loader: Default::default(),
            rd_granted: Default::default(),
            nhb: std::array::from_fn(|_| NextHopRtl::new(&nhp)),
            nhd: NextHopRtl::new(&nhp),
            nhp: NextHopRtl::new(&nhp),
            xt: ExpertTableRtl::new(),
            ss: SlotStateRtl::new(p.forward_with_compute),
            tg: SlotTagsRtl::new(),
            am: AgeMatrixRtl::new(),
            sel_ev: AgePickerRtl::new(),
            sel_pe: AgePickerRtl::new(),
            sel_tx: AgePickerRtl::new(),
            sel_esc: AgePickerRtl::new(),
            rp: RingAllocRtl::new(p.slots),
            aq: TagFifoRtl::new(),
            rq: ReloadListRtl::new(),
            ls: LoadSeqRtl::new(),
            fr: FreeReportRtl::new(p.slots, p.ddr_reserve),
            pending_q: Default::default(),
            had_work: Default::default(),
            err_q: Default::default(),
            g: Default::default(),
            pl: Default::default(),
            on_s: Default::default(),
            push_ls: Default::default(),
            ls_p: Default::default(),
            ls_n: Default::default(),
            mset: Default::default(),
            m_lr: Default::default(),
            m_fwd: Default::default(),
            m_rel: Default::default(),
            pending_a: Default::default(),
            had_a: Default::default(),
            bm: Default::default(),
            eb: Default::default(),
            ldb: Default::default(),
            b_gr: Default::default(),
            nh_b: Default::default(),
            b_lw: Default::default(),
            b_lr: Default::default(),
            b_fwd: Default::default(),
            b_rel: Default::default(),
            cm: Default::default(),
            dm: Default::default(),
            ed: Default::default(),
            pending_d: Default::default(),
            fm: Default::default(),
            px: Default::default(),
            evict: Default::default(),
            v_kind: Default::default(),
            v_found: Default::default(),
            v_slot: Default::default(),
            vm: Default::default(),
            v_e: Default::default(),
            v_k: Default::default(),
            v_ld: Default::default(),
            vr: Default::default(),
            ram: Default::default(),
            tokslot: Default::default(),
            px_pe: Default::default(),
            new_pe: Default::default(),
            pick: Default::default(),
            rule1: Default::default(),
            pk: Default::default(),
            pm: Default::default(),
            pk_e: Default::default(),
            pk_k: Default::default(),
            pk_ld: Default::default(),
            tx_go: Default::default(),
            tslot: Default::default(),
            tm: Default::default(),
            kc: Default::default(),
            k2: Default::default(),
            pf: PopCountRtl::new(),
            f_any: Default::default(),
            kfree: Default::default(),
            gs_tag: Default::default(),
            g_rx: Default::default(),
            pu: PopCountRtl::new(),
            rx_okf: Default::default(),
            d_v: Default::default(),
            a_rx: Default::default(),
            capf: Default::default(),
            issue: Default::default(),
            is_e: Default::default(),
            is_k: Default::default(),
            is_ld: Default::default(),
            kam: Default::default(),
            esc: Default::default(),
            v2m: Default::default(),
            v2m_pre: Default::default(),
            v2_slot: Default::default(),
            v2_e: Default::default(),
            v2_k: Default::default(),
            v2_ld: Default::default(),
            te_n: Default::default(),
            um: Default::default(),
            one8: Constant::new(1u64.into()),
            reserve1: Constant::new((p.ddr_reserve as u64 + 1).into()),
            half: Constant::new((p.slots as u64).div_ceil(2).into()),
            half1: Constant::new(((p.slots as u64).div_ceil(2) + 1).into()),
            id: Constant::new((p.id as u64).into()),
            exist: Constant::new(exist.into()),
            reserve: Constant::new((p.ddr_reserve as u64).into()),
            eager: Constant::new(p.eager),
            rule5: Constant::new(p.rule5),
            helpers: Constant::new(p.helpers),
            all_chips: Constant::new(all.into()),
            before_me: Constant::new(before.into()),
            my_pos: Constant::new(my.into()),
            nchip: Constant::new((n as u64).into()),
        }
    }
}

impl<const S: usize, const E: usize, const Q: usize> Logic for ChipletCtrlRtl<S, E, Q> {
    #[hdl_gen]
    fn update(&mut self) {
        // ---- clocks and hold defaults
        dff_setup!(self, clock, pending_q, had_work, err_q);
        self.rp.clock.next = self.clock.val();
        self.rp.reset.next = self.reset.val();
        self.ss.clock.next = self.clock.val();
        self.ss.reset.next = self.reset.val();
        self.xt.clock.next = self.clock.val();
        self.xt.reset.next = self.reset.val();
        self.xt.layer_start.next = self.layer_start.val();
        self.tg.clock.next = self.clock.val();
        // Tags need no reset (read only while live; see slot_tags.rs).
        self.tg.reset.next = false;
        self.am.clock.next = self.clock.val();
        self.am.reset.next = self.reset.val();
        self.aq.clock.next = self.clock.val();
        self.aq.reset.next = self.reset.val();
        self.rq.clock.next = self.clock.val();
        self.rq.reset.next = self.reset.val();
        self.ls.clock.next = self.clock.val();
        self.ls.reset.next = self.reset.val();
        self.ls.clear.next = self.layer_start.val();
        self.fr.clock.next = self.clock.val();
        self.fr.reset.next = self.reset.val();

        // ---- registered outputs
        self.live.next = self.ss.live.val();
        self.landed_bits.next = self.ss.landed.val();
        self.computed_bits.next = self.ss.computed.val();
        self.d2d_bits.next = self.ss.d2d.val();
        self.tail.next = self.rp.tail.val();
        self.head.next = self.rp.head.val();
        self.pending.next = self.pending_q.q.val();
        self.pe_busy.next = self.ss.pe_busy.val();
        self.reload_len.next = self.rq.len.val();
        self.assigned_len.next = self.aq.len.val();
        self.error.next = self.err_q.q.val();
        self.occ.next = self.ss.occ.val();
        self.seq_len.next = self.ls.len.val();
        self.quiescent.next = !self.ss.live.val().any()
            & !self.pending_q.q.val().any()
            & !self.ls.len.val().any()
            & !self.ss.pe_busy.val()
            & !self.rq.len.val().any()
            & !self.aq.len.val().any();
        self.tg.rd_slot[5].next = self.rd_slot.val();
        self.rd_expert.next = self.tg.rd_expert[5].val();
        self.rd_k.next = self.tg.rd_k[5].val();
        self.rd_loader.next = self.tg.rd_loader[5].val();
        self.rd_granted.next = self.xt.granted.val().get_bit(self.rd_expert.val().index());

        // ---- output defaults
        self.ddr_req_valid.next = false;
        self.ddr_req_slot.next = 0.into();
        self.ddr_req_expert.next = 0.into();
        self.ddr_req_k.next = 0.into();
        self.ddr_req_loader.next = 0.into();
        self.rx_slot_valid.next = false;
        self.rx_slot.next = 0.into();
        self.pe_start_valid.next = false;
        self.pe_start_slot.next = 0.into();
        self.pe_start_expert.next = 0.into();
        self.pe_start_k.next = 0.into();
        self.pe_start_loader.next = 0.into();
        self.tx_start_valid.next = false;
        self.tx_start_slot.next = 0.into();
        self.tx_start_dest.next = 0.into();
        self.done.next = false;
        self.expert_done_valid.next = false;
        self.expert_done.next = 0.into();
        self.handoff_valid.next = false;
        self.handoff_expert.next = 0.into();
        self.handoff_k.next = 0.into();
        self.handoff_loader.next = 0.into();
        self.handoff_dest.next = 0.into();
        self.ev_rule1.next = false;
        self.ev_releases.next = 0.into();
        self.ev_evictions.next = 0.into();
        self.ev_reload.next = false;
        self.ev_forwards.next = 0.into();
        self.ev_rx_stall.next = false;

        // ================= A: scheduler message (load sequence, next-hop table)
        self.g.next = self.sched_valid.val() & self.sched_grant.val();
        self.pl.next = self.sched_valid.val() & !self.sched_grant.val();
        self.on_s.next = self.sched_mask.val().get_bit(self.id.val().index());
        // The per-expert tables: a grant writes the expert's next-hop mask, its micro-slices
        // left (on the mask) and its granted bit; `m_s`, `granted_a` answer with it.
        self.xt.sched_expert.next = self.sched_expert.val();
        self.xt.grant.next = self.g.val();
        self.xt.grant_mask.next = self.sched_mask.val();
        self.xt.grant_on.next = self.on_s.val();
        self.xt.cfg_we.next = self.cfg_we.val();
        self.xt.cfg_expert.next = self.cfg_expert.val();
        self.xt.cfg_m.next = self.cfg_m.val();
        self.xt.cfg_tokens.next = self.cfg_tokens.val();
        self.pending_a.next = self.pending_q.q.val();
        self.had_a.next = self.had_work.q.val();
        if self.g.val() & self.on_s.val() {
            self.pending_a.next = self.pending_q.q.val() + bit_cast::<32, 16>(self.xt.m_s.val());
            self.had_a.next = true;
        }
        // Pre-load: a load-sequence entry with this chiplet's share k ≡ p (mod n).
        self.push_ls.next = self.pl.val() & (self.on_s.val() | self.helpers.val()) & !self.rule5.val();
        self.ls_p.next = self.my_pos.val();
        self.ls_n.next = self.nchip.val();
        if !self.helpers.val() {
            self.ls_p.next = 0.into();
            self.ls_n.next = 0.into();
            for c in 0..16 {
                if self.sched_mask.val().get_bit(c) & self.all_chips.val().get_bit(c) {
                    self.ls_n.next = self.ls_n.val() + 1;
                    if self.before_me.val().get_bit(c) {
                        self.ls_p.next = self.ls_p.val() + 1;
                    }
                }
            }
        }
        self.ls.push.next = self.push_ls.val();
        self.ls.push_expert.next = self.sched_expert.val();
        self.ls.push_k.next = self.ls_p.val();
        self.ls.push_step.next = self.ls_n.val();
        self.ls.push_m.next = self.xt.m_s.val();
        self.ls.push_granted.next = self.xt.granted_a.val().get_bit(self.sched_expert.val().index());
        // A grant marks the expert's waiting entries granted.
        self.ls.grant.next = self.g.val();
        self.ls.grant_expert.next = self.sched_expert.val();
        // Grant: the waiting pre-loads of the expert (local_wait) may be computed, or (off
        // the trajectory, sharded loading) forwarded / released.
        self.mset.next = 0.into();
        for i in 0..S {
            self.nhb[i].mask.next = self.sched_mask.val();
            self.nhb[i].loader.next = self.tg.loader[i].val();
            if self.g.val() & self.ss.lw.val().get_bit(i) & (self.tg.expert[i].val() == self.sched_expert.val()) {
                self.mset.next = self.mset.val().replace_bit(i, true);
            }
        }
        self.m_lr.next = 0.into();
        self.m_fwd.next = 0.into();
        self.m_rel.next = 0.into();
        if self.on_s.val() {
            self.m_lr.next = self.mset.val();
        } else {
            for i in 0..S {
                if self.mset.val().get_bit(i) {
                    if self.nhb[i].valid.val() {
                        self.m_fwd.next = self.m_fwd.val().replace_bit(i, true);
                    } else {
                        self.m_rel.next = self.m_rel.val().replace_bit(i, true);
                    }
                }
            }
        }

        // ================= B: DDR landing
        self.bm.next = 0.into();
        if self.ddr_landed_valid.val() {
            self.bm.next = self.bm.val().replace_bit(self.ddr_landed_slot.val().index(), true);
        }
        self.tg.rd_slot[0].next = self.ddr_landed_slot.val();
        self.eb.next = self.tg.rd_expert[0].val();
        self.ldb.next = self.tg.rd_loader[0].val();
        self.b_gr.next = self.xt.granted_a.val().get_bit(self.eb.val().index());
        self.xt.nh_expert[0].next = self.eb.val();
        self.nh_b.next = self.xt.nh_mask[0].val();
        self.nhd.mask.next = self.nh_b.val();
        self.nhd.loader.next = self.ldb.val();
        self.b_lw.next = self.ddr_landed_valid.val() & !self.b_gr.val();
        self.b_lr.next = self.ddr_landed_valid.val() & self.b_gr.val() & self.nh_b.val().get_bit(self.id.val().index());
        self.b_fwd.next = self.ddr_landed_valid.val() & self.b_gr.val() & !self.nh_b.val().get_bit(self.id.val().index()) & self.nhd.valid.val();
        self.b_rel.next = self.ddr_landed_valid.val() & self.b_gr.val() & !self.nh_b.val().get_bit(self.id.val().index()) & !self.nhd.valid.val();

        // ================= C: D2D landing; D: PE done; E: tokens; F: send done
        self.cm.next = 0.into();
        if self.rx_landed_valid.val() {
            self.cm.next = self.cm.val().replace_bit(self.rx_landed_slot.val().index(), true);
        }
        self.dm.next = 0.into();
        if self.pe_done_valid.val() {
            self.dm.next = self.dm.val().replace_bit(self.pe_done_slot.val().index(), true);
        }
        self.fm.next = 0.into();
        if self.tx_done_valid.val() {
            self.fm.next = self.fm.val().replace_bit(self.tx_done_slot.val().index(), true);
        }
        self.tg.rd_slot[1].next = self.pe_done_slot.val();
        self.ed.next = self.tg.rd_expert[1].val();
        // One micro-slice of the expert less to compute; the last one ends it here.
        self.xt.done_valid.next = self.pe_done_valid.val();
        self.xt.done_expert.next = self.ed.val();
        if self.xt.done_last.val() {
            self.expert_done_valid.next = true;
            self.expert_done.next = self.ed.val();
        }
        self.pending_d.next = self.pending_a.val();
        if self.pe_done_valid.val() {
            self.pending_d.next = self.pending_a.val() - 1;
        }
        self.xt.tok_valid.next = self.tok_valid.val();
        self.xt.tok_expert.next = self.tok_expert.val();
        self.xt.tok_n.next = self.tok_n.val();
        // The per-slot state (`ss`) applies A..F: Rule 3's releases, the queues after the
        // insertions (the grant's batch, the DDR landing's kind, the D2D landing, the PE done
        // pushed to tx_q), the forwarded slices' next stations.
        self.ss.batch.next = self.mset.val();
        self.ss.batch_lr.next = self.m_lr.val();
        self.ss.batch_fwd.next = self.m_fwd.val();
        self.ss.batch_rel.next = self.m_rel.val();
        for i in 0..S {
            self.ss.batch_dest[i].next = self.nhb[i].dest.val();
        }
        self.ss.ddr.next = self.bm.val();
        self.ss.ddr_slot.next = self.ddr_landed_slot.val();
        self.ss.ddr_lw.next = self.b_lw.val();
        self.ss.ddr_lr.next = self.b_lr.val();
        self.ss.ddr_fwd.next = self.b_fwd.val();
        self.ss.ddr_rel.next = self.b_rel.val();
        self.ss.ddr_dest.next = self.nhd.dest.val();
        self.ss.rx_land.next = self.cm.val();
        self.ss.pe_done.next = self.dm.val();
        self.ss.pe_done_valid.next = self.pe_done_valid.val();
        self.ss.tx_done.next = self.fm.val();
        self.ev_releases.next = self.ss.n_rel.val();
        self.ev_forwards.next = self.ss.n_fwd.val();
        // The queues' order (`am`): this cycle's entries rank grant batch < DDR < D2D < PE
        // done. (A slot that computed while queued for its send — forward with compute —
        // stays where it is: only a push after the compute enters it anew.)
        self.am.batch.next = self.mset.val();
        self.am.ddr.next = self.bm.val();
        self.am.d2d.next = self.cm.val();
        self.am.pe_tx.next = self.ss.pe_tx.val();

        // ================= H: D2D arrival (the receiver's ring is the credit); deadlock escape
        // (Each slot's expert granted, for the ungranted count of K.)
        self.gs_tag.next = 0.into();
        for i in 0..S {
            if self.xt.granted_a.val().get_bit(self.tg.expert[i].val().index()) {
                self.gs_tag.next = self.gs_tag.val().replace_bit(i, true);
            }
        }
        self.evict.next = self.rx_head_valid.val() & !(self.exist.val() & !self.ss.live1.val()).any();
        self.v_kind.next = 0.into();
        self.px.next = 0.into();
        if self.ss.lw1.val().any() {
            self.v_kind.next = 1.into();
            self.px.next = self.ss.lw1.val();
        } else if (self.ss.tx1.val() & self.ss.computed1.val() & !self.ss.pe_m.val()).any() {
            self.v_kind.next = 2.into();
            self.px.next = self.ss.tx1.val() & self.ss.computed1.val() & !self.ss.pe_m.val();
        } else if (self.ss.lr1.val() & !self.ss.pe_m.val()).any() {
            self.v_kind.next = 3.into();
            self.px.next = self.ss.lr1.val() & !self.ss.pe_m.val();
        } else if (self.ss.rx1.val() & !self.ss.pe_m.val()).any() {
            self.v_kind.next = 4.into();
            self.px.next = self.ss.rx1.val() & !self.ss.pe_m.val();
        }
        // Waiting pre-loads go newest first (the CL's `pop_back`), the others oldest first.
        self.sel_ev.req.next = self.px.val();
        self.sel_ev.newest.next = self.ss.lw1.val().any();
        for i in 0..S {
            self.sel_ev.age[i].next = self.am.age_e[i].val();
        }
        self.v_found.next = self.evict.val() & self.sel_ev.found.val();
        self.v_slot.next = self.sel_ev.slot.val();
        self.vm.next = 0.into();
        if self.v_found.val() {
            self.vm.next = self.sel_ev.onehot.val();
        }
        self.tg.rd_slot[2].next = self.v_slot.val();
        self.v_e.next = self.tg.rd_expert[2].val();
        self.v_k.next = self.tg.rd_k[2].val();
        self.v_ld.next = self.tg.rd_loader[2].val();
        self.ss.rd_victim.next = self.v_slot.val();
        self.vr.next = self.v_found.val() & (self.v_kind.val() != 2);
        if self.v_found.val() & (self.v_kind.val() == 2) {
            // A computed slice waiting for its send: the next station loads it itself.
            self.handoff_valid.next = true;
            self.handoff_expert.next = self.v_e.val();
            self.handoff_k.next = self.v_k.val();
            self.handoff_loader.next = self.v_ld.val();
            self.handoff_dest.next = self.ss.victim_next.val();
        }
        self.ss.victim.next = self.vm.val();
        // First free slot at/after the allocation pointer (`rp`, the ring's priority encoder).
        self.rp.live2.next = self.ss.live2.val();
        self.rp.rx_want.next = self.rx_head_valid.val();
        self.ram.next = self.rp.rx_m.val();
        if self.rp.rx_ok.val() {
            self.rx_slot_valid.next = true;
            self.rx_slot.next = self.rp.rx_slot.val();
        }
        // The allocated slot takes the head's tag.
        self.tg.wa_en.next = self.rp.rx_ok.val();
        self.tg.wa_slot.next = self.rp.rx_slot.val();
        self.tg.wa_expert.next = self.rx_head_expert.val();
        self.tg.wa_k.next = self.rx_head_k.val();
        self.tg.wa_loader.next = self.rx_head_loader.val();
        self.ev_rx_stall.next = self.rx_head_valid.val() & !self.rp.rx_ok.val();
        self.ss.rx_alloc.next = self.ram.val();

        // ================= I: PE — Rule 1 (received, newest first when eager), else Rule 2
        self.tokslot.next = 0.into();
        for i in 0..S {
            if self.xt.tok_ok_a.val().get_bit(self.tg.expert[i].val().index()) {
                self.tokslot.next = self.tokslot.val().replace_bit(i, true);
            }
        }
        self.rule1.next = self.ss.rx2.val().any();
        self.px_pe.next = self.ss.lr2.val() & self.tokslot.val();
        self.new_pe.next = false;
        if self.rule1.val() {
            self.px_pe.next = self.ss.rx2.val();
            self.new_pe.next = self.eager.val();
        }
        self.sel_pe.req.next = self.px_pe.val();
        self.sel_pe.newest.next = self.new_pe.val();
        for i in 0..S {
            self.sel_pe.age[i].next = self.am.age_e[i].val();
        }
        self.pick.next = !self.ss.pe_busy_a.val() & self.sel_pe.found.val();
        self.pk.next = self.sel_pe.slot.val();
        self.pm.next = 0.into();
        self.tg.rd_slot[3].next = self.pk.val();
        self.pk_e.next = self.tg.rd_expert[3].val();
        self.pk_k.next = self.tg.rd_k[3].val();
        self.pk_ld.next = self.tg.rd_loader[3].val();
        self.xt.nh_expert[1].next = self.pk_e.val();
        self.nhp.mask.next = self.xt.nh_mask[1].val();
        self.nhp.loader.next = self.pk_ld.val();
        if self.pick.val() {
            self.pm.next = self.sel_pe.onehot.val();
            self.pe_start_valid.next = true;
            self.pe_start_slot.next = self.pk.val();
            self.pe_start_expert.next = self.pk_e.val();
            self.pe_start_k.next = self.pk_k.val();
            self.pe_start_loader.next = self.pk_ld.val();
            self.ev_rule1.next = self.rule1.val();
        }
        // The picked slot takes the PE and its next station (or, with none, needs no send).
        self.ss.pick.next = self.pick.val();
        self.ss.pick_slot.next = self.pk.val();
        self.ss.pick_m.next = self.pm.val();
        self.ss.pick_next.next = self.nhp.valid.val();
        self.ss.pick_dest.next = self.nhp.dest.val();
        // The picked slot is the newest queue entry from here on.
        self.am.pick.next = self.pm.val();

        // ================= J: D2D send, oldest first
        self.sel_tx.req.next = self.ss.tx3.val();
        self.sel_tx.newest.next = false;
        for i in 0..S {
            self.sel_tx.age[i].next = self.am.age_p[i].val();
        }
        self.tx_go.next = self.tx_ready.val() & self.sel_tx.found.val();
        self.tslot.next = self.sel_tx.slot.val();
        self.tm.next = 0.into();
        if self.tx_go.val() {
            self.tm.next = self.sel_tx.onehot.val();
            self.tx_start_valid.next = true;
            self.tx_start_slot.next = self.tslot.val();
            self.tx_start_dest.next = self.ss.send_next.val();
        }
        self.ss.rd_send.next = self.tslot.val();
        self.ss.send.next = self.tm.val();

        // ================= K: Rule 4 (reloads of granted experts first), Rule 5, load sequence
        // The free slots beyond the reserve after the D2D allocation (`rp.free`), from the
        // free slots after A..F (`f1` = `pf.count`): with one, there is no eviction and the
        // arrival (if any) takes one, `f1 - rx_head_valid`; with none, an eviction frees at
        // most the slot the arrival then takes, 0. So `rp.free > reserve` is `f1 > reserve +
        // rx_head_valid`, equal for every input; the eviction choice and the allocation's scan
        // no longer sit in front of the DDR port's decision.
        self.pf.bits.next = self.exist.val() & !self.ss.live1.val();
        self.f_any.next = (self.exist.val() & !self.ss.live1.val()).any();
        self.kfree.next = self.pf.count.val() > self.reserve.val();
        if self.rx_head_valid.val() {
            self.kfree.next = self.pf.count.val() > self.reserve1.val();
        }
        self.kc.next = self.ddr_ready.val() & self.kfree.val();
        // Rule 4 first: the reload list, as the CL holds it at this point (the hand-off
        // received, then the evicted slice behind it), serves its first granted entry.
        self.rq.hand_valid.next = self.handoff_in_valid.val();
        self.rq.hand_expert.next = self.handoff_in_expert.val();
        self.rq.hand_k.next = self.handoff_in_k.val();
        self.rq.hand_loader.next = self.handoff_in_loader.val();
        self.rq.evict_valid.next = self.vr.val();
        self.rq.evict_expert.next = self.v_e.val();
        self.rq.evict_k.next = self.v_k.val();
        self.rq.evict_loader.next = self.v_ld.val();
        self.rq.granted.next = self.xt.granted_a.val();
        self.rq.take.next = self.kc.val();
        // Rule-5 FIFO with this cycle's assignment behind; k2 pops its front.
        self.aq.push.next = self.load_valid.val();
        self.aq.push_expert.next = self.load_expert.val();
        self.aq.push_k.next = self.load_k.val();
        self.aq.push_loader.next = self.load_loader.val();
        self.aq.granted.next = self.xt.granted_a.val();
        self.k2.next = self.kc.val() & !self.rq.found.val() & self.aq.len_in.val().any();
        self.aq.pop.next = self.k2.val();
        // Load sequence: pre-loads may take at most half the ring while ungranted.
        // The live slots of ungranted experts after H (`live3`, the D2D arrival's slot with
        // the head's expert), counted without the eviction and the allocation in front of
        // the count: `live3` is `live1` less the victim (one slot at most) plus the arrival's
        // slot (free before it), so the count is `c0 = |live1 & !gs_tag|` (`pu.count`), less one
        // if the victim was such a slot (`d_v`), plus one if the arrival is allocated and of
        // an ungranted expert (`a_rx`). The allocation succeeds (`rx_okf`, equal to
        // `rp.rx_ok`) when the RX head is valid and a slot was free after A..F or the
        // victim's slot exists. `ung + ung >= slots` is `ung >= half` (⌈slots / 2⌉); the three
        // thresholds of `c0` are compared side by side and the victim and the arrival select.
        self.g_rx.next = self.xt.granted_a.val().get_bit(self.rx_head_expert.val().index());
        self.pu.bits.next = self.ss.live1.val() & !self.gs_tag.val();
        self.rx_okf.next = self.rx_head_valid.val() & (self.f_any.val() | (self.vm.val() & self.exist.val()).any());
        // `vm` is the victim's one-hot (or 0) and `v_e` its slot's expert, so this is `(vm &
        // live1 & !gs_tag).any()` for every input. It does not read `gs_tag`: a local read
        // only by `pu.bits` keeps that statement out of the block's loop through `capf`
        // (Verilator splits it off), so the count needs no UNOPTFLAT waiver.
        self.d_v.next = (self.vm.val() & self.ss.live1.val()).any() & !self.xt.granted_a.val().get_bit(self.v_e.val().index());
        self.a_rx.next = self.rx_okf.val() & !self.g_rx.val();
        self.capf.next = self.pu.count.val() >= self.half.val();
        if self.a_rx.val() & !self.d_v.val() {
            self.capf.next = (self.pu.count.val() + self.one8.val()) >= self.half.val();
        }
        if self.d_v.val() & !self.a_rx.val() {
            self.capf.next = self.pu.count.val() >= self.half1.val();
        }
        self.ls.cap_full.next = self.capf.val();
        self.ls.take.next = self.kc.val() & !self.rq.found.val() & !self.k2.val();
        // The load issued this cycle, into the first free slot at/after the tail that the
        // D2D allocation left.
        // (Each of the three sources needs kc, i.e. a free slot beyond the reserve, so the
        // allocation's scan always finds one; `ld_ok` ANDs it only to state it.)
        self.rp.ld_want.next = self.rq.found.val() | self.k2.val() | self.ls.found.val();
        self.issue.next = self.rp.ld_ok.val();
        self.is_e.next = self.ls.expert.val();
        self.is_k.next = self.ls.k.val();
        self.is_ld.next = self.id.val();
        if self.k2.val() {
            self.is_e.next = self.aq.front_expert.val();
            self.is_k.next = self.aq.front_k.val();
            self.is_ld.next = self.aq.front_loader.val();
        }
        if self.rq.found.val() {
            self.is_e.next = self.rq.expert.val();
            self.is_k.next = self.rq.k.val();
            self.is_ld.next = self.rq.loader.val();
        }
        self.ev_reload.next = self.rq.found.val();
        self.kam.next = self.rp.ld_m.val();
        if self.issue.val() {
            self.ddr_req_valid.next = true;
            self.ddr_req_slot.next = self.rp.ld_slot.val();
            self.ddr_req_expert.next = self.is_e.val();
            self.ddr_req_k.next = self.is_k.val();
            self.ddr_req_loader.next = self.is_ld.val();
        }
        // The allocated slot takes the issued tag.
        self.tg.wb_en.next = self.issue.val();
        self.tg.wb_slot.next = self.rp.ld_slot.val();
        self.tg.wb_expert.next = self.is_e.val();
        self.tg.wb_k.next = self.is_k.val();
        self.tg.wb_loader.next = self.is_ld.val();
        self.ss.ld_alloc.next = self.kam.val();

        // ================= L: load-side deadlock escape (drop the newest waiting pre-load)
        // (`!issue` is implied: `rp.free <= reserve` means `!kc`, and every load needs kc.)
        self.esc.next = self.ddr_ready.val()
            & (self.pending_d.val().any() | self.helpers.val())
            & (self.rp.free.val() <= self.reserve.val())
            & self.ss.lw3.val().any()
            & (self.ls.own_granted.val() | self.rq.any_granted.val());
        self.sel_esc.req.next = self.ss.lw3.val();
        self.sel_esc.newest.next = true;
        for i in 0..S {
            self.sel_esc.age[i].next = self.am.age_e[i].val();
        }
        self.v2_slot.next = self.sel_esc.slot.val();
        if self.sel_esc.found.val() {
            self.v2m_pre.next = self.sel_esc.onehot.val();
        } else {
            // No qualifying member (an inconsistent age matrix, only under illegal
            // inputs): slot 0, as the picker's slot output says.
            self.v2m_pre.next = 1.into();
        }
        self.v2m.next = 0.into();
        if self.esc.val() {
            self.v2m.next = self.v2m_pre.val();
        }
        self.tg.rd_slot[4].next = self.v2_slot.val();
        self.v2_e.next = self.tg.rd_expert[4].val();
        self.v2_k.next = self.tg.rd_k[4].val();
        self.v2_ld.next = self.tg.rd_loader[4].val();
        if self.v_found.val() & self.esc.val() {
            self.ev_evictions.next = 2.into();
        } else if self.v_found.val() | self.esc.val() {
            self.ev_evictions.next = 1.into();
        }

        // The reload list appends the escape's slice behind (after its removal).
        self.rq.esc_valid.next = self.esc.val();
        self.rq.esc_expert.next = self.v2_e.val();
        self.rq.esc_k.next = self.v2_k.val();
        self.rq.esc_loader.next = self.v2_ld.val();
        self.ss.escape.next = self.v2m.val();

        // ================= queue overflow (load sequence, reload list, Rule-5 FIFO)
        if self.ls.overflow.val() | self.rq.overflow.val() | self.aq.overflow.val() {
            self.err_q.d.next = true;
        }

        // ================= final slot state: `ss` at the edge
        self.pending_q.d.next = self.pending_d.val();

        // ---- ring head (trace): `rp` moves it past the escape's release.
        self.rp.escape.next = self.esc.val();
        // `rp` reads `live_n` only with the escape, which issues no load (`kam` = 0), so it is
        // `live3` less the escape's slot: formed without the DDR allocation's scan.
        self.rp.live_n.next = self.ss.live3.val() & !self.v2m_pre.val();

        // ================= M: Rule 5 free-slot report, from the state after the edge: free
        // slots, live slots of ungranted experts (this cycle's allocations' tags looked
        // through), the Rule-5 FIFO
        self.um.next = 0.into();
        for i in 0..S {
            self.te_n.next = self.tg.expert[i].val();
            if self.ram.val().get_bit(i) {
                self.te_n.next = self.rx_head_expert.val();
            }
            if self.kam.val().get_bit(i) {
                self.te_n.next = self.is_e.val();
            }
            if self.ss.live_n.val().get_bit(i) & !self.xt.granted_a.val().get_bit(self.te_n.val().index()) {
                self.um.next = self.um.val().replace_bit(i, true);
            }
        }
        self.fr.enable.next = self.rule5.val() & !self.layer_start.val() & !self.cfg_we.val();
        self.fr.resend.next = self.load_valid.val();
        self.fr.free.next = self.exist.val() & !self.ss.live_n.val();
        self.fr.ung.next = self.um.val();
        self.fr.fifo_len.next = self.aq.len_next.val();
        self.fr.fifo_ung.next = self.aq.ungranted.val();
        self.free_valid.next = self.fr.valid.val();
        self.free_granted.next = self.fr.granted.val();
        self.free_preload.next = self.fr.preload.val();

        // ================= N: ICV release
        self.had_work.d.next = self.had_a.val();
        if self.had_a.val() & !self.pending_d.val().any() {
            self.had_work.d.next = false;
            self.done.next = true;
        }

        // ---- layer start (the table writes and the granted bits' clear are `xt`'s), reset
        if self.layer_start.val() {
            self.pending_q.d.next = 0.into();
            self.had_work.d.next = false;
        }
        if self.reset.val() {
            self.pending_q.d.next = 0.into();
            self.had_work.d.next = false;
            self.err_q.d.next = false;
        }
    }
}

// ---------------------------------------------------------------- export registration

use super::chiplet_twin::{apply_config, apply_inputs};
use crate::cosim::{record, PortTrace};
use crate::export::{boxed, BlockDef, ParamSet};
use crate::RtlError;
use hw::pkg::chiplet::{ChipletId, CtrlIn, CtrlSched, ExpertId};
use hw::pkg::ring::SlotTag;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// The exported configuration: chiplet 1 of a 2×2 package, 8 slots, A3 knobs.
pub fn export_params() -> ChipletCtrlParams {
    ChipletCtrlParams { id: 1, rows: 2, cols: 2, slots: 8, eager: true, forward_with_compute: true, ddr_reserve: 1, rule5: false, helpers: false }
}

/// Co-simulation stimulus: reset, a layer start with a table write per expert (repeated
/// every 2 000 cycles), then random traffic on every input with indices in range (slots
/// < S, experts < E), so the Verilog and the rust-hdl model see the same defined values.
/// (Legality is not needed here: both models must agree on any input; the lockstep test
/// checks behaviour against the CL with legal traffic.)
fn record_chiplet_ctrl<const S: usize, const E: usize, const Q: usize>(module: &str, p: ChipletCtrlParams, cycles: usize, seed: u64) -> Result<PortTrace, RtlError> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let n = p.rows * p.cols;
    let tag = |rng: &mut Xoshiro256PlusPlus| SlotTag { expert: ExpertId(rng.gen_range(0..E as u16)), k: rng.gen_range(0..12), loader: ChipletId(rng.gen_range(0..n as u8)) };
    record(module, ChipletCtrlRtl::<S, E, Q>::new(&p), cycles, |u| &mut u.clock, move |c, u| {
        let phase = c % 2000;
        if c == 0 {
            apply_config(u, true, false, None);
        } else if phase == 1 {
            apply_config(u, false, true, None);
        } else if (2..2 + E).contains(&phase) {
            let e = (phase - 2) as u16;
            apply_config(u, false, false, Some((e, rng.gen_range(1..12), if rng.gen_bool(0.2) { rng.gen_range(1..30) } else { 0 })));
        } else {
            let mut i = CtrlIn { ddr_ready: rng.gen_bool(0.8), tx_ready: rng.gen_bool(0.7), ..CtrlIn::default() };
            let mask = rng.gen_range(1..(1u16 << n));
            let expert = ExpertId(rng.gen_range(0..E as u16));
            i.sched = match rng.gen_range(0..20) {
                0 => Some(CtrlSched::Preload { expert, mask }),
                1 => Some(CtrlSched::Grant { expert, mask }),
                _ => None,
            };
            let slot = |rng: &mut Xoshiro256PlusPlus, pr: f64| rng.gen_bool(pr).then(|| rng.gen_range(0..p.slots as u32));
            i.ddr_landed = slot(&mut rng, 0.2);
            i.rx_landed = slot(&mut rng, 0.15);
            i.pe_done = slot(&mut rng, 0.1);
            i.tx_done = slot(&mut rng, 0.1);
            i.rx_head = rng.gen_bool(0.2).then(|| tag(&mut rng));
            i.handoff = rng.gen_bool(0.03).then(|| tag(&mut rng));
            i.load = rng.gen_bool(0.05).then(|| tag(&mut rng));
            i.tokens_arrived = rng.gen_bool(0.05).then(|| (ExpertId(rng.gen_range(0..E as u16)), rng.gen_range(1..5)));
            apply_inputs(u, &i);
            u.rd_slot.next = (rng.gen_range(0..p.slots) as u64).into();
        }
    })
}

/// Export definition: the controller top at S = 8 slots, E = 16 experts, Q = 16 (2×2
/// package, A3 knobs). Defined but not yet in `REGISTRY`: its Verilog co-simulates equal
/// and synthesizes (docs/rtl.md), but `verilator -Wall` reports WIDTH warnings (unsized
/// `0.into()`/`+ 1` literals, rust-hdl's dynamic `replace_bit`, 16-bit indices into narrower
/// vectors) that must be cleaned up first. The package sizes (16–64 slots, 128 experts) are
/// lockstep-tested and run in the package (`--rtl chiplet-ctrl`).
pub const EXPORT: BlockDef = BlockDef {
    name: "chiplet_ctrl",
    top: true,
    domain: crate::export::ModelDomain::PkgCore,
    cosim_cycles: crate::export::TOP_COSIM_CYCLES,
    sets: &[ParamSet {
        module: "chiplet_ctrl_s8_e16",
        rust_type: "ChipletCtrlRtl<8, 16, 16>",
        params: &[("slots", 8), ("experts", 16)],
        // ECP5-85F: 17.3-18.6 MHz at seeds 1-3; the whole decision is one cycle (docs/rtl.md, "Timing closure at the prototype clocks").
        ecp5_clock_mhz: 15,
        build: || boxed(ChipletCtrlRtl::<8, 16, 16>::new(&export_params())),
        recorder: Some(|cycles, seed| record_chiplet_ctrl::<8, 16, 16>("chiplet_ctrl_s8_e16", export_params(), cycles, seed)),
    }],
};
