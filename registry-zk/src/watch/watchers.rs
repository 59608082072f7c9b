//! The ZooKeeper watchers of a feed: one `PersistentWatcher` per watched entry, and a way to
//! take their events without polling every one of them each time.
//!
//! Each watcher is polled with a waker of its own that queues the watcher's id when its channel
//! receives something, so taking events costs the watchers that have some, however many there
//! are. Taking until nothing is queued drains every watcher that had received an event before
//! the call: the feed relies on that (an answer that arrived before a drain precedes every event
//! a later drain takes, see [`super::feed`]).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::future::Future;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use futures::task::AtomicWaker;
use hashbrown::HashTable;
use shardcron_core::registry::WatchScope;
use zookeeper_client as zk;

/// One server-side watch: a subtree (persistent recursive) or a single node (persistent).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct Entry {
    pub path: String,
    pub recursive: bool,
}

impl Entry {
    /// The watches of `scope`: one per entry of its minimal form, so that no two watches of a
    /// feed deliver the same event and no path needs two modes (ZooKeeper keeps one watch mode
    /// per session and path: the last one added).
    pub fn of(scope: &WatchScope) -> Vec<Entry> {
        let minimal = scope.minimal();
        let subtrees =
            minimal.subtrees().iter().map(|p| Entry { path: p.clone(), recursive: true });
        let nodes = minimal.nodes().iter().map(|p| Entry { path: p.clone(), recursive: false });
        subtrees.chain(nodes).collect()
    }

    pub fn mode(&self) -> zk::AddWatchMode {
        if self.recursive {
            zk::AddWatchMode::PersistentRecursive
        } else {
            zk::AddWatchMode::Persistent
        }
    }
}

/// Watcher ids with something to take, in the order they woke, each once.
#[derive(Debug, Default)]
struct Ready {
    queue: parking_lot::Mutex<(VecDeque<u64>, BTreeSet<u64>)>,
    /// The feed task, woken when a watcher is queued.
    feed: AtomicWaker,
}

impl Ready {
    fn push_back(&self, id: u64) {
        let mut q = self.queue.lock();
        if q.1.insert(id) {
            q.0.push_back(id);
        }
    }

    fn push_front(&self, id: u64) {
        let mut q = self.queue.lock();
        if q.1.insert(id) {
            q.0.push_front(id);
        }
    }

    fn pop(&self) -> Option<u64> {
        let mut q = self.queue.lock();
        let id = q.0.pop_front()?;
        q.1.remove(&id);
        Some(id)
    }
}

/// The waker a watcher's channel holds: queues the watcher and wakes the feed.
struct SlotWaker {
    id: u64,
    ready: Arc<Ready>,
}

impl Wake for SlotWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.ready.push_back(self.id);
        self.ready.feed.wake();
    }
}

struct Slot {
    entry: Entry,
    watcher: zk::PersistentWatcher,
    waker: Waker,
    /// The watcher delivered a final session state: polling it again would panic inside the
    /// client.
    ended: bool,
}

/// The watchers of one feed, by id (ids grow: a later watcher has a larger id).
#[derive(Default)]
pub(super) struct Watchers {
    slots: BTreeMap<u64, Slot>,
    /// The ids, hashed by entry: a narrowing drops a few dozen watchers of tens of thousands,
    /// which a pass over them all made cost the whole watch at every change.
    by_entry: HashTable<u64>,
    hasher: rustc_hash::FxBuildHasher,
    next_id: u64,
    ready: Arc<Ready>,
}

impl std::fmt::Debug for Watchers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.slots.values().map(|s| &s.entry)).finish()
    }
}

impl Watchers {
    /// Adds `watcher`, registered for `entry`; returns its id.
    pub fn insert(&mut self, entry: Entry, watcher: zk::PersistentWatcher) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        let waker = Waker::from(Arc::new(SlotWaker { id, ready: self.ready.clone() }));
        let hash = self.hasher.hash_one(&entry);
        self.slots.insert(id, Slot { entry, watcher, waker, ended: false });
        let (slots, hasher) = (&self.slots, &self.hasher);
        let rehash = |id: &u64| slots.get(id).map_or(0, |s| hasher.hash_one(&s.entry));
        self.by_entry.insert_unique(hash, id, rehash);
        // Polled once so that its channel holds its waker.
        self.ready.push_back(id);
        id
    }

    /// Drops the watchers of `entries` (the client removes the server's watch when no other
    /// watcher of the session needs its path).
    pub fn remove(&mut self, entries: &[Entry]) {
        for entry in entries {
            let hash = self.hasher.hash_one(entry);
            loop {
                let slots = &self.slots;
                let same = |id: &u64| slots.get(id).is_some_and(|s| s.entry == *entry);
                let Ok(found) = self.by_entry.find_entry(hash, same) else { break };
                let (id, _) = found.remove();
                self.slots.remove(&id);
            }
        }
    }

    /// Drops every watcher.
    pub fn clear(&mut self) {
        self.slots.clear();
        self.by_entry.clear();
    }

    /// Whether a watcher is registered on `path` (in either mode).
    pub fn holds_path(&self, path: &str) -> bool {
        [true, false].into_iter().any(|recursive| {
            let entry = Entry { path: path.to_owned(), recursive };
            let same = |id: &u64| self.slots.get(id).is_some_and(|s| s.entry == entry);
            self.by_entry.find(self.hasher.hash_one(&entry), same).is_some()
        })
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The watcher whose session events the feed follows: the oldest one still running. Every
    /// watcher receives every session event; one copy is enough.
    pub fn lead(&self) -> Option<u64> {
        self.slots.iter().find(|(_, s)| !s.ended).map(|(id, _)| *id)
    }

    /// The next event a watcher has received, without waiting: the watchers in the order they
    /// woke, each drained before the next.
    pub fn try_next(&mut self) -> Option<(u64, zk::WatchedEvent)> {
        while let Some(id) = self.ready.pop() {
            let Some(slot) = self.slots.get_mut(&id) else { continue };
            if slot.ended {
                continue;
            }
            let mut cx = Context::from_waker(&slot.waker);
            let polled = {
                let changed = slot.watcher.changed();
                futures::pin_mut!(changed);
                changed.poll(&mut cx)
            };
            if let Poll::Ready(event) = polled {
                if is_final(&event) {
                    slot.ended = true;
                } else {
                    // It may hold more; its channel will not wake us for those.
                    self.ready.push_front(id);
                }
                return Some((id, event));
            }
        }
        None
    }

    /// Waits for the next event of any watcher (forever when there is none).
    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<(u64, zk::WatchedEvent)> {
        self.ready.feed.register(cx.waker());
        match self.try_next() {
            Some(next) => Poll::Ready(next),
            None => Poll::Pending,
        }
    }

    pub async fn next(&mut self) -> (u64, zk::WatchedEvent) {
        std::future::poll_fn(|cx| self.poll_next(cx)).await
    }
}

/// A session state after which the watcher delivers nothing more.
pub(super) fn is_final(event: &zk::WatchedEvent) -> bool {
    event.event_type == zk::EventType::Session && event.session_state.is_terminated()
}
