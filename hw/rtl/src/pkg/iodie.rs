//! IO-die scheduler top `iodie_scheduler` (RTL twin of `hw::pkg::iodie::IoDieSchedulerCl`,
//! seeds/expert-streaming.txt §V-B, Fig. 8; SPEC §3). Cycle for cycle the CL's state machine
//! (read its module doc first: the states, the stale-done rule and the timing are defined
//! there); this file says how each part is built.
//!
//! ```text
//!  gate_mask/gate_count ──► EIT (256×N, write @posedge, async read) ──► rd mask ─────────┐
//!   (pulled by gate_addr)  └► bitonic sorter (P lanes) ──► paired-load sequencer ──► order list
//!  req_slot/req_set ──► cold AND ──► QoS timer bank ──► defer                           │
//!  done ──► stale filter (last-grant stamps) ──► done FIFO ──► ICV ──► E–C matcher ◄──────┘
//! ```
//!
//! Blocks and why they look like this:
//! * **EIT** — a memory with an asynchronous read port ([`crate::lutram::AsyncRam`]: LUT-RAM
//!   on ECP5 / 7-series, flip-flops on iCE40, a register file on an ASIC) holding the
//!   trajectory masks; the count column feeds the sorter lanes and the cold vector as it
//!   streams in, so it is not stored. The read address is a function of registers only
//!   (state, `scan_q`, the order list, the sequencer), so the data is there for the decision
//!   at the next rising edge — the CL's "single-cycle EIT read". (It was rust-hdl's `RAM`
//!   with its read register clocked on the falling edge, which made the address path and the
//!   decision path half-cycle paths: the block's ECP5 Fmax was set by the first; see
//!   docs/rtl.md, "FPGA flow".)
//! * **Bitonic sorter** ([`super::sorter`]) — one stage per cycle, the CL's `Sort` state.
//! * **Paired-load sequencer** — the CL builds the whole order list in its one `Order` cycle.
//!   Materialising the interleave `hot[0], hot[K−1], hot[1], …` in one cycle costs a K-way mux
//!   per entry, so the RTL builds it during `Preload` instead: a head and a tail pointer into
//!   the sorted lanes, entry m taken from the tail when m is odd (paired) and written into
//!   the order list as it is preloaded. Every entry is in place before the first `Scan`, and
//!   `Order` only counts K (`order_len`) — the same cycles and the same traced values.
//! * **Order list** — P registers with compaction on a grant (entry i ← i + 1 from the scan
//!   pointer), so the scan resumes at the same index exactly as the CL's `Vec::remove`.
//! * **E–C matcher** — AND of the EIT mask with the ICV and a priority encoder in snake order
//!   (a constant table of chiplet ids, `snake_rev`, scanned so the first snake position wins).
//! * **Done path** — the stale rule is the CL's with stamps: the chiplet of a done bit had a
//!   grant it has not yet seen when `stamp − last_grant ≤ window`, window =
//!   ⌊(grant path + done path latency) / clock period⌋ in cycles (the wrapper computes it
//!   from the link latencies); at release, bits of chiplets granted at or after the entry's
//!   arrival stamp are dropped. `stamp` is the core-cycle timebase (an input, so the block
//!   can be clock-gated while idle, as the package's fast-forward does).
//! * **QoS timer bank** ([`super::qos`]) and **done FIFO** ([`super::done_fifo`]).
//!
//! Event outputs (`ev_*`, `defer_valid`, `grant_latency`) are the performance counters' inputs:
//! a wrapper sums them into the CL's `IoDieStats`, and the lockstep test compares those.
//! Every output is registered (Moore): after rising edge t it shows the CL's state after its
//! `eval(t)`; `gate_addr`/`req_idx` tell the gating source which entry/request the next edge
//! consumes.

use rust_hdl::prelude::*;

use crate::lutram::AsyncRam;
use super::done_fifo::DoneFifoRtl;
use super::qos::QosTimerBankRtl;
use super::sorter::BitonicSorterRtl;

/// Order policy codes (`policy` constant).
pub const POLICY_PAIRED: u64 = 0;
pub const POLICY_HOT_FIRST: u64 = 1;
pub const POLICY_BY_ID: u64 = 2;

/// State codes: `hw::pkg::iodie::MatchState as u8`.
pub mod st {
    pub const DONE: u64 = 0;
    pub const WEIT: u64 = 1;
    pub const TBUF: u64 = 2;
    pub const REIT: u64 = 3;
    pub const SORT: u64 = 4;
    pub const ORDR: u64 = 5;
    pub const PREL: u64 = 6;
    pub const SCAN: u64 = 7;
    pub const GRNT: u64 = 8;
    pub const IDLE: u64 = 9;
}

/// Run-time parameters baked into the Verilog as constants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoDieRtlParams {
    pub rows: usize,
    pub cols: usize,
    /// EIT entries streamed per pass (the model's experts), 1..=P.
    pub experts: usize,
    pub policy: u64,
    pub theta_min: u32,
    pub n_threshold: u32,
    pub t_qos_init: u32,
    /// Stale-done window in core cycles.
    pub stale_window: u32,
}

/// The IO-die scheduler: `N`-bit chiplet masks (chiplets ≤ N ≤ 16), a `P`-lane sorter and
/// order list (P = next power of two of the experts, ≥ 2), `S` QoS slots, `D` done-FIFO
/// entries.
#[derive(LogicBlock)]
pub struct IoDieSchedulerRtl<const N: usize, const P: usize, const S: usize, const D: usize> {
    pub clock: Signal<In, Clock>,
    /// Synchronous reset: state DONE, pointers 0, QoS bank to (T_init, 0).
    pub reset: Signal<In, Bit>,
    /// Core-cycle timebase (stale-done rule and decision latency).
    pub stamp: Signal<In, Bits<32>>,
    /// A layer starts at this edge (only while `state` is DONE): its first EIT entry is written.
    pub start: Signal<In, Bit>,
    /// The starting layer runs token buffering (request-level input, θ_min > 0).
    pub start_tb: Signal<In, Bit>,
    /// OR of the done masks arriving at this edge.
    pub done: Signal<In, Bits<N>>,
    /// EIT entry `gate_addr` of the current pass (first pass, or the rewrite after `TBUF`).
    pub gate_mask: Signal<In, Bits<N>>,
    pub gate_count: Signal<In, Bits<32>>,
    /// Request `req_idx`: its QoS slot, its expert bitmap A(r) in four 64-bit words, and
    /// whether it is the layer's last request.
    pub req_slot: Signal<In, Bits<8>>,
    pub req_set0: Signal<In, Bits<64>>,
    pub req_set1: Signal<In, Bits<64>>,
    pub req_set2: Signal<In, Bits<64>>,
    pub req_set3: Signal<In, Bits<64>>,
    pub req_last: Signal<In, Bit>,
    /// QoS bank host port (see [`super::qos`]).
    pub host_op: Signal<In, Bits<2>>,
    pub host_slot: Signal<In, Bits<8>>,
    pub host_t: Signal<In, Bits<32>>,
    pub host_c: Signal<In, Bits<32>>,

