//! The one-round-trip form of a write: the contract's conditions as etcd compares.
//!
//! The engine in [`crate::txn`] reads before it commits, because in general a contract
//! transaction cannot be decided by etcd alone. Most of the transactions shardcron sends can:
//! "this node exists at version 3", "this one does not exist yet and its parent does and is
//! persistent", "this one has no children" are all compares on keys of the layout in
//! [`crate::keys`], and the writes they guard follow from the ops without knowing anything the
//! compares do not pin down. For those, [`plan`] builds one etcd `Txn`:
//!
//! - **when**: the compares below, every one on the state before the transaction;
//! - **then**: the net writes, the same ones the engine would commit;
//! - **else**: the reads the engine starts from, so that when a compare fails the engine
//!   decides which op failed and why from a snapshot taken by that very `Txn`, without another
//!   round trip. (A failed compare can also be a false alarm, see below: the engine then
//!   commits as usual, so the outcome is always the engine's.)
//!
//! What each op assumes about a node the transaction has not touched yet, as compares:
//!
//! | assumption | compare |
//! |---|---|
//! | exists | node key `create_revision > 0` |
//! | exists at version `v` | node value `> header(v)` and `< header(v + 1)`: the value starts with the format tag and the big-endian version, so the values of version `v` sort between the two headers |
//! | absent | node key `create_revision == 0` (etcd compares a missing key as all zeros) |
//! | persistent (a parent) | node key `lease == 0`, plus "exists" |
//! | no children | `create_revision == 0` over the child-index prefix, split around the index keys of children deleted earlier in the transaction (an empty range compares as one missing key) |
//!
//! A node known to exist implies its ancestors exist and are persistent (ephemeral nodes have no
//! children, and a node is never left without its parent), so the parent of a create next to a
//! checked sibling costs no compare. The version compare misses exactly one case, a node with
//! *empty* data at version `v` (its value is `header(v)` itself, not above it): that fails the
//! compare, the engine finds the op fine, and commits with its own compares, one round trip
//! more. The nodes shardcron's fires check at a version all hold data (the reshard flag's
//! detail holds a blank once the flag is answered, for this reason); an empty one costs that
//! round trip, nothing else.
//!
//! Not planned, left to the engine: sequential creates (the name depends on the counter's
//! value), a `set` without an expected version (the new version depends on the stored one),
//! writes of the root, anything decided by an earlier op of the same transaction in a way the
//! compares cannot state (a create over a node created or not deleted earlier, a delete of a
//! node with a child created earlier...), an ephemeral create without a session lease, and
//! plans with more compares than etcd's default `--max-txn-ops` (128) or reads too many for
//! the failure branch beside their writes ([`crate::nest`]; many writes are nested).

use std::collections::{BTreeSet, HashMap};

use etcd_client::{Compare, CompareOp, PutOptions, TxnOp as EtcdOp};
use etcd_client::{DeleteOptions, Txn};
use shardcron_core::registry::{path, TxnResult, Version};

use crate::keys::{encode_value, KeySpace};
use crate::nest::{self, MAX_TXN_OPS};
use crate::txn::{NetWrites, Step};
use crate::watch::prefix_end;

/// A write decided by compares: the `Txn` without its failure branch, and the results it
/// gives when it commits.
#[derive(Debug)]
pub(crate) struct Plan {
    compares: Vec<Compare>,
    writes: Vec<EtcdOp>,
    pub results: Vec<TxnResult>,
}

impl Plan {
    /// How many compares and writes its `Txn` holds.
    pub fn size(&self) -> (usize, usize) {
        (self.compares.len(), self.writes.len())
    }

    /// The `Txn`: the compares, the writes (nested when they are many, [`crate::nest`]), and
    /// `on_failure` (the engine's first reads), or no failure branch when it does not fit
    /// beside the rest (the engine then reads after a failed compare, one round trip more);
    /// whether it has it. `None` when no `Txn` of etcd's default limits holds the compares and
    /// writes: the engine then decides the ops.
    pub fn txn(self, on_failure: Vec<EtcdOp>) -> Option<(Txn, Vec<TxnResult>, bool)> {
        let (compares, writes) = (self.compares.len(), self.writes.len());
        let on_failure = if nest::fits(compares, writes, on_failure.len()) {
            on_failure
        } else if nest::fits(compares, writes, 0) {
            Vec::new()
        } else {
            return None;
        };
        let reads = !on_failure.is_empty();
        Some((nest::txn(self.compares, self.writes, on_failure), self.results, reads))
    }
}

/// What the plan knows of a node: assumed of the state before the transaction (a compare
/// says so), or made so by an earlier op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Known {
    Absent,
    Present {
        /// `None`: exists, version not pinned.
        version: Option<Version>,
        /// `Some(true)`: no lease; `None`: not pinned.
        persistent: Option<bool>,
        /// Its lease, when this transaction wrote the node (a create).
        lease: Option<i64>,
    },
}

