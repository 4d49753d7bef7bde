//! Fuzz target `cli` (issue 5): argument vectors for the real `waferstream` binary, built
//! from its subcommands and flags and mutated (flags inserted, dropped, swapped, duplicated,
//! values replaced or byte-mutated, subcommands exchanged), each run as a child process.
//!
//! Property: exit 0, 1 or 2; never a signal (abort, SIGSEGV, the memory limit) or 101 (a
//! panic); stderr a short message (no panic text, at most 40 lines / 8 KiB); done within 10 s
//! (else killed: a hang). Memory: the child runs under `ulimit -v` 4 GiB, so a runaway
//! allocation aborts it (a signal: a failure) instead of taking the machine down.
//!
//! Simulations are kept short so that the property, not the simulated system's size, is
//! tested: `noc` without `--config` gets a small config (k = 4, three 50-cycle sample
//! periods), and valid-but-large sizes are mapped down before the run (`--k` 9..=128 to 1..=8,
//! `--repeat` to at most 2, long rate lists to two rates, generated trace sizes to at most
//! 64, export co-simulation vectors to at most 512 cycles). Values outside the valid ranges are left alone: their refusal is what is tested.
//!
//! Inputs are the arguments joined by NUL bytes, with `@D` standing for the scratch
//! directory (so a saved crash input replays anywhere: see `replay` below).
//! `FUZZ_CASES=N cargo test --release -p waferstream --test fuzz_cli` (default 200: each case
//! is a process; scripts/fuzz.sh runs more).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use testbenches::fuzz::{fuzz_test, mutate_bytes, Rng, Target};

const TIME: Duration = Duration::from_secs(10);
/// `ulimit -v` of the child, KiB.
const VMEM_KIB: u64 = 4 << 20;

/// Subcommands (and sub-subcommands) the mutator may exchange.
const SUBCOMMANDS: &[&str] = &["noc", "run", "package", "wafer", "eplb", "gps", "semmoe", "balance", "check", "wave", "regress", "export-verilog", "bench", "pe", "trace", "stats", "diff", "gtkw", "reproduce", "import", "sweep", "help", "nosuch"];

/// Flags and values spliced in by the mutator: every flag of every subcommand, plus values
/// that sit on and beyond each range's edges.
const TOKENS: &[&[u8]] = &[
    // noc
    b"--config", b"--k", b"--vcs", b"--vc-buf", b"--packet-size", b"--traffic", b"--hotspot-nodes", b"--hotspot-fraction", b"--rates", b"--seed",
    b"--threads", b"--routing-delay", b"--va-delay", b"--sa-delay", b"--st-delay", b"--link-latency", b"--credit-delay", b"--flit-bytes",
    b"--link-width", b"--no-fast-forward", b"--json", b"--vcd", b"--fst", b"--trace", b"--window", b"--plot", b"--line-trace", b"--per-router",
    b"--quiet",
    // gps
    b"--bandwidth", b"--accuracy", b"--error-model", b"--tokens", b"--warmup", b"--spare-slots", b"--overhead", b"--layer", b"--skew",
    b"--model", b"--wafer", b"slow", b"fast", b"typical", b"pessimistic", b"optimistic", b"1.4:0.003:4.6",
    b"--dist-estimate", b"split", b"online", b"fig4", b"assumed",
    // semmoe
    b"--coherence", b"--clusters-per-request", b"deepseek-v2-lite",
    // run, regress, export-verilog, bench, pe, trace, global
    b"--print-default", b"--list", b"--junit", b"--out", b"--rate", b"--repeat", b"--m", b"--n", b"--array", b"--dataflow", b"--timing",
    b"--format", b"--counts-model", b"--domain", b"--selection", b"--top-k", b"--tokens-per-iter", b"--iters", b"--shard", b"--list", b"--help", b"--version", b"-h",
    b"-V", b"--", b"-",
    // numbers
    b"0", b"1", b"2", b"3", b"4", b"8", b"12", b"13", b"64", b"128", b"129", b"255", b"256", b"1024", b"1025", b"4096", b"4097", b"65535",
    b"65536", b"4294967295", b"4294967296", b"18446744073709551615", b"18446744073709551616", b"-1", b"0.5", b"1e3", b"nan", b"inf", b"-inf",
    b"1e-300", b"0x10", b"", b" ",
    // rates, windows, globs, names
    b"0.1", b"0.05,0.1", b"0:1:0.25", b"0:1:1e-12", b"0:inf:0.1", b"0.3:0.1:0.1", b"1,2", b",", b"0..10", b"10..5", b"..", b"5..", b"..5",
    b"a..b", b"100000..100010", b"0..18446744073709551615", b"top.mesh.r_0_*", b"top.mesh.r_1_1", b"**", b"[", b"{a,b", b"top.mesh.r_9_9",
    b"uniform", b"transpose", b"bitcomp", b"hotspot", b"bogus", b"0,1,2,3", b"99", b"8x8", b"0x8", b"4294967296x1", b"os", b"ws",
    b"scalesim", b"double-buffered", b"warp", b"counts", b"olmoe", b"mixtral", b"noc", b"issue", b"1/2", b"0/2", b"3/2",
    // paths (@D = scratch directory)
    b"@D/small.toml", b"@D/bal.toml", b"@D/hot.toml", b"@D/bad.toml", b"@D/scenario.toml", b"@D/grid.toml", b"@D/badgrid.toml", b"@D/missing.toml", b"@D/ok.vcd", b"@D/ok2.vcd", b"@D/ok.fst",
    b"@D/undeclared.vcd", b"@D/badvalue.vcd", b"@D/huge.fst", b"@D/t.jsonl", b"@D/warp.jsonl", b"@D/counts.csv", b"@D/out/x.json",
    b"@D/out/x.vcd", b"@D/out/x.fst", b"@D/out/x.svg", b"@D/out/x.xml", b"@D/out/v", b"@D/file/sub/x.json", b"@D", b"/proc/1/mem",
    b"/dev/null", b"@D/out",
];

