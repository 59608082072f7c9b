//! What the watch feed of one client shares with the client's subscriptions and writes.
//!
//! - **The feed.** One task per client follows every ZooKeeper watch the client's
//!   subscriptions need (see [`super`]); it is started by the first subscription and lives
//!   until the client closes. While it watches nothing, writes do not wait for it.
//! - **Barriers.** A write that has no [`WriteTicket`] (a sequential create, a recursive
//!   delete) asks the feed to catch up with what it has received before the write returns.
//! - **Write tickets.** A write of this client opens a ticket naming the paths it writes
//!   *before* it is sent. ZooKeeper sends a session the events of its write before the answer,
//!   so while the ticket is open a feed holds back the events of those paths; when the write
//!   commits, the ticket carries what the write left on each path (the data sent, the stat
//!   ZooKeeper answered with) as [`Fact`]s, and a feed whose held events on a path are exactly
//!   the write's own uses the fact instead of reading the node. A write that fails, times out
//!   or is dropped closes its ticket without facts, and the held events are read as usual.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use shardcron_core::registry::{Result, ScopeChange, WatchEvent, WatchScope};
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::oneshot;
use zookeeper_client as zk;

/// What a feed is asked to do, through its link.
#[derive(Debug)]
pub(crate) enum Signal {
    /// Catch up with every event received so far, then answer.
    Barrier(oneshot::Sender<()>),
    /// Write `ticket` committed and left `facts`; catch up, then answer.
    Settled { ticket: u64, facts: Vec<Arc<Fact>>, ack: oneshot::Sender<()> },
    /// A write let go of its paths without facts for this feed (it did not commit, or the feed
    /// started after the facts went out): the events it held back are free to be read.
    Released,
    /// A new subscriber; answer once its opening snapshot is sent, or with why it cannot be.
    Join(Subscriber, oneshot::Sender<Result<()>>),
    /// Subscriber `id` dropped its stream.
    Left(u64),
    /// Change subscriber `id`'s scope in place; answer once its `Rescoped` event is sent, or
    /// with why it cannot be (its scope then stays as it was).
    Rescope(u64, ScopeChange, oneshot::Sender<Result<()>>),
}

/// One stream of the feed: the events `scope` covers.
#[derive(Debug)]
pub(crate) struct Subscriber {
    pub id: u64,
    pub scope: WatchScope,
    /// The generation of the last scope change applied ([`ScopeChange::generation`]).
    pub generation: u64,
    pub out: UnboundedSender<WatchEvent>,
}

/// What a committed write of this client left on one path.
#[derive(Debug, Clone)]
pub(crate) struct Fact {
    pub path: String,
    /// The events the write caused on `path`: one per create, set or delete of it.
    pub events: usize,
    /// The data and stat it left, `None` when its last op on the path deleted the node.
    pub state: Option<(Vec<u8>, zk::Stat)>,
}

impl Fact {
    /// `state` from a create or set answer; `None` (no fact: the feed reads the node) when the
    /// server answered with no usable stat (ZOOKEEPER-4026, ZOOKEEPER-4667).
    pub fn written(path: &str, events: usize, data: &[u8], stat: zk::Stat) -> Option<Fact> {
        (!stat.is_invalid()).then(|| Fact {
            path: path.to_owned(),
            events,
            state: Some((data.to_vec(), stat)),
        })
    }

    pub fn deleted(path: &str, events: usize) -> Fact {
        Fact { path: path.to_owned(), events, state: None }
    }
}

/// The client's feed and open write tickets.
#[derive(Debug, Default)]
pub(crate) struct WatchHub {
    /// The link to the feed task, once started.
    feed: parking_lot::Mutex<Option<UnboundedSender<Signal>>>,
    /// The feed holds ZooKeeper watches (so writes must let it catch up).
    active: AtomicBool,
    /// Open tickets and the paths each one writes.
    open: parking_lot::Mutex<BTreeMap<u64, Vec<String>>>,
    ids: AtomicU64,
}

