//! Scope watches on ZooKeeper's persistent watches (server 3.6+).
//!
//! **One feed per client.** The client's watches are held by one task, the feed
//! ([`feed`]), that owns a `PersistentWatcher` per entry of the union of its subscribers'
//! scopes, in minimal form ([`WatchScope::minimal`]): a *persistent recursive* watch per
//! subtree, a plain *persistent* watch per single node. So ZooKeeper sends the client the
//! events of what some subscriber covers and nothing else (a node entry's watch also brings
//! ZooKeeper's notice that its children changed, which the feed drops unread). ZooKeeper keeps
//! one watch mode per session and path (the last one registered); the minimal form never needs
//! two, and when a change of the subscribers turns a path's watch from one mode into the other,
//! the new one is registered before the old watcher is dropped.
//!
//! The feed's view keeps, per watched node, which ZooKeeper change its subscribers were shown
//! (zxids), not the data: the subscribers hold that. A subscription whose scope the watches cover
//! already costs no new watch; its opening `Resync` reads the nodes the view lists there (one
//! `getData` each, sent together). What such a read shows that the view did not (a change whose
//! events are still on their way) goes to the other subscribers first, as after any read, so every
//! subscriber is shown the same states. One that needs more has the feed register the missing
//! watches and read what they add (a node entry's data; a subtree's nodes, level by level), then
//! replace any watch the new one makes redundant. When a subscriber leaves, the watches shrink to
//! what the others need: a narrower watch taking over part of a wider one is registered first, then
//! the wider one is dropped, which makes the client remove it on the server. So a scheduler's watch
//! of `/` and the watches of its leader latches below still cost one ZooKeeper watch and one read
//! per change, and narrow scopes cost only their entries.
//!
//! **A subscription's scope changed in place** (`WatchScoper::rescope`) is a join and a leave in
//! one step, on the same stream: the watches grow to cover the new scope (registering and reading
//! only what they lack), the subscriber gets a `Rescoped` event with the nodes its new scope adds
//! at that point of its stream (those the new watches brought as they were read, those the watches
//! covered already read again, as for a join), and the watches shrink to what the subscribers need.
//! Both steps look only at the entries the change names and at the watches and subscribers'
//! entries below them ([`WatchScope::widening`], [`WatchScope::narrowing`]), never at the whole
//! union: a client of ten thousand jobs watches over a hundred thousand entries, and each
//! registration changes a few (debug builds check the result against the union computed whole).
//! A watcher is dropped only once the watch replacing it is registered, and the events it had
//! received by then are taken first: ZooKeeper sent the changes made before the registration
//! through it alone.
//!
//! ZooKeeper's events carry a path and a kind but no data, so the feed reads a node after its
//! events, but only where it must ([`events`]), and only for paths the watches cover:
//!
//! - The events waiting in the watchers are taken together; per path, one read shows the node
//!   as it is *now*, later than all of them, and the reads go out together (one round trip).
//! - A path whose last waiting event is a deletion, of a node the view does not show, needs no
//!   read: the subscribers never saw the node, and a re-creation has its own event. Nor does a
//!   deletion that came after what the view shows of the node (below).
//! - **Own writes are exact, and not read.** ZooKeeper sends a session the events a write
//!   caused before the write's answer, and the client queues them for the watchers before it
//!   completes the write. A write of this client opens a ticket on the paths it writes before
//!   it is sent; the feed holds back events of those paths until the write answers, then uses
//!   what the write left (the data sent, the stat in the answer) instead of reading, when the
//!   held events of a path are exactly the write's own (a count: ZooKeeper sends one event per
//!   create, set and delete). The write returns only after the feed has emitted them, so a
//!   view fed by the watch shows a write when the write returns (read-your-writes, which
//!   ElasticJob lacked: #2194). Writes without a ticket (sequential creates, recursive deletes)
//!   wait for the feed the same way, and their events are read. While the feed holds no watch,
//!   writes do not wait for it.
//! - A read shows the node as it is now, which may be later than the event. The view keeps each
//!   node's `czxid` (which incarnation) and `mzxid` (which change), so a read that shows nothing
//!   new is dropped, and a node seen deleted and re-created comes out as `Deleted` then
//!   `Created`. Per node, versions only grow and nothing is reported twice; what can be lost is
//!   an intermediate state another client overwrote before the read (hence
//!   `Capability::exact_watch == false`).
//! - A deletion of a node the view shows needs no read when its event came after the answer the
//!   view learnt the node from (ZooKeeper sends a session an event before any answer showing its
//!   change, so an event taken from the watchers after an answer arrived was caused by a later
//!   change: it deleted what the view shows, or a later incarnation). Otherwise (the first
//!   deletion after a snapshot, or one that may have come before a read that got ahead of it)
//!   the read confirms it, so a late `NodeDeleted` never removes a node the view shows
//!   re-created.
//! - **Order across watches.** Each watcher's events come in ZooKeeper's order, but the client
//!   library gives each watcher its own channel, and ZooKeeper 3.8's notifications carry no
//!   zxid: how the events of two watchers interleaved is lost. The feed orders the outcomes of
//!   a run by the zxid of the state each shows (bounded within each watcher so that its own
//!   order holds); with one watch (a scope of one subtree) the order is ZooKeeper's, as before.
//!
//! **Gaps become resyncs.** Persistent watches lose the events of a connection loss
//! (ZOOKEEPER-4698), `zookeeper-client` 0.11.2 does not register them again after a reconnect,
//! and an expired session loses its watches. So after the link comes back the feed registers
//! every watch again, re-reads what they cover and sends each subscriber a `Resync` of its
//! scope; after an expiry it does the same on the new session. A read that fails for another
//! reason (a timeout) also ends in a resync, retried with backoff.

