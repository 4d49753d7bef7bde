//! Sem-MoE's look-up and re-batching unit on a die (CL): paper Algorithm 3 for attention-TP,
//! the hardware twin of `sched::balance::semmoe::{TokenDevTable::lookup, NGramTable::lookup,
//! choose_device, rebatch, rank_of_tokens}` — equal decisions (`tests/wafer_balance.rs`).
//!
//! Memories (written by the offline profiler, read-only at run time):
//! * the token table: profiled token ids ascending, each with its argmax device and that
//!   device's confidence `T_p` (one SRAM row per id);
//! * the n-gram table of one layer: a direct-indexed SRAM, one row per history key (the
//!   token's devices at the previous `min(lookback, layer)` layers, as base-D digits), each
//!   row (valid, argmax device, confidence `A_p`).
//!
//! Datapath, one batch of `n` tokens:
//! 1. `Search`: per token a binary search of the token table for its id — one probe per cycle
//!    over `[lo, hi)`; then one cycle to take the exact row or the nearest profiled id (ties:
//!    the lower id), one to read the n-gram row and compare (`T_p > A_p` → the token table,
//!    else the n-gram table; neither → the token's reduce-scatter rank): the predicted device.
//! 2. `Count`: one token per cycle, a histogram of predicted devices.
//! 3. `Prefix`: one device per cycle, the counting sort's bucket starts.
//! 4. `Scatter`: one token per cycle into its bucket (a stable argsort by device).
//! 5. `Align`: one sorted token per cycle: kept in its device's reduce-scatter chunk while the
//!    chunk has room, else queued in the spill FIFO.
//! 6. `Fill`: one cycle per slot still empty, from the spill FIFO, lowest device first.
//!
//! The output is the shuffle `shf` (position → token) and each token's rank (its device after
//! the shuffled reduce-scatter).

use sched::balance::semmoe::{chunk, NGramTable, TokenDevTable};

use crate::harness::{trace_to_end, SignalDecl, SignalSink};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LutState {
    Search,
    Pick,
    Compare,
    Count,
    Prefix,
    Scatter,
    Align,
    Fill,
    Done,
}

/// One token of the batch: its id (if the trace has ids) and its devices at earlier layers.
#[derive(Debug, Clone, PartialEq)]
pub struct LutToken {
    pub token_id: Option<u32>,
    pub history: Vec<u32>,
}

#[derive(Debug, Clone)]
pub struct SemMoeLutCl {
    devices: u32,
    lookback: u32,
    layer: usize,
    /// Token table SRAM: ids ascending, (device, confidence).
    ids: Vec<u32>,
    rows: Vec<(u32, f64)>,
    /// N-gram SRAM of the layer: index → (device, confidence); `None` = invalid row.
    ngram: Vec<Option<(u32, f64)>>,
    tokens: Vec<LutToken>,
    pub state: LutState,
    /// Cursors: token / device index, binary-search bounds.
    pub j: usize,
    lo: usize,
    hi: usize,
    /// Traced registers of the token being looked up.
    pub t_hit: Option<(u32, f64)>,
    pub a_hit: Option<(u32, f64)>,
    /// Outputs and the re-batching registers.
    pub pred: Vec<u32>,
    hist: Vec<u32>,
    start: Vec<u32>,
    sorted: Vec<usize>,
    groups: Vec<Vec<usize>>,
    spill: std::collections::VecDeque<usize>,
    fill_dev: usize,
    pub cycles: u64,
}

fn key_index(key: &[u32], devices: u32) -> usize {
    // Rows of all key lengths 0..=lookback, shorter keys first: offset of length k is
    // Σ_{i<k} D^i, then the digits.
    let d = devices as usize;
    let mut off = 0;
    let mut p = 1;
    for _ in 0..key.len() {
        off += p;
        p *= d;
    }
    off + key.iter().fold(0usize, |a, &x| a * d + x as usize)
}

