// The statements of the trace, written once for both backends: `store/mod.rs` includes this file
// into a module per database with `Db` set to its sqlx type. (`include!` rather than generic
// functions: sqlx's bounds for "any database whose executor accepts these binds" would bury the
// SQL under trait bounds.) The SQL itself is portable: both backends take `ON CONFLICT`,
// `LIMIT`/`OFFSET` and `LIKE ... ESCAPE`.

use chrono::NaiveDateTime;
use sqlx::{Pool, QueryBuilder};

use crate::trace::query::{
    given, like_prefix, time, ExecutionQuery, ExecutionRow, Page, StatusQuery, StatusRow,
    EXECUTION_COLUMNS, STATUS_COLUMNS,
};
use crate::trace::record::{ExecutionRecord, TraceRecord};
use crate::trace::store::{MIGRATIONS, NAME_SUGGESTIONS};

/// Applies the migrations the database has not seen, in one transaction.
pub(crate) async fn migrate(pool: &Pool<Db>) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin().await?;
    if let Some(lock) = MIGRATION_LOCK {
        sqlx::query(lock).execute(&mut *tx).await?;
    }
    sqlx::query("CREATE TABLE IF NOT EXISTS shardcron_trace_schema (version INTEGER PRIMARY KEY)")
        .execute(&mut *tx)
        .await?;
    let current: Option<i32> =
        sqlx::query_scalar("SELECT MAX(version) FROM shardcron_trace_schema")
            .fetch_one(&mut *tx)
            .await?;
    for (version, statements) in MIGRATIONS {
        if current.is_some_and(|current| current >= *version) {
            continue;
        }
        for statement in *statements {
            sqlx::query(statement).execute(&mut *tx).await?;
        }
        let mut insert = QueryBuilder::<Db>::new("INSERT INTO shardcron_trace_schema (version) VALUES (");
        insert.push_bind(*version).push(") ON CONFLICT (version) DO NOTHING");
        insert.build().execute(&mut *tx).await?;
    }
    tx.commit().await
}

fn push_execution_values(qb: &mut QueryBuilder<'_, Db>, rows: Vec<ExecutionRecord>) {
    qb.push(format_args!("INSERT INTO JOB_EXECUTION_LOG ({EXECUTION_COLUMNS}) ").to_string());
    qb.push_values(rows, |mut b, r| {
        b.push_bind(r.id)
            .push_bind(r.job_name)
            .push_bind(r.task_id)
            .push_bind(r.hostname)
            .push_bind(r.ip)
            .push_bind(r.sharding_item)
            .push_bind(r.execution_source)
            .push_bind(r.failure_cause)
            .push_bind(r.is_success)
            .push_bind(r.start_time)
            .push_bind(r.complete_time);
    });
}

/// Writes `records` in one transaction: status rows and started items are inserted (nothing
/// if already there), ended items inserted or completed. Order does not matter: an ended item's
/// record carries its whole row. The values move into the statements (no copy per row).
pub(crate) async fn write(pool: &Pool<Db>, records: Vec<TraceRecord>) -> Result<(), sqlx::Error> {
    let mut started = Vec::new();
    let mut finished = Vec::new();
    let mut statuses = Vec::new();
    for record in records {
        match record {
            TraceRecord::ExecutionStarted(r) => started.push(r),
            TraceRecord::ExecutionFinished(r) => finished.push(r),
            TraceRecord::Status(r) => statuses.push(r),
        }
    }
    // An item that started and ended within the batch is one insert of its whole row.
    if !started.is_empty() && !finished.is_empty() {
        let ended: std::collections::HashSet<&str> =
            finished.iter().map(|r| r.id.as_str()).collect();
        started.retain(|r| !ended.contains(r.id.as_str()));
    }
    let mut tx = pool.begin().await?;
    for (rows, persistent) in chunks(started) {
        let mut qb = QueryBuilder::<Db>::new("");
        push_execution_values(&mut qb, rows);
        qb.push(" ON CONFLICT (id) DO NOTHING");
        qb.build().persistent(persistent).execute(&mut *tx).await?;
    }
    for (rows, persistent) in chunks(finished) {
        let mut qb = QueryBuilder::<Db>::new("");
        push_execution_values(&mut qb, rows);
        qb.push(
            " ON CONFLICT (id) DO UPDATE SET is_success = excluded.is_success, \
             failure_cause = excluded.failure_cause, complete_time = excluded.complete_time",
        );
        qb.build().persistent(persistent).execute(&mut *tx).await?;
    }
    for (rows, persistent) in chunks(statuses) {
        let mut qb = QueryBuilder::<Db>::new(format!(
            "INSERT INTO JOB_STATUS_TRACE_LOG ({STATUS_COLUMNS}) "
        ));
        qb.push_values(rows, |mut b, r| {
            b.push_bind(r.id)
                .push_bind(r.job_name)
                .push_bind(r.original_task_id)
                .push_bind(r.task_id)
                .push_bind(r.slave_id)
                .push_bind(r.source)
                .push_bind(r.execution_type)
                .push_bind(r.sharding_item)
                .push_bind(r.state)
                .push_bind(r.message)
                .push_bind(r.creation_time);
        });
        qb.push(" ON CONFLICT (id) DO NOTHING");
        qb.build().persistent(persistent).execute(&mut *tx).await?;
    }
    tx.commit().await
}