/// Valid argument vectors, one per use of each subcommand.
const SEEDS: &[&str] = &[
    "noc --k 2 --rates 0.1 --quiet",
    "noc --k 2 --rates 0.05,0.1 --json @D/out/n.json --quiet",
    "noc --k 3 --traffic transpose --rates 0.2 --vcd @D/out/n.vcd --trace top.mesh.r_0_* --window 10..50 --quiet",
    "noc --k 2 --traffic hotspot --hotspot-nodes 1,2 --hotspot-fraction 0.3 --rates 0.1 --quiet",
    "noc --k 4 --line-trace top.mesh.r_1_1 --window 100..110 --rates 0.2 --quiet",
    "noc --config @D/small.toml --fst @D/out/n.fst --window 0..20 --plot @D/out/p.svg --per-router --quiet",
    "noc --config @D/hot.toml --traffic hotspot --json @D/out/h.json",
    "noc --k 2 --vcs 3 --vc-buf 4 --packet-size 3 --routing-delay 2 --va-delay 1 --sa-delay 1 --st-delay 1 --link-latency 2 --credit-delay 1 --flit-bytes 8 --link-width 4 --seed 7 --threads 2 --no-fast-forward --rates 0.1 --quiet",
    "run @D/scenario.toml --quiet",
    "run --print-default",
    "run noc-sweep --quiet",
    "package --functional --array 2x2 --tokens 8 --strategy ep,a3 --quiet",
    "package --functional --array 3x3 --ber 1e-6 --tokens 8 --strategy a1,a2,a4,a5 --json @D/out/f.json --quiet",
    "package --model functional --tokens 16 --array 2x2 --strategy hydra-oracle --micro-slices 4 --ring-slots 6 --vcd @D/out/p.vcd --quiet",
    "package --trace @D/t.jsonl --model functional --array 2x2 --strategy ep,a3 --iters 0..1 --layers 1..2 --json @D/out/t.json --quiet",
    "package --config @D/pkg.toml --model functional --tokens 8 --threads 2 --no-fast-forward --quiet",
    "run @D/scenario.toml --json @D/out/r.json --vcd @D/out/r.vcd --trace top.mesh.r_0_0 --window 0..30 --quiet",
    "wave stats @D/ok.vcd",
    "wave stats @D/ok.fst",
    "wave diff @D/ok.vcd @D/ok2.vcd",
    "wave diff @D/ok.vcd @D/ok.fst",
    "regress --list",
    "regress noc --list",
    "export-verilog --out @D/out/v",
    "bench noc --k 2 --rate 0.1 --repeat 1 --threads 1 --json @D/out/b.json",
    "wave gtkw @D/ok.vcd --out @D/out/g.gtkw",
    "noc --k 2 --rates 0.1 --vcd @D/out/n.vcd --gtkw @D/out/n.gtkw --quiet",
    "sweep @D/grid.toml --merge @D/out/s2.jsonl --out @D/out/m.jsonl",
    "reproduce gps --print-setup",
    "bench package --model functional --tokens 8 --repeat 1 --waves false --json @D/out/bp.json",
    "bench package --config @D/pkg.toml --model functional --tokens 8 --repeat 1 --array 3x3 --json @D/out/bpc.json",
    "package --functional --array 2x2 --tokens 8 --strategy ep,a3 --plot @D/out/plots --quiet",
    "pe --m 64 --k 32 --n 16 --array 8x8 --dataflow ws --timing double-buffered --json @D/out/pe.json",
    "pe --m 4 --k 4 --n 4",
    "trace stats @D/t.jsonl --json @D/out/t.json",
    "trace import @D/warp.jsonl --out @D/out/w.jsonl",
    "trace import @D/counts.csv --out @D/out/c.jsonl --format counts --top-k 2 --tokens-per-iter 8 --iters 2 --seed 3",
    "sweep @D/grid.toml --out @D/out/s.jsonl --threads 2 --quiet",
    "sweep @D/grid.toml --shard 2/3 --out @D/out/s2.jsonl",
    "sweep @D/grid.toml --list",
    "sweep @D/badgrid.toml --quiet",
    "wafer --model qwen3-235b --wafer 2x2 --tp 2 --mapping baseline,er --tokens-per-group 8 --micro-batches 2 --json @D/out/w.json --quiet",
    "wafer --model mixtral-8x22b --wafer 2x2 --tp 2 --trace @D/t.jsonl --tokens-per-group 4 --functional --vcd @D/out/w.vcd --quiet",
    "wafer --model qwen3-235b --wafers 2x1 --wafer 2x2 --tp 2 --mapping her,er --tokens-per-group 4 --threads 2 --plot @D/out/wp --quiet",
    "wafer --config @D/wafer.toml --model qwen3-235b --tokens-per-group 4 --no-fast-forward --no-all-gather --fst @D/out/w.fst --quiet",
    "wave check @D/ok.vcd",
    "eplb --weights @D/w.json --replicas 16 --groups 4 --nodes 2 --devices 8 --json @D/out/e.json --quiet",
    "eplb --weights @D/w.json --replicas 12 --devices 4",
    "gps --skew 1.2,2.2 --tokens 32 --warmup 2 --iters 1 --accuracy 0.5,0.9 --json @D/out/g.json --vcd @D/out/g.vcd --quiet",
    "gps --trace @D/t.jsonl --model mixtral-8x22b --bandwidth slow,100 --error-model pessimistic --tokens 8 --quiet",
    "balance --iters 3 --tokens-per-group 32 --balancer none,eplb,topo,topo-ni --json @D/out/b.json --vcd @D/out/b.vcd --quiet",
    "balance --trace @D/t.jsonl --model mixtral-8x22b --wafer 2x2 --tp 2 --iters 2 --tokens-per-group 16 --balancer topo-ni --shadow-slots 1 --alpha 0",
    "balance --scenario math --wafer 4x2 --tp 2 --iters 2 --tokens-per-group 16 --mapping baseline --balancer none,topo --warmup 1 --period 2",
    "semmoe --model olmoe --devices 4 --iters 8 --tokens-per-iter 32 --layers 2 --json @D/out/s.json --quiet",
    "semmoe --model olmoe --trace @D/warp.jsonl --devices 4 --attention tp --tp-batch 8 --vcd @D/out/lut.vcd",
    "gps --skew 1.6 --wafer 2x2 --tokens 16 --accuracy 1 --error-model optimistic --overhead 1.4:0.003:4.6,2:0.0015:4.6 --spare-slots 0 --window 2",
    "gps --skew 1.4 --wafer 2x2 --tokens 16 --warmup 4 --iters 1 --overhead fig4 --dist-estimate split --quiet",
    "semmoe --model deepseek-v2-lite --devices 4 --iters 8 --tokens-per-iter 32 --layers 2 --coherence 0.8 --clusters-per-request 2 --quiet",
    "--help",
    "--version",
    "noc --help",
];

fn join(args: &[&[u8]]) -> Vec<u8> {
    args.join(&0u8)
}

fn split(b: &[u8]) -> Vec<Vec<u8>> {
    if b.is_empty() {
        return vec![];
    }
    b.split(|&c| c == 0).map(<[u8]>::to_vec).collect()
}

