//! Sem-MoE look-up and re-batching unit `SemMoeLutRtl<N, D, TB, GB, IW>` (RTL twin of
//! `hw::wafer::semmoe_lut::SemMoeLutCl`, paper Algorithm 3 for attention-TP): at most `N`
//! tokens per batch, `D` devices, a token table of `2^TB` rows and an n-gram table of `2^GB`
//! rows; positions, devices and counts are `IW` bits inside (max(N, D) < 2^IW).
//!
//! ```text
//!  load ports (before `go`): token table rows ─► tt SRAM ×2 (read ports at lo and lo−1)
//!                            n-gram rows      ─► ng SRAM (valid, device, confidence)
//!                            batch tokens     ─► token buffer (id, n-gram row address)
//!                            chunks           ─► reduce-scatter chunk (start, length) per device
//!  Search: tt[mid] < id ? lo = mid+1 : hi = mid        Pick: tt[lo] / tt[lo−1] nearest ─► T
//!  Compare: ng[key(j)] ─► A;  T_p > A_p ? T : A  (neither: j's chunk) ─► pred[j]
//!  Count ─► hist[d];  Prefix ─► start[d];  Scatter ─► sorted[];  Align ─► shf[] | spill FIFO
//!  Fill: first short chunk at/after fill_dev ◄─ spill FIFO ─► shf[], rank[]
//! ```
//!
//! One state per CL state, one step per cycle, the same cycle count: the CL's `step` is one
//! rising edge of the block once `go` has started the batch (`go` is the edge that clears the
//! batch registers; the CL's constructor). The lockstep (`tests/rtl_wafer_semmoe_lut.rs`)
//! compares every traced register of the CL every cycle and the outputs at the end.
//!
//! **Memories and how they are loaded.** The profiler's tables are written through load ports
//! before the batch, one row per cycle (`tt_*`, `ng_*`), as are the batch's tokens (`tk_*`: the
//! token id if any, and the n-gram row its history addresses, or none) and the reduce-scatter
//! partition (`dv_*`: chunk start and length per device, `sched::balance::semmoe::chunk`).
//! These cycles precede `go` and are not counted (the CL's constructor loads the same
//! memories instantly); the batch's cycles are counted from `go` (`cycles`). The token table
//! is held twice (two SRAM read ports: `Pick` needs the rows at `lo` and `lo − 1` in one cycle);
//! both copies and the n-gram SRAM have an asynchronous read port ([`crate::lutram::AsyncRam`],
//! LUT-RAM on ECP5 / 7-series) at addresses that come from registers only (`mid`, `lo`, the
//! token buffer at `j`), as the IO-die scheduler's EIT, so the row is there for the rising
//! edge that uses it. (They were rust-hdl `RAM`s read at the falling edge, the same values at
//! every rising edge but two half-cycle paths around each read; see docs/rtl.md, semmoe_lut.)
//!
//! **Confidences.** The CL compares `f64` confidences (`T_p > A_p`). The SRAMs hold them as
//! their IEEE-754 binary64 bit patterns: for non-negative values (a confidence is a share in
//! [0, 1]) the unsigned order of the patterns is the numeric order, so the 64-bit unsigned
//! compare is exactly the CL's comparison, ties included (equal patterns: the n-gram table).
//!
//! **What the loader computes.** The n-gram row address of a token (the CL's `key_index`: the
//! token's devices at the previous `min(lookback, layer)` layers as base-D digits after the
//! shorter keys' rows) and the chunk bounds (`r · n / D`) are address generation done by the
//! writer of the token buffer (`semmoe_lut_swap`), not by the unit; a history with a digit
//! ≥ devices has no row (`tk_key_valid` = 0), as in the CL.
//!
//! **Widths.** Ports are 32 bits (token ids, positions, devices) and 64 bits (confidences);
//! SRAM addresses are the low `TB` / `GB` bits of theirs. Inside, positions, token indices,
//! device indices and counts are `IW` bits (max(N, D) < 2^IW, asserted), zero-extended into
//! the ports; token ids, confidences and `pred` (a table's device may be any 32-bit value)
//! stay full width. Align's `pred[sorted[j]]` is kept per position (`sin`, `sdev`, written in
//! Scatter beside `sorted`) so it is one select on `j`, not two chained selects.

use rust_hdl::prelude::*;

use crate::lutram::AsyncRam;

/// State encoding (the CL's `LutState` order; the traced `state` value) plus `IDLE` before the
/// first `go`.
pub mod st {
    pub const SEARCH: u64 = 0;
    pub const PICK: u64 = 1;
    pub const COMPARE: u64 = 2;
    pub const COUNT: u64 = 3;
    pub const PREFIX: u64 = 4;
    pub const SCATTER: u64 = 5;
    pub const ALIGN: u64 = 6;
    pub const FILL: u64 = 7;
    pub const DONE: u64 = 8;
    pub const IDLE: u64 = 9;
}

#[derive(LogicBlock)]
pub struct SemMoeLutRtl<const N: usize, const D: usize, const TB: usize, const GB: usize, const IW: usize> {
    pub clock: Signal<In, Clock>,
    /// Synchronous reset: idle.
    pub reset: Signal<In, Bit>,
    /// Batch size (0..=N), devices (1..=D), token table rows (0..=2^TB); static from `go`.
    pub cfg_n: Signal<In, Bits<32>>,
    pub cfg_d: Signal<In, Bits<32>>,
    pub cfg_rows: Signal<In, Bits<32>>,
    /// Start the batch (idle or done): clears the batch registers; the next edge is the CL's
    /// first step.
    pub go: Signal<In, Bit>,
    /// Token table load port: row `tt_addr` = (id, device, confidence bits); ids ascending.
    pub tt_we: Signal<In, Bit>,
    pub tt_addr: Signal<In, Bits<32>>,
    pub tt_id: Signal<In, Bits<32>>,
    pub tt_dev: Signal<In, Bits<32>>,
    pub tt_conf: Signal<In, Bits<64>>,
    /// N-gram table load port: row `ng_addr` = (valid, device, confidence bits).
    pub ng_we: Signal<In, Bit>,
    pub ng_addr: Signal<In, Bits<32>>,
    pub ng_valid: Signal<In, Bit>,
    pub ng_dev: Signal<In, Bits<32>>,
    pub ng_conf: Signal<In, Bits<64>>,
    /// Token buffer load port: token `tk_addr` = (id valid, id, n-gram row valid, row).
    pub tk_we: Signal<In, Bit>,
    pub tk_addr: Signal<In, Bits<32>>,
    pub tk_id_valid: Signal<In, Bit>,
    pub tk_id: Signal<In, Bits<32>>,
    pub tk_key_valid: Signal<In, Bit>,
    pub tk_key: Signal<In, Bits<32>>,
    /// Chunk load port: device `dv_addr`'s reduce-scatter chunk `[dv_start, dv_start + dv_len)`.
    pub dv_we: Signal<In, Bit>,
    pub dv_addr: Signal<In, Bits<32>>,
    pub dv_start: Signal<In, Bits<32>>,
    pub dv_len: Signal<In, Bits<32>>,
    /// Result read ports (combinational): `shf[rd_pos]`, `rank[rd_tok]`, device `rd_dev`'s
    /// histogram count and group fill.
    pub rd_pos: Signal<In, Bits<32>>,
    pub rd_tok: Signal<In, Bits<32>>,
    pub rd_dev: Signal<In, Bits<32>>,

