//! Subtree watches on ZooKeeper's persistent recursive watches (server 3.6+).
//!
//! A subscription is one task that owns a `PersistentWatcher` on the subtree and the view it
//! has shown its subscriber. ZooKeeper's events carry a path and a kind but no data, so the task
//! reads each node after its event and turns the answer into the contract's event:
//!
//! - The reads of one batch of events are sent together (one round trip), in event order.
//! - A read shows the node as it is *now*, which may be later than the event. The view keeps
//!   each node's `czxid` (which incarnation) and `mzxid` (which change), so a read that shows
//!   nothing new is dropped, and a node seen deleted and re-created comes out as `Deleted` then
//!   `Created`. Per node, versions only grow and nothing is reported twice; what can be lost is
//!   an intermediate state another client overwrote before the read (hence
//!   `Capability::exact_watch == false`).
//! - A deletion is confirmed with a read too, so a late `NodeDeleted` never removes a node the
//!   view already shows re-created.
//!
//! **Own writes are exact.** ZooKeeper sends a session the events a write caused before the
//! write's answer, and the client queues them for the watcher before it completes the write.
//! After every successful write, [`crate::ZkRegistry`] calls [`WatchHub::barrier`]: each task of
//! the client drains what its watcher holds, reads the nodes, emits, and only then lets the write
//! return. So the reads happen before the writer's next operation, a subscriber sees each of its
//! own client's changes with the data of that change, and a view fed by the watch already shows
//! a write when the write returns (read-your-writes, which ElasticJob lacked: #2194).
//!
//! **Gaps become resyncs.** Persistent watches lose the events of a connection loss
//! (ZOOKEEPER-4698), `zookeeper-client` 0.11.2 does not register them again after a reconnect,
//! and an expired session loses its watches. So after the link comes back the task registers
//! its watch again, re-reads the subtree and sends a `Resync`; after an expiry it subscribes
//! again on the new session and does the same. A read that fails for another reason (a timeout)
//! also ends in a resync, retried with backoff.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::future::{join_all, BoxFuture};
use futures::FutureExt;
use shardcron_core::registry::{path, Node, Op, Result, WatchEvent, WatchStream};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;
use zookeeper_client as zk;

use crate::client::{Shared, ZkRegistry};
use crate::error::At;
use crate::node;
use crate::session::Session;

/// The most events drained from a watcher in one batch (one round trip of reads).
const MAX_BATCH: usize = 512;

/// First pause before retrying a failed resync or re-subscription; doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// A request to catch up; answered once every event received before it has been emitted.
type Barrier = oneshot::Sender<()>;

/// The client's watch tasks, for [`WatchHub::barrier`].
#[derive(Debug, Default)]
pub(crate) struct WatchHub {
    links: parking_lot::Mutex<Vec<UnboundedSender<Barrier>>>,
}

impl WatchHub {
    fn link(&self) -> UnboundedReceiver<Barrier> {
        let (tx, rx) = unbounded_channel();
        self.links.lock().push(tx);
        rx
    }

    /// Waits until every watch task of this client has emitted the events it has received so
    /// far, at most `limit` (a task that cannot catch up in time still emits its events later;
    /// the write that waits here has succeeded either way).
    pub async fn barrier(&self, limit: Duration) {
        let acks: Vec<oneshot::Receiver<()>> = {
            let mut links = self.links.lock();
            links.retain(|link| !link.is_closed());
            links
                .iter()
                .filter_map(|link| {
                    let (tx, rx) = oneshot::channel();
                    link.send(tx).ok().map(|()| rx)
                })
                .collect()
        };
        if acks.is_empty() {
            return;
        }
        if tokio::time::timeout(limit, join_all(acks)).await.is_err() {
            tracing::debug!(?limit, "a watch did not catch up with a write in time");
        }
    }
}

/// What the subscriber was told about one node, and which ZooKeeper change that was.
#[derive(Debug, Clone)]
struct Seen {
    node: Node,
    /// The zxid that created this incarnation of the node.
    czxid: i64,
    /// The zxid of the last change shown.
    mzxid: i64,
}

