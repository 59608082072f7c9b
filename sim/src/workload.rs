//! The jobs a simulation runs and the workload verbs that change them while it runs: config
//! changes through the operations API (as an operator's console would make them), manual
//! triggers, disabling servers and items, adding and removing jobs.

use std::fmt;
use std::time::Duration;

use shardcron_core::api::JobOperations;
use shardcron_core::config::JobConfig;
use shardcron_core::job::Job;

/// One simulated job: a cron, a sharding count, and items that each take `item_ms` of virtual
/// time (stopping early when the runtime cancels them, as a well-behaved job does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSpec {
    pub name: String,
    pub cron: String,
    pub count: u32,
    pub item_ms: u64,
    pub failover: bool,
    pub misfire: bool,
    /// `maxTimeDiffSeconds`; -1 turns the check off.
    pub max_time_diff_seconds: i32,
}

impl JobSpec {
    /// A job with failover off, misfire on, no time-diff check, items of 500 ms.
    pub fn new(name: impl Into<String>, cron: impl Into<String>, count: u32) -> Self {
        JobSpec {
            name: name.into(),
            cron: cron.into(),
            count,
            item_ms: 500,
            failover: false,
            misfire: true,
            max_time_diff_seconds: -1,
        }
    }
    pub fn item_ms(mut self, ms: u64) -> Self {
        self.item_ms = ms;
        self
    }
    pub fn failover(mut self, on: bool) -> Self {
        self.failover = on;
        self
    }
    pub fn misfire(mut self, on: bool) -> Self {
        self.misfire = on;
        self
    }
    pub fn max_time_diff_seconds(mut self, secs: i32) -> Self {
        self.max_time_diff_seconds = secs;
        self
    }

    /// The job's config as the instances publish it.
    pub fn config(&self) -> JobConfig {
        let mut c = JobConfig::new(&self.name, i32::try_from(self.count).unwrap_or(i32::MAX));
        c.cron = Some(self.cron.clone());
        c.failover = self.failover;
        c.misfire = self.misfire;
        c.max_time_diff_seconds = self.max_time_diff_seconds;
        c
    }

    /// The job's code: each item sleeps `item_ms` of virtual time or until cancelled.
    pub fn job(&self) -> Job {
        let item = Duration::from_millis(self.item_ms);
        Job::from_fn(move |ctx| async move {
            tokio::select! {
                biased;
                () = ctx.cancellation.cancelled() => {}
                () = tokio::time::sleep(item) => {}
            }
            Ok(())
        })
    }
}

/// Prints the spec as the Rust expression that builds it.
impl fmt::Display for JobSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "JobSpec::new({:?}, {:?}, {}).item_ms({})",
            self.name, self.cron, self.count, self.item_ms
        )?;
        if self.failover {
            f.write_str(".failover(true)")?;
        }
        if !self.misfire {
            f.write_str(".misfire(false)")?;
        }
        if self.max_time_diff_seconds >= 0 {
            write!(f, ".max_time_diff_seconds({})", self.max_time_diff_seconds)?;
        }
        Ok(())
    }
}

/// A change an operator makes while the cluster runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Workload {
    SetCron {
        job: String,
        cron: String,
    },
    SetCount {
        job: String,
        count: u32,
    },
    SetFailover {
        job: String,
        on: bool,
    },
    DisableServer {
        job: String,
        instance: usize,
    },
    EnableServer {
        job: String,
        instance: usize,
    },
    DisableItem {
        job: String,
        item: u32,
    },
    EnableItem {
        job: String,
        item: u32,
    },
    /// Runs the job once now on every live instance.
    Trigger {
        job: String,
    },
    /// Adds the job on every running instance (and on every instance started later).
    AddJob(JobSpec),
    /// Removes the job from every running instance (and from instances started later).
    RemoveJob {
        job: String,
    },
}

