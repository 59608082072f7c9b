//! The injected handles through which shardcron reads time, draws random numbers and spawns tasks.
//!
//! The core never calls `SystemTime::now`, `Instant::now` or `thread_rng` itself (see
//! `docs/architecture.md`, determinism): it asks these handles. Production uses [`Handles::real`]; the simulator and tests use
//! [`Handles::simulated`], whose clock follows tokio's clock, so a runtime with paused time
//! (`#[tokio::test(start_paused = true)]`, or the simulator's single-threaded runtime) runs the
//! unchanged core in virtual time, deterministically.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Wall-clock time in epoch milliseconds.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Now, in milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;

    /// Sleeps until the clock reads `deadline_ms` (returns at once if it already does).
    fn sleep_until(&self, deadline_ms: i64) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>> {
        let wait = deadline_ms.saturating_sub(self.now_ms()).max(0);
        Box::pin(tokio::time::sleep(Duration::from_millis(wait.unsigned_abs())))
    }

    /// Sleeps until the clock reads `deadline_ms`, as close to it as the clock can wake: the
    /// deadline of a fire, whose lateness is what a scheduler is judged by. By default the same
    /// as [`sleep_until`](Clock::sleep_until).
    fn sleep_until_exactly(
        &self,
        deadline_ms: i64,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>> {
        self.sleep_until(deadline_ms)
    }
}

/// The system's wall clock; the only place that reads it.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        let since_epoch =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX)
    }

    /// Wakes at the deadline itself, not at the next whole millisecond after it: the wait is
    /// computed from the wall clock in nanoseconds (`now_ms` truncates, which made every sleep up
    /// to a millisecond too long) and handed to tokio as an `Instant`.
    fn sleep_until(&self, deadline_ms: i64) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>> {
        let start = tokio::time::Instant::now();
        let since_epoch =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let deadline = Duration::from_millis(u64::try_from(deadline_ms).unwrap_or(0));
        let wait = deadline.saturating_sub(since_epoch);
        Box::pin(tokio::time::sleep_until(start + wait))
    }

    /// Sleeps on tokio's timer until `SPIN_MARGIN` (2 ms) before the deadline, then yields to the
    /// runtime's other tasks until the wall clock reaches it. tokio's timer wheel counts whole
    /// milliseconds and rounds a deadline up to the next one, and the poll it parks in takes
    /// its timeout in whole milliseconds too: alone it wakes 1 to 2 ms late (1.2 ms median for
    /// a lone job firing every second). The yielding costs at most the margin of one core's
    /// time per fire deadline, and takes no time from other tasks (they run first).
    fn sleep_until_exactly(
        &self,
        deadline_ms: i64,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>> {
        let margin = i64::try_from(SPIN_MARGIN.as_millis()).unwrap_or(0);
        let coarse = self.sleep_until(deadline_ms.saturating_sub(margin));
        let deadline = Duration::from_millis(u64::try_from(deadline_ms).unwrap_or(0));
        Box::pin(async move {
            coarse.await;
            // Bounded by the monotonic clock too: a wall clock set back meanwhile would have
            // it yield for as long as the step (the driver then sees the timer ring early by
            // the clock, and handles that as a clock set back, as with tokio's timer alone).
            let spin_until = tokio::time::Instant::now() + SPIN_MARGIN * 2;
            while std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                < deadline
                && tokio::time::Instant::now() < spin_until
            {
                tokio::task::yield_now().await;
            }
        })
    }
}

/// A clock that reads `lead_ms` ahead of another (`Settings::fire_lead`): the scheduler
/// takes each fire's steps and commits its `running` markers that much before the wall clock
/// reaches the fire, and holds the items until it does. To the protocol this is an instance
/// whose clock runs a constant `lead_ms` fast, which it already has to be right for; durations
/// (timeouts, the waits of a reshard) are the same on both clocks.
#[derive(Debug)]
pub struct LeadClock {
    inner: Arc<dyn Clock>,
    lead_ms: i64,
}

