//! The searches of ElasticJob-UI's "job trace" and "history status" pages
//! (`POST /api/event-trace/execution` and `/status`): filters, paging and sorting, with its field
//! names, so a console can hand a request body straight to them.

use chrono::NaiveDateTime;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::record::timestamp;
use super::TraceError;

/// The largest page a search returns.
pub const MAX_PAGE_SIZE: u32 = 1000;

/// A search of `JOB_EXECUTION_LOG` (ElasticJob-UI's `FindJobExecutionEventsRequest`). Every
/// filter is optional; times are epoch milliseconds or `"YYYY-MM-DD HH:MM:SS"` (UTC).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExecutionQuery {
    pub job_name: Option<String>,
    pub ip: Option<String>,
    pub is_success: Option<bool>,
    #[serde(deserialize_with = "time_filter")]
    pub start_time_from: Option<i64>,
    #[serde(deserialize_with = "time_filter")]
    pub start_time_to: Option<i64>,
    #[serde(flatten)]
    pub paging: Paging,
}

/// A search of `JOB_STATUS_TRACE_LOG` (ElasticJob-UI's `FindJobStatusTraceEventsRequest`); the
/// time filters apply to `creation_time`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StatusQuery {
    pub job_name: Option<String>,
    pub source: Option<String>,
    pub execution_type: Option<String>,
    pub state: Option<String>,
    #[serde(deserialize_with = "time_filter")]
    pub start_time_from: Option<i64>,
    #[serde(deserialize_with = "time_filter")]
    pub start_time_to: Option<i64>,
    #[serde(flatten)]
    pub paging: Paging,
}

/// Which page, sorted how. Flattened into the queries' JSON (`pageSize`, `pageNumber`,
/// `sortBy`, `orderType`), as in ElasticJob-UI.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Paging {
    /// Rows per page, 1 to [`MAX_PAGE_SIZE`]; default 10.
    pub page_size: u32,
    /// From 1; default 1.
    pub page_number: u32,
    /// A field of the rows (`startTime`, `jobName`, ...; camelCase or the column's name);
    /// default the time column.
    pub sort_by: Option<String>,
    /// `ASC` or `DESC` (default).
    pub order_type: Option<String>,
}

impl Default for Paging {
    fn default() -> Self {
        Paging { page_size: 10, page_number: 1, sort_by: None, order_type: None }
    }
}

/// One page of a search (ElasticJob-UI's `BasePageResponse`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Page<T> {
    /// Rows matching the filters, on every page.
    pub total: u64,
    pub rows: Vec<T>,
}

/// A row of `JOB_EXECUTION_LOG`, with the JSON names of ElasticJob's `JobExecutionEvent`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, sqlx::FromRow)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionRow {
    pub id: String,
    pub job_name: String,
    pub task_id: String,
    pub hostname: String,
    pub ip: String,
    pub sharding_item: i32,
    #[serde(rename = "source")]
    pub execution_source: String,
    pub failure_cause: Option<String>,
    #[serde(rename = "success")]
    pub is_success: bool,
    /// UTC; epoch milliseconds in JSON.
    #[serde(serialize_with = "epoch_ms")]
    pub start_time: Option<NaiveDateTime>,
    #[serde(serialize_with = "epoch_ms")]
    pub complete_time: Option<NaiveDateTime>,
}

/// A row of `JOB_STATUS_TRACE_LOG`, with the JSON names of ElasticJob's `JobStatusTraceEvent`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, sqlx::FromRow)]
#[serde(rename_all = "camelCase")]
pub struct StatusRow {
    pub id: String,
    pub job_name: String,
    pub original_task_id: String,
    pub task_id: String,
    pub slave_id: String,
    pub source: String,
    pub execution_type: String,
    pub sharding_item: String,
    pub state: String,
    pub message: Option<String>,
    #[serde(serialize_with = "epoch_ms")]
    pub creation_time: Option<NaiveDateTime>,
}

pub(crate) const EXECUTION_COLUMNS: &str = "id, job_name, task_id, hostname, ip, sharding_item, \
     execution_source, failure_cause, is_success, start_time, complete_time";
pub(crate) const STATUS_COLUMNS: &str = "id, job_name, original_task_id, task_id, slave_id, \
     source, execution_type, sharding_item, state, message, creation_time";

/// The sort fields of each table: (JSON name, column).
const EXECUTION_SORTS: [(&str, &str); 11] = [
    ("id", "id"),
    ("jobName", "job_name"),
    ("taskId", "task_id"),
    ("hostname", "hostname"),
    ("ip", "ip"),
    ("shardingItem", "sharding_item"),
    ("source", "execution_source"),
    ("failureCause", "failure_cause"),
    ("success", "is_success"),
    ("startTime", "start_time"),
    ("completeTime", "complete_time"),
];
const STATUS_SORTS: [(&str, &str); 11] = [
    ("id", "id"),
    ("jobName", "job_name"),
    ("originalTaskId", "original_task_id"),
    ("taskId", "task_id"),
    ("slaveId", "slave_id"),
    ("source", "source"),
    ("executionType", "execution_type"),
    ("shardingItem", "sharding_item"),
    ("state", "state"),
    ("message", "message"),
    ("creationTime", "creation_time"),
];

/// A validated [`Paging`]: a known column, a direction, a limit and an offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Plan {
    pub column: &'static str,
    pub descending: bool,
    pub limit: i64,
    pub offset: i64,
}

