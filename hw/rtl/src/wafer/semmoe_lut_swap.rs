//! The `semmoe_lut` RTL block inside the semmoe experiment, in place of the CL model
//! (`waferstream semmoe ... --attention tp --rtl semmoe-lut`): [`SemMoeLutRtlModel`]
//! implements `hw::wafer::semmoe_lut::SemMoeLutModel`. [`SemMoeLutDriver::load`] writes the
//! memories through the block's load ports, one row per cycle (the profiler's token table and
//! the layer's n-gram rows, the batch's tokens with their n-gram row addresses, the
//! reduce-scatter chunk of every device), then `go`; each later clock edge is one CL step.
//! The traced values, `shf`, the ranks and the cycle count come from the block's ports.

use hw::harness::{trace_to_end, SignalDecl, SignalSink};
use hw::wafer::semmoe_lut::{LutToken, SemMoeLutModel};
use rust_hdl::prelude::*;
use sched::balance::semmoe::{chunk, NGramTable, TokenDevTable};

use super::semmoe_lut::{st, SemMoeLutRtl};

/// The build the swap runs: batches of up to 1024 tokens, 64 devices, a 2^16-row token table
/// and a 2^16-row n-gram table.
pub type SemMoeLutSwapRtl = SemMoeLutRtl<1024, 64, 16, 16, 11>;

/// The n-gram row of `key` (the token's devices at the previous layers, as base-D digits after
/// the rows of the shorter keys: offset Σ_{i<k} D^i).
pub fn ngram_row(key: &[u32], devices: u32) -> u64 {
    let d = devices as u64;
    let (mut off, mut p) = (0u64, 1u64);
    for _ in 0..key.len() {
        off += p;
        p *= d;
    }
    off + key.iter().fold(0u64, |a, &x| a * d + x as u64)
}

/// What the memories hold for one batch (the profiler's tables for `layer`, the tokens).
#[derive(Debug, Clone, Default)]
pub struct LutImage {
    /// Token table rows, ids ascending: (id, device, confidence).
    pub table: Vec<(u32, u32, f64)>,
    /// N-gram rows: (row, device, confidence).
    pub ngram: Vec<(u64, u32, f64)>,
    /// Per token: id, n-gram row.
    pub tokens: Vec<(Option<u32>, Option<u64>)>,
    pub devices: u32,
    /// Rows of the n-gram SRAM (Σ_{k ≤ lookback} D^k).
    pub ngram_rows: u64,
}

impl LutImage {
    /// The memory image of `SemMoeLutCl::new(table, ngram, layer, devices, tokens)`.
    pub fn new(table: Option<&TokenDevTable>, ngram: &NGramTable, layer: usize, devices: u32, tokens: &[LutToken]) -> Self {
        let mut rows = Vec::new();
        if let Some(t) = table {
            for &id in t.rows.keys() {
                if let Some((d, c)) = t.lookup(id) {
                    rows.push((id, d, c));
                }
            }
        }
        rows.sort_by_key(|r| r.0);
        let mut ng = Vec::new();
        if let Some(m) = ngram.rows.get(layer) {
            for k in m.keys() {
                if k.iter().all(|&x| x < devices) {
                    let padded = [vec![0; layer.saturating_sub(k.len())], k.clone()].concat();
                    if let Some((d, c)) = ngram.lookup(layer, &padded) {
                        ng.push((ngram_row(k, devices), d, c));
                    }
                }
            }
        }
        ng.sort_by_key(|r| r.0);
        let lo = layer.saturating_sub(ngram.lookback as usize);
        let toks = tokens
            .iter()
            .map(|t| {
                let key = t.history.get(lo..layer).filter(|k| k.iter().all(|&x| x < devices)).map(|k| ngram_row(k, devices));
                (t.token_id, key)
            })
            .collect();
        let ngram_rows = (0..=ngram.lookback).map(|k| (devices as u64).saturating_pow(k)).fold(0u64, |a, b| a.saturating_add(b));
        LutImage { table: rows, ngram: ng, tokens: toks, devices, ngram_rows }
    }

