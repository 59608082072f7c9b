//! The scheduler on one instance, end to end on the in-memory registry, in virtual time: no test
//! sleeps on the wall clock.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use shardcron_core::__private::time::epoch_ms;
use shardcron_core::__private::InlineEventSink;
use shardcron_core::api::JobOperations;
use shardcron_core::config::{ErrorHandlerType, JobConfig};
use shardcron_core::handles::{Handles, TokioClock};
use shardcron_core::job::Job;
use shardcron_core::registry::{CoordinatorRegistry, RegistryExt};
use shardcron_core::runtime::{FireKind, SchedulerEvent, Settings, SkipReason};
use shardcron_core::Error;
use shardcron_tests::{TestCluster, EPOCH_MS};

fn every(seconds: u32, job: &str, items: u32) -> JobConfig {
    JobConfig::builder(job)
        .cron(format!("0/{seconds} * * * * ?"))
        .sharding_total_count(items)
        .build()
        .expect("a valid config")
}

fn noop() -> Job {
    Job::from_fn(|_| async { Ok(()) })
}

/// A job whose items take `secs` of virtual time.
fn sleeping(secs: u64) -> Job {
    Job::from_fn(move |_| async move {
        tokio::time::sleep(Duration::from_secs(secs)).await;
        Ok(())
    })
}

/// Lets virtual time run until half a second after `secs` past the epoch: checkpoints never
/// coincide with fire instants, whose order against the test's own wake-up is unspecified.
async fn until(cluster: &TestCluster, secs: i64) {
    let target = EPOCH_MS + secs * 1000 + 500;
    let now = cluster.handles.clock.now_ms();
    assert!(target > now, "checkpoint {secs} s is in the past");
    tokio::time::sleep(Duration::from_millis((target - now) as u64)).await;
}

#[tokio::test(start_paused = true)]
async fn fires_every_item_at_the_cron_instants() {
    let cluster = TestCluster::new(1);
    let node = cluster.instance("10.0.0.1").await;
    // (the fire, when the item's code started)
    let began: Arc<parking_lot::Mutex<Vec<(i64, i64)>>> = Arc::default();
    let (seen, clock) = (began.clone(), cluster.handles.clock.clone());
    let job = Job::from_fn(move |ctx| {
        seen.lock().push((epoch_ms(ctx.fire_time()), clock.now_ms()));
        async { Ok(()) }
    });
    node.scheduler.add_job(every(10, "report", 3), job).await.unwrap();
    until(&cluster, 35).await;
    let starts = cluster.starts("report");
    let fires: Vec<i64> =
        starts.iter().map(|s| s.2).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
    assert_eq!(fires, vec![EPOCH_MS + 10_000, EPOCH_MS + 20_000, EPOCH_MS + 30_000]);
    for fire in fires {
        let mut items: Vec<u32> = starts.iter().filter(|s| s.2 == fire).map(|s| s.1).collect();
        items.sort();
        assert_eq!(items, vec![0, 1, 2], "every item of the fire at {fire}");
    }
    // Marked running up to the fire lead ahead (`Settings::fire_lead`), run at the fire's time.
    assert_eq!(began.lock().len(), 9);
    assert!(began.lock().iter().all(|(fire, at)| fire == at), "started on time: {began:?}");
}

#[tokio::test(start_paused = true)]
async fn item_parameters_and_job_parameter_reach_the_job() {
    let cluster = TestCluster::new(2);
    let node = cluster.instance("10.0.0.1").await;
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let sink = seen.clone();
    let config = every(10, "params", 2)
        .to_builder()
        .item_parameter(0, "north")
        .item_parameter(1, "south")
        .job_parameter("p")
        .build()
        .unwrap();
    node.scheduler
        .add_job(
            config,
            Job::from_fn(move |ctx| {
                let sink = sink.clone();
                async move {
                    sink.lock().push((
                        ctx.item,
                        ctx.item_parameter.clone(),
                        ctx.job_parameter.clone(),
                        ctx.sharding_total_count,
                    ));
                    Ok(())
                }
            }),
        )
        .await
        .unwrap();
    until(&cluster, 10).await;
    let mut got = seen.lock().clone();
    got.sort();
    assert_eq!(got, vec![(0, "north".into(), "p".into(), 2), (1, "south".into(), "p".into(), 2)]);
}

