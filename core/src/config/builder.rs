//! [`JobConfigBuilder`]: how an application makes a [`JobConfig`]. Every value is typed (an
//! unsigned item count, enums for the strategy and the error handler, a parsed time zone,
//! durations), the schedule is parsed when the config is built, and a bad value is refused there
//! with the name of its field, not later when the job is added.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use super::{ConfigError, ErrorHandlerType, JobConfig, KnownTypes, ShardingStrategyType};
use crate::cron::{CronSchedule, JobTimeZone};

/// Builds a [`JobConfig`]; start with [`JobConfig::builder`].
///
/// ```
/// use std::time::Duration;
/// use shardcron_core::config::{ErrorHandlerType, JobConfig, ShardingStrategyType};
/// use shardcron_core::cron::JobTimeZone;
///
/// let config = JobConfig::builder("orders")
///     .cron("0 0/15 9-17 ? * MON-FRI")
///     .time_zone(JobTimeZone::parse("Asia/Shanghai")?)
///     .sharding_total_count(3)
///     .item_parameter(0, "Beijing")
///     .item_parameter(1, "Shanghai")
///     .item_parameter(2, "Guangzhou")
///     .sharding_strategy(ShardingStrategyType::RoundRobin)
///     .error_handler(ErrorHandlerType::Throw)
///     .failover(true)
///     .reconcile_interval(Some(Duration::from_secs(5 * 60)))
///     .build()?;
/// assert_eq!(config.sharding_total_count(), 3);
/// assert_eq!(config.item_parameters()?[&1], "Shanghai");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A mistake is refused by [`build`](Self::build), naming the field:
///
/// ```
/// use shardcron_core::config::JobConfig;
/// let error = JobConfig::builder("orders").cron("*/5 * * * *").build().unwrap_err();
/// assert_eq!(error.field(), Some("cron"));
/// ```
///
/// and what the types rule out does not compile: a negative item count, say.
///
/// ```compile_fail
/// use shardcron_core::config::JobConfig;
/// let config = JobConfig::builder("orders").cron("0/5 * * * * ?").sharding_total_count(-3);
/// ```
#[must_use = "a builder does nothing until `build` is called"]
#[derive(Clone)]
pub struct JobConfigBuilder {
    config: JobConfig,
    schedule: Schedule,
    time_zone: Option<JobTimeZone>,
    item_parameters: BTreeMap<u32, String>,
    sharding_total_count: u32,
    durations: Vec<DurationField>,
}

/// Where the builder's schedule comes from.
#[derive(Clone)]
enum Schedule {
    /// Nothing said: `build` refuses.
    Unset,
    /// The config's own cron, unchanged ([`JobConfig::to_builder`]).
    Keep,
    /// An expression, parsed at `build` in the builder's time zone.
    Expression(String),
    /// A parsed schedule: its expression and its zone.
    Parsed(CronSchedule),
    /// No schedule: the job runs only when triggered.
    OneOff,
}

/// A duration set through the builder, checked at `build` against what its YAML field holds.
#[derive(Clone, Copy)]
enum DurationField {
    MaxTimeDiff(Duration),
    ReconcileInterval(Duration),
}

impl fmt::Debug for JobConfigBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobConfigBuilder").field("job_name", &self.config.job_name).finish()
    }
}

impl JobConfig {
    /// A builder for a job named `job_name`: one item, no schedule yet (give one with
    /// [`cron`](JobConfigBuilder::cron) or [`schedule`](JobConfigBuilder::schedule), or say
    /// [`one_off`](JobConfigBuilder::one_off)), ElasticJob's defaults everywhere else.
    pub fn builder(job_name: impl Into<String>) -> JobConfigBuilder {
        JobConfigBuilder {
            config: JobConfig::new(job_name, 1),
            schedule: Schedule::Unset,
            time_zone: None,
            item_parameters: BTreeMap::new(),
            sharding_total_count: 1,
            durations: Vec::new(),
        }
    }

    /// A builder that starts from this config (its schedule, zone and every other field), to
    /// change some fields of it; fields the builder does not set are kept as they are.
    pub fn to_builder(&self) -> JobConfigBuilder {
        JobConfigBuilder {
            config: self.clone(),
            schedule: Schedule::Keep,
            time_zone: None,
            item_parameters: BTreeMap::new(),
            sharding_total_count: self.sharding_total_count(),
            durations: Vec::new(),
        }
    }
}

