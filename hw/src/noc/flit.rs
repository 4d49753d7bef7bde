//! What travels on the mesh links.

use crate::harness::Cycle;

/// One flit. Timing mode carries no payload; `data` is a handle into the sender's payload
/// store for functional-mode blocks that move real bytes (e.g. a micro-slice's int8 weights).
/// Flits carry their creation/injection cycles (per-flit latency).
///
/// 40 bytes: three words and eight bytes of small fields after them. (A `watch` bit that
/// nothing set or read made it 41, padded to 48, and the copies of its odd 7-byte tail went
/// through overlapping 4-byte stack slots that stalled on store forwarding: 2 % of a
/// package layer's samples, in the UCIe adapter's queues.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flit {
    /// Packet id: source node in the top bits, per-source sequence number below.
    pub pid: u64,
    /// Cycle the packet was created (Bernoulli success), for packet latency.
    pub ctime: Cycle,
    /// Cycle this flit entered the injection channel, for network/flit latency.
    pub itime: Cycle,
    pub dest: u16,
    /// Destination coordinates, carried so routers route without dividing by k (set by the
    /// NI from `dest`; k <= 128).
    pub dest_x: u8,
    pub dest_y: u8,
    /// Index of this flit in its packet.
    pub seq: u16,
    /// VC the flit occupies on the link it is on / in the buffer it sits in.
    pub vc: u8,
    /// Routers whose switch this flit traversed.
    pub hops: u8,
    pub head: bool,
    pub tail: bool,
    /// Counted in the measurement (BookSim's `record`).
    pub record: bool,
    /// Traffic class (0..N_CLASSES): which stream the flit belongs to — on the wafer the
    /// phase (all-reduce, dispatch, combine, migration Local, migration Global), counted per router output so links
    /// can be classified hot or cold per phase. 0 in the mesh and the package.
    pub class: u8,
    /// Functional mode: payload handle (package). Wafer: the id of the transfer the flit
    /// belongs to, for the receiving collective engine.
    pub data: u32,
}

const _: () = assert!(std::mem::size_of::<Flit>() == 40, "a flit is five whole words (see its doc)");

/// Traffic classes a router counts separately per output port.
pub const N_CLASSES: usize = 5;

impl Flit {
    /// Source node (kept in the packet id's top bits).
    #[inline]
    pub fn src(&self) -> u32 {
        (self.pid >> PID_SRC_SHIFT) as u32
    }

    #[inline]
    pub fn dest_coord(&self) -> sched::noc::Coord {
        sched::noc::Coord { x: self.dest_x as u32, y: self.dest_y as u32 }
    }

    /// Short id for waveforms: low 32 bits of (pid × 16 + seq), never 0 for a real flit.
    #[inline]
    pub fn trace_id(&self) -> u64 {
        ((self.pid << 4) | (self.seq as u64 & 0xf)).wrapping_add(1) & 0xffff_ffff
    }
}

/// A credit returned upstream: one slot of `vc` was freed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Credit {
    pub vc: u8,
}

pub const PID_SRC_SHIFT: u32 = 40;

#[inline]
pub fn make_pid(src: u32, seq: u64) -> u64 {
    ((src as u64) << PID_SRC_SHIFT) | seq
}
