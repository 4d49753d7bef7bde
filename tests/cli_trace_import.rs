//! Issue 19: `trace import` of an `expert_counts.csv` names the flag at fault (not the
//! generator's config field) and calls a negative count negative.

use std::process::Command;

fn import(csv: &str, args: &[&str]) -> String {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli_trace_import");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join(format!("c{}.csv", args.join("_").replace('-', "")));
    std::fs::write(&src, csv).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_waferstream"))
        .args(["trace", "import"])
        .arg(&src)
        .arg("--out")
        .arg(dir.join("out.jsonl"))
        .args(args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?} was accepted");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

const H: &str = "model,domain,selection,layer,expert,count\n";

#[test]
fn trace_import_errors_name_the_flag() {
    let two = format!("{H}olmoe,arxiv,topk,0,0,3\nolmoe,arxiv,topk,0,1,5\n");
    let e = import(&two, &[]);
    assert!(e.contains("--top-k: 8 (the default for --counts-model olmoe) outside 1..=2"), "{e}");
    assert!(!e.contains("config field"), "{e}");
    let e = import(&two, &["--top-k", "0"]);
    assert!(e.contains("--top-k: 0 outside 1..=2"), "{e}");
    let e = import(&two, &["--top-k", "1", "--tokens-per-iter", "0"]);
    assert!(e.contains("--tokens-per-iter: must be at least 1"), "{e}");
    let e = import(&two, &["--top-k", "1", "--iters", "0"]);
    assert!(e.contains("--iters: must be at least 1"), "{e}");
    let e = import(&format!("{H}olmoe,arxiv,topk,0,1,-5\n"), &[]);
    assert!(e.contains("line 2: count: -5 is negative"), "{e}");
}
