//! The chiplet controller's Rule-4 load sequencer (`LoadSeqRtl<E>`): the CL's `load_seq`,
//! `load_next` and `own_left` — the experts pre-loaded to this chiplet, in arrival order,
//! each with the next micro-slice this chiplet loads itself.
//!
//! ```text
//!  push (expert, first k, step, m, granted) ──► entry wr (E positions, valid bits, no compaction)
//!  grant (expert) ──► the held entries of that expert become granted
//!  take, cap_full ──► scan in arrival order: first entry with k < m that is granted or, while
//!                     ungranted pre-loads leave room (cap_full = 0), any ──► found, expert, k
//!                     └─► its k += step; exhausted entries (k ≥ m) passed by the scan leave
//!  own_granted: some granted entry has own micro-slices left (the load-side escape's test)
//! ```
//!
//! This chiplet's share of an expert under Rule 4 is k ≡ p (mod n) — p its index in the
//! trajectory's ring, n the ring's size — so the controller pushes k = p and step = n and the
//! sequencer never divides: `own_left > 0` is `k < m`. Entries are never compacted: each
//! pre-load takes the next of E positions (an expert is pre-loaded at most once per layer), a
//! layer start (`clear`) empties the sequence, and a push past E positions is lost and flags
//! `overflow`. The CL's `load_idle_cap` is a pure speed cache and has no counterpart.
//!
//! Port coupling: `len` registered; `found`, `expert`, `k` comb in every input but `clear`;
//! `own_granted` comb in `grant*`, `push*` (not in `take`, `cap_full`: the controller's
//! escape reads it in the cycle the scan is not taken); `overflow` comb in `push`. The push
//! is visible to the scan of the same cycle (the CL pushes in stage A and loads in stage K).

use rust_hdl::prelude::*;

/// Load sequencer of `E` positions (1..=256; 16-bit expert ids).
#[derive(LogicBlock)]
pub struct LoadSeqRtl<const E: usize> {
    pub clock: Signal<In, Clock>,
    /// Synchronous reset: empty.
    pub reset: Signal<In, Bit>,
    /// Layer start: empty (as reset; the entry fields are not cleared, valid bits gate them).
    pub clear: Signal<In, Bit>,
    /// A grant: the held entries of `grant_expert` become granted.
    pub grant: Signal<In, Bit>,
    pub grant_expert: Signal<In, Bits<16>>,
    /// A pre-load: a new entry behind the held ones.
    pub push: Signal<In, Bit>,
    pub push_expert: Signal<In, Bits<16>>,
    /// This chiplet's first own micro-slice (p), the stride (n) and the count (m).
    pub push_k: Signal<In, Bits<17>>,
    pub push_step: Signal<In, Bits<5>>,
    pub push_m: Signal<In, Bits<16>>,
    /// The pushed expert is granted already.
    pub push_granted: Signal<In, Bit>,
    /// Ungranted pre-loads hold half the ring: only granted entries may issue.
    pub cap_full: Signal<In, Bit>,
    /// The DDR port takes its load from the sequence this cycle (scan, advance, drop).
    pub take: Signal<In, Bit>,
    /// The load of this cycle (with `take`): expert and micro-slice.
    pub found: Signal<Out, Bit>,
    pub expert: Signal<Out, Bits<16>>,
    pub k: Signal<Out, Bits<16>>,
    /// A granted entry (this cycle's push and grant included) has own micro-slices left.
    pub own_granted: Signal<Out, Bit>,
    /// Valid entries (registered).
    pub len: Signal<Out, Bits<16>>,
    /// The push found no free position: it is lost.
    pub overflow: Signal<Out, Bit>,

