//! RTL twins of the FSE-DP package's controllers (`hw::pkg`).
//!
//! * [`iodie::IoDieSchedulerRtl`] — the IO-die scheduler top `iodie_scheduler`, built from
//!   [`sorter`], [`qos`], [`done_fifo`] and rust-hdl's RAM (the EIT); [`iodie_twin`] drives it,
//!   [`iodie_swap`] runs it inside the package (`--rtl scheduler`).
//! * [`chiplet::ChipletCtrlRtl`] — the chiplet controller top `chiplet_ctrl` (Rules 1–5), with
//!   [`nexthop::NextHopRtl`] (the trajectory function); [`chiplet_twin`] drives it,
//!   [`chiplet_swap`] runs it inside the package (`--rtl chiplet-ctrl`).
//! * [`picker::AgePickerRtl`] — the oldest/newest picker over an age matrix, the chiplet
//!   controller's one selection circuit.
//! * [`tag_fifo::TagFifoRtl`] — the chiplet controller's Rule-5 tag FIFO.
//! * [`pe_array::PeArrayRtl`] — the R×C int8 PE array with its fold sequencer (twin of
//!   `hw::pkg::pe_array::PeArrayCl`), built from [`pe_cell`]; [`pe_array_twin`] drives it,
//!   [`pe_array_swap`] runs the functional package's arithmetic on it (`--rtl pe`).
//! * [`ring::RingBufferRtl`] — the micro-slice ring-buffer controller (twin of
//!   `hw::pkg::ring::RingBufferCl`).
//! * [`ucie_replay::UcieReplayRtl`]: the UCIe D2D adapter's go-back-N replay controller
//!   (twin of the controller part of `hw::pkg::ucie::UcieAdapterCl`).
//! * [`ucie_crc::UcieCrc32Rtl`]: the adapter's CRC-32 (ISO-HDLC) unit, checked against
//!   `hw::pkg::ucie::frame_crc`.
//! * [`load_seq::LoadSeqRtl`], [`reload_list::ReloadListRtl`] — the chiplet controller's
//!   Rule-4 load sequencer and reload list; [`free_report::FreeReportRtl`] — its Rule-5
//!   free-slot report.
//! * [`age_matrix::AgeMatrixRtl`] — the chiplet controller's queue order (the age matrix
//!   with its insert ports) that its pickers read; [`slot_tags::SlotTagsRtl`] — its per-slot
//!   tag file (two allocation write ports, slot-indexed read ports);
//!   [`expert_table::ExpertTableRtl`] — its per-expert tables (m, left, tokens missing,
//!   next-hop mask, granted); [`slot_state::SlotStateRtl`] — its per-slot state (live,
//!   control and queue-membership bits, next station, the PE's slot);
//!   [`ring_alloc::RingAllocRtl`] — its ring pointers (the two allocations, the head).
//! * [`popcount::PopCountRtl`] — the slot-mask population count (a balanced adder tree)
//!   of the ring buffer, the ring pointers and the chiplet controller.

pub mod chiplet;
pub mod chiplet_swap;
pub mod chiplet_twin;
pub mod done_fifo;
pub mod iodie;
pub mod iodie_swap;
pub mod iodie_twin;
pub mod nexthop;
pub mod pe_array;
pub mod pe_array_swap;
pub mod pe_array_twin;
pub mod pe_cell;
pub mod picker;
pub mod popcount;
pub mod qos;
pub mod ring;
pub mod sorter;
pub mod tag_fifo;
pub mod ucie_crc;
pub mod ucie_replay;
pub mod load_seq;
pub mod reload_list;
pub mod free_report;
pub mod age_matrix;
pub mod slot_tags;
pub mod expert_table;
pub mod slot_state;
pub mod ring_alloc;
