//! The console's event-trace searches over HTTP, on a real SQLite file and on the PostgreSQL the
//! test script starts: rows are written by the real trace writer (fires run through the core's
//! executor with the trace's listener), then searched through a console listening on a loopback
//! port, with ElasticJob-UI's filters, paging, sorting, autocomplete and wrapper; bad searches
//! are refused in the wrapper; on PostgreSQL the database goes away and comes back.
//!
//! Without `SHARDCRON_POSTGRES` the PostgreSQL test prints a note and passes, unless
//! `SHARDCRON_REQUIRE_SERVERS=1` (set by `scripts/test.sh`).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure report

use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};
use shardcron_console::{Console, ConsoleOptions};
use shardcron_core::handles::{Clock, Handles};
use shardcron_core::job::{ExecutionSource, Executor, FireInfo, FireRequest, Job, ShardingContext};
use shardcron_core::registry::CoordinatorRegistry;
use shardcron_observe::{Trace, TraceConfig, TraceReader};
use shardcron_registry_mem::{ConnectOptions, MemServer};

/// 2021-06-01 00:00:00 UTC: the first fire.
const T0: i64 = 1_622_505_600_000;
const IP_A: &str = "192.0.2.10";
const IP_B: &str = "192.0.2.20";

/// A clock the test sets: the trace and the executor read their times from it, so every row's
/// time is known.
#[derive(Debug, Default)]
struct SetClock(AtomicI64);

impl Clock for SetClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// An item whose parameter is `fail` fails; the others complete.
fn fails_on_parameter() -> Job {
    Job::from_fn(|ctx: ShardingContext| async move {
        if ctx.item_parameter == "fail" {
            return Err(format!("item {}: disk full", ctx.item).into());
        }
        Ok(())
    })
}

/// A trace and the clock it and the executor read.
struct Recorder {
    trace: Trace,
    clock: Arc<SetClock>,
}

impl Recorder {
    /// One fire of `items` (of 3) of `job` on `ip` at `at`, through the trace's listener;
    /// items in `failing` fail.
    async fn fire(
        &self,
        job: &str,
        ip: &str,
        at: i64,
        source: ExecutionSource,
        items: &[u32],
        failing: &[u32],
    ) {
        let clock = &self.clock;
        clock.0.store(at, Ordering::SeqCst);
        let info = FireInfo {
            job_name: job.to_owned(),
            instance: format!("{ip}@-@4242"),
            fire_time: shardcron_core::__private::time::from_epoch_ms(at),
            source,
            items: items.to_vec(),
        };
        let contexts = items
            .iter()
            .map(|&item| {
                let parameter = if failing.contains(&item) { "fail" } else { "" };
                ShardingContext::new(&info, 3, "", item, parameter)
            })
            .collect();
        let handles = Handles { clock: clock.clone(), ..Handles::real() };
        let request = FireRequest { info, contexts, max_parallel_items: 0 };
        Executor::new(handles)
            .with_listener(self.trace.listener())
            .run(&fails_on_parameter(), request)
            .await;
    }
}

/// A console on a loopback port, searching the trace at `url`; its base URL and its stop.
struct Served {
    base: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
    _server: MemServer,
}

