//! `waferstream reproduce`: each paper's claims run under the paper's own setup and under
//! our stronger (or different) setup, side by side.
//!
//! Every paper has one module here ([`fsedp`], [`moentwine`], [`gps`], [`semmoe`]) and one
//! setup file under `testbenches/papers/` (embedded; [`Paper::setup_toml`]). A setup file
//! has a `[paper]` table — every field traced in a comment to a line of the paper, or marked
//! `inference:` with its reason — and a `[strong]` table with what we run instead and why.
//! Nothing in a setup file is tuned toward a paper's number.
//!
//! A module's `run` returns a [`PaperReport`]: one [`Claim`] per claim of the paper, each
//! with the paper's value, ours under the paper's setup, ours under the strong setup, a
//! [`Verdict`] from a rule stated in the claim, and the mechanism in one line with the doc
//! section that shows it from counters and waveforms. [`write`] turns the reports into
//! `claims.json` and `claims.md`; docs/results-*.md quote these files. `--quick` runs
//! smaller sizes of the same setups in a few minutes; `testbenches/papers/quick/NAME.json`
//! are the committed quick results that `scripts/test.sh` compares against ([`compare`]), so
//! a change of any number must come with a new committed file.

pub mod fsedp;
pub mod gps;
pub mod moentwine;
pub mod semmoe;

use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{contained, Part, Parts};
use crate::error::{Error, Result};

/// The four papers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Paper {
    /// FSE-DP: expert streaming on a chiplet package (seeds/expert-streaming.txt).
    Fsedp,
    /// MoEntwine: ER-Mapping and NI-Balancer on a wafer (seeds/moentwine.txt).
    Moentwine,
    /// MoE-GPS: prediction strategies for expert duplication (seeds/moe-gps.txt).
    Gps,
    /// Sem-MoE: semantic co-scheduling of attention and experts (seeds/sem-moe.txt).
    Semmoe,
}

impl Paper {
    pub const ALL: [Paper; 4] = [Paper::Fsedp, Paper::Moentwine, Paper::Gps, Paper::Semmoe];

    pub fn name(self) -> &'static str {
        match self {
            Paper::Fsedp => "fsedp",
            Paper::Moentwine => "moentwine",
            Paper::Gps => "gps",
            Paper::Semmoe => "semmoe",
        }
    }

    /// The paper's title as the docs cite it.
    pub fn title(self) -> &'static str {
        match self {
            Paper::Fsedp => "FSE-DP: fully sharded expert data-parallelism on chiplets (expert streaming)",
            Paper::Moentwine => "MoEntwine: ER-Mapping and NI-Balancer on wafer-scale chips",
            Paper::Gps => "MoE-GPS: guidelines for prediction strategies of expert duplication",
            Paper::Semmoe => "Sem-MoE: semantic-aware co-scheduling of attention DP and expert parallelism",
        }
    }

    /// The results document whose tables are this paper's `claims.md`.
    pub fn doc(self) -> &'static str {
        match self {
            Paper::Fsedp => "docs/results-fsedp.md",
            Paper::Moentwine => "docs/results-wafer.md",
            Paper::Gps => "docs/gps.md",
            Paper::Semmoe => "docs/semmoe.md",
        }
    }

    /// The embedded setup file (`testbenches/papers/NAME.toml`).
    pub fn setup_toml(self) -> &'static str {
        match self {
            Paper::Fsedp => include_str!("../../../papers/fsedp.toml"),
            Paper::Moentwine => include_str!("../../../papers/moentwine.toml"),
            Paper::Gps => include_str!("../../../papers/gps.toml"),
            Paper::Semmoe => include_str!("../../../papers/semmoe.toml"),
        }
    }

    /// `fsedp`, `moentwine` (or `wafer`), `gps` (or `moe-gps`), `semmoe` (or `sem-moe`).
    pub fn parse(s: &str) -> Result<Paper> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "fsedp" | "fse-dp" => Paper::Fsedp,
            "moentwine" | "wafer" => Paper::Moentwine,
            "gps" | "moe-gps" => Paper::Gps,
            "semmoe" | "sem-moe" => Paper::Semmoe,
            other => return Err(Error::input("paper", format!("unknown paper `{other}` (expected fsedp, moentwine, gps, semmoe or all)"))),
        })
    }

    /// `all` or one paper's name.
    pub fn parse_list(s: &str) -> Result<Vec<Paper>> {
        if s.trim().eq_ignore_ascii_case("all") {
            Ok(Paper::ALL.to_vec())
        } else {
            Ok(vec![Paper::parse(s)?])
        }
    }
}

