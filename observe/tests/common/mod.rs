//! What the trace tests share: the databases, a job, fires run through a real executor.

#![allow(dead_code, clippy::unwrap_used)] // each test binary uses part of it; a panic is the report

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use shardcron_core::handles::Handles;
use shardcron_core::job::{
    ExecutionSource, Executor, FireInfo, FireReport, FireRequest, Job, JobListener, ShardingContext,
};

/// The PostgreSQL the test script started (`SHARDCRON_POSTGRES`), or `None` after checking that
/// skipping is allowed (`SHARDCRON_REQUIRE_SERVERS` unset).
pub fn postgres_url() -> Option<String> {
    match std::env::var("SHARDCRON_POSTGRES") {
        Ok(url) => Some(url),
        Err(_) if std::env::var("SHARDCRON_REQUIRE_SERVERS").as_deref() == Ok("1") => panic!(
            "SHARDCRON_REQUIRE_SERVERS=1 but SHARDCRON_POSTGRES is not set: run \
             scripts/postgres.sh start and source target/postgres/env"
        ),
        Err(_) => {
            eprintln!("note: SHARDCRON_POSTGRES not set; skipping this PostgreSQL test");
            None
        }
    }
}

/// A fresh SQLite file path under target/tmp (removed first if left over).
pub fn sqlite_path(name: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("trace");
    std::fs::create_dir_all(&dir).unwrap();
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    let path = dir.join(format!("{name}-{}-{n}.db", std::process::id()));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    path.to_string_lossy().into_owned()
}

/// A job name no other test (or earlier run on the same database) uses.
pub fn unique_job(name: &str) -> String {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    format!("{name}-{}-{nanos}", std::process::id())
}

/// Item 1 fails with a known message; the others complete.
pub fn job_failing_item_1() -> Job {
    Job::from_fn(|ctx: ShardingContext| async move {
        if ctx.item == 1 {
            return Err(format!("item {} of {}: disk full", ctx.item, ctx.job_name).into());
        }
        Ok(())
    })
}

/// Runs one fire of `items` of `job_name` (of 3 items) at `fire_ms` with `listener`.
pub async fn fire(
    listener: Arc<dyn JobListener>,
    handles: Handles,
    job_name: &str,
    fire_ms: i64,
    source: ExecutionSource,
    items: &[u32],
) -> FireReport {
    let info = FireInfo {
        job_name: job_name.to_owned(),
        instance: "10.1.2.3@-@4242".into(),
        fire_time: shardcron_core::__private::time::from_epoch_ms(fire_ms),
        source,
        items: items.to_vec(),
    };
    let contexts = items
        .iter()
        .map(|&item| {
            ShardingContext::new(&info, 3, "", item, "").with_fencing(7, Default::default())
        })
        .collect();
    let request = FireRequest { info, contexts, max_parallel_items: 0 };
    Executor::new(handles).with_listener(listener).run(&job_failing_item_1(), request).await
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}
