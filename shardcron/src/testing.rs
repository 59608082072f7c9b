//! Testing your jobs in virtual time: a scheduler on an in-memory registry whose clock is
//! tokio's, so that under a paused clock (`#[tokio::test(start_paused = true)]`) a minute of
//! cron fires passes in milliseconds, deterministically.
//!
//! ```
//! use std::time::Duration;
//! use shardcron::prelude::*;
//!
//! // In your tests: #[tokio::test(start_paused = true)] async fn ...
//! #[tokio::main(flavor = "current_thread", start_paused = true)]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let test = shardcron::testing::virtual_scheduler().await?;
//!     let config = JobConfig::builder("billing")
//!         .cron("0/5 * * * * ?")
//!         .sharding_total_count(3)
//!         .sharding_item_parameters("0=EU,1=US,2=APAC")
//!         .build()?;
//!     test.scheduler
//!         .add_job(config, Job::from_fn(|ctx| async move {
//!             // Your code; a sleep is virtual too (the item takes 2 s of the test's minute).
//!             tokio::time::sleep(Duration::from_secs(2)).await;
//!             assert!(!ctx.item_parameter.is_empty());
//!             Ok(())
//!         }))
//!         .await?;
//!
//!     test.advance(Duration::from_secs(60)).await; // 60 virtual seconds
//!
//!     // Fires at 5, 10, ..., 60 s: 12 fires of 3 items; the last fire's items are still running.
//!     let runs = test.runs("billing");
//!     assert_eq!(runs.len(), 36);
//!     assert_eq!(runs.iter().filter(|r| r.ok == Some(true)).count(), 33);
//!     assert_eq!(runs[0].fire_time, shardcron::testing::start_time() + Duration::from_secs(5));
//!     test.scheduler.shutdown(Duration::from_secs(60)).await?;
//!     Ok(())
//! }
//! ```
//!
//! `shardcron::connect("mem:")` gives a registry on the wall clock, which stands still while
//! tokio's clock is paused; under a paused clock it refuses with
//! [`ConnectError::PausedClock`](crate::ConnectError::PausedClock) and points here. To run a
//! whole cluster of instances under faults, see the simulator (`shardcron-sim`,
//! `docs/simulating.md`).

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use shardcron_core::__private::time::{epoch_ms, from_epoch_ms};
use shardcron_core::__private::InlineEventSink;
use shardcron_core::events::SchedulerEvent;
use shardcron_core::handles::{Handles, SeededRandom, TokioClock, TokioSpawner};
use shardcron_core::runtime::{FireKind, Scheduler, SchedulerBuilder};
use shardcron_registry_mem::{ConnectOptions, MemServer};

/// What the virtual clock reads when [`virtual_scheduler`] is called, in epoch milliseconds.
const START_MS: i64 = 1_704_067_200_000;

/// What the virtual clock reads when [`virtual_scheduler`] is called: 2024-01-01T00:00:00Z, a
/// whole minute, so that cron fires fall on round offsets from it.
pub fn start_time() -> SystemTime {
    from_epoch_ms(START_MS)
}

/// How many turns [`VirtualScheduler::advance`] gives the tasks due at the end of its window:
/// a fire is a chain of a few registry round trips, each a turn or two.
const SETTLE_TURNS: usize = 64;

/// The seed of the scheduler's and the registry's randomness.
pub const SEED: u64 = 0;

/// A scheduler on a fresh in-memory registry, on tokio's clock starting at [`start_time`], with
/// every scheduler event recorded. Call it inside a tokio runtime; with paused time (the point),
/// [`advance`](VirtualScheduler::advance) jumps.
pub async fn virtual_scheduler() -> Result<VirtualScheduler, shardcron_core::Error> {
    virtual_scheduler_with(|builder| builder).await
}

/// [`virtual_scheduler`] with the builder adjusted first (settings, custom sharding strategies,
/// listeners, error handlers...). Time, registry and events are this module's.
pub async fn virtual_scheduler_with(
    configure: impl FnOnce(SchedulerBuilder) -> SchedulerBuilder,
) -> Result<VirtualScheduler, shardcron_core::Error> {
    let clock = Arc::new(TokioClock::starting_at(START_MS));
    let handles = Handles {
        clock: clock.clone(),
        spawner: Arc::new(TokioSpawner),
        random: Arc::new(SeededRandom::new(SEED)),
    };
    let server = MemServer::new(handles.clone());
    let registry = server.connect(ConnectOptions::default())?;
    let events: Arc<Mutex<Vec<(i64, SchedulerEvent)>>> = Arc::default();
    let (sink_events, sink_clock) = (events.clone(), clock.clone());
    let sink = Arc::new(move |event: &SchedulerEvent| {
        use shardcron_core::handles::Clock as _;
        let now = sink_clock.now_ms();
        sink_events.lock().unwrap_or_else(PoisonError::into_inner).push((now, event.clone()));
    });
    let scheduler = configure(SchedulerBuilder::new(Arc::new(registry)))
        .handles(handles)
        // Inline: the record holds each event at the virtual instant it happened, complete
        // whenever the test looks.
        .inline_event_sink(sink)
        .start()
        .await?;
    Ok(VirtualScheduler { scheduler, server, events, clock })
}

