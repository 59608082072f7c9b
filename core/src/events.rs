//! What the scheduler reports as it works: a structured event for every fire, item, election,
//! sharding and session change. Tests and the simulator check invariants on them, the `worker`
//! command prints them as JSON lines, and logs carry the same facts through `tracing`.

use crate::registry::SessionEvent;

/// Why a scheduled fire ran no item on this instance.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkipReason {
    /// The registry link is down (`Suspended`): no new work may start.
    Disconnected,
    /// The job is disabled in its config.
    JobDisabled,
    /// An operator disabled this instance's server.
    ServerDisabled,
    /// This instance owns no enabled item.
    NoItems,
    /// The previous fire still runs here; the items are marked misfired.
    Misfire,
    /// The time-diff check failed: the local clock is this far from the registry's.
    ClockSkew {
        /// Local clock minus the registry's, in milliseconds (positive: the local clock is ahead).
        diff_ms: i64,
    },
    /// A reshard did not complete in time.
    ShardingTimeout,
    /// The fire came due while this instance was held up (a long reshard wait, a blocked
    /// runtime) until a later fire was due too; the later one runs instead.
    Late,
    /// The job was stopping on this instance (graceful stop, removal, scheduler shutdown)
    /// when the fire was handled.
    ShuttingDown,
    /// A registry operation failed; see the message.
    RegistryError(String),
}

impl SkipReason {
    /// The reason as a code (`disconnected`, `job_disabled`, `server_disabled`, `no_items`,
    /// `misfire`, `clock_skew`, `sharding_timeout`, `late`, `shutting_down`, `registry_error`),
    /// for metrics labels and machine-readable output.
    pub fn code(&self) -> &'static str {
        match self {
            SkipReason::Disconnected => "disconnected",
            SkipReason::JobDisabled => "job_disabled",
            SkipReason::ServerDisabled => "server_disabled",
            SkipReason::NoItems => "no_items",
            SkipReason::Misfire => "misfire",
            SkipReason::ClockSkew { .. } => "clock_skew",
            SkipReason::ShardingTimeout => "sharding_timeout",
            SkipReason::Late => "late",
            SkipReason::ShuttingDown => "shutting_down",
            SkipReason::RegistryError(_) => "registry_error",
        }
    }
}

/// Where a fire comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FireKind {
    /// A fire of the job's cron.
    Scheduled,
    /// The catch-up run of a fire skipped while items still ran.
    Misfire,
    /// An operator's trigger, or a one-off job's run.
    Manual,
    /// Items of a crashed instance, re-run here.
    Failover,
}

/// One thing the scheduler did or saw.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchedulerEvent {
    /// The job's next fire is armed.
    Armed {
        /// The job.
        job: String,
        /// When it fires next, in epoch milliseconds.
        next_fire_ms: i64,
    },
    /// A fire ran nothing here.
    Skipped {
        /// The job.
        job: String,
        /// The fire, by its scheduled time in epoch milliseconds (the same on every instance).
        fire_ms: i64,
        /// Why nothing ran.
        reason: SkipReason,
    },
    /// An item started: its `running` marker is committed and its run launched. A fire taken
    /// ahead of its time ([`Settings::fire_lead`](crate::runtime::Settings::fire_lead)) reports
    /// this up to the lead before the fire; its code starts at the fire's time.
    ItemStarted {
        /// The job.
        job: String,
        /// The item.
        item: u32,
        /// The fire, by its scheduled time in epoch milliseconds (the same on every instance).
        fire_ms: i64,
        /// Why it runs now.
        kind: FireKind,
        /// The item's fencing token for this run ([`ShardingContext::fencing_token`](crate::job::ShardingContext::fencing_token)).
        token: u64,
    },
    /// An item ended; `ok` is false for a failure or a panic.
    ItemFinished {
        /// The job.
        job: String,
        /// The item.
        item: u32,
        /// The fire, by its scheduled time in epoch milliseconds (the same on every instance).
        fire_ms: i64,
        /// Whether it completed.
        ok: bool,
    },
    /// The job's error handler raised a failure (`jobErrorHandlerType: THROW`).
    FireFailed {
        /// The job.
        job: String,
        /// The fire, by its scheduled time in epoch milliseconds (the same on every instance).
        fire_ms: i64,
        /// The item whose failure was raised.
        item: u32,
        /// The failure, with its causes.
        error: String,
    },
    /// This instance claimed an orphaned item of `fire_ms` to run it again.
    FailoverClaimed {
        /// The job.
        job: String,
        /// The item.
        item: u32,
        /// The fire, by its scheduled time in epoch milliseconds (the same on every instance).
        fire_ms: i64,
    },
    /// The leader's reconcile found an item without a live owner and flagged a reshard.
    Reconciled {
        /// The job.
        job: String,
    },
    /// This instance became the job's leader.
    LeaderElected {
        /// The job.
        job: String,
    },
    /// The leader committed an assignment.
    Sharded {
        /// The job.
        job: String,
        /// Each instance id with the items it owns now.
        assignment: Vec<(String, Vec<u32>)>,
    },
    /// A config written to the registry by someone else was unusable, or the config node was
    /// deleted; the last good one stays (the leader writes it back).
    ConfigRejected {
        /// The job.
        job: String,
        /// Why the config cannot be used.
        reason: String,
    },
    /// A new config from the registry took effect.
    ConfigApplied {
        /// The job.
        job: String,
    },
    /// The scheduler's session changed state.
    Session(SessionEvent),
    /// The job stopped on this instance.
    JobStopped {
        /// The job.
        job: String,
        /// Why it stopped, in words.
        reason: String,
    },
    /// A registry node of the job held data the scheduler could not read; it acted on the safe
    /// reading named in `reason` (and repairs the node where it owns it).
    RegistryGarbage {
        /// The job.
        job: String,
        /// The node.
        path: String,
        /// What it held, as text.
        value: String,
        /// What the scheduler made of it.
        reason: String,
    },
    /// A registry operation failed in the background; the scheduler retries where it can.
    Error {
        /// The job.
        job: String,
        /// What failed.
        message: String,
    },
}