/// Fixture files the seeds and tokens name.
fn fixtures(d: &Path) {
    let w = |name: &str, text: &[u8]| {
        let p = d.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    let small = "[mesh]\nk = 4\n[measure]\nsample_period = 50\nwarmup_periods = 1\nmax_samples = 3\n";
    w("small.toml", small.as_bytes());
    w("hot.toml", format!("{small}[traffic]\nrate = 0.1\n[traffic.pattern]\nhotspot = {{ nodes = [3], fraction = 0.5 }}\n").as_bytes());
    w("bad.toml", b"[mesh]\nbogus = 1\n");
    w("w.json", b"[[90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86], [20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27]]");
    w("ragged.json", b"[[1, 2, 3], [4, 5]]");
    w("bal.toml", b"shadow_slots = 1\nalpha = 0.1\nwindow_iters = 2\nchunk_flits = 16\nwarmup_iters = 1\n");
    w("wafer.toml", b"die_cols = 2\ndie_rows = 2\ntp = 2\ndp = 2\nmicro_batches = 2\nflit_bytes = 1024\n[router]\nvc_buf = 8\n[die]\nhbm_gb = 1000\n");
    w("pkg.toml", b"rows = 2\ncols = 2\nmicro_slices = 4\n[pe]\nrows = 8\ncols = 8\n[sim]\nwatchdog_cycles = 20000\n");
    // A sweep grid of four functional points (a [[grid]] block with a table-valued axis).
    let grid = "[scenario]\nname = \"fuzz\"\nkind = \"package\"\n[workload]\nmodel = \"functional\"\ntokens = 8\nstrategies = [\"ep\"]\nfunctional = true\n[package]\nmicro_slices = 4\n";
    w("grid.toml", format!("{grid}[grid]\nstrategy = [\"ep\", \"a3\"]\n\"workload.tokens\" = [8, 16]\n").as_bytes());
    w("badgrid.toml", format!("{grid}[[grid]]\nstrategy = [\"a5\"]\n[[grid]]\npackage = [{{ rows = 3, cols = 3 }}]\n\"package.bogus\" = [1]\n").as_bytes());
    w("scenario.toml", b"[scenario]\nname = \"fuzz\"\nkind = \"noc_sweep\"\nrates = [0.1, 0.2]\n[noc.mesh]\nk = 3\n[noc.measure]\nsample_period = 50\nwarmup_periods = 1\nmax_samples = 3\n");
    let vcd = |v: &str| format!("$timescale 1ps $end\n$scope module top $end\n$var wire 1 ! a $end\n$var wire 4 \" b $end\n$upscope $end\n$enddefinitions $end\n#0\n$dumpvars\n0!\nb0000 \"\n$end\n#10\n{v}\n");
    w("ok.vcd", vcd("1!\nb1010 \"").as_bytes());
    w("ok2.vcd", vcd("1!\nb1011 \"").as_bytes());
    let regress = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testbenches/regress/waves");
    for (from, to) in [("issue5_vcd_undeclared_id.vcd", "undeclared.vcd"), ("issue5_vcd_bad_value.vcd", "badvalue.vcd"), ("issue5_fst_geometry_huge_alloc.fst", "huge.fst")] {
        std::fs::copy(regress.join(from), d.join(to)).unwrap();
    }
    // A valid FST of the same two signals.
    let decls = [waves::SignalDecl::new(["top"], "a", 1), waves::SignalDecl::new(["top"], "b", 4)];
    let mut fw = waves::WaveWriter::create(&d.join("ok.fst"), waves::WaveFormat::Fst, 1, &decls, &waves::WaveFilter::default()).unwrap();
    fw.change(10, 0, 1).unwrap();
    fw.change(10, 1, 10).unwrap();
    fw.finish(10).unwrap();
    let h = r#"{"format": "waferstream-trace/1", "model": "t", "experts": 8, "top_k": 2, "layers": 2}"#;
    w("t.jsonl", format!("{h}\n{{\"iter\": 0, \"req\": 0, \"pos\": 0, \"layers\": [[0,1],[2,3]]}}\n{{\"iter\": 1, \"req\": 0, \"pos\": 1, \"layers\": [[4,5],[6,7]]}}\n").as_bytes());
    let layers: Vec<String> = (0..16).map(|l| format!("[{}]", (0..8).map(|e| ((e * 7 + l) % 64).to_string()).collect::<Vec<_>>().join(","))).collect();
    w("warp.jsonl", format!("{{\"tok\": 1, \"layers\": [{}]}}\n{{\"tok\": 2, \"layers\": [{}]}}\n", layers.join(","), layers.join(",")).as_bytes());
    let mut csv = String::from("model,domain,selection,layer,expert,count\n");
    for e in 0..16 {
        csv.push_str(&format!("olmoe,arxiv,topk,0,{e},{}\n", 100 + e * 13));
    }
    w("counts.csv", csv.as_bytes());
    w("file", b"a regular file, not a directory");
    std::fs::create_dir_all(d.join("out")).unwrap();
}

fn seeds(d: &Path) -> Vec<Vec<u8>> {
    fixtures(d);
    SEEDS.iter().map(|s| join(&s.split(' ').map(str::as_bytes).collect::<Vec<_>>())).collect()
}

const NUMS: &[&str] = &["0", "1", "2", "3", "4", "7", "8", "12", "13", "64", "128", "129", "255", "256", "1024", "1025", "4096", "4097", "65535", "65536", "4294967295", "4294967296", "18446744073709551615", "18446744073709551616", "-1", "0.5", "1e3", "nan", "inf", "", " 3", "0x10"];
const FRACS: &[&str] = &["0", "0.1", "0.3", "1", "1.5", "-0.1", "1e-300", "nan", "inf", "", "0.05,0.1", "x"];
const RATES: &[&str] = &["0.1", "0.05,0.1", "0:1:0.25", "0:1:1e-12", "0:inf:0.1", "0.3:0.1:0.1", "0.1:0.3:1e-7", "1,2", ",", "nan", "1e-6,1e-4", "0.1:0.2", "0.1,0.1,0.1"];
const WINDOWS: &[&str] = &["0..10", "10..5", "..", "5..", "..5", "a..b", "100000..100010", "0..18446744073709551615", "3..4", "0..0", "18446744073709551615..", "1..2..3"];
const GLOBS: &[&str] = &["top.mesh.r_0_*", "top.mesh.r_1_1", "**", "[", "{a,b", "top.mesh.r_9_9", "*", "top.**.occ", ""];
const OUT: &[&str] = &["@D/out/x.json", "@D/out/x.vcd", "@D/out/x.fst", "@D/out/x.svg", "@D/out/x.xml", "@D/out/v", "@D/file/sub/x", "@D", "/proc/1/mem", "/dev/null", "@D/out", "@D/out/new/deeper/x.json", ""];
const IN: &[&str] = &["@D/grid.toml", "@D/badgrid.toml", "@D/ok.vcd", "@D/ok2.vcd", "@D/ok.fst", "@D/undeclared.vcd", "@D/badvalue.vcd", "@D/huge.fst", "@D/t.jsonl", "@D/warp.jsonl", "@D/counts.csv", "@D/small.toml", "@D/scenario.toml", "@D/missing", "@D", "/dev/null", "@D/file"];
const CONFIGS: &[&str] = &["@D/small.toml", "@D/hot.toml", "@D/bad.toml", "@D/scenario.toml", "@D/missing.toml", "@D/ok.vcd", "@D"];

/// Flags that take a value, with the values worth trying (each list holds valid and invalid
/// ones), and switches; by subcommand (the first argument).
fn flags(sub: &str) -> (&'static [(&'static str, &'static [&'static str])], &'static [&'static str]) {
    match sub {
        "noc" => (
            &[
                ("--config", CONFIGS), ("--k", NUMS), ("--vcs", NUMS), ("--vc-buf", NUMS), ("--packet-size", NUMS),
                ("--traffic", &["uniform", "transpose", "bitcomp", "bit-complement", "hotspot", "bogus", ""]),
                ("--hotspot-nodes", &["0", "1,2", "0,1,2,3", "99", "-1", "", ","]), ("--hotspot-fraction", FRACS), ("--rates", RATES),
                ("--seed", NUMS), ("--threads", NUMS), ("--routing-delay", NUMS), ("--va-delay", NUMS), ("--sa-delay", NUMS),
                ("--st-delay", NUMS), ("--link-latency", NUMS), ("--credit-delay", NUMS), ("--flit-bytes", NUMS), ("--link-width", NUMS),
                ("--json", OUT), ("--vcd", OUT), ("--fst", OUT), ("--trace", GLOBS), ("--window", WINDOWS), ("--plot", OUT), ("--line-trace", GLOBS), ("--gtkw", OUT),
                ("--rtl", &["router", "nosuch", ""]),
            ],
            &["--no-fast-forward", "--per-router", "--quiet", "--help"],
        ),
        "run" => (&[("--json", OUT), ("--vcd", OUT), ("--fst", OUT), ("--trace", GLOBS), ("--window", WINDOWS), ("--plot", OUT), ("--gtkw", OUT)], &["--print-default", "--quiet", "--help"]),
        "regress" => (&[("--junit", OUT)], &["--list", "--help"]),
        "package" => (
            &[
                ("--model", &["functional", "qwen3-30b-a3b", "deepseek-moe-16b", "gpt-5", ""]), ("--tokens", NUMS),
                ("--array", &["2x2", "3x3", "4x4", "0x2", "5x5", "2x3", "x", "17x1"]), ("--strategy", &["ep", "hydra-oracle,a1", "a2,a3,a4,a5", "fse-dp", "zz", "", ","]),
                ("--ber", &["0", "1e-6", "1e-3", "1", "1.5", "-0.1", "nan", "inf"]), ("--micro-slices", NUMS), ("--ring-slots", NUMS),
                ("--d-model", NUMS), ("--d-ffn", NUMS), ("--trace", &["@D/t.jsonl", "@D/warp.jsonl", "@D/missing.jsonl", "@D/file"]),
                ("--iters", &["0..1", "1..2", "0", "5..9", "2..1", "x"]), ("--layers", &["0..1", "1..2", "0..9", "x"]), ("--skew", FRACS),
                ("--seed", NUMS), ("--config", &["@D/pkg.toml", "@D/bad.toml", "@D/missing.toml"]), ("--threads", NUMS),
                ("--batch-jobs", NUMS), ("--json", OUT), ("--vcd", OUT), ("--fst", OUT), ("--plot", OUT), ("--gtkw", OUT),
                ("--rtl", &["scheduler", "chiplet-ctrl", "pe", "nosuch", ""]),
            ],
            &["--functional", "--no-fast-forward", "--quiet", "--help"],
        ),
        "export-verilog" => (
            &[
                ("--out", OUT),
                ("--block", &["rr_arbiter", "credit_counter", "rr_arbiter_5", "iodie_scheduler", "iodie_scheduler_sweep", "iodie_sweep_c9_e32", "router_ctrl", "router", "nosuch", ""]),
                ("--param", &["n=5", "n=7", "n=x", "width=4", "n", "=5", "", "chiplets=16", "experts=128", "experts=17", "chiplets=0"]),
                ("--cycles", NUMS),
                ("--seed", NUMS),
            ],
            &["--help"],
        ),
        "sweep" => (
            &[("--out", OUT), ("--shard", &["1/1", "1/2", "2/2", "3/7", "0/2", "3/2", "1/0", "x", "1/", "/2", "-1/2", "1/18446744073709551616", ""]), ("--threads", NUMS), ("--merge", OUT)],
            &["--list", "--quiet", "--help"],
        ),
        "bench" => (
            &[
                ("--k", NUMS), ("--rate", FRACS), ("--threads", &["1", "2", "1,2", "0", "", "3,1", "4294967295"]), ("--repeat", NUMS), ("--json", OUT),
                ("--model", &["functional", "qwen3-30b-a3b", "nosuch"]), ("--tokens", NUMS), ("--array", &["2x2", "3x3", "0x0", "x"]),
                ("--strategy", &["a3", "ep", "ep,a3", "zz"]), ("--waves", &["true", "false", "maybe"]), ("--wave-dir", OUT),
                ("--save", OUT), ("--compare", OUT), ("--config", &["@D/pkg.toml", "@D/bad.toml", "@D/missing.toml"]),
            ],
            &["package", "noc", "all", "--quick", "--help"],
        ),
        "pe" => (
            &[
                ("--m", NUMS), ("--k", NUMS), ("--n", NUMS), ("--array", &["8x8", "32x64", "0x8", "1x1", "4294967296x1", "128x128", "x", "8x", "65535x65535"]),
                ("--dataflow", &["os", "ws", "is", ""]), ("--timing", &["scalesim", "double-buffered", "x"]), ("--json", OUT),
            ],
            &["--help"],
        ),
        "wafer" => (
            &[
                ("--model", &["deepseek-v3", "qwen3-235b", "deepseek-v2", "dbrx", "mixtral-8x22b", "functional", "gpt-5", ""]),
                ("--wafer", &["2x2", "4x4", "3x2", "1x1", "0x4", "8x8", "65x1", "x", "2x"]), ("--wafers", &["1x1", "2x1", "2x2", "0x1", "x", "70x1"]),
                ("--tp", NUMS), ("--dp", NUMS), ("--mapping", &["baseline", "er", "her", "baseline,er,her", "nosuch", "", ","]),
                ("--tokens-per-group", NUMS), ("--micro-batches", NUMS), ("--trace", &["@D/t.jsonl", "@D/warp.jsonl", "@D/missing.jsonl", "@D/file"]),
                ("--tokens-per-die", NUMS), ("--comm-dtype", &["int8", "fp16", "bf16", ""]), ("--replica-split", &["nearest", "even", "x", ""]),
                ("--skew", FRACS), ("--seed", NUMS), ("--config", &["@D/wafer.toml", "@D/bad.toml", "@D/missing.toml", "@D/pkg.toml"]), ("--threads", NUMS),
                ("--json", OUT), ("--vcd", OUT), ("--fst", OUT), ("--plot", OUT), ("--gtkw", OUT),
                ("--rtl", &["mapping", "nosuch", ""]),
            ],
            &["--no-all-gather", "--functional", "--no-fast-forward", "--quiet", "--help"],
        ),
        "eplb" => (
            &[
                ("--weights", &["@D/w.json", "@D/ragged.json", "@D/missing.json", "@D/file", "@D/t.jsonl", "@D"]),
                ("--replicas", NUMS), ("--groups", NUMS), ("--nodes", NUMS), ("--devices", NUMS), ("--json", OUT),
            ],
            &["--quiet", "--help"],
        ),
        "gps" => (
            &[
                ("--model", &["mixtral-8x22b", "olmoe-1b-7b", "dbrx", "functional", "gpt-5", ""]), ("--trace", &["@D/t.jsonl", "@D/warp.jsonl", "@D/missing.jsonl", "@D/file"]),
                ("--layer", NUMS), ("--skew", &["1", "1.2", "1.4,2.2", "3.99", "4", "0.9", "nan", "", ",", "1.2,x"]),
                ("--bandwidth", &["slow", "fast", "slow,fast", "32", "31", "2048", "2049", "nvlink,pcie", "slow,slow", "nan", "", "x"]),
                ("--accuracy", &["0", "0.5", "1", "0.5,0.9", "1.5", "-0.1", "nan", "", ","]), ("--error-model", &["optimistic", "typical", "pessimistic", "x", ""]),
                ("--seed", NUMS), ("--wafer", &["4x2", "2x2", "2x1", "1x1", "3x3", "8x8", "9x1", "0x4", "x"]), ("--tokens", NUMS), ("--warmup", NUMS),
                ("--iters", NUMS), ("--window", NUMS), ("--spare-slots", NUMS), ("--overhead", &["1.4:0.003:4.6", "1:0.1:1e308", "2:1:1,1:1:1", "1:-1:1", "x", "1:2", "fig4", "assumed", "FIG4"]),
                ("--dist-estimate", &["online", "split", "x", ""]),
                ("--json", OUT), ("--vcd", OUT), ("--rtl", &["predictor", "semmoe-lut", "nosuch", ""]),
            ],
            &["--quiet", "--help"],
        ),
        "balance" => (
            &[
                ("--model", &["qwen3-235b", "deepseek-v3", "mixtral-8x22b", "olmoe-1b-7b", "functional", "gpt-5", ""]), ("--trace", &["@D/t.jsonl", "@D/warp.jsonl", "@D/missing.jsonl", "@D/file"]),
                ("--wafer", &["4x4", "2x2", "4x2", "1x1", "3x3", "8x8", "0x4", "x"]), ("--tp", NUMS), ("--dp", NUMS), ("--mapping", &["er", "baseline", "her", "x", ""]),
                ("--scenario", &["mixed", "chat", "coding", "math", "privacy", "writing", "translation", "x", ""]), ("--period", NUMS), ("--skew", &["0", "1", "2.5", "16", "17", "-1", "nan"]),
                ("--balancer", &["none", "eplb", "topo", "topo-ni", "none,eplb,topo,topo-ni", "topo-ni,topo-ni", "x", "", ","]), ("--iters", NUMS), ("--tokens-per-group", NUMS),
                ("--micro-batches", NUMS), ("--comm-dtype", &["int8", "fp16", "x"]), ("--replica-split", &["nearest", "even", "x"]),
                ("--seed", NUMS), ("--config", &["@D/wafer.toml", "@D/bad.toml", "@D/missing.toml"]), ("--balance-config", &["@D/bal.toml", "@D/bad.toml", "@D/missing.toml"]),
                ("--shadow-slots", NUMS), ("--alpha", FRACS), ("--warmup", NUMS), ("--threads", NUMS), ("--json", OUT), ("--vcd", OUT), ("--fst", OUT), ("--gtkw", OUT),
                ("--rtl", &["balancer", "nosuch", ""]),
            ],
            &["--quiet", "--help"],
        ),
        "semmoe" => (
            &[
                ("--model", &["qwen3-30b-a3b", "qwen3-30b", "olmoe-1b-7b", "functional", "mixtral-8x22b", "gpt-5", ""]),
                ("--devices", NUMS), ("--attention", &["auto", "dp", "tp", "x"]),
                ("--trace", &["@D/t.jsonl", "@D/warp.jsonl", "@D/missing.jsonl", "@D/file"]), ("--seed", NUMS), ("--iters", NUMS),
                ("--tokens-per-iter", NUMS), ("--layers", NUMS), ("--affinity", FRACS), ("--profile-iters", NUMS), ("--tp-batch", NUMS),
                ("--mesh-batches", NUMS), ("--mesh-layers", NUMS), ("--micro-batches", NUMS), ("--json", OUT), ("--vcd", OUT),
                ("--coherence", FRACS), ("--clusters-per-request", NUMS), ("--rtl", &["semmoe-lut", "predictor", "nosuch", ""]),
            ],
            &["--quiet", "--help"],
        ),
        "reproduce" => (&[("--out", OUT), ("--setup", &["@D/bad.toml", "@D/missing.toml", "@D/pkg.toml"]), ("--threads", NUMS), ("--compare", OUT)], &["--quick", "--print-setup", "--help", "fsedp", "all", "nosuch"]),
        "wave" | "trace" => (
            &[
                ("--json", OUT), ("--out", OUT), ("--format", &["warp", "counts", "x"]), ("--counts-model", &["olmoe", "mixtral", "mistral", "x", ""]),
                ("--domain", &["arxiv", "x"]), ("--selection", &["topk", "x"]), ("--top-k", NUMS), ("--tokens-per-iter", NUMS), ("--iters", NUMS), ("--seed", NUMS),
            ],
            &["--help"],
        ),
        _ => (&[], &["--help", "--version", "-h", "-V"]),
    }
}

