//! PE array `PeArrayRtl<R, C>`: the RTL twin of `hw::pkg::pe_array::PeArrayCl` — an R×C
//! int8 MAC grid ([`super::pe_cell`]) with a fold sequencer whose busy/done timing equals the
//! CL's (SCALE-Sim 3.0.0 fold timing), output- or weight-stationary per job.
//!
//! ```text
//!  start, tag, ws, row_folds[3], col_folds[3], stream[3] ──► fold sequencer ──► busy, done, done_tag, tag,
//!      (a job of up to 3 GEMMs, latched at start)              │ (gemm, fold row, fold col, cycle) gemm_idx, fold_row, fold_col,
//!                                                              │                                 fold_cycle, fold_done
//!                                        ws, preload, acc_zero, capture (broadcast)
//!                                                              ▼
//!  a_in[R] ──► row 0 ── PE ─ PE ─ … ─ PE          b_in[C] enter row 0 from above; B (OS), weights (WS)
//!          ──► row 1 ── PE ─ PE ─ … ─ PE          and partial sums (WS) move one row down per cycle
//!              …                                  res[C]     = result bank row `res_row` (OS)
//!          ──► row R-1  PE ─ PE ─ … ─ PE ──►      col_out[C] = bottom row's partial sums (WS)
//! ```
//!
//! # Fold sequencer (the CL's `eval`, in registers)
//! A job is up to three GEMMs; GEMM `g` is described by its fold counts (`row_folds[g]` =
//! `ceil(Sr/R)`, `col_folds[g]` = `ceil(Sc/C)`, 0 for an absent or empty GEMM) and its streamed
//! dimension `stream[g]` (OS: K, WS: M) — the FL fold plan's fields; the owner computes them
//! (`hw::pkg::pe_array::PeArrayCfg::plan`). At an edge where the array is idle and `start` is
//! high, that edge is the job's first busy cycle (as the CL's `eval(now, Some(job))`): the
//! sequencer starts at the first non-empty GEMM (a job whose GEMMs are all empty is done at
//! that edge without being busy). Every busy cycle advances the fold cycle; a fold lasts
//! `prefix + stream + R + C − 2` cycles (prefix = R for WS, 0 for OS: SCALE-Sim's timing);
//! folds go row fold inner, column fold outer; after a GEMM's last fold the next non-empty
//! GEMM starts at the next edge; after the job's last fold `busy` falls and `done` pulses with
//! `done_tag` for one cycle. The registered outputs after an edge equal the CL's state after
//! `eval` at that edge (busy, current tag, GEMM index, fold row and column, the cycle in the
//! fold), which the lockstep test checks cycle by cycle. Double-buffered timing (the next
//! fold's preload under the current fold's stream) is not built: it needs a second weight or
//! result register per PE and a per-PE fold boundary travelling with the data; the package
//! stand-in refuses it by name.
//!
//! # Operand and result ports (the feeder's protocol)
//! The feeder (operand SRAMs and skew registers, outside this block) drives `a_in[i]` and
//! `b_in[j]` every cycle from the fold being executed — the registered `gemm_idx`, `fold_row`,
//! `fold_col`, `fold_cycle` (or GEMM/fold 0, cycle 0 in the cycle `start` is accepted) — and
//! zero outside the operand ranges. With `rb = fold_row·R`, `cb = fold_col·C`, cycle `c`:
//! * OS (rows = M, cols = N, stream K): `a_in[i] = A[rb+i][c−i]`, `b_in[j] = B[c−j][cb+j]`.
//!   PE (i, j) multiplies `A[rb+i][k]·B[k][cb+j]` in cycle `k+i+j`; the bottom-right PE's last
//!   MAC is the fold's last cycle. Then the result bank holds the fold's `R×C` outputs until
//!   the next fold's last cycle (≥ R cycles later); the feeder reads row `i` through
//!   `res_row = i` → `res[j]` (combinational), one row per cycle.
//! * WS (rows = K, cols = N, stream M): preload `b_in[j] = W[rb+R−1−c][cb+j]` for `c < R`
//!   (the weights shift down, bottom row first), then `a_in[i] = A[c−R−i][rb+i]`. The partial
//!   sum of output `(m, cb+j)` over this row fold leaves the bottom row at the edge of cycle
//!   `2R−1+m+j` and is on `col_out[j]` after it; the owner adds the row folds' partial sums.
//!
//! # Widths and limits
//! Accumulators and partial sums are 32-bit two's complement with wrap-around (the FL twin's
//! `gemm_i8_fl`): exact, without wrap, for any K ≤ 131 071 (|int8·int8| ≤ 2^14). Fold counts
//! are 16-bit (≤ 65 535 folds per dimension), the stream 24-bit (T ≤ 16 777 215) and the fold
//! cycle counter 32-bit.

