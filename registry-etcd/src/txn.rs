//! Every write of the contract, as one etcd transaction guarded by compares.
//!
//! etcd's `Txn` compares and writes keys; it cannot express the contract's semantics directly:
//! a contract transaction's later ops see its earlier ones (create a parent, then its child),
//! `create` makes missing parents, sequential names need the parent's counter, `delete` must
//! see no children, and etcd rejects a transaction that writes one key twice. So each write is
//! evaluated here, optimistically, in the style of etcd's own STM:
//!
//! 1. **Read** the keys the ops depend on, all at one revision `R` (a first read fixes `R`;
//!    keys discovered later, such as a sequential node's name, are read *at* `R`).
//! 2. **Evaluate** the ops in order on an overlay of that snapshot, exactly as the contract
//!    says (existence, then version, then children; parents; ephemeral parents; counters). The
//!    first failing op is the error, and since every read is as of `R`, the failure is what a
//!    transaction at `R` would have found: nothing is written.
//! 3. **Commit** the net writes (one put or delete per key, in first-touch order, so parents
//!    precede children in the watch stream) in one etcd `Txn` whose compares ([`guards`])
//!    require what the evaluation depended on to be unchanged since `R`: every key read at its
//!    `mod_revision` (0 for an absent one), no child appeared under a node a delete needs empty,
//!    with the savings [`guards`] explains for large transactions. Many writes go in nested
//!    `Txn`s ([`crate::nest`]). If a compare fails, someone wrote in between: start over from 1.
//!
//! A transaction of checks only is answered from the snapshot and needs no commit. The retries
//! are bounded by the operation timeout of the caller.
//!
//! Before all this, [`run`] tries the one-round-trip form of [`crate::plan`]: where compares can
//! state every condition of the ops, one `Txn` commits them, and its failure branch performs
//! step 1, so that the evaluation (2) names the failing op, or commits (3) after a compare that
//! was stricter than the contract, without another read.

use std::collections::{BTreeSet, HashMap};

use etcd_client::{DeleteOptions, TxnOpResponse, TxnResponse};
use etcd_client::{GetOptions, KvClient, PutOptions, Txn, TxnOp as EtcdOp};
use shardcron_core::registry::{path, CreateMode, Op, RegistryError, TxnResult, Version};

use crate::error::{self, map};
use crate::guards::{guards, Guard};
use crate::keys::{decode_counter, decode_value, encode_value, sequential_name, KeySpace};
use crate::nest;
use crate::plan;

/// One op as the engine evaluates it.
#[derive(Debug, Clone)]
pub(crate) enum Step {
    Check {
        path: String,
        version: Option<Version>,
    },
    /// The node does not exist.
    Absent {
        path: String,
    },
    /// `parents`: create missing ancestors (the plain `create`), not in a contract transaction.
    Create {
        path: String,
        data: Vec<u8>,
        mode: CreateMode,
        parents: bool,
    },
    Set {
        path: String,
        data: Vec<u8>,
        version: Option<Version>,
    },
    Delete {
        path: String,
        version: Option<Version>,
    },
}

impl Step {
    pub fn path(&self) -> &str {
        match self {
            Step::Check { path, .. }
            | Step::Absent { path }
            | Step::Create { path, .. }
            | Step::Set { path, .. }
            | Step::Delete { path, .. } => path,
        }
    }

    fn op(&self) -> Op {
        match self {
            Step::Check { .. } | Step::Absent { .. } => Op::Check,
            Step::Create { .. } => Op::Create,
            Step::Set { .. } => Op::Set,
            Step::Delete { .. } => Op::Delete,
        }
    }
}

/// How a run ended: applied with results, or refused at op `index`.
pub(crate) type Outcome = Result<Vec<TxnResult>, (usize, RegistryError)>;

/// A key as read at the snapshot revision.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub value: Vec<u8>,
    pub mod_rev: i64,
    pub lease: i64,
}

/// Direct children of a node as the index showed them at `R`, at most `limit` of them.
#[derive(Debug, Clone, Default)]
pub(crate) struct ChildList {
    pub names: BTreeSet<String>,
    /// The index held more than the limit: the node cannot become empty in this transaction.
    pub truncated: bool,
}

/// Everything read so far, at revision `rev`.
#[derive(Debug, Default)]
pub(crate) struct Reads {
    pub rev: Option<i64>,
    pub keys: HashMap<Vec<u8>, Option<Seen>>,
    pub children: HashMap<String, ChildList>,
}

