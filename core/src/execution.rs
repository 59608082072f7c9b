//! The execution markers of a job's items: `sharding/{n}/running` while an item runs (when
//! `monitorExecution` is on) and `sharding/{n}/misfire` when a fire was skipped because items
//! still ran. Owns those two nodes.
//!
//! Starting and finishing the items of one fire are one transaction each, whatever the number of
//! items (DESIGN section 8). `running` nodes are ephemeral and hold the runner's instance id, so a
//! crashed runner's markers vanish with its session (ElasticJob #467, #1754) and a survivor can
//! still tell whose they were from its cache.

use crate::layout::{ItemNode, JobPaths};
use crate::registry::{CoordinatorRegistry, CreateMode, RegistryError, RegistryExt, Result, TxnOp};
use crate::runtime::cache::{Cache, SharedCache};

/// How marking the start of a fire went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    Marked,
    /// Item `0` is still marked running (by an earlier fire, here or elsewhere).
    AlreadyRunning(u32),
}

/// Marks `items` running for `me`, all or none.
pub async fn start(
    registry: &dyn CoordinatorRegistry,
    cache: &SharedCache,
    paths: &JobPaths,
    items: &[u32],
    me: &str,
) -> Result<Start> {
    let ops: Vec<TxnOp> = items
        .iter()
        .map(|&n| {
            TxnOp::create(
                paths.item_node(n, ItemNode::Running),
                me.as_bytes().to_vec(),
                CreateMode::Ephemeral,
            )
        })
        .collect();
    match registry.transaction(ops).await {
        Ok(_) => {
            cache.update(|c| {
                for &n in items {
                    c.wrote(&paths.item_node(n, ItemNode::Running), me.as_bytes(), 0, true);
                }
            });
            Ok(Start::Marked)
        }
        Err(e) => match e.transaction_failure() {
            Some((i, RegistryError::NodeExists { .. })) => Ok(Start::AlreadyRunning(items[i])),
            _ => Err(e),
        },
    }
}

/// Removes the running markers of `items`. One transaction; if some markers are already gone
/// (our session expired meanwhile), the rest are removed one by one.
pub async fn finish(
    registry: &dyn CoordinatorRegistry,
    cache: &SharedCache,
    paths: &JobPaths,
    items: &[u32],
) -> Result<()> {
    let nodes: Vec<String> = items.iter().map(|&n| paths.item_node(n, ItemNode::Running)).collect();
    let ops = nodes.iter().map(|p| TxnOp::delete(p.clone(), None)).collect();
    match registry.transaction(ops).await {
        Ok(_) => {}
        Err(e) if matches!(e.transaction_failure(), Some((_, RegistryError::NoNode { .. }))) => {
            for p in &nodes {
                registry.delete_if_exists(p).await?;
            }
        }
        Err(e) => return Err(e),
    }
    cache.update(|c| nodes.iter().for_each(|p| c.deleted(p)));
    Ok(())
}

/// Whether any of `items` is marked running (by anyone).
pub fn any_running(cache: &Cache, paths: &JobPaths, items: &[u32]) -> bool {
    items.iter().any(|&n| cache.exists(&paths.item_node(n, ItemNode::Running)))
}

/// Marks `items` misfired: a fire came while they ran, so one catch-up run is owed.
pub async fn mark_misfire(
    registry: &dyn CoordinatorRegistry,
    cache: &SharedCache,
    paths: &JobPaths,
    items: &[u32],
) -> Result<()> {
    for &n in items {
        let p = paths.item_node(n, ItemNode::Misfire);
        registry.create_if_absent(&p, b"", CreateMode::Persistent).await?;
        cache.update(|c| c.wrote(&p, b"", 0, false));
    }
    Ok(())
}

/// The misfired items among `items`, as the cache shows them.
pub fn misfired(cache: &Cache, paths: &JobPaths, items: &[u32]) -> Vec<u32> {
    items
        .iter()
        .copied()
        .filter(|&n| cache.exists(&paths.item_node(n, ItemNode::Misfire)))
        .collect()
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

/// Whether an operator disabled item `n`.
pub fn item_disabled(cache: &Cache, paths: &JobPaths, n: u32) -> bool {
    cache.exists(&paths.item_node(n, ItemNode::Disabled))
}