    // --- outputs (registered)
    pub state: Signal<Out, Bits<4>>,
    pub icv: Signal<Out, Bits<N>>,
    pub gate_addr: Signal<Out, Bits<8>>,
    pub req_idx: Signal<Out, Bits<16>>,
    pub eit_wr_valid: Signal<Out, Bit>,
    pub eit_wr_addr: Signal<Out, Bits<8>>,
    pub eit_rd_valid: Signal<Out, Bit>,
    pub eit_rd_addr: Signal<Out, Bits<8>>,
    pub eit_rd_mask: Signal<Out, Bits<N>>,
    pub sorter_stage: Signal<Out, Bits<6>>,
    pub order_len: Signal<Out, Bits<9>>,
    pub scan_ptr: Signal<Out, Bits<9>>,
    pub preload_valid: Signal<Out, Bit>,
    pub preload_expert: Signal<Out, Bits<8>>,
    pub grant_valid: Signal<Out, Bit>,
    pub grant_expert: Signal<Out, Bits<8>>,
    pub grant_mask: Signal<Out, Bits<N>>,
    pub grant_start: Signal<Out, Bits<4>>,
    pub grant_icv: Signal<Out, Bits<N>>,
    pub grants: Signal<Out, Bits<16>>,
    pub done_fifo_occ: Signal<Out, Bits<9>>,
    pub defer_valid: Signal<Out, Bit>,
    /// Cycles from the grant's trigger (layer start or done arrival) to the grant.
    pub grant_latency: Signal<Out, Bits<32>>,
    /// The grant was enabled by a done pulse (not by the layer start).
    pub grant_release: Signal<Out, Bit>,
    /// Performance-counter events of the last edge.
    pub ev_busy: Signal<Out, Bit>,
    pub ev_scan_start: Signal<Out, Bit>,
    pub ev_scan: Signal<Out, Bit>,
    pub ev_release: Signal<Out, Bit>,
    pub ev_merge: Signal<Out, Bit>,
    pub ev_stale_latch: Signal<Out, Bits<N>>,
    pub ev_stale_pop: Signal<Out, Bits<N>>,

    // --- blocks
    eit: AsyncRam<Bits<N>, 8>,
    /// Next values of the sub-block control inputs (see the end of `update`).
    sorter_restart_n: Signal<Local, Bit>,
    sorter_wr_en_n: Signal<Local, Bit>,
    sorter_step_n: Signal<Local, Bit>,
    sorter_clear_n: Signal<Local, Bit>,
    qos_step_n: Signal<Local, Bit>,
    fifo_push_n: Signal<Local, Bit>,
    fifo_pop_n: Signal<Local, Bit>,
    fifo_clear_n: Signal<Local, Bit>,
    eit_write_enable_n: Signal<Local, Bit>,
    eit_read_address_n: Signal<Local, Bits<8>>,
    sorter: BitonicSorterRtl<P>,
    qos: QosTimerBankRtl<S>,
    fifo: DoneFifoRtl<N, D>,

    // --- registers
    state_q: DFF<Bits<4>>,
    icv_q: DFF<Bits<N>>,
    wr_ptr: DFF<Bits<8>>,
    tb_ptr: DFF<Bits<16>>,
    tb_q: DFF<Bit>,
    kcnt: DFF<Bits<9>>,
    len: DFF<Bits<9>>,
    pre_ptr: DFF<Bits<9>>,
    scan_q: DFF<Bits<9>>,
    head: DFF<Bits<8>>,
    tail: DFF<Bits<8>>,
    order: [DFF<Bits<8>>; P],
    /// Grant register: the match found in SCAN, issued in GRNT.
    g_e: DFF<Bits<8>>,
    g_m: DFF<Bits<N>>,
    g_s: DFF<Bits<4>>,
    /// Stamp of the last grant naming each chiplet this layer, and which have one.
    lg: [DFF<Bits<32>>; N],
    lg_valid: DFF<Bits<N>>,
    trigger: DFF<Bits<32>>,
    trig_rel: DFF<Bit>,
    cold: DFF<Bits<256>>,
    // output registers
    eit_wr_valid_q: DFF<Bit>,
    eit_wr_addr_q: DFF<Bits<8>>,
    eit_rd_valid_q: DFF<Bit>,
    eit_rd_addr_q: DFF<Bits<8>>,
    eit_rd_mask_q: DFF<Bits<N>>,
    preload_valid_q: DFF<Bit>,
    preload_expert_q: DFF<Bits<8>>,
    grant_valid_q: DFF<Bit>,
    grant_expert_q: DFF<Bits<8>>,
    grant_mask_q: DFF<Bits<N>>,
    grant_start_q: DFF<Bits<4>>,
    grant_icv_q: DFF<Bits<N>>,
    grants_q: DFF<Bits<16>>,
    grant_latency_q: DFF<Bits<32>>,
    grant_release_q: DFF<Bit>,
    ev_busy_q: DFF<Bit>,
    ev_scan_start_q: DFF<Bit>,
    ev_scan_q: DFF<Bit>,
    ev_release_q: DFF<Bit>,
    ev_merge_q: DFF<Bit>,
    ev_stale_latch_q: DFF<Bits<N>>,
    ev_stale_pop_q: DFF<Bits<N>>,

