//! The feed's view: for each node its watches cover, which change its subscribers were shown.
//!
//! Laid out for memory, as it holds a dozen or more entries per job of every scheduler on the
//! client: the entries are grouped by the first segment of their path (under a scheduler's
//! namespace, a job's name), each group a sorted vector grown one entry at a time, the groups
//! in a B-tree. A group costs its entries without spare room and one slot of the B-tree, and
//! its paths leave the job's name out: 0.9 KiB per job of one item, against 1.2 KiB for a
//! B-tree of the single entries with their whole paths, whose leaves were about half full
//! (heaptrack, 1,000 jobs on ZooKeeper).
//!
//! Entries are found by path, and by what a watch entry covers (a node, a subtree): never by a
//! pass over the whole view, which at ten thousand jobs holds well over a hundred thousand
//! entries.

use std::collections::BTreeMap;

use shardcron_core::registry::{path, WatchScope};

use super::Seen;

/// The entries of one group by the rest of their path after the group's segment (`""` for the
/// group's own node, `"/config"` below it), sorted by it.
type Group = Vec<(Box<str>, Seen)>;

#[derive(Debug, Default)]
pub(super) struct View {
    groups: BTreeMap<Box<str>, Group>,
}

/// `at` as its group (the first segment) and the rest (`""` or `"/..."`); `/` is the group `""`.
fn split(at: &str) -> (&str, &str) {
    let body = at.strip_prefix('/').unwrap_or(at);
    match body.find('/') {
        Some(i) => body.split_at(i),
        None => (body, ""),
    }
}

fn position(group: &Group, rest: &str) -> Result<usize, usize> {
    group.binary_search_by(|(r, _)| (**r).cmp(rest))
}

fn full_path(group: &str, rest: &str) -> Box<str> {
    format!("/{group}{rest}").into_boxed_str()
}

impl View {
    /// A view of `nodes`, sorted by path.
    pub fn from_sorted(nodes: impl IntoIterator<Item = (Box<str>, Seen)>) -> Self {
        let mut view = View::default();
        for (at, seen) in nodes {
            let (group, rest) = split(&at);
            // In path order, a group's entries come in the order of their rest (other groups'
            // may come between: `/a-b` sorts between `/a` and `/a/x`).
            let entries = match view.groups.get_mut(group) {
                Some(entries) => entries,
                None => view.groups.entry(group.into()).or_default(),
            };
            entries.push((rest.into(), seen));
        }
        for entries in view.groups.values_mut() {
            entries.shrink_to_fit();
        }
        view
    }

    pub fn get(&self, at: &str) -> Option<&Seen> {
        let (group, rest) = split(at);
        let entries = self.groups.get(group)?;
        position(entries, rest).ok().map(|i| &entries[i].1)
    }

    pub fn get_mut(&mut self, at: &str) -> Option<&mut Seen> {
        let (group, rest) = split(at);
        let entries = self.groups.get_mut(group)?;
        position(entries, rest).ok().map(|i| &mut entries[i].1)
    }

    pub fn contains(&self, at: &str) -> bool {
        self.get(at).is_some()
    }

    pub fn insert(&mut self, at: &str, seen: Seen) {
        let (group, rest) = split(at);
        let entries = match self.groups.get_mut(group) {
            Some(entries) => entries,
            None => self.groups.entry(group.into()).or_default(),
        };
        match position(entries, rest) {
            Ok(i) => entries[i].1 = seen,
            Err(i) => {
                // One more, not double: most groups stop growing after their job registered.
                entries.reserve_exact(1);
                entries.insert(i, (rest.into(), seen));
            }
        }
    }

    pub fn remove(&mut self, at: &str) -> Option<Seen> {
        let (group, rest) = split(at);
        let entries = self.groups.get_mut(group)?;
        let i = position(entries, rest).ok()?;
        let (_, seen) = entries.remove(i);
        if entries.is_empty() {
            self.groups.remove(group);
        } else if entries.capacity() >= 2 * entries.len() {
            entries.shrink_to_fit();
        }
        Some(seen)
    }

    /// The paths of the entries at `root` and below it.
    pub fn subtree(&self, root: &str) -> Vec<Box<str>> {
        if root == path::ROOT {
            return self
                .groups
                .iter()
                .flat_map(|(group, entries)| entries.iter().map(|(rest, _)| full_path(group, rest)))
                .collect();
        }
        let (group, prefix) = split(root);
        let Some(entries) = self.groups.get(group) else { return Vec::new() };
        // Every rest that starts with `prefix` sorts from it on, together; of those, the node
        // itself and what lies below it (`/b-x` and `/bc` start with `/b` too).
        let from = position(entries, prefix).unwrap_or_else(|i| i);
        entries[from..]
            .iter()
            .map(|(rest, _)| &**rest)
            .take_while(|rest| rest.starts_with(prefix))
            .filter(|rest| rest.len() == prefix.len() || rest[prefix.len()..].starts_with('/'))
            .map(|rest| full_path(group, rest))
            .collect()
    }

