//! Faults done for real against etcd: keep-alives cut off until the lease expires, a short cut
//! the session survives, a server killed and restarted under a watch, compaction of the history
//! a watch must resume from, a process paused past its lease deadline, and many clients racing
//! on one server.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use futures::StreamExt;
use shardcron_core::registry::{
    CoordinatorRegistry, CreateMode, Node, RegistryExt, SessionEvent, SessionEvents, WatchEvent,
    WatchStream,
};
use support::{connect, endpoint, unique_namespace, PrivateServer, Proxy, TEST_TTL};

const PATIENCE: Duration = Duration::from_secs(30);

async fn next_session(events: &mut SessionEvents) -> SessionEvent {
    tokio::time::timeout(PATIENCE, events.next())
        .await
        .expect("a session event in time")
        .expect("the session stream goes on")
}

async fn wait_session(
    events: &mut SessionEvents,
    wanted: fn(&SessionEvent) -> bool,
) -> SessionEvent {
    loop {
        let ev = next_session(events).await;
        if wanted(&ev) {
            return ev;
        }
    }
}

async fn next_event(stream: &mut WatchStream) -> WatchEvent {
    tokio::time::timeout(PATIENCE, stream.next())
        .await
        .expect("a watch event in time")
        .expect("the watch stream goes on")
}

/// Reads a subtree with plain reads.
async fn read_tree(r: &dyn CoordinatorRegistry, root: &str) -> BTreeMap<String, Node> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_owned()];
    while let Some(p) = todo.pop() {
        let Some(node) = r.get(&p).await.unwrap() else { continue };
        out.insert(p.clone(), node);
        todo.extend(r.child_paths(&p).await.unwrap());
    }
    out
}

