//! (being moved here from src/cli/balance.rs)
