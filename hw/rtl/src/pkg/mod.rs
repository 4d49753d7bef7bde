//! Package-level blocks (twins of CL models in `hw::pkg`).
//!
//! * [`ucie_replay::UcieReplayRtl`]: the UCIe D2D adapter's go-back-N replay controller
//!   (twin of the controller part of `hw::pkg::ucie::UcieAdapterCl`).
//! * [`ucie_crc::UcieCrc32Rtl`]: the adapter's CRC-32 (ISO-HDLC) unit, checked against
//!   `hw::pkg::ucie::frame_crc`.

pub mod ucie_crc;
pub mod ucie_replay;
