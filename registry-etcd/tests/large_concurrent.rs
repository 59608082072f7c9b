//! Large transactions racing small ones on a real etcd of default `--max-txn-ops`: transactions
//! too large for one compare per key read are guarded by whole subtrees (`src/guards.rs`), and
//! none of their commits may lose another client's update.
//!
//! Counters `/race/c000`..`/race/c149`, each a decimal. Two clients repeatedly read every
//! counter and add one to all of them in one transaction of 150 sets, each at the version read
//! (too many compares for one each: the engine pins `/race`); two more add one to a single
//! counter at a time, and one creates and deletes a node beside them. A lost update (a commit
//! let through on a stale read) would leave a counter below the number of increments of it
//! that succeeded.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;

use shardcron_core::registry::{
    CoordinatorRegistry, CreateMode, RegistryError, RegistryExt, TxnOp,
};
use support::{connect, endpoint};
use tokio::sync::Mutex;

const COUNTERS: usize = 150;
const ROUNDS: usize = 15;

fn counter(k: usize) -> String {
    format!("/race/c{k:03}")
}

/// Whether a failed write lost a race (someone else wrote first) rather than failed.
fn lost_race(e: &RegistryError) -> bool {
    let failure = e.transaction_failure().map_or(e, |(_, source)| source);
    matches!(failure, RegistryError::BadVersion { .. } | RegistryError::NoNode { .. })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_transactions_lose_no_concurrent_update() {
    let Some(url) = endpoint() else { return };
    let namespace = format!("/large-race-{}", std::process::id());
    let setup = connect(&url, &namespace).await;
    setup.ensure("/race").await.unwrap();
    let creates =
        (0..COUNTERS).map(|k| TxnOp::create(counter(k), b"0".to_vec(), CreateMode::Persistent));
    setup.transaction(creates.collect()).await.unwrap();

    // Successful increments per counter.
    let done = Arc::new(Mutex::new(vec![0u64; COUNTERS]));
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let (r, done) = (connect(&url, &namespace).await, done.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..ROUNDS {
                let mut ops = Vec::with_capacity(COUNTERS);
                for k in 0..COUNTERS {
                    let node = r.get(&counter(k)).await.unwrap().unwrap();
                    let value: u64 = String::from_utf8(node.data).unwrap().parse().unwrap();
                    let next = (value + 1).to_string().into_bytes();
                    ops.push(TxnOp::set(counter(k), next, Some(node.version)));
                }
                match r.transaction(ops).await {
                    Ok(_) => done.lock().await.iter_mut().for_each(|n| *n += 1),
                    Err(e) if lost_race(&e) => {}
                    Err(e) => panic!("a large transaction failed: {e}"),
                }
            }
            r.close().await.unwrap();
        }));
    }
    for client in 0..2 {
        let (r, done) = (connect(&url, &namespace).await, done.clone());
        tasks.push(tokio::spawn(async move {
            for round in 0..ROUNDS * 10 {
                let k = (round * 7 + client * 31) % COUNTERS;
                let node = r.get(&counter(k)).await.unwrap().unwrap();
                let value: u64 = String::from_utf8(node.data).unwrap().parse().unwrap();
                let next = (value + 1).to_string().into_bytes();
                match r.set(&counter(k), &next, Some(node.version)).await {
                    Ok(_) => done.lock().await[k] += 1,
                    Err(e) if lost_race(&e) => {}
                    Err(e) => panic!("a small write failed: {e}"),
                }
            }
            r.close().await.unwrap();
        }));
    }
    let r = connect(&url, &namespace).await;
    tasks.push(tokio::spawn(async move {
        for _ in 0..ROUNDS * 5 {
            r.create("/race/beside", b"x", CreateMode::Persistent).await.unwrap();
            r.delete("/race/beside", None).await.unwrap();
        }
        r.close().await.unwrap();
    }));
    for task in tasks {
        task.await.unwrap();
    }

    let done = done.lock().await.clone();
    let mut large = 0;
    for (k, expected) in done.iter().enumerate() {
        let node = setup.get(&counter(k)).await.unwrap().unwrap();
        let value: u64 = String::from_utf8(node.data).unwrap().parse().unwrap();
        assert_eq!(value, *expected, "{}: every increment that succeeded, no more", counter(k));
        assert_eq!(node.version, value, "one set per increment");
        large = large.max(*expected);
    }
    assert!(large > 0, "some large transactions committed");
    let least = done.iter().min().copied().unwrap_or(0);
    println!("increments that succeeded, per counter: {least} to {large}");
    setup.delete_recursive("/race").await.unwrap();
    setup.close().await.unwrap();
}