impl Paging {
    fn plan(
        &self,
        sorts: &[(&'static str, &'static str)],
        default: &'static str,
    ) -> Result<Plan, TraceError> {
        let invalid = |field: &'static str, value: String, reason: String| {
            TraceError::InvalidQuery { field, value, reason }
        };
        if self.page_size == 0 || self.page_size > MAX_PAGE_SIZE {
            return Err(invalid(
                "pageSize",
                self.page_size.to_string(),
                format!("must be 1 to {MAX_PAGE_SIZE}"),
            ));
        }
        if self.page_number == 0 {
            return Err(invalid("pageNumber", "0".into(), "pages are numbered from 1".into()));
        }
        let column = match self.sort_by.as_deref().filter(|s| !s.is_empty()) {
            None => default,
            Some(by) => sorts
                .iter()
                .find(|(json, column)| {
                    json.eq_ignore_ascii_case(by) || column.eq_ignore_ascii_case(by)
                })
                .map(|(_, column)| *column)
                .ok_or_else(|| {
                    let known: Vec<&str> = sorts.iter().map(|(json, _)| *json).collect();
                    invalid(
                        "sortBy",
                        by.to_owned(),
                        format!("expected one of {}", known.join(", ")),
                    )
                })?,
        };
        let descending = match self.order_type.as_deref().map(str::to_ascii_uppercase).as_deref() {
            None | Some("") | Some("DESC") => true,
            Some("ASC") => false,
            Some(_) => {
                let value = self.order_type.clone().unwrap_or_default();
                return Err(invalid("orderType", value, "expected ASC or DESC".into()));
            }
        };
        let limit = i64::from(self.page_size);
        Ok(Plan { column, descending, limit, offset: (i64::from(self.page_number) - 1) * limit })
    }
}

impl ExecutionQuery {
    pub(crate) fn plan(&self) -> Result<Plan, TraceError> {
        self.paging.plan(&EXECUTION_SORTS, "start_time")
    }
}

impl StatusQuery {
    pub(crate) fn plan(&self) -> Result<Plan, TraceError> {
        self.paging.plan(&STATUS_SORTS, "creation_time")
    }
}

/// An empty filter is no filter (ElasticJob-UI sends `""` for a cleared field).
pub(crate) fn given(filter: &Option<String>) -> Option<&str> {
    filter.as_deref().filter(|value| !value.is_empty())
}

/// `prefix%`, with the prefix's `%`, `_` and `\` escaped (for `LIKE ... ESCAPE '\'`).
pub(crate) fn like_prefix(prefix: &str) -> String {
    let mut pattern = String::with_capacity(prefix.len() + 1);
    for c in prefix.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

pub(crate) fn time(ms: Option<i64>) -> Option<NaiveDateTime> {
    ms.map(timestamp)
}

fn epoch_ms<S: Serializer>(time: &Option<NaiveDateTime>, s: S) -> Result<S::Ok, S::Error> {
    match time {
        Some(t) => s.serialize_i64(t.and_utc().timestamp_millis()),
        None => s.serialize_none(),
    }
}

/// Epoch milliseconds, or a `YYYY-MM-DD HH:MM:SS[.fff]` text in UTC, or null / `""`.
fn time_filter<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Given {
        Ms(i64),
        Text(String),
    }
    match Option::<Given>::deserialize(d)? {
        None => Ok(None),
        Some(Given::Ms(ms)) => Ok(Some(ms)),
        Some(Given::Text(text)) if text.trim().is_empty() => Ok(None),
        Some(Given::Text(text)) => {
            let text = text.trim();
            ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S"]
                .iter()
                .find_map(|format| NaiveDateTime::parse_from_str(text, format).ok())
                .or_else(|| {
                    chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
                        .ok()
                        .and_then(|d| d.and_hms_opt(0, 0, 0))
                })
                .map(|t| Some(t.and_utc().timestamp_millis()))
                .ok_or_else(|| {
                    serde::de::Error::custom(format!(
                        "{text:?} is not a time: expected epoch milliseconds or \
                         \"YYYY-MM-DD HH:MM:SS\" (UTC)"
                    ))
                })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paging_is_validated_and_sort_fields_are_whitelisted() {
        let q: ExecutionQuery = serde_json::from_str(
            r#"{"jobName":"orders","pageSize":20,"pageNumber":3,"sortBy":"jobName","orderType":"asc",
                "startTimeFrom":"2026-01-02 03:04:05","startTimeTo":1700000000000}"#,
        )
        .unwrap();
        assert_eq!(q.job_name.as_deref(), Some("orders"));
        assert_eq!(q.start_time_from, Some(1_767_323_045_000));
        assert_eq!(q.start_time_to, Some(1_700_000_000_000));
        let plan = q.plan().unwrap();
        assert_eq!(plan, Plan { column: "job_name", descending: false, limit: 20, offset: 40 });

        let default = ExecutionQuery::default().plan().unwrap();
        assert_eq!(default, Plan { column: "start_time", descending: true, limit: 10, offset: 0 });

        let bad = |json: &str| {
            serde_json::from_str::<StatusQuery>(json).unwrap().plan().unwrap_err().to_string()
        };
        assert!(bad(r#"{"sortBy":"1; DROP TABLE x"}"#).contains("sortBy"));
        assert!(bad(r#"{"orderType":"sideways"}"#).contains("ASC or DESC"));
        assert!(bad(r#"{"pageSize":0}"#).contains("pageSize"));
        assert!(bad(r#"{"pageNumber":0}"#).contains("from 1"));
        assert!(serde_json::from_str::<StatusQuery>(r#"{"startTimeFrom":"yesterday"}"#).is_err());
    }

    #[test]
    fn like_patterns_escape_wildcards() {
        assert_eq!(like_prefix("a_b%c\\"), "a\\_b\\%c\\\\%");
    }
}
