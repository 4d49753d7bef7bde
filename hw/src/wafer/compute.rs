//! The die's compute engine: an in-order kernel queue (one stream, as a GPU stream) that
//! runs attention, gating and expert GEMMs, each for as many cycles as its roofline gives on
//! the B200-class die — `max(FLOPs / peak, bytes / HBM bandwidth)` plus a launch overhead —
//! while the collective engine moves data beside it. The roofline prices one kernel; what
//! overlaps with what, and who waits for whom, is decided cycle by cycle by the die's
//! sequencer (`die.rs`), not by a formula after the run.
//!
//! Precision (SPEC §4): attention in FP16, every other linear op (gating, experts) in int8.

use super::config::{DieCfg, WaferCfg};
use crate::cfg::CfgError;
use crate::harness::{Cycle, NEVER};

/// Longest kernel a program may hold, cycles (2^48: about 3 days at 1 GHz). Kernel times
/// are summed over micro-batches, layers and iterations in 64-bit cycle counts, so a
/// kernel past this comes from a die rate (or size) off by orders of magnitude and is
/// refused rather than saturated.
pub const MAX_KERNEL_CYCLES: u64 = 1 << 48;

/// What a kernel is (for stats and waveforms).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelKind {
    Attention,
    Gate,
    Experts,
    /// A per-token expert predictor (MoE-GPS Token-to-Expert), priced by its overhead fit.
    Predict,
}

impl KernelKind {
    pub const ALL: [KernelKind; 4] = [KernelKind::Attention, KernelKind::Gate, KernelKind::Experts, KernelKind::Predict];
    pub fn idx(self) -> usize {
        self as usize
    }
    /// The kind's name in logs (as it serializes).
    pub fn name(self) -> &'static str {
        match self {
            KernelKind::Attention => "attention",
            KernelKind::Gate => "gate",
            KernelKind::Experts => "experts",
            KernelKind::Predict => "predict",
        }
    }
}

/// Busy cycles of a compute engine (or summed over dies) per kernel kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelBusy {
    pub attention: u64,
    pub gate: u64,
    pub experts: u64,
    /// MoE-GPS Token-to-Expert predictor kernels.
    pub predict: u64,
}

impl KernelBusy {
    /// The counter of kernels of kind `k`.
    pub fn of(&self, k: KernelKind) -> u64 {
        match k {
            KernelKind::Attention => self.attention,
            KernelKind::Gate => self.gate,
            KernelKind::Experts => self.experts,
            KernelKind::Predict => self.predict,
        }
    }

    fn of_mut(&mut self, k: KernelKind) -> &mut u64 {
        match k {
            KernelKind::Attention => &mut self.attention,
            KernelKind::Gate => &mut self.gate,
            KernelKind::Experts => &mut self.experts,
            KernelKind::Predict => &mut self.predict,
        }
    }
}

impl std::ops::AddAssign for KernelBusy {
    fn add_assign(&mut self, o: KernelBusy) {
        for k in KernelKind::ALL {
            *self.of_mut(k) += o.of(k);
        }
    }
}

/// FLOPs and bytes of one kernel, and its cycles on the die.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct KernelCost {
    pub flops: f64,
    pub bytes: f64,
    pub fp16: bool,
}

impl KernelCost {
    /// Cycles on `die` at `clock_mhz`: the roofline of the kernel plus the launch overhead.
    /// Saturates at `u64::MAX` where [`Self::checked_cycles`] refuses (programs are built
    /// with the checked form; see [`MAX_KERNEL_CYCLES`]).
    pub fn cycles(&self, die: &DieCfg, clock_mhz: f64) -> u64 {
        self.checked_cycles(die, clock_mhz).unwrap_or(u64::MAX)
    }

