//! A spinning barrier for the per-cycle synchronisation of the parallel stepper.
//!
//! `std::sync::Barrier` parks threads through a mutex and condvar, which costs microseconds —
//! more than a whole cycle of a 64-router mesh. Cycles are short and balanced, so spinning is
//! cheaper; after a while a waiter yields so an oversubscribed machine still makes progress.

use std::sync::atomic::{AtomicUsize, Ordering};

pub struct SpinBarrier {
    n: usize,
    count: AtomicUsize,
    generation: AtomicUsize,
}

impl SpinBarrier {
    pub fn new(n: usize) -> Self {
        assert!(n >= 1);
        SpinBarrier { n, count: AtomicUsize::new(0), generation: AtomicUsize::new(0) }
    }

    /// Blocks until all `n` threads have called `wait` for this generation. Everything a
    /// thread wrote before `wait` is visible to every thread after it (AcqRel on the counter,
    /// Release/Acquire on the generation).
    pub fn wait(&self) {
        let gen = self.generation.load(Ordering::Acquire);
        if self.count.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
            self.count.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            return;
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == gen {
            spins += 1;
            if spins < 1 << 12 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn phases_do_not_overlap() {
        let b = SpinBarrier::new(3);
        let counter = AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    for round in 0..1000u64 {
                        counter.fetch_add(1, Ordering::Relaxed);
                        b.wait();
                        assert_eq!(counter.load(Ordering::Relaxed), 3 * (round + 1));
                        b.wait();
                    }
                });
            }
        });
    }
}
