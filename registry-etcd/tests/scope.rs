//! What a scope watch costs on a real etcd, read from the server's own metrics on a private
//! server (so no other test's traffic is counted): a change outside the scope makes etcd send
//! the watching client nothing and costs it no request, and dropping the stream cancels the
//! scope's watches on the server.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::time::{Duration, Instant};

use futures::StreamExt;
use shardcron_core::registry::{
    CoordinatorRegistry, CreateMode, WatchEvent, WatchScope, WatchStream,
};
use shardcron_registry_etcd::EtcdRegistry;
use support::{connect, endpoint, PrivateServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// etcd's Prometheus metrics: every sample line as `name{labels}` → value.
async fn metrics(port: u16) -> BTreeMap<String, f64> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    stream.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").await.unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).await.unwrap();
    reply
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .filter_map(|(name, value)| Some((name.to_owned(), value.trim().parse().ok()?)))
        .collect()
}

/// The sum of the samples of metric `name` whose labels contain every one of `labels`.
fn sum(metrics: &BTreeMap<String, f64>, name: &str, labels: &[&str]) -> f64 {
    metrics
        .iter()
        .filter(|(k, _)| k.split('{').next() == Some(name))
        .filter(|(k, _)| labels.iter().all(|l| k.contains(l)))
        .map(|(_, v)| v)
        .sum()
}

/// Watch messages etcd sent (events, confirmations) and received (watch requests).
async fn watch_messages(port: u16) -> (f64, f64) {
    let m = metrics(port).await;
    let sent = sum(&m, "grpc_server_msg_sent_total", &["grpc_method=\"Watch\""]);
    let received = sum(&m, "grpc_server_msg_received_total", &["grpc_method=\"Watch\""]);
    (sent, received)
}

/// The server's count of open watches and watch streams.
async fn watchers(port: u16) -> (f64, f64) {
    let m = metrics(port).await;
    (
        sum(&m, "etcd_debugging_mvcc_watcher_total", &[]),
        sum(&m, "etcd_debugging_mvcc_watch_stream_total", &[]),
    )
}

async fn next(stream: &mut WatchStream) -> WatchEvent {
    tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("a watch event in time")
        .expect("the stream goes on")
}

