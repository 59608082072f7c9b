//! Quick start: two jobs on the embedded in-memory registry, each execution printed, with a
//! logging subscriber installed.
//!
//! `cargo run -p shardcron --example quickstart` — runs for about 12 seconds, no server needed.
//! `RUST_LOG=debug` shows what the scheduler does underneath.

use std::time::Duration;

use shardcron::config::JobConfig;
use shardcron::cron::JobTimeZone;
use shardcron::job::Job;
use shardcron::runtime::SchedulerBuilder;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // shardcron logs through `tracing`, which drops everything until a subscriber is installed
    // (shardcron then writes only failing items and a few warnings to stderr itself). This one
    // prints warnings and up, or what RUST_LOG asks for, on stderr.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();

    let registry = shardcron::connect("mem:/quickstart").await?;
    let scheduler = SchedulerBuilder::new(registry).start().await?;

    // A job cut into 3 items, every 2 seconds; each item gets its parameter.
    let mut reports = JobConfig::new("reports", 3);
    reports.cron = Some("0/2 * * * * ?".into());
    reports.sharding_item_parameters = Some("0=north,1=south,2=east".into());
    scheduler
        .add_job(
            reports,
            Job::from_fn(|ctx| async move {
                println!(
                    "{}  reports  item {} ({})",
                    at(ctx.fire_time_ms),
                    ctx.item,
                    ctx.item_parameter
                );
                Ok(())
            }),
        )
        .await?;

    // A blocking job with a job parameter, every 3 seconds.
    let mut cleanup = JobConfig::new("cleanup", 1);
    cleanup.cron = Some("0/3 * * * * ?".into());
    cleanup.job_parameter = Some("older-than=7d".into());
    scheduler
        .add_job(
            cleanup,
            Job::blocking_fn(|ctx| {
                println!(
                    "{}  cleanup  item {} [{}]",
                    at(ctx.fire_time_ms),
                    ctx.item,
                    ctx.job_parameter
                );
                Ok(())
            }),
        )
        .await?;

    println!("instance {} scheduled: {:?}", scheduler.instance(), scheduler.jobs());
    tokio::time::sleep(Duration::from_secs(12)).await;
    scheduler.shutdown().await?;
    println!("shut down cleanly");
    Ok(())
}

/// A fire time as UTC RFC 3339.
fn at(epoch_ms: i64) -> String {
    JobTimeZone::utc().format_rfc3339(epoch_ms).unwrap_or_else(|| epoch_ms.to_string())
}
