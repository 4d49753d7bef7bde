//! The chiplet controller's per-slot state (`SlotStateRtl<S>`): each ring slot's live bit,
//! its control bits (landed, computed, sent, next station valid, arrived over D2D), its
//! queue membership (rx_ready, local_ready, local_wait, tx_q: one bit vector each, a slot in
//! at most one), its next station, and the slot on the PE. The controller's stages decide
//! events as slot masks; this block applies them in the CL's program order and answers the
//! sets each later stage chooses from.
//!
//! ```text
//!  A grant batch (batch, _lr/_fwd/_rel, batch_dest) ─┐
//!  B DDR landing (ddr, kind, ddr_dest) ─ C D2D landing ─ D PE done ─ F send done ─► Rule 3 releases
//!      ─► live1, computed1, lw1 lr1 rx1 tx1, pe_busy_a, pe_m, pe_tx (D's push), n_rel, n_fwd
//!  H victim, rx_alloc ─► live2, live3, rx2, lr2            (victim_next: the victim's next station)
//!  I pick (slot, next valid, dest) ─► tx3   J send ─┐      (send_next: the sent slot's next station)
//!  K ld_alloc ─ L escape ─► lw3, live_n ─────────────┴─► registers at the edge
//! ```
//!
//! The rules, as the CL's `step` applies them (read `hw::pkg::chiplet` for why):
//! * A grant moves the expert's waiting pre-loads (`batch`, leaving local_wait) to
//!   local_ready (`batch_lr`), or — off the trajectory, sharded loading — forwards them
//!   (`batch_fwd`: computed, to tx_q, next station `batch_dest[i]`) or releases them
//!   (`batch_rel`: computed and sent). A DDR landing (`ddr`, slot `ddr_slot`) is landed and
//!   goes to local_wait (`ddr_lw`), local_ready (`ddr_lr`), tx_q (`ddr_fwd`, computed, next
//!   `ddr_dest`) or is released (`ddr_rel`). A D2D landing (`rx_land`) is landed and goes to
//!   rx_ready; a PE done (`pe_done`) is computed and, without forward-with-compute, goes to
//!   tx_q if it has a next station (`pe_tx`); a send done (`tx_done`) is sent. Rule 3: a
//!   PE-done or send-done slot that is landed, computed and sent is released (`n_rel`
//!   counts the releases, `n_fwd` the forwards).
//! * H removes the eviction victim (`victim`) from everything and allocates the D2D
//!   arrival's slot (`rx_alloc`); I's pick (`pick_m`) leaves rx_ready / local_ready, takes
//!   the PE, gets next station `pick_dest` when `pick_next` (then it needs a send — with
//!   forward-with-compute it joins tx_q now — else it counts as sent); J's send (`send`)
//!   leaves tx_q; K allocates the DDR load's slot (`ld_alloc`); L drops the escape's slot
//!   (`escape`). A released, evicted, dropped or (re)allocated slot's control bits clear;
//!   `d2d` marks the D2D allocation.
//! * The next-station reads look through this cycle's writes: `victim_next` (H) those of A
//!   and B, `send_next` (J) also I's.
//!
//! Port coupling: every `*1`/`*2`/`*3`, `live_n`, `pe_*`, `n_*` and `*_next` output comb in
//! the inputs; `live`, `landed`, `computed`, `d2d`, `occ`, `pe_busy`, `lw` registered. Slot
//! indices are < S and the masks of distinct events are the controller's (the lockstep
//! against the CL checks the combination; the unit test checks the rules one by one).

use rust_hdl::prelude::*;

use crate::cosim::{record, PortTrace};
use crate::export::{boxed, BlockDef, ParamSet};
use crate::RtlError;

