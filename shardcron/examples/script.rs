//! A script job: every item runs an external program, which gets the item's context as JSON
//! in its last argument (ElasticJob's field names, so scripts written for ElasticJob read it
//! unchanged). Here the program is a few lines of POSIX `sh`; item 2's "region" is offline, so
//! its script exits with status 3, which fails the item.
//!
//! `cargo run -p shardcron --example script` — no server; needs `sh` (Unix); ends by itself
//! after the first fire (the job fires every 2 seconds).
//!
//! What it shows:
//! - [`Job::script`]: the program is started directly, never through a shell of ours, so
//!   nothing in the context can be read as shell syntax (here we *choose* `sh` as the program);
//! - a non-zero exit fails the item; with the `THROW` error handler the failure, with the
//!   exit status and the end of the script's stderr, comes back as a `FireFailed` event;
//! - the context's JSON, as the script received it.

use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use shardcron::events::SchedulerEvent;
use shardcron::prelude::*;

/// The script: `$0` is the output directory (the argument we pass), `$1` the context's JSON
/// (appended by shardcron). It writes the JSON to `item-N.json`, or fails for item 2.
const SCRIPT: &str = r#"
item=$(printf '%s' "$1" | sed -n 's/.*"shardingItem":\([0-9]*\).*/\1/p')
if [ "$item" = 2 ]; then
    echo "region $item is offline" >&2
    exit 3
fi
printf '%s\n' "$1" > "$0/item-$item.json"
"#;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out_dir = std::env::temp_dir().join(format!("shardcron-script-{}", std::process::id()));
    std::fs::create_dir_all(&out_dir)?;
    let result = run(&out_dir).await;
    let _ = std::fs::remove_dir_all(&out_dir);
    result
}

async fn run(out_dir: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let registry = shardcron::connect("mem:/script").await?;
    let scheduler = SchedulerBuilder::new(registry.clone()).start().await?;

    let config = JobConfig::builder("regions")
        .cron("0/2 * * * * ?")
        .sharding_total_count(3)
        .sharding_item_parameters("0=north,1=south,2=east")
        .job_parameter("report=daily")
        // THROW: a failing item is raised as a `FireFailed` event, which we print below
        // (the default, LOG, writes a warning instead).
        .error_handler(ErrorHandlerType::Throw)
        .build()?;
    let program =
        Job::script("sh", vec!["-c".into(), SCRIPT.into(), out_dir.to_string_lossy().into_owned()]);
    let mut events = scheduler.events();
    scheduler.add_job(config, program).await?;

    // The first fire: every item's end, then the fire's raised failure (it comes after the
    // fire's last item).
    let (mut finished, mut raised) = (0, false);
    let wait = async {
        while let Some(event) = events.next().await {
            match event {
                Ok(SchedulerEvent::ItemFinished { item, ok, .. }) => {
                    println!("item {item}: {}", if ok { "exit status 0" } else { "failed" });
                    finished += 1;
                }
                Ok(SchedulerEvent::FireFailed { item, error, .. }) => {
                    println!("item {item} raised: {error}");
                    raised = true;
                }
                _ => {}
            }
            if finished == 3 && raised {
                break;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .map_err(|_| "the run took over 30 s")?;

    for item in 0..3 {
        let path = out_dir.join(format!("item-{item}.json"));
        match std::fs::read_to_string(&path) {
            Ok(json) => println!("item {item}'s script received {}", json.trim_end()),
            Err(_) => println!("item {item}'s script wrote nothing"),
        }
    }

    scheduler.shutdown(Duration::from_secs(10)).await?;
    registry.close().await?;
    Ok(())
}
