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
use shardcron_core::registry::{Node, ScopeChange, ScopeIndex as Index, WatchEvent, WatchScope};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use crate::namespace::Namespace;
use crate::tree::{Change, Tree, Visit};

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
    snapshot_except(tree, ns, scope, None)
}

/// [`snapshot`] without the nodes `known` covers.
fn snapshot_except(
    tree: &Tree,
    ns: &Namespace,
    scope: &WatchScope,
    known: Option<&Index>,
) -> BTreeMap<String, Node> {
    let fresh = |path: &str| known.is_none_or(|index| !index.covers(path));
    // Top down from a root the old scope does not cover (an added subtree below an old one
    // brings nothing), a node below is covered by an old subtree exactly when it is one's root
    // itself: its ancestors down to the added root were not.
    let visit = |path: &str| match known {
        Some(index) if index.is_subtree_root(path) => Visit::Prune,
        Some(index) if index.has_node(path) => Visit::Skip,
        _ => Visit::Keep,
    };
    let mut nodes = BTreeMap::new();
    for root in scope.subtrees() {
        if known.is_some_and(|index| index.in_subtree(root)) {
            continue;
        }
        let below = tree.subtree_where(root, visit);
        nodes.extend(below.into_iter().map(|(p, e)| (ns.to_client(p), e.node())));
    }
    for at in scope.nodes() {
        if let Some(entry) = tree.get(at).filter(|_| fresh(at)) {
            nodes.insert(ns.to_client(at), entry.node());
        }
    }
    nodes
}

/// One subscription.
#[derive(Debug)]
struct Watch {
    /// What the subscription covers, in server paths, hashed.
    index: Index,
    /// The generation of the last scope change applied ([`ScopeChange::generation`]).
    generation: u64,
    tx: UnboundedSender<WatchEvent>,
    /// Events held back while the client is cut off, in server order.
    held: VecDeque<WatchEvent>,
    /// A resync is due (the session expired): events until then are covered by it and dropped.
    stale: bool,
    /// The entries the last change of scope added (the opening scope's first entry before
    /// any change), which [`Watches::lag`] holds back.
    last_added: WatchScope,
    /// The entries whose events are held back (hashed, in server paths), as etcd holds back a
    /// watch it has to catch up: their events are dropped until [`Watches::catch_up`] sends
    /// the subscription its whole scope again (a `Resync`), as the etcd backend reads its scope
    /// again when an entry's event comes after a later one of another entry.
    lagging: Option<Box<Index>>,
}

/// Which entries of its watches a client's lag holds back
/// ([`MemServer::lag_watch`](crate::MemServer::lag_watch)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lagging {
    /// The entries the watch's last change of scope added (its first entry, if its scope never
    /// changed): etcd catches up a watch created while writes land on its own schedule.
    LastAdded,
    /// One entry of the watch's scope, the `n`th modulo their count (subtrees first, then
    /// nodes, each in order): any watch of a stream that could not take its events becomes
    /// one of etcd's "victims", caught up later.
    Entry(u64),
}

/// The first entry of `scope` alone (a subtree before a node); empty for an empty scope.
fn first_entry(scope: &WatchScope) -> WatchScope {
    entry_at(scope, 0)
}

/// Entry `n` of `scope` (modulo their count; subtrees first) alone; empty for an empty scope.
fn entry_at(scope: &WatchScope, n: u64) -> WatchScope {
    let (subtrees, nodes) = (scope.subtrees(), scope.nodes());
    let count = subtrees.len() + nodes.len();
    if count == 0 {
        return WatchScope::default();
    }
    // Cannot truncate: the remainder is below `count`, a `usize`.
    let at = (n % count as u64) as usize;
    match subtrees.get(at) {
        Some(root) => WatchScope::of_entries(vec![root.clone()], Vec::new()),
        None => WatchScope::of_entries(Vec::new(), vec![nodes[at - subtrees.len()].clone()]),
    }
}

