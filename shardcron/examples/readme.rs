//! The README's example, as it is there (a test checks that the two stay the same, runs this
//! binary, sees the failing item reported and stops it with SIGINT):
//! `cargo run -p shardcron --example readme`, then Ctrl-C.

use shardcron::prelude::*;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The embedded in-memory registry: no server. A cluster uses "zk://..." or "etcd://...".
    let registry = shardcron::connect("mem:/hello").await?;
    let scheduler = SchedulerBuilder::new(registry.clone()).start().await?;

    // A job cut into 3 items, fired every 2 seconds. Item 1 fails, to show how that looks.
    let config =
        JobConfig::builder("hello").cron("0/2 * * * * ?").sharding_total_count(3).build()?;
    let job = Job::from_fn(|ctx| async move {
        if ctx.item == 1 {
            return Err("cannot reach the database".into());
        }
        let fire = ctx.fire_time().duration_since(std::time::UNIX_EPOCH)?;
        println!("item {} of the fire at {} s ran", ctx.item, fire.as_secs());
        Ok(())
    });
    scheduler.add_job(config, job).await?;

    // Runs until Ctrl-C, then stops gracefully: running items finish, the instance leaves.
    scheduler.shutdown_on_ctrl_c().await?;
    registry.close().await?; // the registry is the application's: close it when done
    println!("stopped");
    Ok(())
}