    // --- registers (by arrival position)
    ls_v: DFF<Bits<E>>,
    ls_g: DFF<Bits<E>>,
    ls_e: [DFF<Bits<16>>; E],
    ls_nk: [DFF<Bits<17>>; E],
    ls_m: [DFF<Bits<16>>; E],
    ls_step: [DFF<Bits<5>>; E],
    /// The write position as a thermometer: bit i set iff position i is taken (i < wr), all
    /// set when the E positions are used. Zero at power-up, as the binary pointer it
    /// replaces, so the write position's one-hot and the room test are a few gates (the
    /// binary `wr` took a 16-bit compare with E and a decode in front of the scan).
    wr_below: DFF<Bits<E>>,
    /// Per position: the entry is live, `k < m` (its `ls_nk` below its `ls_m`), kept beside
    /// `ls_nk` so the scan reads a register instead of sixteen 16-bit compares. Written with
    /// the entry (from the push inputs) and when the entry advances (from its `k + step`,
    /// formed from its registers before the pick); meaningful only with the valid bit.
    live_q: DFF<Bits<E>>,
    // --- combinational locals
    room: Signal<Local, Bit>,
    v_a: Signal<Local, Bits<E>>,
    g_a: Signal<Local, Bits<E>>,
    v_k: Signal<Local, Bits<E>>,
    le_e: Signal<Local, Bits<16>>,
    /// The picked entry's k (16 bits: a live k is below m).
    le_nk: Signal<Local, Bits<16>>,
    /// Entry j's liveness this cycle (`live_q`, or the push's).
    le_live: Signal<Local, Bit>,
    le_step: Signal<Local, Bits<5>>,
    /// Per entry: live (`k < m`), issuable (live and granted, or any while `!cap_full`),
    /// exhausted; the inclusive prefix ORs of `elig_b` (shift-OR steps of 1..128); the
    /// picked entry, one-hot (0 without `take` or an issuable entry).
    live_b: Signal<Local, Bits<E>>,
    /// The pushed entry's state from the push inputs alone: its position (one-hot, 0 without
    /// a push or room), live (`push_k < push_m`), its k after one advance and whether that is
    /// still below m; and `live_q`'s next value.
    p_at: Signal<Local, Bits<E>>,
    p_live: Signal<Local, Bit>,
    p_step17: Signal<Local, Bits<17>>,
    p_nk1: Signal<Local, Bits<17>>,
    p_live1: Signal<Local, Bit>,
    le_nk1: Signal<Local, Bits<17>>,
    le_live1: Signal<Local, Bit>,
    live_n: Signal<Local, Bits<E>>,
    elig_b: Signal<Local, Bits<E>>,
    exh_b: Signal<Local, Bits<E>>,
    pe: [Signal<Local, Bits<E>>; 8],
    /// `cap_full` comes late (the controller's ungranted count, after its eviction choice):
    /// the issuable set and its prefix OR are formed for both values side by side — every
    /// live entry (`live_b`, `pe`), the live granted ones (`elig_g`, `pg`) — and `cap_full`
    /// selects (`elig_b`, `pf`) in front of the pick.
    elig_g: Signal<Local, Bits<E>>,
    pg: [Signal<Local, Bits<E>>; 8],
    pf: Signal<Local, Bits<E>>,
    pick: Signal<Local, Bits<E>>,
    hit: Signal<Local, Bit>,
    cnt: Signal<Local, Bits<16>>,
    /// The last position alone (taken: no room).
    last_e: Constant<Bits<E>>,
    /// Sized constants (a Rust literal is a 32-bit Verilog constant: WIDTH): bit e alone (for
    /// the E-bit masks), the 17-bit weights 2^b that zero-extend the
    /// 5-bit step, zeros and one.
    unit: [Constant<Bits<E>>; E],
    bit17: [Constant<Bits<17>>; 5],
    zero_e: Constant<Bits<E>>,
    zero16: Constant<Bits<16>>,
    one16: Constant<Bits<16>>,
    zero17: Constant<Bits<17>>,
    le_step17: Signal<Local, Bits<17>>,
    wr_oh: Signal<Local, Bits<E>>,
}

