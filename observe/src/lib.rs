//! # shardcron-observe
//!
//! What an operator needs to answer "did item 3 of last night's run succeed, where, and why
//! not?" and "is the scheduler healthy now?":
//!
//! - [`trace`]: every item run and every fire's states in SQLite or PostgreSQL, in the two
//!   tables ElasticJob's `tracing-rdb` writes (`JOB_EXECUTION_LOG`, `JOB_STATUS_TRACE_LOG`),
//!   written off the fire path; and the searches a console runs on them ([`TraceReader`]).
//! - [`metrics`]: Prometheus metrics of fires, items, skips, failovers, reshards, the registry
//!   and the session, served on `/metrics`.
//!
//! Both hook into a scheduler through what the core exposes (job listeners and the event sink),
//! with [`ObserveExt`]:
//!
//! ```no_run
//! # async fn demo(registry: std::sync::Arc<dyn shardcron_core::registry::CoordinatorRegistry>) -> Result<(), Box<dyn std::error::Error>> {
//! use shardcron_core::runtime::SchedulerBuilder;
//! use shardcron_observe::{Metrics, ObserveExt, Trace, TraceConfig};
//!
//! let trace = Trace::start(TraceConfig::new("/var/lib/billing/trace.db"))?;
//! let metrics = Metrics::serve("127.0.0.1:9464".parse()?)?;
//! let scheduler = SchedulerBuilder::new(metrics.registry(registry))
//!     .trace(&trace)
//!     .metrics(&metrics)
//!     .start()
//!     .await?;
//! // ... add jobs; at the end:
//! scheduler.shutdown(std::time::Duration::from_secs(30)).await?;
//! trace.shutdown(std::time::Duration::from_secs(5)).await;
//! # Ok(()) }
//! ```
//!
//! # Layout
//! - `trace/`: [`Trace`] (listener → bounded queue → writer thread, at a low priority → database), [`TraceReader`].
//! - `metrics/`: [`Metrics`] (recorder, exporter, listener, event sink), [`MeteredRegistry`].
//! - `background.rs`: the low-priority threads the trace's writer and the metrics' exporter run
//!   on, off the cores a burst of fires needs.

mod background;
pub mod metrics;
pub mod trace;

use shardcron_core::runtime::SchedulerBuilder;

pub use crate::metrics::{MeteredRegistry, Metrics, MetricsError};
pub use crate::trace::{Trace, TraceConfig, TraceError, TraceReader, TraceStats};

/// Builder options that wire the trace and the metrics into a scheduler.
pub trait ObserveExt {
    /// Records every fire and item of this scheduler's jobs into `trace`. (Add
    /// [`Trace::skip_sink`] too, for the fires that ran nothing.)
    fn trace(self, trace: &Trace) -> Self;
    /// Counts this scheduler's fires, items and events into `metrics`. (Wrap the registry with
    /// [`Metrics::registry`] too, for the registry series.)
    fn metrics(self, metrics: &Metrics) -> Self;
}

impl ObserveExt for SchedulerBuilder {
    fn trace(self, trace: &Trace) -> Self {
        self.listener(trace.listener())
    }

    fn metrics(self, metrics: &Metrics) -> Self {
        self.listener(metrics.listener())
            .event_sink_for(crate::metrics::MetricsListener::wants, metrics.event_sink())
    }
}
