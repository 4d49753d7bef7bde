//! UCIe D2D adapter (placeholder until the CRC/replay model lands): serializes 256-byte
//! flits at lanes × rate and delivers them after the FDI latency. Interface of the real block.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::ni::PayloadPools;
use crate::cfg::{err, CfgError};
use crate::harness::{Cycle, DomainClock, LinkArena, LinkId, Probe, SignalDecl, NEVER};
use crate::noc::flit::Flit;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UcieCfg {
    pub lanes: u32,
    pub gt_per_s: f64,
    pub fdi_latency_ps: u64,
    pub ber: f64,
}
impl Default for UcieCfg {
    fn default() -> Self {
        UcieCfg { lanes: 64, gt_per_s: 18.0, fdi_latency_ps: 4020, ber: 0.0 }
    }
}
impl UcieCfg {
    pub fn validate(&self) -> Result<(), CfgError> {
        if !(self.ber.is_finite() && (0.0..1.0).contains(&self.ber)) {
            return err("ber", format!("bit-error rate must be in [0, 1) (got {})", self.ber));
        }
        Ok(())
    }
}
#[derive(Debug, Clone, Copy)]
pub struct UciePorts {
    pub in_flit: LinkId,
    pub out_flit: LinkId,
}
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct UcieStats {
    pub flits: u64,
    pub bytes: u64,
    pub replays: u64,
    pub retried_bytes: u64,
}
pub struct UcieAdapterCl {
    clk: DomainClock,
    out_clk: DomainClock,
    ports: UciePorts,
    bpc: f64,
    lat: u64,
    q: VecDeque<Flit>,
    wire_free: f64,
    rx: VecDeque<(Cycle, Flit)>,
    out_free_at: Cycle,
    stats: UcieStats,
}
impl UcieAdapterCl {
    pub fn new(_index: u32, cfg: &UcieCfg, _seed: u64, clk: DomainClock, out_clk: DomainClock, ports: UciePorts, tick_ps: u64) -> Self {
        let period_ps = (clk.div * tick_ps) as f64;
        let bpc = cfg.lanes as f64 * cfg.gt_per_s / 8.0 * period_ps / 1000.0;
        let lat = cfg.fdi_latency_ps.div_ceil(tick_ps).max(1);
        UcieAdapterCl { clk, out_clk, ports, bpc, lat, q: VecDeque::new(), wire_free: 0.0, rx: VecDeque::new(), out_free_at: 0, stats: UcieStats::default() }
    }
    /// # Safety
    /// At UCIe edges, sole receiver of `in_flit` and sender of `out_flit`.
    pub unsafe fn eval(&mut self, now: Cycle, flits: &LinkArena<Flit>, _pools: &PayloadPools) {
        if let Some(f) = flits.recv(self.ports.in_flit, now) {
            self.q.push_back(f);
        }
        let t = now as f64;
        if self.wire_free < t {
            self.wire_free = t;
        }
        while let Some(&f) = self.q.front() {
            if self.wire_free > t {
                break;
            }
            self.q.pop_front();
            self.wire_free += 256.0 / self.bpc * self.clk.div as f64;
            self.stats.flits += 1;
            self.stats.bytes += 256;
            self.rx.push_back((self.wire_free.ceil() as u64 + self.lat, f));
        }
        if let Some(&(t, f)) = self.rx.front() {
            if now >= t {
                let due = self.out_clk.next_edge((now + 1).max(self.out_free_at));
                flits.send_at(self.ports.out_flit, now, due, f);
                self.out_free_at = due + 1;
                self.rx.pop_front();
            }
        }
    }
    pub fn busy(&self) -> bool {
        !self.q.is_empty() || !self.rx.is_empty()
    }
    pub fn next_event(&self) -> Cycle {
        if self.busy() { 0 } else { NEVER }
    }
    pub fn stats(&self) -> &UcieStats {
        &self.stats
    }
    pub fn bytes_per_tick(&self) -> f64 {
        self.bpc / self.clk.div as f64
    }
}
impl Probe for UcieAdapterCl {
    fn declare(&self, scope: &[String], out: &mut Vec<SignalDecl>) {
        out.push(SignalDecl { scope: scope.to_vec(), name: "tx_queue".into(), width: 16 });
        out.push(SignalDecl { scope: scope.to_vec(), name: "rx_queue".into(), width: 16 });
    }
    fn sample(&self, out: &mut Vec<u64>) {
        out.extend([self.q.len() as u64, self.rx.len() as u64]);
    }
}
