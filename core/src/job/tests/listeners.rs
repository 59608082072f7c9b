//! Listeners: once per fire, around the items, isolated from each other's panics.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::*;

type Log = Arc<Mutex<Vec<String>>>;

struct Recording {
    name: &'static str,
    log: Log,
}

#[async_trait]
impl JobListener for Recording {
    async fn before_job_executed(&self, fire: &FireInfo) {
        tokio::time::sleep(Duration::from_millis(1)).await; // listeners may wait
        self.log.lock().push(format!(
            "{} before {} {:?} {} {}",
            self.name, fire.job_name, fire.items, fire.source, fire.instance
        ));
    }

    async fn after_job_executed(&self, fire: &FireInfo, report: &FireReport) {
        self.log.lock().push(format!(
            "{} after {:?} completed {:?} failed {:?}",
            self.name,
            fire.items,
            report.completed_items(),
            report.failed_items()
        ));
    }
}

struct Panicking;

#[async_trait]
impl JobListener for Panicking {
    async fn before_job_executed(&self, _fire: &FireInfo) {
        panic!("before listener bug");
    }

    async fn after_job_executed(&self, _fire: &FireInfo, _report: &FireReport) {
        tokio::task::yield_now().await;
        panic!("after listener bug");
    }
}

/// Uses neither hook: both default to doing nothing.
struct Silent;

impl JobListener for Silent {}

fn logging_job(log: &Log) -> Job {
    let log = Arc::clone(log);
    Job::from_fn(move |ctx: ShardingContext| {
        let log = Arc::clone(&log);
        async move {
            tokio::time::sleep(Duration::from_millis(u64::from(ctx.item) + 1)).await;
            log.lock().push(format!("item {}", ctx.item));
            if ctx.item == 2 {
                return Err("no".into());
            }
            Ok(())
        }
    })
}

#[tokio::test(start_paused = true)]
async fn listeners_run_once_per_fire_around_the_items_in_registration_order() {
    let log = Log::default();
    let executor = Executor::new(handles())
        .with_listener(Arc::new(Recording { name: "a", log: Arc::clone(&log) }))
        .with_listener(Arc::new(Silent))
        .with_listener(Arc::new(Recording { name: "b", log: Arc::clone(&log) }));
    let job = logging_job(&log);

    executor.run(&job, request(&[0, 2], 3, 0)).await;
    let mut second = request(&[1], 3, 0);
    second.info.source = ExecutionSource::Misfire;
    executor.run(&job, second).await;

    assert_eq!(
        log.lock().clone(),
        [
            "a before orders [0, 2] READY 10.0.0.1@-@4242",
            "b before orders [0, 2] READY 10.0.0.1@-@4242",
            "item 0",
            "item 2",
            "a after [0, 2] completed [0] failed [2]",
            "b after [0, 2] completed [0] failed [2]",
            "a before orders [1] MISFIRE 10.0.0.1@-@4242",
            "b before orders [1] MISFIRE 10.0.0.1@-@4242",
            "item 1",
            "a after [1] completed [1] failed []",
            "b after [1] completed [1] failed []",
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_panicking_listener_breaks_neither_the_fire_nor_the_other_listeners() {
    let log = Log::default();
    let executor = Executor::new(handles())
        .with_listener(Arc::new(Panicking))
        .with_listener(Arc::new(Recording { name: "b", log: Arc::clone(&log) }));
    let report = executor.run(&logging_job(&log), request(&[0, 1], 2, 0)).await;
    assert_eq!(report.completed_items(), [0, 1]);
    assert_eq!(
        log.lock().clone(),
        [
            "b before orders [0, 1] READY 10.0.0.1@-@4242",
            "item 0",
            "item 1",
            "b after [0, 1] completed [0, 1] failed []",
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_fire_without_items_calls_no_listener() {
    let log = Log::default();
    let executor = Executor::new(handles())
        .with_listener(Arc::new(Recording { name: "a", log: Arc::clone(&log) }));
    executor.run(&logging_job(&log), request(&[], 2, 0)).await;
    assert!(log.lock().is_empty());
}

/// Records the per-item hooks.
struct ItemHooks {
    log: Log,
}

#[async_trait]
impl JobListener for ItemHooks {
    fn item_started(&self, fire: &FireInfo, ctx: &ShardingContext, started_ms: i64) {
        self.log.lock().push(format!(
            "start {} item {} token {} at +{}",
            fire.job_name,
            ctx.item,
            ctx.fencing_token,
            started_ms - START_MS
        ));
    }

    fn item_finished(
        &self,
        _fire: &FireInfo,
        end: &ItemEndContext,
        outcome: &ItemOutcome,
        timing: Option<ItemTiming>,
    ) {
        let took = timing.map(|t| t.finished_ms - t.started_ms);
        let kind = match outcome {
            ItemOutcome::Completed => "completed",
            ItemOutcome::Failed(_) => "failed",
            ItemOutcome::Cancelled => "cancelled",
        };
        self.log.lock().push(format!(
            "end item {} token {} {kind} took {took:?} task {}",
            end.item,
            end.fencing_token,
            end.task_id.split("@-@").nth(1).unwrap_or("?")
        ));
        if end.item == 1 {
            panic!("a recorder bug");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn item_hooks_see_each_item_start_and_end_with_its_token_and_timing() {
    let log = Log::default();
    let hooks = Log::default();
    let executor = Executor::new(handles())
        .with_listener(Arc::new(ItemHooks { log: Arc::clone(&hooks) }))
        .with_listener(Arc::new(ItemHooks { log: Arc::clone(&hooks) }));
    let mut request = request(&[0, 1, 2, 3], 4, 0);
    let cancelled = CancellationToken::new();
    cancelled.cancel();
    for ctx in &mut request.contexts {
        let token = if ctx.item == 3 { cancelled.clone() } else { CancellationToken::new() };
        *ctx = ctx.clone().with_fencing(u64::from(ctx.item) * 10, token);
    }
    let report = executor.run(&logging_job(&log), request).await;
    assert_eq!(report.completed_items(), [0, 1]);
    let mut seen = hooks.lock().clone();
    // Starts come in item order; ends in the order items end (item i sleeps i + 1 ms).
    seen.dedup();
    assert_eq!(
        seen,
        [
            "start orders item 0 token 0 at +0",
            "start orders item 1 token 10 at +0",
            "start orders item 2 token 20 at +0",
            "end item 3 token 30 cancelled took None task 0,1,2,3",
            "end item 0 token 0 completed took Some(1) task 0,1,2,3",
            "end item 1 token 10 completed took Some(2) task 0,1,2,3",
            "end item 2 token 20 failed took Some(3) task 0,1,2,3",
        ]
    );
}
