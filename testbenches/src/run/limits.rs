//! Every default and accepted range of a run's parameters, in one place. The CLI's `--help`
//! quotes these; the run layer checks against them before simulating.

use std::ops::RangeInclusive;

use crate::error::{Error, Result};

/// Zipf skew of generated routing (the generator's own bound, `sched::workload::GenCfg`).
pub const SKEW: RangeInclusive<f64> = 0.0..=16.0;
/// Default Zipf skew of generated routing.
pub const DEFAULT_SKEW: f64 = 1.0;

/// Wafer runs: cycles of one layer before the run stops with an error.
pub const WAFER_MAX_CYCLES: u64 = 1 << 40;
/// Wafer runs: cycles without progress before the watchdog stops the run.
pub const WAFER_WATCHDOG_CYCLES: u64 = 2_000_000;

/// `x` within `r` (and finite), or an input error naming `field`.
pub fn check_f64(field: &str, x: f64, r: RangeInclusive<f64>) -> Result<f64> {
    if x.is_finite() && r.contains(&x) {
        Ok(x)
    } else {
        Err(Error::input(field, format!("{x} outside {}..={}", r.start(), r.end())))
    }
}

/// Each of `items` once, or an input error naming `field` and the first repeated item ("X given
/// twice"): the one duplicate check of strategy, mapping and balancer lists.
pub fn check_distinct<T: PartialEq>(field: &str, items: &[T], name: impl Fn(&T) -> String) -> Result<()> {
    match items.iter().enumerate().find(|(i, x)| items[..*i].contains(x)) {
        Some((_, x)) => Err(Error::input(field, format!("{} given twice", name(x)))),
        None => Ok(()),
    }
}

/// `x` within `r`, or an input error naming `field`.
pub fn check_u64(field: &str, x: u64, r: RangeInclusive<u64>) -> Result<u64> {
    if r.contains(&x) {
        Ok(x)
    } else {
        Err(Error::input(field, format!("{x} outside {}..={}", r.start(), r.end())))
    }
}

// ---- the package (`package`, `run`'s package scenarios, `sweep`, `bench package`) ----

/// Tokens of one package iteration (`--tokens`, `workload.tokens`).
pub const TOKENS: RangeInclusive<u64> = 1..=1 << 20;
/// Default tokens of a timing-mode package run.
pub const DEFAULT_TOKENS: u32 = 256;
/// Default tokens of a functional package run (real int8 data: small).
pub const DEFAULT_TOKENS_FUNCTIONAL: u32 = 32;
/// Default model of a timing-mode package run.
pub const DEFAULT_MODEL: &str = "qwen3-30b-a3b";
/// Default model of a functional package run (d_model 64, d_ffn 48, 16 experts, top-2).
pub const DEFAULT_MODEL_FUNCTIONAL: &str = "functional";
/// Default strategies of a package run.
pub const DEFAULT_STRATEGIES: &str = "ep,a3";
/// Tokens of the package bench's layer (`bench package --tokens`).
pub const BENCH_TOKENS: RangeInclusive<u64> = 1..=1 << 16;

// ---- sweeps ----

/// Points in a grid, at most (a typo such as an extra axis should not start a month of runs).
pub const SWEEP_MAX_POINTS: usize = 100_000;
/// Points of a sweep run at once, at most.
pub const SWEEP_MAX_THREADS: usize = 1024;

// ---- the wafer side (`gps`, `semmoe`, `balance`) ----

/// MoE-GPS: link bandwidth per link and direction, GB/s (a 2048-byte flit takes at most 64
/// cycles per link at the slow end).
pub const GPS_LINK_GBPS: RangeInclusive<f64> = 32.0..=2048.0;
/// MoE-GPS: held-out iterations measured.
pub const GPS_ITERS: RangeInclusive<u32> = 1..=16;
/// MoE-GPS: warm-up iterations of the Distribution-Only counters.
pub const GPS_MAX_WARMUP: u32 = 256;
/// MoE-GPS: the Distribution-Only moving window, iterations.
pub const GPS_WINDOW: RangeInclusive<u32> = 1..=1024;
/// MoE-GPS: spare expert slots per die.
pub const GPS_MAX_SPARE_SLOTS: u32 = 64;
/// MoE-GPS: tokens per iteration.
pub const GPS_TOKENS: RangeInclusive<u32> = 1..=65_536;

/// Sem-MoE: devices (dies of the wafer, Sem-MoE clusters).
pub const SEMMOE_DEVICES: RangeInclusive<u32> = 2..=4096;
/// Sem-MoE: held-out batches simulated on the mesh, per layer (0 would simulate nothing).
pub const SEMMOE_MESH_BATCHES: RangeInclusive<u32> = 1..=64;
/// Sem-MoE: attention-TP tokens per batch.
pub const SEMMOE_TP_BATCH: RangeInclusive<u32> = 1..=65_536;
/// Sem-MoE: micro-batches per layer on the mesh.
pub const SEMMOE_MICRO_BATCHES: RangeInclusive<u32> = 1..=64;

/// Balance runs: iterations.
pub const BALANCE_ITERS: RangeInclusive<u64> = 1..=100_000;

/// Largest tokens per TP group the wafer config takes (`WaferCfg::validate`'s bound), which
/// `--tokens-per-die` × TP must respect.
pub const WAFER_TOKENS_PER_GROUP_MAX: u64 = 65_536;
