//! [`EtcdRegistry`]: the [`CoordinatorRegistry`] on etcd, and how each operation maps onto it.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{
    Certificate, Client, ConnectOptions, GetOptions, Identity, KvClient, LeaseClient, TlsOptions,
    Txn, TxnOp as EtcdOp, TxnOpResponse, WatchClient,
};
use parking_lot::Mutex;
use shardcron_core::handles::{Clock, SystemClock};
use shardcron_core::registry::lease::LeaseClock;
use shardcron_core::registry::recipes::{SequentialLatch, SequentialMutex};
use shardcron_core::registry::{
    path, Capability, CoordinatorRegistry, CreateMode, LeaderLatch, MutexGuard, Node, Op,
    RegistryError, Result, ScopeChange, SessionEvents, TxnOp, TxnResult, Version, WatchEvent,
    WatchScope, WatchScoper, WatchStream, MAX_DATA_SIZE,
};
use tokio::sync::{mpsc, watch};

use crate::error::{self, map, BACKEND};
use crate::keys::{decode_value, KeySpace};
use crate::options::{ConfigError, EtcdOptions};
use crate::session::{self, Session};
use crate::txn::{self, Outcome, RecursiveDelete, Step};
use crate::watch::{self as scope_watch, WatchTask};

/// gRPC messages the client accepts: a snapshot page or a watch response may hold many nodes of
/// up to 1 MiB each, far above tonic's 4 MiB default.
const MAX_MESSAGE: usize = 256 * 1024 * 1024;

/// HTTP/2 pings that detect a dead link under an idle connection. etcd refuses pings more often
/// than every 5 s (`--grpc-keepalive-min-time`).
const PING_INTERVAL: Duration = Duration::from_secs(10);
const PING_TIMEOUT: Duration = Duration::from_secs(5);

/// A registry client on etcd, with one session (lease) at a time.
///
/// Cheap to clone; clones are the same client (same session, same streams). Dropping the last
/// clone without [`close`](CoordinatorRegistry::close) is a crash as far as etcd can tell: the
/// keep-alives stop and the session's ephemeral nodes vanish when the lease TTL runs out.
#[derive(Clone)]
pub struct EtcdRegistry {
    inner: Arc<Shared>,
}

struct Shared {
    kv: KvClient,
    watch: WatchClient,
    lease: LeaseClient,
    keys: KeySpace,
    options: EtcdOptions,
    session: Session,
    /// `true` (or dropped) stops the keep-alive and watch tasks.
    shutdown: watch::Sender<bool>,
    /// The last registry time handed out, so that it never goes back.
    last_time: Mutex<i64>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
    }
}

impl fmt::Debug for EtcdRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdRegistry")
            .field("endpoints", &self.inner.options.endpoints)
            .field("namespace", &self.inner.keys.namespace())
            .field("lease", &self.inner.session.lease())
            .finish()
    }
}

impl EtcdRegistry {
    /// Connects, authenticates and opens a session (grants the first lease).
    ///
    /// Fails with `Auth` for wrong credentials (or missing ones on a server with authentication
    /// on), `Backend { retryable: true, source: None }` when no endpoint answers within the connect timeout
    /// (the message names every endpoint with what a TCP connection to it finds, and the time
    /// spent), and `Backend { retryable: false, source: None }` for unusable options (the message says which).
    /// Progress goes to `tracing` at info level.
    pub async fn connect(options: EtcdOptions) -> Result<Self> {
        let at = options.endpoint_urls().join(",");
        let config = |e: ConfigError| error::backend(Op::Connect, at.clone(), e.to_string(), false);
        options.validate().map_err(config)?;
        let keys = KeySpace::new(options.namespace.as_deref())?;
        let connect_options = etcd_connect_options(&options).map_err(config)?;
        let timeout = options.connect_timeout;
        let started = std::time::Instant::now();
        tracing::info!("connecting to etcd at {at} (up to {timeout:?})");
        match Self::open(options, keys, connect_options, &at).await {
            Ok(registry) => {
                tracing::info!("connected to etcd at {at}");
                Ok(registry)
            }
            Err(e) if e.is_retryable() => Err(unreachable(&at, started.elapsed(), &e).await),
            Err(e) => Err(e),
        }
    }

