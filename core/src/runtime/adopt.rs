//! Jobs added to the registry from outside (a console, the CLI) that this scheduler can run:
//! when a job's `config` node appears, the scheduler asks its [`JobHandlers`] for code for it
//! and, given some, schedules the job with the stored config, as if the application had added
//! it. Opt-in: only a scheduler built with handlers watches for new jobs (one more watch for the
//! process).

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use futures::StreamExt;

use super::Scheduler;
use crate::config::{store, JobConfig};
use crate::error::Error;
use crate::job::Job;
use crate::layout::{JobNode, JobPaths};
use crate::registry::WatchEvent;

/// What a resolver answers for a job found in the registry.
pub type Resolution = Result<Option<Job>, String>;

type Resolver = Arc<dyn Fn(&JobConfig) -> Resolution + Send + Sync>;

/// The code this scheduler has for jobs added to the registry by others: by job name, and by a
/// resolver that looks at the config (e.g. a script job's command line).
///
/// ```
/// use shardcron_core::job::Job;
/// use shardcron_core::runtime::JobHandlers;
/// let handlers = JobHandlers::new()
///     .named("reports", Job::from_fn(|_| async { Ok(()) }))
///     .resolver(|config| match config.props().get("script.command.line") {
///         Some(line) if line.starts_with("/opt/jobs/") => Ok(Some(Job::script(line.clone(), vec![]))),
///         Some(line) => Err(format!("{line} is not an allowed command")),
///         None => Ok(None),
///     });
/// # let _ = handlers;
/// ```
#[derive(Clone, Default)]
pub struct JobHandlers {
    named: std::collections::BTreeMap<String, Job>,
    resolvers: Vec<Resolver>,
}

impl fmt::Debug for JobHandlers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobHandlers")
            .field("named", &self.named.keys().collect::<Vec<_>>())
            .field("resolvers", &self.resolvers.len())
            .finish()
    }
}

impl JobHandlers {
    /// No handlers: the scheduler adopts no job from the registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `job` for the job named `name` when it appears.
    pub fn named(mut self, name: impl Into<String>, job: Job) -> Self {
        self.named.insert(name.into(), job);
        self
    }

    /// Asks `resolver` for jobs no name matches: `Ok(Some(job))` to run it, `Ok(None)` when it
    /// is not this resolver's, `Err(reason)` to refuse it (logged; the next resolver is not
    /// asked).
    pub fn resolver(
        mut self,
        resolver: impl Fn(&JobConfig) -> Resolution + Send + Sync + 'static,
    ) -> Self {
        self.resolvers.push(Arc::new(resolver));
        self
    }

    /// The code for `config`'s job, if this scheduler has some.
    pub fn resolve(&self, config: &JobConfig) -> Resolution {
        if let Some(job) = self.named.get(&config.job_name) {
            return Ok(Some(job.clone()));
        }
        for resolver in &self.resolvers {
            if let Some(job) = resolver(config)? {
                return Ok(Some(job));
            }
        }
        Ok(None)
    }

    /// True when no name and no resolver is registered.
    pub fn is_empty(&self) -> bool {
        self.named.is_empty() && self.resolvers.is_empty()
    }
}

/// Watches for new jobs until the scheduler shuts down.
pub(super) async fn run(scheduler: Scheduler, handlers: JobHandlers) {
    let registry = scheduler.shared.registry.clone();
    let Ok(mut watch) = registry.watch("/").await else {
        tracing::warn!("cannot watch the registry for added jobs: none will be picked up");
        return;
    };
    // A job is considered once per appearance of its config: one an operator shut down here is
    // not started again, unless its config is deleted and added anew.
    let mut seen: BTreeSet<String> = BTreeSet::new();
    // Jobs whose config was deleted: the scheduler may still hold their stopped runner.
    let mut deleted: BTreeSet<String> = BTreeSet::new();
    while let Some(event) = watch.next().await {
        let found: Vec<String> = match &event {
            WatchEvent::Resync { nodes } => nodes.keys().filter_map(|p| config_of(p)).collect(),
            WatchEvent::Created { path, .. } => config_of(path).into_iter().collect(),
            WatchEvent::Deleted { path } => {
                if let Some(job) = config_of(path) {
                    seen.remove(&job);
                    deleted.insert(job);
                }
                continue;
            }
            // This watch's scope never changes.
            WatchEvent::Changed { .. } | WatchEvent::Rescoped { .. } => continue,
        };
        for job in found {
            if !seen.insert(job.clone()) {
                continue;
            }
            if scheduler.jobs().contains(&job) {
                // Scheduled here already (by the application, or adopted before): only a job
                // deleted and added anew is started again, the old runner stopped first.
                if !deleted.remove(&job) || scheduler.remove_job(&job).await.is_err() {
                    continue;
                }
            }
            if let Err(Error::ShutDown) = adopt(&scheduler, &handlers, &job).await {
                return;
            }
        }
    }
}

/// The job whose `config` node `path` is.
fn config_of(path: &str) -> Option<String> {
    match JobNode::parse(path)? {
        (job, JobNode::Config) => Some(job.to_owned()),
        _ => None,
    }
}

async fn adopt(scheduler: &Scheduler, handlers: &JobHandlers, job: &str) -> crate::Result<()> {
    let shared = &scheduler.shared;
    let Some(node) = shared.registry.get(&JobPaths::new(job).config()).await? else {
        return Ok(());
    };
    let config = match store::parse_stored(job, &node.data, &shared.known) {
        Ok(config) => config,
        Err(reason) => {
            tracing::warn!(job, %reason, "added job not picked up: its config is unusable");
            return Ok(());
        }
    };
    match handlers.resolve(&config) {
        Ok(Some(code)) => match scheduler.add_job(config, code).await {
            Ok(()) => {
                tracing::info!(job, "picked up a job added to the registry");
                Ok(())
            }
            // The application added it meanwhile: nothing to do.
            Err(Error::JobExists { .. }) => Ok(()),
            Err(e @ Error::ShutDown) => Err(e),
            Err(e) => {
                tracing::warn!(job, error = %e, "added job not picked up");
                Ok(())
            }
        },
        Ok(None) => Ok(()),
        Err(reason) => {
            tracing::warn!(job, %reason, "added job refused");
            Ok(())
        }
    }
}
