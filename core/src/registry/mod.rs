//! The coordination registry: the contract every backend (in-memory, ZooKeeper, etcd) implements.
//!
//! shardcron keeps all cluster state in a hierarchical store of small nodes. This module defines
//! what shardcron needs from such a store, [`CoordinatorRegistry`], precisely enough that the same
//! behaviour suite ([`crate::testkit`], feature `testkit`) can hold every backend to it.
//!
//! # Contract
//!
//! **Paths.** Absolute, `/`-separated, UTF-8; see [`path`] for the rules. Every path a client
//! sees is relative to its namespace (chroot): two clients with different namespaces never see
//! each other's nodes. Invalid paths fail with [`RegistryError::InvalidPath`] before any I/O.
//!
//! **Nodes.** A node has data (at most [`MAX_DATA_SIZE`] bytes, else
//! [`RegistryError::DataTooLarge`]) and a [`Version`] that is 0 at creation and grows by exactly
//! one with every successful `set`. Ephemeral nodes belong to the session that created them, are
//! deleted when it ends (close or expiry) and cannot have children
//! ([`RegistryError::EphemeralParent`]). Sequential creates append a 10-digit zero-padded number
//! that strictly increases per parent, so the names sort in creation order.
//!
//! **Ordering.** Operations of one client apply in the order it awaits them. A client reads its
//! own writes: once a write's future resolves, every later read of that client sees it.
//!
//! **Sessions.** A client holds one session at a time and reports its state on
//! [`CoordinatorRegistry::session_events`]: `Connected`, then any of `Suspended` (link down,
//! session possibly alive), `Reconnected` (same session back), `Lost` (see "Lease" below),
//! `Expired` (ephemerals gone) followed by `Connected` with a new session. After an expiry the
//! client opens the new session by itself; re-creating ephemeral nodes is the caller's job.
//! While suspended or lost, operations fail with [`RegistryError::ConnectionLoss`] (retryable)
//! or [`RegistryError::Timeout`].
//!
//! **Lease.** A client cut off from the server hears nothing from it, so it cannot wait for
//! `Expired` to learn that its session is over: by then the server may have deleted its
//! ephemeral nodes and another client taken over what they stood for. So every client keeps a
//! *local lease deadline*: the session timeout the server granted, counted from when the last
//! *renewal* the server answered was sent, less a drift margin. A renewal is a request that
//! restarts the server's session timer: on ZooKeeper any request (the client sends a light
//! probe when it has nothing else to send), on etcd a lease keep-alive. The server counts from
//! when it received the renewal, which is later, so the deadline comes before the server can
//! expire the session by at least the margin, as long as the clocks' rates differ by less than
//! [`lease::MAX_CLOCK_DRIFT_PPM`]. The margin is configurable per backend; the default is a
//! tenth of the session timeout ([`lease::default_margin`] says why).
//!
//! When the deadline passes without contact the client reports `Suspended` (if it had not yet)
//! and then `Lost`, whatever state its connection library believes it is in. The deadline holds
//! even when a paused process wakes with its timers, watches and callers all ready at once, in
//! whatever order its runtime picks: no operation started after the deadline succeeds on the
//! old session, and no watch event shows the server's deletion of the session's own ephemeral
//! nodes before `Lost`. (A holder that sees its own ephemeral node deleted and reads it back
//! as absent, with no `Lost` or `Expired` in between, may conclude that someone deleted it
//! under a live session.) From then on:
//!
//! - the holder must treat the session's ephemeral nodes and any leadership as gone and stop
//!   the work they guarded at once; leader latches report [`Leadership::Lost`];
//! - operations fail with `ConnectionLoss` until the new session is there;
//! - the client never resumes the lost session: should it get through to the server while the
//!   session still lives there, it closes it (deleting its ephemerals) instead of using it.
//!   Once the session is gone for sure (the server reported it expired, the client closed it,
//!   or the connection library's own limit for a session it cannot reach passed) it reports
//!   `Expired`, then opens a new session and reports `Connected { new }`.
//!
//! So a partition longer than the lease always reads `Suspended`, `Lost`, `Expired`,
//! `Connected { new }`, on every backend; `Reconnected` never follows `Lost`. `Expired` may
//! also come without `Lost` when a session ends while the client is in contact (closed by an
//! operator, a fault hook of a test).
//!
//! **Watches.** [`CoordinatorRegistry::watch_scope`] subscribes to a [`WatchScope`]: whole
//! subtrees (a node and everything below it) and single nodes (the node's existence and data,
//! not its children); [`CoordinatorRegistry::watch`] is the scope of one subtree. No path of the
//! scope needs to exist; an invalid one fails with [`RegistryError::InvalidPath`] before any
//! I/O; an empty scope is allowed (an empty `Resync`, then nothing). The stream:
//!
//! - opens with a [`WatchEvent::Resync`] holding every existing node the scope covers, sorted
//!   by path, each once;
//! - then delivers every change of a covered node in the order the registry applied it, never
//!   dropping one while the session lives, and each once even when several entries cover the
//!   node (a node entry inside a subtree entry). The changes one transaction makes happened
//!   together: within an entry they come in the order of the transaction's ops, across entries
//!   in any order;
//! - reports nothing of a node the scope does not cover (a child created under a node entry
//!   included), and such a change costs the watching client no request: backends watch the
//!   scope's entries on the server instead of filtering a wider watch;
//! - after a gap (expiry, or a reconnect across which a backend may have lost events) sends a
//!   new `Resync` of the whole scope instead of staying silent.
//!
//! A subscriber that applies events with [`WatchEvent::apply_to`] always holds the registry's
//! state of the covered nodes as of the last event. Watches survive session changes and end
//! when the client is closed. Dropping a stream releases what the watch held on the server (the
//! server-side watches no other stream of the client still needs), so a scope can be narrowed
//! by opening the narrower watch and then dropping the wider one.
//!
//! **Changing a watch's scope.** A stream's [`WatchScoper`] (from [`WatchStream::scoper`];
//! every backend's streams have one) changes what it covers in place, without reopening it:
//! [`WatchScoper::rescope`] takes a [`ScopeChange`] (entries to remove, entries to add, and a
//! generation that orders the changes) and puts one [`WatchEvent::Rescoped`] into the stream,
//! in its order, carrying the change and the nodes the new scope covers that the old one did
//! not (a backend may add,
//! at their current state, nodes both cover whose entry changed); the changes before it are the
//! old scope's, those after it the new one's, each once, none lost (a node both scopes cover
//! keeps its events going, undisturbed). The added nodes are as the backend read them: at that
//! point of the stream (in memory), or a moment later (ZooKeeper, etcd read them when the
//! change is made, while the other entries' events may still be on their way), in which case
//! their changes up to the read are not reported again. The
//! backend registers and reads only what the change adds and releases what it drops, so a
//! change costs what it changes, not the size of the scope. Changes of one stream apply in the
//! order they were asked for; one that fails leaves the stream as it was (no `Rescoped`), a
//! retry of one applied already (a generation not above the last applied) changes nothing, and
//! a `Resync` after a `Rescoped` is of the new scope.
//!
//! **Transactions.** [`CoordinatorRegistry::transaction`] applies a list of [`TxnOp`]s all or
//! nothing. On failure nothing is applied, and the error is [`RegistryError::Transaction`] with the
//! index of the first failing op and its cause. Creates in a transaction do not create parents.
//!
//! **Latches.** [`CoordinatorRegistry::leader_latch`]: among the live sessions that joined the same
//! path, at most one holds leadership, and a holder is told the moment it may have lost it
//! (suspension, loss or expiry of its session, or its node deleted). [`CoordinatorRegistry::lock`]: a
//! mutex for short critical sections, released explicitly. Backends may implement both natively or
//! use the recipes in [`recipes`].
//!
//! **Waits.** Every operation is bounded by the backend's operation timeout and fails with
//! [`RegistryError::Timeout`] instead of hanging. Nothing is swallowed: every failure reaches the
//! caller as a typed [`RegistryError`].

