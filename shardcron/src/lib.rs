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
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use shardcron::{config::JobConfig, job::Job, runtime::SchedulerBuilder};
//!
//! let registry = shardcron::connect("mem:").await?;
//! let scheduler = SchedulerBuilder::new(registry).start().await?;
//! let mut config = JobConfig::new("hello", 2);
//! config.cron = Some("0/5 * * * * ?".into());
//! scheduler
//!     .add_job(config, Job::from_fn(|ctx| async move {
//!         println!("hello from item {}", ctx.item);
//!         Ok(())
//!     }))
//!     .await?;
//! scheduler.shutdown_on_ctrl_c().await?; // runs until Ctrl-C, then stops gracefully
//! # Ok(()) }
//! ```
//!
//! A failing item is reported by the job's error handler (`LOG` by default: a `tracing` warning,
//! also written to stderr while no `tracing` subscriber is installed). The repository's README
//! explains the words used here (item, fire, instance, namespace, misfire, fencing token), what
//! is guaranteed, and how to run a cluster on ZooKeeper or etcd.
//!
//! ## Layout
//! - [`connect`] and [`RegistryUrl`]: open a registry from `mem:`, `zk://...` or `etcd://...`.
//! - [`testing`]: a scheduler in virtual time, for your jobs' unit tests.
//! - `observe` (feature `observe`): the execution trace (SQLite, PostgreSQL) and Prometheus
//!   metrics, from `shardcron-observe`. HTTP jobs (`job::Job::http`) come with feature `http`.
//! - `sim` (feature `sim`): the simulator, `shardcron-sim`.
//! - everything else: re-exported from [`shardcron_core`] (`config`, `cron`, `job`, `runtime`,
//!   `api`, `registry`, ...).

pub mod testing;
mod url;

use std::sync::Arc;

pub use shardcron_core::*;
pub use shardcron_registry_mem as mem;

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
