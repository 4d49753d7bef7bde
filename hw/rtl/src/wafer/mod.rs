//! RTL twins of the wafer's controllers (`hw::wafer`).
//!
//! * [`mapping::MappingCtrlRtl`] — the mapping controller `mapping_ctrl` (baseline / ER / HER
//!   tables; twin of `hw::wafer::mapping::MappingCtrlCl`), with its shape unit's dividers
//!   ([`div::DivRtl`]); [`mapping_swap`] drives it and runs it in place of the CL
//!   (`wafer --rtl mapping`).
//! * [`predictor::DistOnlyPredictorRtl`] — the MoE-GPS Distribution-Only predictor
//!   (`dist_only_predictor`, twin of `hw::wafer::predictor::DistOnlyPredictorCl`);
//!   [`predictor_swap`] drives it and runs it inside the gps experiment (`gps --rtl predictor`).
//! * [`semmoe_lut::SemMoeLutRtl`] — Sem-MoE's look-up and re-batching unit (`semmoe_lut`,
//!   twin of `hw::wafer::semmoe_lut::SemMoeLutCl`); [`semmoe_lut_swap`] loads and drives it and
//!   runs it inside the semmoe experiment (`semmoe --rtl semmoe-lut`).

pub mod div;
pub mod mapping;
pub mod mapping_swap;
pub mod predictor;
pub mod predictor_swap;
pub mod semmoe_lut;
pub mod semmoe_lut_swap;
