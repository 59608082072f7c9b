//! Session behaviour against a real ZooKeeper: a short link loss loses nothing, a partition
//! longer than the session timeout expires the session and the client recovers on a new one,
//! a server restart within the session timeout keeps the session, and a client paused past its
//! lease deadline uses nothing of its session.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{eventually, options, server, Proxy};
use futures::StreamExt;
use shardcron_core::registry::{
    CoordinatorRegistry, CreateMode, Node, RegistryError, RegistryExt, SessionEvent, SessionEvents,
    WatchEvent, WatchStream,
};
use shardcron_registry_zk::ZkRegistry;

const PATIENCE: Duration = Duration::from_secs(30);

async fn next_session_event(events: &mut SessionEvents) -> SessionEvent {
    tokio::time::timeout(PATIENCE, events.next())
        .await
        .expect("a session event in time")
        .expect("the session stream goes on")
}

async fn next_event(stream: &mut WatchStream) -> WatchEvent {
    tokio::time::timeout(PATIENCE, stream.next())
        .await
        .expect("a watch event in time")
        .expect("the watch stream goes on")
}

/// Reads the subtree at `root` with plain reads.
async fn read_tree(registry: &dyn CoordinatorRegistry, root: &str) -> BTreeMap<String, Node> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_owned()];
    while let Some(p) = todo.pop() {
        let Some(node) = registry.get(&p).await.unwrap() else { continue };
        out.insert(p.clone(), node);
        todo.extend(registry.child_paths(&p).await.unwrap());
    }
    out
}

