//! The guards of a commit, checked against a model of etcd's keyspace: whatever other clients
//! do between the snapshot and the commit (transactions, recursive deletes, a session's expiry),
//! when the guards still hold, the transaction evaluated again on the new state comes to the
//! same results and the same writes. So a commit the guards let through is one the snapshot's
//! evaluation got right. Run with the guards as fine as they come, and with budgets small
//! enough to pin subtrees.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use shardcron_core::registry::CreateMode;

use super::*;
use crate::guards::{appearing, at_depth, pin};

/// etcd's keyspace as the layout stores it, and its revision.
#[derive(Debug, Clone, Default)]
struct Model {
    keys: BTreeMap<Vec<u8>, Seen>,
    rev: i64,
}

impl Model {
    /// `needs` read into `reads` (at the current revision: nothing commits between two rounds
    /// of a snapshot).
    fn read(&self, keys: &KeySpace, reads: &mut Reads, needs: &[Need], child_limit: usize) {
        reads.rev.get_or_insert(self.rev);
        for need in needs {
            match need {
                Need::Key(key) => {
                    reads.keys.insert(key.clone(), self.keys.get(key).cloned());
                }
                Need::Children(p) => {
                    let prefix = keys.children(p);
                    let all: Vec<String> = self
                        .keys
                        .range(prefix.clone()..)
                        .take_while(|(k, _)| k.starts_with(&prefix))
                        .filter_map(|(k, _)| keys.child_name(p, k).map(str::to_owned))
                        .collect();
                    let truncated = all.len() > child_limit;
                    let names = all.into_iter().take(child_limit).collect();
                    reads.children.insert(p.clone(), ChildList { names, truncated });
                }
            }
        }
    }

    /// Evaluates `steps` to the end as the engine does, reading what it needs.
    fn evaluate(&self, keys: &KeySpace, steps: &[Step]) -> (Reads, Evaluated) {
        let mut reads = Reads::default();
        let child_limit = steps.len() + 1;
        let mut pending = static_needs(keys, steps);
        loop {
            self.read(keys, &mut reads, &pending, child_limit);
            match evaluate(keys, &reads, steps, Some(LEASE)) {
                Evaluated::Needs(need) => pending = vec![need],
                done => return (reads, done),
            }
        }
    }

    /// Commits `writes` as one etcd `Txn` at the next revision.
    fn commit(&mut self, writes: &[(Vec<u8>, Write)]) {
        self.rev += 1;
        for (key, write) in writes {
            match write {
                Write::Put { value, lease } => {
                    let seen = Seen { value: value.clone(), mod_rev: self.rev, lease: *lease };
                    self.keys.insert(key.clone(), seen);
                }
                Write::Delete => {
                    self.keys.remove(key);
                }
            }
        }
    }

    /// Runs `steps` as a transaction of another client; whether it committed.
    fn run(&mut self, keys: &KeySpace, steps: &[Step]) -> bool {
        match self.evaluate(keys, steps).1 {
            Evaluated::Writes { writes, .. } => {
                self.commit(&writes);
                true
            }
            _ => false,
        }
    }

    /// Whether `guard` holds on the current state.
    fn holds(&self, guard: &Guard) -> bool {
        match guard {
            Guard::At { key, mod_rev } => self.keys.get(key).map_or(0, |s| s.mod_rev) == *mod_rev,
            Guard::Unwritten { prefix, rev } => self
                .keys
                .range(prefix.clone()..)
                .take_while(|(k, _)| k.starts_with(prefix))
                .all(|(_, s)| s.mod_rev <= *rev),
            Guard::KeyUnwritten { key, rev } => {
                self.keys.get(key).is_none_or(|s| s.mod_rev <= *rev)
            }
        }
    }

    /// A recursive delete of `p`, as the client sends it.
    fn delete_recursive(&mut self, keys: &KeySpace, p: &str) {
        let delete = RecursiveDelete::of(keys, p);
        self.rev += 1;
        for prefix in &delete.prefixes {
            self.keys.retain(|k, _| !k.starts_with(prefix));
        }
        for key in &delete.keys {
            self.keys.remove(key);
        }
        let seen = Seen { value: Vec::new(), mod_rev: self.rev, lease: 0 };
        self.keys.insert(delete.touched, seen);
    }

    /// The session's lease expires: etcd removes its keys, and writes nothing else.
    fn expire(&mut self) {
        self.rev += 1;
        self.keys.retain(|_, s| s.lease != LEASE);
    }
}

/// What another client does between the snapshot and the commit.
#[derive(Debug, Clone)]
enum Other {
    /// A transaction of drawn ops (or, when it fails whole, its ops one by one).
    Txn(Vec<Drawn>),
    /// A recursive delete of the drawn path.
    DeleteRecursive(usize),
    /// The session owning the ephemeral nodes expires.
    Expire,
}

