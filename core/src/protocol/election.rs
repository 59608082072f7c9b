//! Leader election of a job: the leader is whoever created the ephemeral node
//! `leader/election/instance`. Creating a node is atomic on every backend, so at most one live
//! session holds it; when its session ends the node goes, the survivors see the deletion through
//! the watch and race to create it again. No latch and no extra watch per job are needed, which
//! keeps one watch per process for any number of jobs.

use crate::layout::JobPaths;

use super::view::View;

/// Whether the view shows `me` leading (without copying the leader's id: every step asks).
pub fn is_leader(view: &View, paths: &JobPaths, me: &str) -> bool {
    view.get(&paths.leader_instance()).is_some_and(|node| node.text() == me)
}

/// Whether the view shows a leader.
pub fn has_leader(view: &View, paths: &JobPaths) -> bool {
    view.exists(&paths.leader_instance())
}
