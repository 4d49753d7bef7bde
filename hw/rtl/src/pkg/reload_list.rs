//! The chiplet controller's reload list (`ReloadListRtl<Q, E>`): the CL's `reload_q`, the
//! micro-slices this chiplet must load again from DDR (a hand-off from the previous station,
//! a slice evicted to let a D2D arrival in, a pre-load dropped by the load-side escape), in
//! arrival order; Rule 4 serves the first one whose expert is granted.
//!
//! ```text
//!  held entries ◄─ hand-off (1st) ◄─ evicted slice (2nd)        list as the DDR stage sees it
//!  granted (E bits) ──► first entry whose expert is granted ──► found, tag (with take: removed)
//!                   └─► any_granted: some entry is (the escape's test)
//!  removal: entries behind it move up one;  then the escape's slice (3rd) appends behind
//! ```
//!
//! A compacting shift list of Q tags: the removal is at any position (the first granted
//! entry), so neither a circular FIFO (`DoneFifoRtl`) nor the look-through FIFO
//! (`TagFifoRtl`, front removal only) fits. The two appends before the removal are visible to
//! the search of the same cycle (the CL pushes them in stages C and H, before the loads of
//! stage K); the escape's append comes after it (stage L). An append past Q entries is lost
//! and flags `overflow`.
//!
//! Port coupling: `len` registered; `found`, `expert`, `k`, `loader`, `any_granted` comb in
//! `hand*`, `evict*`, `granted` (and `found` in `take`); `overflow` comb in every input but
//! `reset`.

use rust_hdl::prelude::*;

/// Reload list of `Q` entries (1..=64) of (expert, k, loader), `E` experts (1..=256).
#[derive(LogicBlock)]
pub struct ReloadListRtl<const Q: usize, const E: usize> {
    pub clock: Signal<In, Clock>,
    /// Synchronous reset: empty.
    pub reset: Signal<In, Bit>,
    /// A hand-off received: appended first.
    pub hand_valid: Signal<In, Bit>,
    pub hand_expert: Signal<In, Bits<16>>,
    pub hand_k: Signal<In, Bits<16>>,
    pub hand_loader: Signal<In, Bits<4>>,
    /// A slice evicted for a D2D arrival: appended behind the hand-off.
    pub evict_valid: Signal<In, Bit>,
    pub evict_expert: Signal<In, Bits<16>>,
    pub evict_k: Signal<In, Bits<16>>,
    pub evict_loader: Signal<In, Bits<4>>,
    /// Granted experts.
    pub granted: Signal<In, Bits<E>>,
    /// The DDR port may load (a free slot beyond the reserve): the found entry is removed.
    pub take: Signal<In, Bit>,
    /// The load-side escape's dropped pre-load: appended after the removal.
    pub esc_valid: Signal<In, Bit>,
    pub esc_expert: Signal<In, Bits<16>>,
    pub esc_k: Signal<In, Bits<16>>,
    pub esc_loader: Signal<In, Bits<4>>,
    /// The reload of this cycle (with `take`): the first entry of a granted expert.
    pub found: Signal<Out, Bit>,
    /// That entry (the first granted one, also without `take`).
    pub expert: Signal<Out, Bits<16>>,
    pub k: Signal<Out, Bits<16>>,
    pub loader: Signal<Out, Bits<4>>,
    /// Some entry (the two appends included) is of a granted expert.
    pub any_granted: Signal<Out, Bit>,
    /// Entries held (registered).
    pub len: Signal<Out, Bits<8>>,
    /// More than Q entries after the edge: an append was lost.
    pub overflow: Signal<Out, Bit>,

