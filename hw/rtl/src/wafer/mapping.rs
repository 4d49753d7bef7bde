//! The wafer's mapping controller in RTL (`mapping_ctrl`): the twin of
//! `hw::wafer::mapping::MappingCtrlCl` — the same FSM, one table entry per cycle, the same
//! cycle count — for baseline, ER- and HER-Mapping (MoEntwine §IV, Fig. 8 / Fig. 10).
//!
//! Phases (state codes: 0 idle, 1 `Shape`, 2 `Ring`, 3 `Dies`, 4 `Replicate`, 5 `Done`):
//! 1. `Shape`: the tile-shape unit tries the widths `w = 1..=n`, 32 cycles each (the CL's
//!    `SHAPE_CYCLES`, counted by `k_r`): three sequential dividers ([`super::div::DivRtl`],
//!    one quotient bit per cycle) give `n / w` and `cols / w` in cycles 0–15 and
//!    `rows / (n / w)` in cycles 16–31; at cycle 31 (the last division's last step, read
//!    combinationally) the candidate is compared and the most square `w × n/w` rectangle that
//!    tiles the grid is kept (ties → wider). The last candidate's last cycle latches the ring
//!    grid (`gw × gh`: the TP block under baseline, the grid of FTD blocks under ER/HER).
//! 2. `Ring`: the ring sequencer walks `sched::wafer::ring_order(gw, gh)` one cell per cycle
//!    — the next cell is a function of the current one (row 0 left→right, the comb or the
//!    column snake, back up column 0; the boustrophedon when both sides are odd; row-major
//!    on a line) — and writes its inverse, `ring_inv[y·gw + x] = i` (the ring ROM's
//!    inverse, which is all the `Dies` phase reads).
//! 3. `Dies`: one die per cycle; the die's block coordinates `(bx, by)` and its position in
//!    the block `(px, py)` are counters (no division), and give group, rank (`ring_inv`) and
//!    FTD; the die is written into `group_of` / `rank_of` / `ftd_of`, its group's ring slot
//!    `groups[group·tp + rank]` and its FTD's member slot `ftds[ftd·dp + group]`.
//! 4. `Replicate` (HER only): one die of the whole system per cycle copies wafer 0's entry at
//!    the same local position, the group offset by `wafer · groups_per_wafer`; the FTD is the
//!    wafer and the die is member `local` of it (a wafer's dies in id order are its local
//!    order, so this is the FL's sorted list).
//!
//! Tables are register files of `D` entries (`D` = the largest system the build serves, 64
//! or 256 dies), 16-bit entries (the ring inverse and `slot_of`, read only inside the FSM, are
//! LUT-RAM with an asynchronous read: see the fields); the flat tables `groups` (`dp × tp`) and `ftds`
//! (`tp × dp`, HER `wafers × dies_per_wafer`) hold one entry per die too. The host loads the
//! configuration registers on `start` (the derived ones as the CL's `new` computes them:
//! the layout grid, the tile size `n`, groups per wafer); refusals (a tiling that does not
//! exist, tp·dp ≠ dies, ...) are the FL's checks, made by the host before `start`.
//!
//! Ports each cycle: `state`, the shape register, the die-table write port (`wr_valid`,
//! `wr_die`, `wr_group`, `wr_rank`, `wr_ftd`, `wr_member_valid`, `wr_member`), the ring
//! inverse write port (`inv_valid`, `inv_addr`, `inv_data`), `done`; a combinational read
//! port (`rd_addr` → `rd_*`) for the host to read the finished tables.

use rust_hdl::prelude::*;

use super::div::DivRtl;
use crate::lutram::AsyncRam;
use crate::cosim::{record, PortTrace};
use crate::export::{boxed, BlockDef, ParamSet};
use crate::RtlError;

/// State codes.
pub mod st {
    pub const IDLE: u64 = 0;
    pub const SHAPE: u64 = 1;
    pub const RING: u64 = 2;
    pub const DIES: u64 = 3;
    pub const REPLICATE: u64 = 4;
    pub const DONE: u64 = 5;
}

/// Mapping kind codes of the `kind` input.
pub const KIND_BASELINE: u64 = 0;
pub const KIND_ER: u64 = 1;
pub const KIND_HER: u64 = 2;

