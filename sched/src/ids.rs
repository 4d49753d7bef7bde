//! Typed ids of the data path. A bare integer says nothing about what it counts; these do,
//! and the compiler keeps an expert id out of a chiplet slot. Each is a transparent newtype
//! (the same bits, serialised as the bare number, so traces, JSON and waveforms are
//! unchanged) with `.idx()` for indexing the tables the id selects a row of.
//!
//! Widths follow the hardware: 16-bit expert ids (the trace format and the EIT), 8-bit
//! chiplet ids (at most 16 chiplets per package), 16-bit die ids (up to 4 × 64 × 64 dies),
//! 16-bit ring slots.

use serde::{Deserialize, Serialize};

macro_rules! id {
    ($(#[$doc:meta])* $name:ident($t:ty)) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
        #[serde(transparent)]
        #[repr(transparent)]
        pub struct $name(pub $t);

        impl $name {
            /// The id as an index into the table it selects a row of.
            #[inline]
            pub const fn idx(self) -> usize {
                self.0 as usize
            }
        }

        impl From<$t> for $name {
            #[inline]
            fn from(v: $t) -> Self {
                $name(v)
            }
        }

        impl From<$name> for $t {
            #[inline]
            fn from(v: $name) -> Self {
                v.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

id! {
    /// An expert of a MoE layer (routed experts first, then the shared ones).
    ExpertId(u16)
}
id! {
    /// A chiplet of the FSE-DP package, row-major over the array.
    ChipletId(u8)
}
id! {
    /// A die of the wafer system, row-major over the whole system's die grid.
    DieId(u16)
}
id! {
    /// A micro-slice slot of a chiplet's ring buffer.
    SlotId(u16)
}
id! {
    /// A request (token) of a layer batch at the IO die.
    ReqId(u32)
}
