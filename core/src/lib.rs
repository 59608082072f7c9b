//! # shardcron-core
//!
//! The heart of shardcron: the registry contract every backend implements, and (as the project
//! grows) the job model, the Quartz cron schedule, the sharding strategies and the coordination
//! services that run jobs across a cluster.

pub mod cron;
