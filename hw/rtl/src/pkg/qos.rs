//! QoS timer bank of the IO-die scheduler: token buffering, Algorithm 2 of
//! seeds/expert-streaming.txt (RTL twin of the CL's `t_qos`/`c_fw` registers and
//! `token_buf_step`).
//!
//! One (T_QoS, C_fw) pair of 32-bit registers per request slot. A `step` is one request's
//! read-modify-write, one per cycle as in the CL's `TokenBuf` state:
//! `C_fw ≥ N_threshold → T_QoS + 1 (saturating), C_fw = 0`; then a request that uses a cold
//! expert (`cold_hit`) with `T_QoS > 0` is deferred (`defer`, registered: it reports the
//! previous edge's step, so the scheduler's own `defer_valid` register is this one and no
//! combinational path runs from the scheduler into the bank and back) and `T_QoS − 1`. The host port is the package's request tracker: `load` (a slot's pair, as the
//! CL's `load_qos`), `fwd_done` (C_fw + 1, saturating) and `admit` (T_QoS = T_init, C_fw = 0).
//! The host port and `step` share the slot's write port: a host write in a `step` cycle is
//! dropped (the package writes the bank before a layer starts; the CL has the same order).

use rust_hdl::prelude::*;

/// Host operation codes on `host_op` (the HDL body uses the literals: rust-hdl maps a Rust
/// `const` to an undeclared Verilog identifier).
pub const QOS_NONE: u64 = 0;
pub const QOS_LOAD: u64 = 1;
pub const QOS_FWD_DONE: u64 = 2;
pub const QOS_ADMIT: u64 = 3;

/// QoS timer bank with `S` slots (1..=256).
///
/// Port coupling: `defer`: registered (the step of the previous edge); everything else
/// sampled at the rising edge. The lockstep tests read the registers with [`Self::slot`].
#[derive(LogicBlock)]
pub struct QosTimerBankRtl<const S: usize> {
    pub clock: Signal<In, Clock>,
    /// Synchronous reset: every slot (T_init, 0).
    pub reset: Signal<In, Bit>,
    pub host_op: Signal<In, Bits<2>>,
    pub host_slot: Signal<In, Bits<8>>,
    pub host_t: Signal<In, Bits<32>>,
    pub host_c: Signal<In, Bits<32>>,
    /// Algorithm 2 for the request in `step_slot` at this edge.
    pub step: Signal<In, Bit>,
    pub step_slot: Signal<In, Bits<8>>,
    /// The request uses a cold expert (A(r) ∧ cold ≠ 0).
    pub cold_hit: Signal<In, Bit>,
    /// The request stepped at the previous edge was deferred. registered.
    pub defer: Signal<Out, Bit>,
    t_qos: [DFF<Bits<32>>; S],
    c_fw: [DFF<Bits<32>>; S],
    defer_q: DFF<Bit>,
    /// T_QoS and C_fw of the stepped slot, after the N_threshold rule.
    t_mid: Signal<Local, Bits<32>>,
    c_mid: Signal<Local, Bits<32>>,
    t_init: Constant<Bits<32>>,
    n_threshold: Constant<Bits<32>>,
    max: Constant<Bits<32>>,
}

impl<const S: usize> QosTimerBankRtl<S> {
    pub fn new(t_qos_init: u32, n_threshold: u32) -> Self {
        assert!((1..=256).contains(&S), "QoS bank slots {S} outside 1..=256");
        Self {
            clock: Default::default(),
            reset: Default::default(),
            host_op: Default::default(),
            host_slot: Default::default(),
            host_t: Default::default(),
            host_c: Default::default(),
            step: Default::default(),
            step_slot: Default::default(),
            cold_hit: Default::default(),
            defer: Default::default(),
            t_qos: std::array::from_fn(|_| Default::default()),
            c_fw: std::array::from_fn(|_| Default::default()),
            defer_q: Default::default(),
            t_mid: Default::default(),
            c_mid: Default::default(),
            t_init: Constant::new((t_qos_init as u64).into()),
            n_threshold: Constant::new((n_threshold as u64).into()),
            max: Constant::new((u32::MAX as u64).into()),
        }
    }

    /// (T_QoS, C_fw) of `slot` (lockstep observation).
    pub fn slot(&self, slot: usize) -> (u32, u32) {
        (self.t_qos[slot].q.val().to_u64() as u32, self.c_fw[slot].q.val().to_u64() as u32)
    }
}

impl<const S: usize> Logic for QosTimerBankRtl<S> {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, defer_q);
        for i in 0..S {
            self.t_qos[i].clock.next = self.clock.val();
            self.c_fw[i].clock.next = self.clock.val();
            self.t_qos[i].d.next = self.t_qos[i].q.val();
            self.c_fw[i].d.next = self.c_fw[i].q.val();
        }
        // Read port: the stepped slot.
        self.t_mid.next = 0.into();
        self.c_mid.next = 0.into();
        for i in 0..S {
            if self.step_slot.val().index() == i {
                self.t_mid.next = self.t_qos[i].q.val();
                self.c_mid.next = self.c_fw[i].q.val();
                if self.c_fw[i].q.val() >= self.n_threshold.val() {
                    self.c_mid.next = 0.into();
                    if self.t_qos[i].q.val() != self.max.val() {
                        self.t_mid.next = self.t_qos[i].q.val() + 1;
                    }
                }
            }
        }
        self.defer.next = self.defer_q.q.val();
        self.defer_q.d.next = self.step.val() & self.cold_hit.val() & self.t_mid.val().any();
        for i in 0..S {
            if self.step.val() {
                if self.step_slot.val().index() == i {
                    self.c_fw[i].d.next = self.c_mid.val();
                    self.t_qos[i].d.next = self.t_mid.val();
                    if self.cold_hit.val() & self.t_mid.val().any() {
                        self.t_qos[i].d.next = self.t_mid.val() - 1;
                    }
                }
            } else if self.host_slot.val().index() == i {
                if self.host_op.val() == 1 {
                    self.t_qos[i].d.next = self.host_t.val();
                    self.c_fw[i].d.next = self.host_c.val();
                }
                if (self.host_op.val() == 2) & (self.c_fw[i].q.val() != self.max.val()) {
                    self.c_fw[i].d.next = self.c_fw[i].q.val() + 1;
                }
                if self.host_op.val() == 3 {
                    self.t_qos[i].d.next = self.t_init.val();
                    self.c_fw[i].d.next = 0.into();
                }
            }
            if self.reset.val() {
                self.t_qos[i].d.next = self.t_init.val();
                self.c_fw[i].d.next = 0.into();
            }
        }
    }
}
