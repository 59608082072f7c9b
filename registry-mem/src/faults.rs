//! Fault hooks: what the simulator and the tests do to one client (or the whole server) to see
//! how the code above copes. Each is a verb on [`MemServer`] taking the client's [`ClientId`].
//!
//! All of them are synchronous and take effect at once: by the time a hook returns, the server
//! has done what it says (ephemerals deleted, events queued). Only the deadlines of a cut (the
//! client's lease deadline, the server's expiry) are in the future; each is a task spawned through the injected spawner that sleeps on tokio's
//! (virtual, under the simulator) clock, so it fires whether or not anybody calls anything.

use std::sync::Arc;
use std::time::Duration;

use shardcron_core::registry::{lease, Op, RegistryError};

use crate::client::ClientId;
use crate::server::MemServer;
use crate::session::Deadline;
use crate::tree::SessionId;
use crate::watch::Lagging;

/// One client as [`MemServer::sessions`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    pub client: ClientId,
    /// The live session, if any (none while cut off after an expiry, or after close).
    pub session: Option<u64>,
    /// Whether the client's link is up (false while cut).
    pub connected: bool,
    pub closed: bool,
    /// Operations the client has issued so far.
    pub operations: u64,
    /// Open watch subscriptions.
    pub watches: usize,
    /// Change events (created, changed, deleted) the server has queued to the client's watch
    /// subscriptions so far: the fan-out of the writes to this client. The nodes of snapshots
    /// (a subscription's opening `Resync`, a rescope's additions) are not counted.
    pub events: u64,
}

impl MemServer {
    /// Ends the client's session now, as the server does when it stops hearing from a client:
    /// its ephemerals are deleted (others see `Deleted` events, in path order), the client gets
    /// `Expired`, then a new session (`Connected`) and a `Resync` on each of its watches; at
    /// once if it is connected, else when [healed](Self::heal). No-op without a live session.
    pub fn expire_session(&self, client: ClientId) {
        tracing::debug!(%client, "fault: expire session");
        self.shared.lock().expire(client);
    }

    /// Cuts the client's link. Its operations fail with `ConnectionLoss` without being applied,
    /// its session stream gets `Suspended`, and its watch events are held back. Two deadlines
    /// start: at the client's local lease deadline (the session timeout less its lease margin,
    /// on its possibly drifting clock: see [`set_clock_drift`](Self::set_clock_drift)) it reports
    /// `Lost`; at the session timeout the server expires the session (ephemerals deleted, others
    /// see it), which the client learns only when [healed](Self::heal). No-op if already cut.
    pub fn cut(&self, client: ClientId) {
        tracing::debug!(%client, "fault: cut");
        let now_ms = self.shared.handles.clock.now_ms();
        let deadlines = self.shared.lock().cut(client, now_ms);
        self.arm_all(deadlines);
    }

    /// Restores the client's link: if its session lived and was not lost, the held watch events
    /// are delivered in order and then `Reconnected`. Otherwise the client never resumes it: a
    /// lost session still alive is closed (ephemerals deleted), and the client reports
    /// `Expired`, opens a new session (`Connected`) and resyncs every watch. No-op if not cut
    /// (or frozen: see [`thaw`](Self::thaw)).
    pub fn heal(&self, client: ClientId) {
        tracing::debug!(%client, "fault: heal");
        self.shared.lock().heal(client);
    }

    /// Freezes the client's process, as a long garbage-collection pause or a SIGSTOP would: the
    /// server hears nothing from it from now on (its session expires at the session timeout),
    /// and the client notices nothing, reports nothing and runs no timer; its operations wait
    /// (they neither fail nor apply) and its watch events are held back. No-op if the client is
    /// cut or frozen already.
    pub fn freeze(&self, client: ClientId) {
        tracing::debug!(%client, "fault: freeze");
        let now_ms = self.shared.handles.clock.now_ms();
        let deadlines = self.shared.lock().freeze(client, now_ms);
        self.arm_all(deadlines);
    }

