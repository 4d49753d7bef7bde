//! Fuzz targets run in process (issue 5), on the harness in `testbenches::fuzz`: seeded
//! mutation of valid inputs. Property: every input is accepted or refused with a message;
//! never a panic, an abort, a case over its time bound (10 s) or its heap bound (256 MiB).
//! Targets are a table: a new input kind is one more `Target` row. The CLI argument target
//! spawns the binary and lives in the root package (`tests/fuzz_cli.rs`).
//!
//! `FUZZ_CASES=N cargo test --release -p waferstream-testbenches --test fuzz` (default 2000
//! per target; `scripts/fuzz.sh N`). A failing case is written to
//! `target/tmp/fuzz-<target>/fuzz-crash-*`; copy it to
//! `testbenches/regress/<area>/issue<N>_<slug>.*` with a test in `regress_corpus.rs`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hw::noc::{run_point, NocCfg, WaveOut};
use hw::pkg::config::PkgCfg;
use hw::wafer::WaferCfg;
use sched::trace::{load_trace, parse_trace, trace_stats, trace_to_string, TraceError};
use testbenches::fuzz::{fuzz_test, mutate_lines, CountingAlloc, Target};

/// Heap accounting for the per-case memory bound.
#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

const TIME: Duration = Duration::from_secs(10);
const MEM: usize = 256 << 20;

// ----- waveforms

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
    if fst {
        // A windowed FST too (its start time is the window's, not 0).
        let p = dir.join("seed-window.fst");
        let filter = waves::WaveFilter { globs: vec!["top.mesh.r_0_*".into()], window: Some((100, 130)) };
        let mut w = waves::WaveWriter::create(&p, fmt, cfg.mesh.period_ps(), &signals, &filter).unwrap();
        let (r, _) = run_point(&cfg, Some(WaveOut { sink: &mut w }), &mut |_| {}).unwrap();
        w.finish(r.cycles).unwrap();
        v.push(std::fs::read(&p).unwrap());
    } else {
        v.push(ICARUS_VCD.as_bytes().to_vec());
    }
    // A package dump, so mutations reach `wave check`'s checkers (issue 19: they loaded
    // signals outside the reader's panic containment).
    v.push(package_dump(dir, fmt));
    v
}

/// A traced functional 2x2 package run (the seed of the package checkers).
fn package_dump(dir: &Path, fmt: waves::WaveFormat) -> Vec<u8> {
    use hw::pkg::config::Strategy;
    use hw::pkg::package::{LayerInput, Package};
    let g = sched::workload::GenCfg { experts: 8, top_k: 2, layers: 1, tokens_per_iter: 8, iters: 1, seed: 3, ..Default::default() };
    let t = sched::workload::generate(&g).unwrap();
    let l = LayerInput { routing: t.routing(0..t.tokens.len(), 0), experts: 8, d_model: 32, d_ffn: 16, requests: None };
    let mut c = PkgCfg { rows: 2, cols: 2, ..Default::default() };
    c.pe.rows = 4;
    c.pe.cols = 4;
    let mut p = Package::new(&c, Strategy::A3, &l, true).unwrap();
    let path = dir.join(if fmt == waves::WaveFormat::Fst { "seed-pkg.fst" } else { "seed-pkg.vcd" });
    let mut w = waves::WaveWriter::create(&path, fmt, p.tick_ps(), &p.signals(), &waves::WaveFilter::default()).unwrap();
    let r = p.run(Some(&mut w)).unwrap();
    w.finish(r.latency_cycles + 1).unwrap();
    std::fs::read(&path).unwrap()
}

