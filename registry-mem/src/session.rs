//! Clients and their sessions as the server sees them.
//!
//! A client is in one of these states (the link is the client's connection, the session the
//! server's record of it):
//!
//! | link | session | meaning | on the session stream |
//! |---|---|---|---|
//! | up | live | normal operation | `Connected{s}` |
//! | down | live | cut off; the server still holds the session until its deadline | `Suspended` |
//! | down | none | cut off and the session expired; a new one opens on heal | `Expired` |
//!
//! and, orthogonally, open or closed. The transitions below keep one rule: whatever ends a
//! session deletes its ephemerals first (others see the deletions) and marks a gap on the
//! client's own watches, and whatever opens a session resyncs them.

use std::collections::VecDeque;
use std::time::Duration;

use shardcron_core::registry::{Op, RegistryError, SessionEvent, SessionEvents};
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};
use tokio::sync::oneshot;

use crate::client::ClientId;
use crate::namespace::Namespace;
use crate::server::State;
use crate::tree::SessionId;
use crate::watch::{Channel, Watches};

/// The client's connection.
#[derive(Debug)]
pub(crate) enum Link {
    Up,
    /// Cut off since cut number `cut`. While the session lives, `deadline` holds when it expires
    /// (clock milliseconds) and the sender whose drop cancels the deadline task.
    Down {
        cut: u64,
        deadline: Option<(i64, oneshot::Sender<()>)>,
    },
}

/// A session-deadline task that the caller spawns once the state lock is released: it sleeps
/// until `at_ms` and settles the server, unless `cancel` fires (its sender dropped) first.
#[derive(Debug)]
pub(crate) struct Deadline {
    pub client: ClientId,
    pub cut: u64,
    pub at_ms: i64,
    pub cancel: oneshot::Receiver<()>,
}

/// One client as the server knows it.
#[derive(Debug)]
pub(crate) struct ClientState {
    pub ns: Namespace,
    pub session_timeout: Duration,
    pub session: Option<SessionId>,
    pub link: Link,
    /// `close()` was called, or every handle was dropped.
    pub closed: bool,
    /// Every handle was dropped: forget the client once its session is gone.
    pub dropped: bool,
    subscribers: Vec<UnboundedSender<SessionEvent>>,
    pub watches: Watches,
    /// Injected delay of each operation.
    pub latency: Duration,
    /// Injected failures still to hand out: (how many more times, which error).
    pub failures: VecDeque<(usize, RegistryError)>,
    /// Operations issued (past path validation), for load measurements.
    pub operations: u64,
}

impl ClientState {
    pub fn new(ns: Namespace, session_timeout: Duration, session: SessionId) -> Self {
        ClientState {
            ns,
            session_timeout,
            session: Some(session),
            link: Link::Up,
            closed: false,
            dropped: false,
            subscribers: Vec::new(),
            watches: Watches::default(),
            latency: Duration::ZERO,
            failures: VecDeque::new(),
            operations: 0,
        }
    }

    pub fn link_up(&self) -> bool {
        matches!(self.link, Link::Up)
    }

    /// Sends a session event to every open session stream.
    pub fn notify(&mut self, event: SessionEvent) {
        self.subscribers.retain(|tx| tx.send(event).is_ok());
    }

    /// A new session stream, opening with the current state.
    pub fn session_stream(&mut self) -> SessionEvents {
        let (tx, rx) = unbounded_channel();
        // Sends cannot fail: the receiver is right here.
        if self.closed {
            let _ = tx.send(SessionEvent::Closed);
            return SessionEvents::new(Channel(rx));
        }
        match self.session {
            Some(session) => {
                let _ = tx.send(SessionEvent::Connected { session });
                if !self.link_up() {
                    let _ = tx.send(SessionEvent::Suspended);
                }
            }
            None => {
                let _ = tx.send(SessionEvent::Expired);
            }
        }
        self.subscribers.push(tx);
        SessionEvents::new(Channel(rx))
    }

    /// Takes the link down; with a live session, its deadline starts now.
    fn go_down(&mut self, id: ClientId, cut: u64, now_ms: i64) -> Option<Deadline> {
        let Some(_) = self.session else {
            self.link = Link::Down { cut, deadline: None };
            return None;
        };
        let at_ms = now_ms.saturating_add(duration_ms(self.session_timeout));
        let (tx, cancel) = oneshot::channel();
        self.link = Link::Down { cut, deadline: Some((at_ms, tx)) };
        Some(Deadline { client: id, cut, at_ms, cancel })
    }

    /// Ends every stream of the client: session streams get `Closed`, watch streams just end.
    fn end_streams(&mut self) {
        self.notify(SessionEvent::Closed);
        self.subscribers.clear();
        self.watches.close();
    }

    /// The next injected failure, if any is left.
    pub fn take_failure(&mut self) -> Option<RegistryError> {
        let (left, error) = self.failures.front_mut()?;
        let error = error.clone();
        *left -= 1;
        if *left == 0 {
            self.failures.pop_front();
        }
        Some(error)
    }

    /// Whether an operation may be applied now, for a client whose operation was issued under
    /// session `issued`. Returns the session to apply it in.
    pub fn ready(
        &self,
        issued: Option<SessionId>,
        op: Op,
        path: &str,
    ) -> Result<SessionId, RegistryError> {
        let path = path.to_owned();
        if self.closed {
            return Err(RegistryError::Closed { op, path });
        }
        match (self.link_up(), self.session) {
            (false, _) | (true, None) => Err(RegistryError::ConnectionLoss { op, path }),
            // The session the operation was sent in died while it was on its way: like
            // ZooKeeper, fail it rather than apply it to the new session (an ephemeral create
            // would otherwise land in a session its caller never saw).
            (true, Some(current)) if issued != Some(current) => {
                Err(RegistryError::SessionExpired { op, path })
            }
            (true, Some(current)) => Ok(current),
        }
    }
}

