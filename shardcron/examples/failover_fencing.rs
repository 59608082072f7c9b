//! Failover, and how the fencing token keeps a replaced owner from writing.
//!
//! `cargo run -p shardcron --example failover_fencing` — no server (two instances on one
//! in-memory registry server); ends by itself in about 10 seconds.
//!
//! Two instances, `A` and `B`, run a one-item job with failover on. Whichever runs the item
//! first stalls in the middle of it, as a process does in a long GC pause or under SIGSTOP,
//! and its link to the registry goes silent. Its session expires, the other instance claims the
//! interrupted item and re-runs it with a higher fencing token. Then the stalled owner wakes up
//! and tries to finish its write: the store refuses it, because it has already seen the higher
//! token. Without the token, the old owner's late write would have overwritten the new one.
//!
//! The pattern, for any store you write to:
//! 1. at the start of an item, raise the item's fence to `ctx.fencing_token` (refused if the
//!    store has seen a higher one: someone else owns the item now);
//! 2. make every write conditional on the fence still being yours
//!    (`UPDATE .. SET .., fence = $token WHERE item = $item AND fence <= $token`);
//! 3. when the store refuses, stop: the item has another owner.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use shardcron::handles::Handles;
use shardcron::job::TaskId;
use shardcron::mem::{ConnectOptions, MemRegistry, MemServer};
use shardcron::prelude::*;
use tokio::sync::mpsc;

/// How long a registry session outlives a silent client (the registry's session timeout).
const SESSION: Duration = Duration::from_secs(2);
/// How long the stalled owner is frozen: longer than it takes the session to expire and the
/// other instance to take the item over.
const STALL: Duration = Duration::from_secs(6);

/// The external store: one row per item with the highest fencing token it has seen.
#[derive(Debug, Default)]
struct FencedStore {
    rows: Mutex<BTreeMap<u32, Row>>,
}

#[derive(Debug, Default, Clone)]
struct Row {
    fence: u64,
    value: String,
}

/// The store refused a write: it has seen a higher token for the item.
#[derive(Debug, thiserror::Error)]
#[error("refused: token {token} is older than the item's fence {fence}; another instance owns the item now")]
struct Fenced {
    token: u64,
    fence: u64,
}

impl FencedStore {
    fn rows(&self) -> MutexGuard<'_, BTreeMap<u32, Row>> {
        self.rows.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Step 1: claims the item for `token` (raises its fence), unless a higher one was seen.
    fn fence(&self, item: u32, token: u64) -> Result<(), Fenced> {
        let mut rows = self.rows();
        let row = rows.entry(item).or_default();
        if token < row.fence {
            return Err(Fenced { token, fence: row.fence });
        }
        row.fence = token;
        Ok(())
    }

    /// Step 2: writes only while `token` is still the item's highest.
    fn write(&self, item: u32, token: u64, value: String) -> Result<(), Fenced> {
        let mut rows = self.rows();
        let row = rows.entry(item).or_default();
        if token < row.fence {
            return Err(Fenced { token, fence: row.fence });
        }
        *row = Row { fence: token, value };
        Ok(())
    }
}

/// Which instance a job runs on (registered per scheduler).
#[derive(Debug, Clone)]
struct Member(&'static str);

/// Makes the first run of the item stall, and tells `main` which instance stalled.
#[derive(Debug)]
struct Stall {
    first: AtomicBool,
    stalled: mpsc::UnboundedSender<&'static str>,
}

fn job() -> Job {
    Job::from_fn(|ctx| async move {
        let store = ctx.extension::<Arc<FencedStore>>().ok_or("no store registered")?;
        let Member(me) = ctx.extension::<Member>().ok_or("no member registered")?;
        let stall = ctx.extension::<Arc<Stall>>().ok_or("no stall registered")?;
        let (item, token) = (ctx.item, ctx.fencing_token);

        store.fence(item, token)?;
        println!("{me}: item {item} ({}) runs with fencing token {token}", source(&ctx));
        if stall.first.swap(false, Ordering::SeqCst) {
            println!("{me}: stalls mid-item for {} s, deaf to the registry", STALL.as_secs());
            let _ = stall.stalled.send(me);
            // A frozen process checks nothing: not even `ctx.cancellation`, which fires here
            // when this instance's session is lost. That is why the store must check the token.
            tokio::time::sleep(STALL).await;
            println!("{me}: wakes up and writes its result");
        }
        match store.write(item, token, format!("written by {me} with token {token}")) {
            Ok(()) => println!("{me}: item {item} written with token {token}"),
            Err(refused) => {
                println!("{me}: the store {refused}");
                return Err(refused.into());
            }
        }
        Ok(())
    })
}

/// `FAILOVER` for a re-run of a crashed instance's item, else the fire's own type (`READY`).
fn source(ctx: &ShardingContext) -> String {
    ctx.task_id.parse::<TaskId>().map_or_else(|_| "?".into(), |id| id.source.to_string())
}

struct Instance {
    scheduler: Scheduler,
    client: MemRegistry,
}

async fn start(
    server: &MemServer,
    name: &'static str,
    ip: &str,
    store: &Arc<FencedStore>,
    stall: &Arc<Stall>,
) -> Result<Instance, Box<dyn std::error::Error>> {
    let client =
        server.connect(ConnectOptions::default().namespace("fencing").session_timeout(SESSION))?;
    let scheduler = SchedulerBuilder::new(Arc::new(client.clone()))
        .ip(ip) // one process, two instances: the ip tells them apart
        .extension(Member(name))
        .extension(store.clone())
        .extension(stall.clone())
        .start()
        .await?;
    let config = JobConfig::builder("ledger")
        .cron("0/2 * * * * ?")
        .sharding_total_count(1)
        .failover(true)
        .build()?;
    scheduler.add_job(config, job()).await?;
    Ok(Instance { scheduler, client })
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = MemServer::new(Handles::real());
    let store = Arc::new(FencedStore::default());
    let (stalled_tx, mut stalled_rx) = mpsc::unbounded_channel();
    let stall = Arc::new(Stall { first: AtomicBool::new(true), stalled: stalled_tx });

    let a = start(&server, "A", "10.0.0.1", &store, &stall).await?;
    let b = start(&server, "B", "10.0.0.2", &store, &stall).await?;

    let victim = tokio::time::timeout(Duration::from_secs(30), stalled_rx.recv())
        .await
        .map_err(|_| "no fire ran the item within 30 s")?
        .ok_or("the stall channel closed")?;
    let (stalled, survivor) = if victim == "A" { (&a, &b) } else { (&b, &a) };
    // The stalled process sends no heartbeats: the registry hears nothing more from it, and
    // expires its session after the session timeout.
    server.cut(stalled.client.client_id());
    println!(
        "registry: lost contact with {victim}; its session expires in {} s",
        SESSION.as_secs()
    );

    // Long enough for the stalled owner to wake up and be refused.
    tokio::time::sleep(STALL + Duration::from_secs(1)).await;

    for (item, row) in store.rows().iter() {
        println!("store: item {item} = {:?} (fence {})", row.value, row.fence);
    }
    server.heal(stalled.client.client_id());
    let deadline = Duration::from_secs(5);
    let (first, second) =
        tokio::join!(stalled.scheduler.shutdown(deadline), survivor.scheduler.shutdown(deadline));
    first?;
    second?;
    Ok(())
}
