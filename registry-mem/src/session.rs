//! Clients and their sessions as the server sees them.
//!
//! A client is in one of these states (the link is the client's connection, the session the
//! server's record of it, the report what the client last said on its session stream):
//!
//! | link | session | report | meaning |
//! |---|---|---|---|
//! | up | live | `Connected{s}` | normal operation |
//! | down | live | `Suspended` | cut off; the server keeps the session until its deadline |
//! | down | live or none | `Lost` | cut off past the client's local lease deadline |
//! | down, frozen | live or none | unchanged | the client's process is frozen: it notices nothing |
//!
//! and, orthogonally, open or closed. A client in contact renews its session all the time, so a
//! cut at `t` starts two clocks: the server expires the session at `t + timeout` on its own
//! clock, and the client reports `Lost` at `t + (timeout - margin)` on its clock, which may
//! drift from the server's within [`lease::MAX_CLOCK_DRIFT_PPM`] (converted to server time
//! here). The client learns of an expiry only when it gets through again; a lost session is
//! never resumed: on heal the client closes it if it still lives, then reports `Expired` and a
//! new session.
//!
//! The transitions keep one rule: whatever ends a session deletes its ephemerals first (others
//! see the deletions) and marks a gap on the client's own watches, and whatever opens a session
//! resyncs them.

use std::collections::VecDeque;
use std::time::Duration;

use shardcron_core::registry::{lease, Op, RegistryError, SessionEvent, SessionEvents};
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};
use tokio::sync::{oneshot, watch};

use crate::client::ClientId;
use crate::namespace::Namespace;
use crate::server::State;
use crate::tree::SessionId;
use crate::watch::{Channel, Lagging, Watches};

/// The client's connection.
#[derive(Debug)]
pub(crate) enum Link {
    Up,
    /// The server has heard nothing from the client since the cut or freeze.
    Down(Down),
}

/// A link that is down: since when, why, and the deadlines it started.
#[derive(Debug)]
pub(crate) struct Down {
    /// The number of this cut (or freeze), to tell its deadline tasks from older ones.
    pub cut: u64,
    /// When the server last heard from the client (clock milliseconds).
    pub since_ms: i64,
    /// The client's process is frozen (a GC pause): it runs no timer and reports nothing until
    /// thawed; its operations wait instead of failing.
    pub frozen: bool,
    /// When the server expires the session, while it lives.
    pub expiry: Option<Timer>,
    /// When the client reports `Lost`, until it has (never while frozen).
    pub lease: Option<Timer>,
}

/// A pending deadline; dropping it drops the sender, which ends the task that waits for it.
#[derive(Debug)]
pub(crate) struct Timer {
    pub at_ms: i64,
    _cancel: oneshot::Sender<()>,
}

/// Which deadline a task waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The server expires the session.
    Expiry,
    /// The client's local lease deadline.
    Lease,
}

/// A deadline task that the caller spawns once the state lock is released: it sleeps until
/// `at_ms` and settles the server, unless `cancel` fires (its sender dropped) first.
#[derive(Debug)]
pub(crate) struct Deadline {
    pub client: ClientId,
    pub cut: u64,
    pub kind: Kind,
    pub at_ms: i64,
    pub cancel: oneshot::Receiver<()>,
}

fn timer(client: ClientId, cut: u64, kind: Kind, at_ms: i64) -> (Timer, Deadline) {
    let (tx, cancel) = oneshot::channel();
    (Timer { at_ms, _cancel: tx }, Deadline { client, cut, kind, at_ms, cancel })
}

/// What the client last reported on its session stream: what a new stream opens with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reported {
    Up(SessionId),
    Suspended(SessionId),
    Lost(SessionId),
    Expired,
    Closed,
}

