//! [`JobListener`]: code run before and after each fire of a job on this instance.

use async_trait::async_trait;

use super::{FireInfo, FireReport};

/// Hooks around each fire on this instance (ElasticJob's `ElasticJobListener`).
///
/// The executor calls every listener's `before_job_executed` once per fire, in registration
/// order, before any item starts, and every `after_job_executed` once after all items ended,
/// with the report. A fire with no items on this instance calls neither (as in ElasticJob).
///
/// Listeners run inline in the fire: a slow listener delays it. A listener that panics is caught
/// and logged; the fire and the other listeners go on. Both methods do nothing by default.
///
/// These are local listeners. "Once across the cluster" listeners (ElasticJob's
/// `AbstractDistributeOnceElasticJobListener`) need the registry and belong to the runtime.
#[async_trait]
pub trait JobListener: Send + Sync + 'static {
    /// Before the fire's items start.
    async fn before_job_executed(&self, fire: &FireInfo) {
        let _ = fire;
    }

    /// After all of the fire's items ended.
    async fn after_job_executed(&self, fire: &FireInfo, report: &FireReport) {
        let _ = (fire, report);
    }
}