fn report(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uncovered_changes_cost_the_watching_client_nothing() {
    if endpoint().is_none() {
        return;
    }
    let server = PrivateServer::start("scope-cost", &[]).await;
    let url = server.endpoint();
    let watcher = connect(&url, "/scope").await;
    let writer = connect(&url, "/scope").await;
    writer.create("/job/config", b"c", CreateMode::Persistent).await.unwrap();
    writer.create("/job/sharding/0/instance", b"a", CreateMode::Persistent).await.unwrap();
    let scope = WatchScope::subtree("/job/config").with_node("/job/sharding/0/instance");
    let mut stream = watcher.watch_scope(scope).await.unwrap();
    assert!(matches!(next(&mut stream).await, WatchEvent::Resync { .. }));
    tokio::time::sleep(Duration::from_millis(200)).await;

    let before = watch_messages(server.client_port).await;
    let rounds = 10;
    fire_writes(&writer, 0..rounds).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = watch_messages(server.client_port).await;
    report(&format!(
        "etcd scope watch: {} changes outside the scope: {} watch messages sent, {} received",
        rounds * 3,
        after.0 - before.0,
        after.1 - before.1
    ));
    assert_eq!(after.0 - before.0, 0.0, "etcd sent the watcher nothing for uncovered changes");
    assert_eq!(after.1 - before.1, 0.0, "the watcher sent no watch request");

    writer.set("/job/sharding/0/instance", b"b", None).await.unwrap();
    let ev = next(&mut stream).await;
    assert!(
        matches!(&ev, WatchEvent::Changed { path, .. } if path == "/job/sharding/0/instance"),
        "{ev:?}"
    );
    let covered = watch_messages(server.client_port).await;
    assert!(covered.0 > after.0, "a covered change is sent: {covered:?} after {after:?}");

    // For comparison, the same writes under a watch of the whole namespace.
    let wide = connect(&url, "/scope").await;
    let mut all = wide.watch("/").await.unwrap();
    assert!(matches!(next(&mut all).await, WatchEvent::Resync { .. }));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = watch_messages(server.client_port).await;
    fire_writes(&writer, rounds..2 * rounds).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = watch_messages(server.client_port).await;
    report(&format!(
        "etcd watch of /: the same {} changes: {} watch messages sent",
        rounds * 3,
        after.0 - before.0
    ));
    assert!(after.0 > before.0, "the wide watch sees them");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_stream_cancels_its_watches() {
    if endpoint().is_none() {
        return;
    }
    let server = PrivateServer::start("scope-cancel", &[]).await;
    let watcher = connect(&server.endpoint(), "/scope").await;
    let port = server.client_port;
    let base = watchers(port).await;
    // Four entries, one redundant (inside a subtree): three etcd watches on one stream.
    let scope = WatchScope::subtree("/a").with_node("/a/inside").with_subtree("/b").with_node("/c");
    let mut stream = watcher.watch_scope(scope).await.unwrap();
    assert!(matches!(next(&mut stream).await, WatchEvent::Resync { .. }));
    let open = watchers(port).await;
    report(&format!("etcd scope watch: open: {open:?} (watches, streams); before: {base:?}"));
    assert_eq!(open, (base.0 + 3.0, base.1 + 1.0), "three watches on one stream");

    drop(stream);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = watchers(port).await;
        if now == base {
            break;
        }
        assert!(Instant::now() < deadline, "the watches are still there: {now:?}, before {base:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The client goes on working.
    watcher.create("/a/x", b"", CreateMode::Persistent).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_restart_loses_no_change_of_any_entry() {
    if endpoint().is_none() {
        return;
    }
    let mut server = PrivateServer::start("scope-restart", &[]).await;
    let url = server.endpoint();
    let watcher = connect(&url, "/scope").await;
    let writer = connect(&url, "/scope").await;
    let scope = WatchScope::subtree("/w").with_node("/n").with_node("/m");
    let mut stream = watcher.watch_scope(scope.clone()).await.unwrap();
    let WatchEvent::Resync { nodes: mut view } = next(&mut stream).await else {
        panic!("opens with a resync")
    };
    writer.create("/w/before", b"1", CreateMode::Persistent).await.unwrap();
    writer.create("/n", b"1", CreateMode::Persistent).await.unwrap();

    server.stop();
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.restart().await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while writer.set("/n", b"2", None).await.is_err() {
        assert!(Instant::now() < deadline, "the writer did not get back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    writer.create("/w/after", b"3", CreateMode::Persistent).await.unwrap();
    writer.create("/m", b"4", CreateMode::Persistent).await.unwrap();
    writer.create("/outside", b"", CreateMode::Persistent).await.unwrap();

    let mut resyncs = 0;
    while !(view.contains_key("/m") && view.contains_key("/w/after")) {
        let ev = next(&mut stream).await;
        match &ev {
            WatchEvent::Resync { nodes } => {
                resyncs += 1;
                assert!(nodes.keys().all(|p| scope.covers(p)), "{nodes:?}");
            }
            other => assert!(scope.covers(other.path().unwrap_or("/")), "{other:?}"),
        }
        ev.apply_to(&mut view);
    }
    report(&format!("etcd scope watch across a server restart: {resyncs} resync(s)"));
    let mut expected = BTreeMap::new();
    for p in ["/w", "/w/before", "/w/after", "/n", "/m"] {
        expected.insert(p.to_owned(), watcher.get(p).await.unwrap().unwrap());
    }
    assert_eq!(view, expected, "the view converges to the covered nodes");
}

/// What one instance's fires write that no other instance's scope covers: a running marker made
/// and removed, and a ledger entry, per round.
async fn fire_writes(writer: &EtcdRegistry, rounds: std::ops::Range<usize>) {
    for round in rounds {
        writer.create("/job/sharding/0/running", b"", CreateMode::Ephemeral).await.unwrap();
        writer
            .create(&format!("/job/ledger/{round}"), b"{}", CreateMode::Persistent)
            .await
            .unwrap();
        writer.delete("/job/sharding/0/running", None).await.unwrap();
    }
}

/// Range requests etcd answered.
async fn range_requests(port: u16) -> f64 {
    let m = metrics(port).await;
    sum(&m, "grpc_server_handled_total", &["grpc_method=\"Range\""])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scope_of_many_jobs_is_read_in_few_requests_and_exactly() {
    if endpoint().is_none() {
        return;
    }
    let server = PrivateServer::start("scope-lanes", &[]).await;
    let url = server.endpoint();
    let writer = connect(&url, "/lanes").await;
    const JOBS: usize = 120;
    // Per job: what the scope covers (its config node, its sharding subtree), and around it
    // what it does not (a sibling, a look-alike of the config, a root whose name starts like
    // the job's and whose keys sort among the job's, the job's own root node).
    let mut expected = BTreeMap::new();
    let mut scope = WatchScope::default();
    for job in 0..JOBS {
        let root = format!("/job{job:03}");
        let covered = [format!("{root}/config"), format!("{root}/sharding/0/instance")];
        let uncovered =
            [format!("{root}/servers/a"), format!("{root}/configs"), format!("{root}-x/y")];
        let writes = covered.iter().chain(&uncovered).map(|at| {
            let writer = &writer;
            async move { writer.create(at, at.as_bytes(), CreateMode::Persistent).await.unwrap() }
        });
        futures::future::join_all(writes).await;
        for at in
            [format!("{root}/config"), format!("{root}/sharding"), format!("{root}/sharding/0")]
                .into_iter()
                .chain(covered.iter().cloned())
        {
            expected.insert(at, ());
        }
        scope = scope
            .with_node(format!("{root}/config"))
            .with_subtree(format!("{root}/sharding"))
            .with_node(format!("{root}/leader"));
    }
    let watcher = connect(&url, "/lanes").await;
    let before = range_requests(server.client_port).await;
    let mut stream = watcher.watch_scope(scope).await.unwrap();
    let WatchEvent::Resync { nodes } = next(&mut stream).await else { panic!("a resync first") };
    let requests = range_requests(server.client_port).await - before;
    report(&format!("etcd scope watch of {JOBS} jobs: read in {requests} range requests"));
    let read: Vec<&String> = nodes.keys().collect();
    let wanted: Vec<&String> = expected.keys().collect();
    assert_eq!(read, wanted, "exactly the covered nodes");
    for (at, node) in &nodes {
        if at.ends_with("/config") || at.ends_with("/instance") {
            assert_eq!(node.data, at.as_bytes(), "{at}'s data");
        }
    }
    // One request per job's subtree would be 120; the namespace's nodes are few enough per job
    // to be read as a few key intervals instead.
    assert!(requests < JOBS as f64 / 2.0, "{requests} range requests for {JOBS} jobs");
}
