//! The gps paper's claims, under the paper's setup and ours (`testbenches/papers/gps.toml`).

use super::{setup_text, Paper, PaperReport, ReproOptions};
use crate::error::{Error, Result};

/// Runs the gps claims.
pub fn run(o: &ReproOptions) -> Result<PaperReport> {
    let _text = setup_text(Paper::Gps, o)?;
    Err(Error::Run("gps: reproduction in progress".into()))
}
