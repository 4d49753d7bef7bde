//! (being moved here from src/cli/semmoe.rs)