use rust_hdl::prelude::*;

use super::pe_cell::PeRtl;

/// GEMMs per job (the CL's `PeJob`: gate, up, down).
pub const GEMMS: usize = 3;

/// The R×C PE array with its fold sequencer.
#[derive(LogicBlock)]
pub struct PeArrayRtl<const R: usize, const C: usize> {
    pub clock: Signal<In, Clock>,
    /// Synchronous reset: idle, every PE register zero.
    pub reset: Signal<In, Bit>,
    /// Issue a job (taken when idle: `busy` low).
    pub start: Signal<In, Bit>,
    /// The job's dataflow: weight-stationary (else output-stationary). Sampled with `start`.
    pub ws: Signal<In, Bit>,
    /// The job's opaque handle, returned on `done_tag`.
    pub tag: Signal<In, Bits<32>>,
    /// Per GEMM of the job: fold counts (0 = absent/empty) and streamed dimension.
    pub row_folds: [Signal<In, Bits<16>>; GEMMS],
    pub col_folds: [Signal<In, Bits<16>>; GEMMS],
    pub stream: [Signal<In, Bits<24>>; GEMMS],
    /// Operand feed: activations per row, B/weights per column (int8).
    pub a_in: [Signal<In, Bits<8>>; R],
    pub b_in: [Signal<In, Bits<8>>; C],
    /// Result bank row on `res` (OS drain).
    pub res_row: Signal<In, Bits<16>>,
    /// Registered state (after the edge): a job is running.
    pub busy: Signal<Out, Bit>,
    /// Pulse: the job's last busy cycle was the previous edge (the CL's `eval` returned it).
    pub done: Signal<Out, Bit>,
    pub done_tag: Signal<Out, Bits<32>>,
    /// Tag of the job in progress (0 when idle, as the CL's trace).
    pub job_tag: Signal<Out, Bits<32>>,
    pub gemm_idx: Signal<Out, Bits<2>>,
    pub fold_row: Signal<Out, Bits<16>>,
    pub fold_col: Signal<Out, Bits<16>>,
    pub fold_cycle: Signal<Out, Bits<32>>,
    /// Pulse: a fold ended at the previous edge (OS: its outputs are in the result bank).
    pub fold_done: Signal<Out, Bit>,
    /// Result bank row `res_row` (OS), comb.
    pub res: [Signal<Out, Bits<32>>; C],
    /// Bottom row's partial sums (WS), registered.
    pub col_out: [Signal<Out, Bits<32>>; C],
    // --- registers
    busy_q: DFF<Bit>,
    done_q: DFF<Bit>,
    done_tag_q: DFF<Bits<32>>,
    tag_q: DFF<Bits<32>>,
    ws_q: DFF<Bit>,
    gemm_q: DFF<Bits<2>>,
    fr_q: DFF<Bits<16>>,
    fc_q: DFF<Bits<16>>,
    cyc_q: DFF<Bits<32>>,
    fold_done_q: DFF<Bit>,
    rf_q: [DFF<Bits<16>>; GEMMS],
    cf_q: [DFF<Bits<16>>; GEMMS],
    /// Per GEMM, latched at start: fold length − 1 (`prefix + stream + R + C − 2 − 1`, mod
    /// 2^32) and "non-empty" (both fold counts non-zero). Precomputed so that no adder on the
    /// stream sits between the fold counter and its end compare (Fmax; the stream itself is
    /// needed for nothing else).
    lenm1_q: [DFF<Bits<32>>; GEMMS],
    ne_q: [DFF<Bit>; GEMMS],
    /// The current GEMM's (`gemm_q`'s) fold length − 1 and fold counts − 1 (mod 2^16), loaded
    /// whenever `gemm_q` is loaded: while busy the fold-end, last-row and last-column tests
    /// are register-to-register equality compares (`cyc_q == clen_q`, `fr_q == crfm1_q`,
    /// `fc_q == ccfm1_q`), each equal mod 2^N to the CL's `cyc + 1 == len` etc.
    clen_q: DFF<Bits<32>>,
    crfm1_q: DFF<Bits<16>>,
    ccfm1_q: DFF<Bits<16>>,
    /// The PEs, row-major: PE (i, j) is `pe[i·C + j]`. One flat array rather than rows of
    /// PEs: rust-hdl 0.46's Verilog generator resolves only the first index of an expression
    /// (`rows[i].b_in[j]` became `rows$0$b_in[j]`), so the vertical wiring of a row array of
    /// port arrays cannot be generated; every reference here has exactly one index. On the
    /// heap (the package's 32×64 array is megabytes of signals).
    pe: Vec<PeRtl>,
    // --- combinational locals
    /// A job is accepted this edge.
    start_ok: Signal<Local, Bit>,
    /// The job's GEMM descriptors this cycle (the ports when starting, else the latched ones).
    j_rf: [Signal<Local, Bits<16>>; GEMMS],
    j_cf: [Signal<Local, Bits<16>>; GEMMS],
    j_lenm1: [Signal<Local, Bits<32>>; GEMMS],
    j_ne: [Signal<Local, Bit>; GEMMS],
    /// Fold length − 1 and non-empty flag of each GEMM on the ports (a starting job).
    p_lenm1: [Signal<Local, Bits<32>>; GEMMS],
    p_ne: [Signal<Local, Bit>; GEMMS],
    /// First non-empty GEMM of a starting job.
    first_found: Signal<Local, Bit>,
    first_idx: Signal<Local, Bits<2>>,
    /// The first GEMM's fold length − 1 and fold counts (a starting job).
    f_lenm1: Signal<Local, Bits<32>>,
    f_rf: Signal<Local, Bits<16>>,
    f_cf: Signal<Local, Bits<16>>,
    /// The fold being executed this cycle.
    cur_busy: Signal<Local, Bit>,
    cur_ws: Signal<Local, Bit>,
    cur_tag: Signal<Local, Bits<32>>,
    cur_g: Signal<Local, Bits<2>>,
    cur_fr: Signal<Local, Bits<16>>,
    cur_fc: Signal<Local, Bits<16>>,
    cur_cyc: Signal<Local, Bits<32>>,
    /// This cycle is the fold's last; its row fold is the GEMM's last; its column fold is.
    fold_end: Signal<Local, Bit>,
    last_row: Signal<Local, Bit>,
    last_col: Signal<Local, Bit>,
    /// The PEs' broadcast controls this cycle (WS weight shift, OS accumulator restart and
    /// result capture).
    pe_preload: Signal<Local, Bit>,
    pe_acc_zero: Signal<Local, Bit>,
    pe_capture: Signal<Local, Bit>,
    /// Next non-empty GEMM after the current one.
    next_found: Signal<Local, Bit>,
    next_idx: Signal<Local, Bits<2>>,
    /// The next GEMM's fold length − 1 and fold counts.
    nx_lenm1: Signal<Local, Bits<32>>,
    nx_rf: Signal<Local, Bits<16>>,
    nx_cf: Signal<Local, Bits<16>>,
    gi: Signal<Local, Bits<2>>,
    /// Fold length − 1 less the stream: `R + C − 2 − 1` (OS, mod 2^32: systolic fill and
    /// drain) and `R + R + C − 2 − 1` (WS: plus the preload).
    len_os_m1: Constant<Bits<32>>,
    len_ws_m1: Constant<Bits<32>>,
    n_rows: Constant<Bits<32>>,
    /// 1 at the fold counters' width: `cur_fr + one16 == cur_rf` wraps at 16 bits in Verilog
    /// as in Rust (a Rust literal is a 32-bit Verilog constant, which widens the comparison).
    one16: Constant<Bits<16>>,
}