/// Grammar-aware mutations, one to three: mostly (re)setting a flag of the subcommand to a
/// value from its list or toggling a switch; sometimes removing a flag, byte-mutating an
/// argument, changing a positional, exchanging the subcommand, or splicing a random token.
fn mutate_args(seed: &[u8], rng: &mut Rng, tokens: &[&[u8]]) -> Vec<u8> {
    let mut a: Vec<String> = split(seed).iter().map(|x| String::from_utf8_lossy(x).into_owned()).collect();
    for _ in 0..1 + rng.below(3) {
        let sub = a.first().cloned().unwrap_or_default();
        let (valued, switches) = flags(&sub);
        let op = rng.below(16);
        match op {
            0..=7 if !valued.is_empty() => {
                let (flag, values) = *rng.pick(valued);
                let v = rng.pick(values).to_string();
                match a.iter().position(|x| x == flag) {
                    Some(i) if i + 1 < a.len() => a[i + 1] = v,
                    _ => a.extend([flag.to_string(), v]),
                }
            }
            0..=8 => {
                let s = rng.pick(switches).to_string();
                match a.iter().position(|x| *x == s) {
                    Some(i) => {
                        a.remove(i);
                    }
                    None => a.push(s),
                }
            }
            9 | 10 if a.len() > 1 => {
                // Drop a flag with its value (or one argument).
                let i = 1 + rng.below(a.len() - 1);
                let n = if a[i].starts_with("--") && i + 1 < a.len() && !a[i + 1].starts_with("--") { 2 } else { 1 };
                a.drain(i..i + n);
            }
            11 if !a.is_empty() => {
                let i = rng.below(a.len());
                let b = mutate_bytes(a[i].as_bytes(), rng, &[b"0", b"9", b"..", b",", b":", b"*", b"-", b".", b"x"]);
                a[i] = String::from_utf8_lossy(&b).replace('\0', "").chars().take(256).collect();
            }
            12 => {
                // A positional: an input file, or an extra word.
                let v = if rng.below(2) == 0 { rng.pick(IN).to_string() } else { String::from_utf8_lossy(*rng.pick(tokens)).into_owned() };
                let i = 1.min(a.len()) + rng.below(a.len().saturating_sub(1) + 1);
                a.insert(i.min(a.len()), v);
            }
            13 => {
                let s = rng.pick(SUBCOMMANDS).to_string();
                if a.is_empty() {
                    a.push(s);
                } else {
                    a[0] = s;
                }
            }
            _ => {
                let i = rng.below(a.len() + 1);
                a.insert(i, String::from_utf8_lossy(*rng.pick(tokens)).into_owned());
            }
        }
    }
    a.truncate(64);
    a.join("\0").into_bytes()
}