    /// Resumes a frozen client. Its lease timer runs first: if the local deadline passed while
    /// it was frozen it reports `Suspended` and `Lost` at once, and then, as on
    /// [`heal`](Self::heal), `Expired` and a new session. Otherwise its held events are
    /// delivered and its waiting operations go on, as if nothing happened. No-op if not frozen.
    pub fn thaw(&self, client: ClientId) {
        tracing::debug!(%client, "fault: thaw");
        let now_ms = self.shared.handles.clock.now_ms();
        self.shared.lock().thaw(client, now_ms);
    }

    /// Makes the client's clock run `ppm` parts per million faster (positive) or slower than the
    /// server's, for its lease deadlines from the next cut on. Clamped to the contract's bound,
    /// [`MAX_CLOCK_DRIFT_PPM`](shardcron_core::registry::lease::MAX_CLOCK_DRIFT_PPM): within
    /// it, with a margin that covers it, `Lost` still comes before the server's expiry.
    pub fn set_clock_drift(&self, client: ClientId, ppm: i32) {
        let bound = i32::try_from(lease::MAX_CLOCK_DRIFT_PPM).unwrap_or(i32::MAX);
        let ppm = ppm.clamp(-bound, bound);
        tracing::debug!(%client, ppm, "fault: clock drift");
        if let Some(c) = self.shared.lock().clients.get_mut(&client) {
            c.drift_ppm = ppm;
        }
    }

    /// Delays each later operation of the client by `latency` before it applies. Operations of
    /// one client still apply in the order issued. A latency of at least the operation timeout
    /// makes operations fail with `Timeout` (after that timeout, without being applied).
    pub fn set_latency(&self, client: ClientId, latency: Duration) {
        tracing::debug!(%client, ?latency, "fault: latency");
        if let Some(c) = self.shared.lock().clients.get_mut(&client) {
            c.latency = latency;
        }
    }

    /// Makes the client's next `count` operations fail with `error`, without being applied. The
    /// error's op and path are replaced by those of the failing operation, so the failure reads
    /// like a real one. Successive calls queue up.
    pub fn fail_next(&self, client: ClientId, count: usize, error: RegistryError) {
        if count == 0 {
            return;
        }
        tracing::debug!(%client, count, %error, "fault: fail next operations");
        if let Some(c) = self.shared.lock().clients.get_mut(&client) {
            c.failures.push_back((count, error));
        }
    }

    /// Makes the server hold back the events of some entries of the client's watches for
    /// `lag`, as etcd does with a watch it must catch up: `which` entries, those the last
    /// change of each watch's scope added (a registering job's subtree, say: etcd catches up
    /// a watch created while writes landed) or any one of them (a watch whose stream could not
    /// take its events). Their events are dropped meanwhile, the other entries' go on; at the
    /// end each lagging watch gets its whole scope again (`Resync`), as the etcd backend reads
    /// its scope again once an entry's event comes after a later one of another entry. A watch
    /// lagging already holds these entries back too, until its lag ends (the first of the
    /// lags' ends: etcd can have several watches of a stream to catch up at once); one waiting
    /// for a resync is left as it is; a change of a watch's scope ends its lag first.
    pub fn lag_watch(&self, client: ClientId, which: Lagging, lag: Duration) {
        let lagging = self.shared.lock().lag_watches(client, which);
        tracing::debug!(%client, ?which, ?lag, lagging, "fault: watches lag");
        if lagging == 0 {
            return;
        }
        let shared = Arc::downgrade(&self.shared);
        let clock = self.shared.handles.clock.clone();
        let at_ms =
            clock.now_ms().saturating_add(i64::try_from(lag.as_millis()).unwrap_or(i64::MAX));
        self.shared.handles.spawner.spawn(Box::pin(async move {
            clock.sleep_until(at_ms).await;
            if let Some(shared) = shared.upgrade() {
                shared.lock().catch_up_watches(client);
            }
        }));
    }

    /// Restarts the registry the way a ZooKeeper ensemble restarts: every connected client sees
    /// `Suspended` then `Reconnected`, and sessions, nodes and watches survive untouched.
    pub fn restart(&self) {
        tracing::debug!("fault: registry restart");
        self.shared.lock().restart();
    }

