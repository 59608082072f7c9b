//! Where the trace lives: a SQLite file or a PostgreSQL database, chosen by the URL, with the
//! schema ElasticJob's `tracing-rdb` creates (so its console's SQL and an operator's habits work).

use std::str::FromStr;
use std::time::Duration;

use chrono::NaiveDateTime;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{PgPool, SqlitePool};

use super::query::{ExecutionQuery, ExecutionRow, Page, StatusQuery, StatusRow};
use super::record::TraceRecord;
use super::TraceError;

/// At most this many suggestions from the autocomplete searches.
pub const NAME_SUGGESTIONS: usize = 100;

/// How long a connection attempt or a pooled connection may be waited for: past it the writer
/// counts the database unreachable and retries later.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// The schema, as versions applied in order and recorded in `shardcron_trace_schema`. Version 1
/// is ElasticJob's DDL (`CREATE ... IF NOT EXISTS`, so tables ElasticJob created are kept);
/// later versions only add. Both backends take the same statements.
pub(crate) const MIGRATIONS: &[(i32, &[&str])] = &[
    (
        1,
        &[
            "CREATE TABLE IF NOT EXISTS JOB_EXECUTION_LOG (id VARCHAR(40) NOT NULL, \
             job_name VARCHAR(100) NOT NULL, task_id VARCHAR(255) NOT NULL, \
             hostname VARCHAR(255) NOT NULL, ip VARCHAR(50) NOT NULL, sharding_item INT NOT NULL, \
             execution_source VARCHAR(20) NOT NULL, failure_cause VARCHAR(4000) NULL, \
             is_success BOOLEAN NOT NULL, start_time TIMESTAMP NULL, complete_time TIMESTAMP NULL, \
             PRIMARY KEY (id))",
            "CREATE TABLE IF NOT EXISTS JOB_STATUS_TRACE_LOG (id VARCHAR(40) NOT NULL, \
             job_name VARCHAR(100) NOT NULL, original_task_id VARCHAR(255) NOT NULL, \
             task_id VARCHAR(255) NOT NULL, slave_id VARCHAR(50) NOT NULL, \
             source VARCHAR(50) NOT NULL, execution_type VARCHAR(20) NOT NULL, \
             sharding_item VARCHAR(100) NOT NULL, state VARCHAR(20) NOT NULL, \
             message VARCHAR(4000) NULL, creation_time TIMESTAMP NULL, PRIMARY KEY (id))",
            "CREATE INDEX IF NOT EXISTS TASK_ID_STATE_INDEX ON JOB_STATUS_TRACE_LOG (task_id, state)",
        ],
    ),
    (
        // The retention purge and the searches filter on the time columns.
        2,
        &[
            "CREATE INDEX IF NOT EXISTS JOB_EXECUTION_LOG_START_TIME_INDEX \
             ON JOB_EXECUTION_LOG (start_time)",
            "CREATE INDEX IF NOT EXISTS JOB_STATUS_TRACE_LOG_CREATION_TIME_INDEX \
             ON JOB_STATUS_TRACE_LOG (creation_time)",
        ],
    ),
];

mod sqlite {
    type Db = sqlx::Sqlite;
    /// SQLite runs one writing transaction at a time: no lock needed.
    const MIGRATION_LOCK: Option<&str> = None;
    include!("sql.rs");
}

mod postgres {
    type Db = sqlx::Postgres;
    /// Workers starting together would race on `CREATE TABLE IF NOT EXISTS` (PostgreSQL checks
    /// the catalog before it locks); one transaction-scoped advisory lock serialises them.
    const MIGRATION_LOCK: Option<&str> = Some("SELECT pg_advisory_xact_lock(7305372961)");
    include!("sql.rs");
}

/// A parsed trace URL.
#[derive(Clone, Debug)]
pub(crate) enum Target {
    Sqlite(SqliteConnectOptions),
    Postgres(PgConnectOptions),
}

impl Target {
    /// `postgres://` or `postgresql://` URLs go to PostgreSQL; `sqlite:` URLs and anything else
    /// (a file path) to SQLite, the file created when missing.
    pub fn parse(url: &str) -> Result<Target, TraceError> {
        let invalid = |reason: String| TraceError::InvalidUrl { url: redact(url), reason };
        let url = url.trim();
        if url.is_empty() {
            return Err(invalid("empty: give a SQLite file path or a postgres:// URL".into()));
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let options = PgConnectOptions::from_str(url).map_err(|e| invalid(e.to_string()))?;
            return Ok(Target::Postgres(options.application_name("shardcron-trace")));
        }
        let options = if url.starts_with("sqlite:") {
            SqliteConnectOptions::from_str(url).map_err(|e| invalid(e.to_string()))?
        } else if url.contains("://") {
            return Err(invalid(
                "unknown scheme: expected postgres://, postgresql://, sqlite: or a file path"
                    .into(),
            ));
        } else {
            SqliteConnectOptions::new().filename(url)
        };
        Ok(Target::Sqlite(
            options
                .create_if_missing(true)
                // Readers (a console) do not block the writer, nor it them.
                .journal_mode(SqliteJournalMode::Wal)
                // With WAL, NORMAL cannot corrupt the file; a power cut may lose the last
                // batches, which a trace can afford for not syncing every commit.
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(ACQUIRE_TIMEOUT),
        ))
    }

