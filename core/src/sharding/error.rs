//! [`ShardingError`]: everything that can go wrong when looking up or running a strategy.

use thiserror::Error;

use super::AssignmentDefect;

/// A strategy lookup, registration or run failed. Each variant says what to fix.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShardingError {
    /// No strategy is registered under this `jobShardingStrategyType`.
    #[error(
        "unknown sharding strategy {name:?}: known strategies are {known}; \
         register custom ones with ShardingStrategies::register"
    )]
    UnknownStrategy {
        /// The requested name (names are case-sensitive, as in ElasticJob).
        name: String,
        /// The registered names, comma-separated.
        known: String,
    },
    /// A strategy with this name is already registered.
    #[error("a sharding strategy named {name:?} is already registered; pick another type name")]
    DuplicateStrategy {
        /// The clashing name.
        name: String,
    },
    /// A strategy reported an empty type name, which no config could refer to.
    #[error("a sharding strategy must have a non-empty type name")]
    EmptyStrategyName,
    /// An instance id in the input is empty.
    #[error("instance id at position {position} is empty; every instance needs a non-empty id")]
    EmptyInstanceId {
        /// Zero-based position in the input list.
        position: usize,
    },
    /// The same instance id appears twice in the input.
    #[error("instance {instance:?} is listed more than once; each instance may appear only once")]
    DuplicateInstance {
        /// The repeated id.
        instance: String,
    },
    /// A strategy returned an assignment that does not cover the items exactly once.
    #[error("sharding strategy {strategy:?} returned an invalid assignment: {defect}")]
    InvalidAssignment {
        /// The strategy's type name.
        strategy: String,
        /// What is wrong with its result.
        defect: AssignmentDefect,
    },
}