    /// The CL's traced registers (`SemMoeLutCl::signals`), registered: state ([`st`]), the
    /// cursor `j`, the id of token j (0: none or j ≥ n), the token-table hit (device + 1, 0 =
    /// none; confidence bits), the n-gram hit, `pred[j]` (0 for j ≥ n), the spill FIFO's length.
    pub state: Signal<Out, Bits<32>>,
    pub j: Signal<Out, Bits<32>>,
    pub token_id: Signal<Out, Bits<32>>,
    pub t_dev: Signal<Out, Bits<32>>,
    pub t_conf: Signal<Out, Bits<64>>,
    pub a_dev: Signal<Out, Bits<32>>,
    pub a_conf: Signal<Out, Bits<64>>,
    pub pred: Signal<Out, Bits<32>>,
    pub spill: Signal<Out, Bits<32>>,
    /// Cycles since `go` (the CL's `cycles`).
    pub cycles: Signal<Out, Bits<32>>,
    pub rd_shf: Signal<Out, Bits<32>>,
    pub rd_rank: Signal<Out, Bits<32>>,
    pub rd_count: Signal<Out, Bits<32>>,
    pub rd_fill: Signal<Out, Bits<32>>,

    // --- registers
    state_q: DFF<Bits<32>>,
    /// Positions, token indices, device indices and counts are `IW` bits (they stay ≤
    /// max(N, D) < 2^IW); the ports stay 32 bits (zero-extended).
    j_q: DFF<Bits<IW>>,
    lo_q: DFF<Bits<32>>,
    hi_q: DFF<Bits<32>>,
    t_valid_q: DFF<Bit>,
    t_dev_q: DFF<Bits<32>>,
    t_conf_q: DFF<Bits<64>>,
    a_valid_q: DFF<Bit>,
    a_dev_q: DFF<Bits<32>>,
    a_conf_q: DFF<Bits<64>>,
    fill_dev_q: DFF<Bits<IW>>,
    oor_q: DFF<Bits<IW>>,
    sp_head_q: DFF<Bits<IW>>,
    sp_tail_q: DFF<Bits<IW>>,
    cycles_q: DFF<Bits<32>>,
    /// Token buffer.
    tk_idv: [DFF<Bit>; N],
    tk_idr: [DFF<Bits<32>>; N],
    tk_kv: [DFF<Bit>; N],
    tk_keyr: [DFF<Bits<32>>; N],
    /// Per token: predicted device, argsort, shuffle (by position), rank, spill FIFO.
    pred_r: [DFF<Bits<32>>; N],
    sorted_r: [DFF<Bits<IW>>; N],
    shf_r: [DFF<Bits<IW>>; N],
    rank_r: [DFF<Bits<IW>>; N],
    spill_r: [DFF<Bits<IW>>; N],
    /// Per token, written in Count (where `pred[j] < d` is decided anyway): `pred[j]` in range
    /// and its low `IW` bits (the device when in range), so Scatter reads one narrow mux.
    pin_r: [DFF<Bit>; N],
    pidx_r: [DFF<Bits<IW>>; N],
    /// Per position, written in Scatter beside `sorted`: the in-range flag and device of the
    /// token placed there — `pred[sorted[k]]` as one register, so Align reads one N-way mux
    /// instead of two chained ones (the values are the same: every position < n is written
    /// in Scatter before Align reads it).
    sin_r: [DFF<Bit>; N],
    sdev_r: [DFF<Bits<IW>>; N],
    /// Per device: histogram, bucket starts, group fill, chunk.
    hist_r: [DFF<Bits<IW>>; D],
    start_r: [DFF<Bits<IW>>; D],
    gcnt_r: [DFF<Bits<IW>>; D],
    cstart_r: [DFF<Bits<IW>>; D],
    clen_r: [DFF<Bits<IW>>; D],
    /// Token table (two copies: read at `lo`/`mid` and at `lo − 1`) and n-gram table.
    tta_id: AsyncRam<Bits<32>, TB>,
    tta_dev: AsyncRam<Bits<32>, TB>,
    tta_conf: AsyncRam<Bits<64>, TB>,
    ttb_id: AsyncRam<Bits<32>, TB>,
    ttb_dev: AsyncRam<Bits<32>, TB>,
    ttb_conf: AsyncRam<Bits<64>, TB>,
    ng_v: AsyncRam<Bit, GB>,
    ng_d: AsyncRam<Bits<32>, GB>,
    ng_c: AsyncRam<Bits<64>, GB>,

    // --- combinational locals
    tid_valid: Signal<Local, Bit>,
    tid: Signal<Local, Bits<32>>,
    key_valid: Signal<Local, Bit>,
    key: Signal<Local, Bits<32>>,
    sum_lh: Signal<Local, Bits<32>>,
    mid: Signal<Local, Bits<32>>,
    lo_n: Signal<Local, Bits<32>>,
    hi_n: Signal<Local, Bits<32>>,
    lo_m1: Signal<Local, Bits<TB>>,
    above: Signal<Local, Bit>,
    below: Signal<Local, Bit>,
    take_b: Signal<Local, Bit>,
    plain: Signal<Local, Bits<32>>,
    plain_found: Signal<Local, Bit>,
    pred_n: Signal<Local, Bits<32>>,
    pj: Signal<Local, Bits<32>>,
    /// `pred[j]`'s low bits (its device when in range), `pin[j]`, `pidx[j]`.
    pjl: Signal<Local, Bits<IW>>,
    pin_j: Signal<Local, Bit>,
    pidx_j: Signal<Local, Bits<IW>>,
    /// Align: `sorted[j]`, and `pred[sorted[j]]` (in range, device) from `sin`/`sdev`.
    si: Signal<Local, Bits<IW>>,
    s_in: Signal<Local, Bit>,
    sdv: Signal<Local, Bits<IW>>,
    p_in: Signal<Local, Bit>,
    start_p: Signal<Local, Bits<IW>>,
    gcnt_p: Signal<Local, Bits<IW>>,
    clen_p: Signal<Local, Bits<IW>>,
    cstart_p: Signal<Local, Bits<IW>>,
    in_sum: Signal<Local, Bits<IW>>,
    prev_start: Signal<Local, Bits<IW>>,
    prev_hist: Signal<Local, Bits<IW>>,
    fr_found: Signal<Local, Bit>,
    fr: Signal<Local, Bits<IW>>,
    fr_pos: Signal<Local, Bits<IW>>,
    sp_front: Signal<Local, Bits<IW>>,
    /// A write into `shf`/`rank`: position, token, device.
    place: Signal<Local, Bit>,
    place_pos: Signal<Local, Bits<IW>>,
    place_tok: Signal<Local, Bits<IW>>,
    place_dev: Signal<Local, Bits<IW>>,
    /// Narrow values on their way to the 32-bit ports (zero-extended bit by bit: `bit32`).
    j32: Signal<Local, Bits<32>>,
    spill_n: Signal<Local, Bits<IW>>,
    rd_shf_n: Signal<Local, Bits<IW>>,
    rd_rank_n: Signal<Local, Bits<IW>>,
    rd_count_n: Signal<Local, Bits<IW>>,
    rd_fill_n: Signal<Local, Bits<IW>>,
    plain_n: Signal<Local, Bits<IW>>,
    /// Last index of the current loop (`j + 1 == n` or `== d`).
    j_last_n: Signal<Local, Bit>,
    j_last_d: Signal<Local, Bit>,
    tta_addr_n: Signal<Local, Bits<TB>>,
    /// Load addresses inside the SRAMs (a write outside is dropped); the token's n-gram row
    /// valid and inside the SRAM.
    tt_in: Signal<Local, Bit>,
    ng_in: Signal<Local, Bit>,
    dv_fits: Signal<Local, Bit>,
    key_ok: Signal<Local, Bit>,
    zero64: Constant<Bits<64>>,
    one_tb: Constant<Bits<TB>>,
    tt_words: Constant<Bits<32>>,
    ng_words: Constant<Bits<32>>,
    iw_words: Constant<Bits<32>>,
    /// Sized `IW`-bit 0 and 1 (a Rust literal is a 32-bit Verilog constant: WIDTH) and the
    /// 32-bit weights 2^b of bit b, which zero-extend an `IW`-bit value into a port.
    zero_i: Constant<Bits<IW>>,
    one_i: Constant<Bits<IW>>,
    bit32: [Constant<Bits<32>>; IW],
    /// Loop index as a value (a loop index is not a hardware value).
    didx: Signal<Local, Bits<IW>>,
    jm1: Signal<Local, Bits<IW>>,
}

