//! The jobs a simulation runs and the workload verbs that change them while it runs: config
//! changes through the operations API (as an operator's console would make them), manual
//! triggers, disabling servers and items, adding and removing jobs.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use shardcron_core::__private::JobConfigFields;
use shardcron_core::api::JobOperations;
use shardcron_core::config::JobConfig;
use shardcron_core::job::Job;

use crate::code::{sleeping_job, JobCode, JobEnv};

/// One simulated job: its config (cron and time zone, count, item parameters, strategy,
/// failover, misfire, monitorExecution, max time diff, disabled) and its code. By default each
/// item takes `item_ms` of virtual time (stopping early when the runtime cancels it, as a
/// well-behaved job does); [`code`](Self::code) runs a duration model or the user's own job.
///
/// A spec made from a user's [`JobConfig`] (`JobSpec::from(&config)`) keeps every field of it,
/// also those without a field here (reconcile interval, static sharding, error handler, props);
/// the fields here override it.
///
/// ```
/// use shardcron_core::config::JobConfig;
/// use shardcron_sim::JobSpec;
/// let config = JobConfig::from_yaml(
///     "jobName: settle\ncron: 0/10 * * * * ?\nshardingTotalCount: 3\n\
///      shardingItemParameters: 0=Beijing,1=Shanghai,2=Guangzhou\nfailover: true\n",
/// )?;
/// let spec = JobSpec::from(&config).item_ms(2_000);
/// assert_eq!(spec.item_parameters.as_deref(), Some("0=Beijing,1=Shanghai,2=Guangzhou"));
/// assert_eq!(spec.config().sharding_item_parameters(), config.sharding_item_parameters());
/// # Ok::<(), shardcron_core::config::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct JobSpec {
    pub name: String,
    pub cron: String,
    pub count: u32,
    /// How long each item takes with the default code, and the longest an item takes with a
    /// user's code (the liveness check waits this long for a last run).
    pub item_ms: u64,
    pub failover: bool,
    pub misfire: bool,
    /// `maxTimeDiffSeconds`; -1 turns the check off.
    pub max_time_diff_seconds: i32,
    /// `timeZone`: the zone the cron is read in (`None`: the process's).
    pub time_zone: Option<String>,
    /// `shardingItemParameters` (`0=A,1=B`).
    pub item_parameters: Option<String>,
    /// `jobParameter`.
    pub job_parameter: Option<String>,
    /// `jobShardingStrategyType` (`None`: `AVG_ALLOCATION`). A custom strategy must be
    /// registered in the builder's `settings.strategies`.
    pub strategy: Option<String>,
    /// `monitorExecution` (default true).
    pub monitor_execution: bool,
    /// `disabled`: the job starts disabled.
    pub disabled: bool,
    /// What the items run (`None`: sleep `item_ms`).
    pub code: Option<JobCode>,
    /// The user's config this spec was made from (every other field comes from it).
    pub base: Option<Arc<JobConfig>>,
}

/// Specs compare their configs and the identity of their code.
impl Eq for JobSpec {}

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
            time_zone: None,
            item_parameters: None,
            job_parameter: None,
            strategy: None,
            monitor_execution: true,
            disabled: false,
            code: None,
            base: None,
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
    pub fn cron(mut self, cron: impl Into<String>) -> Self {
        self.cron = cron.into();
        self
    }
    pub fn count(mut self, count: u32) -> Self {
        self.count = count;
        self
    }
    /// The same job under another name.
    pub fn renamed(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
    pub fn time_zone(mut self, zone: impl Into<String>) -> Self {
        self.time_zone = Some(zone.into());
        self
    }
    pub fn item_parameters(mut self, parameters: impl Into<String>) -> Self {
        self.item_parameters = Some(parameters.into());
        self
    }
    pub fn job_parameter(mut self, parameter: impl Into<String>) -> Self {
        self.job_parameter = Some(parameter.into());
        self
    }
    pub fn strategy(mut self, type_name: impl Into<String>) -> Self {
        self.strategy = Some(type_name.into());
        self
    }
    pub fn monitor_execution(mut self, on: bool) -> Self {
        self.monitor_execution = on;
        self
    }
    pub fn disabled(mut self, disabled: bool) -> Self {
        self.disabled = disabled;
        self
    }
    /// Runs `code` instead of sleeping `item_ms`: a duration model
    /// ([`JobCode::durations`]) or the user's job ([`JobCode::new`]).
    pub fn code(mut self, code: JobCode) -> Self {
        self.code = Some(code);
        self
    }
    /// Runs `job` on every instance (the same `Job`, cloned; for code that needs a fresh
    /// value per run or per instance, use [`JobCode::new`]).
    pub fn job_code(self, job: Job) -> Self {
        self.code(JobCode::new(move |_| job.clone()))
    }

    /// The job's config as the instances publish it.
    pub fn config(&self) -> JobConfig {
        let count = i32::try_from(self.count).unwrap_or(i32::MAX);
        let mut c = match &self.base {
            Some(base) => {
                let mut c = (**base).clone();
                c.set_job_name(self.name.clone());
                c.set_sharding_total_count(count);
                c
            }
            None => JobConfig::unchecked(&self.name, count),
        };
        c.set_cron(Some(self.cron.clone()));
        c.set_failover(self.failover);
        c.set_misfire(self.misfire);
        c.set_max_time_diff_seconds(self.max_time_diff_seconds);
        c.set_monitor_execution(self.monitor_execution);
        c.set_disabled(self.disabled);
        // Only what was set: `JobConfig::new`'s defaults stay as they are.
        let set = |field: &mut Option<String>, value: &Option<String>| {
            if value.is_some() {
                field.clone_from(value);
            }
        };
        set(c.time_zone_mut(), &self.time_zone);
        set(c.sharding_item_parameters_mut(), &self.item_parameters);
        set(c.job_parameter_mut(), &self.job_parameter);
        set(c.job_sharding_strategy_type_mut(), &self.strategy);
        c
    }

    /// The job's code as instance `env.instance` of a run runs it.
    pub fn job(&self, env: &JobEnv) -> Job {
        match &self.code {
            Some(code) => code.job(env),
            None => sleeping_job(Duration::from_millis(self.item_ms)),
        }
    }
}

