//! [`ZkRegistry`]: the contract's operations on a ZooKeeper session.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::future::join_all;
use shardcron_core::registry::lease::LeaseClock;
use shardcron_core::registry::recipes::{SequentialLatch, SequentialMutex};
use shardcron_core::registry::{
    path, Capability, CoordinatorRegistry, CreateMode, LeaderLatch, MutexGuard, Node, Op,
    RegistryError, Result, SessionEvents, TxnOp, TxnResult, Version, WatchScope, WatchStream,
};
use tokio::sync::watch;
use zookeeper_client as zk;

use crate::error::{self, At};
use crate::node::{self, check_size};
use crate::options::ZkOptions;
use crate::session::{self, Session, SessionBus};
use crate::watch::hub::{Fact, WatchHub, WriteTicket};

/// How often `create` re-creates missing parents when a concurrent delete keeps removing them.
const CREATE_ATTEMPTS: usize = 5;

/// A shardcron registry client on a ZooKeeper ensemble: one session at a time, replaced
/// automatically after an expiry.
///
/// Cheap to clone: clones share the session, the streams and the watches. The session ends on
/// [`close`](CoordinatorRegistry::close), or when the last clone is dropped (then ZooKeeper
/// deletes the ephemeral nodes at once, as for a close).
#[derive(Clone)]
pub struct ZkRegistry {
    shared: Arc<Shared>,
}

/// What the clones of one client share.
pub(crate) struct Shared {
    pub options: ZkOptions,
    /// The namespace as a server path (`/shardcron`).
    pub namespace: String,
    /// The session in use; `None` while a new one is being opened, and after close.
    current: parking_lot::RwLock<Option<Arc<Session>>>,
    /// Bumped whenever `current` changes or the client closes, to wake the watch tasks.
    generation: watch::Sender<u64>,
    closed: AtomicBool,
    pub bus: SessionBus,
    pub watches: WatchHub,
    /// The local lease deadline of the session in use (see the crate docs, "Sessions").
    pub lease: LeaseClock,
}

impl Shared {
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// The session in use, if any.
    pub fn current(&self) -> Option<Arc<Session>> {
        self.current.read().clone()
    }

    pub fn replace_session(&self, session: Option<Session>) {
        *self.current.write() = session.map(Arc::new);
        self.generation.send_modify(|g| *g += 1);
    }

    /// A receiver woken on every session change and on close.
    pub fn generations(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    pub fn operation_timeout(&self) -> Duration {
        self.options.operation_timeout
    }
}

impl std::fmt::Debug for ZkRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkRegistry")
            .field("hosts", &self.shared.options.hosts)
            .field("namespace", &self.shared.namespace)
            .field("session", &self.shared.current())
            .field("closed", &self.shared.is_closed())
            .finish()
    }
}

