//! The node tree the server keeps, and the batches that change it.
//!
//! Paths here are *server* paths (namespace included); the server translates to and from client
//! paths. Every change goes through a [`Batch`]: it applies ops one by one, so later ops of a
//! transaction see earlier ones, and it records how to undo each of them. Dropping a batch without
//! [`Batch::commit`] rolls everything back, which is what makes transactions all-or-nothing even
//! when a `?` leaves early.
//!
//! Nodes are found by a hash of their full path: a B-tree of tens of thousands of paths that
//! share long prefixes (`/ns/job-17/sharding/0/...`) spent most of every operation comparing
//! those prefixes. What must come out in path order (a subtree, the ephemerals of a session, a
//! dump) is sorted when asked for; those are rare (a watch's snapshot, a session's end). The
//! hasher (Fx: a few multiplications per path, where SipHash took several times as long) has
//! fixed keys, and nothing iterates the map in its own order, so runs stay deterministic.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use shardcron_core::__private::InlineName as Name;
use shardcron_core::registry::{path, Node, Version};

/// What [`Tree::subtree_where`] does with a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Visit {
    /// Returns it, and walks below it.
    Keep,
    /// Leaves it out, and walks below it.
    Skip,
    /// Leaves it and everything below it out.
    Prune,
}

/// A session's id, as reported in `SessionEvent::Connected`.
pub(crate) type SessionId = u64;

/// Width of the sequence suffix of sequential nodes (ZooKeeper's `%010d`).
const SEQ_WIDTH: usize = 10;

/// One stored node. Kept small: the map holds one per node of every job (some 16 per job), and
/// the simulator's and the benchmarks' processes hold the registry in memory (48 bytes: the
/// map's buckets, empty ones included, are this plus the key).
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub data: Box<[u8]>,
    pub version: Version,
    /// Names of the direct children, kept sorted so `children` needs no sort.
    pub children: Children,
    /// The session owning an ephemeral node, or, for a persistent one, the next sequence
    /// number for sequential children (contiguous, never reused while this node lives: a failed
    /// or rolled-back create gives its number back). One word for both: an ephemeral node has
    /// no children, so no sequence. See [`OwnerOrSeq`].
    owner_or_seq: OwnerOrSeq,
}

/// An ephemeral node's owner (the top bit set) or a persistent node's next sequence number
/// (the top bit clear). Session ids and sequence numbers stay far below 2^63: the server numbers
/// sessions from 1, and a sequence is printed in ten digits.
#[derive(Debug, Clone, Copy)]
struct OwnerOrSeq(u64);

const EPHEMERAL: u64 = 1 << 63;

impl OwnerOrSeq {
    /// The session as an owner. The server numbers sessions from 1, so 0 never names one;
    /// were it ever given, the node would be owned by no session (persistent), never by another
    /// one.
    fn of(owner: Option<SessionId>) -> Self {
        match owner {
            Some(session) if session != 0 => OwnerOrSeq(EPHEMERAL | (session & !EPHEMERAL)),
            _ => OwnerOrSeq(0),
        }
    }

    fn owner(self) -> Option<SessionId> {
        (self.0 & EPHEMERAL != 0).then_some(self.0 & !EPHEMERAL)
    }
}

impl Entry {
    fn new(data: &[u8], owner: Option<SessionId>) -> Self {
        Entry {
            data: data.into(),
            version: 0,
            children: Children::default(),
            owner_or_seq: OwnerOrSeq::of(owner),
        }
    }

    /// The session owning the node, if it is ephemeral.
    pub fn owner(&self) -> Option<SessionId> {
        self.owner_or_seq.owner()
    }

    /// The next sequence number for sequential children (0 for an ephemeral node, which has
    /// none).
    pub fn next_seq(&self) -> u64 {
        match self.owner() {
            Some(_) => 0,
            None => self.owner_or_seq.0,
        }
    }

    /// Moves the next sequence number one on (`forward`) or back (a persistent node only: an
    /// ephemeral one has no children, and creates under it are refused first).
    fn step_seq(&mut self, forward: bool) {
        if self.owner().is_none() {
            let seq = &mut self.owner_or_seq.0;
            // Never into the top bit, which would read as an owner.
            *seq = if forward { (*seq + 1).min(EPHEMERAL - 1) } else { seq.saturating_sub(1) };
        }
    }