/// The per-slot state of an `S`-slot ring (1 ≤ S ≤ 64).
#[derive(LogicBlock)]
pub struct SlotStateRtl<const S: usize> {
    pub clock: Signal<In, Clock>,
    /// Synchronous reset: no slot live, every control and queue bit 0, the PE free.
    pub reset: Signal<In, Bit>,
    // --- A: a grant's batch of waiting pre-loads
    pub batch: Signal<In, Bits<S>>,
    pub batch_lr: Signal<In, Bits<S>>,
    pub batch_fwd: Signal<In, Bits<S>>,
    pub batch_rel: Signal<In, Bits<S>>,
    pub batch_dest: [Signal<In, Bits<4>>; S],
    // --- B: the DDR landing and what becomes of it
    pub ddr: Signal<In, Bits<S>>,
    pub ddr_slot: Signal<In, Bits<8>>,
    pub ddr_lw: Signal<In, Bit>,
    pub ddr_lr: Signal<In, Bit>,
    pub ddr_fwd: Signal<In, Bit>,
    pub ddr_rel: Signal<In, Bit>,
    pub ddr_dest: Signal<In, Bits<4>>,
    // --- C, D, F: D2D landing, PE done, send done
    pub rx_land: Signal<In, Bits<S>>,
    pub pe_done: Signal<In, Bits<S>>,
    pub pe_done_valid: Signal<In, Bit>,
    pub tx_done: Signal<In, Bits<S>>,
    // --- H: eviction victim, D2D allocation
    pub victim: Signal<In, Bits<S>>,
    pub rx_alloc: Signal<In, Bits<S>>,
    // --- I: PE pick
    pub pick: Signal<In, Bit>,
    pub pick_slot: Signal<In, Bits<8>>,
    pub pick_m: Signal<In, Bits<S>>,
    pub pick_next: Signal<In, Bit>,
    pub pick_dest: Signal<In, Bits<4>>,
    // --- J, K, L: send, DDR allocation, escape
    pub send: Signal<In, Bits<S>>,
    pub ld_alloc: Signal<In, Bits<S>>,
    pub escape: Signal<In, Bits<S>>,
    // --- next-station reads (H victim, J send)
    pub rd_victim: Signal<In, Bits<8>>,
    pub rd_send: Signal<In, Bits<8>>,
    pub victim_next: Signal<Out, Bits<4>>,
    pub send_next: Signal<Out, Bits<4>>,

    // --- registered
    pub live: Signal<Out, Bits<S>>,
    pub landed: Signal<Out, Bits<S>>,
    pub computed: Signal<Out, Bits<S>>,
    pub d2d: Signal<Out, Bits<S>>,
    pub occ: Signal<Out, Bits<8>>,
    pub pe_busy: Signal<Out, Bit>,
    /// local_wait (the grant's batch is chosen from it).
    pub lw: Signal<Out, Bits<S>>,
    // --- after A..F
    pub live1: Signal<Out, Bits<S>>,
    pub computed1: Signal<Out, Bits<S>>,
    pub lw1: Signal<Out, Bits<S>>,
    pub lr1: Signal<Out, Bits<S>>,
    pub rx1: Signal<Out, Bits<S>>,
    pub tx1: Signal<Out, Bits<S>>,
    /// D's PE done pushed to tx_q (the age matrix's `pe_tx` entry).
    pub pe_tx: Signal<Out, Bits<S>>,
    /// The PE busy after the PE done; the slot on it.
    pub pe_busy_a: Signal<Out, Bit>,
    pub pe_m: Signal<Out, Bits<S>>,
    pub n_rel: Signal<Out, Bits<8>>,
    pub n_fwd: Signal<Out, Bits<8>>,
    // --- after H, I, J, L
    pub live2: Signal<Out, Bits<S>>,
    pub live3: Signal<Out, Bits<S>>,
    pub rx2: Signal<Out, Bits<S>>,
    pub lr2: Signal<Out, Bits<S>>,
    pub tx3: Signal<Out, Bits<S>>,
    pub lw3: Signal<Out, Bits<S>>,
    pub live_n: Signal<Out, Bits<S>>,

