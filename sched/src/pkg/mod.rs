//! FL twins of the chiplet package's blocks (same file names as `hw/src/pkg`).

pub mod iodie;
pub mod moe;
pub mod pe_array;
pub mod placement;