/// Something the evaluation needs that has not been read yet.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Need {
    Key(Vec<u8>),
    Children(String),
}

/// Why an evaluation stopped early.
enum Stop {
    Need(Need),
    Fail(RegistryError),
}

/// A node's state in the evaluation.
#[derive(Debug, Clone)]
struct NodeState {
    data: Vec<u8>,
    version: Version,
    lease: i64,
}

#[derive(Debug, Clone)]
enum Write {
    Put { value: Vec<u8>, lease: i64 },
    Delete,
}

/// The net writes of a transaction: one per key (etcd rejects a `Txn` that writes a key
/// twice), the last one made, in the order keys were first written (parents before children).
pub(crate) struct NetWrites<W> {
    list: Vec<(Vec<u8>, W)>,
    slot: HashMap<Vec<u8>, usize>,
}

impl<W> NetWrites<W> {
    pub(crate) fn new() -> Self {
        NetWrites { list: Vec::new(), slot: HashMap::new() }
    }

    /// Writes `key`, replacing an earlier write of it in place.
    pub(crate) fn set(&mut self, key: Vec<u8>, write: W) {
        match self.slot.get(&key) {
            Some(&i) => self.list[i].1 = write,
            None => {
                self.slot.insert(key.clone(), self.list.len());
                self.list.push((key, write));
            }
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub(crate) fn into_vec(self) -> Vec<(Vec<u8>, W)> {
        self.list
    }
}

/// One evaluation of the steps over the reads.
struct Eval<'a> {
    keys: &'a KeySpace,
    reads: &'a Reads,
    lease: Option<i64>,
    nodes: HashMap<String, Option<NodeState>>,
    counters: HashMap<String, u64>,
    writes: NetWrites<Write>,
    /// Nodes whose state decided something beyond "exists and is persistent": a check's or a
    /// set's or a delete's own node, a create's own (absent) node.
    decided: BTreeSet<String>,
    /// Nodes looked at as the parent (or ancestor) of a create: only their existence and
    /// persistence decided anything.
    parents: BTreeSet<String>,
}

impl<'a> Eval<'a> {
    fn new(keys: &'a KeySpace, reads: &'a Reads, lease: Option<i64>) -> Self {
        Eval {
            keys,
            reads,
            lease,
            nodes: HashMap::new(),
            counters: HashMap::new(),
            writes: NetWrites::new(),
            decided: BTreeSet::new(),
            parents: BTreeSet::new(),
        }
    }

    /// The state of `p`, as something the step decides on.
    fn decide_on(&mut self, p: &str) -> Result<Option<NodeState>, Stop> {
        let state = self.node(p)?;
        self.decided.insert(p.to_owned());
        Ok(state)
    }

    /// The state of `p`, as the parent (or an ancestor) of a create.
    fn parent_state(&mut self, p: &str) -> Result<Option<NodeState>, Stop> {
        let state = self.node(p)?;
        self.parents.insert(p.to_owned());
        Ok(state)
    }

    /// The nodes the evaluation looked at only as parents (see [`guards`]).
    fn parents_only(&self) -> BTreeSet<String> {
        self.parents.difference(&self.decided).cloned().collect()
    }

    fn write(&mut self, key: Vec<u8>, write: Write) {
        self.writes.set(key, write);
    }

    fn seen(&self, key: Vec<u8>) -> Result<Option<&'a Seen>, Stop> {
        match self.reads.keys.get(&key) {
            Some(seen) => Ok(seen.as_ref()),
            None => Err(Stop::Need(Need::Key(key))),
        }
    }

    fn node(&self, p: &str) -> Result<Option<NodeState>, Stop> {
        if p == path::ROOT {
            return Ok(Some(NodeState { data: Vec::new(), version: 0, lease: 0 }));
        }
        if let Some(state) = self.nodes.get(p) {
            return Ok(state.clone());
        }
        let key = self.keys.node(p);
        match self.seen(key.clone())? {
            None => Ok(None),
            Some(seen) => match decode_value(&seen.value) {
                Some((version, data)) => {
                    Ok(Some(NodeState { data: data.to_vec(), version, lease: seen.lease }))
                }
                None => Err(Stop::Fail(foreign_value(p, &key))),
            },
        }
    }

