//! Watch subscriptions: the subtree snapshot a stream opens with, and the delivery of changes.
//!
//! Delivery happens under the server lock, right where a change is applied, into unbounded
//! channels. That is what gives every stream the server's order and loses nothing: there is no
//! moment at which a change is applied but not yet queued for every subscriber. While a client
//! is cut off its events are held back (queued in the subscription) and released on heal; once
//! a gap is certain (its session expired) the held events are dropped and a resync is due.

use std::collections::{BTreeMap, VecDeque};
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use shardcron_core::registry::{path, Node, WatchEvent, WatchStream};
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

/// The subtree at server path `root` as client `ns` sees it, in path order.
pub(crate) fn snapshot(tree: &Tree, ns: &Namespace, root: &str) -> BTreeMap<String, Node> {
    tree.subtree(root).into_iter().map(|(p, e)| (ns.to_client(p), e.node())).collect()
}

/// One subscription.
#[derive(Debug)]
struct Watch {
    /// The watched subtree, as a server path.
    root: String,
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
    /// Opens a subscription to server subtree `root`; the stream starts with its snapshot.
    pub fn subscribe(&mut self, tree: &Tree, ns: &Namespace, root: String) -> WatchStream {
        let (tx, rx) = unbounded_channel();
        // Cannot fail: the receiver is right here.
        let _ = tx.send(WatchEvent::Resync { nodes: snapshot(tree, ns, &root) });
        self.next_id += 1;
        self.subs.insert(self.next_id, Watch { root, tx, held: VecDeque::new(), stale: false });
        WatchStream::new(Channel(rx))
    }

    /// Offers applied changes to every subscription whose subtree they touch.
    pub fn publish(&mut self, ns: &Namespace, changes: &[Change], link_up: bool) {
        self.subs.retain(|_, watch| {
            let mut alive = true;
            for change in changes {
                if !path::is_within(change.path(), &watch.root) {
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
            let event = WatchEvent::Resync { nodes: snapshot(tree, ns, &watch.root) };
            watch.tx.send(event).is_ok()
        });
    }

    /// Ends every stream.
    pub fn close(&mut self) {
        self.subs.clear();
    }

    /// How many subscriptions are open.
    pub fn len(&self) -> usize {
        self.subs.len()
    }
}