    // --- combinational locals (each written before it is read, once per path)
    /// Effective state of this edge: WEIT at a layer start, else `state_q`.
    cur: Signal<Local, Bits<4>>,
    lgv: Signal<Local, Bits<N>>,
    stale_latch: Signal<Local, Bits<N>>,
    arrive: Signal<Local, Bits<N>>,
    merge: Signal<Local, Bit>,
    can_pop: Signal<Local, Bit>,
    killed: Signal<Local, Bits<N>>,
    dm: Signal<Local, Bits<N>>,
    icv_pop: Signal<Local, Bits<N>>,
    rel_scan: Signal<Local, Bit>,
    len_e: Signal<Local, Bits<9>>,
    kcnt_e: Signal<Local, Bits<9>>,
    tb_e: Signal<Local, Bit>,
    nz: Signal<Local, Bit>,
    head_e: Signal<Local, Bits<8>>,
    tail_e: Signal<Local, Bits<8>>,
    pre_e: Signal<Local, Bits<8>>,
    order_pre: Signal<Local, Bits<8>>,
    order_head: Signal<Local, Bits<8>>,
    scan_p: Signal<Local, Bits<9>>,
    scan_e: Signal<Local, Bits<8>>,
    /// `order[scan_q]`: the scan's EIT read address (registers only, see the EIT read address).
    scan_a: Signal<Local, Bits<8>>,
    /// The scan's decisions on `scan_p` (see SCAN), release-scan case taken apart.
    scan_stop: Signal<Local, Bit>,
    scan_p1: Signal<Local, Bits<9>>,
    scan_p1_last: Signal<Local, Bit>,
    icv_s: Signal<Local, Bits<N>>,
    hit: Signal<Local, Bits<N>>,
    /// ~wr_ptr (the sorter key's expert field).
    wr_inv: Signal<Local, Bits<8>>,
    start_c: Signal<Local, Bits<4>>,
    cold_hit: Signal<Local, Bit>,
    len_m1: Signal<Local, Bits<9>>,
    icv_g: Signal<Local, Bits<N>>,
    /// Cold vector before this edge's write (empty at a layer start).
    cold_e: Signal<Local, Bits<256>>,

    // --- constants
    e_last: Constant<Bits<8>>,
    all_mask: Constant<Bits<N>>,
    policy: Constant<Bits<2>>,
    theta: Constant<Bits<32>>,
    window: Constant<Bits<32>>,
    snake_rev: Constant<Bits<64>>,
    /// 1 in N bits (bit 0 of a shifted chiplet vector, without an index wider than log2 N).
    lsb_n: Constant<Bits<N>>,
    sort_on: Constant<Bit>,
}

impl<const N: usize, const P: usize, const S: usize, const D: usize> IoDieSchedulerRtl<N, P, S, D> {
    pub fn new(p: &IoDieRtlParams) -> Self {
        let n = p.rows * p.cols;
        assert!((1..=16).contains(&N) && (1..=N).contains(&n), "{}x{} chiplets do not fit a {N}-bit mask", p.rows, p.cols);
        assert!(
            (1..=256).contains(&p.experts) && P == p.experts.next_power_of_two().max(2),
            "{} experts need a sorter of {} lanes, not {P}",
            p.experts,
            p.experts.next_power_of_two().max(2)
        );
        assert!(p.policy <= POLICY_BY_ID, "policy code {}", p.policy);
        let snake = sched::pkg::iodie::snake_order(p.rows, p.cols);
        let mut snake_rev = 0u64;
        for (q, &c) in snake.iter().rev().enumerate() {
            snake_rev |= (c.0 as u64) << (4 * q);
        }
        let all = if n >= 16 { 0xffff } else { (1u64 << n) - 1 };
        Self {
            clock: Default::default(),
            reset: Default::default(),
            stamp: Default::default(),
            start: Default::default(),
            start_tb: Default::default(),
            done: Default::default(),
            gate_mask: Default::default(),
            gate_count: Default::default(),
            req_slot: Default::default(),
            req_set0: Default::default(),
            req_set1: Default::default(),
            req_set2: Default::default(),
            req_set3: Default::default(),
            req_last: Default::default(),
            host_op: Default::default(),
            host_slot: Default::default(),
            host_t: Default::default(),
            host_c: Default::default(),
            state: Default::default(),
            icv: Default::default(),
            gate_addr: Default::default(),
            req_idx: Default::default(),
            eit_wr_valid: Default::default(),
            eit_wr_addr: Default::default(),
            eit_rd_valid: Default::default(),
            eit_rd_addr: Default::default(),
            eit_rd_mask: Default::default(),
            sorter_stage: Default::default(),
            order_len: Default::default(),
            scan_ptr: Default::default(),
            preload_valid: Default::default(),
            preload_expert: Default::default(),
            grant_valid: Default::default(),
            grant_expert: Default::default(),
            grant_mask: Default::default(),
            grant_start: Default::default(),
            grant_icv: Default::default(),
            grants: Default::default(),
            done_fifo_occ: Default::default(),
            defer_valid: Default::default(),
            grant_latency: Default::default(),
            grant_release: Default::default(),
            ev_busy: Default::default(),
            ev_scan_start: Default::default(),
            ev_scan: Default::default(),
            ev_release: Default::default(),
            ev_merge: Default::default(),
            ev_stale_latch: Default::default(),
            ev_stale_pop: Default::default(),
            eit: Default::default(),
            sorter_restart_n: Default::default(),
            sorter_wr_en_n: Default::default(),
            sorter_step_n: Default::default(),
            sorter_clear_n: Default::default(),
            qos_step_n: Default::default(),
            fifo_push_n: Default::default(),
            fifo_pop_n: Default::default(),
            fifo_clear_n: Default::default(),
            eit_write_enable_n: Default::default(),
            eit_read_address_n: Default::default(),
            sorter: BitonicSorterRtl::new(),
            qos: QosTimerBankRtl::new(p.t_qos_init, p.n_threshold),
            fifo: DoneFifoRtl::new(),
            state_q: Default::default(),
            icv_q: Default::default(),
            wr_ptr: Default::default(),
            tb_ptr: Default::default(),
            tb_q: Default::default(),
            kcnt: Default::default(),
            len: Default::default(),
            pre_ptr: Default::default(),
            scan_q: Default::default(),
            head: Default::default(),
            tail: Default::default(),
            order: std::array::from_fn(|_| Default::default()),
            g_e: Default::default(),
            g_m: Default::default(),
            g_s: Default::default(),
            lg: std::array::from_fn(|_| Default::default()),
            lg_valid: Default::default(),
            trigger: Default::default(),
            trig_rel: Default::default(),
            cold: Default::default(),
            eit_wr_valid_q: Default::default(),
            eit_wr_addr_q: Default::default(),
            eit_rd_valid_q: Default::default(),
            eit_rd_addr_q: Default::default(),
            eit_rd_mask_q: Default::default(),
            preload_valid_q: Default::default(),
            preload_expert_q: Default::default(),
            grant_valid_q: Default::default(),
            grant_expert_q: Default::default(),
            grant_mask_q: Default::default(),
            grant_start_q: Default::default(),
            grant_icv_q: Default::default(),
            grants_q: Default::default(),
            grant_latency_q: Default::default(),
            grant_release_q: Default::default(),
            ev_busy_q: Default::default(),
            ev_scan_start_q: Default::default(),
            ev_scan_q: Default::default(),
            ev_release_q: Default::default(),
            ev_merge_q: Default::default(),
            ev_stale_latch_q: Default::default(),
            ev_stale_pop_q: Default::default(),
            cur: Default::default(),
            lgv: Default::default(),
            stale_latch: Default::default(),
            arrive: Default::default(),
            merge: Default::default(),
            can_pop: Default::default(),
            killed: Default::default(),
            dm: Default::default(),
            icv_pop: Default::default(),
            rel_scan: Default::default(),
            len_e: Default::default(),
            kcnt_e: Default::default(),
            tb_e: Default::default(),
            nz: Default::default(),
            head_e: Default::default(),
            tail_e: Default::default(),
            pre_e: Default::default(),
            order_pre: Default::default(),
            order_head: Default::default(),
            scan_p: Default::default(),
            scan_e: Default::default(),
            scan_a: Default::default(),
            scan_stop: Default::default(),
            scan_p1: Default::default(),
            scan_p1_last: Default::default(),
            icv_s: Default::default(),
            hit: Default::default(),
            wr_inv: Default::default(),
            start_c: Default::default(),
            cold_hit: Default::default(),
            len_m1: Default::default(),
            icv_g: Default::default(),
            cold_e: Default::default(),
            e_last: Constant::new(((p.experts - 1) as u64).into()),
            all_mask: Constant::new(all.into()),
            policy: Constant::new(p.policy.into()),
            theta: Constant::new((p.theta_min as u64).into()),
            window: Constant::new((p.stale_window as u64).into()),
            snake_rev: Constant::new(snake_rev.into()),
            lsb_n: Constant::new(1u64.into()),
            sort_on: Constant::new(p.experts > 1),
        }
    }

