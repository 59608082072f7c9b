//! Fault hooks: what the simulator and the tests do to one client (or the whole server) to see
//! how the code above copes. Each is a verb on [`MemServer`] taking the client's [`ClientId`].
//!
//! All of them are synchronous and take effect at once: by the time a hook returns, the server
//! has done what it says (ephemerals deleted, events queued). Only the session deadline of a cut
//! is in the future; it is a task spawned through the injected spawner that sleeps on tokio's
//! (virtual, under the simulator) clock, so it fires whether or not anybody calls anything.

use std::sync::Arc;
use std::time::Duration;

use shardcron_core::registry::{Op, RegistryError};

use crate::client::ClientId;
use crate::server::MemServer;
use crate::session::Deadline;
use crate::tree::SessionId;

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
    /// its session stream gets `Suspended`, and its watch events are held back. If the cut lasts
    /// the session timeout the session expires at that moment (see
    /// [`expire_session`](Self::expire_session)). No-op if already cut.
    pub fn cut(&self, client: ClientId) {
        tracing::debug!(%client, "fault: cut");
        let now_ms = self.shared.handles.clock.now_ms();
        let deadline = self.shared.lock().cut(client, now_ms);
        if let Some(deadline) = deadline {
            self.arm(deadline);
        }
    }

    /// Restores the client's link: if its session lived, the held watch events are delivered in
    /// order and then `Reconnected`; if it expired meanwhile, a new session opens (`Connected`)
    /// and every watch gets a `Resync` instead. No-op if not cut.
    pub fn heal(&self, client: ClientId) {
        tracing::debug!(%client, "fault: heal");
        self.shared.lock().heal(client);
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

    /// Restarts the registry the way a ZooKeeper ensemble restarts: every connected client sees
    /// `Suspended` then `Reconnected`, and sessions, nodes and watches survive untouched.
    pub fn restart(&self) {
        tracing::debug!("fault: registry restart");
        self.shared.lock().restart();
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
        let deadline = self.shared.lock().abandon(client, now_ms);
        let Some(deadline) = deadline else { return };
        // A handle may be dropped after its runtime is gone; nothing can wait for the deadline
        // then, and nobody is left to observe the difference, so expire at once.
        if tokio::runtime::Handle::try_current().is_ok() {
            self.arm(deadline);
        } else {
            self.shared.lock().settle(deadline.at_ms);
        }
    }

    /// Spawns the task that enforces a session deadline even if nobody calls anything.
    fn arm(&self, deadline: Deadline) {
        let shared = Arc::downgrade(&self.shared);
        let clock = self.shared.handles.clock.clone();
        let Deadline { client, cut, at_ms, mut cancel } = deadline;
        self.shared.handles.spawner.spawn(Box::pin(async move {
            loop {
                tokio::select! {
                    biased;
                    // Healed, or the session ended otherwise: the cancel sender was dropped.
                    _ = &mut cancel => return,
                    () = clock.sleep_until(at_ms) => {}
                }
                let Some(shared) = shared.upgrade() else { return };
                // Taking the lock settles every due deadline. If this one is still pending,
                // the clock was moved back (skew) while we slept: sleep again.
                if !shared.lock().deadline_pending(client, cut) {
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
            E::Backend { backend, op, path, message, retryable }
        }
        // A transaction failure (or a variant added later) is handed out as given.
        other => other,
    }
}
