//! The fault hooks of `MemServer`, one behaviour at a time, in virtual time.

// Helpers outside `#[test]` fns are not covered by clippy.toml's allow-unwrap-in-tests.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use shardcron_core::handles::{Clock, Handles};
use shardcron_core::registry::{
    CoordinatorRegistry, CreateMode, Op, RegistryError, SessionEvent, SessionEvents, TxnOp,
    WatchEvent, WatchScope, WatchStream,
};
use shardcron_registry_mem::{ConnectOptions, Lagging, MemRegistry, MemServer};

const START_MS: i64 = 1_700_000_000_000;
const SESSION: Duration = Duration::from_secs(10);
/// When a cut-off client reports its session lost: the session timeout less the default
/// margin, a tenth of it.
const LEASE: Duration = Duration::from_secs(9);
const OP_TIMEOUT: Duration = Duration::from_secs(3);

struct Setup {
    server: MemServer,
    clock: Arc<dyn Clock>,
}

impl Setup {
    fn new() -> Self {
        let handles = Handles::simulated(START_MS, 1);
        let clock = handles.clock.clone();
        Setup { server: MemServer::new(handles), clock }
    }

    fn client(&self) -> MemRegistry {
        let options = ConnectOptions::default()
            .namespace("/t")
            .session_timeout(SESSION)
            .operation_timeout(OP_TIMEOUT);
        self.server.connect(options).unwrap()
    }

    /// Virtual milliseconds since the start.
    fn elapsed_ms(&self) -> i64 {
        self.clock.now_ms() - START_MS
    }
}

async fn next_watch(stream: &mut WatchStream) -> WatchEvent {
    tokio::time::timeout(Duration::from_secs(600), stream.next())
        .await
        .expect("a watch event in time")
        .expect("the watch stream is open")
}

async fn next_session(stream: &mut SessionEvents) -> SessionEvent {
    tokio::time::timeout(Duration::from_secs(600), stream.next())
        .await
        .expect("a session event in time")
        .expect("the session stream is open")
}

/// Nothing is delivered now (events are queued synchronously, so a poll tells). Unconstrained:
/// tokio's cooperative budget could otherwise make a poll report `Pending` with events queued.
fn nothing_pending<S: futures::Stream + Unpin>(stream: &mut S) -> bool {
    tokio::task::unconstrained(stream.next()).now_or_never().is_none()
}

fn summary(ev: &WatchEvent) -> String {
    match ev {
        WatchEvent::Resync { nodes } => {
            format!("resync {}", nodes.keys().cloned().collect::<Vec<_>>().join(","))
        }
        WatchEvent::Created { path, node } => format!("created {path} {}", node.text()),
        WatchEvent::Changed { path, node } => {
            format!("changed {path} {} v{}", node.text(), node.version)
        }
        WatchEvent::Deleted { path } => format!("deleted {path}"),
        WatchEvent::Rescoped { added, .. } => {
            format!("rescoped {}", added.keys().cloned().collect::<Vec<_>>().join(","))
        }
    }
}

async fn connected(events: &mut SessionEvents) -> u64 {
    match next_session(events).await {
        SessionEvent::Connected { session } => session,
        other => panic!("expected Connected, got {other:?}"),
    }
}

// ---------------------------------------------------------------- cut and heal

#[tokio::test(start_paused = true)]
async fn cut_client_fails_with_connection_loss_and_applies_nothing() {
    let s = Setup::new();
    let a = s.client();
    let b = s.client();
    s.server.cut(a.client_id());
    let err = a.create("/x", b"", CreateMode::Persistent).await.unwrap_err();
    assert_eq!(err, RegistryError::ConnectionLoss { op: Op::Create, path: "/x".into() });
    let err = a.get("/x").await.unwrap_err();
    assert!(matches!(err, RegistryError::ConnectionLoss { op: Op::Get, .. }), "{err}");
    assert!(!b.exists("/x").await.unwrap(), "not applied");
    s.server.heal(a.client_id());
    a.create("/x", b"", CreateMode::Persistent).await.unwrap();
    assert!(b.exists("/x").await.unwrap());
}

