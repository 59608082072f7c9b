//! [`MetricsListener`]: counts fires, items, skips, failovers, reshards and sessions.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use metrics::{counter, gauge, histogram};
use parking_lot::{Mutex, RwLock};
use rustc_hash::FxHashMap;
use shardcron_core::__private::time::epoch_ms;
use shardcron_core::handles::{Clock, SystemClock};
use shardcron_core::job::{
    ExecutionSource, FireInfo, ItemEndContext, ItemOutcome, ItemTiming, JobListener,
    ShardingContext,
};
use shardcron_core::registry::SessionEvent;
use shardcron_core::runtime::SchedulerEvent;

use super::tally::{Handles, Tally};

/// Distinct `job` label values, at most; later jobs share `job="_other"`.
pub const MAX_JOB_LABELS: usize = 500;

/// The label every job beyond [`MAX_JOB_LABELS`] gets.
const OTHER_JOB: &str = "_other";

/// Keeps the `job` label bounded: the first [`MAX_JOB_LABELS`] jobs seen keep their name.
#[derive(Debug, Default)]
pub struct JobLabels {
    seen: Mutex<BTreeSet<String>>,
}

impl JobLabels {
    /// The label value for `job`.
    pub fn label(&self, job: &str) -> String {
        let mut seen = self.seen.lock();
        if seen.contains(job) {
            return job.to_owned();
        }
        if seen.len() < MAX_JOB_LABELS {
            seen.insert(job.to_owned());
            return job.to_owned();
        }
        OTHER_JOB.to_owned()
    }
}

/// The per-item series of one job, registered once, and what the hooks counted for them since
/// the last render (see `tally.rs`: the hooks run for every item of every fire).
#[derive(Debug)]
struct JobSeries {
    tally: Tally,
    handles: Handles,
}

impl JobSeries {
    fn new(job: String) -> Self {
        let finished = |outcome: &'static str| counter!("shardcron_items_finished_total", "job" => job.clone(), "outcome" => outcome);
        let fires = ExecutionSource::ALL.map(|source| {
            counter!("shardcron_fires_total", "job" => job.clone(), "kind" => kind(source))
        });
        let handles = Handles {
            started: counter!("shardcron_items_started_total", "job" => job.clone()),
            succeeded: finished("succeeded"),
            failed: finished("failed"),
            cancelled: finished("cancelled"),
            duration: histogram!("shardcron_item_duration_seconds", "job" => job.clone()),
            lateness: histogram!("shardcron_trigger_lateness_seconds", "job" => job.clone()),
            fires,
            misfire_catchups: counter!("shardcron_misfire_catchups_total", "job" => job),
        };
        JobSeries { tally: Tally::default(), handles }
    }
}

/// Feeds the metrics from the executor's hooks and the scheduler's events.
#[derive(Debug)]
pub struct MetricsListener {
    /// Where "now" comes from (the reshard duration): the scheduler's clock, so that the
    /// figures agree with its own times, also under a virtual clock.
    clock: RwLock<Arc<dyn Clock>>,
    jobs: JobLabels,
    /// The per-item series of each job label (and of each job beyond the bound, its `_other`).
    series: RwLock<HashMap<String, Arc<JobSeries>>>,
    /// Each of them once, in the order made: what a render publishes.
    all_series: Mutex<Vec<Arc<JobSeries>>>,
    /// Per job, the fire times armed lately (the last two): a reshard committed at time `t` was
    /// needed by the latest of them that is due by `t`. (Looked up at every fire, never
    /// iterated: a hash map, with a hasher of a few instructions per word: SipHash made this
    /// lookup the largest part of the metrics' work per fire.)
    armed: Mutex<FxHashMap<String, [Option<i64>; 2]>>,
}

fn kind(source: ExecutionSource) -> &'static str {
    match source {
        ExecutionSource::Normal => "scheduled",
        ExecutionSource::Misfire => "misfire",
        ExecutionSource::Failover => "failover",
        ExecutionSource::Manual => "manual",
        _ => "other",
    }
}

fn seconds(ms: i64) -> f64 {
    ms.max(0) as f64 / 1000.0
}

impl Default for MetricsListener {
    fn default() -> Self {
        MetricsListener::with_clock(Arc::new(SystemClock))
    }
}

