//! Write small designs in both formats and read them back with wellen (an independent
//! parser), plus filter, window, determinism, diff and stats checks.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use waves::prelude::*;

const PERIOD: u64 = 1000; // 1 GHz in ps

fn out(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("waves-{name}"))
}

fn ext(f: WaveFormat) -> &'static str {
    match f {
        WaveFormat::Vcd => "vcd",
        WaveFormat::Fst => "fst",
    }
}

const BOTH: [WaveFormat; 2] = [WaveFormat::Vcd, WaveFormat::Fst];

/// 3 levels of scopes below `top`; 1-, 3-, 8- and 64-bit signals. `valid` is declared last
/// but belongs to r_3_4, so the writer has to regroup it under its scope.
fn design() -> Vec<SignalDecl> {
    vec![
        SignalDecl::new(["top"], "clk_en", 1),
        SignalDecl::new(["top", "mesh", "r_3_4"], "occ", 8),
        SignalDecl::new(["top", "mesh", "r_3_4"], "flits", 64),
        SignalDecl::new(["top", "mesh", "r_3_5"], "occ", 8),
        SignalDecl::new(["top", "mesh", "r_4_0"], "occ", 8),
        SignalDecl::new(["top", "ctrl"], "state", 3),
        SignalDecl::new(["top", "mesh", "r_3_4"], "valid", 1),
    ]
}

/// (cycle, signal, value), in the order the simulator would report them.
fn script() -> Vec<(u64, usize, u64)> {
    vec![
        (0, 0, 1),
        (0, 5, 2),
        (1, 1, 3),
        (1, 2, u64::MAX),
        (1, 6, 1),
        (3, 1, 4),
        (3, 3, 200),
        (5, 0, 0),
        (5, 2, 0x8000_0000_0000_0001),
        (5, 4, 7),
        (7, 1, 0),
        (7, 3, 201),
        (7, 5, 0x1f), // wider than 3 bits: masked to 7
        (12, 6, 0),
        (15, 2, 42),
        (18, 4, 8),
        (21, 1, 9),
        (24, 3, 1),
    ]
}
const END: u64 = 30;

/// Value of `sig` at `cycle` according to the script (0 before the first change).
fn model(script: &[(u64, usize, u64)], decls: &[SignalDecl], sig: usize, cycle: u64) -> u64 {
    let mask = if decls[sig].width == 64 {
        u64::MAX
    } else {
        (1 << decls[sig].width) - 1
    };
    script
        .iter()
        .rfind(|c| c.1 == sig && c.0 <= cycle)
        .map_or(0, |c| c.2 & mask)
}

fn write(
    path: &Path,
    f: WaveFormat,
    decls: &[SignalDecl],
    script: &[(u64, usize, u64)],
    filter: &WaveFilter,
    end: u64,
) -> usize {
    let mut w = WaveWriter::create(path, f, PERIOD, decls, filter).unwrap();
    for &(c, s, v) in script {
        w.change(c, s, v).unwrap();
    }
    let n = w.selected_count();
    w.finish(end).unwrap();
    n
}

/// Reads a file with wellen and answers value queries by full name.
struct Readback {
    wave: wellen::simple::Waveform,
}

impl Readback {
    fn open(path: &Path) -> Self {
        let mut wave = wellen::simple::read(path).unwrap();
        let refs: Vec<_> = wave
            .hierarchy()
            .all_vars()
            .map(|v| wave.hierarchy()[v].signal_ref())
            .collect();
        wave.load_signals(&refs);
        Readback { wave }
    }

    fn var_names(&self) -> Vec<String> {
        let h = self.wave.hierarchy();
        let mut v: Vec<String> = h.all_vars().map(|v| h[v].full_name(h)).collect();
        v.sort();
        v
    }

    fn times(&self) -> &[u64] {
        self.wave.time_table()
    }