#[tokio::test(start_paused = true)]
async fn cut_suspends_and_heal_reconnects_with_held_events_in_order() {
    let s = Setup::new();
    let watcher = s.client();
    let writer = s.client();
    let mut session = watcher.session_events();
    let id = connected(&mut session).await;
    let mut stream = watcher.watch("/w").await.unwrap();
    assert_eq!(summary(&next_watch(&mut stream).await), "resync ");

    s.server.cut(watcher.client_id());
    assert_eq!(next_session(&mut session).await, SessionEvent::Suspended);
    writer.create("/w/a", b"1", CreateMode::Persistent).await.unwrap();
    writer.set("/w/a", b"2", None).await.unwrap();
    writer.delete("/w/a", None).await.unwrap();
    tokio::time::sleep(SESSION / 2).await;
    assert!(nothing_pending(&mut stream), "events are held while cut");

    s.server.heal(watcher.client_id());
    let mut got = Vec::new();
    for _ in 0..4 {
        got.push(summary(&next_watch(&mut stream).await));
    }
    assert_eq!(got, ["created /w ", "created /w/a 1", "changed /w/a 2 v1", "deleted /w/a"]);
    assert_eq!(next_session(&mut session).await, SessionEvent::Reconnected);
    assert_eq!(s.server.session_of(watcher.client_id()), Some(id), "same session");
    assert!(nothing_pending(&mut stream) && nothing_pending(&mut session));
}

#[tokio::test(start_paused = true)]
async fn heal_before_the_lease_deadline_keeps_the_session_and_its_ephemerals() {
    let s = Setup::new();
    let a = s.client();
    let b = s.client();
    let mut session = a.session_events();
    connected(&mut session).await;
    a.create("/e", b"", CreateMode::Ephemeral).await.unwrap();
    s.server.cut(a.client_id());
    tokio::time::sleep(LEASE - Duration::from_millis(1)).await;
    s.server.heal(a.client_id());
    assert_eq!(next_session(&mut session).await, SessionEvent::Suspended);
    assert_eq!(next_session(&mut session).await, SessionEvent::Reconnected);
    tokio::time::sleep(SESSION * 3).await;
    assert!(b.exists("/e").await.unwrap(), "the session survived the short cut");
    assert!(nothing_pending(&mut session));
    // A second cut gets fresh deadlines, not what was left of the first.
    s.server.cut(a.client_id());
    tokio::time::sleep(SESSION - Duration::from_millis(1)).await;
    assert!(b.exists("/e").await.unwrap(), "the server keeps the session its full timeout");
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert!(!b.exists("/e").await.unwrap());
}

#[tokio::test(start_paused = true)]
async fn a_cut_outlasting_the_session_timeout_is_lost_first_and_expires_at_the_deadline() {
    let s = Setup::new();
    let a = s.client();
    let observer = s.client();
    let mut session = a.session_events();
    let old = connected(&mut session).await;
    a.create("/w/e", b"", CreateMode::Ephemeral).await.unwrap();
    a.create("/w/p", b"", CreateMode::Persistent).await.unwrap();
    let mut a_watch = a.watch("/w").await.unwrap();
    next_watch(&mut a_watch).await;
    let mut seen = observer.watch("/w").await.unwrap();
    next_watch(&mut seen).await;

    let cut_at = s.elapsed_ms();
    s.server.cut(a.client_id());
    assert_eq!(next_session(&mut session).await, SessionEvent::Suspended);
    observer.set("/w/p", b"held", None).await.unwrap();
    assert_eq!(summary(&next_watch(&mut seen).await), "changed /w/p held v1");

    // Nobody calls anything: the client's lease deadline fires by itself, the session timeout
    // less the margin after the cut, while the server still holds the session.
    assert_eq!(next_session(&mut session).await, SessionEvent::Lost);
    assert_eq!(s.elapsed_ms() - cut_at, LEASE.as_millis() as i64);
    assert!(observer.exists("/w/e").await.unwrap(), "not expired on the server yet");
    // The server expires it exactly one session timeout after the cut; the cut-off client
    // hears nothing of it.
    assert_eq!(summary(&next_watch(&mut seen).await), "deleted /w/e");
    assert_eq!(s.elapsed_ms() - cut_at, SESSION.as_millis() as i64);
    assert_eq!(s.server.session_of(a.client_id()), None);
    assert!(nothing_pending(&mut session), "no expiry reaches a client that is cut off");

    // Still cut: no new session, no events; operations fail.
    tokio::time::sleep(SESSION).await;
    assert!(nothing_pending(&mut session) && nothing_pending(&mut a_watch));
    assert!(matches!(a.get("/w").await, Err(RegistryError::ConnectionLoss { .. })));

    // Heal: the client learns of the expiry, opens a new session and resyncs instead of
    // delivering the held events.
    s.server.heal(a.client_id());
    assert_eq!(next_session(&mut session).await, SessionEvent::Expired);
    let new = connected(&mut session).await;
    assert_ne!(new, old);
    assert_eq!(summary(&next_watch(&mut a_watch).await), "resync /w,/w/p");
    assert!(nothing_pending(&mut a_watch), "the held events were dropped for the resync");
    assert!(nothing_pending(&mut session));
}

