//! Keeping the minimal union of several scopes as they change, at the cost of what changes.
//!
//! A ZooKeeper client registers one server-side watch per entry of the minimal union of its
//! subscribers' scopes. At ten thousand jobs that union holds over a hundred thousand entries,
//! and every job's registration changes it by a few: recomputing it whole at each change (a
//! union, then the minimal form, then a diff against the old one) copied every entry several
//! times per change, which cost most of the client's CPU while jobs registered and left the
//! allocator holding about a kilobyte per job of freed copies. The functions here look only at
//! the entries a change names and at the ranges of sorted entries below them.

use super::{WatchScope, ROOT};

impl WatchScope {
    /// Whether `root` is one of the subtree entries (an entry, not coverage).
    pub fn has_subtree(&self, root: &str) -> bool {
        self.subtrees.binary_search_by(|s| s.as_str().cmp(root)).is_ok()
    }

    /// Whether `path` is one of the single-node entries (an entry, not coverage).
    pub fn has_node(&self, path: &str) -> bool {
        self.nodes.binary_search_by(|n| n.as_str().cmp(path)).is_ok()
    }

    /// What the minimal union of `self` (minimal) and `add` has that `self` lacks, and the
    /// entries of `self` it no longer needs: `(joining, redundant)`. The joining entries are
    /// those of `add`'s minimal form that `self` does not cover; the redundant ones are the
    /// entries of `self` a joining subtree covers (a node at its root included: a subtree
    /// replacing a node watch on the same path). `self` with `redundant` removed and `joining`
    /// added is `self.union(add).minimal()`.
    pub fn widening(&self, add: &WatchScope) -> (WatchScope, WatchScope) {
        let add = add.minimal();
        let subtrees: Vec<String> =
            add.subtrees.into_iter().filter(|root| !self.in_subtree(root)).collect();
        let nodes = add.nodes.into_iter().filter(|node| !self.covers(node)).collect();
        let mut redundant = WatchScope::new();
        for root in &subtrees {
            redundant.subtrees.extend(below(&self.subtrees, root, false).into_iter().cloned());
            redundant.nodes.extend(below(&self.nodes, root, true).into_iter().cloned());
        }
        // The joining subtrees are disjoint (a minimal form), so their ranges are too.
        redundant.subtrees.sort_unstable();
        redundant.nodes.sort_unstable();
        (WatchScope { subtrees, nodes }, redundant)
    }

    /// What the minimal union of `scopes` now has that `self` lacks, and the entries of `self`
    /// it no longer needs: `(returning, gone)`, where `self` is the minimal union of the scopes
    /// as they were, and `removed` the entries that left some of them since (entries another
    /// scope still has are ignored). An entry of `self` that no scope has any longer goes; if
    /// it was a subtree, the entries of the scopes below it that it made redundant come back,
    /// in their own minimal form. `self` with `gone` removed and `returning` added is
    /// `WatchScope::union_of(scopes).minimal()`, provided no entry joined a scope since `self`
    /// was that (widen it with [`widening`](Self::widening) first).
    pub fn narrowing(
        &self,
        removed: &WatchScope,
        scopes: &[&WatchScope],
    ) -> (WatchScope, WatchScope) {
        let mut gone = WatchScope::new();
        let mut back = WatchScope::new();
        for root in &removed.subtrees {
            if !self.has_subtree(root) || scopes.iter().any(|s| s.has_subtree(root)) {
                continue;
            }
            gone.subtrees.push(root.clone());
            for scope in scopes {
                back.subtrees.extend(below(&scope.subtrees, root, false).into_iter().cloned());
                back.nodes.extend(below(&scope.nodes, root, true).into_iter().cloned());
            }
        }
        for node in &removed.nodes {
            if self.has_node(node) && !scopes.iter().any(|s| s.has_node(node)) {
                gone.nodes.push(node.clone());
            }
        }
        // `removed` is sorted, and `gone` a part of it.
        let back = WatchScope::of_entries(back.subtrees, back.nodes).minimal();
        (back, gone)
    }
}

/// The entries of sorted `list` below `root` (and `root` itself when `with_root`): one range,
/// found by a binary search. Entries that merely start with `root`'s text (`/a-b` or `/ab` for
/// `/a`) sort among them and are left out.
fn below<'a>(list: &'a [String], root: &str, with_root: bool) -> Vec<&'a String> {
    if root == ROOT {
        return list.iter().filter(|e| with_root || e.as_str() != ROOT).collect();
    }
    let from = list.partition_point(|e| e.as_str() < root);
    list[from..]
        .iter()
        .take_while(|e| e.starts_with(root))
        .filter(|e| {
            let rest = &e[root.len()..];
            rest.starts_with('/') || (with_root && rest.is_empty())
        })
        .collect()
}