fn others() -> impl Strategy<Value = Vec<Other>> {
    let other = prop_oneof![
        6 => ops().prop_map(Other::Txn),
        2 => (0usize..6).prop_map(Other::DeleteRecursive),
        1 => Just(Other::Expire),
    ];
    prop::collection::vec(other, 1..4)
}

const LEASE: i64 = 7;

/// Paths of up to three segments: few enough that the ops of a case meet on the same nodes,
/// parents and children (a wider tree hid a planted bug from 3,000 cases).
fn paths() -> Vec<String> {
    ["/a", "/a/a", "/a/b", "/a/a/a", "/a/a/b", "/b"].map(String::from).to_vec()
}

/// One op, drawn: kind, path index, version (0, 1 or none), ephemeral.
type Drawn = (u8, usize, u8, bool);

fn step(drawn: Drawn, paths: &[String]) -> Step {
    let (kind, at, version, ephemeral) = drawn;
    let path = paths[at % paths.len()].clone();
    let version = (version < 2).then_some(u64::from(version));
    match kind % 4 {
        0 => Step::Check { path, version },
        1 => {
            let mode = if ephemeral { CreateMode::Ephemeral } else { CreateMode::Persistent };
            Step::Create { path, data: b"c".to_vec(), mode, parents: false }
        }
        2 => Step::Set { path, data: b"s".to_vec(), version },
        _ => Step::Delete { path, version },
    }
}

fn ops() -> impl Strategy<Value = Vec<Drawn>> {
    prop::collection::vec((0u8..4, 0usize..6, 0u8..3, any::<bool>()), 1..6)
}

/// The results and writes of an evaluation that writes, as text to compare.
fn outcome(evaluated: &Evaluated) -> Option<String> {
    match evaluated {
        Evaluated::Writes { results, writes, .. } => Some(format!("{results:?} {writes:?}")),
        _ => None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 20_000, ..ProptestConfig::default() })]

    #[test]
    fn a_commit_the_guards_let_through_is_what_the_new_state_decides(
        tree in prop::collection::vec(any::<bool>(), 6),
        ephemeral_leaves in any::<bool>(),
        txn in ops(),
        others in others(),
        budget in prop::option::of(0usize..12),
    ) {
        let keys = KeySpace::new(Some("ns")).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let paths = paths();
        let mut model = Model::default();
        // The starting tree: the drawn paths and their ancestors, leaves ephemeral or not.
        for (p, _) in paths.iter().zip(&tree).filter(|(_, on)| **on) {
            let leaf = !paths.iter().zip(&tree).any(|(q, on)| *on && q.starts_with(&format!("{p}/")));
            let mode = if leaf && ephemeral_leaves { CreateMode::Ephemeral } else { CreateMode::Persistent };
            let create = Step::Create { path: p.clone(), data: b"0".to_vec(), mode, parents: true };
            model.run(&keys, &[create]);
        }
        let steps: Vec<Step> = txn.into_iter().map(|d| step(d, &paths)).collect();
        let (reads, evaluated) = model.evaluate(&keys, &steps);
        let Evaluated::Writes { parents_only, .. } = &evaluated else { return Ok(()) };
        let guards = guards(&keys, &reads, parents_only, |n| budget.is_none_or(|b| n <= b));
        // Each of the others' transactions commits whole, or else its ops one by one (a
        // random list of ops mostly has one that fails, which would leave nothing changed).
        for other in others {
            match other {
                Other::Txn(ops) => {
                    let ops: Vec<Step> = ops.into_iter().map(|d| step(d, &paths)).collect();
                    if !model.run(&keys, &ops) {
                        for op in ops {
                            model.run(&keys, &[op]);
                        }
                    }
                }
                Other::DeleteRecursive(at) => model.delete_recursive(&keys, &paths[at % paths.len()]),
                Other::Expire => model.expire(),
            }
        }
        if guards.iter().all(|g| model.holds(g)) {
            let (_, again) = model.evaluate(&keys, &steps);
            prop_assert_eq!(outcome(&again), outcome(&evaluated), "guards {:?}", guards);
        }
    }
}