#[tokio::test(start_paused = true)]
async fn a_lost_session_is_closed_on_heal_not_resumed() {
    let s = Setup::new();
    let a = s.client();
    let observer = s.client();
    let mut session = a.session_events();
    let old = connected(&mut session).await;
    a.create("/e", b"", CreateMode::Ephemeral).await.unwrap();
    let mut seen = observer.watch("/e").await.unwrap();
    next_watch(&mut seen).await;
    s.server.cut(a.client_id());
    assert_eq!(next_session(&mut session).await, SessionEvent::Suspended);
    assert_eq!(next_session(&mut session).await, SessionEvent::Lost);
    // Healed between the lease deadline and the server's expiry: the session still lives there.
    tokio::time::sleep((SESSION - LEASE) / 2).await;
    assert!(observer.exists("/e").await.unwrap());
    s.server.heal(a.client_id());
    // The client closes it rather than resume it: ephemerals deleted at once.
    assert_eq!(summary(&next_watch(&mut seen).await), "deleted /e");
    assert_eq!(next_session(&mut session).await, SessionEvent::Expired);
    assert_ne!(connected(&mut session).await, old);
    assert!(nothing_pending(&mut session), "never Reconnected after Lost");
    a.create("/e", b"", CreateMode::Ephemeral).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn clock_drift_moves_the_lease_deadline_within_the_bound() {
    for (ppm, lost_after_ms) in [(0, 9_000), (10_000, 8_910), (-10_000, 9_090), (-1_000_000, 9_090)]
    {
        let s = Setup::new();
        let a = s.client();
        let mut session = a.session_events();
        connected(&mut session).await;
        s.server.set_clock_drift(a.client_id(), ppm);
        let cut_at = s.elapsed_ms();
        s.server.cut(a.client_id());
        assert_eq!(next_session(&mut session).await, SessionEvent::Suspended);
        assert_eq!(next_session(&mut session).await, SessionEvent::Lost);
        let lost = s.elapsed_ms() - cut_at;
        assert_eq!(lost, lost_after_ms, "drift {ppm} ppm (clamped to 1 %)");
        assert!(lost < SESSION.as_millis() as i64, "still before the server's expiry");
    }
}

#[tokio::test(start_paused = true)]
async fn a_short_freeze_goes_unnoticed() {
    let s = Setup::new();
    let a = s.client();
    let observer = s.client();
    let mut session = a.session_events();
    connected(&mut session).await;
    a.create("/w/e", b"", CreateMode::Ephemeral).await.unwrap();
    let mut mine = a.watch("/w").await.unwrap();
    next_watch(&mut mine).await;
    s.server.freeze(a.client_id());
    observer.create("/w/x", b"", CreateMode::Persistent).await.unwrap();
    // The frozen client's operation neither fails nor applies until it runs again.
    let pending = {
        let a = a.clone();
        tokio::spawn(async move { a.create("/w/y", b"", CreateMode::Persistent).await })
    };
    tokio::time::sleep(LEASE - Duration::from_millis(1)).await;
    assert!(!pending.is_finished());
    assert!(!observer.exists("/w/y").await.unwrap());
    assert!(nothing_pending(&mut session) && nothing_pending(&mut mine));
    s.server.thaw(a.client_id());
    pending.await.unwrap().unwrap();
    assert_eq!(summary(&next_watch(&mut mine).await), "created /w/x ");
    assert_eq!(summary(&next_watch(&mut mine).await), "created /w/y ");
    assert!(nothing_pending(&mut session), "a freeze shorter than the lease is not reported");
    assert!(observer.exists("/w/e").await.unwrap());
}

#[tokio::test(start_paused = true)]
async fn a_freeze_past_the_session_timeout_reports_lost_first_on_thaw() {
    let s = Setup::new();
    let a = s.client();
    let observer = s.client();
    let mut session = a.session_events();
    let old = connected(&mut session).await;
    a.create("/e", b"", CreateMode::Ephemeral).await.unwrap();
    s.server.freeze(a.client_id());
    tokio::time::sleep(SESSION).await;
    assert!(!observer.exists("/e").await.unwrap(), "the server expired the silent session");
    assert!(nothing_pending(&mut session), "a frozen client reports nothing");
    s.server.thaw(a.client_id());
    assert_eq!(next_session(&mut session).await, SessionEvent::Suspended);
    assert_eq!(next_session(&mut session).await, SessionEvent::Lost);
    assert_eq!(next_session(&mut session).await, SessionEvent::Expired);
    assert_ne!(connected(&mut session).await, old);
    a.create("/e", b"", CreateMode::Ephemeral).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_session_stream_opened_while_cut_reports_the_state() {
    let s = Setup::new();
    let a = s.client();
    s.server.cut(a.client_id());
    let mut events = a.session_events();
    connected(&mut events).await;
    assert_eq!(next_session(&mut events).await, SessionEvent::Suspended);
    tokio::time::sleep(SESSION).await;
    let mut later = a.session_events();
    connected(&mut later).await;
    assert_eq!(next_session(&mut later).await, SessionEvent::Suspended);
    assert_eq!(next_session(&mut later).await, SessionEvent::Lost);
    assert!(nothing_pending(&mut later));
}

// ---------------------------------------------------------------- expiry

#[tokio::test(start_paused = true)]
async fn expiry_of_a_connected_client() {
    let s = Setup::new();
    let a = s.client();
    let observer = s.client();
    let mut session = a.session_events();
    let old = connected(&mut session).await;
    for p in ["/w/e2", "/w/e1"] {
        a.create(p, b"", CreateMode::Ephemeral).await.unwrap();
    }
    a.create("/w/p", b"", CreateMode::Persistent).await.unwrap();
    let mut mine = a.watch("/w").await.unwrap();
    next_watch(&mut mine).await;
    let mut theirs = observer.watch("/w").await.unwrap();
    next_watch(&mut theirs).await;

    s.server.expire_session(a.client_id());
    // Others see the deletions, in path order.
    assert_eq!(summary(&next_watch(&mut theirs).await), "deleted /w/e1");
    assert_eq!(summary(&next_watch(&mut theirs).await), "deleted /w/e2");
    // The client: Expired, a new session at once, and a resync of its watch.
    assert_eq!(next_session(&mut session).await, SessionEvent::Expired);
    assert_ne!(connected(&mut session).await, old);
    assert_eq!(summary(&next_watch(&mut mine).await), "resync /w,/w/p");
    assert!(nothing_pending(&mut mine) && nothing_pending(&mut theirs));
    // The new session owns new ephemerals.
    a.create("/w/e3", b"", CreateMode::Ephemeral).await.unwrap();
    assert_eq!(summary(&next_watch(&mut mine).await), "created /w/e3 ");
}

#[tokio::test(start_paused = true)]
async fn expiry_of_a_cut_client_reconnects_on_heal() {
    let s = Setup::new();
    let a = s.client();
    let observer = s.client();
    let mut session = a.session_events();
    connected(&mut session).await;
    a.create("/e", b"", CreateMode::Ephemeral).await.unwrap();
    s.server.cut(a.client_id());
    assert_eq!(next_session(&mut session).await, SessionEvent::Suspended);
    s.server.expire_session(a.client_id());
    assert!(nothing_pending(&mut session), "a client cut off does not hear of its expiry");
    assert!(!observer.exists("/e").await.unwrap());
    tokio::time::sleep(SESSION * 2).await;
    assert_eq!(next_session(&mut session).await, SessionEvent::Lost);
    assert!(nothing_pending(&mut session), "no new session while cut");
    s.server.heal(a.client_id());
    assert_eq!(next_session(&mut session).await, SessionEvent::Expired);
    connected(&mut session).await;
    a.create("/e", b"", CreateMode::Ephemeral).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_operation_in_flight_across_an_expiry_fails_with_session_expired() {
    let s = Setup::new();
    let a = s.client();
    let observer = s.client();
    s.server.set_latency(a.client_id(), Duration::from_millis(100));
    let pending = {
        let a = a.clone();
        tokio::spawn(async move { a.create("/e", b"", CreateMode::Ephemeral).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    s.server.expire_session(a.client_id());
    let err = pending.await.unwrap().unwrap_err();
    assert_eq!(err, RegistryError::SessionExpired { op: Op::Create, path: "/e".into() });
    assert!(!observer.exists("/e").await.unwrap(), "never applied to the new session");
    a.create("/e", b"", CreateMode::Ephemeral).await.unwrap();
}

// ---------------------------------------------------------------- latency

#[tokio::test(start_paused = true)]
async fn latency_delays_each_operation() {
    let s = Setup::new();
    let a = s.client();
    let b = s.client();
    s.server.set_latency(a.client_id(), Duration::from_millis(250));
    let t0 = s.elapsed_ms();
    a.create("/x", b"", CreateMode::Persistent).await.unwrap();
    assert_eq!(s.elapsed_ms() - t0, 250);
    a.get("/x").await.unwrap();
    assert_eq!(s.elapsed_ms() - t0, 500);
    let t1 = s.elapsed_ms();
    b.get("/x").await.unwrap();
    assert_eq!(s.elapsed_ms(), t1, "other clients are not delayed");
    s.server.set_latency(a.client_id(), Duration::ZERO);
    a.get("/x").await.unwrap();
    assert_eq!(s.elapsed_ms(), t1);
}

#[tokio::test(start_paused = true)]
async fn delayed_operations_apply_in_issue_order_like_a_pipe() {
    let s = Setup::new();
    let a = s.client();
    a.create("/n", b"0", CreateMode::Persistent).await.unwrap();
    s.server.set_latency(a.client_id(), Duration::from_millis(100));
    let t0 = s.elapsed_ms();
    let (set, get, set2, get2) = tokio::join!(
        a.set("/n", b"1", Some(0)),
        a.get("/n"),
        a.set("/n", b"2", Some(1)),
        a.get("/n"),
    );
    assert_eq!((set.unwrap(), set2.unwrap()), (1, 2));
    assert_eq!(get.unwrap().unwrap().data, b"1", "the read issued after the write sees it");
    assert_eq!(get2.unwrap().unwrap().data, b"2");
    assert_eq!(s.elapsed_ms() - t0, 100, "concurrent operations share one latency");
}

#[tokio::test(start_paused = true)]
async fn latency_at_the_operation_timeout_fails_with_timeout_unapplied() {
    let s = Setup::new();
    let a = s.client();
    let b = s.client();
    s.server.set_latency(a.client_id(), OP_TIMEOUT);
    let t0 = s.elapsed_ms();
    let err = a.create("/x", b"", CreateMode::Persistent).await.unwrap_err();
    assert_eq!(
        err,
        RegistryError::Timeout { op: Op::Create, path: "/x".into(), after: OP_TIMEOUT }
    );
    assert!(err.is_retryable());
    assert_eq!(s.elapsed_ms() - t0, OP_TIMEOUT.as_millis() as i64);
    assert!(!b.exists("/x").await.unwrap(), "not applied");
}

#[tokio::test(start_paused = true)]
async fn a_cut_during_the_latency_fails_the_operation() {
    let s = Setup::new();
    let a = s.client();
    let b = s.client();
    s.server.set_latency(a.client_id(), Duration::from_millis(100));
    let pending = {
        let a = a.clone();
        tokio::spawn(async move { a.create("/x", b"", CreateMode::Persistent).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    s.server.cut(a.client_id());
    let err = pending.await.unwrap().unwrap_err();
    assert!(matches!(err, RegistryError::ConnectionLoss { .. }), "{err}");
    assert!(!b.exists("/x").await.unwrap());
}

// ---------------------------------------------------------------- injected failures

#[tokio::test(start_paused = true)]
async fn fail_next_fails_exactly_k_operations_without_applying_them() {
    let s = Setup::new();
    let a = s.client();
    let b = s.client();
    let injected = RegistryError::ConnectionLoss { op: Op::Get, path: String::new() };
    s.server.fail_next(a.client_id(), 2, injected);
    let err = a.create("/x", b"", CreateMode::Persistent).await.unwrap_err();
    assert_eq!(err, RegistryError::ConnectionLoss { op: Op::Create, path: "/x".into() });
    let err = a.transaction(vec![TxnOp::create("/y", b"", CreateMode::Persistent)]).await;
    assert_eq!(
        err.unwrap_err(),
        RegistryError::ConnectionLoss { op: Op::Transaction, path: "/y".into() }
    );
    assert!(!b.exists("/x").await.unwrap() && !b.exists("/y").await.unwrap());
    a.create("/x", b"", CreateMode::Persistent).await.unwrap();

    // Successive injections queue up, each with its own error.
    s.server.fail_next(a.client_id(), 1, RegistryError::NoNode { op: Op::Get, path: "".into() });
    s.server.fail_next(
        a.client_id(),
        1,
        RegistryError::Backend {
            backend: "mem",
            op: Op::Get,
            path: String::new(),
            message: "injected".into(),
            retryable: true,
            source: None,
        },
    );
    assert!(matches!(a.get("/x").await, Err(RegistryError::NoNode { .. })));
    assert!(matches!(
        a.set("/x", b"", None).await,
        Err(RegistryError::Backend { op: Op::Set, .. })
    ));
    assert!(a.get("/x").await.unwrap().is_some());
}

// ---------------------------------------------------------------- restart

#[tokio::test(start_paused = true)]
async fn restart_suspends_and_reconnects_everyone_losing_nothing() {
    let s = Setup::new();
    let a = s.client();
    let b = s.client();
    let cut_off = s.client();
    a.create("/w/e", b"", CreateMode::Ephemeral).await.unwrap();
    let mut sa = a.session_events();
    let mut sb = b.session_events();
    let mut sc = cut_off.session_events();
    let ida = connected(&mut sa).await;
    connected(&mut sb).await;
    connected(&mut sc).await;
    s.server.cut(cut_off.client_id());
    assert_eq!(next_session(&mut sc).await, SessionEvent::Suspended);
    let mut watch = b.watch("/w").await.unwrap();
    next_watch(&mut watch).await;

    s.server.restart();
    for events in [&mut sa, &mut sb] {
        assert_eq!(next_session(events).await, SessionEvent::Suspended);
        assert_eq!(next_session(events).await, SessionEvent::Reconnected);
    }
    assert!(nothing_pending(&mut sc), "a cut client is already suspended");
    assert_eq!(s.server.session_of(a.client_id()), Some(ida));
    assert!(b.exists("/w/e").await.unwrap());
    a.set("/w/e", b"x", None).await.unwrap();
    assert_eq!(summary(&next_watch(&mut watch).await), "changed /w/e x v1", "no resync needed");
}

// ---------------------------------------------------------------- close and drop

#[tokio::test(start_paused = true)]
async fn close_ends_the_session_and_the_streams() {
    let s = Setup::new();
    let a = s.client();
    let observer = s.client();
    a.create("/e", b"", CreateMode::Ephemeral).await.unwrap();
    let mut session = a.session_events();
    connected(&mut session).await;
    let mut watch = a.watch("/").await.unwrap();
    next_watch(&mut watch).await;
    a.close().await.unwrap();
    assert!(!observer.exists("/e").await.unwrap());
    assert_eq!(next_session(&mut session).await, SessionEvent::Closed);
    assert_eq!(session.next().await, None);
    assert_eq!(watch.next().await, None);
    assert_eq!(
        a.exists("/e").await.unwrap_err(),
        RegistryError::Closed { op: Op::Exists, path: "/e".into() }
    );
    a.close().await.unwrap();
    let mut late = a.session_events();
    assert_eq!(late.next().await, Some(SessionEvent::Closed));
    assert_eq!(late.next().await, None);
    let info = s.server.sessions();
    assert!(info.iter().any(|i| i.client == a.client_id() && i.closed && i.session.is_none()));
}

#[tokio::test(start_paused = true)]
async fn close_while_cut_leaves_the_session_to_its_deadline() {
    let s = Setup::new();
    let a = s.client();
    let observer = s.client();
    a.create("/e", b"", CreateMode::Ephemeral).await.unwrap();
    s.server.cut(a.client_id());
    tokio::time::sleep(Duration::from_secs(4)).await;
    a.close().await.unwrap();
    assert!(observer.exists("/e").await.unwrap(), "the server never heard the close");
    s.server.heal(a.client_id());
    tokio::time::sleep(SESSION - Duration::from_secs(4) - Duration::from_millis(1)).await;
    assert!(observer.exists("/e").await.unwrap());
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert!(!observer.exists("/e").await.unwrap(), "expired at the deadline of the cut");
}

#[tokio::test(start_paused = true)]
async fn dropping_every_handle_is_a_crash_the_session_outlives_by_its_timeout() {
    let s = Setup::new();
    let observer = s.client();
    let a = s.client();
    let id = a.client_id();
    a.create("/e", b"", CreateMode::Ephemeral).await.unwrap();
    let mut watch = a.watch("/").await.unwrap();
    next_watch(&mut watch).await;
    let clone = a.clone();
    drop(a);
    assert!(s.server.sessions().iter().any(|i| i.client == id && !i.closed), "a clone lives");
    drop(clone);
    assert_eq!(watch.next().await, None, "the crashed client's streams end");
    tokio::time::sleep(SESSION - Duration::from_millis(1)).await;
    assert!(observer.exists("/e").await.unwrap(), "the server still holds the session");
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert!(!observer.exists("/e").await.unwrap());
    assert!(s.server.sessions().iter().all(|i| i.client != id), "the client is forgotten");
}

// ---------------------------------------------------------------- bookkeeping

#[tokio::test(start_paused = true)]
async fn sessions_and_operation_counts() {
    let s = Setup::new();
    let a = s.client();
    let b = s.client();
    a.create("/x", b"", CreateMode::Persistent).await.unwrap();
    a.get("/x").await.unwrap();
    let _w = b.watch("/").await.unwrap();
    assert!(a.get("bad").await.is_err(), "rejected locally, not counted");
    assert_eq!(s.server.operations(a.client_id()), Some(2));
    assert_eq!(s.server.operations(b.client_id()), Some(1));
    s.server.cut(b.client_id());
    let info = s.server.sessions();
    assert_eq!(info.len(), 2);
    assert!(info[0].connected && info[0].session.is_some());
    assert!(!info[1].connected && info[1].watches == 1);
    assert!(info[0].session != info[1].session);
}

#[tokio::test(start_paused = true)]
async fn events_count_the_fan_out_of_writes_to_each_client() {
    let s = Setup::new();
    let writer = s.client();
    let wide = s.client();
    let narrow = s.client();
    let _all = wide.watch("/").await.unwrap();
    let _one = narrow.watch_scope(WatchScope::node("/a")).await.unwrap();
    writer.create("/a", b"", CreateMode::Persistent).await.unwrap();
    writer.create("/b", b"", CreateMode::Persistent).await.unwrap();
    writer.set("/a", b"x", None).await.unwrap();
    writer.delete("/b", None).await.unwrap();
    let events = |c: &MemRegistry| {
        s.server.sessions().iter().find(|i| i.client == c.client_id()).map(|i| i.events)
    };
    assert_eq!(events(&writer), Some(0), "no watch, no events");
    assert_eq!(events(&wide), Some(4), "every change below the root");
    assert_eq!(events(&narrow), Some(2), "only /a's creation and change");
}
#[tokio::test(start_paused = true)]
async fn a_dropped_scope_watch_is_released() {
    let s = Setup::new();
    let a = s.client();
    let watches = |s: &Setup| s.server.sessions()[0].watches;
    let narrow = a.watch_scope(WatchScope::node("/n").with_subtree("/t")).await.unwrap();
    let wide = a.watch("/").await.unwrap();
    assert_eq!(watches(&s), 2);
    drop(wide);
    assert_eq!(watches(&s), 1, "released when dropped, before any change");
    a.create("/x", b"", CreateMode::Persistent).await.unwrap();
    assert_eq!(watches(&s), 1);
    drop(narrow);
    assert_eq!(watches(&s), 0);
}

#[tokio::test(start_paused = true)]
async fn namespaces_are_chroots() {
    let s = Setup::new();
    let root = s.server.connect(ConnectOptions::default()).unwrap();
    let plain = s.server.connect(ConnectOptions::default().namespace("demo")).unwrap();
    let slashed = s.server.connect(ConnectOptions::default().namespace("/demo")).unwrap();
    plain.create("/job/config", b"c", CreateMode::Persistent).await.unwrap();
    assert_eq!(slashed.get("/job/config").await.unwrap().unwrap().data, b"c");
    assert!(root.exists("/demo/job/config").await.unwrap());
    assert_eq!(plain.children("/").await.unwrap(), ["job"]);
    let mut w = plain.watch("/").await.unwrap();
    assert_eq!(summary(&next_watch(&mut w).await), "resync /,/job,/job/config");
    assert!(matches!(
        s.server.connect(ConnectOptions::default().namespace("a//b")),
        Err(RegistryError::InvalidPath { .. })
    ));
    let seq = plain.create("/q/n-", b"", CreateMode::EphemeralSequential).await.unwrap();
    assert_eq!(seq, "/q/n-0000000000", "sequential paths come back namespace-relative");
    assert_eq!(s.server.snapshot().keys().filter(|k| k.starts_with("/demo")).count(), 5);
}

#[tokio::test(start_paused = true)]
async fn a_lagging_watch_drops_the_events_of_the_entries_it_added_last_then_resyncs() {
    let s = Setup::new();
    let watcher = s.client();
    let writer = s.client();
    writer.create("/a/x", b"1", CreateMode::Persistent).await.unwrap();
    writer.create("/b/y", b"1", CreateMode::Persistent).await.unwrap();
    let mut stream = watcher.watch_scope(WatchScope::subtree("/a")).await.unwrap();
    let scoper = stream.scoper().unwrap();
    let mut view = std::collections::BTreeMap::new();
    let first = next_watch(&mut stream).await;
    first.apply_to(&mut view);
    assert_eq!(summary(&first), "resync /a,/a/x");
    let wider = WatchScope::subtree("/a").with_subtree("/b");
    scoper.rescope(WatchScope::subtree("/a").change_to(&wider, 1)).await.unwrap();
    let rescoped = next_watch(&mut stream).await;
    rescoped.apply_to(&mut view);
    assert_eq!(summary(&rescoped), "rescoped /b,/b/y");

    // `/b` was added last: its events are held back, `/a`'s go on.
    s.server.lag_watch(watcher.client_id(), Lagging::LastAdded, Duration::from_secs(2));
    writer.set("/b/y", b"2", None).await.unwrap();
    writer.create("/b/z", b"1", CreateMode::Persistent).await.unwrap();
    writer.delete("/b/y", None).await.unwrap();
    writer.set("/a/x", b"2", None).await.unwrap();
    let a = next_watch(&mut stream).await;
    a.apply_to(&mut view);
    assert_eq!(summary(&a), "changed /a/x 2 v1");
    assert!(nothing_pending(&mut stream), "the lagging entry's events are held back");

    // At the lag's end the scope is read again: `/b/y` gone, `/b/z` there.
    let resync = next_watch(&mut stream).await;
    assert!(s.elapsed_ms() >= 2_000, "{} ms", s.elapsed_ms());
    assert_eq!(summary(&resync), "resync /a,/a/x,/b,/b/z");
    resync.apply_to(&mut view);
    let keys: Vec<&str> = view.keys().map(String::as_str).collect();
    assert_eq!(keys, ["/a", "/a/x", "/b", "/b/z"]);
    // And its events flow again.
    writer.set("/b/z", b"2", None).await.unwrap();
    assert_eq!(summary(&next_watch(&mut stream).await), "changed /b/z 2 v1");
}

#[tokio::test(start_paused = true)]
async fn a_change_of_scope_ends_a_lag_first() {
    let s = Setup::new();
    let watcher = s.client();
    let writer = s.client();
    let mut stream = watcher.watch_scope(WatchScope::subtree("/a")).await.unwrap();
    let scoper = stream.scoper().unwrap();
    assert_eq!(summary(&next_watch(&mut stream).await), "resync ");
    s.server.lag_watch(watcher.client_id(), Lagging::LastAdded, Duration::from_secs(60));
    writer.create("/a/x", b"1", CreateMode::Persistent).await.unwrap();
    assert!(nothing_pending(&mut stream));
    let narrower = WatchScope::subtree("/a/x");
    scoper.rescope(WatchScope::subtree("/a").change_to(&narrower, 1)).await.unwrap();
    assert_eq!(summary(&next_watch(&mut stream).await), "resync /a,/a/x");
    assert_eq!(summary(&next_watch(&mut stream).await), "rescoped ");
}

#[tokio::test(start_paused = true)]
async fn a_victim_entry_of_a_watch_lags_whichever_it_is() {
    let (s, watcher, writer, mut stream) = three_entries().await;

    // Entry 4 of 3 is the second, `/b`: a subtree neither first nor added last.
    s.server.lag_watch(watcher.client_id(), Lagging::Entry(4), Duration::from_secs(1));
    writer.set("/b/y", b"2", None).await.unwrap();
    writer.set("/a/x", b"2", None).await.unwrap();
    writer.set("/c", b"2", None).await.unwrap();
    assert_eq!(summary(&next_watch(&mut stream).await), "changed /a/x 2 v1");
    assert_eq!(summary(&next_watch(&mut stream).await), "changed /c 2 v1");
    assert!(nothing_pending(&mut stream), "the victim's events are held back");
    assert_eq!(summary(&next_watch(&mut stream).await), "resync /a,/a/x,/b,/b/y,/c");
    assert!(s.elapsed_ms() >= 1_000, "{} ms", s.elapsed_ms());

    // A node entry lags alone too.
    s.server.lag_watch(watcher.client_id(), Lagging::Entry(2), Duration::from_secs(1));
    writer.set("/c", b"3", None).await.unwrap();
    writer.set("/b/y", b"3", None).await.unwrap();
    assert_eq!(summary(&next_watch(&mut stream).await), "changed /b/y 3 v2");
    assert!(nothing_pending(&mut stream), "the node's event is held back");
    let resync = next_watch(&mut stream).await;
    assert!(matches!(&resync, WatchEvent::Resync { nodes } if nodes["/c"].data == b"3"));
}

#[tokio::test(start_paused = true)]
async fn a_second_lag_holds_back_its_entry_too_until_the_lag_ends() {
    let (s, watcher, writer, mut stream) = three_entries().await;

    // `/a` lags for 1 s, then `/c` joins it: both held back until the first lag ends.
    s.server.lag_watch(watcher.client_id(), Lagging::Entry(0), Duration::from_secs(1));
    s.server.lag_watch(watcher.client_id(), Lagging::Entry(2), Duration::from_secs(5));
    writer.set("/a/x", b"2", None).await.unwrap();
    writer.set("/c", b"2", None).await.unwrap();
    writer.set("/b/y", b"2", None).await.unwrap();
    assert_eq!(summary(&next_watch(&mut stream).await), "changed /b/y 2 v1");
    assert!(nothing_pending(&mut stream), "both lagging entries' events are held back");
    let resync = next_watch(&mut stream).await;
    assert!(s.elapsed_ms() >= 1_000 && s.elapsed_ms() < 5_000, "{} ms", s.elapsed_ms());
    assert_eq!(summary(&resync), "resync /a,/a/x,/b,/b/y,/c");
    writer.set("/c", b"3", None).await.unwrap();
    assert_eq!(summary(&next_watch(&mut stream).await), "changed /c 3 v2");
}

/// A watcher of three entries, in order the subtrees `/a` and `/b` and the node `/c` (a node
/// under each subtree), its opening snapshot taken, and a writer.
async fn three_entries() -> (Setup, MemRegistry, MemRegistry, WatchStream) {
    let s = Setup::new();
    let watcher = s.client();
    let writer = s.client();
    for path in ["/a/x", "/b/y", "/c"] {
        writer.create(path, b"1", CreateMode::Persistent).await.unwrap();
    }
    let scope = WatchScope::subtree("/a").with_subtree("/b").with_node("/c");
    let mut stream = watcher.watch_scope(scope).await.unwrap();
    assert_eq!(summary(&next_watch(&mut stream).await), "resync /a,/a/x,/b,/b/y,/c");
    (s, watcher, writer, stream)
}
