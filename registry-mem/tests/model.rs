//! Model-based property test: random operations from several clients, applied both to
//! registry-mem and to a deliberately naive reference model written here from the contract.
//! Every result (errors included, field for field) and the final tree must agree, and every
//! client's watch, applied event by event, must end up showing the final tree.
//!
//! The model is independent of the implementation: one flat `BTreeMap` of paths, children found
//! by scanning, transactions applied to a clone that is kept or thrown away, ephemerals found by
//! owner. Only the path rules come from `shardcron_core::registry::path`, the contract's own.
//!
//! Sessions are modelled too: an expiry, a close, and an outage (a cut or a frozen process of
//! some length, then back) end the session's ephemerals exactly when the contract says, with the
//! session events it says (a lease lost past the timeout less the margin, never resumed).
//!
//! Cases: 64 by default; `PROPTEST_CASES=n` for more.

// Helpers outside `#[test]` fns are not covered by clippy.toml's allow-unwrap-in-tests.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use proptest::prelude::*;
use shardcron_core::handles::Handles;
use shardcron_core::registry::{
    path, CoordinatorRegistry, CreateMode, Node, Op, RegistryError, SessionEvent, SessionEvents,
    TxnOp, TxnResult, Version, WatchEvent, WatchStream, MAX_DATA_SIZE,
};
use shardcron_registry_mem::{ConnectOptions, MemRegistry, MemServer};

const SLOTS: usize = 3;
const NAMESPACE: &str = "/m";

// ---------------------------------------------------------------- the reference model

#[derive(Debug, Clone, PartialEq, Eq)]
struct MNode {
    data: Vec<u8>,
    version: Version,
    /// The session token of an ephemeral's owner.
    owner: Option<u64>,
}

#[derive(Debug, Clone, Default)]
struct Model {
    nodes: BTreeMap<String, MNode>,
    /// Next sequence number per parent; forgotten when the parent is deleted.
    seq: BTreeMap<String, u64>,
}

fn err_at(op: Op, path: &str) -> impl Fn(fn(Op, String) -> RegistryError) -> RegistryError + '_ {
    move |make| make(op, path.to_owned())
}

fn no_node(op: Op, path: String) -> RegistryError {
    RegistryError::NoNode { op, path }
}
fn node_exists(op: Op, path: String) -> RegistryError {
    RegistryError::NodeExists { op, path }
}
fn not_empty(op: Op, path: String) -> RegistryError {
    RegistryError::NotEmpty { op, path }
}
fn ephemeral_parent(op: Op, path: String) -> RegistryError {
    RegistryError::EphemeralParent { op, path }
}

impl Model {
    fn new() -> Self {
        let mut m = Model::default();
        m.nodes.insert("/".into(), MNode { data: vec![], version: 0, owner: None });
        m
    }

    fn parent(p: &str) -> String {
        match p.rfind('/') {
            Some(0) => "/".into(),
            Some(i) => p[..i].into(),
            None => "/".into(),
        }
    }

    fn has_children(&self, p: &str) -> bool {
        self.nodes.keys().any(|k| k != "/" && Self::parent(k) == p)
    }

    fn children(&self, p: &str) -> Option<Vec<String>> {
        self.nodes.get(p)?;
        let mut names: Vec<String> = self
            .nodes
            .keys()
            .filter(|k| k.as_str() != "/" && Self::parent(k) == p)
            .map(|k| k.rsplit('/').next().unwrap().to_owned())
            .collect();
        names.sort();
        Some(names)
    }