mod events;
mod feed;
pub(crate) mod hub;
mod view;
mod watchers;

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::join_all;
use futures::Stream;
use shardcron_core::registry::{
    path, Node, Op, RegistryError, Result, ScopeChange, WatchEvent, WatchScope, WatchScoper,
    WatchStream,
};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::sync::oneshot;
use zookeeper_client as zk;

use crate::client::Shared;
use crate::node;
use hub::{Signal, Subscriber};
use view::View;

/// What the feed knows of one node its watches cover: which ZooKeeper change the subscribers
/// were last shown, not the data (the subscribers hold that: the core's view keeps every node it
/// is shown). A subscriber that must be shown nodes the watches already covered gets them read
/// again ([`feed`]'s `refresh`). Kept for every watched node (a dozen or more per job), so laid
/// out small: the read's place among the events packed into one word, 24 bytes in all (56 while
/// it held the data).
#[derive(Debug, Clone)]
struct Seen {
    /// The zxid that created this incarnation of the node.
    czxid: i64,
    /// The zxid of the last change shown.
    mzxid: i64,
    /// How many events the feed had taken from its watchers when it last learnt this state (a
    /// read's answer, a write's answer), plus one: every later event came after that answer.
    /// 0 for a snapshot's nodes, which the feed cannot place among its events. Ordered as the
    /// `Option<u64>` it stands for (`None` first).
    known: u64,
}

const _: () = assert!(std::mem::size_of::<Seen>() == 24);

impl Seen {
    /// How many events had been taken when this state was learnt (`None`: a snapshot's).
    fn known_at(&self) -> Option<u64> {
        self.known.checked_sub(1)
    }
}

/// A node as a read or a write of this client showed it: what a subscriber is shown, and what
/// the feed keeps of it.
#[derive(Debug, Clone)]
struct Fresh {
    node: Node,
    seen: Seen,
}

impl Fresh {
    fn new(at: &str, data: Vec<u8>, stat: &zk::Stat, known_at: Option<u64>) -> Self {
        let node = node::node(at, data, stat);
        let seen = Seen {
            czxid: stat.czxid,
            mzxid: stat.mzxid,
            known: known_at.map_or(0, |n| n.saturating_add(1)),
        };
        Fresh { node, seen }
    }
}

/// Nodes read from the server, by path.
type Snapshot = BTreeMap<Box<str>, Fresh>;

/// The path errors about a watch of `scope` name: its first entry (`/` for an empty scope).
pub(crate) fn label(scope: &WatchScope) -> &str {
    scope.subtrees().iter().chain(scope.nodes()).next().map_or(path::ROOT, String::as_str)
}

