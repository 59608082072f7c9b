//! What a client sends the server for its watches, counted request by request, and what the
//! server sends it: a loopback proxy between the client and a real ZooKeeper reads the request
//! header (opcode) of every packet the client sends and the watch notifications the server
//! sends back. Own writes are shown to the client's watches without reading the nodes back,
//! subscriptions of one client share one ZooKeeper watch and its reads, a change outside a
//! watch's scope costs the client nothing, and a dropped stream leaves no watch on the server.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::{namespace, options, server};
use futures::StreamExt;
use parking_lot::Mutex;
use shardcron_core::registry::{
    CoordinatorRegistry, CreateMode, TxnOp, WatchEvent, WatchScope, WatchStream,
};
use shardcron_registry_zk::ZkRegistry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// ZooKeeper opcodes this test names.
const EXISTS: i32 = 3;
const GET_DATA: i32 = 4;
const GET_CHILDREN: i32 = 8;
const GET_CHILDREN2: i32 = 12;
const REMOVE_WATCHES: i32 = 18;
const ADD_WATCH: i32 = 106;
const PING_XID: i32 = -2;
const NOTIFICATION_XID: i32 = -1;

/// ZooKeeper's watch event types, as notifications carry them.
const NODE_CREATED: i32 = 1;
const NODE_CHILDREN_CHANGED: i32 = 4;

/// Requests the client sent, by opcode (pings and the connect request left out), the paths of
/// its `getData` requests (for the failure messages), and the watch notifications the server
/// sent it (type and server path).
#[derive(Debug, Clone, Default)]
struct Counts(
    Arc<Mutex<BTreeMap<i32, u64>>>,
    Arc<Mutex<Vec<String>>>,
    Arc<Mutex<Vec<(i32, String)>>>,
);

impl Counts {
    fn take(&self) -> BTreeMap<i32, u64> {
        self.1.lock().clear();
        self.2.lock().clear();
        std::mem::take(&mut *self.0.lock())
    }

    /// The notifications received since the last `take`.
    fn notifications(&self) -> Vec<(i32, String)> {
        self.2.lock().clone()
    }

    fn total(counts: &BTreeMap<i32, u64>) -> u64 {
        counts.values().sum()
    }

    fn reads(counts: &BTreeMap<i32, u64>) -> u64 {
        [EXISTS, GET_DATA, GET_CHILDREN, GET_CHILDREN2]
            .iter()
            .map(|op| counts.get(op).copied().unwrap_or(0))
            .sum()
    }
}

/// The path of a request whose body starts with it (after the request header).
fn request_path(body: &[u8]) -> Option<&str> {
    let len = usize::try_from(i32::from_be_bytes(body.get(8..12)?.try_into().ok()?)).ok()?;
    std::str::from_utf8(body.get(12..12 + len)?).ok()
}

