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
//! - `layout`: the registry node layout of a job (`docs/registry-layout.md`), typed; internal.
//! - [`config`]: [`JobConfig`](config::JobConfig), ElasticJob-compatible YAML, validation.
//! - [`cron`]: Quartz-compatible cron schedules with time zones and DST as Quartz 2.3 does them.
//! - [`sharding`]: the pure sharding strategies (AVG_ALLOCATION, ODEVITY, ROUND_ROBIN, custom).
//! - `protocol` (internal): the cluster protocol's pure part: the view of the namespace, the records its
//!   nodes hold, and the decisions of election, resharding, execution markers and failover,
//!   as transactions to commit. No I/O, no clock, no async.
//! - [`runtime`]: the [`Scheduler`](runtime::Scheduler): one driver task, one watch, one timer
//!   heap for any number of jobs; one runner task per job; the only module that does registry
//!   I/O for the protocol and reads the clock.
//! - [`instance`]: who an instance is (`{ip}@-@{pid}`).
//! - [`events`]: what the scheduler reports as it works.
//! - [`guarantee`]: the distribute-once listener callbacks.
//! - [`api`]: operations and statistics for consoles, over the registry alone.
//! - [`handles`]: clock, spawner and randomness handles (what makes the simulator
//!   deterministic).
//! - [`job`]: job kinds (simple, dataflow, script), the executor of one fire, listeners and
//!   error handlers.
//! - `testkit` (feature `testkit`): the registry behaviour suite every backend runs.
//!
//! `__private` holds what the other crates of the shardcron workspace need from the insides;
//! it is not part of the API and changes without notice.

#![warn(missing_docs)]

#[path = "private.rs"]
#[doc(hidden)]
pub mod __private;
pub mod api;
pub mod config;
pub mod cron;
mod error;
pub mod events;
pub mod guarantee;
pub mod handles;
pub mod instance;
pub mod job;
// The layout and the protocol reach other crates only through `__private`: unstable internals,
// documented for the people who work on them where it helps, not item by item as API.
mod inline_name;
#[allow(missing_docs)]
mod layout;
mod path_map;
#[allow(missing_docs)]
pub(crate) mod protocol;
pub mod registry;
pub mod runtime;
pub mod sharding;
mod stderr_fallback;

pub use error::{Error, Result};
#[cfg(feature = "testkit")]
pub mod testkit;
