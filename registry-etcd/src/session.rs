//! Sessions as etcd leases.
//!
//! A session is a lease granted with the configured TTL. Ephemeral nodes are keys attached to
//! it, so etcd deletes them (atomically, in one revision) when the lease is revoked or runs out.
//! One task per client keeps the lease alive:
//!
//! | what the task sees | reported | then |
//! |---|---|---|
//! | a keep-alive answered with TTL > 0 | (`Reconnected` if it was suspended) | next keep-alive in TTL/3 |
//! | no answer within TTL/3, or a broken stream | `Suspended` (once) | retry every [`RETRY_PAUSE`] |
//! | an answer with TTL 0, or "lease not found" | `Expired` | grant a new lease, then `Connected{new id}` |
//!
//! While the link is down the task cannot know whether etcd still holds the lease, so it stays
//! `Suspended` (like a ZooKeeper client) until etcd answers; if the outage outlasted the TTL that
//! answer is "expired". An operation that finds the lease gone pokes the task so that the expiry
//! is reported at once instead of at the next keep-alive.

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{LeaseClient, LeaseKeepAliveStream, LeaseKeeper};
use futures::StreamExt;
use parking_lot::Mutex;
use shardcron_core::registry::{SessionEvent, SessionEvents};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::sync::{watch, Notify};

use crate::error;

/// Pause between attempts while the link is down.
pub(crate) const RETRY_PAUSE: Duration = Duration::from_millis(250);

/// Where the session stands, as the task last learnt it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The lease is alive and kept alive.
    Live(i64),
    /// Keep-alives fail; the lease may or may not still exist.
    Suspended(i64),
    /// The lease is gone; a new one is being granted.
    Expired,
    Closed,
}

impl Phase {
    /// The event a new subscriber opens with.
    fn opening_event(self) -> SessionEvent {
        match self {
            Phase::Live(id) => SessionEvent::Connected { session: session_id(id) },
            Phase::Suspended(_) => SessionEvent::Suspended,
            Phase::Expired => SessionEvent::Expired,
            Phase::Closed => SessionEvent::Closed,
        }
    }
}

/// The session id reported for a lease (etcd lease ids are positive i64).
pub(crate) fn session_id(lease: i64) -> u64 {
    u64::try_from(lease).unwrap_or_default()
}

#[derive(Debug)]
struct State {
    phase: Phase,
    subscribers: Vec<UnboundedSender<SessionEvent>>,
}

/// The session state shared by a client's handle, its keep-alive task and its watch tasks.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    state: Arc<Mutex<State>>,
    /// Wakes the keep-alive task for an immediate check.
    poke: Arc<Notify>,
}

impl Session {
    pub fn new(lease: i64) -> Self {
        Session {
            state: Arc::new(Mutex::new(State {
                phase: Phase::Live(lease),
                subscribers: Vec::new(),
            })),
            poke: Arc::new(Notify::new()),
        }
    }

    /// The lease to attach ephemeral nodes to; `None` while there is no session.
    pub fn lease(&self) -> Option<i64> {
        match self.state.lock().phase {
            Phase::Live(id) | Phase::Suspended(id) => Some(id),
            Phase::Expired | Phase::Closed => None,
        }
    }

    /// A stream of session events opening with the current state.
    pub fn events(&self) -> SessionEvents {
        SessionEvents::new(Channel(self.subscribe()))
    }

    /// A raw receiver of session events opening with the current state (for watch tasks).
    pub fn subscribe(&self) -> UnboundedReceiver<SessionEvent> {
        let (tx, rx) = unbounded_channel();
        let mut state = self.state.lock();
        // Cannot fail: the receiver is right here.
        let _ = tx.send(state.phase.opening_event());
        if state.phase != Phase::Closed {
            state.subscribers.push(tx);
        }
        rx
    }

    /// Asks the keep-alive task to check the lease now (an operation found it gone).
    pub fn poke(&self) {
        self.poke.notify_one();
    }

    fn enter(&self, phase: Phase) {
        let mut state = self.state.lock();
        if state.phase == phase || state.phase == Phase::Closed {
            return;
        }
        let event = match (state.phase, phase) {
            (Phase::Suspended(old), Phase::Live(new)) if old == new => SessionEvent::Reconnected,
            (_, p) => p.opening_event(),
        };
        tracing::debug!(?event, "etcd session");
        state.phase = phase;
        state.subscribers.retain(|tx| tx.send(event).is_ok());
        if phase == Phase::Closed {
            state.subscribers.clear();
        }
    }

    /// Reports `Closed` and ends every session stream.
    pub fn close(&self) {
        self.enter(Phase::Closed);
    }

    pub fn is_closed(&self) -> bool {
        self.state.lock().phase == Phase::Closed
    }
}

/// An unbounded receiver as a stream.
struct Channel<T>(UnboundedReceiver<T>);

impl<T> futures::Stream for Channel<T> {
    type Item = T;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<T>> {
        self.0.poll_recv(cx)
    }
}

/// What ended one lease's keep-alive loop.
enum Ended {
    Expired,
    Shutdown,
}

