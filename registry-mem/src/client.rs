//! The client handle: [`MemRegistry`], the [`CoordinatorRegistry`] every shardcron component
//! talks to, and the way each operation travels to the server.
//!
//! An operation is checked locally first (path rules, data size: no server round trip for
//! those), then *admitted* (closed? an injected failure? cut off?), then waits out the client's
//! injected latency, then is applied under the server lock if the client is still connected in
//! the session it was issued in.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use shardcron_core::registry::recipes::{SequentialLatch, SequentialMutex};
use shardcron_core::registry::{
    path, Capability, CoordinatorRegistry, CreateMode, LeaderLatch, MutexGuard, Node, Op,
    RegistryError, Result, ScopeChange, SessionEvents, TxnOp, TxnResult, Version, WatchScope,
    WatchScoper, WatchStream, MAX_DATA_SIZE,
};

use crate::faults::retarget;
use crate::namespace::Namespace;
use crate::ops::Ctx;
use crate::server::{MemServer, State};
use crate::tree::SessionId;

/// Identifies one client of a [`MemServer`], for the fault hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientId(pub(crate) u64);

impl ClientId {
    /// The number behind the id (clients are numbered from 1 in connection order).
    pub fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "client-{}", self.0)
    }
}

/// How a client connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectOptions {
    /// The chroot every path of the client is relative to (`/shardcron-demo`, or `demo` as
    /// ElasticJob spells it); `None` for the server root.
    pub namespace: Option<String>,
    /// How long the server keeps a session it no longer hears from (Curator's default: 60 s).
    pub session_timeout: Duration,
    /// The longest an operation may take before it fails with `Timeout` (Curator's connection
    /// timeout default: 15 s).
    pub operation_timeout: Duration,
    /// How much earlier than the session timeout a cut-off client reports its session `Lost`;
    /// `None` for the contract's default, a tenth of the session timeout
    /// ([`lease::default_margin`](shardcron_core::registry::lease::default_margin)). Must be
    /// within [`lease::check_margin`](shardcron_core::registry::lease::check_margin)'s range.
    pub lease_margin: Option<Duration>,
    /// Whether the client says its views can show some entries behind others
    /// ([`Capability::views_in_order`] false, as etcd's can): what a user of
    /// [`MemServer::lag_watch`](crate::MemServer::lag_watch) sets, so that the scheduler fences
    /// on what a lagging view may not show. Off by default: this server's watches are in order
    /// unless told to lag.
    pub views_lag: bool,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            namespace: None,
            session_timeout: Duration::from_secs(60),
            operation_timeout: Duration::from_secs(15),
            lease_margin: None,
            views_lag: false,
        }
    }
}

impl ConnectOptions {
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    pub fn operation_timeout(mut self, timeout: Duration) -> Self {
        self.operation_timeout = timeout;
        self
    }

    pub fn lease_margin(mut self, margin: Duration) -> Self {
        self.lease_margin = Some(margin);
        self
    }

    /// See [`ConnectOptions::views_lag`].
    pub fn views_lag(mut self, lag: bool) -> Self {
        self.views_lag = lag;
        self
    }
}

/// A client of a [`MemServer`], with one session at a time.
///
/// Cheap to clone; clones are the same client (same session, same streams). When the last clone
/// is dropped without [`close`](CoordinatorRegistry::close), the client is treated like a crashed
/// process: its streams end and the server keeps its session, ephemerals included, until the
/// session timeout runs out.
#[derive(Clone)]
pub struct MemRegistry {
    inner: Arc<Handle>,
}

/// What the clones of one client share. Dropping it abandons the client.
struct Handle {
    server: MemServer,
    id: ClientId,
    ns: Namespace,
    operation_timeout: Duration,
    /// [`ConnectOptions::views_lag`].
    views_lag: bool,
    /// Taken by each operation in issue order and held until it applied: tokio's mutex is fair
    /// (FIFO), so a client's operations apply in the order it issued them, latency or not.
    pipe: tokio::sync::Mutex<()>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.server.abandon(self.id);
    }
}

impl fmt::Debug for MemRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemRegistry")
            .field("client", &self.inner.id)
            .field("namespace", &self.inner.ns.root())
            .finish()
    }
}

/// What admission tells an operation.
struct Admitted {
    latency: Duration,
    session: Option<SessionId>,
}

/// Admission's answer: go, or wait until the frozen client is thawed and ask again.
enum Admission {
    Go(Admitted),
    Frozen(tokio::sync::watch::Receiver<bool>),
}