/// How `reproduce` runs.
#[derive(Debug, Clone, Default)]
pub struct ReproOptions {
    /// Smaller sizes of the same setups (a few minutes for all four papers).
    pub quick: bool,
    /// Worker threads for the points of a paper (results do not depend on it); `None` = all
    /// cores.
    pub threads: Option<u32>,
    /// A setup file replacing the embedded one (only with a single paper).
    pub setup: Option<String>,
}

/// One measured value: the number (for comparison and verdicts) and how it reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// The headline number (a speedup, a fraction, a percentage, …); `None` when the setup
    /// cannot run this claim (then `text` says why).
    pub value: Option<f64>,
    /// The value with its unit and context, e.g. "1.31× (16 tok) … 1.47× (1024 tok)".
    pub text: String,
}

impl Measured {
    pub fn new(value: f64, text: impl Into<String>) -> Self {
        Measured { value: Some(value), text: text.into() }
    }

    pub fn none(why: impl Into<String>) -> Self {
        Measured { value: None, text: why.into() }
    }
}

/// Does our model, under the paper's setup, reproduce the claim?
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Within the paper's range, or the same direction and ordering where the paper gives a
    /// trend.
    Holds,
    /// The direction holds, the size does not (or it holds on part of the grid).
    Partly,
    /// The opposite direction, or no effect where the paper reports one.
    DoesNotHold,
    /// The paper's setup did not measure it (e.g. a claim of full mode under `--quick`):
    /// given to every claim whose paper-setup value is `None`, whatever the module said.
    NotRun,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Holds => "holds",
            Verdict::Partly => "partly",
            Verdict::DoesNotHold => "does not hold",
            Verdict::NotRun => "not run",
        }
    }

    /// The common rule for a claimed range `[lo, hi]` of a ratio above 1 (a speedup, a
    /// reduction): holds within `[lo·(1−tol), hi·(1+tol)]` or above; partly when the value
    /// is above 1 (the direction) but below; does not hold otherwise.
    pub fn for_gain(value: f64, lo: f64, tol: f64) -> Verdict {
        if value >= lo * (1.0 - tol) {
            Verdict::Holds
        } else if value > 1.0 {
            Verdict::Partly
        } else {
            Verdict::DoesNotHold
        }
    }
}

/// One claim of a paper, measured twice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Claim {
    pub paper: Paper,
    /// Stable key, `PAPER.short_name` (what `compare` matches on).
    pub id: String,
    /// The claim as the paper states it, with its section or figure.
    pub claim: String,
    /// The paper's number(s), as text ("1.22–2.00×").
    pub paper_value: String,
    /// Ours under the paper's setup (`testbenches/papers/NAME.toml` `[paper]`).
    pub paper_setup: Measured,
    /// Ours under our stronger or different setup (`[strong]`).
    pub strong_setup: Measured,
    /// From `paper_setup` by `rule`.
    pub verdict: Verdict,
    /// How the verdict is decided (e.g. "holds if ≥ 1.22× −5 %").
    pub rule: String,
    /// The mechanism behind our number, one line.
    pub mechanism: String,
    /// The doc section that shows the mechanism from counters and waveforms
    /// (`docs/FILE.md#anchor`).
    pub doc: String,
}