impl JobConfigBuilder {
    /// The job's Quartz cron expression (six or seven fields, seconds first), parsed by
    /// [`build`](Self::build) in the [`time_zone`](Self::time_zone).
    pub fn cron(mut self, expression: impl Into<String>) -> Self {
        self.schedule = Schedule::Expression(expression.into());
        self
    }

    /// A parsed schedule: its expression and its time zone.
    pub fn schedule(mut self, schedule: CronSchedule) -> Self {
        self.schedule = Schedule::Parsed(schedule);
        self
    }

    /// No schedule: the job runs only when triggered
    /// ([`Scheduler::trigger`](crate::runtime::Scheduler::trigger)).
    pub fn one_off(mut self) -> Self {
        self.schedule = Schedule::OneOff;
        self
    }

    /// The zone the cron is evaluated in (default: UTC).
    pub fn time_zone(mut self, zone: JobTimeZone) -> Self {
        self.time_zone = Some(zone);
        self
    }

    /// How many items each fire is cut into, numbered from 0 (default 1; at least 1, at most
    /// [`MAX_SHARDING_TOTAL_COUNT`](super::MAX_SHARDING_TOTAL_COUNT)).
    pub fn sharding_total_count(mut self, count: u32) -> Self {
        self.sharding_total_count = count;
        self
    }

    /// The parameter item `item` gets ([`ShardingContext::item_parameter`]). Neither `,` nor
    /// `=` may appear in `value`: ElasticJob's form is `0=A,1=B`.
    ///
    /// [`ShardingContext::item_parameter`]: crate::job::ShardingContext::item_parameter
    pub fn item_parameter(mut self, item: u32, value: impl Into<String>) -> Self {
        self.item_parameters.insert(item, value.into());
        self
    }

    /// Every item's parameter in ElasticJob's text form, `0=A,1=B`; replaces what
    /// [`item_parameter`](Self::item_parameter) set.
    pub fn sharding_item_parameters(mut self, text: impl Into<String>) -> Self {
        self.item_parameters.clear();
        self.config.sharding_item_parameters = Some(text.into());
        self
    }

    /// The parameter every item gets ([`ShardingContext::job_parameter`]).
    ///
    /// [`ShardingContext::job_parameter`]: crate::job::ShardingContext::job_parameter
    pub fn job_parameter(mut self, parameter: impl Into<String>) -> Self {
        self.config.job_parameter = Some(parameter.into());
        self
    }

    /// Track running items in the registry (default `true`; failover and misfire need it).
    pub fn monitor_execution(mut self, on: bool) -> Self {
        self.config.monitor_execution = on;
        self
    }

    /// Re-run the items of a crashed instance elsewhere (default `false`).
    pub fn failover(mut self, on: bool) -> Self {
        self.config.failover = on;
        self
    }

    /// Run once more when a fire came while the previous one still ran (default `true`).
    pub fn misfire(mut self, on: bool) -> Self {
        self.config.misfire = on;
        self
    }

    /// The largest clock difference to the registry a fire accepts, in whole seconds; `None`
    /// (the default) does not check.
    pub fn max_time_diff(mut self, limit: Option<Duration>) -> Self {
        match limit {
            Some(limit) => self.durations.push(DurationField::MaxTimeDiff(limit)),
            None => self.config.max_time_diff_seconds = -1,
        }
        self
    }

    /// How often the leader repairs the sharding, in whole minutes (default 10 minutes);
    /// `None` never.
    pub fn reconcile_interval(mut self, interval: Option<Duration>) -> Self {
        match interval {
            Some(interval) => self.durations.push(DurationField::ReconcileInterval(interval)),
            None => self.config.reconcile_interval_minutes = 0,
        }
        self
    }

    /// The sharding strategy (default [`ShardingStrategyType::AverageAllocation`]). A custom
    /// one must be registered with the scheduler that runs the job.
    pub fn sharding_strategy(mut self, strategy: ShardingStrategyType) -> Self {
        self.config.job_sharding_strategy_type = Some(strategy.as_str().to_owned());
        self
    }

    /// What happens when an item fails (default [`ErrorHandlerType::Log`]). A custom handler
    /// must be registered with the scheduler that runs the job.
    pub fn error_handler(mut self, handler: ErrorHandlerType) -> Self {
        self.config.job_error_handler_type = Some(handler.as_str().to_owned());
        self
    }

