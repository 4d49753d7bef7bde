//! (being built: see docs/architecture.md "The chiplet package")