/// Nodes read absent share a range; pinned subtrees widen level by level until they fit.
#[test]
fn guards_share_ranges_and_pin_the_deepest_subtrees_that_fit() {
    let absent: Vec<String> =
        ["/j/sharding/1/running", "/j/sharding/2/running", "/j/queue/3", "/j/queue/4"]
            .map(String::from)
            .to_vec();
    let emptied = ["/j/sharding/1/misfire"];
    // One node read absent under a parent is compared alone; two share their parent's range.
    let (points, ranges) = appearing(&absent, &emptied);
    assert_eq!(points, vec!["/j/sharding/1/running", "/j/sharding/2/running"]);
    assert_eq!(ranges.into_iter().collect::<Vec<_>>(), vec!["/j/queue", "/j/sharding/1/misfire"]);
    // Pinned subtrees: two compares each, and one per node above them.
    let covered =
        ["/j/sharding/1/running", "/j/sharding/2/running", "/j/queue/3", "/j/sharding/1/misfire"];
    let at = |room: usize| {
        let (roots, above) = pin(&covered, |n| n <= room);
        (roots.into_iter().collect::<Vec<_>>(), above.len())
    };
    let level_4 =
        (covered.iter().map(|p| p.to_string()).collect::<BTreeSet<_>>().into_iter().collect(), 6);
    assert_eq!(at(14), level_4);
    assert_eq!(
        at(13),
        (vec!["/j/queue/3".into(), "/j/sharding/1".into(), "/j/sharding/2".into()], 4)
    );
    assert_eq!(at(9), (vec!["/j/queue".into(), "/j/sharding".into()], 2));
    assert_eq!(at(5), (vec!["/j".into()], 1));
    assert_eq!(at(2), (vec!["/".into()], 0), "the whole tree at worst");
    assert_eq!(at(0), (vec!["/".into()], 0));
    assert_eq!(at_depth("/j/sharding/1", 2), "/j/sharding");
    assert_eq!(at_depth("/j", 2), "/j");
    assert_eq!(at_depth("/j", 0), "/");
}

/// Runs `txn` on a tree of `tree` (persistent nodes), then `other`; the guards of `txn`'s commit
/// (within `budget` compares) and whether they still hold.
fn interleave_within(
    tree: &[&str],
    txn: Vec<Step>,
    budget: usize,
    other: impl FnOnce(&KeySpace, &mut Model),
) -> (Vec<Guard>, bool) {
    let Ok(keys) = KeySpace::new(Some("ns")) else { panic!("a valid namespace") };
    let mut model = Model::default();
    for p in tree {
        let create = Step::Create {
            path: (*p).to_owned(),
            data: b"0".to_vec(),
            mode: CreateMode::Persistent,
            parents: true,
        };
        assert!(model.run(&keys, &[create]), "{p}");
    }
    let (reads, evaluated) = model.evaluate(&keys, &txn);
    let Evaluated::Writes { parents_only, .. } = &evaluated else { panic!("{txn:?} writes") };
    let guards = guards(&keys, &reads, parents_only, |n| n <= budget);
    other(&keys, &mut model);
    let hold = guards.iter().all(|g| model.holds(g));
    (guards, hold)
}

/// [`interleave_within`] with guards as fine as they come, `other` a transaction.
fn interleave(tree: &[&str], txn: Vec<Step>, other: Vec<Step>) -> (Vec<Guard>, bool) {
    interleave_within(tree, txn, usize::MAX, |keys, model| {
        assert!(model.run(keys, &other), "{other:?} commits");
    })
}

#[test]
fn a_recursive_delete_above_a_pinned_subtree_fails_the_commit() {
    let create = |p: &str| Step::Create {
        path: p.into(),
        data: Vec::new(),
        mode: CreateMode::Persistent,
        parents: false,
    };
    let txn = vec![
        create("/a/a/a"),
        create("/a/a/b"),
        Step::Check { path: "/a/b".into(), version: Some(0) },
        Step::Set { path: "/a".into(), data: b"x".to_vec(), version: None },
    ];
    // Four fine guards; three pin `/a` (its node keys, its child versions, the root's).
    let (guards, hold) = interleave_within(&["/a/a", "/a/b"], txn.clone(), 3, |keys, model| {
        model.delete_recursive(keys, "/a");
    });
    assert_eq!(guards.len(), 3, "{guards:?}");
    assert!(!hold, "{guards:?}");
    // A recursive delete in another subtree leaves it alone (one at the top level would not:
    // it writes the root's child version).
    let (_, hold) = interleave_within(&["/a/a", "/a/b", "/b/a"], txn, 3, |keys, model| {
        model.delete_recursive(keys, "/b/a");
    });
    assert!(hold);
}

#[test]
fn a_child_created_under_a_node_being_deleted_fails_the_commit() {
    let delete = Step::Delete { path: "/a/a".into(), version: None };
    let child = Step::Create {
        path: "/a/a/a".into(),
        data: Vec::new(),
        mode: CreateMode::Persistent,
        parents: false,
    };
    let (guards, hold) = interleave(&["/a/a"], vec![delete], vec![child]);
    assert!(!hold, "{guards:?}");
}

#[test]
fn a_parent_deleted_under_a_create_fails_the_commit() {
    let create = Step::Create {
        path: "/a/a/a".into(),
        data: Vec::new(),
        mode: CreateMode::Persistent,
        parents: false,
    };
    let delete = Step::Delete { path: "/a/a".into(), version: None };
    let (guards, hold) = interleave(&["/a/a"], vec![create], vec![delete]);
    assert!(!hold, "{guards:?}");
}
