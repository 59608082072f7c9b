//! The compares of a commit: what the evaluation of a transaction depended on, unchanged since
//! the snapshot it read.
//!
//! The plain guard of a key read is its `mod_revision` (0 for an absent key): a change, a
//! delete, a delete and re-create all fail it. A delete that needs its node empty adds one
//! compare over the node's children index: no child appeared. etcd allows at most
//! `--max-txn-ops` compares in a `Txn` (128 by default, [`crate::nest`]), and a transaction of
//! many sharding items reads several keys per item (the queue of a departed owner's items five,
//! the start of a catch-up six), so [`guards`] saves compares where the saving is exact, and
//! when that does not suffice, pins whole subtrees with three compares each.

use std::collections::{BTreeMap, BTreeSet};

use etcd_client::{Compare, CompareOp};
use shardcron_core::registry::path;

use crate::keys::KeySpace;
use crate::txn::Reads;

/// A compare of the commit, in terms the tests can check against a model of the keyspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Guard {
    /// `key` has this `mod_revision` (0: absent).
    At { key: Vec<u8>, mod_rev: i64 },
    /// No key under `prefix` was written after revision `rev`.
    Unwritten { prefix: Vec<u8>, rev: i64 },
    /// `key` was not written after revision `rev` (or is absent).
    KeyUnwritten { key: Vec<u8>, rev: i64 },
}

impl Guard {
    pub fn compare(self) -> Compare {
        match self {
            Guard::At { key, mod_rev } => Compare::mod_revision(key, CompareOp::Equal, mod_rev),
            Guard::Unwritten { prefix, rev } => {
                Compare::mod_revision(prefix, CompareOp::Less, rev + 1).with_prefix()
            }
            Guard::KeyUnwritten { key, rev } => {
                Compare::mod_revision(key, CompareOp::Less, rev + 1)
            }
        }
    }
}

/// The guards under which the evaluation over `reads` still holds at commit time, as few as
/// `budget` (whether a number of compares fits beside the writes) asks for. A child that
/// vanished needs no guard: it is either one of ours to delete (guarded by its node key) or
/// made a delete fail, which commits nothing.
///
/// Exact savings, always made:
///
/// - A node looked at only as a create's parent (`parents_only`), below which another node
///   read present keeps its own guard, needs none: that one's existence at commit implies the
///   parent's, persistent (ephemeral nodes have no children).
/// - A node read absent whose parent was read absent too needs none: to appear, it needs its
///   parent to appear first, which the parent's guard sees, unless the parent is gone again by
///   then, which takes the node with it. The same holds for the children of such a node.
/// - The nodes read absent under one parent, when there are two or more or the parent's
///   children are guarded anyway, share one guard: no index key among the parent's children
///   written after the snapshot (every create writes its node's index key).
///
/// When that is still too many, the persistent nodes read, the nodes read absent and the nodes
/// that must stay empty are covered by subtrees, the deepest ones that fit ([`pin`]); keys of
/// other families and ephemeral nodes (which their session's expiry removes without a trace)
/// keep their own guards. Stricter (a write anywhere in a pinned subtree fails the commit,
/// which is then tried again from a new snapshot), but three compares per subtree.
pub(crate) fn guards(
    keys: &KeySpace,
    reads: &Reads,
    parents_only: &BTreeSet<String>,
    budget: impl Fn(usize) -> bool,
) -> Vec<Guard> {
    let rev = reads.rev.unwrap_or(0);
    let read_absent =
        |p: &str| p != path::ROOT && matches!(reads.keys.get(&keys.node(p)), Some(None));
    // The nodes read present whose own guard stands, and what it implies exists.
    let mut implied = BTreeSet::new();
    for (key, seen) in &reads.keys {
        let Some(p) = seen.as_ref().and_then(|_| keys.path_of(key)) else { continue };
        if !parents_only.contains(&p) {
            implied.extend(path::ancestors(&p).map(str::to_owned));
        }
    }
    // Guards that stay whatever the budget; persistent nodes read present, with theirs.
    let mut kept = Vec::new();
    let mut present: Vec<(String, Guard)> = Vec::new();
    // Nodes that must not appear (read absent).
    let mut absent = Vec::new();
    for (key, seen) in &reads.keys {
        let mod_rev = seen.as_ref().map_or(0, |s| s.mod_rev);
        let at = Guard::At { key: key.clone(), mod_rev };
        match (seen, keys.path_of(key)) {
            (Some(_), Some(p)) if parents_only.contains(&p) && implied.contains(&p) => {}
            (Some(seen), Some(p)) if seen.lease == 0 => present.push((p, at)),
            (None, Some(p)) => {
                if !path::parent(&p).is_some_and(read_absent) {
                    absent.push(p);
                }
            }
            _ => kept.push(at),
        }
    }
    // Nodes that must not gain children.
    let emptied: Vec<&str> =
        reads.children.keys().map(String::as_str).filter(|p| !read_absent(p)).collect();
    let (points, ranges) = appearing(&absent, &emptied);
    let fine = kept.len() + present.len() + points.len() + ranges.len();
    let mut guards = kept;
    if budget(fine) {
        guards.extend(present.into_iter().map(|(_, at)| at));
        guards.extend(points.into_iter().map(|p| Guard::At { key: keys.node(p), mod_rev: 0 }));
        let children = |p: &str| Guard::Unwritten { prefix: keys.children(p), rev };
        guards.extend(ranges.into_iter().map(children));
        return guards;
    }
    let covered: Vec<&str> = present
        .iter()
        .map(|(p, _)| p.as_str())
        .chain(absent.iter().map(String::as_str))
        .chain(emptied.iter().copied())
        .collect();
    let room = |n: usize| budget(guards.len() + n);
    let (roots, above) = pin(&covered, room);
    for root in roots {
        guards.push(Guard::Unwritten { prefix: keys.subtree(&root), rev });
        guards.push(Guard::Unwritten { prefix: keys.cversions_below(&root), rev });
    }
    guards.extend(above.into_iter().map(|q| Guard::KeyUnwritten { key: keys.cversion(&q), rev }));
    guards
}

