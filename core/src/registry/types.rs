//! The values that cross the registry contract: nodes, create modes, transaction ops, watch and
//! session events.

use std::collections::BTreeMap;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;
use rustc_hash::FxHashSet;

use super::path::ROOT;

mod minimal_union;

/// A node's data version: 0 when created, +1 on every successful `set`.
pub type Version = u64;

/// The largest node data the contract accepts (1 MiB). Larger data is rejected before it reaches
/// the server with [`super::RegistryError::DataTooLarge`].
pub const MAX_DATA_SIZE: usize = 1024 * 1024;

/// How a node lives and how it is named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CreateMode {
    /// Lives until deleted.
    Persistent,
    /// Deleted when the creating session ends (closed or expired). Cannot have children.
    Ephemeral,
    /// Persistent, with a 10-digit zero-padded sequence number appended to the name.
    PersistentSequential,
    /// Ephemeral, with a sequence number appended.
    EphemeralSequential,
}

impl CreateMode {
    /// Whether the node dies with its session.
    pub fn is_ephemeral(self) -> bool {
        matches!(self, CreateMode::Ephemeral | CreateMode::EphemeralSequential)
    }

    /// Whether the backend appends a sequence number to the name.
    pub fn is_sequential(self) -> bool {
        matches!(self, CreateMode::PersistentSequential | CreateMode::EphemeralSequential)
    }
}

/// A node as read: its data, its version, and whether it is ephemeral.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Node {
    /// The node's bytes (text, in every node shardcron writes).
    pub data: Vec<u8>,
    /// Advances on every write of the data; what conditional writes compare against.
    pub version: Version,
    /// Deleted by the registry when the session that created it ends.
    pub ephemeral: bool,
}

impl Node {
    /// The data as UTF-8 text, lossily (registry nodes of shardcron hold text).
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.data)
    }
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node")
            .field("data", &self.text())
            .field("version", &self.version)
            .field("ephemeral", &self.ephemeral)
            .finish()
    }
}

/// One operation of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnOp {
    /// The node exists, and has `version` if one is given.
    Check {
        /// The node.
        path: String,
        /// The version it must have; `None` checks only that it exists.
        version: Option<Version>,
    },
    /// The node does not exist; fails with [`RegistryError::NodeExists`] if it does. Only
    /// where [`Capability::absent_check`] says the backend can check it: ZooKeeper's
    /// transactions cannot, and refuse it.
    ///
    /// [`RegistryError::NodeExists`]: super::RegistryError::NodeExists
    Absent {
        /// The node.
        path: String,
    },
    /// Create a node. Unlike [`super::CoordinatorRegistry::create`] the parent must exist.
    Create {
        /// The node to create (the prefix of its name, for sequential modes).
        path: String,
        /// Its data.
        data: Vec<u8>,
        /// Persistent or ephemeral, sequential or not.
        mode: CreateMode,
    },
    /// Replace the data, if the version matches when one is given.
    Set {
        /// The node.
        path: String,
        /// The new data.
        data: Vec<u8>,
        /// The version it must have; `None` writes whatever the version.
        version: Option<Version>,
    },
    /// Delete a node without children, if the version matches when one is given.
    Delete {
        /// The node.
        path: String,
        /// The version it must have; `None` deletes whatever the version.
        version: Option<Version>,
    },
}

impl TxnOp {
    /// [`TxnOp::Check`], taking anything that converts.
    pub fn check(path: impl Into<String>, version: Option<Version>) -> Self {
        TxnOp::Check { path: path.into(), version }
    }
    /// [`TxnOp::Absent`], taking anything that converts.
    pub fn absent(path: impl Into<String>) -> Self {
        TxnOp::Absent { path: path.into() }
    }
    /// [`TxnOp::Create`], taking anything that converts.
    pub fn create(path: impl Into<String>, data: impl Into<Vec<u8>>, mode: CreateMode) -> Self {
        TxnOp::Create { path: path.into(), data: data.into(), mode }
    }
    /// [`TxnOp::Set`], taking anything that converts.
    pub fn set(
        path: impl Into<String>,
        data: impl Into<Vec<u8>>,
        version: Option<Version>,
    ) -> Self {
        TxnOp::Set { path: path.into(), data: data.into(), version }
    }
    /// [`TxnOp::Delete`], taking anything that converts.
    pub fn delete(path: impl Into<String>, version: Option<Version>) -> Self {
        TxnOp::Delete { path: path.into(), version }
    }

    /// The path the op works on.
    pub fn path(&self) -> &str {
        match self {
            TxnOp::Check { path, .. }
            | TxnOp::Absent { path }
            | TxnOp::Create { path, .. }
            | TxnOp::Set { path, .. }
            | TxnOp::Delete { path, .. } => path,
        }
    }
}

