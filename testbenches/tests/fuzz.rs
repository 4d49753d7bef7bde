//! Fuzz harness (issue 5), stable toolchain: seeded mutation of valid inputs, run in process.
//! Property: every input is accepted or refused with a one-line error; never a panic, an
//! abort, or a case slower than `CASE_LIMIT`. Targets are a table: a new input kind (e.g.
//! routing-trace lines) is one more `Target` row.
//!
//! `FUZZ_CASES=N cargo test --release -p waferstream-testbenches --test fuzz` (default 2000
//! per target; `scripts/fuzz.sh N`). A failing case is written to `target/fuzz-crash-*`;
//! copy it to `testbenches/regress/<area>/issue<N>_<slug>.*` with a test.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hw::noc::{run_point, NocCfg, WaveOut};

const CASE_LIMIT: Duration = Duration::from_secs(10);

/// xorshift64*: enough for mutation, no dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Byte-level mutations (flip, insert, delete, truncate, duplicate a span, splice a token).
fn mutate(seed: &[u8], rng: &mut Rng, tokens: &[&[u8]]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for _ in 0..1 + rng.below(6) {
        if b.is_empty() {
            b.push(b'0');
        }
        let p = rng.below(b.len());
        match rng.below(6) {
            0 => b[p] = rng.next() as u8,
            1 => b.insert(p, rng.next() as u8),
            2 => {
                b.remove(p);
            }
            3 => b.truncate(p),
            4 => {
                let e = (p + rng.below(64)).min(b.len());
                let span = b[p..e].to_vec();
                let q = rng.below(b.len());
                b.splice(q..q, span);
            }
            _ => {
                let t = tokens[rng.below(tokens.len())];
                b.splice(p..p, t.iter().copied());
            }
        }
    }
    b
}

struct Target {
    name: &'static str,
    seeds: fn(&Path) -> Vec<Vec<u8>>,
    tokens: &'static [&'static [u8]],
    /// Ok(()) accepted, Err(message) refused; a panic or a hang is the failure.
    check: fn(&Path, &[u8]) -> Result<(), String>,
}

fn dumps(dir: &Path, fst: bool) -> Vec<Vec<u8>> {
    let mut cfg = NocCfg::default();
    cfg.mesh.k = 2;
    cfg.traffic.rate = 0.2;
    let probe = hw::noc::Mesh::new(&cfg).unwrap();
    let signals = probe.signals();
    drop(probe);
    let path = dir.join(if fst { "seed.fst" } else { "seed.vcd" });
    let filter = waves::WaveFilter { globs: vec![], window: Some((0, 40)) };
    let fmt = if fst { waves::WaveFormat::Fst } else { waves::WaveFormat::Vcd };
    let mut w = waves::WaveWriter::create(&path, fmt, cfg.mesh.period_ps(), &signals, &filter).unwrap();
    let (r, _) = run_point(&cfg, Some(WaveOut { sink: &mut w }), &mut |_| {}).unwrap();
    w.finish(r.cycles).unwrap();
    let mut v = vec![std::fs::read(&path).unwrap()];
    if !fst {
        v.push(ICARUS_VCD.as_bytes().to_vec());
    }
    v
}

/// An Icarus Verilog-style dump: $date/$version/$comment, nested scopes, vectors, reals.
const ICARUS_VCD: &str = "$date\n\tSun Nov 22 12:00:00 2026\n$end\n$version\n\tIcarus Verilog\n$end\n$timescale\n\t1ps\n$end\n$scope module tb $end\n$var reg 1 ! clk $end\n$var reg 8 \" data [7:0] $end\n$scope module dut $end\n$var wire 1 # valid $end\n$var real 1 $ temp $end\n$upscope $end\n$upscope $end\n$enddefinitions $end\n#0\n$dumpvars\n0!\nb0 \"\nx#\nr0 $\n$end\n#5\n1!\nb1010 \"\n1#\n#10\n0!\nr1.5 $\n#15\n1!\nbx \"\n0#\n";

fn wave_check(dir: &Path, bytes: &[u8], ext: &str) -> Result<(), String> {
    let p = dir.join(format!("case.{ext}"));
    std::fs::write(&p, bytes).unwrap();
    let a = waves::stats(&p).map(drop).map_err(|e| e.to_string());
    let q = dir.join(format!("seed.{ext}"));
    let b = waves::diff(&p, &q).map(drop).map_err(|e| e.to_string());
    a.and(b)
}