    /// The node as the contract shows it.
    pub fn node(&self) -> Node {
        Node { data: self.data.to_vec(), version: self.version, ephemeral: self.owner().is_some() }
    }
}

/// The sorted names of a node's children. A boxed slice rather than a `BTreeSet` or a `Vec`:
/// most nodes have one to three children, a `BTreeSet` allocates room for eleven on its first
/// insert (~280 bytes per parent node: about 2 KiB of every registered job, against a target of
/// 10 KiB per job in `docs/targets.md`), and a `Vec`'s capacity takes 8 bytes of every node of
/// the map, children or not.
#[derive(Debug, Clone, Default)]
pub(crate) struct Children(Box<[Name]>);

impl Children {
    pub fn insert(&mut self, name: &str) {
        if let Err(at) = self.0.binary_search_by(|n| n.as_bytes().cmp(name.as_bytes())) {
            // Grow by one, not by doubling: most nodes have one to three children.
            let mut names = std::mem::take(&mut self.0).into_vec();
            names.reserve_exact(1);
            names.insert(at, Name::new(name));
            self.0 = names.into_boxed_slice();
        }
    }

    pub fn remove(&mut self, name: &str) {
        if let Ok(at) = self.0.binary_search_by(|n| n.as_bytes().cmp(name.as_bytes())) {
            let mut names = std::mem::take(&mut self.0).into_vec();
            names.remove(at);
            self.0 = names.into_boxed_slice();
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(Name::as_str)
    }
}

/// Why the tree refused an op. The server adds the op and the client's path to make a
/// `RegistryError` of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    NoNode,
    NodeExists,
    /// The caller expected this version and found another.
    BadVersion(Version),
    NotEmpty,
    EphemeralParent,
}

/// One applied change, for watches. Carries the node as it is right after the change.
#[derive(Debug, Clone)]
pub(crate) enum Change {
    Created(String, Node),
    Changed(String, Node),
    Deleted(String),
}

impl Change {
    pub fn path(&self) -> &str {
        match self {
            Change::Created(p, _) | Change::Changed(p, _) | Change::Deleted(p) => p,
        }
    }
}

/// How to take one change back.
#[derive(Debug)]
enum Undo {
    Created { path: String, sequential: bool },
    Set { path: String, data: Box<[u8]>, version: Version },
    Deleted { path: String, entry: Entry },
}

/// All nodes by server path. The root `/` always exists.
#[derive(Debug)]
pub(crate) struct Tree {
    nodes: HashMap<Box<str>, Entry, BuildHasherDefault<rustc_hash::FxHasher>>,
}

impl Default for Tree {
    fn default() -> Self {
        let mut nodes = HashMap::default();
        nodes.insert(path::ROOT.into(), Entry::new(b"", None));
        Tree { nodes }
    }
}

impl Tree {
    pub fn get(&self, path: &str) -> Option<&Entry> {
        self.nodes.get(path)
    }

    /// The sorted child names of `path`.
    pub fn children(&self, path: &str) -> Result<Vec<String>, Fault> {
        let entry = self.nodes.get(path).ok_or(Fault::NoNode)?;
        Ok(entry.children.iter().map(str::to_owned).collect())
    }

