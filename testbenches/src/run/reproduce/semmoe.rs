//! The semmoe paper's claims, under the paper's setup and ours (`testbenches/papers/semmoe.toml`).

use super::{setup_text, Paper, PaperReport, ReproOptions};
use crate::error::{Error, Result};

/// Runs the semmoe claims.
pub fn run(o: &ReproOptions) -> Result<PaperReport> {
    let _text = setup_text(Paper::Semmoe, o)?;
    Err(Error::Run("semmoe: reproduction in progress".into()))
}
