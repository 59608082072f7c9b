//! The trace's PostgreSQL goes away while fires run, and comes back: fires are not held up, rows
//! that do not fit the queue are dropped and counted, and rows are written again once it is back.
//! (A test binary of its own: it stops the server the other PostgreSQL tests use.)

#![allow(clippy::unwrap_used)] // a test: a panic is the failure report

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use shardcron_core::handles::Handles;
use shardcron_core::job::ExecutionSource;
use shardcron_observe::trace::ExecutionQuery;
use shardcron_observe::{Trace, TraceConfig, TraceReader};

use common::*;

/// Runs `scripts/postgres.sh pause|resume` on the test script's server.
fn server(verb: &str) {
    let script = std::env::var("SHARDCRON_POSTGRES_SCRIPT")
        .expect("SHARDCRON_POSTGRES_SCRIPT is not set: source target/postgres/env");
    let status = Command::new("bash").arg(script).arg(verb).status().unwrap();
    assert!(status.success(), "postgres.sh {verb} failed");
}

/// Fires `count` times (items 0 and 2, every 20 ms); returns the slowest fire's wall time.
async fn fires(trace: &Trace, job: &str, count: usize) -> Duration {
    let mut slowest = Duration::ZERO;
    for _ in 0..count {
        let begin = Instant::now();
        let report = fire(
            trace.listener(),
            Handles::real(),
            job,
            now_ms(),
            ExecutionSource::Normal,
            &[0, 2],
        )
        .await;
        slowest = slowest.max(begin.elapsed());
        assert_eq!(report.completed_items(), [0, 2]);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    slowest
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_going_away_drops_and_counts_rows_and_fires_go_on() {
    let Some(url) = postgres_url() else { return };
    let config = TraceConfig {
        queue_capacity: 32,
        retry_delay: Duration::from_millis(200),
        ..TraceConfig::new(&url)
    };
    let trace = Trace::start(config).unwrap();
    trace.ready(Duration::from_secs(20)).await.unwrap();
    let before = unique_job("before");
    let during = unique_job("during");
    let after = unique_job("after");

    fires(&trace, &before, 5).await;
    assert!(trace.flush(Duration::from_secs(20)).await);
    assert_eq!(trace.stats().dropped, 0);

    server("pause");
    // 60 fires × 6 queue entries: far more than the queue holds while nothing can be written.
    let slowest = fires(&trace, &during, 60).await;
    let stats = trace.stats();
    // With a write waiting for the database on the fire path, fires would take the connection
    // timeout (seconds); through the queue they take what the job takes.
    assert!(slowest < Duration::from_secs(1), "a fire took {slowest:?} with the database down");
    assert!(stats.dropped > 0, "nothing dropped while the database was down: {stats:?}");
    let dropped_during = stats.dropped;

    server("resume");
    // The rows that waited in the queue and everything after are written.
    let deadline = Instant::now() + Duration::from_secs(30);
    while trace.stats().pending > 0 {
        assert!(Instant::now() < deadline, "rows never resumed: {:?}", trace.stats());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    fires(&trace, &after, 5).await;
    assert!(trace.flush(Duration::from_secs(30)).await, "{:?}", trace.stats());
    assert_eq!(trace.stats().dropped, dropped_during, "rows dropped after the database came back");

    let reader = TraceReader::open(&url).await.unwrap();
    let count = |job: &str| {
        let query = ExecutionQuery { job_name: Some(job.to_owned()), ..Default::default() };
        let reader = reader.clone();
        async move { reader.executions(&query).await.unwrap().total }
    };
    assert_eq!(count(&before).await, 10);
    assert_eq!(count(&after).await, 10);
    let kept = count(&during).await;
    assert!(kept < 120, "every row of the outage was kept, yet {dropped_during} were dropped");
    eprintln!("outage: {dropped_during} rows dropped, {kept} of 120 item rows kept from the queue");
    trace.shutdown(Duration::from_secs(5)).await;
}