    // --- registers
    rq_e: [DFF<Bits<16>>; Q],
    rq_k: [DFF<Bits<16>>; Q],
    rq_ld: [DFF<Bits<4>>; Q],
    rq_n: DFF<Bits<8>>,
    // --- combinational locals
    /// Entries with the two appends, and after the removal and the escape's append.
    n1: Signal<Local, Bits<8>>,
    n2: Signal<Local, Bits<8>>,
    hit: Signal<Local, Bit>,
    /// Flat search (as the load sequencer's scan): per position, the list's element is there
    /// and of a granted expert (`gb`); the inclusive prefix OR of `gb` (shift-OR steps of
    /// 1..32); the first such position, one-hot (`pick`); the positions at and behind the
    /// removed entry (`rm`: `pe` with `found`, else none), which take element j + 1. It was a
    /// priority chain Q deep with a position counter (`istar`) compared at every position.
    gb: Signal<Local, Bits<Q>>,
    pe: [Signal<Local, Bits<Q>>; 6],
    pick: Signal<Local, Bits<Q>>,
    rm: Signal<Local, Bits<Q>>,
    unit: [Constant<Bits<Q>>; Q],
    zero_q: Constant<Bits<Q>>,
    /// The list's element j as the search sees it (held entry, hand-off or evicted slice),
    /// formed once per position and read by the grant bits, the output select and the
    /// edge (element j, or j + 1 behind the removal).
    el_e: [Signal<Local, Bits<16>>; Q],
    el_k: [Signal<Local, Bits<16>>; Q],
    el_ld: [Signal<Local, Bits<4>>; Q],
    q_depth: Constant<Bits<8>>,
}

impl<const Q: usize, const E: usize> Default for ReloadListRtl<Q, E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const Q: usize, const E: usize> ReloadListRtl<Q, E> {
    pub fn new() -> Self {
        assert!((1..=64).contains(&Q) && (1..=256).contains(&E), "reload list Q {Q}, E {E}");
        Self {
            clock: Default::default(),
            reset: Default::default(),
            hand_valid: Default::default(),
            hand_expert: Default::default(),
            hand_k: Default::default(),
            hand_loader: Default::default(),
            evict_valid: Default::default(),
            evict_expert: Default::default(),
            evict_k: Default::default(),
            evict_loader: Default::default(),
            granted: Default::default(),
            take: Default::default(),
            esc_valid: Default::default(),
            esc_expert: Default::default(),
            esc_k: Default::default(),
            esc_loader: Default::default(),
            found: Default::default(),
            expert: Default::default(),
            k: Default::default(),
            loader: Default::default(),
            any_granted: Default::default(),
            len: Default::default(),
            overflow: Default::default(),
            rq_e: std::array::from_fn(|_| Default::default()),
            rq_k: std::array::from_fn(|_| Default::default()),
            rq_ld: std::array::from_fn(|_| Default::default()),
            rq_n: Default::default(),
            n1: Default::default(),
            n2: Default::default(),
            hit: Default::default(),
            gb: Default::default(),
            pe: Default::default(),
            pick: Default::default(),
            rm: Default::default(),
            unit: std::array::from_fn(|j| Constant::new(Bits::<Q>::default().replace_bit(j, true))),
            zero_q: Constant::new(0u64.into()),
            el_e: std::array::from_fn(|_| Default::default()),
            el_k: std::array::from_fn(|_| Default::default()),
            el_ld: std::array::from_fn(|_| Default::default()),
            q_depth: Constant::new((Q as u64).into()),
        }
    }
}