impl Seen {
    fn new(at: &str, data: Vec<u8>, stat: &zk::Stat) -> Self {
        Seen { node: node::node(at, data, stat), czxid: stat.czxid, mzxid: stat.mzxid }
    }
}

/// Subscribes to the subtree at `root`: registers the persistent watch, sends the opening
/// snapshot, and hands both to a task. Errors of these first steps go to the caller.
pub(crate) async fn subscribe(
    registry: &ZkRegistry,
    shared: &Arc<Shared>,
    session: Arc<Session>,
    root: &str,
) -> Result<WatchStream> {
    let at = At::new(Op::Watch, root);
    let (out, mut rx) = unbounded_channel();
    let mut task = WatchTask {
        shared: Arc::downgrade(shared),
        root: root.to_owned(),
        limit: shared.operation_timeout(),
        out,
        barriers: shared.watches.link(),
        generations: shared.generations(),
        view: BTreeMap::new(),
        link_lost: false,
        need_resync: false,
        retry_at: None,
        failures: 0,
    };
    let watcher =
        registry.bounded(at, session.ns.watch(root, zk::AddWatchMode::PersistentRecursive)).await?;
    let snapshot = registry.bounded(at, snapshot(&session.ns, root)).await?;
    task.install(snapshot);
    tokio::spawn(task.run(Some((session, watcher))));
    Ok(WatchStream::new(futures::stream::poll_fn(move |cx| rx.poll_recv(cx))))
}

/// Reads the subtree at `root`, level by level; each level's reads go out together.
async fn snapshot(
    client: &zk::Client,
    root: &str,
) -> std::result::Result<BTreeMap<String, Seen>, zk::Error> {
    let mut nodes = BTreeMap::new();
    let mut level = vec![root.to_owned()];
    while !level.is_empty() {
        let reads = join_all(level.iter().map(|p| {
            // Both requests are sent here, before anything is awaited.
            let data = client.get_data(p);
            let children = client.list_children(p);
            async move { (data.await, children.await) }
        }))
        .await;
        let mut next = Vec::new();
        for (p, (data, children)) in level.iter().zip(reads) {
            match data {
                Ok((data, stat)) => {
                    nodes.insert(p.clone(), Seen::new(p, data, &stat));
                }
                // Deleted between the parent's listing and this read.
                Err(zk::Error::NoNode) => continue,
                Err(zk::Error::NoAuth) => {
                    tracing::warn!(path = %p, "watch: node unreadable with these credentials; left out");
                    continue;
                }
                Err(e) => return Err(e),
            }
            match children {
                Ok(names) => next.extend(names.iter().map(|c| path::join(p, c))),
                Err(zk::Error::NoNode) | Err(zk::Error::NoAuth) => {}
                Err(e) => return Err(e),
            }
        }
        level = next;
    }
    Ok(nodes)
}

/// How a run of the event loop ended.
enum Next {
    /// The subscriber is gone or the client closed: end the task.
    Stop,
    /// The session ended or changed: subscribe again on the current one.
    Resubscribe,
}

/// A read sent for one event.
enum Read {
    Data(std::result::Result<(Vec<u8>, zk::Stat), zk::Error>),
    Stat(std::result::Result<Option<zk::Stat>, zk::Error>),
}

struct WatchTask {
    shared: Weak<Shared>,
    root: String,
    limit: Duration,
    out: UnboundedSender<WatchEvent>,
    barriers: UnboundedReceiver<Barrier>,
    generations: watch::Receiver<u64>,
    /// What the subscriber holds, by path.
    view: BTreeMap<String, Seen>,
    /// The link is down: reads would wait for it, and events are being lost.
    link_lost: bool,
    /// The view may miss changes: send a resync as soon as reads work.
    need_resync: bool,
    /// When to try the pending resync again after a failure.
    retry_at: Option<Instant>,
    failures: u32,
}