#[tokio::test(start_paused = true)]
async fn a_fire_during_a_run_is_a_misfire_caught_up_once() {
    let cluster = TestCluster::new(3);
    let node = cluster.instance("10.0.0.1").await;
    // Fires every 10 s, runs 25 s: fires at 20 and 30 come while the one of 10 runs.
    node.scheduler.add_job(every(10, "slow", 1), sleeping(25)).await.unwrap();
    // (A fire at 40 s would come during the catch-up run and be a misfire again.)
    until(&cluster, 38).await;
    let events = cluster.events();
    let misfires = events
        .iter()
        .filter(|r| matches!(&r.event, SchedulerEvent::Skipped { reason: SkipReason::Misfire, .. }))
        .count();
    assert_eq!(misfires, 2, "the fires at 20 s and 30 s were skipped while item 0 ran");
    let catch_ups: Vec<i64> = events
        .iter()
        .filter_map(|r| match &r.event {
            SchedulerEvent::ItemStarted { kind: FireKind::Misfire, .. } => Some(r.at_ms),
            _ => None,
        })
        .collect();
    assert_eq!(catch_ups, vec![EPOCH_MS + 35_000], "one catch-up right after the run ended");
    let marker = cluster.client().exists("/slow/sharding/0/misfire").await.unwrap();
    assert!(!marker, "the misfire marker is cleared by the catch-up");
}

#[tokio::test(start_paused = true)]
async fn running_markers_exist_only_while_items_run() {
    let cluster = TestCluster::new(4);
    let node = cluster.instance("10.0.0.1").await;
    node.scheduler.add_job(every(10, "marked", 2), sleeping(3)).await.unwrap();
    let probe = cluster.client();
    until(&cluster, 11).await;
    assert!(probe.exists("/marked/sharding/0/running").await.unwrap());
    assert!(probe.get("/marked/sharding/1/running").await.unwrap().unwrap().ephemeral);
    until(&cluster, 14).await;
    assert!(!probe.exists("/marked/sharding/0/running").await.unwrap());
    assert!(!probe.exists("/marked/sharding/1/running").await.unwrap());
}

#[tokio::test(start_paused = true)]
async fn manual_trigger_runs_now_and_one_off_jobs_run_only_when_triggered() {
    let cluster = TestCluster::new(5);
    let node = cluster.instance("10.0.0.1").await;
    let one_off = JobConfig::builder("once").one_off().sharding_total_count(2).build().unwrap();
    node.scheduler.add_job(one_off, noop()).await.unwrap();
    until(&cluster, 30).await;
    assert!(cluster.starts("once").is_empty(), "a job without cron never fires by itself");
    let ops = cluster.client();
    let triggered = JobOperations::new(&ops).trigger("once").await.unwrap();
    assert_eq!(triggered, 1);
    until(&cluster, 31).await;
    let starts = cluster.starts("once");
    assert_eq!(starts.len(), 2);
    assert!(starts.iter().all(|s| s.3 == EPOCH_MS + 30_500), "ran at once: {starts:?}");
    assert!(!ops.exists("/once/trigger/10.0.0.1@-@1").await.unwrap(), "the trigger is consumed");
}