    live_q: DFF<Bits<S>>,
    nxt: [DFF<Bits<4>>; S],
    nxt_v: DFF<Bits<S>>,
    landed_q: DFF<Bits<S>>,
    computed_q: DFF<Bits<S>>,
    sent: DFF<Bits<S>>,
    d2d_q: DFF<Bits<S>>,
    q_rx: DFF<Bits<S>>,
    q_lr: DFF<Bits<S>>,
    q_lw: DFF<Bits<S>>,
    q_tx: DFF<Bits<S>>,
    pe_busy_q: DFF<Bit>,
    pe_slot_q: DFF<Bits<8>>,
    cnt: Signal<Local, Bits<8>>,
    d_tx: Signal<Local, Bit>,
    landed1: Signal<Local, Bits<S>>,
    sent1: Signal<Local, Bits<S>>,
    r1: Signal<Local, Bits<S>>,
    push_i: Signal<Local, Bit>,
    live4: Signal<Local, Bits<S>>,
    clr: Signal<Local, Bits<S>>,
    nv: Signal<Local, Bits<S>>,
    sv: Signal<Local, Bits<S>>,
    /// Forward with compute: a picked slice with a next station joins tx_q at the pick.
    fwc: Constant<Bit>,
}

impl<const S: usize> SlotStateRtl<S> {
    pub fn new(forward_with_compute: bool) -> Self {
        assert!((1..=64).contains(&S), "slot state of {S} slots (1..=64)");
        Self {
            clock: Default::default(),
            reset: Default::default(),
            batch: Default::default(),
            batch_lr: Default::default(),
            batch_fwd: Default::default(),
            batch_rel: Default::default(),
            batch_dest: std::array::from_fn(|_| Default::default()),
            ddr: Default::default(),
            ddr_slot: Default::default(),
            ddr_lw: Default::default(),
            ddr_lr: Default::default(),
            ddr_fwd: Default::default(),
            ddr_rel: Default::default(),
            ddr_dest: Default::default(),
            rx_land: Default::default(),
            pe_done: Default::default(),
            pe_done_valid: Default::default(),
            tx_done: Default::default(),
            victim: Default::default(),
            rx_alloc: Default::default(),
            pick: Default::default(),
            pick_slot: Default::default(),
            pick_m: Default::default(),
            pick_next: Default::default(),
            pick_dest: Default::default(),
            send: Default::default(),
            ld_alloc: Default::default(),
            escape: Default::default(),
            rd_victim: Default::default(),
            rd_send: Default::default(),
            victim_next: Default::default(),
            send_next: Default::default(),
            live: Default::default(),
            landed: Default::default(),
            computed: Default::default(),
            d2d: Default::default(),
            occ: Default::default(),
            pe_busy: Default::default(),
            lw: Default::default(),
            live1: Default::default(),
            computed1: Default::default(),
            lw1: Default::default(),
            lr1: Default::default(),
            rx1: Default::default(),
            tx1: Default::default(),
            pe_tx: Default::default(),
            pe_busy_a: Default::default(),
            pe_m: Default::default(),
            n_rel: Default::default(),
            n_fwd: Default::default(),
            live2: Default::default(),
            live3: Default::default(),
            rx2: Default::default(),
            lr2: Default::default(),
            tx3: Default::default(),
            lw3: Default::default(),
            live_n: Default::default(),
            live_q: Default::default(),
            nxt: std::array::from_fn(|_| Default::default()),
            nxt_v: Default::default(),
            landed_q: Default::default(),
            computed_q: Default::default(),
            sent: Default::default(),
            d2d_q: Default::default(),
            q_rx: Default::default(),
            q_lr: Default::default(),
            q_lw: Default::default(),
            q_tx: Default::default(),
            pe_busy_q: Default::default(),
            pe_slot_q: Default::default(),
            cnt: Default::default(),
            d_tx: Default::default(),
            landed1: Default::default(),
            sent1: Default::default(),
            r1: Default::default(),
            push_i: Default::default(),
            live4: Default::default(),
            clr: Default::default(),
            nv: Default::default(),
            sv: Default::default(),
            fwc: Constant::new(forward_with_compute),
        }
    }
}