    /// Order-list entry `i` (lockstep observation).
    pub fn order_entry(&self, i: usize) -> u16 {
        self.order[i].q.val().to_u64() as u16
    }

    /// (T_QoS, C_fw) of a QoS slot (lockstep observation).
    pub fn qos_slot(&self, slot: usize) -> (u32, u32) {
        self.qos.slot(slot)
    }
}

impl<const N: usize, const P: usize, const S: usize, const D: usize> Logic for IoDieSchedulerRtl<N, P, S, D> {
    #[hdl_gen]
    fn update(&mut self) {
        // ---- clocks and hold defaults
        dff_setup!(
            self, clock, state_q, icv_q, wr_ptr, tb_ptr, tb_q, kcnt, len, pre_ptr, scan_q, head, tail, g_e, g_m, g_s, lg_valid,
            trigger, trig_rel, cold, eit_wr_valid_q, eit_wr_addr_q, eit_rd_valid_q, eit_rd_addr_q, eit_rd_mask_q, preload_valid_q,
            preload_expert_q, grant_valid_q, grant_expert_q, grant_mask_q, grant_start_q, grant_icv_q, grants_q,
            grant_latency_q, grant_release_q, ev_busy_q, ev_scan_start_q, ev_scan_q, ev_release_q, ev_merge_q, ev_stale_latch_q,
            ev_stale_pop_q
        );
        for i in 0..P {
            self.order[i].clock.next = self.clock.val();
            self.order[i].d.next = self.order[i].q.val();
        }
        for c in 0..N {
            self.lg[c].clock.next = self.clock.val();
            self.lg[c].d.next = self.lg[c].q.val();
        }
        self.eit.write_clock.next = self.clock.val();
        self.sorter.clock.next = self.clock.val();
        self.qos.clock.next = self.clock.val();
        self.fifo.clock.next = self.clock.val();

        // ---- outputs from registers
        self.state.next = self.state_q.q.val();
        self.icv.next = self.icv_q.q.val();
        self.gate_addr.next = self.wr_ptr.q.val();
        self.req_idx.next = self.tb_ptr.q.val();
        self.eit_wr_valid.next = self.eit_wr_valid_q.q.val();
        self.eit_wr_addr.next = self.eit_wr_addr_q.q.val();
        self.eit_rd_valid.next = self.eit_rd_valid_q.q.val();
        self.eit_rd_addr.next = self.eit_rd_addr_q.q.val();
        self.eit_rd_mask.next = self.eit_rd_mask_q.q.val();
        self.sorter_stage.next = self.sorter.stage.val();
        self.order_len.next = self.len.q.val();
        self.scan_ptr.next = self.scan_q.q.val();
        self.preload_valid.next = self.preload_valid_q.q.val();
        self.preload_expert.next = self.preload_expert_q.q.val();
        self.grant_valid.next = self.grant_valid_q.q.val();
        self.grant_expert.next = self.grant_expert_q.q.val();
        self.grant_mask.next = self.grant_mask_q.q.val();
        self.grant_start.next = self.grant_start_q.q.val();
        self.grant_icv.next = self.grant_icv_q.q.val();
        self.grants.next = self.grants_q.q.val();
        self.done_fifo_occ.next = self.fifo.occ.val();
        self.defer_valid.next = self.qos.defer.val();
        self.grant_latency.next = self.grant_latency_q.q.val();
        self.grant_release.next = self.grant_release_q.q.val();
        self.ev_busy.next = self.ev_busy_q.q.val();
        self.ev_scan_start.next = self.ev_scan_start_q.q.val();
        self.ev_scan.next = self.ev_scan_q.q.val();
        self.ev_release.next = self.ev_release_q.q.val();
        self.ev_merge.next = self.ev_merge_q.q.val();
        self.ev_stale_latch.next = self.ev_stale_latch_q.q.val();
        self.ev_stale_pop.next = self.ev_stale_pop_q.q.val();

        // ---- pulses return to 0 unless set below
        self.eit_wr_valid_q.d.next = false;
        self.eit_rd_valid_q.d.next = false;
        self.preload_valid_q.d.next = false;
        self.grant_valid_q.d.next = false;
        self.ev_busy_q.d.next = false;
        self.ev_scan_start_q.d.next = false;
        self.ev_scan_q.d.next = false;
        self.ev_release_q.d.next = false;
        self.ev_merge_q.d.next = false;
        self.ev_stale_latch_q.d.next = 0.into();
        self.ev_stale_pop_q.d.next = 0.into();

        // ---- block port defaults
        self.eit_write_enable_n.next = false;
        self.eit.write_address.next = self.wr_ptr.q.val();
        self.eit.write_data.next = self.gate_mask.val();
        self.sorter_clear_n.next = false;
        self.sorter_wr_en_n.next = false;
        self.sorter.wr_addr.next = self.wr_ptr.q.val();
        // Invert in 8 bits, then widen: `~` inside the widening cast would invert the
        // extension bits too in Verilog (context-determined width), setting the count field.
        self.wr_inv.next = !self.wr_ptr.q.val();
        self.sorter.wr_key.next = (bit_cast::<40, 32>(self.gate_count.val()) << 8) | bit_cast::<40, 8>(self.wr_inv.val());
        self.sorter_step_n.next = false;
        self.sorter_restart_n.next = false;
        self.sorter.rd_a_addr.next = self.head.q.val();
        self.sorter.rd_b_addr.next = self.tail.q.val();
        self.qos.reset.next = self.reset.val();
        self.qos.host_op.next = self.host_op.val();
        self.qos.host_slot.next = self.host_slot.val();
        self.qos.host_t.next = self.host_t.val();
        self.qos.host_c.next = self.host_c.val();
        self.qos_step_n.next = false;
        self.qos.step_slot.next = self.req_slot.val();
        self.fifo_clear_n.next = self.start.val();
        self.fifo_pop_n.next = false;

        // ---- effective state of this edge (a layer start writes entry 0 now)
        self.cur.next = self.state_q.q.val();
        self.lgv.next = self.lg_valid.q.val();
        self.len_e.next = self.len.q.val();
        self.kcnt_e.next = self.kcnt.q.val();
        self.tb_e.next = self.tb_q.q.val();
        self.cold_e.next = self.cold.q.val();
        if self.start.val() {
            self.cold_e.next = 0.into();
            self.cur.next = 1.into();
            self.lgv.next = 0.into();
            self.len_e.next = 0.into();
            self.kcnt_e.next = 0.into();
            self.tb_e.next = self.start_tb.val();
        }

        // ---- done latch: drop bits of chiplets with a grant in flight (stale), push
        self.stale_latch.next = 0.into();
        for c in 0..N {
            if self.lgv.val().get_bit(c) & ((self.stamp.val() - self.lg[c].q.val()) <= self.window.val()) {
                self.stale_latch.next = self.stale_latch.val().replace_bit(c, true);
            }
        }
        self.arrive.next = self.done.val() & self.all_mask.val() & !self.stale_latch.val();
        self.ev_stale_latch_q.d.next = self.done.val() & self.all_mask.val() & self.stale_latch.val();
        self.fifo_push_n.next = self.arrive.val().any();
        self.fifo.push_mask.next = self.arrive.val();
        self.fifo.push_at.next = self.stamp.val();
        self.merge.next = self.arrive.val().any() & self.fifo.full.val() & !self.start.val();
        self.ev_merge_q.d.next = self.merge.val();

        // ---- release candidate (DONE/IDLE): front entry, minus chiplets granted since it arrived
        self.killed.next = 0.into();
        for c in 0..N {
            if self.lgv.val().get_bit(c) & (self.lg[c].q.val() >= self.fifo.front_at.val()) {
                self.killed.next = self.killed.val().replace_bit(c, true);
            }
        }
        self.dm.next = self.fifo.front_mask.val() & !self.killed.val();
        self.icv_pop.next = self.icv_q.q.val() | self.dm.val();
        self.can_pop.next = ((self.cur.val() == 0) | (self.cur.val() == 9))
            & self.fifo.occ.val().any()
            & !(self.merge.val() & (self.fifo.occ.val() == 1));
        self.rel_scan.next = self.can_pop.val() & (self.cur.val() == 9) & (self.dm.val() & !self.icv_q.q.val()).any();

        // ---- EIT read address (registers only)
        self.order_head.next = self.order[0].q.val();
        self.order_pre.next = 0.into();
        self.scan_a.next = 0.into();
        self.scan_p.next = self.scan_q.q.val();
        if self.rel_scan.val() {
            self.scan_p.next = 0.into();
        }
        for i in 0..P {
            if self.pre_ptr.q.val().index() == i {
                self.order_pre.next = self.order[i].q.val();
            }
            if self.scan_q.q.val().index() == i {
                self.scan_a.next = self.order[i].q.val();
            }
        }
        // The scan's decisions on scan_p, with the release-scan case (scan_p = 0; icv_s = the
        // ICV with the popped bits, non-empty since rel_scan needs a popped bit outside the
        // ICV) taken apart: the values on scan_q come from registers only, and `rel_scan` (the
        // done FIFO's head, the killed compares) selects at the end instead of feeding the
        // compares. The same values as `!icv_s.any() | scan_p >= len`, `scan_p + 1` and
        // `scan_p + 1 == len`.
        self.scan_stop.next = !self.icv_q.q.val().any() | (self.scan_q.q.val() >= self.len.q.val());
        self.scan_p1.next = self.scan_q.q.val() + 1;
        self.scan_p1_last.next = (self.scan_q.q.val() + 1) == self.len.q.val();
        if self.rel_scan.val() {
            self.scan_stop.next = !self.len.q.val().any();
            self.scan_p1.next = 1.into();
            self.scan_p1_last.next = self.len.q.val() == 1;
        }
        // The entry a scan examines, order[scan_p]: scan_p is 0 on a release scan, else scan_q.
        self.scan_e.next = self.scan_a.val();
        if self.rel_scan.val() {
            self.scan_e.next = self.order_head.val();
        }
        // Paired-load sequencer: entry pre_ptr from the head or (odd, paired) the tail.
        self.head_e.next = self.sorter.rd_a_expert.val();
        self.tail_e.next = self.sorter.rd_b_expert.val();
        self.pre_e.next = self.head_e.val();
        if (self.policy.val() == 0) & self.pre_ptr.q.val().get_bit(0) {
            self.pre_e.next = self.tail_e.val();
        }
        if self.policy.val() == 2 {
            self.pre_e.next = self.order_pre.val();
        }
        // The address is `scan_e` in SCAN (`rel_scan` needs `cur` = IDLE, so `scan_p` =
        // `scan_q` there) and `order[0]` otherwise (a release scan from IDLE reads
        // `order[scan_p = 0]`): written with `scan_q`, it depends on registers only — not on
        // the done FIFO, the `done`/`stamp`/`start` inputs and the release decision that
        // `rel_scan` takes from them — so the EIT's asynchronous read gives the value the
        // falling-edge read gave, and its path starts at the registers.
        self.eit_read_address_n.next = self.order_head.val();
        if self.state_q.q.val() == 7 {
            self.eit_read_address_n.next = self.scan_a.val();
        }
        if self.state_q.q.val() == 6 {
            self.eit_read_address_n.next = self.pre_e.val();
        }

        // ---- E–C matcher datapath
        self.icv_s.next = self.icv_q.q.val();
        if self.rel_scan.val() {
            self.icv_s.next = self.icv_pop.val();
        }
        self.hit.next = self.eit.read_data.val() & self.icv_s.val();
        self.start_c.next = 0.into();
        for q in 0..N {
            if ((self.hit.val() >> self.snake_rev.val().get_bits::<4>(q * 4)) & self.lsb_n.val()).any() {
                self.start_c.next = self.snake_rev.val().get_bits::<4>(q * 4);
            }
        }
        self.len_m1.next = self.len.q.val() - 1;
        self.icv_g.next = self.icv_q.q.val() & !self.g_m.q.val();
        self.cold_hit.next = ((self.req_set0.val() & self.cold.q.val().get_bits::<64>(0)).any())
            | ((self.req_set1.val() & self.cold.q.val().get_bits::<64>(64)).any())
            | ((self.req_set2.val() & self.cold.q.val().get_bits::<64>(128)).any())
            | ((self.req_set3.val() & self.cold.q.val().get_bits::<64>(192)).any());
        self.nz.next = self.gate_count.val().any();
        // Stepped only in TBUF; driven every cycle so the input is never a latch.
        self.qos.cold_hit.next = self.cold_hit.val();

        // ---- layer start
        if self.start.val() {
            self.icv_q.d.next = self.all_mask.val();
            self.lg_valid.d.next = 0.into();
            self.len.d.next = 0.into();
            self.kcnt.d.next = 0.into();
            self.pre_ptr.d.next = 0.into();
            self.scan_q.d.next = 0.into();
            self.tb_ptr.d.next = 0.into();
            self.tb_q.d.next = self.start_tb.val();
            self.trigger.d.next = self.stamp.val();
            self.trig_rel.d.next = false;
            self.cold.d.next = 0.into();
            self.sorter_clear_n.next = true;
            self.sorter_restart_n.next = true;
        }
        if (self.cur.val() != 0) & (self.cur.val() != 9) {
            self.ev_busy_q.d.next = true;
        }

        // ---- the state machine
        // DONE / IDLE: release the oldest done mask; in IDLE a new idle chiplet starts a scan.
        if self.can_pop.val() {
            self.fifo_pop_n.next = true;
            self.ev_release_q.d.next = true;
            self.ev_stale_pop_q.d.next = self.fifo.front_mask.val() & self.killed.val();
            self.icv_q.d.next = self.icv_pop.val();
        }
        if self.rel_scan.val() {
            self.trigger.d.next = self.fifo.front_at.val();
            self.trig_rel.d.next = true;
            self.ev_scan_start_q.d.next = true;
        }
        // WEIT / REIT: one EIT entry per edge.
        if (self.cur.val() == 1) | (self.cur.val() == 3) {
            self.eit_write_enable_n.next = true;
            self.sorter_wr_en_n.next = true;
            self.eit_wr_valid_q.d.next = true;
            self.eit_wr_addr_q.d.next = self.wr_ptr.q.val();
            if (self.cur.val() == 1) & self.nz.val() & (self.gate_count.val() < self.theta.val()) {
                self.cold.d.next = self.cold_e.val().replace_bit(self.wr_ptr.q.val().index(), true);
            }
            self.kcnt.d.next = self.kcnt_e.val();
            if self.nz.val() {
                self.kcnt.d.next = self.kcnt_e.val() + 1;
            }
            self.len.d.next = self.len_e.val();
            if (self.policy.val() == 2) & self.nz.val() {
                self.len.d.next = self.len_e.val() + 1;
                for i in 0..P {
                    if self.len_e.val().index() == i {
                        self.order[i].d.next = self.wr_ptr.q.val();
                    }
                }
            }
            self.wr_ptr.d.next = self.wr_ptr.q.val() + 1;
            if self.wr_ptr.q.val() == self.e_last.val() {
                self.wr_ptr.d.next = 0.into();
                if (self.cur.val() == 1) & self.tb_e.val() {
                    self.state_q.d.next = 2.into();
                } else if self.policy.val() == 2 {
                    self.pre_ptr.d.next = 0.into();
                    self.scan_q.d.next = 0.into();
                    if self.len_e.val().any() | self.nz.val() {
                        self.state_q.d.next = 6.into();
                    } else {
                        self.state_q.d.next = 0.into();
                    }
                } else {
                    self.sorter_restart_n.next = true;
                    if self.sort_on.val() {
                        self.state_q.d.next = 4.into();
                    } else {
                        self.state_q.d.next = 5.into();
                    }
                }
            } else {
                self.state_q.d.next = self.cur.val();
            }
        }
        // TBUF: Algorithm 2 for request tb_ptr.
        if self.cur.val() == 2 {
            self.qos_step_n.next = true;
            self.tb_ptr.d.next = self.tb_ptr.q.val() + 1;
            if self.req_last.val() {
                self.tb_ptr.d.next = 0.into();
                self.len.d.next = 0.into();
                self.kcnt.d.next = 0.into();
                self.state_q.d.next = 3.into();
            }
        }
        // SORT: one network stage.
        if self.cur.val() == 4 {
            self.sorter_step_n.next = true;
            if self.sorter.last.val() {
                self.state_q.d.next = 5.into();
            }
        }
        // ORDR: K = the non-zero entries; the sequencer starts at both ends.
        if self.cur.val() == 5 {
            self.len.d.next = self.kcnt.q.val();
            self.head.d.next = 0.into();
            self.tail.d.next = bit_cast::<8, 9>(self.kcnt.q.val() - 1);
            self.pre_ptr.d.next = 0.into();
            self.scan_q.d.next = 0.into();
            if self.kcnt.q.val().any() {
                self.state_q.d.next = 6.into();
            } else {
                self.state_q.d.next = 0.into();
            }
        }
        // PREL: one Preload message per edge, the order list filled as it goes.
        if self.cur.val() == 6 {
            self.preload_valid_q.d.next = true;
            self.preload_expert_q.d.next = self.pre_e.val();
            self.eit_rd_valid_q.d.next = true;
            self.eit_rd_addr_q.d.next = self.pre_e.val();
            self.eit_rd_mask_q.d.next = self.eit.read_data.val();
            if self.policy.val() != 2 {
                for i in 0..P {
                    if self.pre_ptr.q.val().index() == i {
                        self.order[i].d.next = self.pre_e.val();
                    }
                }
            }
            if (self.policy.val() == 0) & self.pre_ptr.q.val().get_bit(0) {
                self.tail.d.next = self.tail.q.val() - 1;
            } else {
                self.head.d.next = self.head.q.val() + 1;
            }
            self.pre_ptr.d.next = self.pre_ptr.q.val() + 1;
            if (self.pre_ptr.q.val() + 1) == self.len.q.val() {
                self.scan_q.d.next = 0.into();
                self.state_q.d.next = 7.into();
            }
        }
        // SCAN (or a release scan from IDLE): examine order[scan_p].
        if (self.cur.val() == 7) | self.rel_scan.val() {
            self.ev_scan_q.d.next = true;
            if self.scan_stop.val() {
                if self.len.q.val().any() {
                    self.state_q.d.next = 9.into();
                } else {
                    self.state_q.d.next = 0.into();
                }
            } else {
                self.eit_rd_valid_q.d.next = true;
                self.eit_rd_addr_q.d.next = self.scan_e.val();
                self.eit_rd_mask_q.d.next = self.eit.read_data.val();
                if self.hit.val().any() {
                    self.g_e.d.next = self.scan_e.val();
                    self.g_m.d.next = self.eit.read_data.val();
                    self.g_s.d.next = self.start_c.val();
                    self.scan_q.d.next = self.scan_p.val();
                    self.state_q.d.next = 8.into();
                } else {
                    self.scan_q.d.next = self.scan_p1.val();
                    if self.scan_p1_last.val() {
                        self.state_q.d.next = 9.into();
                    } else {
                        self.state_q.d.next = 7.into();
                    }
                }
            }
        }
        // GRNT: issue, take the trajectory's chiplets out of the ICV, compact the list.
        if self.cur.val() == 8 {
            self.grant_valid_q.d.next = true;
            self.grant_expert_q.d.next = self.g_e.q.val();
            self.grant_mask_q.d.next = self.g_m.q.val();
            self.grant_start_q.d.next = self.g_s.q.val();
            self.grant_icv_q.d.next = self.icv_q.q.val();
            self.grants_q.d.next = self.grants_q.q.val() + 1;
            self.grant_latency_q.d.next = self.stamp.val() - self.trigger.q.val();
            self.grant_release_q.d.next = self.trig_rel.q.val();
            self.icv_q.d.next = self.icv_g.val();
            self.lg_valid.d.next = self.lg_valid.q.val() | self.g_m.q.val();
            for c in 0..N {
                if self.g_m.q.val().get_bit(c) {
                    self.lg[c].d.next = self.stamp.val();
                }
            }
            for i in 0..(P - 1) {
                if self.scan_q.q.val().index() <= i {
                    self.order[i].d.next = self.order[i + 1].q.val();
                }
            }
            self.len.d.next = self.len_m1.val();
            if !self.len_m1.val().any() {
                self.state_q.d.next = 0.into();
            } else if !self.icv_g.val().any() | (self.scan_q.q.val() == self.len_m1.val()) {
                self.state_q.d.next = 9.into();
            } else {
                self.state_q.d.next = 7.into();
            }
        }

        // ---- synchronous reset
        if self.reset.val() {
            self.state_q.d.next = 0.into();
            self.icv_q.d.next = self.all_mask.val();
            self.wr_ptr.d.next = 0.into();
            self.tb_ptr.d.next = 0.into();
            self.len.d.next = 0.into();
            self.kcnt.d.next = 0.into();
            self.pre_ptr.d.next = 0.into();
            self.scan_q.d.next = 0.into();
            self.lg_valid.d.next = 0.into();
            self.grants_q.d.next = 0.into();
            self.fifo_clear_n.next = true;
            self.fifo_push_n.next = false;
            self.sorter_restart_n.next = true;
        }
        // Sub-block inputs written once, from their locals: a default-then-override write
        // straight to a sub-block port glitches it, and Icarus can re-run the parent's
        // always block on the glitch forever (rust-hdl's own simulator does not show it).
        self.sorter.restart.next = self.sorter_restart_n.val();
        self.sorter.wr_en.next = self.sorter_wr_en_n.val();
        self.sorter.step.next = self.sorter_step_n.val();
        self.sorter.clear.next = self.sorter_clear_n.val();
        self.qos.step.next = self.qos_step_n.val();
        self.fifo.push.next = self.fifo_push_n.val();
        self.fifo.pop.next = self.fifo_pop_n.val();
        self.fifo.clear.next = self.fifo_clear_n.val();
        self.eit.write_enable.next = self.eit_write_enable_n.val();
        self.eit.read_address.next = self.eit_read_address_n.val();
    }
}

