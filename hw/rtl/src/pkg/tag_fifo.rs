//! The chiplet controller's Rule-5 tag FIFO (`TagFifoRtl<Q, E>`): the CL's `assigned_q`, the
//! micro-slices the IO-die's Rule-5 arbiter assigned to this chiplet to load, in arrival
//! order.
//!
//! ```text
//!  push (tag) ──► entry len (behind the held ones) ──► front (look-through when empty)
//!  pop ──► shift by one (entry j takes j + 1, the push lands at len - 1)
//!  granted (E bits) ──► ungranted count of the entries held after the edge (Rule-5 report)
//! ```
//!
//! A shift register of Q tags rather than a circular buffer because the Rule-5 free-slot
//! report counts every held entry whose expert is not granted yet (one `granted[expert]`
//! lookup per entry, all entries every cycle), and the controller's DDR-load stage reads the
//! front combinationally including this cycle's push (the CL pushes before it pops). Why not
//! `DoneFifoRtl`: that FIFO holds N-bit done masks with stamps and merges into its newest
//! entry when full; this one holds tags, never merges (overflow is an error) and needs the
//! per-entry expert view.
//!
//! Port coupling: `len` registered; `len_in`, `front_*` comb in `push*`; `len_next`,
//! `ungranted`, `overflow` comb in `push`, `pop`, `granted`. `pop` must only be set when
//! `len_in` > 0 (the controller's k2 includes it).

use rust_hdl::prelude::*;

/// Rule-5 tag FIFO: `Q` entries (1..=64) of (expert, k, loader), `E` experts (1..=256).
#[derive(LogicBlock)]
pub struct TagFifoRtl<const Q: usize, const E: usize> {
    pub clock: Signal<In, Clock>,
    /// Synchronous reset: empty.
    pub reset: Signal<In, Bit>,
    /// This cycle's assignment (pushed behind the held entries).
    pub push: Signal<In, Bit>,
    pub push_expert: Signal<In, Bits<16>>,
    pub push_k: Signal<In, Bits<16>>,
    pub push_loader: Signal<In, Bits<4>>,
    /// Remove the front (after the push: the front may be this cycle's push).
    pub pop: Signal<In, Bit>,
    /// Granted experts (for the ungranted count).
    pub granted: Signal<In, Bits<E>>,
    /// Entries held (registered).
    pub len: Signal<Out, Bits<8>>,
    /// Entries with this cycle's push.
    pub len_in: Signal<Out, Bits<8>>,
    /// The front entry, this cycle's push when empty.
    pub front_expert: Signal<Out, Bits<16>>,
    pub front_k: Signal<Out, Bits<16>>,
    pub front_loader: Signal<Out, Bits<4>>,
    /// Entries after the edge (push and pop applied).
    pub len_next: Signal<Out, Bits<8>>,
    /// Entries held after the edge whose expert is not granted.
    pub ungranted: Signal<Out, Bits<8>>,
    /// The push found no room (more than Q entries with it): it is lost.
    pub overflow: Signal<Out, Bit>,

    aq_e: [DFF<Bits<16>>; Q],
    aq_k: [DFF<Bits<16>>; Q],
    aq_ld: [DFF<Bits<4>>; Q],
    aq_n: DFF<Bits<8>>,
    el_e: Signal<Local, Bits<16>>,
    el_k: Signal<Local, Bits<16>>,
    el_ld: Signal<Local, Bits<4>>,
    q_depth: Constant<Bits<8>>,
}

impl<const Q: usize, const E: usize> Default for TagFifoRtl<Q, E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const Q: usize, const E: usize> TagFifoRtl<Q, E> {
    pub fn new() -> Self {
        assert!((1..=64).contains(&Q) && (1..=256).contains(&E), "tag FIFO Q {Q}, E {E}");
        Self {
            clock: Default::default(),
            reset: Default::default(),
            push: Default::default(),
            push_expert: Default::default(),
            push_k: Default::default(),
            push_loader: Default::default(),
            pop: Default::default(),
            granted: Default::default(),
            len: Default::default(),
            len_in: Default::default(),
            front_expert: Default::default(),
            front_k: Default::default(),
            front_loader: Default::default(),
            len_next: Default::default(),
            ungranted: Default::default(),
            overflow: Default::default(),
            aq_e: std::array::from_fn(|_| Default::default()),
            aq_k: std::array::from_fn(|_| Default::default()),
            aq_ld: std::array::from_fn(|_| Default::default()),
            aq_n: Default::default(),
            el_e: Default::default(),
            el_k: Default::default(),
            el_ld: Default::default(),
            q_depth: Constant::new((Q as u64).into()),
        }
    }
}

