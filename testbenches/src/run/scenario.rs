//! (being moved here from src/cli/scenario.rs)