/// The fine guards against appearing nodes: the nodes read `absent` to compare one by one, and
/// the parents whose children's range is guarded (those of `emptied`, and those with two or
/// more nodes read absent).
pub(crate) fn appearing<'p>(
    absent: &'p [String],
    emptied: &[&'p str],
) -> (Vec<&'p str>, BTreeSet<&'p str>) {
    let mut under: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for p in absent {
        under.entry(path::parent(p).unwrap_or(path::ROOT)).or_default().push(p);
    }
    let mut ranges: BTreeSet<&str> = emptied.iter().copied().collect();
    let mut points = Vec::new();
    for (parent, nodes) in under {
        match nodes.as_slice() {
            [one] if !ranges.contains(parent) => points.push(*one),
            _ => {
                ranges.insert(parent);
            }
        }
    }
    (points, ranges)
}

/// The subtrees that pin every node of `covered`, the deepest level of them at which `room`
/// allows the compares (the root's whole tree at worst), and the nodes above them whose child
/// versions must stay unwritten.
///
/// A subtree is pinned by three kinds of guard: no node key in it written after the snapshot
/// (a node changed or created), no child version in it written (a child created or deleted,
/// ZooKeeper's `cversion`, [`KeySpace::cversion`]), and the child version of every node above
/// it unwritten (the subtree's root deleted, or an ancestor with everything below it: a
/// recursive delete writes its parent's child version). The child versions are written by
/// every create and delete of this crate; a session's expiry removes its ephemeral nodes
/// without writing them, which is why ephemeral nodes are never covered this way.
pub(crate) fn pin(
    covered: &[&str],
    room: impl Fn(usize) -> bool,
) -> (BTreeSet<String>, BTreeSet<String>) {
    let deepest = covered.iter().map(|p| path::depth(p)).max().unwrap_or(0);
    for level in (0..=deepest).rev() {
        let mut roots: BTreeSet<&str> = covered.iter().map(|p| at_depth(p, level)).collect();
        // A root below another one is pinned by it.
        let nested: Vec<&str> = roots
            .iter()
            .copied()
            .filter(|r| above_of(r).iter().any(|a| roots.contains(a)))
            .collect();
        for r in nested {
            roots.remove(r);
        }
        let above: BTreeSet<&str> = roots.iter().flat_map(|r| above_of(r)).collect();
        if room(2 * roots.len() + above.len()) || level == 0 {
            let owned = |set: BTreeSet<&str>| set.into_iter().map(str::to_owned).collect();
            return (owned(roots), owned(above));
        }
    }
    (BTreeSet::new(), BTreeSet::new())
}

/// The nodes above `p`: its ancestors and the root (none for the root).
fn above_of(p: &str) -> Vec<&str> {
    let mut up: Vec<&str> = path::ancestors(p).collect();
    if p != path::ROOT {
        up.push(path::ROOT);
    }
    up
}

/// The ancestor of `p` (or `p` itself) with at most `level` segments.
pub(crate) fn at_depth(p: &str, level: usize) -> &str {
    if level == 0 {
        return path::ROOT;
    }
    match p.match_indices('/').nth(level) {
        Some((cut, _)) => &p[..cut],
        None => p,
    }
}