/// What one op of a committed transaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnResult {
    /// The check held.
    Checked,
    /// The created node's actual path (with its sequence number, for sequential modes).
    Created {
        /// The path, sequence number included.
        path: String,
    },
    /// The node's new version.
    Set {
        /// The version after the write.
        version: Version,
    },
    /// The node is gone.
    Deleted,
}

/// What one watch covers: whole subtrees, and single nodes.
///
/// A *subtree* entry covers its root and every node below it, at any depth. A *node* entry
/// covers that one node: its creation, its data and its deletion, but not its children (a child
/// created under it is reported only when another entry covers the child). Neither needs to
/// exist when the watch opens. Entries may overlap (a node also inside a subtree, a subtree
/// inside another); a change is reported once however many entries cover it. An empty scope
/// covers nothing: its watch opens with an empty `Resync` and stays silent.
///
/// The entries are kept sorted and without duplicates, so two scopes built from the same
/// entries in any order are equal.
///
/// ```
/// use shardcron_core::registry::WatchScope;
///
/// let scope = WatchScope::subtree("/job/config")
///     .with_subtree("/job/instances")
///     .with_node("/job/sharding/0/instance");
/// assert!(scope.covers("/job/config"));
/// assert!(scope.covers("/job/instances/10.0.0.7@-@42"));
/// assert!(scope.covers("/job/sharding/0/instance"));
/// assert!(!scope.covers("/job/sharding/0/running"));
/// assert!(!scope.covers("/job/configs"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WatchScope {
    /// Roots of the covered subtrees, sorted, without duplicates.
    subtrees: Vec<String>,
    /// The covered single nodes, sorted, without duplicates.
    nodes: Vec<String>,
}

impl WatchScope {
    /// A scope covering nothing yet; add entries with [`with_subtree`](Self::with_subtree)
    /// and [`with_node`](Self::with_node).
    pub fn new() -> Self {
        WatchScope::default()
    }

    /// The subtree at `root`: the node and everything below it (what
    /// [`super::CoordinatorRegistry::watch`] covers).
    pub fn subtree(root: impl Into<String>) -> Self {
        WatchScope::new().with_subtree(root)
    }

    /// The single node at `path`, without its children.
    pub fn node(path: impl Into<String>) -> Self {
        WatchScope::new().with_node(path)
    }

    /// The scope of these entries, given in any order, duplicates allowed: sorted once
    /// (adding many entries one by one keeps the lists sorted at every insertion).
    pub fn of_entries(mut subtrees: Vec<String>, mut nodes: Vec<String>) -> Self {
        subtrees.sort_unstable();
        subtrees.dedup();
        nodes.sort_unstable();
        nodes.dedup();
        WatchScope { subtrees, nodes }
    }

    /// This scope and the subtree at `root`.
    pub fn with_subtree(mut self, root: impl Into<String>) -> Self {
        insert_sorted(&mut self.subtrees, root.into());
        self
    }

    /// This scope and the single node at `path`.
    pub fn with_node(mut self, path: impl Into<String>) -> Self {
        insert_sorted(&mut self.nodes, path.into());
        self
    }

    /// The roots of the subtree entries, sorted.
    pub fn subtrees(&self) -> &[String] {
        &self.subtrees
    }

    /// The single-node entries, sorted.
    pub fn nodes(&self) -> &[String] {
        &self.nodes
    }

    /// Whether the scope has no entry (covers nothing).
    pub fn is_empty(&self) -> bool {
        self.subtrees.is_empty() && self.nodes.is_empty()
    }

    /// Whether a change of the node at `path` is reported: `path` is the root of a subtree
    /// entry or lies below one, or is a node entry.
    pub fn covers(&self, path: &str) -> bool {
        self.nodes.binary_search_by(|n| n.as_str().cmp(path)).is_ok() || self.in_subtree(path)
    }

    /// Whether `path` is a subtree root or lies below one: one lookup per ancestor of `path`,
    /// so the cost grows with the depth of the path, not with the number of entries.
    fn in_subtree(&self, path: &str) -> bool {
        if self.subtrees.is_empty() {
            return false;
        }
        let has = |root: &str| self.subtrees.binary_search_by(|s| s.as_str().cmp(root)).is_ok();
        has(ROOT) || has(path) || super::path::ancestors(path).any(has)
    }

