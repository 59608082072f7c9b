//! The detail of the nodes ElasticJob keeps empty.
//!
//! ElasticJob writes `sharding/{n}/misfire`, `leader/sharding/necessary` and
//! `leader/failover/items/{n}` empty: its tools read only whether they exist. shardcron needs
//! to know more about each (the fire a misfire owes, when a reshard was asked for, a queued
//! failover's fire, rank, kind and departed owner), and keeps that in a detail node of its own
//! under `shardcron/` ([`Detailed`]), written in the same transaction as the node it details.
//!
//! The protocol decides as if each were one node holding its detail: it reads the detail with
//! [`read`], and writes the node with its detail as data. [`split`] turns each such write into
//! the two the registry gets (the node empty, the detail beside it), and [`Split::reply`] maps
//! the registry's answer back onto the ops the protocol asked for. A detail op that fails
//! (the view was behind on the detail node) fails the transaction at the index of the op it
//! came with, so the protocol decides again on a fresher view, as for a race on the node.
//!
//! A node without its detail (ElasticJob's, an earlier shardcron's, or one whose detail an
//! operator removed) reads as empty: the detail is unknown, as ElasticJob's would be. A detail
//! without its node means nothing (the node was removed by someone else, or answered and its
//! detail kept blank: [`BLANK`]) and is overwritten by the next write of the node.

use crate::layout::{Detailed, JobPaths};
use crate::registry::{CreateMode, Node, RegistryError, TxnOp, TxnResult};

use super::job::{Reply, Request};
use super::view::View;

/// What a detail holds once its node is gone (the flag answered, a misfire marker settled): no
/// time (blank reads as none, as an empty detail does). The detail stays so that its version
/// only grows: a start checks it at the version its view read, and a node deleted and created
/// again starts its own version over, so a check of a detail made again would pass for the
/// one that was read (a marker settled and written anew for another fire between a view and a
/// start). Not empty: a backend may state "at version v" as a bound on the stored bytes that an
/// empty value cannot meet (etcd's one-`Txn` plan, `registry-etcd/src/plan.rs`, then reads
/// first: two requests per start instead of one).
pub const BLANK: &[u8] = b" ";

/// The node `of` as the view shows it, and its detail (empty when it has none). `None` when
/// the node does not exist, whatever its detail node holds.
pub fn read<'v>(view: &'v View, paths: &JobPaths, of: Detailed) -> Option<(&'v Node, &'v [u8])> {
    let node = view.get(&paths.detailed(of))?;
    let detail = view.get(&paths.detail(of)).map_or(&[][..], |d| d.data.as_slice());
    Some((node, detail))
}

/// The raise time of the reshard flag, if one is raised: `None` inside when its detail holds
/// no readable time (ElasticJob's flag, or garbage, which the leader reports).
pub fn flag_time(view: &View, paths: &JobPaths) -> Option<Option<i64>> {
    let (_, data) = read(view, paths, Detailed::Flag)?;
    Some(super::records::parse_flag("", data).ok().flatten())
}

/// How the ops of a split transaction map onto the ops the protocol asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// For each op sent, the op asked for that it came from.
    origin: Vec<usize>,
    /// For each op asked for, the op sent in its place (the node's own, never the detail's).
    sent: Vec<usize>,
    /// The detail node of each op sent that writes one.
    details: Vec<Option<String>>,
}

