//! The cluster protocol's pure part: what an instance decides from its view of the namespace.
//!
//! Nothing here does I/O, reads a clock or awaits: every function takes the [`view::View`]
//! (the watch-fed state of the namespace, overlaid with this process's own writes), the job's
//! paths and the times it needs as arguments, and returns a decision, typically a transaction
//! to commit and how to read its failure. The runtime (the `runtime` module) commits, records
//! the result in the view, and feeds it back. Dependencies point one way: the runtime uses the
//! protocol; the protocol uses the layout, the registry's types, the sharding strategies, cron
//! and config, and never the runtime.
//!
//! - [`view`]: the namespace as this instance knows it.
//! - [`records`]: what the protocol's nodes hold, parsed strictly ([`records::Garbage`]).
//! - [`election`]: who leads a job.
//! - [`sharding`]: the reshard flag, the leader's assignment commit, who owns which item.
//! - [`execution`]: the `running` and `misfire` markers of a fire.
//! - [`failover`]: finding, queueing and claiming the items a vanished instance left.
//! - [`garbage`]: which nodes hold what the cluster cannot act on (garbage, gone owners).
//! - [`job`]: one job on one instance as a state machine over all of the above.

pub mod detail;
pub mod election;
pub mod execution;
pub mod failover;
pub mod garbage;
pub mod job;
#[cfg(test)]
mod parser_props;
pub mod records;
pub mod sharding;
pub mod view;