/// Mapping controller with `D`-entry tables.
///
/// Port coupling: `state`, `shape_*`, `done`: registered; the write ports: comb(registers)
/// (what this cycle's edge writes); `rd_*`: comb(`rd_addr`); `start` and the configuration
/// inputs: sampled at the rising edge where `start` is high.
#[derive(LogicBlock)]
pub struct MappingCtrlRtl<const D: usize> {
    pub clock: Signal<In, Clock>,
    /// Synchronous, active-high: back to idle (the tables keep their contents, as RAMs do).
    pub reset: Signal<In, Bit>,
    /// Load the configuration and start a mapping (from any state).
    pub start: Signal<In, Bit>,
    /// 0 baseline, 1 ER, 2 HER.
    pub kind: Signal<In, Bits<2>>,
    /// The layout grid (HER: one wafer's), its die count, and the tile size searched (TP
    /// under baseline, DP under ER, a wafer's groups under HER).
    pub grid_cols: Signal<In, Bits<16>>,
    pub grid_rows: Signal<In, Bits<16>>,
    pub grid_dies: Signal<In, Bits<16>>,
    pub n: Signal<In, Bits<16>>,
    pub tp: Signal<In, Bits<16>>,
    pub dp: Signal<In, Bits<16>>,
    /// The whole system (HER): global columns, dies, wafer columns, a wafer's size, groups
    /// per wafer.
    pub cols: Signal<In, Bits<16>>,
    pub dies: Signal<In, Bits<16>>,
    pub wafers_x: Signal<In, Bits<16>>,
    pub die_cols: Signal<In, Bits<16>>,
    pub die_rows: Signal<In, Bits<16>>,
    pub gpw: Signal<In, Bits<16>>,
    /// Read port address (die id, or flat `groups` / `ftds` address).
    pub rd_addr: Signal<In, Bits<16>>,
    pub state: Signal<Out, Bits<3>>,
    pub shape_valid: Signal<Out, Bit>,
    pub shape_w: Signal<Out, Bits<16>>,
    pub shape_h: Signal<Out, Bits<16>>,
    /// Die-table write of this cycle (`Dies`, `Replicate`).
    pub wr_valid: Signal<Out, Bit>,
    pub wr_die: Signal<Out, Bits<16>>,
    pub wr_group: Signal<Out, Bits<16>>,
    pub wr_rank: Signal<Out, Bits<16>>,
    pub wr_ftd: Signal<Out, Bits<16>>,
    /// The FTD member slot `ftds[wr_ftd][wr_member]` is written too (not under HER's `Dies`).
    pub wr_member_valid: Signal<Out, Bit>,
    pub wr_member: Signal<Out, Bits<16>>,
    /// Ring inverse write of this cycle (`Ring`).
    pub inv_valid: Signal<Out, Bit>,
    pub inv_addr: Signal<Out, Bits<16>>,
    pub inv_data: Signal<Out, Bits<16>>,
    pub done: Signal<Out, Bit>,
    pub rd_group_of: Signal<Out, Bits<16>>,
    pub rd_rank_of: Signal<Out, Bits<16>>,
    pub rd_ftd_of: Signal<Out, Bits<16>>,
    pub rd_groups: Signal<Out, Bits<16>>,
    pub rd_ftds: Signal<Out, Bits<16>>,
    // --- configuration registers ---
    kind_r: DFF<Bits<2>>,
    gc_r: DFF<Bits<16>>,
    gr_r: DFF<Bits<16>>,
    gd_r: DFF<Bits<16>>,
    n_r: DFF<Bits<16>>,
    tp_r: DFF<Bits<16>>,
    dp_r: DFF<Bits<16>>,
    cols_r: DFF<Bits<16>>,
    dies_r: DFF<Bits<16>>,
    wx_r: DFF<Bits<16>>,
    dc_r: DFF<Bits<16>>,
    dr_r: DFF<Bits<16>>,
    gpw_r: DFF<Bits<16>>,
    // --- FSM ---
    state_r: DFF<Bits<3>>,
    /// Shape search: candidate width and the dividers' step within it; best shape and its
    /// block-grid size (cols/bw, rows/bh).
    w_r: DFF<Bits<16>>,
    k_r: DFF<Bits<5>>,
    bvalid_r: DFF<Bit>,
    bw_r: DFF<Bits<16>>,
    bh_r: DFF<Bits<16>>,
    bqc_r: DFF<Bits<16>>,
    bqr_r: DFF<Bits<16>>,
    /// Ring grid and the sequencer's cell.
    gw_r: DFF<Bits<16>>,
    gh_r: DFF<Bits<16>>,
    rx_r: DFF<Bits<16>>,
    ry_r: DFF<Bits<16>>,
    /// The cell's row base `ry · gw` (mod 2^16), moved with `ry_r` (by ±`gw`, to `gw` or 0)
    /// instead of multiplied: the ring-inverse write address is `ra_r + rx_r`.
    ra_r: DFF<Bits<16>>,
    /// Cursor of Ring / Dies / Replicate.
    i_r: DFF<Bits<16>>,
    /// Dies / Replicate coordinate counters: die (x, y); block and in-block position (Dies),
    /// wafer and local position (Replicate); row bases `py·bw`, `by·(cols/bw)`, `y·cols`
    /// (Dies) and `ly·die_cols`, `ly·cols`, `wy·wafers_x` (Replicate).
    x_r: DFF<Bits<16>>,
    px_r: DFF<Bits<16>>,
    py_r: DFF<Bits<16>>,
    bx_r: DFF<Bits<16>>,
    prow_r: DFF<Bits<16>>,
    brow_r: DFF<Bits<16>>,
    idrow_r: DFF<Bits<16>>,
    /// Dies / Replicate address terms of the current die, registered from the counters' next
    /// values (so each equals its sum of the counter registers in every cycle: the adders
    /// move before the register, the cycle behaviour does not change): `g_q` the group
    /// (`brow + bx` under baseline, `prow + px` otherwise), `o_q` the other pair (the
    /// ring-inverse address and FTD in `Dies`, the wafer in `Replicate`), `ps_q` = `idrow +
    /// px` (Replicate's source die: its low 8 bits, the LUT-RAMs' read address; a source die
    /// is below `D` ≤ 256), `pi_q` = `idrow + x` (HER's die id in `Dies`).
    g_q: DFF<Bits<16>>,
    o_q: DFF<Bits<16>>,
    ps_q: DFF<Bits<8>>,
    pi_q: DFF<Bits<16>>,
    /// Products of configuration registers, registered from their next values (equal to the
    /// product of the registers in every cycle): a wafer's dies `die_cols · die_rows`, and
    /// `gpw · tp` (Replicate's group-slot offset per wafer).
    dpw_q: DFF<Bits<16>>,
    gpwtp_q: DFF<Bits<16>>,
    /// The operands of the two table-address products, one multiplier each for `Dies` and
    /// `Replicate` (registered, so no state-selected multiplexer sits before a multiplier):
    /// `ga_q` × `gb_r` is the group slot base (`Dies`: group · tp; `Replicate`: wafer · (gpw ·
    /// tp)), `o_q` × `fb_r` the FTD slot base (`Dies`: ftd · dp; `Replicate`: wafer · dies per
    /// wafer). Selected by the current state: the one edge into `Replicate` (from `Dies`'
    /// last cycle) zeroes the counters, so `ga_q` and `o_q` are 0 there and the product is
    /// 0 with either factor.
    ga_q: DFF<Bits<16>>,
    gb_r: DFF<Bits<16>>,
    fb_r: DFF<Bits<16>>,
    /// The ring grid's size `gw · gh` (the `Ring` phase's length), kept beside the shape
    /// registers instead of multiplied after the shape decision: `ring_n_r` = `gw_r · gh_r`
    /// and `bprod_r` = the best shape's ring-grid size (`bw · bh` under baseline, `bqc · bqr`
    /// otherwise), both latched from `nprod` with the registers they are the product of (mod
    /// 2^16, as the product of the registers). The candidate's size `cprod` comes from
    /// registers and the last divider step's quotient bit: `whq` = `w · (n / w)`, registered
    /// from `w_r`'s next value and `div_n.q`; `cqm` = `div_c.q · div_r.q` (registered, the
    /// partial quotient of the cycle before) and `rstep_q` (`div_r` stepped at that edge) give
    /// `div_c.q · div_r.q` of this cycle, and `cols/w · div_r.q_next` is twice that plus the
    /// step's bit times `div_c.q`. Exact in the candidate's last cycle, where they are read:
    /// `div_n` and `div_c` do not step in the cycle before it (their steps are cycles 0–15).
    whq: DFF<Bits<16>>,
    cqm: DFF<Bits<16>>,
    rstep_q: DFF<Bit>,
    bprod_r: DFF<Bits<16>>,
    ring_n_r: DFF<Bits<16>>,
    /// The candidate decision's terms that do not depend on its last divider step, registered
    /// in the cycle before the candidate's last (cycle 30, or the `start` before a stale
    /// `k_r` = 31): `cmp_q` = the candidate beats the best if it fits (`!bvalid`, `|w − h| <
    /// |bw − bh|`, the tie), `fnc_q` = `n % w` and `cols % w` are 0. Their operands (`w_r`,
    /// `div_n`, `div_c`, the best shape) do not change at that edge — `div_n` / `div_c` step in
    /// cycles 0–15, the best shape and `w_r` at cycle 31 — except on `start`, which clears
    /// `bvalid` (so the candidate beats it: `cmp_q` = 1).
    cmp_q: DFF<Bit>,
    fnc_q: DFF<Bit>,
    // --- tables ---
    /// The ring ROM's inverse: written in `Ring`, read only in `Dies` (at `o_q`, a register):
    /// LUT-RAM with an asynchronous read ([`crate::lutram::AsyncRam`]), not a flip-flop file
    /// with a 64:1 read multiplexer — it is not on the host's read port, so its unwritten
    /// words (x in Verilog) are never read (a mapping's `Dies` reads the cells its `Ring`
    /// wrote).
    ring_inv: AsyncRam<Bits<16>, 8>,
    /// Each die's group-slot address `group_of[d] · tp + rank_of[d]` (mod 2^16), written with
    /// `group_of` / `rank_of` (same enable and address, data = this cycle's `groups` address):
    /// `Replicate` reads its source die's slot here instead of multiplying the source's group
    /// read from `group_of` by `tp` — `(src_group + wgoff) · tp + src_rank` = `slot_of[src] +
    /// wafer · (gpw · tp)`. Exact whenever the source was written under the same `tp`, which
    /// holds for every request: `Replicate` reads wafer 0's dies, all written by the same
    /// mapping's `Dies`. LUT-RAM, read asynchronously at `ps_q`.
    slot_of: AsyncRam<Bits<16>, 8>,
    /// LUT-RAM copies of `group_of` and `rank_of` (same enable, address and data), for
    /// `Replicate`'s source read at `ps_q` (`src_group`, `src_rank`): the flip-flop tables
    /// stay for the host's read port (their unwritten words read 0), and the source read is a
    /// LUT-RAM read instead of a 64:1 multiplexer over flip-flops. The source is a die of
    /// wafer 0, written by the same mapping's `Dies` (as for `slot_of`).
    group_ram: AsyncRam<Bits<16>, 8>,
    rank_ram: AsyncRam<Bits<16>, 8>,
    group_of: [DFF<Bits<16>>; D],
    rank_of: [DFF<Bits<16>>; D],
    ftd_of: [DFF<Bits<16>>; D],
    groups: [DFF<Bits<16>>; D],
    ftds: [DFF<Bits<16>>; D],
    // --- datapath ---
    div_n: DivRtl,
    div_c: DivRtl,
    div_r: DivRtl,
    /// Shape unit: h = n / w, the candidate tiles, it beats the best, |w − h| and |bw − bh|.
    h: Signal<Local, Bits<16>>,
    /// In `Shape`; at the candidate's first cycle; at its second division's first cycle.
    shaping: Signal<Local, Bit>,
    k0: Signal<Local, Bit>,
    k16: Signal<Local, Bit>,
    fits: Signal<Local, Bit>,
    better: Signal<Local, Bit>,
    cmp: Signal<Local, Bit>,
    dw: Signal<Local, Bits<16>>,
    db: Signal<Local, Bits<16>>,
    /// The best shape after this cycle's candidate (the last cycle latches the ring grid).
    nbw: Signal<Local, Bits<16>>,
    nbh: Signal<Local, Bits<16>>,
    nqc: Signal<Local, Bits<16>>,
    nqr: Signal<Local, Bits<16>>,
    /// This candidate's ring-grid size, `div_c.q · div_r.q` of this cycle, and the best
    /// shape's ring-grid size after it (see `ring_n_r`).
    cq: Signal<Local, Bits<16>>,
    cprod: Signal<Local, Bits<16>>,
    nprod: Signal<Local, Bits<16>>,
    /// Ring sequencer: the next cell.
    nrx: Signal<Local, Bits<16>>,
    nry: Signal<Local, Bits<16>>,
    nra: Signal<Local, Bits<16>>,
    line: Signal<Local, Bit>,
    /// Dies: group, ring-inverse address, FTD, die id; Replicate: wafer, local, source die.
    g: Signal<Local, Bits<16>>,
    ftd: Signal<Local, Bits<16>>,
    id: Signal<Local, Bits<16>>,
    rank: Signal<Local, Bits<16>>,
    src_group: Signal<Local, Bits<16>>,
    src_rank: Signal<Local, Bits<16>>,
    /// Table write enables and addresses of this cycle.
    we: Signal<Local, Bit>,
    we_member: Signal<Local, Bit>,
    grp_addr: Signal<Local, Bits<16>>,
    ftd_addr: Signal<Local, Bits<16>>,
    /// Replicate: wafer index and its group offset.
    wafer: Signal<Local, Bits<16>>,
    wgoff: Signal<Local, Bits<16>>,
    /// Products of the address arithmetic; every operand is a register (`p_dpw`, `p_gt`:
    /// the configuration registers' next values, into `dpw_q`, `gpwtp_q`).
    p_wg: Signal<Local, Bits<32>>,
    p_wh: Signal<Local, Bits<32>>,
    p_cq: Signal<Local, Bits<32>>,
    p_dpw: Signal<Local, Bits<32>>,
    p_gt: Signal<Local, Bits<32>>,
    /// `Dies`: group · tp, FTD · dp; `Replicate`: wafer · gpw · tp, wafer · dies per wafer.
    p_grp: Signal<Local, Bits<32>>,
    p_ftd: Signal<Local, Bits<32>>,
    /// Sized constants (no 32-bit literals in the Verilog): state and kind codes, 0 and 1.
    s_code: [Constant<Bits<3>>; 6],
    /// Shape step codes: 0, 1, 16 (the second division starts), 31 (the candidate's last).
    k_zero: Constant<Bits<5>>,
    k_one: Constant<Bits<5>>,
    k_half: Constant<Bits<5>>,
    k_last: Constant<Bits<5>>,
    /// Kind codes compared directly: baseline (0) and HER (2); ER (1) is what is neither.
    k_base: Constant<Bits<2>>,
    k_her: Constant<Bits<2>>,
    zero: Constant<Bits<16>>,
    one: Constant<Bits<16>>,
}

