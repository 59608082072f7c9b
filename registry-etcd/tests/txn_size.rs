//! Transactions against etcd's `--max-txn-ops`, on private servers with the limit set: many
//! writes under few compares commit on a server of default settings (the writes nested); one
//! with more compares than the server allows is refused whole, with an error that says how
//! large it was and what to raise the limit to; on a server with room it commits, and a
//! transaction that depends on more keys than one read `Txn` holds is read in several, at one
//! revision.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use futures::StreamExt;
use shardcron_core::registry::{
    CoordinatorRegistry, CreateMode, RegistryExt, TxnOp, WatchEvent, WatchStream,
};
use support::{connect, endpoint, PrivateServer};

/// Creates of `n` nodes under `/big`: two etcd writes each (the node and its index key).
fn creates(n: usize) -> Vec<TxnOp> {
    (0..n)
        .map(|k| TxnOp::create(format!("/big/n{k:03}"), b"x".to_vec(), CreateMode::Persistent))
        .collect()
}

async fn next(stream: &mut WatchStream) -> WatchEvent {
    tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("a watch event in time")
        .expect("the watch stream goes on")
}

/// What a job's first reshard writes, for `items` sharding items: `/job/sharding/{n}` and its
/// `instance` child per item (four etcd writes per item, one compare: the child's parent is
/// created by the same transaction), after `first` (the op that decides the form).
fn reshard_like(first: TxnOp, items: usize) -> Vec<TxnOp> {
    let mut ops = vec![first];
    for n in 0..items {
        let item = format!("/job/sharding/{n}");
        ops.push(TxnOp::create(item.clone(), Vec::new(), CreateMode::Persistent));
        ops.push(TxnOp::create(
            format!("{item}/instance"),
            b"i@-@1".to_vec(),
            CreateMode::Persistent,
        ));
    }
    ops
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_writes_under_few_compares_commit_on_a_server_of_default_limits() {
    let Some(_) = endpoint() else { return };
    let server = PrivateServer::start("txn-nested", &["--max-txn-ops", "128"]).await;
    let r = connect(&server.endpoint(), "/limits").await;
    r.ensure("/job/sharding").await.unwrap();
    let watcher = connect(&server.endpoint(), "/limits").await;
    let mut stream = watcher.watch("/job").await.unwrap();
    assert!(matches!(next(&mut stream).await, WatchEvent::Resync { .. }));

    // The one-`Txn` form: 40 items, 202 writes.
    let fenced = TxnOp::set("/job", b"leader".to_vec(), Some(0));
    r.transaction(reshard_like(fenced, 40)).await.unwrap();
    assert_eq!(r.children("/job/sharding").await.unwrap().len(), 40);
    // The engine's form (a set without a version is decided by reading first): 100 items,
    // 502 writes; 202 keys read, of which the 100 `instance` children need no compare.
    r.delete_recursive("/job/sharding").await.unwrap();
    r.ensure("/job/sharding").await.unwrap();
    let unfenced = TxnOp::set("/job", b"again".to_vec(), None);
    r.transaction(reshard_like(unfenced, 100)).await.unwrap();
    let items = r.children("/job/sharding").await.unwrap();
    assert_eq!(items.len(), 100);
    let owner = r.get("/job/sharding/99/instance").await.unwrap().map(|n| n.data);
    assert_eq!(owner, Some(b"i@-@1".to_vec()));

    // A watcher sees every write, in the order of the ops, each once: the 40 items' nodes
    // (created, then deleted with their subtree), then the 100 items' nodes.
    let mut created = Vec::new();
    while created.len() < 2 * 140 {
        match next(&mut stream).await {
            // `ensure` created it again in between.
            WatchEvent::Created { path, .. } if path == "/job/sharding" => {}
            WatchEvent::Created { path, .. } => created.push(path),
            _ => {}
        }
    }
    let expected: Vec<String> = [40, 100]
        .into_iter()
        .flat_map(|items| {
            (0..items).flat_map(|n| {
                let item = format!("/job/sharding/{n}");
                [item.clone(), format!("{item}/instance")]
            })
        })
        .collect();
    assert!(created == expected, "created, in order: {created:?}");
    r.close().await.unwrap();
    watcher.close().await.unwrap();
}

/// The start of a catch-up of `items` items by their one owner: per item, its `instance` node
/// checked, its misfire marker deleted (a node that must have no children), its `running`
/// marker created.
fn catch_up_like(items: usize) -> Vec<TxnOp> {
    let mut ops = Vec::new();
    for n in 0..items {
        ops.push(TxnOp::check(format!("/job/sharding/{n}/instance"), Some(0)));
        ops.push(TxnOp::delete(format!("/job/sharding/{n}/misfire"), Some(0)));
        let running = format!("/job/sharding/{n}/running");
        ops.push(TxnOp::create(running, b"fire".to_vec(), CreateMode::Persistent));
    }
    ops
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catch_up_of_two_hundred_items_commits_on_a_server_of_default_limits() {
    let Some(_) = endpoint() else { return };
    let server = PrivateServer::start("txn-catch-up", &["--max-txn-ops", "128"]).await;
    let r = connect(&server.endpoint(), "/limits").await;
    r.ensure("/job/sharding").await.unwrap();
    let mut setup = Vec::new();
    for n in 0..200 {
        let item = format!("/job/sharding/{n}");
        setup.push(TxnOp::create(item.clone(), Vec::new(), CreateMode::Persistent));
        setup.push(TxnOp::create(
            format!("{item}/instance"),
            b"i@-@1".to_vec(),
            CreateMode::Persistent,
        ));
        setup.push(TxnOp::create(format!("{item}/misfire"), b"1".to_vec(), CreateMode::Persistent));
    }
    // 600 creates, 1,800 etcd writes: the items' nodes are read absent under a parent read
    // absent, or share one guard.
    r.transaction(setup).await.unwrap();
    // 400 keys read present, 200 `running` markers read absent and 200 markers that must have
    // no children: a compare each would be 800; `/job/sharding` is pinned instead.
    r.transaction(catch_up_like(200)).await.unwrap();
    for n in [0, 199] {
        assert!(r.get(&format!("/job/sharding/{n}/misfire")).await.unwrap().is_none());
        let running = r.get(&format!("/job/sharding/{n}/running")).await.unwrap();
        assert_eq!(running.map(|node| node.data), Some(b"fire".to_vec()));
    }
    // The same transaction again fails where the first op does, and writes nothing.
    let err = r.transaction(catch_up_like(200)).await.unwrap_err();
    assert_eq!(err.transaction_failure().map(|(i, _)| i), Some(1), "{err}");
    r.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_beyond_the_servers_limit_says_what_to_raise_it_to() {
    let Some(_) = endpoint() else { return };
    let server = PrivateServer::start("txn-default", &["--max-txn-ops", "128"]).await;
    let r = connect(&server.endpoint(), "/limits").await;
    r.ensure("/big").await.unwrap();

    // 300 creates under one parent: one transaction (the nodes read absent share one guard).
    r.transaction(creates(300)).await.unwrap();
    assert_eq!(r.children("/big").await.unwrap().len(), 300);
    // 300 checks of persistent nodes and a set: the subtree of `/big` pinned, three compares.
    let mut ops: Vec<TxnOp> =
        (0..300).map(|k| TxnOp::check(format!("/big/n{k:03}"), Some(0))).collect();
    ops.push(TxnOp::set("/big", b"pinned".to_vec(), None));
    r.transaction(ops).await.unwrap();

    // Ephemeral nodes keep a compare each (their session's expiry removes them without a
    // trace a wider guard would see): 200 of them checked, and a set, are 202 compares, more
    // than any shape holds.
    r.ensure("/eph").await.unwrap();
    let ephemeral = (0..200)
        .map(|k| TxnOp::create(format!("/eph/e{k:03}"), b"x".to_vec(), CreateMode::Ephemeral));
    r.transaction(ephemeral.collect()).await.unwrap();
    let checks = |n: usize| -> Vec<TxnOp> {
        let mut ops: Vec<TxnOp> =
            (0..n).map(|k| TxnOp::check(format!("/eph/e{k:03}"), Some(0))).collect();
        ops.push(TxnOp::set("/big", b"checked".to_vec(), None));
        ops
    };
    let err = r.transaction(checks(200)).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("202 compares and 1 writes"), "{text}");
    assert!(text.contains("--max-txn-ops of at least 202"), "{text}");
    assert!(!err.is_retryable(), "a larger limit fixes it, not a retry: {text}");
    let big = r.get("/big").await.unwrap().map(|n| n.data);
    assert_eq!(big, Some(b"pinned".to_vec()), "nothing was written");

    // Within the limit, on the same server: commits.
    r.transaction(checks(100)).await.unwrap();
    assert_eq!(r.get("/big").await.unwrap().map(|n| n.data), Some(b"checked".to_vec()));
    r.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_with_room_takes_large_transactions_read_in_several_rounds() {
    let Some(_) = endpoint() else { return };
    let server = PrivateServer::start("txn-roomy", &["--max-txn-ops", "1024"]).await;
    let r = connect(&server.endpoint(), "/limits").await;
    r.ensure("/big").await.unwrap();
    r.transaction(creates(300)).await.unwrap();
    assert_eq!(r.children("/big").await.unwrap().len(), 300);

    // 300 version checks and a set without a version (decided by the engine, which reads
    // every key first: 301 reads, more than one read `Txn` of 128 holds).
    let mut ops: Vec<TxnOp> =
        (0..300).map(|k| TxnOp::check(format!("/big/n{k:03}"), Some(0))).collect();
    ops.push(TxnOp::set("/big", b"checked".to_vec(), None));
    r.transaction(ops).await.unwrap();
    assert_eq!(r.get("/big").await.unwrap().map(|n| n.data), Some(b"checked".to_vec()));

    // One of the checks fails: reported at its index, nothing written.
    r.set("/big/n150", b"y", None).await.unwrap();
    let mut ops: Vec<TxnOp> =
        (0..300).map(|k| TxnOp::check(format!("/big/n{k:03}"), Some(0))).collect();
    ops.push(TxnOp::set("/big", b"again".to_vec(), None));
    let err = r.transaction(ops).await.unwrap_err();
    assert_eq!(err.transaction_failure().map(|(i, _)| i), Some(150), "{err}");
    assert_eq!(r.get("/big").await.unwrap().map(|n| n.data), Some(b"checked".to_vec()));
    r.close().await.unwrap();
}
