//! The nodes of a namespace by path: one small tree of path segments per top-level node (a job),
//! found by hash.
//!
//! The view every decision reads holds every node of every job (some 15 per job: 15,000 for
//! 1,000 jobs), and a fire looks up a few dozen of them. In one ordered map of whole paths each
//! lookup compared long shared prefixes (`/job-17/sharding/0/...`) down a deep tree; an ordered
//! map per job still compared the job's own long paths (`/sharding/0/instance`) a dozen times per
//! lookup. Here a lookup hashes the job's name, then walks the path a segment at a time, each
//! step a binary search among one node's children by their short names (`sharding`, `0`,
//! `instance`). A node's children come out by name without a scan of the job. The hasher has
//! fixed keys, and the jobs are visited in name order when all of them are (the root's
//! children), so runs stay deterministic.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasherDefault;

use crate::inline_name::Name;
use crate::registry::{path, Node};

/// `/a/b/c` → (`a`, `/b/c`); `/a` → (`a`, ``); `/` → (``, ``). A byte loop: `str::find`
/// costs more than the whole walk below it on paths this short.
fn split(path: &str) -> (&str, &str) {
    let rest = path.strip_prefix('/').unwrap_or(path);
    let at = rest.bytes().position(|b| b == b'/').unwrap_or(rest.len());
    rest.split_at(at)
}

/// The next segment of `rest` (`/b/c`, `/c`; `` has none) and what follows it, with the
/// segment's hash, found in one pass over its bytes. Every distinct rest gives distinct
/// segments (empty ones included), so the tree holds exactly the paths a map of whole paths
/// would.
fn next_segment(rest: &[u8]) -> Option<(&[u8], u64, &[u8])> {
    let (&slash, rest) = rest.split_first()?;
    debug_assert_eq!(slash, b'/');
    let mut hash = SEED;
    let mut end = 0;
    while end < rest.len() && rest[end] != b'/' {
        hash = mix(hash, rest[end]);
        end += 1;
    }
    Some((&rest[..end], hash, &rest[end..]))
}

/// The hash of a whole segment name, as [`next_segment`] computes it.
#[cfg(test)]
fn hash_of(name: &[u8]) -> u64 {
    name.iter().fold(SEED, |hash, &b| mix(hash, b))
}

const SEED: u64 = 0;

/// One byte into a segment's hash: a rotation and an exclusive or, two cycles a byte (a
/// multiplication per byte, as FNV does, made the hashing the slowest part of a lookup). It
/// only has to tell apart the few sibling names of one node; equal hashes are confirmed by
/// comparing the names.
fn mix(hash: u64, byte: u8) -> u64 {
    hash.rotate_left(5) ^ u64::from(byte)
}

/// Whether two names are equal, compared a byte at a time: the names of a path are a few bytes
/// long, and the hashes already matched (so they almost always are), where a call to the
/// library's comparison costs more than the comparison.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// A fast hasher with fixed keys for the tops (job names, hashed on every lookup); determinism
/// needs fixed keys, and no map here is iterated in its own order.
type Hasher = BuildHasherDefault<rustc_hash::FxHasher>;

/// A child segment: its name, the name's hash (compared first: most children of a node differ
/// in it, and comparing two numbers is cheaper than comparing two names), and the segment.
#[derive(Debug, Clone)]
struct Child {
    hash: u64,
    name: Name,
    segment: Segment,
}

/// Above this many children, a child is looked up by binary search rather than a scan.
const LINEAR_SCAN_MAX: usize = 16;

/// One path and everything below it. A segment that is only on the way to deeper nodes has no
/// node of its own; a segment with neither a node nor anything below is removed at once, so
/// anything with children has a node somewhere below it.
#[derive(Debug, Default, Clone)]
struct Segment {
    node: Option<Node>,
    /// Sorted by name.
    children: Vec<Child>,
}

impl Segment {
    fn position(&self, name: &[u8], hash: u64) -> Option<usize> {
        // Most nodes have a few children, found fastest by their hashes in a row; the
        // directories of a large cluster (`instances`, `servers`: one child per instance) by
        // halving, their names being sorted.
        if self.children.len() > LINEAR_SCAN_MAX {
            return self.children.binary_search_by(|c| c.name.as_bytes().cmp(name)).ok();
        }
        self.children.iter().position(|c| c.hash == hash && same(c.name.as_bytes(), name))
    }

    fn find(&self, mut rest: &[u8]) -> Option<&Segment> {
        let mut at = self;
        while let Some((name, hash, more)) = next_segment(rest) {
            at = &at.children[at.position(name, hash)?].segment;
            rest = more;
        }
        Some(at)
    }