impl MetricsListener {
    /// A listener reading the time from `clock`.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        MetricsListener {
            clock: RwLock::new(clock),
            jobs: JobLabels::default(),
            series: RwLock::default(),
            all_series: Mutex::default(),
            armed: Mutex::default(),
        }
    }

    /// Reads the time from `clock` from now on.
    pub(crate) fn set_clock(&self, clock: Arc<dyn Clock>) {
        *self.clock.write() = clock;
    }

    /// Moves what the hooks counted since the last call into the recorder: fires, items, their
    /// durations and lateness. [`Metrics::render`](super::Metrics::render) and every scrape of
    /// [`Metrics::serve`](super::Metrics::serve) call it first; call it yourself before
    /// rendering when using this listener with a recorder of your own.
    pub fn publish(&self) {
        let all = self.all_series.lock().clone();
        for series in all {
            series.tally.publish(&series.handles);
        }
    }

    fn series(&self, job: &str) -> Arc<JobSeries> {
        if let Some(series) = self.series.read().get(job) {
            return series.clone();
        }
        let label = self.jobs.label(job);
        let mut all = self.series.write();
        let series = all
            .entry(label.clone())
            .or_insert_with(|| {
                let series = Arc::new(JobSeries::new(label));
                self.all_series.lock().push(series.clone());
                series
            })
            .clone();
        // Jobs beyond the bound share the `_other` series, found under their own name next time.
        all.entry(job.to_owned()).or_insert_with(|| series.clone());
        series
    }

    /// Whether [`on_event`](Self::on_event) counts anything of `event` (the scheduler then
    /// copies only those to the sink: not the events of every item).
    pub fn wants(event: &SchedulerEvent) -> bool {
        matches!(
            event,
            SchedulerEvent::Skipped { .. }
                | SchedulerEvent::FailoverClaimed { .. }
                | SchedulerEvent::Armed { .. }
                | SchedulerEvent::Sharded { .. }
                | SchedulerEvent::LeaderElected { .. }
                | SchedulerEvent::FireFailed { .. }
                | SchedulerEvent::ConfigRejected { .. }
                | SchedulerEvent::Error { .. }
                | SchedulerEvent::JobStopped { .. }
                | SchedulerEvent::Session(_)
        )
    }

    /// Counts one scheduler event.
    pub fn on_event(&self, event: &SchedulerEvent) {
        match event {
            SchedulerEvent::Skipped { job, reason: why, .. } => {
                let labels = [("job", self.jobs.label(job)), ("reason", why.code().to_owned())];
                counter!("shardcron_fires_skipped_total", &labels).increment(1);
            }
            SchedulerEvent::FailoverClaimed { job, .. } => {
                counter!("shardcron_failovers_total", "job" => self.jobs.label(job)).increment(1);
            }
            SchedulerEvent::Armed { job, next_fire_ms } => {
                // Every fire of every job re-arms it: the job's entry is looked up by reference
                // (`entry` would copy its name at each fire), made only at its first arming.
                let mut armed = self.armed.lock();
                match armed.get_mut(job.as_str()) {
                    Some(last) if last[1] != Some(*next_fire_ms) => {
                        *last = [last[1], Some(*next_fire_ms)];
                    }
                    Some(_) => {}
                    None => {
                        armed.insert(job.clone(), [None, Some(*next_fire_ms)]);
                    }
                }
            }
            SchedulerEvent::Sharded { job, .. } => {
                let label = self.jobs.label(job);
                counter!("shardcron_reshards_total", "job" => label.clone()).increment(1);
                let now = self.clock.read().now_ms();
                // The fire the reshard answered: the latest armed one due by now, or, for a
                // fire taken ahead of this clock (`Settings::fire_lead`), the one armed before
                // the next: its items waited for nothing, the assignment came before their time.
                let due = self.armed.lock().get(job).and_then(|&[before, next]| {
                    let due_by_now = [before, next].into_iter().flatten().filter(|&at| at <= now);
                    due_by_now.max().or(before.filter(|&b| next.is_some_and(|n| b < n)))
                });
                if let Some(due) = due {
                    histogram!("shardcron_reshard_duration_seconds", "job" => label)
                        .record(seconds((now - due).max(0)));
                }
            }
            SchedulerEvent::LeaderElected { job } => {
                counter!("shardcron_leader_elections_total", "job" => self.jobs.label(job))
                    .increment(1);
            }
            SchedulerEvent::FireFailed { job, .. } => {
                counter!("shardcron_fire_failures_raised_total", "job" => self.jobs.label(job))
                    .increment(1);
            }
            SchedulerEvent::ConfigRejected { job, .. } => {
                counter!("shardcron_config_rejected_total", "job" => self.jobs.label(job))
                    .increment(1);
            }
            SchedulerEvent::Error { job, .. } => {
                counter!("shardcron_scheduler_errors_total", "job" => self.jobs.label(job))
                    .increment(1);
            }
            SchedulerEvent::JobStopped { job, .. } => {
                self.armed.lock().remove(job);
            }
            SchedulerEvent::Session(session) => {
                let (state, up) = match session {
                    SessionEvent::Connected { .. } => ("connected", 1.0),
                    SessionEvent::Reconnected => ("reconnected", 1.0),
                    SessionEvent::Suspended => ("suspended", 0.0),
                    SessionEvent::Expired => ("expired", 0.0),
                    SessionEvent::Lost => ("lost", 0.0),
                    SessionEvent::Closed => ("closed", 0.0),
                    _ => ("other", 0.0),
                };
                counter!("shardcron_session_transitions_total", "state" => state).increment(1);
                gauge!("shardcron_session_connected").set(up);
            }
            _ => {}
        }
    }
}