    fn has_children(&self, p: &str) -> Result<bool, Stop> {
        let Some(list) = self.reads.children.get(p) else {
            return Err(Stop::Need(Need::Children(p.to_owned())));
        };
        if list.truncated {
            return Ok(true);
        }
        for name in &list.names {
            let child = path::join(p, name);
            if !matches!(self.nodes.get(&child), Some(None)) {
                return Ok(true);
            }
        }
        Ok(self.nodes.iter().any(|(child, state)| {
            state.is_some()
                && path::parent(child) == Some(p)
                && !list.names.contains(path::name(child))
        }))
    }

    fn counter(&self, parent: &str) -> Result<u64, Stop> {
        if let Some(&next) = self.counters.get(parent) {
            return Ok(next);
        }
        Ok(self.seen(self.keys.counter(parent))?.map_or(0, |s| decode_counter(&s.value)))
    }

    fn put_node(&mut self, p: &str, state: NodeState, new: bool) {
        let value = encode_value(state.version, &state.data);
        self.write(self.keys.node(p), Write::Put { value, lease: state.lease });
        if new {
            self.write(self.keys.index(p), Write::Put { value: Vec::new(), lease: state.lease });
            self.children_changed(p);
        }
        self.nodes.insert(p.to_owned(), Some(state));
    }

    fn remove_node(&mut self, p: &str) {
        self.write(self.keys.node(p), Write::Delete);
        self.write(self.keys.index(p), Write::Delete);
        self.write(self.keys.counter(p), Write::Delete);
        self.children_changed(p);
        self.nodes.insert(p.to_owned(), None);
        self.counters.insert(p.to_owned(), 0);
    }

    /// Moves the child version of `p`'s parent ([`KeySpace::cversion`]): `p` was created or
    /// deleted.
    fn children_changed(&mut self, p: &str) {
        let parent = path::parent(p).unwrap_or(path::ROOT);
        self.write(self.keys.cversion(parent), Write::Put { value: Vec::new(), lease: 0 });
    }

    fn apply(&mut self, step: &Step) -> Result<TxnResult, Stop> {
        let fail = |e: RegistryError| Err(Stop::Fail(e));
        let op = step.op();
        let at = |p: &str| p.to_owned();
        match step {
            Step::Check { path: p, version } => {
                let Some(node) = self.decide_on(p)? else {
                    return fail(RegistryError::NoNode { op, path: at(p) });
                };
                if let Some(v) = version.filter(|v| *v != node.version) {
                    return fail(RegistryError::BadVersion { op, path: at(p), expected: v });
                }
                Ok(TxnResult::Checked)
            }
            Step::Absent { path: p } => {
                if self.decide_on(p)?.is_some() {
                    return fail(RegistryError::NodeExists { op, path: at(p) });
                }
                Ok(TxnResult::Checked)
            }
            Step::Create { path: p, data, mode, parents } => {
                if *parents {
                    // Check first: an ephemeral ancestor must not leave half a chain behind.
                    for ancestor in path::ancestors(p) {
                        match self.parent_state(ancestor)? {
                            Some(n) if n.lease != 0 => {
                                return fail(RegistryError::EphemeralParent { op, path: at(p) })
                            }
                            Some(_) => {}
                            None => break,
                        }
                    }
                    for ancestor in path::ancestors(p) {
                        if self.node(ancestor)?.is_none() {
                            let empty = NodeState { data: Vec::new(), version: 0, lease: 0 };
                            self.put_node(ancestor, empty, true);
                        }
                    }
                }
                let parent = path::parent(p).unwrap_or(path::ROOT);
                match self.parent_state(parent)? {
                    None => return fail(RegistryError::NoNode { op, path: at(p) }),
                    Some(n) if n.lease != 0 => {
                        return fail(RegistryError::EphemeralParent { op, path: at(p) })
                    }
                    Some(_) => {}
                }
                let full = if mode.is_sequential() {
                    sequential_name(p, self.counter(parent)?)
                } else {
                    p.clone()
                };
                if self.decide_on(&full)?.is_some() {
                    return fail(RegistryError::NodeExists { op, path: at(p) });
                }
                let lease = if mode.is_ephemeral() {
                    match self.lease {
                        Some(lease) => lease,
                        None => return fail(RegistryError::SessionExpired { op, path: at(p) }),
                    }
                } else {
                    0
                };
                if mode.is_sequential() {
                    let next = self.counter(parent)? + 1;
                    self.counters.insert(parent.to_owned(), next);
                    let value = next.to_string().into_bytes();
                    self.write(self.keys.counter(parent), Write::Put { value, lease: 0 });
                }
                self.put_node(&full, NodeState { data: data.clone(), version: 0, lease }, true);
                Ok(TxnResult::Created { path: full })
            }
            Step::Set { path: p, data, version } => {
                let Some(node) = self.decide_on(p)? else {
                    return fail(RegistryError::NoNode { op, path: at(p) });
                };
                if let Some(v) = version.filter(|v| *v != node.version) {
                    return fail(RegistryError::BadVersion { op, path: at(p), expected: v });
                }
                let new =
                    NodeState { data: data.clone(), version: node.version + 1, lease: node.lease };
                self.put_node(p, new, false);
                Ok(TxnResult::Set { version: node.version + 1 })
            }
            Step::Delete { path: p, version } => {
                // ZooKeeper's order: existence, then version, then children.
                let Some(node) = self.decide_on(p)? else {
                    return fail(RegistryError::NoNode { op, path: at(p) });
                };
                if let Some(v) = version.filter(|v| *v != node.version) {
                    return fail(RegistryError::BadVersion { op, path: at(p), expected: v });
                }
                if self.has_children(p)? {
                    return fail(RegistryError::NotEmpty { op, path: at(p) });
                }
                self.remove_node(p);
                Ok(TxnResult::Deleted)
            }
        }
    }
}

