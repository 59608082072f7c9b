//! The scheduler's lifecycle and its event stream, as an embedding application sees them, in
//! virtual time on the in-memory registry: dropping the scheduler stops its fires, a graceful
//! shutdown leaves the registry the application passed in open and usable, a slow event
//! subscriber delays no fire, and a subscriber that falls behind is told how many events it
//! missed.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure report

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use parking_lot::Mutex;
use shardcron_core::config::JobConfig;
use shardcron_core::job::Job;
use shardcron_core::registry::{CoordinatorRegistry, CreateMode, Op, RegistryError, RegistryExt};
use shardcron_core::runtime::{EventsLagged, Scheduler, SchedulerBuilder, SchedulerEvent};
use shardcron_tests::{TestCluster, EPOCH_MS};

/// A job of `items` items firing every second that counts its item runs in `runs`.
fn counting(name: &str, items: u32, runs: &Arc<AtomicUsize>) -> (JobConfig, Job) {
    let config =
        JobConfig::builder(name).cron("* * * * * ?").sharding_total_count(items).build().unwrap();
    let runs = runs.clone();
    let job = Job::from_fn(move |_| {
        let runs = runs.clone();
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    });
    (config, job)
}

async fn start_on(cluster: &TestCluster, registry: Arc<dyn CoordinatorRegistry>) -> Scheduler {
    SchedulerBuilder::new(registry)
        .handles(cluster.handles.clone())
        .ip("10.0.0.1")
        .pid(1)
        .start()
        .await
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn dropping_the_scheduler_stops_its_fires() {
    let cluster = TestCluster::new(41);
    let registry: Arc<dyn CoordinatorRegistry> = Arc::new(cluster.client());
    let scheduler = start_on(&cluster, registry.clone()).await;
    let runs = Arc::new(AtomicUsize::new(0));
    let (config, job) = counting("ticks", 2, &runs);
    scheduler.add_job(config, job).await.unwrap();
    let clone = scheduler.clone();
    tokio::time::sleep(Duration::from_millis(5_500)).await;
    let before = runs.load(Ordering::SeqCst);
    assert!(before >= 8, "two items a second for 5 s ran {before} times");

    // One handle is not the last: the scheduler goes on.
    drop(clone);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let still = runs.load(Ordering::SeqCst);
    assert!(still > before, "a clone's drop stopped the scheduler ({before} → {still})");

    drop(scheduler);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let at_drop = runs.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(runs.load(Ordering::SeqCst), at_drop, "no item runs after the drop");
    // Nothing was written on the way out: the instance's ephemeral node stays until its
    // session ends, which is the application's registry's to end.
    let instances = registry.children_or_empty("/ticks/instances").await.unwrap();
    assert_eq!(instances, ["10.0.0.1@-@1"]);
    registry.close().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn shutdown_leaves_the_callers_registry_open_and_usable() {
    let cluster = TestCluster::new(42);
    let registry: Arc<dyn CoordinatorRegistry> = Arc::new(cluster.client());
    let scheduler = start_on(&cluster, registry.clone()).await;
    let runs = Arc::new(AtomicUsize::new(0));
    let (config, job) = counting("reports", 3, &runs);
    scheduler.add_job(config, job).await.unwrap();
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    scheduler.shutdown(Duration::from_secs(60)).await.unwrap();

    // This instance left: its nodes are gone, the job's config stays.
    assert!(registry.children_or_empty("/reports/instances").await.unwrap().is_empty());
    assert!(registry.get("/reports/config").await.unwrap().is_some());
    // The registry is the caller's, still open: reads, writes, and a new scheduler on it.
    registry.create("/after-shutdown", b"still here", CreateMode::Persistent).await.unwrap();
    let node = registry.get("/after-shutdown").await.unwrap().unwrap();
    assert_eq!(node.data, b"still here");
    let again = start_on(&cluster, registry.clone()).await;
    let (config, job) = counting("reports", 3, &runs);
    again.add_job(config, job).await.unwrap();
    let before = runs.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(runs.load(Ordering::SeqCst) > before, "a new scheduler runs on the same registry");
    again.shutdown(Duration::from_secs(60)).await.unwrap();
    registry.close().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_slow_event_subscriber_delays_no_fire() {
    let cluster = TestCluster::new(43);
    let registry: Arc<dyn CoordinatorRegistry> = Arc::new(cluster.client());
    let scheduler = SchedulerBuilder::new(registry.clone())
        .handles(cluster.handles.clone())
        .ip("10.0.0.1")
        .pid(1)
        .event_capacity(8)
        .start()
        .await
        .unwrap();
    // A subscriber that takes 30 s of virtual time over each event, and one that never reads.
    let mut slow = scheduler.events();
    let _never_read = scheduler.events();
    let seen = Arc::new(Mutex::new(0usize));
    let counted = seen.clone();
    let reader = tokio::spawn(async move {
        while let Some(event) = slow.next().await {
            if event.is_ok() {
                *counted.lock() += 1;
            }
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
    });
    // Item starts, with the virtual time each was reported at, from an inline sink.
    let clock = cluster.handles.clock.clone();
    let starts = Arc::new(Mutex::new(Vec::new()));
    let (config, job) = counting("ticks", 2, &Arc::new(AtomicUsize::new(0)));
    scheduler.add_job(config, job).await.unwrap();
    let mut stream = scheduler.events();
    let recorder = {
        let starts = starts.clone();
        tokio::spawn(async move {
            while let Some(event) = stream.next().await {
                if let Ok(SchedulerEvent::ItemStarted { fire_ms, .. }) = event {
                    starts.lock().push((fire_ms, clock.now_ms()));
                }
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(20_500)).await;

    let starts = starts.lock().clone();
    let fires: std::collections::BTreeSet<i64> = starts.iter().map(|s| s.0).collect();
    assert!(fires.len() >= 19, "a fire every second for 20 s: {} fires", fires.len());
    for (fire_ms, at_ms) in &starts {
        assert!(
            at_ms - fire_ms < 100,
            "the fire at +{} ms started {} ms late",
            fire_ms - EPOCH_MS,
            at_ms - fire_ms
        );
    }
    assert!(*seen.lock() <= 1, "the slow subscriber read at most one event in 20 s");
    scheduler.shutdown(Duration::from_secs(60)).await.unwrap();
    // The recorder's stream ends with the shutdown.
    recorder.await.unwrap();
    reader.abort();
}

#[tokio::test(start_paused = true)]
async fn a_subscriber_that_falls_behind_is_told_how_many_events_it_missed() {
    let cluster = TestCluster::new(44);
    let registry: Arc<dyn CoordinatorRegistry> = Arc::new(cluster.client());
    let scheduler = SchedulerBuilder::new(registry)
        .handles(cluster.handles.clone())
        .ip("10.0.0.1")
        .pid(1)
        .event_capacity(4)
        .start()
        .await
        .unwrap();
    let mut events = scheduler.events();
    let runs = Arc::new(AtomicUsize::new(0));
    let (config, job) = counting("ticks", 4, &runs);
    scheduler.add_job(config, job).await.unwrap();
    // Four items a second: far more than four events before the subscriber reads.
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    let first = events.next().await.unwrap();
    let Err(EventsLagged { missed }) = first else {
        panic!("expected the lag first, got {first:?}");
    };
    assert!(missed > 0);
    // Then the four newest events, and the stream goes on.
    let mut after = 0;
    while let Some(Some(Ok(_))) = futures::FutureExt::now_or_never(events.next()) {
        after += 1;
    }
    assert_eq!(after, 4, "the buffer held the newest four");
    scheduler.shutdown(Duration::from_secs(60)).await.unwrap();
    // Whatever was emitted while stopping, then the end.
    let rest: Vec<_> = events.collect().await;
    assert!(rest.len() <= 5, "{rest:?}");
}

#[tokio::test(start_paused = true)]
async fn a_registration_cut_short_by_a_lost_connection_can_be_tried_again() {
    let cluster = TestCluster::new(47);
    let client = cluster.client();
    let id = client.client_id();
    let registry: Arc<dyn CoordinatorRegistry> = Arc::new(client);
    let scheduler = start_on(&cluster, registry).await;
    let runs = Arc::new(AtomicUsize::new(0));
    let (config, job) = counting("flaky", 1, &runs);
    let lost = RegistryError::ConnectionLoss { op: Op::Get, path: String::new() };
    // Every request takes 10 ms: the connection is lost once the scheduler has read the
    // stored config, while the job's runner registers.
    cluster.server.set_latency(id, Duration::from_millis(10));
    let adding = {
        let (scheduler, config, job) = (scheduler.clone(), config.clone(), job.clone());
        tokio::spawn(async move { scheduler.add_job(config, job).await })
    };
    tokio::time::sleep(Duration::from_millis(25)).await;
    cluster.server.fail_next(id, 1, lost);
    // Typed with its cause, so that the application can tell it from a refusal.
    let err = adding.await.unwrap().unwrap_err();
    cluster.server.set_latency(id, Duration::ZERO);
    let shardcron_core::Error::Registration { job: name, source } = &err else {
        panic!("a registration error: {err:?}");
    };
    assert_eq!(name, "flaky");
    assert!(matches!(source, RegistryError::ConnectionLoss { .. }), "{source:?}");
    assert!(err.is_retryable() && !err.is_bad_request(), "{err}");
    assert!(std::error::Error::source(&err).is_some(), "the registry's error is kept");
    scheduler.add_job(config, job).await.unwrap();
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    assert!(runs.load(Ordering::SeqCst) >= 2, "the job runs once added again");
}

#[tokio::test(start_paused = true)]
async fn a_job_whose_add_outlasts_the_start_of_a_shutdown_is_stopped_and_refused() {
    let cluster = TestCluster::new(48);
    let client = cluster.client();
    let id = client.client_id();
    let registry: Arc<dyn CoordinatorRegistry> = Arc::new(client);
    let scheduler = start_on(&cluster, registry.clone()).await;
    // A job whose item runs 5 s holds the shutdown while the other job is added.
    let config =
        JobConfig::builder("long").cron("* * * * * ?").sharding_total_count(1).build().unwrap();
    let job = Job::from_fn(|_| async {
        tokio::time::sleep(Duration::from_secs(5)).await;
        Ok(())
    });
    scheduler.add_job(config, job).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    // Every request takes a second now: the add takes many seconds, and the shutdown begins
    // while it registers.
    cluster.server.set_latency(id, Duration::from_secs(1));
    let runs = Arc::new(AtomicUsize::new(0));
    let (config, job) = counting("late", 2, &runs);
    let adding = {
        let scheduler = scheduler.clone();
        tokio::spawn(async move { scheduler.add_job(config, job).await })
    };
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let stopping = {
        let scheduler = scheduler.clone();
        tokio::spawn(async move { scheduler.shutdown(Duration::from_secs(60)).await })
    };
    let added = adding.await.unwrap();
    assert!(matches!(added, Err(shardcron_core::Error::ShutDown)), "{added:?}");
    stopping.await.unwrap().unwrap();
    cluster.server.set_latency(id, Duration::ZERO);
    tokio::time::sleep(Duration::from_secs(10)).await;
    // It left with the others, and nothing of it ran.
    assert!(registry.children_or_empty("/late/instances").await.unwrap().is_empty());
    assert!(registry.children_or_empty("/long/instances").await.unwrap().is_empty());
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the refused job ran nothing");
}