impl ZkRegistry {
    /// Connects: opens a session (retrying per [`ZkOptions::retry`]), creates the namespace if
    /// missing, and checks that the credentials may write it.
    ///
    /// Errors: `Auth` for credentials the namespace's ACL rejects; `Backend { retryable: true, source: None }`
    /// when no server answered in time (the message names every host with what a TCP
    /// connection to it finds, the attempts and the time spent); `InvalidPath` for a bad
    /// namespace. Each attempt is announced (info) and each failure reported (warn) through
    /// `tracing`.
    pub async fn connect(options: ZkOptions) -> Result<Self> {
        options.validate().map_err(|e| RegistryError::Backend {
            backend: error::BACKEND,
            op: Op::Connect,
            path: options.namespace.clone(),
            message: e.to_string(),
            retryable: false,
            source: None,
        })?;
        let first =
            session::open_with_retry(&options, Some(options.retry.attempts), || false).await?;
        let state = first.root.state_watcher();
        let lease = LeaseClock::new(options.lease_margin);
        lease.start(first.id, first.root.session_timeout(), first.opened_at);
        let (generation, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            namespace: options.namespace_path(),
            options,
            bus: SessionBus::new(first.id),
            current: parking_lot::RwLock::new(Some(Arc::new(first))),
            generation,
            closed: AtomicBool::new(false),
            watches: WatchHub::default(),
            lease,
        });
        tokio::spawn(session::supervise(Arc::downgrade(&shared), state));
        tokio::spawn(session::probe(Arc::downgrade(&shared)));
        Ok(ZkRegistry { shared })
    }

    /// Parses a `zk://` URL ([`ZkOptions::from_url`]) and connects.
    pub async fn connect_url(url: &str) -> Result<Self> {
        let options = ZkOptions::from_url(url).map_err(|e| RegistryError::Backend {
            backend: error::BACKEND,
            op: Op::Connect,
            path: String::new(),
            message: e.to_string(),
            retryable: false,
            source: None,
        })?;
        Self::connect(options).await
    }

    /// The options this client was made with.
    pub fn options(&self) -> &ZkOptions {
        &self.shared.options
    }

    /// The id of the session in use (`None` while a new one is being opened or after close).
    pub fn session_id(&self) -> Option<u64> {
        self.shared.current().map(|s| s.id)
    }

    /// The ZooKeeper session in use, id and password included. For fault injection in tests
    /// (a second connection with the same session can close it: a real expiry) and for tools;
    /// anyone holding it can act as this client.
    pub fn zk_session(&self) -> Option<zk::SessionInfo> {
        self.shared.current().map(|s| s.root.session().clone())
    }

    /// The negotiated session timeout of the session in use: what the server granted, within
    /// its `[2, 20] × tickTime` bounds.
    pub fn negotiated_session_timeout(&self) -> Option<Duration> {
        self.shared.current().map(|s| s.root.session_timeout())
    }

    /// The session for an operation, or the error it fails with right away: `Closed`, or
    /// `ConnectionLoss` while the link is down, the session is lost (or its lease deadline
    /// passed), or a new session is being opened (retryable conditions the session stream
    /// reports).
    fn session(&self, op: Op, at: &str) -> Result<Arc<Session>> {
        if self.shared.is_closed() {
            return Err(RegistryError::Closed { op, path: at.to_owned() });
        }
        // The lease deadline itself, not only `Lost`: a process paused past it may run this
        // before the supervising task has looked, and the session may still live on the server.
        let lapsed = self.shared.lease.passed(tokio::time::Instant::now());
        match self.shared.current() {
            // A lost session is never used again (it is closed once the server is reachable).
            Some(s) if !s.suspended() && !self.shared.bus.is_lost() && !lapsed => Ok(s),
            _ => Err(RegistryError::ConnectionLoss { op, path: at.to_owned() }),
        }
    }

    /// Runs a ZooKeeper call under the operation timeout and maps its error.
    pub(crate) async fn bounded<T>(
        &self,
        at: At<'_>,
        call: impl Future<Output = std::result::Result<T, zk::Error>>,
    ) -> Result<T> {
        let limit = self.shared.operation_timeout();
        match tokio::time::timeout(limit, call).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(self.map_err(e, at)),
            Err(_) => Err(error::timeout(at.op, at.path, limit)),
        }
    }

    pub(crate) fn map_err(&self, e: zk::Error, at: At<'_>) -> RegistryError {
        if self.shared.is_closed() {
            return RegistryError::Closed { op: at.op, path: at.path.to_owned() };
        }
        error::map(e, at)
    }

    /// After a successful write: lets every watch of this client catch up with the events the
    /// write caused, so a subscriber reads its own writes (see the crate docs, "Watches").
    async fn settle(&self) {
        self.shared.watches.barrier(self.shared.operation_timeout()).await;
    }

    /// Before a write of `paths`: the watches hold their events back until it answers (see
    /// [`crate::watch`]).
    fn ticket(&self, paths: Vec<String>) -> WriteTicket<'_> {
        self.shared.watches.begin(paths)
    }

    /// After a write that committed: the watches emit its events, from `facts` where they can.
    async fn settled(&self, ticket: WriteTicket<'_>, facts: Vec<Fact>) {
        ticket.settle(facts, self.shared.operation_timeout()).await;
    }

    fn acls(&self) -> zk::Acls<'static> {
        crate::acl::for_nodes(self.shared.options.digest.is_some())
    }
}

