//! Next-hop logic of one chiplet (`NextHopRtl`): the trajectory function
//! `hw::pkg::package::PkgTraj::next_station(mask, loader, at = this chiplet)` as
//! combinational logic over the 16-bit trajectory mask.
//!
//! ```text
//!  mask ──► permute into snake positions (constant wiring) ──► mpos
//!  mpos ──► priority encoders: first member after my position / after the loader's
//!       ──► snake table ──► next chiplet; valid = the rules of the ring below
//! ```
//!
//! Ring order is the snake order of the members (`sched::pkg::iodie::snake_order`, baked in
//! as a constant table); a micro-slice visits every member once starting at its loader, so
//! from this chiplet it goes on to the next member unless that is the loader (the ring
//! closes). Sharded loading: a loader off the trajectory (a helper) sends into the ring at
//! the first member after it in snake order, which is then where the ring closes.

use rust_hdl::prelude::*;

/// The constant part of the next-hop logic: package shape, this chiplet, sharded loading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextHopParams {
    pub rows: usize,
    pub cols: usize,
    pub id: u8,
    pub shard: bool,
}

impl NextHopParams {
    /// Chiplets of the package (at most 16: the mask width).
    pub fn chiplets(&self) -> usize {
        (self.rows * self.cols).min(16)
    }

    /// Snake order (position → chiplet) and its inverse (chiplet → position), 4 bits each.
    pub fn tables(&self) -> (u64, u64) {
        let (mut snake, mut pos) = (0u64, 0u64);
        for (q, c) in sched::pkg::iodie::snake_order(self.rows, self.cols).into_iter().take(16).enumerate() {
            let c = c.0 as u64;
            snake |= (c & 15) << (4 * q);
            pos |= (q as u64 & 15) << (4 * (c & 15));
        }
        (snake, pos)
    }

    /// This chiplet's snake position.
    pub fn my_pos(&self) -> u64 {
        (self.tables().1 >> (4 * self.id as u64)) & 15
    }
}

#[derive(LogicBlock)]
pub struct NextHopRtl {
    /// Trajectory mask of the micro-slice's expert.
    pub mask: Signal<In, Bits<16>>,
    /// Chiplet that loaded the micro-slice.
    pub loader: Signal<In, Bits<4>>,
    /// There is a next station, and which.
    pub valid: Signal<Out, Bit>,
    pub dest: Signal<Out, Bits<4>>,

    // --- combinational locals
    mpos: Signal<Local, Bits<16>>,
    n: Signal<Local, Bits<5>>,
    lp: Signal<Local, Bits<4>>,
    any: Signal<Local, Bit>,
    first_p: Signal<Local, Bits<4>>,
    me_found: Signal<Local, Bit>,
    me_p: Signal<Local, Bits<4>>,
    l_found: Signal<Local, Bit>,
    l_p: Signal<Local, Bits<4>>,
    nxt: Signal<Local, Bits<4>>,
    first: Signal<Local, Bits<4>>,
    me_in: Signal<Local, Bit>,
    l_in: Signal<Local, Bit>,
    idx: Signal<Local, Bits<4>>,

    // --- constants
    snake: Constant<Bits<64>>,
    pos: Constant<Bits<64>>,
    id: Constant<Bits<4>>,
    my_pos: Constant<Bits<4>>,
    nchip: Constant<Bits<5>>,
    shard: Constant<Bit>,
}

impl NextHopRtl {
    pub fn new(p: &NextHopParams) -> Self {
        assert!(p.rows >= 1 && p.cols >= 1 && (p.id as usize) < p.chiplets(), "chiplet {} of a {}x{} package", p.id, p.rows, p.cols);
        let (snake, pos) = p.tables();
        Self {
            mask: Default::default(),
            loader: Default::default(),
            valid: Default::default(),
            dest: Default::default(),
            mpos: Default::default(),
            n: Default::default(),
            lp: Default::default(),
            any: Default::default(),
            first_p: Default::default(),
            me_found: Default::default(),
            me_p: Default::default(),
            l_found: Default::default(),
            l_p: Default::default(),
            nxt: Default::default(),
            first: Default::default(),
            me_in: Default::default(),
            l_in: Default::default(),
            idx: Default::default(),
            snake: Constant::new(snake.into()),
            pos: Constant::new(pos.into()),
            id: Constant::new((p.id as u64).into()),
            my_pos: Constant::new(p.my_pos().into()),
            nchip: Constant::new((p.chiplets() as u64).into()),
            shard: Constant::new(p.shard),
        }
    }
}

impl Logic for NextHopRtl {
    #[hdl_gen]
    fn update(&mut self) {
        // ---- the mask in ring (snake) order, and its member count
        self.mpos.next = 0.into();
        self.n.next = 0.into();
        for q in 0..16 {
            if (self.nchip.val().index() > q) & self.mask.val().get_bit(self.snake.val().get_bits::<4>(q * 4).index()) {
                self.mpos.next = self.mpos.val().replace_bit(q, true);
                self.n.next = self.n.val() + 1;
            }
        }
        // ---- the loader's snake position
        self.lp.next = 0.into();
        for c in 0..16 {
            if self.loader.val().index() == c {
                self.lp.next = self.pos.val().get_bits::<4>(c * 4);
            }
        }
        // ---- first member overall, after my position, after the loader's
        self.any.next = false;
        self.first_p.next = 0.into();
        self.me_found.next = false;
        self.me_p.next = 0.into();
        self.l_found.next = false;
        self.l_p.next = 0.into();
        self.idx.next = 0.into();
        for q in 0..16 {
            if self.mpos.val().get_bit(q) {
                if !self.any.val() {
                    self.any.next = true;
                    self.first_p.next = self.idx.val();
                }
                if !self.me_found.val() & (self.my_pos.val().index() < q) {
                    self.me_found.next = true;
                    self.me_p.next = self.idx.val();
                }
                if !self.l_found.val() & (self.lp.val().index() < q) {
                    self.l_found.next = true;
                    self.l_p.next = self.idx.val();
                }
            }
            self.idx.next = self.idx.val() + 1;
        }
        if !self.me_found.val() {
            self.me_p.next = self.first_p.val();
        }
        if !self.l_found.val() {
            self.l_p.next = self.first_p.val();
        }
        self.nxt.next = 0.into();
        self.first.next = 0.into();
        for q in 0..16 {
            if self.me_p.val().index() == q {
                self.nxt.next = self.snake.val().get_bits::<4>(q * 4);
            }
            if self.l_p.val().index() == q {
                self.first.next = self.snake.val().get_bits::<4>(q * 4);
            }
        }
        self.me_in.next = self.mask.val().get_bit(self.id.val().index());
        self.l_in.next = self.mask.val().get_bit(self.loader.val().index());

        // ---- the ring rules
        self.dest.next = self.nxt.val();
        if self.shard.val() & !self.l_in.val() {
            // A helper loaded it: into the ring at the first member after the helper.
            if self.loader.val() == self.id.val() {
                self.valid.next = self.any.val();
                self.dest.next = self.first.val();
            } else {
                self.valid.next = self.me_in.val() & (self.n.val() > 1) & (self.nxt.val() != self.first.val());
            }
        } else {
            self.valid.next = self.me_in.val() & (self.n.val() > 1) & (self.nxt.val() != self.loader.val()) & self.l_in.val();
        }
    }
}
