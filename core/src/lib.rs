//! # shardcron-core
//!
//! The heart of shardcron, a framework for distributed, sharded, fault-tolerant cron jobs: the
//! registry contract every backend implements, the injected time/randomness/spawning handles that
//! let the same code run in production and in the simulator, and (as the project grows) the job
//! model, the Quartz cron schedule, the sharding strategies and the coordination services.
//!
//! ## Layout
//! - [`registry`]: the [`CoordinatorRegistry`](registry::CoordinatorRegistry) trait and its
//!   contract, typed errors, paths, the latch and mutex recipes.
//! - [`layout`]: the registry node layout of a job (DESIGN section 3), typed.
//! - [`handles`]: clock, spawner and randomness handles (DESIGN section 6).
//! - `testkit` (feature `testkit`): the registry behaviour suite every backend runs.

pub mod handles;
pub mod layout;
pub mod registry;
#[cfg(feature = "testkit")]
pub mod testkit;