fn value_after<'a>(a: &'a [String], flag: &str) -> impl Iterator<Item = usize> + 'a {
    let flag = flag.to_string();
    a.iter().enumerate().filter(move |(_, x)| **x == flag).map(|(i, _)| i + 1).filter(|&i| i < a.len())
}

/// Keeps simulations short: valid-but-large sizes are mapped into small ones (see the module
/// doc); invalid values are left for the CLI to refuse.
fn bound(args: Vec<String>) -> Vec<String> {
    let mut a = args;
    let sub = a.first().cloned().unwrap_or_default();
    let int = |s: &str| s.trim().parse::<u64>().ok();
    for i in value_after(&a, "--k").collect::<Vec<_>>() {
        if let Some(v) = int(&a[i]).filter(|v| (9..=128).contains(v)) {
            a[i] = (v % 8 + 1).to_string();
        }
    }
    for (flag, max) in [("--repeat", 2), ("--tokens-per-iter", 64), ("--iters", 64)] {
        for i in value_after(&a, flag).collect::<Vec<_>>() {
            if let Some(v) = int(&a[i]).filter(|&v| v > max && v <= u32::MAX as u64) {
                a[i] = (v % max + 1).to_string();
            }
        }
    }
    for i in value_after(&a, "--threads").collect::<Vec<_>>() {
        if sub == "bench" && a[i].split(',').count() > 2 {
            a[i] = "1,2".into();
        }
    }
    for i in value_after(&a, "--rates").collect::<Vec<_>>() {
        let r = &a[i];
        let many = if r.contains(':') {
            let p: Vec<f64> = r.split(':').filter_map(|x| x.trim().parse().ok()).collect();
            p.len() == 3 && p.iter().all(|x| x.is_finite()) && p[2] > 0.0 && (p[1] - p[0]) / p[2] > 8.0
        } else {
            r.split(',').count() > 8
        };
        if many {
            a[i] = "0.1,0.2".into();
        }
    }
    if sub == "noc" && !a.iter().any(|x| x == "--config" || x.starts_with("--config=")) {
        a.extend(["--config".to_string(), "@D/small.toml".to_string()]);
    }
    if sub == "run" {
        // The default and named package scenarios run a full-size layer (tens of seconds):
        // a small scenario file stands in for them.
        match a.get(1) {
            Some(x) if x == "default" => a[1] = "@D/scenario.toml".into(),
            Some(x) if !x.starts_with('-') => {}
            _ if !a.iter().any(|x| x == "--print-default" || x == "--help") => a.insert(1, "@D/scenario.toml".into()),
            _ => {}
        }
    }
    if sub == "package" {
        // Full-size timing runs take seconds to minutes: the fuzz keeps the layer small.
        for i in value_after(&a, "--model").collect::<Vec<_>>() {
            if sched::models::model_by_name(&a[i]).is_ok() {
                a[i] = "functional".into();
            }
        }
        if !a.iter().any(|x| x == "--model" || x.starts_with("--model=")) {
            a.extend(["--model".to_string(), "functional".to_string()]);
        }
        // A traced run visits many more edges (and without fast-forward every one): keep
        // it to a few tokens so a loaded CI machine stays inside the 10 s per case.
        let traced = a.iter().any(|x| x == "--vcd" || x == "--fst");
        if traced && !a.iter().any(|x| x == "--tokens") && !a.iter().any(|x| x == "--trace") {
            a.extend(["--tokens".to_string(), "8".to_string()]);
        }
        let max_tokens = if traced { 8 } else { 64 };
        for (flag, max) in [("--tokens", max_tokens), ("--d-model", 128), ("--d-ffn", 128), ("--micro-slices", 64), ("--ring-slots", 64), ("--threads", 4), ("--batch-jobs", 4)] {
            for i in value_after(&a, flag).collect::<Vec<_>>() {
                if let Some(v) = int(&a[i]).filter(|&v| v > max && v <= u32::MAX as u64) {
                    a[i] = (v % max + 1).to_string();
                }
            }
        }
    }
    if sub == "export-verilog" {
        // Recording the scheduler top's co-simulation runs its rust-hdl model (~4k cycles/s):
        // keep the vectors short; lengths past the export's limit stay (their refusal is tested).
        for i in value_after(&a, "--cycles").collect::<Vec<_>>() {
            if let Some(v) = int(&a[i]).filter(|&v| v > 512 && v <= 1_000_000) {
                a[i] = (v % 512 + 1).to_string();
            }
        }
        if !a.iter().any(|x| x == "--cycles" || x == "--help") {
            a.extend(["--cycles".to_string(), "256".to_string()]);
        }
    }
    if sub == "wafer" {
        // A full-size layer on a big wafer takes seconds: small grids, few tokens.
        for i in value_after(&a, "--wafer").collect::<Vec<_>>() {
            if let Some((c, r)) = a[i].split_once('x').and_then(|(c, r)| Some((int(c)?, int(r)?))) {
                if (c > 4 || r > 4) && c <= 64 && r <= 64 {
                    a[i] = "4x4".into();
                }
            }
        }
        for i in value_after(&a, "--wafers").collect::<Vec<_>>() {
            if let Some((c, r)) = a[i].split_once('x').and_then(|(c, r)| Some((int(c)?, int(r)?))) {
                if (c > 2 || r > 2) && c <= 64 && r <= 64 {
                    a[i] = "2x2".into();
                }
            }
        }
        if !a.iter().any(|x| x == "--tokens-per-group" || x == "--tokens-per-die") {
            a.extend(["--tokens-per-group".to_string(), "8".to_string()]);
        }
        // Every cycle of a multi-wafer layer without fast-forward is seconds of stepping: one
        // wafer then (fast-forward is what the slow cases need; its equality is tested).
        if a.iter().any(|x| x == "--no-fast-forward") {
            for i in value_after(&a, "--wafers").collect::<Vec<_>>() {
                a[i] = "1x1".into();
            }
        }
        for (flag, max) in [("--tokens-per-group", 16), ("--tokens-per-die", 4), ("--micro-batches", 4), ("--threads", 4)] {
            for i in value_after(&a, flag).collect::<Vec<_>>() {
                if let Some(v) = int(&a[i]).filter(|&v| v > max && v <= u32::MAX as u64) {
                    a[i] = (v % max + 1).to_string();
                }
            }
        }
    }
    if sub == "gps" {
        // The default sweep is ~30 s of wafer runs: few tokens, iterations, points and runs.
        for (flag, max) in [("--tokens", 32), ("--warmup", 4), ("--iters", 2), ("--window", 64), ("--spare-slots", 4)] {
            for i in value_after(&a, flag).collect::<Vec<_>>() {
                if let Some(v) = int(&a[i]).filter(|&v| v > max && v <= u32::MAX as u64) {
                    a[i] = (v % max + 1).to_string();
                }
            }
        }
        for i in value_after(&a, "--wafer").collect::<Vec<_>>() {
            if let Some((c, r)) = a[i].split_once('x').and_then(|(c, r)| Some((int(c)?, int(r)?))) {
                if (c > 4 || r > 2) && c <= 8 && r <= 8 {
                    a[i] = "4x2".into();
                }
            }
        }
        for flag in ["--skew", "--accuracy", "--bandwidth"] {
            for i in value_after(&a, flag).collect::<Vec<_>>() {
                if a[i].split(',').count() > 2 {
                    a[i] = a[i].split(',').take(2).collect::<Vec<_>>().join(",");
                }
            }
        }
        for (k, v) in [("--tokens", "16"), ("--warmup", "2"), ("--iters", "1"), ("--accuracy", "0.5")] {
            if !a.iter().any(|x| x == k) {
                a.extend([k.to_string(), v.to_string()]);
            }
        }
        if !a.iter().any(|x| x == "--skew" || x == "--trace") {
            a.extend(["--skew".to_string(), "1.4".to_string()]);
        }
    }
    if sub == "balance" {
        // The default is 100 iterations of 2048-token groups (~2 min): a few small ones.
        for (flag, val) in [("--iters", "2"), ("--tokens-per-group", "16")] {
            if !a.iter().any(|x| x == flag) {
                a.extend([flag.to_string(), val.to_string()]);
            }
        }
        for (flag, max) in [("--iters", 3), ("--tokens-per-group", 32), ("--micro-batches", 2), ("--threads", 2), ("--tp", 8), ("--dp", 8), ("--period", 8), ("--warmup", 4)] {
            for i in value_after(&a, flag).collect::<Vec<_>>() {
                if let Some(v) = int(&a[i]).filter(|&v| v > max && v <= u32::MAX as u64) {
                    a[i] = (v % max + 1).to_string();
                }
            }
        }
        for i in value_after(&a, "--wafer").collect::<Vec<_>>() {
            if let Some((c, r)) = a[i].split_once('x').and_then(|(c, r)| Some((int(c)?, int(r)?))) {
                if (c > 4 || r > 4) && c <= 64 && r <= 64 {
                    a[i] = "4x4".into();
                }
            }
        }
    }
    if sub == "semmoe" {
        // The default workload is a full Qwen3 (48 layers, 64 x 256 tokens, ~3 s): keep the
        // scenario and the mesh small; invalid values stay for the CLI to refuse.
        for (flag, val) in [("--layers", "2"), ("--iters", "8"), ("--tokens-per-iter", "32")] {
            if !a.iter().any(|x| x == flag) {
                a.extend([flag.to_string(), val.to_string()]);
            }
        }
        for (flag, max) in [("--layers", 4), ("--iters", 16), ("--tokens-per-iter", 64), ("--devices", 16), ("--mesh-batches", 2), ("--tp-batch", 64)] {
            for i in value_after(&a, flag).collect::<Vec<_>>() {
                if let Some(v) = int(&a[i]).filter(|&v| v > max && v <= u32::MAX as u64) {
                    a[i] = (v % max + 2).to_string();
                }
            }
        }
    }
    if sub == "regress" && !a.iter().any(|x| x == "--list") {
        a.push("--list".into()); // the suite itself runs in scripts/test.sh
    }
    if sub == "bench" && a.iter().any(|x| x == "package") {
        // A package bench of a full-size layer runs for minutes: a tiny functional one.
        for i in value_after(&a, "--model").collect::<Vec<_>>() {
            a[i] = "functional".into();
        }
        for i in value_after(&a, "--tokens").collect::<Vec<_>>() {
            if int(&a[i]).is_some_and(|v| v > 64) {
                a[i] = "8".into();
            }
        }
        for (k, v) in [("--model", "functional"), ("--tokens", "8"), ("--waves", "false")] {
            if !a.iter().any(|x| x == k) {
                a.extend([k.to_string(), v.to_string()]);
            }
        }
        for i in value_after(&a, "--waves").collect::<Vec<_>>() {
            if a[i] == "true" {
                a[i] = "false".into();
            }
        }
    }
    if sub == "reproduce" && !a.iter().any(|x| x == "--print-setup") {
        a.push("--print-setup".into()); // a reproduction runs for minutes (tests/reproduce.rs runs them)
    }
    if sub == "bench" && !a.iter().any(|x| x == "--k") {
        a.extend(["--k".to_string(), "2".to_string()]);
    }
    a
}