// ---------------------------------------------------------------- export registration

use super::iodie_twin::{closed_loop_stimulus, GateIn, IoDieIn, IoDieRtlPorts};
use crate::cosim::{record, PortTrace};
use crate::export::{boxed, BlockDef, ParamSet};
use crate::RtlError;

/// Parameters of the exported configurations: paired policy, token buffering on (so the
/// co-simulation exercises the QoS bank), a 4-cycle stale window.
pub fn export_params(rows: usize, cols: usize, experts: usize) -> IoDieRtlParams {
    IoDieRtlParams { rows, cols, experts, policy: POLICY_PAIRED, theta_min: 4, n_threshold: 2, t_qos_init: 1, stale_window: 4 }
}

/// Co-simulation vectors: a reset edge, then the closed-loop stimulus.
fn record_iodie<const N: usize, const P: usize>(module: &str, p: IoDieRtlParams, cycles: usize, seed: u64) -> Result<PortTrace, RtlError> {
    let stim = closed_loop_stimulus(&p, cycles.saturating_sub(1), seed);
    record(module, IoDieSchedulerRtl::<N, P, 4, 32>::new(&p), cycles, |u| &mut u.clock, |c, u| {
        if c == 0 {
            u.set_inputs(&IoDieIn { reset: true, ..IoDieIn::default() }, &GateIn::default());
        } else {
            let (i, g) = stim[c - 1];
            u.set_inputs(&i, &g);
        }
    })
}