    /// Whether everything `other` covers, this scope covers too.
    pub fn includes(&self, other: &WatchScope) -> bool {
        // A few entries: a search each. Many (a ZooKeeper feed asks whether its whole watch
        // includes a subscriber's at every change of scope, tens of thousands of entries at
        // ten thousand jobs): the roots hashed once, a lookup per ancestor.
        if other.subtrees.len() + other.nodes.len() < 64 {
            return other.subtrees.iter().all(|root| self.in_subtree(root))
                && other.nodes.iter().all(|node| self.covers(node));
        }
        let roots = HashedRoots::of(self);
        other.subtrees.iter().all(|root| roots.in_subtree(root))
            && other.nodes.iter().all(|node| {
                self.nodes.binary_search_by(|n| n.as_str().cmp(node)).is_ok()
                    || roots.in_subtree(node)
            })
    }

    /// The same coverage with no entry another one makes redundant: subtrees inside another
    /// subtree and nodes inside a subtree are left out (a node entry that is also a subtree
    /// root is covered by the subtree). What a backend registers server-side.
    pub fn minimal(&self) -> WatchScope {
        // A root is redundant when a proper ancestor of it is a root too: one hashed lookup
        // per ancestor, not a comparison with every other root (nor a binary search among
        // tens of thousands of them per ancestor).
        let roots = HashedRoots::of(self);
        let subtrees: Vec<String> =
            self.subtrees.iter().filter(|root| !roots.below_another(root)).cloned().collect();
        // A node is covered when it is a root or lies below one (a redundant root's ancestor
        // is a kept root, so the whole set answers the same as the kept ones).
        let nodes = self.nodes.iter().filter(|n| !roots.in_subtree(n)).cloned().collect();
        WatchScope { subtrees, nodes }
    }

    /// The entries of `new` that `self` lacks, and the entries of `self` that `new` lacks:
    /// `(added subtrees, added nodes, removed subtrees, removed nodes)`, each sorted. Compares
    /// entries, not coverage (a node entry inside a subtree entry is an entry of its own), in
    /// one pass over both sorted lists.
    #[allow(clippy::type_complexity)]
    pub fn entry_changes<'a>(
        &'a self,
        new: &'a WatchScope,
    ) -> (Vec<&'a str>, Vec<&'a str>, Vec<&'a str>, Vec<&'a str>) {
        let (added_subtrees, removed_subtrees) = sorted_diff(&self.subtrees, &new.subtrees);
        let (added_nodes, removed_nodes) = sorted_diff(&self.nodes, &new.nodes);
        (added_subtrees, added_nodes, removed_subtrees, removed_nodes)
    }

    /// Everything either scope covers: one pass over both sorted lists (a ZooKeeper feed
    /// takes the union of its whole watch with a subscriber's at every change of scope, tens
    /// of thousands of entries each at ten thousand jobs).
    pub fn union(&self, other: &WatchScope) -> WatchScope {
        WatchScope {
            subtrees: sorted_union(&self.subtrees, &other.subtrees),
            nodes: sorted_union(&self.nodes, &other.nodes),
        }
    }

    /// Everything any of `scopes` covers: [`union`](Self::union) of many at once, sorted
    /// once rather than entry by entry.
    pub fn union_of<'a>(scopes: impl IntoIterator<Item = &'a WatchScope>) -> WatchScope {
        let mut out = WatchScope::new();
        for scope in scopes {
            out.subtrees.extend_from_slice(&scope.subtrees);
            out.nodes.extend_from_slice(&scope.nodes);
        }
        out.subtrees.sort_unstable();
        out.subtrees.dedup();
        out.nodes.sort_unstable();
        out.nodes.dedup();
        out
    }

    /// Checks every entry with [`super::path::validate`]; the error names the first invalid
    /// one. Backends call it before any I/O.
    pub fn validate(&self) -> Result<(), super::RegistryError> {
        self.subtrees.iter().chain(&self.nodes).try_for_each(|p| super::path::validate(p))
    }

    /// The scope with `f` applied to every path (e.g. a backend adding its namespace prefix).
    pub fn map_paths(&self, mut f: impl FnMut(&str) -> String) -> WatchScope {
        let subtrees = self.subtrees.iter().map(|p| f(p)).collect();
        let nodes = self.nodes.iter().map(|p| f(p)).collect();
        WatchScope::of_entries(subtrees, nodes)
    }
    /// Applies `change` to the entries: those of `change.remove` leave, then those of
    /// `change.add` join (an entry in both stays). Entries, not coverage: removing a node
    /// inside a subtree entry leaves it covered.
    pub fn apply(&mut self, change: &ScopeChange) {
        self.apply_entries(&change.add, &change.remove);
    }

    /// Applies a change given as its two parts (see [`apply`](Self::apply)). A few entries
    /// cost a search and a shift each; more, one pass over the lists that moves their strings
    /// (a ZooKeeper client's union of tens of thousands of entries changes by dozens).
    pub fn apply_entries(&mut self, add: &WatchScope, remove: &WatchScope) {
        let few =
            add.subtrees.len() + add.nodes.len() + remove.subtrees.len() + remove.nodes.len() <= 8;
        if few {
            for root in &remove.subtrees {
                if let Ok(at) = self.subtrees.binary_search(root) {
                    self.subtrees.remove(at);
                }
            }
            for node in &remove.nodes {
                if let Ok(at) = self.nodes.binary_search(node) {
                    self.nodes.remove(at);
                }
            }
            for root in &add.subtrees {
                insert_sorted(&mut self.subtrees, root.clone());
            }
            for node in &add.nodes {
                insert_sorted(&mut self.nodes, node.clone());
            }
            return;
        }
        minimal_union::apply_sorted(&mut self.subtrees, &remove.subtrees, &add.subtrees);
        minimal_union::apply_sorted(&mut self.nodes, &remove.nodes, &add.nodes);
    }

    /// This scope with `change` applied (see [`apply`](Self::apply)).
    pub fn with_change(mut self, change: &ScopeChange) -> WatchScope {
        self.apply(change);
        self
    }

    /// The change from `self` to `new`, entry by entry, numbered `generation`.
    pub fn change_to(&self, new: &WatchScope, generation: u64) -> ScopeChange {
        let (add_subtrees, add_nodes, remove_subtrees, remove_nodes) = self.entry_changes(new);
        let owned = |v: Vec<&str>| v.into_iter().map(str::to_owned).collect::<Vec<_>>();
        ScopeChange {
            generation,
            add: WatchScope { subtrees: owned(add_subtrees), nodes: owned(add_nodes) },
            remove: WatchScope { subtrees: owned(remove_subtrees), nodes: owned(remove_nodes) },
        }
    }
}