/// Runs the binary on one input: Ok for exit 0, Err(stderr's first line) for 1, 2 or 3 (some parts failed);
/// panics (a failure) on anything else.
fn cli_check(dir: &Path, input: &[u8]) -> Result<(), String> {
    let args: Vec<String> = split(input).iter().map(|x| String::from_utf8_lossy(x).into_owned()).collect();
    run_cli(dir, bound(args))
}

/// The property on one argument vector (`@D` = `dir`), run as given.
fn run_cli(dir: &Path, args: Vec<String>) -> Result<(), String> {
    let d = dir.to_str().unwrap();
    let args: Vec<String> = args.into_iter().map(|x| x.replace("@D", d)).collect();
    let err_path = dir.join("stderr.txt");
    let err_file = std::fs::File::create(&err_path).unwrap();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {VMEM_KIB} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_waferstream"))
        .args(&args)
        .current_dir(dir)
        .env("RUST_LOG", "warn")
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err_file)
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > TIME {
            let _ = child.kill();
            let _ = child.wait();
            panic!("no exit after {} s: {args:?}", TIME.as_secs());
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let err = std::fs::read_to_string(&err_path).unwrap_or_default();
    let code = status.code();
    assert!(matches!(code, Some(0..=3)), "exit {status} for {args:?}; stderr: {}", err.chars().take(2000).collect::<String>());
    assert!(!err.contains("panicked") && !err.contains("RUST_BACKTRACE"), "panic text for {args:?}: {err}");
    assert!(err.lines().count() <= 40 && err.len() <= 8192, "{} lines / {} bytes of stderr for {args:?}", err.lines().count(), err.len());
    if std::env::var_os("FUZZ_DEBUG").is_some() {
        eprintln!("{code:?} {:.3}s {args:?} {}", t0.elapsed().as_secs_f64(), err.lines().next().unwrap_or(""));
    }
    match code {
        Some(0) => Ok(()),
        _ => Err(err.lines().find(|l| !l.trim().is_empty()).unwrap_or("(exit without message)").to_string()),
    }
}

