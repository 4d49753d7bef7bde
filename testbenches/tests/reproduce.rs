//! `reproduce --quick` against the committed quick reports (testbenches/papers/quick/NAME.json):
//! any change of a number, verdict or wording fails with the list of claims that moved. A
//! deliberate change regenerates the files with
//! `cargo run --release -- reproduce all --quick --out testbenches/papers/quick` and commits
//! them with the reason.

use std::path::Path;

use testbenches::run::reproduce::{self, Paper, ReproOptions};

fn check(p: Paper) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("papers/quick");
    assert!(dir.join(format!("{}.json", p.name())).is_file(), "committed quick report for {} is missing", p.name());
    let parts = reproduce::run(&[p], &ReproOptions { quick: true, threads: Some(1), setup: None }).unwrap();
    assert!(parts.failed.is_empty(), "{:?}", parts.failed);
    let reports: Vec<_> = parts.ok.into_iter().map(|(_, r)| r).collect();
    assert!(!reports[0].claims.is_empty(), "{}: no claims", p.name());
    let diffs = reproduce::compare(&reports, &dir).unwrap();
    assert!(diffs.is_empty(), "{} quick reproduction moved from the committed report:\n{}", p.name(), diffs.join("\n"));
}

#[test]
fn fsedp_quick_matches_committed() {
    check(Paper::Fsedp);
}

#[test]
fn moentwine_quick_matches_committed() {
    check(Paper::Moentwine);
}

#[test]
fn gps_quick_matches_committed() {
    check(Paper::Gps);
}

#[test]
fn semmoe_quick_matches_committed() {
    check(Paper::Semmoe);
}