/// A key's net write.
#[derive(Debug, Clone)]
enum Write {
    /// `lease: None` keeps the key's current lease (`ignore_lease`).
    Put {
        value: Vec<u8>,
        lease: Option<i64>,
    },
    Delete,
}

struct Planner<'a> {
    keys: &'a KeySpace,
    lease: Option<i64>,
    nodes: HashMap<String, Known>,
    compares: Vec<Compare>,
    writes: NetWrites<Write>,
}

/// The one-`Txn` form of `steps`, or `None` when the engine must decide them (see the module
/// documentation for which).
pub(crate) fn plan(keys: &KeySpace, steps: &[Step], lease: Option<i64>) -> Option<Plan> {
    let mut planner = Planner {
        keys,
        lease,
        nodes: HashMap::new(),
        compares: Vec::new(),
        writes: NetWrites::new(),
    };
    let mut results = Vec::with_capacity(steps.len());
    for step in steps {
        results.push(planner.step(step)?);
    }
    if planner.writes.is_empty() || planner.compares.len() > MAX_TXN_OPS {
        // Checks only: the engine answers them with one read and no commit, as cheap as this.
        return None;
    }
    let writes = planner
        .writes
        .into_vec()
        .into_iter()
        .map(|(key, write)| match write {
            Write::Put { value, lease: Some(lease) } => {
                EtcdOp::put(key, value, Some(PutOptions::new().with_lease(lease)))
            }
            Write::Put { value, lease: None } => {
                EtcdOp::put(key, value, Some(PutOptions::new().with_ignore_lease()))
            }
            Write::Delete => EtcdOp::delete(key, None::<DeleteOptions>),
        })
        .collect();
    Some(Plan { compares: planner.compares, writes, results })
}