/// A change of a watch's scope ([`WatchScoper::rescope`]): entries leave and entries join, so
/// that a change costs what it changes, not the size of the scope (a scheduler with thousands
/// of jobs watches tens of thousands of entries, and changes them a few at a time).
///
/// ```
/// use shardcron_core::registry::{ScopeChange, WatchScope};
///
/// let scope = WatchScope::subtree("/job/config").with_node("/job/sharding/0/instance");
/// let change = ScopeChange {
///     generation: 1,
///     add: WatchScope::node("/job/sharding/1/instance"),
///     remove: WatchScope::node("/job/sharding/0/instance"),
/// };
/// let scope = scope.with_change(&change);
/// assert!(scope.covers("/job/sharding/1/instance"));
/// assert!(!scope.covers("/job/sharding/0/instance"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ScopeChange {
    /// Orders the changes of one stream, from 1 up: a change whose generation is not above
    /// the last one applied is a retry of one applied already, and changes nothing.
    pub generation: u64,
    /// Entries that join the scope.
    pub add: WatchScope,
    /// Entries that leave the scope (an entry the scope lacks is ignored).
    pub remove: WatchScope,
}

impl ScopeChange {
    /// Whether the change adds and removes nothing.
    pub fn is_empty(&self) -> bool {
        self.add.is_empty() && self.remove.is_empty()
    }

    /// Checks every entry with [`super::path::validate`] (see [`WatchScope::validate`]).
    pub fn validate(&self) -> Result<(), super::RegistryError> {
        self.add.validate()?;
        self.remove.validate()
    }

    /// The change with `f` applied to every path (e.g. a backend adding its namespace prefix).
    pub fn map_paths(&self, mut f: impl FnMut(&str) -> String) -> ScopeChange {
        ScopeChange {
            generation: self.generation,
            add: self.add.map_paths(&mut f),
            remove: self.remove.map_paths(&mut f),
        }
    }

    /// The path errors about this change name: its first entry (`/` for an empty change).
    pub fn label(&self) -> &str {
        self.add
            .subtrees
            .iter()
            .chain(&self.add.nodes)
            .chain(&self.remove.subtrees)
            .chain(&self.remove.nodes)
            .next()
            .map_or("/", String::as_str)
    }
}

impl fmt::Display for WatchScope {
    /// `subtrees [/a, /b] nodes [/c]`, for messages and logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "subtrees [{}] nodes [{}]", self.subtrees.join(", "), self.nodes.join(", "))
    }
}

