//! The fsedp paper's claims, under the paper's setup and ours (`testbenches/papers/fsedp.toml`).

use super::{setup_text, Paper, PaperReport, ReproOptions};
use crate::error::{Error, Result};

/// Runs the fsedp claims.
pub fn run(o: &ReproOptions) -> Result<PaperReport> {
    let _text = setup_text(Paper::Fsedp, o)?;
    Err(Error::Run("fsedp: reproduction in progress".into()))
}