fn configs(_: &Path) -> Vec<Vec<u8>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut out = vec![];
    let mut stack = vec![root.join("configs"), root.join("regress")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "toml") {
                out.push(std::fs::read(&p).unwrap());
            }
        }
    }
    assert!(!out.is_empty());
    out
}

fn toml_check(_: &Path, bytes: &[u8]) -> Result<(), String> {
    let text = std::str::from_utf8(bytes).map_err(|e| e.to_string())?;
    // The shipped files are NoC configs or scenarios; both are parsed and validated.
    if let Ok(c) = toml::from_str::<NocCfg>(text) {
        c.validate().map_err(|e| e.to_string())?;
        // Bounded simulation: only small meshes are run (the property is about parsing and
        // validation; run time of big meshes is a documented limit).
        if c.mesh.k <= 4 && c.measure.max_samples <= 20 {
            let _ = run_point(&c, None, &mut |_| {});
        }
        return Ok(());
    }
    toml::from_str::<toml::Value>(text).map(drop).map_err(|e| e.to_string())
}

const TARGETS: &[Target] = &[
    Target { name: "vcd", seeds: |d| dumps(d, false), tokens: &[b"$scope module x $end\n", b"$upscope $end\n", b"#", b"b", b"x", b"$end", b"\n#0\n", b"$var wire 0 % y $end\n", b"r1e999 !\n"], check: |d, b| wave_check(d, b, "vcd") },
    Target { name: "fst", seeds: |d| dumps(d, true), tokens: &[&[0xff; 8], &[0; 8], &[0x80; 4]], check: |d, b| wave_check(d, b, "fst") },
    Target { name: "toml", seeds: configs, tokens: &[b"k = 0\n", b"k = 128\n", b"rate = 1e308\n", b"[mesh]\n", b"= nan\n", b"\"", b"[[", b"link_latency = 4294967295\n", b"clock_mhz = 1e12\n"], check: toml_check },
];

fn cases() -> u64 {
    std::env::var("FUZZ_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(2000)
}

fn fuzz(t: &Target) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("fuzz-{}", t.name));
    std::fs::create_dir_all(&dir).unwrap();
    let seeds = (t.seeds)(&dir);
    let n = cases();
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut failure: Option<String> = None;
    let start = Instant::now();
    let (mut ok, mut refused) = (0u64, 0u64);
    'cases: for i in 0..n {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (i + 1).wrapping_mul(0x1000_0000_01b3));
        let seed = &seeds[rng.below(seeds.len())];
        let input = mutate(seed, &mut rng, t.tokens);
        let t0 = Instant::now();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (t.check)(&dir, &input)));
        let dt = t0.elapsed();
        let crash = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("fuzz-crash-{}-{i}", t.name));
        match r {
            Err(_) => {
                std::fs::write(&crash, &input).unwrap();
                failure = Some(format!("{} case {i}: panic; input saved to {}", t.name, crash.display()));
                break 'cases;
            }
            Ok(Err(msg)) => {
                // TOML errors are multi-line by design (a caret under the column); the CLI
                // folds every error onto one line. Waveform errors must be one line here.
                if msg.trim().is_empty() || (t.name != "toml" && msg.contains('\n')) {
                    std::fs::write(&crash, &input).unwrap();
                    failure = Some(format!("{} case {i}: multi-line error {msg:?}; input in {}", t.name, crash.display()));
                    break 'cases;
                }
                refused += 1;
            }
            Ok(Ok(())) => ok += 1,
        }
        if dt > CASE_LIMIT {
            std::fs::write(&crash, &input).unwrap();
            failure = Some(format!("{} case {i}: {:.1} s (hang?); input in {}", t.name, dt.as_secs_f64(), crash.display()));
            break 'cases;
        }
    }
    std::panic::set_hook(prev);
    if let Some(f) = failure {
        panic!("{f}");
    }
    eprintln!("fuzz {}: {n} cases ({ok} accepted, {refused} refused) in {:.1} s, 0 failures", t.name, start.elapsed().as_secs_f64());
}

#[test]
fn fuzz_vcd() {
    fuzz(&TARGETS[0]);
}
#[test]
fn fuzz_fst() {
    fuzz(&TARGETS[1]);
}
#[test]
fn fuzz_toml() {
    fuzz(&TARGETS[2]);
}