/// Export registration: the scheduler top at 2×2 / 16 experts with token buffering (4 QoS
/// slots — the stimulus has 4 requests per layer — and 32 done-FIFO entries). Larger sizes
/// are lockstep-tested and run in the package (`--rtl scheduler`); their synthesis is the
/// scaling table of docs/rtl.md (scripts/yosys-scaling.sh), too slow for every check run.
pub const EXPORT: BlockDef = BlockDef {
    name: "iodie_scheduler",
    top: true,
    domain: crate::export::ModelDomain::PkgCore,
    cosim_cycles: crate::export::TOP_COSIM_CYCLES,
    sets: &[
        ParamSet {
            module: "iodie_scheduler_c4_e16",
            rust_type: "IoDieSchedulerRtl<4, 16, 4, 32>",
            params: &[("chiplets", 4), ("experts", 16)],
            // ECP5-85F: 46.3 MHz at seed 1; the release decision is one cycle (docs/rtl.md, "Timing closure at the prototype clocks").
            ecp5_clock_mhz: 40,
            build: || boxed(IoDieSchedulerRtl::<4, 16, 4, 32>::new(&export_params(2, 2, 16))),
            recorder: Some(|cycles, seed| record_iodie::<4, 16>("iodie_scheduler_c4_e16", export_params(2, 2, 16), cycles, seed)),
        },
    ],
};