/// Forwards one client's connections to `upstream`, counting what the client sends.
async fn counting_proxy(upstream: String) -> (String, Counts) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let counts = Counts::default();
    let tally = counts.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = TcpStream::connect(&upstream).await else { continue };
            let (mut from_client, mut to_client) = client.into_split();
            let (mut from_server, to_server) = server.into_split();
            let heard = tally.clone();
            tokio::spawn(async move {
                let mut first = true;
                loop {
                    let mut len = [0u8; 4];
                    if from_server.read_exact(&mut len).await.is_err() {
                        return;
                    }
                    let mut body = vec![0u8; i32::from_be_bytes(len).max(0) as usize];
                    if from_server.read_exact(&mut body).await.is_err() {
                        return;
                    }
                    // The connect answer has no reply header; a notification's body (after
                    // xid, zxid, err) is the event: type, state, path.
                    if !first && body.len() >= 28 {
                        let xid = i32::from_be_bytes(body[0..4].try_into().unwrap());
                        if xid == NOTIFICATION_XID {
                            let kind = i32::from_be_bytes(body[16..20].try_into().unwrap());
                            let at = request_path(&body[16..]).unwrap_or("?").to_owned();
                            heard.2.lock().push((kind, at));
                        }
                    }
                    first = false;
                    if to_client.write_all(&len).await.is_err()
                        || to_client.write_all(&body).await.is_err()
                    {
                        return;
                    }
                }
            });
            let tally = tally.clone();
            tokio::spawn(async move {
                let mut to_server = to_server;
                let mut first = true;
                loop {
                    let mut len = [0u8; 4];
                    if from_client.read_exact(&mut len).await.is_err() {
                        return;
                    }
                    let mut body = vec![0u8; i32::from_be_bytes(len).max(0) as usize];
                    if from_client.read_exact(&mut body).await.is_err() {
                        return;
                    }
                    // The connect request has no request header.
                    if !first && body.len() >= 8 {
                        let xid = i32::from_be_bytes(body[0..4].try_into().unwrap());
                        let op = i32::from_be_bytes(body[4..8].try_into().unwrap());
                        // The session's keep-alive probe (`exists /`) renews the lease like
                        // a ping; left out like pings.
                        let probe = op == EXISTS && request_path(&body) == Some("/");
                        if xid != PING_XID && !probe {
                            *tally.0.lock().entry(op).or_default() += 1;
                            if op == GET_DATA {
                                let at = request_path(&body).unwrap_or("?").to_owned();
                                tally.1.lock().push(at);
                            }
                        }
                    }
                    first = false;
                    if to_server.write_all(&len).await.is_err()
                        || to_server.write_all(&body).await.is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    (addr, counts)
}

async fn next(stream: &mut WatchStream) -> WatchEvent {
    tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("a watch event in time")
        .expect("the stream goes on")
}

/// Every event until the stream has been quiet for a moment.
async fn drain(stream: &mut WatchStream) -> Vec<WatchEvent> {
    let mut events = Vec::new();
    while let Ok(Some(event)) =
        tokio::time::timeout(Duration::from_millis(300), stream.next()).await
    {
        events.push(event);
    }
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_writes_reach_own_watches_without_reads() {
    let Some(hosts) = server("own_writes_reach_own_watches_without_reads") else { return };
    let (addr, counts) = counting_proxy(hosts).await;
    let registry = ZkRegistry::connect(options(&addr, &namespace("requests-own"))).await.unwrap();
    registry.create("/job/sharding/0/instance", b"me", CreateMode::Persistent).await.unwrap();
    registry.create("/job/ledger", b"{}", CreateMode::Persistent).await.unwrap();
    let mut watch = registry.watch("/").await.unwrap();
    assert!(matches!(next(&mut watch).await, WatchEvent::Resync { .. }));
    counts.take();

    // A fire's start and finish, as the scheduler writes them.
    registry
        .transaction(vec![
            TxnOp::check("/job/sharding/0/instance", Some(0)),
            TxnOp::create("/job/sharding/0/running", b"me".to_vec(), CreateMode::Ephemeral),
            TxnOp::set("/job/ledger", b"{0}".to_vec(), Some(0)),
        ])
        .await
        .unwrap();
    let events = drain(&mut watch).await;
    assert!(
        events.iter().any(|e| matches!(e, WatchEvent::Created { path, node }
            if path == "/job/sharding/0/running" && node.data == b"me" && node.ephemeral)),
        "{events:?}"
    );
    assert!(
        events.iter().any(|e| matches!(e, WatchEvent::Changed { path, node }
            if path == "/job/ledger" && node.version == 1 && node.data == b"{0}")),
        "{events:?}"
    );
    registry
        .transaction(vec![
            TxnOp::delete("/job/sharding/0/running", Some(0)),
            TxnOp::set("/job/ledger", b"{}".to_vec(), Some(1)),
        ])
        .await
        .unwrap();
    // Plain writes too: a create (parents exist), a set, a delete.
    registry.create("/job/config", b"c", CreateMode::Persistent).await.unwrap();
    registry.set("/job/config", b"d", Some(0)).await.unwrap();
    registry.delete("/job/config", Some(1)).await.unwrap();
    let events = drain(&mut watch).await;
    assert_eq!(
        events,
        vec![
            WatchEvent::Deleted { path: "/job/sharding/0/running".into() },
            changed("/job/ledger", b"{}", 2),
            created_event("/job/config", b"c"),
            changed("/job/config", b"d", 1),
            WatchEvent::Deleted { path: "/job/config".into() },
        ]
    );
    let read = counts.1.lock().clone();
    let sent = counts.take();
    assert_eq!(Counts::reads(&sent), 0, "no read for the client's own writes: {sent:?} {read:?}");
    registry.close().await.unwrap();
}

fn changed(path: &str, data: &[u8], version: u64) -> WatchEvent {
    WatchEvent::Changed {
        path: path.into(),
        node: shardcron_core::registry::Node { data: data.to_vec(), version, ephemeral: false },
    }
}

fn created_event(path: &str, data: &[u8]) -> WatchEvent {
    WatchEvent::Created {
        path: path.into(),
        node: shardcron_core::registry::Node { data: data.to_vec(), version: 0, ephemeral: false },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_of_one_client_share_a_watch() {
    let Some(hosts) = server("subscriptions_of_one_client_share_a_watch") else { return };
    let (addr, counts) = counting_proxy(hosts.clone()).await;
    let ns = namespace("requests-shared");
    let registry = ZkRegistry::connect(options(&addr, &ns)).await.unwrap();
    registry.create("/job/leader/latch", b"", CreateMode::Persistent).await.unwrap();
    let mut whole = registry.watch("/").await.unwrap();
    assert!(matches!(next(&mut whole).await, WatchEvent::Resync { .. }));
    counts.take();
    // A second watch of the root and one of a subtree join the first: no second ZooKeeper
    // watch, and no listing of what the watch covers; the nodes each is shown are read again
    // (the feed keeps which state of a node it showed, not the data).
    let mut again = registry.watch("/").await.unwrap();
    let mut latch = registry.watch("/job/leader").await.unwrap();
    let WatchEvent::Resync { nodes } = next(&mut latch).await else { panic!("a resync first") };
    assert_eq!(nodes.keys().collect::<Vec<_>>(), vec!["/job/leader", "/job/leader/latch"]);
    let shown = nodes.len();
    let WatchEvent::Resync { nodes } = next(&mut again).await else { panic!("a resync first") };
    let shown = shown + nodes.len();
    let sent = counts.take();
    assert_eq!(sent.get(&ADD_WATCH), None, "no second ZooKeeper watch: {sent:?}");
    assert_eq!(sent.get(&GET_DATA), Some(&(shown as u64)), "one read per node shown: {sent:?}");
    assert_eq!(Counts::reads(&sent), shown as u64, "nothing listed: {sent:?}");

    // Another client's change is read once, and each subscription within reach sees it.
    let other = ZkRegistry::connect(options(&hosts, &ns)).await.unwrap();
    other.create("/job/leader/latch/n", b"x", CreateMode::Persistent).await.unwrap();
    for stream in [&mut whole, &mut again, &mut latch] {
        assert_eq!(next(stream).await, created_event("/job/leader/latch/n", b"x"));
    }
    other.create("/job/elsewhere", b"", CreateMode::Persistent).await.unwrap();
    assert_eq!(next(&mut whole).await, created_event("/job/elsewhere", b""));
    assert_eq!(next(&mut again).await, created_event("/job/elsewhere", b""));
    assert!(drain(&mut latch).await.is_empty(), "outside the latch's subtree");
    let read = counts.1.lock().clone();
    let sent = counts.take();
    assert_eq!(sent.get(&GET_DATA), Some(&2), "one read per change: {sent:?} {read:?}");

    // A subscription that leaves does not end the others.
    drop(whole);
    other.set("/job/elsewhere", b"y", None).await.unwrap();
    assert!(matches!(next(&mut again).await, WatchEvent::Changed { .. }));
    // A deletion that came after the read the view shows needs no read to confirm it.
    counts.take();
    other.delete("/job/elsewhere", None).await.unwrap();
    assert_eq!(next(&mut again).await, WatchEvent::Deleted { path: "/job/elsewhere".into() });
    let sent = counts.take();
    assert_eq!(Counts::reads(&sent), 0, "a deletion after the read: {sent:?}");
    other.close().await.unwrap();
    registry.close().await.unwrap();
}

/// Prints a measured figure past the test harness's capture.
fn report(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// The paths ZooKeeper holds watches on for namespace `ns` (its `wchp` command: watches by
/// path), relative to the namespace.
async fn server_watches(hosts: &str, ns: &str) -> Vec<String> {
    let mut link = TcpStream::connect(hosts).await.unwrap();
    link.write_all(b"wchp").await.unwrap();
    let mut reply = String::new();
    link.read_to_string(&mut reply).await.unwrap();
    assert!(!reply.contains("is not executed"), "wchp is not enabled on the server: {reply}");
    let mut paths: Vec<String> = reply
        .lines()
        .filter(|l| !l.starts_with(char::is_whitespace))
        .filter_map(|l| l.strip_prefix(ns))
        .map(|p| if p.is_empty() { "/".to_owned() } else { p.to_owned() })
        .filter(|p| p.starts_with('/'))
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

/// Another instance's per-fire writes: a running marker made and removed, a ledger entry.
async fn other_instance_fires(other: &ZkRegistry, rounds: std::ops::Range<usize>) -> usize {
    let mut changes = 0;
    for round in rounds {
        other.create("/job/sharding/0/running", b"", CreateMode::Ephemeral).await.unwrap();
        other.create(&format!("/job/ledger/{round}"), b"{}", CreateMode::Persistent).await.unwrap();
        other.delete("/job/sharding/0/running", None).await.unwrap();
        changes += 3;
    }
    changes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_outside_a_scope_cost_the_watching_client_nothing() {
    let Some(hosts) = server("changes_outside_a_scope_cost_the_watching_client_nothing") else {
        return;
    };
    let (addr, counts) = counting_proxy(hosts.clone()).await;
    let ns = namespace("requests-scope");
    let registry = ZkRegistry::connect(options(&addr, &ns)).await.unwrap();
    let other = ZkRegistry::connect(options(&hosts, &ns)).await.unwrap();
    other.create("/job/config", b"c", CreateMode::Persistent).await.unwrap();
    other.create("/job/sharding/0/instance", b"me", CreateMode::Persistent).await.unwrap();
    other.create("/job/ledger", b"", CreateMode::Persistent).await.unwrap();
    let scope = WatchScope::subtree("/job/config").with_node("/job/sharding/0/instance");
    let mut watch = registry.watch_scope(scope).await.unwrap();
    let WatchEvent::Resync { nodes } = next(&mut watch).await else { panic!("a resync first") };
    assert_eq!(nodes.keys().collect::<Vec<_>>(), vec!["/job/config", "/job/sharding/0/instance"]);
    let opened = counts.take();
    assert_eq!(opened.get(&ADD_WATCH), Some(&2), "a watch per entry: {opened:?}");
    assert_eq!(opened.get(&GET_DATA), Some(&2), "a read per covered node: {opened:?}");
    assert_eq!(
        opened.get(&GET_CHILDREN2).or(opened.get(&GET_CHILDREN)),
        Some(&1),
        "children listed for the subtree only: {opened:?}"
    );

    let changes = other_instance_fires(&other, 0..10).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let heard = counts.notifications();
    let sent = counts.take();
    report(&format!(
        "zookeeper scope watch: {changes} changes outside the scope: {} requests sent, {} \
         notifications received",
        Counts::total(&sent),
        heard.len()
    ));
    assert_eq!(Counts::total(&sent), 0, "no request for uncovered changes: {sent:?}");
    assert!(heard.is_empty(), "no notification for uncovered changes: {heard:?}");
    assert!(drain(&mut watch).await.is_empty());

    // A covered change: one notification, one read.
    other.set("/job/sharding/0/instance", b"other", None).await.unwrap();
    let ev = next(&mut watch).await;
    assert!(
        matches!(&ev, WatchEvent::Changed { path, node }
            if path == "/job/sharding/0/instance" && node.data == b"other"),
        "{ev:?}"
    );
    let heard = counts.notifications();
    let sent = counts.take();
    assert_eq!(heard.len(), 1, "{heard:?}");
    assert_eq!(sent.get(&GET_DATA), Some(&1), "{sent:?}");

    // The same writes under a watch of the whole namespace, for comparison.
    let mut whole = registry.watch("/").await.unwrap();
    assert!(matches!(next(&mut whole).await, WatchEvent::Resync { .. }));
    counts.take();
    let changes = other_instance_fires(&other, 10..20).await;
    let seen = events_until_quiet(&mut whole).await;
    let heard = counts.notifications();
    let sent = counts.take();
    report(&format!(
        "zookeeper watch of /: the same {changes} changes: {} requests sent ({} getData), {} \
         notifications received, {seen} events",
        Counts::total(&sent),
        sent.get(&GET_DATA).copied().unwrap_or(0),
        heard.len()
    ));
    assert!(!heard.is_empty());
    other.close().await.unwrap();
    registry.close().await.unwrap();
}

/// How many events arrive until the stream is quiet for a moment.
async fn events_until_quiet(stream: &mut WatchStream) -> usize {
    drain(stream).await.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_stream_removes_its_server_watches() {
    let Some(hosts) = server("dropping_a_stream_removes_its_server_watches") else { return };
    let (addr, counts) = counting_proxy(hosts.clone()).await;
    let ns = namespace("requests-drop");
    let registry = ZkRegistry::connect(options(&addr, &ns)).await.unwrap();
    let mut node = registry.watch_scope(WatchScope::node("/t/n")).await.unwrap();
    assert!(matches!(next(&mut node).await, WatchEvent::Resync { .. }));
    let wide = WatchScope::subtree("/a").with_node("/a/inside").with_subtree("/b");
    let mut both = registry.watch_scope(wide).await.unwrap();
    assert!(matches!(next(&mut both).await, WatchEvent::Resync { .. }));
    assert_eq!(server_watches(&hosts, &ns).await, vec!["/a", "/b", "/t/n"]);
    counts.take();

    drop(both);
    // The feed hears of it, then the client sends one removal per path.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while server_watches(&hosts, &ns).await != vec!["/t/n"] {
        assert!(std::time::Instant::now() < deadline, "{:?}", server_watches(&hosts, &ns).await);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let sent = counts.take();
    assert_eq!(sent.get(&REMOVE_WATCHES), Some(&2), "{sent:?}");

    // The remaining stream goes on.
    registry.create("/t/n", b"1", CreateMode::Persistent).await.unwrap();
    assert!(matches!(next(&mut node).await, WatchEvent::Created { .. }));
    drop(node);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !server_watches(&hosts, &ns).await.is_empty() {
        assert!(std::time::Instant::now() < deadline, "{:?}", server_watches(&hosts, &ns).await);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    registry.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_watch_mode_per_path_as_streams_come_and_go() {
    let Some(hosts) = server("one_watch_mode_per_path_as_streams_come_and_go") else { return };
    let (addr, counts) = counting_proxy(hosts.clone()).await;
    let ns = namespace("requests-modes");
    let registry = ZkRegistry::connect(options(&addr, &ns)).await.unwrap();
    let other = ZkRegistry::connect(options(&hosts, &ns)).await.unwrap();
    other.create("/t/n", b"", CreateMode::Persistent).await.unwrap();
    let mut node = registry.watch_scope(WatchScope::node("/t/n")).await.unwrap();
    assert!(matches!(next(&mut node).await, WatchEvent::Resync { .. }));
    // A subtree at the same path: the server's watch on /t/n becomes recursive.
    let mut subtree = registry.watch("/t/n").await.unwrap();
    assert!(matches!(next(&mut subtree).await, WatchEvent::Resync { .. }));
    counts.take();
    other.create("/t/n/kid", b"", CreateMode::Persistent).await.unwrap();
    assert!(matches!(next(&mut subtree).await, WatchEvent::Created { .. }));
    let heard = counts.notifications();
    assert!(heard.iter().any(|(k, p)| *k == NODE_CREATED && p.ends_with("/t/n/kid")), "{heard:?}");

    // The subtree stream goes: the watch on /t/n is a plain one again, so a child's creation
    // brings only ZooKeeper's children notice, which the node stream ignores, and no read.
    drop(subtree);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(server_watches(&hosts, &ns).await, vec!["/t/n"]);
    counts.take();
    other.create("/t/n/kid2", b"", CreateMode::Persistent).await.unwrap();
    other.set("/t/n", b"x", None).await.unwrap();
    let ev = next(&mut node).await;
    assert!(matches!(&ev, WatchEvent::Changed { path, .. } if path == "/t/n"), "{ev:?}");
    let heard = counts.notifications();
    let sent = counts.take();
    assert!(
        heard.iter().all(|(k, p)| p.ends_with("/t/n") && *k != NODE_CREATED),
        "only notices about /t/n itself: {heard:?}"
    );
    assert!(heard.iter().any(|(k, _)| *k == NODE_CHILDREN_CHANGED), "{heard:?}");
    assert_eq!(sent.get(&GET_DATA), Some(&1), "one read, for the node's change: {sent:?}");
    other.close().await.unwrap();
    registry.close().await.unwrap();
}