/// A supporting table of a paper's report (the per-point numbers behind its claims).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Table {
    pub title: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// What one paper's reproduction measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PaperReport {
    pub paper: Paper,
    pub quick: bool,
    /// The two setups in one line each ("paper: …", "strong: …").
    pub setups: Vec<String>,
    pub claims: Vec<Claim>,
    pub tables: Vec<Table>,
}

/// Runs the papers' reproductions; a paper that fails does not stop the others.
pub fn run(papers: &[Paper], o: &ReproOptions) -> Result<Parts<Paper, PaperReport>> {
    if o.setup.is_some() && papers.len() != 1 {
        return Err(Error::input("--setup", "a setup file replaces one paper's setup: name the paper (not `all`)"));
    }
    Ok(papers
        .iter()
        .map(|&p| Part {
            key: p,
            result: contained(p.name(), || {
                tracing::info!(paper = p.name(), quick = o.quick, "reproduce start");
                let r = match p {
                    Paper::Fsedp => fsedp::run(o),
                    Paper::Moentwine => moentwine::run(o),
                    Paper::Gps => gps::run(o),
                    Paper::Semmoe => semmoe::run(o),
                };
                tracing::info!(paper = p.name(), ok = r.is_ok(), "reproduce end");
                r.map(|mut rep| {
                    for c in &mut rep.claims {
                        if c.paper_setup.value.is_none() {
                            c.verdict = Verdict::NotRun;
                        }
                    }
                    rep
                })
            }),
        })
        .collect())
}

/// The setup text of paper `p`: the override file, or the embedded one.
pub fn setup_text(p: Paper, o: &ReproOptions) -> Result<String> {
    match &o.setup {
        Some(path) => std::fs::read_to_string(path).map_err(|e| Error::io(Path::new(path), format!("cannot read setup file: {e}"))),
        None => Ok(p.setup_toml().to_string()),
    }
}

/// Parses a setup file into `T` (unknown keys refused, the field path in the error).
pub fn parse_setup<T: serde::de::DeserializeOwned>(p: Paper, text: &str) -> Result<T> {
    let de = toml::Deserializer::new(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        Error::input(format!("{} setup field `{path}`", p.name()), e.into_inner().message())
    })
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn num(m: &Measured) -> String {
    cell(&m.text)
}

/// `claims.md`: one table of claims for all papers, then each paper's setups and tables.
pub fn markdown(reports: &[PaperReport]) -> String {
    let mut s = String::new();
    let quick = reports.iter().any(|r| r.quick);
    let _ = writeln!(s, "# Claims reproduced{}\n", if quick { " (--quick sizes)" } else { "" });
    let _ = writeln!(s, "Written by `waferstream reproduce`; each paper's setup file is `testbenches/papers/NAME.toml`.\n");
    let _ = writeln!(s, "| claim | paper | ours, paper's setup | ours, strong setup | verdict | mechanism |");
    let _ = writeln!(s, "|---|---|---|---|---|---|");
    for r in reports {
        for c in &r.claims {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | **{}** | {} ([why]({})) |",
                cell(&c.claim),
                cell(&c.paper_value),
                num(&c.paper_setup),
                num(&c.strong_setup),
                c.verdict.label(),
                cell(&c.mechanism),
                c.doc
            );
        }
    }
    for r in reports {
        let _ = writeln!(s, "\n## {} — {}\n", r.paper.name(), r.paper.title());
        for l in &r.setups {
            let _ = writeln!(s, "- {l}");
        }
        for c in &r.claims {
            let _ = writeln!(s, "- `{}`: verdict rule: {}", c.id, c.rule);
        }
        for t in &r.tables {
            let _ = writeln!(s, "\n### {}\n", t.title);
            let _ = writeln!(s, "| {} |", t.header.join(" | "));
            let _ = writeln!(s, "|{}", "---|".repeat(t.header.len()));
            for row in &t.rows {
                let _ = writeln!(s, "| {} |", row.iter().map(|x| cell(x)).collect::<Vec<_>>().join(" | "));
            }
        }
    }
    s
}