impl<const S: usize> Logic for SlotStateRtl<S> {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, live_q, nxt_v, landed_q, computed_q, sent, d2d_q, q_rx, q_lr, q_lw, q_tx, pe_busy_q, pe_slot_q);
        for i in 0..S {
            self.nxt[i].clock.next = self.clock.val();
            self.nxt[i].d.next = self.nxt[i].q.val();
        }
        self.live.next = self.live_q.q.val();
        self.landed.next = self.landed_q.q.val();
        self.computed.next = self.computed_q.q.val();
        self.d2d.next = self.d2d_q.q.val();
        self.pe_busy.next = self.pe_busy_q.q.val();
        self.lw.next = self.q_lw.q.val();
        self.cnt.next = 0.into();
        for i in 0..S {
            if self.live_q.q.val().get_bit(i) {
                self.cnt.next = self.cnt.val() + 1;
            }
        }
        self.occ.next = self.cnt.val();

        // A, B: next stations of the forwarded slices.
        for i in 0..S {
            if self.batch_fwd.val().get_bit(i) {
                self.nxt[i].d.next = self.batch_dest[i].val();
            }
        }
        if self.ddr_fwd.val() {
            for i in 0..S {
                if self.ddr_slot.val().index() == i {
                    self.nxt[i].d.next = self.ddr_dest.val();
                }
            }
        }
        // D: a PE done with a next station goes to tx_q (unless it went at the pick).
        self.d_tx.next = self.pe_done_valid.val() & !self.fwc.val() & (self.nxt_v.q.val() & self.pe_done.val()).any();
        // Control bits after the completions; Rule 3 releases.
        self.landed1.next = self.landed_q.q.val() | self.ddr.val() | self.rx_land.val();
        self.computed1.next = self.computed_q.q.val() | self.batch_fwd.val() | self.batch_rel.val() | self.pe_done.val();
        self.sent1.next = self.sent.q.val() | self.batch_rel.val() | self.tx_done.val();
        if self.ddr_fwd.val() | self.ddr_rel.val() {
            self.computed1.next = self.computed1.val() | self.ddr.val();
        }
        if self.ddr_rel.val() {
            self.sent1.next = self.sent1.val() | self.ddr.val();
        }
        self.r1.next = self.batch_rel.val() | ((self.pe_done.val() | self.tx_done.val()) & self.landed1.val() & self.computed1.val() & self.sent1.val() & self.live_q.q.val());
        if self.ddr_rel.val() {
            self.r1.next = self.r1.val() | self.ddr.val();
        }
        self.live1.next = self.live_q.q.val() & !self.r1.val();
        self.cnt.next = 0.into();
        for i in 0..S {
            if self.r1.val().get_bit(i) {
                self.cnt.next = self.cnt.val() + 1;
            }
        }
        self.n_rel.next = self.cnt.val();
        self.cnt.next = 0.into();
        for i in 0..S {
            if self.batch_fwd.val().get_bit(i) {
                self.cnt.next = self.cnt.val() + 1;
            }
        }
        if self.ddr_fwd.val() {
            self.cnt.next = self.cnt.val() + 1;
        }
        self.n_fwd.next = self.cnt.val();
        // Queues after the insertions of A..D.
        self.lw1.next = self.q_lw.q.val() & !self.batch.val();
        self.lr1.next = self.q_lr.q.val() | self.batch_lr.val();
        self.rx1.next = self.q_rx.q.val() | self.rx_land.val();
        self.tx1.next = self.q_tx.q.val() | self.batch_fwd.val();
        if self.ddr_lw.val() {
            self.lw1.next = self.lw1.val() | self.ddr.val();
        }
        if self.ddr_lr.val() {
            self.lr1.next = self.lr1.val() | self.ddr.val();
        }
        if self.ddr_fwd.val() {
            self.tx1.next = self.tx1.val() | self.ddr.val();
        }
        self.pe_tx.next = 0.into();
        if self.d_tx.val() {
            self.tx1.next = self.tx1.val() | self.pe_done.val();
            self.pe_tx.next = self.pe_done.val();
        }
        self.pe_busy_a.next = self.pe_busy_q.q.val() & !self.pe_done_valid.val();
        self.pe_m.next = 0.into();
        if self.pe_busy_a.val() {
            self.pe_m.next = self.pe_m.val().replace_bit(self.pe_slot_q.q.val().index(), true);
        }

        // H: the victim leaves; the D2D arrival's slot.
        self.victim_next.next = 0.into();
        for i in 0..S {
            if self.rd_victim.val().index() == i {
                self.victim_next.next = self.nxt[i].q.val();
                if self.batch_fwd.val().get_bit(i) {
                    self.victim_next.next = self.batch_dest[i].val();
                }
            }
        }
        if self.ddr_fwd.val() & (self.rd_victim.val() == self.ddr_slot.val()) {
            self.victim_next.next = self.ddr_dest.val();
        }
        self.live2.next = self.live1.val() & !self.victim.val();
        self.live3.next = self.live2.val() | self.rx_alloc.val();

        // I: the PE pick.
        self.rx2.next = self.rx1.val() & !self.victim.val();
        self.lr2.next = self.lr1.val() & !self.victim.val();
        self.push_i.next = false;
        self.pe_busy_q.d.next = self.pe_busy_a.val();
        if self.pick.val() {
            self.pe_busy_q.d.next = true;
            self.pe_slot_q.d.next = self.pick_slot.val();
            self.push_i.next = self.pick_next.val() & self.fwc.val();
            for i in 0..S {
                if self.pick_slot.val().index() == i {
                    self.nxt[i].d.next = self.pick_dest.val();
                }
            }
        }

        // J: send.
        self.tx3.next = self.tx1.val() & !self.victim.val();
        if self.push_i.val() {
            self.tx3.next = self.tx3.val() | self.pick_m.val();
        }
        self.send_next.next = 0.into();
        for i in 0..S {
            if self.rd_send.val().index() == i {
                self.send_next.next = self.nxt[i].q.val();
                if self.batch_fwd.val().get_bit(i) {
                    self.send_next.next = self.batch_dest[i].val();
                }
            }
        }
        if self.ddr_fwd.val() & (self.rd_send.val() == self.ddr_slot.val()) {
            self.send_next.next = self.ddr_dest.val();
        }
        if self.pick.val() & (self.rd_send.val() == self.pick_slot.val()) {
            self.send_next.next = self.pick_dest.val();
        }

        // K, L: the DDR load's slot; the escape's drop.
        self.live4.next = self.live3.val() | self.ld_alloc.val();
        self.lw3.next = self.lw1.val() & !self.victim.val();
        self.live_n.next = self.live4.val() & !self.escape.val();

        // The edge.
        self.live_q.d.next = self.live_n.val();
        self.clr.next = self.r1.val() | self.victim.val() | self.escape.val() | self.rx_alloc.val() | self.ld_alloc.val();
        self.landed_q.d.next = self.landed1.val() & !self.clr.val();
        self.computed_q.d.next = self.computed1.val() & !self.clr.val();
        self.nv.next = self.nxt_v.q.val() | self.batch_fwd.val();
        if self.ddr_fwd.val() {
            self.nv.next = self.nv.val() | self.ddr.val();
        }
        self.nv.next = self.nv.val() & !self.clr.val();
        self.sv.next = self.sent1.val() & !self.clr.val();
        if self.pick.val() {
            // Rule 3: a slice with no next station needs no send.
            if self.pick_next.val() {
                self.nv.next = self.nv.val() | self.pick_m.val();
                self.sv.next = self.sv.val() & !self.pick_m.val();
            } else {
                self.nv.next = self.nv.val() & !self.pick_m.val();
                self.sv.next = self.sv.val() | self.pick_m.val();
            }
        }
        self.nxt_v.d.next = self.nv.val();
        self.sent.d.next = self.sv.val();
        self.d2d_q.d.next = (self.d2d_q.q.val() & !self.clr.val()) | self.rx_alloc.val();
        self.q_lw.d.next = self.lw3.val() & !self.escape.val();
        self.q_lr.d.next = self.lr2.val() & !self.pick_m.val();
        self.q_rx.d.next = self.rx2.val() & !self.pick_m.val();
        self.q_tx.d.next = self.tx3.val() & !self.send.val();
        if self.reset.val() {
            self.live_q.d.next = 0.into();
            self.nxt_v.d.next = 0.into();
            self.landed_q.d.next = 0.into();
            self.computed_q.d.next = 0.into();
            self.sent.d.next = 0.into();
            self.d2d_q.d.next = 0.into();
            self.q_rx.d.next = 0.into();
            self.q_lr.d.next = 0.into();
            self.q_lw.d.next = 0.into();
            self.q_tx.d.next = 0.into();
            self.pe_busy_q.d.next = false;
        }
    }
}