/// Applies events until `done` holds for the view; returns whether a resync was among them.
async fn follow_until(
    stream: &mut WatchStream,
    view: &mut BTreeMap<String, Node>,
    done: impl Fn(&BTreeMap<String, Node>) -> bool,
) -> bool {
    let mut resynced = false;
    while !done(view) {
        let ev = next_event(stream).await;
        resynced |= matches!(ev, WatchEvent::Resync { .. });
        ev.apply_to(view);
    }
    resynced
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_link_loss_loses_nothing() {
    let Some(hosts) = server("short_link_loss_loses_nothing") else { return };
    let ns = common::namespace("short_link_loss");
    let proxy = Proxy::start(&hosts).await;
    let client = ZkRegistry::connect(options(&proxy.addr, &ns)).await.unwrap();
    let observer = ZkRegistry::connect(options(&hosts, &ns)).await.unwrap();
    let session = client.session_id();

    client.create("/live/client", b"", CreateMode::Ephemeral).await.unwrap();
    client.create("/w/x", b"1", CreateMode::Persistent).await.unwrap();
    let mut events = client.session_events();
    assert!(matches!(next_session_event(&mut events).await, SessionEvent::Connected { .. }));
    let mut stream = client.watch("/w").await.unwrap();
    let mut view = BTreeMap::new();
    next_event(&mut stream).await.apply_to(&mut view);

    proxy.pause();
    assert_eq!(next_session_event(&mut events).await, SessionEvent::Suspended);
    // While suspended, operations fail at once with a retryable error.
    let err = client.get("/w/x").await.unwrap_err();
    assert!(matches!(err, RegistryError::ConnectionLoss { .. }) && err.is_retryable(), "{err}");
    // The world moves on meanwhile; the client's ephemeral stays.
    observer.create("/w/during", b"d", CreateMode::Persistent).await.unwrap();
    observer.set("/w/x", b"2", None).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(observer.exists("/live/client").await.unwrap(), "ephemeral survives a short loss");

    proxy.resume();
    assert_eq!(next_session_event(&mut events).await, SessionEvent::Reconnected);
    assert_eq!(client.session_id(), session, "the same session");
    let resynced = follow_until(&mut stream, &mut view, |v| {
        v.contains_key("/w/during") && v.get("/w/x").is_some_and(|n| n.data == b"2")
    })
    .await;
    assert!(resynced, "a gap in the link is reported as a resync");
    assert_eq!(view, read_tree(&client, "/w").await, "the view is the registry");
    assert!(client.get("/live/client").await.unwrap().unwrap().ephemeral);
    // The watch still works after the reconnect, for others' writes and our own.
    observer.create("/w/after", b"a", CreateMode::Persistent).await.unwrap();
    client.set("/w/x", b"3", None).await.unwrap();
    follow_until(&mut stream, &mut view, |v| {
        v.contains_key("/w/after") && v.get("/w/x").is_some_and(|n| n.data == b"3")
    })
    .await;
    client.close().await.unwrap();
    observer.close().await.unwrap();
}

/// A process paused past its local lease deadline (a long GC pause, SIGSTOP) but not long
/// enough for the server to have expired the session wakes with its supervising task and its
/// callers ready at once. Whichever runs first, nothing may use the session as if alive: the
/// first read is refused, and the session is reported `Lost` (then replaced). The runtime has
/// one thread, so blocking it pauses every task of the client; the read runs first.
#[tokio::test(flavor = "current_thread")]
async fn a_client_paused_past_its_lease_deadline_uses_nothing() {
    let Some(hosts) = server("a_client_paused_past_its_lease_deadline_uses_nothing") else {
        return;
    };
    let ns = common::namespace("paused");
    let client = ZkRegistry::connect(options(&hosts, &ns)).await.unwrap();
    let mut events = client.session_events();
    assert!(matches!(next_session_event(&mut events).await, SessionEvent::Connected { .. }));
    client.create("/paused/me", b"", CreateMode::Ephemeral).await.unwrap();
    // The read renews the lease: the deadline is 3.6 s (4 s less the 10 % margin) from its
    // send, the server's expiry at least 4 s from its receipt.
    client.get("/paused/me").await.unwrap();

    std::thread::sleep(Duration::from_millis(3_800));

    let read = client.get("/paused/me").await;
    assert!(
        matches!(read, Err(RegistryError::ConnectionLoss { .. })),
        "a read after the lease deadline is refused, got {read:?}"
    );
    let mut said = Vec::new();
    while !said.contains(&SessionEvent::Lost) {
        said.push(next_session_event(&mut events).await);
    }
    while !matches!(said.last(), Some(SessionEvent::Connected { .. })) {
        said.push(next_session_event(&mut events).await);
    }
    assert_eq!(client.get("/paused/me").await.unwrap(), None, "the lost session's node is gone");
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_beyond_session_timeout_expires_then_recovers() {
    let Some(hosts) = server("partition_beyond_session_timeout_expires_then_recovers") else {
        return;
    };
    let ns = common::namespace("long_partition");
    let proxy = Proxy::start(&hosts).await;
    // The test server's tick is 200 ms: a 1 s session is granted as asked.
    let client =
        ZkRegistry::connect(options(&proxy.addr, &ns).session_timeout(Duration::from_secs(1)))
            .await
            .unwrap();
    assert_eq!(client.negotiated_session_timeout(), Some(Duration::from_secs(1)));
    let observer = ZkRegistry::connect(options(&hosts, &ns)).await.unwrap();
    let mut events = client.session_events();
    let SessionEvent::Connected { session: old } = next_session_event(&mut events).await else {
        panic!("opens with Connected")
    };
    client.create("/w/mine", b"", CreateMode::Ephemeral).await.unwrap();
    let mut stream = client.watch("/w").await.unwrap();
    let mut view = BTreeMap::new();
    next_event(&mut stream).await.apply_to(&mut view);

    let cut = Instant::now();
    proxy.pause();
    // The server expires the session on its own clock, ephemerals with it.
    eventually(Duration::from_secs(10), "the server expires the partitioned session", || async {
        !observer.exists("/w/mine").await.unwrap()
    })
    .await;
    let expired_after = cut.elapsed();
    observer.create("/w/theirs", b"", CreateMode::Persistent).await.unwrap();
    proxy.resume();

    let mut seen = Vec::new();
    let new = loop {
        match next_session_event(&mut events).await {
            SessionEvent::Connected { session } => break session,
            other => seen.push(other),
        }
    };
    assert_eq!(seen.first(), Some(&SessionEvent::Suspended), "{seen:?}");
    assert_eq!(seen.last(), Some(&SessionEvent::Expired), "{seen:?}");
    assert_ne!(new, old, "a new session");
    assert_eq!(client.session_id(), Some(new));

    let resynced = follow_until(&mut stream, &mut view, |v| {
        v.contains_key("/w/theirs") && !v.contains_key("/w/mine")
    })
    .await;
    assert!(resynced, "an expiry is reported as a resync");
    // The caller re-creates what the old session owned.
    client.create("/w/mine", b"", CreateMode::Ephemeral).await.unwrap();
    assert!(observer.exists("/w/mine").await.unwrap());
    eprintln!("session of 1 s expired on the server {expired_after:?} after the cut");
    client.close().await.unwrap();
    observer.close().await.unwrap();
}

/// A ZooKeeper server of this test's own, started and stopped with the harness script.
struct OwnServer {
    state: PathBuf,
    addr: String,
}

impl OwnServer {
    fn script() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/zookeeper.sh")
    }

    fn run(&self, command: &str, extra_env: &[(&str, &str)]) -> String {
        let out = Command::new("bash")
            .arg(Self::script())
            .arg(command)
            .arg(&self.state)
            .envs(extra_env.iter().copied())
            .output()
            .unwrap_or_else(|e| panic!("run zookeeper.sh {command}: {e}"));
        assert!(
            out.status.success(),
            "zookeeper.sh {command} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Starts a server that grants sessions up to 20 s, so a restart fits in one.
    fn start(name: &str) -> OwnServer {
        let state = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        let mut server = OwnServer { state, addr: String::new() };
        let out = server.run("start", &[("ZK_MAX_SESSION_TIMEOUT_MS", "20000")]);
        server.addr = out
            .lines()
            .find_map(|l| l.strip_prefix("SHARDCRON_ZK="))
            .expect("start prints SHARDCRON_ZK=...")
            .to_owned();
        server
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        let _ = Command::new("bash").arg(Self::script()).arg("stop").arg(&self.state).status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_restart_within_session_timeout_keeps_the_session() {
    if server("server_restart_within_session_timeout_keeps_the_session").is_none() {
        return;
    }
    let own = OwnServer::start("shardcron-zk-restart");
    let ns = "/restart";
    let client =
        ZkRegistry::connect(options(&own.addr, ns).session_timeout(Duration::from_secs(15)))
            .await
            .unwrap();
    let session = client.session_id();
    client.create("/w/eph", b"e", CreateMode::Ephemeral).await.unwrap();
    client.create("/w/per", b"p", CreateMode::Persistent).await.unwrap();
    let mut events = client.session_events();
    next_session_event(&mut events).await;
    let mut stream = client.watch("/w").await.unwrap();
    let mut view = BTreeMap::new();
    next_event(&mut stream).await.apply_to(&mut view);

    let started = Instant::now();
    own.run("restart", &[("ZK_MAX_SESSION_TIMEOUT_MS", "20000")]);
    let restarted_in = started.elapsed();
    assert_eq!(next_session_event(&mut events).await, SessionEvent::Suspended);
    assert_eq!(next_session_event(&mut events).await, SessionEvent::Reconnected);
    assert_eq!(client.session_id(), session, "the session survived the restart");
    let node = client.get("/w/eph").await.unwrap().expect("the ephemeral survived");
    assert!(node.ephemeral);
    client.set("/w/per", b"after", None).await.unwrap();
    let resynced = follow_until(&mut stream, &mut view, |v| {
        v.get("/w/per").is_some_and(|n| n.data == b"after")
    })
    .await;
    assert!(resynced, "a reconnect is reported as a resync");
    assert_eq!(view, read_tree(&client, "/w").await);
    // Events flow again after the reconnect.
    let other = ZkRegistry::connect(options(&own.addr, ns)).await.unwrap();
    other.create("/w/other", b"o", CreateMode::Persistent).await.unwrap();
    follow_until(&mut stream, &mut view, |v| v.contains_key("/w/other")).await;
    other.close().await.unwrap();
    eprintln!("server stopped and answered again within {restarted_in:?}");
    client.close().await.unwrap();
}
