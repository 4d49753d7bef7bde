//! DDR channel (placeholder until the DDR3 controller model lands): in-order request queue,
//! fixed access latency, bus-rate data transfer. Interface of the real block.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::cfg::{err, CfgError};
use crate::harness::{Cycle, DomainClock, LinkArena, LinkId, Probe, SignalDecl, NEVER};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DdrCfg {
    pub bus_bytes: u32,
    pub queue_depth: u32,
    pub latency_cycles: u32,
}
impl Default for DdrCfg {
    fn default() -> Self {
        DdrCfg { bus_bytes: 16, queue_depth: 8, latency_cycles: 22 }
    }
}
impl DdrCfg {
    pub fn validate(&self) -> Result<(), CfgError> {
        if self.queue_depth == 0 || self.queue_depth > 256 {
            return err("queue_depth", format!("1..=256 (got {})", self.queue_depth));
        }
        if self.bus_bytes == 0 || self.bus_bytes > 256 {
            return err("bus_bytes", format!("1..=256 (got {})", self.bus_bytes));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DdrReq {
    pub id: u32,
    pub addr: u64,
    pub bytes: u32,
}
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DdrResp {
    pub id: u32,
}
#[derive(Debug, Clone, Copy)]
pub struct DdrPorts {
    pub req_in: LinkId,
    pub resp_out: LinkId,
}
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct DdrStats {
    pub requests: u64,
    pub bytes: u64,
    pub busy_cycles: u64,
    pub queue_max: u32,
}

pub struct DdrChannelCl {
    cfg: DdrCfg,
    clk: DomainClock,
    resp_clk: DomainClock,
    ports: DdrPorts,
    q: VecDeque<DdrReq>,
    /// Request in service and the tick its data is complete.
    cur: Option<(DdrReq, Cycle)>,
    resp_free_at: Cycle,
    stats: DdrStats,
}

impl DdrChannelCl {
    pub fn new(_id: u8, cfg: &DdrCfg, clk: DomainClock, resp_clk: DomainClock, ports: DdrPorts) -> Self {
        DdrChannelCl { cfg: cfg.clone(), clk, resp_clk, ports, q: VecDeque::new(), cur: None, resp_free_at: 0, stats: DdrStats::default() }
    }
    /// # Safety
    /// At DDR edges, sole receiver of `req_in` and sender of `resp_out`.
    pub unsafe fn eval(&mut self, now: Cycle, reqs: &LinkArena<DdrReq>, resps: &LinkArena<DdrResp>) {
        if let Some(r) = reqs.recv(self.ports.req_in, now) {
            self.q.push_back(r);
            self.stats.queue_max = self.stats.queue_max.max(self.q.len() as u32);
        }
        if let Some((r, t)) = self.cur {
            if now >= t {
                let due = self.resp_clk.next_edge((now + 1).max(self.resp_free_at));
                resps.send_at(self.ports.resp_out, now, due, DdrResp { id: r.id });
                self.resp_free_at = due + 1;
                self.cur = None;
            }
        }
        if self.cur.is_none() {
            if let Some(r) = self.q.pop_front() {
                let bursts = (r.bytes as u64).div_ceil(2 * self.cfg.bus_bytes as u64).max(1);
                self.stats.requests += 1;
                self.stats.bytes += r.bytes as u64;
                self.stats.busy_cycles += bursts;
                self.cur = Some((r, self.clk.edge(self.clk.cycle_of(now) + self.cfg.latency_cycles as u64 + bursts)));
            }
        }
    }
    /// Work at the next edge that `next_event` does not announce (a queued request with
    /// none in service; never, since service starts at once).
    pub fn busy(&self) -> bool {
        self.cur.is_none() && !self.q.is_empty()
    }
    pub fn next_event(&self) -> Cycle {
        self.cur.map_or(NEVER, |(_, t)| t)
    }
    pub fn stats(&self) -> &DdrStats {
        &self.stats
    }
    /// Peak data rate in bytes per tick.
    pub fn peak_bytes_per_tick(&self) -> f64 {
        2.0 * self.cfg.bus_bytes as f64 / self.clk.div as f64
    }
}

impl Probe for DdrChannelCl {
    fn declare(&self, scope: &[String], out: &mut Vec<SignalDecl>) {
        let mut sc = scope.to_vec();
        sc.push("ddr".into());
        out.push(SignalDecl { scope: sc.clone(), name: "queue".into(), width: 16 });
        out.push(SignalDecl { scope: sc, name: "busy".into(), width: 1 });
    }
    fn sample(&self, out: &mut Vec<u64>) {
        out.extend([self.q.len() as u64, self.cur.is_some() as u64]);
    }
}
