//! Error handlers: what happens when an item fails (`jobErrorHandlerType`).
//!
//! ElasticJob's built-ins are here under the same names: `LOG` (the default), `THROW` and
//! `IGNORE`. Applications add their own (alerting, metrics) by implementing [`JobErrorHandler`]
//! and registering it in [`ErrorHandlers`] (and in [`KnownTypes`] so configs naming it validate).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use super::{FireInfo, JobError, JobFailure};
use crate::config::{KnownTypes, DEFAULT_ERROR_HANDLER_TYPE};
use crate::cron::JobTimeZone;
use crate::stderr_fallback::eprint_if_unobserved;

/// What the executor does with a failure after the handler saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorDisposition {
    /// The failure stays in the report; the fire counts as handled.
    Continue,
    /// The failure is raised: the fire's [`FireReport::raised`](super::FireReport::raised) holds
    /// it, and the runtime surfaces it as an event and an error.
    Raise,
}

/// Decides what a failed item means. Called once per failed item (not for cancelled ones), on
/// the executor's task, in the order items finish.
///
/// The runtime may also call it with `item: None` for a failure of the whole fire that belongs
/// to no item (ElasticJob does so for a failed time-diff check).
///
/// Keep it quick and non-blocking: it runs inline in the fire. A panicking handler is caught; the
/// failure is then logged as by `LOG` and the fire goes on.
pub trait JobErrorHandler: Send + Sync + 'static + fmt::Debug {
    /// The name configs refer to it by (`jobErrorHandlerType`), e.g. `"LOG"`.
    fn type_name(&self) -> &str;

    /// Handles one failure of `job_name` (item `item`, if it belongs to one).
    fn handle(&self, job_name: &str, item: Option<u32>, error: &JobFailure) -> ErrorDisposition;

    /// Handles one failure of `fire` (item `item`, if it belongs to one). The executor calls
    /// this one; override it to know which fire failed (its time, source and instance). The
    /// default forwards to [`handle`](Self::handle).
    fn handle_in_fire(
        &self,
        fire: &FireInfo,
        item: Option<u32>,
        error: &JobFailure,
    ) -> ErrorDisposition {
        self.handle(&fire.job_name, item, error)
    }
}

/// `LOG`, the default: reports the failure at warn level and continues.
///
/// The report is a `tracing` event (target `shardcron_core::job::error_handler`, message `item
/// failed`) with the fields `job`, `item`, `fire` (the scheduled fire time, RFC 3339 in UTC),
/// `source` (`READY`, `MISFIRE`, `FAILOVER` or `MANUAL`) and `error`, all as plain text. When the
/// application installed no `tracing` subscriber, the same report is also written to stderr,
/// so that a failing job is never silent:
///
/// ```text
///  WARN shardcron: job "reports" item 1 of the fire at 2024-05-01T10:00:02+00:00 (READY) failed: the job returned an error: disk full
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogErrorHandler;

impl LogErrorHandler {
    /// Its `jobErrorHandlerType`.
    pub const TYPE: &'static str = "LOG";
}

impl JobErrorHandler for LogErrorHandler {
    fn type_name(&self) -> &str {
        Self::TYPE
    }

    fn handle(&self, job_name: &str, item: Option<u32>, error: &JobFailure) -> ErrorDisposition {
        match item {
            Some(item) => tracing::warn!(job = job_name, item, error = %error, "item failed"),
            None => tracing::warn!(job = job_name, error = %error, "fire failed"),
        }
        eprint_if_unobserved(tracing::Level::WARN, || failure_text(job_name, item, None, error));
        ErrorDisposition::Continue
    }

    fn handle_in_fire(
        &self,
        fire: &FireInfo,
        item: Option<u32>,
        error: &JobFailure,
    ) -> ErrorDisposition {
        let job = fire.job_name.as_str();
        let at = fire_time_text(fire.fire_time_ms());
        let source = fire.source;
        match item {
            Some(item) => tracing::warn!(
                job,
                item,
                fire = %at,
                source = %source,
                error = %error,
                "item failed"
            ),
            None => {
                tracing::warn!(job, fire = %at, source = %source, error = %error, "fire failed")
            }
        }
        eprint_if_unobserved(tracing::Level::WARN, || {
            failure_text(job, item, Some((&at, source)), error)
        });
        ErrorDisposition::Continue
    }
}

/// A fire time as RFC 3339 in UTC (epoch milliseconds if out of the calendar's range).
fn fire_time_text(epoch_ms: i64) -> String {
    JobTimeZone::utc().format_rfc3339(epoch_ms).unwrap_or_else(|| format!("{epoch_ms} ms"))
}

/// `job "reports" item 1 of the fire at 2024-05-01T10:00:02+00:00 (READY) failed: ...`.
pub(super) fn failure_text(
    job: &str,
    item: Option<u32>,
    fire: Option<(&str, super::ExecutionSource)>,
    error: &JobFailure,
) -> String {
    let mut text = format!("job {job:?}");
    if let Some(item) = item {
        text.push_str(&format!(" item {item}"));
    }
    if let Some((at, source)) = fire {
        let of = if item.is_some() { " of" } else { "" };
        text.push_str(&format!("{of} the fire at {at} ({source})"));
    }
    text.push_str(&format!(" failed: {error}"));
    text
}

