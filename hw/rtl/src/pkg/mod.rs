//! RTL twins of the FSE-DP package's controllers (hw::pkg): the IO-die scheduler top and
//! its blocks.

pub mod done_fifo;
pub mod iodie;
pub mod iodie_swap;
pub mod iodie_twin;
pub mod qos;
pub mod sorter;