impl<const E: usize> Default for LoadSeqRtl<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const E: usize> LoadSeqRtl<E> {
    pub fn new() -> Self {
        assert!((1..=256).contains(&E), "load sequence of {E} positions (1..=256)");
        Self {
            clock: Default::default(),
            reset: Default::default(),
            clear: Default::default(),
            grant: Default::default(),
            grant_expert: Default::default(),
            push: Default::default(),
            push_expert: Default::default(),
            push_k: Default::default(),
            push_step: Default::default(),
            push_m: Default::default(),
            push_granted: Default::default(),
            cap_full: Default::default(),
            take: Default::default(),
            found: Default::default(),
            expert: Default::default(),
            k: Default::default(),
            own_granted: Default::default(),
            len: Default::default(),
            overflow: Default::default(),
            ls_v: Default::default(),
            ls_g: Default::default(),
            ls_e: std::array::from_fn(|_| Default::default()),
            ls_nk: std::array::from_fn(|_| Default::default()),
            ls_m: std::array::from_fn(|_| Default::default()),
            ls_step: std::array::from_fn(|_| Default::default()),
            wr_below: Default::default(),
            live_q: Default::default(),
            room: Default::default(),
            v_a: Default::default(),
            g_a: Default::default(),
            v_k: Default::default(),
            le_e: Default::default(),
            le_nk: Default::default(),
            le_live: Default::default(),
            le_step: Default::default(),
            live_b: Default::default(),
            p_at: Default::default(),
            p_live: Default::default(),
            p_step17: Default::default(),
            p_nk1: Default::default(),
            p_live1: Default::default(),
            le_nk1: Default::default(),
            le_live1: Default::default(),
            live_n: Default::default(),
            elig_b: Default::default(),
            exh_b: Default::default(),
            pe: Default::default(),
            elig_g: Default::default(),
            pg: Default::default(),
            pf: Default::default(),
            pick: Default::default(),
            hit: Default::default(),
            cnt: Default::default(),
            last_e: Constant::new(Bits::<E>::default().replace_bit(E - 1, true)),
            unit: std::array::from_fn(|e| Constant::new(Bits::<E>::default().replace_bit(e, true))),
            bit17: std::array::from_fn(|b| Constant::new((1u64 << b).into())),
            zero_e: Constant::new(0u64.into()),
            zero16: Constant::new(0u64.into()),
            one16: Constant::new(1u64.into()),
            zero17: Constant::new(0u64.into()),
            le_step17: Default::default(),
            wr_oh: Default::default(),
        }
    }
}

