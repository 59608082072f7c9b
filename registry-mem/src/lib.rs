//! # shardcron-registry-mem
//!
//! A deterministic in-memory implementation of the shardcron registry contract
//! ([`CoordinatorRegistry`](shardcron_core::registry::CoordinatorRegistry)), for tests and for
//! the simulator (`docs/architecture.md`: determinism and the simulator).
//!
//! One [`MemServer`] holds the tree; any number of clients ([`MemRegistry`]) connect to it, each
//! with its own session, namespace and streams. It behaves like a ZooKeeper ensemble seen through
//! Curator, ephemeral nodes, sequential names, watches and transactions included, and it adds
//! *fault hooks* that break one client at a time on purpose: expire its session, cut its link
//! and heal it, freeze its process and thaw it (a GC pause), let its clock drift, delay or fail
//! its operations, restart the registry.
//!
//! Sessions keep the contract's lease: a client cut off reports `Suspended` at once and `Lost`
//! at its local lease deadline (the session timeout less the lease margin, on its own, possibly
//! drifting clock), while the server expires the session on its own clock at the session
//! timeout; the client learns of that expiry only when it gets through again.
//!
//! It is deterministic: time is the injected clock's, timers are tokio's (which paused-time
//! runtimes advance virtually), tasks go through the injected spawner, and every change is applied
//! and delivered in one total order under one lock. Run the same workload with the same seed on
//! a paused current-thread runtime and you get the same events, byte for byte.
//!
//! ## Example
//!
//! ```
//! use futures::StreamExt;
//! use shardcron_core::handles::Handles;
//! use shardcron_core::registry::{CoordinatorRegistry, CreateMode, WatchEvent};
//! use shardcron_registry_mem::{ConnectOptions, MemServer};
//!
//! #[tokio::main(flavor = "current_thread", start_paused = true)]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     // Virtual time from 2023-11-14, randomness seeded with 42.
//!     let server = MemServer::new(Handles::simulated(1_700_000_000_000, 42));
//!     let worker = server.connect(ConnectOptions::default().namespace("/demo"))?;
//!     let watcher = server.connect(ConnectOptions::default().namespace("/demo"))?;
//!
//!     let mut events = watcher.watch("/job").await?;
//!     assert!(matches!(events.next().await, Some(WatchEvent::Resync { .. })));
//!
//!     worker.create("/job/instances/i1", b"", CreateMode::Ephemeral).await?;
//!     // A fault hook: the server expires the worker's session, and its ephemeral goes with it.
//!     server.expire_session(worker.client_id());
//!
//!     let mut seen = Vec::new();
//!     for _ in 0..4 {
//!         seen.push(match events.next().await.ok_or("the stream ended")? {
//!             WatchEvent::Created { path, .. } => format!("created {path}"),
//!             WatchEvent::Deleted { path } => format!("deleted {path}"),
//!             other => format!("{other:?}"),
//!         });
//!     }
//!     assert_eq!(
//!         seen,
//!         [
//!             "created /job",
//!             "created /job/instances",
//!             "created /job/instances/i1",
//!             "deleted /job/instances/i1",
//!         ]
//!     );
//!     Ok(())
//! }
//! ```
//!
//! ## Layout
//! - `server.rs`: [`MemServer`], the server state and the one lock around it.
//! - `client.rs`: [`MemRegistry`], [`ConnectOptions`], [`ClientId`], and the path of an
//!   operation from the client to the server (checks, latency, ordering).
//! - `ops.rs`: the operations as the server applies them.
//! - `tree.rs`: nodes, sequence counters, and batches that roll back unless committed.
//! - `session.rs`: the client/session state machine (connected, cut, lost, frozen, expired,
//!   closed) and its deadlines.
//! - `watch.rs`: subscriptions to a scope (filtered on the server side), snapshots, delivery
//!   and held events.
//! - `faults.rs`: the fault hooks on [`MemServer`] and [`SessionInfo`].
//! - `namespace.rs`: mapping client paths into a namespace.

mod client;
mod faults;
mod namespace;
mod ops;
mod server;
mod session;
mod tree;
mod watch;

pub use client::{ClientId, ConnectOptions, MemRegistry};
pub use faults::SessionInfo;
pub use server::MemServer;
pub use watch::Lagging;