/// The request the registry gets for `request`: a transaction whose ops write detailed nodes
/// becomes one that writes each empty and its detail beside it. `None` when nothing changes
/// (the common case: no allocation, no mapping). `ensured` tells whether a detail node exists
/// that the view may not show yet (the flag's, ensured at registration).
pub fn split(
    view: &View,
    paths: &JobPaths,
    request: &Request,
    ensured: &dyn Fn(&str) -> bool,
) -> Option<(Request, Split)> {
    let Request::Txn(ops) = request else { return None };
    let detailed = |op: &TxnOp| {
        let path = match op {
            TxnOp::Check { .. } | TxnOp::Absent { .. } => return None,
            TxnOp::Create { path, .. } | TxnOp::Set { path, .. } | TxnOp::Delete { path, .. } => {
                path
            }
        };
        // Only this job's nodes (a transaction is one job's); checks carry no detail.
        Detailed::of_path(path).filter(|&of| paths.detailed(of) == *path)
    };
    if !ops.iter().any(|op| detailed(op).is_some()) {
        return None;
    }
    // Details the caller wrote itself (from a read of the registry): left as they are.
    let explicit: Vec<&str> =
        ops.iter().map(TxnOp::path).filter(|p| p.contains("/shardcron/")).collect();
    let mut out = Split { origin: Vec::new(), sent: Vec::new(), details: Vec::new() };
    let mut sent_ops = Vec::with_capacity(ops.len() * 2);
    for (i, op) in ops.iter().enumerate() {
        out.sent.push(sent_ops.len());
        let Some(of) = detailed(op) else {
            sent_ops.push(op.clone());
            out.origin.push(i);
            out.details.push(None);
            continue;
        };
        let detail = paths.detail(of);
        // The detail's own writes are fenced on the version the view shows: garbage written
        // into it unseen fails the transaction (and is reported on the view that shows it)
        // rather than being erased unread. Registration's word that it exists carries none.
        let seen = view.get(&detail).map(|d| Some(d.version));
        let seen = seen.or_else(|| ensured(&detail).then_some(None));
        let (main, extra) = match op.clone() {
            TxnOp::Create { path, data, mode } => {
                (TxnOp::Create { path, data: Vec::new(), mode }, Some(upsert(&detail, data, seen)))
            }
            TxnOp::Set { path, data, version } => {
                (TxnOp::Set { path, data: Vec::new(), version }, Some(upsert(&detail, data, seen)))
            }
            TxnOp::Delete { path, version } => {
                let extra = seen.map(|version| match of {
                    // The flag's detail (ensured once per registration) and a misfire
                    // marker's stay, holding no time ([`BLANK`]).
                    Detailed::Flag | Detailed::Misfire(_) => {
                        TxnOp::set(detail.clone(), BLANK, version)
                    }
                    Detailed::Entry(_) => TxnOp::delete(detail.clone(), version),
                });
                (TxnOp::Delete { path, version }, extra)
            }
            check @ (TxnOp::Check { .. } | TxnOp::Absent { .. }) => (check, None),
        };
        let extra = extra.filter(|_| !explicit.contains(&detail.as_str()));
        sent_ops.push(main);
        out.origin.push(i);
        out.details.push(None);
        if let Some(extra) = extra {
            sent_ops.push(extra);
            out.origin.push(i);
            out.details.push(Some(detail));
        }
    }
    Some((Request::Txn(sent_ops), out))
}

/// Writes `data` into a detail node: over it when it exists (`seen`, at the version seen, if
/// one was), else a new one.
fn upsert(detail: &str, data: Vec<u8>, seen: Option<Option<u64>>) -> TxnOp {
    match seen {
        Some(version) => TxnOp::set(detail, data, version),
        None => TxnOp::create(detail, data, CreateMode::Persistent),
    }
}

impl Split {
    /// The registry's answer to the split transaction, as the answer to the transaction the
    /// protocol asked for: its ops' results, or the failure at the index of the op asked for
    /// (the cause is the registry's, which names the node that failed).
    pub fn reply(&self, result: Result<Reply, RegistryError>) -> Result<Reply, RegistryError> {
        match result {
            Ok(Reply::Txn(results)) => {
                let asked: Vec<TxnResult> =
                    self.sent.iter().filter_map(|&k| results.get(k).cloned()).collect();
                Ok(Reply::Txn(asked))
            }
            Err(RegistryError::Transaction { index, source }) => Err(RegistryError::Transaction {
                index: self.origin.get(index).copied().unwrap_or(index),
                source,
            }),
            other => other,
        }
    }