impl SemMoeLutCl {
    /// Loads the memories for `layer` from the FL tables (what the profiler writes) and the
    /// batch. `lookback` ≤ 4 and `devices` small keep the n-gram SRAM at Σ D^k rows. The
    /// tables name devices below `devices` (the profiler's do), so every prediction does.
    pub fn new(table: Option<&TokenDevTable>, ngram: &NGramTable, layer: usize, devices: u32, tokens: Vec<LutToken>) -> Self {
        let (mut ids, mut rows) = (Vec::new(), Vec::new());
        if let Some(t) = table {
            for &id in t.rows.keys() {
                if let Some(r) = t.lookup(id) {
                    ids.push(id);
                    rows.push(r);
                }
            }
        }
        let d = devices as usize;
        let size: usize = (0..=ngram.lookback).map(|k| d.pow(k)).sum();
        let mut sram = vec![None; size];
        if let Some(m) = ngram.rows.get(layer) {
            for k in m.keys() {
                if k.iter().all(|&x| x < devices) {
                    sram[key_index(k, devices)] = ngram.lookup(layer, &[vec![0; layer.saturating_sub(k.len())], k.clone()].concat());
                }
            }
        }
        let n = tokens.len();
        SemMoeLutCl {
            devices,
            lookback: ngram.lookback,
            layer,
            ids,
            rows,
            ngram: sram,
            tokens,
            state: if n == 0 { LutState::Done } else { LutState::Search },
            j: 0,
            lo: 0,
            hi: 0,
            t_hit: None,
            a_hit: None,
            pred: vec![0; n],
            hist: vec![0; d],
            start: vec![0; d],
            sorted: vec![0; n],
            groups: vec![Vec::new(); d],
            spill: Default::default(),
            fill_dev: 0,
            cycles: 0,
        }
        .with_bounds()
    }

    fn with_bounds(mut self) -> Self {
        self.lo = 0;
        self.hi = self.ids.len();
        self
    }

    fn n(&self) -> usize {
        self.tokens.len()
    }