    /// The live session of every client the server knows, by id, into `out` (cleared first):
    /// the `client` and `session` of [`sessions`](Self::sessions), for a caller that asks after
    /// every event and keeps its buffer.
    pub fn session_ids(&self, out: &mut Vec<(ClientId, Option<u64>)>) {
        let state = self.shared.lock();
        out.clear();
        out.extend(state.clients.iter().map(|(id, c)| (*id, c.session)));
    }

    /// Every client the server knows (closed ones too, until every handle is dropped), by id.
    pub fn sessions(&self) -> Vec<SessionInfo> {
        let state = self.shared.lock();
        state
            .clients
            .iter()
            .map(|(id, c)| SessionInfo {
                client: *id,
                session: c.session,
                connected: c.link_up(),
                closed: c.closed,
                operations: c.operations,
                watches: c.watches.len(),
                events: c.watches.sent,
            })
            .collect()
    }

    /// How many operations the client has issued (a measure of registry load); `None` for an
    /// unknown client.
    pub fn operations(&self, client: ClientId) -> Option<u64> {
        self.shared.lock().clients.get(&client).map(|c| c.operations)
    }

    /// The client's live session, if any.
    pub fn session_of(&self, client: ClientId) -> Option<SessionId> {
        self.shared.lock().clients.get(&client).and_then(|c| c.session)
    }

    /// Every handle of a client was dropped (see [`crate::MemRegistry`]).
    pub(crate) fn abandon(&self, client: ClientId) {
        let now_ms = self.shared.handles.clock.now_ms();
        let deadlines = self.shared.lock().abandon(client, now_ms);
        // A handle may be dropped after its runtime is gone; nothing can wait for the deadline
        // then, and nobody is left to observe the difference, so expire at once.
        if tokio::runtime::Handle::try_current().is_ok() {
            self.arm_all(deadlines);
        } else if let Some(last) = deadlines.iter().map(|d| d.at_ms).max() {
            self.shared.lock().settle(last);
        }
    }

    fn arm_all(&self, deadlines: Vec<Deadline>) {
        for deadline in deadlines {
            self.arm(deadline);
        }
    }

    /// Spawns the task that enforces a deadline even if nobody calls anything.
    fn arm(&self, deadline: Deadline) {
        let shared = Arc::downgrade(&self.shared);
        let clock = self.shared.handles.clock.clone();
        let Deadline { client, cut, kind, at_ms, mut cancel } = deadline;
        self.shared.handles.spawner.spawn(Box::pin(async move {
            loop {
                tokio::select! {
                    biased;
                    // Healed, or the deadline is moot otherwise: the cancel sender was dropped.
                    _ = &mut cancel => return,
                    () = clock.sleep_until(at_ms) => {}
                }
                let Some(shared) = shared.upgrade() else { return };
                // Taking the lock settles every due deadline. If this one is still pending,
                // the clock was moved back (skew) while we slept: sleep again.
                if !shared.lock().deadline_pending(client, cut, kind) {
                    return;
                }
            }
        }));
    }
}

/// `error` with the op and path of the operation it is injected into.
pub(crate) fn retarget(error: RegistryError, op: Op, path: &str) -> RegistryError {
    use RegistryError as E;
    let path = path.to_owned();
    match error {
        E::NoNode { .. } => E::NoNode { op, path },
        E::NodeExists { .. } => E::NodeExists { op, path },
        E::BadVersion { expected, .. } => E::BadVersion { op, path, expected },
        E::NotEmpty { .. } => E::NotEmpty { op, path },
        E::EphemeralParent { .. } => E::EphemeralParent { op, path },
        E::InvalidPath { reason, .. } => E::InvalidPath { path, reason },
        E::DataTooLarge { size, limit, .. } => E::DataTooLarge { op, path, size, limit },
        E::SessionExpired { .. } => E::SessionExpired { op, path },
        E::ConnectionLoss { .. } => E::ConnectionLoss { op, path },
        E::Timeout { after, .. } => E::Timeout { op, path, after },
        E::Auth { reason, .. } => E::Auth { op, path, reason },
        E::Closed { .. } => E::Closed { op, path },
        E::Backend { backend, message, retryable, .. } => {
            E::Backend { backend, op, path, message, retryable, source: None }
        }
        // A transaction failure (or a variant added later) is handed out as given.
        other => other,
    }
}
