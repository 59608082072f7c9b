//! Sharding strategies: who runs which item of a job.
//!
//! A job is cut into `shardingTotalCount` items (`0..n`). Before a fire, the leader hands the live
//! instances to the job's strategy and persists the resulting [`Assignment`]. This module holds
//! the pure part of that: the [`ShardingStrategy`] trait, ElasticJob's three strategies with
//! byte-for-byte the same results, and a [`ShardingStrategies`] lookup by type name that also
//! accepts custom strategies. The registry protocol around it (`necessary`/`processing` flags,
//! the commit transaction) is [`crate::protocol::sharding`].
//!
//! ```
//! use shardcron_core::sharding::{sort_for_sharding, ShardingStrategies};
//!
//! let mut live = vec!["10.0.0.1@-@42", "10.0.0.2@-@42", "10.0.0.3@-@42"];
//! sort_for_sharding(&mut live); // ElasticJob's order: descending
//! let assignment = ShardingStrategies::default().shard(Some("ROUND_ROBIN"), "orders", &live, 10)?;
//! assert_eq!(assignment.item_count(), 10);
//! # Ok::<(), shardcron_core::sharding::ShardingError>(())
//! ```
//!
//! # Layout
//! - `strategy.rs`: the trait and the built-ins (`AVG_ALLOCATION`, `ODEVITY`, `ROUND_ROBIN`).
//! - `assignment.rs`: the result type and its verification.
//! - `strategies.rs`: lookup by type name, custom registration, the checked [`ShardingStrategies::shard`].
//! - `order.rs`: the instance order ElasticJob (and so the runtime) feeds to strategies.
//! - `java.rs`: Java's `String.hashCode`, `Math.abs` and `String.compareTo`, which the strategies
//!   and the order depend on.
//! - `error.rs`: [`ShardingError`].

mod assignment;
mod error;
mod java;
mod order;
mod strategies;
mod strategy;

#[cfg(test)]
mod tests;

pub use assignment::{Assignment, AssignmentDefect};
pub use error::ShardingError;
pub use java::{java_abs, java_string_cmp, java_string_hash};
pub use order::sort_for_sharding;
pub use strategies::{
    check_instances, ShardingStrategies, BUILTIN_STRATEGY_TYPES, DEFAULT_STRATEGY_TYPE,
};
pub use strategy::{AverageAllocation, OdevitySortByName, RoundRobinByName, ShardingStrategy};