impl<const E: usize> Logic for LoadSeqRtl<E> {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, ls_v, ls_g, wr_below, live_q);
        for e in 0..E {
            self.ls_e[e].clock.next = self.clock.val();
            self.ls_e[e].d.next = self.ls_e[e].q.val();
            self.ls_nk[e].clock.next = self.clock.val();
            self.ls_nk[e].d.next = self.ls_nk[e].q.val();
            self.ls_m[e].clock.next = self.clock.val();
            self.ls_m[e].d.next = self.ls_m[e].q.val();
            self.ls_step[e].clock.next = self.clock.val();
            self.ls_step[e].d.next = self.ls_step[e].q.val();
        }
        self.cnt.next = self.zero16.val();
        for e in 0..E {
            if self.ls_v.q.val().get_bit(e) {
                self.cnt.next = self.cnt.val() + self.one16.val();
            }
        }
        self.len.next = self.cnt.val();

        // ---- grant: the held entries of the expert (the push's own bit is `push_granted`)
        self.g_a.next = self.ls_g.q.val();
        if self.grant.val() {
            for e in 0..E {
                if self.ls_v.q.val().get_bit(e) & (self.ls_e[e].q.val() == self.grant_expert.val()) {
                    self.g_a.next = self.g_a.val() | self.unit[e].val();
                }
            }
        }
        // ---- push into position wr (a push past E positions is lost)
        self.room.next = !(self.wr_below.q.val() & self.last_e.val()).any();
        self.overflow.next = self.push.val() & !self.room.val();
        self.v_a.next = self.ls_v.q.val();
        // The one-hot of wr: the first position not taken (0 when all are).
        self.wr_oh.next = !self.wr_below.q.val() & ((self.wr_below.q.val() << 1) | self.unit[0].val());
        if self.push.val() {
            if self.room.val() {
                self.wr_below.d.next = (self.wr_below.q.val() << 1) | self.unit[0].val();
                // Bit wr of v_a set, of g_a set to push_granted (wr < E: room).
                self.v_a.next = self.ls_v.q.val() | self.wr_oh.val();
                if self.push_granted.val() {
                    self.g_a.next = self.g_a.val() | self.wr_oh.val();
                } else {
                    self.g_a.next = self.g_a.val() & !self.wr_oh.val();
                }
            }
            for e in 0..E {
                if self.wr_oh.val().get_bit(e) {
                    self.ls_e[e].d.next = self.push_expert.val();
                    self.ls_nk[e].d.next = self.push_k.val();
                    self.ls_m[e].d.next = self.push_m.val();
                    self.ls_step[e].d.next = self.push_step.val();
                }
            }
        }

        // ---- the scan: first issuable entry in arrival order. Flat: each entry's state
        // (live, issuable, exhausted) in parallel, the first issuable one isolated with the
        // inclusive prefix OR `pe` (`x & !(pe << 1)`, shift-OR steps, as the round-robin
        // arbiters), and an exhausted entry leaves when no issuable one is before it
        // (`!(pe << 1)`). It was a loop of E conditional updates, a priority chain E deep
        // (write pointer → look-through → `k < m` → the chain → `ls_nk`). Liveness is a
        // register (`live_q`) now, and the pushed entry's from the push inputs alone, so no
        // compare sits in front of the pick.
        // The pushed entry: k < m zero-extended (bit 16 clear and the low 16 bits below), and
        // the same test on its k after one advance (if the scan picks it this cycle).
        self.p_at.next = self.zero_e.val();
        if self.push.val() {
            self.p_at.next = self.wr_oh.val();
        }
        self.p_live.next =
            !self.push_k.val().get_bit(16) & (self.push_k.val().get_bits::<16>(0) < self.push_m.val());
        self.p_step17.next = self.zero17.val();
        for b in 0..5 {
            if self.push_step.val().get_bit(b) {
                self.p_step17.next = self.p_step17.val() | self.bit17[b].val();
            }
        }
        self.p_nk1.next = self.push_k.val() + self.p_step17.val();
        self.p_live1.next =
            !self.p_nk1.val().get_bit(16) & (self.p_nk1.val().get_bits::<16>(0) < self.push_m.val());
        self.live_b.next = self.zero_e.val();
        self.elig_g.next = self.zero_e.val();
        self.exh_b.next = self.zero_e.val();
        for j in 0..E {
            // Entry j as it stands this cycle (this cycle's push looked through).
            self.le_live.next = self.live_q.q.val().get_bit(j);
            if self.p_at.val().get_bit(j) {
                self.le_live.next = self.p_live.val();
            }
            if self.v_a.val().get_bit(j) {
                if self.le_live.val() {
                    self.live_b.next = self.live_b.val() | self.unit[j].val();
                    if self.g_a.val().get_bit(j) {
                        self.elig_g.next = self.elig_g.val() | self.unit[j].val();
                    }
                } else {
                    self.exh_b.next = self.exh_b.val() | self.unit[j].val();
                }
            }
        }
        self.own_granted.next = (self.live_b.val() & self.g_a.val()).any();
        self.pe[0].next = self.live_b.val() | (self.live_b.val() << 1);
        self.pe[1].next = self.pe[0].val() | (self.pe[0].val() << 2);
        self.pe[2].next = self.pe[1].val() | (self.pe[1].val() << 4);
        self.pe[3].next = self.pe[2].val() | (self.pe[2].val() << 8);
        self.pe[4].next = self.pe[3].val() | (self.pe[3].val() << 16);
        self.pe[5].next = self.pe[4].val() | (self.pe[4].val() << 32);
        self.pe[6].next = self.pe[5].val() | (self.pe[5].val() << 64);
        self.pe[7].next = self.pe[6].val() | (self.pe[6].val() << 128);
        self.pg[0].next = self.elig_g.val() | (self.elig_g.val() << 1);
        self.pg[1].next = self.pg[0].val() | (self.pg[0].val() << 2);
        self.pg[2].next = self.pg[1].val() | (self.pg[1].val() << 4);
        self.pg[3].next = self.pg[2].val() | (self.pg[2].val() << 8);
        self.pg[4].next = self.pg[3].val() | (self.pg[3].val() << 16);
        self.pg[5].next = self.pg[4].val() | (self.pg[4].val() << 32);
        self.pg[6].next = self.pg[5].val() | (self.pg[5].val() << 64);
        self.pg[7].next = self.pg[6].val() | (self.pg[6].val() << 128);
        // Issuable: live and granted, or any live entry while `!cap_full`.
        self.elig_b.next = self.live_b.val();
        self.pf.next = self.pe[7].val();
        if self.cap_full.val() {
            self.elig_b.next = self.elig_g.val();
            self.pf.next = self.pg[7].val();
        }
        self.v_k.next = self.v_a.val();
        self.pick.next = self.zero_e.val();
        self.hit.next = false;
        if self.take.val() {
            self.pick.next = self.elig_b.val() & !(self.pf.val() << 1);
            self.hit.next = self.elig_b.val().any();
            // Exhausted entries the scan passes (none issuable before them) leave.
            self.v_k.next = self.v_a.val() & !(self.exh_b.val() & !(self.pf.val() << 1));
        }
        // The picked entry (one-hot): its expert and micro-slice out, its k advanced.
        // The advanced k and its liveness are formed per entry before the pick (from the
        // entry's registers, or the push inputs for the pushed entry), which only selects.
        self.expert.next = self.zero16.val();
        self.k.next = self.zero16.val();
        self.live_n.next = self.live_q.q.val();
        for j in 0..E {
            self.le_e.next = self.ls_e[j].q.val();
            self.le_nk.next = self.ls_nk[j].q.val().get_bits::<16>(0);
            self.le_step.next = self.ls_step[j].q.val();
            // le_step zero-extended to 17 bits, bit by bit (wires).
            self.le_step17.next = self.zero17.val();
            for b in 0..5 {
                if self.le_step.val().get_bit(b) {
                    self.le_step17.next = self.le_step17.val() | self.bit17[b].val();
                }
            }
            self.le_nk1.next = self.ls_nk[j].q.val() + self.le_step17.val();
            self.le_live1.next = !self.le_nk1.val().get_bit(16)
                & (self.le_nk1.val().get_bits::<16>(0) < self.ls_m[j].q.val());
            if self.p_at.val().get_bit(j) {
                self.le_e.next = self.push_expert.val();
                self.le_nk.next = self.push_k.val().get_bits::<16>(0);
                self.le_nk1.next = self.p_nk1.val();
                self.le_live1.next = self.p_live1.val();
                if self.p_live.val() {
                    self.live_n.next = self.live_n.val() | self.unit[j].val();
                } else {
                    self.live_n.next = self.live_n.val() & !self.unit[j].val();
                }
            }
            if self.pick.val().get_bit(j) {
                self.expert.next = self.expert.val() | self.le_e.val();
                self.k.next = self.k.val() | self.le_nk.val();
                self.ls_nk[j].d.next = self.le_nk1.val();
                if self.le_live1.val() {
                    self.live_n.next = self.live_n.val() | self.unit[j].val();
                } else {
                    self.live_n.next = self.live_n.val() & !self.unit[j].val();
                }
            }
        }
        self.live_q.d.next = self.live_n.val();
        self.found.next = self.hit.val();
        self.ls_v.d.next = self.v_k.val();
        self.ls_g.d.next = self.g_a.val();
        if self.clear.val() {
            self.ls_v.d.next = self.zero_e.val();
            self.ls_g.d.next = self.zero_e.val();
            self.wr_below.d.next = self.zero_e.val();
        }
        if self.reset.val() {
            self.ls_v.d.next = self.zero_e.val();
            self.ls_g.d.next = self.zero_e.val();
            self.wr_below.d.next = self.zero_e.val();
        }
    }
}