impl<const D: usize> MappingCtrlRtl<D> {
    pub fn new() -> Self {
        assert!((1..=256).contains(&D), "mapping table depth {D} outside 1..=256");
        Self {
            clock: Default::default(),
            reset: Default::default(),
            start: Default::default(),
            kind: Default::default(),
            grid_cols: Default::default(),
            grid_rows: Default::default(),
            grid_dies: Default::default(),
            n: Default::default(),
            tp: Default::default(),
            dp: Default::default(),
            cols: Default::default(),
            dies: Default::default(),
            wafers_x: Default::default(),
            die_cols: Default::default(),
            die_rows: Default::default(),
            gpw: Default::default(),
            rd_addr: Default::default(),
            state: Default::default(),
            shape_valid: Default::default(),
            shape_w: Default::default(),
            shape_h: Default::default(),
            wr_valid: Default::default(),
            wr_die: Default::default(),
            wr_group: Default::default(),
            wr_rank: Default::default(),
            wr_ftd: Default::default(),
            wr_member_valid: Default::default(),
            wr_member: Default::default(),
            inv_valid: Default::default(),
            inv_addr: Default::default(),
            inv_data: Default::default(),
            done: Default::default(),
            rd_group_of: Default::default(),
            rd_rank_of: Default::default(),
            rd_ftd_of: Default::default(),
            rd_groups: Default::default(),
            rd_ftds: Default::default(),
            kind_r: Default::default(),
            gc_r: Default::default(),
            gr_r: Default::default(),
            gd_r: Default::default(),
            n_r: Default::default(),
            tp_r: Default::default(),
            dp_r: Default::default(),
            cols_r: Default::default(),
            dies_r: Default::default(),
            wx_r: Default::default(),
            dc_r: Default::default(),
            dr_r: Default::default(),
            gpw_r: Default::default(),
            state_r: Default::default(),
            w_r: Default::default(),
            k_r: Default::default(),
            bvalid_r: Default::default(),
            bw_r: Default::default(),
            bh_r: Default::default(),
            bqc_r: Default::default(),
            bqr_r: Default::default(),
            gw_r: Default::default(),
            gh_r: Default::default(),
            rx_r: Default::default(),
            ry_r: Default::default(),
            ra_r: Default::default(),
            i_r: Default::default(),
            x_r: Default::default(),
            px_r: Default::default(),
            py_r: Default::default(),
            bx_r: Default::default(),
            prow_r: Default::default(),
            brow_r: Default::default(),
            idrow_r: Default::default(),
            g_q: Default::default(),
            o_q: Default::default(),
            ps_q: Default::default(),
            pi_q: Default::default(),
            dpw_q: Default::default(),
            gpwtp_q: Default::default(),
            ga_q: Default::default(),
            gb_r: Default::default(),
            fb_r: Default::default(),
            whq: Default::default(),
            cqm: Default::default(),
            rstep_q: Default::default(),
            bprod_r: Default::default(),
            ring_n_r: Default::default(),
            cmp_q: Default::default(),
            fnc_q: Default::default(),
            ring_inv: AsyncRam::with_words(D),
            slot_of: AsyncRam::with_words(D),
            group_ram: AsyncRam::with_words(D),
            rank_ram: AsyncRam::with_words(D),
            group_of: std::array::from_fn(|_| Default::default()),
            rank_of: std::array::from_fn(|_| Default::default()),
            ftd_of: std::array::from_fn(|_| Default::default()),
            groups: std::array::from_fn(|_| Default::default()),
            ftds: std::array::from_fn(|_| Default::default()),
            div_n: Default::default(),
            div_c: Default::default(),
            div_r: Default::default(),
            h: Default::default(),
            shaping: Default::default(),
            k0: Default::default(),
            k16: Default::default(),
            fits: Default::default(),
            better: Default::default(),
            cmp: Default::default(),
            dw: Default::default(),
            db: Default::default(),
            nbw: Default::default(),
            nbh: Default::default(),
            nqc: Default::default(),
            nqr: Default::default(),
            cq: Default::default(),
            cprod: Default::default(),
            nprod: Default::default(),
            nrx: Default::default(),
            nry: Default::default(),
            nra: Default::default(),
            line: Default::default(),
            g: Default::default(),
            ftd: Default::default(),
            id: Default::default(),
            rank: Default::default(),
            src_group: Default::default(),
            src_rank: Default::default(),
            we: Default::default(),
            we_member: Default::default(),
            grp_addr: Default::default(),
            ftd_addr: Default::default(),
            wafer: Default::default(),
            wgoff: Default::default(),
            p_wg: Default::default(),
            p_wh: Default::default(),
            p_cq: Default::default(),
            p_dpw: Default::default(),
            p_gt: Default::default(),
            p_grp: Default::default(),
            p_ftd: Default::default(),
            s_code: std::array::from_fn(|i| Constant::new((i as u64).into())),
            k_zero: Constant::new(0u64.into()),
            k_one: Constant::new(1u64.into()),
            k_half: Constant::new(16u64.into()),
            k_last: Constant::new(31u64.into()),
            k_base: Constant::new(0u64.into()),
            k_her: Constant::new(2u64.into()),
            zero: Constant::new(0u64.into()),
            one: Constant::new(1u64.into()),
        }
    }
}