impl LeadClock {
    /// `inner`, read `lead_ms` ahead.
    pub fn new(inner: Arc<dyn Clock>, lead_ms: i64) -> Self {
        LeadClock { inner, lead_ms }
    }
}

impl Clock for LeadClock {
    fn now_ms(&self) -> i64 {
        self.inner.now_ms().saturating_add(self.lead_ms)
    }

    fn sleep_until(&self, deadline_ms: i64) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>> {
        self.inner.sleep_until(deadline_ms.saturating_sub(self.lead_ms))
    }

    fn sleep_until_exactly(
        &self,
        deadline_ms: i64,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>> {
        self.inner.sleep_until_exactly(deadline_ms.saturating_sub(self.lead_ms))
    }
}

/// How long before a fire's deadline [`SystemClock`] stops sleeping on tokio's timer and
/// watches the clock instead: tokio's lateness, rounded up.
const SPIN_MARGIN: Duration = Duration::from_millis(2);

/// A clock that starts at a given epoch instant and advances with tokio's clock. Under paused
/// tokio time it is virtual: it jumps exactly as far as the runtime auto-advances.
#[derive(Debug)]
pub struct TokioClock {
    start_ms: i64,
    origin: tokio::time::Instant,
    skew_ms: Mutex<i64>,
}

impl TokioClock {
    /// A clock reading `start_ms` now. Must be created inside a tokio runtime with the time
    /// driver enabled.
    pub fn starting_at(start_ms: i64) -> Self {
        TokioClock { start_ms, origin: tokio::time::Instant::now(), skew_ms: Mutex::new(0) }
    }

