//! The moentwine paper's claims, under the paper's setup and ours (`testbenches/papers/moentwine.toml`).

use super::{setup_text, Paper, PaperReport, ReproOptions};
use crate::error::{Error, Result};

/// Runs the moentwine claims.
pub fn run(o: &ReproOptions) -> Result<PaperReport> {
    let _text = setup_text(Paper::Moentwine, o)?;
    Err(Error::Run("moentwine: reproduction in progress".into()))
}
