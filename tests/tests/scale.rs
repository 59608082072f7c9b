//! 10,000 jobs in one process: the thread count does not depend on the number of jobs (one
//! driver task, one timer heap, one task per job; ElasticJob #510 needed threads per job).

use std::sync::Arc;
use std::time::Duration;

use shardcron_core::config::JobConfig;
use shardcron_core::handles::Handles;
use shardcron_core::job::Job;
use shardcron_core::registry::CoordinatorRegistry;
use shardcron_core::runtime::SchedulerBuilder;
use shardcron_registry_mem::{ConnectOptions, MemServer};

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map(|d| d.count()).unwrap_or(0)
}

#[test]
fn ten_thousand_jobs_keep_the_thread_count() {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let server = MemServer::new(Handles::real());
        let registry: Arc<dyn CoordinatorRegistry> =
            Arc::new(server.connect(ConnectOptions::default().namespace("/scale")).unwrap());
        let scheduler = SchedulerBuilder::new(registry).start().await.unwrap();
        let mut counts = Vec::new();
        let mut added = 0;
        for target in [10, 10_000] {
            while added < target {
                // Far from now, so that the test measures registration, not firing.
                let config = JobConfig::builder(format!("job-{added}"))
                    .cron("0 0 0 1 1 ? 2099")
                    .build()
                    .unwrap();
                scheduler.add_job(config, Job::from_fn(|_| async { Ok(()) })).await.unwrap();
                added += 1;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            counts.push(threads());
        }
        assert_eq!(scheduler.jobs().len(), 10_000);
        assert!(counts[0] > 0, "thread count readable");
        assert_eq!(counts[0], counts[1], "threads with 10 jobs vs 10,000 jobs: {counts:?}");
    });
}
