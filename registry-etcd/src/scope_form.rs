//! A subscriber's scope as the etcd watch task keeps it: its minimal form, one watched range
//! per entry, and apart the few entries that form leaves out (those another entry covers).
//!
//! The scope of a scheduler of ten thousand jobs has over two hundred thousand entries, nearly
//! all of them in the minimal form: keeping the scope and its minimal form whole, side by side,
//! held every path twice (about 1.5 KiB per job). A change is applied at the cost of the
//! entries it names and those below them ([`WatchScope::widening`],
//! [`WatchScope::narrowing`]), and can be taken back when the etcd side of it fails.

use shardcron_core::registry::{path, ScopeChange, WatchScope};

/// A scope as its minimal form and the rest of its entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScopeForm {
    /// What has a range each (but the root's node entry, which has no key).
    minimal: WatchScope,
    /// The entries `minimal` leaves out: covered by one of its subtrees.
    extra: WatchScope,
}

/// What [`ScopeForm::apply`] did.
#[derive(Debug)]
pub(crate) struct Applied {
    /// Entries the minimal form gained (each a range to watch) and lost (to cancel).
    pub joined: WatchScope,
    pub left: WatchScope,
    /// Entries the extra ones gained and lost.
    extra_joined: WatchScope,
    extra_left: WatchScope,
}

/// The entries of `a` that `b` does not have (entries, not coverage).
fn minus(a: &WatchScope, b: &WatchScope) -> WatchScope {
    WatchScope::of_entries(
        a.subtrees().iter().filter(|r| !b.has_subtree(r)).cloned().collect(),
        a.nodes().iter().filter(|n| !b.has_node(n)).cloned().collect(),
    )
}

impl ScopeForm {
    pub fn new(scope: &WatchScope) -> Self {
        let minimal = scope.minimal();
        let extra = minus(scope, &minimal);
        ScopeForm { minimal, extra }
    }

    /// The minimal form: one range per entry.
    pub fn minimal(&self) -> &WatchScope {
        &self.minimal
    }

    /// The whole scope (its entries); a pass over all of them.
    pub fn scope(&self) -> WatchScope {
        self.minimal.union(&self.extra)
    }

    /// An entry naming the scope in messages.
    pub fn label(&self) -> &str {
        let (m, x) = (&self.minimal, &self.extra);
        let first = m.subtrees().first().or(m.nodes().first());
        first.or(x.subtrees().first()).or(x.nodes().first()).map_or(path::ROOT, String::as_str)
    }

    fn has_subtree(&self, root: &str) -> bool {
        self.minimal.has_subtree(root) || self.extra.has_subtree(root)
    }

    fn has_node(&self, at: &str) -> bool {
        self.minimal.has_node(at) || self.extra.has_node(at)
    }

    /// Applies `change` (its entries, as [`WatchScope::apply`] does).
    pub fn apply(&mut self, change: &ScopeChange) -> Applied {
        let add = &change.add;
        let arriving = WatchScope::of_entries(
            add.subtrees().iter().filter(|r| !self.has_subtree(r)).cloned().collect(),
            add.nodes().iter().filter(|n| !self.has_node(n)).cloned().collect(),
        );
        let remove = &change.remove;
        let leaving = WatchScope::of_entries(
            remove
                .subtrees()
                .iter()
                .filter(|r| self.has_subtree(r) && !add.has_subtree(r))
                .cloned()
                .collect(),
            remove
                .nodes()
                .iter()
                .filter(|n| self.has_node(n) && !add.has_node(n))
                .cloned()
                .collect(),
        );
        // What joins covers what the minimal form had below it: those become extra, as do
        // arriving entries it covers already.
        let (joining, redundant) = self.minimal.widening(add);
        self.minimal.apply_entries(&joining, &redundant);
        let extra_joined = redundant.union(&minus(&arriving, &joining));
        self.extra.apply_entries(&extra_joined, &WatchScope::new());
        // A leaving entry is in one of the two. A subtree leaving the minimal form brings back
        // the extra entries below it, which no other subtree covers (the form is minimal).
        let leaving_extra = WatchScope::of_entries(
            leaving.subtrees().iter().filter(|r| self.extra.has_subtree(r)).cloned().collect(),
            leaving.nodes().iter().filter(|n| self.extra.has_node(n)).cloned().collect(),
        );
        self.extra.apply_entries(&WatchScope::new(), &leaving_extra);
        let (back, gone) = self.minimal.narrowing(&leaving, &[&self.extra]);
        self.minimal.apply_entries(&back, &gone);
        self.extra.apply_entries(&WatchScope::new(), &back);
        let extra_left = leaving_extra.union(&back);
        // A whole pass, in debug builds only: the point of the above is not to make one.
        debug_assert_eq!(*self, ScopeForm::new(&self.scope()), "the form kept in step");
        Applied {
            joined: joining.union(&back),
            left: redundant.union(&gone),
            extra_left: minus(&extra_left, &extra_joined),
            extra_joined: minus(&extra_joined, &extra_left),
        }
    }

    /// Takes back what [`apply`](Self::apply) did.
    pub fn undo(&mut self, applied: &Applied) {
        self.minimal.apply_entries(&applied.left, &applied.joined);
        self.extra.apply_entries(&applied.extra_left, &applied.extra_joined);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn path() -> impl Strategy<Value = String> {
        prop_oneof![
            1 => Just("/".to_owned()),
            30 => prop::collection::vec(prop::sample::select(vec!["a", "a-b", "b", "ab"]), 1..4)
                .prop_map(|segments| format!("/{}", segments.join("/"))),
        ]
    }

    fn scope() -> impl Strategy<Value = WatchScope> {
        (prop::collection::vec(path(), 0..8), prop::collection::vec(path(), 0..8))
            .prop_map(|(subtrees, nodes)| WatchScope::of_entries(subtrees, nodes))
    }

    fn changes() -> impl Strategy<Value = Vec<(WatchScope, WatchScope)>> {
        prop::collection::vec((scope(), scope()), 1..8)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 3_000, ..ProptestConfig::default() })]

        /// After every change the form is the changed scope's, and taking a change back
        /// restores the form it was applied to.
        #[test]
        fn the_form_follows_the_scope_and_undo_restores_it(first in scope(), changes in changes()) {
            let mut scope = first.clone();
            let mut form = ScopeForm::new(&first);
            for (generation, (add, remove)) in changes.into_iter().enumerate() {
                let change = ScopeChange { generation: generation as u64 + 1, add, remove };
                let before = form.clone();
                let applied = form.apply(&change);
                let mut undone = form.clone();
                undone.undo(&applied);
                prop_assert_eq!(&undone, &before);
                scope.apply(&change);
                prop_assert_eq!(&form, &ScopeForm::new(&scope));
                prop_assert_eq!(form.scope(), scope.clone());
                let old = before.minimal();
                let mut expected = old.clone();
                expected.apply_entries(&applied.joined, &applied.left);
                prop_assert_eq!(&expected, form.minimal(), "joined and left are the difference");
                prop_assert!(applied.joined.subtrees().iter().all(|r| !old.has_subtree(r)));
                prop_assert!(applied.joined.nodes().iter().all(|n| !old.has_node(n)));
                prop_assert!(applied.left.subtrees().iter().all(|r| old.has_subtree(r)));
                prop_assert!(applied.left.nodes().iter().all(|n| old.has_node(n)));
            }
        }
    }
}