/// Rows per insert statement. A statement of exactly this many rows always has the same text,
/// so the database prepares it once and keeps it (`true`); the last, shorter one of a batch is
/// prepared for that batch alone (`false`), or every batch size would be kept.
const ROWS_PER_STATEMENT: usize = 128;

fn chunks<T>(rows: Vec<T>) -> Vec<(Vec<T>, bool)> {
    let mut out = Vec::with_capacity(rows.len().div_ceil(ROWS_PER_STATEMENT));
    let mut rows = rows.into_iter().peekable();
    while rows.peek().is_some() {
        let chunk: Vec<T> = rows.by_ref().take(ROWS_PER_STATEMENT).collect();
        let full = chunk.len() == ROWS_PER_STATEMENT;
        out.push((chunk, full));
    }
    out
}

/// Removes the rows older than `before`; returns how many.
pub(crate) async fn purge(pool: &Pool<Db>, before: NaiveDateTime) -> Result<u64, sqlx::Error> {
    let mut removed = 0;
    let mut qb = QueryBuilder::<Db>::new("DELETE FROM JOB_EXECUTION_LOG WHERE start_time < ");
    qb.push_bind(before);
    removed += qb.build().execute(pool).await?.rows_affected();
    let mut qb = QueryBuilder::<Db>::new("DELETE FROM JOB_STATUS_TRACE_LOG WHERE creation_time < ");
    qb.push_bind(before);
    removed += qb.build().execute(pool).await?.rows_affected();
    Ok(removed)
}

/// ` WHERE a = ? AND b = ?...` for the given filters.
struct Filters<'q, 'a> {
    qb: &'q mut QueryBuilder<'a, Db>,
    any: bool,
}

impl<'q, 'a> Filters<'q, 'a> {
    fn new(qb: &'q mut QueryBuilder<'a, Db>) -> Self {
        Filters { qb, any: false }
    }

    fn and(&mut self, condition: &str) -> &mut QueryBuilder<'a, Db> {
        self.qb.push(if self.any { " AND " } else { " WHERE " });
        self.any = true;
        self.qb.push(condition)
    }

    fn text(&mut self, column: &str, value: Option<&str>) {
        if let Some(value) = value {
            self.and(&format!("{column} = ")).push_bind(value.to_owned());
        }
    }

    fn times(&mut self, column: &str, from: Option<NaiveDateTime>, to: Option<NaiveDateTime>) {
        if let Some(from) = from {
            self.and(&format!("{column} >= ")).push_bind(from);
        }
        if let Some(to) = to {
            self.and(&format!("{column} <= ")).push_bind(to);
        }
    }
}

fn execution_filters(qb: &mut QueryBuilder<'_, Db>, q: &ExecutionQuery) {
    let mut f = Filters::new(qb);
    f.text("job_name", given(&q.job_name));
    f.text("ip", given(&q.ip));
    if let Some(success) = q.is_success {
        f.and("is_success = ").push_bind(success);
    }
    f.times("start_time", time(q.start_time_from), time(q.start_time_to));
}