/// A value in our key family that this crate did not write.
fn foreign_value(p: &str, key: &[u8]) -> RegistryError {
    error::backend(
        Op::Get,
        p.to_owned(),
        format!(
            "key {:?} does not hold a shardcron node value; is another program writing into \
             this namespace?",
            String::from_utf8_lossy(key)
        ),
        false,
    )
}

/// The keys every step needs for sure, read in the first round.
fn static_needs(keys: &KeySpace, steps: &[Step]) -> Vec<Need> {
    let mut needs = Vec::new();
    let node = |p: &str| Need::Key(keys.node(p));
    for step in steps {
        let p = step.path();
        if p != path::ROOT {
            needs.push(node(p));
        }
        match step {
            Step::Create { parents, mode, .. } => {
                let parent = path::parent(p).unwrap_or(path::ROOT);
                if *parents {
                    needs.extend(path::ancestors(p).map(node));
                } else if parent != path::ROOT {
                    needs.push(node(parent));
                }
                if mode.is_sequential() {
                    needs.push(Need::Key(keys.counter(parent)));
                }
            }
            Step::Delete { .. } => needs.push(Need::Children(p.to_owned())),
            Step::Check { .. } | Step::Absent { .. } | Step::Set { .. } => {}
        }
    }
    let mut unique = BTreeSet::new();
    needs.retain(|n| unique.insert(format!("{n:?}")));
    needs
}