/// What `new` has that `old` lacks, and what `old` has that `new` lacks (both sorted, without
/// duplicates).
fn sorted_diff<'a>(old: &'a [String], new: &'a [String]) -> (Vec<&'a str>, Vec<&'a str>) {
    let (mut added, mut removed) = (Vec::new(), Vec::new());
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < new.len() {
        match (old.get(i), new.get(j)) {
            (Some(o), Some(n)) if o == n => {
                i += 1;
                j += 1;
            }
            (Some(o), Some(n)) if o < n => {
                removed.push(o.as_str());
                i += 1;
            }
            (_, Some(n)) => {
                added.push(n.as_str());
                j += 1;
            }
            (Some(o), None) => {
                removed.push(o.as_str());
                i += 1;
            }
            (None, None) => break,
        }
    }
    (added, removed)
}

/// A scope's subtree roots in a hash set: for scopes of tens of thousands of roots, a lookup
/// per ancestor of a path instead of a binary search per ancestor.
struct HashedRoots<'a> {
    roots: FxHashSet<&'a str>,
    /// `/` is a root: everything is below it.
    everything: bool,
}

impl<'a> HashedRoots<'a> {
    fn of(scope: &'a WatchScope) -> Self {
        let roots: FxHashSet<&str> = scope.subtrees.iter().map(String::as_str).collect();
        let everything = roots.contains(ROOT);
        HashedRoots { roots, everything }
    }

    /// `path` is a root or lies below one.
    fn in_subtree(&self, path: &str) -> bool {
        self.everything
            || self.roots.contains(path)
            || super::path::ancestors(path).any(|a| self.roots.contains(a))
    }

    /// `root` lies below another root.
    fn below_another(&self, root: &str) -> bool {
        root != ROOT
            && (self.everything || super::path::ancestors(root).any(|a| self.roots.contains(a)))
    }
}

/// The entries of either sorted, duplicate-free list, sorted and without duplicates.
fn sorted_union(a: &[String], b: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(a.len().max(b.len()));
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => {
                out.push(a[i].clone());
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.push(b[j].clone());
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                out.push(a[i].clone());
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

fn insert_sorted(list: &mut Vec<String>, entry: String) {
    if let Err(at) = list.binary_search(&entry) {
        list.insert(at, entry);
    }
}

/// A change of a node a watch covers (see [`WatchScope`]). Paths are absolute within the
/// client's namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEvent {
    /// Every node the watch covers, as it is now, replacing whatever the subscriber knew.
    /// Always the first event of a stream, and sent again after any gap (session expiry, a
    /// reconnect that may have lost events). Sorted by path, each node once; empty when no
    /// covered node exists.
    Resync {
        /// Every covered node, by path.
        nodes: BTreeMap<String, Node>,
    },
    /// A covered node appeared.
    Created {
        /// Its path.
        path: String,
        /// The node as created.
        node: Node,
    },
    /// A node's data was written (its version advanced).
    Changed {
        /// Its path.
        path: String,
        /// The node after the write.
        node: Node,
    },
    /// A covered node was deleted (by a client, or by the end of its session).
    Deleted {
        /// Its path.
        path: String,
    },
    /// The stream's scope was changed in place ([`WatchScoper::rescope`]): the events before
    /// this one are of the old scope, those after it of `scope`. `added` holds every existing
    /// node `scope` covers that the old scope did not, as the backend read it for the change
    /// (see the module documentation of [`crate::registry`]); the nodes the old scope covered
    /// and `scope` does not are no longer reported (drop them). A later `Resync` is of `scope`.
    Rescoped {
        /// The change now in force: the stream covers its old entries less `remove`, plus
        /// `add`. Who needs to know what left the stream keeps the scope and applies the change
        /// to it ([`WatchScope::apply`]).
        change: ScopeChange,
        /// The nodes the change brings into the stream, by path.
        added: BTreeMap<String, Node>,
    },
}

impl WatchEvent {
    /// The path of a single-node event; `None` for a resync.
    pub fn path(&self) -> Option<&str> {
        match self {
            WatchEvent::Resync { .. } | WatchEvent::Rescoped { .. } => None,
            WatchEvent::Created { path, .. }
            | WatchEvent::Changed { path, .. }
            | WatchEvent::Deleted { path } => Some(path),
        }
    }

    /// Applies the event to a view of the covered nodes. Events are applied as upserts and removals, so
    /// an event the view already reflects (which some backends may repeat right after a resync)
    /// leaves the view as it is.
    pub fn apply_to(&self, view: &mut BTreeMap<String, Node>) {
        match self {
            WatchEvent::Resync { nodes } => view.clone_from(nodes),
            WatchEvent::Created { path, node } | WatchEvent::Changed { path, node } => {
                view.insert(path.clone(), node.clone());
            }
            WatchEvent::Deleted { path } => {
                view.remove(path);
            }
            WatchEvent::Rescoped { change, added } => {
                view.retain(|path, _| !change.remove.covers(path) || change.add.covers(path));
                view.extend(added.iter().map(|(p, n)| (p.clone(), n.clone())));
            }
        }
    }

    /// [`apply_to`](Self::apply_to) for a subscriber that keeps the stream's scope: exact for
    /// every event, where `apply_to` takes a `Rescoped` change's removed entries for the whole
    /// of what leaves (true when no entry kept covers what a removed one did). `scope` follows
    /// the stream's.
    pub fn apply_within(&self, view: &mut BTreeMap<String, Node>, scope: &mut WatchScope) {
        match self {
            WatchEvent::Rescoped { change, added } => {
                scope.apply(change);
                view.retain(|path, _| scope.covers(path));
                view.extend(added.iter().map(|(p, n)| (p.clone(), n.clone())));
            }
            other => other.apply_to(view),
        }
    }
}

/// The state of a client's link and session, as reported on its session stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SessionEvent {
    /// A session is established; `session` identifies it (new after every expiry).
    Connected {
        /// The session's number: a new one after every expiry, so that a subscriber can tell a
        /// reconnect to the same session from a new session.
        session: u64,
    },
    /// The link is down; the session may still be alive on the server. Stop starting work that
    /// depends on ephemeral nodes: they may vanish at any moment.
    Suspended,
    /// The link is back and the same session survived: ephemeral nodes are intact.
    Reconnected,
    /// The session is gone and its ephemeral nodes deleted. A `Connected` with a new session
    /// follows once the registry is reachable.
    Expired,
    /// The client's local lease deadline passed without contact (Curator's LOST): the server
    /// may expire the session at any moment from now on, if it has not yet, and another client
    /// may then take over what its ephemeral nodes stood for. Treat every ephemeral node and any
    /// leadership of this session as gone and stop the work they guarded, now. Always after a
    /// `Suspended`; the client never resumes this session: the next events are `Expired` (once
    /// the session is gone for sure) and then `Connected` with a new one. See the module
    /// documentation of [`crate::registry`], "Sessions".
    Lost,
    /// The client was closed; the stream ends after this.
    Closed,
}

