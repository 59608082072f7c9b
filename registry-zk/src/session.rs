//! Sessions: opening one, reporting its state, keeping its lease, and replacing it after an
//! expiry or a loss.
//!
//! In `zookeeper-client`, as in every ZooKeeper client, an expired session is final: the
//! `Client` only fails from then on. The contract wants a client that lives on, so
//! [`supervise`] watches the session state and, on expiry, opens a new session (retrying with
//! backoff until it gets one or the registry is closed), swaps it in, and reports
//! `Expired` then `Connected { new session }`. A link that drops and comes back within the
//! lease is the same session: `Suspended` then `Reconnected`, nothing lost.
//!
//! The lease: [`probe`] sends a light request (`exists` on the server root) every fifth of
//! the negotiated session timeout and records, for each one answered, when it was sent. Any
//! request resets ZooKeeper's session timer when the server receives it, so the server cannot
//! expire the session before the timeout has run from that send. [`supervise`] reports `Lost`
//! when the timeout less the margin has run from it, whatever the connection library believes.
//! A lost session is never used again: once the server is reachable (or at once, if the
//! library is still connected) it is closed, which deletes its ephemerals, then `Expired` and
//! a new session follow. If the server stays out of reach, the library gives the session up by
//! itself (7/5 of the timeout after it last heard from the server) and the same follows.

use std::sync::Weak;
use std::time::Duration;

use tokio::time::Instant;

use shardcron_core::registry::{path, Op, RegistryError, Result, SessionEvent, SessionEvents};
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};
use zookeeper_client as zk;

use crate::client::Shared;
use crate::error::{self, At, BACKEND};
use crate::options::ZkOptions;