impl<const R: usize, const C: usize> Default for PeArrayRtl<R, C> {
    fn default() -> Self {
        Self::new(R, C)
    }
}

impl<const R: usize, const C: usize> PeArrayRtl<R, C> {
    /// The block for a `rows × cols` array (must match the const generics).
    pub fn new(rows: usize, cols: usize) -> Self {
        assert_eq!((rows, cols), (R, C), "PE array {rows}x{cols} != RTL size {R}x{C}");
        assert!((1..=4096).contains(&R) && (1..=4096).contains(&C), "PE array {R}x{C}: sides 1..=4096");
        PeArrayRtl {
            clock: Default::default(),
            reset: Default::default(),
            start: Default::default(),
            ws: Default::default(),
            tag: Default::default(),
            row_folds: std::array::from_fn(|_| Default::default()),
            col_folds: std::array::from_fn(|_| Default::default()),
            stream: std::array::from_fn(|_| Default::default()),
            a_in: std::array::from_fn(|_| Default::default()),
            b_in: std::array::from_fn(|_| Default::default()),
            res_row: Default::default(),
            busy: Default::default(),
            done: Default::default(),
            done_tag: Default::default(),
            job_tag: Default::default(),
            gemm_idx: Default::default(),
            fold_row: Default::default(),
            fold_col: Default::default(),
            fold_cycle: Default::default(),
            fold_done: Default::default(),
            res: std::array::from_fn(|_| Default::default()),
            col_out: std::array::from_fn(|_| Default::default()),
            busy_q: Default::default(),
            done_q: Default::default(),
            done_tag_q: Default::default(),
            tag_q: Default::default(),
            ws_q: Default::default(),
            gemm_q: Default::default(),
            fr_q: Default::default(),
            fc_q: Default::default(),
            cyc_q: Default::default(),
            fold_done_q: Default::default(),
            rf_q: std::array::from_fn(|_| Default::default()),
            cf_q: std::array::from_fn(|_| Default::default()),
            lenm1_q: std::array::from_fn(|_| Default::default()),
            ne_q: std::array::from_fn(|_| Default::default()),
            clen_q: Default::default(),
            crfm1_q: Default::default(),
            ccfm1_q: Default::default(),
            pe: (0..R * C).map(|_| PeRtl::new()).collect(),
            start_ok: Default::default(),
            j_rf: std::array::from_fn(|_| Default::default()),
            j_cf: std::array::from_fn(|_| Default::default()),
            j_lenm1: std::array::from_fn(|_| Default::default()),
            j_ne: std::array::from_fn(|_| Default::default()),
            p_lenm1: std::array::from_fn(|_| Default::default()),
            p_ne: std::array::from_fn(|_| Default::default()),
            first_found: Default::default(),
            first_idx: Default::default(),
            f_lenm1: Default::default(),
            f_rf: Default::default(),
            f_cf: Default::default(),
            cur_busy: Default::default(),
            cur_ws: Default::default(),
            cur_tag: Default::default(),
            cur_g: Default::default(),
            cur_fr: Default::default(),
            cur_fc: Default::default(),
            cur_cyc: Default::default(),
            fold_end: Default::default(),
            last_row: Default::default(),
            last_col: Default::default(),
            pe_preload: Default::default(),
            pe_acc_zero: Default::default(),
            pe_capture: Default::default(),
            next_found: Default::default(),
            next_idx: Default::default(),
            nx_lenm1: Default::default(),
            nx_rf: Default::default(),
            nx_cf: Default::default(),
            gi: Default::default(),
            len_os_m1: Constant::new((((R + C - 2) as u64).wrapping_sub(1) & 0xFFFF_FFFF).into()),
            len_ws_m1: Constant::new(((2 * R + C - 3) as u64).into()),
            n_rows: Constant::new((R as u64).into()),
            one16: Constant::new(1u64.into()),
        }
    }
}