#[tokio::test(start_paused = true)]
async fn disabled_items_server_and_job_are_honoured() {
    let cluster = TestCluster::new(6);
    let node = cluster.instance("10.0.0.1").await;
    node.scheduler.add_job(every(10, "d", 3), noop()).await.unwrap();
    let client = cluster.client();
    let ops = JobOperations::new(&client);
    ops.set_item_disabled("d", 1, true).await.unwrap();
    until(&cluster, 10).await;
    let mut items: Vec<u32> = cluster.starts("d").iter().map(|s| s.1).collect();
    items.sort();
    assert_eq!(items, vec![0, 2], "item 1 is disabled");

    ops.set_server_disabled("d", "10.0.0.1", true).await.unwrap();
    until(&cluster, 20).await;
    assert_eq!(cluster.starts("d").len(), 2, "a disabled server runs nothing");
    ops.set_server_disabled("d", "10.0.0.1", false).await.unwrap();
    ops.set_item_disabled("d", 1, false).await.unwrap();
    ops.set_job_disabled("d", true).await.unwrap();
    until(&cluster, 30).await;
    assert_eq!(cluster.starts("d").len(), 2, "a disabled job runs nothing");
    ops.set_job_disabled("d", false).await.unwrap();
    until(&cluster, 40).await;
    assert_eq!(cluster.starts("d").len(), 5, "all three items once enabled again");
    let reasons: Vec<SkipReason> = cluster
        .events()
        .into_iter()
        .filter_map(|r| match r.event {
            SchedulerEvent::Skipped { reason, .. } => Some(reason),
            _ => None,
        })
        .collect();
    assert!(
        reasons.contains(&SkipReason::ServerDisabled) && reasons.contains(&SkipReason::JobDisabled),
        "{reasons:?}"
    );
}

/// With its only server disabled the job has no leader (a disabled leader abdicates), so a
/// config deleted by hand is written back by nobody. The instance says so, and the operator can
/// still enable the server, though the job has no config node: the instance leads again and
/// writes it back, and the job runs.
#[tokio::test(start_paused = true)]
async fn a_config_deleted_while_every_server_is_disabled_comes_back_once_one_is_enabled() {
    let cluster = TestCluster::new(8);
    let node = cluster.instance("10.0.0.1").await;
    node.scheduler.add_job(every(10, "g", 2), noop()).await.unwrap();
    until(&cluster, 12).await;
    let client = cluster.client();
    let ops = JobOperations::new(&client);
    ops.set_server_disabled("g", "10.0.0.1", true).await.unwrap();
    until(&cluster, 15).await;
    client.delete("/g/config", None).await.unwrap();
    until(&cluster, 25).await;
    let said = cluster.events().into_iter().any(|r| {
        matches!(&r.event, SchedulerEvent::ConfigRejected { job, reason }
            if job == "g" && reason.contains("deleted"))
    });
    assert!(said, "the deleted config is reported: {:?}", cluster.events());
    assert!(!client.exists("/g/config").await.unwrap(), "no leader wrote it back");
    let before = cluster.starts("g").len();
    ops.set_server_disabled("g", "10.0.0.1", false).await.expect("enabled without a config");
    until(&cluster, 41).await;
    assert!(client.exists("/g/config").await.unwrap(), "the new leader wrote it back");
    assert!(cluster.starts("g").len() > before, "the job runs again");
    // Neither a config nor a live instance: no job.
    assert!(matches!(
        ops.set_server_disabled("none", "10.0.0.1", false).await,
        Err(Error::NoSuchJob { .. })
    ));
}

#[tokio::test(start_paused = true)]
async fn a_cron_change_in_the_registry_reschedules_live() {
    let cluster = TestCluster::new(7);
    let node = cluster.instance("10.0.0.1").await;
    node.scheduler.add_job(every(10, "r", 1), noop()).await.unwrap();
    until(&cluster, 12).await;
    let client = cluster.client();
    let ops = JobOperations::new(&client);
    let config = ops.config("r").await.unwrap().to_builder().cron("0/3 * * * * ?").build().unwrap();
    ops.update_config(&config).await.unwrap();
    until(&cluster, 22).await;
    let fires: Vec<i64> = cluster.starts("r").iter().map(|s| s.2 - EPOCH_MS).collect();
    // The epoch is at second :20 of its minute, so `0/3` after +12 s is +13, +16, +19.
    assert_eq!(fires, vec![10_000, 13_000, 16_000, 19_000, 22_000]);
}

