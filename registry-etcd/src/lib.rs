//! # shardcron-registry-etcd
//!
//! The etcd backend of the shardcron registry contract
//! ([`CoordinatorRegistry`](shardcron_core::registry::CoordinatorRegistry)), passing the same
//! behaviour suite as the in-memory and ZooKeeper backends. Where
//! ElasticJob's etcd provider had no lease keep-alive, non-atomic transactions and no working
//! watches, this one maps every clause of the contract onto an etcd primitive:
//!
//! | contract | etcd |
//! |---|---|
//! | tree of nodes | four key families per namespace (see `keys.rs` and the README): nodes, a child index, sequence counters, child versions |
//! | session, ephemeral nodes | a lease kept alive every TTL/3 by its own task; ephemeral keys carry the lease; `Lost` when no keep-alive was answered for the TTL less the margin, counted from its send |
//! | every write, transactions | one etcd `Txn` whose compares state the contract's conditions (existence, version, absence, persistent parent, no children), its failure branch reading what decides the error; where compares cannot state them, a read at one revision and a `Txn` guarded by compares on everything read (optimistic, STM style); many writes nested, many reads guarded by subtree, within etcd's default `--max-txn-ops` |
//! | watches | one watch per scope entry on one stream; a one-entry scope resumes from the last delivered revision, a scope of several resyncs after a break; `Resync` after compaction or expiry |
//! | latch, mutex | the core's recipes over ephemeral-sequential nodes |
//! | registry time | the local clock after a round trip (etcd has no clock API) |
//!
//! It needs `protoc` (and its well-known `.proto` files) at build time, through `etcd-client`;
//! nothing else in the workspace depends on this crate, so the rest builds without them.
//!
//! ## Example
//!
//! ```no_run
//! use futures::StreamExt;
//! use shardcron_core::registry::{CoordinatorRegistry, CreateMode, WatchEvent};
//! use shardcron_registry_etcd::{EtcdOptions, EtcdRegistry};
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let options = EtcdOptions::from_url("etcd://127.0.0.1:2379/demo?ttl_s=10")?;
//!     let registry = EtcdRegistry::connect(options).await?;
//!
//!     let mut events = registry.watch("/job").await?;
//!     assert!(matches!(events.next().await, Some(WatchEvent::Resync { .. })));
//!
//!     // Parents are created as persistent nodes; the instance node lives with the lease.
//!     registry.create("/job/instances/10.0.0.1@-@42", b"", CreateMode::Ephemeral).await?;
//!     while let Some(event) = events.next().await {
//!         println!("{event:?}");
//!         if matches!(&event, WatchEvent::Created { path, .. } if path.ends_with("@-@42")) {
//!             break;
//!         }
//!     }
//!     registry.close().await?; // revokes the lease: the instance node is gone at once
//!     Ok(())
//! }
//! ```
//!
//! ## Layout
//! - `options.rs`: [`EtcdOptions`], [`EtcdOptions::from_url`], credentials and TLS files.
//! - `client.rs`: [`EtcdRegistry`], connecting, and each operation of the contract.
//! - `channel.rs`: the gRPC channel, with HTTP/2 windows sized for a watch of many ranges.
//! - `keys.rs`: the key encoding (node, child index, counter families) and the value format.
//! - `plan.rs`: the one-`Txn` form of a write, the contract's conditions as compares.
//! - `txn.rs`: the write engine: read at one revision, evaluate the ops, commit with compares.
//! - `session.rs`: the lease keep-alive task and the session event stream.
//! - `watch.rs`: subtree snapshots and the watch task (resume, compaction, resync).
//! - `watched.rs`: the ranges of one watch stream, by watch id and by entry.
//! - `reads.rs`: which ranges a snapshot reads (a job's ranges as its subtree, filtered).
//! - `scope_form.rs`: a watch's scope as its minimal form and the other entries.
//! - `error.rs`: etcd and gRPC errors as the contract's `RegistryError`.
//!
//! The crate README covers operating it: key encoding, `--max-request-bytes`, auth and TLS.

mod channel;
mod client;
mod error;
mod guards;
mod keys;
mod nest;
mod options;
mod plan;
mod reads;
mod scope_form;
mod session;
mod txn;
mod watch;
mod watched;

pub use client::EtcdRegistry;
pub use options::{ConfigError, Credentials, EtcdOptions, TlsFiles, URL_FORM};
