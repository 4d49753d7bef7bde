//! RTL twins of the wafer controllers (`hw::wafer`).
//!
//! * [`predictor::DistOnlyPredictorRtl`] — the MoE-GPS Distribution-Only predictor
//!   (`dist_only_predictor`, twin of `hw::wafer::predictor::DistOnlyPredictorCl`);
//!   [`predictor_swap`] drives it and runs it inside the gps experiment (`gps --rtl predictor`).

pub mod predictor;
pub mod predictor_swap;