/// One ZooKeeper session, seen through two clients that share it.
pub(crate) struct Session {
    /// Chrooted at the namespace: the client's paths as they are.
    pub ns: zk::Client,
    /// Unrooted: for the namespace node itself (registry time).
    pub root: zk::Client,
    /// ZooKeeper's session id, as the contract reports it.
    pub id: u64,
    /// When the last request of the opening (answered) was sent: the lease's first contact.
    pub opened_at: Instant,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Session({:#x})", self.id)
    }
}

impl Session {
    /// Whether the link of this session is down right now.
    pub fn suspended(&self) -> bool {
        matches!(self.root.state(), zk::SessionState::Disconnected)
    }
}

/// Opens a session and makes sure the namespace exists and is ours to write, in one attempt
/// bounded by the connect timeout.
pub(crate) async fn open(options: &ZkOptions) -> Result<Session> {
    let namespace = options.namespace_path();
    crate::spawner::ensure_registered();
    let attempt = async {
        let mut connector = zk::Client::connector()
            .with_session_timeout(options.session_timeout)
            .with_connection_timeout(options.connect_timeout);
        if let Some(digest) = &options.digest {
            connector = connector.with_auth("digest", &digest.auth_bytes());
        }
        let root = connector.connect(&options.connect_string()).await.map_err(|e| {
            RegistryError::Backend {
                backend: BACKEND,
                op: Op::Connect,
                path: namespace.clone(),
                message: format!("could not open a session on {}: {e}", options.connect_string()),
                retryable: true,
                source: None,
            }
        })?;
        ensure_namespace(&root, &namespace, options).await?;
        // The last request of the opening is the session's first contact for the lease (the
        // connect request itself may have waited out a partition before it got through).
        let opened_at = Instant::now();
        check_write_access(&root, &namespace, options).await?;
        let id = root.session_id().0 as u64;
        let ns =
            root.clone().chroot(namespace.as_str()).map_err(|_| RegistryError::InvalidPath {
                path: namespace.clone(),
                reason: "the ZooKeeper client refused this namespace as a chroot",
            })?;
        Ok(Session { ns, root, id, opened_at })
    };
    match tokio::time::timeout(options.connect_timeout, attempt).await {
        Ok(res) => res,
        Err(_) => Err(RegistryError::Backend {
            backend: BACKEND,
            op: Op::Connect,
            path: namespace.clone(),
            message: format!(
                "no session on {} within the connect timeout of {:?}",
                options.connect_string(),
                options.connect_timeout
            ),
            retryable: true,
            source: None,
        }),
    }
}

/// Opens a session, retrying with the options' backoff; `attempts: None` retries until
/// `give_up` says so. Errors that no retry can fix (credentials, a bad namespace) end at once.
///
/// Each attempt is announced (info) and each failure reported (warn) through `tracing`, so a
/// slow start is not silent. When every attempt failed, the error names every host with what a
/// plain TCP connection to it finds, the attempts and the time spent.
pub(crate) async fn open_with_retry(
    options: &ZkOptions,
    attempts: Option<u32>,
    give_up: impl Fn() -> bool,
) -> Result<Session> {
    let started = std::time::Instant::now();
    let hosts = options.connect_string();
    let of = attempts.map_or_else(String::new, |n| format!(" of {}", n.max(1)));
    let mut failed = 0u32;
    loop {
        tracing::info!(
            "connecting to ZooKeeper at {hosts} (attempt {}{of}, up to {:?})",
            failed + 1,
            options.connect_timeout
        );
        let err = match open(options).await {
            Ok(session) => {
                tracing::info!("connected to ZooKeeper at {hosts}, session {:#x}", session.id);
                return Ok(session);
            }
            Err(e) => e,
        };
        failed = failed.saturating_add(1);
        let out_of_attempts = attempts.is_some_and(|n| failed >= n.max(1));
        if !err.is_retryable() {
            return Err(err);
        }
        if out_of_attempts || give_up() {
            return Err(unreachable(options, failed, started.elapsed(), &err).await);
        }
        let pause = options.retry.pause(failed);
        tracing::warn!(
            "ZooKeeper attempt {failed}{of} failed after {:.1} s: {err}; retrying in {pause:?}",
            started.elapsed().as_secs_f64()
        );
        tokio::time::sleep(pause).await;
    }
}

/// The error of a start-up that got no session: every host and what TCP finds there, how many
/// attempts, how long, the last attempt's error and what to check.
async fn unreachable(
    options: &ZkOptions,
    attempts: u32,
    spent: Duration,
    last: &RegistryError,
) -> RegistryError {
    let hosts = shardcron_core::registry::reachability::describe_addresses(
        &options.hosts,
        crate::options::DEFAULT_PORT,
    )
    .await;
    let last = match last {
        RegistryError::Backend { message, .. } => message.clone(),
        other => other.to_string(),
    };
    RegistryError::Backend {
        backend: BACKEND,
        op: Op::Connect,
        path: options.namespace_path(),
        message: format!(
            "no ZooKeeper session after {attempts} attempt(s) in {:.1} s; hosts tried: {hosts}; \
             last attempt: {last}. Check that ZooKeeper runs at these addresses (the URL's \
             connect_timeout_ms and retry_attempts set how long connecting may take)",
            spent.as_secs_f64()
        ),
        retryable: true,
        source: None,
    }
}

/// Creates the namespace node and its parents if missing (persistent, with our ACL).
async fn ensure_namespace(root: &zk::Client, namespace: &str, options: &ZkOptions) -> Result<()> {
    let at = At::new(Op::Connect, namespace);
    match root.check_stat(namespace).await {
        Ok(Some(_)) => return Ok(()),
        Ok(None) => {}
        Err(e) => return Err(error::map(e, at)),
    }
    let acls = crate::acl::for_nodes(options.digest.is_some());
    let dir = zk::CreateMode::Persistent.with_acls(acls);
    for p in path::ancestors(namespace).chain([namespace]) {
        match root.create(p, b"", &dir).await {
            Ok(_) | Err(zk::Error::NodeExists) => {}
            Err(zk::Error::NoAuth) => {
                return Err(RegistryError::Auth {
                    op: Op::Connect,
                    path: p.to_owned(),
                    reason: format!(
                        "cannot create the namespace node {p}: the ACL of its parent does not let \
                         {} create children",
                        who(options)
                    ),
                })
            }
            Err(e) => return Err(error::map(e, At::new(Op::Connect, p))),
        }
    }
    Ok(())
}

/// Writes the namespace node once, so that wrong credentials fail here, at connect time, with
/// a message that says so, instead of on the first write of a running job.
///
/// ZooKeeper's digest scheme never rejects credentials by themselves (any `user:password` is a
/// valid identity); only the ACLs tell. ZooKeeper checks the ACL before the version, so the
/// write below fails with `NoAuth` exactly when these credentials may not write the namespace.
async fn check_write_access(root: &zk::Client, namespace: &str, options: &ZkOptions) -> Result<()> {
    match root.set_data(namespace, b"", None).await {
        Ok(_) => Ok(()),
        Err(zk::Error::NoAuth) | Err(zk::Error::AuthFailed) => Err(RegistryError::Auth {
            op: Op::Connect,
            path: namespace.to_owned(),
            reason: format!(
                "{} may not write the namespace {namespace}: it belongs to other credentials \
                 (wrong digest user or password?)",
                who(options)
            ),
        }),
        Err(e) => Err(error::map(e, At::new(Op::Connect, namespace))),
    }
}

fn who(options: &ZkOptions) -> String {
    match &options.digest {
        Some(d) => format!("digest user {:?}", d.user),
        None => "a client without credentials (set digest=user:password)".to_owned(),
    }
}

/// The session state as the contract reports it, and the streams that report it.
#[derive(Debug)]
pub(crate) struct SessionBus {
    state: parking_lot::Mutex<BusState>,
}

#[derive(Debug)]
struct BusState {
    now: Now,
    subscribers: Vec<UnboundedSender<SessionEvent>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Now {
    Up(u64),
    Suspended(u64),
    Lost(u64),
    Expired,
    Closed,
}

impl SessionBus {
    pub fn new(session: u64) -> Self {
        SessionBus {
            state: parking_lot::Mutex::new(BusState {
                now: Now::Up(session),
                subscribers: Vec::new(),
            }),
        }
    }