/// One client as the server knows it.
#[derive(Debug)]
pub(crate) struct ClientState {
    pub ns: Namespace,
    pub session_timeout: Duration,
    /// The drift margin of the client's local lease deadline.
    pub lease_margin: Duration,
    /// How much faster (positive) or slower the client's clock runs than the server's, in
    /// parts per million, within [`lease::MAX_CLOCK_DRIFT_PPM`].
    pub drift_ppm: i32,
    pub session: Option<SessionId>,
    pub link: Link,
    pub reported: Reported,
    /// `true` while the client's process is frozen; operations wait for `false`.
    frozen: watch::Sender<bool>,
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
    pub fn new(
        ns: Namespace,
        session_timeout: Duration,
        lease_margin: Duration,
        session: SessionId,
    ) -> Self {
        ClientState {
            ns,
            session_timeout,
            lease_margin,
            drift_ppm: 0,
            session: Some(session),
            link: Link::Up,
            reported: Reported::Up(session),
            frozen: watch::channel(false).0,
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

    pub fn is_frozen(&self) -> bool {
        matches!(&self.link, Link::Down(d) if d.frozen)
    }

    /// A receiver that turns `false` when the client's process is thawed, while it is frozen.
    pub fn frozen_until_thawed(&self) -> Option<watch::Receiver<bool>> {
        self.is_frozen().then(|| self.frozen.subscribe())
    }

    /// Sends a session event to every open session stream and remembers it as the state.
    pub fn notify(&mut self, event: SessionEvent) {
        self.reported = match (self.reported, event) {
            (_, SessionEvent::Closed) => Reported::Closed,
            (_, SessionEvent::Connected { session }) => Reported::Up(session),
            (_, SessionEvent::Expired) => Reported::Expired,
            (Reported::Up(s), SessionEvent::Suspended) => Reported::Suspended(s),
            (Reported::Suspended(s), SessionEvent::Reconnected) => Reported::Up(s),
            (Reported::Up(s) | Reported::Suspended(s), SessionEvent::Lost) => Reported::Lost(s),
            (now, _) => now,
        };
        self.subscribers.retain(|tx| tx.send(event).is_ok());
    }

    /// A new session stream, opening with the state the client last reported.
    pub fn session_stream(&mut self) -> SessionEvents {
        let (tx, rx) = unbounded_channel();
        let opening: &[SessionEvent] = match self.reported {
            Reported::Closed => &[SessionEvent::Closed],
            Reported::Up(session) => &[SessionEvent::Connected { session }],
            Reported::Suspended(session) => {
                &[SessionEvent::Connected { session }, SessionEvent::Suspended]
            }
            Reported::Lost(session) => {
                &[SessionEvent::Connected { session }, SessionEvent::Suspended, SessionEvent::Lost]
            }
            Reported::Expired => &[SessionEvent::Expired],
        };
        // Sends cannot fail: the receiver is right here.
        for event in opening {
            let _ = tx.send(*event);
        }
        if !self.closed {
            self.subscribers.push(tx);
        }
        SessionEvents::new(Channel(rx))
    }

    /// How long after its last contact the client reports `Lost`, in server milliseconds:
    /// the session timeout less the margin, as the client's drifting clock measures it.
    fn lease_ms(&self) -> i64 {
        let local = self.session_timeout.saturating_sub(self.lease_margin);
        let rate = 1.0 + f64::from(self.drift_ppm) / 1e6;
        // Rounded down: never later than the drift says.
        duration_ms_floor(local.div_f64(rate))
    }

    /// Takes the link down at `now_ms` (a cut, or a frozen process); with a live session the
    /// server's deadline starts now, and unless frozen, the client's lease deadline too.
    fn go_down(&mut self, id: ClientId, cut: u64, now_ms: i64, frozen: bool) -> Vec<Deadline> {
        let mut deadlines = Vec::new();
        let mut down = Down { cut, since_ms: now_ms, frozen, expiry: None, lease: None };
        if self.session.is_some() {
            let at = now_ms.saturating_add(duration_ms(self.session_timeout));
            let (t, d) = timer(id, cut, Kind::Expiry, at);
            down.expiry = Some(t);
            deadlines.push(d);
        }
        let reporting = !self.closed && !frozen;
        if reporting && matches!(self.reported, Reported::Up(_) | Reported::Suspended(_)) {
            let at = now_ms.saturating_add(self.lease_ms());
            let (t, d) = timer(id, cut, Kind::Lease, at);
            down.lease = Some(t);
            deadlines.push(d);
        }
        self.link = Link::Down(down);
        deadlines
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

/// A duration in whole milliseconds, rounded down so a deadline is never late.
fn duration_ms_floor(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
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

    /// The server ends the client's session: ephemerals deleted (others see it). A client in
    /// contact hears of it at once (`Expired`, then a new session); one cut off or frozen hears
    /// nothing until it gets through again ([`State::heal`], [`State::thaw`]).
    pub fn expire(&mut self, id: ClientId) {
        let Some(client) = self.clients.get_mut(&id) else { return };
        let Some(session) = client.session.take() else { return };
        // Own watches skip the deletions: the resync of the new session covers them.
        client.watches.mark_gap();
        if let Link::Down(down) = &mut client.link {
            down.expiry = None;
        }
        let (up, closed) = (client.link_up(), client.closed);
        if up {
            client.notify(SessionEvent::Expired);
        }
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

    /// Cuts the client off at `now_ms`: `Suspended`, and the deadlines to arm.
    pub fn cut(&mut self, id: ClientId, now_ms: i64) -> Vec<Deadline> {
        let cut = self.new_cut_id();
        let Some(client) = self.clients.get_mut(&id) else { return Vec::new() };
        if client.closed || !client.link_up() {
            return Vec::new();
        }
        client.notify(SessionEvent::Suspended);
        client.go_down(id, cut, now_ms, false)
    }

    /// Freezes the client's process at `now_ms`: the server stops hearing from it, the client
    /// notices nothing. Returns the server's deadline to arm.
    pub fn freeze(&mut self, id: ClientId, now_ms: i64) -> Vec<Deadline> {
        let cut = self.new_cut_id();
        let Some(client) = self.clients.get_mut(&id) else { return Vec::new() };
        if client.closed || !client.link_up() {
            return Vec::new();
        }
        client.frozen.send_replace(true);
        client.go_down(id, cut, now_ms, true)
    }

    /// Reconnects a cut client (not a frozen one: see [`State::thaw`]).
    pub fn heal(&mut self, id: ClientId) {
        let Some(client) = self.clients.get_mut(&id) else { return };
        if client.closed || client.link_up() || client.is_frozen() {
            return;
        }
        // Dropping the old link drops the timers' cancel senders: their tasks end.
        client.link = Link::Up;
        self.reconnect(id, true);
    }

    /// Resumes a frozen client at `now_ms`. Its lease timer runs first: if the deadline passed
    /// while it was frozen, it reports `Suspended` and `Lost` before anything else. Then it
    /// gets through to the server as after a cut, but says `Reconnected` only if it had said
    /// `Suspended`.
    pub fn thaw(&mut self, id: ClientId, now_ms: i64) {
        let Some(client) = self.clients.get_mut(&id) else { return };
        let Link::Down(Down { since_ms, frozen: true, .. }) = client.link else { return };
        client.frozen.send_replace(false);
        client.link = Link::Up;
        if client.closed {
            return;
        }
        let lost = now_ms >= since_ms.saturating_add(client.lease_ms());
        if lost && matches!(client.reported, Reported::Up(_)) {
            client.notify(SessionEvent::Suspended);
            client.notify(SessionEvent::Lost);
        }
        let announce = !matches!(client.reported, Reported::Up(_));
        self.reconnect(id, announce);
    }

    /// The link of the client is up again: held events then `Reconnected` (if `announce`) when
    /// the session lived and was not lost; else the lost session is closed if it still lives,
    /// and the client reports `Expired` and opens a new session.
    fn reconnect(&mut self, id: ClientId, announce: bool) {
        let Some(client) = self.clients.get_mut(&id) else { return };
        match (client.session, client.reported) {
            (Some(session), Reported::Lost(_)) => {
                // Never resume a lost session: close it, as a real client would on reconnect.
                client.session = None;
                client.watches.mark_gap();
                client.notify(SessionEvent::Expired);
                self.delete_ephemerals(session);
                self.open_session(id);
            }
            (Some(_), _) => {
                client.watches.release_held();
                if announce {
                    client.notify(SessionEvent::Reconnected);
                }
            }
            (None, _) => {
                client.notify(SessionEvent::Expired);
                self.open_session(id);
            }
        }
    }

    /// Fires every deadline due at `now_ms` or earlier, in client order: first the clients'
    /// lease deadlines (`Lost`), then the server's expiries. Called whenever the lock is taken,
    /// so a deadline holds to the millisecond whichever task happens to run first then.
    pub fn settle(&mut self, now_ms: i64) {
        let due = |kind: Kind| -> Vec<ClientId> {
            self.clients
                .iter()
                .filter(|(_, c)| match (&c.link, kind) {
                    (Link::Down(d), Kind::Lease) => {
                        d.lease.as_ref().is_some_and(|t| t.at_ms <= now_ms)
                    }
                    (Link::Down(d), Kind::Expiry) => {
                        d.expiry.as_ref().is_some_and(|t| t.at_ms <= now_ms)
                    }
                    (Link::Up, _) => false,
                })
                .map(|(id, _)| *id)
                .collect()
        };
        let lost = due(Kind::Lease);
        let expired = due(Kind::Expiry);
        for id in lost {
            let Some(client) = self.clients.get_mut(&id) else { continue };
            if let Link::Down(down) = &mut client.link {
                down.lease = None;
            }
            tracing::debug!(client = %id, "lease deadline passed: session lost");
            client.notify(SessionEvent::Lost);
        }
        for id in expired {
            tracing::debug!(client = %id, "session deadline passed: expiring");
            self.expire(id);
        }
    }

    /// Whether the `kind` deadline of cut number `cut` of the client is still pending.
    pub fn deadline_pending(&self, id: ClientId, cut: u64, kind: Kind) -> bool {
        self.clients.get(&id).is_some_and(|c| match &c.link {
            Link::Down(d) if d.cut == cut => match kind {
                Kind::Expiry => d.expiry.is_some(),
                Kind::Lease => d.lease.is_some(),
            },
            _ => false,
        })
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
        if let Link::Down(down) = &mut client.link {
            // Nobody is left to report a loss to.
            down.lease = None;
        }
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
    pub fn abandon(&mut self, id: ClientId, now_ms: i64) -> Vec<Deadline> {
        let cut = self.new_cut_id();
        let Some(client) = self.clients.get_mut(&id) else { return Vec::new() };
        client.dropped = true;
        if !client.closed {
            client.closed = true;
            client.end_streams();
        }
        // Cut off already: its deadline is running.
        let deadlines =
            if client.link_up() { client.go_down(id, cut, now_ms, false) } else { Vec::new() };
        self.reap(id);
        deadlines
    }

    /// Holds back the events of `which` entries of the client's watches (see
    /// [`crate::watch::Watches::lag`]); how many watches lag.
    pub fn lag_watches(&mut self, id: ClientId, which: Lagging) -> usize {
        match self.clients.get_mut(&id) {
            Some(client) if !client.closed => client.watches.lag(which),
            _ => 0,
        }
    }

    /// Ends the lag of the client's watches: each lagging one gets its scope again (`Resync`).
    pub fn catch_up_watches(&mut self, id: ClientId) {
        let tree = &self.tree;
        if let Some(client) = self.clients.get_mut(&id) {
            let link_up = client.link_up();
            client.watches.catch_up(tree, &client.ns, link_up);
        }
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

/// The lease margin a client connects with: the configured one, checked, or the default.
pub(crate) fn lease_margin(
    session_timeout: Duration,
    configured: Option<Duration>,
    namespace: &str,
) -> Result<Duration, RegistryError> {
    match configured {
        None => Ok(lease::default_margin(session_timeout)),
        Some(margin) => {
            lease::check_margin(session_timeout, margin).map(|()| margin).map_err(|message| {
                RegistryError::Backend {
                    backend: "mem",
                    op: Op::Connect,
                    path: namespace.to_owned(),
                    message,
                    retryable: false,
                    source: None,
                }
            })
        }
    }
}
