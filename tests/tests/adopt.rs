//! Jobs added to the registry by an operator are picked up by the schedulers that have code for
//! them, and only by those.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use shardcron_core::api::{JobOperations, JobStatus};
use shardcron_core::job::Job;
use shardcron_core::registry::CoordinatorRegistry;
use shardcron_core::runtime::{JobHandlers, SchedulerBuilder};
use shardcron_registry_mem::ConnectOptions;
use shardcron_tests::{TestCluster, EPOCH_MS, NAMESPACE};

async fn at(cluster: &TestCluster, secs: i64) {
    let now = cluster.handles.clock.now_ms();
    tokio::time::sleep(Duration::from_millis((EPOCH_MS + secs * 1000 + 500 - now) as u64)).await;
}

#[tokio::test(start_paused = true)]
async fn added_jobs_run_where_a_handler_exists() {
    let cluster = TestCluster::new(21);
    let runs: Arc<Mutex<Vec<(String, u32)>>> = Arc::default();
    let recorder = {
        let runs = runs.clone();
        Job::from_fn(move |ctx| {
            let runs = runs.clone();
            async move {
                runs.lock().push((ctx.job_name.clone(), ctx.item));
                Ok(())
            }
        })
    };
    let handlers = JobHandlers::new().named("nightly", recorder).resolver(|config| {
        match config.props().get("script.command.line") {
            Some(line) => Err(format!("{line} is not on the allow-list")),
            None => Ok(None),
        }
    });
    let client = cluster.server.connect(ConnectOptions::default().namespace(NAMESPACE)).unwrap();
    let registry: Arc<dyn CoordinatorRegistry> = Arc::new(client);
    let scheduler = SchedulerBuilder::new(registry)
        .handles(cluster.handles.clone())
        .ip("10.0.0.1")
        .pid(1)
        .job_handlers(handlers)
        .start()
        .await
        .unwrap();

    let operator = cluster.client();
    let ops = JobOperations::new(&operator);
    ops.add_job_yaml("nightly", "cron: 0/10 * * * * ?\nshardingTotalCount: 2\n").await.unwrap();
    ops.add_job_yaml("unknown", "cron: 0/10 * * * * ?\nshardingTotalCount: 1\n").await.unwrap();
    let script = "cron: 0/10 * * * * ?\nshardingTotalCount: 1\nprops:\n  script.command.line: /bin/rm -rf /\n";
    ops.add_job_yaml("dangerous", script).await.unwrap();
    at(&cluster, 25).await;

    assert_eq!(scheduler.jobs(), ["nightly"]);
    let mut ran = runs.lock().clone();
    ran.sort();
    assert_eq!(
        ran,
        [
            ("nightly".into(), 0),
            ("nightly".into(), 0),
            ("nightly".into(), 1),
            ("nightly".into(), 1)
        ]
    );
    assert_eq!(ops.job_brief("nightly").await.unwrap().status, JobStatus::Ok);
    assert_eq!(ops.job_brief("unknown").await.unwrap().status, JobStatus::Crashed);
    assert_eq!(ops.job_brief("dangerous").await.unwrap().status, JobStatus::Crashed);

    // An operator's shutdown stops it here for good...
    ops.shutdown("nightly", None).await.unwrap();
    at(&cluster, 27).await;
    let before = runs.lock().len();
    at(&cluster, 45).await;
    assert_eq!(runs.lock().len(), before, "stopped, and not picked up again");
    assert_eq!(ops.job_brief("nightly").await.unwrap().status, JobStatus::Crashed);
    // ...until the job is removed and added again.
    ops.remove("nightly").await.unwrap();
    ops.add_job_yaml("nightly", "cron: 0/10 * * * * ?\nshardingTotalCount: 1\n").await.unwrap();
    at(&cluster, 55).await;
    assert_eq!(scheduler.jobs(), ["nightly"]);
    assert_eq!(runs.lock().len(), before + 1);
    scheduler.shutdown(Duration::from_secs(3600)).await.unwrap();
}