    fn create(
        &mut self,
        p: &str,
        data: &[u8],
        mode: CreateMode,
        token: u64,
        make_parents: bool,
    ) -> Result<String, RegistryError> {
        let e = err_at(Op::Create, p);
        // Ancestors, top-down, excluding the root and the node itself.
        let mut ancestors = Vec::new();
        let mut cur = Self::parent(p);
        while cur != "/" {
            ancestors.push(cur.clone());
            cur = Self::parent(&cur);
        }
        ancestors.reverse();
        let parent = Self::parent(p);
        if make_parents {
            if ancestors.iter().any(|a| self.nodes.get(a).is_some_and(|n| n.owner.is_some())) {
                return Err(e(ephemeral_parent));
            }
        } else {
            match self.nodes.get(&parent) {
                None => return Err(e(no_node)),
                Some(n) if n.owner.is_some() => return Err(e(ephemeral_parent)),
                Some(_) => {}
            }
        }
        let name = if mode.is_sequential() {
            let n = self.seq.get(&parent).copied().unwrap_or(0);
            format!("{p}{n:010}")
        } else {
            p.to_owned()
        };
        if self.nodes.contains_key(&name) {
            return Err(e(node_exists));
        }
        for a in ancestors {
            self.nodes.entry(a).or_insert(MNode { data: vec![], version: 0, owner: None });
        }
        if mode.is_sequential() {
            *self.seq.entry(parent).or_insert(0) += 1;
        }
        let owner = mode.is_ephemeral().then_some(token);
        self.nodes.insert(name.clone(), MNode { data: data.to_vec(), version: 0, owner });
        Ok(name)
    }

    fn check(&self, op: Op, p: &str, expected: Option<Version>) -> Result<(), RegistryError> {
        let node = self.nodes.get(p).ok_or_else(|| no_node(op, p.to_owned()))?;
        match expected {
            Some(v) if v != node.version => {
                Err(RegistryError::BadVersion { op, path: p.to_owned(), expected: v })
            }
            _ => Ok(()),
        }
    }

    fn set(
        &mut self,
        p: &str,
        data: &[u8],
        expected: Option<Version>,
    ) -> Result<u64, RegistryError> {
        self.check(Op::Set, p, expected)?;
        let node = self.nodes.get_mut(p).unwrap();
        node.data = data.to_vec();
        node.version += 1;
        Ok(node.version)
    }

    fn remove(&mut self, p: &str) {
        self.nodes.remove(p);
        self.seq.remove(p);
    }

    fn delete(&mut self, p: &str, expected: Option<Version>) -> Result<(), RegistryError> {
        self.check(Op::Delete, p, expected)?;
        if self.has_children(p) {
            return Err(not_empty(Op::Delete, p.to_owned()));
        }
        self.remove(p);
        Ok(())
    }

    fn delete_recursive(&mut self, p: &str) {
        let prefix = format!("{p}/");
        let doomed: Vec<String> =
            self.nodes.keys().filter(|k| *k == p || k.starts_with(&prefix)).cloned().collect();
        for k in doomed {
            self.remove(&k);
        }
    }

    fn end_session(&mut self, token: u64) {
        let doomed: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.owner == Some(token))
            .map(|(k, _)| k.clone())
            .collect();
        for k in doomed {
            self.remove(&k);
        }
    }

    fn transaction(&mut self, ops: &[TxnOp], token: u64) -> Result<Vec<TxnResult>, RegistryError> {
        let mut scratch = self.clone();
        let mut results = Vec::new();
        for (index, op) in ops.iter().enumerate() {
            let r = match op {
                TxnOp::Check { path, version } => {
                    scratch.check(Op::Check, path, *version).map(|()| TxnResult::Checked)
                }
                TxnOp::Absent { path } => match scratch.check(Op::Check, path, None) {
                    Ok(()) => Err(RegistryError::NodeExists { op: Op::Check, path: path.clone() }),
                    Err(RegistryError::NoNode { .. }) => Ok(TxnResult::Checked),
                    Err(e) => Err(e),
                },
                TxnOp::Create { path, data, mode } => scratch
                    .create(path, data, *mode, token, false)
                    .map(|path| TxnResult::Created { path }),
                TxnOp::Set { path, data, version } => {
                    scratch.set(path, data, *version).map(|version| TxnResult::Set { version })
                }
                TxnOp::Delete { path, version } => {
                    scratch.delete(path, *version).map(|()| TxnResult::Deleted)
                }
            };
            match r {
                Ok(r) => results.push(r),
                Err(e) => return Err(RegistryError::Transaction { index, source: Box::new(e) }),
            }
        }
        *self = scratch;
        Ok(results)
    }

    fn view(&self) -> BTreeMap<String, Node> {
        self.nodes
            .iter()
            .map(|(k, n)| {
                let node =
                    Node { data: n.data.clone(), version: n.version, ephemeral: n.owner.is_some() };
                (k.clone(), node)
            })
            .collect()
    }
}

