//! (being moved here from src/cli/package.rs)