impl JobSeries {
    fn fire_began(&self, fire: &FireInfo) {
        let index = ExecutionSource::ALL.iter().position(|s| *s == fire.source).unwrap_or(0);
        self.tally.add(|counts| {
            counts.fires[index] += 1;
            if fire.source == ExecutionSource::Misfire {
                counts.misfire_catchups += 1;
            }
        });
    }

    fn item_started(&self, fire: &FireInfo, started_ms: i64) {
        let late_ms =
            (fire.source == ExecutionSource::Normal).then(|| started_ms - epoch_ms(fire.fire_time));
        self.tally.add(|counts| {
            counts.started += 1;
            if let Some(late_ms) = late_ms {
                counts.lateness.record(late_ms);
            }
        });
    }

    fn item_finished(&self, outcome: &ItemOutcome, timing: Option<ItemTiming>) {
        self.tally.add(|counts| {
            match outcome {
                ItemOutcome::Completed => counts.succeeded += 1,
                ItemOutcome::Failed(_) => counts.failed += 1,
                ItemOutcome::Cancelled => counts.cancelled += 1,
                // A kind of end added later counts as a failure.
                _ => counts.failed += 1,
            }
            if let Some(timing) = timing {
                counts.duration.record(timing.finished_ms - timing.started_ms);
            }
        });
    }
}

#[async_trait]
impl JobListener for MetricsListener {
    async fn before_job_executed(&self, fire: &FireInfo) {
        self.series(&fire.job_name).fire_began(fire);
    }

    fn item_started(&self, fire: &FireInfo, _ctx: &ShardingContext, started_ms: i64) {
        self.series(&fire.job_name).item_started(fire, started_ms);
    }

    fn item_finished(
        &self,
        fire: &FireInfo,
        _end: &ItemEndContext,
        outcome: &ItemOutcome,
        timing: Option<ItemTiming>,
    ) {
        self.series(&fire.job_name).item_finished(outcome, timing);
    }

    fn for_job(&self, job: &str) -> Option<Arc<dyn JobListener>> {
        Some(Arc::new(JobMetrics { series: self.series(job) }))
    }
}

/// The [`MetricsListener`] of one job, as the scheduler calls it: the job's series found once,
/// when its executor is built, not at every item.
#[derive(Debug)]
struct JobMetrics {
    series: Arc<JobSeries>,
}

#[async_trait]
impl JobListener for JobMetrics {
    async fn before_job_executed(&self, fire: &FireInfo) {
        self.series.fire_began(fire);
    }

    fn item_started(&self, fire: &FireInfo, _ctx: &ShardingContext, started_ms: i64) {
        self.series.item_started(fire, started_ms);
    }

    fn item_finished(
        &self,
        _fire: &FireInfo,
        _end: &ItemEndContext,
        outcome: &ItemOutcome,
        timing: Option<ItemTiming>,
    ) {
        self.series.item_finished(outcome, timing);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_labels_are_bounded() {
        let labels = JobLabels::default();
        for i in 0..MAX_JOB_LABELS {
            assert_eq!(labels.label(&format!("job-{i}")), format!("job-{i}"));
        }
        assert_eq!(labels.label("one-too-many"), OTHER_JOB);
        assert_eq!(labels.label("job-0"), "job-0");
    }
}