/// A duration in whole milliseconds (the clock's unit), rounded up so a deadline is never early.
fn duration_ms(d: Duration) -> i64 {
    let ms = d.as_nanos().div_ceil(1_000_000);
    i64::try_from(ms).unwrap_or(i64::MAX)
}

impl State {
    /// Opens a new session for a connected client: `Connected`, then a resync of every watch.
    fn open_session(&mut self, id: ClientId) {
        let session = self.new_session_id();
        let Some(client) = self.clients.get_mut(&id) else { return };
        client.session = Some(session);
        client.notify(SessionEvent::Connected { session });
        client.watches.resync(&self.tree, &client.ns);
    }

    /// The server ends the client's session: ephemerals deleted (others see it), `Expired` for
    /// the client, and a new session at once if its link is up (else on heal).
    pub fn expire(&mut self, id: ClientId) {
        let Some(client) = self.clients.get_mut(&id) else { return };
        let Some(session) = client.session.take() else { return };
        // Own watches skip the deletions: the resync of the new session covers them.
        client.watches.mark_gap();
        if let Link::Down { deadline, .. } = &mut client.link {
            *deadline = None;
        }
        client.notify(SessionEvent::Expired);
        let (up, closed) = (client.link_up(), client.closed);
        self.delete_ephemerals(session);
        if closed {
            self.reap(id);
        } else if up {
            self.open_session(id);
        }
    }

    /// Deletes the ephemeral nodes of `session`, in path order, and tells the watchers.
    fn delete_ephemerals(&mut self, session: SessionId) {
        let owned = self.tree.owned_by(session);
        let mut batch = self.tree.batch();
        for path in &owned {
            batch.delete_subtree(path);
        }
        let changes = batch.commit();
        self.publish(&changes);
    }

    /// Cuts the client off at `now_ms`. Returns the session deadline to arm, if its session is
    /// alive.
    pub fn cut(&mut self, id: ClientId, now_ms: i64) -> Option<Deadline> {
        let cut = self.new_cut_id();
        let client = self.clients.get_mut(&id)?;
        if client.closed || !client.link_up() {
            return None;
        }
        client.notify(SessionEvent::Suspended);
        client.go_down(id, cut, now_ms)
    }

    /// Reconnects a cut client: held events then `Reconnected` if the session lived, else a new
    /// session and resyncs.
    pub fn heal(&mut self, id: ClientId) {
        let Some(client) = self.clients.get_mut(&id) else { return };
        if client.closed || client.link_up() {
            return;
        }
        // Dropping the old link drops the timer's cancel sender: the deadline task ends.
        client.link = Link::Up;
        if client.session.is_some() {
            client.watches.release_held();
            client.notify(SessionEvent::Reconnected);
        } else {
            self.open_session(id);
        }
    }

    /// Expires every session whose deadline is `now_ms` or earlier, in client order. Called
    /// whenever the lock is taken, so a deadline holds to the millisecond whichever task
    /// happens to run first at that instant.
    pub fn settle(&mut self, now_ms: i64) {
        let due: Vec<ClientId> = self
            .clients
            .iter()
            .filter(|(_, c)| {
                matches!(c.link, Link::Down { deadline: Some((at, _)), .. } if at <= now_ms)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            tracing::debug!(client = %id, "session deadline passed: expiring");
            self.expire(id);
        }
    }

    /// Whether the deadline of cut number `cut` of the client is still pending.
    pub fn deadline_pending(&self, id: ClientId, cut: u64) -> bool {
        self.clients.get(&id).is_some_and(
            |c| matches!(c.link, Link::Down { cut: c2, deadline: Some(_) } if c2 == cut),
        )
    }

    /// `close()`: ends the client's streams and, if the server can hear it, its session. A client
    /// cut off cannot tell the server: its session lives on until the deadline.
    pub fn close(&mut self, id: ClientId) {
        let Some(client) = self.clients.get_mut(&id) else { return };
        if client.closed {
            return;
        }
        client.closed = true;
        client.end_streams();
        if client.link_up() {
            if let Some(session) = client.session.take() {
                self.delete_ephemerals(session);
            }
        }
        self.reap(id);
    }

    /// Every handle of the client is gone, as if its process died: its streams end and its
    /// session lives until the session timeout, as a real server would keep it. Returns the
    /// deadline to arm, if one is not running already.
    pub fn abandon(&mut self, id: ClientId, now_ms: i64) -> Option<Deadline> {
        let cut = self.new_cut_id();
        let client = self.clients.get_mut(&id)?;
        client.dropped = true;
        if !client.closed {
            client.closed = true;
            client.end_streams();
        }
        // Cut off already: its deadline is running.
        let deadline = if client.link_up() { client.go_down(id, cut, now_ms) } else { None };
        self.reap(id);
        deadline
    }

    /// The registry restarts and every connected client reconnects with its session intact.
    pub fn restart(&mut self) {
        for client in self.clients.values_mut() {
            if !client.closed && client.link_up() {
                client.notify(SessionEvent::Suspended);
                client.notify(SessionEvent::Reconnected);
            }
        }
    }

    /// Forgets a client nobody can use any more and whose session is gone.
    fn reap(&mut self, id: ClientId) {
        if self.clients.get(&id).is_some_and(|c| c.dropped && c.session.is_none()) {
            self.clients.remove(&id);
        }
    }
}
