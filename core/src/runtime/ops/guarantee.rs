//! Running the distribute-once listeners' registry operations (see [`crate::guarantee`]).

use crate::layout::{GuaranteeStage, JobPaths};
use crate::registry::{CoordinatorRegistry, CreateMode, RegistryError, RegistryExt, Result, TxnOp};

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