/// Runs `steps` to completion: evaluation, commit, retry on interference. Errors that are not
/// the contract's answer (transport, auth) come back as the outer `Err`, tagged with `op`.
pub(crate) async fn run(
    kv: &KvClient,
    keys: &KeySpace,
    steps: &[Step],
    lease: Option<i64>,
    op: Op,
    at: &str,
) -> Result<Outcome, RegistryError> {
    // A node loses at most one child per step, so this many index keys decide emptiness.
    let child_limit = i64::try_from(steps.len() + 1).unwrap_or(i64::MAX);
    // First the one-`Txn` form, when the ops allow it: it commits, or its failure branch
    // brings the first round of reads.
    let mut seeded = None;
    if let Some(plan) = plan::plan(keys, steps, lease) {
        let needs = static_needs(keys, steps);
        let (compares, writes) = plan.size();
        if let Some((txn, results, with_reads)) = plan.txn(read_ops(keys, &needs, 0, child_limit)) {
            let mut client = kv.clone();
            match client.txn(txn).await {
                Ok(resp) if resp.succeeded() => return Ok(Ok(results)),
                Ok(resp) if with_reads => {
                    let mut reads = Reads::default();
                    absorb(keys, &mut reads, &needs, &resp);
                    seeded = Some(reads);
                }
                Ok(_) => {}
                Err(e) if error::is_lease_gone(&e) => return Ok(Err(lease_gone(steps, op, at))),
                Err(e) => {
                    let size = compares.max(needs.len());
                    let too_large = error::txn_too_large(&e, op, at, size, writes);
                    return Err(too_large.unwrap_or_else(|| map(e, op, at)));
                }
            }
        }
    }
    'attempt: loop {
        let (mut reads, mut pending) = match seeded.take() {
            Some(reads) => (reads, Vec::new()),
            None => (Reads::default(), static_needs(keys, steps)),
        };
        loop {
            if !pending.is_empty() {
                match read(kv, keys, &mut reads, &pending, child_limit).await {
                    Ok(()) => {}
                    // `R` was compacted between two rounds: take a newer snapshot.
                    Err(e) if error::is_compacted(&e) => continue 'attempt,
                    Err(e) => return Err(map(e, op, at)),
                }
            }
            match evaluate(keys, &reads, steps, lease) {
                Evaluated::Needs(need) => pending = vec![need],
                Evaluated::Failed(index, e) => return Ok(Err((index, e))),
                Evaluated::Checked(results) => return Ok(Ok(results)),
                Evaluated::Writes { results, writes, parents_only } => {
                    let budget = |compares: usize| nest::fits(compares, writes.len(), 0);
                    let guards = guards(keys, &reads, &parents_only, budget);
                    let (compares, puts) = (guards.len(), writes.len());
                    tracing::debug!(%op, %at, compares, writes = puts, "etcd transaction, read first");
                    match commit(kv, guards, writes).await {
                        Ok(true) => return Ok(Ok(results)),
                        Ok(false) => continue 'attempt,
                        Err(e) if error::is_lease_gone(&e) => {
                            return Ok(Err(lease_gone(steps, op, at)))
                        }
                        Err(e) => {
                            let too_large = error::txn_too_large(&e, op, at, compares, puts);
                            return Err(too_large.unwrap_or_else(|| map(e, op, at)));
                        }
                    }
                }
            }
        }
    }
}

/// What one evaluation of the steps over the reads so far came to.
enum Evaluated {
    /// It needs this read first.
    Needs(Need),
    /// Op `index` fails: the transaction's answer, nothing to write.
    Failed(usize, RegistryError),
    /// Checks only, all fine: nothing to write.
    Checked(Vec<TxnResult>),
    /// These writes make it, with the nodes looked at only as parents ([`guards`]).
    Writes {
        results: Vec<TxnResult>,
        writes: Vec<(Vec<u8>, Write)>,
        parents_only: BTreeSet<String>,
    },
}

/// Evaluates `steps` over `reads` (step 2 of the module documentation).
fn evaluate(keys: &KeySpace, reads: &Reads, steps: &[Step], lease: Option<i64>) -> Evaluated {
    let mut eval = Eval::new(keys, reads, lease);
    let mut results = Vec::with_capacity(steps.len());
    for (index, step) in steps.iter().enumerate() {
        match eval.apply(step) {
            Ok(result) => results.push(result),
            Err(Stop::Need(need)) => return Evaluated::Needs(need),
            Err(Stop::Fail(e)) => return Evaluated::Failed(index, e),
        }
    }
    if eval.writes.is_empty() {
        return Evaluated::Checked(results);
    }
    let parents_only = eval.parents_only();
    Evaluated::Writes { results, writes: eval.writes.into_vec(), parents_only }
}

/// What a recursive delete of `path` writes, in one etcd `Txn` without compares: the whole
/// subtree in every key family ([`crate::keys`]), and the parent's child version.
#[derive(Debug)]
pub(crate) struct RecursiveDelete {
    /// Every key under these prefixes goes.
    pub prefixes: Vec<Vec<u8>>,
    /// These keys go.
    pub keys: Vec<Vec<u8>>,
    /// This key is written (empty, no lease).
    pub touched: Vec<u8>,
}

impl RecursiveDelete {
    pub fn of(keys: &KeySpace, p: &str) -> Self {
        RecursiveDelete {
            prefixes: vec![
                keys.subtree(p),
                keys.index_below(p),
                keys.counters_below(p),
                keys.cversions_below(p),
            ],
            keys: vec![keys.index(p)],
            touched: keys.cversion(path::parent(p).unwrap_or(path::ROOT)),
        }
    }