impl Planner<'_> {
    fn step(&mut self, step: &Step) -> Option<TxnResult> {
        if step.path() == path::ROOT {
            return None;
        }
        match step {
            Step::Check { path: p, version } => {
                self.require_present(p, *version)?;
                Some(TxnResult::Checked)
            }
            Step::Absent { path: p } => {
                self.require_absent(p)?;
                Some(TxnResult::Checked)
            }
            Step::Set { path: p, data, version } => {
                let (current, lease) = self.require_present(p, *version)?;
                let next = current? + 1;
                let persistent = match self.nodes.get(p) {
                    Some(Known::Present { persistent, .. }) => *persistent,
                    _ => None,
                };
                let value = encode_value(next, data);
                self.write(self.keys.node(p), Write::Put { value, lease });
                self.nodes
                    .insert(p.clone(), Known::Present { version: Some(next), persistent, lease });
                Some(TxnResult::Set { version: next })
            }
            Step::Create { path: p, data, mode, parents } => {
                if mode.is_sequential() {
                    return None;
                }
                let lease = if mode.is_ephemeral() { self.lease? } else { 0 };
                let parent = path::parent(p).unwrap_or(path::ROOT);
                if *parents && path::ancestors(p).any(|a| self.nodes.get(a) == Some(&Known::Absent))
                {
                    // An ancestor this transaction deleted would be re-created: the engine's job.
                    return None;
                }
                self.require_persistent(parent)?;
                self.require_absent(p)?;
                let value = encode_value(0, data);
                self.write(self.keys.node(p), Write::Put { value, lease: Some(lease) });
                self.write(
                    self.keys.index(p),
                    Write::Put { value: Vec::new(), lease: Some(lease) },
                );
                self.children_changed(p);
                self.nodes.insert(
                    p.clone(),
                    Known::Present {
                        version: Some(0),
                        persistent: Some(lease == 0),
                        lease: Some(lease),
                    },
                );
                Some(TxnResult::Created { path: p.clone() })
            }
            Step::Delete { path: p, version } => {
                self.require_present(p, *version)?;
                self.require_childless(p)?;
                self.write(self.keys.node(p), Write::Delete);
                self.write(self.keys.index(p), Write::Delete);
                self.write(self.keys.counter(p), Write::Delete);
                self.children_changed(p);
                self.nodes.insert(p.clone(), Known::Absent);
                Some(TxnResult::Deleted)
            }
        }
    }

    /// Moves the child version of `p`'s parent ([`KeySpace::cversion`]): `p` is created or
    /// deleted.
    fn children_changed(&mut self, p: &str) {
        let parent = path::parent(p).unwrap_or(path::ROOT);
        self.write(self.keys.cversion(parent), Write::Put { value: Vec::new(), lease: Some(0) });
    }

    /// Requires node `p` to exist (at `version`, when given). Returns its version if known and
    /// the lease its write must carry (`None`: keep the stored one).
    fn require_present(
        &mut self,
        p: &str,
        version: Option<Version>,
    ) -> Option<(Option<Version>, Option<i64>)> {
        match self.nodes.get(p).copied() {
            Some(Known::Absent) => None,
            Some(Known::Present { version: known, persistent, lease }) => match (version, known) {
                (Some(want), Some(have)) => (want == have).then_some((known, lease)),
                (Some(want), None) => {
                    // Existence was pinned, the version not yet.
                    self.compare_version(p, want);
                    self.nodes.insert(
                        p.to_owned(),
                        Known::Present { version: Some(want), persistent, lease },
                    );
                    Some((Some(want), lease))
                }
                (None, _) => Some((known, lease)),
            },
            None => {
                match version {
                    Some(want) => self.compare_version(p, want),
                    None => self.compares.push(Compare::create_revision(
                        self.keys.node(p),
                        CompareOp::Greater,
                        0,
                    )),
                }
                self.nodes.insert(
                    p.to_owned(),
                    Known::Present { version, persistent: None, lease: None },
                );
                self.imply_ancestors(p);
                Some((version, None))
            }
        }
    }

    /// Requires `p` (a parent) to exist without a lease.
    fn require_persistent(&mut self, p: &str) -> Option<()> {
        if p == path::ROOT {
            return Some(());
        }
        match self.nodes.get(p).copied() {
            Some(Known::Present { persistent: Some(true), .. }) => Some(()),
            Some(Known::Present { persistent: Some(false), .. }) | Some(Known::Absent) => None,
            Some(Known::Present { version, persistent: None, lease }) => {
                if lease.is_some() {
                    // Written by this transaction with a lease we know: decided above.
                    return None;
                }
                self.compares.push(Compare::lease(self.keys.node(p), CompareOp::Equal, 0));
                self.nodes.insert(
                    p.to_owned(),
                    Known::Present { version, persistent: Some(true), lease },
                );
                Some(())
            }
            None => {
                self.compares.push(Compare::create_revision(
                    self.keys.node(p),
                    CompareOp::Greater,
                    0,
                ));
                self.compares.push(Compare::lease(self.keys.node(p), CompareOp::Equal, 0));
                self.nodes.insert(
                    p.to_owned(),
                    Known::Present { version: None, persistent: Some(true), lease: None },
                );
                self.imply_ancestors(p);
                Some(())
            }
        }
    }

    fn require_absent(&mut self, p: &str) -> Option<()> {
        match self.nodes.get(p) {
            Some(Known::Absent) => Some(()),
            Some(Known::Present { .. }) => None,
            None => {
                self.compares.push(Compare::create_revision(
                    self.keys.node(p),
                    CompareOp::Equal,
                    0,
                ));
                self.nodes.insert(p.to_owned(), Known::Absent);
                Some(())
            }
        }
    }

    /// Requires `p` to have no children once the earlier ops applied: none created by them,
    /// and none before the transaction except those they deleted.
    fn require_childless(&mut self, p: &str) -> Option<()> {
        let mut gone = BTreeSet::new();
        for (child, known) in &self.nodes {
            if path::parent(child) != Some(p) {
                continue;
            }
            match known {
                Known::Present { .. } => return None,
                Known::Absent => {
                    gone.insert(self.keys.index(child));
                }
            }
        }
        let prefix = self.keys.children(p);
        let end = prefix_end(&prefix);
        let mut from = prefix;
        for key in gone {
            if from < key {
                self.compares.push(
                    Compare::create_revision(from, CompareOp::Equal, 0).with_range(key.clone()),
                );
            }
            from = key;
            from.push(0);
        }
        if from < end {
            self.compares.push(Compare::create_revision(from, CompareOp::Equal, 0).with_range(end));
        }
        Some(())
    }

    /// Values of version `v` sort strictly between `header(v)` and `header(v + 1)` (unless the
    /// data is empty, see the module documentation).
    fn compare_version(&mut self, p: &str, v: Version) {
        let key = self.keys.node(p);
        self.compares.push(Compare::value(key.clone(), CompareOp::Greater, encode_value(v, &[])));
        let above = v.checked_add(1).map_or_else(|| vec![0xff; 10], |next| encode_value(next, &[]));
        self.compares.push(Compare::value(key, CompareOp::Less, above));
    }

    /// A node of the state before the transaction exists: so do its ancestors, without a lease.
    fn imply_ancestors(&mut self, p: &str) {
        for ancestor in path::ancestors(p) {
            self.nodes.entry(ancestor.to_owned()).or_insert(Known::Present {
                version: None,
                persistent: Some(true),
                lease: None,
            });
        }
    }

    fn write(&mut self, key: Vec<u8>, write: Write) {
        self.writes.set(key, write);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use shardcron_core::registry::CreateMode;

    use super::*;

    fn ks() -> KeySpace {
        KeySpace::new(Some("ns")).unwrap()
    }

    fn check(p: &str, version: Option<Version>) -> Step {
        Step::Check { path: p.into(), version }
    }
    fn create(p: &str, mode: CreateMode) -> Step {
        Step::Create { path: p.into(), data: b"d".to_vec(), mode, parents: false }
    }
    fn set(p: &str, version: Option<Version>) -> Step {
        Step::Set { path: p.into(), data: b"d".to_vec(), version }
    }
    fn delete(p: &str, version: Option<Version>) -> Step {
        Step::Delete { path: p.into(), version }
    }

    fn sizes(steps: &[Step]) -> Option<(usize, usize)> {
        plan(&ks(), steps, Some(7)).map(|p| (p.compares.len(), p.writes.len()))
    }

    #[test]
    fn a_fire_start_is_one_txn() {
        // Owner checks, running markers beside them, the ledger: the parents of the markers
        // are implied by the checked siblings and cost no compare.
        let mut steps = Vec::new();
        for n in 0..3 {
            steps.push(check(&format!("/job/sharding/{n}/instance"), Some(2)));
        }
        for n in 0..3 {
            steps.push(create(&format!("/job/sharding/{n}/running"), CreateMode::Persistent));
        }
        steps.push(set("/job/ledger/me", Some(5)));
        let planned = plan(&ks(), &steps, Some(7)).unwrap();
        assert_eq!(planned.compares.len(), 3 * 2 + 3 + 2, "version ranges, absences, the ledger");
        // Node, index and the parent's child version per marker; the ledger.
        assert_eq!(planned.writes.len(), 3 * 3 + 1);
        assert_eq!(planned.results[6], TxnResult::Set { version: 6 });
        assert_eq!(
            planned.results[3],
            TxnResult::Created { path: "/job/sharding/0/running".into() }
        );
    }

    #[test]
    fn a_fire_finish_is_one_txn() {
        let steps = [
            delete("/job/sharding/0/running", Some(0)),
            delete("/job/sharding/1/running", Some(0)),
            set("/job/ledger/me", Some(6)),
        ];
        // Per delete: the version range and the empty child range; node, index, counter and
        // the parent's child version.
        assert_eq!(sizes(&steps), Some((2 * 3 + 2, 4 * 2 + 1)));
    }

    #[test]
    fn what_depends_on_stored_values_is_left_to_the_engine() {
        assert!(sizes(&[create("/q/x-", CreateMode::PersistentSequential)]).is_none());
        assert!(sizes(&[set("/a", None)]).is_none(), "the new version depends on the old");
        assert!(sizes(&[check("/a", None)]).is_none(), "checks only: no write to guard");
        assert!(sizes(&[create("/", CreateMode::Persistent)]).is_none());
        assert!(
            plan(&ks(), &[create("/e", CreateMode::Ephemeral)], None).is_none(),
            "no lease: the engine reports the expired session"
        );
    }

    #[test]
    fn decided_by_earlier_ops_is_left_to_the_engine() {
        let p = CreateMode::Persistent;
        assert!(sizes(&[create("/a", p), create("/a", p)]).is_none(), "exists by then");
        assert!(sizes(&[delete("/a", None), check("/a", None)]).is_none(), "gone by then");
        assert!(sizes(&[create("/a/b", p), delete("/a", None)]).is_none(), "has a child by then");
        assert!(sizes(&[check("/a", Some(1)), set("/a", Some(2))]).is_none(), "version moved");
        let e = CreateMode::Ephemeral;
        assert!(sizes(&[create("/a", e), create("/a/b", p)]).is_none(), "ephemeral parent");
    }

    #[test]
    fn later_ops_build_on_earlier_ones() {
        let p = CreateMode::Persistent;
        // The parent created first needs no compare; the set knows the version.
        let steps = [create("/a", p), create("/a/b", p), set("/a/b", Some(0))];
        let planned = plan(&ks(), &steps, Some(7)).unwrap();
        assert_eq!(planned.compares.len(), 2, "/a absent, /a/b absent; the parents need none");
        assert_eq!(planned.writes.len(), 6, "node, index, parent's child version; the set merges");
        assert_eq!(planned.results[2], TxnResult::Set { version: 1 });
        // Deleting every child then the parent: the child range is split around them.
        let steps = [delete("/p/a", None), delete("/p/c", None), delete("/p", None)];
        let planned = plan(&ks(), &steps, Some(7)).unwrap();
        // Two existence and two child ranges for the children; the parent's existence is
        // implied; its child range in three pieces around /p/a and /p/c.
        assert_eq!(planned.compares.len(), 2 + 2 + 3);
    }
}