    /// Whether the session in use is lost (reported `Lost`, not yet replaced).
    pub fn is_lost(&self) -> bool {
        matches!(self.state.lock().now, Now::Lost(_))
    }

    /// Reports the session lost: `Suspended` first if the link was thought up, then `Lost`.
    pub fn lose(&self) {
        self.publish(SessionEvent::Suspended);
        self.publish(SessionEvent::Lost);
    }

    /// A new stream, opening with the current state (`Connected` then `Suspended` if the link
    /// is down, and `Lost` if the session is lost; `Expired` while a new session is being
    /// opened; `Closed`).
    pub fn subscribe(&self) -> SessionEvents {
        let (tx, mut rx) = unbounded_channel();
        let mut state = self.state.lock();
        // The receiver is right here: these sends cannot fail.
        let _ = match state.now {
            Now::Up(session) => tx.send(SessionEvent::Connected { session }),
            Now::Suspended(session) => tx
                .send(SessionEvent::Connected { session })
                .and_then(|()| tx.send(SessionEvent::Suspended)),
            Now::Lost(session) => tx
                .send(SessionEvent::Connected { session })
                .and_then(|()| tx.send(SessionEvent::Suspended))
                .and_then(|()| tx.send(SessionEvent::Lost)),
            Now::Expired => tx.send(SessionEvent::Expired),
            Now::Closed => tx.send(SessionEvent::Closed),
        };
        if state.now != Now::Closed {
            state.subscribers.push(tx);
        }
        drop(state);
        SessionEvents::new(futures::stream::poll_fn(move |cx| rx.poll_recv(cx)))
    }

