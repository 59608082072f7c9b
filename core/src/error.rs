//! The error of the scheduler and the operations API. Each component keeps its own precise error
//! type ([`RegistryError`], [`ConfigError`], [`ShardingError`], [`CronError`]); this enum wraps
//! them and adds what only the scheduler can get wrong.

use crate::config::ConfigError;
use crate::cron::CronError;
use crate::job::JobError;
use crate::registry::RegistryError;
use crate::sharding::ShardingError;

/// Shorthand for results of scheduler operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What a scheduler or operations call can fail with. Each wrapped error keeps its cause
/// ([`std::error::Error::source`]); [`is_retryable`](Self::is_retryable) tells a transient
/// failure from a final one.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The registry failed or refused an operation; [`RegistryError::is_retryable`] says
    /// whether trying again can help.
    #[error(transparent)]
    Registry(#[from] RegistryError),

    /// A job config was refused; nothing was changed. The error names the field.
    #[error("invalid job config: {0}")]
    Config(#[from] ConfigError),

    /// A cron expression or time zone that does not parse.
    #[error(transparent)]
    Cron(#[from] CronError),

    /// A sharding strategy failed or is unknown.
    #[error(transparent)]
    Sharding(#[from] ShardingError),

    /// A job's code or setup failed outside an item's run (an item's own failure goes to
    /// the job's error handler, not here).
    #[error(transparent)]
    Job(#[from] JobError),

    /// The registry holds a config for the job that cannot be used and `overwrite` is off.
    #[error(
        "job {job}: the config stored in the registry is unusable ({source}); fix it with the \
         operations API, or start with overwrite: true to replace it with the local config"
    )]
    StoredConfigUnusable {
        /// The job.
        job: String,
        /// Why the stored config cannot be used.
        #[source]
        source: crate::config::store::StoredConfigError,
    },

    /// A job of that name is already scheduled in this process.
    #[error("job {job} is already scheduled in this scheduler")]
    JobExists {
        /// The job's name.
        job: String,
    },

    /// No job of that name is scheduled in this process (or known to the registry).
    #[error("no job named {job}")]
    NoSuchJob {
        /// The name asked for.
        job: String,
    },

    /// The scheduler has shut down; create a new one.
    #[error("the scheduler has shut down")]
    ShutDown,

    /// A second stop signal arrived while `Scheduler::shutdown_on_ctrl_c` waited for running
    /// items to finish.
    #[error(
        "stopped by a second signal before the running items finished; with failover on, \
         other instances re-run them once this instance's registry session ends"
    )]
    ShutdownInterrupted,

    /// [`Scheduler::shutdown`](crate::runtime::Scheduler::shutdown) did not finish within its
    /// deadline; the scheduler's remaining tasks were stopped at once.
    #[error(
        "the graceful shutdown did not finish within {deadline:?}: the remaining tasks were \
         stopped; this instance's registry nodes go when its registry session ends"
    )]
    ShutdownDeadline {
        /// The deadline given.
        deadline: std::time::Duration,
    },

    /// The handlers of the stop signals (Ctrl-C, SIGTERM) could not be installed.
    #[error("cannot handle stop signals: {source}")]
    Signals {
        /// The operating system's refusal.
        #[source]
        source: std::io::Error,
    },

    /// A conditional write kept losing to concurrent writers of the same node.
    #[error("{what}: gave up after repeated concurrent changes of the node; retry later")]
    Contended {
        /// The write that gave up.
        what: String,
    },

    /// Registering a job on this instance failed on a registry error; the job is not
    /// scheduled here. [`Error::is_retryable`] says whether adding it again can help (a lost
    /// connection, a timeout).
    #[error("job {job}: {source}")]
    Registration {
        /// The job.
        job: String,
        /// The registry's error.
        #[source]
        source: RegistryError,
    },

    /// An operation was refused because of the job's state in the registry.
    #[error("job {job}: {reason}")]
    Refused {
        /// The job.
        job: String,
        /// What in its state forbids the operation.
        reason: String,
    },

    /// Adding a job whose config the registry already holds.
    #[error("job {job} already exists in the registry; change it with a config update instead")]
    JobAlreadyRegistered {
        /// The job.
        job: String,
    },

    /// No job of the namespace (or of the named job) has a server of that IP.
    #[error("no server {ip}{}", in_job(.job))]
    NoSuchServer {
        /// The IP asked for.
        ip: String,
        /// The job looked in; `None` for every job of the namespace.
        job: Option<String>,
    },

    /// No job of the namespace (or of the named job) has a live instance of that id.
    #[error("no live instance {instance}{}", in_job(.job))]
    NoSuchInstance {
        /// The instance id asked for (`{ip}@-@{pid}`).
        instance: String,
        /// The job looked in; `None` for every job of the namespace.
        job: Option<String>,
    },
}

impl Error {
    /// True when trying the same operation again later may succeed: the registry's transient
    /// failures (a lost connection, a timeout, see [`RegistryError::is_retryable`]) and writes
    /// that lost to concurrent writers. False for final answers: a bad request, a config or
    /// cron that is wrong, a scheduler that has shut down.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Registry(e) | Error::Registration { source: e, .. } => e.is_retryable(),
            Error::Contended { .. } => true,
            _ => false,
        }
    }

    /// True when the error says the request itself was wrong (an unknown job, server, instance
    /// or item, an invalid config): repeating it unchanged cannot succeed. False for failures of
    /// the registry, which may pass on a retry.
    pub fn is_bad_request(&self) -> bool {
        match self {
            // A name that cannot be a registry path (`a/b` as an IP) is the request's fault.
            Error::Registry(e) | Error::Registration { source: e, .. } => {
                matches!(e, RegistryError::InvalidPath { .. })
            }
            Error::Contended { .. }
            | Error::ShutDown
            | Error::ShutdownInterrupted
            | Error::ShutdownDeadline { .. }
            | Error::Signals { .. } => false,
            _ => true,
        }
    }
}

fn in_job(job: &Option<String>) -> String {
    job.as_ref().map(|j| format!(" in job {j}")).unwrap_or_default()
}
