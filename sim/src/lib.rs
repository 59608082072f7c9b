//! # shardcron-sim
//!
//! A deterministic simulator of shardcron clusters (`docs/architecture.md`). It runs
//! many instances of the **unchanged** core in one process, on one thread, in virtual time,
//! against one in-memory registry; it injects faults (crashes, graceful stops, restarts,
//! session expiries, partitions, slow links, clock skew, registry restarts) and workload
//! changes (cron, count, failover, disable/enable, triggers, jobs added and removed); and it
//! checks the promises of `GUARANTEES.md` over the resulting trace. The same scenario and
//! seed give a byte-identical trace, so any failure replays, and shrinks to a minimal schedule.
//!
//! ```
//! use std::time::Duration;
//! use shardcron_sim::{Builder, Fault, FaultProfile, JobSpec, Scenario};
//!
//! // Three instances, one job of six items every five seconds; instance 2 dies at 12 s and
//! // comes back at 30 s.
//! let report = Builder {
//!     seed: 42,
//!     instances: 3,
//!     specs: vec![JobSpec::new("billing", "0/5 * * * * ?", 6)],
//!     duration: Duration::from_secs(40),
//!     profile: FaultProfile::None,
//!     scenario: Some(Scenario::new("crash").at(12_000, Fault::Crash(2)).at(30_000, Fault::Restart(2))),
//!     ..Builder::default()
//! }
//! .build()
//! .run();
//! assert!(report.item_runs() > 0);
//! // Every violation names its invariant, its virtual time and the events that led to it.
//! for v in &report.violations {
//!     println!("{v}");
//! }
//! ```
//!
//! ## Your own deployment
//! The jobs can be yours: [`JobSpec::from`] a `JobConfig`, or every job of an ElasticJob YAML
//! file ([`load_job_configs`]), with your code ([`JobCode`]), your custom sharding strategies
//! (`Builder::settings`) and your own invariants ([`UserInvariant`]), whose violations replay
//! and shrink like the built-in ones. `docs/simulating.md` in the repository is the guide.
//!
//! ## Determinism
//! A run builds its own single-threaded tokio runtime with paused time; all randomness comes
//! from ChaCha generators seeded from the seed; every collection whose order shows is a
//! `BTreeMap`; the trace records virtual time only. `shardcron-sim check-determinism` runs a seed
//! twice and diffs the text. One source of variation lies outside this crate today: the core's
//! `SharedCache` wakes its waiters through `tokio::sync::watch`, which parks each waiter on one
//! of eight `Notify`s chosen by tokio's per-process random generator; when several jobs of one
//! instance wait on the cache at the same instant, their order can differ between processes
//! (the ignored test `simultaneous_fires_of_several_jobs_are_deterministic` pins it).
//!
//! ## Layout
//! - `builder.rs`: [`Builder`], what to run and from which seed.
//! - `sim.rs`: [`Sim`], one run through its phases (faults, quiet, live, final); [`Report`].
//! - `instance.rs`, `spawner.rs`: a simulated instance and the spawner whose tasks a crash
//!   aborts.
//! - `faults.rs`: [`Fault`] verbs and the [`FaultProfile`]s that generate schedules;
//!   `garbage.rs`: the operator fault's [`Corruption`]s.
//! - `workload.rs`: [`JobSpec`] and the [`Workload`] verbs.
//! - `code.rs`: what a job's items run ([`JobCode`]) and the run's shared [`RunState`].
//! - `job_file.rs`: jobs from ElasticJob YAML files.
//! - `user.rs`: [`UserInvariant`]s, the [`RunView`] they read and the [`Finding`]s they report.
//! - `scenarios.rs`: [`Scenario`] (scripted or generated steps) and the built-in scenarios.
//! - `trace.rs`: the trace, its entries and their text form.
//! - `invariants/`: the checker, one module per invariant.
//! - `variants.rs`: deliberately broken variants that prove the checker has teeth.
//! - `explore.rs`: many seeds on all cores; `shrink.rs`: delta debugging of a failing schedule.
//! - `main.rs`: the `shardcron-sim` command.

mod builder;
mod code;
mod config_witness;
pub mod explore;
mod faults;
mod flags;
mod garbage;
mod instance;
pub mod invariants;
mod job_file;
mod scenarios;
pub mod shrink;
mod sim;
mod spawner;
pub mod trace;
mod user;
mod variants;
mod workload;

pub use builder::Builder;
pub use code::{JobCode, JobEnv, RunState};
pub use faults::{Fault, FaultProfile, GenContext};
pub use garbage::{Corruption, Junk, Target};
pub use instance::Status;
pub use invariants::{Checkpoint, Invariant, Violation};
pub use job_file::{job_configs_from_yaml, load_job_configs, JobFileError};
pub use scenarios::{builtin, Action, Scenario, Step, BUILTIN};
pub use sim::{LoadSample, Report, RunSummary, Sim, NAMESPACE};
pub use spawner::InstanceSpawner;
pub use user::{user_invariant_of, Finding, ItemRun, RunView, UserInvariant};
pub use variants::Variant;
pub use workload::{ip_of, JobSpec, Workload};

/// The guide's examples (`docs/simulating.md`), compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../docs/simulating.md")]
struct SimulatingGuide;
