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
//! | no answer to any keep-alive sent in the last TTL less the lease margin | `Lost` | revoke the lease until etcd answers, then as below |
//! | an answer with TTL 0, or "lease not found" | `Expired` | grant a new lease, then `Connected{new id}` |
//!
//! The lease deadline: only keep-alives renew an etcd lease, and etcd counts the TTL from when
//! it received one, so the task records when each keep-alive that etcd answered was *sent* and
//! reports `Lost` once the granted TTL less the margin has run from the latest of them: before
//! etcd can let the lease run out. A lost lease is never renewed again: the task revokes it
//! (deleting its ephemeral nodes, if etcd still holds it) as soon as etcd answers, and only
//! then reports `Expired` and grants a new one.
//!
//! While the link is down the task cannot know whether etcd still holds the lease, so it stays
//! `Suspended` (like a ZooKeeper client) until etcd answers or the lease deadline passes. An
//! operation that finds the lease gone pokes the task so that the expiry is reported at once
//! instead of at the next keep-alive.
//!
//! **The deadline is checked by whoever runs first.** A process frozen past its deadline (a
//! long GC pause, SIGSTOP) wakes with its keep-alive timer, its watch streams and its callers'
//! operations all ready at once. etcd deleted the lease's keys when it let the lease run out,
//! which is no earlier than the local deadline, so a watch may hold the deletion of this
//! client's own nodes; delivered before `Lost`, it reads as an operator's deletion under a
//! live session. So operations and watch tasks also check the deadline
//! ([`Session::lapse_if_due`]) before they run or deliver anything: `Lost` is reported first,
//! and an operation after the deadline is refused, whichever task the runtime wakes first.

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{LeaseClient, LeaseKeepAliveStream, LeaseKeeper};
use futures::StreamExt;
use parking_lot::Mutex;
use shardcron_core::registry::lease::LeaseClock;
use shardcron_core::registry::{SessionEvent, SessionEvents};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

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
    /// The lease deadline passed unanswered; the lease is being revoked, never renewed.
    Lost(i64),
    /// The lease is gone; a new one is being granted.
    Expired,
    Closed,
}