    /// The segment at `rest`, created (without a node) where missing.
    fn make(&mut self, rest: &[u8]) -> &mut Segment {
        let Some((name, hash, more)) = next_segment(rest) else { return self };
        let at = match self.position(name, hash) {
            Some(at) => at,
            None => {
                // Not found: `name` came from a `&str` cut at ASCII slashes, so it is UTF-8.
                let name = Name::new(&String::from_utf8_lossy(name));
                let at = self
                    .children
                    .binary_search_by(|c| c.name.as_bytes().cmp(name.as_bytes()))
                    .unwrap_or_else(|at| at);
                // Most nodes have one to three children: grow by one, not by doubling. The
                // directories of a cluster (`instances`, `servers`: one child per instance)
                // double, or each join would reallocate and copy all of them again.
                if self.children.len() < LINEAR_SCAN_MAX {
                    self.children.reserve_exact(1);
                } else {
                    self.children.reserve(1);
                }
                self.children.insert(at, Child { hash, name, segment: Segment::default() });
                at
            }
        };
        self.children[at].segment.make(more)
    }

    /// Removes the node at `rest`; true when this segment is left with neither a node nor
    /// children (its parent then drops it).
    fn remove(&mut self, rest: &[u8]) -> bool {
        match next_segment(rest) {
            None => self.node = None,
            Some((name, hash, more)) => {
                if let Some(at) = self.position(name, hash) {
                    if self.children[at].segment.remove(more) {
                        self.children.remove(at);
                        if self.children.is_empty() {
                            self.children = Vec::new();
                        }
                    }
                }
            }
        }
        self.node.is_none() && self.children.is_empty()
    }

    /// Adds to `gone` the paths of the nodes at and below this segment (at `path`, which
    /// is left as it was) that `nodes` does not hold.
    fn not_in(&self, path: &mut String, nodes: &BTreeMap<String, Node>, gone: &mut Vec<String>) {
        if self.node.is_some() && !nodes.contains_key(path.as_str()) {
            gone.push(path.clone());
        }
        for child in &self.children {
            let len = path.len();
            path.push('/');
            path.push_str(child.name.as_str());
            child.segment.not_in(path, nodes, gone);
            path.truncate(len);
        }
    }

    /// Whether some node strictly below `path` (this segment's path) passes `keep`, depth first.
    fn any_below(&self, path: &str, keep: &mut impl FnMut(&str) -> bool) -> bool {
        self.children.iter().any(|c| {
            let child_path = path::join(path, c.name.as_str());
            (c.segment.node.is_some() && keep(&child_path))
                || c.segment.any_below(&child_path, keep)
        })
    }
}

/// Nodes by path (see the module documentation).
#[derive(Debug, Default, Clone)]
pub(crate) struct PathMap {
    tops: HashMap<Box<str>, Segment, Hasher>,
}

impl PathMap {
    fn segment(&self, path: &str) -> Option<&Segment> {
        let (top, rest) = split(path);
        self.tops.get(top)?.find(rest.as_bytes())
    }

    pub fn get(&self, path: &str) -> Option<&Node> {
        self.segment(path)?.node.as_ref()
    }

    pub fn contains_key(&self, path: &str) -> bool {
        self.get(path).is_some()
    }

    pub fn insert(&mut self, path: &str, node: Node) {
        let (top, rest) = split(path);
        let segment = match self.tops.get_mut(top) {
            Some(segment) => segment,
            None => self.tops.entry(top.into()).or_default(),
        };
        segment.make(rest.as_bytes()).node = Some(node);
    }

    pub fn remove(&mut self, path: &str) {
        let (top, rest) = split(path);
        if let Some(segment) = self.tops.get_mut(top) {
            if segment.remove(rest.as_bytes()) {
                self.tops.remove(top);
            }
        }
    }

    /// Replaces everything with `nodes`, in place: a node that stays as it was keeps its
    /// memory, and the segments of paths that stay are kept. A resync of a scheduler of
    /// thousands of jobs shows every node again, nearly all unchanged; rebuilding the map
    /// freed and allocated them all again, interleaved with the snapshot's own strings,
    /// which left the allocator's heap fragmented after each resync.
    pub fn replace(&mut self, nodes: BTreeMap<String, Node>) {
        // The tops in the table's order: which nodes go is all that matters, not the order.
        let mut gone = Vec::new();
        let mut at = String::new();
        for (top, segment) in &self.tops {
            at.clear();
            at.push('/');
            // The root's top (``) holds `/` and malformed `//...` paths: `/` + `/x`.
            at.push_str(top);
            segment.not_in(&mut at, &nodes, &mut gone);
        }
        for path in &gone {
            self.remove(path);
        }
        for (path, node) in nodes {
            if self.get(&path) != Some(&node) {
                self.insert(&path, node);
            }
        }
    }