/// Local checks the contract requires before any I/O.
fn local_check(op: Op, p: &str, data: Option<&[u8]>, writes: bool) -> Result<(), RegistryError> {
    if writes {
        path::validate_node(p)?;
    } else {
        path::validate(p)?;
    }
    if let Some(data) = data {
        if data.len() > MAX_DATA_SIZE {
            return Err(RegistryError::DataTooLarge {
                op,
                path: p.to_owned(),
                size: data.len(),
                limit: MAX_DATA_SIZE,
            });
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- the steps

#[derive(Debug, Clone)]
enum Step {
    Create {
        slot: usize,
        path: String,
        data: Data,
        mode: CreateMode,
    },
    Get {
        slot: usize,
        path: String,
    },
    Exists {
        slot: usize,
        path: String,
    },
    Children {
        slot: usize,
        path: String,
    },
    Set {
        slot: usize,
        path: String,
        data: Data,
        version: Option<Version>,
    },
    Delete {
        slot: usize,
        path: String,
        version: Option<Version>,
    },
    DeleteRecursive {
        slot: usize,
        path: String,
    },
    Txn {
        slot: usize,
        ops: Vec<TxnOp>,
    },
    Expire {
        slot: usize,
    },
    Close {
        slot: usize,
    },
    Reconnect {
        slot: usize,
    },
    /// The client cut off (or its process frozen) for `ms`, then back.
    Outage {
        slot: usize,
        ms: u64,
        frozen: bool,
    },
}

/// The session timeout of the harness's clients (the default) and their lease: the timeout
/// less the default margin, a tenth of it.
const SESSION_MS: u64 = 60_000;
const LEASE_MS: u64 = 54_000;

/// Node data: a byte, or one byte too many.
#[derive(Debug, Clone, Copy)]
enum Data {
    Byte(u8),
    TooLarge,
}

impl Data {
    fn bytes(self) -> Vec<u8> {
        match self {
            Data::Byte(b) => vec![b],
            Data::TooLarge => vec![0; MAX_DATA_SIZE + 1],
        }
    }
}

fn a_path() -> impl Strategy<Value = String> {
    let segment = prop_oneof![
        3 => Just("a"),
        3 => Just("b"),
        2 => Just("s"),
        1 => Just("s0000000000"),
        1 => Just("s0000000001"),
    ];
    prop_oneof![
        // Shallow paths mostly, so that writes often meet the nodes earlier steps created.
        20 => prop_oneof![3 => Just(1usize), 3 => Just(2), 1 => Just(3)]
            .prop_flat_map(move |depth| prop::collection::vec(segment.clone(), depth))
            .prop_map(|s| format!("/{}", s.join("/"))),
        1 => Just("/".to_owned()),
        1 => prop_oneof![Just(""), Just("a"), Just("/a/"), Just("//a"), Just("/a/../b")]
            .prop_map(str::to_owned),
    ]
}

fn a_version() -> impl Strategy<Value = Option<Version>> {
    prop_oneof![2 => Just(None), 3 => (0u64..3).prop_map(Some)]
}

fn some_data() -> impl Strategy<Value = Data> {
    prop_oneof![30 => any::<u8>().prop_map(Data::Byte), 1 => Just(Data::TooLarge)]
}

fn a_mode() -> impl Strategy<Value = CreateMode> {
    prop_oneof![
        Just(CreateMode::Persistent),
        Just(CreateMode::Ephemeral),
        Just(CreateMode::PersistentSequential),
        Just(CreateMode::EphemeralSequential),
    ]
}

fn a_txn_op() -> impl Strategy<Value = TxnOp> {
    prop_oneof![
        (a_path(), a_version()).prop_map(|(p, v)| TxnOp::check(p, v)),
        a_path().prop_map(TxnOp::absent),
        (a_path(), some_data(), a_mode()).prop_map(|(p, d, m)| TxnOp::create(p, d.bytes(), m)),
        (a_path(), some_data(), a_version()).prop_map(|(p, d, v)| TxnOp::set(p, d.bytes(), v)),
        (a_path(), a_version()).prop_map(|(p, v)| TxnOp::delete(p, v)),
    ]
}

fn a_step() -> impl Strategy<Value = Step> {
    let slot = 0..SLOTS;
    prop_oneof![
        8 => (slot.clone(), a_path(), some_data(), a_mode())
            .prop_map(|(slot, path, data, mode)| Step::Create { slot, path, data, mode }),
        3 => (slot.clone(), a_path()).prop_map(|(slot, path)| Step::Get { slot, path }),
        2 => (slot.clone(), a_path()).prop_map(|(slot, path)| Step::Exists { slot, path }),
        2 => (slot.clone(), a_path()).prop_map(|(slot, path)| Step::Children { slot, path }),
        4 => (slot.clone(), a_path(), some_data(), a_version())
            .prop_map(|(slot, path, data, version)| Step::Set { slot, path, data, version }),
        3 => (slot.clone(), a_path(), a_version())
            .prop_map(|(slot, path, version)| Step::Delete { slot, path, version }),
        1 => (slot.clone(), a_path()).prop_map(|(slot, path)| Step::DeleteRecursive { slot, path }),
        3 => (slot.clone(), prop::collection::vec(a_txn_op(), 0..4))
            .prop_map(|(slot, ops)| Step::Txn { slot, ops }),
        1 => slot.clone().prop_map(|slot| Step::Expire { slot }),
        1 => slot.clone().prop_map(|slot| Step::Close { slot }),
        3 => slot.clone().prop_map(|slot| Step::Reconnect { slot }),
        1 => (
            slot,
            prop_oneof![
                Just(1_000),
                Just(LEASE_MS - 1),
                Just(LEASE_MS),
                Just(SESSION_MS - 1),
                Just(SESSION_MS),
                Just(SESSION_MS * 2),
            ],
            any::<bool>()
        )
            .prop_map(|(slot, ms, frozen)| Step::Outage { slot, ms, frozen }),
    ]
}

// ---------------------------------------------------------------- running both

/// What an operation returned, in one comparable shape.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Out {
    Path(String),
    Node(Option<Node>),
    Bool(bool),
    Names(Vec<String>),
    Version(Version),
    Unit,
    Txn(Vec<TxnResult>),
}

type Res = Result<Out, RegistryError>;

struct Slot {
    client: MemRegistry,
    watch: WatchStream,
    session: SessionEvents,
    view: BTreeMap<String, Node>,
    /// The model's name for the client's current session.
    token: u64,
    closed: bool,
}

struct Harness {
    server: MemServer,
    model: Model,
    slots: Vec<Slot>,
    next_token: u64,
}

impl Harness {
    async fn new() -> Self {
        let server = MemServer::new(Handles::simulated(1_700_000_000_000, 3));
        let mut h = Harness { server, model: Model::new(), slots: Vec::new(), next_token: 0 };
        for _ in 0..SLOTS {
            let slot = h.connect().await;
            h.slots.push(slot);
        }
        h
    }

    async fn connect(&mut self) -> Slot {
        let client = self.server.connect(ConnectOptions::default().namespace(NAMESPACE)).unwrap();
        let watch = client.watch("/").await.unwrap();
        let session = client.session_events();
        self.next_token += 1;
        Slot {
            client,
            watch,
            session,
            view: BTreeMap::new(),
            token: self.next_token,
            closed: false,
        }
    }

    /// Applies pending watch events of every open slot to its view.
    fn drain_watches(&mut self) {
        for slot in self.slots.iter_mut().filter(|s| !s.closed) {
            while let Some(ev) = ready_event(&mut slot.watch) {
                ev.apply_to(&mut slot.view);
            }
        }
    }

    /// Runs one step on both sides; returns (registry, model) results.
    async fn step(&mut self, step: &Step) -> (Res, Res) {
        match step {
            Step::Create { slot, path, data, mode } => {
                let bytes = data.bytes();
                let s = &self.slots[*slot];
                let got = s.client.create(path, &bytes, *mode).await.map(Out::Path);
                let want = local_check(Op::Create, path, Some(&bytes), true)
                    .and_then(|()| closed_check(s, Op::Create, path))
                    .and_then(|()| {
                        self.model.create(path, &bytes, *mode, s.token, true).map(Out::Path)
                    });
                (got, want)
            }
            Step::Get { slot, path } => {
                let s = &self.slots[*slot];
                let got = s.client.get(path).await.map(Out::Node);
                let want = local_check(Op::Get, path, None, false)
                    .and_then(|()| closed_check(s, Op::Get, path))
                    .map(|()| Out::Node(self.model.view().get(path.as_str()).cloned()));
                (got, want)
            }
            Step::Exists { slot, path } => {
                let s = &self.slots[*slot];
                let got = s.client.exists(path).await.map(Out::Bool);
                let want = local_check(Op::Exists, path, None, false)
                    .and_then(|()| closed_check(s, Op::Exists, path))
                    .map(|()| Out::Bool(self.model.nodes.contains_key(path.as_str())));
                (got, want)
            }
            Step::Children { slot, path } => {
                let s = &self.slots[*slot];
                let got = s.client.children(path).await.map(Out::Names);
                let want = local_check(Op::Children, path, None, false)
                    .and_then(|()| closed_check(s, Op::Children, path))
                    .and_then(|()| {
                        self.model
                            .children(path)
                            .map(Out::Names)
                            .ok_or_else(|| no_node(Op::Children, path.clone()))
                    });
                (got, want)
            }
            Step::Set { slot, path, data, version } => {
                let bytes = data.bytes();
                let s = &self.slots[*slot];
                let got = s.client.set(path, &bytes, *version).await.map(Out::Version);
                let want = local_check(Op::Set, path, Some(&bytes), true)
                    .and_then(|()| closed_check(s, Op::Set, path))
                    .and_then(|()| self.model.set(path, &bytes, *version).map(Out::Version));
                (got, want)
            }
            Step::Delete { slot, path, version } => {
                let s = &self.slots[*slot];
                let got = s.client.delete(path, *version).await.map(|()| Out::Unit);
                let want = local_check(Op::Delete, path, None, true)
                    .and_then(|()| closed_check(s, Op::Delete, path))
                    .and_then(|()| self.model.delete(path, *version).map(|()| Out::Unit));
                (got, want)
            }
            Step::DeleteRecursive { slot, path } => {
                let s = &self.slots[*slot];
                let got = s.client.delete_recursive(path).await.map(|()| Out::Unit);
                let want = local_check(Op::DeleteRecursive, path, None, true)
                    .and_then(|()| closed_check(s, Op::DeleteRecursive, path))
                    .map(|()| {
                        self.model.delete_recursive(path);
                        Out::Unit
                    });
                (got, want)
            }
            Step::Txn { slot, ops } => {
                let s = &self.slots[*slot];
                let got = s.client.transaction(ops.clone()).await.map(Out::Txn);
                let local = ops.iter().enumerate().try_for_each(|(index, op)| {
                    let r = match op {
                        TxnOp::Check { path, .. } | TxnOp::Absent { path } => {
                            local_check(Op::Check, path, None, false)
                        }
                        TxnOp::Create { path, data, .. } => {
                            local_check(Op::Create, path, Some(data), true)
                        }
                        TxnOp::Set { path, data, .. } => {
                            local_check(Op::Set, path, Some(data), true)
                        }
                        TxnOp::Delete { path, .. } => local_check(Op::Delete, path, None, true),
                    };
                    r.map_err(|e| RegistryError::Transaction { index, source: Box::new(e) })
                });
                let first = ops.first().map_or("", |op| op.path());
                let want = local
                    .and_then(|()| closed_check(s, Op::Transaction, first))
                    .and_then(|()| self.model.transaction(ops, s.token).map(Out::Txn));
                (got, want)
            }
            Step::Expire { slot } => {
                let s = &mut self.slots[*slot];
                self.server.expire_session(s.client.client_id());
                if !s.closed {
                    self.model.end_session(s.token);
                    self.next_token += 1;
                    s.token = self.next_token;
                }
                (Ok(Out::Unit), Ok(Out::Unit))
            }
            Step::Close { slot } => {
                let s = &mut self.slots[*slot];
                let got = s.client.close().await.map(|()| Out::Unit);
                if !s.closed {
                    self.model.end_session(s.token);
                    s.closed = true;
                }
                (got, Ok(Out::Unit))
            }
            Step::Reconnect { slot } => {
                if self.slots[*slot].closed {
                    // Drain what the old stream had before it ended: it must end.
                    let old = &mut self.slots[*slot];
                    while let Some(ev) = ready_event(&mut old.watch) {
                        ev.apply_to(&mut old.view);
                    }
                    let end = tokio::task::unconstrained(old.watch.next()).now_or_never();
                    assert_eq!(end, Some(None), "a closed client's watch ends");
                    self.slots[*slot] = self.connect().await;
                }
                (Ok(Out::Unit), Ok(Out::Unit))
            }
            Step::Outage { slot, ms, frozen } => {
                let s = &mut self.slots[*slot];
                while ready_session(&mut s.session).is_some() {}
                let id = s.client.client_id();
                if *frozen {
                    self.server.freeze(id);
                } else {
                    self.server.cut(id);
                }
                tokio::time::sleep(Duration::from_millis(*ms)).await;
                if *frozen {
                    self.server.thaw(id);
                } else {
                    self.server.heal(id);
                }
                let s = &mut self.slots[*slot];
                let mut seen = Vec::new();
                while let Some(ev) = ready_session(&mut s.session) {
                    seen.push(session_name(ev).to_owned());
                }
                // The contract: a cut shows at once, a freeze not at all; past the lease the
                // session is lost, then gone (expired by the server or closed by the client on
                // its return), and a new one opens.
                let want: &[&str] = match (s.closed, *ms >= LEASE_MS, *frozen) {
                    (true, _, _) => &[],
                    (false, true, _) => &["suspended", "lost", "expired", "connected"],
                    (false, false, false) => &["suspended", "reconnected"],
                    (false, false, true) => &[],
                };
                if !s.closed && *ms >= LEASE_MS {
                    self.model.end_session(s.token);
                    self.next_token += 1;
                    s.token = self.next_token;
                }
                let want = want.iter().map(|n| (*n).to_owned()).collect();
                (Ok(Out::Names(seen)), Ok(Out::Names(want)))
            }
        }
    }

    /// The registry's tree of the namespace, in client paths.
    fn registry_tree(&self) -> BTreeMap<String, Node> {
        self.server
            .snapshot()
            .into_iter()
            .filter_map(|(p, n)| {
                let rest = p.strip_prefix(NAMESPACE)?;
                match rest {
                    "" => Some(("/".to_owned(), n)),
                    r if r.starts_with('/') => Some((r.to_owned(), n)),
                    _ => None,
                }
            })
            .collect()
    }
}

/// A watch event already queued, if any. Unconstrained: tokio's cooperative budget would
/// otherwise report `Pending` after some 128 polls within one task, with events still queued.
fn ready_event(watch: &mut WatchStream) -> Option<WatchEvent> {
    tokio::task::unconstrained(watch.next()).now_or_never().flatten()
}

/// A session event already queued, if any.
fn ready_session(events: &mut SessionEvents) -> Option<SessionEvent> {
    tokio::task::unconstrained(events.next()).now_or_never().flatten()
}

fn session_name(event: SessionEvent) -> &'static str {
    match event {
        SessionEvent::Connected { .. } => "connected",
        SessionEvent::Suspended => "suspended",
        SessionEvent::Reconnected => "reconnected",
        SessionEvent::Lost => "lost",
        SessionEvent::Expired => "expired",
        SessionEvent::Closed => "closed",
        _ => "other",
    }
}

fn closed_check(slot: &Slot, op: Op, path: &str) -> Result<(), RegistryError> {
    if slot.closed {
        Err(RegistryError::Closed { op, path: path.to_owned() })
    } else {
        Ok(())
    }
}

fn run(steps: &[Step]) -> Result<(), TestCaseError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        let mut h = Harness::new().await;
        for (i, step) in steps.iter().enumerate() {
            let (got, want) = h.step(step).await;
            prop_assert_eq!(got, want, "step #{}: {:?}", i, step);
            h.drain_watches();
        }
        let want = h.model.view();
        prop_assert_eq!(&h.registry_tree(), &want, "final trees differ");
        for (i, slot) in h.slots.iter().enumerate().filter(|(_, s)| !s.closed) {
            prop_assert_eq!(&slot.view, &want, "slot {}'s watch view differs", i);
        }
        Ok(())
    })
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        // Integration tests have no lib.rs for proptest to put regression files beside.
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn registry_agrees_with_the_model(steps in prop::collection::vec(a_step(), 1..80)) {
        run(&steps)?;
    }
}

