//! FL (functional level) expert load balancing: which logical expert each physical expert slot
//! of each device holds.
//!
//! * [`eplb`] — DeepSeek's expert-parallel load balancer (EPLB), ported from its published
//!   `eplb.py`: the baseline the wafer's NI-Balancer is compared against.
//!
//! The reading of the algorithms is written down in `docs/balance.md`.

pub mod eplb;
pub mod gps;
pub mod ni;

pub use eplb::{
    balanced_packing, in_order_device_loads, max_over_mean, rebalance_experts, replicate_experts, EplbArg, EplbCfg, EplbError,
    EplbPlan, Packing, Policy, Replication,
};