/// The keep-alive task of one client: keeps its lease alive, reports transitions, replaces an
/// expired lease. Ends when `shutdown` fires or its sender is dropped.
pub(crate) async fn run(
    lease_client: LeaseClient,
    session: Session,
    ttl_secs: i64,
    mut lease: i64,
    mut shutdown: watch::Receiver<bool>,
) {
    let interval = Duration::from_millis(u64::try_from(ttl_secs).unwrap_or(1).max(1) * 1000 / 3);
    loop {
        match keep_alive(&lease_client, &session, lease, interval, &mut shutdown).await {
            Ended::Shutdown => return,
            Ended::Expired => session.enter(Phase::Expired),
        }
        lease = loop {
            let mut client = lease_client.clone();
            let grant = tokio::time::timeout(interval, client.grant(ttl_secs, None));
            match grant.await {
                Ok(Ok(granted)) if session.is_closed() => {
                    // Closed while granting: give the lease back rather than leave it to its TTL.
                    let _ = lease_client.clone().revoke(granted.id()).await;
                    return;
                }
                Ok(Ok(granted)) => break granted.id(),
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "etcd: cannot grant a new session lease yet")
                }
                Err(_) => tracing::warn!("etcd: lease grant timed out; retrying"),
            }
            if wait(&mut shutdown, RETRY_PAUSE, None).await {
                return;
            }
        };
        session.enter(Phase::Live(lease));
    }
}

/// Keeps `lease` alive until it is gone or the client shuts down.
async fn keep_alive(
    lease_client: &LeaseClient,
    session: &Session,
    lease: i64,
    interval: Duration,
    shutdown: &mut watch::Receiver<bool>,
) -> Ended {
    let mut stream: Option<(LeaseKeeper, LeaseKeepAliveStream)> = None;
    loop {
        let round = tokio::time::timeout(interval, one_round(lease_client, lease, &mut stream));
        let healthy = match round.await {
            Ok(Ok(ttl)) if ttl > 0 => {
                session.enter(Phase::Live(lease));
                true
            }
            Ok(Ok(_)) => return Ended::Expired,
            Ok(Err(e)) if error::is_lease_gone(&e) => return Ended::Expired,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, lease, "etcd keep-alive failed");
                false
            }
            Err(_) => {
                tracing::debug!(lease, "etcd keep-alive unanswered within TTL/3");
                false
            }
        };
        if !healthy {
            stream = None;
            session.enter(Phase::Suspended(lease));
        }
        let pause = if healthy { interval } else { RETRY_PAUSE };
        if wait(shutdown, pause, Some(&session.poke)).await {
            return Ended::Shutdown;
        }
    }
}

/// One keep-alive exchange; opens the stream first if needed. Returns the TTL etcd answered.
async fn one_round(
    lease_client: &LeaseClient,
    lease: i64,
    stream: &mut Option<(LeaseKeeper, LeaseKeepAliveStream)>,
) -> Result<i64, etcd_client::Error> {
    if let Some((keeper, responses)) = stream.as_mut() {
        keeper.keep_alive().await?;
        return match responses.next().await {
            Some(Ok(resp)) => Ok(resp.ttl()),
            Some(Err(e)) => Err(e),
            None => Err(etcd_client::Error::LeaseKeepAliveError("keep-alive stream ended".into())),
        };
    }
    // Opening the stream performs the first exchange and fails with "lease not found" for a
    // lease that is gone.
    let mut client = lease_client.clone();
    let opened = client.keep_alive(lease).await?;
    *stream = Some(opened);
    Ok(1)
}

/// Sleeps `pause` unless shut down (true) or poked (false, early).
async fn wait(
    shutdown: &mut watch::Receiver<bool>,
    pause: Duration,
    poke: Option<&Notify>,
) -> bool {
    let poked = async {
        match poke {
            Some(p) => p.notified().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        biased;
        changed = shutdown.changed() => changed.is_err() || *shutdown.borrow(),
        () = poked => false,
        () = tokio::time::sleep(pause) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn transitions_and_opening_events() {
        let s = Session::new(7);
        let mut rx = s.subscribe();
        assert_eq!(rx.recv().await, Some(SessionEvent::Connected { session: 7 }));
        s.enter(Phase::Suspended(7));
        s.enter(Phase::Suspended(7));
        s.enter(Phase::Live(7));
        s.enter(Phase::Expired);
        s.enter(Phase::Live(9));
        assert_eq!(s.lease(), Some(9));
        s.close();
        let mut seen = Vec::new();
        while let Some(ev) = rx.recv().await {
            seen.push(ev);
        }
        assert_eq!(
            seen,
            vec![
                SessionEvent::Suspended,
                SessionEvent::Reconnected,
                SessionEvent::Expired,
                SessionEvent::Connected { session: 9 },
                SessionEvent::Closed,
            ]
        );
        let mut late = s.subscribe();
        assert_eq!(late.recv().await, Some(SessionEvent::Closed));
        assert_eq!(late.recv().await, None);
        assert_eq!(s.lease(), None);
    }
}
