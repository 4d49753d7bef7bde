//! Issue 19: the trace loader's memory is proportional to the routing it holds. A token's
//! layers were a `Vec<Vec<u16>>` (a 24-byte header and a heap block per layer for 2 bytes
//! of top-1 ids), so a 200 MB trace of 4,096 layers took 2.9 GB; rows are now flat and the
//! file is read a line at a time. Heap is counted by this binary's allocator (live bytes
//! and their peak), never by wall-clock time.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

use sched::trace::{import_expert_counts_str, load_trace, parse_trace, trace_stats, Rows, TRACE_FORMAT};

struct Peak;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Peak {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = LIVE.fetch_add(l.size(), SeqCst) + l.size();
            PEAK.fetch_max(now, SeqCst);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size(), SeqCst);
    }
}

#[global_allocator]
static A: Peak = Peak;

/// One test at a time: the counters are the whole process's.
static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A trace of `tokens` tokens × `layers` layers, top-1 of 64 experts.
fn deep_trace(tokens: usize, layers: usize) -> String {
    let mut s = format!("{{\"format\": \"{TRACE_FORMAT}\", \"experts\": 64, \"top_k\": 1, \"layers\": {layers}}}\n");
    for t in 0..tokens {
        let ids: Vec<String> = (0..layers).map(|l| format!("[{}]", (t * 7 + l * 13) % 64)).collect();
        s.push_str(&format!("{{\"iter\": {}, \"req\": 0, \"pos\": {t}, \"layers\": [{}]}}\n", t / 4, ids.join(",")));
    }
    s
}

#[test]
fn a_deep_top1_trace_loads_in_memory_proportional_to_its_ids() {
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let (tokens, layers) = (64, 4096);
    let text = deep_trace(tokens, layers);
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("deep_top1.jsonl");
    std::fs::write(&path, &text).unwrap();
    drop(text);
    let ids = tokens * layers * 2; // bytes of u16 ids: 512 KiB
    let base = LIVE.load(SeqCst);
    PEAK.store(base, SeqCst);
    let t = load_trace(&path).unwrap();
    let held = LIVE.load(SeqCst) - base;
    let peak = PEAK.load(SeqCst) - base;
    // Nested vectors held 26 bytes per layer (13x the ids); flat rows hold the ids and a
    // fixed part per token. Reading holds one line (~20 KiB) besides.
    assert!(held < ids + tokens * 256, "holds {held} bytes for {ids} bytes of ids");
    assert!(peak < 2 * ids + 256 * 1024, "peak {peak} bytes for {ids} bytes of ids");
    assert_eq!((t.tokens.len(), t.tokens[5].layers.len(), t.tokens[5].layers[4095][0]), (64, 4096, ((5 * 7 + 4095 * 13) % 64) as u16));
    let s = trace_stats(&t);
    assert_eq!((s.layers, s.tokens, s.per_layer_skewness.len()), (4096, 64, 4096));
    // `--layers 0..1` keeps one layer: a 4096th of the ids.
    let one = t.select_layers(0..1).unwrap();
    assert_eq!(one.tokens[3].layers, vec![vec![((3 * 7) % 64) as u16]]);
}

#[test]
fn rows_read_and_write_as_the_nested_arrays() {
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let r: Rows<u16> = vec![vec![1, 2], vec![3, 4], vec![5, 6]].into();
    assert_eq!((r.len(), &r[1], r.get(3)), (3, &[3u16, 4][..], None));
    assert_eq!(r.iter().rev().map(|x| x[0]).collect::<Vec<_>>(), [5, 3, 1]);
    assert_eq!(r.iter().flatten().copied().sum::<u16>(), 21);
    assert_eq!(serde_json::to_string(&r).unwrap(), "[[1,2],[3,4],[5,6]]");
    assert_eq!(serde_json::from_str::<Rows<u16>>("[[1,2],[3,4],[5,6]]").unwrap(), r);
    // Rows of differing lengths (refused by the trace checks) keep their shape.
    let ragged: Rows<u16> = serde_json::from_str("[[1],[2,3],[],[4]]").unwrap();
    assert_eq!(ragged, vec![vec![1], vec![2, 3], vec![], vec![4]]);
    assert_eq!(format!("{ragged:?}"), "[[1], [2, 3], [], [4]]");
    assert_eq!(ragged.select(1..3), vec![vec![2, 3], vec![]]);
    assert!(serde_json::from_str::<Rows<u16>>("[[1],[70000]]").unwrap_err().to_string().contains("u16"));
    // A ragged token is still refused naming its layer.
    let h = format!("{{\"format\": \"{TRACE_FORMAT}\", \"experts\": 8, \"top_k\": 2, \"layers\": 2}}\n");
    let e = parse_trace(&(h + "{\"iter\": 0, \"req\": 0, \"pos\": 0, \"layers\": [[0,1],[2]]}\n")).unwrap_err().to_string();
    assert!(e.contains("line 2: layers[1]: 1 experts, header top_k is 2"), "{e}");
}

#[test]
fn a_negative_count_is_called_negative_not_not_a_number() {
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let h = "model,domain,selection,layer,expert,count\n";
    let e = import_expert_counts_str(&format!("{h}olmoe,arxiv,topk,0,1,-5\n"), "olmoe", "arxiv", "topk").unwrap_err().to_string();
    assert!(e.contains("line 2: count: -5 is negative"), "{e}");
    let e = import_expert_counts_str(&format!("{h}olmoe,arxiv,topk,x,1,5\n"), "olmoe", "arxiv", "topk").unwrap_err().to_string();
    assert!(e.contains("line 2: layer: not a number: \"x\""), "{e}");
}
