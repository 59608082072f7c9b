//! [`JobConfig`]: one job's configuration, as ElasticJob stores it in `/{job}/config`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{parse_sharding_item_parameters, ConfigError, ErrorHandlerType, ShardingStrategyType};
use crate::sharding::DEFAULT_STRATEGY_TYPE;

/// The error handler used when a config names none.
pub const DEFAULT_ERROR_HANDLER_TYPE: &str = "LOG";

/// A job's configuration with ElasticJob-Lite 3.x's `JobConfigurationPOJO` field names.
///
/// The YAML form ([`from_yaml`](Self::from_yaml), [`to_yaml`](Self::to_yaml)) is the one
/// ElasticJob writes and reads, so a job can be inspected and edited with ElasticJob's tools.
/// Optional strings are `Option`s because ElasticJob distinguishes an absent field (omitted from
/// the YAML) from an empty one (`''`); both mean "not set" to the scheduler.
///
/// Fields not listed here (written by a newer ElasticJob or shardcron) are kept as they are and
/// written back, so rewriting a config never loses them.
///
/// An application builds one with [`JobConfig::builder`] (typed values, checked when built) and
/// reads it through its accessors; [`to_builder`](Self::to_builder) changes some fields of an
/// existing one. Configs read from the registry or a file come from [`from_yaml`](Self::from_yaml)
/// and may break the rules (ElasticJob's tools write them): [`validate`](Self::validate) says
/// which field does.
///
/// ```
/// use shardcron_core::config::JobConfig;
/// let config = JobConfig::builder("orders")
///     .cron("0/5 * * * * ?")
///     .sharding_total_count(3)
///     .sharding_item_parameters("0=Beijing,1=Shanghai,2=Guangzhou")
///     .build()?;
/// assert_eq!(JobConfig::from_yaml(&config.to_yaml()?)?, config);
/// # Ok::<(), shardcron_core::config::ConfigError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default = "JobConfig::absent_fields")]
#[non_exhaustive]
pub struct JobConfig {
    /// Unique within a namespace; a registry path segment (`/{namespace}/{jobName}`).
    pub(crate) job_name: String,
    /// Quartz cron expression. `None` or empty: a one-off job, run only when triggered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) cron: Option<String>,
    /// Zone the cron is evaluated in (`Asia/Shanghai`, `GMT+08:00`); `None`: the process's zone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) time_zone: Option<String>,
    /// Number of sharding items, `0..shardingTotalCount`. At least 1.
    pub(crate) sharding_total_count: i32,
    /// Per-item parameters, `0=A,1=B`; see [`parse_sharding_item_parameters`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) sharding_item_parameters: Option<String>,
    /// Parameter handed to every item.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) job_parameter: Option<String>,
    /// Track running items in the registry (needed for failover and misfire). Default `true`.
    pub(crate) monitor_execution: bool,
    /// Re-run the items of a crashed instance elsewhere. Default `false`.
    pub(crate) failover: bool,
    /// Run once more when a fire was skipped because items were still running. Default `true`.
    pub(crate) misfire: bool,
    /// Maximum clock difference to the registry; negative: no check. Default `-1`.
    pub(crate) max_time_diff_seconds: i32,
    /// How often the leader repairs the sharding; `< 1`: never (as in ElasticJob). Default `10`.
    pub(crate) reconcile_interval_minutes: i32,
    /// Sharding strategy type; `None` or empty: `AVG_ALLOCATION`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) job_sharding_strategy_type: Option<String>,
    /// ElasticJob's thread-pool type (`CPU`, `SINGLE_THREAD`). Kept for compatibility; shardcron
    /// runs every job on one shared runtime and ignores it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) job_executor_service_handler_type: Option<String>,
    /// What to do when an item fails: `LOG`, `THROW`, `IGNORE`; `None` or empty: `LOG`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) job_error_handler_type: Option<String>,
    /// Listener types to attach to the job.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) job_listener_types: Vec<String>,
    /// ElasticJob's extra configurations (e.g. tracing): Java objects whose tag names their class
    /// (`!!org.apache...YamlTracingConfiguration`). Kept verbatim, tags included.
    #[serde(skip)] // read and written by yaml.rs, which keeps the class tags
    pub(crate) job_extra_configurations: Vec<serde_norway::Value>,
    /// Free text for consoles.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) description: Option<String>,
    /// Job-type specific properties (e.g. `script.command.line`, `streaming.process`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) props: BTreeMap<String, String>,
    /// Start the job disabled. Default `false`.
    pub(crate) disabled: bool,
    /// Replace the registry's config with the local one at start-up. Default `false`.
    pub(crate) overwrite: bool,
    /// Free-form label (ElasticJob 3.0.2+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) label: Option<String>,
    /// Keep the assignment when instances come and go (ElasticJob 3.0.2+): once items are
    /// assigned, joins, departures, server changes and the reconcile do not reshard (a count
    /// or strategy change does). Default `false`.
    pub(crate) static_sharding: bool,
    /// Top-level fields this version does not know, written back unchanged.
    #[serde(skip)]
    pub(super) unknown_fields: BTreeMap<String, serde_norway::Value>,
}