impl<const D: usize> Default for MappingCtrlRtl<D> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const D: usize> Logic for MappingCtrlRtl<D> {
    #[hdl_gen]
    fn update(&mut self) {
        // 1. Clocks; every register holds by default.
        dff_setup!(
            self, clock, kind_r, gc_r, gr_r, gd_r, n_r, tp_r, dp_r, cols_r, dies_r, wx_r, dc_r, dr_r, gpw_r, state_r, w_r, k_r, bvalid_r, bw_r, bh_r, bqc_r, bqr_r, gw_r, gh_r, rx_r, ry_r, ra_r, i_r, x_r, px_r, py_r, bx_r, prow_r, brow_r, idrow_r, g_q, o_q, ps_q, pi_q, dpw_q, gpwtp_q, ga_q, gb_r, fb_r, whq, cqm, rstep_q, bprod_r, ring_n_r, cmp_q, fnc_q
        );
        self.ring_inv.write_clock.next = self.clock.val();
        self.slot_of.write_clock.next = self.clock.val();
        self.group_ram.write_clock.next = self.clock.val();
        self.rank_ram.write_clock.next = self.clock.val();
        for k in 0..D {
            self.group_of[k].clock.next = self.clock.val();
            self.rank_of[k].clock.next = self.clock.val();
            self.ftd_of[k].clock.next = self.clock.val();
            self.groups[k].clock.next = self.clock.val();
            self.ftds[k].clock.next = self.clock.val();
            self.group_of[k].d.next = self.group_of[k].q.val();
            self.rank_of[k].d.next = self.rank_of[k].q.val();
            self.ftd_of[k].d.next = self.ftd_of[k].q.val();
            self.groups[k].d.next = self.groups[k].q.val();
            self.ftds[k].d.next = self.ftds[k].q.val();
        }
        // Products of registers (16 × 16 → 32 bits; each is below 2^16).
        // 2. Shape unit: h = n / w (n % w = 0), cols % w = 0, rows % h = 0. `n / w` and
        // `cols / w` step in cycles 0–15 of the candidate, `rows / h` in 16–31 (its divisor is
        // the registered `n / w`); the candidate is decided at cycle 31 from the last step.
        self.shaping.next = self.state_r.q.val() == self.s_code[1].val();
        self.k0.next = self.k_r.q.val() == self.k_zero.val();
        self.k16.next = self.k_r.q.val() == self.k_half.val();
        self.div_n.clock.next = self.clock.val();
        self.div_c.clock.next = self.clock.val();
        self.div_r.clock.next = self.clock.val();
        self.div_n.start.next = self.shaping.val() & self.k0.val();
        self.div_c.start.next = self.shaping.val() & self.k0.val();
        self.div_n.run.next = self.shaping.val() & !self.k0.val() & !self.k_r.q.val().get_bit(4);
        self.div_c.run.next = self.shaping.val() & !self.k0.val() & !self.k_r.q.val().get_bit(4);
        self.div_r.start.next = self.shaping.val() & self.k16.val();
        self.div_r.run.next = self.shaping.val() & !self.k16.val() & self.k_r.q.val().get_bit(4);
        self.div_n.a.next = self.n_r.q.val();
        self.div_n.b.next = self.w_r.q.val();
        self.h.next = self.div_n.q.val();
        self.div_c.a.next = self.gc_r.q.val();
        self.div_c.b.next = self.w_r.q.val();
        self.div_r.a.next = self.gr_r.q.val();
        self.div_r.b.next = self.div_n.q.val();
        self.fits.next = self.fnc_q.q.val() & self.div_r.z_next.val();
        self.dw.next = self.h.val() - self.w_r.q.val();
        if self.w_r.q.val() > self.h.val() {
            self.dw.next = self.w_r.q.val() - self.h.val();
        }
        self.db.next = self.bh_r.q.val() - self.bw_r.q.val();
        if self.bw_r.q.val() > self.bh_r.q.val() {
            self.db.next = self.bw_r.q.val() - self.bh_r.q.val();
        }
        self.cmp.next = !self.bvalid_r.q.val() | (self.dw.val() < self.db.val()) | ((self.dw.val() == self.db.val()) & (self.w_r.q.val() > self.bw_r.q.val()));
        self.better.next = self.fits.val() & self.cmp_q.q.val();
        self.nbw.next = self.bw_r.q.val();
        self.nbh.next = self.bh_r.q.val();
        self.nqc.next = self.bqc_r.q.val();
        self.nqr.next = self.bqr_r.q.val();
        if self.better.val() {
            self.nbw.next = self.w_r.q.val();
            self.nbh.next = self.h.val();
            self.nqc.next = self.div_c.q.val();
            self.nqr.next = self.div_r.q_next.val();
        }
        // The candidate's ring-grid size (see `ring_n_r`): `w · h` under baseline, else
        // `cols/w · rows/h` = 2 · (div_c.q · div_r.q) + bit · div_c.q.
        self.cq.next = self.cqm.q.val();
        if self.rstep_q.q.val() {
            self.cq.next = self.cqm.q.val() + self.cqm.q.val();
            if self.div_r.q.val().get_bit(0) {
                self.cq.next = self.cqm.q.val() + self.cqm.q.val() + self.div_c.q.val();
            }
        }
        self.cprod.next = self.cq.val() + self.cq.val();
        if self.div_r.q_next.val().get_bit(0) {
            self.cprod.next = self.cq.val() + self.cq.val() + self.div_c.q.val();
        }
        if self.kind_r.q.val() == self.k_base.val() {
            self.cprod.next = self.whq.q.val();
        }
        self.nprod.next = self.bprod_r.q.val();
        if self.better.val() {
            self.nprod.next = self.cprod.val();
        }
        // Ring sequencer: the cell after (rx, ry) in ring_order(gw, gh).
        self.line.next = (self.gw_r.q.val() <= self.one.val()) | (self.gh_r.q.val() <= self.one.val());
        self.nrx.next = self.rx_r.q.val();
        self.nry.next = self.ry_r.q.val();
        self.nra.next = self.ra_r.q.val();
        if self.line.val() {
            // Row-major.
            self.nrx.next = self.rx_r.q.val() + self.one.val();
            if self.rx_r.q.val() + self.one.val() == self.gw_r.q.val() {
                self.nrx.next = self.zero.val();
                self.nry.next = self.ry_r.q.val() + self.one.val();
                self.nra.next = self.ra_r.q.val() + self.gw_r.q.val();
            }
        } else if self.gw_r.q.val().get_bit(0) & self.gh_r.q.val().get_bit(0) {
            // Both odd: boustrophedon over the rows.
            if !self.ry_r.q.val().get_bit(0) {
                self.nrx.next = self.rx_r.q.val() + self.one.val();
                if self.rx_r.q.val() + self.one.val() == self.gw_r.q.val() {
                    self.nrx.next = self.rx_r.q.val();
                    self.nry.next = self.ry_r.q.val() + self.one.val();
                    self.nra.next = self.ra_r.q.val() + self.gw_r.q.val();
                }
            } else {
                self.nrx.next = self.rx_r.q.val() - self.one.val();
                if !self.rx_r.q.val().any() {
                    self.nrx.next = self.zero.val();
                    self.nry.next = self.ry_r.q.val() + self.one.val();
                    self.nra.next = self.ra_r.q.val() + self.gw_r.q.val();
                }
            }
        } else if !self.ry_r.q.val().any() {
            // Row 0 left to right, then down into the last column.
            self.nrx.next = self.rx_r.q.val() + self.one.val();
            if self.rx_r.q.val() + self.one.val() == self.gw_r.q.val() {
                self.nrx.next = self.rx_r.q.val();
                self.nry.next = self.one.val();
                self.nra.next = self.gw_r.q.val();
            }
        } else if !self.rx_r.q.val().any() {
            // Back up column 0.
            self.nry.next = self.ry_r.q.val() - self.one.val();
            self.nra.next = self.ra_r.q.val() - self.gw_r.q.val();
        } else if !self.gh_r.q.val().get_bit(0) {
            // h even: the comb over columns 1..w, odd rows right to left.
            if self.ry_r.q.val().get_bit(0) {
                self.nrx.next = self.rx_r.q.val() - self.one.val();
                if self.rx_r.q.val() == self.one.val() {
                    self.nrx.next = self.one.val();
                    self.nry.next = self.ry_r.q.val() + self.one.val();
                    self.nra.next = self.ra_r.q.val() + self.gw_r.q.val();
                    if self.ry_r.q.val() + self.one.val() == self.gh_r.q.val() {
                        self.nrx.next = self.zero.val();
                        self.nry.next = self.ry_r.q.val();
                        self.nra.next = self.ra_r.q.val();
                    }
                }
            } else {
                self.nrx.next = self.rx_r.q.val() + self.one.val();
                if self.rx_r.q.val() + self.one.val() == self.gw_r.q.val() {
                    self.nrx.next = self.rx_r.q.val();
                    self.nry.next = self.ry_r.q.val() + self.one.val();
                    self.nra.next = self.ra_r.q.val() + self.gw_r.q.val();
                }
            }
        } else {
            // h odd, w even: the column snake over rows 1..h, columns w-1 down to 1 (column x
            // goes down when w-1-x is even, i.e. when x is odd).
            if self.rx_r.q.val().get_bit(0) {
                self.nry.next = self.ry_r.q.val() + self.one.val();
                self.nra.next = self.ra_r.q.val() + self.gw_r.q.val();
                if self.ry_r.q.val() + self.one.val() == self.gh_r.q.val() {
                    self.nrx.next = self.rx_r.q.val() - self.one.val();
                    self.nry.next = self.ry_r.q.val();
                    self.nra.next = self.ra_r.q.val();
                }
            } else {
                self.nry.next = self.ry_r.q.val() - self.one.val();
                self.nra.next = self.ra_r.q.val() - self.gw_r.q.val();
                if self.ry_r.q.val() == self.one.val() {
                    self.nrx.next = self.rx_r.q.val() - self.one.val();
                    self.nry.next = self.one.val();
                    self.nra.next = self.gw_r.q.val();
                }
            }
        }
        // Dies: group / ring-inverse address / FTD of die (x, y), and its id (the sums of the
        // counters, registered: `g_q`, `o_q`, `pi_q`).
        self.g.next = self.g_q.q.val();
        self.ftd.next = self.o_q.q.val();
        self.id.next = self.i_r.q.val();
        if self.kind_r.q.val() == self.k_her.val() {
            self.id.next = self.pi_q.q.val();
        }
        // Replicate (HER): the die's wafer (bx_r counts wafer columns, brow_r = wy·wafers_x:
        // `o_q`), its local position (px_r = lx, prow_r = ly·die_cols: `g_q`) and the source
        // die of wafer 0 at that position (idrow_r = ly·cols: `ps_q`).
        self.wafer.next = self.o_q.q.val();
        self.p_wg.next = self.o_q.q.val() * self.gpw_r.q.val();
        self.wgoff.next = self.p_wg.val().get_bits::<16>(0);
        // Table address products, all of registers.
        self.p_grp.next = self.ga_q.q.val() * self.gb_r.q.val();
        self.p_ftd.next = self.o_q.q.val() * self.fb_r.q.val();
        // Table read ports (muxes over the register files).
        self.rd_group_of.next = self.zero.val();
        self.rd_rank_of.next = self.zero.val();
        self.rd_ftd_of.next = self.zero.val();
        self.rd_groups.next = self.zero.val();
        self.rd_ftds.next = self.zero.val();
        self.ring_inv.read_address.next = self.o_q.q.val().get_bits::<8>(0);
        self.rank.next = self.ring_inv.read_data.val();
        self.slot_of.read_address.next = self.ps_q.q.val();
        self.group_ram.read_address.next = self.ps_q.q.val();
        self.rank_ram.read_address.next = self.ps_q.q.val();
        self.src_group.next = self.group_ram.read_data.val();
        self.src_rank.next = self.rank_ram.read_data.val();
        for k in 0..D {
            if self.rd_addr.val().index() == k {
                self.rd_group_of.next = self.group_of[k].q.val();
                self.rd_rank_of.next = self.rank_of[k].q.val();
                self.rd_ftd_of.next = self.ftd_of[k].q.val();
                self.rd_groups.next = self.groups[k].q.val();
                self.rd_ftds.next = self.ftds[k].q.val();
            }
        }
        // Default outputs: no write this cycle.
        self.we.next = false;
        self.we_member.next = false;
        self.wr_die.next = self.zero.val();
        self.wr_group.next = self.zero.val();
        self.wr_rank.next = self.zero.val();
        self.wr_ftd.next = self.zero.val();
        self.wr_member.next = self.zero.val();
        self.inv_valid.next = false;
        self.inv_addr.next = self.zero.val();
        self.inv_data.next = self.zero.val();
        // 3. Next state.
        if (self.state_r.q.val() == self.s_code[1].val()) & (self.k_r.q.val() != self.k_last.val()) {
            self.k_r.d.next = self.k_r.q.val() + self.k_one.val();
        }
        if (self.state_r.q.val() == self.s_code[1].val()) & (self.k_r.q.val() == self.k_last.val()) {
            self.k_r.d.next = self.k_zero.val();
            if self.better.val() {
                self.bvalid_r.d.next = true;
                self.bw_r.d.next = self.nbw.val();
                self.bh_r.d.next = self.nbh.val();
                self.bqc_r.d.next = self.nqc.val();
                self.bqr_r.d.next = self.nqr.val();
                self.bprod_r.d.next = self.nprod.val();
            }
            self.w_r.d.next = self.w_r.q.val() + self.one.val();
            if self.w_r.q.val() == self.n_r.q.val() {
                // Baseline rings run inside a TP block; ER rings over the grid of FTD blocks.
                self.gw_r.d.next = self.nqc.val();
                self.gh_r.d.next = self.nqr.val();
                self.ring_n_r.d.next = self.nprod.val();
                if self.kind_r.q.val() == self.k_base.val() {
                    self.gw_r.d.next = self.nbw.val();
                    self.gh_r.d.next = self.nbh.val();
                }
                self.rx_r.d.next = self.zero.val();
                self.ry_r.d.next = self.zero.val();
                self.ra_r.d.next = self.zero.val();
                self.i_r.d.next = self.zero.val();
                self.state_r.d.next = self.s_code[2].val();
            }
        }
        if self.state_r.q.val() == self.s_code[2].val() {
            self.inv_valid.next = true;
            self.inv_addr.next = self.ra_r.q.val() + self.rx_r.q.val();
            self.inv_data.next = self.i_r.q.val();
            self.rx_r.d.next = self.nrx.val();
            self.ry_r.d.next = self.nry.val();
            self.ra_r.d.next = self.nra.val();
            self.i_r.d.next = self.i_r.q.val() + self.one.val();
            if self.i_r.q.val() + self.one.val() == self.ring_n_r.q.val() {
                self.i_r.d.next = self.zero.val();
                self.x_r.d.next = self.zero.val();
                self.px_r.d.next = self.zero.val();
                self.py_r.d.next = self.zero.val();
                self.bx_r.d.next = self.zero.val();
                self.prow_r.d.next = self.zero.val();
                self.brow_r.d.next = self.zero.val();
                self.idrow_r.d.next = self.zero.val();
                self.state_r.d.next = self.s_code[3].val();
            }
        }
        if self.state_r.q.val() == self.s_code[3].val() {
            self.we.next = true;
            self.we_member.next = self.kind_r.q.val() != self.k_her.val();
            self.wr_die.next = self.id.val();
            self.wr_group.next = self.g.val();
            self.wr_rank.next = self.rank.val();
            self.wr_ftd.next = self.ftd.val();
            if self.kind_r.q.val() == self.k_her.val() {
                self.wr_ftd.next = self.zero.val();
            }
            self.wr_member.next = self.g.val();
            // Counters: x, px wrapping at bw (bx counts blocks); at the row's end y, py wrapping
            // at bh (the row bases move by bw, cols/bw and cols).
            self.i_r.d.next = self.i_r.q.val() + self.one.val();
            self.x_r.d.next = self.x_r.q.val() + self.one.val();
            self.px_r.d.next = self.px_r.q.val() + self.one.val();
            if self.px_r.q.val() + self.one.val() == self.bw_r.q.val() {
                self.px_r.d.next = self.zero.val();
                self.bx_r.d.next = self.bx_r.q.val() + self.one.val();
            }
            if self.x_r.q.val() + self.one.val() == self.gc_r.q.val() {
                self.x_r.d.next = self.zero.val();
                self.px_r.d.next = self.zero.val();
                self.bx_r.d.next = self.zero.val();
                self.idrow_r.d.next = self.idrow_r.q.val() + self.cols_r.q.val();
                self.py_r.d.next = self.py_r.q.val() + self.one.val();
                self.prow_r.d.next = self.prow_r.q.val() + self.bw_r.q.val();
                if self.py_r.q.val() + self.one.val() == self.bh_r.q.val() {
                    self.py_r.d.next = self.zero.val();
                    self.prow_r.d.next = self.zero.val();
                    self.brow_r.d.next = self.brow_r.q.val() + self.bqc_r.q.val();
                }
            }
            if self.i_r.q.val() + self.one.val() == self.gd_r.q.val() {
                self.i_r.d.next = self.zero.val();
                // Replicate's counters: x, y over the system; (px, prow) = local (lx, ly·die_cols),
                // py = ly, idrow = ly·cols; bx = wafer column, brow = wy·wafers_x, x_r the
                // global column, y_r's row count inside a wafer in py.
                self.x_r.d.next = self.zero.val();
                self.px_r.d.next = self.zero.val();
                self.py_r.d.next = self.zero.val();
                self.bx_r.d.next = self.zero.val();
                self.prow_r.d.next = self.zero.val();
                self.brow_r.d.next = self.zero.val();
                self.idrow_r.d.next = self.zero.val();
                self.state_r.d.next = self.s_code[5].val();
                if self.kind_r.q.val() == self.k_her.val() {
                    self.state_r.d.next = self.s_code[4].val();
                }
            }
        }
        if self.state_r.q.val() == self.s_code[4].val() {
            self.we.next = true;
            self.we_member.next = true;
            self.wr_die.next = self.i_r.q.val();
            self.wr_group.next = self.src_group.val() + self.wgoff.val();
            self.wr_rank.next = self.src_rank.val();
            self.wr_ftd.next = self.wafer.val();
            // The local position prow + px: `g_q` under HER (the only kind with Replicate).
            self.wr_member.next = self.g_q.q.val();
            // Counters over the system grid: lx wraps at die_cols (next wafer column), the
            // global column at cols (next row: ly, wrapping at die_rows = next wafer row).
            self.i_r.d.next = self.i_r.q.val() + self.one.val();
            self.x_r.d.next = self.x_r.q.val() + self.one.val();
            self.px_r.d.next = self.px_r.q.val() + self.one.val();
            if self.px_r.q.val() + self.one.val() == self.dc_r.q.val() {
                self.px_r.d.next = self.zero.val();
                self.bx_r.d.next = self.bx_r.q.val() + self.one.val();
            }
            if self.x_r.q.val() + self.one.val() == self.cols_r.q.val() {
                self.x_r.d.next = self.zero.val();
                self.px_r.d.next = self.zero.val();
                self.bx_r.d.next = self.zero.val();
                self.py_r.d.next = self.py_r.q.val() + self.one.val();
                self.prow_r.d.next = self.prow_r.q.val() + self.dc_r.q.val();
                self.idrow_r.d.next = self.idrow_r.q.val() + self.cols_r.q.val();
                if self.py_r.q.val() + self.one.val() == self.dr_r.q.val() {
                    self.py_r.d.next = self.zero.val();
                    self.prow_r.d.next = self.zero.val();
                    self.idrow_r.d.next = self.zero.val();
                    self.brow_r.d.next = self.brow_r.q.val() + self.wx_r.q.val();
                }
            }
            if self.i_r.q.val() + self.one.val() == self.dies_r.q.val() {
                self.state_r.d.next = self.s_code[5].val();
            }
        }
        // Table addresses: groups[group · tp + rank], ftds[ftd · len + member] (len = dp, or
        // a wafer's dies in Replicate) — as sums of registered products. Dies: the rank is
        // the ring inverse's word; HER writes no FTD slot there. Replicate: the source's slot
        // plus the wafer's offset (see `slot_of`), member `g_q` of FTD `o_q`.
        self.grp_addr.next = self.p_grp.val().get_bits::<16>(0) + self.rank.val();
        self.ftd_addr.next = self.p_ftd.val().get_bits::<16>(0) + self.g_q.q.val();
        if self.kind_r.q.val() == self.k_her.val() {
            self.ftd_addr.next = self.g_q.q.val();
        }
        if self.state_r.q.val() == self.s_code[4].val() {
            self.grp_addr.next = self.slot_of.read_data.val() + self.p_grp.val().get_bits::<16>(0);
            self.ftd_addr.next = self.p_ftd.val().get_bits::<16>(0) + self.g_q.q.val();
        }
        // Table writes (the LUT-RAMs drop an address ≥ D as the flip-flop files do).
        self.ring_inv.write_enable.next = self.inv_valid.val() & !self.inv_addr.val().get_bits::<8>(8).any();
        self.ring_inv.write_address.next = self.inv_addr.val().get_bits::<8>(0);
        self.ring_inv.write_data.next = self.inv_data.val();
        self.slot_of.write_enable.next = self.we.val() & !self.wr_die.val().get_bits::<8>(8).any();
        self.slot_of.write_address.next = self.wr_die.val().get_bits::<8>(0);
        self.slot_of.write_data.next = self.grp_addr.val();
        self.group_ram.write_enable.next = self.we.val() & !self.wr_die.val().get_bits::<8>(8).any();
        self.group_ram.write_address.next = self.wr_die.val().get_bits::<8>(0);
        self.group_ram.write_data.next = self.wr_group.val();
        self.rank_ram.write_enable.next = self.we.val() & !self.wr_die.val().get_bits::<8>(8).any();
        self.rank_ram.write_address.next = self.wr_die.val().get_bits::<8>(0);
        self.rank_ram.write_data.next = self.wr_rank.val();
        for k in 0..D {
            if self.we.val() & (self.wr_die.val().index() == k) {
                self.group_of[k].d.next = self.wr_group.val();
                self.rank_of[k].d.next = self.wr_rank.val();
                self.ftd_of[k].d.next = self.wr_ftd.val();
            }
            if self.we.val() & (self.grp_addr.val().index() == k) {
                self.groups[k].d.next = self.wr_die.val();
            }
            if self.we_member.val() & (self.ftd_addr.val().index() == k) {
                self.ftds[k].d.next = self.wr_die.val();
            }
        }
        // Start: load the configuration registers, clear the shape search.
        if self.start.val() {
            self.kind_r.d.next = self.kind.val();
            self.gc_r.d.next = self.grid_cols.val();
            self.gr_r.d.next = self.grid_rows.val();
            self.gd_r.d.next = self.grid_dies.val();
            self.n_r.d.next = self.n.val();
            self.tp_r.d.next = self.tp.val();
            self.dp_r.d.next = self.dp.val();
            self.cols_r.d.next = self.cols.val();
            self.dies_r.d.next = self.dies.val();
            self.wx_r.d.next = self.wafers_x.val();
            self.dc_r.d.next = self.die_cols.val();
            self.dr_r.d.next = self.die_rows.val();
            self.gpw_r.d.next = self.gpw.val();
            self.w_r.d.next = self.one.val();
            self.bvalid_r.d.next = false;
            self.bw_r.d.next = self.zero.val();
            self.bh_r.d.next = self.zero.val();
            self.bqc_r.d.next = self.zero.val();
            self.bqr_r.d.next = self.zero.val();
            self.bprod_r.d.next = self.zero.val();
            self.i_r.d.next = self.zero.val();
            self.state_r.d.next = self.s_code[1].val();
        }
        if self.reset.val() {
            self.state_r.d.next = self.s_code[0].val();
            self.bvalid_r.d.next = false;
        }
        // Next cycle's address terms, from the registers' next values (after start / reset).
        if self.kind_r.d.val() == self.k_base.val() {
            self.g_q.d.next = self.brow_r.d.val() + self.bx_r.d.val();
            self.o_q.d.next = self.prow_r.d.val() + self.px_r.d.val();
        } else {
            self.g_q.d.next = self.prow_r.d.val() + self.px_r.d.val();
            self.o_q.d.next = self.brow_r.d.val() + self.bx_r.d.val();
        }
        self.ps_q.d.next = self.idrow_r.d.val().get_bits::<8>(0) + self.px_r.d.val().get_bits::<8>(0);
        // The table products' operands (see `ga_q`): Replicate's wafer · (gpw · tp) and wafer ·
        // dies per wafer, else Dies' group · tp and ftd · dp.
        self.ga_q.d.next = self.g_q.d.val();
        self.gb_r.d.next = self.tp_r.d.val();
        self.fb_r.d.next = self.dp_r.d.val();
        if self.state_r.q.val() == self.s_code[4].val() {
            self.ga_q.d.next = self.brow_r.d.val() + self.bx_r.d.val();
            self.gb_r.d.next = self.gpwtp_q.q.val();
            self.fb_r.d.next = self.dpw_q.q.val();
        }
        self.pi_q.d.next = self.idrow_r.d.val() + self.x_r.d.val();
        self.p_dpw.next = self.dc_r.d.val() * self.dr_r.d.val();
        self.p_gt.next = self.gpw_r.d.val() * self.tp_r.d.val();
        self.dpw_q.d.next = self.p_dpw.val().get_bits::<16>(0);
        self.gpwtp_q.d.next = self.p_gt.val().get_bits::<16>(0);
        // The shape unit's product terms (see `ring_n_r`).
        self.p_wh.next = self.w_r.d.val() * self.div_n.q.val();
        self.p_cq.next = self.div_c.q.val() * self.div_r.q.val();
        self.whq.d.next = self.p_wh.val().get_bits::<16>(0);
        self.cqm.d.next = self.p_cq.val().get_bits::<16>(0);
        self.rstep_q.d.next = self.div_r.run.val();
        self.cmp_q.d.next = self.cmp.val() | self.start.val();
        self.fnc_q.d.next = !self.div_n.r.val().any() & !self.div_c.r.val().any();
        // 4. Registered outputs.
        self.state.next = self.state_r.q.val();
        self.shape_valid.next = self.bvalid_r.q.val();
        self.shape_w.next = self.bw_r.q.val();
        self.shape_h.next = self.bh_r.q.val();
        self.done.next = self.state_r.q.val() == self.s_code[5].val();
        self.wr_valid.next = self.we.val();
        self.wr_member_valid.next = self.we_member.val();
    }
}