/// A scheduler in virtual time, and what it did.
pub struct VirtualScheduler {
    /// Add jobs to it, trigger them, shut it down: it is an ordinary scheduler.
    pub scheduler: Scheduler,
    /// The in-memory registry server: connect more clients (another scheduler, an operator's
    /// `JobOperations`), inspect its nodes, or break things with its fault hooks.
    pub server: MemServer,
    events: Arc<Mutex<Vec<(i64, SchedulerEvent)>>>,
    clock: Arc<TokioClock>,
}

impl fmt::Debug for VirtualScheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VirtualScheduler")
            .field("now", &self.now())
            .field("events", &self.lock().len())
            .finish()
    }
}

/// One run of one item, as the scheduler reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemRun {
    /// The job's name.
    pub job: String,
    /// The item.
    pub item: u32,
    /// The fire it belongs to (`ShardingContext::fire_time`).
    pub fire_time: SystemTime,
    /// Why the fire ran (scheduled, misfire, manual, failover).
    pub kind: FireKind,
    /// When its code started, on the virtual clock: when it was marked running, or, for a fire
    /// the scheduler took ahead (`Settings::fire_lead`), the fire's time, which it waited for.
    pub started: SystemTime,
    /// `Some(true)`: it completed; `Some(false)`: it failed; `None`: still running.
    pub ok: Option<bool>,
}

impl VirtualScheduler {
    /// What the virtual clock reads.
    pub fn now(&self) -> SystemTime {
        use shardcron_core::handles::Clock as _;
        from_epoch_ms(self.clock.now_ms())
    }

    /// Lets `duration` of virtual time pass: every fire, item and registry timer due meanwhile
    /// runs, those due at the very end included. (Under a paused clock this returns at once in
    /// wall time.)
    pub async fn advance(&self, duration: Duration) {
        tokio::time::sleep(duration).await;
        // Timers due at this very instant (a fire at the end of the window) may come after
        // this task's own: step aside until what they start has had its turn, without letting
        // the clock move (a task that yields is never idle, so paused time does not advance).
        for _ in 0..SETTLE_TURNS {
            tokio::task::yield_now().await;
        }
    }

    /// Every event so far, with the virtual time it was reported at.
    pub fn events(&self) -> Vec<(SystemTime, SchedulerEvent)> {
        self.lock().iter().map(|(at, event)| (from_epoch_ms(*at), event.clone())).collect()
    }

    /// Every item run of `job` so far, in the order they started.
    pub fn runs(&self, job: &str) -> Vec<ItemRun> {
        let mut runs: Vec<ItemRun> = Vec::new();
        for (at, event) in self.lock().iter() {
            match event {
                SchedulerEvent::ItemStarted { job: j, item, fire_ms, kind, .. } if j == job => {
                    // Taken ahead of its fire, it waited for it; a trigger's time is its own.
                    let started = if *kind == FireKind::Manual { *at } else { (*at).max(*fire_ms) };
                    runs.push(ItemRun {
                        job: j.clone(),
                        item: *item,
                        fire_time: from_epoch_ms(*fire_ms),
                        kind: *kind,
                        started: from_epoch_ms(started),
                        ok: None,
                    });
                }
                SchedulerEvent::ItemFinished { job: j, item, fire_ms, ok } if j == job => {
                    let open = runs.iter_mut().rev().find(|r| {
                        r.item == *item && epoch_ms(r.fire_time) == *fire_ms && r.ok.is_none()
                    });
                    if let Some(run) = open {
                        run.ok = Some(*ok);
                    }
                }
                _ => {}
            }
        }
        runs
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(i64, SchedulerEvent)>> {
        self.events.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// True when tokio's clock is paused on this thread's runtime (`start_paused`,
/// `tokio::time::pause`). Tokio has no query for it; a paused clock is one that does not move
/// while real time does, so this watches real time pass a few microseconds.
pub(crate) fn tokio_clock_is_paused() -> bool {
    let (tokio_then, real_then) = (tokio::time::Instant::now(), std::time::Instant::now());
    while real_then.elapsed() < Duration::from_micros(20) {
        std::hint::spin_loop();
    }
    tokio::time::Instant::now() == tokio_then
}
