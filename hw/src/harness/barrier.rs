//! The per-step exchange of the parallel stepper: a barrier that carries each thread's
//! status.
//!
//! Every evaluated step ends with each stepper thread publishing its partitions' merged
//! status and reading everyone else's. A counter barrier followed by reads of the statuses
//! moves the counter's cache line between the cores several times per step, then each
//! status line once more; between the vCPUs of this VM one such transfer costs about
//! 100–150 ns, and a zero-work barrier round alone measured 280 ns. Here each thread
//! instead writes one *post* — its status and the step number — into a cache-line-aligned
//! slot that only it writes, and waits until every other thread's post carries the same
//! step: one line written and one read per partner per step, with no shared counter.
//!
//! Posts are double-buffered by step parity: a thread can be at most one step ahead of the
//! slowest (it waits for everyone's post of step *s* before it computes step *s + 1*), so
//! the slot of step *s* is not rewritten (at *s + 2*) before every thread has read it.
//!
//! Cycles are short and balanced, so a waiter spins first. When the machine is
//! oversubscribed (more stepper threads than free cores) spinning would starve the very
//! thread being waited for, so after a bounded spin the waiter parks on a condvar; a poster
//! touches the mutex only when someone is parked, keeping the common path lock-free.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

/// Words of one post (the stepper's `PartStatus`: busy, next event, progress, oldest wait
/// and six counters; then the leader's mode for the next step).
pub const POST_WORDS: usize = 11;

/// One thread's post for steps of one parity: the step it belongs to, then the words.
/// Aligned so that no two threads' posts share a cache line.
#[repr(align(128))]
struct Post {
    step: AtomicU64,
    words: [AtomicU64; POST_WORDS],
}

impl Post {
    fn new() -> Self {
        Post { step: AtomicU64::new(0), words: Default::default() }
    }
}

pub struct PostBarrier {
    /// Per thread, per step parity.
    posts: Vec<[Post; 2]>,
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    wake: Condvar,
}

/// Spins before parking (each spin is a pause instruction, ~10-40 ns).
const SPINS: u32 = 2000;

impl PostBarrier {
    pub fn new(threads: usize) -> Self {
        assert!(threads >= 1);
        PostBarrier { posts: (0..threads).map(|_| [Post::new(), Post::new()]).collect(), sleepers: AtomicUsize::new(0), lock: Mutex::new(()), wake: Condvar::new() }
    }

    /// Thread `me` posts `words` for step `step`, waits until every other thread has posted
    /// the same step, and hands `each` their words in thread order. Step numbers start at 1
    /// and strictly increase, the same sequence on every thread (the stepper's step count: a
    /// serial phase in between, with the other threads parked, skips numbers on all threads
    /// alike), so a slot's old step never matches the one awaited. Everything a thread wrote
    /// before its post is visible to every thread after its wait.
    pub fn exchange(&self, me: usize, step: u64, words: &[u64; POST_WORDS], mut each: impl FnMut(usize, &[u64; POST_WORDS])) {
        debug_assert!(step >= 1);
        let par = (step & 1) as usize;
        let mine = &self.posts[me][par];
        for (a, &w) in mine.words.iter().zip(words.iter()) {
            a.store(w, Ordering::Relaxed);
        }
        // SeqCst, against the sleepers check below: either a parked waiter sees this step or
        // this thread sees the waiter registered (and wakes it).
        mine.step.store(step, Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            let _g = self.lock.lock().unwrap();
            self.wake.notify_all();
        }
        for (t, p) in self.posts.iter().enumerate() {
            if t == me {
                continue;
            }
            let post = &p[par];
            self.wait_for(&post.step, step);
            let mut got = [0u64; POST_WORDS];
            for (g, a) in got.iter_mut().zip(post.words.iter()) {
                *g = a.load(Ordering::Relaxed);
            }
            each(t, &got);
        }
    }

    /// Until `at` reads `step` (Acquire: the poster's words and earlier writes are visible).
    fn wait_for(&self, at: &AtomicU64, step: u64) {
        for _ in 0..SPINS {
            if at.load(Ordering::Acquire) == step {
                return;
            }
            std::hint::spin_loop();
        }
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        let mut g = self.lock.lock().unwrap();
        while at.load(Ordering::SeqCst) != step {
            g = self.wake.wait(g).unwrap();
        }
        drop(g);
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three threads, 20 000 steps: each sees exactly the others' words of the same step
    /// (never the step before or after), and the phases do not overlap (a shared counter
    /// bumped before each exchange reads 3 × step after it).
    #[test]
    fn posts_are_exchanged_step_by_step() {
        let b = PostBarrier::new(3);
        let counter = AtomicU64::new(0);
        std::thread::scope(|s| {
            for me in 0..3usize {
                let (b, counter) = (&b, &counter);
                s.spawn(move || {
                    for step in 1..=20_000u64 {
                        counter.fetch_add(1, Ordering::Relaxed);
                        let mut w = [0u64; POST_WORDS];
                        w[0] = step;
                        w[POST_WORDS - 1] = me as u64 * 1_000_000 + step;
                        let mut seen = Vec::new();
                        b.exchange(me, step, &w, |_, o| {
                            assert_eq!(o[0], step);
                            seen.push(o[POST_WORDS - 1] / 1_000_000);
                            assert_eq!(o[POST_WORDS - 1] % 1_000_000, step);
                        });
                        assert_eq!(seen, (0..3u64).filter(|&t| t != me as u64).collect::<Vec<_>>());
                        assert!(counter.load(Ordering::Relaxed) >= 3 * step);
                        assert!(counter.load(Ordering::Relaxed) <= 3 * step + 3);
                    }
                });
            }
        });
    }

    /// More threads than cores: waiters park and are woken (no lost wake-up, no hang).
    #[test]
    fn oversubscribed_threads_park_and_wake() {
        let n = 6;
        let b = PostBarrier::new(n);
        std::thread::scope(|s| {
            for me in 0..n {
                let b = &b;
                s.spawn(move || {
                    for step in 1..=3_000u64 {
                        if (step + me as u64) % 500 == 0 {
                            std::thread::sleep(std::time::Duration::from_millis(1));
                        }
                        let mut sum = 0;
                        b.exchange(me, step, &[step; POST_WORDS], |_, o| sum += o[0]);
                        assert_eq!(sum, step * (n as u64 - 1));
                    }
                });
            }
        });
    }
}