/// A boxed stream of watch events; ends when the client is closed. A backend's stream carries
/// the [`WatchScoper`] that changes its scope in place.
pub struct WatchStream {
    inner: Pin<Box<dyn Stream<Item = WatchEvent> + Send>>,
    scoper: Option<Arc<dyn WatchScoper>>,
}

impl WatchStream {
    /// Wraps a stream whose scope cannot be changed in place.
    pub fn new(inner: impl Stream<Item = WatchEvent> + Send + 'static) -> Self {
        WatchStream { inner: Box::pin(inner), scoper: None }
    }

    /// Wraps a backend's stream with what changes its scope (a wrapper of another stream
    /// passes that one's [`scoper`](Self::scoper) on).
    pub fn with_scoper(
        inner: impl Stream<Item = WatchEvent> + Send + 'static,
        scoper: Option<Arc<dyn WatchScoper>>,
    ) -> Self {
        WatchStream { inner: Box::pin(inner), scoper }
    }

    /// What changes this stream's scope in place; `None` for a stream made with
    /// [`new`](Self::new).
    pub fn scoper(&self) -> Option<Arc<dyn WatchScoper>> {
        self.scoper.clone()
    }
}

impl Stream for WatchStream {
    type Item = WatchEvent;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<WatchEvent>> {
        self.inner.as_mut().poll_next(cx)
    }
}

/// Changes the scope of one open watch stream in place; see the module documentation of
/// [`crate::registry`], "Changing a watch's scope". Held apart from the stream, so that the
/// stream's reader need not wait for the registry while a change is under way.
#[async_trait::async_trait]
pub trait WatchScoper: Send + Sync + fmt::Debug {
    /// Changes the stream's entries by `change` (see [`ScopeChange`]), at the cost of what the
    /// change adds and removes only, however large the scope. Returns once the stream carries
    /// the [`WatchEvent::Rescoped`] of the change. On an error the stream keeps the scope it
    /// had, and carries no `Rescoped`. A change whose generation is not above the last one
    /// applied to the stream is a retry of one applied already (its answer was lost or late):
    /// it changes nothing, puts nothing into the stream, and returns `Ok`.
    ///
    /// Errors: `InvalidPath` (any entry, before any I/O), `Closed` (the stream was dropped or
    /// the client closed), connection errors, `Timeout`. `Closed` is final: a caller gives
    /// the change up on it. A change cut short while the stream lives on (say, reopened or
    /// read again) must fail with a retryable error instead, or the caller never sends it again.
    async fn rescope(&self, change: ScopeChange) -> Result<(), super::RegistryError>;
}

impl fmt::Debug for WatchStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WatchStream")
    }
}

