//! A watch scope's entries indexed for "does the scope cover this path?", the question a view
//! asks of every read (in audit mode) and a watch of every change it publishes.

use std::collections::HashSet;

use super::path;
use super::types::{ScopeChange, WatchScope};

type FxBuild = std::hash::BuildHasherDefault<rustc_hash::FxHasher>;

/// The deepest root depth tracked one by one; roots deeper than this share the last slot.
const DEPTHS: usize = 31;

/// A scope's entries in hash sets: whether a path is covered is a lookup of the path and of
/// those of its ancestors at a depth where some subtree entry is rooted, whatever the number
/// of entries (a process with many jobs watches thousands of single nodes, and its subtree
/// roots sit at one or two depths: a path of five segments then costs two lookups, not six).
#[derive(Debug, Default, Clone)]
pub struct ScopeIndex {
    nodes: HashSet<Box<str>, FxBuild>,
    subtrees: HashSet<Box<str>, FxBuild>,
    /// How many subtree roots have each depth (segments: `/` is 0, `/a` 1, `/a/b` 2).
    roots_at: [u32; DEPTHS + 1],
}

impl ScopeIndex {
    /// The index of `scope`'s entries.
    pub fn of(scope: &WatchScope) -> Self {
        let mut index = ScopeIndex::default();
        for root in scope.subtrees() {
            index.add_subtree(root);
        }
        for node in scope.nodes() {
            index.add_node(node);
        }
        index
    }

    /// Whether the scope covers `path`: a single-node entry, or at or below a subtree root.
    pub fn covers(&self, path: &str) -> bool {
        self.nodes.contains(path) || self.in_subtree(path)
    }

    /// Whether `path` is a subtree entry's root or lies below one.
    pub fn in_subtree(&self, path: &str) -> bool {
        if self.subtrees.is_empty() {
            return false;
        }
        if self.subtrees.contains(path) {
            return true;
        }
        if self.roots_at[0] > 0 && self.subtrees.contains(path::ROOT) {
            return true;
        }
        // The k-th ancestor (`/a` first) has depth k.
        path::ancestors(path).enumerate().any(|(k, ancestor)| {
            self.roots_at[(k + 1).min(DEPTHS)] > 0 && self.subtrees.contains(ancestor)
        })
    }

    /// Whether `path` is a subtree entry's root (not below one: [`Self::in_subtree`]).
    pub fn is_subtree_root(&self, path: &str) -> bool {
        self.subtrees.contains(path)
    }

    /// Whether `path` is a single-node entry.
    pub fn has_node(&self, path: &str) -> bool {
        self.nodes.contains(path)
    }

    /// The single-node entries, in no order.
    pub fn nodes(&self) -> impl Iterator<Item = &str> {
        self.nodes.iter().map(|n| &**n)
    }

    /// The subtree roots, in no order.
    pub fn subtrees(&self) -> impl Iterator<Item = &str> {
        self.subtrees.iter().map(|r| &**r)
    }

    /// The entries as a scope (sorted).
    pub fn scope(&self) -> WatchScope {
        WatchScope::of_entries(
            self.subtrees.iter().map(|p| p.to_string()).collect(),
            self.nodes.iter().map(|p| p.to_string()).collect(),
        )
    }

    /// Applies `change`, entry by entry: its removals, then its additions.
    pub fn apply(&mut self, change: &ScopeChange) {
        for root in change.remove.subtrees() {
            self.remove_subtree(root);
        }
        for node in change.remove.nodes() {
            self.nodes.remove(node.as_str());
        }
        for root in change.add.subtrees() {
            self.add_subtree(root);
        }
        for node in change.add.nodes() {
            self.add_node(node);
        }
    }

    fn add_node(&mut self, node: &str) {
        self.nodes.insert(node.into());
    }

    fn add_subtree(&mut self, root: &str) {
        if self.subtrees.insert(root.into()) {
            self.roots_at[slot_of(root)] += 1;
        }
    }

    fn remove_subtree(&mut self, root: &str) {
        if self.subtrees.remove(root) {
            let slot = &mut self.roots_at[slot_of(root)];
            *slot = slot.saturating_sub(1);
        }
    }
}

/// The number of segments of `path` (`/` has none), capped at the last tracked slot.
fn slot_of(path: &str) -> usize {
    path::depth(path).min(DEPTHS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(scope: &WatchScope, path: &str) -> bool {
        scope.covers(path)
    }

    /// Every path of up to four segments over a small alphabet, against scopes of two
    /// subtree roots among them, before and after one is removed: the lookups of the ancestors
    /// at the depths where roots are agree with the scope's own answer.
    #[test]
    fn roots_at_every_depth_agree_with_the_scope() {
        let mut paths = vec!["/".to_owned()];
        let mut last = vec![String::new()];
        for _ in 1..=4 {
            last = last
                .iter()
                .flat_map(|p| ["a", "b", "ab"].map(|seg| format!("{p}/{seg}")))
                .collect();
            paths.extend(last.iter().cloned());
        }
        assert_eq!(paths.len(), 121);
        let roots: Vec<&String> = paths.iter().step_by(7).collect();
        for (i, a) in roots.iter().enumerate() {
            for b in &roots[i..] {
                let scope = WatchScope::new().with_subtree(a.as_str()).with_subtree(b.as_str());
                let mut index = ScopeIndex::of(&scope);
                for p in &paths {
                    assert_eq!(index.covers(p), naive(&scope, p), "{p} under {a}, {b}");
                }
                index.apply(&ScopeChange {
                    generation: 1,
                    add: WatchScope::new(),
                    remove: WatchScope::new().with_subtree(a.as_str()),
                });
                let left = if a == b {
                    WatchScope::new()
                } else {
                    WatchScope::new().with_subtree(b.as_str())
                };
                for p in &paths {
                    assert_eq!(index.covers(p), naive(&left, p), "{p} under {b} without {a}");
                }
            }
        }
    }

    #[test]
    fn agrees_with_the_scope_on_every_path_and_after_changes() {
        let scope = WatchScope::new()
            .with_subtree("/j/instances")
            .with_subtree("/k")
            .with_node("/j/config")
            .with_node("/j/sharding/3/running");
        let paths = [
            "/",
            "/j",
            "/j/config",
            "/j/config/x",
            "/j/instances",
            "/j/instances/a@-@1",
            "/j/instancesx",
            "/j/sharding/3/running",
            "/j/sharding/3",
            "/k",
            "/k/a/b/c/d/e",
            "/ka",
            "/x",
        ];
        let index = ScopeIndex::of(&scope);
        for p in paths {
            assert_eq!(index.covers(p), naive(&scope, p), "{p}");
        }
        let mut changed = index.clone();
        let change = ScopeChange {
            generation: 1,
            add: WatchScope::new().with_subtree("/").with_node("/x"),
            remove: WatchScope::new().with_subtree("/k").with_node("/j/config"),
        };
        changed.apply(&change);
        for p in paths {
            assert!(changed.covers(p), "{p}: the root subtree covers everything");
        }
        changed.apply(&ScopeChange {
            generation: 2,
            add: WatchScope::new(),
            remove: WatchScope::new().with_subtree("/"),
        });
        let after = WatchScope::new()
            .with_subtree("/j/instances")
            .with_node("/j/sharding/3/running")
            .with_node("/x");
        for p in paths {
            assert_eq!(changed.covers(p), naive(&after, p), "{p} after the changes");
        }
    }
}
