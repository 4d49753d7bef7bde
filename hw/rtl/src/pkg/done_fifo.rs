//! Done FIFO of the IO-die scheduler (RTL twin of the CL's `done_fifo`): done masks that
//! arrived while the matcher was busy, each with its arrival stamp, released one at a time
//! in arrival order.
//!
//! A push into a full FIFO ORs the mask into the newest entry and moves that entry's stamp to
//! the new arrival (`merged` pulses; the CL counts `done_fifo_merges`). `clear` (a new layer)
//! empties the FIFO before a push of the same edge. Circular buffer of `D` entries with
//! read/write pointers and an occupancy counter.

use rust_hdl::prelude::*;

/// Done FIFO of `D` entries (1..=255) of an `N`-bit mask and a 32-bit arrival stamp.
///
/// Port coupling: `front_*`, `occ`, `full`: registered; `push`, `pop`, `clear`: sampled at
/// the rising edge (`pop` of an empty FIFO is ignored).
#[derive(LogicBlock)]
pub struct DoneFifoRtl<const N: usize, const D: usize> {
    pub clock: Signal<In, Clock>,
    pub clear: Signal<In, Bit>,
    pub push: Signal<In, Bit>,
    pub push_mask: Signal<In, Bits<N>>,
    pub push_at: Signal<In, Bits<32>>,
    pub pop: Signal<In, Bit>,
    pub front_mask: Signal<Out, Bits<N>>,
    pub front_at: Signal<Out, Bits<32>>,
    pub occ: Signal<Out, Bits<9>>,
    pub full: Signal<Out, Bit>,
    mask: [DFF<Bits<N>>; D],
    at: [DFF<Bits<32>>; D],
    rd: DFF<Bits<8>>,
    wr: DFF<Bits<8>>,
    cnt: DFF<Bits<9>>,
    /// Index of the newest entry (wr − 1, wrapping).
    back: Signal<Local, Bits<8>>,
    /// Pointers after this edge's pop (rd) / push (wr), before a clear.
    do_pop: Signal<Local, Bit>,
    do_push: Signal<Local, Bit>,
    d_last: Constant<Bits<8>>,
    depth: Constant<Bits<9>>,
}

impl<const N: usize, const D: usize> DoneFifoRtl<N, D> {
    pub fn new() -> Self {
        assert!((1..=255).contains(&D), "done FIFO depth {D} outside 1..=255");
        assert!((1..=16).contains(&N), "done mask width {N} outside 1..=16");
        Self {
            clock: Default::default(),
            clear: Default::default(),
            push: Default::default(),
            push_mask: Default::default(),
            push_at: Default::default(),
            pop: Default::default(),
            front_mask: Default::default(),
            front_at: Default::default(),
            occ: Default::default(),
            full: Default::default(),
            mask: std::array::from_fn(|_| Default::default()),
            at: std::array::from_fn(|_| Default::default()),
            rd: Default::default(),
            wr: Default::default(),
            cnt: Default::default(),
            back: Default::default(),
            do_pop: Default::default(),
            do_push: Default::default(),
            d_last: Constant::new(((D - 1) as u64).into()),
            depth: Constant::new((D as u64).into()),
        }
    }
}

impl<const N: usize, const D: usize> Default for DoneFifoRtl<N, D> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize, const D: usize> Logic for DoneFifoRtl<N, D> {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, rd, wr, cnt);
        for i in 0..D {
            self.mask[i].clock.next = self.clock.val();
            self.at[i].clock.next = self.clock.val();
            self.mask[i].d.next = self.mask[i].q.val();
            self.at[i].d.next = self.at[i].q.val();
        }
        self.occ.next = self.cnt.q.val();
        self.full.next = self.cnt.q.val() == self.depth.val();
        self.front_mask.next = 0.into();
        self.front_at.next = 0.into();
        for i in 0..D {
            if self.rd.q.val().index() == i {
                self.front_mask.next = self.mask[i].q.val();
                self.front_at.next = self.at[i].q.val();
            }
        }
        self.back.next = self.wr.q.val() - 1;
        if !self.wr.q.val().any() {
            self.back.next = self.d_last.val();
        }
        self.do_pop.next = self.pop.val() & self.cnt.q.val().any();
        self.do_push.next = self.push.val() & (self.cnt.q.val() != self.depth.val());
        // Pop: advance the read pointer.
        if self.do_pop.val() {
            self.rd.d.next = self.rd.q.val() + 1;
            if self.rd.q.val() == self.d_last.val() {
                self.rd.d.next = 0.into();
            }
        }
        // Push into a free entry, or merge into the newest one when full.
        if self.do_push.val() {
            self.wr.d.next = self.wr.q.val() + 1;
            if self.wr.q.val() == self.d_last.val() {
                self.wr.d.next = 0.into();
            }
        }
        for i in 0..D {
            if self.do_push.val() & (self.wr.q.val().index() == i) {
                self.mask[i].d.next = self.push_mask.val();
                self.at[i].d.next = self.push_at.val();
            }
            if self.push.val() & !self.do_push.val() & (self.back.val().index() == i) {
                self.mask[i].d.next = self.mask[i].q.val() | self.push_mask.val();
                self.at[i].d.next = self.push_at.val();
            }
        }
        if self.do_push.val() & !self.do_pop.val() {
            self.cnt.d.next = self.cnt.q.val() + 1;
        }
        if self.do_pop.val() & !self.do_push.val() {
            self.cnt.d.next = self.cnt.q.val() - 1;
        }
        // A new layer: empty, then this edge's push lands in entry 0.
        if self.clear.val() {
            self.rd.d.next = 0.into();
            self.wr.d.next = 0.into();
            self.cnt.d.next = 0.into();
            if self.push.val() {
                self.wr.d.next = 1.into();
                if !self.d_last.val().any() {
                    self.wr.d.next = 0.into();
                }
                self.cnt.d.next = 1.into();
                self.mask[0].d.next = self.push_mask.val();
                self.at[0].d.next = self.push_at.val();
            }
        }
    }
}
