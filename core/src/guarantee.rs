//! Distribute-once listeners (ElasticJob's `AbstractDistributeOnceElasticJobListener`): callbacks
//! that run once per fire for the whole cluster — when every item of the fire has started, and
//! when every item has completed — whichever instance gets there last. Owns the
//! `guarantee/{started,completed}/{n}` nodes.
//!
//! Each instance records its items of a fire; the one that sees all items recorded removes the
//! records in one transaction, and only the instance whose transaction succeeds runs the
//! callback. (ElasticJob checks and clears in separate steps, so two instances could both run it.)

use async_trait::async_trait;

use crate::layout::{GuaranteeStage, JobPaths};
use crate::registry::{CoordinatorRegistry, CreateMode, RegistryError, RegistryExt, Result, TxnOp};

/// Callbacks that run once per fire across the cluster.
#[async_trait]
pub trait DistributeOnceListener: Send + Sync + 'static {
    /// Every item of the fire at `fire_ms` has started (on whichever instances).
    async fn all_started(&self, _job: &str, _fire_ms: i64) {}
    /// Every item of the fire at `fire_ms` has completed.
    async fn all_completed(&self, _job: &str, _fire_ms: i64) {}
}

/// Records that `items` reached `stage`, and returns whether this call completed the set of
/// `total` items and won the right to run the callback.
pub async fn record(
    registry: &dyn CoordinatorRegistry,
    paths: &JobPaths,
    stage: GuaranteeStage,
    items: &[u32],
    total: u32,
) -> Result<bool> {
    for &n in items {
        registry.create_if_absent(&paths.guarantee(stage, n), b"", CreateMode::Persistent).await?;
    }
    // A read of the registry, not of the cache: the other instances' records may not have
    // reached the cache yet, and the last recorder must not miss that it is the last.
    let recorded = registry.children_or_empty(&paths.guarantee_stage(stage)).await?;
    let complete = (0..total).all(|n| recorded.iter().any(|r| r == &n.to_string()));
    if !complete {
        return Ok(false);
    }
    let ops = (0..total).map(|n| TxnOp::delete(paths.guarantee(stage, n), None)).collect();
    match registry.transaction(ops).await {
        Ok(_) => Ok(true),
        // Another instance saw the full set at the same time and cleared it first.
        Err(e) if matches!(e.transaction_failure(), Some((_, RegistryError::NoNode { .. }))) => {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}
