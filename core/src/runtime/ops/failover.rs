//! Running failover's registry operations (see [`crate::protocol::failover`]).

use super::commit;
use crate::layout::JobPaths;
use crate::protocol::failover::{self, is_lost_race, Orphan};
use crate::registry::{CoordinatorRegistry, RegistryExt, Result, TxnResult};
use crate::runtime::cache::SharedCache;

/// Queues `orphans` in one transaction. If another survivor queued them first, or a taker
/// already claimed one, nothing more is needed.
pub async fn queue(
    registry: &dyn CoordinatorRegistry,
    cache: &SharedCache,
    paths: &JobPaths,
    dead: &str,
    orphans: &[Orphan],
) -> Result<()> {
    if orphans.is_empty() {
        return Ok(());
    }
    registry.ensure(&paths.failover_items()).await?;
    let ops = failover::queue(&cache.read(), paths, dead, orphans);
    match commit(registry, cache, ops).await {
        Ok(_) => Ok(()),
        Err(e) if is_lost_race(&e) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Claims one queued item for `me`. Returns the item's new owner version (its fencing token),
/// or `None` if someone else claimed it first.
pub async fn claim(
    registry: &dyn CoordinatorRegistry,
    cache: &SharedCache,
    paths: &JobPaths,
    item: u32,
    me: &str,
) -> Result<Option<u64>> {
    let ops = failover::claim(&cache.read(), paths, item, me);
    match commit(registry, cache, ops).await {
        Ok(results) => Ok(Some(match results.get(1) {
            Some(TxnResult::Set { version }) => *version,
            _ => 0,
        })),
        Err(e) if is_lost_race(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Empties the queue (failover was turned off in the config).
pub async fn clear_queue(
    registry: &dyn CoordinatorRegistry,
    cache: &SharedCache,
    paths: &JobPaths,
) -> Result<()> {
    let queue = failover::queued(&cache.read(), paths);
    for orphan in queue {
        let entry = paths.failover_item(orphan.item);
        registry.delete_if_exists(&entry).await?;
        cache.update(|c| c.deleted(&entry));
    }
    Ok(())
}
