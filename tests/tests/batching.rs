//! The jobs of one tick share their registry transactions (`docs/architecture.md`, "The fire
//! path and batched transactions"), in virtual time on the in-memory registry: counted, never
//! timed.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use shardcron_core::__private::time::epoch_ms;
use shardcron_core::config::JobConfig;
use shardcron_core::job::Job;
use shardcron_core::registry::{CoordinatorRegistry, CreateMode};
use shardcron_core::runtime::{SchedulerEvent, Settings, SkipReason};
use shardcron_tests::{InstanceOptions, TestCluster, TestInstance, EPOCH_MS};

const JOBS: usize = 200;

fn every_ten_seconds(i: usize) -> JobConfig {
    JobConfig::builder(format!("job-{i}")).cron("0/10 * * * * ?").build().expect("a valid config")
}

/// An instance of `cluster` whose scheduler takes its fires `lead_ms` ahead.
async fn instance_with_lead(cluster: &TestCluster, lead_ms: u64) -> TestInstance {
    let settings = Settings { fire_lead: Duration::from_millis(lead_ms), ..Settings::default() };
    let options = InstanceOptions { settings, ..InstanceOptions::default() };
    cluster.instance_opts("10.0.0.1", options).await
}

async fn until(cluster: &TestCluster, ms_after_epoch: i64) {
    let wait = EPOCH_MS + ms_after_epoch - cluster.handles.clock.now_ms();
    tokio::time::sleep(Duration::from_millis(wait.max(0) as u64)).await;
}

/// Jobs whose item started for the fire at `fire_ms`, ascending.
fn started(cluster: &TestCluster, fire_ms: i64) -> Vec<usize> {
    let mut jobs: Vec<usize> = cluster
        .events()
        .into_iter()
        .filter_map(|r| match r.event {
            SchedulerEvent::ItemStarted { job, fire_ms: f, .. } if f == fire_ms => {
                job.strip_prefix("job-").and_then(|n| n.parse().ok())
            }
            _ => None,
        })
        .collect();
    jobs.sort_unstable();
    jobs
}

#[tokio::test(start_paused = true)]
async fn the_fires_of_one_tick_take_one_transaction_to_start_and_one_to_end() {
    let cluster = TestCluster::new(1);
    let node = cluster.instance("10.0.0.1").await;
    for i in 0..JOBS {
        let job = Job::from_fn(|_| async { Ok(()) });
        node.scheduler.add_job(every_ten_seconds(i), job).await.expect("add the job");
    }
    // The first fire also reshards each job; the second is a plain one.
    until(&cluster, 19_500).await;
    node.counter.take();
    until(&cluster, 20_500).await;
    let counts = node.counter.take();
    assert_eq!(started(&cluster, EPOCH_MS + 20_000), (0..JOBS).collect::<Vec<_>>());
    assert_eq!(
        counts.get("transaction").copied(),
        Some(2),
        "{JOBS} jobs firing together: one transaction for the starts, one for the ends ({counts:?})"
    );
    assert_eq!(counts.values().sum::<u64>(), 2, "nothing else: {counts:?}");
}

#[tokio::test(start_paused = true)]
async fn a_job_whose_start_fails_gets_its_own_outcome_and_the_others_run() {
    let cluster = TestCluster::new(2);
    let node = cluster.instance("10.0.0.1").await;
    for i in 0..JOBS {
        let job = Job::from_fn(|_| async { Ok(()) });
        node.scheduler.add_job(every_ten_seconds(i), job).await.expect("add the job");
    }
    until(&cluster, 15_000).await;
    // Job 7's item still runs as far as the registry knows: its start must fail, alone.
    let marker = "/job-7/sharding/0/running";
    node.client.create(marker, node.id().as_bytes(), CreateMode::Persistent).await.unwrap();
    until(&cluster, 20_500).await;
    let fire = EPOCH_MS + 20_000;
    let others: Vec<usize> = (0..JOBS).filter(|&i| i != 7).collect();
    assert_eq!(started(&cluster, fire), others, "every other job ran its fire");
    let skipped = cluster.events().into_iter().any(|r| {
        matches!(r.event, SchedulerEvent::Skipped { ref job, fire_ms, reason: SkipReason::Misfire }
            if job == "job-7" && fire_ms == fire)
    });
    assert!(skipped, "job 7 saw its own start fail (its item runs: a misfire)");
}

#[tokio::test(start_paused = true)]
async fn items_of_one_tick_ending_apart_still_share_one_end_transaction() {
    let cluster = TestCluster::new(3);
    let node = cluster.instance("10.0.0.1").await;
    for i in 0..JOBS {
        // The items end over 40 ms: the first ends long before the last.
        let job = Job::from_fn(move |_| async move {
            tokio::time::sleep(Duration::from_millis((i % 41) as u64)).await;
            Ok(())
        });
        node.scheduler.add_job(every_ten_seconds(i), job).await.expect("add the job");
    }
    until(&cluster, 19_500).await;
    node.counter.take();
    until(&cluster, 20_500).await;
    let counts = node.counter.take();
    assert_eq!(started(&cluster, EPOCH_MS + 20_000), (0..JOBS).collect::<Vec<_>>());
    assert_eq!(
        counts.get("transaction").copied(),
        Some(2),
        "the ends wait for the last item of their tick ({counts:?})"
    );
}