impl Phase {
    /// The events a new subscriber opens with.
    fn opening_events(self) -> &'static [SessionEvent] {
        match self {
            // The id is not static: `Live` is handled by the caller.
            Phase::Live(_) => &[],
            Phase::Suspended(_) => &[SessionEvent::Suspended],
            Phase::Lost(_) => &[SessionEvent::Suspended, SessionEvent::Lost],
            Phase::Expired => &[SessionEvent::Expired],
            Phase::Closed => &[SessionEvent::Closed],
        }
    }

    /// The events a subscriber opening now gets.
    fn opening(self) -> Vec<SessionEvent> {
        match self {
            Phase::Live(id) => vec![SessionEvent::Connected { session: session_id(id) }],
            other => other.opening_events().to_vec(),
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
    /// The lease deadline, kept by the keep-alive task and checked by anyone.
    clock: Arc<LeaseClock>,
}

impl Session {
    /// A live session of `lease`, whose deadline `clock` keeps.
    pub fn new(lease: i64, clock: LeaseClock) -> Self {
        Session {
            state: Arc::new(Mutex::new(State {
                phase: Phase::Live(lease),
                subscribers: Vec::new(),
            })),
            poke: Arc::new(Notify::new()),
            clock: Arc::new(clock),
        }
    }

    /// Reports `Lost` now if the deadline of the lease in use has passed, before the caller
    /// runs an operation or delivers a watch event (see the module docs). The keep-alive task
    /// finds the session lost at its next look and revokes the lease.
    pub fn lapse_if_due(&self) {
        let mut state = self.state.lock();
        let (Phase::Live(lease) | Phase::Suspended(lease)) = state.phase else { return };
        let counted = self.clock.session() == Some(session_id(lease));
        if counted && self.clock.passed(Instant::now()) {
            tracing::warn!(
                lease,
                margin = ?self.clock.margin(),
                "etcd lease deadline passed before its keep-alive task could look (the process \
                 was paused?): session lost"
            );
            transition(&mut state, Phase::Lost(lease));
            drop(state);
            self.poke();
        }
    }

    /// The lease of the session, while there is one (also while it is lost and being revoked:
    /// operations are refused then, see [`Session::is_lost`]).
    pub fn lease(&self) -> Option<i64> {
        match self.state.lock().phase {
            Phase::Live(id) | Phase::Suspended(id) | Phase::Lost(id) => Some(id),
            Phase::Expired | Phase::Closed => None,
        }
    }

    /// Whether the session is lost: operations fail until the new session is there.
    pub fn is_lost(&self) -> bool {
        matches!(self.state.lock().phase, Phase::Lost(_))
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
        for event in state.phase.opening() {
            let _ = tx.send(event);
        }
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
        transition(&mut self.state.lock(), phase);
    }

    /// Reports `Closed` and ends every session stream.
    pub fn close(&self) {
        self.enter(Phase::Closed);
    }

    pub fn is_closed(&self) -> bool {
        self.state.lock().phase == Phase::Closed
    }
}

/// Moves to `phase` and tells the subscribers, if it is a move the rules allow.
fn transition(state: &mut State, phase: Phase) {
    if state.phase == phase || state.phase == Phase::Closed {
        return;
    }
    let events = match (state.phase, phase) {
        (Phase::Suspended(old), Phase::Live(new)) if old == new => {
            vec![SessionEvent::Reconnected]
        }
        // A lost lease is never renewed: nothing but its end or a close may follow.
        (Phase::Lost(_), Phase::Live(_) | Phase::Suspended(_)) => return,
        (Phase::Suspended(_), Phase::Lost(_)) => vec![SessionEvent::Lost],
        (_, p) => p.opening(),
    };
    tracing::debug!(?events, "etcd session");
    state.phase = phase;
    state.subscribers.retain(|tx| events.iter().all(|event| tx.send(*event).is_ok()));
    if phase == Phase::Closed {
        state.subscribers.clear();
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
    Lost,
    Shutdown,
}

/// The keep-alive task of one client: keeps its lease alive, reports transitions, replaces an
/// expired or lost lease. Ends when `shutdown` fires or its sender is dropped.
pub(crate) async fn run(
    lease_client: LeaseClient,
    session: Session,
    ttl_secs: i64,
    mut lease: i64,
    mut shutdown: watch::Receiver<bool>,
) {
    let interval = Duration::from_millis(u64::try_from(ttl_secs).unwrap_or(1).max(1) * 1000 / 3);
    let clock = session.clock.clone();
    loop {
        match keep_alive(&lease_client, &session, &clock, lease, interval, &mut shutdown).await {
            Ended::Shutdown => return,
            Ended::Expired => {}
            Ended::Lost => {
                // Unless an operation or a watch found the deadline passed first, and said so.
                if !session.is_lost() {
                    tracing::warn!(
                        lease,
                        margin = ?clock.margin(),
                        "no etcd keep-alive answered within the lease TTL less the margin: \
                         session lost"
                    );
                    session.enter(Phase::Lost(lease));
                }
                if revoke_lost(&lease_client, lease, interval, &mut shutdown).await {
                    return;
                }
            }
        }
        clock.stop();
        session.enter(Phase::Expired);
        lease = loop {
            let mut client = lease_client.clone();
            let sent = Instant::now();
            let grant = tokio::time::timeout(interval, client.grant(ttl_secs, None));
            match grant.await {
                Ok(Ok(granted)) if session.is_closed() => {
                    // Closed while granting: give the lease back rather than leave it to its TTL.
                    let _ = lease_client.clone().revoke(granted.id()).await;
                    return;
                }
                Ok(Ok(granted)) => {
                    clock.start(session_id(granted.id()), granted_ttl(granted.ttl()), sent);
                    break granted.id();
                }
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

/// A TTL etcd granted, in seconds, as a duration.
pub(crate) fn granted_ttl(secs: i64) -> Duration {
    Duration::from_secs(secs.max(0).unsigned_abs())
}

/// Revokes a lost lease until etcd answers (done, or the lease already gone); true when the
/// client shut down first.
async fn revoke_lost(
    lease_client: &LeaseClient,
    lease: i64,
    interval: Duration,
    shutdown: &mut watch::Receiver<bool>,
) -> bool {
    loop {
        let mut client = lease_client.clone();
        match tokio::time::timeout(interval, client.revoke(lease)).await {
            Ok(Ok(_)) => {
                tracing::info!(lease, "lost etcd lease revoked");
                return false;
            }
            Ok(Err(e)) if error::is_lease_gone(&e) => return false,
            Ok(Err(e)) => tracing::debug!(error = %e, lease, "revoking the lost lease failed"),
            Err(_) => tracing::debug!(lease, "revoking the lost lease timed out"),
        }
        if wait(shutdown, RETRY_PAUSE, None).await {
            return true;
        }
    }
}

/// Keeps `lease` alive until it is gone, lost, or the client shuts down.
async fn keep_alive(
    lease_client: &LeaseClient,
    session: &Session,
    clock: &LeaseClock,
    lease: i64,
    interval: Duration,
    shutdown: &mut watch::Receiver<bool>,
) -> Ended {
    let mut stream: Option<(LeaseKeeper, LeaseKeepAliveStream)> = None;
    loop {
        let sent = Instant::now();
        let round = tokio::time::timeout(interval, one_round(lease_client, lease, &mut stream));
        let answer = tokio::select! {
            biased;
            answer = round => answer,
            () = sleep_until(clock.deadline()) => return Ended::Lost,
        };
        let healthy = match answer {
            // Lost already (an operation or a watch saw the deadline pass first): an answer
            // now would renew a lease that the client no longer trusts.
            Ok(Ok(ttl)) if ttl > 0 && session.is_lost() => return Ended::Lost,
            Ok(Ok(ttl)) if ttl > 0 => {
                clock.contact(session_id(lease), sent);
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
        tokio::select! {
            biased;
            stop = wait(shutdown, pause, Some(&session.poke)) => if stop {
                return Ended::Shutdown;
            },
            () = sleep_until(clock.deadline()) => return Ended::Lost,
        }
        if session.is_lost() {
            return Ended::Lost;
        }
    }
}

/// Sleeps until `deadline`; forever without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
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
        let s = Session::new(7, LeaseClock::new(None));
        let mut rx = s.subscribe();
        assert_eq!(rx.recv().await, Some(SessionEvent::Connected { session: 7 }));
        s.enter(Phase::Suspended(7));
        s.enter(Phase::Suspended(7));
        s.enter(Phase::Live(7));
        s.enter(Phase::Expired);
        s.enter(Phase::Live(9));
        assert_eq!(s.lease(), Some(9));
        // Lost from a live session: Suspended first; never back to live afterwards.
        s.enter(Phase::Lost(9));
        assert!(s.is_lost());
        let mut late = s.subscribe();
        s.enter(Phase::Live(9));
        s.enter(Phase::Suspended(9));
        s.enter(Phase::Expired);
        s.enter(Phase::Live(11));
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
                SessionEvent::Suspended,
                SessionEvent::Lost,
                SessionEvent::Expired,
                SessionEvent::Connected { session: 11 },
                SessionEvent::Closed,
            ]
        );
        let mut opened_lost = Vec::new();
        while let Some(ev) = late.recv().await {
            opened_lost.push(ev);
        }
        assert_eq!(
            opened_lost[..3],
            [SessionEvent::Suspended, SessionEvent::Lost, SessionEvent::Expired],
            "a stream opened while lost starts with Suspended, Lost"
        );
        let mut late = s.subscribe();
        assert_eq!(late.recv().await, Some(SessionEvent::Closed));
        assert_eq!(late.recv().await, None);
        assert_eq!(s.lease(), None);
    }
}
