//! [`ConfigError`]: why a job configuration was rejected.

use thiserror::Error;

/// A job configuration could not be read, written or accepted.
///
/// Every message starts with the ElasticJob field name (see [`ConfigError::field`]) and then says
/// what the rule is, so an operator can fix the YAML without reading our code.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// The YAML text is not a job configuration (syntax error, wrong type of a field, ...).
    #[error("job config YAML: {reason}")]
    Parse {
        /// The YAML library's message, with line and column.
        reason: String,
    },
    /// The configuration could not be written as YAML.
    #[error("job config YAML: cannot encode: {reason}")]
    Encode {
        /// The YAML library's message.
        reason: String,
    },
    /// `jobName` is empty.
    #[error("jobName: must not be empty")]
    EmptyJobName,
    /// `jobName` cannot be one registry path segment (`/{namespace}/{jobName}/...`).
    #[error("jobName: {name:?} cannot be a registry path segment: {reason}")]
    InvalidJobName {
        /// The rejected name.
        name: String,
        /// Which rule it breaks.
        reason: String,
    },
    /// `shardingTotalCount` is below 1.
    #[error("shardingTotalCount: must be at least 1, got {count}")]
    ShardingTotalCountTooSmall {
        /// The configured count.
        count: i32,
    },
    /// `shardingTotalCount` is above [`MAX_SHARDING_TOTAL_COUNT`](super::MAX_SHARDING_TOTAL_COUNT).
    #[error(
        "shardingTotalCount: must be at most {max} (each item is a registry node), got {count}"
    )]
    ShardingTotalCountTooLarge {
        /// The configured count.
        count: i32,
        /// The limit.
        max: u32,
    },
    /// A `shardingItemParameters` pair is not `item=value`, or is empty.
    #[error(
        "shardingItemParameters: pair {position} ({pair:?}) is not of the form item=value, \
         as in 0=A,1=B"
    )]
    ItemParameterMalformed {
        /// The offending pair, as written.
        pair: String,
        /// Its 1-based position in the comma-separated list.
        position: usize,
    },
    /// The item of a `shardingItemParameters` pair is not a number.
    #[error("shardingItemParameters: pair {pair:?} has item {item:?}, which is not an integer")]
    ItemParameterNotANumber {
        /// The offending pair, as written.
        pair: String,
        /// The part before `=`, trimmed.
        item: String,
    },
    /// The item of a `shardingItemParameters` pair is outside `0..shardingTotalCount`.
    #[error(
        "shardingItemParameters: pair {pair:?} names item {item}, \
         outside 0..{total_count} (shardingTotalCount is {total_count})"
    )]
    ItemParameterOutOfRange {
        /// The offending pair, as written.
        pair: String,
        /// The item it names.
        item: i64,
        /// The job's sharding total count.
        total_count: u32,
    },
    /// Two `shardingItemParameters` pairs name the same item.
    #[error("shardingItemParameters: pair {pair:?} repeats item {item}; give each item one value")]
    ItemParameterDuplicate {
        /// The second pair naming the item, as written.
        pair: String,
        /// The repeated item.
        item: u32,
    },
    /// `jobShardingStrategyType` names no known strategy.
    #[error(
        "jobShardingStrategyType: unknown strategy {name:?}; known: {known} \
         (register custom strategies in KnownTypes before validating)"
    )]
    UnknownShardingStrategy {
        /// The configured name.
        name: String,
        /// The known names, comma-separated.
        known: String,
    },
    /// `jobErrorHandlerType` names no known error handler.
    #[error(
        "jobErrorHandlerType: unknown error handler {name:?}; known: {known} \
         (register custom handlers in KnownTypes before validating)"
    )]
    UnknownErrorHandler {
        /// The configured name.
        name: String,
        /// The known names, comma-separated.
        known: String,
    },
    /// `cron` (with `timeZone`) is not a valid Quartz schedule.
    #[error("cron: {expression:?} is not a valid Quartz cron expression: {reason}")]
    Cron {
        /// The configured expression.
        expression: String,
        /// The cron parser's explanation (field and rule).
        reason: String,
    },
    /// A [`JobConfigBuilder`](super::JobConfigBuilder) was given no schedule.
    #[error(
        "cron: no schedule was given; set one with .cron(..) or .schedule(..), or call \
         .one_off() for a job that runs only when triggered"
    )]
    NoSchedule,
    /// A duration that the YAML cannot hold exactly (it stores whole seconds or minutes).
    #[error("{field}: {reason}")]
    Duration {
        /// The ElasticJob field the duration goes to.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// `timeZone` names no known zone.
    #[error("timeZone: {reason}")]
    TimeZone {
        /// The configured zone id.
        zone: String,
        /// The zone parser's explanation, with the expected forms.
        reason: String,
    },
}

impl ConfigError {
    /// The ElasticJob field the error is about, or `None` for whole-document errors.
    pub fn field(&self) -> Option<&'static str> {
        match self {
            Self::Parse { .. } | Self::Encode { .. } => None,
            Self::EmptyJobName | Self::InvalidJobName { .. } => Some("jobName"),
            Self::ShardingTotalCountTooSmall { .. } | Self::ShardingTotalCountTooLarge { .. } => {
                Some("shardingTotalCount")
            }
            Self::ItemParameterMalformed { .. }
            | Self::ItemParameterNotANumber { .. }
            | Self::ItemParameterOutOfRange { .. }
            | Self::ItemParameterDuplicate { .. } => Some("shardingItemParameters"),
            Self::UnknownShardingStrategy { .. } => Some("jobShardingStrategyType"),
            Self::UnknownErrorHandler { .. } => Some("jobErrorHandlerType"),
            Self::Cron { .. } | Self::NoSchedule => Some("cron"),
            Self::Duration { field, .. } => Some(field),
            Self::TimeZone { .. } => Some("timeZone"),
        }
    }
}