// ---------------------------------------------------------------- export

/// The exported size: the standard chiplet's 8 slots, forward with compute (A3 knobs, as
/// `chiplet_ctrl_s8_e16`).
pub type SlotState8Rtl = SlotStateRtl<8>;

/// Co-sim recorder: reset in cycle 0 and one cycle in 300, then random events with slot
/// indices < 8: one-hot masks for the single-slot events (a DDR and a D2D landing, PE and send
/// done, victim, allocations, pick, send, escape) and arbitrary masks for the grant's batch,
/// random next stations and read indices.
pub fn record_slot_state_8(module: &str, cycles: usize, seed: u64) -> Result<PortTrace, RtlError> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    record(module, SlotState8Rtl::new(true), cycles, |u| &mut u.clock, move |c, u| {
        let one = |rng: &mut rand_xoshiro::Xoshiro256PlusPlus, p: f64| -> (bool, u64) {
            let s = rng.gen_range(0..8u64);
            (rng.gen_bool(p), s)
        };
        let m = |x: (bool, u64)| -> u64 { if x.0 { 1 << x.1 } else { 0 } };
        u.reset.next = c == 0 || rng.gen_ratio(1, 300);
        let batch: u64 = if rng.gen_bool(0.1) { rng.gen_range(0..256) } else { 0 };
        let kind = rng.gen_range(0..3);
        u.batch.next = batch.into();
        u.batch_lr.next = (if kind == 0 { batch } else { 0 }).into();
        let fwd: u64 = if kind == 1 { batch & rng.gen_range(0..256u64) } else { 0 };
        u.batch_fwd.next = fwd.into();
        u.batch_rel.next = (if kind == 1 { batch & !fwd } else { 0 }).into();
        for i in 0..8 {
            u.batch_dest[i].next = rng.gen_range(0..16u64).into();
        }
        let ddr = one(&mut rng, 0.2);
        u.ddr.next = m(ddr).into();
        u.ddr_slot.next = ddr.1.into();
        let dk = rng.gen_range(0..4);
        u.ddr_lw.next = ddr.0 && dk == 0;
        u.ddr_lr.next = ddr.0 && dk == 1;
        u.ddr_fwd.next = ddr.0 && dk == 2;
        u.ddr_rel.next = ddr.0 && dk == 3;
        u.ddr_dest.next = rng.gen_range(0..16u64).into();
        u.rx_land.next = m(one(&mut rng, 0.15)).into();
        let pd = one(&mut rng, 0.15);
        u.pe_done.next = m(pd).into();
        u.pe_done_valid.next = pd.0;
        u.tx_done.next = m(one(&mut rng, 0.15)).into();
        u.victim.next = m(one(&mut rng, 0.1)).into();
        u.rx_alloc.next = m(one(&mut rng, 0.15)).into();
        let pk = one(&mut rng, 0.3);
        u.pick.next = pk.0;
        u.pick_slot.next = pk.1.into();
        u.pick_m.next = m(pk).into();
        u.pick_next.next = rng.gen_bool(0.6);
        u.pick_dest.next = rng.gen_range(0..16u64).into();
        u.send.next = m(one(&mut rng, 0.3)).into();
        u.ld_alloc.next = m(one(&mut rng, 0.2)).into();
        u.escape.next = m(one(&mut rng, 0.05)).into();
        u.rd_victim.next = rng.gen_range(0..8u64).into();
        u.rd_send.next = rng.gen_range(0..8u64).into();
    })
}

/// Export registration: the 8-slot state block, linted and co-simulated like the other leaf
/// blocks.
pub const EXPORT: BlockDef = BlockDef {
    name: "slot_state",
    top: false,
    domain: crate::export::ModelDomain::PkgCore,
    cosim_cycles: 4096,
    sets: &[ParamSet {
        module: "slot_state_s8",
        rust_type: "SlotState8Rtl",
        params: &[("slots", 8)],
        ecp5_clock_mhz: 100,
        build: || boxed(SlotState8Rtl::new(true)),
        recorder: Some(|cycles, seed| record_slot_state_8("slot_state_s8", cycles, seed)),
    }],
};