#[tokio::test(start_paused = true)]
async fn a_count_change_reshards_before_the_next_fire() {
    let cluster = TestCluster::new(8);
    let node = cluster.instance("10.0.0.1").await;
    node.scheduler.add_job(every(10, "c", 2), noop()).await.unwrap();
    until(&cluster, 10).await;
    let client = cluster.client();
    let ops = JobOperations::new(&client);
    let config = ops.config("c").await.unwrap();
    let four = config.to_builder().sharding_total_count(4).build().unwrap();
    ops.update_config(&four).await.unwrap();
    until(&cluster, 20).await;
    let second: Vec<u32> =
        cluster.starts("c").iter().filter(|s| s.2 == EPOCH_MS + 20_000).map(|s| s.1).collect();
    assert_eq!(second.len(), 4, "{second:?}");
    let one = config.to_builder().sharding_total_count(1).build().unwrap();
    ops.update_config(&one).await.unwrap();
    until(&cluster, 30).await;
    let third: Vec<u32> =
        cluster.starts("c").iter().filter(|s| s.2 == EPOCH_MS + 30_000).map(|s| s.1).collect();
    assert_eq!(third, vec![0]);
    // Items beyond the count lose their owner but keep the node: its version is the item's
    // fencing token, which must keep growing if the count grows again.
    let beyond = client.get("/c/sharding/3/instance").await.unwrap().expect("owner node kept");
    assert!(beyond.data.is_empty(), "no owner beyond the count");
    assert!(beyond.version > 0);
}

#[tokio::test(start_paused = true)]
async fn shutdown_leaves_no_ephemeral_node() {
    let cluster = TestCluster::new(9);
    let node = cluster.instance("10.0.0.1").await;
    node.scheduler.add_job(every(10, "a", 2), sleeping(4)).await.unwrap();
    node.scheduler.add_job(every(5, "b", 1), noop()).await.unwrap();
    until(&cluster, 11).await;
    assert!(!cluster.ephemerals().is_empty());
    node.scheduler.shutdown(Duration::from_secs(3600)).await.unwrap();
    assert!(cluster.ephemerals().is_empty(), "left behind: {:?}", cluster.ephemerals());
    let finished = cluster
        .events()
        .iter()
        .filter(|r| matches!(&r.event, SchedulerEvent::ItemFinished { job, ok: true, .. } if job == "a"))
        .count();
    assert_eq!(finished, 2, "running items finished before the shutdown completed");
    let before = cluster.starts("b").len();
    until(&cluster, 31).await;
    assert_eq!(cluster.starts("b").len(), before, "nothing fires after shutdown");
}