    /// One clock cycle.
    pub fn step(&mut self) {
        if self.state == LutState::Done {
            return;
        }
        self.cycles += 1;
        let n = self.n();
        let d = self.devices as usize;
        match self.state {
            LutState::Search => {
                // One probe: narrow [lo, hi) to the first id >= the token's id.
                match self.tokens[self.j].token_id {
                    Some(id) if self.lo < self.hi => {
                        let mid = (self.lo + self.hi) / 2;
                        if self.ids[mid] < id {
                            self.lo = mid + 1;
                        } else {
                            self.hi = mid;
                        }
                        if self.lo == self.hi {
                            self.state = LutState::Pick;
                        }
                    }
                    _ => self.state = LutState::Pick,
                }
            }
            LutState::Pick => {
                // The exact row, else the nearest profiled id (ties: the lower id).
                self.t_hit = self.tokens[self.j].token_id.and_then(|id| {
                    let i = self.lo;
                    let above = self.ids.get(i).map(|&a| (a, i));
                    let below = i.checked_sub(1).map(|b| (self.ids[b], b));
                    let pick = match (below, above) {
                        (_, Some((a, ia))) if a == id => Some(ia),
                        (Some((b, ib)), Some((a, ia))) => Some(if id - b <= a - id { ib } else { ia }),
                        (Some((_, ib)), None) => Some(ib),
                        (None, Some((_, ia))) => Some(ia),
                        (None, None) => None,
                    };
                    pick.map(|p| self.rows[p])
                });
                self.state = LutState::Compare;
            }
            LutState::Compare => {
                let h = &self.tokens[self.j].history;
                let lo = self.layer.saturating_sub(self.lookback as usize);
                self.a_hit = h.get(lo..self.layer).filter(|k| k.iter().all(|&x| x < self.devices)).and_then(|k| self.ngram[key_index(k, self.devices)]);
                let plain = rank_of_position(n, self.devices, self.j);
                self.pred[self.j] = match (self.t_hit, self.a_hit) {
                    (Some((td, tp)), Some((ad, ap))) => {
                        if tp > ap {
                            td
                        } else {
                            ad
                        }
                    }
                    (Some((td, _)), None) => td,
                    (None, Some((ad, _))) => ad,
                    (None, None) => plain,
                };
                self.j += 1;
                if self.j == n {
                    self.j = 0;
                    self.state = LutState::Count;
                } else {
                    self.state = LutState::Search;
                    self.lo = 0;
                    self.hi = self.ids.len();
                }
            }
            LutState::Count => {
                let p = self.pred[self.j] as usize;
                if p < d {
                    self.hist[p] += 1;
                }
                self.j += 1;
                if self.j == n {
                    self.j = 0;
                    self.state = LutState::Prefix;
                }
            }
            LutState::Prefix => {
                self.start[self.j] = if self.j == 0 { 0 } else { self.start[self.j - 1] + self.hist[self.j - 1] };
                self.j += 1;
                if self.j == d {
                    // Tokens predicted outside the devices sort last (FL: `(pred, i)` order).
                    self.j = 0;
                    self.state = LutState::Scatter;
                }
            }
            LutState::Scatter => {
                // Stable: tokens in index order into their bucket; out-of-range devices after
                // every bucket, in index order.
                let p = self.pred[self.j] as usize;
                let slot = if p < d {
                    let s = self.start[p] as usize;
                    self.start[p] += 1;
                    s
                } else {
                    let inside: u32 = self.hist.iter().sum();
                    let before = self.pred[..self.j].iter().filter(|&&x| x as usize >= d).count();
                    inside as usize + before
                };
                self.sorted[slot] = self.j;
                self.j += 1;
                if self.j == n {
                    self.j = 0;
                    self.state = LutState::Align;
                }
            }
            LutState::Align => {
                let i = self.sorted[self.j];
                let p = self.pred[i] as usize;
                if p < d && self.groups[p].len() < chunk(n, self.devices, p as u32).len() {
                    self.groups[p].push(i);
                } else {
                    self.spill.push_back(i);
                }
                self.j += 1;
                if self.j == n {
                    self.state = LutState::Fill;
                }
            }
            LutState::Fill => {
                while self.fill_dev < d && self.groups[self.fill_dev].len() >= chunk(n, self.devices, self.fill_dev as u32).len() {
                    self.fill_dev += 1;
                }
                match (self.fill_dev < d, self.spill.pop_front()) {
                    (true, Some(i)) => self.groups[self.fill_dev].push(i),
                    _ => self.state = LutState::Done,
                }
            }
            LutState::Done => {}
        }
    }

    /// Runs to the end: (`shf`, each token's rank, cycles).
    pub fn run(mut self) -> (Vec<usize>, Vec<u32>, u64) {
        while self.state != LutState::Done {
            self.step();
        }
        self.finish()
    }

    fn finish(self) -> (Vec<usize>, Vec<u32>, u64) {
        let n = self.n();
        let shf: Vec<usize> = self.groups.concat();
        let mut rank = vec![0u32; n];
        for r in 0..self.devices {
            for p in chunk(n, self.devices, r) {
                if let Some(x) = shf.get(p).and_then(|&i| rank.get_mut(i)) {
                    *x = r;
                }
            }
        }
        (shf, rank, self.cycles)
    }

    /// Runs to the end writing every cycle's registers into `sink` (signals: [`Self::signals`]).
    pub fn run_traced(mut self, sink: &mut dyn SignalSink) -> Result<(Vec<usize>, Vec<u32>, u64), crate::Error> {
        trace_to_end(&mut self, sink, Self::sample, |u| u.state == LutState::Done, Self::step)?;
        Ok(self.finish())
    }

    /// `top.semmoe_lut.{state, j, token_id, t_dev, t_conf, a_dev, a_conf, pred, spill}`
    /// (devices +1, 0 = no hit; confidences in 1/65536) and `dev_D.{count, fill}`.
    pub fn signals(&self) -> Vec<SignalDecl> {
        let sig = |sub: Option<String>, name: &str, width: u32| {
            let mut scope = vec!["top".to_string(), "semmoe_lut".to_string()];
            scope.extend(sub);
            SignalDecl { scope, name: name.into(), width }
        };
        let mut out = vec![
            sig(None, "state", 4),
            sig(None, "j", 32),
            sig(None, "token_id", 32),
            sig(None, "t_dev", 16),
            sig(None, "t_conf", 17),
            sig(None, "a_dev", 16),
            sig(None, "a_conf", 17),
            sig(None, "pred", 16),
            sig(None, "spill", 32),
        ];
        for dv in 0..self.devices {
            out.push(sig(Some(format!("dev_{dv}")), "count", 32));
            out.push(sig(Some(format!("dev_{dv}")), "fill", 32));
        }
        out
    }