impl<const Q: usize, const E: usize> Logic for ReloadListRtl<Q, E> {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, rq_n);
        for j in 0..Q {
            self.rq_e[j].clock.next = self.clock.val();
            self.rq_e[j].d.next = self.rq_e[j].q.val();
            self.rq_k[j].clock.next = self.clock.val();
            self.rq_k[j].d.next = self.rq_k[j].q.val();
            self.rq_ld[j].clock.next = self.clock.val();
            self.rq_ld[j].d.next = self.rq_ld[j].q.val();
        }
        self.len.next = self.rq_n.q.val();
        // ---- the list as the search sees it: held entries, the hand-off, the evicted slice
        self.n1.next = self.rq_n.q.val();
        if self.hand_valid.val() {
            self.n1.next = self.n1.val() + 1;
        }
        if self.evict_valid.val() {
            self.n1.next = self.n1.val() + 1;
        }
        self.gb.next = self.zero_q.val();
        for j in 0..Q {
            if self.rq_n.q.val().index() > j {
                self.el_e[j].next = self.rq_e[j].q.val();
                self.el_k[j].next = self.rq_k[j].q.val();
                self.el_ld[j].next = self.rq_ld[j].q.val();
            } else if (self.rq_n.q.val().index() == j) & self.hand_valid.val() {
                self.el_e[j].next = self.hand_expert.val();
                self.el_k[j].next = self.hand_k.val();
                self.el_ld[j].next = self.hand_loader.val();
            } else {
                self.el_e[j].next = self.evict_expert.val();
                self.el_k[j].next = self.evict_k.val();
                self.el_ld[j].next = self.evict_loader.val();
            }
            if (self.n1.val().index() > j) & self.granted.val().get_bit(self.el_e[j].val().index()) {
                self.gb.next = self.gb.val() | self.unit[j].val();
            }
        }
        self.hit.next = self.gb.val().any();
        self.any_granted.next = self.hit.val();
        self.pe[0].next = self.gb.val() | (self.gb.val() << 1);
        self.pe[1].next = self.pe[0].val() | (self.pe[0].val() << 2);
        self.pe[2].next = self.pe[1].val() | (self.pe[1].val() << 4);
        self.pe[3].next = self.pe[2].val() | (self.pe[2].val() << 8);
        self.pe[4].next = self.pe[3].val() | (self.pe[3].val() << 16);
        self.pe[5].next = self.pe[4].val() | (self.pe[4].val() << 32);
        self.pick.next = self.gb.val() & !(self.pe[5].val() << 1);
        // The picked element out (AND-OR over the one-hot; 0 without a hit).
        self.expert.next = 0.into();
        self.k.next = 0.into();
        self.loader.next = 0.into();
        for j in 0..Q {
            if self.pick.val().get_bit(j) {
                self.expert.next = self.expert.val() | self.el_e[j].val();
                self.k.next = self.k.val() | self.el_k[j].val();
                self.loader.next = self.el_ld[j].val() | self.loader.val();
            }
        }
        self.found.next = self.hit.val() & self.take.val();
        self.rm.next = self.zero_q.val();
        if self.found.val() {
            self.rm.next = self.pe[5].val();
        }

        // ---- the edge: entries before the removed one (`!rm`) take the list's element j,
        // those from it on (`rm`) element j + 1 (the removal), then the escape's slice lands
        // at the end
        for j in 0..Q {
            if !self.rm.val().get_bit(j) {
                self.rq_e[j].d.next = self.el_e[j].val();
                self.rq_k[j].d.next = self.el_k[j].val();
                self.rq_ld[j].d.next = self.el_ld[j].val();
            }
        }
        for j in 0..(Q - 1) {
            if self.rm.val().get_bit(j) {
                self.rq_e[j].d.next = self.el_e[j + 1].val();
                self.rq_k[j].d.next = self.el_k[j + 1].val();
                self.rq_ld[j].d.next = self.el_ld[j + 1].val();
            }
        }
        for j in (Q - 1)..Q {
            // The last position takes element Q when an entry is removed: an append behind a
            // full list (the inline list this block replaced left the old entry there, losing
            // the append without an overflow).
            if self.rm.val().get_bit(j) {
                if (self.rq_n.q.val().index() == (j + 1)) & self.hand_valid.val() {
                    self.rq_e[j].d.next = self.hand_expert.val();
                    self.rq_k[j].d.next = self.hand_k.val();
                    self.rq_ld[j].d.next = self.hand_loader.val();
                } else {
                    self.rq_e[j].d.next = self.evict_expert.val();
                    self.rq_k[j].d.next = self.evict_k.val();
                    self.rq_ld[j].d.next = self.evict_loader.val();
                }
            }
        }
        self.n2.next = self.n1.val();
        if self.found.val() {
            self.n2.next = self.n1.val() - 1;
        }
        if self.esc_valid.val() {
            for j in 0..Q {
                if self.n2.val().index() == j {
                    self.rq_e[j].d.next = self.esc_expert.val();
                    self.rq_k[j].d.next = self.esc_k.val();
                    self.rq_ld[j].d.next = self.esc_loader.val();
                }
            }
            self.n2.next = self.n2.val() + 1;
        }
        self.rq_n.d.next = self.n2.val();
        self.overflow.next = self.n2.val() > self.q_depth.val();
        if self.reset.val() {
            self.rq_n.d.next = 0.into();
        }
    }
}

