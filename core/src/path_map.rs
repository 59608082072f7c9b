//! The nodes of a namespace by path, split at the first segment: one small ordered map per
//! top-level node (a job), found by hash.
//!
//! The view every decision reads holds every node of every job (some 15 per job: 15,000 for
//! 1,000 jobs), and a fire looks up a few dozen of them. In one ordered map of whole paths each
//! lookup compared long shared prefixes (`/job-17/sharding/0/...`) down a deep tree; here it
//! hashes the job's name and searches the job's own few nodes. Listings (a node's children)
//! stay ordered, within the job's map. The hasher has fixed keys, and the jobs are visited in
//! name order when all of them are (the root's children), so runs stay deterministic.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasherDefault;

use crate::registry::{path, Node};

/// `/a/b/c` → (`a`, `/b/c`); `/a` → (`a`, ``); `/` → (``, ``).
fn split(path: &str) -> (&str, &str) {
    let rest = path.strip_prefix('/').unwrap_or(path);
    match rest.find('/') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, ""),
    }
}

/// Nodes by path (see the module documentation).
#[derive(Debug, Default, Clone)]
pub(crate) struct PathMap {
    tops: HashMap<String, BTreeMap<String, Node>, BuildHasherDefault<DefaultHasher>>,
}

impl PathMap {
    pub fn get(&self, path: &str) -> Option<&Node> {
        let (top, rest) = split(path);
        self.tops.get(top)?.get(rest)
    }

    pub fn contains_key(&self, path: &str) -> bool {
        self.get(path).is_some()
    }

    pub fn insert(&mut self, path: &str, node: Node) {
        let (top, rest) = split(path);
        match self.tops.get_mut(top) {
            Some(nodes) => {
                nodes.insert(rest.to_owned(), node);
            }
            None => {
                self.tops.insert(top.to_owned(), BTreeMap::from([(rest.to_owned(), node)]));
            }
        }
    }

    pub fn remove(&mut self, path: &str) {
        let (top, rest) = split(path);
        if let Some(nodes) = self.tops.get_mut(top) {
            nodes.remove(rest);
            if nodes.is_empty() {
                self.tops.remove(top);
            }
        }
    }

    /// Replaces everything with `nodes`.
    pub fn replace(&mut self, nodes: &BTreeMap<String, Node>) {
        self.tops.clear();
        for (path, node) in nodes {
            self.insert(path, node.clone());
        }
    }

    /// Every node strictly below `parent`, as its whole path and the node: in path order below
    /// a job; job by job, in name order, below the root.
    pub fn below(&self, parent: &str) -> Vec<(String, &Node)> {
        let mut found = Vec::new();
        if parent == path::ROOT {
            let mut tops: Vec<&String> = self.tops.keys().filter(|t| !t.is_empty()).collect();
            tops.sort_unstable();
            for top in tops {
                for (rest, node) in self.tops.get(top.as_str()).into_iter().flatten() {
                    found.push((format!("/{top}{rest}"), node));
                }
            }
            return found;
        }
        let (top, rest) = split(parent);
        let Some(nodes) = self.tops.get(top) else { return found };
        let mut prefix = String::with_capacity(rest.len() + 1);
        prefix.push_str(rest);
        prefix.push('/');
        for (key, node) in nodes.range(prefix.clone()..).take_while(|(k, _)| k.starts_with(&prefix))
        {
            found.push((path::join(parent, &key[prefix.len()..]), node));
        }
        found
    }

    /// Whether any node lies strictly below `parent` for which `keep` holds (given its path).
    pub fn any_below(&self, parent: &str, mut keep: impl FnMut(&str) -> bool) -> bool {
        if parent == path::ROOT {
            return self.below(parent).iter().any(|(p, _)| keep(p));
        }
        let (top, rest) = split(parent);
        let Some(nodes) = self.tops.get(top) else { return false };
        let prefix = format!("{rest}/");
        nodes
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .any(|(k, _)| keep(&path::join(parent, &k[prefix.len()..])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(data: &str) -> Node {
        Node { data: data.as_bytes().to_vec(), version: 0, ephemeral: false }
    }

    #[test]
    fn splits_at_the_first_segment() {
        assert_eq!(split("/a/b/c"), ("a", "/b/c"));
        assert_eq!(split("/a"), ("a", ""));
        assert_eq!(split("/"), ("", ""));
    }

    #[test]
    fn finds_and_lists_in_path_order() {
        let mut m = PathMap::default();
        for p in ["/", "/b", "/a", "/a/x", "/a/x/1", "/a/x-y", "/a/y", "/ab"] {
            m.insert(p, node(p));
        }
        assert_eq!(m.get("/a/x/1").map(|n| n.data.clone()), Some(b"/a/x/1".to_vec()));
        assert!(m.contains_key("/") && m.contains_key("/a") && !m.contains_key("/a/z"));
        let paths = |v: Vec<(String, &Node)>| v.into_iter().map(|(p, _)| p).collect::<Vec<_>>();
        assert_eq!(paths(m.below("/a")), ["/a/x", "/a/x-y", "/a/x/1", "/a/y"]);
        assert_eq!(paths(m.below("/a/x")), ["/a/x/1"]);
        assert_eq!(
            paths(m.below("/")),
            ["/a", "/a/x", "/a/x-y", "/a/x/1", "/a/y", "/ab", "/b"],
            "the root lists everything but itself, job by job"
        );
        assert!(m.any_below("/a", |p| p == "/a/y"));
        assert!(!m.any_below("/a/y", |_| true));
        m.remove("/a/x/1");
        assert!(!m.any_below("/a/x", |_| true));
        m.replace(&BTreeMap::from([("/c".to_owned(), node("c"))]));
        assert!(m.get("/a").is_none() && m.contains_key("/c"));
    }
}