/// Writes `claims.json` (every report), `claims.md`, and `NAME.json` per paper (one report,
/// the unit [`compare`] reads) into `dir`.
pub fn write(reports: &[PaperReport], dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, format!("cannot create directory: {e}")))?;
    for r in reports {
        let json = serde_json::to_string_pretty(r).map_err(|e| Error::Run(format!("{}.json: {e}", r.paper.name())))?;
        let p = dir.join(format!("{}.json", r.paper.name()));
        std::fs::write(&p, json + "\n").map_err(|e| Error::io(&p, format!("cannot write: {e}")))?;
    }
    let json = serde_json::to_string_pretty(reports).map_err(|e| Error::Run(format!("claims.json: {e}")))?;
    let pj = dir.join("claims.json");
    std::fs::write(&pj, json + "\n").map_err(|e| Error::io(&pj, format!("cannot write: {e}")))?;
    let pm = dir.join("claims.md");
    std::fs::write(&pm, markdown(reports)).map_err(|e| Error::io(&pm, format!("cannot write: {e}")))?;
    Ok(())
}

/// Differences between `reports` and the committed reports in directory `committed`
/// (`NAME.json` per paper, as [`write`] makes them; e.g. `testbenches/papers/quick`): every
/// claim whose numbers, texts or verdict changed, every claim added or gone, a missing file.
/// Empty = the same.
pub fn compare(reports: &[PaperReport], committed: &Path) -> Result<Vec<String>> {
    let mut diffs = Vec::new();
    for r in reports {
        let path = committed.join(format!("{}.json", r.paper.name()));
        let Ok(text) = std::fs::read_to_string(&path) else {
            diffs.push(format!("{}: no committed report {}", r.paper.name(), path.display()));
            continue;
        };
        let o: PaperReport = serde_json::from_str(&text).map_err(|e| Error::input(path.display().to_string(), e))?;
        if o.quick != r.quick {
            diffs.push(format!("{}: quick = {} here, {} committed", r.paper.name(), r.quick, o.quick));
        }
        for c in &r.claims {
            match o.claims.iter().find(|x| x.id == c.id) {
                None => diffs.push(format!("{}: new claim", c.id)),
                Some(x) if x != c => {
                    for (what, a, b) in [
                        ("paper setup", &x.paper_setup.text, &c.paper_setup.text),
                        ("strong setup", &x.strong_setup.text, &c.strong_setup.text),
                    ] {
                        if a != b {
                            diffs.push(format!("{}: {what}: committed `{a}`, now `{b}`", c.id));
                        }
                    }
                    if x.verdict != c.verdict {
                        diffs.push(format!("{}: verdict: committed {}, now {}", c.id, x.verdict.label(), c.verdict.label()));
                    }
                    if x.paper_setup.value != c.paper_setup.value || x.strong_setup.value != c.strong_setup.value {
                        diffs.push(format!(
                            "{}: values: committed {:?}/{:?}, now {:?}/{:?}",
                            c.id, x.paper_setup.value, x.strong_setup.value, c.paper_setup.value, c.strong_setup.value
                        ));
                    }
                    if x.claim != c.claim || x.mechanism != c.mechanism || x.rule != c.rule || x.paper_value != c.paper_value || x.doc != c.doc {
                        diffs.push(format!("{}: wording changed (claim, rule, mechanism or doc link)", c.id));
                    }
                }
                Some(_) => {}
            }
        }
        for x in &o.claims {
            if !r.claims.iter().any(|c| c.id == x.id) {
                diffs.push(format!("{}: gone", x.id));
            }
        }
        if o.tables != r.tables {
            diffs.push(format!("{}: supporting tables changed", r.paper.name()));
        }
    }
    Ok(diffs)
}
