//! Not part of the public API: what the other crates of the shardcron workspace (the CLI, the
//! console, the simulator, the benchmarks, the tests) need from the core's insides. Anything
//! here may change or go in any release, without notice; applications must not use it.

/// The registry node layout of a job (`docs/registry-layout.md`), typed.
/// A short name kept in place (the in-memory registry's tree uses it too).
pub use crate::inline_name::Name as InlineName;

pub mod layout {
    pub use crate::layout::*;
}

/// The cluster protocol's pure part: records, decisions, the per-job state machine.
pub mod protocol {
    pub use crate::protocol::*;
}

/// Between [`SystemTime`](std::time::SystemTime)s, which the API speaks, and the epoch
/// milliseconds the registry, the task ids and the simulator's traces count in.
pub mod time {
    use std::time::SystemTime;

    /// `time` in epoch milliseconds, rounded towards the past.
    pub fn epoch_ms(time: SystemTime) -> i64 {
        crate::job::system_time_to_epoch_ms(time)
    }

    /// Epoch milliseconds (before 1970 included) as a `SystemTime`.
    pub fn from_epoch_ms(ms: i64) -> SystemTime {
        crate::job::epoch_ms_to_system_time(ms)
    }
}

use crate::runtime::{EventSink, Scheduler, SchedulerBuilder};

/// How many reads the scheduler's jobs made of nodes outside what its watch covered since the
/// last call, with the first paths read (issue #15): the simulator counts any as a failure.
/// Always `(0, [])` unless the scheduler was built with [`AuditReads::audit_reads`].
pub fn stray_reads(scheduler: &Scheduler) -> (u64, Vec<String>) {
    scheduler.stray_reads()
}

/// A synchronous event sink called on the emitting task itself, before the event goes anywhere
/// else: for the simulator's checker, which must see every event at the virtual instant it
/// happens, and lose none when it kills an instance. A slow inline sink delays the scheduler;
/// applications use [`SchedulerBuilder::event_sink`].
pub trait InlineEventSink {
    /// Adds `sink`, called inline for every event.
    fn inline_event_sink(self, sink: EventSink) -> Self;
}

impl InlineEventSink for SchedulerBuilder {
    fn inline_event_sink(self, sink: EventSink) -> Self {
        self.push_inline_sink(sink)
    }
}

/// Checks every read the scheduler's jobs make of its view against what its watch covers, and
/// records the reads outside it for [`stray_reads`]: for the simulator, where such a read is a
/// protocol bug. Production schedulers skip the check (a lookup per read).
pub trait AuditReads {
    /// Turns the check on.
    fn audit_reads(self) -> Self;
}

impl AuditReads for SchedulerBuilder {
    fn audit_reads(self) -> Self {
        self.with_read_audit()
    }
}

/// Field-by-field access to a [`JobConfig`](crate::config::JobConfig)'s ElasticJob fields, for
/// the simulator, which replays the exact configs users give it (valid or not) and changes them
/// the way ElasticJob's tools would. Applications build configs with
/// [`JobConfig::builder`](crate::config::JobConfig::builder).
pub trait JobConfigFields {
    /// A config with ElasticJob's builder defaults, named `job_name`, with `count` items and
    /// no cron, unchecked.
    fn unchecked(job_name: &str, count: i32) -> Self;
    /// Renames the job.
    fn set_job_name(&mut self, job_name: String);
    /// `cron`, as written.
    fn set_cron(&mut self, cron: Option<String>);
    /// `shardingTotalCount`, as written.
    fn set_sharding_total_count(&mut self, count: i32);
    /// `failover`.
    fn set_failover(&mut self, on: bool);
    /// `misfire`.
    fn set_misfire(&mut self, on: bool);
    /// `maxTimeDiffSeconds`, as written.
    fn set_max_time_diff_seconds(&mut self, seconds: i32);
    /// `monitorExecution`.
    fn set_monitor_execution(&mut self, on: bool);
    /// `disabled`.
    fn set_disabled(&mut self, disabled: bool);
    /// `timeZone`, as written.
    fn time_zone_mut(&mut self) -> &mut Option<String>;
    /// `shardingItemParameters`, as written.
    fn sharding_item_parameters_mut(&mut self) -> &mut Option<String>;
    /// `jobParameter`, as written.
    fn job_parameter_mut(&mut self) -> &mut Option<String>;
    /// `jobShardingStrategyType`, as written.
    fn job_sharding_strategy_type_mut(&mut self) -> &mut Option<String>;
}

impl JobConfigFields for crate::config::JobConfig {
    fn unchecked(job_name: &str, count: i32) -> Self {
        crate::config::JobConfig::new(job_name, count)
    }
    fn set_job_name(&mut self, job_name: String) {
        self.job_name = job_name;
    }
    fn set_cron(&mut self, cron: Option<String>) {
        self.cron = cron;
    }
    fn set_sharding_total_count(&mut self, count: i32) {
        self.sharding_total_count = count;
    }
    fn set_failover(&mut self, on: bool) {
        self.failover = on;
    }
    fn set_misfire(&mut self, on: bool) {
        self.misfire = on;
    }
    fn set_max_time_diff_seconds(&mut self, seconds: i32) {
        self.max_time_diff_seconds = seconds;
    }
    fn set_monitor_execution(&mut self, on: bool) {
        self.monitor_execution = on;
    }
    fn set_disabled(&mut self, disabled: bool) {
        self.disabled = disabled;
    }
    fn time_zone_mut(&mut self) -> &mut Option<String> {
        &mut self.time_zone
    }
    fn sharding_item_parameters_mut(&mut self) -> &mut Option<String> {
        &mut self.sharding_item_parameters
    }
    fn job_parameter_mut(&mut self) -> &mut Option<String> {
        &mut self.job_parameter
    }
    fn job_sharding_strategy_type_mut(&mut self) -> &mut Option<String> {
        &mut self.job_sharding_strategy_type
    }
}
