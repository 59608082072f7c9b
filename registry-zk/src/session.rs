//! Sessions: opening one, reporting its state, and replacing it after an expiry.
//!
//! In `zookeeper-client`, as in every ZooKeeper client, an expired session is final: the
//! `Client` only fails from then on. The contract wants a client that lives on, so
//! [`supervise`] watches the session state and, on expiry, opens a new session (retrying with
//! backoff until it gets one or the registry is closed), swaps it in, and reports
//! `Expired` then `Connected { new session }`. A link that drops and comes back within the
//! session timeout is the same session: `Suspended` then `Reconnected`, nothing lost.

use std::sync::Weak;
use std::time::Duration;

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
            }
        })?;
        ensure_namespace(&root, &namespace, options).await?;
        check_write_access(&root, &namespace, options).await?;
        let id = root.session_id().0 as u64;
        let ns =
            root.clone().chroot(namespace.as_str()).map_err(|_| RegistryError::InvalidPath {
                path: namespace.clone(),
                reason: "the ZooKeeper client refused this namespace as a chroot",
            })?;
        Ok(Session { ns, root, id })
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

    /// A new stream, opening with the current state (`Connected` then `Suspended` if the link
    /// is down; `Expired` while a new session is being opened; `Closed`).
    pub fn subscribe(&self) -> SessionEvents {
        let (tx, mut rx) = unbounded_channel();
        let mut state = self.state.lock();
        // The receiver is right here: these sends cannot fail.
        let _ = match state.now {
            Now::Up(session) => tx.send(SessionEvent::Connected { session }),
            Now::Suspended(session) => tx
                .send(SessionEvent::Connected { session })
                .and_then(|()| tx.send(SessionEvent::Suspended)),
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
    /// change the state (a second `Suspended`) are not repeated.
    pub fn publish(&self, event: SessionEvent) {
        let mut state = self.state.lock();
        let next = match (state.now, event) {
            (Now::Closed, _) => return,
            (_, SessionEvent::Closed) => Now::Closed,
            (_, SessionEvent::Connected { session }) => Now::Up(session),
            (Now::Up(s), SessionEvent::Suspended) => Now::Suspended(s),
            (Now::Suspended(s), SessionEvent::Reconnected) => Now::Up(s),
            (Now::Up(_) | Now::Suspended(_), SessionEvent::Expired) => Now::Expired,
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

/// Follows one session's state until it ends, then replaces it; returns when the registry is
/// closed or dropped. Holds only a weak reference between events, so dropping every handle of
/// the registry still closes its session.
pub(crate) async fn supervise(shared: Weak<Shared>, mut state: zk::StateWatcher) {
    loop {
        let now = state.changed().await;
        let Some(live) = shared.upgrade() else { return };
        match now {
            zk::SessionState::Disconnected => live.bus.publish(SessionEvent::Suspended),
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