    /// The detail node whose op failed in `result`, if a detail op is what failed.
    pub fn failed_detail<'s>(&'s self, result: &Result<Reply, RegistryError>) -> Option<&'s str> {
        match result {
            Err(RegistryError::Transaction { index, .. }) => {
                self.details.get(*index).and_then(Option::as_deref)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::ItemNode;
    use crate::registry::WatchEvent;

    fn node(data: &str, version: u64) -> Node {
        Node { data: data.as_bytes().to_vec(), version, ephemeral: false }
    }

    #[test]
    fn writes_of_detailed_nodes_go_in_two_and_answer_as_one() {
        let paths = JobPaths::new("j");
        let mut view = View::default();
        view.apply(&WatchEvent::Created {
            path: paths.detail(Detailed::Misfire(2)),
            node: node("7000", 0),
        });
        let ops = vec![
            TxnOp::check(paths.item_node(1, ItemNode::Instance), Some(3)),
            TxnOp::create(paths.item_node(1, ItemNode::Misfire), "9000", CreateMode::Persistent),
            TxnOp::delete(paths.item_node(2, ItemNode::Misfire), Some(0)),
            TxnOp::set(paths.sharding_necessary(), "5000", Some(4)),
        ];
        let ensured = |p: &str| p == paths.detail(Detailed::Flag);
        let (sent, split) = split(&view, &paths, &Request::Txn(ops), &ensured).expect("split");
        let Request::Txn(sent) = sent else { panic!("a transaction") };
        assert_eq!(
            sent,
            vec![
                TxnOp::check(paths.item_node(1, ItemNode::Instance), Some(3)),
                TxnOp::create(paths.item_node(1, ItemNode::Misfire), "", CreateMode::Persistent),
                TxnOp::create(paths.detail(Detailed::Misfire(1)), "9000", CreateMode::Persistent),
                TxnOp::delete(paths.item_node(2, ItemNode::Misfire), Some(0)),
                TxnOp::set(paths.detail(Detailed::Misfire(2)), BLANK, Some(0)),
                TxnOp::set(paths.sharding_necessary(), "", Some(4)),
                TxnOp::set(paths.detail(Detailed::Flag), "5000", None),
            ]
        );
        let results = vec![
            TxnResult::Checked,
            TxnResult::Created { path: "a".into() },
            TxnResult::Created { path: "b".into() },
            TxnResult::Deleted,
            TxnResult::Set { version: 1 },
            TxnResult::Set { version: 5 },
            TxnResult::Set { version: 9 },
        ];
        assert_eq!(
            split.reply(Ok(Reply::Txn(results))),
            Ok(Reply::Txn(vec![
                TxnResult::Checked,
                TxnResult::Created { path: "a".into() },
                TxnResult::Deleted,
                TxnResult::Set { version: 5 },
            ]))
        );
        let failed = Err(RegistryError::Transaction {
            index: 4,
            source: Box::new(RegistryError::NoNode {
                op: crate::registry::Op::Delete,
                path: paths.detail(Detailed::Misfire(2)),
            }),
        });
        assert_eq!(split.failed_detail(&failed), Some(paths.detail(Detailed::Misfire(2)).as_str()));
        match split.reply(failed) {
            Err(RegistryError::Transaction { index: 2, .. }) => {}
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn transactions_without_detailed_nodes_are_sent_as_they_are() {
        let paths = JobPaths::new("j");
        let ops =
            vec![TxnOp::create(paths.item_node(0, ItemNode::Running), "i", CreateMode::Ephemeral)];
        assert_eq!(split(&View::default(), &paths, &Request::Txn(ops), &|_| false), None);
        let get = Request::Get(paths.sharding_necessary());
        assert_eq!(split(&View::default(), &paths, &get, &|_| false), None);
    }

    #[test]
    fn a_node_reads_with_its_detail_and_without_it_as_empty() {
        let paths = JobPaths::new("j");
        let mut view = View::default();
        assert_eq!(read(&view, &paths, Detailed::Flag), None);
        view.apply(&WatchEvent::Created {
            path: paths.detail(Detailed::Flag),
            node: node("12", 0),
        });
        assert_eq!(read(&view, &paths, Detailed::Flag), None, "a detail without its node");
        view.apply(&WatchEvent::Created { path: paths.sharding_necessary(), node: node("", 3) });
        let (flag, detail) = read(&view, &paths, Detailed::Flag).expect("raised");
        assert_eq!((flag.version, detail), (3, &b"12"[..]));
        view.apply(&WatchEvent::Deleted { path: paths.detail(Detailed::Flag) });
        assert_eq!(read(&view, &paths, Detailed::Flag).map(|(_, d)| d), Some(&b""[..]));
    }
}