/// A spec of the user's config, with every field of it; items take 500 ms unless
/// [`item_ms`](JobSpec::item_ms) or [`code`](JobSpec::code) says otherwise.
impl From<&JobConfig> for JobSpec {
    fn from(config: &JobConfig) -> Self {
        let count = config.sharding_total_count();
        JobSpec {
            cron: config.cron().unwrap_or_default().to_owned(),
            failover: config.failover(),
            misfire: config.misfire(),
            max_time_diff_seconds: config.max_time_diff_seconds(),
            time_zone: config.time_zone_id().map(str::to_owned),
            item_parameters: config.sharding_item_parameters().map(str::to_owned),
            job_parameter: config.job_parameter_as_written().map(str::to_owned),
            strategy: config.job_sharding_strategy_type().map(str::to_owned),
            monitor_execution: config.monitor_execution(),
            disabled: config.disabled(),
            base: Some(Arc::new(config.clone())),
            ..JobSpec::new(config.job_name(), String::new(), count)
        }
    }
}

/// Prints the spec as the Rust expression that builds it (with a placeholder for the user's
/// config and code, which have no Rust form).
impl fmt::Display for JobSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.base {
            Some(base) => {
                write!(f, "JobSpec::from(&configs[{:?}])", base.job_name())?;
                if self.name != base.job_name() {
                    write!(f, ".renamed({:?})", self.name)?;
                }
                write!(f, ".item_ms({})", self.item_ms)?;
            }
            None => write!(
                f,
                "JobSpec::new({:?}, {:?}, {}).item_ms({})",
                self.name, self.cron, self.count, self.item_ms
            )?,
        }
        let base = self
            .base
            .as_deref()
            .map(JobSpec::from)
            .unwrap_or_else(|| JobSpec::new(self.name.clone(), self.cron.clone(), self.count));
        if self.cron != base.cron {
            write!(f, ".cron({:?})", self.cron)?;
        }
        if self.count != base.count {
            write!(f, ".count({})", self.count)?;
        }
        if self.failover != base.failover {
            write!(f, ".failover({})", self.failover)?;
        }
        if self.misfire != base.misfire {
            write!(f, ".misfire({})", self.misfire)?;
        }
        if self.max_time_diff_seconds != base.max_time_diff_seconds {
            write!(f, ".max_time_diff_seconds({})", self.max_time_diff_seconds)?;
        }
        let strings = [
            ("time_zone", &self.time_zone, &base.time_zone),
            ("item_parameters", &self.item_parameters, &base.item_parameters),
            ("job_parameter", &self.job_parameter, &base.job_parameter),
            ("strategy", &self.strategy, &base.strategy),
        ];
        for (method, value, default) in strings {
            if let (Some(v), true) = (value, value != default) {
                write!(f, ".{method}({v:?})")?;
            }
        }
        if self.monitor_execution != base.monitor_execution {
            write!(f, ".monitor_execution({})", self.monitor_execution)?;
        }
        if self.disabled != base.disabled {
            write!(f, ".disabled({})", self.disabled)?;
        }
        if let Some(code) = &self.code {
            f.write_str(code.describe())?;
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
            Workload::SetCron { cron, .. } => config.set_cron(Some(cron.clone())),
            Workload::SetCount { count, .. } => {
                config.set_sharding_total_count(i32::try_from(*count).unwrap_or(i32::MAX))
            }
            Workload::SetFailover { on, .. } => config.set_failover(*on),
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