    /// Adds a listener type to attach to the job (ElasticJob's `jobListenerTypes`).
    pub fn listener_type(mut self, listener: impl Into<String>) -> Self {
        self.config.job_listener_types.push(listener.into());
        self
    }

    /// Free text for consoles.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.config.description = Some(description.into());
        self
    }

    /// A job-type property (`script.command.line`, `streaming.process`, `http.uri`...).
    pub fn prop(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.config.props.insert(key.into(), value.into());
        self
    }

    /// Start the job disabled (default `false`).
    pub fn disabled(mut self, disabled: bool) -> Self {
        self.config.disabled = disabled;
        self
    }

    /// Replace the registry's config with this one when the job is added (default `false`:
    /// the registry's config wins when there is one).
    pub fn overwrite(mut self, overwrite: bool) -> Self {
        self.config.overwrite = overwrite;
        self
    }

    /// A free-form label.
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.config.label = Some(label.into());
        self
    }

    /// Keep the assignment when instances come and go (default `false`).
    pub fn static_sharding(mut self, on: bool) -> Self {
        self.config.static_sharding = on;
        self
    }

    /// The config, checked: the job name, the item count and parameters, the schedule in its
    /// zone, the durations. Fails with the first field in error ([`ConfigError::field`]).
    ///
    /// Custom strategy and error handler names are checked when the job is added, against what
    /// the scheduler has registered.
    pub fn build(self) -> Result<JobConfig, ConfigError> {
        let mut config = self.config;
        config.sharding_total_count = i32::try_from(self.sharding_total_count).unwrap_or(i32::MAX);
        if !self.item_parameters.is_empty() {
            let text = self
                .item_parameters
                .iter()
                .map(|(item, value)| format!("{item}={value}"))
                .collect::<Vec<_>>()
                .join(",");
            config.sharding_item_parameters = Some(text);
        }
        for field in self.durations {
            match field {
                DurationField::MaxTimeDiff(limit) => {
                    config.max_time_diff_seconds =
                        whole_units(limit, 1, "maxTimeDiffSeconds", "seconds")?;
                }
                DurationField::ReconcileInterval(interval) => {
                    config.reconcile_interval_minutes =
                        whole_units(interval, 60, "reconcileIntervalMinutes", "minutes")?;
                }
            }
        }
        if let Some(zone) = &self.time_zone {
            config.time_zone = Some(zone.id().to_owned());
        }
        match self.schedule {
            Schedule::Unset => return Err(ConfigError::NoSchedule),
            Schedule::Keep => {}
            Schedule::Expression(expression) => config.cron = Some(expression),
            Schedule::OneOff => config.cron = Some(String::new()),
            Schedule::Parsed(schedule) => {
                let zone = schedule.time_zone().id().to_owned();
                if self.time_zone.as_ref().is_some_and(|given| given.id() != zone) {
                    return Err(ConfigError::TimeZone {
                        zone: zone.clone(),
                        reason: format!(
                            "the schedule is in {zone} but the builder was given time zone {}; \
                             give the zone once",
                            config.time_zone.as_deref().unwrap_or_default()
                        ),
                    });
                }
                config.cron = Some(schedule.expression().to_owned());
                config.time_zone = Some(zone);
            }
        }
        // Custom names are the scheduler's to check; everything else is checked here.
        let mut known = KnownTypes::default();
        if let Some(strategy) = &config.job_sharding_strategy_type {
            known = known.with_sharding_strategy(strategy.clone());
        }
        if let Some(handler) = &config.job_error_handler_type {
            known = known.with_error_handler(handler.clone());
        }
        config.validate_with(&known)?;
        Ok(config)
    }
}

/// `duration` as a whole number of `unit_secs`-second units that fits the YAML field, or the
/// error naming `field`.
fn whole_units(
    duration: Duration,
    unit_secs: u64,
    field: &'static str,
    unit: &'static str,
) -> Result<i32, ConfigError> {
    let secs = duration.as_secs();
    let whole = duration.subsec_nanos() == 0 && secs.is_multiple_of(unit_secs);
    match i32::try_from(secs / unit_secs) {
        Ok(count) if whole => Ok(count),
        _ => Err(ConfigError::Duration {
            field,
            reason: format!(
                "{duration:?} is not a whole number of {unit} up to {} {unit}",
                i32::MAX
            ),
        }),
    }
}
