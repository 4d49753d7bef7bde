//! `package --rtl chiplet-ctrl`: the `chiplet_ctrl` RTL block inside the package in place of
//! every `ChipletCtrlCl`, behind `hw::pkg::chiplet::ChipletCtrlModel`.
//!
//! The stand-in drives the block through [`ChipletCtrlTwin`] one core cycle per `step`; the
//! layer start is one clear edge plus one table write per expert (configuration edges, not
//! core cycles). Everything the package reads comes from the block's ports: the outputs of
//! the cycle, the registered state (live bits, pending, quiescent), the counters summed from
//! the event outputs. Two things live beside the block, as they would in a chiplet: the
//! ring's data array (functional mode — slot storage, not control) and a copy of each slot's
//! tag taken from the allocation ports (`ddr_req`, `rx_slot` with the head's tag), which the
//! package's datapath reads without a read-port cycle.
//!
//! The block computes the trajectory itself (its next-hop logic is built from the package
//! shape and `helpers` = sharded loading), so the package's `Trajectory` argument is not
//! consulted; the package pairs sharded trajectories with `helpers`, which is what the block
//! assumes.

use hw::harness::{Probe, SignalDecl};
use hw::pkg::chiplet::{ChipletCtrlModel, ChipletId, CtrlIn, CtrlKnobs, CtrlOut, CtrlSched, CtrlStats, Trajectory};
use hw::pkg::ring::SlotTag;

use super::chiplet_twin::ChipletCtrlTwin;

pub struct ChipletCtrlStandIn {
    id: ChipletId,
    slots: u32,
    twin: ChipletCtrlTwin,
    tags: Vec<SlotTag>,
    data: Vec<u8>,
    /// Granted experts of the layer (watchdog report only).
    granted: Vec<bool>,
    pe_slot: Option<u32>,
}

/// [`hw::pkg::chiplet::CtrlFactory`] of the stand-in.
pub fn chiplet_ctrl_factory(id: ChipletId, rows: usize, cols: usize, experts: usize, slots: u32, slot_bytes: usize, knobs: CtrlKnobs) -> hw::Result<Box<dyn ChipletCtrlModel>> {
    let twin = ChipletCtrlTwin::new(id.0, rows, cols, slots, experts, knobs).map_err(|e| hw::Error::Msg(e.to_string()))?;
    Ok(Box::new(ChipletCtrlStandIn {
        id,
        slots,
        twin,
        tags: vec![SlotTag::default(); slots as usize],
        data: vec![0; slots as usize * slot_bytes],
        granted: vec![false; experts],
        pe_slot: None,
    }))
}

impl ChipletCtrlModel for ChipletCtrlStandIn {
    fn step(&mut self, inp: &CtrlIn, _traj: &dyn Trajectory) -> CtrlOut {
        let out = self.twin.step(inp);
        if let Some(CtrlSched::Grant { expert, .. }) = inp.sched {
            if let Some(g) = self.granted.get_mut(expert.idx()) {
                *g = true;
            }
        }
        if let (Some(s), Some(tag)) = (out.rx_slot, inp.rx_head) {
            self.tags[s as usize] = tag;
        }
        if let Some((s, tag)) = out.ddr_req {
            self.tags[s as usize] = tag;
        }
        if inp.pe_done.is_some() {
            self.pe_slot = None;
        }
        if let Some((s, _)) = out.pe_start {
            self.pe_slot = Some(s);
        }
        out
    }

    fn begin_layer(&mut self, m_of: &[u16], tokens_missing: &[u32]) {
        self.twin.begin_layer(m_of, tokens_missing);
        self.granted.iter_mut().for_each(|g| *g = false);
    }

    fn pending(&self) -> u32 {
        self.twin.state.pending
    }

    fn quiescent(&self) -> bool {
        self.twin.state.quiescent
    }

    fn stats(&self) -> &CtrlStats {
        &self.twin.stats
    }

    fn state_summary(&self) -> String {
        let st = &self.twin.state;
        format!(
            "live slots {}, pending {}, load sequence {}, reloads {}, rule-5 loads {}, PE {}{}",
            st.occ,
            st.pending,
            st.seq_len,
            st.reload_len,
            st.assigned_len,
            if st.pe_busy { "busy" } else { "idle" },
            if st.error { " (RTL queue overflow)" } else { "" }
        )
    }

    fn blocked_report(&self, scope: &str, out: &mut Vec<String>) {
        let st = &self.twin.state;
        for s in 0..self.slots {
            if st.live >> s & 1 == 0 {
                continue;
            }
            let t = self.tags[s as usize];
            let why = if st.landed >> s & 1 == 0 {
                if st.d2d >> s & 1 == 1 {
                    "waits for the rest of its D2D flits"
                } else {
                    "waits for DDR"
                }
            } else if st.computed >> s & 1 == 0 {
                if self.granted.get(t.expert.idx()).copied().unwrap_or(false) {
                    "waits for the PE array"
                } else {
                    "waits for the expert's grant"
                }
            } else {
                "waits to be sent to the next chiplet"
            };
            out.push(format!("{scope}.ring.slot{s}: expert {} micro-slice {}: {why}", t.expert, t.k));
        }
    }

    fn slot_tag(&self, slot: u32) -> SlotTag {
        self.tags[slot as usize]
    }

    fn live_slots(&self) -> u32 {
        self.twin.state.occ
    }

    fn peak_slots(&self) -> u32 {
        self.twin.peak_occupancy
    }

    fn ring_data(&self) -> &[u8] {
        &self.data
    }

    fn ring_data_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }
}

impl Probe for ChipletCtrlStandIn {
    /// The CL's signals (`ring.*`, `ctrl.*`), so the two runs' waveforms compare equal.
    fn declare(&self, scope: &[String], out: &mut Vec<SignalDecl>) {
        hw::pkg::chiplet::declare_signals(scope, self.slots, out);
    }

    fn sample(&self, out: &mut Vec<u64>) {
        let st = &self.twin.state;
        out.extend([st.occ as u64, st.head as u64, st.tail as u64]);
        for i in 0..self.slots as usize {
            out.extend([st.live >> i & 1, self.tags[i].expert.0 as u64, self.tags[i].k as u64]);
        }
        hw::pkg::chiplet::sample_ctrl(&self.twin.out, &self.twin.stats, st.pending, out);
    }
}

/// One-line trace, as the CL's: `c1 ring[3/8] pe[E5.2] tx[>3] ddr[E7.1] done`.
impl std::fmt::Display for ChipletCtrlStandIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "c{} ring[{}/{}]", self.id, self.twin.state.occ, self.slots)?;
        match self.pe_slot {
            Some(s) => write!(f, " pe[E{}.{}]", self.tags[s as usize].expert, self.tags[s as usize].k)?,
            None => write!(f, " pe[.]")?,
        }
        let o = &self.twin.out;
        match o.tx_start {
            Some((_, d)) => write!(f, " tx[>{d}]")?,
            None => write!(f, " tx[.]")?,
        }
        match o.ddr_req {
            Some((_, t)) => write!(f, " ddr[E{}.{}]", t.expert, t.k)?,
            None => write!(f, " ddr[.]")?,
        }
        if o.done {
            write!(f, " done")?;
        }
        Ok(())
    }
}