/// A boxed stream of session events; opens with the current state, ends after `Closed`.
pub struct SessionEvents(Pin<Box<dyn Stream<Item = SessionEvent> + Send>>);

impl SessionEvents {
    /// Wraps a backend's stream.
    pub fn new(inner: impl Stream<Item = SessionEvent> + Send + 'static) -> Self {
        SessionEvents(Box::pin(inner))
    }
}

impl Stream for SessionEvents {
    type Item = SessionEvent;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<SessionEvent>> {
        self.0.as_mut().poll_next(cx)
    }
}

impl fmt::Debug for SessionEvents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SessionEvents")
    }
}

/// What a backend offers where backends legitimately differ. The behaviour suite reads it to
/// decide how strict a check may be.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capability {
    /// Short backend name for messages: `mem`, `zookeeper`, `etcd`.
    pub backend: &'static str,
    /// Watch events after a resync are exactly the changes made after it, each once. When false,
    /// the first events after a resync may repeat changes the resync already showed (see
    /// [`WatchEvent::apply_to`]).
    pub exact_watch: bool,
    /// Sequence numbers under one parent go up by exactly one per sequential create. When false
    /// they only increase (ZooKeeper counts every child change).
    pub contiguous_sequence: bool,
    /// The backend enforces ACLs on the nodes it creates.
    pub acl: bool,
    /// How many ops the scheduler may put in one transaction when it combines the
    /// transactions of several jobs (it never splits one job's transaction): what the backend
    /// takes in one request at its best, e.g. etcd's limit on the ops of one `Txn`.
    pub txn_batch_ops: usize,
    /// A transaction can check that a node is absent ([`TxnOp::Absent`]). ZooKeeper's cannot.
    pub absent_check: bool,
    /// Every watch delivers the changes of all the entries of its scope in the order the
    /// registry applied them, so a view built from it is always the registry's state at one
    /// moment (ZooKeeper: one session's events come in order). When false (etcd catches up
    /// some watches of a stream later than the others, and their events come late), a view
    /// can show some entries behind the others, and the scheduler fences its decisions on
    /// the absence of what it relied on being absent ([`TxnOp::Absent`]).
    pub views_in_order: bool,
}

impl Capability {
    /// What [`Capability::txn_batch_ops`] is for a backend that does not say.
    pub const DEFAULT_TXN_BATCH_OPS: usize = 64;

