//! The chiplet controller's per-expert tables (`ExpertTableRtl<E>`): for each of E experts
//! its micro-slice count `m`, the micro-slices left to compute here, the tokens still
//! missing (and a tokens-here bit), the next-hop mask of its grant and its granted bit —
//! the CL's `m_of`, `left_of`, `tokens_missing`, `nh_mask` and `granted`.
//!
//! ```text
//!  cfg_we/expert/m/tokens (layer start) ─► m_of, miss, tok_ok        layer_start ─► granted := 0
//!  grant/sched_expert/mask/on (A) ─► nh, left (if on), granted ─► granted_a, m_s (m of sched_expert)
//!  nh_expert[0..2] (B landing, I pick) ─► nh_mask[0..2]   (this cycle's grant looked through)
//!  done_valid/expert (D: PE done) ─► left − 1 ─► done_last (its last micro-slice here)
//!  tok_valid/expert/n (E: tokens) ─► miss − n ─► tok_ok_a
//! ```
//!
//! Every answer is the table as the CL holds it at that point of its `step`: the grant of
//! this cycle is seen by the next-hop lookups (`nh_mask`), by the PE done's `left` (a grant
//! sets `left = m` when this chiplet is on the mask) and by `granted_a`; the tokens of this
//! cycle by `tok_ok_a`. The writes take effect at the edge. A table write (`cfg_we`) sets the
//! expert's `m` and missing tokens and its tokens-here bit from the registered bits (a token
//! arrival in the same cycle is dropped: the controller's layer-start cycles carry no other
//! input); `layer_start` clears the granted bits; a synchronous `reset` clears the granted
//! and tokens-here bits (the counts are written before use, at the layer start, and had no
//! reset in the controller either). Expert indices are < E (the controller's precondition;
//! the Rust model panics on a larger one).
//!
//! Port coupling: `m_s`, `granted_a`, `nh_mask`, `done_last`, `tok_ok_a` comb in the
//! inputs; `granted` registered.

use rust_hdl::prelude::*;

use crate::cosim::{record, PortTrace};
use crate::export::{boxed, BlockDef, ParamSet};
use crate::RtlError;

/// The per-expert tables of `E` experts (1 ≤ E ≤ 256) with two next-hop lookups.
#[derive(LogicBlock)]
pub struct ExpertTableRtl<const E: usize> {
    pub clock: Signal<In, Clock>,
    /// Synchronous reset: granted and tokens-here bits 0.
    pub reset: Signal<In, Bit>,
    /// Layer start: granted bits 0.
    pub layer_start: Signal<In, Bit>,
    /// Table write (layer start): an expert's micro-slices and tokens still to arrive.
    pub cfg_we: Signal<In, Bit>,
    pub cfg_expert: Signal<In, Bits<16>>,
    pub cfg_m: Signal<In, Bits<16>>,
    pub cfg_tokens: Signal<In, Bits<32>>,
    /// The scheduler message's expert (pre-load or grant).
    pub sched_expert: Signal<In, Bits<16>>,
    /// A grant of `sched_expert` with next-hop mask `grant_mask`; `grant_on`: this chiplet
    /// is on the mask (it computes the expert: `left = m`).
    pub grant: Signal<In, Bit>,
    pub grant_mask: Signal<In, Bits<16>>,
    pub grant_on: Signal<In, Bit>,
    /// Next-hop mask lookups (0: the DDR landing's expert, 1: the PE pick's).
    pub nh_expert: [Signal<In, Bits<16>>; 2],
    /// A PE done of one micro-slice of `done_expert`.
    pub done_valid: Signal<In, Bit>,
    pub done_expert: Signal<In, Bits<16>>,
    /// Tokens arrived: `tok_n` more of `tok_expert`'s.
    pub tok_valid: Signal<In, Bit>,
    pub tok_expert: Signal<In, Bits<16>>,
    pub tok_n: Signal<In, Bits<32>>,
    /// `m` of `sched_expert`.
    pub m_s: Signal<Out, Bits<16>>,
    /// Granted bits with this cycle's grant.
    pub granted_a: Signal<Out, Bits<E>>,
    /// Granted bits (registered).
    pub granted: Signal<Out, Bits<E>>,
    /// The next-hop masks of `nh_expert` (this cycle's grant looked through).
    pub nh_mask: [Signal<Out, Bits<16>>; 2],
    /// It was the expert's last micro-slice here (`left` was 1).
    pub done_last: Signal<Out, Bit>,
    /// Tokens-here bits with this cycle's arrival.
    pub tok_ok_a: Signal<Out, Bits<E>>,

