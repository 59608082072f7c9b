//! The execution trace on SQLite and on the PostgreSQL the test script starts: rows of fires
//! and items, the searches, retention, the schema, and a real scheduler writing through it.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure report

mod common;

use std::sync::Arc;
use std::time::Duration;

use shardcron_core::config::JobConfig;
use shardcron_core::handles::{Clock, Handles};
use shardcron_core::job::ExecutionSource;
use shardcron_core::runtime::{SchedulerBuilder, SchedulerEvent, SkipReason};
use shardcron_observe::trace::{ExecutionQuery, Paging, StatusQuery};
use shardcron_observe::{ObserveExt, Trace, TraceConfig, TraceReader};
use shardcron_registry_mem::{ConnectOptions, MemServer};

use common::*;

/// Fires of one job go in, the searches find them with the right columns.
async fn fires_and_items_are_searchable(url: &str) {
    let trace = Trace::start(TraceConfig::new(url)).unwrap();
    trace.ready(Duration::from_secs(20)).await.unwrap();
    let job = unique_job("orders");
    let t0 = now_ms() - 10_000;
    fire(trace.listener(), Handles::real(), &job, t0, ExecutionSource::Normal, &[0, 1, 2]).await;
    // Through the job's own listener, as a scheduler calls it: a fire of one item.
    let own = trace.listener().for_job(&job).unwrap();
    fire(own, Handles::real(), &job, t0 + 1000, ExecutionSource::Failover, &[2]).await;
    assert!(trace.flush(Duration::from_secs(20)).await, "{:?}", trace.stats());
    let stats = trace.stats();
    assert_eq!((stats.dropped, stats.rejected, stats.pending), (0, 0, 0), "{stats:?}");
    // Queue entries: the fire of 3 items, its begin, 3 × (start, end) and its end; the fire of
    // one item, its item's start and end, which carry the fire's begin and end.
    assert_eq!(stats.written, 10, "{stats:?}");

    let reader = trace.reader().await.unwrap();
    let all = ExecutionQuery { job_name: Some(job.clone()), ..Default::default() };
    let page = reader.executions(&all).await.unwrap();
    assert_eq!(page.total, 4);
    assert!(page.rows.iter().all(|r| r.ip == "10.1.2.3" && r.complete_time.is_some()));
    // Newest first by default: the failover run of item 2 leads.
    assert_eq!(page.rows[0].execution_source, "FAILOVER");
    assert!(page.rows[0].task_id.contains("@-@FAILOVER@-@10.1.2.3@-@4242@-@"));

    let failed = ExecutionQuery { is_success: Some(false), ..all.clone() };
    let page = reader.executions(&failed).await.unwrap();
    assert_eq!(page.total, 1);
    assert_eq!(page.rows[0].sharding_item, 1);
    let cause = page.rows[0].failure_cause.clone().unwrap();
    assert!(cause.contains("disk full"), "{cause}");
    assert!(!page.rows[0].is_success);

    let paged = ExecutionQuery {
        paging: Paging {
            page_size: 3,
            page_number: 2,
            sort_by: Some("shardingItem".into()),
            order_type: Some("ASC".into()),
        },
        ..all.clone()
    };
    let page = reader.executions(&paged).await.unwrap();
    assert_eq!(page.total, 4);
    assert_eq!(page.rows.iter().map(|r| r.sharding_item).collect::<Vec<_>>(), [2]);

    let window = ExecutionQuery { start_time_from: Some(now_ms() - 60_000), ..all.clone() };
    assert_eq!(reader.executions(&window).await.unwrap().total, 4);
    let later = ExecutionQuery { start_time_from: Some(now_ms() + 60_000), ..all.clone() };
    assert_eq!(reader.executions(&later).await.unwrap().total, 0);
    let other_ip = ExecutionQuery { ip: Some("10.9.9.9".into()), ..all.clone() };
    assert_eq!(reader.executions(&other_ip).await.unwrap().total, 0);

    let statuses = StatusQuery {
        job_name: Some(job.clone()),
        paging: Paging { page_size: 100, ..Paging::default() },
        ..Default::default()
    };
    let page = reader.statuses(&statuses).await.unwrap();
    assert_eq!(page.total, 6);
    let mut states: Vec<(String, String, String)> = page
        .rows
        .iter()
        .map(|r| (r.execution_type.clone(), r.state.clone(), r.sharding_item.clone()))
        .collect();
    states.sort();
    assert_eq!(
        states,
        [
            ("FAILOVER".into(), "TASK_FINISHED".into(), "2".into()),
            ("FAILOVER".into(), "TASK_RUNNING".into(), "2".into()),
            ("FAILOVER".into(), "TASK_STAGING".into(), "2".into()),
            ("READY".into(), "TASK_ERROR".into(), "0,1,2".into()),
            ("READY".into(), "TASK_RUNNING".into(), "0,1,2".into()),
            ("READY".into(), "TASK_STAGING".into(), "0,1,2".into()),
        ]
    );
    let error = StatusQuery { state: Some("TASK_ERROR".into()), ..statuses.clone() };
    let page = reader.statuses(&error).await.unwrap();
    assert_eq!(page.total, 1);
    assert!(page.rows[0].message.as_deref().unwrap_or("").contains("item 1: "));
    assert!(page.rows.iter().all(|r| r.slave_id == "10.1.2.3" && r.source == "LITE_EXECUTOR"));

    let prefix = &job[..job.len() - 3];
    assert!(reader.execution_job_names(Some(prefix)).await.unwrap().contains(&job));
    assert!(reader.status_job_names(Some(prefix)).await.unwrap().contains(&job));
    assert!(reader.execution_job_names(Some("no-such-")).await.unwrap().is_empty());
    assert!(reader.execution_ips(Some("10.1.")).await.unwrap().contains(&"10.1.2.3".to_owned()));
    // `_` is no wildcard in an autocomplete prefix.
    assert!(reader.execution_ips(Some("10_1")).await.unwrap().is_empty());

    let bad = ExecutionQuery {
        paging: Paging {
            sort_by: Some("start_time; DROP TABLE JOB_EXECUTION_LOG".into()),
            ..Paging::default()
        },
        ..Default::default()
    };
    assert!(reader.executions(&bad).await.unwrap_err().to_string().contains("sortBy"));
    trace.shutdown(Duration::from_secs(5)).await;
}