    /// Opens a pool (SQLite: creates the file). Fails when the database cannot be reached.
    pub async fn connect(&self) -> Result<Store, sqlx::Error> {
        match self {
            Target::Sqlite(options) => SqlitePoolOptions::new()
                .max_connections(2)
                .acquire_timeout(ACQUIRE_TIMEOUT)
                .connect_with(options.clone())
                .await
                .map(Store::Sqlite),
            Target::Postgres(options) => PgPoolOptions::new()
                .max_connections(4)
                .acquire_timeout(ACQUIRE_TIMEOUT)
                .connect_with(options.clone())
                .await
                .map(Store::Postgres),
        }
    }
}

/// `postgres://user:secret@host/db` → `postgres://user:***@host/db`, for messages.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let Some((credentials, host)) = rest.split_once('@') else { return url.to_owned() };
    match credentials.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_owned(),
    }
}

/// An open trace database.
#[derive(Clone, Debug)]
pub(crate) enum Store {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

impl Store {
    pub async fn migrate(&self) -> Result<(), sqlx::Error> {
        match self {
            Store::Sqlite(pool) => sqlite::migrate(pool).await,
            Store::Postgres(pool) => postgres::migrate(pool).await,
        }
    }

    pub async fn write(&self, records: Vec<TraceRecord>) -> Result<(), sqlx::Error> {
        match self {
            Store::Sqlite(pool) => sqlite::write(pool, records).await,
            Store::Postgres(pool) => postgres::write(pool, records).await,
        }
    }

    pub async fn purge(&self, before: NaiveDateTime) -> Result<u64, sqlx::Error> {
        match self {
            Store::Sqlite(pool) => sqlite::purge(pool, before).await,
            Store::Postgres(pool) => postgres::purge(pool, before).await,
        }
    }

    pub async fn executions(&self, q: &ExecutionQuery) -> Result<Page<ExecutionRow>, TraceError> {
        match self {
            Store::Sqlite(pool) => sqlite::executions(pool, q).await,
            Store::Postgres(pool) => postgres::executions(pool, q).await,
        }
    }

    pub async fn statuses(&self, q: &StatusQuery) -> Result<Page<StatusRow>, TraceError> {
        match self {
            Store::Sqlite(pool) => sqlite::statuses(pool, q).await,
            Store::Postgres(pool) => postgres::statuses(pool, q).await,
        }
    }

    pub async fn distinct(
        &self,
        table: &str,
        column: &str,
        prefix: Option<&str>,
    ) -> Result<Vec<String>, sqlx::Error> {
        match self {
            Store::Sqlite(pool) => sqlite::distinct(pool, table, column, prefix).await,
            Store::Postgres(pool) => postgres::distinct(pool, table, column, prefix).await,
        }
    }

    pub async fn close(&self) {
        match self {
            Store::Sqlite(pool) => pool.close().await,
            Store::Postgres(pool) => pool.close().await,
        }
    }
}

/// Whether a failed write may succeed later unchanged: the database was unreachable, restarting,
/// busy or out of resources, as opposed to refusing the rows themselves.
pub(crate) fn is_transient(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Database(db) => {
            let code = db.code().unwrap_or_default();
            // PostgreSQL SQLSTATE classes: 08 connection, 53 resources, 57 operator
            // intervention (shutdown), 40 transaction rollback (serialisation, deadlock).
            // SQLite: 5 BUSY, 6 LOCKED (and their extended codes), 10 IOERR, 13 FULL.
            ["08", "53", "57", "40"].iter().any(|class| code.starts_with(class))
                || matches!(code.parse::<i32>().map(|c| c & 0xff), Ok(5 | 6 | 10 | 13))
        }
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_pick_the_backend_and_bad_ones_are_refused() {
        assert!(matches!(Target::parse("trace.db"), Ok(Target::Sqlite(_))));
        assert!(matches!(Target::parse("sqlite://trace.db"), Ok(Target::Sqlite(_))));
        assert!(matches!(Target::parse("postgres://u:p@127.0.0.1:5/db"), Ok(Target::Postgres(_))));
        let e = Target::parse("mysql://u:secret@h/db").unwrap_err().to_string();
        assert!(e.contains("unknown scheme") && e.contains("u:***@h"), "{e}");
        assert!(Target::parse(" ").is_err());
        assert!(Target::parse("postgres://u@h:notaport/db").is_err());
    }
}
