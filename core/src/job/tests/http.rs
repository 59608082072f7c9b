//! HTTP jobs against a local server the test starts (axum on a loopback port, or a bare TCP
//! listener where the test must see the connection itself). Real time: the client waits on real
//! sockets.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::any;
use axum::Router;
use parking_lot::Mutex;
use std::sync::Arc;
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::*;

/// What the server saw of one request.
#[derive(Clone, Debug)]
struct Seen {
    method: String,
    context: Option<String>,
    content_type: Option<String>,
    body: String,
}

type Log = Arc<Mutex<Vec<Seen>>>;

/// A server on a free loopback port: `/ok` answers 200, `/fail` 500 with a body, `/slow` after
/// 3 seconds. Every request is logged.
async fn server() -> (SocketAddr, Log) {
    let log: Log = Arc::default();
    async fn record(
        State(log): State<Log>,
        method: axum::http::Method,
        headers: HeaderMap,
        body: String,
    ) {
        let header =
            |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        log.lock().push(Seen {
            method: method.to_string(),
            context: header(SHARDING_CONTEXT_HEADER),
            content_type: header("content-type"),
            body,
        });
    }
    let app = Router::new()
        .route(
            "/ok",
            any(|s, m, h, b| async move {
                record(s, m, h, b).await;
                "done"
            }),
        )
        .route(
            "/fail",
            any(|s, m, h, b| async move {
                record(s, m, h, b).await;
                (StatusCode::INTERNAL_SERVER_ERROR, "the database is down")
            }),
        )
        .route(
            "/slow",
            any(|s, m, h, b| async move {
                record(s, m, h, b).await;
                tokio::time::sleep(Duration::from_secs(3)).await;
                "late"
            }),
        )
        .with_state(log.clone());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, log)
}

fn http_job(config: HttpJobConfig) -> Job {
    Job::http(config).unwrap()
}

async fn run_one(job: &Job, ctx: ShardingContext) -> FireReport {
    let info = fire(&[ctx.item]);
    let request = FireRequest { info, contexts: vec![ctx], max_parallel_items: 0 };
    tokio::time::timeout(Duration::from_secs(30), Executor::new(Handles::real()).run(job, request))
        .await
        .expect("the HTTP job did not end")
}

fn context(item: u32) -> ShardingContext {
    ShardingContext::new(&fire(&[item]), 4, "jp", item, format!("p{item}"))
        .with_fencing(9, CancellationToken::new())
}