/// A fixed sequence covering the corners the random one hits only sometimes.
#[test]
fn model_corner_cases() {
    use CreateMode::*;
    let t = |path: &str| path.to_owned();
    let steps = vec![
        Step::Create { slot: 0, path: t("/s/s"), data: Data::Byte(1), mode: PersistentSequential },
        Step::Create { slot: 1, path: t("/s/s"), data: Data::Byte(2), mode: EphemeralSequential },
        Step::Create {
            slot: 1,
            path: t("/s/s0000000001/a"),
            data: Data::Byte(3),
            mode: Persistent,
        },
        Step::Txn {
            slot: 0,
            ops: vec![
                TxnOp::create("/s/s", vec![4], PersistentSequential),
                TxnOp::create("/s/s0000000000", vec![], Persistent),
            ],
        },
        Step::Create { slot: 0, path: t("/s/s"), data: Data::Byte(5), mode: PersistentSequential },
        Step::Delete { slot: 0, path: t("/s"), version: None },
        Step::Set { slot: 2, path: t("/s"), data: Data::TooLarge, version: Some(0) },
        Step::Expire { slot: 1 },
        Step::Children { slot: 2, path: t("/s") },
        Step::Create { slot: 2, path: t("/e"), data: Data::Byte(7), mode: Ephemeral },
        Step::Outage { slot: 2, ms: LEASE_MS - 1, frozen: false },
        Step::Outage { slot: 2, ms: SESSION_MS - 1, frozen: true },
        Step::Create { slot: 2, path: t("/e"), data: Data::Byte(8), mode: Ephemeral },
        Step::Outage { slot: 2, ms: LEASE_MS, frozen: false },
        Step::Get { slot: 1, path: t("/e") },
        Step::Close { slot: 0 },
        Step::Get { slot: 0, path: t("/s") },
        Step::Get { slot: 0, path: t("bad") },
        Step::Reconnect { slot: 0 },
        Step::DeleteRecursive { slot: 0, path: t("/s") },
        Step::Create { slot: 0, path: t("/s/s"), data: Data::Byte(6), mode: PersistentSequential },
        Step::Txn { slot: 2, ops: vec![] },
        Step::Children { slot: 2, path: t("/") },
    ];
    run(&steps).unwrap();
}