/// Creates `at` (one attempt per missing-parent round), making missing parents as persistent
/// nodes. All parents are sent at once: one round trip however deep the path.
async fn create_with_parents(
    client: &zk::Client,
    at: &str,
    data: &[u8],
    options: &zk::CreateOptions<'_>,
    dir: &zk::CreateOptions<'_>,
) -> std::result::Result<(zk::Stat, zk::CreateSequence), zk::Error> {
    let mut rounds = 0;
    loop {
        match client.create(at, data, options).await {
            Ok(created) => return Ok(created),
            Err(zk::Error::NoNode) if rounds < CREATE_ATTEMPTS => rounds += 1,
            Err(e) => return Err(e),
        }
        let parents: Vec<_> = path::ancestors(at).map(|p| client.create(p, b"", dir)).collect();
        for res in join_all(parents).await {
            match res {
                Ok(_) | Err(zk::Error::NodeExists) => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// Every path of the subtree at `root`, level by level from the top; empty if `root` is missing.
async fn subtree_levels(
    client: &zk::Client,
    root: &str,
) -> std::result::Result<Vec<Vec<String>>, zk::Error> {
    let mut levels: Vec<Vec<String>> = Vec::new();
    let mut level = vec![root.to_owned()];
    while !level.is_empty() {
        let listings = join_all(level.iter().map(|p| client.list_children(p))).await;
        let mut next = Vec::new();
        let mut present = Vec::new();
        for (p, listing) in level.into_iter().zip(listings) {
            match listing {
                Ok(children) => {
                    next.extend(children.iter().map(|c| path::join(&p, c)));
                    present.push(p);
                }
                // Deleted under us: nothing left to delete there.
                Err(zk::Error::NoNode) => {}
                Err(e) => return Err(e),
            }
        }
        if !present.is_empty() {
            levels.push(present);
        }
        level = next;
    }
    Ok(levels)
}

#[async_trait]
impl CoordinatorRegistry for ZkRegistry {
    fn capability(&self) -> Capability {
        let mut capability = Capability::new("zookeeper");
        // Events carry no data; it is read after the event, so changes made by other clients in
        // quick succession may arrive merged (see the crate docs, "Watches").
        capability.exact_watch = false;
        // A parent's sequence counter is its cversion, which every child create and delete
        // advances.
        capability.contiguous_sequence = false;
        capability.acl = self.shared.options.digest.is_some();
        // One `multi` request; the scheduler also keeps a combined one under 256 KiB, well
        // within the server's default packet limit (jute.maxbuffer, 1 MiB).
        capability.txn_batch_ops = 1024;
        capability
    }

    async fn create(&self, at: &str, data: &[u8], mode: CreateMode) -> Result<String> {
        path::validate_node(at)?;
        check_size(Op::Create, at, data)?;
        let s = self.session(Op::Create, at)?;
        let acls = self.acls();
        let options = node::mode(mode).with_acls(acls);
        let dir = zk::CreateMode::Persistent.with_acls(acls);
        // A sequential name is the server's to pick: its event is read.
        let named = !mode.is_sequential();
        let ticket = self.ticket(if named { vec![at.to_owned()] } else { Vec::new() });
        let (stat, sequence) = self
            .bounded(At::new(Op::Create, at), create_with_parents(&s.ns, at, data, &options, &dir))
            .await?;
        let facts =
            if named { Fact::written(at, 1, data, stat).into_iter().collect() } else { Vec::new() };
        self.settled(ticket, facts).await;
        Ok(node::created_path(at, mode, sequence))
    }

    async fn get(&self, at: &str) -> Result<Option<Node>> {
        path::validate(at)?;
        let s = self.session(Op::Get, at)?;
        let read = self
            .bounded(At::new(Op::Get, at), async {
                match s.ns.get_data(at).await {
                    Ok((data, stat)) => Ok(Some(node::node(at, data, &stat))),
                    Err(zk::Error::NoNode) => Ok(None),
                    Err(e) => Err(e),
                }
            })
            .await?;
        Ok(read)
    }

    async fn set(&self, at: &str, data: &[u8], expected: Option<Version>) -> Result<Version> {
        path::validate_node(at)?;
        check_size(Op::Set, at, data)?;
        let version = node::expected(Op::Set, at, expected)?;
        let s = self.session(Op::Set, at)?;
        let ticket = self.ticket(vec![at.to_owned()]);
        let stat = self
            .bounded(At::new(Op::Set, at).expecting(expected), s.ns.set_data(at, data, version))
            .await?;
        self.settled(ticket, Fact::written(at, 1, data, stat).into_iter().collect()).await;
        Ok(node::version_from_zk(stat.version))
    }

    async fn delete(&self, at: &str, expected: Option<Version>) -> Result<()> {
        path::validate_node(at)?;
        let version = node::expected(Op::Delete, at, expected)?;
        let s = self.session(Op::Delete, at)?;
        let ticket = self.ticket(vec![at.to_owned()]);
        self.bounded(At::new(Op::Delete, at).expecting(expected), s.ns.delete(at, version)).await?;
        self.settled(ticket, vec![Fact::deleted(at, 1)]).await;
        Ok(())
    }

    async fn exists(&self, at: &str) -> Result<bool> {
        path::validate(at)?;
        let s = self.session(Op::Exists, at)?;
        let stat = self.bounded(At::new(Op::Exists, at), s.ns.check_stat(at)).await?;
        Ok(stat.is_some())
    }

    async fn children(&self, at: &str) -> Result<Vec<String>> {
        path::validate(at)?;
        let s = self.session(Op::Children, at)?;
        let mut names = self.bounded(At::new(Op::Children, at), s.ns.list_children(at)).await?;
        // ZooKeeper lists children in hash order; the contract sorts by bytes.
        names.sort_unstable();
        Ok(names)
    }

    async fn delete_recursive(&self, at: &str) -> Result<()> {
        path::validate_node(at)?;
        let s = self.session(Op::DeleteRecursive, at)?;
        let levels =
            self.bounded(At::new(Op::DeleteRecursive, at), subtree_levels(&s.ns, at)).await?;
        // Deepest level first; the nodes of one level go out together.
        for level in levels.iter().rev() {
            let deletes = join_all(level.iter().map(|p| s.ns.delete(p, None)));
            let results = self.bounded(At::new(Op::DeleteRecursive, at), async {
                Ok::<_, zk::Error>(deletes.await)
            });
            for (p, res) in level.iter().zip(results.await?) {
                match res {
                    Ok(()) | Err(zk::Error::NoNode) => {}
                    Err(e) => {
                        self.settle().await;
                        return Err(self.map_err(e, At::new(Op::DeleteRecursive, p)));
                    }
                }
            }
        }
        self.settle().await;
        Ok(())
    }

    async fn transaction(&self, ops: Vec<TxnOp>) -> Result<Vec<TxnResult>> {
        crate::txn::check(&ops)?;
        let first = ops.first().map_or(path::ROOT, TxnOp::path);
        let s = self.session(Op::Transaction, first)?;
        let ticket = self.ticket(crate::txn::written_paths(&ops));
        let (results, facts) = crate::txn::commit(self, &s, &ops, self.acls()).await?;
        if !results.is_empty() {
            self.settled(ticket, facts).await;
        }
        Ok(results)
    }

    async fn watch_scope(&self, scope: WatchScope) -> Result<WatchStream> {
        scope.validate()?;
        // Fails fast while the link is down, as every operation does.
        self.session(Op::Watch, crate::watch::label(&scope))?;
        crate::watch::subscribe(&self.shared, scope).await
    }

    fn session_events(&self) -> SessionEvents {
        self.shared.bus.subscribe()
    }

    async fn leader_latch(&self, at: &str, participant: &str) -> Result<Box<dyn LeaderLatch>> {
        let latch = SequentialLatch::join(Arc::new(self.clone()), at, participant).await?;
        Ok(Box::new(latch))
    }

    async fn lock(&self, at: &str, owner: &str, timeout: Duration) -> Result<Box<dyn MutexGuard>> {
        let guard = SequentialMutex::lock(Arc::new(self.clone()), at, owner, timeout).await?;
        Ok(Box::new(guard))
    }

    /// The server's clock: the mtime ZooKeeper stamps on a write of the namespace node (the
    /// leader's clock when it proposed the write). One write per call, invisible to the
    /// contract's readers (see the crate docs, "Registry time").
    async fn registry_time(&self) -> Result<i64> {
        let s = self.session(Op::Time, path::ROOT)?;
        let namespace = self.shared.namespace.as_str();
        let stat = self
            .bounded(At::new(Op::Time, path::ROOT), s.root.set_data(namespace, b"", None))
            .await?;
        Ok(stat.mtime)
    }

    async fn close(&self) -> Result<()> {
        if self.shared.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let session = self.shared.current.write().take();
        self.shared.generation.send_modify(|g| *g += 1);
        self.shared.bus.publish(shardcron_core::registry::SessionEvent::Closed);
        let Some(session) = session else { return Ok(()) };
        let state = session.root.state_watcher();
        // The session closes (ephemerals deleted) once every clone of its ZooKeeper client is
        // gone: ours now, those of watch tasks and in-flight operations as they notice.
        drop(session);
        let limit = self.shared.operation_timeout();
        if session::await_end(state, limit).await {
            Ok(())
        } else {
            Err(error::timeout(Op::Close, path::ROOT, limit))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn bad_options_fail_before_any_io() {
        let err = ZkRegistry::connect(ZkOptions::new("127.0.0.1:1", "/")).await.unwrap_err();
        assert!(err.to_string().contains("a namespace is required"), "{err}");
        let err = ZkRegistry::connect_url("zk://127.0.0.1:1").await.unwrap_err();
        assert!(err.to_string().contains("expected zk://host:port"), "{err}");
    }

    #[tokio::test]
    async fn unreachable_servers_fail_within_the_connect_timeout() {
        let options = ZkOptions::new("127.0.0.1:1", "/ns")
            .connect_timeout(Duration::from_millis(300))
            .retry(crate::RetryPolicy {
                base: Duration::from_millis(10),
                max: Duration::from_millis(10),
                attempts: 2,
            });
        let started = std::time::Instant::now();
        let err = ZkRegistry::connect(options).await.unwrap_err();
        assert!(err.is_retryable(), "{err}");
        assert!(err.to_string().contains("127.0.0.1:1"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    }
}
