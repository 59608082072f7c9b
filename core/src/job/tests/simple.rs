//! Simple jobs: trait objects, async closures, blocking closures.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;

use super::*;

/// Records the contexts it saw.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<(u32, String, String, u32)>>,
}

#[async_trait]
impl SimpleJob for Recorder {
    async fn execute(&self, ctx: &ShardingContext) -> JobResult {
        tokio::time::sleep(Duration::from_millis(5)).await;
        self.seen.lock().push((
            ctx.item,
            ctx.item_parameter.clone(),
            ctx.job_parameter.clone(),
            ctx.sharding_total_count,
        ));
        if ctx.item == 3 {
            return Err("item 3 is broken".into());
        }
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn simple_trait_job_runs_every_item_with_its_context() {
    let recorder = Arc::new(Recorder::default());
    let job = Job::simple(Arc::clone(&recorder));
    assert_eq!(job.kind(), "SIMPLE");
    let report = run(&job, &[0, 3, 5]).await;

    let mut seen = recorder.seen.lock().clone();
    seen.sort();
    assert_eq!(
        seen,
        [
            (0, "p0".to_string(), "jp".to_string(), 10),
            (3, "p3".to_string(), "jp".to_string(), 10),
            (5, "p5".to_string(), "jp".to_string(), 10),
        ]
    );
    assert_eq!(report.completed_items(), [0, 5]);
    assert_eq!(report.items[&3], ItemOutcome::Failed(JobFailure::Error("item 3 is broken".into())));
    // All three ran at once, in 5 virtual milliseconds.
    assert_eq!(report.finished_ms - report.started_ms, 5);
}

#[tokio::test(start_paused = true)]
async fn async_closure_job_gets_its_own_context() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let job = Job::from_fn(move |ctx: ShardingContext| {
        let counter = Arc::clone(&counter);
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(u64::from(ctx.item))).await;
            Ok(())
        }
    });
    let report = run(&job, &[1, 2, 4]).await;
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert!(report.all_completed());
    let durations: Vec<_> =
        report.timings.iter().map(|(item, t)| (*item, t.finished_ms - t.started_ms)).collect();
    assert_eq!(durations, [(1, 1000), (2, 2000), (4, 4000)]);
}

/// An error with a source: the report carries the whole chain.
#[derive(Debug, thiserror::Error)]
#[error("cannot load orders")]
struct LoadError(#[source] std::io::Error);

#[tokio::test(start_paused = true)]
async fn a_failure_reports_the_error_chain() {
    let job = Job::from_fn(|_ctx| async {
        Err(LoadError(std::io::Error::other("connection refused")).into())
    });
    let report = run(&job, &[0]).await;
    assert_eq!(
        report.items[&0],
        ItemOutcome::Failed(JobFailure::Error("cannot load orders: connection refused".into()))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocking_closures_run_off_the_async_workers() {
    // Four blocking items meet at a barrier: they can only pass it if all four run at the same
    // time on threads of their own; on the two async workers they would deadlock.
    let barrier = Arc::new(Barrier::new(4));
    let threads = Arc::new(Mutex::new(Vec::new()));
    let (b, t) = (Arc::clone(&barrier), Arc::clone(&threads));
    let job = Job::blocking_fn(move |ctx| {
        b.wait();
        t.lock().push(std::thread::current().id());
        match ctx.item {
            2 => Err(format!("item {} failed", ctx.item).into()),
            3 => panic!("blocking item {} panicked", ctx.item),
            _ => Ok(()),
        }
    });
    assert_eq!(job.kind(), "SIMPLE");
    let report = tokio::time::timeout(
        Duration::from_secs(60),
        Executor::new(Handles::real()).run(&job, request(&[0, 1, 2, 3], 4, 4)),
    )
    .await
    .expect("the blocking items deadlocked: they did not run in parallel");

    assert_eq!(report.completed_items(), [0, 1]);
    assert_eq!(report.items[&2], ItemOutcome::Failed(JobFailure::Error("item 2 failed".into())));
    assert_eq!(
        report.items[&3],
        ItemOutcome::Failed(JobFailure::Panicked("blocking item 3 panicked".into()))
    );
    let mut threads = threads.lock().clone();
    threads.sort_by_key(|id| format!("{id:?}"));
    threads.dedup();
    assert_eq!(threads.len(), 4, "each item on its own thread");
}

#[tokio::test(start_paused = true)]
async fn an_error_after_cancellation_is_a_cancellation() {
    let job = Job::from_fn(|ctx: ShardingContext| async move {
        if ctx.item == 1 {
            ctx.cancellation.cancel(); // stands in for the runtime losing the item
            return Err("stopped: lost the item".into());
        }
        if ctx.item == 2 {
            ctx.cancellation.cancel();
            return Ok(()); // finished anyway
        }
        Err("real failure".into())
    });
    let report = run(&job, &[0, 1, 2]).await;
    assert_eq!(report.items[&0], ItemOutcome::Failed(JobFailure::Error("real failure".into())));
    assert_eq!(report.items[&1], ItemOutcome::Cancelled);
    assert_eq!(report.items[&2], ItemOutcome::Completed);
}