    m_of: [DFF<Bits<16>>; E],
    left: [DFF<Bits<16>>; E],
    miss: [DFF<Bits<32>>; E],
    nh: [DFF<Bits<16>>; E],
    granted_q: DFF<Bits<E>>,
    tok_ok: DFF<Bits<E>>,
    left_d: Signal<Local, Bits<16>>,
    miss_t: Signal<Local, Bits<32>>,
}

impl<const E: usize> Default for ExpertTableRtl<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const E: usize> ExpertTableRtl<E> {
    pub fn new() -> Self {
        assert!((1..=256).contains(&E), "expert table of {E} experts (1..=256)");
        Self {
            clock: Default::default(),
            reset: Default::default(),
            layer_start: Default::default(),
            cfg_we: Default::default(),
            cfg_expert: Default::default(),
            cfg_m: Default::default(),
            cfg_tokens: Default::default(),
            sched_expert: Default::default(),
            grant: Default::default(),
            grant_mask: Default::default(),
            grant_on: Default::default(),
            m_s: Default::default(),
            granted_a: Default::default(),
            granted: Default::default(),
            nh_expert: std::array::from_fn(|_| Default::default()),
            nh_mask: std::array::from_fn(|_| Default::default()),
            done_valid: Default::default(),
            done_expert: Default::default(),
            done_last: Default::default(),
            tok_valid: Default::default(),
            tok_expert: Default::default(),
            tok_n: Default::default(),
            tok_ok_a: Default::default(),
            m_of: std::array::from_fn(|_| Default::default()),
            left: std::array::from_fn(|_| Default::default()),
            miss: std::array::from_fn(|_| Default::default()),
            nh: std::array::from_fn(|_| Default::default()),
            granted_q: Default::default(),
            tok_ok: Default::default(),
            left_d: Default::default(),
            miss_t: Default::default(),
        }
    }
}

impl<const E: usize> Logic for ExpertTableRtl<E> {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, granted_q, tok_ok);
        for e in 0..E {
            self.m_of[e].clock.next = self.clock.val();
            self.m_of[e].d.next = self.m_of[e].q.val();
            self.left[e].clock.next = self.clock.val();
            self.left[e].d.next = self.left[e].q.val();
            self.miss[e].clock.next = self.clock.val();
            self.miss[e].d.next = self.miss[e].q.val();
            self.nh[e].clock.next = self.clock.val();
            self.nh[e].d.next = self.nh[e].q.val();
        }
        self.granted.next = self.granted_q.q.val();

        // A: the scheduler message — m of its expert; a grant writes the next-hop mask, the
        // micro-slices left (on the mask) and the granted bit.
        self.m_s.next = 0.into();
        for e in 0..E {
            if self.sched_expert.val().index() == e {
                self.m_s.next = self.m_of[e].q.val();
            }
        }
        self.granted_a.next = self.granted_q.q.val();
        if self.grant.val() {
            self.granted_a.next = self.granted_q.q.val().replace_bit(self.sched_expert.val().index(), true);
            for e in 0..E {
                if self.sched_expert.val().index() == e {
                    self.nh[e].d.next = self.grant_mask.val();
                    if self.grant_on.val() {
                        self.left[e].d.next = self.m_s.val();
                    }
                }
            }
        }
        // B, I: next-hop masks, this cycle's grant looked through.
        for r in 0..2 {
            self.nh_mask[r].next = 0.into();
            for e in 0..E {
                if self.nh_expert[r].val().index() == e {
                    self.nh_mask[r].next = self.nh[e].q.val();
                }
            }
            if self.grant.val() & (self.nh_expert[r].val() == self.sched_expert.val()) {
                self.nh_mask[r].next = self.grant_mask.val();
            }
        }
        // D: PE done — one micro-slice less to compute.
        self.left_d.next = 0.into();
        for e in 0..E {
            if self.done_expert.val().index() == e {
                self.left_d.next = self.left[e].q.val();
            }
        }
        if self.grant.val() & self.grant_on.val() & (self.done_expert.val() == self.sched_expert.val()) {
            self.left_d.next = self.m_s.val();
        }
        self.done_last.next = false;
        if self.done_valid.val() {
            for e in 0..E {
                if self.done_expert.val().index() == e {
                    self.left[e].d.next = self.left_d.val() - 1;
                }
            }
            self.done_last.next = self.left_d.val() == 1;
        }
        // E: tokens arrived.
        self.tok_ok_a.next = self.tok_ok.q.val();
        self.miss_t.next = 0.into();
        for e in 0..E {
            if self.tok_expert.val().index() == e {
                self.miss_t.next = self.miss[e].q.val() - self.tok_n.val();
            }
        }
        if self.tok_valid.val() {
            self.tok_ok_a.next = self.tok_ok.q.val().replace_bit(self.tok_expert.val().index(), !self.miss_t.val().any());
            for e in 0..E {
                if self.tok_expert.val().index() == e {
                    self.miss[e].d.next = self.miss_t.val();
                }
            }
        }

        // N: the edge; layer start, table writes, reset.
        self.granted_q.d.next = self.granted_a.val();
        self.tok_ok.d.next = self.tok_ok_a.val();
        if self.layer_start.val() {
            self.granted_q.d.next = 0.into();
        }
        if self.cfg_we.val() {
            for e in 0..E {
                if self.cfg_expert.val().index() == e {
                    self.m_of[e].d.next = self.cfg_m.val();
                    self.miss[e].d.next = self.cfg_tokens.val();
                }
            }
            self.tok_ok.d.next = self.tok_ok.q.val().replace_bit(self.cfg_expert.val().index(), !self.cfg_tokens.val().any());
        }
        if self.reset.val() {
            self.granted_q.d.next = 0.into();
            self.tok_ok.d.next = 0.into();
        }
    }
}

