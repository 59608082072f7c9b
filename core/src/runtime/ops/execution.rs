//! Running the execution markers' registry operations (see [`crate::protocol::execution`]).

use super::commit;
use crate::layout::{ItemNode, JobPaths};
use crate::protocol::execution::{self, Completion, OwnerCheck, RunningMark, Start};
use crate::registry::{CoordinatorRegistry, RegistryError, RegistryExt, Result};
use crate::runtime::cache::SharedCache;

/// Marks `items` running for `mark`, all or none.
pub async fn start(
    registry: &dyn CoordinatorRegistry,
    cache: &SharedCache,
    paths: &JobPaths,
    items: &[u32],
    mark: &RunningMark,
    owners: OwnerCheck,
) -> Result<Start> {
    let plan = execution::start(&cache.read(), paths, items, mark, owners);
    match commit(registry, cache, plan.ops.clone()).await {
        Ok(_) => Ok(Start::Marked),
        Err(e) => plan.outcome(&e).ok_or(e),
    }
}

/// Removes the markers of a finished run, recording `completion` in the same transaction. If
/// some markers are already gone (our session expired meanwhile), the rest are removed one by
/// one.
pub async fn finish(
    registry: &dyn CoordinatorRegistry,
    cache: &SharedCache,
    paths: &JobPaths,
    items: &[u32],
    failed_over: &[u32],
    completion: Option<&Completion>,
) -> Result<()> {
    let nodes = execution::finished_markers(paths, items, failed_over);
    match commit(registry, cache, execution::finish(&nodes, completion)).await {
        Ok(_) => Ok(()),
        Err(e) if matches!(e.transaction_failure(), Some((_, RegistryError::NoNode { .. }))) => {
            for p in &nodes {
                registry.delete_if_exists(p).await?;
                cache.update(|c| c.deleted(p));
            }
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Marks `items` misfired: the fire at `fire_ms` came while this instance was still running, so
/// one catch-up run is owed. A later misfire replaces the time: the catch-up runs once, for the
/// latest missed fire (earlier ones are reported skipped).
pub async fn mark_misfire(
    registry: &dyn CoordinatorRegistry,
    cache: &SharedCache,
    paths: &JobPaths,
    items: &[u32],
    fire_ms: i64,
) -> Result<()> {
    let data = fire_ms.to_string();
    for &n in items {
        let p = paths.item_node(n, ItemNode::Misfire);
        let version = registry.put(&p, data.as_bytes()).await?;
        cache.update(|c| c.wrote(&p, data.as_bytes(), version, false));
    }
    Ok(())
}

/// Marks `items` misfired for `fire_ms` in one transaction that holds only while `flag` (a
/// reshard flag) still exists. Returns `false`, marking nothing, when the flag is gone (the
/// reshard committed, and the new assignment decides whose items owe the catch-up).
pub async fn mark_misfire_while_flagged(
    registry: &dyn CoordinatorRegistry,
    cache: &SharedCache,
    paths: &JobPaths,
    items: &[u32],
    fire_ms: i64,
    flag: &str,
) -> Result<bool> {
    let ops = execution::misfire_while_flagged(&cache.read(), paths, items, fire_ms, flag);
    match commit(registry, cache, ops).await {
        Ok(_) => Ok(true),
        Err(e) => match e.transaction_failure() {
            Some((0, RegistryError::NoNode { .. })) => Ok(false),
            // The view was behind on a marker: mark them one by one instead.
            Some((_, RegistryError::NoNode { .. } | RegistryError::NodeExists { .. })) => {
                mark_misfire(registry, cache, paths, items, fire_ms).await?;
                Ok(true)
            }
            _ => Err(e),
        },
    }
}

/// Clears the misfire markers of `items` (before their catch-up run).
pub async fn clear_misfire(
    registry: &dyn CoordinatorRegistry,
    cache: &SharedCache,
    paths: &JobPaths,
    items: &[u32],
) -> Result<()> {
    for &n in items {
        let p = paths.item_node(n, ItemNode::Misfire);
        registry.delete_if_exists(&p).await?;
        cache.update(|c| c.deleted(&p));
    }
    Ok(())
}