impl<const R: usize, const C: usize> Logic for PeArrayRtl<R, C> {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, busy_q, done_q, done_tag_q, tag_q, ws_q, gemm_q, fr_q, fc_q, cyc_q, fold_done_q, clen_q, crfm1_q, ccfm1_q);
        for g in 0..GEMMS {
            self.rf_q[g].clock.next = self.clock.val();
            self.rf_q[g].d.next = self.rf_q[g].q.val();
            self.cf_q[g].clock.next = self.clock.val();
            self.cf_q[g].d.next = self.cf_q[g].q.val();
            self.lenm1_q[g].clock.next = self.clock.val();
            self.lenm1_q[g].d.next = self.lenm1_q[g].q.val();
            self.ne_q[g].clock.next = self.clock.val();
            self.ne_q[g].d.next = self.ne_q[g].q.val();
        }
        // ---- registered outputs
        self.busy.next = self.busy_q.q.val();
        self.done.next = self.done_q.q.val();
        self.done_tag.next = self.done_tag_q.q.val();
        self.job_tag.next = 0.into();
        if self.busy_q.q.val() {
            self.job_tag.next = self.tag_q.q.val();
        }
        self.gemm_idx.next = self.gemm_q.q.val();
        self.fold_row.next = self.fr_q.q.val();
        self.fold_col.next = self.fc_q.q.val();
        self.fold_cycle.next = self.cyc_q.q.val();
        self.fold_done.next = self.fold_done_q.q.val();
        // ---- the job this cycle: the ports when one is accepted, else the latched one
        self.start_ok.next = self.start.val() & !self.busy_q.q.val();
        // Fold length − 1 (mod 2^32) = stream + prefix + skew − 1. Written out per GEMM: the
        // hdl_gen macro expands `bit_cast` outside the enclosing loop, so a loop index in its
        // argument is unbound.
        self.p_lenm1[0].next = bit_cast::<32, 24>(self.stream[0].val()) + self.len_os_m1.val();
        self.p_lenm1[1].next = bit_cast::<32, 24>(self.stream[1].val()) + self.len_os_m1.val();
        self.p_lenm1[2].next = bit_cast::<32, 24>(self.stream[2].val()) + self.len_os_m1.val();
        if self.ws.val() {
            self.p_lenm1[0].next = bit_cast::<32, 24>(self.stream[0].val()) + self.len_ws_m1.val();
            self.p_lenm1[1].next = bit_cast::<32, 24>(self.stream[1].val()) + self.len_ws_m1.val();
            self.p_lenm1[2].next = bit_cast::<32, 24>(self.stream[2].val()) + self.len_ws_m1.val();
        }
        for g in 0..GEMMS {
            self.p_ne[g].next = self.row_folds[g].val().any() & self.col_folds[g].val().any();
            self.j_rf[g].next = self.rf_q[g].q.val();
            self.j_cf[g].next = self.cf_q[g].q.val();
            self.j_lenm1[g].next = self.lenm1_q[g].q.val();
            self.j_ne[g].next = self.ne_q[g].q.val();
            if self.start_ok.val() {
                self.j_rf[g].next = self.row_folds[g].val();
                self.j_cf[g].next = self.col_folds[g].val();
                self.j_lenm1[g].next = self.p_lenm1[g].val();
                self.j_ne[g].next = self.p_ne[g].val();
            }
        }
        // First non-empty GEMM of a starting job.
        self.first_found.next = false;
        self.first_idx.next = 0.into();
        self.gi.next = 0.into();
        for g in 0..GEMMS {
            if self.j_ne[g].val() & !self.first_found.val() {
                self.first_found.next = true;
                self.first_idx.next = self.gi.val();
            }
            self.gi.next = self.gi.val() + 1;
        }
        // ---- the fold executed this cycle
        self.cur_busy.next = self.busy_q.q.val();
        self.cur_ws.next = self.ws_q.q.val();
        self.cur_tag.next = self.tag_q.q.val();
        self.cur_g.next = self.gemm_q.q.val();
        self.cur_fr.next = self.fr_q.q.val();
        self.cur_fc.next = self.fc_q.q.val();
        self.cur_cyc.next = self.cyc_q.q.val();
        if self.start_ok.val() {
            self.cur_busy.next = self.first_found.val();
            self.cur_ws.next = self.ws.val();
            self.cur_tag.next = self.tag.val();
            self.cur_g.next = self.first_idx.val();
            self.cur_fr.next = 0.into();
            self.cur_fc.next = 0.into();
            self.cur_cyc.next = 0.into();
        }
        // The first GEMM's descriptors (only used when starting: then `j_*` are the ports).
        self.f_lenm1.next = self.j_lenm1[0].val();
        self.f_rf.next = self.j_rf[0].val();
        self.f_cf.next = self.j_cf[0].val();
        for g in 1..GEMMS {
            if self.first_idx.val().index() == g {
                self.f_lenm1.next = self.j_lenm1[g].val();
                self.f_rf.next = self.j_rf[g].val();
                self.f_cf.next = self.j_cf[g].val();
            }
        }
        // Fold end (`cyc + 1 == prefix + stream + skew`, SCALE-Sim), last row fold
        // (`fr + 1 == row_folds`), last column fold: while busy, compares against the current
        // GEMM's registered values; in the cycle a job starts (cycle 0 of fold (0, 0) of its
        // first GEMM), the same tests on the ports' values.
        self.fold_end.next = self.cyc_q.q.val() == self.clen_q.q.val();
        self.last_row.next = self.fr_q.q.val() == self.crfm1_q.q.val();
        self.last_col.next = self.fc_q.q.val() == self.ccfm1_q.q.val();
        if self.start_ok.val() {
            self.fold_end.next = !self.f_lenm1.val().any();
            self.last_row.next = self.f_rf.val() == self.one16.val();
            self.last_col.next = self.f_cf.val() == self.one16.val();
        }
        // Next non-empty GEMM after the current one (GEMM 0 is never after another: the scan
        // starts at 1, so no `cur_g < 0` term is generated).
        self.next_found.next = false;
        self.next_idx.next = 0.into();
        self.gi.next = 1.into();
        for g in 1..GEMMS {
            if self.j_ne[g].val() & !self.next_found.val() & (self.cur_g.val().index() < g) {
                self.next_found.next = true;
                self.next_idx.next = self.gi.val();
            }
            self.gi.next = self.gi.val() + 1;
        }
        // Its descriptors (loaded into clen_q/crfm1_q/ccfm1_q with gemm_q).
        self.nx_lenm1.next = self.j_lenm1[0].val();
        self.nx_rf.next = self.j_rf[0].val();
        self.nx_cf.next = self.j_cf[0].val();
        for g in 1..GEMMS {
            if self.next_idx.val().index() == g {
                self.nx_lenm1.next = self.j_lenm1[g].val();
                self.nx_rf.next = self.j_rf[g].val();
                self.nx_cf.next = self.j_cf[g].val();
            }
        }
        // ---- the datapath. PE (i, j) is pe[i·C + j]. The Verilog generator evaluates an
        // index expression with only the enclosing loop variables bound (evalexpr), so the
        // one-iteration loop `for w in C..(C + 1)` binds the row stride `w = C` by name; in
        // Rust it is the same loop, so simulation and Verilog compute the same index.
        self.pe_preload.next = self.cur_busy.val() & self.cur_ws.val() & (self.cur_cyc.val() < self.n_rows.val());
        self.pe_acc_zero.next = self.cur_busy.val() & !self.cur_ws.val() & !self.cur_cyc.val().any();
        self.pe_capture.next = self.cur_busy.val() & !self.cur_ws.val() & self.fold_end.val();
        for i in 0..R {
            for j in 0..C {
                for w in C..(C + 1) {
                    // Broadcast controls.
                    self.pe[i * w + j].clock.next = self.clock.val();
                    self.pe[i * w + j].reset.next = self.reset.val();
                    self.pe[i * w + j].ws.next = self.cur_ws.val();
                    self.pe[i * w + j].preload.next = self.pe_preload.val();
                    self.pe[i * w + j].acc_zero.next = self.pe_acc_zero.val();
                    self.pe[i * w + j].capture.next = self.pe_capture.val();
                }
            }
        }
        // Activations: into column 0 from a_in[i], then one PE to the right per cycle.
        for i in 0..R {
            for w in C..(C + 1) {
                self.pe[i * w].a_left.next = self.a_in[i].val();
            }
        }
        for i in 0..R {
            for j in 1..C {
                for w in C..(C + 1) {
                    self.pe[i * w + j].a_left.next = self.pe[i * w + j - 1].a_out.val();
                }
            }
        }
        // B/weights and partial sums: into row 0 from above, then one row down per cycle.
        for j in 0..C {
            self.pe[j].b_top.next = self.b_in[j].val();
            self.pe[j].psum_top.next = 0.into();
            self.res[j].next = self.pe[j].res_out.val();
        }
        for i in 1..R {
            for j in 0..C {
                for w in C..(C + 1) {
                    self.pe[i * w + j].b_top.next = self.pe[i * w + j - w].b_out.val();
                    self.pe[i * w + j].psum_top.next = self.pe[i * w + j - w].acc_out.val();
                }
            }
        }
        // The bottom row's partial sums (WS): a one-iteration loop binds i = R − 1.
        for i in (R - 1)..R {
            for j in 0..C {
                for w in C..(C + 1) {
                    self.col_out[j].next = self.pe[i * w + j].acc_out.val();
                }
            }
        }
        // Result bank row `res_row` (OS; row 0 is the default above).
        for i in 1..R {
            for j in 0..C {
                for w in C..(C + 1) {
                    if self.res_row.val().index() == i {
                        self.res[j].next = self.pe[i * w + j].res_out.val();
                    }
                }
            }
        }
        // ---- next state (the CL's eval: issue, then one busy cycle)
        self.done_q.d.next = false;
        self.fold_done_q.d.next = false;
        if self.start_ok.val() {
            self.ws_q.d.next = self.ws.val();
            self.tag_q.d.next = self.tag.val();
            self.gemm_q.d.next = self.first_idx.val();
            self.clen_q.d.next = self.f_lenm1.val();
            self.crfm1_q.d.next = self.f_rf.val() - self.one16.val();
            self.ccfm1_q.d.next = self.f_cf.val() - self.one16.val();
            for g in 0..GEMMS {
                self.rf_q[g].d.next = self.row_folds[g].val();
                self.cf_q[g].d.next = self.col_folds[g].val();
                self.lenm1_q[g].d.next = self.p_lenm1[g].val();
                self.ne_q[g].d.next = self.p_ne[g].val();
            }
            if !self.first_found.val() {
                // Nothing to compute: done at once, never busy.
                self.done_q.d.next = true;
                self.done_tag_q.d.next = self.tag.val();
            }
        }
        if self.cur_busy.val() {
            self.busy_q.d.next = true;
            self.gemm_q.d.next = self.cur_g.val();
            self.fr_q.d.next = self.cur_fr.val();
            self.fc_q.d.next = self.cur_fc.val();
            self.cyc_q.d.next = self.cur_cyc.val() + 1;
            if self.fold_end.val() {
                self.fold_done_q.d.next = true;
                self.cyc_q.d.next = 0.into();
                self.fr_q.d.next = self.cur_fr.val() + self.one16.val();
                if self.last_row.val() {
                    self.fr_q.d.next = 0.into();
                    self.fc_q.d.next = self.cur_fc.val() + self.one16.val();
                    if self.last_col.val() {
                        if self.next_found.val() {
                            self.gemm_q.d.next = self.next_idx.val();
                            self.clen_q.d.next = self.nx_lenm1.val();
                            self.crfm1_q.d.next = self.nx_rf.val() - self.one16.val();
                            self.ccfm1_q.d.next = self.nx_cf.val() - self.one16.val();
                            self.fc_q.d.next = 0.into();
                        } else {
                            self.busy_q.d.next = false;
                            self.done_q.d.next = true;
                            self.done_tag_q.d.next = self.cur_tag.val();
                        }
                    }
                }
            }
        }
        if self.reset.val() {
            self.busy_q.d.next = false;
            self.done_q.d.next = false;
            self.done_tag_q.d.next = 0.into();
            self.tag_q.d.next = 0.into();
            self.ws_q.d.next = false;
            self.gemm_q.d.next = 0.into();
            self.fr_q.d.next = 0.into();
            self.fc_q.d.next = 0.into();
            self.cyc_q.d.next = 0.into();
            self.fold_done_q.d.next = false;
            self.clen_q.d.next = 0.into();
            self.crfm1_q.d.next = 0.into();
            self.ccfm1_q.d.next = 0.into();
            for g in 0..GEMMS {
                self.rf_q[g].d.next = 0.into();
                self.cf_q[g].d.next = 0.into();
                self.lenm1_q[g].d.next = 0.into();
                self.ne_q[g].d.next = false;
            }
        }
    }
}