// ---------------------------------------------------------------- export

/// The exported size: the standard chiplet's 16 experts (`chiplet_ctrl_s8_e16`).
pub type ExpertTable16Rtl = ExpertTableRtl<16>;

/// Co-sim recorder: reset in cycle 0, then random traffic with expert indices < 16 on every
/// port: table writes (p 0.1), layer starts (1 in 200), grants and pre-loads, PE dones, token
/// arrivals, next-hop lookups; a reset one cycle in 500.
pub fn record_expert_table_16(module: &str, cycles: usize, seed: u64) -> Result<PortTrace, RtlError> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    record(module, ExpertTable16Rtl::new(), cycles, |u| &mut u.clock, move |c, u| {
        let ex = |rng: &mut rand_xoshiro::Xoshiro256PlusPlus| rng.gen_range(0..16u64);
        let (a, b, d, t, n0, n1) = (ex(&mut rng), ex(&mut rng), ex(&mut rng), ex(&mut rng), ex(&mut rng), ex(&mut rng));
        u.reset.next = c == 0 || rng.gen_ratio(1, 500);
        u.layer_start.next = rng.gen_ratio(1, 200);
        u.cfg_we.next = rng.gen_bool(0.1);
        u.cfg_expert.next = a.into();
        u.cfg_m.next = rng.gen_range(0..20u64).into();
        u.cfg_tokens.next = (if rng.gen_bool(0.5) { 0 } else { rng.gen_range(0..40u64) }).into();
        u.sched_expert.next = b.into();
        u.grant.next = rng.gen_bool(0.2);
        u.grant_mask.next = (rng.gen::<u16>() as u64).into();
        u.grant_on.next = rng.gen_bool(0.6);
        u.nh_expert[0].next = if rng.gen_bool(0.2) { b.into() } else { n0.into() };
        u.nh_expert[1].next = if rng.gen_bool(0.2) { b.into() } else { n1.into() };
        u.done_valid.next = rng.gen_bool(0.3);
        u.done_expert.next = if rng.gen_bool(0.2) { b.into() } else { d.into() };
        u.tok_valid.next = rng.gen_bool(0.2);
        u.tok_expert.next = t.into();
        u.tok_n.next = rng.gen_range(0..8u64).into();
    })
}

/// Export registration: the 16-expert table, linted and co-simulated like the other leaf
/// blocks.
pub const EXPORT: BlockDef = BlockDef {
    name: "expert_table",
    top: false,
    domain: crate::export::ModelDomain::PkgCore,
    cosim_cycles: 4096,
    sets: &[ParamSet {
        module: "expert_table_e16",
        rust_type: "ExpertTable16Rtl",
        params: &[("experts", 16)],
        // ECP5-85F: 66.7-68.8 MHz at seeds 1-3 (docs/rtl.md, "Timing closure at the prototype clocks").
        ecp5_clock_mhz: 60,
        build: || boxed(ExpertTable16Rtl::new()),
        recorder: Some(|cycles, seed| record_expert_table_16("expert_table_e16", cycles, seed)),
    }],
};
