//! The executor: parallel limit, panics, cancellation, report shape, determinism.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::handles::Spawner;

/// Counts items running at once and keeps the high-water mark.
#[derive(Default)]
struct Gauge {
    now: AtomicUsize,
    high: AtomicUsize,
}

fn gauged_job(gauge: &Arc<Gauge>) -> Job {
    let gauge = Arc::clone(gauge);
    Job::from_fn(move |_ctx| {
        let gauge = Arc::clone(&gauge);
        async move {
            let running = gauge.now.fetch_add(1, Ordering::SeqCst) + 1;
            gauge.high.fetch_max(running, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(10)).await;
            gauge.now.fetch_sub(1, Ordering::SeqCst);
            Ok(())
        }
    })
}

#[tokio::test(start_paused = true)]
async fn never_more_than_the_limit_at_once() {
    let items: Vec<u32> = (0..10).collect();
    for (limit, expected_high, waves) in [(1, 1, 10), (3, 3, 4), (4, 4, 3), (10, 10, 1), (0, 10, 1)]
    {
        let gauge = Arc::new(Gauge::default());
        let report =
            Executor::new(handles()).run(&gauged_job(&gauge), request(&items, 10, limit)).await;
        assert!(report.all_completed());
        assert_eq!(gauge.high.load(Ordering::SeqCst), expected_high, "limit {limit}");
        assert_eq!(report.finished_ms - report.started_ms, 10 * waves, "limit {limit}");
    }
}

#[tokio::test(start_paused = true)]
async fn items_start_in_item_order_and_refill_freed_slots() {
    let job = Job::from_fn(|ctx: ShardingContext| async move {
        // Item 0 is slow; the others quick: with two slots, 1..4 pass through the second one.
        let ms = if ctx.item == 0 { 100 } else { 10 };
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(())
    });
    let report = Executor::new(handles()).run(&job, request(&[4, 2, 0, 1, 3], 5, 2)).await;
    let starts: Vec<_> =
        report.timings.iter().map(|(item, t)| (*item, t.started_ms - START_MS)).collect();
    assert_eq!(starts, [(0, 0), (1, 0), (2, 10), (3, 20), (4, 30)]);
    assert_eq!(report.timings[&0].finished_ms - START_MS, 100);
}

#[tokio::test(start_paused = true)]
async fn panics_are_caught_and_reported_with_their_message() {
    let job = Job::from_fn(|ctx: ShardingContext| async move {
        tokio::task::yield_now().await;
        match ctx.item {
            0 => panic!("static message"),
            1 => panic!("item {} exploded", ctx.item),
            2 => std::panic::panic_any(42_u8),
            _ => Ok(()),
        }
    });
    let report = run(&job, &[0, 1, 2, 3]).await;
    assert_eq!(
        report.items[&0],
        ItemOutcome::Failed(JobFailure::Panicked("static message".into()))
    );
    assert_eq!(
        report.items[&1],
        ItemOutcome::Failed(JobFailure::Panicked("item 1 exploded".into()))
    );
    assert_eq!(
        report.items[&2],
        ItemOutcome::Failed(JobFailure::Panicked("non-string panic payload".into()))
    );
    assert_eq!(report.items[&3], ItemOutcome::Completed);
    assert_eq!(report.failed_items(), [0, 1, 2]);
    assert_eq!(
        JobFailure::Panicked("item 1 exploded".into()).to_string(),
        "the job panicked: item 1 exploded"
    );
}

#[tokio::test(start_paused = true)]
async fn items_cancelled_before_they_start_do_not_run() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let job = Job::from_fn(move |ctx: ShardingContext| {
        let counter = Arc::clone(&counter);
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(10)).await;
            if ctx.item == 0 {
                // While item 0 runs, the runtime loses item 2, which waits for the only slot.
                ctx.cancellation.cancel();
            }
            Ok(())
        }
    });
    let mut request = request(&[0, 1, 2, 3], 4, 1);
    let shared = request.contexts[0].cancellation.clone();
    request.contexts[2] = request.contexts[2].clone().with_fencing(3, shared);
    request.contexts[3].cancellation.cancel(); // lost before the fire started

    let report = Executor::new(handles()).run(&job, request).await;
    assert_eq!(report.completed_items(), [0, 1]);
    assert_eq!(report.cancelled_items(), [2, 3]);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(report.timings.keys().copied().collect::<Vec<_>>(), [0, 1]);
}

#[tokio::test(start_paused = true)]
async fn a_repeated_item_runs_once() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let job = Job::from_fn(move |_ctx| {
        counter.fetch_add(1, Ordering::SeqCst);
        async { Ok(()) }
    });
    let report = run(&job, &[1, 0, 1]).await;
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(report.items.keys().copied().collect::<Vec<_>>(), [0, 1]);
}

