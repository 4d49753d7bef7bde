//! A spin-then-park barrier for the per-cycle synchronisation of the parallel stepper.
//!
//! `std::sync::Barrier` parks threads through a mutex and condvar, which costs microseconds —
//! more than a whole cycle of a 64-router mesh. Cycles are short and balanced, so a waiter
//! spins first. When the machine is oversubscribed (more stepper threads than free cores,
//! e.g. under a parallel test runner) spinning would starve the very thread being waited for,
//! so after a bounded spin the waiter parks on a condvar; the releaser only touches the mutex
//! when someone is parked, keeping the common path lock-free.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

pub struct SpinBarrier {
    n: usize,
    count: AtomicUsize,
    generation: AtomicUsize,
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    wake: Condvar,
}

/// Spins before parking (each spin is a pause instruction, ~10-40 ns).
const SPINS: u32 = 2000;

impl SpinBarrier {
    pub fn new(n: usize) -> Self {
        assert!(n >= 1);
        SpinBarrier {
            n,
            count: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
            sleepers: AtomicUsize::new(0),
            lock: Mutex::new(()),
            wake: Condvar::new(),
        }
    }

    /// Blocks until all `n` threads have called `wait` for this generation. Everything a
    /// thread wrote before `wait` is visible to every thread after it (AcqRel on the counter,
    /// Release/Acquire on the generation).
    pub fn wait(&self) {
        let gen = self.generation.load(Ordering::SeqCst);
        if self.count.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
            self.count.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::SeqCst);
            // A parked waiter registered itself before re-checking the generation, so either
            // it sees the new generation or we see it here (both SeqCst).
            if self.sleepers.load(Ordering::SeqCst) > 0 {
                let _g = self.lock.lock().unwrap();
                self.wake.notify_all();
            }
            return;
        }
        for _ in 0..SPINS {
            if self.generation.load(Ordering::Acquire) != gen {
                return;
            }
            std::hint::spin_loop();
        }
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        let mut g = self.lock.lock().unwrap();
        while self.generation.load(Ordering::SeqCst) == gen {
            g = self.wake.wait(g).unwrap();
        }
        drop(g);
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
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
