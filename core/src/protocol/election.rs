//! Leader election of a job: the leader is whoever created the ephemeral node
//! `leader/election/instance`. Creating a node is atomic on every backend, so at most one live
//! session holds it; when its session ends the node goes, the survivors see the deletion through
//! the watch and race to create it again. No latch and no extra watch per job are needed, which
//! keeps one watch per process for any number of jobs.

use std::borrow::Cow;

use crate::layout::JobPaths;
use crate::registry::{CreateMode, TxnOp};

use super::view::View;

/// The bid for leadership: the leader node, created, and its parent written in the same
/// transaction, which counts the elections in its version (see [`fence`]).
pub fn bid(paths: &JobPaths, me: &str) -> Vec<TxnOp> {
    vec![
        TxnOp::create(paths.leader_instance(), me.as_bytes(), CreateMode::Ephemeral),
        TxnOp::set(paths.leader_election(), Vec::new(), None),
    ]
}

/// Stepping down: the leader node deleted at `version`, fenced on the elections (a node won
/// again since is another's, at the version ours had).
pub fn abdication(view: &View, paths: &JobPaths, version: u64) -> Vec<TxnOp> {
    let mut ops: Vec<TxnOp> = fence(view, paths).into_iter().collect();
    ops.push(TxnOp::delete(paths.leader_instance(), Some(version)));
    ops
}

/// The check that fences a leader's write on the elections the view shows: a leader node
/// deleted (by hand, or garbage) and won again by anyone since, even at the version the node
/// had (a node created again starts over), fails it. `None` while the view shows no election
/// count (a job whose leader was elected by an older version, before its next election).
/// (`garbage` seed 330,603,240 at 3 x 2: the leader node deleted by hand and won by another
/// instance in the millisecond of a reshard's commit, which passed on the node's version.)
pub fn fence(view: &View, paths: &JobPaths) -> Option<TxnOp> {
    let path = paths.leader_election();
    let version = view.get(&path)?.version;
    Some(TxnOp::check(path, Some(version)))
}

/// The id the leader node holds, if the view shows one (read without the view's scope check:
/// the leader node is in every scope a job asks for). Whether `me` leads is this text equal
/// to `me` exactly; a text naming `me` only once trimmed is the leader node as garbage left it.
pub fn leader_text<'v>(view: &'v View, paths: &JobPaths) -> Option<Cow<'v, str>> {
    view.peek(&paths.leader_instance()).map(|node| node.text())
}