async fn console(url: &str) -> Served {
    let server = MemServer::new(Handles::real());
    let registry: Arc<dyn CoordinatorRegistry> =
        Arc::new(server.connect(ConnectOptions::default().namespace("/trace")).unwrap());
    let options = ConsoleOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        trace: Some(TraceReader::open(url).await.unwrap()),
        ..ConsoleOptions::default()
    };
    let console = Console::bind(registry, options).await.unwrap();
    let base = format!("http://{}", console.local_addr());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        console
            .serve(async move {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    Served { base, stop: Some(stop), task, _server: server }
}

impl Served {
    /// Sends a request; the status and the JSON body.
    async fn call(&self, method: &str, path: &str, body: &str) -> (u16, Value) {
        let client: Client<HttpConnector, Full<Bytes>> =
            Client::builder(TokioExecutor::new()).build_http();
        let request = axum::http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_owned())))
            .unwrap();
        let response = client.request(request).await.unwrap();
        let status = response.status().as_u16();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| panic!("{path}: {e}: {}", String::from_utf8_lossy(&bytes)));
        (status, value)
    }

    /// A successful search's model (`{total, rows}` or a list of names).
    async fn model(&self, method: &str, path: &str, body: Value) -> Value {
        let (status, value) = self.call(method, path, &body.to_string()).await;
        assert_eq!(status, 200, "{path} {body}: {value}");
        assert_eq!(value["success"], true, "{path}: {value}");
        assert_eq!((&value["errorCode"], &value["errorMsg"]), (&json!(0), &Value::Null));
        value["model"].clone()
    }

    async fn executions(&self, body: Value) -> Value {
        self.model("POST", "/api/event-trace/execution", body).await
    }

    async fn statuses(&self, body: Value) -> Value {
        self.model("POST", "/api/event-trace/status", body).await
    }

    /// A refused request: its status, and an errorMsg that mentions `words`.
    async fn refused(&self, path: &str, body: &str, status: u16, words: &str) {
        let (got, value) = self.call("POST", path, body).await;
        assert_eq!(got, status, "{path} {body}: {value}");
        assert_eq!(value["success"], false);
        assert_eq!(value["errorCode"], status);
        assert_eq!(value["model"], Value::Null);
        let message = value["errorMsg"].as_str().unwrap();
        assert!(message.contains(words), "{body}: {message:?} should mention {words:?}");
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.task).await.unwrap();
    }
}

fn items(page: &Value) -> Vec<i64> {
    page["rows"].as_array().unwrap().iter().map(|r| r["shardingItem"].as_i64().unwrap()).collect()
}

fn column<'a>(page: &'a Value, name: &str) -> Vec<&'a str> {
    page["rows"].as_array().unwrap().iter().map(|r| r[name].as_str().unwrap_or("")).collect()
}

/// Names no other test, and no earlier run on the same database, uses.
fn unique(name: &str) -> String {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    format!("{name}-{}-{nanos}", std::process::id())
}

