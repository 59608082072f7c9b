//! Validation of a [`JobConfig`]: each rule names its field.

use crate::cron::{CronSchedule, JobTimeZone};
use std::collections::BTreeSet;
use std::sync::Arc;

use super::{ConfigError, JobConfig};
use crate::sharding::BUILTIN_STRATEGY_TYPES;

/// Highest accepted `shardingTotalCount`. ElasticJob has no limit, but every item becomes
/// registry nodes written in one transaction, and a count near `i32::MAX` would make the leader
/// allocate gigabytes; a million is far beyond any real job.
pub const MAX_SHARDING_TOTAL_COUNT: u32 = 1_000_000;

/// The error handler types shardcron implements.
pub const BUILTIN_ERROR_HANDLER_TYPES: [&str; 3] = ["LOG", "THROW", "IGNORE"];

/// The strategy and error-handler type names a config may use: the built-ins plus any custom
/// ones the application registers.
///
/// ```
/// use shardcron_core::config::{JobConfig, KnownTypes};
/// let config = JobConfig::from_yaml(
///     "jobName: job\nshardingTotalCount: 2\njobShardingStrategyType: BY_ZONE\n",
/// )?;
/// assert!(config.validate().is_err());
/// let known = KnownTypes::default().with_sharding_strategy("BY_ZONE");
/// assert!(config.validate_with(&known).is_ok());
/// # Ok::<(), shardcron_core::config::ConfigError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KnownTypes {
    /// Shared, as every job's protocol holds the scheduler's names: a clone is a count.
    sharding_strategies: Arc<BTreeSet<String>>,
    error_handlers: Arc<BTreeSet<String>>,
}

impl Default for KnownTypes {
    fn default() -> Self {
        Self {
            sharding_strategies: Arc::new(
                BUILTIN_STRATEGY_TYPES.iter().map(|s| s.to_string()).collect(),
            ),
            error_handlers: Arc::new(
                BUILTIN_ERROR_HANDLER_TYPES.iter().map(|s| s.to_string()).collect(),
            ),
        }
    }
}

impl KnownTypes {
    /// Adds a custom sharding strategy type, e.g. every name of a
    /// [`ShardingStrategies`](crate::sharding::ShardingStrategies).
    pub fn with_sharding_strategy(mut self, name: impl Into<String>) -> Self {
        Arc::make_mut(&mut self.sharding_strategies).insert(name.into());
        self
    }

    /// Adds a custom error handler type.
    pub fn with_error_handler(mut self, name: impl Into<String>) -> Self {
        Arc::make_mut(&mut self.error_handlers).insert(name.into());
        self
    }
}

impl JobConfig {
    /// Checks every field against the built-in types. See [`validate_with`](Self::validate_with).
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_with(&KnownTypes::default())
    }

    /// Checks every field, returning the first violation, in this order: `jobName`,
    /// `shardingTotalCount`, `shardingItemParameters`, `jobShardingStrategyType`,
    /// `jobErrorHandlerType`, `timeZone`, `cron`.
    ///
    /// A config without cron is a valid one-off job. `maxTimeDiffSeconds` and
    /// `reconcileIntervalMinutes` accept any value, as in ElasticJob (negative: check off,
    /// below 1: reconcile off).
    pub fn validate_with(&self, known: &KnownTypes) -> Result<(), ConfigError> {
        validate_job_name(&self.job_name)?;
        self.checked_total_count()?;
        self.item_parameters()?;
        let strategy = self.sharding_strategy_type();
        if !known.sharding_strategies.contains(strategy) {
            return Err(ConfigError::UnknownShardingStrategy {
                name: strategy.to_string(),
                known: join(&known.sharding_strategies),
            });
        }
        let handler = self.error_handler_type();
        if !known.error_handlers.contains(handler) {
            return Err(ConfigError::UnknownErrorHandler {
                name: handler.to_string(),
                known: join(&known.error_handlers),
            });
        }
        let time_zone = self.time_zone.as_deref().unwrap_or("");
        if !time_zone.is_empty() {
            JobTimeZone::parse(time_zone).map_err(|e| ConfigError::TimeZone {
                zone: time_zone.to_string(),
                reason: e.to_string(),
            })?;
        }
        if let Some(expression) = self.cron_expression() {
            CronSchedule::parse(expression, time_zone).map_err(|e| ConfigError::Cron {
                expression: expression.to_string(),
                reason: e.to_string(),
            })?;
        }
        Ok(())
    }
}

/// Checks that `name` can be a job name: one registry path segment, valid on every backend.
///
/// ZooKeeper is the strictest backend: it forbids `/` inside a segment, the segments `.` and
/// `..`, and the characters U+0000–U+001F, U+007F–U+009F, U+D800–U+F8FF and U+FFF0–U+FFFF
/// (`PathUtils.validatePath`, taken inclusively).
pub fn validate_job_name(name: &str) -> Result<(), ConfigError> {
    if name.is_empty() {
        return Err(ConfigError::EmptyJobName);
    }
    let invalid = |reason: String| ConfigError::InvalidJobName { name: name.to_string(), reason };
    if name == "." || name == ".." {
        return Err(invalid("'.' and '..' are relative path segments".into()));
    }
    for (index, c) in name.char_indices() {
        if c == '/' {
            return Err(invalid(format!("it contains '/' (the path separator) at byte {index}")));
        }
        if matches!(c, '\u{0}'..='\u{1F}' | '\u{7F}'..='\u{9F}' | '\u{E000}'..='\u{F8FF}' | '\u{FFF0}'..='\u{FFFF}')
        {
            return Err(invalid(format!(
                "it contains U+{:04X} at byte {index}, a control, private-use or special \
                 character that ZooKeeper rejects",
                u32::from(c)
            )));
        }
    }
    Ok(())
}

fn join(names: &BTreeSet<String>) -> String {
    names.iter().map(String::as_str).collect::<Vec<_>>().join(", ")
}