impl JobConfig {
    /// A config as ElasticJob's `JobConfiguration.newBuilder(jobName, shardingTotalCount).build()`
    /// makes it: defaults everywhere, empty `shardingItemParameters`, `jobParameter` and
    /// `description`, no cron (a one-off job until `cron` is set).
    pub(crate) fn new(job_name: impl Into<String>, sharding_total_count: i32) -> Self {
        Self {
            job_name: job_name.into(),
            sharding_total_count,
            sharding_item_parameters: Some(String::new()),
            job_parameter: Some(String::new()),
            description: Some(String::new()),
            ..Self::absent_fields()
        }
    }

    /// What a YAML document that omits a field means. For `monitorExecution`, `misfire` and
    /// `reconcileIntervalMinutes` we use ElasticJob's documented defaults (`true`, `true`, `10`);
    /// ElasticJob's own POJO would read an absent field as `false`/`0`, but it always writes
    /// them, so the difference only shows in hand-written YAML, where the documented default is
    /// what the author expects.
    fn absent_fields() -> Self {
        Self {
            job_name: String::new(),
            cron: None,
            time_zone: None,
            sharding_total_count: 0,
            sharding_item_parameters: None,
            job_parameter: None,
            monitor_execution: true,
            failover: false,
            misfire: true,
            max_time_diff_seconds: -1,
            reconcile_interval_minutes: 10,
            job_sharding_strategy_type: None,
            job_executor_service_handler_type: None,
            job_error_handler_type: None,
            job_listener_types: Vec::new(),
            job_extra_configurations: Vec::new(),
            description: None,
            props: BTreeMap::new(),
            disabled: false,
            overwrite: false,
            label: None,
            static_sharding: false,
            unknown_fields: BTreeMap::new(),
        }
    }

    /// The cron expression, or `None` for a one-off job (`cron` absent or empty, as ElasticJob's
    /// `OneOffJobBootstrap` requires).
    pub fn cron_expression(&self) -> Option<&str> {
        self.cron.as_deref().filter(|cron| !cron.is_empty())
    }

    /// True when the job has no schedule and runs only when triggered.
    pub fn is_one_off(&self) -> bool {
        self.cron_expression().is_none()
    }

    /// The cron as written: `None` when the YAML has none, empty for a one-off job. See
    /// [`cron_expression`](Self::cron_expression) for the schedule alone.
    pub fn cron(&self) -> Option<&str> {
        self.cron.as_deref()
    }

    /// The job's name.
    pub fn job_name(&self) -> &str {
        &self.job_name
    }

    /// The zone id the cron is evaluated in (`Asia/Shanghai`, `GMT+08:00`), as written; `None`
    /// or empty: UTC.
    pub fn time_zone_id(&self) -> Option<&str> {
        self.time_zone.as_deref()
    }

    /// The number of items each fire is cut into. A negative count read from the registry
    /// (which [`validate`](Self::validate) refuses) reads as 0.
    pub fn sharding_total_count(&self) -> u32 {
        u32::try_from(self.sharding_total_count).unwrap_or(0)
    }

    /// The items' parameters in ElasticJob's text form (`0=A,1=B`); see
    /// [`item_parameters`](Self::item_parameters) for them parsed.
    pub fn sharding_item_parameters(&self) -> Option<&str> {
        self.sharding_item_parameters.as_deref()
    }

    /// `jobParameter` as written: `None` when absent (which means empty).
    pub fn job_parameter_as_written(&self) -> Option<&str> {
        self.job_parameter.as_deref()
    }

    /// The parameter every item gets; empty when unset.
    pub fn job_parameter(&self) -> &str {
        self.job_parameter.as_deref().unwrap_or("")
    }

    /// Whether running items are tracked in the registry.
    pub fn monitor_execution(&self) -> bool {
        self.monitor_execution
    }

    /// Whether the items of a crashed instance are re-run elsewhere.
    pub fn failover(&self) -> bool {
        self.failover
    }

    /// Whether a fire skipped because items still ran is run once more afterwards.
    pub fn misfire(&self) -> bool {
        self.misfire
    }

    /// `maxTimeDiffSeconds` as written (negative: no check); see [`max_time_diff`](Self::max_time_diff).
    pub fn max_time_diff_seconds(&self) -> i32 {
        self.max_time_diff_seconds
    }