    /// Value (as u64) of `d` at `time`; None before its first value or if it is not 0/1.
    fn value(&self, d: &SignalDecl, time: u64) -> Option<u64> {
        let h = self.wave.hierarchy();
        let var = h
            .lookup_var(&d.scope, d.name.clone())
            .unwrap_or_else(|| panic!("{} missing", d.full_name()));
        assert_eq!(h[var].length(h), Some(d.width), "{}", d.full_name());
        let sig = self.wave.get_signal(h[var].signal_ref()).unwrap();
        let tt = self.wave.time_table();
        let bits = sig
            .iter_changes()
            .filter(|(i, _)| tt[*i as usize] <= time)
            .last()?
            .1
            .to_string();
        u64::from_str_radix(&bits, 2).ok()
    }

    fn changes_after(&self, d: &SignalDecl, time: u64) -> usize {
        let h = self.wave.hierarchy();
        let var = h.lookup_var(&d.scope, d.name.clone()).unwrap();
        let sig = self.wave.get_signal(h[var].signal_ref()).unwrap();
        let tt = self.wave.time_table();
        sig.iter_changes()
            .filter(|(i, _)| tt[*i as usize] > time)
            .count()
    }
}

#[test]
fn roundtrip_values_and_scopes_both_formats() {
    let (decls, script) = (design(), script());
    for f in BOTH {
        let path = out(&format!("roundtrip.{}", ext(f)));
        assert_eq!(
            write(&path, f, &decls, &script, &WaveFilter::default(), END),
            decls.len()
        );
        assert_eq!(
            list_scopes(&path).unwrap(),
            [
                "top",
                "top.ctrl",
                "top.mesh",
                "top.mesh.r_3_4",
                "top.mesh.r_3_5",
                "top.mesh.r_4_0"
            ],
            "{f:?}"
        );
        let rb = Readback::open(&path);
        let mut names: Vec<String> = decls.iter().map(|d| d.full_name()).collect();
        names.sort();
        assert_eq!(rb.var_names(), names, "{f:?}");
        assert_eq!(
            rb.wave.hierarchy().timescale().unwrap().unit,
            wellen::TimescaleUnit::PicoSeconds
        );
        assert!(
            rb.times().iter().all(|t| t % PERIOD == 0),
            "{f:?}: {:?}",
            rb.times()
        );
        assert_eq!(rb.times().last(), Some(&(END * PERIOD)), "{f:?}");
        for (i, d) in decls.iter().enumerate() {
            for c in 0..=END {
                assert_eq!(
                    rb.value(d, c * PERIOD),
                    Some(model(&script, &decls, i, c)),
                    "{f:?} {} @{c}",
                    d.full_name()
                );
            }
        }
    }
}

#[test]
fn vcd_parses_with_wellen_and_scopes_nest() {
    let path = out("nest.vcd");
    write(
        &path,
        WaveFormat::Vcd,
        &design(),
        &script(),
        &WaveFilter::default(),
        END,
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("$date"), "no wall-clock date in the header");
    assert!(text.contains("$timescale 1 ps $end"));
    let wave = wellen::simple::read(&path).unwrap();
    let h = wave.hierarchy();
    let top: Vec<_> = h.scopes().map(|s| h[s].name(h).to_string()).collect();
    assert_eq!(top, ["top"]);
    let mesh = h.lookup_scope(&["top", "mesh"]).unwrap();
    let routers: Vec<_> = h[mesh]
        .scopes(h)
        .map(|s| h[s].name(h).to_string())
        .collect();
    assert_eq!(routers, ["r_3_4", "r_3_5", "r_4_0"]);
    let r34 = h.lookup_scope(&["top", "mesh", "r_3_4"]).unwrap();
    let vars: Vec<_> = h[r34].vars(h).map(|v| h[v].name(h).to_string()).collect();
    assert_eq!(vars, ["occ", "flits", "valid"]);
}

