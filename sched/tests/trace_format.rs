//! Trace format: loader refusals (one per error kind, with line numbers), round trips,
//! stats, importers of the real data.

use proptest::prelude::*;
use sched::trace::*;
use std::path::Path;

const H: &str = r#"{"format": "waferstream-trace/1", "model": "t", "experts": 8, "top_k": 2, "layers": 2}"#;

fn tok(iter: u32, l0: &str, l1: &str) -> String {
    format!(r#"{{"iter": {iter}, "req": 0, "pos": {iter}, "layers": [{l0}, {l1}]}}"#)
}

/// Parses `lines` and asserts the error is on `line` and mentions `what`.
fn refused(lines: &[String], line: usize, what: &str) {
    let e = parse_trace(&lines.join("\n")).expect_err("must be refused");
    assert_eq!(e.line_no(), Some(line), "{e}");
    let s = e.to_string();
    assert!(s.contains(&format!("line {line}")), "{s}");
    assert!(s.to_lowercase().contains(&what.to_lowercase()), "{s} lacks {what}");
}

fn good() -> Vec<String> {
    vec![H.into(), tok(0, "[0,1]", "[2,3]"), tok(0, "[4,5]", "[6,7]"), tok(1, "[1,0]", "[7,2]")]
}

#[test]
fn loads_good_trace() {
    let t = parse_trace(&good().join("\n")).unwrap();
    assert_eq!(t.tokens.len(), 3);
    assert_eq!(t.iterations(), vec![(0, 0..2), (1, 2..3)]);
    assert_eq!(t.select_iters(1..2).unwrap().tokens.len(), 1);
    let l = t.select_layers(1..2).unwrap();
    assert_eq!(l.header.layers, 1);
    assert_eq!(l.tokens[2].layers, vec![vec![7, 2]]);
    assert!(t.select_iters(1..3).is_err());
    assert!(t.select_layers(0..3).is_err());
}

#[test]
fn refuses_each_error_kind_with_line() {
    let mut g = good();
    g[2] = "{not json".into();
    refused(&g, 3, "bad");
    let mut g = good();
    g[2] = r#"{"iter": 0, "req": 0, "layers": [[0,1],[2,3]]}"#.into();
    refused(&g, 3, "missing field `pos`");
    let mut g = good();
    g[3] = tok(1, "[1,0,3]", "[7,2]");
    refused(&g, 4, "top_k");
    let mut g = good();
    g[1] = tok(0, "[1,1]", "[7,2]");
    refused(&g, 2, "duplicate expert 1");
    let mut g = good();
    g[1] = tok(0, "[1,8]", "[7,2]");
    refused(&g, 2, "out of range");
    let mut g = good();
    g[2] = r#"{"iter": 0, "req": 0, "pos": 1, "layers": [[0,1]]}"#.into();
    refused(&g, 3, "MoE layers");
    let mut g = good();
    g.push(tok(0, "[0,1]", "[2,3]"));
    refused(&g, 5, "not contiguous");
    let mut g = good();
    g.remove(0);
    refused(&g, 1, "header missing");
    refused(&[], 1, "header missing");
    let mut g = good();
    g[0] = H.replace("trace/1", "trace/2");
    refused(&g, 1, "format");
    let mut g = good();
    g[1] = r#"{"iter": 0, "req": 0, "pos": 1, "layers": [[0,1],[2,3]], "scores": [[0.5,0.5]]}"#.into();
    refused(&g, 2, "scores");
    let mut g = good();
    g[0] = H.replace("\"experts\": 8", "\"experts\": 70000");
    refused(&g, 1, "experts");
    let mut g = good();
    g[0] = H.replace("\"layers\": 2", "\"layers\": 5000");
    refused(&g, 1, "layers");
    let mut g = good();
    g[0] = H.replace("\"top_k\": 2", "\"top_k\": 9");
    refused(&g, 1, "top_k");
    // Blank lines still count.
    let mut g = good();
    g.insert(2, String::new());
    g[4] = tok(1, "[1,0]", "[9,2]");
    refused(&g, 5, "out of range");
}

#[test]
fn stats_on_hand_made_trace() {
    // Layer 0: expert 0 used 3 times, 1,4,5 once (6 picks over 8 experts: mean 0.75) -> 4.
    // Layer 1: experts 2,3,6,7,7,2 -> max 2 -> 2/0.75.
    let t = parse_trace(&good().join("\n")).unwrap();
    let mut t2 = t.clone();
    t2.tokens[1].layers[0].copy_from_slice(&[0, 5]);
    let s = trace_stats(&t2);
    assert_eq!((s.experts, s.top_k, s.layers, s.tokens, s.iterations, s.requests), (8, 2, 2, 3, 2, 1));
    assert!((s.per_layer_skewness[0] - 3.0 / 0.75).abs() < 1e-12, "{:?}", s.per_layer_skewness);
    assert!((s.per_layer_skewness[1] - 2.0 / 0.75).abs() < 1e-12);
}

/// A vendored slice of the real data (testbenches/traces), read or the test fails: a test on
/// real data is never skipped.
fn vendored(name: &str) -> std::path::PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testbenches/traces").join(name);
    assert!(p.is_file(), "{} missing: the real-trace test cannot run without it", p.display());
    p
}