impl WatchTask {
    async fn run(mut self, mut first: Option<(Arc<Session>, zk::PersistentWatcher)>) {
        loop {
            let (session, watcher) = match first.take() {
                Some(established) => established,
                None => match self.establish().await {
                    Some(established) => established,
                    None => return,
                },
            };
            match self.follow(session, watcher).await {
                Next::Stop => return,
                Next::Resubscribe => {}
            }
        }
    }

    /// Subscribes on the current session and resyncs; waits and retries until that works.
    /// `None` when the task should end.
    async fn establish(&mut self) -> Option<(Arc<Session>, zk::PersistentWatcher)> {
        loop {
            let current = {
                let shared = self.shared.upgrade()?;
                if shared.is_closed() {
                    return None;
                }
                shared.current()
            };
            let Some(session) = current else {
                // No session while a new one is being opened: the generation bump wakes us.
                self.idle(None).await?;
                continue;
            };
            let attempt = async {
                let watcher =
                    session.ns.watch(&self.root, zk::AddWatchMode::PersistentRecursive).await?;
                let nodes = snapshot(&session.ns, &self.root).await?;
                Ok::<_, zk::Error>((watcher, nodes))
            };
            match tokio::time::timeout(self.limit, attempt).await {
                Ok(Ok((watcher, nodes))) => {
                    self.failures = 0;
                    self.install(nodes);
                    if self.out.is_closed() {
                        return None;
                    }
                    return Some((session, watcher));
                }
                Ok(Err(e)) => {
                    tracing::debug!(root = %self.root, error = %e, "watch: re-subscribing failed")
                }
                Err(_) => tracing::debug!(root = %self.root, "watch: re-subscribing timed out"),
            }
            drop(session);
            let pause = self.backoff();
            self.idle(Some(pause)).await?;
        }
    }

    /// Waits for a session change, a pause to run out, or the end; answers barriers meanwhile
    /// (there is nothing to catch up with while not subscribed). `None` when the task should end.
    async fn idle(&mut self, pause: Option<Duration>) -> Option<()> {
        let sleep = async {
            match pause {
                Some(pause) => tokio::time::sleep(pause).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                biased;
                changed = self.generations.changed() => return changed.ok(),
                () = self.out.closed() => return None,
                barrier = self.barriers.recv() => {
                    let _ = barrier?.send(());
                }
                () = &mut sleep => return Some(()),
            }
        }
    }

    /// Follows one subscription until its session ends, the client closes or the subscriber
    /// leaves.
    async fn follow(&mut self, session: Arc<Session>, mut watcher: zk::PersistentWatcher) -> Next {
        self.link_lost = false;
        loop {
            let retry_at = self.retry_at;
            let step = tokio::select! {
                biased;
                changed = self.generations.changed() => {
                    if changed.is_err() {
                        return Next::Stop;
                    }
                    match self.shared.upgrade() {
                        None => return Next::Stop,
                        Some(shared) if shared.is_closed() => return Next::Stop,
                        Some(shared) => match shared.current() {
                            Some(current) if current.id == session.id => continue,
                            _ => return Next::Resubscribe,
                        },
                    }
                }
                () = self.out.closed() => return Next::Stop,
                barrier = self.barriers.recv() => {
                    let Some(barrier) = barrier else { return Next::Stop };
                    let step = self.catch_up(&session, &mut watcher, None).await;
                    let _ = barrier.send(());
                    step
                }
                event = watcher.changed() => self.catch_up(&session, &mut watcher, Some(event)).await,
                () = sleep_until(retry_at), if retry_at.is_some() => {
                    self.retry_at = None;
                    self.resync(&session, &mut watcher).await
                }
            };
            if let Some(next) = step {
                return next;
            }
        }
    }

