//! # shardcron
//!
//! Distributed, sharded, fault-tolerant cron jobs. A job is cut into sharding items; the live
//! instances of a cluster divide the items among themselves, and every item of every fire runs
//! exactly once, even while instances crash. Coordination state lives in a registry: ZooKeeper,
//! etcd, or the embedded in-memory one.
//!
//! This is the crate applications depend on: it re-exports [`shardcron_core`] and opens a
//! registry from a URL.
//!
//! ```no_run
//! use std::time::Duration;
//! use shardcron::prelude::*;
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let registry = shardcron::connect("mem:").await?;
//! let scheduler = SchedulerBuilder::new(registry.clone()).start().await?;
//! let config = JobConfig::builder("hello").cron("0/5 * * * * ?").sharding_total_count(2).build()?;
//! scheduler
//!     .add_job(config, Job::from_fn(|ctx| async move {
//!         println!("hello from item {}", ctx.item);
//!         Ok(())
//!     }))
//!     .await?;
//! scheduler.shutdown_on_ctrl_c().await?; // runs until Ctrl-C, then stops gracefully
//! registry.close().await?;                // the registry is yours: close it when done
//! # let _ = Duration::ZERO;
//! # Ok(()) }
//! ```
//!
//! A failing item is reported by the job's error handler (`LOG` by default: a `tracing` warning,
//! also written to stderr while no `tracing` subscriber is installed). The repository's README
//! explains the words used here (item, fire, instance, namespace, misfire, fencing token), what
//! is guaranteed, and how to run a cluster on ZooKeeper or etcd.
//!
//! ## Examples
//! The repository's `shardcron/examples/` holds runnable programs (`cargo run -p shardcron
//! --example NAME`; the README has the table): `quickstart`, `axum_service` (the scheduler in
//! a web service, with a graceful stop of both), `dataflow`, `script`, `failover_fencing` (how
//! the fencing token stops a replaced owner's write), `zookeeper_cluster` and `etcd_cluster`.
//!
//! ## Layout
//! - [`connect`] and [`RegistryUrl`]: open a registry from `mem:`, `zk://...` or `etcd://...`.
//! - [`testing`]: a scheduler in virtual time, for your jobs' unit tests.
//! - `observe` (feature `observe`): the execution trace (SQLite, PostgreSQL) and Prometheus
//!   metrics, from `shardcron-observe`. HTTP jobs (`job::Job::http`) come with feature `http`.
//! - `sim` (feature `sim`): the simulator, `shardcron-sim`.
//! - [`prelude`]: what a program that schedules jobs uses, in one import.
//! - [`config`], [`cron`], [`job`], [`runtime`], [`api`], [`registry`], [`sharding`],
//!   [`handles`], [`guarantee`], [`instance`], [`events`], [`Error`]: the public API of
//!   [`shardcron_core`], re-exported. Its insides (the protocol, the registry layout) are not.
//! - [`mem`]: the embedded in-memory registry.
//!
//! ## Times
//! Durations are [`std::time::Duration`] and instants [`std::time::SystemTime`] (for example
//! [`job::ShardingContext::fire_time`], [`job::FireInfo::fire_time`], [`job::TaskId`] and the
//! runs of [`testing`]): the standard types every date-time crate converts from, so the API
//! ties no application to one of them. The registry and ElasticJob's formats count epoch
//! milliseconds, and so, for now, do the fields of [`events::SchedulerEvent`] (`fire_ms`).

#![warn(missing_docs)]

pub mod testing;
mod url;

/// The README's Rust examples, compiled (and, unless marked `no_run` or `ignore`, run) as doc
/// tests, so that the front page cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

use std::sync::Arc;

pub use shardcron_core::{
    api, config, cron, events, guarantee, handles, instance, job, registry, runtime, sharding,
    Error, Result,
};
/// The embedded in-memory registry (`mem:` URLs).
pub use shardcron_registry_mem as mem;

/// What a program that schedules jobs uses, in one import: `use shardcron::prelude::*;`.
pub mod prelude {
    pub use shardcron_core::config::{
        ErrorHandlerType, JobConfig, JobConfigBuilder, ShardingStrategyType,
    };
    pub use shardcron_core::cron::{CronSchedule, JobTimeZone};
    pub use shardcron_core::job::{Job, ShardingContext};
    pub use shardcron_core::registry::CoordinatorRegistry;
    pub use shardcron_core::runtime::{Scheduler, SchedulerBuilder, SchedulerEvent, Settings};
    pub use shardcron_core::Error;
}

/// The etcd backend (feature `etcd`).
#[cfg(feature = "etcd")]
pub use shardcron_registry_etcd as etcd;
/// The ZooKeeper backend (feature `zookeeper`).
#[cfg(feature = "zookeeper")]
pub use shardcron_registry_zk as zk;
pub use url::{ConnectError, RegistryUrl};

/// The execution trace and Prometheus metrics (feature `observe`).
#[cfg(feature = "observe")]
pub use shardcron_observe as observe;

/// The simulator (feature `sim`): your jobs on a cluster of simulated instances, in virtual
/// time, under faults, checked against the guarantees and your own invariants.
#[cfg(feature = "sim")]
pub use shardcron_sim as sim;

use shardcron_core::handles::Handles;
use shardcron_core::registry::CoordinatorRegistry;

/// Opens a registry from a URL:
///
/// - `mem:` or `mem:/namespace`: a new in-process registry on the wall clock (one client; for
///   several clients on one in-memory server use [`mem::MemServer`] directly; in tests on a
///   paused tokio clock, where it is refused, use [`testing::virtual_scheduler`]);
/// - `zk://host:port[,host:port]/namespace[?session_timeout_ms=..&digest=user:password]`;
/// - `etcd://host:port[,host:port]/namespace[?ttl_s=..&user=..&password=..]`.
///
/// ZooKeeper and etcd need this crate's `zookeeper` and `etcd` features.
pub async fn connect(url: &str) -> Result<Arc<dyn CoordinatorRegistry>, ConnectError> {
    match RegistryUrl::parse(url)? {
        RegistryUrl::Mem { namespace } => {
            if testing::tokio_clock_is_paused() {
                return Err(ConnectError::PausedClock);
            }
            let server = mem::MemServer::new(Handles::real());
            let mut options = mem::ConnectOptions::default();
            if let Some(ns) = namespace {
                options = options.namespace(&ns);
            }
            let client = server.connect(options).map_err(ConnectError::Registry)?;
            Ok(Arc::new(client))
        }
        #[cfg(feature = "zookeeper")]
        RegistryUrl::ZooKeeper { .. } => {
            let client = zk::ZkRegistry::connect_url(url).await.map_err(ConnectError::Registry)?;
            Ok(Arc::new(client))
        }
        #[cfg(not(feature = "zookeeper"))]
        RegistryUrl::ZooKeeper { .. } => {
            Err(ConnectError::Unsupported { scheme: "zk", feature: "zookeeper" })
        }
        #[cfg(feature = "etcd")]
        RegistryUrl::Etcd { .. } => {
            let options = etcd::EtcdOptions::from_url(url).map_err(|e| {
                ConnectError::Malformed { url: url.to_owned(), reason: e.to_string() }
            })?;
            let client =
                etcd::EtcdRegistry::connect(options).await.map_err(ConnectError::Registry)?;
            Ok(Arc::new(client))
        }
        #[cfg(not(feature = "etcd"))]
        RegistryUrl::Etcd { .. } => {
            Err(ConnectError::Unsupported { scheme: "etcd", feature: "etcd" })
        }
    }
}
