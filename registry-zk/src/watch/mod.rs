//! Subtree watches on ZooKeeper's persistent recursive watches (server 3.6+).
//!
//! A **feed** is one task that owns a `PersistentWatcher` on a subtree and the view it has shown
//! its subscribers. Every subscription of a client whose root lies within a live feed's root
//! joins that feed ([`hub::WatchHub`]): it gets the feed's view of its subtree as the opening
//! `Resync`, then the feed's events within it. So a scheduler's watch of `/`, the watch that
//! adopts jobs, and the watches of the leader latches below cost one ZooKeeper watch and one
//! read per change, not one per subscription.
//!
//! ZooKeeper's events carry a path and a kind but no data, so a feed reads a node after its
//! events, but only where it must ([`feed`]):
//!
//! - The events waiting in the watcher are taken together; per path, one read shows the node
//!   as it is *now*, later than all of them, and the reads go out together (one round trip).
//! - A path whose last waiting event is a deletion, of a node the view does not show, needs no
//!   read: the subscribers never saw the node, and a re-creation has its own event. Nor does a
//!   deletion that came after what the view shows of the node (below).
//! - **Own writes are exact, and not read.** ZooKeeper sends a session the events a write
//!   caused before the write's answer, and the client queues them for the watcher before it
//!   completes the write. A write of this client opens a ticket on the paths it writes before
//!   it is sent; the feeds hold back events of those paths until the write answers, then use
//!   what the write left (the data sent, the stat in the answer) instead of reading, when the
//!   held events of a path are exactly the write's own (a count: ZooKeeper sends one event per
//!   create, set and delete). The write returns only after every feed has emitted them, so a
//!   view fed by the watch shows a write when the write returns (read-your-writes, which
//!   ElasticJob lacked: #2194). Writes without a ticket (sequential creates, recursive deletes)
//!   wait for the feeds the same way, and their events are read.
//! - A read shows the node as it is now, which may be later than the event. The view keeps each
//!   node's `czxid` (which incarnation) and `mzxid` (which change), so a read that shows nothing
//!   new is dropped, and a node seen deleted and re-created comes out as `Deleted` then
//!   `Created`. Per node, versions only grow and nothing is reported twice; what can be lost is
//!   an intermediate state another client overwrote before the read (hence
//!   `Capability::exact_watch == false`).
//! - A deletion of a node the view shows needs no read when its event came after the answer the
//!   view learnt the node from (ZooKeeper sends a session an event before any answer showing its
//!   change, so an event taken from the watcher after an answer arrived was caused by a later
//!   change: it deleted what the view shows, or a later incarnation). Otherwise (the first
//!   deletion after a snapshot, or one that may have come before a read that got ahead of it)
//!   the read confirms it, so a late `NodeDeleted` never removes a node the view shows
//!   re-created.
//!
//! **Gaps become resyncs.** Persistent watches lose the events of a connection loss
//! (ZOOKEEPER-4698), `zookeeper-client` 0.11.2 does not register them again after a reconnect,
//! and an expired session loses its watches. So after the link comes back the feed registers
//! its watch again, re-reads the subtree and sends a `Resync`; after an expiry it subscribes
//! again on the new session and does the same. A read that fails for another reason (a timeout)
//! also ends in a resync, retried with backoff.

mod feed;
pub(crate) mod hub;

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::join_all;
use futures::Stream;
use shardcron_core::registry::{path, Node, Op, Result, WatchEvent, WatchStream};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::sync::oneshot;
use zookeeper_client as zk;

use crate::client::{Shared, ZkRegistry};
use crate::error::At;
use crate::node;
use crate::session::Session;
use hub::{Signal, Subscriber};

/// What the subscribers were told about one node, and which ZooKeeper change that was.
#[derive(Debug, Clone)]
struct Seen {
    node: Node,
    /// The zxid that created this incarnation of the node.
    czxid: i64,
    /// The zxid of the last change shown.
    mzxid: i64,
    /// How many events the feed had taken from its watcher when it last learnt this state (a
    /// read's answer, a write's answer): every later event came after that answer. `None` for
    /// a snapshot's nodes, which the feed cannot place among its events.
    known_at: Option<u64>,
}

impl Seen {
    fn new(at: &str, data: Vec<u8>, stat: &zk::Stat, known_at: Option<u64>) -> Self {
        Seen { node: node::node(at, data, stat), czxid: stat.czxid, mzxid: stat.mzxid, known_at }
    }
}

/// Subscribes to the subtree at `root`: joins a feed of this client that covers it, or starts
/// one (registers the persistent watch and reads the opening snapshot; errors of these first
/// steps go to the caller).
pub(crate) async fn subscribe(
    registry: &ZkRegistry,
    shared: &Arc<Shared>,
    session: Arc<Session>,
    root: &str,
) -> Result<WatchStream> {
    let hub = &shared.watches;
    let limit = shared.operation_timeout();
    while let Some(link) = hub.feed_for(root) {
        let id = hub.next_id();
        let (out, rx) = unbounded_channel();
        let (ready, joined) = oneshot::channel();
        let subscriber = Subscriber { id, root: root.to_owned(), out };
        if link.send(Signal::Join(subscriber, ready)).is_ok() {
            match tokio::time::timeout(limit, joined).await {
                Ok(Ok(())) => return Ok(stream(rx, link, id)),
                // The feed ended with the request unanswered.
                Ok(Err(_)) => {}
                Err(_) => return Err(crate::error::timeout(Op::Watch, root, limit)),
            }
        }
        hub.forget(&link);
    }
    start_feed(registry, shared, session, root).await
}

/// Starts a feed on `root` with one subscriber.
async fn start_feed(
    registry: &ZkRegistry,
    shared: &Arc<Shared>,
    session: Arc<Session>,
    root: &str,
) -> Result<WatchStream> {
    let at = At::new(Op::Watch, root);
    let watcher =
        registry.bounded(at, session.ns.watch(root, zk::AddWatchMode::PersistentRecursive)).await?;
    let nodes = registry.bounded(at, snapshot(&session.ns, root)).await?;
    let id = shared.watches.next_id();
    let (out, rx) = unbounded_channel();
    let (link, signals) = unbounded_channel();
    let subscriber = Subscriber { id, root: root.to_owned(), out };
    let mut feed = feed::Feed::new(shared, root, subscriber, signals);
    feed.install(nodes);
    shared.watches.add_feed(root, link.clone());
    tokio::spawn(feed.run(Some((session, watcher))));
    Ok(stream(rx, link, id))
}

/// A subscriber's stream; dropping it tells the feed.
struct Subscription {
    events: UnboundedReceiver<WatchEvent>,
    link: UnboundedSender<Signal>,
    id: u64,
}

impl Stream for Subscription {
    type Item = WatchEvent;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<WatchEvent>> {
        self.events.poll_recv(cx)
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let _ = self.link.send(Signal::Left(self.id));
    }
}

fn stream(
    events: UnboundedReceiver<WatchEvent>,
    link: UnboundedSender<Signal>,
    id: u64,
) -> WatchStream {
    WatchStream::new(Subscription { events, link, id })
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
                    nodes.insert(p.clone(), Seen::new(p, data, &stat, None));
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