// ---------------------------------------------------------------- export

/// The exported size: the standard chiplet's sequence (`chiplet_ctrl_s8_e16`: E = 16).
pub type LoadSeq16Rtl = LoadSeqRtl<16>;

/// Co-sim recorder: reset in cycle 0, a clear every 500 cycles, then random grants and pushes
/// (an expert pushed at most once per layer, as the package guarantees, with m 0..12, k 0..4,
/// step 1..4), random `cap_full` and `take`. Past 16 pushes in a layer the push is lost
/// (`overflow`), which the recorder also reaches.
pub fn record_load_seq_16(module: &str, cycles: usize, seed: u64) -> Result<crate::cosim::PortTrace, crate::RtlError> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    // (reset, clear, grant, grant_expert, push, (expert, k, step, m, granted), cap_full, take)
    type Row = (bool, bool, bool, u64, bool, (u64, u64, u64, u64, bool), bool, bool);
    let mut pushed = 0u32;
    let stim: Vec<Row> = (0..cycles)
        .map(|c| {
            let clear = c % 500 == 1;
            if clear {
                pushed = 0;
            }
            let grant = rng.gen_bool(0.1);
            let push = !grant && rng.gen_bool(0.035);
            let mut e = rng.gen_range(0..16u64);
            if push {
                // A fresh expert while any is left (past 16: a repeated one, lost anyway).
                if pushed != 0xffff {
                    while pushed >> e & 1 == 1 {
                        e = rng.gen_range(0..16u64);
                    }
                }
                pushed |= 1 << e;
            }
            let tag = (e, rng.gen_range(0..4u64), rng.gen_range(1..5u64), rng.gen_range(0..12u64), rng.gen_bool(0.2));
            (c == 0, clear, grant, rng.gen_range(0..16u64), push, tag, rng.gen_bool(0.3), rng.gen_bool(0.6))
        })
        .collect();
    crate::cosim::record(module, LoadSeq16Rtl::new(), cycles, |u| &mut u.clock, |c, u| {
        let (reset, clear, grant, ge, push, (e, k, step, m, g), cap_full, take) = stim[c];
        u.reset.next = reset;
        u.clear.next = clear;
        u.grant.next = grant;
        u.grant_expert.next = ge.into();
        u.push.next = push;
        u.push_expert.next = e.into();
        u.push_k.next = k.into();
        u.push_step.next = step.into();
        u.push_m.next = m.into();
        u.push_granted.next = g;
        u.cap_full.next = cap_full;
        u.take.next = take;
    })
}

/// Export registration: linted and co-simulated like the other leaf blocks.
pub const EXPORT: crate::export::BlockDef = crate::export::BlockDef {
    name: "load_seq",
    top: false,
    domain: crate::export::ModelDomain::PkgCore,
    cosim_cycles: 4096,
    sets: &[crate::export::ParamSet {
        module: "load_seq_e16",
        rust_type: "LoadSeq16Rtl",
        params: &[("experts", 16)],
        // ECP5-85F: 85.1 MHz at seed 1 (docs/rtl.md, "Timing closure at the prototype clocks").
        ecp5_clock_mhz: 80,
        build: || crate::export::boxed(LoadSeq16Rtl::new()),
        recorder: Some(|cycles, seed| record_load_seq_16("load_seq_e16", cycles, seed)),
    }],
};