impl<const N: usize, const D: usize, const TB: usize, const GB: usize, const IW: usize> Default for SemMoeLutRtl<N, D, TB, GB, IW> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize, const D: usize, const TB: usize, const GB: usize, const IW: usize> SemMoeLutRtl<N, D, TB, GB, IW> {
    /// Largest batch, device count, token-table and n-gram rows of this build.
    pub const TOKENS: usize = N;
    pub const DEVICES: usize = D;
    pub const TABLE_ROWS: u64 = 1 << TB;
    pub const NGRAM_ROWS: u64 = 1 << GB;

    pub fn new() -> Self {
        assert!((1..=4096).contains(&N) && (1..=4096).contains(&D), "N = {N}, D = {D} (1..=4096)");
        assert!((1..=24).contains(&TB) && (1..=24).contains(&GB), "TB = {TB}, GB = {GB} (1..=24)");
        assert!((1..=16).contains(&IW) && N.max(D) < 1 << IW, "IW = {IW}: positions and devices up to max(N, D) = {} need max(N, D) < 2^IW", N.max(D));
        Self {
            clock: Default::default(),
            reset: Default::default(),
            cfg_n: Default::default(),
            cfg_d: Default::default(),
            cfg_rows: Default::default(),
            go: Default::default(),
            tt_we: Default::default(),
            tt_addr: Default::default(),
            tt_id: Default::default(),
            tt_dev: Default::default(),
            tt_conf: Default::default(),
            ng_we: Default::default(),
            ng_addr: Default::default(),
            ng_valid: Default::default(),
            ng_dev: Default::default(),
            ng_conf: Default::default(),
            tk_we: Default::default(),
            tk_addr: Default::default(),
            tk_id_valid: Default::default(),
            tk_id: Default::default(),
            tk_key_valid: Default::default(),
            tk_key: Default::default(),
            dv_we: Default::default(),
            dv_addr: Default::default(),
            dv_start: Default::default(),
            dv_len: Default::default(),
            rd_pos: Default::default(),
            rd_tok: Default::default(),
            rd_dev: Default::default(),
            state: Default::default(),
            j: Default::default(),
            token_id: Default::default(),
            t_dev: Default::default(),
            t_conf: Default::default(),
            a_dev: Default::default(),
            a_conf: Default::default(),
            pred: Default::default(),
            spill: Default::default(),
            cycles: Default::default(),
            rd_shf: Default::default(),
            rd_rank: Default::default(),
            rd_count: Default::default(),
            rd_fill: Default::default(),
            state_q: Default::default(),
            j_q: Default::default(),
            lo_q: Default::default(),
            hi_q: Default::default(),
            t_valid_q: Default::default(),
            t_dev_q: Default::default(),
            t_conf_q: Default::default(),
            a_valid_q: Default::default(),
            a_dev_q: Default::default(),
            a_conf_q: Default::default(),
            fill_dev_q: Default::default(),
            oor_q: Default::default(),
            sp_head_q: Default::default(),
            sp_tail_q: Default::default(),
            cycles_q: Default::default(),
            tk_idv: std::array::from_fn(|_| Default::default()),
            tk_idr: std::array::from_fn(|_| Default::default()),
            tk_kv: std::array::from_fn(|_| Default::default()),
            tk_keyr: std::array::from_fn(|_| Default::default()),
            pred_r: std::array::from_fn(|_| Default::default()),
            sorted_r: std::array::from_fn(|_| Default::default()),
            shf_r: std::array::from_fn(|_| Default::default()),
            rank_r: std::array::from_fn(|_| Default::default()),
            spill_r: std::array::from_fn(|_| Default::default()),
            pin_r: std::array::from_fn(|_| Default::default()),
            pidx_r: std::array::from_fn(|_| Default::default()),
            sin_r: std::array::from_fn(|_| Default::default()),
            sdev_r: std::array::from_fn(|_| Default::default()),
            hist_r: std::array::from_fn(|_| Default::default()),
            start_r: std::array::from_fn(|_| Default::default()),
            gcnt_r: std::array::from_fn(|_| Default::default()),
            cstart_r: std::array::from_fn(|_| Default::default()),
            clen_r: std::array::from_fn(|_| Default::default()),
            tta_id: Default::default(),
            tta_dev: Default::default(),
            tta_conf: Default::default(),
            ttb_id: Default::default(),
            ttb_dev: Default::default(),
            ttb_conf: Default::default(),
            ng_v: Default::default(),
            ng_d: Default::default(),
            ng_c: Default::default(),
            tid_valid: Default::default(),
            tid: Default::default(),
            key_valid: Default::default(),
            key: Default::default(),
            sum_lh: Default::default(),
            mid: Default::default(),
            lo_n: Default::default(),
            hi_n: Default::default(),
            lo_m1: Default::default(),
            above: Default::default(),
            below: Default::default(),
            take_b: Default::default(),
            plain: Default::default(),
            plain_found: Default::default(),
            pred_n: Default::default(),
            pj: Default::default(),
            pjl: Default::default(),
            pin_j: Default::default(),
            pidx_j: Default::default(),
            si: Default::default(),
            s_in: Default::default(),
            sdv: Default::default(),
            p_in: Default::default(),
            start_p: Default::default(),
            gcnt_p: Default::default(),
            clen_p: Default::default(),
            cstart_p: Default::default(),
            in_sum: Default::default(),
            prev_start: Default::default(),
            prev_hist: Default::default(),
            fr_found: Default::default(),
            fr: Default::default(),
            fr_pos: Default::default(),
            sp_front: Default::default(),
            place: Default::default(),
            place_pos: Default::default(),
            place_tok: Default::default(),
            place_dev: Default::default(),
            j32: Default::default(),
            spill_n: Default::default(),
            rd_shf_n: Default::default(),
            rd_rank_n: Default::default(),
            rd_count_n: Default::default(),
            rd_fill_n: Default::default(),
            plain_n: Default::default(),
            j_last_n: Default::default(),
            j_last_d: Default::default(),
            tta_addr_n: Default::default(),
            tt_in: Default::default(),
            ng_in: Default::default(),
            dv_fits: Default::default(),
            key_ok: Default::default(),
            zero64: Constant::new(0u64.into()),
            one_tb: Constant::new(1u64.into()),
            tt_words: Constant::new((1u64 << TB).into()),
            ng_words: Constant::new((1u64 << GB).into()),
            iw_words: Constant::new((1u64 << IW).into()),
            zero_i: Constant::new(0u64.into()),
            one_i: Constant::new(1u64.into()),
            bit32: std::array::from_fn(|b| Constant::new((1u64 << b).into())),
            didx: Default::default(),
            jm1: Default::default(),
        }
    }
}