    /// What a backend named `backend` offers by default: exact watches, contiguous sequence
    /// numbers and views in order (what ZooKeeper gives), no ACLs, no absence checks,
    /// [`Self::DEFAULT_TXN_BATCH_OPS`]; a backend then changes what differs.
    pub fn new(backend: &'static str) -> Self {
        Capability {
            backend,
            exact_watch: true,
            contiguous_sequence: true,
            acl: false,
            txn_batch_ops: Self::DEFAULT_TXN_BATCH_OPS,
            absent_check: false,
            views_in_order: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::WatchScope;
    use proptest::prelude::*;

    /// The entry-by-entry union and the binary-searched minimal form the faster ones replaced:
    /// the answers to compare them with.
    fn union_by_insertion(a: &WatchScope, b: &WatchScope) -> WatchScope {
        let mut out = a.clone();
        for root in b.subtrees() {
            out = out.with_subtree(root.clone());
        }
        for node in b.nodes() {
            out = out.with_node(node.clone());
        }
        out
    }

    fn minimal_by_search(scope: &WatchScope) -> WatchScope {
        let below_another = |root: &str| {
            scope.subtrees().iter().any(|other| {
                other != root && (other == "/" || root.starts_with(&format!("{other}/")))
            })
        };
        let subtrees: Vec<String> =
            scope.subtrees().iter().filter(|r| !below_another(r)).cloned().collect();
        let outer = WatchScope::of_entries(subtrees, Vec::new());
        let nodes = scope.nodes().iter().filter(|n| !outer.covers(n)).cloned().collect();
        WatchScope::of_entries(outer.subtrees().to_vec(), nodes)
    }

    /// Paths over a few short names, deep enough for subtrees inside subtrees, with the
    /// names that sort between a path and its children (`/a-b` between `/a` and `/a/x`).
    pub(super) fn path() -> impl Strategy<Value = String> {
        prop_oneof![
            1 => Just("/".to_owned()),
            30 => prop::collection::vec(prop::sample::select(vec!["a", "a-b", "b", "ab", "c"]), 1..4)
                .prop_map(|segments| format!("/{}", segments.join("/"))),
        ]
    }

    pub(super) fn scope() -> impl Strategy<Value = WatchScope> {
        (prop::collection::vec(path(), 0..8), prop::collection::vec(path(), 0..8))
            .prop_map(|(subtrees, nodes)| WatchScope::of_entries(subtrees, nodes))
    }

    proptest! {
        #[test]
        fn the_merged_union_is_the_union(a in scope(), b in scope()) {
            prop_assert_eq!(a.union(&b), union_by_insertion(&a, &b));
        }

        #[test]
        fn inclusion_is_coverage_of_every_entry(
            a in scope(),
            b in scope(),
            wide in prop::collection::vec(scope(), 16..24),
        ) {
            // Every entry of `b` covered by `a`, each looked up alone: what inclusion means,
            // for the few entries searched one by one and the many hashed at once.
            let each = |a: &WatchScope, b: &WatchScope| {
                let below = |r: &str, s: &str| s == "/" || r == s || r.starts_with(&format!("{s}/"));
                b.subtrees().iter().all(|r| a.subtrees().iter().any(|s| below(r, s)))
                    && b.nodes().iter().all(|n| a.covers(n))
            };
            prop_assert_eq!(a.includes(&b), each(&a, &b));
            let many = WatchScope::union_of(&wide);
            let half = WatchScope::union_of(&wide[..wide.len() / 2]).union(&b);
            for (x, y) in [(&a, &many), (&many, &a), (&many, &many), (&many, &half), (&half, &many)] {
                prop_assert_eq!(x.includes(y), each(x, y));
            }
        }

        #[test]
        fn the_hashed_minimal_form_is_the_minimal_form(s in scope()) {
            let minimal = s.minimal();
            prop_assert_eq!(&minimal, &minimal_by_search(&s));
            // Same coverage.
            prop_assert!(minimal.includes(&s) && s.includes(&minimal));
        }
    }

    #[test]
    fn scope_covers_subtrees_and_single_nodes() {
        let scope = WatchScope::subtree("/a").with_node("/b/c");
        for covered in ["/a", "/a/x", "/a/x/y", "/b/c"] {
            assert!(scope.covers(covered), "{covered}");
        }
        for outside in ["/", "/ab", "/b", "/b/c/d", "/b/cd", "/c"] {
            assert!(!scope.covers(outside), "{outside}");
        }
        assert!(WatchScope::subtree("/").covers("/"));
        assert!(WatchScope::subtree("/").covers("/any/thing"));
        assert!(!WatchScope::new().covers("/"));
        assert!(WatchScope::new().is_empty());
    }

    #[test]
    fn scope_entries_are_sorted_and_unique() {
        let one = WatchScope::node("/b").with_subtree("/z").with_node("/a").with_node("/b");
        let two = WatchScope::subtree("/z").with_node("/a").with_node("/b");
        assert_eq!(one, two);
        assert_eq!(one.nodes(), ["/a", "/b"]);
        assert_eq!(one.subtrees(), ["/z"]);
        assert_eq!(one.to_string(), "subtrees [/z] nodes [/a, /b]");
    }

    #[test]
    fn minimal_scope_keeps_the_coverage() {
        let scope = WatchScope::subtree("/a")
            .with_subtree("/a/b")
            .with_subtree("/c")
            .with_node("/a/x")
            .with_node("/c")
            .with_node("/d")
            .with_node("/d/e");
        let minimal = scope.minimal();
        assert_eq!(minimal.subtrees(), ["/a", "/c"]);
        assert_eq!(minimal.nodes(), ["/d", "/d/e"]);
        assert!(minimal.includes(&scope) && scope.includes(&minimal));
        assert_eq!(WatchScope::subtree("/").with_node("/x").minimal(), WatchScope::subtree("/"));
    }

    #[test]
    fn inclusion_and_union() {
        let wide = WatchScope::subtree("/job");
        let narrow = WatchScope::subtree("/job/config").with_node("/job/leader");
        assert!(wide.includes(&narrow));
        assert!(!narrow.includes(&wide));
        // Node entries never include a subtree, even one with no node below yet.
        assert!(!WatchScope::node("/x").includes(&WatchScope::subtree("/x")));
        assert!(WatchScope::subtree("/x").includes(&WatchScope::node("/x")));
        let both = narrow.union(&WatchScope::node("/other"));
        assert_eq!(WatchScope::union_of([&narrow, &WatchScope::node("/other")]), both);
        assert_eq!(both.nodes(), ["/job/leader", "/other"]);
        assert!(both.includes(&narrow));
        assert!(WatchScope::new().includes(&WatchScope::new()));
    }

    #[test]
    fn invalid_entries_are_named() {
        let err = WatchScope::subtree("/ok").with_node("/bad/").validate().unwrap_err();
        assert!(err.to_string().contains("/bad/"), "{err}");
        assert!(WatchScope::subtree("/").with_node("/a").validate().is_ok());
    }
}