    /// The etcd ops: the deletes, then the write.
    pub fn ops(self) -> Vec<EtcdOp> {
        let prefix = || Some(DeleteOptions::new().with_prefix());
        let mut ops: Vec<EtcdOp> =
            self.prefixes.into_iter().map(|p| EtcdOp::delete(p, prefix())).collect();
        ops.extend(self.keys.into_iter().map(|k| EtcdOp::delete(k, None)));
        ops.push(EtcdOp::put(self.touched, Vec::new(), Some(PutOptions::new().with_lease(0))));
        ops
    }
}

/// Our session lease vanished under an ephemeral create: the failure, reported at the first op
/// that needed the lease.
fn lease_gone(steps: &[Step], op: Op, at: &str) -> (usize, RegistryError) {
    let index = steps
        .iter()
        .position(|s| matches!(s, Step::Create { mode, .. } if mode.is_ephemeral()))
        .unwrap_or(0);
    let path = steps.get(index).map_or(at, Step::path).to_owned();
    let op = steps.get(index).map_or(op, Step::op);
    (index, RegistryError::SessionExpired { op, path })
}

/// The etcd reads of `needs`, at revision `rev` (0: the revision of the `Txn` they run in).
fn read_ops(keys: &KeySpace, needs: &[Need], rev: i64, child_limit: i64) -> Vec<EtcdOp> {
    needs
        .iter()
        .map(|need| match need {
            Need::Key(key) => EtcdOp::get(key.clone(), Some(GetOptions::new().with_revision(rev))),
            Need::Children(p) => EtcdOp::get(
                keys.children(p),
                Some(
                    GetOptions::new()
                        .with_prefix()
                        .with_keys_only()
                        .with_limit(child_limit)
                        .with_revision(rev),
                ),
            ),
        })
        .collect()
}

/// Reads `needs` into `reads`, at `reads.rev` once that is fixed: in `Txn`s of at most
/// [`nest::MAX_TXN_OPS`] reads, the later ones at the revision the first one fixed (one snapshot
/// however many keys a transaction depends on; the commit's own size is the server's to judge).
async fn read(
    kv: &KvClient,
    keys: &KeySpace,
    reads: &mut Reads,
    needs: &[Need],
    child_limit: i64,
) -> Result<(), etcd_client::Error> {
    for chunk in needs.chunks(nest::MAX_TXN_OPS) {
        let ops = read_ops(keys, chunk, reads.rev.unwrap_or(0), child_limit);
        let mut client = kv.clone();
        let resp = client.txn(Txn::new().and_then(ops)).await?;
        absorb(keys, reads, chunk, &resp);
    }
    Ok(())
}

/// Takes the answers to [`read_ops`] of `needs` from a `Txn` response into `reads`; the first
/// answer fixes the snapshot revision.
fn absorb(keys: &KeySpace, reads: &mut Reads, needs: &[Need], resp: &TxnResponse) {
    if reads.rev.is_none() {
        reads.rev = resp.header().map(|h| h.revision());
    }
    for (need, answer) in needs.iter().zip(resp.op_responses()) {
        let TxnOpResponse::Get(got) = answer else { continue };
        match need {
            Need::Key(key) => {
                let seen = got.kvs().first().map(|kv| Seen {
                    value: kv.value().to_vec(),
                    mod_rev: kv.mod_revision(),
                    lease: kv.lease(),
                });
                reads.keys.insert(key.clone(), seen);
            }
            Need::Children(p) => {
                let names = got
                    .kvs()
                    .iter()
                    .filter_map(|kv| keys.child_name(p, kv.key()).map(str::to_owned))
                    .collect();
                reads.children.insert(p.clone(), ChildList { names, truncated: got.more() });
            }
        }
    }
}

/// Commits `writes` if `guards` (of what was read) hold. Returns whether it did.
async fn commit(
    kv: &KvClient,
    guards: Vec<Guard>,
    writes: Vec<(Vec<u8>, Write)>,
) -> Result<bool, etcd_client::Error> {
    let compares = guards.into_iter().map(Guard::compare).collect();
    let ops: Vec<EtcdOp> = writes
        .into_iter()
        .map(|(key, write)| match write {
            Write::Put { value, lease } => {
                EtcdOp::put(key, value, Some(PutOptions::new().with_lease(lease)))
            }
            Write::Delete => EtcdOp::delete(key, None::<DeleteOptions>),
        })
        .collect();
    let mut client = kv.clone();
    let resp = client.txn(nest::txn(compares, ops, Vec::new())).await?;
    Ok(resp.succeeded())
}

#[cfg(test)]
#[path = "guards_tests.rs"]
mod guards_tests;