    /// The paths of the entries `scope` covers, each once, in path order.
    pub fn covered_by(&self, scope: &WatchScope) -> Vec<Box<str>> {
        let mut paths: Vec<Box<str>> = scope
            .subtrees()
            .iter()
            .flat_map(|root| self.subtree(root))
            .chain(scope.nodes().iter().filter(|at| self.contains(at)).map(|at| at.as_str().into()))
            .collect();
        paths.sort_unstable();
        paths.dedup();
        paths
    }

    /// Drops the entries `dropped` covers (watch entries given up) that `kept` does not.
    pub fn drop_uncovered(&mut self, dropped: &WatchScope, kept: &WatchScope) {
        for at in self.covered_by(dropped) {
            if !kept.covers(&at) {
                self.remove(&at);
            }
        }
    }

    #[cfg(test)]
    fn paths(&self) -> Vec<Box<str>> {
        self.subtree(path::ROOT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(n: i64) -> Seen {
        Seen { czxid: n, mzxid: n, known: 0 }
    }

    fn view(paths: &[&str]) -> View {
        let mut view = View::default();
        for (i, at) in paths.iter().enumerate() {
            view.insert(at, seen(i as i64));
        }
        view
    }

    #[test]
    fn entries_are_found_by_path() {
        let mut view = view(&["/a", "/a/b", "/a-b", "/a/b/c", "/x/y", "/"]);
        assert_eq!(view.get("/a/b").map(|s| s.mzxid), Some(1));
        assert_eq!(view.get("/").map(|s| s.mzxid), Some(5));
        assert!(view.get("/x").is_none());
        assert!(view.get("/a/c").is_none());
        view.insert("/a/b", seen(9));
        assert_eq!(view.get("/a/b").map(|s| s.mzxid), Some(9));
        assert_eq!(view.remove("/x/y").map(|s| s.mzxid), Some(4));
        assert!(!view.groups.contains_key("x"), "an empty group goes");
        assert!(view.remove("/x/y").is_none());
    }

    #[test]
    fn a_subtree_is_the_node_and_what_lies_below_it() {
        let view = view(&["/a", "/a/b", "/a/b-x", "/a/bc", "/a/b/c", "/a/b/c/d", "/ab", "/a-b"]);
        let paths = |root| view.subtree(root).into_iter().map(String::from).collect::<Vec<_>>();
        assert_eq!(paths("/a/b"), ["/a/b", "/a/b/c", "/a/b/c/d"]);
        assert_eq!(paths("/a"), ["/a", "/a/b", "/a/b-x", "/a/b/c", "/a/b/c/d", "/a/bc"]);
        assert_eq!(paths("/a/b/c/d"), ["/a/b/c/d"]);
        assert!(paths("/a/z").is_empty());
        assert!(paths("/z").is_empty());
        assert_eq!(paths("/").len(), 8);
    }

    #[test]
    fn what_a_scope_covers_comes_once() {
        let view = view(&["/a", "/a/b", "/a/b/c", "/b", "/b/x"]);
        let scope =
            WatchScope::subtree("/a/b").with_node("/a/b/c".to_owned()).with_node("/b/x".to_owned());
        let covered: Vec<String> = view.covered_by(&scope).into_iter().map(String::from).collect();
        assert_eq!(covered, ["/a/b", "/a/b/c", "/b/x"]);
    }

    #[test]
    fn dropping_a_watch_keeps_what_another_covers() {
        let mut view = view(&["/a", "/a/b", "/a/b/c", "/b"]);
        let dropped = WatchScope::subtree("/a");
        let kept = WatchScope::subtree("/a/b").with_node("/b".to_owned());
        view.drop_uncovered(&dropped, &kept);
        let left: Vec<String> = view.paths().into_iter().map(String::from).collect();
        assert_eq!(left, ["/a/b", "/a/b/c", "/b"]);
    }

    #[test]
    fn a_sorted_snapshot_builds_the_same_view() {
        let mut paths = vec!["/a", "/a-b", "/a/x", "/a/y", "/b", "/"];
        paths.sort_unstable();
        let built = View::from_sorted(paths.iter().map(|at| (Box::<str>::from(*at), seen(1))));
        let inserted = view(&paths);
        assert_eq!(built.paths(), inserted.paths());
        for at in &paths {
            assert!(built.contains(at), "{at}");
        }
    }
}
