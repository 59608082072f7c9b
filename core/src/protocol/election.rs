//! Leader election of a job: the leader is whoever created the ephemeral node
//! `leader/election/instance`. Creating a node is atomic on every backend, so at most one live
//! session holds it; when its session ends the node goes, the survivors see the deletion through
//! the watch and race to create it again. No latch and no extra watch per job are needed, which
//! keeps one watch per process for any number of jobs.

use std::borrow::Cow;

use crate::layout::JobPaths;

use super::view::View;

/// The id the leader node holds, if the view shows one (read without the view's scope check:
/// the leader node is in every scope a job asks for). Whether `me` leads is this text equal
/// to `me` exactly; a text naming `me` only once trimmed is the leader node as garbage left it.
pub fn leader_text<'v>(view: &'v View, paths: &JobPaths) -> Option<Cow<'v, str>> {
    view.peek(&paths.leader_instance()).map(|node| node.text())
}