    /// Shifts every later reading by `skew_ms` (the simulator's clock-skew fault).
    pub fn set_skew(&self, skew_ms: i64) {
        *self.skew_ms.lock() = skew_ms;
    }
}

impl Clock for TokioClock {
    fn now_ms(&self) -> i64 {
        let elapsed = tokio::time::Instant::now().duration_since(self.origin).as_millis();
        self.start_ms + i64::try_from(elapsed).unwrap_or(i64::MAX / 2) + *self.skew_ms.lock()
    }
}

/// Task spawning. The simulator needs every task on its own runtime; production uses tokio's.
pub trait Spawner: Send + Sync + fmt::Debug {
    /// Runs an async task to completion in the background.
    fn spawn(&self, task: Pin<Box<dyn Future<Output = ()> + Send + 'static>>);

    /// Runs blocking code (a blocking job closure, a sync API) where it cannot stall the async
    /// tasks. The simulator, which has no threads, may run it inline.
    fn spawn_blocking(&self, task: Box<dyn FnOnce() + Send + 'static>);
}

/// Spawns on the ambient tokio runtime.
#[derive(Debug, Default, Clone, Copy)]
pub struct TokioSpawner;

impl Spawner for TokioSpawner {
    fn spawn(&self, task: Pin<Box<dyn Future<Output = ()> + Send + 'static>>) {
        tokio::spawn(task);
    }

    fn spawn_blocking(&self, task: Box<dyn FnOnce() + Send + 'static>) {
        tokio::task::spawn_blocking(task);
    }
}

/// Spawns on the ambient tokio runtime and remembers every task, so that [`kill`](Self::kill)
/// can abort them all at once: an in-process `kill -9` of one scheduler, for the simulator, the
/// demo and crash tests. Blocking tasks cannot be aborted; they run to their end unobserved.
#[derive(Debug, Default)]
pub struct KillableSpawner {
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
    killed: std::sync::atomic::AtomicBool,
}

impl KillableSpawner {
    /// A spawner whose tasks run until [`kill`](Self::kill).
    pub fn new() -> Self {
        Self::default()
    }

    /// Aborts every task spawned so far, and every task spawned from now on.
    pub fn kill(&self) {
        self.killed.store(true, std::sync::atomic::Ordering::SeqCst);
        for task in self.tasks.lock().drain(..) {
            task.abort();
        }
    }
}

impl Spawner for KillableSpawner {
    fn spawn(&self, task: Pin<Box<dyn Future<Output = ()> + Send + 'static>>) {
        if self.killed.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let handle = tokio::spawn(task).abort_handle();
        let mut tasks = self.tasks.lock();
        // Forget finished tasks now and then, so a long-lived scheduler does not grow the list.
        if tasks.len() >= 1024 {
            tasks.retain(|t| !t.is_finished());
        }
        tasks.push(handle);
    }

    fn spawn_blocking(&self, task: Box<dyn FnOnce() + Send + 'static>) {
        if !self.killed.load(std::sync::atomic::Ordering::SeqCst) {
            tokio::task::spawn_blocking(task);
        }
    }
}

/// A source of random numbers (jitter, tie-breaking). Seeded in the simulator.
pub trait Random: Send + Sync + fmt::Debug {
    /// The next number; uniformly distributed over all of `u64`.
    fn next_u64(&self) -> u64;
}

/// A seeded ChaCha generator: the same seed gives the same numbers on every platform.
#[derive(Debug)]
pub struct SeededRandom(Mutex<ChaCha8Rng>);

impl SeededRandom {
    /// The sequence of `seed`: the same seed gives the same numbers, run after run, which is
    /// what lets the simulator replay a failing seed.
    pub fn new(seed: u64) -> Self {
        SeededRandom(Mutex::new(ChaCha8Rng::seed_from_u64(seed)))
    }

    /// Seeded from the operating system's entropy, for production.
    pub fn from_entropy() -> Self {
        SeededRandom(Mutex::new(ChaCha8Rng::from_entropy()))
    }
}

impl Random for SeededRandom {
    fn next_u64(&self) -> u64 {
        self.0.lock().next_u64()
    }
}

/// The bundle of handles a component receives.
#[derive(Debug, Clone)]
pub struct Handles {
    /// Where the component reads the time (never the system clock directly).
    pub clock: Arc<dyn Clock>,
    /// How it starts tasks and blocking work.
    pub spawner: Arc<dyn Spawner>,
    /// Where its randomness comes from.
    pub random: Arc<dyn Random>,
}

impl Handles {
    /// Wall clock, tokio's spawner, entropy-seeded randomness.
    pub fn real() -> Self {
        Handles {
            clock: Arc::new(SystemClock),
            spawner: Arc::new(TokioSpawner),
            random: Arc::new(SeededRandom::from_entropy()),
        }
    }

    /// A clock starting at `start_ms` that follows tokio's (possibly paused) clock, tokio's
    /// spawner and randomness seeded with `seed`. Call inside a tokio runtime.
    pub fn simulated(start_ms: i64, seed: u64) -> Self {
        Handles {
            clock: Arc::new(TokioClock::starting_at(start_ms)),
            spawner: Arc::new(TokioSpawner),
            random: Arc::new(SeededRandom::new(seed)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn tokio_clock_is_virtual_under_paused_time() {
        let clock = TokioClock::starting_at(1_000_000);
        assert_eq!(clock.now_ms(), 1_000_000);
        clock.sleep_until(1_060_000).await;
        assert_eq!(clock.now_ms(), 1_060_000);
        clock.set_skew(-500);
        assert_eq!(clock.now_ms(), 1_059_500);
    }

    #[tokio::test(start_paused = true)]
    async fn killing_aborts_every_task() {
        let spawner = KillableSpawner::new();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u32>();
        for i in 0..3 {
            let tx = tx.clone();
            spawner.spawn(Box::pin(async move {
                tokio::time::sleep(Duration::from_secs(10)).await;
                let _ = tx.send(i);
            }));
        }
        drop(tx);
        spawner.kill();
        spawner.spawn(Box::pin(async {}));
        tokio::time::sleep(Duration::from_secs(20)).await;
        assert_eq!(rx.recv().await, None, "no task survived the kill");
    }

    #[test]
    fn seeded_random_repeats() {
        let a = SeededRandom::new(7);
        let b = SeededRandom::new(7);
        let xs: Vec<u64> = (0..4).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..4).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
    }
}
