//! Transactions against etcd's `--max-txn-ops`, on private servers with the limit set: one too
//! large for the server is refused whole, with an error that says how large it was and what to
//! raise the limit to; on a server with room it commits, and a transaction that depends on
//! more keys than one read `Txn` holds is read in several, at one revision.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use shardcron_core::registry::{CoordinatorRegistry, CreateMode, RegistryExt, TxnOp};
use support::{connect, endpoint, PrivateServer};

/// Creates of `n` nodes under `/big`: two etcd writes each (the node and its index key).
fn creates(n: usize) -> Vec<TxnOp> {
    (0..n)
        .map(|k| TxnOp::create(format!("/big/n{k:03}"), b"x".to_vec(), CreateMode::Persistent))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_beyond_the_servers_limit_says_what_to_raise_it_to() {
    let Some(_) = endpoint() else { return };
    let server = PrivateServer::start("txn-default", &["--max-txn-ops", "128"]).await;
    let r = connect(&server.endpoint(), "/limits").await;
    r.ensure("/big").await.unwrap();

    let err = r.transaction(creates(100)).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("200 writes"), "{text}");
    assert!(text.contains("--max-txn-ops of at least 200"), "{text}");
    assert!(!err.is_retryable(), "a larger limit fixes it, not a retry: {text}");
    assert!(r.children("/big").await.unwrap().is_empty(), "nothing of it was written");

    // Within the limit, on the same server: commits.
    r.transaction(creates(50)).await.unwrap();
    assert_eq!(r.children("/big").await.unwrap().len(), 50);
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
