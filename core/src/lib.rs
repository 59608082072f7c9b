//! # shardcron-core
//!
//! The heart of shardcron, a framework for distributed, sharded, fault-tolerant cron jobs: the
//! registry contract every backend implements, the injected time/randomness/spawning handles that
//! let the same code run in production and in the simulator, the job configuration, the sharding
//! strategies, the Quartz cron schedule, the coordination services and the scheduler runtime.
//!
//! ## Layout
//! - [`registry`]: the [`CoordinatorRegistry`](registry::CoordinatorRegistry) trait and its
//!   contract, typed errors, paths, the latch and mutex recipes.
//! - [`layout`]: the registry node layout of a job (`docs/registry-layout.md`), typed.
//! - [`config`]: [`JobConfig`](config::JobConfig), ElasticJob-compatible YAML, validation.
//! - [`cron`]: Quartz-compatible cron schedules with time zones and DST as Quartz 2.3 does them.
//! - [`sharding`]: the pure sharding strategies (AVG_ALLOCATION, ODEVITY, ROUND_ROBIN, custom).
//! - [`runtime`]: the [`Scheduler`](runtime::Scheduler): one driver task, one watch, one timer
//!   heap for any number of jobs; one runner task per job.
//! - [`election`], [`execution`], [`failover`], [`guarantee`], [`sharding::service`]: the
//!   coordination services, each owning its registry nodes.
//! - [`api`]: operations and statistics for consoles, over the registry alone.
//! - [`handles`]: clock, spawner and randomness handles (what makes the simulator
//!   deterministic).
//! - [`job`]: job kinds (simple, dataflow, script), the executor of one fire, listeners and
//!   error handlers.
//! - `testkit` (feature `testkit`): the registry behaviour suite every backend runs.

pub mod api;
pub mod config;
pub mod cron;
pub mod election;
mod error;
pub mod execution;
pub mod failover;
pub mod guarantee;
pub mod handles;
pub mod job;
pub mod layout;
pub mod registry;
pub mod runtime;
pub mod sharding;
mod stderr_fallback;

pub use error::{Error, Result};
#[cfg(feature = "testkit")]
pub mod testkit;
