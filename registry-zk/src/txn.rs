//! Transactions as ZooKeeper `multi`: all ops commit together or none does, and ZooKeeper
//! answers with the error of the first op that failed, which becomes the contract's
//! `Transaction { index, source }`.
//!
//! The whole request travels as one packet, so its total size (data of every op plus paths and
//! headers) must fit in the server's `jute.maxbuffer` (see the crate docs, "Data size").

use shardcron_core::registry::{path, Op, RegistryError, Result, TxnOp, TxnResult};
use zookeeper_client as zk;

use crate::client::ZkRegistry;
use crate::error::At;
use crate::node::{self, check_size};
use crate::session::Session;
use crate::watch::hub::Fact;

/// Local checks of every op (path rules, data size, reachable versions), before any I/O; the
/// first failure is reported with its index.
pub(crate) fn check(ops: &[TxnOp]) -> Result<()> {
    for (index, op) in ops.iter().enumerate() {
        check_one(op).map_err(|e| RegistryError::Transaction { index, source: Box::new(e) })?;
    }
    Ok(())
}

fn check_one(op: &TxnOp) -> Result<()> {
    match op {
        TxnOp::Check { path: at, version } => {
            path::validate(at)?;
            node::expected(Op::Check, at, *version).map(drop)
        }
        // `multi` has no such op (a create and a delete of the node would check it, but only
        // where its parent exists, and would show every watcher the node come and go).
        // Nothing is lost: the scheduler checks absence only where views lag, which
        // ZooKeeper's do not (`Capability::views_in_order`).
        TxnOp::Absent { path: at } => Err(RegistryError::Backend {
            backend: crate::error::BACKEND,
            op: Op::Check,
            path: at.clone(),
            message: "ZooKeeper's transactions cannot check that a node is absent \
                      (Capability::absent_check is false): leave the check out (ZooKeeper's \
                      views are in order), or read the node before the transaction"
                .into(),
            retryable: false,
            source: None,
        }),
        TxnOp::Create { path: at, data, .. } => {
            path::validate_node(at)?;
            check_size(Op::Create, at, data)
        }
        TxnOp::Set { path: at, data, version } => {
            path::validate_node(at)?;
            check_size(Op::Set, at, data)?;
            node::expected(Op::Set, at, *version).map(drop)
        }
        TxnOp::Delete { path: at, version } => {
            path::validate_node(at)?;
            node::expected(Op::Delete, at, *version).map(drop)
        }
    }
}

/// Where a failing op's error points: its operation, path and expected version.
fn at(op: &TxnOp) -> At<'_> {
    match op {
        TxnOp::Check { path, version } => At::new(Op::Check, path).expecting(*version),
        TxnOp::Absent { path } => At::new(Op::Check, path),
        TxnOp::Create { path, .. } => At::new(Op::Create, path),
        TxnOp::Set { path, version, .. } => At::new(Op::Set, path).expecting(*version),
        TxnOp::Delete { path, version } => At::new(Op::Delete, path).expecting(*version),
    }
}

/// The paths whose events the ops cause, known before they are sent (not those of sequential
/// creates, which get their number from the server).
pub(crate) fn written_paths(ops: &[TxnOp]) -> Vec<String> {
    let mut paths: Vec<String> =
        ops.iter().filter(|op| written(op)).map(|op| op.path().to_owned()).collect();
    paths.sort_unstable();
    paths.dedup();
    paths
}

/// What a committed `multi` left on each path of [`written_paths`]: one event per op on the
/// path, and the state of its last op.
///
/// ZooKeeper 3.8 answers a create inside a `multi` without its stat (ZOOKEEPER-4667). Every op
/// of a `multi` is one transaction with one zxid, so when another op's answer carries a stat
/// (a set's, or a create's where the server sends it), a created node's is known anyway: created
/// and last changed at that zxid, version 0, owned by `session` if ephemeral. Without one, the
/// created path gets no fact and the watches read it.
fn facts(ops: &[TxnOp], answers: &[zk::MultiWriteResult], session: i64) -> Vec<Fact> {
    let reference = answers.iter().find_map(|a| match a {
        zk::MultiWriteResult::SetData { stat } => Some(*stat),
        zk::MultiWriteResult::Create { stat, .. } if !stat.is_invalid() => Some(*stat),
        _ => None,
    });
    let mut facts = Vec::new();
    for p in written_paths(ops) {
        let mine = || ops.iter().zip(answers).filter(|(op, _)| written(op) && op.path() == p);
        let events = mine().count();
        let fact = match mine().next_back() {
            Some((TxnOp::Create { data, mode, .. }, zk::MultiWriteResult::Create { stat, .. })) => {
                let owner = if mode.is_ephemeral() { session } else { 0 };
                let stat = match (stat.is_invalid(), reference) {
                    (true, Some(r)) => created_in(&r, data.len(), owner),
                    _ => *stat,
                };
                Fact::written(&p, events, data, stat)
            }
            Some((TxnOp::Set { data, .. }, zk::MultiWriteResult::SetData { stat })) => {
                Fact::written(&p, events, data, *stat)
            }
            Some((TxnOp::Delete { .. }, _)) => Some(Fact::deleted(&p, events)),
            _ => None,
        };
        facts.extend(fact);
    }
    facts
}