#[test]
fn glob_selects_signals_and_scopes() {
    let (decls, script) = (design(), script());
    for f in BOTH {
        let path = out(&format!("glob.{}", ext(f)));
        let filter = WaveFilter {
            globs: vec!["top.mesh.r_3_*".into(), "top.ctrl.state".into()],
            window: None,
        };
        assert_eq!(write(&path, f, &decls, &script, &filter, END), 5);
        assert_eq!(
            list_scopes(&path).unwrap(),
            [
                "top",
                "top.ctrl",
                "top.mesh",
                "top.mesh.r_3_4",
                "top.mesh.r_3_5"
            ],
            "{f:?}"
        );
        let rb = Readback::open(&path);
        assert_eq!(
            rb.var_names(),
            [
                "top.ctrl.state",
                "top.mesh.r_3_4.flits",
                "top.mesh.r_3_4.occ",
                "top.mesh.r_3_4.valid",
                "top.mesh.r_3_5.occ"
            ]
        );
        assert_eq!(rb.value(&decls[3], 7 * PERIOD), Some(201));
    }
    // '**' crosses scope levels, '*' does not.
    let deep = WaveFilter {
        globs: vec!["top.**.occ".into()],
        window: None,
    };
    assert_eq!(
        write(
            &out("deep.vcd"),
            WaveFormat::Vcd,
            &decls,
            &script,
            &deep,
            END
        ),
        3
    );
    let shallow = WaveFilter {
        globs: vec!["top.*.occ".into()],
        window: None,
    };
    assert_eq!(
        write(
            &out("shallow.vcd"),
            WaveFormat::Vcd,
            &decls,
            &script,
            &shallow,
            END
        ),
        0
    );
}

#[test]
fn bad_glob_and_bad_decls_are_errors() {
    let bad = WaveFilter {
        globs: vec!["top.{mesh".into()],
        window: None,
    };
    let e = WaveWriter::create(&out("bad.vcd"), WaveFormat::Vcd, PERIOD, &design(), &bad)
        .err()
        .unwrap();
    assert!(
        matches!(e, WaveError::Filter { ref what } if what.contains("top.{mesh")),
        "{e}"
    );
    for decls in [
        vec![SignalDecl::new(["top"], "x", 0)],
        vec![SignalDecl::new(["top"], "x", 65)],
        vec![
            SignalDecl::new(["top"], "x", 1),
            SignalDecl::new(["top"], "x", 2),
        ],
        vec![SignalDecl::new(Vec::<String>::new(), "x", 1)],
    ] {
        let r = WaveWriter::create(
            &out("bad.vcd"),
            WaveFormat::Vcd,
            PERIOD,
            &decls,
            &WaveFilter::default(),
        );
        assert!(matches!(r, Err(WaveError::Signal { .. })), "{decls:?}");
    }
    let mut w = WaveWriter::create(
        &out("bad.vcd"),
        WaveFormat::Vcd,
        PERIOD,
        &design(),
        &WaveFilter::default(),
    )
    .unwrap();
    assert!(matches!(w.change(0, 99, 1), Err(WaveError::Signal { .. })));
    w.change(5, 1, 1).unwrap();
    assert!(matches!(w.change(4, 1, 2), Err(WaveError::Format { .. })));
}

#[test]
fn window_is_self_contained() {
    let (decls, script) = (design(), script());
    // (window, first in-window change lands after / exactly at the start / nowhere)
    for (lo, hi) in [(10, 20), (7, 13), (25, 27), (0, 4)] {
        for f in BOTH {
            let path = out(&format!("window-{lo}-{hi}.{}", ext(f)));
            let filter = WaveFilter {
                globs: vec![],
                window: Some((lo, hi)),
            };
            write(&path, f, &decls, &script, &filter, END);
            let rb = Readback::open(&path);
            let times: Vec<u64> = rb
                .times()
                .iter()
                .copied()
                .filter(|&t| t != 0 || lo == 0)
                .collect();
            assert_eq!(
                times.first(),
                Some(&(lo * PERIOD)),
                "{f:?} {lo}..{hi}: {:?}",
                rb.times()
            );
            assert_eq!(rb.times().last(), Some(&(hi * PERIOD)), "{f:?} {lo}..{hi}");
            for (i, d) in decls.iter().enumerate() {
                for c in lo..hi {
                    assert_eq!(
                        rb.value(d, c * PERIOD),
                        Some(model(&script, &decls, i, c)),
                        "{f:?} {lo}..{hi} {} @{c}",
                        d.full_name()
                    );
                }
                assert_eq!(
                    rb.changes_after(d, (hi - 1) * PERIOD),
                    0,
                    "{f:?} {}",
                    d.full_name()
                );
            }
        }
    }
}