impl WatchHub {
    /// A fresh id for a ticket or a subscriber.
    pub fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::Relaxed)
    }

    /// The link to the client's feed, starting it (with `start`) if it is not running.
    pub fn feed(&self, start: impl FnOnce() -> UnboundedSender<Signal>) -> UnboundedSender<Signal> {
        let mut feed = self.feed.lock();
        match feed.as_ref() {
            Some(link) if !link.is_closed() => link.clone(),
            _ => {
                let link = start();
                *feed = Some(link.clone());
                link
            }
        }
    }

    /// The feed says whether it holds ZooKeeper watches.
    pub fn set_active(&self, active: bool) {
        self.active.store(active, Ordering::SeqCst);
    }

    /// The feed, when writes must let it catch up: it runs and holds watches.
    fn links(&self) -> Vec<UnboundedSender<Signal>> {
        if !self.active.load(Ordering::SeqCst) {
            return Vec::new();
        }
        self.feed.lock().iter().filter(|l| !l.is_closed()).cloned().collect()
    }

    /// Waits until the feed of this client has emitted the events it has received so far, at
    /// most `limit` (a feed that cannot catch up in time still emits its events later; the
    /// write that waits here has succeeded either way).
    pub async fn barrier(&self, limit: Duration) {
        let acks = self
            .links()
            .into_iter()
            .filter_map(|link| {
                let (tx, rx) = oneshot::channel();
                link.send(Signal::Barrier(tx)).ok().map(|()| rx)
            })
            .collect();
        wait(acks, limit).await;
    }

    /// Opens a ticket for a write of `paths`, to be sent next. Without watches there is nothing
    /// to hold back, and the ticket is a plain barrier.
    pub fn begin(&self, paths: Vec<String>) -> WriteTicket<'_> {
        if paths.is_empty() || self.links().is_empty() {
            return WriteTicket { hub: self, id: None };
        }
        let id = self.next_id();
        self.open.lock().insert(id, paths);
        WriteTicket { hub: self, id: Some(id) }
    }

    /// Whether a write of this client that the asking feed has not seen settle yet (it is not
    /// in `settled`) may still deliver events on `at`.
    pub fn holds(&self, at: &str, settled: &BTreeSet<u64>) -> bool {
        self.open
            .lock()
            .iter()
            .any(|(id, paths)| !settled.contains(id) && paths.iter().any(|p| p == at))
    }

    /// Keeps in `settled` only the tickets still open.
    pub fn retain_open(&self, settled: &mut BTreeSet<u64>) {
        if settled.is_empty() {
            return;
        }
        let open = self.open.lock();
        settled.retain(|id| open.contains_key(id));
    }

    fn close(&self, id: u64) {
        self.open.lock().remove(&id);
    }
}

/// An open write; see the module documentation. Dropped without [`settle`](Self::settle), it
/// closes as a write that did not commit.
#[derive(Debug)]
pub(crate) struct WriteTicket<'a> {
    hub: &'a WatchHub,
    id: Option<u64>,
}

impl WriteTicket<'_> {
    /// The write committed and left `facts`: lets the feed catch up (using the facts instead
    /// of reads where it can), at most `limit`, then closes the ticket.
    pub async fn settle(mut self, facts: Vec<Fact>, limit: Duration) {
        let Some(id) = self.id else {
            return self.hub.barrier(limit).await;
        };
        let facts: Vec<Arc<Fact>> = facts.into_iter().map(Arc::new).collect();
        let told = self.hub.links();
        let acks = told
            .iter()
            .filter_map(|link| {
                let (ack, rx) = oneshot::channel();
                let signal = Signal::Settled { ticket: id, facts: facts.clone(), ack };
                link.send(signal).ok().map(|()| rx)
            })
            .collect();
        wait(acks, limit).await;
        // Every feed has taken the facts (or missed its chance): the ticket holds nothing back.
        self.id = None;
        self.hub.close(id);
        // A feed started after the facts went out may hold events back for this ticket: wake it.
        for link in self.hub.links() {
            if !told.iter().any(|t| t.same_channel(&link)) {
                let _ = link.send(Signal::Released);
            }
        }
    }
}

impl Drop for WriteTicket<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            self.hub.close(id);
            for link in self.hub.links() {
                let _ = link.send(Signal::Released);
            }
        }
    }
}

async fn wait(acks: Vec<oneshot::Receiver<()>>, limit: Duration) {
    if acks.is_empty() {
        return;
    }
    if tokio::time::timeout(limit, join_all(acks)).await.is_err() {
        tracing::debug!(?limit, "a watch did not catch up with a write in time");
    }
}