/// The exported sizes: a 4×4 and an 8×8 array (16 and 64 MACs; the package's 32×64 is the same
/// code at another size, simulated by the `--rtl pe` stand-in).
pub type PeArray4x4Rtl = PeArrayRtl<4, 4>;
pub type PeArray8x8Rtl = PeArrayRtl<8, 8>;

/// The outputs of a job's GEMMs, computed naively from its operands (the recorder's check of
/// the vectors it writes; independent of the driver's feeder and drain).
fn gemm_reference(job: &super::pe_array_twin::RtlJob) -> Vec<Vec<i32>> {
    use super::pe_array_twin::OperandA;
    let mut outs: Vec<Vec<i32>> = Vec::new();
    for g in &job.gemms {
        let mut o = vec![0i32; g.m * g.n];
        for i in 0..g.m {
            for kk in 0..g.k {
                let a = match &g.a {
                    OperandA::Given(a) => a[i * g.k + kk],
                    &OperandA::Act { gate, gate_col, up, up_col, act } => {
                        let (ng, nu) = (job.gemms[gate].n, job.gemms[up].n);
                        act(outs[gate][i * ng + gate_col + kk], outs[up][i * nu + up_col + kk])
                    }
                };
                for jj in 0..g.n {
                    o[i * g.n + jj] = o[i * g.n + jj].wrapping_add(a as i32 * g.b[kk * g.n + jj] as i32);
                }
            }
        }
        outs.push(o);
    }
    outs
}

