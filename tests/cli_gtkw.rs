//! `--gtkw FILE` and `wave gtkw`: a GTKWave save file per dump whose every listed signal is a
//! variable of that dump (checked by reading the VCD's `$scope`/`$var` lines here, not
//! through the waves crate), grouped by block in the documented order, with its `[dumpfile]`
//! the dump; refused without a dump flag.

use std::collections::HashSet;
use std::path::Path;
use std::process::Command;

fn ws(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_waferstream")).args(args).env("RUST_LOG", "warn").output().unwrap()
}

/// Full names `scope.scope.name` of a VCD's variables, from its header text.
fn vcd_vars(p: &Path) -> HashSet<String> {
    let text = std::fs::read_to_string(p).unwrap();
    let mut scopes: Vec<String> = Vec::new();
    let mut vars = HashSet::new();
    for l in text.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        match w.first() {
            Some(&"$scope") => scopes.push(w[2].to_string()),
            Some(&"$upscope") => {
                scopes.pop();
            }
            Some(&"$var") => {
                vars.insert(format!("{}.{}", scopes.join("."), w[4]));
            }
            Some(&"$enddefinitions") => break,
            _ => {}
        }
    }
    vars
}

fn check(gtkw: &Path, dump: &Path, kinds_in_order: &[&str]) {
    let text = std::fs::read_to_string(gtkw).unwrap();
    assert!(text.contains(&format!("[dumpfile] \"{}\"", std::fs::canonicalize(dump).unwrap().display())), "{text:.300}");
    let vars = vcd_vars(dump);
    let listed: Vec<&str> = text.lines().filter(|l| l.starts_with("top.")).collect();
    assert!(!listed.is_empty());
    for l in &listed {
        let name = l.split('[').next().unwrap();
        assert!(vars.contains(name), "{name} is not a variable of {}", dump.display());
    }
    // Groups open and close in pairs, kinds in the documented order.
    let opens: Vec<&str> = text.lines().zip(text.lines().skip(1)).filter(|(f, _)| *f == "@2800200").map(|(_, t)| t).collect();
    let closes = text.lines().filter(|l| *l == "@3000200").count();
    assert_eq!(opens.len(), closes);
    let mut pos = 0;
    for k in kinds_in_order {
        let i = opens.iter().position(|t| t.starts_with(&format!("-{k} "))).unwrap_or_else(|| panic!("no {k} group in {opens:?}"));
        assert!(i >= pos, "{k} out of order: {opens:?}");
        pos = i;
    }
}

#[test]
fn package_and_noc_dumps_get_a_layout_by_block() {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli_gtkw");
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let (vcd, g) = (d.join("p.vcd"), d.join("p.gtkw"));
    let o = ws(&["package", "--model", "functional", "--tokens", "8", "--strategy", "ep,a3", "--vcd", vcd.to_str().unwrap(), "--gtkw", g.to_str().unwrap(), "--quiet"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for s in ["ep", "a3"] {
        check(&d.join(format!("p-{s}.gtkw")), &d.join(format!("p-{s}.vcd")), &["IO die", "link", "router", "chiplet"]);
    }
    let (nv, ng) = (d.join("n.vcd"), d.join("n.gtkw"));
    let o = ws(&["noc", "--k", "2", "--rates", "0.1", "--vcd", nv.to_str().unwrap(), "--gtkw", ng.to_str().unwrap(), "--quiet"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    check(&ng, &nv, &["router", "NI"]);
    // `wave gtkw` on an existing dump writes the same layout.
    let g2 = d.join("again.gtkw");
    assert!(ws(&["wave", "gtkw", nv.to_str().unwrap(), "--out", g2.to_str().unwrap()]).status.success());
    assert_eq!(std::fs::read_to_string(&g2).unwrap(), std::fs::read_to_string(&ng).unwrap());
    // No dump flag: refused before running.
    let o = ws(&["package", "--model", "functional", "--tokens", "8", "--gtkw", d.join("x.gtkw").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--gtkw"));
}
