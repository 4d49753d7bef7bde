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
//! * [`ni_balancer::NiBalancerRtl`] and [`ni_trigger::NiTriggerRtl`] — the NI-Balancer's
//!   Algorithm 1 decision unit (`ni_balancer`, twin of `hw::wafer::balancer::NiBalancerCl`)
//!   and Eq. 2 trigger (`ni_trigger`, twin of `TriggerCl`), exact integer datapaths with the
//!   32 × 32 multiplier [`mul::Mul32Rtl`]; [`ni_balancer_swap`] drives them inside the balance
//!   run (`balance --rtl balancer`).

pub mod div;
pub mod mapping;
pub mod mapping_swap;
pub mod predictor;
pub mod predictor_swap;
pub mod semmoe_lut;
pub mod semmoe_lut_swap;
pub mod mul;
pub mod ni_balancer;
pub mod ni_balancer_swap;
pub mod ni_trigger;