fn http_failure(report: &FireReport, item: u32) -> (Option<u16>, String) {
    match &report.items[&item] {
        ItemOutcome::Failed(JobFailure::Http { status, reason, .. }) => (*status, reason.clone()),
        other => panic!("expected an HTTP failure, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_success_sends_the_context_header_and_the_body() {
    let (addr, log) = server().await;
    let mut config = HttpJobConfig::new("post", format!("http://{addr}/ok"));
    config.data = Some("{\"a\":1}".into());
    config.content_type = Some("application/json".into());
    let report = run_one(&http_job(config), context(2)).await;
    assert_eq!(report.items[&2], ItemOutcome::Completed);

    let seen = log.lock().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, "POST");
    assert_eq!(seen[0].body, "{\"a\":1}");
    assert_eq!(seen[0].content_type.as_deref(), Some("application/json"));
    let json: serde_json::Value =
        serde_json::from_str(seen[0].context.as_deref().expect("no shardingContext header"))
            .unwrap();
    assert_eq!(json["jobName"], "orders");
    assert_eq!(json["shardingItem"], 2);
    assert_eq!(json["shardingParameter"], "p2");
    assert_eq!(json["shardingTotalCount"], 4);
    assert_eq!(json["jobParameter"], "jp");
    assert_eq!(json["fencingToken"], 9);
    assert_eq!(json["fireTimeMs"], START_MS);
    assert_eq!(json["taskId"], fire(&[2]).task_id().to_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_sends_no_body_even_with_data() {
    let (addr, log) = server().await;
    let mut config = HttpJobConfig::new("GET", format!("http://{addr}/ok"));
    config.data = Some("ignored".into());
    let report = run_one(&http_job(config), context(0)).await;
    assert_eq!(report.items[&0], ItemOutcome::Completed);
    assert_eq!(log.lock()[0].body, "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_of_400_or_above_fails_the_item_unless_lenient() {
    let (addr, log) = server().await;
    let config = HttpJobConfig::new("POST", format!("http://{addr}/fail"));
    let report = run_one(&http_job(config.clone()), context(1)).await;
    let (status, reason) = http_failure(&report, 1);
    assert_eq!(status, Some(500));
    assert!(reason.contains("the database is down"), "{reason}");
    assert!(report.items[&1].to_string_lossy().contains("status 500"));

    let lenient = HttpJobConfig { fail_on_error_status: false, ..config };
    let report = run_one(&http_job(lenient), context(1)).await;
    assert_eq!(report.items[&1], ItemOutcome::Completed);
    assert_eq!(log.lock().len(), 2);

    let missing = HttpJobConfig::new("GET", format!("http://{addr}/no-such-path"));
    let report = run_one(&http_job(missing), context(1)).await;
    assert_eq!(http_failure(&report, 1).0, Some(404));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_slower_than_the_read_timeout_fails_the_item() {
    let (addr, _log) = server().await;
    let mut config = HttpJobConfig::new("GET", format!("http://{addr}/slow"));
    config.read_timeout = Duration::from_millis(300);
    let begin = Instant::now();
    let report = run_one(&http_job(config), context(0)).await;
    let (status, reason) = http_failure(&report, 0);
    assert_eq!(status, None);
    assert!(reason.starts_with("timed out"), "{reason}");
    assert!(begin.elapsed() < Duration::from_secs(3), "the timeout did not cut the wait short");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_fails_the_item() {
    // A port that was just free: nothing listens on it any more.
    let port = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().port();
    let config = HttpJobConfig::new("GET", format!("http://127.0.0.1:{port}/ok"));
    let report = run_one(&http_job(config), context(3)).await;
    let (status, reason) = http_failure(&report, 3);
    assert_eq!(status, None);
    assert!(reason.starts_with("cannot connect"), "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_aborts_the_request() {
    // A bare listener that reads the request, never answers, and reports when the client
    // closes the connection.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (request_seen_tx, request_seen) = tokio::sync::oneshot::channel();
    let (closed_tx, closed) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buffer = vec![0u8; 4096];
        let read = socket.read(&mut buffer).await.unwrap();
        let _ = request_seen_tx.send(String::from_utf8_lossy(&buffer[..read]).into_owned());
        // Read until EOF: the client closed its end.
        while socket.read(&mut buffer).await.unwrap_or(0) > 0 {}
        let _ = closed_tx.send(());
    });
    let mut config = HttpJobConfig::new("GET", format!("http://{addr}/hang"));
    config.read_timeout = Duration::from_secs(60);
    let ctx = context(0);
    let cancel = ctx.cancellation.clone();
    let job = http_job(config);
    let run = tokio::spawn(async move { run_one(&job, ctx).await });

    let head = tokio::time::timeout(Duration::from_secs(10), request_seen).await.unwrap().unwrap();
    assert!(head.to_ascii_lowercase().contains("shardingcontext: {"), "{head}");
    cancel.cancel();
    let report = run.await.unwrap();
    assert_eq!(report.items[&0], ItemOutcome::Cancelled);
    tokio::time::timeout(Duration::from_secs(10), closed)
        .await
        .expect("the server never saw the connection close")
        .unwrap();
}

#[test]
fn properties_take_elasticjob_names_and_defaults() {
    let props: BTreeMap<String, String> = [
        ("http.uri", "http://127.0.0.1:8080/run"),
        ("http.method", "post"),
        ("http.data", "x=1"),
        ("unrelated", "kept out"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let config = HttpJobConfig::from_props(&props).unwrap();
    assert_eq!(config.method, "POST");
    assert_eq!(config.data.as_deref(), Some("x=1"));
    assert_eq!(config.connect_timeout, Duration::from_millis(3000));
    assert_eq!(config.read_timeout, Duration::from_millis(5000));
    assert_eq!(config.content_type, None);
    assert!(config.fail_on_error_status);

    let with = |key: &str, value: &str| {
        let mut p = props.clone();
        p.insert(key.to_owned(), value.to_owned());
        HttpJobConfig::from_props(&p)
    };
    let c = with("http.connect.timeout.milliseconds", "250").unwrap();
    assert_eq!(c.connect_timeout, Duration::from_millis(250));
    let c = with("http.read.timeout.milliseconds", "70000").unwrap();
    assert_eq!(c.read_timeout, Duration::from_secs(70));
    assert!(!with("http.fail.on.error.status", "FALSE").unwrap().fail_on_error_status);
    assert_eq!(
        with("http.content.type", "text/plain").unwrap().content_type.as_deref(),
        Some("text/plain")
    );
}

#[test]
fn unusable_properties_are_refused_with_the_key() {
    let props = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    };
    let ok = [("http.uri", "http://h/run"), ("http.method", "GET")];
    let error = |extra: &[(&str, &str)]| {
        let mut p = props(&ok);
        p.extend(props(extra));
        HttpJobConfig::from_props(&p).unwrap_err().to_string()
    };
    let missing = HttpJobConfig::from_props(&props(&[("http.method", "GET")])).unwrap_err();
    assert!(matches!(missing, HttpJobError::Missing { key: "http.uri", .. }));
    let missing = HttpJobConfig::from_props(&props(&[("http.uri", "http://h/")])).unwrap_err();
    assert!(matches!(missing, HttpJobError::Missing { key: "http.method", .. }));
    assert!(error(&[("http.uri", "not a uri")]).contains("http.uri"));
    assert!(error(&[("http.uri", "ftp://h/file")]).contains("http or https"));
    assert!(error(&[("http.method", "GE T")]).contains("http.method"));
    assert!(error(&[("http.read.timeout.milliseconds", "soon")]).contains("milliseconds"));
    assert!(error(&[("http.connect.timeout.milliseconds", "0")]).contains("above 0"));
    assert!(error(&[("http.fail.on.error.status", "maybe")]).contains("true or false"));
}

trait OutcomeText {
    fn to_string_lossy(&self) -> String;
}

impl OutcomeText for ItemOutcome {
    fn to_string_lossy(&self) -> String {
        match self {
            ItemOutcome::Failed(failure) => failure.to_string(),
            other => format!("{other:?}"),
        }
    }
}