/// Waits until `path` is gone as seen by `r`; returns how long that took.
async fn until_gone(r: &dyn CoordinatorRegistry, path: &str) -> Duration {
    let start = Instant::now();
    while r.exists(path).await.unwrap() {
        assert!(start.elapsed() < PATIENCE, "{path} still there after {PATIENCE:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    start.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_expires_when_keep_alives_stop() {
    let Some(url) = endpoint() else { return };
    let ns = unique_namespace("expiry");
    let proxy = Proxy::start(support::port_of(&url)).await;
    let owner = connect(&proxy.endpoint(), &ns).await;
    let observer = connect(&url, &ns).await;
    let mut events = owner.session_events();
    let SessionEvent::Connected { session: old } = next_session(&mut events).await else {
        panic!("opens connected")
    };
    owner.create("/live/e", b"", CreateMode::Ephemeral).await.unwrap();
    assert!(observer.exists("/live/e").await.unwrap());

    proxy.cut();
    let cut = Instant::now();
    wait_session(&mut events, |e| *e == SessionEvent::Suspended).await;
    let suspended_after = cut.elapsed();
    assert!(suspended_after < TEST_TTL, "suspension noticed within the TTL: {suspended_after:?}");
    // Nobody keeps the lease alive now: etcd deletes the ephemeral when the TTL runs out.
    let gone_after = cut.elapsed() + until_gone(&observer, "/live/e").await;
    assert!(gone_after >= TEST_TTL / 2, "not before the lease could expire: {gone_after:?}");
    eprintln!("cut: suspended after {suspended_after:?}, ephemeral gone after {gone_after:?}");

    proxy.heal();
    wait_session(&mut events, |e| *e == SessionEvent::Expired).await;
    let ev = wait_session(&mut events, |e| matches!(e, SessionEvent::Connected { .. })).await;
    assert!(matches!(ev, SessionEvent::Connected { session } if session != old), "{ev:?}");
    owner.create("/live/again", b"", CreateMode::Ephemeral).await.unwrap();
    assert!(observer.get("/live/again").await.unwrap().unwrap().ephemeral);
    owner.close().await.unwrap();
    assert!(!observer.exists("/live/again").await.unwrap(), "close revokes the new lease");
}

/// A process paused past its lease deadline (a long GC pause, SIGSTOP) wakes with its
/// keep-alive timer, its watch (holding the deletion of its own node, which etcd made when the
/// lease ran out) and its callers all ready at once, in an order the runtime picks. Whichever
/// runs first, the client must not show a live session without that node: a read is refused
/// until the session is reported `Lost`, and `Lost` comes before the watch's deletion. (A
/// worker stopped for good in the multi-process SIGSTOP test when its read of its own deleted
/// instance node succeeded: an operator's deletion, by every sign it had.) The runtime has one
/// thread, so blocking it pauses every task of the client; the read is the first thing to run.
#[tokio::test(flavor = "current_thread")]
async fn a_paused_client_says_lost_before_the_deletion_of_its_nodes() {
    let Some(url) = endpoint() else { return };
    let ns = unique_namespace("paused");
    let owner = connect(&url, &ns).await;
    let mut events = owner.session_events();
    next_session(&mut events).await;
    owner.create("/paused/me", b"", CreateMode::Ephemeral).await.unwrap();
    let mut watch = owner.watch("/paused").await.unwrap();
    assert!(matches!(next_event(&mut watch).await, WatchEvent::Resync { .. }));

    std::thread::sleep(TEST_TTL + Duration::from_secs(3));

    let read = owner.get("/paused/me").await;
    assert!(read.is_err(), "a read after the lease deadline is refused, got {read:?}");
    let mut said = Vec::new();
    loop {
        // Session first: an event it has ready was sent before anything the watch has.
        let gone = tokio::select! {
            biased;
            ev = next_session(&mut events) => {
                said.push(ev);
                continue;
            }
            ev = next_event(&mut watch) => match ev {
                WatchEvent::Deleted { path } => path == "/paused/me",
                WatchEvent::Resync { nodes } => !nodes.contains_key("/paused/me"),
                _ => false,
            },
        };
        if gone {
            break;
        }
    }
    assert!(
        said.contains(&SessionEvent::Lost),
        "the deletion of the client's own node came before Lost (session events: {said:?})"
    );
    wait_session(&mut events, |e| matches!(e, SessionEvent::Connected { .. })).await;
    assert_eq!(owner.get("/paused/me").await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_cut_keeps_the_session() {
    let Some(url) = endpoint() else { return };
    let ns = unique_namespace("short-cut");
    let proxy = Proxy::start(support::port_of(&url)).await;
    let owner = connect(&proxy.endpoint(), &ns).await;
    let observer = connect(&url, &ns).await;
    let mut events = owner.session_events();
    next_session(&mut events).await;
    owner.create("/e", b"", CreateMode::Ephemeral).await.unwrap();
    proxy.cut();
    wait_session(&mut events, |e| *e == SessionEvent::Suspended).await;
    let err = owner.get("/e").await.unwrap_err();
    assert!(err.is_retryable(), "operations fail retryably while cut off: {err}");
    proxy.heal();
    let ev = next_session(&mut events).await;
    assert_eq!(ev, SessionEvent::Reconnected, "the lease outlived a cut shorter than its TTL");
    assert!(observer.exists("/e").await.unwrap(), "the ephemeral survived");
    assert!(owner.exists("/e").await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_restart_loses_nothing() {
    if endpoint().is_none() {
        return;
    }
    let mut server = PrivateServer::start("restart", &[]).await;
    let url = server.endpoint();
    let watcher = connect(&url, "/restart").await;
    let writer = connect(&url, "/restart").await;
    writer.create("/w/e", b"eph", CreateMode::Ephemeral).await.unwrap();
    let mut session = writer.session_events();
    next_session(&mut session).await;
    let mut stream = watcher.watch("/w").await.unwrap();
    let WatchEvent::Resync { nodes: mut view } = next_event(&mut stream).await else {
        panic!("opens with a resync")
    };
    writer.create("/w/before", b"1", CreateMode::Persistent).await.unwrap();

    server.stop();
    wait_session(&mut session, |e| *e == SessionEvent::Suspended).await;
    server.restart().await;
    // etcd restores leases on restart (refreshing their TTL): the session lives on.
    let ev = next_session(&mut session).await;
    assert_eq!(ev, SessionEvent::Reconnected, "the lease survived the restart");
    writer.set("/w/before", b"2", None).await.unwrap();
    writer.create("/w/after", b"3", CreateMode::Persistent).await.unwrap();

    let mut seen = Vec::new();
    while !view.contains_key("/w/after") {
        let ev = next_event(&mut stream).await;
        assert!(!matches!(ev, WatchEvent::Resync { .. }), "resumed by revision, no resync: {ev:?}");
        ev.apply_to(&mut view);
        seen.push(ev.path().unwrap_or_default().to_owned());
    }
    assert_eq!(seen, vec!["/w/before", "/w/before", "/w/after"], "every change once, in order");
    assert_eq!(view, read_tree(&watcher, "/w").await);
    assert!(view["/w/e"].ephemeral, "the ephemeral survived the restart");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_during_a_watch_resyncs() {
    if endpoint().is_none() {
        return;
    }
    // A private server: compacting the shared one would disturb other tests.
    let server = PrivateServer::start("compaction", &[]).await;
    let url = server.endpoint();
    let proxy = Proxy::start(server.client_port).await;
    let watcher = connect(&proxy.endpoint(), "/compaction").await;
    let writer = connect(&url, "/compaction").await;
    writer.create("/w/a", b"0", CreateMode::Persistent).await.unwrap();
    let mut stream = watcher.watch("/w").await.unwrap();
    assert!(matches!(next_event(&mut stream).await, WatchEvent::Resync { .. }));

    // Cut the watcher off, change things, and compact the history it would resume from.
    proxy.cut();
    for i in 1..=5 {
        writer.set("/w/a", i.to_string().as_bytes(), None).await.unwrap();
    }
    writer.create("/w/b", b"new", CreateMode::Persistent).await.unwrap();
    let mut admin = support::admin(&url).await;
    let rev = admin.get("x", None).await.unwrap().header().unwrap().revision();
    admin.compact(rev, Some(etcd_client::CompactionOptions::new().with_physical())).await.unwrap();
    proxy.heal();

    let mut view = BTreeMap::new();
    let mut resynced = false;
    while !(resynced && view.contains_key("/w/b")) {
        let ev = next_event(&mut stream).await;
        if matches!(ev, WatchEvent::Resync { .. }) {
            resynced = true;
        }
        assert!(resynced, "the lost history is replaced by a resync, not partial events: {ev:?}");
        ev.apply_to(&mut view);
    }
    assert_eq!(view, read_tree(&writer, "/w").await);
    assert_eq!(view["/w/a"].data, b"5");
    assert_eq!(view["/w/a"].version, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_clients_share_one_server() {
    let Some(url) = endpoint() else { return };
    let ns = unique_namespace("many");
    const CLIENTS: usize = 6;
    const EACH: usize = 15;
    let observer = connect(&url, &ns).await;
    observer.ensure("/members").await.unwrap();
    let mut stream = observer.watch("/members").await.unwrap();
    assert!(matches!(next_event(&mut stream).await, WatchEvent::Resync { .. }));
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        clients.push(connect(&url, &ns).await);
    }
    let mut tasks = Vec::new();
    for (i, c) in clients.iter().enumerate() {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            let mut made = Vec::new();
            for _ in 0..EACH {
                let mode = if i % 2 == 0 {
                    CreateMode::EphemeralSequential
                } else {
                    CreateMode::PersistentSequential
                };
                made.push(c.create("/members/m-", i.to_string().as_bytes(), mode).await.unwrap());
            }
            made
        }));
    }
    let mut names = BTreeSet::new();
    for t in tasks {
        names.extend(t.await.unwrap());
    }
    let expected: BTreeSet<String> =
        (0..CLIENTS * EACH).map(|n| format!("/members/m-{n:010}")).collect();
    assert_eq!(names, expected, "contiguous, unique sequence numbers under contention");
    let mut view = BTreeMap::new();
    while view.len() < CLIENTS * EACH {
        next_event(&mut stream).await.apply_to(&mut view);
    }
    // Closing the even clients removes exactly their ephemerals, seen by everyone.
    for c in clients.iter().step_by(2) {
        c.close().await.unwrap();
    }
    while view.len() > CLIENTS * EACH / 2 {
        let ev = next_event(&mut stream).await;
        assert!(matches!(ev, WatchEvent::Deleted { .. }), "{ev:?}");
        ev.apply_to(&mut view);
    }
    assert!(view.values().all(|n| !n.ephemeral));
    assert_eq!(
        view,
        read_tree(&observer, "/members")
            .await
            .into_iter()
            .filter(|(p, _)| p != "/members")
            .collect()
    );
}