    /// Why the swap build cannot hold this image, naming the field.
    pub fn check(&self) -> Result<(), hw::Error> {
        let refuse = |what: &str, msg: String| Err(hw::Error::block("semmoe_lut rtl", format!("{what}: {msg}")));
        if self.tokens.len() > SemMoeLutSwapRtl::TOKENS {
            return refuse("tp_batch", format!("a batch of {} tokens; the built unit holds at most {}", self.tokens.len(), SemMoeLutSwapRtl::TOKENS));
        }
        if self.devices as usize > SemMoeLutSwapRtl::DEVICES {
            return refuse("devices", format!("{} devices; the built unit holds at most {}", self.devices, SemMoeLutSwapRtl::DEVICES));
        }
        if self.table.len() as u64 > SemMoeLutSwapRtl::TABLE_ROWS {
            return refuse("token table", format!("{} profiled token ids; the built SRAM holds {}", self.table.len(), SemMoeLutSwapRtl::TABLE_ROWS));
        }
        if self.ngram_rows > SemMoeLutSwapRtl::NGRAM_ROWS {
            return refuse("lookback", format!("an n-gram table of {} rows (devices^k, k ≤ lookback); the built SRAM holds {}", self.ngram_rows, SemMoeLutSwapRtl::NGRAM_ROWS));
        }
        if self.tokens.iter().any(|t| t.0.is_some_and(|id| id == u32::MAX)) {
            return refuse("token_id", "id 2^32 − 1 (the search's bounds are 32 bits)".into());
        }
        Ok(())
    }
}

/// Drives one unit (shared by the stand-in and the lockstep test). `IW` is the unit's index
/// width (max(N, D) < 2^IW); the default 16 fits every build `SemMoeLutRtl::new` accepts.
pub struct SemMoeLutDriver<const N: usize, const D: usize, const TB: usize, const GB: usize, const IW: usize = 16> {
    pub uut: Box<SemMoeLutRtl<N, D, TB, GB, IW>>,
    pub n: usize,
    pub devices: usize,
}

impl<const N: usize, const D: usize, const TB: usize, const GB: usize, const IW: usize> SemMoeLutDriver<N, D, TB, GB, IW> {
    /// A reset block with `img` loaded and the batch started (`go`): the next [`Self::edge`] is
    /// the CL's first step.
    pub fn load(img: &LutImage) -> Self {
        // Built on a thread with a large stack: the swap build's register arrays (13 × 1024
        // DFFs) are constructed by value before they reach the heap.
        let mut uut = std::thread::Builder::new()
            .stack_size(512 << 20)
            .spawn(|| Box::new(SemMoeLutRtl::<N, D, TB, GB, IW>::new()))
            .expect("spawn the builder thread")
            .join()
            .expect("build the look-up unit");
        uut.connect_all();
        let n = img.tokens.len();
        let mut d = SemMoeLutDriver { uut, n, devices: img.devices as usize };
        d.uut.reset.next = true;
        d.edge();
        d.uut.reset.next = false;
        d.uut.cfg_n.next = (n as u64).into();
        d.uut.cfg_d.next = (img.devices as u64).into();
        d.uut.cfg_rows.next = (img.table.len() as u64).into();
        for (a, &(id, dev, conf)) in img.table.iter().enumerate() {
            d.uut.tt_we.next = true;
            d.uut.tt_addr.next = (a as u64).into();
            d.uut.tt_id.next = (id as u64).into();
            d.uut.tt_dev.next = (dev as u64).into();
            d.uut.tt_conf.next = conf.to_bits().into();
            d.edge();
        }
        d.uut.tt_we.next = false;
        for &(row, dev, conf) in &img.ngram {
            d.uut.ng_we.next = true;
            d.uut.ng_addr.next = row.into();
            d.uut.ng_valid.next = true;
            d.uut.ng_dev.next = (dev as u64).into();
            d.uut.ng_conf.next = conf.to_bits().into();
            d.edge();
        }
        // Rows the profiler did not write are invalid: the rows between the written ones.
        let written: std::collections::BTreeSet<u64> = img.ngram.iter().map(|r| r.0).collect();
        for row in 0..img.ngram_rows.min(1 << GB) {
            if !written.contains(&row) {
                d.uut.ng_we.next = true;
                d.uut.ng_addr.next = row.into();
                d.uut.ng_valid.next = false;
                d.edge();
            }
        }
        d.uut.ng_we.next = false;
        for (a, &(id, key)) in img.tokens.iter().enumerate() {
            d.uut.tk_we.next = true;
            d.uut.tk_addr.next = (a as u64).into();
            d.uut.tk_id_valid.next = id.is_some();
            d.uut.tk_id.next = (id.unwrap_or(0) as u64).into();
            d.uut.tk_key_valid.next = key.is_some_and(|k| k < img.ngram_rows);
            d.uut.tk_key.next = key.unwrap_or(0).into();
            d.edge();
        }
        d.uut.tk_we.next = false;
        for r in 0..img.devices {
            let c = chunk(n, img.devices, r);
            d.uut.dv_we.next = true;
            d.uut.dv_addr.next = (r as u64).into();
            d.uut.dv_start.next = (c.start as u64).into();
            d.uut.dv_len.next = (c.len() as u64).into();
            d.edge();
        }
        d.uut.dv_we.next = false;
        d.uut.go.next = true;
        d.edge();
        d.uut.go.next = false;
        d.settle();
        d
    }