    /// `reconcileIntervalMinutes` as written (below 1: never); see
    /// [`reconcile_interval`](Self::reconcile_interval).
    pub fn reconcile_interval_minutes(&self) -> i32 {
        self.reconcile_interval_minutes
    }

    /// The sharding strategy.
    pub fn sharding_strategy(&self) -> ShardingStrategyType {
        ShardingStrategyType::from_name(self.sharding_strategy_type())
    }

    /// What happens when an item fails.
    pub fn error_handler(&self) -> ErrorHandlerType {
        ErrorHandlerType::from_name(self.error_handler_type())
    }

    /// `jobShardingStrategyType` as written (`None` when absent); see
    /// [`sharding_strategy`](Self::sharding_strategy) for its meaning.
    pub fn job_sharding_strategy_type(&self) -> Option<&str> {
        self.job_sharding_strategy_type.as_deref()
    }

    /// `jobErrorHandlerType` as written (`None` when absent); see
    /// [`error_handler`](Self::error_handler) for its meaning.
    pub fn job_error_handler_type(&self) -> Option<&str> {
        self.job_error_handler_type.as_deref()
    }

    /// ElasticJob's thread-pool type, kept for compatibility (shardcron ignores it).
    pub fn job_executor_service_handler_type(&self) -> Option<&str> {
        self.job_executor_service_handler_type.as_deref()
    }

    /// The listener types attached to the job.
    pub fn job_listener_types(&self) -> &[String] {
        &self.job_listener_types
    }

    /// ElasticJob's extra configurations, verbatim with their class tags.
    pub fn job_extra_configurations(&self) -> &[serde_norway::Value] {
        &self.job_extra_configurations
    }

    /// Free text for consoles.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// Job-type specific properties (`script.command.line`, `http.uri`...).
    pub fn props(&self) -> &BTreeMap<String, String> {
        &self.props
    }

    /// Whether the job starts disabled.
    pub fn disabled(&self) -> bool {
        self.disabled
    }

    /// Whether this config replaces the registry's when the job is added.
    pub fn overwrite(&self) -> bool {
        self.overwrite
    }

    /// The free-form label.
    pub fn label(&self) -> Option<&str> {
        self.label.as_deref()
    }

    /// Whether the assignment is kept when instances come and go.
    pub fn static_sharding(&self) -> bool {
        self.static_sharding
    }

    /// The sharding strategy's YAML name: `AVG_ALLOCATION` when unset or empty.
    pub fn sharding_strategy_type(&self) -> &str {
        non_empty(&self.job_sharding_strategy_type).unwrap_or(DEFAULT_STRATEGY_TYPE)
    }

    /// The error handler's YAML name: `LOG` when unset or empty.
    pub fn error_handler_type(&self) -> &str {
        non_empty(&self.job_error_handler_type).unwrap_or(DEFAULT_ERROR_HANDLER_TYPE)
    }

    /// The parsed `shardingItemParameters` (item → parameter); empty when unset.
    pub fn item_parameters(&self) -> Result<BTreeMap<u32, String>, ConfigError> {
        let total = self.checked_total_count()?;
        parse_sharding_item_parameters(
            self.sharding_item_parameters.as_deref().unwrap_or(""),
            total,
        )
    }

    /// The reconcile period, or `None` when reconciling is off (`reconcileIntervalMinutes < 1`).
    ///
    /// ElasticJob multiplies the minutes into an `int` of milliseconds, which overflows above
    /// 35,791 minutes; we do not, so large values mean what they say.
    pub fn reconcile_interval(&self) -> Option<Duration> {
        u64::try_from(self.reconcile_interval_minutes)
            .ok()
            .filter(|minutes| *minutes > 0)
            .map(|minutes| Duration::from_secs(minutes * 60))
    }

    /// The tolerated clock difference to the registry, or `None` when unchecked (negative).
    pub fn max_time_diff(&self) -> Option<Duration> {
        u64::try_from(self.max_time_diff_seconds).ok().map(Duration::from_secs)
    }

    /// Names of top-level YAML fields this version does not know (kept and written back).
    pub fn unknown_fields(&self) -> impl Iterator<Item = &str> {
        self.unknown_fields.keys().map(String::as_str)
    }

    /// `shardingTotalCount` as an item count, if it is within the accepted range.
    pub fn checked_total_count(&self) -> Result<u32, ConfigError> {
        let count = self.sharding_total_count;
        match u32::try_from(count) {
            Ok(0) | Err(_) => Err(ConfigError::ShardingTotalCountTooSmall { count }),
            Ok(n) if n > super::MAX_SHARDING_TOTAL_COUNT => {
                Err(ConfigError::ShardingTotalCountTooLarge {
                    count,
                    max: super::MAX_SHARDING_TOTAL_COUNT,
                })
            }
            Ok(n) => Ok(n),
        }
    }
}

fn non_empty(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|v| !v.is_empty())
}
