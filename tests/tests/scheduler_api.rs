//! What a new user meets first on the `Scheduler` API: `trigger` runs a job now (how one-off
//! jobs run), a job without cron is warned about at registration, and a shut-down scheduler
//! refuses new work with `Error::ShutDown`. In virtual time on the in-memory registry.
//!
//! This test binary installs one global `tracing` subscriber that records warnings, so the
//! registration warning is checked as a user's subscriber would receive it.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure report

use std::fmt;
use std::sync::{Arc, Once};
use std::time::Duration;

use parking_lot::Mutex;
use shardcron_core::config::JobConfig;
use shardcron_core::job::Job;
use shardcron_core::runtime::FireKind;
use shardcron_core::runtime::SchedulerEvent;
use shardcron_core::Error;
use shardcron_tests::TestCluster;
use tracing::field::{Field, Visit};

fn noop() -> Job {
    Job::from_fn(|_| async { Ok(()) })
}

fn one_off(name: &str, items: u32) -> JobConfig {
    JobConfig::builder(name).one_off().sharding_total_count(items).build().unwrap()
}

#[tokio::test(start_paused = true)]
async fn trigger_runs_a_one_off_job_once_on_every_item() {
    let cluster = TestCluster::new(11);
    let node = cluster.instance("10.0.0.1").await;
    node.scheduler.add_job(one_off("cleanup", 3), noop()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(cluster.starts("cleanup").is_empty(), "a one-off job does not fire by itself");

    assert_eq!(node.scheduler.trigger("cleanup").await.unwrap(), 1, "one live instance");
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mut items: Vec<u32> = cluster.starts("cleanup").iter().map(|s| s.1).collect();
    items.sort_unstable();
    assert_eq!(items, [0, 1, 2]);
    let kinds: Vec<FireKind> = cluster
        .events()
        .iter()
        .filter_map(|r| match &r.event {
            SchedulerEvent::ItemStarted { kind, .. } => Some(*kind),
            _ => None,
        })
        .collect();
    assert!(kinds.iter().all(|k| *k == FireKind::Manual), "{kinds:?}");

    let err = node.scheduler.trigger("nightly").await.unwrap_err();
    assert!(matches!(err, Error::NoSuchJob { .. }), "{err}");
    assert_eq!(err.to_string(), "no job named nightly");
}

#[tokio::test(start_paused = true)]
async fn a_shut_down_scheduler_refuses_new_work_with_shut_down() {
    let cluster = TestCluster::new(12);
    let node = cluster.instance("10.0.0.1").await;
    node.scheduler.add_job(one_off("a", 1), noop()).await.unwrap();
    node.scheduler.shutdown(Duration::from_secs(3600)).await.unwrap();

    let err = node.scheduler.add_job(one_off("b", 1), noop()).await.unwrap_err();
    assert!(matches!(err, Error::ShutDown), "{err:?}");
    assert_eq!(err.to_string(), "the scheduler has shut down");
    assert!(matches!(node.scheduler.trigger("a").await, Err(Error::ShutDown)));
    assert!(matches!(node.scheduler.remove_job("a").await, Err(Error::ShutDown)));
    // A second shutdown does nothing.
    node.scheduler.shutdown(Duration::from_secs(3600)).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_job_without_cron_is_warned_about_at_registration() {
    let warnings = record_warnings();
    let cluster = TestCluster::new(13);
    let node = cluster.instance("10.0.0.1").await;

    // A config whose YAML has no cron at all, as ElasticJob's tools can write one.
    let forgotten = JobConfig::from_yaml("jobName: forgotten\nshardingTotalCount: 2\n").unwrap();
    node.scheduler.add_job(forgotten, noop()).await.unwrap();
    node.scheduler.add_job(one_off("on-demand", 2), noop()).await.unwrap();
    let scheduled = JobConfig::builder("scheduled")
        .cron("0/5 * * * * ?")
        .sharding_total_count(2)
        .build()
        .unwrap();
    node.scheduler.add_job(scheduled, noop()).await.unwrap();

    let about: Vec<String> = warnings
        .lock()
        .iter()
        .filter(|w| w.message.contains("no cron"))
        .map(|w| w.job.clone())
        .collect();
    assert_eq!(about, ["forgotten"], "only the job whose cron was never set");
    let warning = warnings.lock().iter().find(|w| w.job == "forgotten").cloned().unwrap();
    assert_eq!(warning.message, "job has no cron: it never fires by itself, only when triggered");
}

/// One recorded warning: its message and its `job` field.
#[derive(Debug, Clone, Default)]
struct Warning {
    message: String,
    job: String,
}

impl Visit for Warning {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.record_str(field, &format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message = value.to_owned(),
            "job" => self.job = value.to_owned(),
            _ => {}
        }
    }
}

type Warnings = Arc<Mutex<Vec<Warning>>>;

struct Recorder(Warnings);

impl tracing::Subscriber for Recorder {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() <= tracing::Level::WARN
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut warning = Warning::default();
        event.record(&mut warning);
        self.0.lock().push(warning);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// Installs the recording subscriber for this test binary (once) and returns what it records.
fn record_warnings() -> Warnings {
    static INSTALL: Once = Once::new();
    static WARNINGS: Mutex<Option<Warnings>> = Mutex::new(None);
    INSTALL.call_once(|| {
        let warnings = Warnings::default();
        tracing::subscriber::set_global_default(Recorder(warnings.clone())).unwrap();
        tracing::callsite::rebuild_interest_cache();
        *WARNINGS.lock() = Some(warnings);
    });
    WARNINGS.lock().clone().unwrap()
}

/// A trigger right after `add_job`, before the job's first reshard: the manual fire waits for
/// the reshard the new instance asked for, and runs every item (it once found no assignment
/// yet and ran nothing).
#[tokio::test(start_paused = true)]
async fn a_trigger_right_after_add_job_runs_every_item() {
    for seed in 0..20 {
        let cluster = TestCluster::new(100 + seed);
        let node = cluster.instance("10.0.0.1").await;
        node.scheduler.add_job(one_off("cleanup", 3), noop()).await.unwrap();
        assert_eq!(node.scheduler.trigger("cleanup").await.unwrap(), 1);
        tokio::time::sleep(Duration::from_secs(5)).await;
        let mut items: Vec<u32> = cluster.starts("cleanup").iter().map(|s| s.1).collect();
        items.sort_unstable();
        assert_eq!(items, [0, 1, 2], "seed {seed}: {:?}", cluster.events());
    }
}
