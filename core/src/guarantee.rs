//! Distribute-once listeners (ElasticJob's `AbstractDistributeOnceElasticJobListener`): callbacks
//! that run once per fire for the whole cluster — when every item of the fire has started, and
//! when every item has completed — whichever instance gets there last. Owns the
//! `guarantee/{started,completed}/{n}` nodes.
//!
//! Each instance records its items of a fire; the one that sees all items recorded removes the
//! records in one transaction, and only the instance whose transaction succeeds runs the
//! callback. (ElasticJob checks and clears in separate steps, so two instances could both run it.)

use async_trait::async_trait;

/// Callbacks that run once per fire across the cluster.
#[async_trait]
pub trait DistributeOnceListener: Send + Sync + 'static {
    /// Every item of the fire at `fire_ms` has started (on whichever instances).
    async fn all_started(&self, _job: &str, _fire_ms: i64) {}
    /// Every item of the fire at `fire_ms` has completed.
    async fn all_completed(&self, _job: &str, _fire_ms: i64) {}
}