#[test]
fn imports_real_warp_trace() {
    // The first 64 decode steps of the OLMoE warp trace; the frozen numbers below were counted
    // from the JSON lines outside the project (testbenches/traces/README.md).
    let p = vendored("olmoe_warp_decode_64.jsonl");
    let t = import_warp_decode(&p).unwrap();
    assert_eq!(t.tokens.len(), 64);
    assert_eq!((t.header.experts, t.header.top_k, t.header.layers), (64, 8, 16));
    assert_eq!(t.tokens[0].layers[0], vec![6, 8, 15, 23, 31, 37, 53, 63]);
    assert_eq!(t.tokens[63].layers[15], vec![0, 4, 10, 11, 13, 28, 30, 46]);
    let back = parse_trace(&trace_to_string(&t)).unwrap();
    assert_eq!(back, t);
    let s = trace_stats(&t);
    assert_eq!((s.tokens, s.iterations, s.requests), (64, 64, 1));
    // Busiest expert's count per layer (512 picks over 64 experts: skewness = count / 8).
    let busiest = [50, 55, 58, 60, 51, 53, 54, 40, 33, 46, 28, 53, 47, 58, 56, 57];
    let want: Vec<f64> = busiest.iter().map(|&c| c as f64 / 8.0).collect();
    assert_eq!(s.per_layer_skewness, want);
    assert!(import_warp_decode_str("{\"tok\": 1, \"layers\": [[1,2]]}\n").unwrap_err().line_no() == Some(1));
}

#[test]
fn imports_allenai_counts() {
    let text = std::fs::read_to_string(vendored("olmoe_mixtral_arxiv_counts.csv")).unwrap();
    // Mixtral: top-2 of 8 experts at layers 0/7/15, each layer summing to 417,792 picks;
    // expert 0 of layer 0 was picked 55,713 times (the CSV's second line).
    let prof = import_expert_counts_str(&text, "mistral", "arxiv", "topk").unwrap();
    assert_eq!(prof.layers, vec![0, 7, 15]);
    assert!(prof.weights.iter().all(|w| w.len() == 8));
    assert_eq!(prof.weights[0][0], 55713.0 / 417792.0);
    assert_eq!(prof.weights[0][1], 52019.0 / 417792.0);
    // OLMoE: 64 experts at the same three layers, 1,671,168 picks each.
    let prof = import_expert_counts_str(&text, "olmoe", "arxiv", "topk").unwrap();
    assert_eq!(prof.layers, vec![0, 7, 15]);
    assert!(prof.weights.iter().all(|w| w.len() == 64));
    assert_eq!(prof.weights[0][0], 204013.0 / 1671168.0);
    for w in &prof.weights {
        assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-9);
    }
    let e = import_expert_counts_str("model,domain,selection,layer,expert,count\nm,d,topk,0,x,3\n", "m", "d", "topk").unwrap_err();
    assert_eq!(e.line_no(), Some(2));
}

fn arb_trace() -> impl Strategy<Value = Trace> {
    (1u32..20, 1u32..5, 1u32..4).prop_flat_map(|(experts, layers, extra)| {
        let top_k = 1 + extra.min(experts) - 1;
        let top_k = top_k.min(experts).max(1);
        let tokline = (
            proptest::collection::vec(Just(()).prop_perturb(move |_, mut r| {
                let mut ids: Vec<u16> = (0..experts as u16).collect();
                for i in (1..ids.len()).rev() {
                    ids.swap(i, (r.next_u32() as usize) % (i + 1));
                }
                ids.truncate(top_k as usize);
                ids
            }), layers as usize),
            0u32..3,
            0u32..100,
            proptest::option::of(0u32..50000),
            any::<bool>(),
        );
        proptest::collection::vec(tokline, 0..12).prop_map(move |lines| {
            let mut iter = 0;
            let tokens = lines
                .into_iter()
                .map(|(layers, step, pos, token_id, with_scores)| {
                    iter += step;
                    let scores = with_scores.then(|| layers.iter().map(|l| l.iter().map(|&e| e as f32 * 0.25).collect()).collect());
                    TraceToken { iter, req: pos % 3, pos, token_id, layers: layers.into(), scores }
                })
                .collect();
            Trace { header: TraceHeader::new(Some("p"), experts, top_k, layers), tokens }
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn round_trip(t in arb_trace()) {
        t.validate().unwrap();
        let s = trace_to_string(&t);
        prop_assert_eq!(parse_trace(&s).unwrap(), t);
    }

    #[test]
    fn never_panics_on_garbage(s in "\\PC{0,200}", cut in 0usize..400) {
        let _ = parse_trace(&s);
        let g = good().join("\n");
        let cut = cut.min(g.len());
        if g.is_char_boundary(cut) {
            let _ = parse_trace(&g[..cut]);
            let _ = parse_trace(&format!("{}{}", &g[..cut], s));
        }
        let _ = import_warp_decode_str(&s);
    }
}

#[test]
fn file_round_trip_and_file_errors() {
    let dir = std::env::temp_dir().join(format!("ws-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("t.jsonl");
    let t = parse_trace(&good().join("\n")).unwrap();
    write_trace(&p, &t).unwrap();
    assert_eq!(load_trace(&p).unwrap(), t);
    std::fs::write(&p, format!("{}\n{}\n", H, tok(0, "[0,0]", "[1,2]"))).unwrap();
    let e = load_trace(&p).unwrap_err().to_string();
    assert!(e.contains("t.jsonl") && e.contains("line 2") && e.contains("duplicate"), "{e}");
    assert!(load_trace(&dir.join("none.jsonl")).is_err());
    std::fs::remove_dir_all(&dir).ok();
}

/// Issue 5 fuzzing: a score beyond f32 (1e40 parses as infinity) is refused with its line,
/// as the writer could only emit it as `null`.
#[test]
fn refuses_scores_beyond_f32() {
    let mut g = good();
    g[1] = r#"{"iter": 0, "req": 0, "pos": 1, "layers": [[0,1],[2,3]], "scores": [[1e40,0.5],[0.5,0.5]]}"#.into();
    refused(&g, 2, "finite");
}