/// Writes three fires through the real trace writer and searches them through the console.
async fn searches_over_http(url: &str) -> Served {
    let clock = Arc::new(SetClock::default());
    let config = TraceConfig { retention: None, clock: clock.clone(), ..TraceConfig::new(url) };
    let trace = Trace::start(config).unwrap();
    trace.ready(Duration::from_secs(20)).await.unwrap();
    let (orders, billing) = (unique("orders"), unique("billing"));
    let (normal, failover) = (ExecutionSource::Normal, ExecutionSource::Failover);
    let r = Recorder { trace: trace.clone(), clock };
    r.fire(&orders, IP_A, T0, normal, &[0, 1, 2], &[1]).await;
    r.fire(&orders, IP_B, T0 + 60_000, failover, &[1], &[]).await;
    r.fire(&billing, IP_B, T0 + 120_000, normal, &[0, 1], &[]).await;
    assert!(trace.flush(Duration::from_secs(20)).await, "{:?}", trace.stats());
    trace.shutdown(Duration::from_secs(5)).await;
    assert_eq!(trace.stats().dropped + trace.stats().rejected, 0, "{:?}", trace.stats());

    let c = console(url).await;
    assert_eq!(c.model("GET", "/api/console", json!(null)).await["trace"], true);

    // Every item run of `orders`, newest first, with ElasticJob's JSON names.
    let page = c.executions(json!({"jobName": orders})).await;
    assert_eq!(page["total"], 4, "{page}");
    let first = &page["rows"][0];
    assert_eq!(first["source"], "FAILOVER");
    assert_eq!(
        (&first["ip"], &first["shardingItem"], &first["success"]),
        (&json!(IP_B), &json!(1), &json!(true))
    );
    assert_eq!(
        (&first["startTime"], &first["completeTime"]),
        (&json!(T0 + 60_000), &json!(T0 + 60_000))
    );
    assert!(first["taskId"]
        .as_str()
        .unwrap()
        .starts_with(&format!("{orders}@-@1@-@FAILOVER@-@{IP_B}")));
    for key in ["id", "jobName", "hostname", "failureCause"] {
        assert!(first.get(key).is_some(), "{key} missing: {first}");
    }

    // Filters: the failure, one IP, a time window (epoch ms or UTC text), all together.
    let failed = c.executions(json!({"jobName": orders, "isSuccess": false})).await;
    assert_eq!((failed["total"].as_u64(), items(&failed)), (Some(1), vec![1]));
    assert!(failed["rows"][0]["failureCause"].as_str().unwrap().contains("disk full"));
    let on_a = c.executions(json!({"jobName": orders, "ip": IP_A})).await;
    assert_eq!(on_a["total"], 3);
    let window = json!({"jobName": orders, "startTimeFrom": "2021-06-01 00:00:30",
                        "startTimeTo": T0 + 90_000});
    assert_eq!(column(&c.executions(window).await, "source"), ["FAILOVER"]);
    let none = c.executions(json!({"jobName": orders, "ip": IP_B, "isSuccess": false})).await;
    assert_eq!((none["total"].as_u64(), none["rows"].as_array().map(Vec::len)), (Some(0), Some(0)));
    // A cleared field ("") is no filter, as ElasticJob-UI's page sends it.
    let cleared = c.executions(json!({"jobName": billing, "ip": "", "startTimeFrom": ""})).await;
    assert_eq!(cleared["total"], 2);

    // Paging and sorting: 4 rows by item ascending, pages of 3.
    let sorted = json!({"jobName": orders, "pageSize": 3, "pageNumber": 1, "sortBy": "shardingItem",
                        "orderType": "ASC"});
    let page = c.executions(sorted.clone()).await;
    assert_eq!((page["total"].as_u64(), items(&page)), (Some(4), vec![0, 1, 1]));
    let mut second = sorted;
    second["pageNumber"] = json!(2);
    let page = c.executions(second.clone()).await;
    assert_eq!((page["total"].as_u64(), items(&page)), (Some(4), vec![2]));
    second["pageNumber"] = json!(3);
    assert_eq!(items(&c.executions(second).await), Vec::<i64>::new());

    // The fires' states: staging, running and the end of each fire.
    let all = json!({"jobName": orders, "pageSize": 50});
    let page = c.statuses(all).await;
    assert_eq!(page["total"], 6, "{page}");
    let row = &page["rows"][0];
    for key in [
        "id",
        "originalTaskId",
        "taskId",
        "slaveId",
        "source",
        "executionType",
        "shardingItem",
        "state",
        "message",
        "creationTime",
    ] {
        assert!(row.get(key).is_some(), "{key} missing: {row}");
    }
    let error = c.statuses(json!({"jobName": orders, "state": "TASK_ERROR"})).await;
    assert_eq!((error["total"].as_u64(), column(&error, "shardingItem")), (Some(1), vec!["0,1,2"]));
    assert_eq!(
        (&error["rows"][0]["slaveId"], &error["rows"][0]["creationTime"]),
        (&json!(IP_A), &json!(T0))
    );
    assert!(error["rows"][0]["message"].as_str().unwrap().contains("item 1: "));
    let failover = c.statuses(json!({"jobName": orders, "executionType": "FAILOVER"})).await;
    assert_eq!(failover["total"], 3);
    let later = c.statuses(json!({"jobName": orders, "startTimeFrom": T0 + 1})).await;
    assert_eq!(later["total"], 3);
    let page = json!({"jobName": orders, "pageSize": 4, "pageNumber": 2, "sortBy": "creationTime",
                      "orderType": "ASC"});
    let page = c.statuses(page).await;
    assert_eq!(column(&page, "executionType"), ["FAILOVER", "FAILOVER"]);
    assert_eq!(
        column(&c.statuses(json!({"jobName": orders, "source": "LITE_EXECUTOR"})).await, "state")
            .len(),
        6
    );

    // Autocomplete.
    let prefix = &orders[..orders.len() - 4];
    let names =
        c.model("GET", &format!("/api/event-trace/execution/jobNames/{prefix}"), json!(null)).await;
    assert_eq!(names, json!([orders]));
    let names = c.model("GET", "/api/event-trace/execution/jobNames", json!(null)).await;
    assert!(names.as_array().unwrap().contains(&json!(billing)), "{names}");
    let ips = c.model("GET", "/api/event-trace/execution/ip/192.0.2.", json!(null)).await;
    assert!(
        ips.as_array().unwrap().contains(&json!(IP_A))
            && ips.as_array().unwrap().contains(&json!(IP_B)),
        "{ips}"
    );
    let ips = c.model("GET", "/api/event-trace/execution/ip", json!(null)).await;
    assert!(ips.as_array().unwrap().contains(&json!(IP_B)), "{ips}");
    let names =
        c.model("GET", &format!("/api/event-trace/status/jobNames/{prefix}"), json!(null)).await;
    assert_eq!(names, json!([orders]));
    assert!(c
        .model("GET", "/api/event-trace/status/jobNames", json!(null))
        .await
        .as_array()
        .unwrap()
        .contains(&json!(billing)));

    // An empty body is a search without filters.
    let (status, value) = c.call("POST", "/api/event-trace/execution", "").await;
    assert_eq!(status, 200, "{value}");
    assert!(value["model"]["total"].as_u64().unwrap() >= 6, "{value}");

    // Bad searches are refused in the wrapper, saying what was wrong.
    let path = "/api/event-trace/execution";
    c.refused(path, r#"{"sortBy": "start_time; DROP TABLE JOB_EXECUTION_LOG"}"#, 400, "sortBy")
        .await;
    c.refused(path, r#"{"pageSize": 0}"#, 400, "pageSize").await;
    c.refused(path, r#"{"pageNumber": 0}"#, 400, "from 1").await;
    c.refused(path, r#"{"orderType": "up"}"#, 400, "ASC or DESC").await;
    c.refused(path, r#"{"startTimeFrom": "yesterday"}"#, 400, "not a time").await;
    c.refused(path, "jobName=orders", 400, "not valid").await;
    c.refused("/api/event-trace/status", r#"{"pageSize": "ten"}"#, 400, "not valid").await;
    c
}

fn sqlite_path(name: &str) -> String {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console-trace");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}-{}.db", std::process::id()));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    path.to_string_lossy().into_owned()
}

/// The PostgreSQL the test script started, or `None` after checking that skipping is allowed.
fn postgres_url() -> Option<String> {
    match std::env::var("SHARDCRON_POSTGRES") {
        Ok(url) => Some(url),
        Err(_) if std::env::var("SHARDCRON_REQUIRE_SERVERS").as_deref() == Ok("1") => panic!(
            "SHARDCRON_REQUIRE_SERVERS=1 but SHARDCRON_POSTGRES is not set: run \
             scripts/postgres.sh start and source target/postgres/env"
        ),
        Err(_) => {
            eprintln!(
                "note: SHARDCRON_POSTGRES not set; skipping the PostgreSQL trace search test"
            );
            None
        }
    }
}

/// Runs `scripts/postgres.sh VERB` on the test script's server (`SHARDCRON_POSTGRES_SCRIPT`).
fn postgres_script(verb: &str) {
    let script = std::env::var("SHARDCRON_POSTGRES_SCRIPT")
        .unwrap_or_else(|_| format!("{}/../scripts/postgres.sh", env!("CARGO_MANIFEST_DIR")));
    let status = std::process::Command::new("bash").arg(script).arg(verb).status().unwrap();
    assert!(status.success(), "postgres.sh {verb} failed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn searches_on_sqlite() {
    let path = sqlite_path("search");
    let c = searches_over_http(&path).await;
    // The file holds this test's rows only: the unfiltered search counts them exactly.
    let page = c.executions(json!({"pageSize": 2, "pageNumber": 3})).await;
    assert_eq!((page["total"].as_u64(), items(&page).len()), (Some(6), 2));
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn searches_on_postgres_and_the_database_going_away() {
    let Some(url) = postgres_url() else { return };
    let c = searches_over_http(&url).await;

    // The database stops: searches fail in the wrapper (the console itself stays up)...
    postgres_script("pause");
    let (status, value) = c.call("POST", "/api/event-trace/execution", "{}").await;
    postgres_script("resume");
    assert_eq!(status, 503, "{value}");
    assert_eq!(value["success"], false);
    assert!(value["errorMsg"].as_str().unwrap().contains("trace database"), "{value}");
    // ... and work again once it is back, without restarting the console.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (status, value) = c.call("POST", "/api/event-trace/status", "{}").await;
        if status == 200 {
            assert!(value["model"]["total"].as_u64().unwrap() >= 9, "{value}");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "searches did not resume: {value}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    c.stop().await;
}