/// The stat of a node created by the transaction `reference` (a stat it answered with) is part of.
fn created_in(reference: &zk::Stat, len: usize, owner: i64) -> zk::Stat {
    let zxid = reference.mzxid;
    zk::Stat {
        czxid: zxid,
        mzxid: zxid,
        pzxid: zxid,
        ctime: reference.mtime,
        mtime: reference.mtime,
        version: 0,
        cversion: 0,
        aversion: 0,
        ephemeral_owner: owner,
        data_length: i32::try_from(len).unwrap_or(i32::MAX),
        num_children: 0,
    }
}

fn written(op: &TxnOp) -> bool {
    match op {
        TxnOp::Check { .. } | TxnOp::Absent { .. } => false,
        TxnOp::Create { mode, .. } => !mode.is_sequential(),
        TxnOp::Set { .. } | TxnOp::Delete { .. } => true,
    }
}

/// Sends the checked ops as one `multi` and maps the answer; with it, what the ops left on the
/// paths they wrote (for the watches, see [`crate::watch`]).
pub(crate) async fn commit(
    registry: &ZkRegistry,
    session: &Session,
    ops: &[TxnOp],
    acls: zk::Acls<'static>,
) -> Result<(Vec<TxnResult>, Vec<Fact>)> {
    if ops.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let whole = At::new(Op::Transaction, ops[0].path());
    let mut writer = session.ns.new_multi_writer();
    for op in ops {
        // `check` ran first, so versions convert; the client's own path checks mirror ours.
        let added = match op {
            TxnOp::Check { path, version } => {
                let v = version.and_then(node::version_to_zk).unwrap_or(-1);
                writer.add_check_version(path, v)
            }
            // Refused (by `check`, which ran first).
            TxnOp::Absent { .. } => {
                check_one(op)?;
                continue;
            }
            TxnOp::Create { path, data, mode } => {
                writer.add_create(path, data, &node::mode(*mode).with_acls(acls))
            }
            TxnOp::Set { path, data, version } => {
                writer.add_set_data(path, data, version.and_then(node::version_to_zk))
            }
            TxnOp::Delete { path, version } => {
                writer.add_delete(path, version.and_then(node::version_to_zk))
            }
        };
        added.map_err(|e| registry.map_err(e, at(op)))?;
    }
    let limit = registry.options().operation_timeout;
    let answer = match tokio::time::timeout(limit, writer.commit()).await {
        Ok(answer) => answer,
        Err(_) => return Err(crate::error::timeout(Op::Transaction, whole.path, limit)),
    };
    match answer {
        Ok(answers) => {
            let facts = facts(ops, &answers, session.id as i64);
            let results = answers.into_iter().map(|r| result(r, whole)).collect::<Result<_>>()?;
            Ok((results, facts))
        }
        Err(zk::MultiWriteError::OperationFailed { index, source }) => {
            let cause = match ops.get(index) {
                Some(op) => registry.map_err(source, at(op)),
                None => registry.map_err(source, whole),
            };
            // A lost link or an expired session is not one op's fault, but the contract reports
            // every transaction failure with an index; the cause keeps it retryable.
            Err(RegistryError::Transaction { index, source: Box::new(cause) })
        }
        Err(zk::MultiWriteError::RequestFailed { source }) => Err(registry.map_err(source, whole)),
    }
}

fn result(r: zk::MultiWriteResult, whole: At<'_>) -> Result<TxnResult> {
    Ok(match r {
        zk::MultiWriteResult::Check => TxnResult::Checked,
        zk::MultiWriteResult::Delete => TxnResult::Deleted,
        zk::MultiWriteResult::Create { path, .. } => TxnResult::Created { path },
        zk::MultiWriteResult::SetData { stat } => {
            TxnResult::Set { version: node::version_from_zk(stat.version) }
        }
        // The enum is non-exhaustive; a kind of result this code does not know means the
        // client library changed under us.
        other => {
            return Err(RegistryError::Backend {
                backend: crate::error::BACKEND,
                op: Op::Transaction,
                path: whole.path.to_owned(),
                message: format!("the transaction committed with an unknown result {other:?}"),
                retryable: false,
                source: None,
            })
        }
    })
}