/// Declares a named alias for a standard table depth (S3).
#[macro_export]
macro_rules! declare_mapping_ctrl {
    ($name: ident, $d: expr) => {
        #[doc = concat!("Mapping controller with ", stringify!($d), "-entry tables.")]
        pub type $name = $crate::wafer::mapping::MappingCtrlRtl<$d>;
    };
}

// Wafers up to 64 dies (8x8, or 2x2 wafers of 4x4) and systems up to 256 dies.
declare_mapping_ctrl!(MappingCtrl64Rtl, 64);
declare_mapping_ctrl!(MappingCtrl256Rtl, 256);

/// Co-sim recorder: back-to-back mapping requests drawn at random (single wafers up to 8×8
/// and multi-wafer systems up to `D` dies, every kind, a TP dividing the dies; requests the
/// FL refuses are redrawn), each started when the previous one is done, with the read port
/// swept at random addresses; reset in cycle 0 and, rarely, mid-run (then a new start).
pub fn record_mapping_ctrl<const D: usize>(module: &str, cycles: usize, seed: u64) -> Result<PortTrace, RtlError> {
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;
    use sched::wafer::{MappingKind, WaferGeom};
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut idle = 0u32;
    record(
        module,
        MappingCtrlRtl::<D>::new(),
        cycles,
        |u| &mut u.clock,
        move |c, u| {
            u.reset.next = c == 0 || rng.gen_bool(0.0005);
            u.start.next = false;
            u.rd_addr.next = (rng.gen_range(0..D as u64)).into();
            let st = u.state.val().index() as u64;
            if c == 0 || !(st == st::IDLE || st == st::DONE) {
                return;
            }
            idle += 1;
            if idle < 4 {
                return;
            }
            idle = 0;
            let regs = loop {
                let g = if rng.gen_bool(0.7) {
                    WaferGeom::single(rng.gen_range(1..=8), rng.gen_range(1..=8))
                } else {
                    WaferGeom { wafers_x: rng.gen_range(1..=2), wafers_y: rng.gen_range(1..=2), die_cols: rng.gen_range(1..=4), die_rows: rng.gen_range(1..=4) }
                };
                if g.dies() as usize > D {
                    continue;
                }
                let divs: Vec<u32> = (1..=g.dies()).filter(|t| g.dies() % t == 0).collect();
                let tp = divs[rng.gen_range(0..divs.len())];
                let kind = MappingKind::ALL[rng.gen_range(0..3)];
                if let Ok(r) = super::mapping_swap::MapRegs::of(kind, g, tp, g.dies() / tp, true) {
                    break r;
                }
            };
            let d16 = |v: u32| -> Bits<16> { (v as u64).into() };
            u.kind.next = regs.kind.into();
            u.grid_cols.next = d16(regs.grid_cols);
            u.grid_rows.next = d16(regs.grid_rows);
            u.grid_dies.next = d16(regs.grid_cols * regs.grid_rows);
            u.n.next = d16(regs.n);
            u.tp.next = d16(regs.tp);
            u.dp.next = d16(regs.dp);
            u.cols.next = d16(regs.cols);
            u.dies.next = d16(regs.dies);
            u.wafers_x.next = d16(regs.wafers_x);
            u.die_cols.next = d16(regs.die_cols);
            u.die_rows.next = d16(regs.die_rows);
            u.gpw.next = d16(regs.gpw);
            u.start.next = true;
        },
    )
}

/// Export registration: the 64-entry build (wafers up to 8×8, systems up to 64 dies).
pub const EXPORT: BlockDef = BlockDef {
    name: "mapping_ctrl",
    top: false,
    domain: crate::export::ModelDomain::WaferCore,
    cosim_cycles: 4096,
    sets: &[ParamSet {
        module: "mapping_ctrl_64",
        rust_type: "MappingCtrl64Rtl",
        params: &[("dies", 64)],
        // ECP5-85F: 57.9 MHz at seed 1 (docs/rtl.md, "Timing closure at the prototype clocks").
        ecp5_clock_mhz: 50,
        build: || boxed(MappingCtrl64Rtl::new()),
        recorder: Some(|cycles, seed| record_mapping_ctrl::<64>("mapping_ctrl_64", cycles, seed)),
    }],
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(not(feature = "yosys"), ignore = "needs yosys (enable feature `yosys`)")]
    fn mapping_ctrl_synthesizable() {
        let mut uut = MappingCtrl64Rtl::new();
        uut.connect_all();
        let vlog = generate_verilog(&uut);
        yosys_validate("waferstream_mapping_ctrl_64", &vlog).unwrap();
    }
}
