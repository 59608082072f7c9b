//! Quick start: two jobs on the embedded in-memory registry, each execution printed, with a
//! logging subscriber installed.
//!
//! `cargo run -p shardcron --example quickstart` — runs for about 12 seconds, no server needed.
//! `RUST_LOG=debug` shows what the scheduler does underneath.

use std::time::Duration;

use shardcron::prelude::*;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // shardcron logs through `tracing`, which drops everything until a subscriber is installed
    // (shardcron then writes only failing items and a few warnings to stderr itself). This one
    // prints warnings and up, or what RUST_LOG asks for, on stderr.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();

    let registry = shardcron::connect("mem:/quickstart").await?;
    let scheduler = SchedulerBuilder::new(registry.clone()).start().await?;

    // A job cut into 3 items, every 2 seconds; each item gets its parameter.
    let reports = JobConfig::builder("reports")
        .cron("0/2 * * * * ?")
        .sharding_total_count(3)
        .item_parameter(0, "north")
        .item_parameter(1, "south")
        .item_parameter(2, "east")
        .build()?;
    scheduler
        .add_job(
            reports,
            Job::from_fn(|ctx| async move {
                println!(
                    "{}  reports  item {} ({})",
                    at(ctx.fire_time()),
                    ctx.item,
                    ctx.item_parameter
                );
                Ok(())
            }),
        )
        .await?;

    // A blocking job with a job parameter, every 3 seconds.
    let cleanup = JobConfig::builder("cleanup")
        .cron("0/3 * * * * ?")
        .job_parameter("older-than=7d")
        .build()?;
    scheduler
        .add_job(
            cleanup,
            Job::blocking_fn(|ctx| {
                println!(
                    "{}  cleanup  item {} [{}]",
                    at(ctx.fire_time()),
                    ctx.item,
                    ctx.job_parameter
                );
                Ok(())
            }),
        )
        .await?;

    println!("instance {} scheduled: {:?}", scheduler.instance(), scheduler.jobs());
    tokio::time::sleep(Duration::from_secs(12)).await;
    // Running items finish (up to 10 s), then this instance leaves the registry.
    scheduler.shutdown(Duration::from_secs(10)).await?;
    registry.close().await?;
    println!("shut down cleanly");
    Ok(())
}

/// A fire time as UTC RFC 3339.
fn at(time: std::time::SystemTime) -> String {
    let epoch_ms = time
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .and_then(|since| i64::try_from(since.as_millis()).ok());
    epoch_ms
        .and_then(|ms| JobTimeZone::utc().format_rfc3339(ms))
        .unwrap_or_else(|| format!("{time:?}"))
}