    /// Takes `first` and every event already waiting in the watcher, and emits what they
    /// changed. `Some` when the loop must end.
    async fn catch_up(
        &mut self,
        session: &Session,
        watcher: &mut zk::PersistentWatcher,
        first: Option<zk::WatchedEvent>,
    ) -> Option<Next> {
        let mut batch: Vec<zk::WatchedEvent> = first.into_iter().collect();
        // Polling once more after a final session state would panic inside the client.
        while batch.len() < MAX_BATCH && !batch.last().is_some_and(is_final) {
            match watcher.changed().now_or_never() {
                Some(event) => batch.push(event),
                None => break,
            }
        }
        let mut nodes = Vec::new();
        for event in batch {
            if event.event_type != zk::EventType::Session {
                nodes.push(event);
                continue;
            }
            if let Some(next) = self.apply(session, std::mem::take(&mut nodes)).await {
                return Some(next);
            }
            match event.session_state {
                zk::SessionState::Disconnected => self.link_lost = true,
                zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                    if self.link_lost {
                        // Events of the gap may be lost (ZOOKEEPER-4698).
                        self.link_lost = false;
                        self.need_resync = true;
                    }
                }
                // Expired, closed: the watch died with the session.
                _ => return Some(Next::Resubscribe),
            }
        }
        if let Some(next) = self.apply(session, nodes).await {
            return Some(next);
        }
        if self.need_resync && !self.link_lost && self.retry_at.is_none() {
            return self.resync(session, watcher).await;
        }
        None
    }

    /// Reads the nodes of a run of node events (all requests at once) and emits the changes.
    async fn apply(&mut self, session: &Session, events: Vec<zk::WatchedEvent>) -> Option<Next> {
        // The namespace node itself only changes for registry time (see `node::node`).
        let events: Vec<_> = events.into_iter().filter(|e| e.path != path::ROOT).collect();
        if events.is_empty() {
            return None;
        }
        if self.link_lost || self.need_resync {
            // Reads would wait for the link; the coming resync covers these events.
            self.need_resync = true;
            return None;
        }
        let reads: Vec<BoxFuture<'_, Read>> = events
            .iter()
            .map(|e| match e.event_type {
                zk::EventType::NodeDeleted => {
                    session.ns.check_stat(&e.path).map(Read::Stat).boxed()
                }
                _ => session.ns.get_data(&e.path).map(Read::Data).boxed(),
            })
            .collect();
        let Ok(reads) = tokio::time::timeout(self.limit, join_all(reads)).await else {
            tracing::debug!(root = %self.root, "watch: reads timed out; resyncing");
            self.need_resync = true;
            return None;
        };
        for (event, read) in events.iter().zip(reads) {
            let emitted = match read {
                Read::Data(Ok((data, stat))) => self.on_node(&event.path, data, &stat),
                Read::Stat(Ok(stat)) => self.on_absent_or(&event.path, stat.as_ref()),
                // Gone again already: its `NodeDeleted` follows.
                Read::Data(Err(zk::Error::NoNode)) => Vec::new(),
                Read::Data(Err(zk::Error::NoAuth)) | Read::Stat(Err(zk::Error::NoAuth)) => {
                    tracing::warn!(path = %event.path, "watch: node unreadable with these credentials; skipped");
                    Vec::new()
                }
                Read::Data(Err(e)) | Read::Stat(Err(e)) => {
                    tracing::debug!(root = %self.root, error = %e, "watch: a read failed; resyncing");
                    self.need_resync = true;
                    return None;
                }
            };
            for ev in emitted {
                if self.out.send(ev).is_err() {
                    return Some(Next::Stop);
                }
            }
        }
        None
    }

    /// A node read after a created/changed event: what changed since the view.
    fn on_node(&mut self, at: &str, data: Vec<u8>, stat: &zk::Stat) -> Vec<WatchEvent> {
        let fresh = Seen::new(at, data, stat);
        let node = fresh.node.clone();
        match self.view.get(at) {
            None => {
                self.view.insert(at.to_owned(), fresh);
                vec![WatchEvent::Created { path: at.to_owned(), node }]
            }
            Some(seen) if seen.czxid == fresh.czxid => {
                if fresh.mzxid > seen.mzxid {
                    self.view.insert(at.to_owned(), fresh);
                    vec![WatchEvent::Changed { path: at.to_owned(), node }]
                } else {
                    // Already shown (an earlier read got ahead of this event).
                    Vec::new()
                }
            }
            Some(seen) if fresh.czxid > seen.czxid => {
                // Deleted and re-created before the read: both happened.
                self.view.insert(at.to_owned(), fresh);
                vec![
                    WatchEvent::Deleted { path: at.to_owned() },
                    WatchEvent::Created { path: at.to_owned(), node },
                ]
            }
            Some(_) => Vec::new(),
        }
    }

    /// A deletion event, confirmed by a read: `stat` is the node now, if any.
    fn on_absent_or(&mut self, at: &str, stat: Option<&zk::Stat>) -> Vec<WatchEvent> {
        let Some(seen) = self.view.get(at) else { return Vec::new() };
        let gone = match stat {
            None => true,
            // Re-created since: the incarnation the view shows is gone; a created event for
            // the new one follows.
            Some(now) => now.czxid > seen.czxid,
        };
        if gone {
            self.view.remove(at);
            vec![WatchEvent::Deleted { path: at.to_owned() }]
        } else {
            Vec::new()
        }
    }

    /// Registers the watch again, re-reads the subtree and sends it as a resync; on failure,
    /// schedules another try.
    ///
    /// Registering again is not redundant: `zookeeper-client` 0.11.2 does not restore persistent
    /// watches when it reconnects (its `resend_watches` never sends the persistent kinds), so
    /// after a reconnect the server knows no watch for us. The new watcher replaces the old one
    /// before the snapshot is read, so no change falls between the two.
    async fn resync(
        &mut self,
        session: &Session,
        watcher: &mut zk::PersistentWatcher,
    ) -> Option<Next> {
        let attempt = async {
            let fresh = session.ns.watch(&self.root, zk::AddWatchMode::PersistentRecursive).await?;
            let nodes = snapshot(&session.ns, &self.root).await?;
            Ok::<_, zk::Error>((fresh, nodes))
        };
        match tokio::time::timeout(self.limit, attempt).await {
            Ok(Ok((fresh, nodes))) => {
                // Events still queued in the old watcher predate the snapshot.
                *watcher = fresh;
                self.need_resync = false;
                self.failures = 0;
                self.install(nodes);
                if self.out.is_closed() {
                    return Some(Next::Stop);
                }
            }
            Ok(Err(zk::Error::SessionExpired)) | Ok(Err(zk::Error::ClientClosed)) => {
                return Some(Next::Resubscribe)
            }
            Ok(Err(e)) => {
                tracing::debug!(root = %self.root, error = %e, "watch: resync failed; retrying");
                self.retry_at = Some(Instant::now() + self.backoff());
            }
            Err(_) => {
                tracing::debug!(root = %self.root, "watch: resync timed out; retrying");
                self.retry_at = Some(Instant::now() + self.backoff());
            }
        }
        None
    }

    /// Replaces the view with a snapshot and sends it.
    fn install(&mut self, nodes: BTreeMap<String, Seen>) {
        let shown = nodes.iter().map(|(p, seen)| (p.clone(), seen.node.clone())).collect();
        self.view = nodes;
        self.need_resync = false;
        // A closed channel means the subscriber left; the loop notices through `closed()`.
        let _ = self.out.send(WatchEvent::Resync { nodes: shown });
    }

    fn backoff(&mut self) -> Duration {
        self.failures = self.failures.saturating_add(1);
        let factor = 1u32.checked_shl(self.failures - 1).unwrap_or(u32::MAX);
        FIRST_PAUSE.saturating_mul(factor).min(MAX_PAUSE)
    }
}

fn is_final(event: &zk::WatchedEvent) -> bool {
    event.event_type == zk::EventType::Session && event.session_state.is_terminated()
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
