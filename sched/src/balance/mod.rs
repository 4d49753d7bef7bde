//! FL (functional level) expert load balancing: which logical expert each physical expert slot
//! of each device holds.
//!
//! * [`eplb`] — DeepSeek's expert-parallel load balancer (EPLB), ported from its published
//!   `eplb.py`: the baseline the wafer's NI-Balancer is compared against.
//! * [`ni`] — MoEntwine's NI-Balancer: Eq. 2 trigger, Algorithm 1, migration steps.
//! * [`gps`] — MoE-GPS: predictors, error models, expert duplication.
//! * [`semmoe`] — Sem-MoE: token tables, co-clustering, request scheduling, token re-batching
//!   (`docs/semmoe.md`).
//!
//! The reading of the algorithms is written down in `docs/balance.md`.

pub mod eplb;
pub mod gps;
pub mod gps_workload;
pub mod ni;
pub mod semmoe;

/// An input a balancer or predictor refuses (never a panic): `field` names the offending
/// argument or config field. NI-Balancer and MoE-GPS report through this one type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct BalanceError {
    pub field: &'static str,
    pub reason: String,
}

impl BalanceError {
    pub(crate) fn new(field: &'static str, reason: impl Into<String>) -> Self {
        BalanceError { field, reason: reason.into() }
    }
}

pub use eplb::{
    balanced_packing, in_order_device_loads, max_over_mean, rebalance_experts, replicate_experts, EplbArg, EplbCfg, EplbError,
    EplbPlan, Packing, Policy, Replication,
};
