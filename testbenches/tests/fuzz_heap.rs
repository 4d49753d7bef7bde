//! The fuzz runner's heap bound is per thread: a case measures only the growth of the thread
//! that ran it, so targets fuzzed concurrently (cargo test runs tests on several threads) do
//! not charge each other's allocations, and no lock is needed to run them one at a time.

use std::sync::{Arc, Barrier};

use testbenches::fuzz::{heap_growth, heap_mark, CountingAlloc};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

#[test]
fn growth_is_counted_per_thread() {
    const BIG: usize = 64 << 20;
    let barrier = Arc::new(Barrier::new(2));
    let b = barrier.clone();
    // Another thread allocates (and touches) 64 MiB while this one measures itself.
    let other = std::thread::spawn(move || {
        b.wait(); // this thread has taken its mark
        let base = heap_mark();
        let v = vec![1u8; BIG];
        let own = heap_growth(base);
        b.wait(); // the measuring thread reads its growth while `v` is live
        b.wait();
        drop(v);
        own
    });
    let base = heap_mark();
    barrier.wait();
    barrier.wait();
    let small: Vec<u64> = (0..1000).collect(); // 8,000 bytes of our own
    let mine = heap_growth(base);
    barrier.wait();
    let theirs = other.join().unwrap();
    assert!(theirs >= BIG, "the allocating thread sees its 64 MiB: {theirs}");
    assert!((8000..BIG / 2).contains(&mine), "this thread sees only its own bytes: {mine}");
    drop(small);

    // Freed memory does not count as growth past the peak; a new mark starts from the live
    // bytes, not from zero.
    let base = heap_mark();
    let v = vec![0u8; 1 << 20];
    drop(v);
    let w = vec![0u8; 1 << 19];
    assert_eq!(heap_growth(base), 1 << 20, "peak growth, not the sum of allocations");
    drop(w);
}