pub mod counting;
pub mod error;
pub mod ext;
pub mod lease;
pub mod path;
pub mod reachability;
pub mod recipes;
mod scope_index;
mod types;

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;

pub use error::{BackendCause, Op, RegistryError, Result};
pub use ext::RegistryExt;
pub use scope_index::ScopeIndex;
pub use types::{
    Capability, CreateMode, Node, ScopeChange, SessionEvent, SessionEvents, TxnOp, TxnResult,
    Version, WatchEvent, WatchScope, WatchScoper, WatchStream, MAX_DATA_SIZE,
};

/// A hierarchical coordination store with sessions, watches, transactions and latches.
///
/// See the [module documentation](self) for the contract. Handles are shared as
/// `Arc<dyn CoordinatorRegistry>`; one handle is one client with one session at a time.
#[async_trait]
pub trait CoordinatorRegistry: Send + Sync + fmt::Debug + 'static {
    /// What this backend offers where backends differ.
    fn capability(&self) -> Capability;

    /// Creates a node, creating missing parents as persistent nodes. Returns the created path,
    /// which for sequential modes carries the sequence number.
    ///
    /// Errors: `NodeExists` (non-sequential path taken), `EphemeralParent`, `InvalidPath`,
    /// `DataTooLarge`, connection errors.
    async fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> Result<String>;

    /// Reads a node; `Ok(None)` if it does not exist.
    async fn get(&self, path: &str) -> Result<Option<Node>>;

    /// Replaces a node's data, if its version is `expected` when given. Returns the new version.
    ///
    /// Errors: `NoNode`, `BadVersion`, `DataTooLarge`.
    async fn set(&self, path: &str, data: &[u8], expected: Option<Version>) -> Result<Version>;

    /// Deletes a node without children, if its version is `expected` when given.
    ///
    /// Errors: `NoNode`, `BadVersion`, `NotEmpty`.
    async fn delete(&self, path: &str, expected: Option<Version>) -> Result<()>;

    /// Whether the node exists.
    async fn exists(&self, path: &str) -> Result<bool>;

    /// The names (last segments) of a node's children, sorted ascending by byte order.
    ///
    /// Errors: `NoNode` when the node itself does not exist.
    async fn children(&self, path: &str) -> Result<Vec<String>>;

    /// Deletes a node and everything below it; succeeds when the node does not exist. Nodes
    /// created concurrently below it may survive or fail the call with `NotEmpty` (retry).
    async fn delete_recursive(&self, path: &str) -> Result<()>;

    /// Applies `ops` atomically; see the module documentation.
    async fn transaction(&self, ops: Vec<TxnOp>) -> Result<Vec<TxnResult>>;

    /// Subscribes to the nodes `scope` covers (whose paths need not exist yet); see the module
    /// documentation, "Watches".
    ///
    /// Errors: `InvalidPath` (any entry), connection errors.
    async fn watch_scope(&self, scope: WatchScope) -> Result<WatchStream>;

    /// Subscribes to the subtree at `path` (which need not exist yet): the scope
    /// [`WatchScope::subtree`].
    async fn watch(&self, path: &str) -> Result<WatchStream> {
        self.watch_scope(WatchScope::subtree(path)).await
    }

    /// A new stream of this client's session events, opening with the current state.
    fn session_events(&self) -> SessionEvents;

    /// Joins the leader election at `path` as `participant` (an id other members can read).
    async fn leader_latch(&self, path: &str, participant: &str) -> Result<Box<dyn LeaderLatch>>;

    /// Takes the mutex at `path` for `owner` (an id unique among those locking `path`), waiting
    /// at most `timeout`.
    async fn lock(&self, path: &str, owner: &str, timeout: Duration)
        -> Result<Box<dyn MutexGuard>>;

    /// The registry server's clock, in epoch milliseconds (for the time-diff check).
    async fn registry_time(&self) -> Result<i64>;

    /// Ends the session (deleting its ephemeral nodes) and closes every stream of this client.
    /// Further operations fail with `Closed`. Closing twice is not an error.
    async fn close(&self) -> Result<()>;
}

/// A change of leadership reported by [`LeaderLatch::changed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leadership {
    /// This participant is now the leader.
    Acquired,
    /// This participant is no longer (or may no longer be) the leader: stop acting as one.
    Lost,
}

/// Membership in a leader election. The participant stays a candidate until [`leave`](Self::leave)
/// or the client closes; after a session expiry it re-joins by itself on the new session.
#[async_trait]
pub trait LeaderLatch: Send + fmt::Debug {
    /// Whether this participant holds leadership as far as it knows right now.
    fn is_leader(&self) -> bool;

    /// Waits for the next change of this participant's leadership. Cancel-safe: dropping the
    /// future loses no change, the next call reports it.
    async fn changed(&mut self) -> Result<Leadership>;

    /// The participant id of the current leader, read from the registry.
    async fn leader(&mut self) -> Result<Option<String>>;

    /// Withdraws from the election, releasing leadership if held.
    async fn leave(self: Box<Self>) -> Result<()>;
}

/// A held mutex. Release it with [`release`](Self::release); a guard dropped unreleased keeps
/// the mutex until its session ends.
#[async_trait]
pub trait MutexGuard: Send + fmt::Debug {
    /// Releases the mutex.
    async fn release(self: Box<Self>) -> Result<()>;
}