/// `list` (sorted, without duplicates) with the entries of `remove` taken out, then those of
/// `add` put in (an entry in both stays), both sorted: one pass over `list` that moves its
/// strings rather than copying them, for changes of many entries.
pub(super) fn apply_sorted(list: &mut Vec<String>, remove: &[String], add: &[String]) {
    if !remove.is_empty() {
        let mut leaving = remove.iter().peekable();
        list.retain(|entry| {
            while leaving.next_if(|r| *r < entry).is_some() {}
            leaving.peek().is_none_or(|r| *r != entry)
        });
    }
    // Those of `add` missing from `list`, merged in from the back: each entry moves once.
    let joining: Vec<&String> = add.iter().filter(|a| list.binary_search(a).is_err()).collect();
    if joining.is_empty() {
        return;
    }
    let old_len = list.len();
    list.resize(old_len + joining.len(), String::new());
    let (mut i, mut j) = (old_len, joining.len());
    for k in (0..list.len()).rev() {
        if j == 0 {
            break;
        }
        if i > 0 && list[i - 1] > *joining[j - 1] {
            list.swap(i - 1, k);
            i -= 1;
        } else {
            list[k] = joining[j - 1].clone();
            j -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::tests::scope;
    use super::*;

    /// A change of the first scope: some of its entries leave (and some it lacks, which it
    /// ignores), new ones join.
    fn change_of(
        first: &WatchScope,
        add: WatchScope,
        picks: &[usize],
        extra: WatchScope,
    ) -> (WatchScope, WatchScope) {
        let pick = |list: &[String]| -> Vec<String> {
            picks.iter().filter_map(|&i| list.get(i % list.len().max(1)).cloned()).collect()
        };
        let remove =
            WatchScope::of_entries(pick(first.subtrees()), pick(first.nodes())).union(&extra);
        (add, remove)
    }

    proptest! {
        #[test]
        fn widening_then_narrowing_keeps_the_minimal_union(
            scopes in prop::collection::vec(scope(), 1..4),
            add in scope(),
            extra in scope(),
            picks in prop::collection::vec(0usize..16, 0..6),
        ) {
            let mut scopes = scopes;
            let mut watched = WatchScope::union_of(&scopes).minimal();
            let (add, remove) = change_of(&scopes[0], add, &picks, extra);
            // Widen for what joins.
            let (joining, redundant) = watched.widening(&add);
            watched.apply_entries(&joining, &redundant);
            prop_assert_eq!(&watched, &watched.clone().union(&add).minimal());
            let mut with_add = scopes.clone();
            with_add.push(add.clone());
            prop_assert_eq!(&watched, &WatchScope::union_of(&with_add).minimal());
            // The change, then narrowing for what left.
            let removed = WatchScope::of_entries(
                remove.subtrees().iter().filter(|r| scopes[0].has_subtree(r) && !add.has_subtree(r)).cloned().collect(),
                remove.nodes().iter().filter(|n| scopes[0].has_node(n) && !add.has_node(n)).cloned().collect(),
            );
            scopes[0].apply(&crate::registry::ScopeChange { generation: 1, add, remove });
            let refs: Vec<&WatchScope> = scopes.iter().collect();
            let (back, gone) = watched.narrowing(&removed, &refs);
            watched.apply_entries(&back, &gone);
            prop_assert_eq!(&watched, &WatchScope::union_of(&scopes).minimal());
        }

        #[test]
        fn a_sorted_apply_is_the_entry_by_entry_apply(
            list in scope(),
            remove in scope(),
            add in scope(),
        ) {
            let mut merged = list.subtrees().to_vec();
            apply_sorted(&mut merged, remove.subtrees(), add.subtrees());
            let mut each = list.subtrees().to_vec();
            for r in remove.subtrees() {
                if let Ok(at) = each.binary_search(r) {
                    each.remove(at);
                }
            }
            for a in add.subtrees() {
                if let Err(at) = each.binary_search(a) {
                    each.insert(at, a.clone());
                }
            }
            prop_assert_eq!(merged, each);
        }
    }
}