impl<const N: usize, const D: usize, const TB: usize, const GB: usize, const IW: usize> Logic for SemMoeLutRtl<N, D, TB, GB, IW> {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, state_q, j_q, lo_q, hi_q, t_valid_q, t_dev_q, t_conf_q, a_valid_q, a_dev_q, a_conf_q, fill_dev_q, oor_q, sp_head_q, sp_tail_q, cycles_q);
        for i in 0..N {
            self.tk_idv[i].clock.next = self.clock.val();
            self.tk_idv[i].d.next = self.tk_idv[i].q.val();
            self.tk_idr[i].clock.next = self.clock.val();
            self.tk_idr[i].d.next = self.tk_idr[i].q.val();
            self.tk_kv[i].clock.next = self.clock.val();
            self.tk_kv[i].d.next = self.tk_kv[i].q.val();
            self.tk_keyr[i].clock.next = self.clock.val();
            self.tk_keyr[i].d.next = self.tk_keyr[i].q.val();
            self.pred_r[i].clock.next = self.clock.val();
            self.pred_r[i].d.next = self.pred_r[i].q.val();
            self.sorted_r[i].clock.next = self.clock.val();
            self.sorted_r[i].d.next = self.sorted_r[i].q.val();
            self.shf_r[i].clock.next = self.clock.val();
            self.shf_r[i].d.next = self.shf_r[i].q.val();
            self.rank_r[i].clock.next = self.clock.val();
            self.rank_r[i].d.next = self.rank_r[i].q.val();
            self.spill_r[i].clock.next = self.clock.val();
            self.spill_r[i].d.next = self.spill_r[i].q.val();
            self.pin_r[i].clock.next = self.clock.val();
            self.pin_r[i].d.next = self.pin_r[i].q.val();
            self.pidx_r[i].clock.next = self.clock.val();
            self.pidx_r[i].d.next = self.pidx_r[i].q.val();
            self.sin_r[i].clock.next = self.clock.val();
            self.sin_r[i].d.next = self.sin_r[i].q.val();
            self.sdev_r[i].clock.next = self.clock.val();
            self.sdev_r[i].d.next = self.sdev_r[i].q.val();
        }
        for i in 0..D {
            self.hist_r[i].clock.next = self.clock.val();
            self.hist_r[i].d.next = self.hist_r[i].q.val();
            self.start_r[i].clock.next = self.clock.val();
            self.start_r[i].d.next = self.start_r[i].q.val();
            self.gcnt_r[i].clock.next = self.clock.val();
            self.gcnt_r[i].d.next = self.gcnt_r[i].q.val();
            self.cstart_r[i].clock.next = self.clock.val();
            self.cstart_r[i].d.next = self.cstart_r[i].q.val();
            self.clen_r[i].clock.next = self.clock.val();
            self.clen_r[i].d.next = self.clen_r[i].q.val();
        }
        // ---- SRAMs: load ports write at the rising edge; asynchronous reads at
        // register-derived addresses.
        self.tta_id.write_clock.next = self.clock.val();
        self.tta_dev.write_clock.next = self.clock.val();
        self.tta_conf.write_clock.next = self.clock.val();
        self.ttb_id.write_clock.next = self.clock.val();
        self.ttb_dev.write_clock.next = self.clock.val();
        self.ttb_conf.write_clock.next = self.clock.val();
        self.ng_v.write_clock.next = self.clock.val();
        self.ng_d.write_clock.next = self.clock.val();
        self.ng_c.write_clock.next = self.clock.val();
        self.tta_id.write_address.next = self.tt_addr.val().get_bits::<TB>(0);
        self.tta_dev.write_address.next = self.tt_addr.val().get_bits::<TB>(0);
        self.tta_conf.write_address.next = self.tt_addr.val().get_bits::<TB>(0);
        self.ttb_id.write_address.next = self.tt_addr.val().get_bits::<TB>(0);
        self.ttb_dev.write_address.next = self.tt_addr.val().get_bits::<TB>(0);
        self.ttb_conf.write_address.next = self.tt_addr.val().get_bits::<TB>(0);
        self.tta_id.write_data.next = self.tt_id.val();
        self.tta_dev.write_data.next = self.tt_dev.val();
        self.tta_conf.write_data.next = self.tt_conf.val();
        self.ttb_id.write_data.next = self.tt_id.val();
        self.ttb_dev.write_data.next = self.tt_dev.val();
        self.ttb_conf.write_data.next = self.tt_conf.val();
        // Load writes outside the SRAMs are dropped.
        self.tt_in.next = self.tt_addr.val() < self.tt_words.val();
        // A chunk bound the index registers cannot hold (≥ 2^IW > N: no batch has it) is not
        // written, as a load outside an SRAM.
        self.dv_fits.next = (self.dv_start.val() < self.iw_words.val()) & (self.dv_len.val() < self.iw_words.val());
        self.ng_in.next = self.ng_addr.val() < self.ng_words.val();
        self.tta_id.write_enable.next = self.tt_we.val() & self.tt_in.val();
        self.tta_dev.write_enable.next = self.tt_we.val() & self.tt_in.val();
        self.tta_conf.write_enable.next = self.tt_we.val() & self.tt_in.val();
        self.ttb_id.write_enable.next = self.tt_we.val() & self.tt_in.val();
        self.ttb_dev.write_enable.next = self.tt_we.val() & self.tt_in.val();
        self.ttb_conf.write_enable.next = self.tt_we.val() & self.tt_in.val();
        self.ng_v.write_address.next = self.ng_addr.val().get_bits::<GB>(0);
        self.ng_d.write_address.next = self.ng_addr.val().get_bits::<GB>(0);
        self.ng_c.write_address.next = self.ng_addr.val().get_bits::<GB>(0);
        self.ng_v.write_data.next = self.ng_valid.val();
        self.ng_d.write_data.next = self.ng_dev.val();
        self.ng_c.write_data.next = self.ng_conf.val();
        self.ng_v.write_enable.next = self.ng_we.val() & self.ng_in.val();
        self.ng_d.write_enable.next = self.ng_we.val() & self.ng_in.val();
        self.ng_c.write_enable.next = self.ng_we.val() & self.ng_in.val();

        // ---- token j's buffer row, the binary search's midpoint
        self.tid_valid.next = false;
        self.tid.next = 0.into();
        self.key_valid.next = false;
        self.key.next = 0.into();
        self.pj.next = 0.into();
        self.pin_j.next = false;
        self.pidx_j.next = self.zero_i.val();
        self.si.next = self.zero_i.val();
        self.s_in.next = false;
        self.sdv.next = self.zero_i.val();
        // One N-way select on the narrow `j` for every per-token value Search, Compare, Count,
        // Scatter and Align read (none of them depends on another).
        for i in 0..N {
            if self.j_q.q.val().index() == i {
                self.tid_valid.next = self.tk_idv[i].q.val();
                self.tid.next = self.tk_idr[i].q.val();
                self.key_valid.next = self.tk_kv[i].q.val();
                self.key.next = self.tk_keyr[i].q.val();
                self.pj.next = self.pred_r[i].q.val();
                self.pin_j.next = self.pin_r[i].q.val();
                self.pidx_j.next = self.pidx_r[i].q.val();
                self.si.next = self.sorted_r[i].q.val();
                self.s_in.next = self.sin_r[i].q.val();
                self.sdv.next = self.sdev_r[i].q.val();
            }
        }
        self.pjl.next = self.pj.val().get_bits::<IW>(0);
        // `j` zero-extended (exact 32-bit compares against the 32-bit configuration ports).
        self.j32.next = 0.into();
        for b in 0..IW {
            if self.j_q.q.val().get_bit(b) {
                self.j32.next = self.j32.val() | self.bit32[b].val();
            }
        }
        // lo + hi < 2^32 (both ≤ 2^TB).
        self.sum_lh.next = self.lo_q.q.val() + self.hi_q.q.val();
        self.mid.next = self.sum_lh.val() >> 1;
        self.key_ok.next = self.key_valid.val() & (self.key.val() < self.ng_words.val());
        self.lo_m1.next = self.lo_q.q.val().get_bits::<TB>(0) - self.one_tb.val();
        self.tta_addr_n.next = self.mid.val().get_bits::<TB>(0);
        if self.state_q.q.val() == 1 {
            self.tta_addr_n.next = self.lo_q.q.val().get_bits::<TB>(0);
        }
        self.tta_id.read_address.next = self.tta_addr_n.val();
        self.tta_dev.read_address.next = self.tta_addr_n.val();
        self.tta_conf.read_address.next = self.tta_addr_n.val();
        self.ttb_id.read_address.next = self.lo_m1.val();
        self.ttb_dev.read_address.next = self.lo_m1.val();
        self.ttb_conf.read_address.next = self.lo_m1.val();
        self.ng_v.read_address.next = self.key.val().get_bits::<GB>(0);
        self.ng_d.read_address.next = self.key.val().get_bits::<GB>(0);
        self.ng_c.read_address.next = self.key.val().get_bits::<GB>(0);

        // ---- outputs
        self.state.next = self.state_q.q.val();
        self.j.next = self.j32.val();
        self.token_id.next = 0.into();
        self.pred.next = 0.into();
        if self.j32.val() < self.cfg_n.val() {
            if self.tid_valid.val() {
                self.token_id.next = self.tid.val();
            }
            self.pred.next = self.pj.val();
        }
        self.t_dev.next = 0.into();
        self.t_conf.next = self.zero64.val();
        if self.t_valid_q.q.val() {
            self.t_dev.next = self.t_dev_q.q.val() + 1;
            self.t_conf.next = self.t_conf_q.q.val();
        }
        self.a_dev.next = 0.into();
        self.a_conf.next = self.zero64.val();
        if self.a_valid_q.q.val() {
            self.a_dev.next = self.a_dev_q.q.val() + 1;
            self.a_conf.next = self.a_conf_q.q.val();
        }
        self.spill_n.next = self.sp_tail_q.q.val() - self.sp_head_q.q.val();
        self.cycles.next = self.cycles_q.q.val();
        self.rd_shf_n.next = self.zero_i.val();
        self.rd_rank_n.next = self.zero_i.val();
        for i in 0..N {
            if self.rd_pos.val().index() == i {
                self.rd_shf_n.next = self.shf_r[i].q.val();
            }
            if self.rd_tok.val().index() == i {
                self.rd_rank_n.next = self.rank_r[i].q.val();
            }
        }
        self.rd_count_n.next = self.zero_i.val();
        self.rd_fill_n.next = self.zero_i.val();
        for i in 0..D {
            if self.rd_dev.val().index() == i {
                self.rd_count_n.next = self.hist_r[i].q.val();
                self.rd_fill_n.next = self.gcnt_r[i].q.val();
            }
        }
        self.spill.next = 0.into();
        self.rd_shf.next = 0.into();
        self.rd_rank.next = 0.into();
        self.rd_count.next = 0.into();
        self.rd_fill.next = 0.into();
        for b in 0..IW {
            if self.spill_n.val().get_bit(b) {
                self.spill.next = self.spill.val() | self.bit32[b].val();
            }
            if self.rd_shf_n.val().get_bit(b) {
                self.rd_shf.next = self.rd_shf.val() | self.bit32[b].val();
            }
            if self.rd_rank_n.val().get_bit(b) {
                self.rd_rank.next = self.rd_rank.val() | self.bit32[b].val();
            }
            if self.rd_count_n.val().get_bit(b) {
                self.rd_count.next = self.rd_count.val() | self.bit32[b].val();
            }
            if self.rd_fill_n.val().get_bit(b) {
                self.rd_fill.next = self.rd_fill.val() | self.bit32[b].val();
            }
        }

        // ---- per-state datapath (comb)
        self.j_last_n.next = (self.j32.val() + 1) == self.cfg_n.val();
        self.j_last_d.next = (self.j32.val() + 1) == self.cfg_d.val();
        // Search: one probe narrows [lo, hi) to the first id >= the token's id.
        self.lo_n.next = self.lo_q.q.val();
        self.hi_n.next = self.hi_q.q.val();
        if self.tta_id.read_data.val() < self.tid.val() {
            self.lo_n.next = self.mid.val() + 1;
        } else {
            self.hi_n.next = self.mid.val();
        }
        // Pick: the exact row, else the nearest id (ties: the lower).
        self.above.next = self.lo_q.q.val() < self.cfg_rows.val();
        self.below.next = self.lo_q.q.val() != 0;
        self.take_b.next = false;
        if self.above.val() & (self.tta_id.read_data.val() == self.tid.val()) {
            self.take_b.next = false;
        } else if self.above.val() & self.below.val() {
            self.take_b.next = (self.tid.val() - self.ttb_id.read_data.val()) <= (self.tta_id.read_data.val() - self.tid.val());
        } else if self.below.val() {
            self.take_b.next = true;
        }
        // Compare: the reduce-scatter rank of position j (neither table knows the token).
        self.plain_n.next = self.zero_i.val();
        self.plain_found.next = false;
        self.didx.next = self.zero_i.val();
        for i in 0..D {
            if !self.plain_found.val() & (self.cfg_d.val().index() > i) & (self.cstart_r[i].q.val() <= self.j_q.q.val()) & (self.j_q.q.val() < self.cstart_r[i].q.val() + self.clen_r[i].q.val()) {
                self.plain_found.next = true;
                self.plain_n.next = self.didx.val();
            }
            self.didx.next = self.didx.val() + self.one_i.val();
        }
        self.plain.next = 0.into();
        for b in 0..IW {
            if self.plain_n.val().get_bit(b) {
                self.plain.next = self.plain.val() | self.bit32[b].val();
            }
        }
        self.pred_n.next = self.plain.val();
        if self.t_valid_q.q.val() & self.key_ok.val() & self.ng_v.read_data.val() {
            if self.t_conf_q.q.val() > self.ng_c.read_data.val() {
                self.pred_n.next = self.t_dev_q.q.val();
            } else {
                self.pred_n.next = self.ng_d.read_data.val();
            }
        } else if self.t_valid_q.q.val() {
            self.pred_n.next = self.t_dev_q.q.val();
        } else if self.key_ok.val() & self.ng_v.read_data.val() {
            self.pred_n.next = self.ng_d.read_data.val();
        }
        // Count: `pred[j]` in range (then its low bits are the device: d ≤ D < 2^IW).
        self.p_in.next = self.pj.val() < self.cfg_d.val();
        // Scatter reads start[pidx[j]], Align the chunk and fill of sdev[j] (the device of
        // sorted[j], as pred[sorted[j]] in the CL).
        self.start_p.next = self.zero_i.val();
        self.gcnt_p.next = self.zero_i.val();
        self.clen_p.next = self.zero_i.val();
        self.cstart_p.next = self.zero_i.val();
        self.in_sum.next = self.zero_i.val();
        for i in 0..D {
            self.in_sum.next = self.in_sum.val() + self.hist_r[i].q.val();
            if self.pidx_j.val().index() == i {
                self.start_p.next = self.start_r[i].q.val();
            }
            if self.sdv.val().index() == i {
                self.gcnt_p.next = self.gcnt_r[i].q.val();
                self.clen_p.next = self.clen_r[i].q.val();
                self.cstart_p.next = self.cstart_r[i].q.val();
            }
        }
        // Prefix: start[j-1] + hist[j-1] (j = 0: j − 1 wraps to 2^IW − 1 ≥ D, no entry).
        self.prev_start.next = self.zero_i.val();
        self.prev_hist.next = self.zero_i.val();
        self.jm1.next = self.j_q.q.val() - self.one_i.val();
        for i in 0..D {
            if self.jm1.val().index() == i {
                self.prev_start.next = self.start_r[i].q.val();
                self.prev_hist.next = self.hist_r[i].q.val();
            }
        }
        // Fill: the first short chunk at/after fill_dev; the spill FIFO's front.
        self.fr_found.next = false;
        self.fr.next = self.zero_i.val();
        self.fr_pos.next = self.zero_i.val();
        self.didx.next = self.zero_i.val();
        for i in 0..D {
            if !self.fr_found.val() & (self.cfg_d.val().index() > i) & (self.fill_dev_q.q.val().index() <= i) & (self.gcnt_r[i].q.val() < self.clen_r[i].q.val()) {
                self.fr_found.next = true;
                self.fr.next = self.didx.val();
                self.fr_pos.next = self.cstart_r[i].q.val() + self.gcnt_r[i].q.val();
            }
            self.didx.next = self.didx.val() + self.one_i.val();
        }
        self.sp_front.next = self.zero_i.val();
        for i in 0..N {
            if self.sp_head_q.q.val().index() == i {
                self.sp_front.next = self.spill_r[i].q.val();
            }
        }

        // ---- next state (hold by default)
        self.place.next = false;
        self.place_pos.next = self.zero_i.val();
        self.place_tok.next = self.zero_i.val();
        self.place_dev.next = self.zero_i.val();
        if (self.state_q.q.val() != 9) & (self.state_q.q.val() != 8) {
            self.cycles_q.d.next = self.cycles_q.q.val() + 1;
        }
        if self.state_q.q.val() == 0 {
                // SEARCH
                if self.tid_valid.val() & (self.lo_q.q.val() < self.hi_q.q.val()) {
                    self.lo_q.d.next = self.lo_n.val();
                    self.hi_q.d.next = self.hi_n.val();
                    if self.lo_n.val() == self.hi_n.val() {
                        self.state_q.d.next = 1.into();
                    }
                } else {
                    self.state_q.d.next = 1.into();
                }
            } else if self.state_q.q.val() == 1 {
                // PICK
                self.t_valid_q.d.next = self.tid_valid.val() & (self.above.val() | self.below.val());
                self.t_dev_q.d.next = 0.into();
                self.t_conf_q.d.next = self.zero64.val();
                if self.tid_valid.val() & (self.above.val() | self.below.val()) {
                    if self.take_b.val() {
                        self.t_dev_q.d.next = self.ttb_dev.read_data.val();
                        self.t_conf_q.d.next = self.ttb_conf.read_data.val();
                    } else {
                        self.t_dev_q.d.next = self.tta_dev.read_data.val();
                        self.t_conf_q.d.next = self.tta_conf.read_data.val();
                    }
                }
                self.state_q.d.next = 2.into();
            } else if self.state_q.q.val() == 2 {
                // COMPARE
                self.a_valid_q.d.next = self.key_ok.val() & self.ng_v.read_data.val();
                self.a_dev_q.d.next = 0.into();
                self.a_conf_q.d.next = self.zero64.val();
                if self.key_ok.val() & self.ng_v.read_data.val() {
                    self.a_dev_q.d.next = self.ng_d.read_data.val();
                    self.a_conf_q.d.next = self.ng_c.read_data.val();
                }
                for i in 0..N {
                    if self.j_q.q.val().index() == i {
                        self.pred_r[i].d.next = self.pred_n.val();
                    }
                }
                if self.j_last_n.val() {
                    self.j_q.d.next = self.zero_i.val();
                    self.state_q.d.next = 3.into();
                } else {
                    self.j_q.d.next = self.j_q.q.val() + self.one_i.val();
                    self.state_q.d.next = 0.into();
                    self.lo_q.d.next = 0.into();
                    self.hi_q.d.next = self.cfg_rows.val();
                }
            } else if self.state_q.q.val() == 3 {
                // COUNT (and pred[j]'s range and low bits, for Scatter)
                for i in 0..D {
                    if self.p_in.val() & (self.pjl.val().index() == i) {
                        self.hist_r[i].d.next = self.hist_r[i].q.val() + self.one_i.val();
                    }
                }
                for i in 0..N {
                    if self.j_q.q.val().index() == i {
                        self.pin_r[i].d.next = self.p_in.val();
                        self.pidx_r[i].d.next = self.pjl.val();
                    }
                }
                if self.j_last_n.val() {
                    self.j_q.d.next = self.zero_i.val();
                    self.state_q.d.next = 4.into();
                } else {
                    self.j_q.d.next = self.j_q.q.val() + self.one_i.val();
                }
            } else if self.state_q.q.val() == 4 {
                // PREFIX
                for i in 0..D {
                    if self.j_q.q.val().index() == i {
                        self.start_r[i].d.next = self.prev_start.val() + self.prev_hist.val();
                    }
                }
                if self.j_last_d.val() {
                    self.j_q.d.next = self.zero_i.val();
                    self.state_q.d.next = 5.into();
                } else {
                    self.j_q.d.next = self.j_q.q.val() + self.one_i.val();
                }
            } else if self.state_q.q.val() == 5 {
                // SCATTER (stable; out-of-range devices after every bucket, in index order)
                self.place_pos.next = self.in_sum.val() + self.oor_q.q.val();
                if self.pin_j.val() {
                    self.place_pos.next = self.start_p.val();
                    for i in 0..D {
                        if self.pidx_j.val().index() == i {
                            self.start_r[i].d.next = self.start_r[i].q.val() + self.one_i.val();
                        }
                    }
                } else {
                    self.oor_q.d.next = self.oor_q.q.val() + self.one_i.val();
                }
                for i in 0..N {
                    if self.place_pos.val().index() == i {
                        self.sorted_r[i].d.next = self.j_q.q.val();
                        self.sin_r[i].d.next = self.pin_j.val();
                        self.sdev_r[i].d.next = self.pidx_j.val();
                    }
                }
                if self.j_last_n.val() {
                    self.j_q.d.next = self.zero_i.val();
                    self.state_q.d.next = 6.into();
                } else {
                    self.j_q.d.next = self.j_q.q.val() + self.one_i.val();
                }
            } else if self.state_q.q.val() == 6 {
                // ALIGN: into the device's chunk while it has room, else the spill FIFO.
                if self.s_in.val() & (self.gcnt_p.val() < self.clen_p.val()) {
                    self.place.next = true;
                    self.place_pos.next = self.cstart_p.val() + self.gcnt_p.val();
                    self.place_tok.next = self.si.val();
                    self.place_dev.next = self.sdv.val();
                } else {
                    for i in 0..N {
                        if self.sp_tail_q.q.val().index() == i {
                            self.spill_r[i].d.next = self.si.val();
                        }
                    }
                    self.sp_tail_q.d.next = self.sp_tail_q.q.val() + self.one_i.val();
                }
                self.j_q.d.next = self.j_q.q.val() + self.one_i.val();
                if self.j_last_n.val() {
                    self.state_q.d.next = 7.into();
                }
            } else if self.state_q.q.val() == 7 {
                // FILL: one slot per cycle, lowest short device first.
                if self.fr_found.val() {
                    self.fill_dev_q.d.next = self.fr.val();
                }
                if self.fr_found.val() & (self.sp_head_q.q.val() != self.sp_tail_q.q.val()) {
                    self.place.next = true;
                    self.place_pos.next = self.fr_pos.val();
                    self.place_tok.next = self.sp_front.val();
                    self.place_dev.next = self.fr.val();
                    self.sp_head_q.d.next = self.sp_head_q.q.val() + self.one_i.val();
                } else {
                    self.state_q.d.next = 8.into();
                }
            }
        if self.place.val() {
            for i in 0..N {
                if self.place_pos.val().index() == i {
                    self.shf_r[i].d.next = self.place_tok.val();
                }
                if self.place_tok.val().index() == i {
                    self.rank_r[i].d.next = self.place_dev.val();
                }
            }
            for i in 0..D {
                if self.place_dev.val().index() == i {
                    self.gcnt_r[i].d.next = self.gcnt_r[i].q.val() + self.one_i.val();
                }
            }
        }

        // ---- loading (idle or done) and the batch start
        if (self.state_q.q.val() == 9) | (self.state_q.q.val() == 8) {
            for i in 0..N {
                if self.tk_we.val() & (self.tk_addr.val().index() == i) {
                    self.tk_idv[i].d.next = self.tk_id_valid.val();
                    self.tk_idr[i].d.next = self.tk_id.val();
                    self.tk_kv[i].d.next = self.tk_key_valid.val();
                    self.tk_keyr[i].d.next = self.tk_key.val();
                }
            }
            for i in 0..D {
                if self.dv_we.val() & self.dv_fits.val() & (self.dv_addr.val().index() == i) {
                    // Chunk bounds ≤ N < 2^IW: their low bits are the values.
                    self.cstart_r[i].d.next = self.dv_start.val().get_bits::<IW>(0);
                    self.clen_r[i].d.next = self.dv_len.val().get_bits::<IW>(0);
                }
            }
            if self.go.val() {
                // The CL's constructor: every batch register cleared.
                self.state_q.d.next = 0.into();
                if self.cfg_n.val() == 0 {
                    self.state_q.d.next = 8.into();
                }
                self.j_q.d.next = self.zero_i.val();
                self.lo_q.d.next = 0.into();
                self.hi_q.d.next = self.cfg_rows.val();
                self.t_valid_q.d.next = false;
                self.t_dev_q.d.next = 0.into();
                self.t_conf_q.d.next = self.zero64.val();
                self.a_valid_q.d.next = false;
                self.a_dev_q.d.next = 0.into();
                self.a_conf_q.d.next = self.zero64.val();
                self.fill_dev_q.d.next = self.zero_i.val();
                self.oor_q.d.next = self.zero_i.val();
                self.sp_head_q.d.next = self.zero_i.val();
                self.sp_tail_q.d.next = self.zero_i.val();
                self.cycles_q.d.next = 0.into();
                for i in 0..N {
                    self.pred_r[i].d.next = 0.into();
                    self.sorted_r[i].d.next = self.zero_i.val();
                    self.shf_r[i].d.next = self.zero_i.val();
                    self.rank_r[i].d.next = self.zero_i.val();
                }
                for i in 0..D {
                    self.hist_r[i].d.next = self.zero_i.val();
                    self.start_r[i].d.next = self.zero_i.val();
                    self.gcnt_r[i].d.next = self.zero_i.val();
                }
            }
        }

        if self.reset.val() {
            self.state_q.d.next = 9.into();
            self.j_q.d.next = self.zero_i.val();
            self.cycles_q.d.next = 0.into();
            self.t_valid_q.d.next = false;
            self.a_valid_q.d.next = false;
            self.sp_head_q.d.next = self.zero_i.val();
            self.sp_tail_q.d.next = self.zero_i.val();
        }
    }
}

