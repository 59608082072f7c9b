//! [`JobFailure`]: how one item of a fire went wrong, as data the runtime can log, report and
//! hand to error handlers.

use std::any::Any;
use std::error::Error as StdError;

use thiserror::Error;

/// Why an item failed. Plain data (messages, not the job's error values), so a report can be
/// cloned, compared and sent across tasks.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum JobFailure {
    /// The job returned an error; its message, with the messages of its `source()` chain joined
    /// by `": "`.
    #[error("the job returned an error: {0}")]
    Error(String),
    /// The job panicked; the panic message (`"non-string panic payload"` when the panic value
    /// was neither a `&str` nor a `String`).
    #[error("the job panicked: {0}")]
    Panicked(String),
    /// A script job's program ran and ended unsuccessfully.
    #[error(
        "script {program:?} {}; stderr tail: {stderr_tail:?}",
        describe_exit(*status, *signal)
    )]
    Script {
        /// The program that ran.
        program: String,
        /// Its exit code; `None` when a signal ended it.
        status: Option<i32>,
        /// The signal that ended it (Unix), if any.
        signal: Option<i32>,
        /// The last bytes of its standard error (at most
        /// [`SCRIPT_STDERR_TAIL_BYTES`](super::SCRIPT_STDERR_TAIL_BYTES)), lossily decoded.
        stderr_tail: String,
    },
    /// A script job's program could not be started or waited for.
    #[error(
        "could not run script {program:?}: {reason}; check that the program exists, is \
         executable and is given by an absolute path or found on PATH"
    )]
    ScriptLaunch {
        /// The program that was to run.
        program: String,
        /// The operating system's error.
        reason: String,
    },
    /// An HTTP job's request failed: no response (connection refused, timeout, ...) or, unless
    /// the job is lenient, a response with status 400 or above.
    #[error("HTTP {method} {uri}: {}{reason}", status.map(|s| format!("status {s}: ")).unwrap_or_default())]
    Http {
        /// The request's method.
        method: String,
        /// The request's URI.
        uri: String,
        /// The response's status, when one came.
        status: Option<u16>,
        /// What went wrong: the client's error, or the start of the response body.
        reason: String,
    },
    /// The task running the item ended without reporting a result, e.g. because its runtime is
    /// shutting down or the spawner dropped it.
    #[error(
        "the item's task ended without reporting a result ({0}); is the runtime shutting down?"
    )]
    Lost(String),
}

fn describe_exit(status: Option<i32>, signal: Option<i32>) -> String {
    match (status, signal) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was terminated by signal {signal}"),
        (None, None) => "ended without an exit status".to_string(),
    }
}

/// The message of an error and of every error in its `source()` chain, joined by `": "`. A
/// source whose message the text already ends with (errors that print their source inline) is
/// not repeated.
pub(crate) fn error_chain(error: &(dyn StdError + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let message = cause.to_string();
        if !message.is_empty() && !text.ends_with(&message) {
            text.push_str(": ");
            text.push_str(&message);
        }
        source = cause.source();
    }
    text
}

/// The message of a caught panic.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(message) = payload.downcast_ref::<&'static str>() {
        (*message).to_string()
    } else if let Some(message) = payload.downcast_ref::<String>() {
        message.clone()
    } else {
        "non-string panic payload".to_string()
    }
}
