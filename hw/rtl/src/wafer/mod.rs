//! RTL twins of the wafer's controllers (`hw::wafer`).
//!
//! * [`mapping::MappingCtrlRtl`] — the mapping controller `mapping_ctrl` (baseline / ER / HER
//!   tables; twin of `hw::wafer::mapping::MappingCtrlCl`), with its shape unit's dividers
//!   ([`div::DivRtl`]); [`mapping_swap`] drives it and runs it in place of the CL
//!   (`wafer --rtl mapping`).

pub mod div;
pub mod mapping;
pub mod mapping_swap;