    /// [`connect`](Self::connect) after the checks of the options.
    async fn open(
        options: EtcdOptions,
        keys: KeySpace,
        connect_options: etcd_client::ConnectOptions,
        at: &str,
    ) -> Result<Self> {
        let at = at.to_owned();
        let timeout = options.connect_timeout;
        let connecting = Client::connect_with_balanced_channel(
            options.endpoint_urls(),
            Some(connect_options),
            crate::channel::WideWindows,
        );
        let client = match tokio::time::timeout(timeout, connecting).await {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => return Err(connect_error(e, &at, &options)),
            Err(_) => {
                return Err(RegistryError::Timeout { op: Op::Connect, path: at, after: timeout })
            }
        };
        let kv = client.kv_client().max_decoding_message_size(MAX_MESSAGE);
        let watch_client = client.watch_client().max_decoding_message_size(MAX_MESSAGE);
        let lease_client = client.lease_client();
        // etcd authenticates at `Client::connect` only when credentials are given, and grants
        // leases to anyone: a read of our namespace is what proves that this user may work
        // here, so missing credentials or a role without this prefix fail now, not later.
        let mut probing = kv.clone();
        let probe =
            probing.get(keys.subtree(path::ROOT), Some(GetOptions::new().with_count_only()));
        match tokio::time::timeout(timeout, probe).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(connect_error(e, &at, &options)),
            Err(_) => {
                return Err(RegistryError::Timeout { op: Op::Connect, path: at, after: timeout })
            }
        }
        let ttl = options.ttl_secs();
        let mut granting = lease_client.clone();
        let clock = LeaseClock::new(options.lease_margin);
        let sent = tokio::time::Instant::now();
        let lease = match tokio::time::timeout(timeout, granting.grant(ttl, None)).await {
            Ok(Ok(granted)) => {
                let granted_ttl = session::granted_ttl(granted.ttl());
                clock.start(session::session_id(granted.id()), granted_ttl, sent);
                granted.id()
            }
            Ok(Err(e)) => return Err(connect_error(e, &at, &options)),
            Err(_) => {
                return Err(RegistryError::Timeout { op: Op::Connect, path: at, after: timeout })
            }
        };
        let session = Session::new(lease, clock);
        let (shutdown, shutdown_rx) = watch::channel(false);
        tokio::spawn(session::run(lease_client.clone(), session.clone(), ttl, lease, shutdown_rx));
        tracing::debug!(endpoints = %at, namespace = keys.namespace(), lease, "etcd registry connected");
        Ok(EtcdRegistry {
            inner: Arc::new(Shared {
                kv,
                watch: watch_client,
                lease: lease_client,
                keys,
                options,
                session,
                shutdown,
                last_time: Mutex::new(0),
            }),
        })
    }

    /// The etcd lease id of the current session (`None` between an expiry and the next lease,
    /// and after close). Ephemeral nodes are attached to it; a later fencing token may use it.
    pub fn lease_id(&self) -> Option<i64> {
        self.inner.session.lease()
    }

    /// The options this client was connected with.
    pub fn options(&self) -> &EtcdOptions {
        &self.inner.options
    }

    /// Runs one operation: refuses it on a closed client, bounds it by the operation timeout,
    /// and wakes the session task when it found the lease gone.
    async fn guarded<T>(
        &self,
        op: Op,
        path: &str,
        work: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        if self.inner.session.is_closed() {
            return Err(RegistryError::Closed { op, path: path.to_owned() });
        }
        // A lost session is never used again; the new one comes with `Connected`. Checked
        // against the deadline itself: after a pause the keep-alive task may not have looked yet.
        self.inner.session.lapse_if_due();
        if self.inner.session.is_lost() {
            return Err(RegistryError::ConnectionLoss { op, path: path.to_owned() });
        }
        let after = self.inner.options.operation_timeout;
        let result = match tokio::time::timeout(after, work).await {
            Ok(result) => result,
            Err(_) => Err(RegistryError::Timeout { op, path: path.to_owned(), after }),
        };
        if let Err(e) = &result {
            let inner = e.transaction_failure().map_or(e, |(_, source)| source);
            if matches!(inner, RegistryError::SessionExpired { .. }) {
                self.inner.session.poke();
            }
        }
        result
    }

    /// Runs steps through the transaction engine with the current session's lease.
    async fn run(&self, steps: &[Step], op: Op, path: &str) -> Result<Outcome> {
        let lease = self.inner.session.lease();
        txn::run(&self.inner.kv, &self.inner.keys, steps, lease, op, path).await
    }

    /// Runs a single step; its failure is the plain error (not a transaction error).
    async fn single(&self, step: Step, op: Op, path: &str) -> Result<TxnResult> {
        let steps = [step];
        self.guarded(op, path, async {
            match self.run(&steps, op, path).await? {
                Ok(mut results) => results.pop().ok_or_else(|| {
                    error::backend(op, path.to_owned(), "empty engine result".into(), false)
                }),
                Err((_, e)) => Err(e),
            }
        })
        .await
    }
}

