//! # shardcron-registry-zk
//!
//! The ZooKeeper backend of the shardcron registry contract
//! ([`CoordinatorRegistry`](shardcron_core::registry::CoordinatorRegistry)), on the async
//! [`zookeeper_client`] crate. Needs ZooKeeper 3.6 or later (persistent recursive watches);
//! tested on 3.8, the version Debian ships.
//!
//! One [`ZkRegistry`] is one client with one session at a time. It keeps the contract over
//! ZooKeeper's own semantics:
//!
//! - **Nodes**: the four create modes, parents created as persistent nodes; ZooKeeper's data
//!   version is the contract's version; a create under an ephemeral node fails with
//!   `EphemeralParent`. Sequence numbers come from the parent's `cversion`, which every child
//!   create and delete advances, so they only increase (`contiguous_sequence: false`).
//! - **Transactions** are one `multi`; ZooKeeper names the first op that failed, reported as
//!   `Transaction { index, source }`.
//! - **Sessions**: a lost link is `Suspended`, its return within the lease `Reconnected` (same
//!   session, nothing lost); an expired session is final in ZooKeeper, so the client opens a
//!   new one by itself and reports `Expired` then `Connected { new }`. The lease: a light probe
//!   every fifth of the negotiated timeout renews the session; when none has been answered for
//!   the timeout less the lease margin (counted from its send) the client reports `Lost`,
//!   before the server can expire the session, and never uses that session again (it closes
//!   it once the server is reachable: `Expired`, then a new session).
//! - **Watches** are persistent watches, one per entry of what the client's subscriptions
//!   cover (recursive for a subtree, plain for a single node; a subscription the client's
//!   watches cover already joins them), turned into the contract's events by reading a node
//!   after its events, except for the client's own writes; see "Watches" below.
//! - **Latches and mutexes**: the shared recipes over ephemeral-sequential nodes
//!   ([`shardcron_core::registry::recipes`]).
//! - **Namespace** = chroot, created with its parents at connect time.
//!
//! ## Example
//!
//! ```no_run
//! use futures::StreamExt;
//! use shardcron_core::registry::{CoordinatorRegistry, CreateMode, WatchEvent};
//! use shardcron_registry_zk::{ZkOptions, ZkRegistry};
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     // Three servers, namespace /shardcron, 20 s sessions, digest credentials.
//!     let options = ZkOptions::from_url(
//!         "zk://zk1:2181,zk2:2181,zk3:2181/shardcron?session_timeout_ms=20000&digest=ops:secret",
//!     )?;
//!     let registry = ZkRegistry::connect(options).await?;
//!
//!     let mut events = registry.watch("/job").await?;
//!     assert!(matches!(events.next().await, Some(WatchEvent::Resync { .. })));
//!
//!     registry.create("/job/instances/10.0.0.7@-@4242", b"", CreateMode::Ephemeral).await?;
//!     // Our own write is already in the stream when `create` returns.
//!     let Some(WatchEvent::Created { path, .. }) = events.next().await else { panic!() };
//!     assert_eq!(path, "/job");
//!
//!     println!("server time: {}", registry.registry_time().await?);
//!     registry.close().await?;
//!     Ok(())
//! }
//! ```
//!
//! ## Watches
//!
//! A [`WatchScope`](shardcron_core::registry::WatchScope) is watched on the server entry by
//! entry: a persistent recursive watch per subtree, a plain persistent watch per single node.
//! ZooKeeper then sends the client nothing about a node no subscription of it covers, and the
//! client reads nothing it was not asked for: a scheduler that watches its jobs' configuration,
//! assignments and members hears nothing of another instance's per-fire writes (its running
//! markers, its ledger). A node entry's watch also brings ZooKeeper's notice that the node's
//! children changed (a notification, not a request); it is dropped unread. Dropping a stream
//! removes the watches no other stream of the client needs.
//!
//! ZooKeeper's watch events carry no data. A watch reads a node after its events (one read per
//! path for the events waiting, all in one round trip; none for a node deleted before anyone
//! was told of it; none for the client's own writes, whose answers say what they left) and
//! keeps, per node, the zxids of the incarnation and the change it has shown. All
//! subscriptions of one client share its watches and their reads. Hence:
//!
//! - Per node, events arrive in the registry's order, versions only grow, and no change is
//!   reported twice. Across nodes of one subtree entry, events follow the order ZooKeeper sent
//!   them; across entries, by the zxid of the state each shows (ZooKeeper 3.8's notifications
//!   do not say how the events of two watches interleaved).
//! - The data of an event is the node as read, which can be newer than the change that caused
//!   the event: when *another* client changes a node twice in quick succession, the subscriber
//!   may see one `Changed` with the second value. The view built with
//!   [`WatchEvent::apply_to`](shardcron_core::registry::WatchEvent::apply_to) always converges
//!   to the registry. That is why `Capability::exact_watch` is `false`.
//! - Changes made by the *same* client are exact: a write returns only after every watch of its
//!   client has emitted what the write caused, with the data of that write (ZooKeeper delivers a
//!   session's events before the answer to its write). So a watch-fed cache reads its own
//!   writes.
//! - After a reconnect (ZooKeeper may lose persistent-watch events across one: ZOOKEEPER-4698)
//!   or an expiry, the stream sends a fresh `Resync`.
//!
//! ## Registry time
//!
//! ZooKeeper has no clock request. [`registry_time`](shardcron_core::registry::CoordinatorRegistry::registry_time)
//! writes the namespace node (empty data, no version check) and returns the `mtime` ZooKeeper
//! stamped on it: the leader's clock when it proposed the write. This is one write per call,
//! as in ElasticJob. The namespace node is the contract's read-only root, so readers always see
//! it with empty data at version 0 and watches ignore these writes.
//!
//! ## Security
//!
//! With digest credentials (`digest=user:password`) every node this client creates gets
//! `CREATOR_ALL_ACL`: only the same credentials can read or change it, and there is no world
//! read (job parameters may carry secrets). Without credentials nodes are open to all
//! (`OPEN_ACL_UNSAFE`). Since ZooKeeper's digest scheme accepts any credentials as an identity,
//! [`ZkRegistry::connect`] writes the namespace node once and fails with
//! `RegistryError::Auth` naming the digest user when the namespace belongs to other
//! credentials. See the `acl` module.
//!
//! ## Data size
//!
//! The contract accepts node data up to exactly `MAX_DATA_SIZE` (1 MiB) and rejects larger data
//! before any I/O. ZooKeeper's packet limit, `jute.maxbuffer`, defaults to 1 MiB *including*
//! path and headers, so servers must run with a larger one, e.g.
//! `-Djute.maxbuffer=4194304` (4 MiB, also enough for transactions carrying a few large nodes).
//! A request over the server's limit makes the server drop the connection (`ConnectionLoss`).
//!
//! ## Layout
//! - `client.rs`: [`ZkRegistry`] and the node operations.
//! - `options.rs`: [`ZkOptions`], [`RetryPolicy`], [`Digest`], the `zk://` URL parser.
//! - `session.rs`: opening sessions, the session-event stream, replacing an expired session.
//! - `watch/`: scope watches: the client's feed (its watches as subscribers come and go,
//!   resyncs), what it does with events (read after event, own writes, order), its watchers,
//!   and what the feed and the client's writes share (subscriptions, barriers, write tickets).
//! - `txn.rs`: transactions as `multi`.
//! - `acl.rs`: the ACLs of created nodes.
//! - `node.rs`: conversions between ZooKeeper's nodes, versions and modes and the contract's.
//! - `error.rs`: ZooKeeper errors mapped onto `RegistryError`.

mod acl;
mod client;
mod error;
mod node;
mod options;
mod session;
mod spawner;
mod txn;
mod watch;

pub use client::ZkRegistry;
pub use options::{
    Digest, InvalidOptions, RetryPolicy, UrlError, ZkOptions, DEFAULT_PORT, URL_FORM,
};
pub use zookeeper_client;
