//! The README's walkthrough runs as written: every command of its `## Walkthrough` block, in
//! order, from a fresh directory that holds only what the repository ships (`testbenches/`,
//! `scripts/`), with `cargo run --release --` standing for this build's binary. A command
//! that fails, or an input it names that no earlier command wrote, fails the test. Afterwards
//! nothing the walkthrough wrote without being asked for a waveform is bigger than a few MB.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The command lines of the README's walkthrough block (comments and blank lines dropped).
fn walkthrough(readme: &str) -> Vec<String> {
    let section = readme.split("\n## Walkthrough").nth(1).expect("README.md has a `## Walkthrough` section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let block = section.split("```sh").nth(1).expect("the walkthrough has a ```sh block");
    let block = block.split("```").next().unwrap_or(block);
    block.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(str::to_string).collect()
}

fn files(dir: &Path, out: &mut Vec<(PathBuf, u64)>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push((p.clone(), e.metadata().unwrap().len()));
        }
    }
}

#[test]
fn readme_walkthrough_runs_as_written() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let cmds = walkthrough(&readme);
    assert!(cmds.len() >= 20, "the walkthrough lost commands: {cmds:?}");
    let dir = std::env::temp_dir().join(format!("waferstream-readme-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for shipped in ["testbenches", "scripts"] {
        std::os::unix::fs::symlink(root.join(shipped), dir.join(shipped)).unwrap();
    }
    let bin = env!("CARGO_BIN_EXE_waferstream");
    for c in &cmds {
        let line = match c.strip_prefix("cargo run --release -- ") {
            Some(rest) => format!("'{bin}' {rest}"),
            None => panic!("walkthrough line is not a `cargo run --release --` command: {c}"),
        };
        let out = Command::new("sh").arg("-c").arg(&line).current_dir(&dir).env("RUST_LOG", "warn").output().expect("spawn sh");
        assert!(out.status.success(), "README command failed ({}): {c}\nstdout:\n{}\nstderr:\n{}", out.status, String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        // The outputs it names exist (a waveform of several parts is one file per part).
        let args: Vec<&str> = c.split_whitespace().collect();
        for w in args.windows(2) {
            if matches!(w[0], "--json" | "--junit" | "--out" | "--plot") {
                assert!(dir.join(w[1]).exists(), "{c}: wrote no {}", w[1]);
            }
        }
    }
    // No default writes more than a few MB: only asked-for waveforms may be big.
    let mut written = Vec::new();
    files(&dir.join("out"), &mut written);
    for (p, len) in &written {
        let wave = p.extension().is_some_and(|e| e == "vcd" || e == "fst");
        assert!(wave || *len < 5_000_000, "{} is {len} bytes", p.display());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