fn status_filters(qb: &mut QueryBuilder<'_, Db>, q: &StatusQuery) {
    let mut f = Filters::new(qb);
    f.text("job_name", given(&q.job_name));
    f.text("source", given(&q.source));
    f.text("execution_type", given(&q.execution_type));
    f.text("state", given(&q.state));
    f.times("creation_time", time(q.start_time_from), time(q.start_time_to));
}

pub(crate) async fn executions(
    pool: &Pool<Db>,
    q: &ExecutionQuery,
) -> Result<Page<ExecutionRow>, crate::trace::TraceError> {
    let plan = q.plan()?;
    let mut count = QueryBuilder::<Db>::new("SELECT COUNT(*) FROM JOB_EXECUTION_LOG");
    execution_filters(&mut count, q);
    let total: i64 = count.build_query_scalar().fetch_one(pool).await?;
    let mut select =
        QueryBuilder::<Db>::new(format!("SELECT {EXECUTION_COLUMNS} FROM JOB_EXECUTION_LOG"));
    execution_filters(&mut select, q);
    let direction = if plan.descending { "DESC" } else { "ASC" };
    // `id` breaks ties, so that paging is stable.
    select.push(format!(" ORDER BY {} {direction}, id {direction} LIMIT ", plan.column));
    select.push_bind(plan.limit).push(" OFFSET ").push_bind(plan.offset);
    let rows = select.build_query_as::<ExecutionRow>().fetch_all(pool).await?;
    Ok(Page { total: u64::try_from(total).unwrap_or(0), rows })
}

pub(crate) async fn statuses(
    pool: &Pool<Db>,
    q: &StatusQuery,
) -> Result<Page<StatusRow>, crate::trace::TraceError> {
    let plan = q.plan()?;
    let mut count = QueryBuilder::<Db>::new("SELECT COUNT(*) FROM JOB_STATUS_TRACE_LOG");
    status_filters(&mut count, q);
    let total: i64 = count.build_query_scalar().fetch_one(pool).await?;
    let mut select =
        QueryBuilder::<Db>::new(format!("SELECT {STATUS_COLUMNS} FROM JOB_STATUS_TRACE_LOG"));
    status_filters(&mut select, q);
    let direction = if plan.descending { "DESC" } else { "ASC" };
    select.push(format!(" ORDER BY {} {direction}, id {direction} LIMIT ", plan.column));
    select.push_bind(plan.limit).push(" OFFSET ").push_bind(plan.offset);
    let rows = select.build_query_as::<StatusRow>().fetch_all(pool).await?;
    Ok(Page { total: u64::try_from(total).unwrap_or(0), rows })
}

/// The distinct values of `column` of `table` that start with `prefix`, sorted, at most
/// [`NAME_SUGGESTIONS`]. `table` and `column` are the caller's constants, never input.
pub(crate) async fn distinct(
    pool: &Pool<Db>,
    table: &str,
    column: &str,
    prefix: Option<&str>,
) -> Result<Vec<String>, sqlx::Error> {
    let mut qb = QueryBuilder::<Db>::new(format!("SELECT DISTINCT {column} FROM {table}"));
    if let Some(prefix) = prefix.filter(|p| !p.is_empty()) {
        qb.push(format!(" WHERE {column} LIKE "))
            .push_bind(like_prefix(prefix))
            .push(" ESCAPE '\\'");
    }
    qb.push(format!(" ORDER BY {column} LIMIT {NAME_SUGGESTIONS}"));
    qb.build_query_scalar().fetch_all(pool).await
}

#[cfg(test)]
mod chunk_tests {
    use super::{chunks, ROWS_PER_STATEMENT};

    #[test]
    fn full_statements_are_kept_and_the_rest_is_not() {
        let rows: Vec<usize> = (0..ROWS_PER_STATEMENT * 2 + 3).collect();
        let cut = chunks(rows.clone());
        let sizes: Vec<(usize, bool)> = cut.iter().map(|(c, keep)| (c.len(), *keep)).collect();
        assert_eq!(
            sizes,
            vec![(ROWS_PER_STATEMENT, true), (ROWS_PER_STATEMENT, true), (3, false)]
        );
        let again: Vec<usize> = cut.into_iter().flat_map(|(c, _)| c).collect();
        assert_eq!(again, rows, "every row once, in order");
        assert!(chunks(Vec::<usize>::new()).is_empty());
    }
}
