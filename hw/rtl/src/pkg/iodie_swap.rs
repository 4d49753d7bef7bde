//! The `iodie_scheduler` RTL block inside the cycle-level package, in place of the CL model
//! (`waferstream package ... --rtl scheduler`, PyMTL3-style): [`IoDieRtlModel`] implements
//! `hw::pkg::iodie::IoDieModel` by driving the block one rising + falling clock edge per
//! evaluated core edge, with the done links' arrivals as its `done` input and its grant and
//! preload outputs sent on the chiplet links through the CL's own `send_msg`.
//!
//! The block is clocked only at the edges the package evaluates the scheduler. That is exact
//! because an un-evaluated edge is one where the CL would do nothing (idle, no done pulse, no
//! pulse to clear), and the block's state does not change on such an edge either; its
//! timebase is the `stamp` input (the core-cycle count), so gaps cost nothing.

use hw::harness::{Cycle, DomainClock, LinkArena, Probe, SignalDecl, NEVER};
use hw::pkg::iodie::{declare_signals, send_msg, IoDieCfg, IoDieModel, IoDiePorts, IoDieStats, LayerStart, OrderPolicy, SchedMsg, SchedMsgCl};
use sched::pkg::iodie::all_mask;

use super::iodie::{st, IoDieRtlParams, POLICY_BY_ID, POLICY_HOT_FIRST, POLICY_PAIRED};
use super::iodie_twin::{build_block, IoDieDriver, IoDieIn};
use super::qos::QOS_LOAD;
use super::sorter::stage_count;

/// The RTL scheduler as a package block.
pub struct IoDieRtlModel {
    drv: IoDieDriver,
    clk: DomainClock,
    ports: IoDiePorts,
    cfg: IoDieCfg,
    chiplets: usize,
    stages: usize,
    slots: usize,
    sent: Option<SchedMsg>,
    next_edge: Cycle,
}

/// Parameters of the block for a package scheduler, or why it has none.
pub fn params_for(rows: usize, cols: usize, cfg: &IoDieCfg, clk: DomainClock, ports: &IoDiePorts) -> Result<IoDieRtlParams, String> {
    let same = |v: &[hw::harness::LinkId], what: &str| -> Result<u64, String> {
        let l = v.first().map(|l| l.latency() as u64).ok_or(format!("no {what} link"))?;
        if v.iter().any(|x| x.latency() as u64 != l) {
            return Err(format!("the {what} links differ in latency; the RTL's stale-done window is one constant"));
        }
        Ok(l)
    };
    let window = (same(&ports.msg_out, "message")? + same(&ports.done_in, "done")?) / clk.div;
    Ok(IoDieRtlParams {
        rows,
        cols,
        experts: cfg.experts as usize,
        policy: match cfg.policy {
            OrderPolicy::Paired => POLICY_PAIRED,
            OrderPolicy::HotFirst => POLICY_HOT_FIRST,
            OrderPolicy::ById => POLICY_BY_ID,
        },
        theta_min: cfg.token_buffer.theta_min,
        n_threshold: cfg.token_buffer.n_threshold,
        t_qos_init: cfg.token_buffer.t_qos_init,
        stale_window: u32::try_from(window).map_err(|_| "stale-done window over 2^32 cycles".to_string())?,
    })
}