    /// The direct children of `parent` that are nodes, by name (in name order below a job; in
    /// no particular order below the root).
    pub fn children<'a>(&'a self, parent: &str) -> Vec<(&'a str, &'a Node)> {
        if parent == path::ROOT {
            return self
                .tops
                .iter()
                .filter(|(top, _)| !top.is_empty())
                .filter_map(|(top, s)| Some((&**top, s.node.as_ref()?)))
                .collect();
        }
        let Some(segment) = self.segment(parent) else { return Vec::new() };
        segment
            .children
            .iter()
            .filter_map(|c| Some((c.name.as_str(), c.segment.node.as_ref()?)))
            .collect()
    }

    /// Whether `children(parent)` lists any.
    pub fn has_child_nodes(&self, parent: &str) -> bool {
        if parent == path::ROOT {
            return self.tops.iter().any(|(top, s)| !top.is_empty() && s.node.is_some());
        }
        self.segment(parent).is_some_and(|s| s.children.iter().any(|c| c.segment.node.is_some()))
    }

    /// Whether any node lies strictly below `parent` (the root's own top, which only `/` itself
    /// and malformed `//...` paths have, is not below it).
    pub fn has_below(&self, parent: &str) -> bool {
        if parent == path::ROOT {
            return self.tops.keys().any(|top| !top.is_empty());
        }
        self.segment(parent).is_some_and(|s| !s.children.is_empty())
    }

    /// Whether any node lies strictly below `parent` for which `keep` holds (given its path).
    pub fn any_below(&self, parent: &str, mut keep: impl FnMut(&str) -> bool) -> bool {
        if parent == path::ROOT {
            let mut tops: Vec<(&str, &Segment)> =
                self.tops.iter().filter(|(t, _)| !t.is_empty()).map(|(t, s)| (&**t, s)).collect();
            tops.sort_unstable_by_key(|(t, _)| *t);
            return tops.into_iter().any(|(top, s)| {
                let at = format!("/{top}");
                (s.node.is_some() && keep(&at)) || s.any_below(&at, &mut keep)
            });
        }
        self.segment(parent).is_some_and(|s| s.any_below(parent, &mut keep))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn node(data: &str) -> Node {
        Node { data: data.as_bytes().to_vec(), version: 0, ephemeral: false }
    }

    #[test]
    fn splits_at_the_first_segment() {
        assert_eq!(split("/a/b/c"), ("a", "/b/c"));
        assert_eq!(split("/a"), ("a", ""));
        assert_eq!(split("/"), ("", ""));
        let (b, hash, rest) = next_segment(b"/b/c").unwrap_or_default();
        assert_eq!((b, hash, rest), (&b"b"[..], hash_of(b"b"), &b"/c"[..]));
        assert_eq!(next_segment(b"/"), Some((&b""[..], hash_of(b""), &b""[..])));
        assert_eq!(next_segment(b""), None);
    }

    #[test]
    fn finds_and_lists_children_by_name() {
        let mut m = PathMap::default();
        for p in ["/", "/b", "/a", "/a/x", "/a/x/1", "/a/x-y", "/a/y", "/ab", "/c/deep/only"] {
            m.insert(p, node(p));
        }
        assert_eq!(m.get("/a/x/1").map(|n| n.data.clone()), Some(b"/a/x/1".to_vec()));
        assert!(m.contains_key("/") && m.contains_key("/a") && !m.contains_key("/a/z"));
        assert!(!m.contains_key("/c/deep"), "a segment on the way is no node");
        let names = |v: Vec<(&str, &Node)>| v.into_iter().map(|(p, _)| p.to_owned()).collect();
        let sorted = |mut v: Vec<String>| {
            v.sort();
            v
        };
        assert_eq!(names(m.children("/a")), ["x", "x-y", "y"]);
        assert_eq!(names(m.children("/a/x")), ["1"]);
        assert!(m.children("/c").is_empty(), "only nodes are listed");
        for parent in ["/", "/a", "/a/x", "/a/x/1", "/c", "/c/deep", "/zz"] {
            assert_eq!(m.has_child_nodes(parent), !m.children(parent).is_empty(), "{parent}");
        }
        assert_eq!(sorted(names(m.children("/"))), ["a", "ab", "b"]);
        assert!(m.has_below("/c") && m.has_below("/") && !m.has_below("/a/y"));
        assert!(m.any_below("/a", |p| p == "/a/y"));
        assert!(m.any_below("/", |p| p == "/c/deep/only"));
        assert!(m.any_below("/c", |p| p == "/c/deep/only"));
        assert!(!m.any_below("/a/y", |_| true));
        m.remove("/a/x/1");
        assert!(!m.any_below("/a/x", |_| true) && !m.has_below("/a/x"));
        m.remove("/c/deep/only");
        assert!(!m.has_below("/c"), "emptied segments go with their last node");
        m.replace(BTreeMap::from([("/c".to_owned(), node("c"))]));
        assert!(m.get("/a").is_none() && m.contains_key("/c"));
    }

    #[test]
    fn siblings_sharing_a_hash_stay_apart() {
        assert_eq!(hash_of(b"ba"), hash_of(b"cA"), "the pair this test needs");
        let mut m = PathMap::default();
        for p in ["/j/cA", "/j/ba", "/j/b", "/j/ba/x"] {
            m.insert(p, node(p));
        }
        for p in ["/j/cA", "/j/ba", "/j/b", "/j/ba/x"] {
            assert_eq!(m.get(p).map(|n| n.data.clone()), Some(p.as_bytes().to_vec()));
        }
        m.remove("/j/ba/x");
        m.remove("/j/ba");
        assert!(m.get("/j/ba").is_none() && m.contains_key("/j/cA") && !m.has_below("/j/ba"));
        m.insert("/j/ba", node("again"));
        assert_eq!(m.get("/j/ba").map(|n| n.data.clone()), Some(b"again".to_vec()));
        assert_eq!(m.get("/j/cA").map(|n| n.data.clone()), Some(b"/j/cA".to_vec()));
    }

    #[test]
    fn distinct_paths_stay_distinct() {
        let mut m = PathMap::default();
        let long = "/a/a-name-longer-than-the-twenty-two-bytes-kept-in-place/x";
        for p in ["/a/b", "/a//b", "/a/b/", "/a/", long] {
            m.insert(p, node(p));
        }
        assert_eq!(
            m.children("/a/a-name-longer-than-the-twenty-two-bytes-kept-in-place")
                .into_iter()
                .map(|(n, _)| n)
                .collect::<Vec<_>>(),
            ["x"]
        );
        assert!(m.any_below("/a", |p| p == long));
        for p in ["/a/b", "/a//b", "/a/b/", "/a/", long] {
            assert_eq!(m.get(p).map(|n| n.data.clone()), Some(p.as_bytes().to_vec()));
        }
        assert!(m.get("/a").is_none());
    }

    /// The nodes `m` shows at the paths of `candidates`, by path: what a map shows, whatever
    /// its insides.
    fn shown(m: &PathMap, candidates: &[String]) -> BTreeMap<String, Node> {
        candidates.iter().filter_map(|p| Some((p.clone(), m.get(p)?.clone()))).collect()
    }

    /// A path from a few short names, empty ones included (`//x`, `/a/`), and the root.
    fn a_path() -> impl Strategy<Value = String> {
        prop_oneof![
            1 => Just("/".to_owned()),
            12 => prop::collection::vec(prop::sample::select(vec!["a", "b", "ab", "", "x"]), 1..4)
                .prop_map(|names| format!("/{}", names.join("/"))),
        ]
    }

    fn some_nodes() -> impl Strategy<Value = BTreeMap<String, Node>> {
        prop::collection::btree_map(
            a_path(),
            (0u8..3, 0u64..2).prop_map(|(d, v)| Node {
                data: vec![d],
                version: v,
                ephemeral: false,
            }),
            0..24,
        )
    }

    proptest! {
        #[test]
        fn replacing_in_place_shows_what_a_new_map_would(
            before in some_nodes(),
            after in some_nodes(),
        ) {
            let mut m = PathMap::default();
            for (p, n) in &before {
                m.insert(p, n.clone());
            }
            m.replace(after.clone());
            let mut fresh = PathMap::default();
            for (p, n) in &after {
                fresh.insert(p, n.clone());
            }
            let all: Vec<String> = before.keys().chain(after.keys()).cloned().collect();
            prop_assert_eq!(shown(&m, &all), after.clone());
            prop_assert_eq!(shown(&m, &all), shown(&fresh, &all));
            // No segment is left without a node at or below it.
            for p in &all {
                prop_assert_eq!(m.has_below(p), fresh.has_below(p), "{}", p);
                let mut kids = m.children(p);
                let mut fresh_kids = fresh.children(p);
                kids.sort_unstable_by_key(|(n, _)| *n);
                fresh_kids.sort_unstable_by_key(|(n, _)| *n);
                prop_assert_eq!(kids, fresh_kids, "{}", p);
            }
            prop_assert_eq!(m.tops.len(), fresh.tops.len());
        }
    }
}
