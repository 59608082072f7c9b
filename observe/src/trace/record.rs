//! The rows the trace writes: one [`ExecutionRecord`] per item run (`JOB_EXECUTION_LOG`), a few
//! [`StatusRecord`]s per fire (`JOB_STATUS_TRACE_LOG`), with ElasticJob's column values.

use chrono::NaiveDateTime;
use shardcron_core::job::ExecutionSource;

/// `JOB_EXECUTION_LOG.failure_cause` is `VARCHAR(4000)`: longer causes are cut to this many
/// characters.
pub const MAX_FAILURE_CAUSE_CHARS: usize = 4000;

/// One row of `JOB_EXECUTION_LOG`: one item of one fire on one instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecutionRecord {
    /// A UUID.
    pub id: String,
    pub job_name: String,
    pub task_id: String,
    pub hostname: String,
    pub ip: String,
    pub sharding_item: i32,
    /// `NORMAL_TRIGGER`, `MISFIRE`, `FAILOVER` (ElasticJob's) or `MANUAL_TRIGGER` (an
    /// operator's trigger, which ElasticJob records as a normal one).
    pub execution_source: &'static str,
    pub failure_cause: Option<String>,
    pub is_success: bool,
    /// UTC.
    pub start_time: NaiveDateTime,
    /// UTC; `None` while the item runs.
    pub complete_time: Option<NaiveDateTime>,
}

/// One row of `JOB_STATUS_TRACE_LOG`: a state of one fire on one instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusRecord {
    /// A UUID.
    pub id: String,
    pub job_name: String,
    /// Empty: ElasticJob fills it only in its cloud scheduler.
    pub original_task_id: String,
    pub task_id: String,
    /// The instance's IP.
    pub slave_id: String,
    /// `LITE_EXECUTOR`, as ElasticJob-Lite writes.
    pub source: &'static str,
    /// The task id's type: `READY`, `MISFIRE`, `FAILOVER` or `MANUAL`.
    pub execution_type: &'static str,
    /// The fire's items here, comma-separated.
    pub sharding_item: String,
    /// `TASK_STAGING`, `TASK_RUNNING`, `TASK_FINISHED`, `TASK_ERROR` or `TASK_KILLED`.
    pub state: &'static str,
    pub message: String,
    /// UTC.
    pub creation_time: NaiveDateTime,
}

/// What the writer is asked to do with a row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceRecord {
    /// Insert the row of an item that started (nothing if it is already there).
    ExecutionStarted(ExecutionRecord),
    /// Insert or complete the row of an item that ended.
    ExecutionFinished(ExecutionRecord),
    /// Insert a status row.
    Status(StatusRecord),
}

/// ElasticJob's `execution_source` for a fire's source.
pub fn execution_source(source: ExecutionSource) -> &'static str {
    match source {
        ExecutionSource::Normal => "NORMAL_TRIGGER",
        ExecutionSource::Misfire => "MISFIRE",
        ExecutionSource::Failover => "FAILOVER",
        ExecutionSource::Manual => "MANUAL_TRIGGER",
        _ => "NORMAL_TRIGGER",
    }
}

/// Epoch milliseconds as a UTC timestamp (the epoch itself for a value out of range).
pub fn timestamp(ms: i64) -> NaiveDateTime {
    chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default().naive_utc()
}

/// `text` cut to `max` characters.
pub fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => text[..at].to_owned(),
        None => text.to_owned(),
    }
}

/// The IP part of an instance id (`{ip}@-@{pid}[@-@{suffix}]`).
pub fn ip_of(instance: &str) -> &str {
    instance.split("@-@").next().unwrap_or(instance)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers() {
        assert_eq!(truncate("héllo", 2), "hé");
        assert_eq!(truncate("hi", 10), "hi");
        assert_eq!(ip_of("10.0.0.1@-@42@-@a"), "10.0.0.1");
        assert_eq!(timestamp(1_500).to_string(), "1970-01-01 00:00:01.500");
        assert_eq!(execution_source(ExecutionSource::Failover), "FAILOVER");
    }
}