    fn sample(&self, out: &mut Vec<u64>) {
        let st = [LutState::Search, LutState::Pick, LutState::Compare, LutState::Count, LutState::Prefix, LutState::Scatter, LutState::Align, LutState::Fill, LutState::Done].iter().position(|&s| s == self.state).unwrap_or(8);
        let conf = |x: f64| (x.clamp(0.0, 1.0) * 65536.0).round() as u64;
        out.push(st as u64);
        out.push(self.j as u64 & 0xffff_ffff);
        out.push(self.tokens.get(self.j).and_then(|t| t.token_id).map_or(0, |v| v as u64));
        out.push(self.t_hit.map_or(0, |(d, _)| d as u64 + 1) & 0xffff);
        out.push(self.t_hit.map_or(0, |(_, c)| conf(c)));
        out.push(self.a_hit.map_or(0, |(d, _)| d as u64 + 1) & 0xffff);
        out.push(self.a_hit.map_or(0, |(_, c)| conf(c)));
        out.push(self.pred.get(self.j).map_or(0, |&p| p as u64) & 0xffff);
        out.push(self.spill.len() as u64 & 0xffff_ffff);
        for dv in 0..self.devices as usize {
            out.push(self.hist[dv] as u64);
            out.push(self.groups[dv].len() as u64);
        }
    }
}

/// A look-up and re-batching unit as the semmoe experiment runs it: the CL model, or an RTL
/// stand-in (`waferstream semmoe --rtl semmoe-lut`, `rtl::wafer::semmoe_lut_swap`) built
/// through a [`SemMoeLutFactory`], so `hw` does not depend on the RTL crate.
pub trait SemMoeLutModel {
    /// Traced signals ([`SemMoeLutCl::signals`]).
    fn signals(&self) -> Vec<SignalDecl>;
    /// Runs the batch to the end writing every cycle into `sink`: (`shf`, each token's rank,
    /// cycles).
    fn run_traced(self: Box<Self>, sink: &mut dyn SignalSink) -> Result<(Vec<usize>, Vec<u32>, u64), crate::Error>;
}

/// Builds a unit for (token table, n-gram table, layer, devices, batch) — the arguments of
/// [`SemMoeLutCl::new`]; an RTL stand-in refuses a batch or table it was not built for,
/// naming the field.
pub type SemMoeLutFactory = fn(Option<&TokenDevTable>, &NGramTable, usize, u32, Vec<LutToken>) -> Result<Box<dyn SemMoeLutModel>, crate::Error>;

/// [`SemMoeLutFactory`] of the CL model (the default).
pub fn semmoe_lut_cl(table: Option<&TokenDevTable>, ngram: &NGramTable, layer: usize, devices: u32, tokens: Vec<LutToken>) -> Result<Box<dyn SemMoeLutModel>, crate::Error> {
    Ok(Box::new(SemMoeLutCl::new(table, ngram, layer, devices, tokens)))
}

impl SemMoeLutModel for SemMoeLutCl {
    fn signals(&self) -> Vec<SignalDecl> {
        SemMoeLutCl::signals(self)
    }
    fn run_traced(self: Box<Self>, sink: &mut dyn SignalSink) -> Result<(Vec<usize>, Vec<u32>, u64), crate::Error> {
        SemMoeLutCl::run_traced(*self, sink)
    }
}

/// The reduce-scatter rank of position `j` of `n` (the token's rank without a shuffle).
fn rank_of_position(n: usize, devices: u32, j: usize) -> u32 {
    (0..devices).find(|&r| chunk(n, devices, r).contains(&j)).unwrap_or(0)
}
