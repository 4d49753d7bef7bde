//! (being moved here from src/cli/gps.rs)
