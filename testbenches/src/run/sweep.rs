//! (being moved here from src/cli/sweep.rs)
