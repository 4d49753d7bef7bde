//! (being moved here from src/cli/wafer.rs)