impl Watch {
    /// Ends the lag: the scope is read now and offered as a `Resync`. False once the
    /// subscriber has dropped its stream.
    fn catch_up(&mut self, tree: &Tree, ns: &Namespace, link_up: bool) -> bool {
        if self.lagging.take().is_none() {
            return !self.tx.is_closed();
        }
        let event = WatchEvent::Resync { nodes: snapshot(tree, ns, &self.index.scope()) };
        self.offer(event, link_up)
    }

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
    /// Change events queued to the subscriptions so far (held ones included): what the
    /// server's fan-out of writes costs this client, for load measurements.
    pub sent: u64,
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
        let last_added = first_entry(&scope);
        let watch = Watch {
            index,
            generation: 0,
            tx,
            held: VecDeque::new(),
            stale: false,
            last_added,
            lagging: None,
        };
        self.subs.insert(self.next_id, watch);
        (Channel(rx), self.next_id)
    }

    /// Changes subscription `id`'s scope by `change` (server paths; `client_change` is the
    /// same in the client's paths, for the event) in place: its stream gets a `Rescoped` event
    /// with what the change adds, read from the tree now (the server lock is held: no change
    /// falls between). Looks at the entries that change only: the cost of the change, not of
    /// the scope. Held like any event while the link is down; sent even when a resync is due
    /// (which then shows the new scope). A change of a generation applied already changes
    /// nothing. False when the stream is gone.
    pub fn rescope(
        &mut self,
        id: u64,
        tree: &Tree,
        ns: &Namespace,
        change: &ScopeChange,
        client_change: ScopeChange,
        link_up: bool,
    ) -> bool {
        let Some(watch) = self.subs.get_mut(&id) else { return false };
        if change.generation <= watch.generation {
            return !watch.tx.is_closed();
        }
        watch.generation = change.generation;
        // A lag ends before the change: the change may drop the entries held back.
        if watch.lagging.is_some() && !watch.catch_up(tree, ns, link_up) {
            self.subs.remove(&id);
            return false;
        }
        watch.last_added = change.add.clone();
        let index = &mut watch.index;
        // What the old scope did not cover is read: the nodes the change brings in. A node
        // the old scope covered stays in the stream, whose events kept it current: a swap from
        // a job's whole subtree to its narrow scope and back reads nothing the narrow one had
        // (read again, a cluster's nodes were, by each of its instances at each of its
        // registrations and elections: the square of its size per job).
        let fresh = WatchScope::of_entries(
            change.add.subtrees().iter().filter(|r| !index.in_subtree(r)).cloned().collect(),
            change.add.nodes().iter().filter(|n| !index.covers(n)).cloned().collect(),
        );
        let added = snapshot_except(tree, ns, &fresh, Some(index));
        index.apply(change);
        let event = WatchEvent::Rescoped { change: client_change, added };
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
                if watch.lagging.as_ref().is_some_and(|lag| lag.covers(change.path())) {
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
                if !watch.stale {
                    self.sent += 1;
                }
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
            watch.lagging = None;
        }
    }

    /// Holds back the events of `which` entries of each subscription until
    /// [`catch_up`](Self::catch_up). A subscription lagging already holds them back too, with
    /// the entries it holds back already (etcd can have several watches of a stream to catch
    /// up at once), until its lag ends; one waiting for a resync is left as it is. Returns how
    /// many lag.
    pub fn lag(&mut self, which: Lagging) -> usize {
        let mut lagging = 0;
        for watch in self.subs.values_mut() {
            if watch.stale {
                continue;
            }
            let held = match which {
                Lagging::LastAdded => watch.last_added.clone(),
                Lagging::Entry(pick) => entry_at(&watch.index.scope(), pick),
            };
            if held.is_empty() {
                continue;
            }
            let held = match watch.lagging.take() {
                Some(already) => {
                    let already = already.scope();
                    let subtrees = already.subtrees().iter().chain(held.subtrees()).cloned();
                    let nodes = already.nodes().iter().chain(held.nodes()).cloned();
                    WatchScope::of_entries(subtrees.collect(), nodes.collect())
                }
                None => held,
            };
            watch.lagging = Some(Box::new(Index::of(&held)));
            lagging += 1;
        }
        lagging
    }

    /// Ends every lag: each lagging subscription gets its scope read again, as a `Resync`
    /// (held like any event while the link is down).
    pub fn catch_up(&mut self, tree: &Tree, ns: &Namespace, link_up: bool) {
        self.subs.retain(|_, watch| watch.lagging.is_none() || watch.catch_up(tree, ns, link_up));
    }

    /// Sends every subscription a fresh snapshot, ending the gap.
    pub fn resync(&mut self, tree: &Tree, ns: &Namespace) {
        self.subs.retain(|_, watch| {
            watch.stale = false;
            watch.lagging = None;
            watch.held.clear();
            let event = WatchEvent::Resync { nodes: snapshot(tree, ns, &watch.index.scope()) };
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