/// An FFN micro-slice job (gate and up `m×d · d×f`, then down `m×f · f×d` on `act_i8(gate,
/// up)`) with random int8 data: the recorder's opening GEMMs, issued once per dataflow.
fn ffn_job(rng: &mut impl rand::Rng, m: usize, d: usize, f: usize) -> super::pe_array_twin::RtlJob {
    use super::pe_array_twin::{GemmData, OperandA, RtlJob};
    let mut mat = |n: usize| -> Vec<i8> { (0..n).map(|_| rng.next_u32() as i8).collect() };
    let x = mat(m * d);
    let (wg, wu, wd) = (mat(d * f), mat(d * f), mat(f * d));
    let act = OperandA::Act { gate: 0, gate_col: 0, up: 1, up_col: 0, act: sched::pkg::moe::act_i8 };
    RtlJob {
        tag: 0,
        ws: false,
        gemms: vec![
            GemmData { m, k: d, n: f, a: OperandA::Given(x.clone()), b: wg },
            GemmData { m, k: d, n: f, a: OperandA::Given(x), b: wu },
            GemmData { m, k: f, n: d, a: act, b: wd },
        ],
    }
}

/// Co-simulation vectors of an R×C array: a reset edge, then `cycles − 1` edges fed and drained
/// by [`PeArrayDriver`]: first one FFN micro-slice (gate, up, down; every GEMM several folds in
/// both dimensions) output-stationary, then the same job weight-stationary, then random jobs
/// (1–3 GEMMs of dims 0..=`max` or a gate/up/down micro-slice, OS or WS per job, issued as soon
/// as the array is ready or after a random gap). Every job that finishes within the vectors is
/// checked against a naive GEMM (`gemm_reference`), so the recorded `res`/`col_out` values are
/// those of correct GEMMs.
pub fn record_pe_array<const R: usize, const C: usize>(module: &str, cycles: usize, seed: u64, max: usize) -> Result<crate::cosim::PortTrace, crate::RtlError> {
    use super::pe_array_twin::{build_block, random_job, PeArrayDriver, PeArrayRtlPorts, PeIn, RtlJob};
    use rand::{Rng, SeedableRng};
    use std::collections::VecDeque;
    let err = |e: String| crate::RtlError::Trace { module: module.to_string(), detail: e };
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut drv = PeArrayDriver::new(build_block(R, C).ok_or_else(|| err(format!("no {R}x{C} block built")))?);
    let ffn = ffn_job(&mut rng, R + 3, 2 * R + 1, 2 * C + 3);
    let mut opening: VecDeque<RtlJob> = [false, true].into_iter().map(|ws| RtlJob { ws, ..ffn.clone() }).collect();
    let mut issued: VecDeque<(u32, Vec<Vec<i32>>)> = VecDeque::new();
    let mut stim: Vec<(PeIn, Vec<i8>, Vec<i8>)> = Vec::with_capacity(cycles);
    let mut tag = 1u32;
    let mut gap = 0u32;
    for _ in 1..cycles {
        let mut issue = None;
        if drv.ready() {
            if gap == 0 {
                let mut job = match opening.pop_front() {
                    Some(j) => j,
                    None => {
                        let ws = rng.gen_bool(0.5);
                        random_job(&mut rng, tag, ws, max)
                    }
                };
                job.tag = tag;
                issued.push_back((tag, gemm_reference(&job)));
                issue = Some(job);
                tag += 1;
                gap = if rng.gen_bool(0.5) { 0 } else { rng.gen_range(1..4) };
            } else {
                gap -= 1;
            }
        }
        drv.step(issue);
        drv.check().map_err(err)?;
        while let Some(done) = drv.take_finished() {
            let (t, want) = issued.pop_front().ok_or_else(|| err(format!("job {} finished, none issued", done.tag)))?;
            if done.tag != t || done.outs != want {
                return Err(err(format!("job {} (expected tag {t}): outputs differ from the naive GEMM", done.tag)));
            }
        }
        stim.push((drv.last_in, drv.last_a.clone(), drv.last_b.clone()));
    }
    // Jobs checked: issued (tags 1..tag) less those still running at the end. A full-length
    // export must contain both opening jobs checked (a shortened one, as in the export
    // tests, need not).
    let checked = (tag as usize - 1) - issued.len();
    if cycles >= crate::export::TOP_COSIM_CYCLES && checked < 2 {
        return Err(err(format!("{cycles} cycles do not finish the opening OS and WS jobs")));
    }
    crate::cosim::record(module, PeArrayRtl::<R, C>::new(R, C), cycles, |u| &mut u.clock, |c, u| {
        if c == 0 {
            u.set_ctrl(&PeIn { reset: true, ..PeIn::default() });
            u.set_feed(&[0; R], &[0; C]);
        } else {
            let (i, a, b) = &stim[c - 1];
            u.set_ctrl(i);
            u.set_feed(a, b);
        }
    })
}