#[test]
fn output_is_deterministic() {
    let (decls, script) = (design(), script());
    let filter = WaveFilter {
        globs: vec!["top.mesh.**".into()],
        window: Some((2, 20)),
    };
    for f in BOTH {
        for filter in [WaveFilter::default(), filter.clone()] {
            let (a, b) = (
                out(&format!("det-a.{}", ext(f))),
                out(&format!("det-b.{}", ext(f))),
            );
            write(&a, f, &decls, &script, &filter, END);
            // A pause between the writes would expose any timestamp in the header.
            std::thread::sleep(std::time::Duration::from_millis(1100));
            write(&b, f, &decls, &script, &filter, END);
            assert_eq!(
                std::fs::read(&a).unwrap(),
                std::fs::read(&b).unwrap(),
                "{f:?} {filter:?}"
            );
        }
    }
}

/// The writer thread (the default on a machine with more than one core) writes the same
/// bytes as the caller's thread, over many batches (64 K operations each), with and without a
/// window and a filter; a changed mode after the first change is refused.
#[test]
fn writer_thread_writes_the_same_bytes() {
    let decls: Vec<SignalDecl> = (0..64)
        .map(|i| SignalDecl::new(["top", if i % 2 == 0 { "a" } else { "b" }], format!("s{i}"), 1 + (i as u32 * 7) % 64))
        .collect();
    // A deterministic scramble, 300 000 changes over 20 000 cycles (several batches).
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut script = Vec::new();
    for c in 0..20_000u64 {
        for _ in 0..15 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            script.push((c, (x % 64) as usize, x >> 3));
        }
    }
    script.sort_by_key(|c| (c.0, c.1));
    script.dedup_by_key(|c| (c.0, c.1));
    let filters = [
        WaveFilter::default(),
        WaveFilter { globs: vec!["top.a.**".into()], window: Some((3_000, 15_000)) },
    ];
    for f in BOTH {
        for filter in &filters {
            let mut bytes = Vec::new();
            // One change at a time inline and on the thread; then on the thread in runs and
            // whole vectors (runs of a batch or more go over without a copy), mixed.
            for (mode, background) in [(0, false), (1, true), (2, true)] {
                let path = out(&format!("thread-{mode}.{}", ext(f)));
                let mut w = WaveWriter::create(&path, f, PERIOD, &decls, filter).unwrap();
                w.set_background(background).unwrap();
                if mode < 2 {
                    for &(c, s, v) in &script {
                        w.change(c, s, v).unwrap();
                    }
                } else {
                    let runs: Vec<(u64, u32, u64)> = script.iter().map(|&(c, s, v)| (c, s as u32, v)).collect();
                    let mut rest = &runs[..];
                    for (i, n) in [100usize, 9_000, 1, 20_000, 500, 8_192, 3].iter().cycle().enumerate() {
                        let (head, tail) = rest.split_at((*n).min(rest.len()));
                        match i % 3 {
                            0 => w.change_run(head).unwrap(),
                            1 => {
                                let mut v = head.to_vec();
                                w.change_vec(&mut v).unwrap();
                                assert!(v.is_empty(), "change_vec left changes behind");
                            }
                            _ => head.iter().for_each(|&(c, s, v)| w.change(c, s as usize, v).unwrap()),
                        }
                        rest = tail;
                        if rest.is_empty() {
                            break;
                        }
                    }
                }
                assert!(w.set_background(!background).is_err(), "mode changed after the first change");
                w.finish(20_000).unwrap();
                bytes.push(std::fs::read(&path).unwrap());
            }
            assert!(bytes[0].len() > 100_000, "{f:?}: {} bytes", bytes[0].len());
            assert!(bytes[0] == bytes[1], "{f:?} {filter:?}: the writer thread wrote different bytes");
            assert!(bytes[0] == bytes[2], "{f:?} {filter:?}: runs and vectors wrote different bytes");
        }
    }
}