    /// Moves to the state an event announces and tells every stream; events that would not
    /// change the state (a second `Suspended`, a `Reconnected` of a lost session) are dropped.
    pub fn publish(&self, event: SessionEvent) {
        let mut state = self.state.lock();
        let next = match (state.now, event) {
            (Now::Closed, _) => return,
            (_, SessionEvent::Closed) => Now::Closed,
            (_, SessionEvent::Connected { session }) => Now::Up(session),
            (Now::Up(s), SessionEvent::Suspended) => Now::Suspended(s),
            (Now::Suspended(s), SessionEvent::Reconnected) => Now::Up(s),
            (Now::Suspended(s), SessionEvent::Lost) => Now::Lost(s),
            (Now::Up(_) | Now::Suspended(_) | Now::Lost(_), SessionEvent::Expired) => Now::Expired,
            _ => return,
        };
        state.now = next;
        state.subscribers.retain(|tx| tx.send(event).is_ok());
        if next == Now::Closed {
            // Dropping the senders ends the streams after `Closed`.
            state.subscribers.clear();
        }
    }
}

/// Follows one session's state and its lease until it ends, then replaces it; returns when the
/// registry is closed or dropped. Holds only a weak reference between events, so dropping every
/// handle of the registry still closes its session.
pub(crate) async fn supervise(shared: Weak<Shared>, mut state: zk::StateWatcher) {
    loop {
        let deadline = {
            let Some(live) = shared.upgrade() else { return };
            if live.bus.is_lost() {
                None
            } else {
                live.lease.deadline()
            }
        };
        let changed = tokio::select! {
            biased;
            now = state.changed() => Some(now),
            () = sleep_until(deadline) => None,
        };
        let Some(live) = shared.upgrade() else { return };
        // The lease first: a deadline that passed is reported before anything else happens.
        if !live.bus.is_lost() && !live.is_closed() && live.lease.passed(Instant::now()) {
            tracing::warn!(
                session = ?live.lease.session(),
                margin = ?live.lease.margin(),
                "no answer from ZooKeeper within the session timeout less the lease margin: \
                 session lost"
            );
            live.bus.lose();
        }
        // A deadline that moved (contact since) wakes us with nothing new: look at the state.
        let now = changed.unwrap_or_else(|| state.peek_state());
        match now {
            zk::SessionState::Disconnected => live.bus.publish(SessionEvent::Suspended),
            zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly
                if live.bus.is_lost() =>
            {
                if live.is_closed() {
                    return;
                }
                drop(live);
                match end_lost(&shared).await {
                    Some(next) => state = next,
                    None => return,
                }
            }
            zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                live.bus.publish(SessionEvent::Reconnected)
            }
            zk::SessionState::Expired | zk::SessionState::AuthFailed | zk::SessionState::Closed => {
                if live.is_closed() {
                    return;
                }
                // `Closed` without our close means the client gave up reconnecting; like an
                // expiry, the session is gone for good.
                tracing::warn!(state = %now, "ZooKeeper session ended; opening a new one");
                live.lease.stop();
                live.replace_session(None);
                live.bus.publish(SessionEvent::Expired);
                drop(live);
                match reopen(&shared).await {
                    Some(next) => state = next,
                    None => return,
                }
            }
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

/// Closes a lost session the server can hear us on again (ZooKeeper deletes its ephemerals),
/// waiting until the connection library is done with it, then reports `Expired` and opens a
/// new session; returns its state watcher.
async fn end_lost(shared: &Weak<Shared>) -> Option<zk::StateWatcher> {
    let (ending, limit) = {
        let live = shared.upgrade()?;
        let ending = live.current().map(|s| s.root.state_watcher());
        live.lease.stop();
        // Our clone goes now, those of watch tasks as they see the new generation: the last
        // one gone, the library sends closeSession.
        live.replace_session(None);
        (ending, live.options.session_timeout.saturating_mul(2).max(live.operation_timeout()))
    };
    if let Some(ending) = ending {
        if await_end(ending, limit).await {
            tracing::info!("lost ZooKeeper session closed");
        } else {
            tracing::warn!(?limit, "the lost ZooKeeper session did not close in time");
        }
    }
    let live = shared.upgrade()?;
    if live.is_closed() {
        return None;
    }
    live.bus.publish(SessionEvent::Expired);
    drop(live);
    reopen(shared).await
}

/// Renews the lease: every fifth of the session timeout, while the session is usable, an
/// `exists` on the server root; the send time of each one answered is contact. Ends when the
/// registry is closed or dropped.
pub(crate) async fn probe(shared: Weak<Shared>) {
    loop {
        let sent = Instant::now();
        let (session, interval) = {
            let Some(live) = shared.upgrade() else { return };
            if live.is_closed() {
                return;
            }
            let session = live.current().filter(|s| !s.suspended() && !live.bus.is_lost());
            let timeout =
                session.as_ref().map_or(live.options.session_timeout, |s| s.root.session_timeout());
            (session, (timeout / 5).max(Duration::from_millis(10)))
        };
        if let Some(session) = session {
            let answered = tokio::time::timeout(interval * 2, session.root.check_stat("/")).await;
            if let Ok(Ok(_)) = answered {
                if let Some(live) = shared.upgrade() {
                    live.lease.contact(session.id, sent);
                }
            }
        }
        tokio::time::sleep_until(sent + interval).await;
    }
}

/// Opens sessions until one works or the registry is gone; installs it and returns its state
/// watcher.
async fn reopen(shared: &Weak<Shared>) -> Option<zk::StateWatcher> {
    let mut failed = 0u32;
    loop {
        let options = {
            let live = shared.upgrade()?;
            if live.is_closed() {
                return None;
            }
            live.options.clone()
        };
        match open(&options).await {
            Ok(session) => {
                let live = shared.upgrade()?;
                if live.is_closed() {
                    return None;
                }
                let watcher = session.root.state_watcher();
                let id = session.id;
                live.lease.start(id, session.root.session_timeout(), session.opened_at);
                live.replace_session(Some(session));
                live.bus.publish(SessionEvent::Connected { session: id });
                tracing::info!(session = format_args!("{id:#x}"), "new ZooKeeper session");
                return Some(watcher);
            }
            Err(e) => {
                failed = failed.saturating_add(1);
                let pause = options.retry.pause(failed);
                tracing::warn!(error = %e, ?pause, "cannot open a new ZooKeeper session yet");
                tokio::time::sleep(pause).await;
            }
        }
    }
}

/// Waits until a session's state is final (closed, expired), at most `limit`.
pub(crate) async fn await_end(mut state: zk::StateWatcher, limit: Duration) -> bool {
    let wait = async {
        while !state.peek_state().is_terminated() {
            // `changed` never returns once the session task is gone; poll as a fallback.
            tokio::select! {
                biased;
                _ = state.changed() => {}
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
    };
    tokio::time::timeout(limit, wait).await.is_ok()
}