/// Subscribes to `scope` through the client's feed, starting the feed if needed. The feed
/// answers once the subscriber's opening snapshot is sent, or with the error of registering
/// the watches or reading the snapshot.
pub(crate) async fn subscribe(shared: &Arc<Shared>, scope: WatchScope) -> Result<WatchStream> {
    let limit = shared.operation_timeout();
    let at = label(&scope).to_owned();
    // A feed ends only when the client closes; a second try covers a link taken just then.
    for _ in 0..2 {
        if shared.is_closed() {
            break;
        }
        let link = shared.watches.feed(|| {
            let (link, signals) = unbounded_channel();
            tokio::spawn(feed::Feed::new(shared, signals).run());
            link
        });
        let id = shared.watches.next_id();
        let (out, rx) = unbounded_channel();
        let (reply, replied) = oneshot::channel();
        let subscriber = Subscriber { id, scope: scope.clone(), generation: 0, out };
        if link.send(Signal::Join(subscriber, reply)).is_err() {
            continue;
        }
        match tokio::time::timeout(limit, replied).await {
            Ok(Ok(Ok(()))) => return Ok(stream(rx, link, id, limit)),
            Ok(Ok(Err(e))) => return Err(e),
            // The feed ended with the request unanswered.
            Ok(Err(_)) => {}
            Err(_) => {
                let _ = link.send(Signal::Left(id));
                return Err(crate::error::timeout(Op::Watch, &at, limit));
            }
        }
    }
    Err(RegistryError::Closed { op: Op::Watch, path: at })
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
    limit: Duration,
) -> WatchStream {
    let scoper = ZkScoper { link: link.clone(), id, limit };
    WatchStream::with_scoper(Subscription { events, link, id }, Some(Arc::new(scoper)))
}

/// Changes a subscription's scope through the feed (see [`feed`]).
#[derive(Debug)]
struct ZkScoper {
    link: UnboundedSender<Signal>,
    id: u64,
    limit: Duration,
}

#[async_trait::async_trait]
impl WatchScoper for ZkScoper {
    async fn rescope(&self, change: ScopeChange) -> Result<()> {
        change.validate()?;
        let at = change.label().to_owned();
        let (reply, replied) = oneshot::channel();
        if self.link.send(Signal::Rescope(self.id, change, reply)).is_err() {
            return Err(RegistryError::Closed { op: Op::Watch, path: at });
        }
        match tokio::time::timeout(self.limit, replied).await {
            Ok(Ok(result)) => result,
            // The feed ended (the client closed) with the request unanswered.
            Ok(Err(_)) => Err(RegistryError::Closed { op: Op::Watch, path: at }),
            Err(_) => Err(crate::error::timeout(Op::Watch, &at, self.limit)),
        }
    }
}

/// Reads what `scope` covers: a node entry's data alone; a subtree level by level (data and
/// children). Each level's reads, the node entries' among the first, go out together.
async fn snapshot(
    client: &zk::Client,
    scope: &WatchScope,
) -> std::result::Result<Snapshot, zk::Error> {
    let minimal = scope.minimal();
    let mut nodes = BTreeMap::new();
    // Each path with whether its children are read too.
    let mut level: Vec<(String, bool)> = minimal
        .subtrees()
        .iter()
        .map(|p| (p.clone(), true))
        .chain(minimal.nodes().iter().map(|p| (p.clone(), false)))
        .collect();
    while !level.is_empty() {
        let reads = join_all(level.iter().map(|(p, below)| {
            // The requests are sent here, before anything is awaited.
            let data = client.get_data(p);
            let children = below.then(|| client.list_children(p));
            async move {
                let children = match children {
                    Some(children) => Some(children.await),
                    None => None,
                };
                (data.await, children)
            }
        }))
        .await;
        let mut next = Vec::new();
        for ((p, _), (data, children)) in level.iter().zip(reads) {
            match data {
                Ok((data, stat)) => {
                    nodes.insert(p.as_str().into(), Fresh::new(p, data, &stat, None));
                }
                // Deleted between the parent's listing and this read, or not there at all.
                Err(zk::Error::NoNode) => continue,
                Err(zk::Error::NoAuth) => {
                    tracing::warn!(path = %p, "watch: node unreadable with these credentials; left out");
                    continue;
                }
                Err(e) => return Err(e),
            }
            match children {
                Some(Ok(names)) => next.extend(names.iter().map(|c| (path::join(p, c), true))),
                Some(Err(zk::Error::NoNode)) | Some(Err(zk::Error::NoAuth)) | None => {}
                Some(Err(e)) => return Err(e),
            }
        }
        level = next;
    }
    Ok(nodes)
}