/// A write that fails on the writer thread (a full disk) is returned to the caller, by a
/// later `change` or by `finish`, never lost.
#[cfg(target_os = "linux")]
#[test]
fn writer_thread_reports_a_failed_write() {
    let decls = vec![SignalDecl::new(["t"], "v", 32)];
    for f in BOTH {
        for background in [false, true] {
            // FST writes (and seeks in) its header at creation: refused there already.
            let Ok(mut w) = WaveWriter::create(Path::new("/dev/full"), f, PERIOD, &decls, &WaveFilter::default()) else {
                continue;
            };
            w.set_background(background).unwrap();
            let mut failed = false;
            for c in 0..400_000u64 {
                if w.change(c, 0, c).is_err() {
                    failed = true;
                    break;
                }
            }
            failed |= w.finish(400_000).is_err();
            assert!(failed, "{f:?}, background {background}: a write to /dev/full did not fail");
        }
    }
}

#[test]
fn diff_same_differ_structure() {
    let (decls, script) = (design(), script());
    let (vcd, fst) = (out("diff-a.vcd"), out("diff-a.fst"));
    write(
        &vcd,
        WaveFormat::Vcd,
        &decls,
        &script,
        &WaveFilter::default(),
        END,
    );
    write(
        &fst,
        WaveFormat::Fst,
        &decls,
        &script,
        &WaveFilter::default(),
        END,
    );
    assert!(matches!(
        diff(&vcd, &vcd).unwrap(),
        DiffResult::Same { signals: 7, .. }
    ));
    // The two writers agree with each other, as read by wellen.
    let same = diff(&vcd, &fst).unwrap();
    assert!(
        matches!(same, DiffResult::Same { signals: 7, .. }),
        "{same}"
    );

    // Windowed FST files hold `x` before the window (FST files start at 0), VCD nothing.
    let filter = WaveFilter {
        globs: vec![],
        window: Some((6, 20)),
    };
    let (wv, wf) = (out("diff-w.vcd"), out("diff-w.fst"));
    write(&wv, WaveFormat::Vcd, &decls, &script, &filter, END);
    write(&wf, WaveFormat::Fst, &decls, &script, &filter, END);
    let same = diff(&wv, &wf).unwrap();
    assert!(
        matches!(same, DiffResult::Same { signals: 7, .. }),
        "{same}"
    );

    // Two edits at cycle 12; r_3_5.occ sorts before r_4_0.occ, so it is reported.
    let mut edited = script.clone();
    edited.insert(13, (12, 3, 77));
    edited.insert(14, (12, 4, 78));
    edited.push((26, 0, 1)); // a later difference must not win
    let b = out("diff-b.fst");
    write(
        &b,
        WaveFormat::Fst,
        &decls,
        &edited,
        &WaveFilter::default(),
        END,
    );
    match diff(&vcd, &b).unwrap() {
        DiffResult::Differ(d) => {
            assert_eq!(d.signal, "top.mesh.r_3_5.occ");
            assert_eq!(d.time, 12 * PERIOD);
            assert_eq!((d.a.as_str(), d.b.as_str()), ("11001001", "01001101"));
            let text = DiffResult::Differ(d).to_string();
            assert!(
                text.contains("top.mesh.r_3_5.occ") && text.contains("12000"),
                "{text}"
            );
        }
        other => panic!("expected a difference, got {other}"),
    }

    let c = out("diff-c.vcd");
    let filter = WaveFilter {
        globs: vec!["top.mesh.**".into()],
        window: None,
    };
    write(&c, WaveFormat::Vcd, &decls, &script, &filter, END);
    match diff(&vcd, &c).unwrap() {
        DiffResult::Structure { what } => {
            assert!(
                what.contains("only in a")
                    && what.contains("top.ctrl.state")
                    && what.contains("top.clk_en"),
                "{what}"
            )
        }
        other => panic!("expected a structure difference, got {other}"),
    }
}