/// Export registration: the 4×4 and 8×8 arrays with their sequencer (composed tops: 16 / 64
/// PEs, `pe$<i·C+j>`), co-simulated over an FFN micro-slice in each dataflow and then random
/// OS and WS jobs.
pub const EXPORT: crate::export::BlockDef = crate::export::BlockDef {
    name: "pe_array",
    top: true,
    domain: crate::export::ModelDomain::PkgCore,
    cosim_cycles: crate::export::TOP_COSIM_CYCLES,
    sets: &[
        crate::export::ParamSet {
            module: "pe_array_4x4",
            rust_type: "PeArray4x4Rtl",
            params: &[("rows", 4), ("cols", 4)],
            // ECP5-85F: 64.1 MHz at seed 1; the fold sequencer's broadcast controls (docs/rtl.md, "Timing closure at the prototype clocks").
            ecp5_clock_mhz: 55,
            build: || crate::export::boxed(PeArray4x4Rtl::new(4, 4)),
            recorder: Some(|cycles, seed| record_pe_array::<4, 4>("pe_array_4x4", cycles, seed, 9)),
        },
        crate::export::ParamSet {
            module: "pe_array_8x8",
            rust_type: "PeArray8x8Rtl",
            params: &[("rows", 8), ("cols", 8)],
            // ECP5-85F: 51.3 MHz at seed 1; the fold sequencer's broadcast controls (docs/rtl.md, "Timing closure at the prototype clocks").
            ecp5_clock_mhz: 45,
            build: || crate::export::boxed(PeArray8x8Rtl::new(8, 8)),
            recorder: Some(|cycles, seed| record_pe_array::<8, 8>("pe_array_8x8", cycles, seed, 17)),
        },
    ],
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(not(feature = "yosys"), ignore = "needs yosys (feature `yosys`)")]
    fn pe_array_synthesizable() {
        let mut uut = PeArray4x4Rtl::new(4, 4);
        uut.connect_all();
        check_all(&uut).unwrap();
        yosys_validate("waferstream_pe_array_4x4", &generate_verilog(&uut)).unwrap();
    }

    #[test]
    #[should_panic(expected = "!= RTL size")]
    fn pe_array_new_checks_size() {
        let _ = PeArray4x4Rtl::new(4, 8);
    }
}
