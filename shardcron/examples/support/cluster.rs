//! The body of the `zookeeper_cluster` and `etcd_cluster` examples: the same program on either
//! registry, which is the point: only the URL changes.
//!
//! Three instances join one namespace, each over its own registry connection, as three
//! processes (three machines) would; here they share one process so that one command shows
//! the whole cluster. They run a 6-item job every 2 seconds: the leader divides the items, one
//! instance then leaves (a graceful stop, as on a rolling deploy), and at the next fire the
//! leader divides all 6 items between the other two.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use shardcron::events::SchedulerEvent;
use shardcron::prelude::*;
use tokio::sync::mpsc;

const JOB: &str = "cluster-example";
const ITEMS: u32 = 6;
const INSTANCES: [&str; 3] = ["10.0.0.1", "10.0.0.2", "10.0.0.3"];
/// The whole run normally takes 10 to 20 seconds; past this something is wrong.
const PATIENCE: Duration = Duration::from_secs(90);

/// The registry URL: the first argument, else one built from `var` (`host:port`, as the
/// repository's `scripts/*.sh start` print it). `None` with the explanation printed.
pub fn registry_url(scheme: &str, var: &str, script: &str) -> Option<String> {
    if let Some(url) = std::env::args().nth(1) {
        return Some(url);
    }
    match std::env::var(var) {
        // A short connect timeout: an example should say quickly that nobody answers.
        Ok(address) if !address.trim().is_empty() => {
            let address = address.trim().trim_start_matches("http://");
            let timeout = if scheme == "zk" {
                "connect_timeout_ms=5000&session_timeout_ms=4000"
            } else {
                "connect_timeout_ms=5000&ttl_s=4"
            };
            Some(format!("{scheme}://{address}/shardcron-examples?{timeout}"))
        }
        _ => {
            eprintln!(
                "no server given: pass the registry URL ({scheme}://host:port/namespace) as the \
                 argument, or set {var}=host:port.\nNo server at hand? `{script} start` runs a \
                 throw-away one on a free loopback port and prints its address."
            );
            None
        }
    }
}

/// Runs the example on `url`; the exit code says whether it went as described.
pub async fn main(url: &str) -> ExitCode {
    match tokio::time::timeout(PATIENCE, run(url)).await {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(error)) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
        Err(_) => {
            eprintln!(
                "error: the cluster did not get through its steps in {} s",
                PATIENCE.as_secs()
            );
            ExitCode::FAILURE
        }
    }
}

struct Member {
    ip: &'static str,
    registry: Arc<dyn CoordinatorRegistry>,
    scheduler: Scheduler,
}

async fn run(url: &str) -> Result<(), Box<dyn std::error::Error>> {
    println!("connecting {} instances to {url}", INSTANCES.len());
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let mut members = Vec::new();
    for ip in INSTANCES {
        // The error names every host tried and what a TCP connection found there.
        let registry = shardcron::connect(url).await.map_err(|e| format!("cannot connect: {e}"))?;
        let scheduler = SchedulerBuilder::new(registry.clone()).ip(ip).start().await?;
        forward_events(ip, &scheduler, events_tx.clone());
        // overwrite: this program's config replaces one an earlier run left in the registry.
        let config = JobConfig::builder(JOB)
            .cron("0/2 * * * * ?")
            .sharding_total_count(ITEMS)
            .failover(true)
            .overwrite(true)
            .build()?;
        scheduler
            .add_job(
                config,
                Job::from_fn(|ctx| async move {
                    tokio::time::sleep(Duration::from_millis(100)).await; // the item's work
                    let _ = ctx;
                    Ok(())
                }),
            )
            .await?;
        members.push(Member { ip, registry, scheduler });
    }

    // 1. All three take part: the leader divides the 6 items among them.
    wait_for_division(&mut events, INSTANCES.len()).await?;

    // 2. One instance leaves gracefully: its running items finish, then it deregisters.
    let leaving = members.pop().ok_or("no instance to stop")?;
    println!("{} stops gracefully (as on a rolling deploy)", leaving.ip);
    leaving.scheduler.shutdown(Duration::from_secs(10)).await?;
    leaving.registry.close().await?;

    // 3. At the next fire the leader divides the items between the two that are left.
    wait_for_division(&mut events, members.len()).await?;

    for member in members {
        member.scheduler.shutdown(Duration::from_secs(10)).await?;
        member.registry.close().await?;
    }
    println!("all instances stopped");
    Ok(())
}

/// Waits until the leader divides the items among `instances` instances and every item of a
/// fire after that division has run; prints who ran what.
async fn wait_for_division(
    events: &mut mpsc::UnboundedReceiver<(&'static str, SchedulerEvent)>,
    instances: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut ran: BTreeMap<u32, &'static str> = BTreeMap::new();
    let mut divided = false;
    while let Some((ip, event)) = events.recv().await {
        match event {
            SchedulerEvent::LeaderElected { .. } => println!("{ip} is the job's leader"),
            SchedulerEvent::Sharded { assignment, .. } if assignment.len() == instances => {
                println!("the leader divided {ITEMS} items over {instances} instances:");
                for (instance, items) in &assignment {
                    println!("  {instance} gets {items:?}");
                }
                divided = true;
                ran.clear();
            }
            SchedulerEvent::ItemFinished { item, ok: true, .. } if divided => {
                ran.insert(item, ip);
            }
            _ => {}
        }
        if ran.len() == ITEMS as usize {
            let mut by_instance: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
            for (item, ip) in ran {
                by_instance.entry(ip).or_default().push(item);
            }
            println!("every item ran once: {by_instance:?}");
            return Ok(());
        }
    }
    Err("the instances' event streams ended".into())
}

/// Sends every event of `scheduler`, tagged with its `ip`, to `tx`.
fn forward_events(
    ip: &'static str,
    scheduler: &Scheduler,
    tx: mpsc::UnboundedSender<(&'static str, SchedulerEvent)>,
) {
    let mut stream = scheduler.events();
    tokio::spawn(async move {
        while let Some(event) = stream.next().await {
            // A lagging subscriber misses events; this one keeps up (a few per second).
            if let Ok(event) = event {
                if tx.send((ip, event)).is_err() {
                    return;
                }
            }
        }
    });
}
