//! RTL twins of the wafer controllers (`hw::wafer`).
//!
//! * [`predictor::DistOnlyPredictorRtl`] — the MoE-GPS Distribution-Only predictor
//!   (`dist_only_predictor`, twin of `hw::wafer::predictor::DistOnlyPredictorCl`);
//!   [`predictor_swap`] drives it and runs it inside the gps experiment (`gps --rtl predictor`).
//! * [`semmoe_lut::SemMoeLutRtl`] — Sem-MoE's look-up and re-batching unit (`semmoe_lut`,
//!   twin of `hw::wafer::semmoe_lut::SemMoeLutCl`); [`semmoe_lut_swap`] loads and drives it and
//!   runs it inside the semmoe experiment (`semmoe --rtl semmoe-lut`).

pub mod predictor;
pub mod predictor_swap;
pub mod semmoe_lut;
pub mod semmoe_lut_swap;