    /// The node at `root` and everything below it, in path order.
    pub fn subtree<'a>(&'a self, root: &'a str) -> Vec<(&'a str, &'a Entry)> {
        let mut found = self.subtree_where(root, |_| Visit::Keep);
        found.sort_unstable_by(|a, b| a.0.cmp(b.0));
        found
    }

    /// The nodes of the subtree at `root` that `visit` keeps, in no order: top down, so that
    /// `visit` may say [`Visit::Prune`] for a node whose whole subtree it does not want (a
    /// watch's snapshot of what a widened scope adds leaves out what the old scope covered,
    /// subtree by subtree, without looking at every node below).
    pub fn subtree_where<'a>(
        &'a self,
        root: &'a str,
        mut visit: impl FnMut(&str) -> Visit,
    ) -> Vec<(&'a str, &'a Entry)> {
        let Some((own, entry)) = self.nodes.get_key_value(root) else { return Vec::new() };
        let mut found = Vec::new();
        // Walk the children lists (every node lists its children).
        let mut pending = vec![(&**own, entry)];
        while let Some((at, entry)) = pending.pop() {
            match visit(at) {
                Visit::Prune => continue,
                Visit::Keep => found.push((at, entry)),
                Visit::Skip => {}
            }
            for name in entry.children.iter() {
                let child = path::join(at, name);
                if let Some((p, e)) = self.nodes.get_key_value(child.as_str()) {
                    pending.push((&**p, e));
                }
            }
        }
        found
    }

    /// Paths of the ephemeral nodes `session` owns, in path order.
    pub fn owned_by(&self, session: SessionId) -> Vec<String> {
        let mut owned: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, e)| e.owner() == Some(session))
            .map(|(p, _)| p.to_string())
            .collect();
        owned.sort_unstable();
        owned
    }

    /// Every node in path order, for dumps.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Entry)> {
        let mut all: Vec<(&str, &Entry)> = self.nodes.iter().map(|(p, e)| (&**p, e)).collect();
        all.sort_unstable_by(|a, b| a.0.cmp(b.0));
        all.into_iter()
    }

    /// How many nodes there are.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Starts a batch of changes.
    pub fn batch(&mut self) -> Batch<'_> {
        Batch { tree: self, undo: Vec::new(), changes: Vec::new() }
    }
}

/// Changes applied to the tree that are undone on drop unless committed.
#[derive(Debug)]
pub(crate) struct Batch<'a> {
    tree: &'a mut Tree,
    undo: Vec<Undo>,
    changes: Vec<Change>,
}