const CLI: Target = Target {
    name: "cli",
    seeds,
    tokens: TOKENS,
    mutate: Some(mutate_args),
    check: cli_check,
    multiline_ok: false,
    // The check enforces the 10 s per process itself (killing the child); this bounds the
    // whole check, spawn included.
    time_limit: Duration::from_secs(15),
    mem_limit: 64 << 20,
    known: &[],
};

#[test]
fn fuzz_cli() {
    fuzz_test(&CLI, 200, PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fuzz-cli"));
}

/// CLI inputs the fuzzer once broke (`testbenches/regress/cli/*.args`, one argument per
/// line): each now meets the property, run as written (no size bounding), with `code`.
fn cli_corpus(rel: &str, code: i32, needle: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testbenches/regress").join(rel);
    let args: Vec<String> = std::fs::read_to_string(&path).unwrap().lines().map(String::from).collect();
    // One directory per input: run_cli writes the child's stderr to `dir/stderr.txt`, and
    // these tests run in parallel (a shared directory let one read another's stderr).
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fuzz-cli-corpus").join(rel.replace('/', "_"));
    std::fs::create_dir_all(&dir).unwrap();
    let r = run_cli(&dir, args);
    match code {
        0 => assert_eq!(r, Ok(()), "{rel}"),
        _ => assert!(r.as_ref().is_err_and(|e| e.contains(needle)), "{rel}: {r:?}"),
    }
}

#[test]
fn issue5_cli_link_latency_u32_wrap() { cli_corpus("cli/issue5_link_latency_u32_wrap.args", 2, "mesh.link_latency") }
#[test]
fn issue5_cli_pe_cycle_overflow() { cli_corpus("cli/issue5_pe_cycle_overflow.args", 2, "folds") }
#[test]
fn issue5_cli_pe_too_many_folds() { cli_corpus("cli/issue5_pe_too_many_folds.args", 2, "folds") }
#[test]
fn issue5_cli_threads_oversubscribed() { cli_corpus("cli/issue5_threads_oversubscribed.args", 0, "") }

/// Replays every committed CLI input (`testbenches/regress/cli/*.args`, so one added without
/// its own test above is still run) and asserts the fuzz property on each: exit 0, 1 or 2,
/// no panic text, bounded stderr. `FUZZ_REPLAY=path` adds one saved fuzzer input (raw bytes,
/// as the harness writes them), with the same assertion:
/// `FUZZ_REPLAY=path cargo test --release -p waferstream --test fuzz_cli replay -- --nocapture`.
#[test]
fn replay() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fuzz-cli-replay");
    std::fs::create_dir_all(&dir).unwrap();
    fixtures(&dir);
    let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testbenches/regress/cli");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&corpus)
        .unwrap_or_else(|e| panic!("{}: {e}", corpus.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "args"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "the committed corpus is gone: {files:?}");
    for p in &files {
        let args: Vec<String> = std::fs::read_to_string(p).unwrap().lines().map(String::from).collect();
        // run_cli panics on a crash, a signal, panic text or a flood on stderr.
        let r = run_cli(&dir, args);
        eprintln!("{}: {r:?}", p.display());
    }
    if let Ok(p) = std::env::var("FUZZ_REPLAY") {
        let input = std::fs::read(&p).unwrap_or_else(|e| panic!("FUZZ_REPLAY={p}: {e}"));
        eprintln!("{:?}", split(&input).iter().map(|x| String::from_utf8_lossy(x).into_owned()).collect::<Vec<_>>());
        eprintln!("{:?}", cli_check(&dir, &input));
    }
}