/// An Icarus Verilog-style dump: $date/$version/$comment, nested scopes, vectors, reals.
const ICARUS_VCD: &str = "$date\n\tSun Nov 22 12:00:00 2026\n$end\n$version\n\tIcarus Verilog\n$end\n$timescale\n\t1ps\n$end\n$scope module tb $end\n$var reg 1 ! clk $end\n$var reg 8 \" data [7:0] $end\n$scope module dut $end\n$var wire 1 # valid $end\n$var real 1 $ temp $end\n$upscope $end\n$upscope $end\n$enddefinitions $end\n#0\n$dumpvars\n0!\nb0 \"\nx#\nr0 $\n$end\n#5\n1!\nb1010 \"\n1#\n#10\n0!\nr1.5 $\n#15\n1!\nbx \"\n0#\n";

fn wave_check(dir: &Path, bytes: &[u8], ext: &str) -> Result<(), String> {
    let p = dir.join(format!("case.{ext}"));
    std::fs::write(&p, bytes).unwrap();
    let a = waves::stats(&p).map(drop).map_err(|e| e.to_string());
    let q = dir.join(format!("seed.{ext}"));
    let b = waves::diff(&p, &q).map(drop).map_err(|e| e.to_string());
    // The checkers too (they read every signal); "no checker applies" is a refusal.
    let c = waves::check_dump(&p).map(drop).map_err(|e| e.to_string());
    a.and(b).and(c)
}

// ----- NoC configs and scenarios

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
        let cycles = c.measure.sample_period.saturating_mul(c.measure.warmup_periods.saturating_add(c.measure.max_samples));
        if c.mesh.k <= 4 && cycles <= 200_000 {
            let _ = run_point(&c, None, &mut |_| {});
        }
        return Ok(());
    }
    toml::from_str::<toml::Value>(text).map(drop).map_err(|e| e.to_string())
}

// ----- routing traces (SPEC §8, sched::trace)

const TRACE_H: &str = r#"{"format": "waferstream-trace/1", "model": "t", "experts": 8, "top_k": 2, "layers": 2}"#;