#[test]
fn stats_counts_changes() {
    let (decls, script) = (design(), script());
    for f in BOTH {
        let path = out(&format!("stats.{}", ext(f)));
        write(&path, f, &decls, &script, &WaveFilter::default(), END);
        let s = stats(&path).unwrap();
        assert_eq!((s.signals, s.scopes), (7, 6), "{f:?}");
        assert_eq!((s.start_time, s.end_time), (0, END * PERIOD), "{f:?}");
        assert_eq!(s.timescale, "1ps");
        // Every signal has its initial value plus each change that alters it.
        let model_changes = |i: usize| {
            1 + (1..=END)
                .filter(|&c| model(&script, &decls, i, c) != model(&script, &decls, i, c - 1))
                .count() as u64
        };
        let total: u64 = (0..decls.len()).map(model_changes).sum();
        assert_eq!(s.changes, total, "{f:?}\n{s}");
        assert_eq!(
            s.busiest[0],
            ("top.mesh.r_3_4.occ".to_string(), model_changes(1)),
            "{f:?}\n{s}"
        );
        assert_eq!(s.busiest.len(), 7);
        assert!(s.to_string().contains("top.mesh.r_3_4.occ"));
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["signals"], 7);
    }
}

#[test]
fn filter_from_json() {
    let f: WaveFilter = serde_json::from_str(r#"{"globs": ["top.mesh.r_3_*"]}"#).unwrap();
    assert_eq!(
        f,
        WaveFilter {
            globs: vec!["top.mesh.r_3_*".into()],
            window: None
        }
    );
}

#[test]
fn format_from_path() {
    assert_eq!(
        WaveFormat::from_path(Path::new("a/b.vcd")),
        Some(WaveFormat::Vcd)
    );
    assert_eq!(
        WaveFormat::from_path(Path::new("b.FST")),
        Some(WaveFormat::Fst)
    );
    assert_eq!(WaveFormat::from_path(Path::new("b.ghw")), None);
    assert_eq!(
        SignalDecl::new(["top", "mesh"], "occ", 3).full_name(),
        "top.mesh.occ"
    );
}

/// Random changes for 4 signals of widths 1, 5, 33, 64 over up to 60 cycles, in the order
/// the simulator reports them (cycle, then signal index).
fn changes_strategy() -> impl Strategy<Value = Vec<(u64, usize, u64)>> {
    prop::collection::vec((0u64..60, 0usize..4, any::<u64>()), 0..120).prop_map(|mut v| {
        v.sort_by_key(|c| (c.0, c.1));
        v.dedup_by_key(|c| (c.0, c.1));
        v
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn random_changes_read_back(script in changes_strategy(), window in prop::option::of((0u64..40, 1u64..30))) {
        let decls = vec![
            SignalDecl::new(["t"], "a", 1),
            SignalDecl::new(["t", "u"], "b", 5),
            SignalDecl::new(["t", "u", "v"], "c", 33),
            SignalDecl::new(["t", "u", "v"], "d", 64),
        ];
        let window = window.map(|(lo, len)| (lo, lo + len));
        let filter = WaveFilter { globs: vec![], window };
        let path = out("prop.vcd");
        write(&path, WaveFormat::Vcd, &decls, &script, &filter, 60);
        let rb = Readback::open(&path);
        let (lo, hi) = window.unwrap_or((0, 61));
        for (i, d) in decls.iter().enumerate() {
            for c in lo..hi.min(61) {
                prop_assert_eq!(rb.value(d, c * PERIOD), Some(model(&script, &decls, i, c)), "{} @{}", d.full_name(), c);
            }
        }
    }
}