/// `THROW`: raises the failure, so the fire's report says it failed and the runtime returns and
/// publishes the error. Logs nothing itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThrowErrorHandler;

impl ThrowErrorHandler {
    /// Its `jobErrorHandlerType`.
    pub const TYPE: &'static str = "THROW";
}

impl JobErrorHandler for ThrowErrorHandler {
    fn type_name(&self) -> &str {
        Self::TYPE
    }

    fn handle(&self, _job_name: &str, _item: Option<u32>, _error: &JobFailure) -> ErrorDisposition {
        ErrorDisposition::Raise
    }
}

/// `IGNORE`: does nothing. The failure stays visible in the fire's report only.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IgnoreErrorHandler;

impl IgnoreErrorHandler {
    /// Its `jobErrorHandlerType`.
    pub const TYPE: &'static str = "IGNORE";
}

impl JobErrorHandler for IgnoreErrorHandler {
    fn type_name(&self) -> &str {
        Self::TYPE
    }

    fn handle(&self, _job_name: &str, _item: Option<u32>, _error: &JobFailure) -> ErrorDisposition {
        ErrorDisposition::Continue
    }
}

/// Error handlers keyed by type name. [`Default`] holds `LOG`, `THROW` and `IGNORE`; add custom
/// ones with [`register`](Self::register).
///
/// ```
/// use std::sync::Arc;
/// use shardcron_core::job::{ErrorDisposition, ErrorHandlers, JobErrorHandler, JobFailure};
///
/// #[derive(Debug)]
/// struct Page;
/// impl JobErrorHandler for Page {
///     fn type_name(&self) -> &str { "PAGE" }
///     fn handle(&self, _: &str, _: Option<u32>, _: &JobFailure) -> ErrorDisposition {
///         ErrorDisposition::Raise // (and page someone)
///     }
/// }
///
/// let mut handlers = ErrorHandlers::default();
/// handlers.register(Arc::new(Page))?;
/// assert_eq!(handlers.resolve(None)?.type_name(), "LOG");
/// assert_eq!(handlers.resolve(Some("PAGE"))?.type_name(), "PAGE");
/// assert!(handlers.resolve(Some("EMAIL")).is_err());
/// # Ok::<(), shardcron_core::job::JobError>(())
/// ```
#[derive(Clone, Debug)]
pub struct ErrorHandlers {
    by_type: BTreeMap<String, Arc<dyn JobErrorHandler>>,
}

impl Default for ErrorHandlers {
    fn default() -> Self {
        let builtins: [Arc<dyn JobErrorHandler>; 3] =
            [Arc::new(LogErrorHandler), Arc::new(ThrowErrorHandler), Arc::new(IgnoreErrorHandler)];
        let by_type = builtins
            .into_iter()
            .map(|handler| (handler.type_name().to_string(), handler))
            .collect();
        Self { by_type }
    }
}

impl ErrorHandlers {
    /// Adds a custom handler under its [`type_name`](JobErrorHandler::type_name).
    ///
    /// Names are unique: silently replacing a handler (built-in or not) would change what
    /// running jobs do on failure, so a clash is an error.
    pub fn register(&mut self, handler: Arc<dyn JobErrorHandler>) -> Result<(), JobError> {
        let name = handler.type_name();
        if name.is_empty() {
            return Err(JobError::EmptyErrorHandlerName);
        }
        if self.by_type.contains_key(name) {
            return Err(JobError::DuplicateErrorHandler { name: name.to_string() });
        }
        self.by_type.insert(name.to_string(), handler);
        Ok(())
    }

    /// The handler registered under exactly `type_name` (case-sensitive, as in ElasticJob).
    pub fn get(&self, type_name: &str) -> Result<&Arc<dyn JobErrorHandler>, JobError> {
        self.by_type.get(type_name).ok_or_else(|| JobError::UnknownErrorHandler {
            name: type_name.to_string(),
            known: self.type_names().collect::<Vec<_>>().join(", "),
        })
    }

    /// ElasticJob's lookup rule: an absent or empty type means `LOG`.
    pub fn resolve(&self, type_name: Option<&str>) -> Result<&Arc<dyn JobErrorHandler>, JobError> {
        match type_name {
            None | Some("") => self.get(DEFAULT_ERROR_HANDLER_TYPE),
            Some(name) => self.get(name),
        }
    }

    /// True when a handler is registered under exactly `type_name`.
    pub fn contains(&self, type_name: &str) -> bool {
        self.by_type.contains_key(type_name)
    }

    /// The registered type names, sorted.
    pub fn type_names(&self) -> impl Iterator<Item = &str> {
        self.by_type.keys().map(String::as_str)
    }

    /// `known` plus every handler registered here, so configs naming a custom handler validate.
    pub fn add_to(&self, known: KnownTypes) -> KnownTypes {
        self.type_names().fold(known, KnownTypes::with_error_handler)
    }
}