/// Rows older than the retention go at start; newer ones stay. A second start finds the
/// schema in place (migrations are idempotent).
async fn old_rows_are_removed_at_start(url: &str) {
    let job = unique_job("retention");
    let old = now_ms() - 3 * 3_600_000;
    {
        let trace = Trace::start(TraceConfig { retention: None, ..TraceConfig::new(url) }).unwrap();
        trace.ready(Duration::from_secs(20)).await.unwrap();
        // The executor's clock says three hours ago: the items' rows carry that time.
        let past = Handles::simulated(old, 1);
        let report = tokio::time::timeout(
            Duration::from_secs(20),
            fire(trace.listener(), past, &job, old, ExecutionSource::Normal, &[0]),
        )
        .await
        .unwrap();
        assert_eq!(report.completed_items(), [0]);
        fire(trace.listener(), Handles::real(), &job, now_ms(), ExecutionSource::Normal, &[2])
            .await;
        assert!(trace.flush(Duration::from_secs(20)).await);
        let reader = trace.reader().await.unwrap();
        let all = ExecutionQuery { job_name: Some(job.clone()), ..Default::default() };
        assert_eq!(reader.executions(&all).await.unwrap().total, 2);
        trace.shutdown(Duration::from_secs(5)).await;
    }
    let config =
        TraceConfig { retention: Some(Duration::from_secs(3600)), ..TraceConfig::new(url) };
    let trace = Trace::start(config).unwrap();
    trace.ready(Duration::from_secs(20)).await.unwrap();
    let reader = TraceReader::open(url).await.unwrap();
    let all = ExecutionQuery { job_name: Some(job.clone()), ..Default::default() };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let page = reader.executions(&all).await.unwrap();
        if page.total == 1 {
            assert_eq!(page.rows[0].sharding_item, 2);
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "old rows still there: {page:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    trace.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_fires_and_items_are_searchable() {
    fires_and_items_are_searchable(&sqlite_path("search")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_old_rows_are_removed_at_start() {
    old_rows_are_removed_at_start(&format!("sqlite://{}", sqlite_path("retention"))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_fires_and_items_are_searchable() {
    let Some(url) = postgres_url() else { return };
    fires_and_items_are_searchable(&url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_old_rows_are_removed_at_start() {
    let Some(url) = postgres_url() else { return };
    old_rows_are_removed_at_start(&url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_url_is_refused_at_once_and_an_unreachable_database_is_reported() {
    let e = Trace::start(TraceConfig::new("mysql://h/db")).unwrap_err();
    assert!(e.to_string().contains("unknown scheme"), "{e}");
    // A port nothing listens on: start succeeds (the writer retries), readiness says why not.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let trace =
        Trace::start(TraceConfig::new(format!("postgres://u@127.0.0.1:{port}/db"))).unwrap();
    let e = trace.ready(Duration::from_millis(1500)).await.unwrap_err().to_string();
    assert!(e.contains("not ready"), "{e}");
    assert!(!trace.stats().connected);
    trace.shutdown(Duration::from_millis(10)).await;
}

/// A real scheduler on the in-memory registry, with the trace wired by the builder option:
/// every item it ran is in the trace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduler_writes_its_fires_through_the_builder_option() {
    let url = sqlite_path("scheduler");
    let trace = Trace::start(TraceConfig::new(&url)).unwrap();
    let server = MemServer::new(Handles::real());
    let registry = Arc::new(server.connect(ConnectOptions::default().namespace("/trace")).unwrap());
    let scheduler = SchedulerBuilder::new(registry).trace(&trace).start().await.unwrap();
    let config =
        JobConfig::builder("billing").cron("* * * * * ?").sharding_total_count(3).build().unwrap();
    scheduler.add_job(config, job_failing_item_1()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    scheduler.shutdown(Duration::from_secs(3600)).await.unwrap();
    assert!(trace.flush(Duration::from_secs(20)).await);

    let reader = trace.reader().await.unwrap();
    let all = ExecutionQuery {
        job_name: Some("billing".into()),
        paging: Paging { page_size: 100, ..Paging::default() },
        ..Default::default()
    };
    let page = reader.executions(&all).await.unwrap();
    assert!(page.total >= 3 && page.total % 3 == 0, "{page:?}");
    let fires = page.total / 3;
    assert!(page.rows.iter().all(|r| r.execution_source == "NORMAL_TRIGGER"));
    assert!(page.rows.iter().all(|r| r.is_success == (r.sharding_item != 1)));
    let statuses = StatusQuery { job_name: Some("billing".into()), ..Default::default() };
    assert_eq!(reader.statuses(&statuses).await.unwrap().total, fires * 3);
    trace.shutdown(Duration::from_secs(5)).await;
}

/// A fire that ran nothing here leaves a `TASK_FINISHED` row saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skipped_fires_leave_a_status_row_with_the_reason() {
    let trace = Trace::start(TraceConfig::new(sqlite_path("skips"))).unwrap();
    let sink = trace.skip_sink("10.1.2.3@-@77");
    let job = unique_job("skipping");
    let fire_ms = now_ms() - 5_000;
    sink(&SchedulerEvent::Skipped { job: job.clone(), fire_ms, reason: SkipReason::Misfire });
    sink(&SchedulerEvent::LeaderElected { job: job.clone() }); // not a skip: nothing recorded
    assert!(trace.flush(Duration::from_secs(20)).await);
    let reader = trace.reader().await.unwrap();
    let page = reader
        .statuses(&StatusQuery { job_name: Some(job.clone()), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(page.total, 1, "{page:?}");
    let row = &page.rows[0];
    assert_eq!(row.state, "TASK_FINISHED");
    assert_eq!(row.slave_id, "10.1.2.3");
    assert_eq!(row.sharding_item, "");
    assert_eq!(row.task_id, format!("{job}@-@@-@READY@-@10.1.2.3@-@77@-@{fire_ms}"));
    assert!(row.message.as_deref().unwrap_or("").contains("still running"), "{row:?}");
    trace.shutdown(Duration::from_secs(5)).await;
}

/// A clock that always reads the same instant.
#[derive(Debug)]
struct StoppedClock(i64);

impl Clock for StoppedClock {
    fn now_ms(&self) -> i64 {
        self.0
    }
}

/// Every time the trace writes comes from the clock it is given (the scheduler's), not from the
/// wall clock: with a clock stopped at a known instant, every row carries exactly that instant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_time_in_the_rows_comes_from_the_given_clock() {
    const AT: i64 = 1_622_548_800_000; // 2021-06-01 12:00:00 UTC
    let clock: Arc<dyn Clock> = Arc::new(StoppedClock(AT));
    let config = TraceConfig {
        retention: None,
        clock: clock.clone(),
        ..TraceConfig::new(sqlite_path("clock"))
    };
    let trace = Trace::start(config).unwrap();
    let handles = Handles { clock, ..Handles::real() };
    let job = unique_job("clocked");
    fire(trace.listener(), handles, &job, AT, ExecutionSource::Normal, &[0, 1]).await;
    trace.skip_sink("10.1.2.3@-@77")(&SchedulerEvent::Skipped {
        job: job.clone(),
        fire_ms: AT,
        reason: SkipReason::JobDisabled,
    });
    assert!(trace.flush(Duration::from_secs(20)).await, "{:?}", trace.stats());

    let reader = trace.reader().await.unwrap();
    let all = ExecutionQuery { job_name: Some(job.clone()), ..Default::default() };
    let executions = reader.executions(&all).await.unwrap();
    assert_eq!(executions.total, 2);
    let expected = chrono::DateTime::from_timestamp_millis(AT).unwrap().naive_utc();
    for row in &executions.rows {
        assert_eq!(
            (row.start_time, row.complete_time),
            (Some(expected), Some(expected)),
            "{row:?}"
        );
    }
    let statuses = StatusQuery { job_name: Some(job.clone()), ..Default::default() };
    let statuses = reader.statuses(&statuses).await.unwrap();
    // Staging, running, the fire's end, and the skip.
    assert_eq!(statuses.total, 4, "{statuses:?}");
    for row in &statuses.rows {
        assert_eq!(row.creation_time, Some(expected), "{row:?}");
    }
    trace.shutdown(Duration::from_secs(5)).await;
}