#[tokio::test(start_paused = true)]
async fn clock_skew_beyond_max_time_diff_skips_fires() {
    let cluster = TestCluster::new(10);
    let skewed = Arc::new(TokioClock::starting_at(EPOCH_MS));
    skewed.set_skew(5_000);
    let handles = Handles { clock: skewed, ..cluster.handles.clone() };
    let node = cluster.instance_with("10.0.0.1", Settings::default(), handles).await;
    let config =
        every(10, "t", 1).to_builder().max_time_diff(Some(Duration::from_secs(2))).build().unwrap();
    node.scheduler.add_job(config, noop()).await.unwrap();
    until(&cluster, 20).await;
    assert!(cluster.starts("t").is_empty());
    let skips: Vec<SkipReason> = cluster
        .events()
        .into_iter()
        .filter_map(|r| match r.event {
            SchedulerEvent::Skipped { reason, .. } => Some(reason),
            _ => None,
        })
        .collect();
    assert!(
        skips.iter().any(|r| matches!(r, SkipReason::ClockSkew { diff_ms } if *diff_ms == 5_000)),
        "{skips:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn invalid_configs_are_rejected_and_leave_the_registry_untouched() {
    let cluster = TestCluster::new(11);
    let node = cluster.instance("10.0.0.1").await;
    let client = cluster.client();
    let before = client.children_or_empty("/").await.unwrap();
    // Configs the builder refuses come from YAML (a file, another tool); the scheduler checks
    // them again.
    let yaml = |fields: &str| JobConfig::from_yaml(&format!("jobName: bad\n{fields}")).unwrap();
    let bad_cron = yaml("cron: 0 0 25 * * ?\nshardingTotalCount: 1\n");
    let bad_count = yaml("cron: 0/10 * * * * ?\nshardingTotalCount: 0\n");
    let bad_params =
        yaml("cron: 0/10 * * * * ?\nshardingTotalCount: 2\nshardingItemParameters: 0=a,5=b\n");
    let bad_zone = yaml("cron: 0/10 * * * * ?\nshardingTotalCount: 1\ntimeZone: Mars/Base\n");
    for (config, field) in [
        (bad_cron, "cron"),
        (bad_count, "shardingTotalCount"),
        (bad_params, "shardingItemParameters"),
        (bad_zone, "timeZone"),
    ] {
        let err = node.scheduler.add_job(config, noop()).await.unwrap_err();
        match &err {
            Error::Config(e) => assert_eq!(e.field(), Some(field), "{err}"),
            other => panic!("expected a config error on {field}, got {other}"),
        }
        assert!(err.to_string().contains(field), "the message names the field: {err}");
    }
    assert_eq!(client.children_or_empty("/").await.unwrap(), before, "the registry is untouched");
    assert!(node.scheduler.jobs().is_empty());
}

#[tokio::test(start_paused = true)]
async fn garbage_in_the_config_node_is_reported_and_the_last_good_config_kept() {
    let cluster = TestCluster::new(12);
    let node = cluster.instance("10.0.0.1").await;
    node.scheduler.add_job(every(10, "g", 1), noop()).await.unwrap();
    let client = cluster.client();
    client.set("/g/config", b"{{{ not yaml", None).await.unwrap();
    until(&cluster, 1).await;
    client
        .set("/g/config", b"jobName: g\ncron: 0 0 99 * * ?\nshardingTotalCount: 1\n", None)
        .await
        .unwrap();
    until(&cluster, 21).await;
    let rejected: Vec<String> = cluster
        .events()
        .into_iter()
        .filter_map(|r| match r.event {
            SchedulerEvent::ConfigRejected { reason, .. } => Some(reason),
            _ => None,
        })
        .collect();
    assert_eq!(rejected.len(), 2, "{rejected:?}");
    assert!(rejected[1].contains("cron"), "{}", rejected[1]);
    assert_eq!(
        cluster.starts("g").len(),
        2,
        "the job kept firing every 10 s with its last good config"
    );
}

#[tokio::test(start_paused = true)]
async fn the_stored_config_wins_unless_overwrite() {
    let cluster = TestCluster::new(13);
    let first = cluster.instance("10.0.0.1").await;
    first.scheduler.add_job(every(10, "o", 1), noop()).await.unwrap();
    first.scheduler.shutdown(Duration::from_secs(3600)).await.unwrap();
    let second = cluster.instance("10.0.0.2").await;
    second.scheduler.add_job(every(5, "o", 1), noop()).await.unwrap();
    let client = cluster.client();
    let stored = JobOperations::new(&client).config("o").await.unwrap();
    assert_eq!(
        stored.cron(),
        Some("0/10 * * * * ?"),
        "without overwrite the registry's config wins"
    );
    second.scheduler.remove_job("o").await.unwrap();
    let forced = every(5, "o", 1).to_builder().overwrite(true).build().unwrap();
    second.scheduler.add_job(forced, noop()).await.unwrap();
    let stored = JobOperations::new(&client).config("o").await.unwrap();
    assert_eq!(stored.cron(), Some("0/5 * * * * ?"), "overwrite replaces it");

    // A stored config that cannot be used is refused with a clear error, unless overwrite.
    second.scheduler.remove_job("o").await.unwrap();
    client.set("/o/config", b"jobName: other\nshardingTotalCount: 1\n", None).await.unwrap();
    let err = second.scheduler.add_job(every(5, "o", 1), noop()).await.unwrap_err();
    assert!(matches!(err, Error::StoredConfigUnusable { .. }), "{err}");
    assert!(err.to_string().contains("overwrite"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn a_start_over_a_garbage_config_writes_its_own_and_reports_the_garbage() {
    // No instance up while an operator's tool garbled the config: the one that starts writes
    // its own over it, and, repairing it, reports it (nobody else saw it). So does one whose
    // config says `overwrite: true`, which writes its own whatever is stored (it reported
    // nothing: a job file with `overwrite`, `garbage` seed 3,315,688,222).
    let cluster = TestCluster::new(15);
    let client = cluster.client();
    let node = cluster.instance("10.0.0.1").await;
    for (job, overwrite) in [("r", false), ("o", true)] {
        client.put(&format!("/{job}/config"), b"{{{ not yaml").await.unwrap();
        let config = JobConfig::builder(job)
            .cron("0/10 * * * * ?")
            .sharding_total_count(1)
            .overwrite(overwrite)
            .build()
            .expect("a valid config");
        node.scheduler.add_job(config, noop()).await.unwrap();
        let stored = JobOperations::new(&client).config(job).await.unwrap();
        assert_eq!(stored.cron(), Some("0/10 * * * * ?"), "the local config replaced the garbage");
    }
    let reported: Vec<(String, String)> = cluster
        .events()
        .into_iter()
        .filter_map(|r| match r.event {
            SchedulerEvent::RegistryGarbage { path, value, .. } => Some((path, value)),
            _ => None,
        })
        .collect();
    let garbage = "\"{{{ not yaml\"".to_owned();
    let expected =
        vec![("/r/config".to_owned(), garbage.clone()), ("/o/config".to_owned(), garbage)];
    assert_eq!(reported, expected);
}

#[tokio::test(start_paused = true)]
async fn operator_shutdown_stops_the_job_on_that_instance() {
    let cluster = TestCluster::new(14);
    let node = cluster.instance("10.0.0.1").await;
    node.scheduler.add_job(every(10, "s", 1), noop()).await.unwrap();
    until(&cluster, 10).await;
    let client = cluster.client();
    let stopped = JobOperations::new(&client).shutdown("s", Some(&node.id())).await.unwrap();
    assert_eq!(stopped, 1);
    until(&cluster, 40).await;
    assert_eq!(cluster.starts("s").len(), 1, "no fire after the operator's shutdown");
    assert!(cluster
        .events()
        .iter()
        .any(|r| matches!(&r.event, SchedulerEvent::JobStopped { reason, .. } if reason.contains("operator"))));
}

#[tokio::test(start_paused = true)]
async fn failing_and_panicking_items_never_stop_the_scheduler() {
    let cluster = TestCluster::new(15);
    let node = cluster.instance("10.0.0.1").await;
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    node.scheduler
        .add_job(
            every(10, "p", 2),
            Job::from_fn(move |ctx| {
                let n = counter.fetch_add(1, Ordering::SeqCst);
                async move {
                    match (ctx.item, n % 2) {
                        (0, _) => panic!("item 0 always panics"),
                        (_, 0) => Err("item 1 fails every other time".into()),
                        _ => Ok(()),
                    }
                }
            }),
        )
        .await
        .unwrap();
    until(&cluster, 30).await;
    assert_eq!(cluster.starts("p").len(), 6, "three fires of two items despite panics and errors");
    let finished: Vec<bool> = cluster
        .events()
        .into_iter()
        .filter_map(|r| match r.event {
            SchedulerEvent::ItemFinished { item: 0, ok, .. } => Some(ok),
            _ => None,
        })
        .collect();
    assert_eq!(finished, vec![false, false, false]);
    assert!(
        cluster.ephemerals().iter().all(|p| !p.ends_with("/running")),
        "no running marker left"
    );
}

#[tokio::test(start_paused = true)]
async fn session_expiry_re_registers_instead_of_shutting_down() {
    let cluster = TestCluster::new(16);
    let node = cluster.instance("10.0.0.1").await;
    node.scheduler.add_job(every(10, "e", 1), noop()).await.unwrap();
    until(&cluster, 12).await;
    cluster.server.expire_session(node.client_id());
    until(&cluster, 22).await;
    let client = cluster.client();
    assert!(
        client.exists(&format!("/e/instances/{}", node.id())).await.unwrap(),
        "registered again"
    );
    assert_eq!(cluster.starts("e").len(), 2, "fired before and after the expiry");
}

#[tokio::test(start_paused = true)]
async fn jobs_added_and_removed_at_run_time() {
    let cluster = TestCluster::new(17);
    let node = cluster.instance("10.0.0.1").await;
    node.scheduler.add_job(every(10, "x", 1), noop()).await.unwrap();
    let err = node.scheduler.add_job(every(10, "x", 1), noop()).await.unwrap_err();
    assert!(matches!(err, Error::JobExists { .. }));
    until(&cluster, 10).await;
    node.scheduler.add_job(every(10, "y", 1), noop()).await.unwrap();
    until(&cluster, 20).await;
    node.scheduler.remove_job("x").await.unwrap();
    until(&cluster, 30).await;
    assert_eq!(cluster.starts("x").len(), 2);
    assert_eq!(cluster.starts("y").len(), 2);
    assert_eq!(node.scheduler.jobs(), vec!["y".to_owned()]);
    assert!(matches!(node.scheduler.remove_job("x").await, Err(Error::NoSuchJob { .. })));
}

/// A listener counting fires, for the test below.
#[derive(Default)]
struct Counting {
    before: AtomicUsize,
    after: AtomicUsize,
}

#[async_trait::async_trait]
impl shardcron_core::job::JobListener for Counting {
    async fn before_job_executed(&self, _fire: &shardcron_core::job::FireInfo) {
        self.before.fetch_add(1, Ordering::SeqCst);
    }
    async fn after_job_executed(
        &self,
        _fire: &shardcron_core::job::FireInfo,
        _report: &shardcron_core::job::FireReport,
    ) {
        self.after.fetch_add(1, Ordering::SeqCst);
    }
}

struct Batches {
    left: parking_lot::Mutex<Vec<u32>>,
    processed: Arc<AtomicUsize>,
}

#[async_trait::async_trait]
impl shardcron_core::job::DataflowJob for Batches {
    type Data = u32;
    async fn fetch(
        &self,
        _ctx: &shardcron_core::job::ShardingContext,
    ) -> Result<Vec<u32>, shardcron_core::job::BoxError> {
        Ok(self.left.lock().pop().into_iter().collect())
    }
    async fn process(
        &self,
        _ctx: &shardcron_core::job::ShardingContext,
        data: Vec<u32>,
    ) -> shardcron_core::job::JobResult {
        self.processed.fetch_add(data.len(), Ordering::SeqCst);
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn listeners_dataflow_jobs_and_the_throw_handler_through_the_scheduler() {
    let cluster = TestCluster::new(18);
    let listener = Arc::new(Counting::default());
    let client = cluster.client();
    let scheduler = shardcron_core::runtime::SchedulerBuilder::new(Arc::new(client))
        .handles(cluster.handles.clone())
        .ip("10.0.0.1")
        .pid(1)
        .listener(listener.clone())
        .inline_event_sink({
            let log = cluster.log.clone();
            let clock = cluster.handles.clock.clone();
            Arc::new(move |event: &SchedulerEvent| {
                log.lock().push(shardcron_tests::Recorded {
                    instance: "i".into(),
                    at_ms: clock.now_ms(),
                    event: event.clone(),
                })
            })
        })
        .start()
        .await
        .unwrap();
    // Streaming dataflow: one fire drains every batch.
    let processed = Arc::new(AtomicUsize::new(0));
    let batches =
        Batches { left: parking_lot::Mutex::new(vec![1, 2, 3]), processed: processed.clone() };
    scheduler.add_job(every(10, "flow", 1), Job::dataflow(batches, true)).await.unwrap();
    // THROW: a failing item is surfaced as an event.
    let strict =
        every(10, "strict", 1).to_builder().error_handler(ErrorHandlerType::Throw).build().unwrap();
    scheduler.add_job(strict, Job::from_fn(|_| async { Err("disk full".into()) })).await.unwrap();
    until(&cluster, 10).await;
    assert_eq!(processed.load(Ordering::SeqCst), 3, "streaming fetched until empty");
    assert_eq!(
        listener.before.load(Ordering::SeqCst),
        2,
        "before-listener once per fire of each job"
    );
    assert_eq!(listener.after.load(Ordering::SeqCst), 2);
    let failed: Vec<String> = cluster
        .events()
        .into_iter()
        .filter_map(|r| match r.event {
            SchedulerEvent::FireFailed { job, error, .. } => Some(format!("{job}: {error}")),
            _ => None,
        })
        .collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0].starts_with("strict: ") && failed[0].contains("disk full"), "{failed:?}");
}