#[tokio::test(start_paused = true)]
async fn an_empty_request_returns_an_empty_report() {
    let job = Job::from_fn(|_ctx| async { panic!("must not run") });
    let report = run(&job, &[]).await;
    assert!(report.items.is_empty() && report.timings.is_empty());
    assert_eq!((report.started_ms, report.finished_ms), (START_MS, START_MS));
    assert_eq!(report.job_name, "orders");
}

/// A spawner that drops every task it is given, as a runtime shutting down would.
#[derive(Debug)]
struct DroppingSpawner;

impl Spawner for DroppingSpawner {
    fn spawn(&self, task: Pin<Box<dyn Future<Output = ()> + Send + 'static>>) {
        drop(task);
    }

    fn spawn_blocking(&self, task: Box<dyn FnOnce() + Send + 'static>) {
        drop(task);
    }
}

#[tokio::test(start_paused = true)]
async fn items_go_through_the_injected_spawner() {
    let mut dropping = handles();
    dropping.spawner = Arc::new(DroppingSpawner);
    let job = Job::from_fn(|_ctx| async { Ok(()) });
    let report = Executor::new(dropping.clone()).run(&job, request(&[0], 1, 0)).await;
    assert!(matches!(&report.items[&0], ItemOutcome::Failed(JobFailure::Lost(_))), "{report:?}");
    assert!(report.timings.is_empty());

    // A blocking job's inner task is dropped the same way (its item task runs on tokio here).
    let mut mixed = handles();
    mixed.spawner = Arc::new(InlineThenDropBlocking);
    let blocking = Job::blocking_fn(|_ctx| Ok(()));
    let report = Executor::new(mixed).run(&blocking, request(&[0], 1, 0)).await;
    let ItemOutcome::Failed(JobFailure::Lost(reason)) = &report.items[&0] else {
        panic!("{report:?}");
    };
    assert!(reason.contains("blocking task was dropped"), "{reason}");
}

#[tokio::test(start_paused = true)]
async fn the_runtime_runs_a_fires_only_item_on_the_fires_own_task() {
    // Through a spawner that drops every task: the runtime's fire of one item still runs it,
    // on the fire's own task; a fire of two spawns each, and both are lost.
    let mut dropping = handles();
    dropping.spawner = Arc::new(DroppingSpawner);
    let job = Job::from_fn(|_ctx| async { Ok(()) });
    let executor = Executor::new(dropping);
    let report = executor.run_gated(&job, request(&[0], 1, 0), None).await;
    assert!(report.all_completed(), "{report:?}");
    assert_eq!(report.timings.len(), 1);
    let report = executor.run_gated(&job, request(&[0, 1], 2, 0), None).await;
    assert!(report.items.values().all(|o| matches!(o, ItemOutcome::Failed(JobFailure::Lost(_)))));
    // `Executor::run` spawns every item, the only one too (dropping its future leaves them).
    let report = executor.run(&job, request(&[0], 1, 0)).await;
    assert!(matches!(&report.items[&0], ItemOutcome::Failed(JobFailure::Lost(_))), "{report:?}");
}

#[tokio::test(start_paused = true)]
async fn of_a_repeated_item_the_first_context_runs() {
    let tokens = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let seen = Arc::clone(&tokens);
    let job = Job::from_fn(move |ctx: ShardingContext| {
        seen.lock().push((ctx.item, ctx.fencing_token));
        async { Ok(()) }
    });
    let mut req = request(&[1, 0, 1], 2, 0);
    for (ctx, token) in req.contexts.iter_mut().zip([10, 20, 30]) {
        ctx.fencing_token = token;
    }
    let report = Executor::new(handles()).run(&job, req).await;
    assert!(report.all_completed());
    let mut ran = tokens.lock().clone();
    ran.sort_unstable();
    assert_eq!(ran, [(0, 20), (1, 10)]);
}

/// Spawns async tasks on tokio, drops blocking ones.
#[derive(Debug)]
struct InlineThenDropBlocking;

impl Spawner for InlineThenDropBlocking {
    fn spawn(&self, task: Pin<Box<dyn Future<Output = ()> + Send + 'static>>) {
        tokio::spawn(task);
    }

    fn spawn_blocking(&self, task: Box<dyn FnOnce() + Send + 'static>) {
        drop(task);
    }
}

#[tokio::test(start_paused = true)]
async fn equal_fires_give_equal_reports() {
    async fn once() -> FireReport {
        let job = Job::from_fn(|ctx: ShardingContext| async move {
            tokio::time::sleep(Duration::from_millis(u64::from(7 * (ctx.item % 3) + 1))).await;
            if ctx.item % 4 == 1 {
                return Err(format!("item {} failed", ctx.item).into());
            }
            Ok(())
        });
        let items: Vec<u32> = (0..12).collect();
        Executor::new(handles()).run(&job, request(&items, 12, 5)).await
    }
    let first = once().await;
    let second = once().await;
    // Each run starts at START_MS on its own clock, so equal runs are equal reports.
    assert_eq!(first, second);
    assert_eq!(first.failed_items(), [1, 5, 9]);
}