/// One point of the synthesis sweep: `C` chiplets, `E` experts (= sorter lanes), the export's
/// 4 QoS slots and 32 done-FIFO entries. No co-simulation (the lockstep tests cover these
/// sizes against the CL).
macro_rules! sweep_set {
    ($rows:literal, $cols:literal, $c:literal, $e:literal, $module:literal) => {
        ParamSet {
            module: $module,
            rust_type: concat!("IoDieSchedulerRtl<", $c, ", ", $e, ", 4, 32>"),
            params: &[("chiplets", $c), ("experts", $e)],
            // The standard scheduler's clock, not measured here: the sweep is synthesized
            // only (scripts/yosys-scaling.sh), and a full verilog-check of a point says
            // whether it closes (the larger points will not: the 64-expert, 16-chiplet
            // point's pre-route estimate was 12.75 MHz, docs/rtl.md).
            ecp5_clock_mhz: EXPORT.sets[0].ecp5_clock_mhz,
            build: || boxed(IoDieSchedulerRtl::<$c, $e, 4, 32>::new(&export_params($rows, $cols, $e))),
            recorder: None,
        }
    };
}

/// The scheduler's scaling sweep (docs/rtl.md, scripts/yosys-scaling.sh): 4, 9 and 16
/// chiplets × 16, 32, 64 and 128 experts. Not in the standard export (`crate::export::SWEEP`).
pub const SWEEP: BlockDef = BlockDef {
    name: "iodie_scheduler_sweep",
    top: true,
    domain: crate::export::ModelDomain::PkgCore,
    cosim_cycles: crate::export::TOP_COSIM_CYCLES,
    sets: &[
        sweep_set!(2, 2, 4, 16, "iodie_sweep_c4_e16"),
        sweep_set!(2, 2, 4, 32, "iodie_sweep_c4_e32"),
        sweep_set!(2, 2, 4, 64, "iodie_sweep_c4_e64"),
        sweep_set!(2, 2, 4, 128, "iodie_sweep_c4_e128"),
        sweep_set!(3, 3, 9, 16, "iodie_sweep_c9_e16"),
        sweep_set!(3, 3, 9, 32, "iodie_sweep_c9_e32"),
        sweep_set!(3, 3, 9, 64, "iodie_sweep_c9_e64"),
        sweep_set!(3, 3, 9, 128, "iodie_sweep_c9_e128"),
        sweep_set!(4, 4, 16, 16, "iodie_sweep_c16_e16"),
        sweep_set!(4, 4, 16, 32, "iodie_sweep_c16_e32"),
        sweep_set!(4, 4, 16, 64, "iodie_sweep_c16_e64"),
        sweep_set!(4, 4, 16, 128, "iodie_sweep_c16_e128"),
    ],
};
