//! Delivering the scheduler's events: the application's sink, and the `tracing` line every event
//! also gets. The events themselves are [`crate::events`].

use std::fmt;
use std::sync::Arc;

pub use crate::events::{FireKind, SchedulerEvent, SkipReason};

/// Receives scheduler events. Called synchronously on the scheduler's tasks: keep it quick.
pub type EventSink = Arc<dyn Fn(&SchedulerEvent) + Send + Sync>;

/// The sink of a scheduler, with the `tracing` log line every event also gets.
#[derive(Clone)]
pub(crate) struct Events {
    sink: Option<EventSink>,
    instance: String,
}

impl fmt::Debug for Events {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Events").field("instance", &self.instance).finish()
    }
}

impl Events {
    pub fn new(sink: Option<EventSink>, instance: String) -> Self {
        Events { sink, instance }
    }

    pub fn emit(&self, event: SchedulerEvent) {
        match &event {
            SchedulerEvent::Error { job, message } => {
                tracing::warn!(instance = %self.instance, job, message, "registry operation failed")
            }
            SchedulerEvent::FireFailed { job, item, error, .. } => {
                tracing::error!(instance = %self.instance, job, item, error, "job failed");
                crate::stderr_fallback::eprint_if_unobserved(tracing::Level::ERROR, || {
                    format!("job {job:?} item {item} failed (raised by its error handler): {error}")
                });
            }
            SchedulerEvent::RegistryGarbage { job, path, value, reason } => {
                tracing::warn!(instance = %self.instance, job, path, value, reason, "unreadable registry node")
            }
            SchedulerEvent::ConfigRejected { job, reason } => {
                tracing::error!(instance = %self.instance, job, reason, "config in the registry rejected")
            }
            other => tracing::debug!(instance = %self.instance, event = ?other, "scheduler event"),
        }
        if let Some(sink) = &self.sink {
            sink(&event);
        }
    }
}
