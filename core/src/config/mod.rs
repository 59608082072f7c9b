//! Job configuration: ElasticJob-Lite 3.x's `JobConfigurationPOJO`, its YAML form and its rules.
//!
//! A [`JobConfig`] is what `/{namespace}/{job}/config` holds. It reads and writes the YAML
//! ElasticJob writes there (same field names, order and omissions), so consoles and scripts built
//! for ElasticJob keep working, and validation rejects bad values with the field's name and the
//! rule broken.
//!
//! ```
//! use shardcron_core::config::JobConfig;
//!
//! let yaml = "jobName: orders\ncron: 0/5 * * * * ?\nshardingTotalCount: 3\n\
//!             shardingItemParameters: 0=A,1=B,2=C\n";
//! let config = JobConfig::from_yaml(yaml)?;
//! config.validate()?;
//! assert_eq!(config.sharding_strategy_type(), "AVG_ALLOCATION");
//! assert_eq!(config.item_parameters()?[&1], "B");
//! # Ok::<(), shardcron_core::config::ConfigError>(())
//! ```
//!
//! # Layout
//! - `job.rs`: [`JobConfig`], its defaults, accessors and derived values.
//! - `builder.rs`: [`JobConfigBuilder`], typed and checked when built.
//! - `kinds.rs`: [`ShardingStrategyType`], [`ErrorHandlerType`].
//! - `yaml.rs`: [`JobConfig::from_yaml`] / [`JobConfig::to_yaml`], unknown-field preservation.
//! - `snakeyaml.rs`: quoting and class tags the way ElasticJob's SnakeYAML (YAML 1.1) needs.
//! - `validate.rs`: [`JobConfig::validate`], [`KnownTypes`], [`validate_job_name`].
//! - `item_params.rs`: [`parse_sharding_item_parameters`].
//! - `error.rs`: [`ConfigError`].

mod builder;
mod error;
mod item_params;
mod job;
mod kinds;
mod snakeyaml;
pub mod store;
mod validate;
mod yaml;

#[cfg(test)]
mod tests;

pub use builder::JobConfigBuilder;
pub use error::ConfigError;
pub use item_params::parse_sharding_item_parameters;
pub use job::{JobConfig, DEFAULT_ERROR_HANDLER_TYPE};
pub use kinds::{ErrorHandlerType, ShardingStrategyType};
pub use validate::{
    validate_job_name, KnownTypes, BUILTIN_ERROR_HANDLER_TYPES, MAX_SHARDING_TOTAL_COUNT,
};