    pub fn settle(&mut self) {
        crate::cosim::settle(self.uut.as_mut()).expect("the look-up unit's logic settles");
    }

    /// One clock cycle (rising edge; falling edge: the SRAM reads of the next cycle).
    pub fn edge(&mut self) {
        self.settle();
        self.uut.clock.next = true.into();
        self.settle();
        self.uut.clock.next = false.into();
        self.settle();
    }

    pub fn done(&self) -> bool {
        self.uut.state.val().to_u64() == st::DONE
    }

    /// Device `r`'s (histogram count, group fill).
    pub fn device(&mut self, r: usize) -> (u64, u64) {
        self.uut.rd_dev.next = (r as u64).into();
        self.settle();
        (self.uut.rd_count.val().to_u64(), self.uut.rd_fill.val().to_u64())
    }

    /// The CL's traced values (`SemMoeLutCl::signals` order) from the ports.
    pub fn sample(&mut self, out: &mut Vec<u64>) {
        let conf = |bits: u64| (f64::from_bits(bits).clamp(0.0, 1.0) * 65536.0).round() as u64;
        let u = &self.uut;
        out.push(u.state.val().to_u64());
        out.push(u.j.val().to_u64() & 0xffff_ffff);
        out.push(u.token_id.val().to_u64());
        out.push(u.t_dev.val().to_u64() & 0xffff);
        out.push(conf(u.t_conf.val().to_u64()));
        out.push(u.a_dev.val().to_u64() & 0xffff);
        out.push(conf(u.a_conf.val().to_u64()));
        out.push(u.pred.val().to_u64() & 0xffff);
        out.push(u.spill.val().to_u64() & 0xffff_ffff);
        for r in 0..self.devices {
            let (c, f) = self.device(r);
            out.push(c);
            out.push(f);
        }
    }

    /// (`shf`, ranks, cycles) from the read ports.
    pub fn result(&mut self) -> (Vec<usize>, Vec<u32>, u64) {
        let mut shf = Vec::with_capacity(self.n);
        let mut rank = Vec::with_capacity(self.n);
        for p in 0..self.n {
            self.uut.rd_pos.next = (p as u64).into();
            self.uut.rd_tok.next = (p as u64).into();
            self.settle();
            shf.push(self.uut.rd_shf.val().index());
            rank.push(self.uut.rd_rank.val().to_u64() as u32);
        }
        (shf, rank, self.uut.cycles.val().to_u64())
    }
}

/// The RTL unit as the semmoe experiment's look-up unit.
pub struct SemMoeLutRtlModel {
    drv: SemMoeLutDriver<1024, 64, 16, 16, 11>,
    signals: Vec<SignalDecl>,
}

/// [`hw::wafer::semmoe_lut::SemMoeLutFactory`] of the RTL unit.
pub fn semmoe_lut_factory(table: Option<&TokenDevTable>, ngram: &NGramTable, layer: usize, devices: u32, tokens: Vec<LutToken>) -> hw::Result<Box<dyn SemMoeLutModel>> {
    let img = LutImage::new(table, ngram, layer, devices, &tokens);
    img.check()?;
    // The traced signal list is the CL's (names only; the CL model is not run).
    let signals = hw::wafer::semmoe_lut::SemMoeLutCl::new(None, &NGramTable { devices, lookback: 0, rows: Vec::new() }, 0, devices, Vec::new()).signals();
    Ok(Box::new(SemMoeLutRtlModel { drv: SemMoeLutDriver::load(&img), signals }))
}

