//! Dataflow jobs: one-shot and streaming.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;

use super::*;

/// Serves `batches` per item, one per fetch, then empty batches (unless `endless`). Logs every
/// call.
struct Feed {
    batches: usize,
    endless: bool,
    fetch_delay: Duration,
    /// Cancel the item's token in the process call of this round (1-based).
    cancel_in_round: Option<usize>,
    log: Mutex<Vec<String>>,
    fetched: Mutex<std::collections::BTreeMap<u32, usize>>,
}

impl Feed {
    fn new(batches: usize) -> Self {
        Feed {
            batches,
            endless: false,
            fetch_delay: Duration::ZERO,
            cancel_in_round: None,
            log: Mutex::new(Vec::new()),
            fetched: Mutex::new(Default::default()),
        }
    }

    fn log(&self) -> Vec<String> {
        self.log.lock().clone()
    }
}

#[async_trait]
impl DataflowJob for Feed {
    type Data = String;

    async fn fetch(&self, ctx: &ShardingContext) -> Result<Vec<String>, BoxError> {
        tokio::time::sleep(self.fetch_delay).await;
        let round = {
            let mut fetched = self.fetched.lock();
            let round = fetched.entry(ctx.item).or_default();
            *round += 1;
            *round
        };
        self.log.lock().push(format!("fetch {} #{round}", ctx.item));
        if ctx.item_parameter == "broken" {
            return Err("the source is unreachable".into());
        }
        if self.endless || round <= self.batches {
            Ok(vec![format!("{}-{round}a", ctx.item), format!("{}-{round}b", ctx.item)])
        } else {
            Ok(Vec::new())
        }
    }

    async fn process(&self, ctx: &ShardingContext, data: Vec<String>) -> JobResult {
        self.log.lock().push(format!("process {}", data.join(",")));
        let round = self.fetched.lock()[&ctx.item];
        if Some(round) == self.cancel_in_round {
            ctx.cancellation.cancel();
        }
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn one_shot_fetches_and_processes_once() {
    let feed = Arc::new(Feed::new(5));
    let job = Job::dataflow(Arc::clone(&feed), false);
    assert_eq!(job.kind(), "DATAFLOW");
    let report = run(&job, &[0]).await;
    assert!(report.all_completed());
    assert_eq!(feed.log(), ["fetch 0 #1", "process 0-1a,0-1b"]);
}

#[tokio::test(start_paused = true)]
async fn one_shot_with_nothing_to_fetch_does_not_process() {
    let feed = Arc::new(Feed::new(0));
    let report = run(&Job::dataflow(Arc::clone(&feed), false), &[0]).await;
    assert!(report.all_completed());
    assert_eq!(feed.log(), ["fetch 0 #1"]);
}

#[tokio::test(start_paused = true)]
async fn streaming_stops_when_fetch_returns_nothing() {
    let feed = Arc::new(Feed::new(3));
    let report = run(&Job::dataflow(Arc::clone(&feed), true), &[4]).await;
    assert!(report.all_completed());
    assert_eq!(
        feed.log(),
        [
            "fetch 4 #1",
            "process 4-1a,4-1b",
            "fetch 4 #2",
            "process 4-2a,4-2b",
            "fetch 4 #3",
            "process 4-3a,4-3b",
            "fetch 4 #4",
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn streaming_stops_when_the_item_is_cancelled_from_inside() {
    let feed = Arc::new(Feed { endless: true, cancel_in_round: Some(2), ..Feed::new(0) });
    let report = run(&Job::dataflow(Arc::clone(&feed), true), &[1]).await;
    assert_eq!(report.items[&1], ItemOutcome::Cancelled);
    assert_eq!(feed.log(), ["fetch 1 #1", "process 1-1a,1-1b", "fetch 1 #2", "process 1-2a,1-2b"]);
}

#[tokio::test(start_paused = true)]
async fn streaming_stops_when_the_runtime_cancels_the_item() {
    // Each fetch takes one virtual second and data never runs out; the runtime cancels the item
    // at 3.5 s: the batch fetched in flight is still processed, then the item stops.
    let feed =
        Arc::new(Feed { endless: true, fetch_delay: Duration::from_secs(1), ..Feed::new(0) });
    let job = Job::dataflow(Arc::clone(&feed), true);
    let mut request = request(&[0], 1, 0);
    let token = request.contexts[0].cancellation.clone();
    request.contexts[0] = request.contexts[0].clone().with_fencing(1, token.clone());
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(3500)).await;
        token.cancel();
    });
    let report = Executor::new(handles()).run(&job, request).await;
    assert_eq!(report.items[&0], ItemOutcome::Cancelled);
    assert_eq!(feed.fetched.lock()[&0], 4);
    assert_eq!(feed.log().last().map(String::as_str), Some("process 0-4a,0-4b"));
    assert_eq!(report.timings[&0].finished_ms - report.timings[&0].started_ms, 4000);
}

#[tokio::test(start_paused = true)]
async fn a_failing_fetch_fails_the_item() {
    let feed = Arc::new(Feed::new(2));
    let job = Job::dataflow(Arc::clone(&feed), true);
    let mut request = request(&[0, 1], 2, 0);
    request.contexts[1].item_parameter = "broken".into();
    let report = Executor::new(handles()).run(&job, request).await;
    assert_eq!(report.items[&0], ItemOutcome::Completed);
    assert_eq!(
        report.items[&1],
        ItemOutcome::Failed(JobFailure::Error("the source is unreachable".into()))
    );
}
