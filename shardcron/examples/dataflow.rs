//! A dataflow job (`fetch` a batch, `process` it, in streaming mode until nothing is left):
//! three items drain an outbox of mails, each item its own share of the rows, in batches.
//!
//! `cargo run -p shardcron --example dataflow` — no server; it ends by itself within a few seconds.
//!
//! What it shows:
//! - a [`DataflowJob`] and [`Job::dataflow`] in streaming mode (ElasticJob's
//!   `streaming.process`): rounds of fetch + process until `fetch` returns nothing;
//! - how an item picks its share of the data (`id % sharding_total_count == item`), so that the
//!   instances of a cluster never fetch the same row;
//! - application state (the outbox) registered once with `SchedulerBuilder::extension` and read
//!   from every item with `ctx.extension()`, instead of capturing it in the job;
//! - `scheduler.events()` to follow the items' ends.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use shardcron::events::SchedulerEvent;
use shardcron::job::{BoxError, DataflowJob, JobResult};
use shardcron::prelude::*;

/// Mails waiting to be sent, by id, and who sent each one (a database table in real life).
#[derive(Debug, Default)]
struct Outbox {
    pending: Mutex<BTreeMap<u64, String>>,
    sent: Mutex<Vec<(u32, u64)>>,
}

impl Outbox {
    fn with_mails(count: u64) -> Self {
        let pending = (1..=count).map(|id| (id, format!("mail #{id}"))).collect();
        Outbox { pending: Mutex::new(pending), sent: Mutex::default() }
    }

    /// The item's next rows: `WHERE id % total = item ORDER BY id LIMIT batch`.
    fn fetch(&self, item: u32, total: u32, batch: usize) -> Vec<(u64, String)> {
        lock(&self.pending)
            .iter()
            .filter(|(id, _)| *id % u64::from(total) == u64::from(item))
            .take(batch)
            .map(|(id, mail)| (*id, mail.clone()))
            .collect()
    }

    /// `DELETE FROM outbox WHERE id = ..`, and a record of which item sent it.
    fn mark_sent(&self, item: u32, id: u64) {
        lock(&self.pending).remove(&id);
        lock(&self.sent).push((item, id));
    }
}

/// A poisoned lock only means another item panicked while holding it; the data is still usable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Rows per round: small, so that each item takes several rounds.
const BATCH: usize = 3;

struct Mailer;

#[async_trait::async_trait]
impl DataflowJob for Mailer {
    type Data = (u64, String);

    async fn fetch(&self, ctx: &ShardingContext) -> Result<Vec<Self::Data>, BoxError> {
        let outbox = ctx.extension::<Arc<Outbox>>().ok_or("no outbox registered")?;
        Ok(outbox.fetch(ctx.item, ctx.sharding_total_count, BATCH))
    }

    async fn process(&self, ctx: &ShardingContext, batch: Vec<Self::Data>) -> JobResult {
        let outbox = ctx.extension::<Arc<Outbox>>().ok_or("no outbox registered")?;
        let ids: Vec<u64> = batch.iter().map(|(id, _)| *id).collect();
        for (id, _mail) in batch {
            // Sending would go here; a failure returned now fails the item and ends its rounds.
            outbox.mark_sent(ctx.item, id);
        }
        println!("item {} sent {ids:?}", ctx.item);
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let outbox = Arc::new(Outbox::with_mails(20));
    let registry = shardcron::connect("mem:/dataflow").await?;
    let scheduler =
        SchedulerBuilder::new(registry.clone()).extension(outbox.clone()).start().await?;

    // Every 2 seconds, three items each drain their share of the outbox (a real outbox would
    // be polled like this, new mails arriving between fires).
    let config =
        JobConfig::builder("mailer").cron("0/2 * * * * ?").sharding_total_count(3).build()?;
    let mut events = scheduler.events();
    scheduler.add_job(config, Job::dataflow(Mailer, true)).await?;

    // Until a fire finds the outbox empty: its three items end without sending anything.
    let mut finished = 0;
    let wait = async {
        while let Some(event) = events.next().await {
            if let Ok(SchedulerEvent::ItemFinished { item, ok, .. }) = event {
                println!(
                    "item {item} finished ({})",
                    if ok { "drained its share" } else { "failed" }
                );
                finished += 1;
                if finished == 3 && lock(&outbox.pending).is_empty() {
                    break;
                }
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), wait).await.map_err(|_| "not drained in 30 s")?;

    let sent = lock(&outbox.sent).clone();
    let left = lock(&outbox.pending).len();
    let mut per_item = [0usize; 3];
    for (item, _) in &sent {
        per_item[*item as usize] += 1;
    }
    println!("sent {} mails (per item {per_item:?}), {left} left in the outbox", sent.len());

    scheduler.shutdown(Duration::from_secs(10)).await?;
    registry.close().await?;
    Ok(())
}