impl MemRegistry {
    pub(crate) fn new(
        server: MemServer,
        id: ClientId,
        ns: Namespace,
        operation_timeout: Duration,
        views_lag: bool,
    ) -> Self {
        let pipe = tokio::sync::Mutex::new(());
        let handle = Handle { server, id, ns, operation_timeout, views_lag, pipe };
        MemRegistry { inner: Arc::new(handle) }
    }

    /// This client's id, for the fault hooks of its server.
    pub fn client_id(&self) -> ClientId {
        self.inner.id
    }

    /// The server this client is connected to.
    pub fn server(&self) -> &MemServer {
        &self.inner.server
    }

    fn state(&self) -> parking_lot::MutexGuard<'_, State> {
        self.inner.server.shared.lock()
    }

    /// Decides whether an operation goes out at all, and with which latency and session.
    fn admit(&self, op: Op, path: &str) -> Result<Admission> {
        let mut state = self.state();
        let client = state
            .clients
            .get_mut(&self.inner.id)
            .ok_or_else(|| RegistryError::Closed { op, path: path.to_owned() })?;
        if client.closed {
            return Err(RegistryError::Closed { op, path: path.to_owned() });
        }
        // A frozen process issues nothing: the operation goes out once it is thawed.
        if let Some(thawed) = client.frozen_until_thawed() {
            return Ok(Admission::Frozen(thawed));
        }
        client.operations += 1;
        if let Some(error) = client.take_failure() {
            return Err(retarget(error, op, path));
        }
        if !client.link_up() {
            return Err(RegistryError::ConnectionLoss { op, path: path.to_owned() });
        }
        Ok(Admission::Go(Admitted { latency: client.latency, session: client.session }))
    }

    /// Sends one operation to the server and applies it there with `apply`.
    async fn call<T>(
        &self,
        op: Op,
        path: &str,
        apply: impl FnOnce(&mut State, &Ctx<'_>) -> Result<T>,
    ) -> Result<T> {
        let admitted = loop {
            let admission = self.admit(op, path)?;
            match admission {
                Admission::Go(admitted) => break admitted,
                Admission::Frozen(thawed) => wait_thawed(thawed).await,
            }
        };
        let timeout = self.inner.operation_timeout;
        if admitted.latency >= timeout {
            tokio::time::sleep(timeout).await;
            return Err(RegistryError::Timeout { op, path: path.to_owned(), after: timeout });
        }
        // The delay starts now, before queueing behind earlier operations: like a pipe, not a
        // serial line, so n concurrent operations take one latency, not n.
        let delay = (!admitted.latency.is_zero()).then(|| tokio::time::sleep(admitted.latency));
        let _turn = self.inner.pipe.lock().await;
        if let Some(delay) = delay {
            delay.await;
        }
        loop {
            let thawed = {
                let mut state = self.state();
                let client = state
                    .clients
                    .get(&self.inner.id)
                    .ok_or_else(|| RegistryError::Closed { op, path: path.to_owned() })?;
                match client.frozen_until_thawed() {
                    None => {
                        let session = client.ready(admitted.session, op, path)?;
                        let cx = Ctx { client: self.inner.id, ns: &self.inner.ns, session };
                        return apply(&mut state, &cx);
                    }
                    Some(thawed) => thawed,
                }
            };
            // Frozen on its way: it reaches the server once the process runs again.
            wait_thawed(thawed).await;
        }
    }
}

/// Changes the scope of one of a client's watches: an operation of the client like any other
/// (latency, faults, a cut link), applied under the server lock.
struct MemScoper {
    /// Weak: a stream kept after its client was dropped does not keep the client alive.
    client: std::sync::Weak<Handle>,
    id: u64,
}

impl fmt::Debug for MemScoper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemScoper").field("watch", &self.id).finish()
    }
}

#[async_trait]
impl WatchScoper for MemScoper {
    async fn rescope(&self, change: ScopeChange) -> Result<()> {
        change.validate()?;
        let at = change.label();
        let Some(inner) = self.client.upgrade() else {
            return Err(RegistryError::Closed { op: Op::Watch, path: at.to_owned() });
        };
        let client = MemRegistry { inner };
        client.call(Op::Watch, at, |s, cx| s.rescope(cx, self.id, &change)).await
    }
}

/// Waits until a frozen client is thawed (or the server is gone).
async fn wait_thawed(mut thawed: tokio::sync::watch::Receiver<bool>) {
    let _ = thawed.wait_for(|frozen| !*frozen).await;
}

fn check_size(op: Op, path: &str, data: &[u8]) -> Result<()> {
    if data.len() > MAX_DATA_SIZE {
        return Err(RegistryError::DataTooLarge {
            op,
            path: path.to_owned(),
            size: data.len(),
            limit: MAX_DATA_SIZE,
        });
    }
    Ok(())
}

