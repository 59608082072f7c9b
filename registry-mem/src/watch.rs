//! Watch subscriptions: the snapshot of its scope a stream opens with, and the delivery of
//! changes.
//!
//! Delivery happens under the server lock, right where a change is applied, into unbounded
//! channels, and only of the changes a subscription's scope covers: the server filters, as a
//! real server's watches do, so a change outside every scope costs its clients nothing. That is what gives every stream the server's order and loses nothing: there is no
//! moment at which a change is applied but not yet queued for every subscriber. While a client
//! is cut off its events are held back (queued in the subscription) and released on heal; once
//! a gap is certain (its session expired) the held events are dropped and a resync is due.

use std::collections::{BTreeMap, VecDeque};
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use shardcron_core::registry::{Node, WatchEvent, WatchScope};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use crate::namespace::Namespace;
use crate::tree::{Change, Tree};

/// The receiving end of an unbounded channel as a stream; ends when every sender is dropped.
#[derive(Debug)]
pub(crate) struct Channel<T>(pub UnboundedReceiver<T>);

impl<T> Stream for Channel<T> {
    type Item = T;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        self.0.poll_recv(cx)
    }
}

/// The nodes `scope` (server paths) covers as client `ns` sees them, in path order, each once.
pub(crate) fn snapshot(tree: &Tree, ns: &Namespace, scope: &WatchScope) -> BTreeMap<String, Node> {
    let mut nodes = BTreeMap::new();
    for root in scope.subtrees() {
        nodes.extend(tree.subtree(root).into_iter().map(|(p, e)| (ns.to_client(p), e.node())));
    }
    for at in scope.nodes() {
        if let Some(entry) = tree.get(at) {
            nodes.insert(ns.to_client(at), entry.node());
        }
    }
    nodes
}

/// A scope's entries hashed: whether a change is covered is a lookup of its path and its
/// ancestors, however many entries the scope has (a scheduler's narrow scopes have hundreds).
#[derive(Debug, Default)]
struct Index {
    nodes: rustc_hash::FxHashSet<String>,
    subtrees: rustc_hash::FxHashSet<String>,
}

impl Index {
    fn of(scope: &WatchScope) -> Self {
        Index {
            nodes: scope.nodes().iter().cloned().collect(),
            subtrees: scope.subtrees().iter().cloned().collect(),
        }
    }

    fn covers(&self, path: &str) -> bool {
        self.nodes.contains(path) || self.in_subtree(path)
    }

    fn in_subtree(&self, path: &str) -> bool {
        if self.subtrees.is_empty() {
            return false;
        }
        self.subtrees.contains(path)
            || self.subtrees.contains("/")
            || path.match_indices('/').skip(1).any(|(i, _)| self.subtrees.contains(&path[..i]))
    }
}

/// One subscription.
#[derive(Debug)]
struct Watch {
    /// What the subscription covers, in server paths.
    scope: WatchScope,
    /// `scope`, hashed.
    index: Index,
    tx: UnboundedSender<WatchEvent>,
    /// Events held back while the client is cut off, in server order.
    held: VecDeque<WatchEvent>,
    /// A resync is due (the session expired): events until then are covered by it and dropped.
    stale: bool,
}

impl Watch {
    /// Sends `event` (or holds it while the link is down). Returns false once the subscriber
    /// has dropped its stream, so that the subscription can be forgotten.
    fn offer(&mut self, event: WatchEvent, link_up: bool) -> bool {
        if self.stale {
            return !self.tx.is_closed();
        }
        if link_up {
            self.tx.send(event).is_ok()
        } else {
            self.held.push_back(event);
            !self.tx.is_closed()
        }
    }
}

/// The subscriptions of one client, by subscription order.
#[derive(Debug, Default)]
pub(crate) struct Watches {
    next_id: u64,
    subs: BTreeMap<u64, Watch>,
}

impl Watches {
    /// Opens a subscription to `scope` (server paths); the stream starts with its snapshot.
    /// Returns the stream (its scoper still to be added) and the subscription's id.
    pub fn subscribe(
        &mut self,
        tree: &Tree,
        ns: &Namespace,
        scope: WatchScope,
    ) -> (Channel<WatchEvent>, u64) {
        let (tx, rx) = unbounded_channel();
        // Cannot fail: the receiver is right here.
        let _ = tx.send(WatchEvent::Resync { nodes: snapshot(tree, ns, &scope) });
        self.next_id += 1;
        let index = Index::of(&scope);
        let watch = Watch { scope, index, tx, held: VecDeque::new(), stale: false };
        self.subs.insert(self.next_id, watch);
        (Channel(rx), self.next_id)
    }