impl SemMoeLutModel for SemMoeLutRtlModel {
    fn signals(&self) -> Vec<SignalDecl> {
        self.signals.clone()
    }

    fn run_traced(self: Box<Self>, sink: &mut dyn SignalSink) -> hw::Result<(Vec<usize>, Vec<u32>, u64)> {
        let mut drv = self.drv;
        // `sample` sets the read port, so it needs `&mut`: sample into a buffer the harness reads.
        struct S {
            drv: SemMoeLutDriver<1024, 64, 16, 16, 11>,
            buf: Vec<u64>,
        }
        let mut s = S { buf: Vec::new(), drv: { drv.settle(); drv } };
        s.buf.clear();
        s.drv.sample(&mut s.buf);
        trace_to_end(
            &mut s,
            sink,
            |s, out| out.extend_from_slice(&s.buf),
            |s| s.drv.done(),
            |s| {
                s.drv.edge();
                s.buf.clear();
                let mut b = std::mem::take(&mut s.buf);
                s.drv.sample(&mut b);
                s.buf = b;
            },
        )?;
        Ok(s.drv.result())
    }
}

/// One random batch for the lockstep and the co-sim recorder: a token table of `rows` ids (or
/// none, a trace without ids), an n-gram table for `layer` with `lookback`, `n` tokens with
/// ids near the profiled ones (exact hits, ties between neighbours, below and above the table)
/// or none, and histories with digits up to `devices` (one past the end: no n-gram row).
/// Shares are multiples of 1/8, so token-table and n-gram confidences tie often.
#[allow(clippy::type_complexity)]
pub fn random_batch(rng: &mut impl rand::Rng, n: usize, devices: u32, rows: usize, lookback: u32, layer: usize) -> (Option<TokenDevTable>, NGramTable, Vec<LutToken>) {
    use std::collections::BTreeMap;
    let shares = |rng: &mut dyn rand::RngCore| -> Vec<f64> {
        use rand::Rng;
        let mut v = vec![0.0; devices as usize];
        for _ in 0..8 {
            let d = rng.gen_range(0..devices as usize);
            v[d] += 0.125;
        }
        v
    };
    let with_ids = rows > 0 || rng.gen_bool(0.5);
    let mut ids: Vec<u32> = Vec::new();
    let table = if rows > 0 {
        let mut t = BTreeMap::new();
        let mut id = rng.gen_range(0..20u32);
        for _ in 0..rows {
            t.insert(id, shares(rng));
            ids.push(id);
            id += rng.gen_range(1..6);
        }
        Some(TokenDevTable { devices, rows: t })
    } else {
        None
    };
    let mut lrows = vec![BTreeMap::new(); layer + 1];
    let k = layer.min(lookback as usize);
    for _ in 0..rng.gen_range(0..(devices as usize).pow(k as u32) + 2) {
        let key: Vec<u32> = (0..k).map(|_| rng.gen_range(0..devices)).collect();
        lrows[layer].insert(key, shares(rng));
    }
    let ngram = NGramTable { devices, lookback, rows: lrows };
    let tokens = (0..n)
        .map(|_| {
            let token_id = with_ids.then(|| match (ids.is_empty(), rng.gen_range(0..4)) {
                (false, 0) => ids[rng.gen_range(0..ids.len())],
                (false, 1) => ids[rng.gen_range(0..ids.len())].saturating_add(rng.gen_range(0..4)),
                (false, 2) => ids[rng.gen_range(0..ids.len())].saturating_sub(rng.gen_range(0..4)),
                _ => rng.gen_range(0..ids.last().map_or(50, |&x| x + 10)),
            });
            let history = (0..layer).map(|_| if rng.gen_bool(0.05) { devices } else { rng.gen_range(0..devices) }).collect();
            LutToken { token_id, history }
        })
        .collect();
    (table, ngram, tokens)
}
