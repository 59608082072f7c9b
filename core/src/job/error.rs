//! [`JobError`]: the typed errors of the job module.

use thiserror::Error;

use super::JobFailure;

/// A job-module operation failed. Each variant says what was wrong and what to do.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum JobError {
    /// No error handler is registered under this `jobErrorHandlerType`.
    #[error(
        "unknown error handler {name:?}: known handlers are {known}; \
         register custom ones with ErrorHandlers::register"
    )]
    UnknownErrorHandler {
        /// The requested name (case-sensitive, as in ElasticJob).
        name: String,
        /// The registered names, comma-separated.
        known: String,
    },
    /// An error handler with this name is already registered.
    #[error("an error handler named {name:?} is already registered; pick another type name")]
    DuplicateErrorHandler {
        /// The clashing name.
        name: String,
    },
    /// An error handler reported an empty type name, which no config could refer to.
    #[error("an error handler must have a non-empty type name")]
    EmptyErrorHandlerName,
    /// A text is not a task id.
    #[error("{task_id:?} is not a task id: {reason}")]
    InvalidTaskId {
        /// The text.
        task_id: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An item failed and the job's error handler (e.g. `THROW`) raised the failure.
    #[error("job {job_name:?} item {item} failed: {failure}")]
    Raised {
        /// The job's name.
        job_name: String,
        /// The failed item.
        item: u32,
        /// What went wrong.
        failure: JobFailure,
    },
}