// ---------------------------------------------------------------- export

/// The exported size: the standard chiplet's list (`chiplet_ctrl_s8_e16`: Q = 16, E = 16).
pub type ReloadList16Rtl = ReloadListRtl<16, 16>;

/// Co-sim recorder: reset in cycle 0, then random appends on the three ports (hand-off p 0.2,
/// eviction p 0.2, escape p 0.15), random `take` and granted sets (sparse, so entries wait
/// and the removal lands anywhere in the list). The appends stop while the list holds 13 or
/// more entries, so it never overflows (past a lost append its contents are not defined on;
/// the unit test checks the flag).
pub fn record_reload_list_16(module: &str, cycles: usize, seed: u64) -> Result<crate::cosim::PortTrace, crate::RtlError> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    type Tag = (u64, u64, u64);
    // (reset, hand, evict, esc, take, granted), each append (valid, tag)
    type Row = (bool, (bool, Tag), (bool, Tag), (bool, Tag), bool, u64);
    let mut held: Vec<u64> = Vec::new();
    let stim: Vec<Row> = (0..cycles)
        .map(|c| {
            let tag = |rng: &mut rand_xoshiro::Xoshiro256PlusPlus| (rng.gen_range(0..16u64), rng.gen_range(0..0x10000u64), rng.gen_range(0..16u64));
            let room = held.len() < 13;
            let hand = (room && rng.gen_bool(0.2), tag(&mut rng));
            let evict = (room && rng.gen_bool(0.2), tag(&mut rng));
            let esc = (room && rng.gen_bool(0.15), tag(&mut rng));
            let granted = rng.gen_range(0..0x10000u64) & rng.gen_range(0..0x10000u64) & rng.gen_range(0..0x10000u64);
            let take = rng.gen_bool(0.5);
            if c == 0 {
                held.clear();
                return (true, hand, evict, esc, take, granted);
            }
            // The list's length after the edge (the expert ids decide the removal).
            for a in [&hand, &evict] {
                if a.0 {
                    held.push(a.1 .0);
                }
            }
            if take {
                if let Some(p) = held.iter().position(|&e| granted >> e & 1 == 1) {
                    held.remove(p);
                }
            }
            if esc.0 {
                held.push(esc.1 .0);
            }
            (false, hand, evict, esc, take, granted)
        })
        .collect();
    crate::cosim::record(module, ReloadList16Rtl::new(), cycles, |u| &mut u.clock, |c, u| {
        let (reset, (hv, h), (ev, v), (sv, s), take, granted) = stim[c];
        u.reset.next = reset;
        u.hand_valid.next = hv;
        u.hand_expert.next = h.0.into();
        u.hand_k.next = h.1.into();
        u.hand_loader.next = h.2.into();
        u.evict_valid.next = ev;
        u.evict_expert.next = v.0.into();
        u.evict_k.next = v.1.into();
        u.evict_loader.next = v.2.into();
        u.esc_valid.next = sv;
        u.esc_expert.next = s.0.into();
        u.esc_k.next = s.1.into();
        u.esc_loader.next = s.2.into();
        u.take.next = take;
        u.granted.next = granted.into();
    })
}

/// Export registration: linted and co-simulated like the other leaf blocks.
pub const EXPORT: crate::export::BlockDef = crate::export::BlockDef {
    name: "reload_list",
    top: false,
    domain: crate::export::ModelDomain::PkgCore,
    cosim_cycles: 4096,
    sets: &[crate::export::ParamSet {
        module: "reload_list_q16_e16",
        rust_type: "ReloadList16Rtl",
        params: &[("depth", 16), ("experts", 16)],
        // ECP5-85F: 45.2 MHz at seed 1 (docs/rtl.md, "Timing closure at the prototype clocks").
        ecp5_clock_mhz: 40,
        build: || crate::export::boxed(ReloadList16Rtl::new()),
        recorder: Some(|cycles, seed| record_reload_list_16("reload_list_q16_e16", cycles, seed)),
    }],
};