    /// As [`Self::cycles`], or an error naming the die rate that makes the kernel longer
    /// than [`MAX_KERNEL_CYCLES`] (issue 19: `fp16_tflops = 1e-15` made a float-to-integer
    /// cast saturate and the overhead addition wrap, so a starved die ran *faster*).
    pub fn checked_cycles(&self, die: &DieCfg, clock_mhz: f64) -> Result<u64, CfgError> {
        let (rate, rate_field) = if self.fp16 { (die.fp16_tflops, "die.fp16_tflops") } else { (die.int8_tops, "die.int8_tops") };
        let peak = rate * 1e12 * die.compute_efficiency;
        let bw = die.hbm_tbps * 1e12 * die.hbm_efficiency;
        // 0 / 0 (an empty kernel) is no time, not NaN.
        let t_compute = if self.flops > 0.0 { self.flops / peak } else { 0.0 };
        let t_memory = if self.bytes > 0.0 { self.bytes / bw } else { 0.0 };
        let cycles = t_compute.max(t_memory) * clock_mhz * 1e6;
        let total = cycles.ceil() + die.kernel_overhead_cycles as f64;
        if total.is_finite() && total <= MAX_KERNEL_CYCLES as f64 {
            return Ok(total as u64);
        }
        // Name the factor furthest below its default (a rate or its efficiency).
        let field = if t_compute >= t_memory { die.starved_factor(rate_field, "die.compute_efficiency") } else { die.starved_factor("die.hbm_tbps", "die.hbm_efficiency") };
        let (what, amount, per_s) = if t_compute >= t_memory { ("FLOPs", self.flops, peak) } else { ("bytes", self.bytes, bw) };
        Err(CfgError {
            field: field.into(),
            reason: format!(
                "a kernel of {amount:.3e} {what} at {per_s:.3e} {what}/s takes {cycles:.3e} cycles, more than the {MAX_KERNEL_CYCLES} a run can count (2^48: sums over layers and iterations must stay within 64-bit cycle counts); the rate is orders of magnitude too small"
            ),
        })
    }
}

/// Attention of `tokens` decode tokens on one die of a TP group of `tp` (heads split by TP):
/// the Q/K/V/O projections (4·d² FP16 weights, MHA-sized — an upper bound for GQA/MLA
/// models) and the scores/values over `context_len` cached tokens of `kv_bytes_per_token`
/// each (read from HBM; 2 FLOPs per cached byte-pair per head dimension).
pub fn attention_cost(cfg: &WaferCfg, d_model: u32, tokens: u32) -> KernelCost {
    let (d, t, tp, ctx) = (d_model as f64, tokens as f64, cfg.tp as f64, cfg.context_len as f64);
    let kv = cfg.kv_bytes_per_token as f64;
    let proj_flops = 2.0 * t * 4.0 * d * d / tp;
    // Scores q·k and the weighted sum of v over every cached token: 2 FLOPs per query head
    // element per cached token each, d elements of queries.
    let attn_flops = 2.0 * 2.0 * t * ctx * d / tp;
    let weight_bytes = 4.0 * d * d * 2.0 / tp;
    let kv_bytes = t * ctx * kv / tp;
    KernelCost { flops: proj_flops + attn_flops, bytes: weight_bytes + kv_bytes, fp16: true }
}

/// Gating of `tokens` tokens over `experts` experts (int8 router weights).
pub fn gate_cost(d_model: u32, experts: u32, tokens: u32) -> KernelCost {
    let (d, e, t) = (d_model as f64, experts as f64, tokens as f64);
    KernelCost { flops: 2.0 * t * d * e, bytes: d * e + t * d, fp16: false }
}

/// The experts hosted on a die for one micro-batch: `tokens[i]` tokens for each expert with
/// work. SwiGLU (3·d·f int8 weights, streamed from HBM once per micro-batch per expert).
pub fn experts_cost(d_model: u32, d_ffn: u32, tokens: &[u32]) -> KernelCost {
    let (d, f) = (d_model as f64, d_ffn as f64);
    let mut c = KernelCost { fp16: false, ..Default::default() };
    for &n in tokens.iter().filter(|&&n| n > 0) {
        c.flops += 2.0 * n as f64 * 3.0 * d * f;
        c.bytes += 3.0 * d * f + 2.0 * n as f64 * d;
    }
    c
}

/// One queued kernel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Kernel {
    pub kind: KernelKind,
    pub mb: u32,
    pub cycles: u64,
}

/// The engine's registers: the kernel running and when it ends.
#[derive(Debug, Clone, Default)]
pub struct ComputeEngineCl {
    /// Index (in the die's kernel list) of the running kernel.
    pub running: Option<usize>,
    pub done_at: Cycle,
    /// Busy cycles per kernel kind.
    pub busy: KernelBusy,
}

impl ComputeEngineCl {
    /// Starts kernel `i` of `cycles` now.
    pub fn start(&mut self, i: usize, k: &Kernel, now: Cycle) {
        debug_assert!(self.running.is_none());
        self.running = Some(i);
        self.done_at = now + k.cycles.max(1);
        *self.busy.of_mut(k.kind) += k.cycles.max(1);
    }

    /// The running kernel if it finishes this cycle.
    pub fn finish(&mut self, now: Cycle) -> Option<usize> {
        match self.running {
            Some(i) if now >= self.done_at => {
                self.running = None;
                Some(i)
            }
            _ => None,
        }
    }

    pub fn next_event(&self) -> Cycle {
        if self.running.is_some() {
            self.done_at
        } else {
            NEVER
        }
    }
}