    /// Changes subscription `id`'s scope to `scope` (server paths) in place: its stream gets a
    /// `Rescoped` event with what `scope` adds, read from the tree now (the server lock is
    /// held: no change falls between). Held like any event while the link is down; sent even
    /// when a resync is due (which then shows the new scope). False when the stream is gone.
    pub fn rescope(
        &mut self,
        id: u64,
        tree: &Tree,
        ns: &Namespace,
        scope: WatchScope,
        client_scope: WatchScope,
        link_up: bool,
    ) -> bool {
        let Some(watch) = self.subs.get_mut(&id) else { return false };
        // Only the entries that changed are looked at, and only what the old scope did not
        // cover is read: the cost of the change, not of the scope.
        let (added_subtrees, added_nodes, removed_subtrees, removed_nodes) =
            watch.scope.entry_changes(&scope);
        let fresh = WatchScope::of_entries(
            added_subtrees
                .iter()
                .filter(|r| !watch.index.in_subtree(r))
                .map(|r| (*r).to_owned())
                .collect(),
            added_nodes
                .iter()
                .filter(|n| !watch.index.covers(n))
                .map(|n| (*n).to_owned())
                .collect(),
        );
        let mut added = snapshot(tree, ns, &fresh);
        added.retain(|path, _| !watch.index.covers(&ns.to_server(path)));
        for root in removed_subtrees {
            watch.index.subtrees.remove(root);
        }
        for node in removed_nodes {
            watch.index.nodes.remove(node);
        }
        for root in added_subtrees {
            watch.index.subtrees.insert(root.to_owned());
        }
        for node in added_nodes {
            watch.index.nodes.insert(node.to_owned());
        }
        let event = WatchEvent::Rescoped { scope: client_scope, added };
        watch.scope = scope;
        // While a resync is due the stream's events are dropped, but not this one: the
        // subscriber must learn of the new scope, which the resync to come then shows.
        let delivered =
            if watch.stale { watch.tx.send(event).is_ok() } else { watch.offer(event, link_up) };
        if delivered {
            true
        } else {
            self.subs.remove(&id);
            false
        }
    }

    /// Offers applied changes to every subscription whose scope covers them.
    pub fn publish(&mut self, ns: &Namespace, changes: &[Change], link_up: bool) {
        self.subs.retain(|_, watch| {
            let mut alive = true;
            for change in changes {
                if !watch.index.covers(change.path()) {
                    continue;
                }
                let client_path = ns.to_client(change.path());
                let event = match change {
                    Change::Created(_, node) => {
                        WatchEvent::Created { path: client_path, node: node.clone() }
                    }
                    Change::Changed(_, node) => {
                        WatchEvent::Changed { path: client_path, node: node.clone() }
                    }
                    Change::Deleted(_) => WatchEvent::Deleted { path: client_path },
                };
                alive = watch.offer(event, link_up);
                if !alive {
                    break;
                }
            }
            alive
        });
    }

    /// Delivers the events held during a cut, in order (the link is back, the session lived).
    pub fn release_held(&mut self) {
        self.subs.retain(|_, watch| {
            while let Some(event) = watch.held.pop_front() {
                if watch.tx.send(event).is_err() {
                    return false;
                }
            }
            true
        });
    }

    /// Marks a gap: held events are dropped and every subscription waits for a resync.
    pub fn mark_gap(&mut self) {
        for watch in self.subs.values_mut() {
            watch.held.clear();
            watch.stale = true;
        }
    }

    /// Sends every subscription a fresh snapshot, ending the gap.
    pub fn resync(&mut self, tree: &Tree, ns: &Namespace) {
        self.subs.retain(|_, watch| {
            watch.stale = false;
            watch.held.clear();
            let event = WatchEvent::Resync { nodes: snapshot(tree, ns, &watch.scope) };
            watch.tx.send(event).is_ok()
        });
    }

    /// Ends every stream.
    pub fn close(&mut self) {
        self.subs.clear();
    }

    /// How many subscriptions are open: their streams are still held (a dropped one is
    /// forgotten at the next change, and no longer counted from the moment it is dropped).
    pub fn len(&self) -> usize {
        self.subs.values().filter(|w| !w.tx.is_closed()).count()
    }
}