impl Batch<'_> {
    /// Fails if `path` does not exist or has another version than `expected`.
    pub fn check(&self, path: &str, expected: Option<Version>) -> Result<(), Fault> {
        let entry = self.tree.nodes.get(path).ok_or(Fault::NoNode)?;
        match expected {
            Some(v) if v != entry.version => Err(Fault::BadVersion(v)),
            _ => Ok(()),
        }
    }

    /// Creates the missing ancestors of `path` as persistent nodes. Fails with
    /// `EphemeralParent` (creating nothing) if an existing ancestor is ephemeral.
    pub fn create_parents(&mut self, path: &str) -> Result<(), Fault> {
        // Check first: an ephemeral ancestor must not leave half a chain of parents behind.
        for ancestor in path::ancestors(path) {
            match self.tree.nodes.get(ancestor) {
                Some(e) if e.owner().is_some() => return Err(Fault::EphemeralParent),
                Some(_) => {}
                // Below a missing node everything is missing (and will be created persistent).
                None => break,
            }
        }
        for ancestor in path::ancestors(path) {
            if !self.tree.nodes.contains_key(ancestor) {
                self.create(ancestor, b"", None, false)?;
            }
        }
        Ok(())
    }

    /// Creates `path` (with the next sequence number appended if `sequential`); its parent must
    /// exist. Returns the created path.
    pub fn create(
        &mut self,
        path: &str,
        data: &[u8],
        owner: Option<SessionId>,
        sequential: bool,
    ) -> Result<String, Fault> {
        let parent_path = path::parent(path).ok_or(Fault::NodeExists)?;
        let parent = self.tree.nodes.get(parent_path).ok_or(Fault::NoNode)?;
        if parent.owner().is_some() {
            return Err(Fault::EphemeralParent);
        }
        let full = if sequential {
            format!("{path}{:0width$}", parent.next_seq(), width = SEQ_WIDTH)
        } else {
            path.to_owned()
        };
        if self.tree.nodes.contains_key(full.as_str()) {
            return Err(Fault::NodeExists);
        }
        if let Some(parent) = self.tree.nodes.get_mut(parent_path) {
            parent.children.insert(path::name(&full));
            if sequential {
                parent.step_seq(true);
            }
        }
        let entry = Entry::new(data, owner);
        self.changes.push(Change::Created(full.clone(), entry.node()));
        self.tree.nodes.insert(full.as_str().into(), entry);
        self.undo.push(Undo::Created { path: full.clone(), sequential });
        Ok(full)
    }

    /// Replaces the data of `path`, if its version is `expected` when given. Returns the new
    /// version.
    pub fn set(
        &mut self,
        path: &str,
        data: &[u8],
        expected: Option<Version>,
    ) -> Result<Version, Fault> {
        self.check(path, expected)?;
        let entry = self.tree.nodes.get_mut(path).ok_or(Fault::NoNode)?;
        let old = std::mem::replace(&mut entry.data, data.into());
        self.undo.push(Undo::Set { path: path.to_owned(), data: old, version: entry.version });
        entry.version += 1;
        self.changes.push(Change::Changed(path.to_owned(), entry.node()));
        Ok(entry.version)
    }

    /// Deletes `path`, if its version is `expected` when given and it has no children.
    pub fn delete(&mut self, path: &str, expected: Option<Version>) -> Result<(), Fault> {
        // Same order as ZooKeeper: existence, then version, then children.
        self.check(path, expected)?;
        if self.tree.nodes.get(path).is_some_and(|e| !e.children.is_empty()) {
            return Err(Fault::NotEmpty);
        }
        self.remove(path);
        Ok(())
    }

    /// Deletes `path` and everything below it, deepest first; nothing if it does not exist.
    pub fn delete_subtree(&mut self, root: &str) {
        // In path order a descendant always sorts after its ancestors (it has them as a
        // prefix), so the reverse order deletes children before their parents.
        let doomed: Vec<String> =
            self.tree.subtree(root).into_iter().map(|(p, _)| p.to_owned()).collect();
        for path in doomed.iter().rev() {
            self.remove(path);
        }
    }

    /// Removes a node without checks (its children, if any, must be gone already).
    fn remove(&mut self, path: &str) {
        let Some(entry) = self.tree.nodes.remove(path) else { return };
        if let Some(parent) = path::parent(path).and_then(|p| self.tree.nodes.get_mut(p)) {
            parent.children.remove(path::name(path));
        }
        self.changes.push(Change::Deleted(path.to_owned()));
        self.undo.push(Undo::Deleted { path: path.to_owned(), entry });
    }

    /// Keeps the changes and returns them in the order they were applied.
    pub fn commit(mut self) -> Vec<Change> {
        self.undo.clear();
        std::mem::take(&mut self.changes)
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        while let Some(undo) = self.undo.pop() {
            match undo {
                Undo::Created { path, sequential } => {
                    self.tree.nodes.remove(path.as_str());
                    if let Some(parent) =
                        path::parent(&path).and_then(|p| self.tree.nodes.get_mut(p))
                    {
                        parent.children.remove(path::name(&path));
                        if sequential {
                            parent.step_seq(false);
                        }
                    }
                }
                Undo::Set { path, data, version } => {
                    if let Some(entry) = self.tree.nodes.get_mut(path.as_str()) {
                        entry.data = data;
                        entry.version = version;
                    }
                }
                Undo::Deleted { path, entry } => {
                    if let Some(parent) =
                        path::parent(&path).and_then(|p| self.tree.nodes.get_mut(p))
                    {
                        parent.children.insert(path::name(&path));
                    }
                    self.tree.nodes.insert(path.into(), entry);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(tree: &Tree) -> Vec<String> {
        tree.iter().map(|(p, _)| p.to_owned()).collect()
    }

    #[test]
    fn subtree_skips_siblings_sharing_a_prefix() {
        let mut tree = Tree::default();
        let mut b = tree.batch();
        for p in ["/a", "/a-b", "/a/b", "/a/b/c", "/ab"] {
            b.create_parents(p).unwrap();
            b.create(p, b"", None, false).unwrap();
        }
        b.commit();
        let sub: Vec<&str> = tree.subtree("/a").into_iter().map(|(p, _)| p).collect();
        assert_eq!(sub, vec!["/a", "/a/b", "/a/b/c"]);
        assert_eq!(tree.subtree("/").len(), 6, "the root's subtree includes the root");
        assert_eq!(tree.subtree("/none").len(), 0);
        let all: Vec<&str> = tree.iter().map(|(p, _)| p).collect();
        assert_eq!(all, vec!["/", "/a", "/a-b", "/a/b", "/a/b/c", "/ab"], "path order");
    }

    #[test]
    fn dropped_batch_rolls_back_everything() {
        let mut tree = Tree::default();
        let mut b = tree.batch();
        b.create("/p", b"x", None, false).unwrap();
        b.create("/p/s-", b"", None, true).unwrap();
        b.commit();
        let before = paths(&tree);
        {
            let mut b = tree.batch();
            assert_eq!(b.create("/p/s-", b"", Some(1), true).unwrap(), "/p/s-0000000001");
            b.set("/p", b"y", Some(0)).unwrap();
            b.delete("/p/s-0000000000", None).unwrap();
            b.delete_subtree("/p");
            assert_eq!(b.check("/p", None), Err(Fault::NoNode));
        }
        assert_eq!(paths(&tree), before);
        let p = tree.get("/p").unwrap();
        assert_eq!((&*p.data, p.version, p.next_seq()), (&b"x"[..], 0, 1));
        assert_eq!(p.children.iter().collect::<Vec<_>>(), vec!["s-0000000000"]);
    }

    #[test]
    fn one_word_holds_an_owner_or_a_sequence() {
        use super::OwnerOrSeq;
        assert_eq!(OwnerOrSeq::of(Some(7)).owner(), Some(7));
        assert_eq!(OwnerOrSeq::of(None).owner(), None);
        assert_eq!(OwnerOrSeq::of(Some(0)).owner(), None, "session 0 owns nothing");
        let mut tree = Tree::default();
        let mut b = tree.batch();
        b.create("/e", b"", Some(3), false).unwrap();
        b.create("/p", b"", None, false).unwrap();
        assert_eq!(b.create("/p/s-", b"", None, true).unwrap(), "/p/s-0000000000");
        assert_eq!(b.create("/e/s-", b"", None, true), Err(Fault::EphemeralParent));
        b.commit();
        let (e, p) = (tree.get("/e").unwrap(), tree.get("/p").unwrap());
        assert_eq!((e.owner(), e.next_seq(), e.node().ephemeral), (Some(3), 0, true));
        assert_eq!((p.owner(), p.next_seq(), p.node().ephemeral), (None, 1, false));
    }

    #[test]
    fn sequence_counter_is_per_parent_and_contiguous() {
        let mut tree = Tree::default();
        let mut b = tree.batch();
        b.create_parents("/q/x").unwrap();
        assert_eq!(b.create("/q/n-", b"", None, true).unwrap(), "/q/n-0000000000");
        assert_eq!(b.create("/q/m-", b"", None, true).unwrap(), "/q/m-0000000001");
        assert_eq!(b.create("/n-", b"", None, true).unwrap(), "/n-0000000000");
        b.delete("/q/n-0000000000", None).unwrap();
        assert_eq!(b.create("/q/n-", b"", None, true).unwrap(), "/q/n-0000000002");
    }

    #[test]
    fn faults() {
        let mut tree = Tree::default();
        let mut b = tree.batch();
        b.create("/e", b"", Some(7), false).unwrap();
        assert_eq!(b.create("/e/c", b"", None, false), Err(Fault::EphemeralParent));
        assert_eq!(b.create_parents("/e/c/d"), Err(Fault::EphemeralParent));
        assert_eq!(b.create("/x/y", b"", None, false), Err(Fault::NoNode));
        assert_eq!(b.create("/e", b"", None, false), Err(Fault::NodeExists));
        assert_eq!(b.set("/e", b"", Some(3)), Err(Fault::BadVersion(3)));
        b.create("/p/c", b"", None, false).unwrap_err();
        b.create_parents("/p/c").unwrap();
        b.create("/p/c", b"", None, false).unwrap();
        assert_eq!(b.delete("/p", Some(1)), Err(Fault::BadVersion(1)));
        assert_eq!(b.delete("/p", None), Err(Fault::NotEmpty));
        b.commit();
        assert_eq!(tree.owned_by(7), vec!["/e"]);
    }
}