/// [`hw::pkg::iodie::IoDieFactory`] of the RTL scheduler.
pub fn iodie_factory(rows: usize, cols: usize, cfg: &IoDieCfg, clk: DomainClock, ports: IoDiePorts, start: &LayerStart) -> hw::Result<Box<dyn IoDieModel>> {
    let p = params_for(rows, cols, cfg, clk, &ports).map_err(|e| hw::Error::block("iodie_scheduler rtl", e))?;
    // Without token buffering (θ_min = 0) the QoS bank is never read or written: the block is
    // built with a 4-slot bank then (the package's 256 slots cost 512 registers of simulation
    // per edge for nothing).
    let slots = if cfg.token_buffer.theta_min == 0 { 4 } else { cfg.token_buffer.slots as usize };
    let block = build_block(&p, slots, cfg.done_fifo as usize)
        .ok_or_else(|| hw::Error::Msg(format!("no RTL build with {slots} QoS slots and a {}-entry done FIFO (built: 256 or 64 slots with 32 entries)", cfg.done_fifo)))?;
    let n = rows * cols;
    let mut drv = IoDieDriver::new(block, n, p.experts);
    match start {
        LayerStart::Eit(eit) => drv.begin_layer(eit),
        LayerStart::Requests { t_qos, c_fw, reqs } => {
            // The bank is written through the host port before the layer (idle edges).
            for (s, (&t, &c)) in t_qos.iter().zip(c_fw).enumerate() {
                drv.edge(IoDieIn { host_op: QOS_LOAD as u8, host_slot: s as u8, host_t: t, host_c: c, ..IoDieIn::default() });
            }
            drv.begin_layer_requests(reqs, cfg.token_buffer.theta_min > 0);
        }
    }
    let stages = if p.experts > 1 { stage_count(p.experts.next_power_of_two()) } else { 0 };
    Ok(Box::new(IoDieRtlModel { drv, clk, ports, cfg: cfg.clone(), chiplets: n, stages, slots, sent: None, next_edge: 0 }))
}

impl IoDieRtlModel {
    fn pulses(&self) -> bool {
        let o = self.drv.out();
        o.eit_wr_valid || o.eit_rd_valid || o.grant_valid || o.preload_valid || o.defer_valid
    }
}

impl IoDieModel for IoDieRtlModel {
    unsafe fn eval(&mut self, now: Cycle, msgs: &LinkArena<SchedMsgCl>, done: &LinkArena<u16>) -> bool {
        self.next_edge = self.clk.edge_after(now);
        let mut m = 0u16;
        for &l in &self.ports.done_in {
            if let Some(v) = done.recv(l, now) {
                m |= v & all_mask(self.chiplets);
            }
        }
        let stamp = self.clk.cycle_of(now) as u32;
        let o = *self.drv.edge(IoDieIn { stamp, done: m, ..IoDieIn::default() });
        self.sent = if o.preload_valid {
            Some(SchedMsg::preload(o.preload_expert as u16, o.eit_rd_mask))
        } else if o.grant_valid {
            Some(SchedMsg::grant(o.grant_expert as u16, o.grant_mask, o.grant_start))
        } else {
            None
        };
        if let Some(msg) = self.sent {
            // One package run is one layer: the layer number is 0.
            send_msg(&self.ports, self.cfg.broadcast, msgs, now, SchedMsgCl { msg, layer: 0 });
        }
        self.sent.is_some()
    }

    fn sent_msg(&self) -> Option<SchedMsg> {
        self.sent
    }

    fn busy(&self) -> bool {
        let o = self.drv.out();
        self.drv.start_pending() || !matches!(o.state as u64, st::IDLE | st::DONE) || o.done_fifo_occ > 0 || self.pulses()
    }

    fn next_event(&self) -> Cycle {
        if self.busy() {
            self.next_edge
        } else {
            NEVER
        }
    }

    fn is_finished(&self) -> bool {
        !self.drv.start_pending() && self.drv.out().state as u64 == st::DONE
    }

    fn stats(&self) -> IoDieStats {
        self.drv.stats
    }

    fn deferred(&self) -> Vec<bool> {
        self.drv.deferred().to_vec()
    }

    fn qos_bank(&self) -> (Vec<u32>, Vec<u32>) {
        (0..self.slots).map(|s| self.drv.uut.qos_slot(s)).unzip()
    }

    fn report(&self) -> String {
        let o = self.drv.out();
        format!("(RTL) state {}, icv {:#b}, order list {} experts left", o.state, o.icv, o.order_len)
    }
}

impl Probe for IoDieRtlModel {
    fn declare(&self, scope: &[String], out: &mut Vec<SignalDecl>) {
        declare_signals(scope, self.chiplets, self.cfg.experts as usize, self.stages, self.cfg.done_fifo, out);
    }

    fn sample(&self, out: &mut Vec<u64>) {
        let o = self.drv.out();
        out.extend_from_slice(&o.traced());
        for s in 0..self.stages {
            out.push((o.state as u64 == st::SORT && o.sorter_stage as usize == s) as u64);
        }
    }
}