/// The exported size: batches of 8 tokens, 4 devices, a 16-row token table, a 32-row n-gram
/// table (lookback 2 at 4 devices: 1 + 4 + 16 rows).
pub type SemMoeLutN8D4Rtl = SemMoeLutRtl<8, 4, 4, 5, 4>;

/// One cycle's inputs of the co-sim stimulus (every input port but the clock).
#[derive(Debug, Clone, Copy, Default)]
struct LutIn {
    reset: bool,
    cfg: (u64, u64, u64),
    go: bool,
    tt: Option<(u64, u64, u64, u64)>,
    ng: Option<(u64, bool, u64, u64)>,
    tk: Option<(u64, bool, u64, bool, u64)>,
    dv: Option<(u64, u64, u64)>,
    rd: (u64, u64, u64),
}

/// Co-sim recorder: batch after batch (random tables and tokens from
/// `semmoe_lut_swap::random_batch`, 1..=8 tokens, 2..=4 devices, 0..=12 table rows, lookback
/// 0..=2 at layer 0..=2), each loaded through the load ports one row per cycle, started with
/// `go` and given enough cycles to finish; a reset in cycle 0; the read ports random.
pub fn record_semmoe_lut_n8_d4(module: &str, cycles: usize, seed: u64) -> Result<crate::cosim::PortTrace, crate::RtlError> {
    use super::semmoe_lut_swap::{random_batch, LutImage};
    use rand::{Rng, SeedableRng};
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut stim: Vec<LutIn> = vec![LutIn { reset: true, ..Default::default() }];
    while stim.len() < cycles {
        let (n, devices) = (rng.gen_range(1..=8usize), rng.gen_range(2..=4u32));
        let (rows, lookback, layer) = (rng.gen_range(0..=12usize), rng.gen_range(0..=2u32), rng.gen_range(0..=2usize));
        let (table, ngram, tokens) = random_batch(&mut rng, n, devices, rows, lookback, layer);
        let img = LutImage::new(table.as_ref(), &ngram, layer, devices, &tokens);
        let cfg = (n as u64, devices as u64, img.table.len() as u64);
        let base = LutIn { cfg, ..Default::default() };
        for (a, &(id, d, c)) in img.table.iter().enumerate() {
            stim.push(LutIn { tt: Some((a as u64, id as u64, d as u64, c.to_bits())), ..base });
        }
        let mut ng: Vec<(u64, bool, u64, u64)> = (0..img.ngram_rows).map(|r| (r, false, 0, 0)).collect();
        for &(r, d, c) in &img.ngram {
            ng[r as usize] = (r, true, d as u64, c.to_bits());
        }
        for x in ng {
            stim.push(LutIn { ng: Some(x), ..base });
        }
        for (a, &(id, key)) in img.tokens.iter().enumerate() {
            stim.push(LutIn { tk: Some((a as u64, id.is_some(), id.unwrap_or(0) as u64, key.is_some(), key.unwrap_or(0))), ..base });
        }
        for r in 0..devices {
            let c = sched::balance::semmoe::chunk(n, devices, r);
            stim.push(LutIn { dv: Some((r as u64, c.start as u64, c.len() as u64)), ..base });
        }
        stim.push(LutIn { go: true, ..base });
        // Search ≤ 5 probes + pick + compare per token, then count, prefix, scatter, align, fill.
        for _ in 0..(n * 7 + 4 * n + devices as usize + 4) {
            stim.push(base);
        }
    }
    for s in stim.iter_mut() {
        s.rd = (rng.gen_range(0..10), rng.gen_range(0..10), rng.gen_range(0..6));
    }
    crate::cosim::record(
        module,
        SemMoeLutN8D4Rtl::new(),
        cycles,
        |u| &mut u.clock,
        |c, u| {
            let s = stim[c];
            u.reset.next = s.reset;
            u.cfg_n.next = s.cfg.0.into();
            u.cfg_d.next = s.cfg.1.into();
            u.cfg_rows.next = s.cfg.2.into();
            u.go.next = s.go;
            let (a, id, d, cf) = s.tt.unwrap_or_default();
            u.tt_we.next = s.tt.is_some();
            u.tt_addr.next = a.into();
            u.tt_id.next = id.into();
            u.tt_dev.next = d.into();
            u.tt_conf.next = cf.into();
            let (a, v, d, cf) = s.ng.unwrap_or_default();
            u.ng_we.next = s.ng.is_some();
            u.ng_addr.next = a.into();
            u.ng_valid.next = v;
            u.ng_dev.next = d.into();
            u.ng_conf.next = cf.into();
            let (a, iv, id, kv, k) = s.tk.unwrap_or_default();
            u.tk_we.next = s.tk.is_some();
            u.tk_addr.next = a.into();
            u.tk_id_valid.next = iv;
            u.tk_id.next = id.into();
            u.tk_key_valid.next = kv;
            u.tk_key.next = k.into();
            let (a, st0, len) = s.dv.unwrap_or_default();
            u.dv_we.next = s.dv.is_some();
            u.dv_addr.next = a.into();
            u.dv_start.next = st0.into();
            u.dv_len.next = len.into();
            u.rd_pos.next = s.rd.0.into();
            u.rd_tok.next = s.rd.1.into();
            u.rd_dev.next = s.rd.2.into();
        },
    )
}