fn traces(_: &Path) -> Vec<Vec<u8>> {
    let tok = |iter: u32, l0: &str, l1: &str| format!(r#"{{"iter": {iter}, "req": 0, "pos": {iter}, "layers": [{l0}, {l1}]}}"#);
    let small = [TRACE_H.to_string(), tok(0, "[0,1]", "[2,3]"), tok(0, "[4,5]", "[6,7]"), tok(1, "[1,0]", "[7,2]")].join("\n") + "\n";
    let scored = [
        TRACE_H.to_string(),
        r#"{"iter": 0, "req": 3, "pos": 17, "token_id": 1512, "layers": [[0,1],[2,3]], "scores": [[0.75,0.25],[0.5,0.5]]}"#.to_string(),
        String::new(),
        r#"{"iter": 2, "req": 4, "pos": 0, "layers": [[7,6],[5,4]]}"#.to_string(),
    ]
    .join("\n");
    let gen = sched::workload::GenCfg { experts: 16, top_k: 4, layers: 3, tokens_per_iter: 6, iters: 3, ..Default::default() };
    let generated = trace_to_string(&sched::workload::generate(&gen).unwrap());
    // Huge and degenerate shapes (issue 19): the most layers a header may declare at top-1
    // (a token line of 4096 rows), the most experts with a wide top-k, a header alone, and
    // one expert chosen by every token of one long iteration.
    let header = |experts: u32, top_k: u32, layers: u32| format!(r#"{{"format": "waferstream-trace/1", "experts": {experts}, "top_k": {top_k}, "layers": {layers}}}"#);
    let mut deep = header(64, 1, 4096);
    for t in 0..3 {
        let rows: Vec<String> = (0..4096).map(|l| format!("[{}]", (t * 5 + l * 3) % 64)).collect();
        deep.push_str(&format!("\n{{\"iter\": {t}, \"req\": 0, \"pos\": {t}, \"layers\": [{}]}}", rows.join(",")));
    }
    let mut wide = header(65536, 64, 2);
    for t in 0..2u32 {
        let row = |l: u32| (0..64).map(|k| ((k * 1021 + l * 7 + t) % 65536).to_string()).collect::<Vec<_>>().join(",");
        wide.push_str(&format!("\n{{\"iter\": 0, \"req\": {t}, \"pos\": 0, \"layers\": [[{}],[{}]]}}", row(0), row(1)));
    }
    let mut one = header(1, 1, 1);
    for t in 0..500 {
        one.push_str(&format!("\n{{\"iter\": 0, \"req\": {t}, \"pos\": 0, \"layers\": [[0]]}}"));
    }
    vec![small.into_bytes(), scored.into_bytes(), generated.into_bytes(), (deep + "\n").into_bytes(), (wide + "\n").into_bytes(), header(8, 2, 2).into_bytes(), (one + "\n").into_bytes()]
}

/// Ok, or an error naming a line of the input (the file itself only when it is not text);
/// an accepted trace reads back identically after writing.
fn trace_check(dir: &Path, bytes: &[u8]) -> Result<(), String> {
    let r = match std::str::from_utf8(bytes) {
        Ok(text) => parse_trace(text),
        Err(_) => {
            let p = dir.join("case.jsonl");
            std::fs::write(&p, bytes).unwrap();
            load_trace(&p)
        }
    };
    match r {
        Ok(t) => {
            let _ = trace_stats(&t);
            let again = parse_trace(&trace_to_string(&t)).map_err(|e| e.to_string());
            assert!(again.as_ref() == Ok(&t), "accepted trace does not read back: {again:?}");
            Ok(())
        }
        Err(TraceError::Line { line, msg, .. }) => {
            let lines = bytes.split(|&b| b == b'\n').count().max(1);
            assert!((1..=lines).contains(&line), "error names line {line} of a {lines}-line input: {msg}");
            Err(format!("line {line}: {msg}"))
        }
        Err(e @ TraceError::Io { .. }) => {
            assert!(std::str::from_utf8(bytes).is_err(), "file error for a text input: {e}");
            Err(e.to_string())
        }
    }
}

// ----- package config (hw::pkg::config::PkgCfg)

fn pkg_configs(_: &Path) -> Vec<Vec<u8>> {
    let mut v = vec![PkgCfg::default()];
    let mut c = PkgCfg { rows: 4, cols: 4, ring_slots: 6, ddr_reserve: 2, core_mhz: 1000.0, ..PkgCfg::default() };
    v.push(c.clone());
    c.rows = 3;
    c.cols = 3;
    c.micro_slices = 4;
    c.flit_bytes = 64;
    c.weight_buffer_bytes = 1 << 20;
    c.loaders = hw::pkg::config::Loaders::All;
    c.pe.fuse_gate_up = true;
    c.sim.timeline = true;
    c.sim.batch_jobs = 2;
    v.push(c);
    let mut out: Vec<Vec<u8>> = v.iter().map(|c| toml::to_string(c).unwrap().into_bytes()).collect();
    out.push(b"rows = 1\ncols = 1\n".to_vec());
    out.push(Vec::new()); // all defaults
    // Clocks, links and error rates near what the engine can represent (issue 19).
    for t in [
        &b"ddr_phase_ps = 1\ncore_mhz = 50\n"[..],
        b"core_mhz = 500\nucie_mhz = 1000\nddr_mhz = 400\n",
        b"core_mhz = 1000\nucie_mhz = 1000\n",
        b"[router]\nvcs = 1\nvc_buf = 1\nst_delay = 30\n",
        b"[ucie]\nber = 0.002\ngt_per_s = 1000\nfdi_latency_ps = 40000\n",
    ] {
        out.push(t.to_vec());
    }
    out
}

/// A config's `validate` refused it: the error must name one of the config's own fields (its
/// first path segment, before any `.` or `[`); returns the error's text.
fn refusal<T: serde::Serialize + Default>(field: &str, e: impl std::fmt::Display) -> String {
    let fields = toml::Value::try_from(T::default()).unwrap();
    let head = field.split(['.', '[']).next().unwrap_or("");
    assert!(fields.as_table().unwrap().contains_key(head), "validate error names no {} field: {e}", std::any::type_name::<T>());
    e.to_string()
}

/// Parse error, or a validate error naming one of PkgCfg's fields, or Ok — and then the
/// config's derived values are sane (no wrap-around in `rows × cols`, a real clock) and the
/// config simulates (issue 19: configs that validated panicked in the engine): a tiny
/// functional layer (8 tokens of the `functional` model) runs under one strategy per case,
/// bounded by the watchdog and a cycle limit. An error is fine (a refusal, the watchdog);
/// a panic fails the case, and a finished run must match the dense reference.
fn pkg_check(_: &Path, bytes: &[u8]) -> Result<(), String> {
    use hw::pkg::config::Strategy;
    use hw::pkg::package::{LayerInput, Package};
    let text = std::str::from_utf8(bytes).map_err(|e| e.to_string())?;
    let mut c: PkgCfg = toml::from_str(text).map_err(|e| e.to_string())?;
    match c.validate() {
        Err(e) => Err(refusal::<PkgCfg>(&e.field.clone(), e)),
        Ok(()) => {
            let chiplets = c.rows.checked_mul(c.cols);
            assert!(chiplets.is_some_and(|n| (1..=16).contains(&n)), "accepted {}x{} chiplets (rows x cols wraps to {})", c.rows, c.cols, c.chiplets());
            assert!(c.core_period_ps() >= 1, "accepted core_mhz {} (period 0 ps)", c.core_mhz);
            let _ = c.slots_for(1 << 20);
            let _ = c.validate_for(c.micro_slices);
            // The tiny layer takes 10-20 k cycles; a noisy link (BER 2e-3 behind a 40 ns FDI
            // latency) can take 1.4 M, valid but past the case's time bound: a cycle limit
            // (an error, fine here) keeps every case well within it.
            c.sim.max_cycles = c.sim.max_cycles.min(100_000);
            c.sim.watchdog_cycles = c.sim.watchdog_cycles.min(20_000);
            let g = sched::workload::GenCfg { model: None, experts: 16, top_k: 2, layers: 1, tokens_per_iter: 8, iters: 1, seed: c.seed, ..Default::default() };
            let t = sched::workload::generate(&g).unwrap();
            let layer = LayerInput { routing: t.routing(0..t.tokens.len(), 0), experts: 16, d_model: 64, d_ffn: 48, requests: None };
            let strategy = Strategy::ALL[bytes.len() % Strategy::ALL.len()];
            let r = Package::new(&c, strategy, &layer, true).and_then(|mut p| p.run(None)).map_err(|e| e.to_string())?;
            assert_eq!(r.outputs_match_reference, Some(true), "{strategy:?}: a finished functional run differs from the dense reference");
            Ok(())
        }
    }
}

const TARGETS: &[Target] = &[
    Target {
        name: "vcd",
        seeds: |d| dumps(d, false),
        tokens: &[b"$scope module x $end\n", b"$upscope $end\n", b"#", b"b", b"x", b"$end", b"\n#0\n", b"$var wire 0 % y $end\n", b"r1e999 !\n"],
        mutate: None,
        check: |d, b| wave_check(d, b, "vcd"),
        multiline_ok: false,
        time_limit: TIME,
        mem_limit: MEM,
        known: &[],
    },
    Target {
        name: "fst",
        seeds: |d| dumps(d, true),
        tokens: &[&[0xff; 8], &[0; 8], &[0x80; 4]],
        mutate: None,
        check: |d, b| wave_check(d, b, "fst"),
        multiline_ok: false,
        time_limit: TIME,
        mem_limit: MEM,
        known: &[],
    },
    Target {
        name: "toml",
        seeds: configs,
        tokens: &[b"k = 0\n", b"k = 128\n", b"rate = 1e308\n", b"[mesh]\n", b"= nan\n", b"\"", b"[[", b"link_latency = 4294967295\n", b"clock_mhz = 1e12\n"],
        mutate: Some(mutate_lines),
        check: toml_check,
        multiline_ok: true,
        time_limit: TIME,
        mem_limit: MEM,
        known: &[],
    },
    Target {
        name: "trace",
        seeds: traces,
        tokens: &[
            b"\n",
            b"{\"iter\": 0, \"req\": 0, \"pos\": 0, \"layers\": [[0,1],[2,3]]}\n",
            b"[0,1]",
            b"65535",
            b"4294967296",
            b"-1",
            b"1e999",
            b"null",
            b"\"scores\": [[1e40, 0.5]], ",
            b"\"layers\": 4096",
            b"\"experts\": 65536",
            b"\"top_k\": 0",
            b"\xff\xfe",
        ],
        mutate: Some(mutate_lines),
        check: trace_check,
        multiline_ok: false,
        time_limit: TIME,
        mem_limit: MEM,
        known: &[],
    },
    Target {
        name: "pkgcfg",
        seeds: pkg_configs,
        tokens: &[
            b"rows = 65536\n",
            b"cols = 65536\n",
            b"rows = 4294967295\n",
            b"core_mhz = 1e-300\n",
            b"core_mhz = nan\n",
            b"ring_slots = 1\n",
            b"ddr_reserve = 4294967295\n",
            b"micro_slices = 0\n",
            b"weight_buffer_bytes = 18446744073709551615\n",
            b"flit_bytes = 0\n",
            b"seed = -1\n",
            b"ddr_phase_ps = 1\n",
            b"ddr_mhz = 10\n",
            b"ucie_mhz = 10000\n",
            b"st_delay = 64\n",
            b"fdi_latency_ps = 1000000000\n",
            b"ber = 0.01\n",
            b"vcs = 1\n",
            b"vc_buf = 1\n",
            b"bogus = 1\n",
            b"[x]\n",
            b"0",
            b"9",
        ],
        mutate: Some(mutate_lines),
        check: pkg_check,
        multiline_ok: true,
        time_limit: TIME,
        mem_limit: MEM,
        known: &[],
    },
    Target {
        name: "scenariocfg",
        seeds: scenario_configs,
        tokens: &[
            b"experts = 0\n",
            b"experts = 4294967295\n",
            b"top_k = 200\n",
            b"iters = 4294967295\n",
            b"tokens_per_iter = 0\n",
            b"scenarios = []\n",
            b"scenarios = [\"nosuch\"]\n",
            b"affinity = 1.5\n",
            b"skew = nan\n",
            b"vocab = 0\n",
            b"clusters = 4294967295\n",
            b"req_len = [0, 0]\n",
            b"[mix]\nfixed = \"math\"\n",
            b"[mix.mixed]\nperiod_iters = 0\n",
            b"bogus = 1\n",
            b"0",
        ],
        mutate: Some(mutate_lines),
        check: scenario_check,
        multiline_ok: true,
        time_limit: TIME,
        mem_limit: MEM,
        known: &[],
    },
    Target {
        name: "wafercfg",
        seeds: wafer_configs,
        tokens: &[
            b"die_cols = 65536\n",
            b"wafers_x = 4294967295\n",
            b"tp = 0\n",
            b"tp = 3\n",
            b"dp = 1\n",
            b"clock_mhz = nan\n",
            b"flit_bytes = 1\n",
            b"link_bytes_per_cycle = 1\n",
            b"link_latency_ns = 1e300\n",
            b"border_tbps = 1e-9\n",
            b"packet_flits = 0\n",
            b"micro_batches = 65\n",
            b"tokens_per_group = 1\n",
            b"mapping = \"her\"\n",
            b"mapping = \"nosuch\"\n",
            b"[die]\nhbm_tbps = 0\n",
            b"[router]\nvcs = 13\n",
            b"[router]\nvcs = 12\n",
            b"migration_vc = true\n",
            b"migration_idle_cycles = 4294967295\n",
            b"dispatch_elem_bytes = 2\n",
            b"dispatch_elem_bytes = 3\n",
            b"replica_split = \"even\"\n",
            b"replica_split = \"nosuch\"\n",
            b"bogus = 1\n",
            b"0",
            b"9",
        ],
        mutate: Some(mutate_lines),
        check: wafer_check,
        multiline_ok: true,
        time_limit: TIME,
        mem_limit: MEM,
        known: &[],
    },
    Target {
        name: "balancecfg",
        seeds: balance_configs,
        tokens: &[
            b"shadow_slots = 65\n",
            b"shadow_slots = 0\n",
            b"alpha = nan\n",
            b"alpha = -1\n",
            b"alpha = 1e308\n",
            b"invasive_beta_cycles = 18446744073709551615\n",
            b"window_iters = 0\n",
            b"window_iters = 4294967295\n",
            b"chunk_flits = 0\n",
            b"chunk_flits = 1\n",
            b"warmup_iters = 4294967295\n",
            b"bogus = 1\n",
            b"0",
        ],
        mutate: Some(mutate_lines),
        check: balance_check,
        multiline_ok: true,
        time_limit: TIME,
        mem_limit: MEM,
        known: &[],
    },
];

fn balance_configs(_: &Path) -> Vec<Vec<u8>> {
    use hw::wafer::balance::BalanceCfg;
    let small = BalanceCfg { shadow_slots: 1, alpha: 0.0, window_iters: 1, chunk_flits: 4, warmup_iters: 1, ..BalanceCfg::default() };
    let mut out: Vec<Vec<u8>> = [BalanceCfg::default(), small].iter().map(|c| toml::to_string(c).unwrap().into_bytes()).collect();
    out.push(Vec::new());
    out
}

/// Parse error, or a validate error naming a BalanceCfg field, or Ok — and then three
/// iterations of a tiny 2×2 wafer under every balancer finish, the non-invasive one without
/// stalls and every migration it started delivered or still in flight (never lost).
fn balance_check(_: &Path, bytes: &[u8]) -> Result<(), String> {
    use hw::wafer::balance::{BalanceCfg, BalancerKind};
    use testbenches::run::{balance::run_balance, RunOptions};
    let text = std::str::from_utf8(bytes).map_err(|e| e.to_string())?;
    let b: BalanceCfg = toml::from_str(text).map_err(|e| e.to_string())?;
    if let Err(e) = b.validate() {
        return Err(refusal::<BalanceCfg>(&e.field.clone(), e));
    }
    let c = WaferCfg { die_cols: 2, die_rows: 2, tp: 2, dp: 2, tokens_per_group: 8, micro_batches: 1, ..WaferCfg::default() };
    let model = sched::models::model_by_name("olmoe-1b-7b").unwrap();
    let m = sched::wafer::map(c.mapping, c.geom(), c.tp, c.dp, c.all_gather).map_err(|e| e.to_string())?;
    let routing: Vec<_> = (0..3).map(|i| sched::wafer::routing::generated_routing(&model, c.dp, c.tokens_per_group, 1.5, i).unwrap()).collect();
    for k in BalancerKind::ALL {
        let r = run_balance(&c, &model, &m, &b, k, &routing, &RunOptions::default(), None, &mut |_| {}).map_err(|e| e.to_string())?;
        assert_eq!(r.iterations.len(), 3);
        if k == BalancerKind::TopoNi {
            assert_eq!(r.migration_stall_cycles, 0, "the non-invasive balancer stalled");
        }
    }
    Ok(())
}

fn scenario_configs(_: &Path) -> Vec<Vec<u8>> {
    use sched::scenario::{Mix, ScenarioCfg};
    let small = ScenarioCfg { experts: 16, top_k: 2, layers: 2, tokens_per_iter: 8, iters: 6, warmup_iters: 2, vocab: 64, clusters: 4, ..ScenarioCfg::default() };
    let mixed = ScenarioCfg { mix: Mix::Mixed { period_iters: 4 }, ..small.clone() };
    let coherent = ScenarioCfg { coherence: Some(sched::scenario::Coherence { share: 0.8, clusters_per_request: 2 }), ..small.clone() };
    let mut out: Vec<Vec<u8>> = [small, mixed, coherent].iter().map(|c| toml::to_string(c).unwrap().into_bytes()).collect();
    out.push(Vec::new());
    out
}

/// Parse error, or a validate error naming a ScenarioCfg field, or Ok — and then a small
/// enough workload generates a trace that passes the trace checks and reloads identically.
fn scenario_check(_: &Path, bytes: &[u8]) -> Result<(), String> {
    use sched::scenario::{generate_scenario, ScenarioCfg};
    let text = std::str::from_utf8(bytes).map_err(|e| e.to_string())?;
    let c: ScenarioCfg = toml::from_str(text).map_err(|e| e.to_string())?;
    if let Err(e) = c.validate() {
        // `coherence` is omitted from the default's serialization (None): its errors name it.
        if e.field.starts_with("coherence.") {
            return Err(e.to_string());
        }
        return Err(refusal::<ScenarioCfg>(&e.field.clone(), e));
    }
    if c.tokens_per_iter as u64 * c.iters as u64 * c.layers as u64 > 20_000 || c.experts > 1024 {
        return Ok(());
    }
    let t = generate_scenario(&c).map_err(|e| e.to_string())?;
    t.validate().map_err(|e| e.to_string())?;
    let back = parse_trace(&trace_to_string(&t)).map_err(|e| e.to_string())?;
    assert_eq!(back.tokens.len(), t.tokens.len(), "round trip lost tokens");
    Ok(())
}

fn wafer_configs(_: &Path) -> Vec<Vec<u8>> {
    let small = WaferCfg { die_cols: 2, die_rows: 2, tp: 2, dp: 2, tokens_per_group: 4, micro_batches: 2, ..WaferCfg::default() };
    let her = WaferCfg { wafers_x: 2, mapping: hw::wafer::config::MappingKind::Her, tp: 2, dp: 4, ..small.clone() };
    // FP16 dispatch and the even replica split (MoEntwine's setup; olmoe's 64 experts on
    // fewer dies keep one host each, so `even` matters on the bigger grids the mutations make).
    let paper = WaferCfg { dispatch_elem_bytes: 2, replica_split: hw::wafer::config::ReplicaSplit::Even, ..small.clone() };
    let mut out: Vec<Vec<u8>> = [WaferCfg::default(), small, her, paper].iter().map(|c| toml::to_string(c).unwrap().into_bytes()).collect();
    out.push(b"die_cols = 3\ndie_rows = 1\ntp = 1\ndp = 3\nall_gather = false\n".to_vec());
    out.push(Vec::new());
    out
}

/// Parse error, or a validate/mapping error naming a WaferCfg field, or Ok — and then a
/// small enough wafer runs one layer to its end with every flit delivered.
fn wafer_check(_: &Path, bytes: &[u8]) -> Result<(), String> {
    let text = std::str::from_utf8(bytes).map_err(|e| e.to_string())?;
    let c: WaferCfg = toml::from_str(text).map_err(|e| e.to_string())?;
    if let Err(e) = c.validate() {
        return Err(refusal::<WaferCfg>(&e.field.clone(), e));
    }
    let m = sched::wafer::map(c.mapping, c.geom(), c.tp, c.dp, c.all_gather).map_err(|e| e.to_string())?;
    // Keep the simulated layer small (the fuzz checks robustness, not big runs).
    if c.dies() > 16 || c.tokens_per_group as u64 * c.dp as u64 > 256 {
        return Ok(());
    }
    let model = sched::models::model_by_name("olmoe-1b-7b").unwrap();
    let routing = sched::wafer::routing::generated_routing(&model, c.dp, c.tokens_per_group, 0.5, c.seed).map_err(|e| e.to_string())?;
    let prog = hw::wafer::program::build(&c, &model, &m, &routing);
    let mut w = hw::wafer::Wafer::new(&c, &prog, 1).map_err(|e| e.to_string())?;
    let r = w.run(1, true, 50_000_000, 200_000).map_err(|e| e.to_string())?;
    let planned: u64 = prog.xfers.iter().map(|x| x.flits as u64).sum();
    assert_eq!(r.tx_flits, planned, "flits sent vs planned");
    Ok(())
}

fn run(name: &str) {
    let t = TARGETS.iter().find(|t| t.name == name).unwrap();
    fuzz_test(t, 2000, PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("fuzz-{name}")));
}

#[test]
fn fuzz_vcd() {
    run("vcd");
}
#[test]
fn fuzz_fst() {
    run("fst");
}
#[test]
fn fuzz_toml() {
    run("toml");
}
#[test]
fn fuzz_trace() {
    run("trace");
}
#[test]
fn fuzz_pkgcfg() {
    run("pkgcfg");
}
#[test]
fn fuzz_scenariocfg() {
    run("scenariocfg");
}
#[test]
fn fuzz_wafercfg() {
    run("wafercfg");
}
#[test]
fn fuzz_balancecfg() {
    run("balancecfg");
}

// ----- the harness itself: each failure kind is caught and reported with its input

fn one_seed(_: &Path) -> Vec<Vec<u8>> {
    vec![b"seed".to_vec()]
}

fn harness_target(check: fn(&Path, &[u8]) -> Result<(), String>, time_ms: u64, mem: usize) -> Target {
    Target { name: "selftest", seeds: one_seed, tokens: &[], mutate: None, check, multiline_ok: false, time_limit: Duration::from_millis(time_ms), mem_limit: mem, known: &[] }
}

#[test]
fn harness_reports_panic_hang_memory_and_multiline_with_the_input() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fuzz-selftest");
    let cases: [(fn(&Path, &[u8]) -> Result<(), String>, u64, usize, &str); 4] = [
        (|_, _| panic!("boom"), 5000, MEM, "panic: boom"),
        (|_, _| { std::thread::sleep(Duration::from_millis(1500)); Ok(()) }, 200, MEM, "no result after 0.2 s"),
        // (the allocator counts the whole process: other tests' frees may shave a MiB or two)
        (|_, _| { let v = vec![7u8; 64 << 20]; std::hint::black_box(&v); Ok(()) }, 5000, 16 << 20, "heap grew by 6"),
        (|_, _| Err("two\nlines".into()), 5000, MEM, "not a one-line message"),
    ];
    for (check, ms, mem, needle) in cases {
        let e = testbenches::fuzz::run(&harness_target(check, ms, mem), 3, &dir).unwrap_err().to_string();
        assert!(e.contains("selftest case 0") && e.contains(needle), "{e}");
        let saved = e.rsplit("input saved to ").next().unwrap();
        assert!(Path::new(saved).exists(), "{e}");
    }
    let ok = testbenches::fuzz::run(&harness_target(|_, b| if b.len() % 2 == 0 { Ok(()) } else { Err("odd".into()) }, 5000, MEM), 50, &dir).unwrap();
    assert_eq!(ok.accepted + ok.refused, 50);
    // A known open finding is counted, not a failure.
    let mut t = harness_target(|_, b| if b.len() % 2 == 0 { panic!("known boom") } else { Ok(()) }, 5000, MEM);
    t.known = &[("known boom", "regress/x/open.toml")];
    let k = testbenches::fuzz::run(&t, 50, &dir).unwrap();
    assert_eq!(k.accepted + k.known[0].1, 50);
    assert!(k.known[0].1 > 0 && k.to_string().contains("known open finding regress/x/open.toml"), "{k}");
}