impl<const Q: usize, const E: usize> Logic for TagFifoRtl<Q, E> {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, aq_n);
        for j in 0..Q {
            self.aq_e[j].clock.next = self.clock.val();
            self.aq_e[j].d.next = self.aq_e[j].q.val();
            self.aq_k[j].clock.next = self.clock.val();
            self.aq_k[j].d.next = self.aq_k[j].q.val();
            self.aq_ld[j].clock.next = self.clock.val();
            self.aq_ld[j].d.next = self.aq_ld[j].q.val();
        }
        self.len.next = self.aq_n.q.val();
        self.len_in.next = self.aq_n.q.val();
        if self.push.val() {
            self.len_in.next = self.aq_n.q.val() + 1;
        }
        self.front_expert.next = self.aq_e[0].q.val();
        self.front_k.next = self.aq_k[0].q.val();
        self.front_loader.next = self.aq_ld[0].q.val();
        if !self.aq_n.q.val().any() {
            self.front_expert.next = self.push_expert.val();
            self.front_k.next = self.push_k.val();
            self.front_loader.next = self.push_loader.val();
        }
        self.len_next.next = self.len_in.val();
        if self.pop.val() {
            self.len_next.next = self.len_in.val() - 1;
        }
        self.ungranted.next = 0.into();
        for j in 0..Q {
            // Without a pop, entry j stays (the push lands behind the held entries).
            self.el_e.next = self.aq_e[j].q.val();
            if self.aq_n.q.val().index() == j {
                self.el_e.next = self.push_expert.val();
                if !self.pop.val() & self.push.val() {
                    self.aq_e[j].d.next = self.push_expert.val();
                    self.aq_k[j].d.next = self.push_k.val();
                    self.aq_ld[j].d.next = self.push_loader.val();
                }
            }
            if !self.pop.val() & (self.len_next.val().index() > j) & !self.granted.val().get_bit(self.el_e.val().index()) {
                self.ungranted.next = self.ungranted.val() + 1;
            }
        }
        for j in 0..(Q - 1) {
            // With a pop, entry j takes entry j + 1.
            self.el_e.next = self.aq_e[j + 1].q.val();
            self.el_k.next = self.aq_k[j + 1].q.val();
            self.el_ld.next = self.aq_ld[j + 1].q.val();
            if self.aq_n.q.val().index() == (j + 1) {
                self.el_e.next = self.push_expert.val();
                self.el_k.next = self.push_k.val();
                self.el_ld.next = self.push_loader.val();
            }
            if self.pop.val() {
                self.aq_e[j].d.next = self.el_e.val();
                self.aq_k[j].d.next = self.el_k.val();
                self.aq_ld[j].d.next = self.el_ld.val();
                if (self.len_next.val().index() > j) & !self.granted.val().get_bit(self.el_e.val().index()) {
                    self.ungranted.next = self.ungranted.val() + 1;
                }
            }
        }
        self.aq_n.d.next = self.len_next.val();
        // A push with no room is lost, popping or not (the inline FIFO this block replaced
        // flagged only `len_next` > Q, so a push into a full FIFO in a popping cycle was lost
        // silently).
        self.overflow.next = self.len_in.val() > self.q_depth.val();
        if self.reset.val() {
            self.aq_n.d.next = 0.into();
        }
    }
}

// ---------------------------------------------------------------- export

/// The exported size: the standard chiplet's FIFO (`chiplet_ctrl_s8_e16`: Q = 16, E = 16).
pub type TagFifo16Rtl = TagFifoRtl<16, 16>;

/// Co-sim recorder: reset in cycle 0, then random pushes (p 0.5), pops only when the FIFO
/// holds an entry or takes one this cycle (p 0.45, as the controller's k2) and random granted
/// sets; the FIFO is emptied by pops alone when it is one entry from full, so it never
/// overflows (past a lost push its state is not defined on; the unit test checks the flag).
pub fn record_tag_fifo_16(module: &str, cycles: usize, seed: u64) -> Result<crate::cosim::PortTrace, crate::RtlError> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut len = 0usize;
    let mut draining = false;
    // (reset, push, tag, pop, granted) per cycle.
    let stim: Vec<(bool, bool, (u64, u64, u64), bool, u64)> = (0..cycles)
        .map(|c| {
            let tag = (rng.gen_range(0..16u64), rng.gen_range(0..0x10000u64), rng.gen_range(0..16u64));
            let granted = rng.gen_range(0..0x10000u64);
            if c == 0 {
                return (true, false, tag, false, granted);
            }
            if len >= 15 {
                draining = true;
            } else if len == 0 {
                draining = false;
            }
            let push = !draining && rng.gen_bool(0.5);
            let pop = (len + push as usize) > 0 && (draining || rng.gen_bool(0.45));
            len = len + push as usize - pop as usize;
            (false, push, tag, pop, granted)
        })
        .collect();
    crate::cosim::record(module, TagFifo16Rtl::new(), cycles, |u| &mut u.clock, |c, u| {
        let (reset, push, (e, k, l), pop, granted) = stim[c];
        u.reset.next = reset;
        u.push.next = push;
        u.push_expert.next = e.into();
        u.push_k.next = k.into();
        u.push_loader.next = l.into();
        u.pop.next = pop;
        u.granted.next = granted.into();
    })
}

/// Export registration: linted and co-simulated like the other leaf blocks.
pub const EXPORT: crate::export::BlockDef = crate::export::BlockDef {
    name: "tag_fifo",
    top: false,
    domain: crate::export::ModelDomain::PkgCore,
    cosim_cycles: 4096,
    sets: &[crate::export::ParamSet {
        module: "tag_fifo_q16_e16",
        rust_type: "TagFifo16Rtl",
        params: &[("depth", 16), ("experts", 16)],
        ecp5_clock_mhz: 100,
        build: || crate::export::boxed(TagFifo16Rtl::new()),
        recorder: Some(|cycles, seed| record_tag_fifo_16("tag_fifo_q16_e16", cycles, seed)),
    }],
};