impl Workload {
    /// The job the change is about.
    pub fn job(&self) -> &str {
        match self {
            Workload::SetCron { job, .. }
            | Workload::SetCount { job, .. }
            | Workload::SetFailover { job, .. }
            | Workload::DisableServer { job, .. }
            | Workload::EnableServer { job, .. }
            | Workload::DisableItem { job, .. }
            | Workload::EnableItem { job, .. }
            | Workload::Trigger { job }
            | Workload::RemoveJob { job } => job,
            Workload::AddJob(spec) => &spec.name,
        }
    }

    /// Changes `config` as this workload says; false if it is not a config change.
    fn change(&self, config: &mut JobConfig) -> bool {
        match self {
            Workload::SetCron { cron, .. } => config.cron = Some(cron.clone()),
            Workload::SetCount { count, .. } => {
                config.sharding_total_count = i32::try_from(*count).unwrap_or(i32::MAX)
            }
            Workload::SetFailover { on, .. } => config.failover = *on,
            _ => return false,
        }
        true
    }

    /// Applies a registry-side change through the operations API. Returns the job's config
    /// after the change for config changes. `AddJob`/`RemoveJob` are the simulator's to apply.
    pub(crate) async fn apply(&self, ops: &JobOperations<'_>) -> Result<Option<JobConfig>, String> {
        let e = |e: shardcron_core::Error| e.to_string();
        match self {
            Workload::SetCron { job, .. }
            | Workload::SetCount { job, .. }
            | Workload::SetFailover { job, .. } => {
                let mut config = ops.config(job).await.map_err(e)?;
                self.change(&mut config);
                ops.update_config(&config).await.map_err(e)?;
                Ok(Some(config))
            }
            Workload::DisableServer { job, instance }
            | Workload::EnableServer { job, instance } => {
                let disable = matches!(self, Workload::DisableServer { .. });
                ops.set_server_disabled(job, &ip_of(*instance), disable).await.map_err(e)?;
                Ok(None)
            }
            Workload::DisableItem { job, item } | Workload::EnableItem { job, item } => {
                let disable = matches!(self, Workload::DisableItem { .. });
                ops.set_item_disabled(job, *item, disable).await.map_err(e)?;
                Ok(None)
            }
            Workload::Trigger { job } => {
                ops.trigger(job).await.map_err(e)?;
                Ok(None)
            }
            Workload::AddJob(_) | Workload::RemoveJob { .. } => Ok(None),
        }
    }
}

/// The server IP of instance `i` (1-based).
pub fn ip_of(i: usize) -> String {
    format!("10.0.0.{i}")
}

/// Prints the change as the Rust expression that builds it.
impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Workload::SetCron { job, cron } => {
                write!(f, "Workload::SetCron {{ job: {job:?}.into(), cron: {cron:?}.into() }}")
            }
            Workload::SetCount { job, count } => {
                write!(f, "Workload::SetCount {{ job: {job:?}.into(), count: {count} }}")
            }
            Workload::SetFailover { job, on } => {
                write!(f, "Workload::SetFailover {{ job: {job:?}.into(), on: {on} }}")
            }
            Workload::DisableServer { job, instance } => {
                write!(f, "Workload::DisableServer {{ job: {job:?}.into(), instance: {instance} }}")
            }
            Workload::EnableServer { job, instance } => {
                write!(f, "Workload::EnableServer {{ job: {job:?}.into(), instance: {instance} }}")
            }
            Workload::DisableItem { job, item } => {
                write!(f, "Workload::DisableItem {{ job: {job:?}.into(), item: {item} }}")
            }
            Workload::EnableItem { job, item } => {
                write!(f, "Workload::EnableItem {{ job: {job:?}.into(), item: {item} }}")
            }
            Workload::Trigger { job } => write!(f, "Workload::Trigger {{ job: {job:?}.into() }}"),
            Workload::AddJob(spec) => write!(f, "Workload::AddJob({spec})"),
            Workload::RemoveJob { job } => {
                write!(f, "Workload::RemoveJob {{ job: {job:?}.into() }}")
            }
        }
    }
}