/// Export registration: linted and co-simulated like the other leaf blocks.
pub const EXPORT: crate::export::BlockDef = crate::export::BlockDef {
    name: "semmoe_lut",
    top: false,
    domain: crate::export::ModelDomain::WaferCore,
    cosim_cycles: 4096,
    sets: &[crate::export::ParamSet {
        module: "semmoe_lut_n8_d4",
        rust_type: "SemMoeLutN8D4Rtl",
        params: &[("devices", 4), ("ngram_rows", 32), ("table_rows", 16), ("tokens", 8)],
        // ECP5-85F: 43.3 MHz at seed 1 (docs/rtl.md, "Timing closure at the prototype clocks").
        ecp5_clock_mhz: 40,
        build: || crate::export::boxed(SemMoeLutN8D4Rtl::new()),
        recorder: Some(|cycles, seed| record_semmoe_lut_n8_d4("semmoe_lut_n8_d4", cycles, seed)),
    }],
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(not(feature = "yosys"), ignore = "needs yosys (feature `yosys`)")]
    fn semmoe_lut_synthesizable() {
        let mut uut = SemMoeLutN8D4Rtl::new();
        uut.connect_all();
        check_all(&uut).unwrap();
        yosys_validate("waferstream_semmoe_lut_n8_d4", &generate_verilog(&uut)).unwrap();
    }
}