/// The etcd client options for ours.
fn etcd_connect_options(options: &EtcdOptions) -> std::result::Result<ConnectOptions, ConfigError> {
    let mut out = ConnectOptions::new()
        .with_connect_timeout(options.connect_timeout)
        .with_keep_alive(PING_INTERVAL, PING_TIMEOUT);
    if let Some(c) = &options.credentials {
        // etcd's simple tokens expire (5 min idle by default): re-authenticate transparently.
        out = out.with_user(c.user.clone(), c.password.clone()).with_auto_token_refresh(true);
    }
    if let Some(files) = &options.tls {
        let read = |p: &std::path::Path| {
            std::fs::read(p).map_err(|e| ConfigError::TlsFile {
                path: p.display().to_string(),
                reason: e.to_string(),
            })
        };
        let mut tls = TlsOptions::new();
        if let Some(ca) = &files.ca {
            tls = tls.ca_certificate(Certificate::from_pem(read(ca)?));
        }
        if let (Some(cert), Some(key)) = (&files.cert, &files.key) {
            tls = tls.identity(Identity::from_pem(read(cert)?, read(key)?));
        }
        if let Some(domain) = &files.domain {
            tls = tls.domain_name(domain.clone());
        }
        out = out.with_tls(tls);
    }
    Ok(out)
}

/// Adds who and where to an authentication failure at connect time.
/// The error of a connect that reached no endpoint in time: every endpoint and what TCP finds
/// there, the time spent, the last error and what to check.
async fn unreachable(endpoints: &str, spent: Duration, last: &RegistryError) -> RegistryError {
    let addresses: Vec<String> = endpoints.split(',').map(str::to_owned).collect();
    let probed = shardcron_core::registry::reachability::describe_addresses(&addresses, 2379).await;
    let last = match last {
        RegistryError::Backend { message, .. } => message.clone(),
        RegistryError::ConnectionLoss { .. } => "the connection failed".to_owned(),
        other => other.to_string(),
    };
    error::backend(
        Op::Connect,
        endpoints.to_owned(),
        format!(
            "could not reach etcd in {:.1} s; endpoints tried: {probed}; last error: {last}. \
             Check that etcd serves clients at these addresses (the URL's connect_timeout_ms \
             sets how long connecting may take)",
            spent.as_secs_f64()
        ),
        true,
    )
}

/// An error while connecting, mapped; a lost connection keeps the transport's own words
/// (refused, unresolvable host) for the message.
fn connect_error(e: etcd_client::Error, at: &str, options: &EtcdOptions) -> RegistryError {
    let detail = match &e {
        etcd_client::Error::GRpcStatus(status) => {
            format!("gRPC status {:?}: {}", status.code(), status.message())
        }
        other => error::full_message(other),
    };
    match explain_connect(map(e, Op::Connect, at), options) {
        RegistryError::ConnectionLoss { op, path } => error::backend(op, path, detail, true),
        other => other,
    }
}