/// Local checks of one transaction op: path rules and data size.
fn check_txn_op(op: &TxnOp) -> Result<()> {
    match op {
        TxnOp::Check { path, .. } | TxnOp::Absent { path } => path::validate(path),
        TxnOp::Create { path, data, .. } => {
            path::validate_node(path).and_then(|()| check_size(Op::Create, path, data))
        }
        TxnOp::Set { path, data, .. } => {
            path::validate_node(path).and_then(|()| check_size(Op::Set, path, data))
        }
        TxnOp::Delete { path, .. } => path::validate_node(path),
    }
}

#[async_trait]
impl CoordinatorRegistry for MemRegistry {
    fn capability(&self) -> Capability {
        let mut capability = Capability::new("mem");
        // One lock taken, whatever the size: the more ops a transaction carries, the better.
        capability.txn_batch_ops = 4096;
        capability.absent_check = true;
        capability.views_in_order = !self.inner.views_lag;
        capability
    }

    async fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> Result<String> {
        path::validate_node(path)?;
        check_size(Op::Create, path, data)?;
        self.call(Op::Create, path, |s, cx| s.create(cx, path, data, mode)).await
    }

    async fn get(&self, path: &str) -> Result<Option<Node>> {
        path::validate(path)?;
        self.call(Op::Get, path, |s, cx| Ok(s.get(cx, path))).await
    }

    async fn set(&self, path: &str, data: &[u8], expected: Option<Version>) -> Result<Version> {
        path::validate_node(path)?;
        check_size(Op::Set, path, data)?;
        self.call(Op::Set, path, |s, cx| s.set(cx, path, data, expected)).await
    }

    async fn delete(&self, path: &str, expected: Option<Version>) -> Result<()> {
        path::validate_node(path)?;
        self.call(Op::Delete, path, |s, cx| s.delete(cx, path, expected)).await
    }

    async fn exists(&self, path: &str) -> Result<bool> {
        path::validate(path)?;
        self.call(Op::Exists, path, |s, cx| Ok(s.exists(cx, path))).await
    }

    async fn children(&self, path: &str) -> Result<Vec<String>> {
        path::validate(path)?;
        self.call(Op::Children, path, |s, cx| s.children(cx, path)).await
    }

    async fn delete_recursive(&self, path: &str) -> Result<()> {
        path::validate_node(path)?;
        self.call(Op::DeleteRecursive, path, |s, cx| {
            s.delete_recursive(cx, path);
            Ok(())
        })
        .await
    }

    async fn transaction(&self, ops: Vec<TxnOp>) -> Result<Vec<TxnResult>> {
        for (index, op) in ops.iter().enumerate() {
            check_txn_op(op)
                .map_err(|e| RegistryError::Transaction { index, source: Box::new(e) })?;
        }
        let path = ops.first().map_or("", |op| op.path());
        self.call(Op::Transaction, path, |s, cx| s.transaction(cx, &ops)).await
    }

    async fn watch_scope(&self, scope: WatchScope) -> Result<WatchStream> {
        scope.validate()?;
        let at = crate::ops::first_path(&scope);
        let (events, id) = self.call(Op::Watch, at, |s, cx| s.watch(cx, &scope)).await?;
        let scoper = MemScoper { client: Arc::downgrade(&self.inner), id };
        Ok(WatchStream::with_scoper(events, Some(Arc::new(scoper))))
    }

    fn session_events(&self) -> SessionEvents {
        let mut state = self.state();
        match state.clients.get_mut(&self.inner.id) {
            Some(client) => client.session_stream(),
            // Unreachable while a handle exists (the server forgets only dropped clients), but
            // a closed stream is the honest answer.
            None => SessionEvents::new(futures::stream::iter([
                shardcron_core::registry::SessionEvent::Closed,
            ])),
        }
    }

    async fn leader_latch(&self, path: &str, participant: &str) -> Result<Box<dyn LeaderLatch>> {
        let latch = SequentialLatch::join(Arc::new(self.clone()), path, participant).await?;
        Ok(Box::new(latch))
    }

    async fn lock(
        &self,
        path: &str,
        owner: &str,
        timeout: Duration,
    ) -> Result<Box<dyn MutexGuard>> {
        let guard = SequentialMutex::lock(Arc::new(self.clone()), path, owner, timeout).await?;
        Ok(Box::new(guard))
    }

    async fn registry_time(&self) -> Result<i64> {
        let clock = self.inner.server.shared.handles.clock.clone();
        self.call(Op::Time, "", move |_, _| Ok(clock.now_ms())).await
    }

    async fn close(&self) -> Result<()> {
        // Not an operation that can be delayed or made to fail: closing always succeeds locally.
        self.state().close(self.inner.id);
        Ok(())
    }
}