#[tokio::test(start_paused = true)]
async fn a_long_item_does_not_hold_the_ends_of_its_tick_for_long() {
    let cluster = TestCluster::new(4);
    let node = cluster.instance("10.0.0.1").await;
    for i in 0..JOBS {
        let job = Job::from_fn(move |_| async move {
            if i == 0 {
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
            Ok(())
        });
        node.scheduler.add_job(every_ten_seconds(i), job).await.expect("add the job");
    }
    until(&cluster, 19_500).await;
    node.counter.take();
    // The others' markers go at most END_LINGER_MS (50 ms) after the tick's last launch.
    until(&cluster, 20_100).await;
    let counts = node.counter.take();
    assert_eq!(
        counts.get("transaction").copied(),
        Some(2),
        "start, the short items' end: {counts:?}"
    );
    for i in 1..JOBS {
        let marker = format!("/job-{i}/sharding/0/running");
        assert!(!node.client.exists(&marker).await.unwrap(), "{marker} was removed");
    }
    assert!(node.client.exists("/job-0/sharding/0/running").await.unwrap(), "job 0 still runs");
    until(&cluster, 25_500).await;
    let counts = node.counter.take();
    assert_eq!(counts.get("transaction").copied(), Some(1), "the long item's end: {counts:?}");
    assert!(!node.client.exists("/job-0/sharding/0/running").await.unwrap());
}

/// With a fire lead (`Settings::fire_lead`) a tick's fire steps, the transaction that marks its
/// items running and their launches happen that much before the tick, and every item starts at
/// the tick by the wall clock; the ends still share one transaction.
#[tokio::test(start_paused = true)]
async fn with_a_fire_lead_a_tick_is_taken_ahead_and_its_items_start_at_its_time() {
    let cluster = TestCluster::new(3);
    let node = instance_with_lead(&cluster, 200).await;
    // (job, the fire it answers, when its body started by the wall clock)
    let starts: Arc<Mutex<Vec<(usize, i64, i64)>>> = Arc::default();
    for i in 0..JOBS {
        let (starts, clock) = (starts.clone(), cluster.handles.clock.clone());
        let job = Job::from_fn(move |ctx| {
            starts.lock().push((i, epoch_ms(ctx.fire_time()), clock.now_ms()));
            async { Ok(()) }
        });
        node.scheduler.add_job(every_ten_seconds(i), job).await.expect("add the job");
    }
    let fire = EPOCH_MS + 20_000;
    until(&cluster, 19_500).await;
    node.counter.take();
    starts.lock().clear();
    until(&cluster, 19_900).await;
    // 100 ms before the tick by the wall clock, 100 ms after it by the scheduler's.
    let ahead = node.counter.take();
    assert_eq!(ahead.get("transaction").copied(), Some(1), "the starts, committed: {ahead:?}");
    let marker = node.client.get("/job-7/sharding/0/running").await.expect("read the marker");
    assert!(marker.is_some(), "job-7's item is marked running ahead of its fire");
    assert!(starts.lock().is_empty(), "no item started before its time: {:?}", starts.lock());
    until(&cluster, 20_500).await;
    let mut started = starts.lock().clone();
    started.sort_unstable();
    let expected: Vec<(usize, i64, i64)> = (0..JOBS).map(|i| (i, fire, fire)).collect();
    assert_eq!(started, expected, "every item started at its fire time, by the wall clock");
    let counts = node.counter.take();
    assert_eq!(counts.get("transaction").copied(), Some(1), "the ends: {counts:?}");
    assert_eq!(counts.values().sum::<u64>(), 1, "nothing else: {counts:?}");
}

/// With a fire lead, a run still going when the next fire is taken (within the lead before
/// that fire) makes it a misfire; its catch-up, due once the run ends, still starts at the
/// fire's time by the wall clock, not before.
#[tokio::test(start_paused = true)]
async fn with_a_fire_lead_a_catch_up_of_a_fire_still_ahead_starts_at_its_time() {
    let cluster = TestCluster::new(1);
    let node = instance_with_lead(&cluster, 200).await;
    // (the fire it answers, when its body started by the wall clock)
    let starts: Arc<Mutex<Vec<(i64, i64)>>> = Arc::default();
    let (seen, clock) = (starts.clone(), cluster.handles.clock.clone());
    let job = Job::from_fn(move |ctx| {
        seen.lock().push((epoch_ms(ctx.fire_time()), clock.now_ms()));
        // Ends 100 ms before the next fire: inside the lead, after the next fire was taken.
        async {
            tokio::time::sleep(Duration::from_millis(1_900)).await;
            Ok(())
        }
    });
    let config = JobConfig::builder("slow").cron("0/2 * * * * ?").build().expect("a valid config");
    node.scheduler.add_job(config, job).await.expect("add the job");
    until(&cluster, 11_000).await;
    starts.lock().clear();
    until(&cluster, 19_000).await;
    let started = starts.lock().clone();
    assert!(started.len() >= 3, "the job ran: {started:?}");
    for (fire_ms, at) in &started {
        assert_eq!(at, fire_ms, "a run started at its fire's time by the wall clock: {started:?}");
    }
    let catch_ups = cluster
        .events()
        .into_iter()
        .filter(|r| matches!(r.event, SchedulerEvent::Skipped { reason: SkipReason::Misfire, .. }));
    assert!(catch_ups.count() >= 3, "the fires were taken while the runs before them went on");
}
