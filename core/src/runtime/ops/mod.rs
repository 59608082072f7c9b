//! The registry side of the protocol's decisions: each function here commits what a pure
//! planner of [`crate::protocol`] decided, records the effect in the shared view, and reads the
//! result back into the planner's terms.

pub mod election;
pub mod execution;
pub mod failover;
pub mod guarantee;
pub mod sharding;

use crate::registry::{CoordinatorRegistry, Result, TxnOp, TxnResult};
use crate::runtime::cache::SharedCache;

/// Commits `ops` as one transaction and records its effect in the view at once (read your own
/// writes), before the watch delivers it.
pub async fn commit(
    registry: &dyn CoordinatorRegistry,
    cache: &SharedCache,
    ops: Vec<TxnOp>,
) -> Result<Vec<TxnResult>> {
    let results = registry.transaction(ops.clone()).await?;
    cache.update(|c| c.committed(&ops, &results));
    Ok(results)
}
