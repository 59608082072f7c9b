//! Leader election of a job: the leader is whoever created the ephemeral node
//! `leader/election/instance`. Creating a node is atomic on every backend, so at most one live
//! session holds it; when its session ends the node goes, the survivors see the deletion through
//! the watch and race to create it again. No latch and no extra watch per job are needed, which
//! keeps one watch per process for any number of jobs.

use crate::layout::JobPaths;
use crate::registry::{CoordinatorRegistry, CreateMode, RegistryError, Result};
use crate::runtime::cache::{Cache, SharedCache};

/// The id of the current leader, as the cache shows it.
pub fn leader(cache: &Cache, paths: &JobPaths) -> Option<String> {
    cache.text(&paths.leader_instance())
}

/// Tries to become the leader. Returns whether `me` leads afterwards.
pub async fn try_lead(
    registry: &dyn CoordinatorRegistry,
    cache: &SharedCache,
    paths: &JobPaths,
    me: &str,
) -> Result<bool> {
    let path = paths.leader_instance();
    match registry.create(&path, me.as_bytes(), CreateMode::Ephemeral).await {
        Ok(_) => {
            cache.update(|c| c.wrote(&path, me.as_bytes(), 0, true));
            Ok(true)
        }
        Err(RegistryError::NodeExists { .. }) => {
            // The cache may not show the winner yet: ask the registry once.
            let Some(holder) = registry.get(&path).await? else { return Ok(false) };
            if holder.data != me.as_bytes() {
                return Ok(false);
            }
            // A node with our id that we did not just create belongs to an earlier session of
            // this id (a restarted process, before the old session timed out). Leadership must
            // live in the current session, which alone this instance can vouch for: replace it.
            match registry.delete(&path, Some(holder.version)).await {
                Ok(()) | Err(RegistryError::NoNode { .. } | RegistryError::BadVersion { .. }) => {}
                Err(e) => return Err(e),
            }
            match registry.create(&path, me.as_bytes(), CreateMode::Ephemeral).await {
                Ok(_) => {
                    cache.update(|c| c.wrote(&path, me.as_bytes(), 0, true));
                    Ok(true)
                }
                Err(RegistryError::NodeExists { .. }) => Ok(false),
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

/// Gives up leadership if `me` holds it (a leader whose server was disabled, or one shutting
/// down). The version check makes sure only our own node is deleted.
pub async fn abdicate(
    registry: &dyn CoordinatorRegistry,
    cache: &SharedCache,
    paths: &JobPaths,
    me: &str,
) -> Result<()> {
    let path = paths.leader_instance();
    let Some(node) = registry.get(&path).await? else { return Ok(()) };
    if node.data != me.as_bytes() {
        return Ok(());
    }
    match registry.delete(&path, Some(node.version)).await {
        Ok(()) => {
            cache.update(|c| c.deleted(&path));
            Ok(())
        }
        Err(RegistryError::NoNode { .. } | RegistryError::BadVersion { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}