fn explain_connect(e: RegistryError, options: &EtcdOptions) -> RegistryError {
    match e {
        RegistryError::Auth { op, path, reason } => {
            let who = options.credentials.as_ref().map_or_else(
                || "without credentials".to_owned(),
                |c| format!("as user {:?}", c.user),
            );
            RegistryError::Auth { op, path, reason: format!("connecting {who}: {reason}") }
        }
        other => other,
    }
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

/// Local checks of one transaction op, and the step it becomes.
fn to_step(op: TxnOp) -> Result<Step> {
    Ok(match op {
        TxnOp::Check { path, version } => {
            path::validate(&path)?;
            Step::Check { path, version }
        }
        TxnOp::Absent { path } => {
            path::validate(&path)?;
            Step::Absent { path }
        }
        TxnOp::Create { path, data, mode } => {
            path::validate_node(&path)?;
            check_size(Op::Create, &path, &data)?;
            Step::Create { path, data, mode, parents: false }
        }
        TxnOp::Set { path, data, version } => {
            path::validate_node(&path)?;
            check_size(Op::Set, &path, &data)?;
            Step::Set { path, data, version }
        }
        TxnOp::Delete { path, version } => {
            path::validate_node(&path)?;
            Step::Delete { path, version }
        }
    })
}

#[async_trait]
impl CoordinatorRegistry for EtcdRegistry {
    fn capability(&self) -> Capability {
        // Watches resume by revision (exact); counters move by one per sequential create.
        let mut capability = Capability::new(BACKEND);
        // A contract op takes up to three compares and two writes of the one-`Txn` plan, which
        // holds at most 128 of each (etcd's default `--max-txn-ops`, see `plan.rs`): 32 ops
        // stay within it, so a combined transaction is still one round trip.
        capability.txn_batch_ops = 32;
        // A compare on the node's key; and etcd catches up some watches of a stream later
        // than the others (see `watch.rs`): a view can show an entry behind the rest.
        capability.absent_check = true;
        capability.views_in_order = false;
        capability
    }

    async fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> Result<String> {
        path::validate_node(path)?;
        check_size(Op::Create, path, data)?;
        let step = Step::Create { path: path.to_owned(), data: data.to_vec(), mode, parents: true };
        match self.single(step, Op::Create, path).await? {
            TxnResult::Created { path } => Ok(path),
            other => Err(error::backend(Op::Create, path.to_owned(), format!("{other:?}"), false)),
        }
    }

    async fn get(&self, path: &str) -> Result<Option<Node>> {
        path::validate(path)?;
        self.guarded(Op::Get, path, async {
            if path == path::ROOT {
                return Ok(Some(Node { data: Vec::new(), version: 0, ephemeral: false }));
            }
            let mut kv = self.inner.kv.clone();
            let resp = kv
                .get(self.inner.keys.node(path), None)
                .await
                .map_err(|e| map(e, Op::Get, path))?;
            let Some(found) = resp.kvs().first() else { return Ok(None) };
            let (version, data) = decode_value(found.value()).ok_or_else(|| {
                error::backend(
                    Op::Get,
                    path.to_owned(),
                    "the key does not hold a shardcron node value".into(),
                    false,
                )
            })?;
            Ok(Some(Node { data: data.to_vec(), version, ephemeral: found.lease() != 0 }))
        })
        .await
    }

    async fn set(&self, path: &str, data: &[u8], expected: Option<Version>) -> Result<Version> {
        path::validate_node(path)?;
        check_size(Op::Set, path, data)?;
        let step = Step::Set { path: path.to_owned(), data: data.to_vec(), version: expected };
        match self.single(step, Op::Set, path).await? {
            TxnResult::Set { version } => Ok(version),
            other => Err(error::backend(Op::Set, path.to_owned(), format!("{other:?}"), false)),
        }
    }

    async fn delete(&self, path: &str, expected: Option<Version>) -> Result<()> {
        path::validate_node(path)?;
        let step = Step::Delete { path: path.to_owned(), version: expected };
        self.single(step, Op::Delete, path).await.map(|_| ())
    }

    async fn exists(&self, path: &str) -> Result<bool> {
        path::validate(path)?;
        self.guarded(Op::Exists, path, async {
            if path == path::ROOT {
                return Ok(true);
            }
            let mut kv = self.inner.kv.clone();
            let options = GetOptions::new().with_keys_only();
            let resp = kv
                .get(self.inner.keys.node(path), Some(options))
                .await
                .map_err(|e| map(e, Op::Exists, path))?;
            Ok(!resp.kvs().is_empty())
        })
        .await
    }

    async fn children(&self, path: &str) -> Result<Vec<String>> {
        path::validate(path)?;
        self.guarded(Op::Children, path, async {
            let keys = &self.inner.keys;
            // The node and its children index in one read, so both are of the same revision.
            let listing = GetOptions::new().with_prefix().with_keys_only();
            let mut ops = vec![EtcdOp::get(keys.children(path), Some(listing))];
            if path != path::ROOT {
                ops.push(EtcdOp::get(keys.node(path), Some(GetOptions::new().with_keys_only())));
            }
            let mut kv = self.inner.kv.clone();
            let resp =
                kv.txn(Txn::new().and_then(ops)).await.map_err(|e| map(e, Op::Children, path))?;
            let answers = resp.op_responses();
            let gets: Vec<_> = answers
                .iter()
                .filter_map(|a| if let TxnOpResponse::Get(g) = a { Some(g) } else { None })
                .collect();
            if path != path::ROOT && gets.get(1).is_none_or(|g| g.kvs().is_empty()) {
                return Err(RegistryError::NoNode { op: Op::Children, path: path.to_owned() });
            }
            let mut names: Vec<String> = gets
                .first()
                .map(|g| {
                    g.kvs()
                        .iter()
                        .filter_map(|kv| keys.child_name(path, kv.key()))
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            // etcd returns keys sorted by bytes already; sorting again costs nothing and makes
            // the contract's order independent of that.
            names.sort();
            Ok(names)
        })
        .await
    }

    async fn delete_recursive(&self, path: &str) -> Result<()> {
        path::validate_node(path)?;
        self.guarded(Op::DeleteRecursive, path, async {
            // Range deletes cover the whole subtree in every key family (see `keys`), so one
            // etcd transaction suffices whatever the subtree's size.
            let ops = RecursiveDelete::of(&self.inner.keys, path).ops();
            let mut kv = self.inner.kv.clone();
            kv.txn(Txn::new().and_then(ops))
                .await
                .map_err(|e| map(e, Op::DeleteRecursive, path))?;
            Ok(())
        })
        .await
    }

    async fn transaction(&self, ops: Vec<TxnOp>) -> Result<Vec<TxnResult>> {
        let mut steps = Vec::with_capacity(ops.len());
        for (index, op) in ops.into_iter().enumerate() {
            steps.push(
                to_step(op)
                    .map_err(|e| RegistryError::Transaction { index, source: Box::new(e) })?,
            );
        }
        let at = steps.first().map_or("", Step::path).to_owned();
        self.guarded(Op::Transaction, &at, async {
            if steps.is_empty() {
                return Ok(Vec::new());
            }
            self.run(&steps, Op::Transaction, &at)
                .await?
                .map_err(|(index, e)| RegistryError::Transaction { index, source: Box::new(e) })
        })
        .await
    }

    async fn watch_scope(&self, scope: WatchScope) -> Result<WatchStream> {
        scope.validate()?;
        let inner = &self.inner;
        let ranges = scope_watch::ranges(&scope);
        let label = scope.subtrees().iter().chain(scope.nodes()).next().map_or(path::ROOT, |p| p);
        let (stream, rev, nodes, early) = if ranges.is_empty() {
            self.guarded(Op::Watch, label, async { Ok(()) }).await?;
            (None, 0, BTreeMap::new(), Vec::new())
        } else {
            let opened = self
                .guarded(
                    Op::Watch,
                    label,
                    scope_watch::open(
                        &inner.watch,
                        &inner.kv,
                        &inner.keys,
                        &ranges.iter().collect::<Vec<_>>(),
                    ),
                )
                .await?;
            (Some(opened.stream), opened.rev, opened.nodes, opened.early)
        };
        let (tx, rx) = mpsc::unbounded_channel();
        // Cannot fail: the receiver is right here.
        let _ = tx.send(WatchEvent::Resync { nodes });
        let (requests_tx, requests) = mpsc::unbounded_channel();
        let scoper = EtcdScoper { requests: requests_tx, timeout: inner.options.operation_timeout };
        let task = WatchTask::new(
            inner.kv.clone(),
            inner.watch.clone(),
            inner.keys.clone(),
            ranges,
            tx,
            inner.session.clone(),
            inner.shutdown.subscribe(),
            inner.options.operation_timeout,
            rev,
            scope,
            requests,
        );
        tokio::spawn(task.run(stream, early));
        Ok(WatchStream::with_scoper(Receiver(rx), Some(Arc::new(scoper))))
    }

    fn session_events(&self) -> SessionEvents {
        self.inner.session.events()
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

    /// etcd has no clock API and stamps nothing with wall time, so this is the local clock,
    /// read after a round trip to the server (so that it fails like every other operation when
    /// etcd is unreachable) and never going back. See the crate README, "Registry time".
    async fn registry_time(&self) -> Result<i64> {
        self.guarded(Op::Time, "", async {
            let mut kv = self.inner.kv.clone();
            let probe = GetOptions::new().with_count_only();
            kv.get(self.inner.keys.subtree(path::ROOT), Some(probe))
                .await
                .map_err(|e| map(e, Op::Time, ""))?;
            let now = SystemClock.now_ms();
            let mut last = self.inner.last_time.lock();
            *last = (*last).max(now);
            Ok(*last)
        })
        .await
    }

    async fn close(&self) -> Result<()> {
        let inner = &self.inner;
        if inner.session.is_closed() {
            return Ok(());
        }
        let lease = inner.session.lease();
        inner.session.close();
        let _ = inner.shutdown.send(true);
        let Some(lease) = lease else { return Ok(()) };
        // Revoking deletes the session's ephemeral nodes now instead of a TTL from now.
        let mut client = inner.lease.clone();
        let after = inner.options.operation_timeout;
        match tokio::time::timeout(after, client.revoke(lease)).await {
            Ok(Ok(_)) => Ok(()),
            // Already gone (expired meanwhile): nothing left to delete.
            Ok(Err(e)) if error::is_lease_gone(&e) => Ok(()),
            Ok(Err(e)) => Err(map(e, Op::Close, "")),
            Err(_) => Err(RegistryError::Timeout { op: Op::Close, path: String::new(), after }),
        }
    }
}

/// An unbounded receiver as a stream of watch events; ends when the task drops its sender.
/// Changes a watch's scope through its task (see [`crate::watch`]).
#[derive(Debug)]
struct EtcdScoper {
    requests: mpsc::UnboundedSender<scope_watch::Rescope>,
    timeout: Duration,
}

#[async_trait]
impl WatchScoper for EtcdScoper {
    async fn rescope(&self, change: ScopeChange) -> Result<()> {
        change.validate()?;
        let at = change.label().to_owned();
        let closed = || RegistryError::Closed { op: Op::Watch, path: at.clone() };
        let (reply, replied) = tokio::sync::oneshot::channel();
        self.requests.send((change, reply)).map_err(|_| closed())?;
        // The task answers within about one timeout per step; three bound a task stuck
        // on a dead link (its own timeouts then end the wait first).
        match tokio::time::timeout(self.timeout * 3, replied).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(closed()),
            Err(_) => Err(RegistryError::Timeout {
                op: Op::Watch,
                path: at.to_owned(),
                after: self.timeout * 3,
            }),
        }
    }
}

struct Receiver(mpsc::UnboundedReceiver<WatchEvent>);

impl futures::Stream for Receiver {
    type Item = WatchEvent;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<WatchEvent>> {
        self.0.poll_recv(cx)
    }
}
