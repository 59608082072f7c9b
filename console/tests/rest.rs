//! Every endpoint of the console's REST API, on the in-memory registry holding a namespace that
//! ElasticJob 3.0.4 wrote: answers in ElasticJob-UI's wrapper, errors too, and what each one
//! changes in the registry.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure report

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use shardcron_core::handles::Handles;
use shardcron_core::registry::{CoordinatorRegistry, RegistryExt};
use shardcron_registry_mem::{ConnectOptions, MemRegistry, MemServer};
use shardcron_tests::fixtures::{load_dump, ELASTICJOB_3_0_4};
use tower::ServiceExt;

const TOKEN: &str = "s3cret";
const A: &str = "192.0.2.2@-@14191";
const B: &str = "192.0.2.2@-@14194";
const IP: &str = "192.0.2.2";

struct Fixture {
    _server: MemServer,
    registry: MemRegistry,
    app: Router,
}

async fn fixture(read_only: bool) -> Fixture {
    let server = MemServer::new(Handles::real());
    let registry = server.connect(ConnectOptions::default().namespace("/ej")).unwrap();
    load_dump(&registry, ELASTICJOB_3_0_4).await.unwrap();
    let shared: Arc<dyn CoordinatorRegistry> = Arc::new(registry.clone());
    let app = shardcron_console::router(shared, TOKEN, read_only, None);
    Fixture { _server: server, registry, app }
}

impl Fixture {
    /// Sends a request (with the token when `token`), returns the status and the JSON body.
    async fn call(
        &self,
        method: Method,
        path: &str,
        token: bool,
        body: &str,
    ) -> (StatusCode, Value) {
        let (status, text) = self.raw(method, path, token, body).await;
        let value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}: {text}"));
        (status, value)
    }

    async fn raw(
        &self,
        method: Method,
        path: &str,
        token: bool,
        body: &str,
    ) -> (StatusCode, String) {
        let mut request = Request::builder().method(method).uri(path);
        if token {
            request = request.header("Access-Token", TOKEN);
        }
        let request = request.body(Body::from(body.to_owned())).unwrap();
        let response = self.app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(bytes.to_vec()).unwrap())
    }

    /// A successful wrapped answer's model.
    async fn model(&self, method: Method, path: &str, body: &str) -> Value {
        let (status, value) = self.call(method, path, true, body).await;
        assert_eq!(status, StatusCode::OK, "{path}: {value}");
        assert_eq!(value["success"], true, "{path}: {value}");
        assert_eq!(value["errorCode"], 0);
        assert_eq!(value["errorMsg"], Value::Null);
        value["model"].clone()
    }

    /// A failed wrapped answer: checks status, code and that the message mentions `words`.
    async fn fails(
        &self,
        method: Method,
        path: &str,
        token: bool,
        body: &str,
        status: StatusCode,
        words: &str,
    ) {
        let (got, value) = self.call(method, path, token, body).await;
        assert_eq!(got, status, "{path}: {value}");
        assert_eq!(value["success"], false, "{path}");
        assert_eq!(value["errorCode"], status.as_u16(), "{path}");
        assert_eq!(value["model"], Value::Null, "{path}");
        let message = value["errorMsg"].as_str().unwrap();
        assert!(message.contains(words), "{path}: {message:?} should mention {words:?}");
        assert!(!message.contains('\n'), "{path}: one line");
    }

    async fn exists(&self, path: &str) -> bool {
        self.registry.exists(path).await.unwrap()
    }

    async fn text(&self, path: &str) -> Option<String> {
        self.registry.get_text(path).await.unwrap()
    }
}

const GET: Method = Method::GET;
const POST: Method = Method::POST;
const PUT: Method = Method::PUT;
const DELETE: Method = Method::DELETE;

#[tokio::test]
async fn login_trades_the_token_for_itself() {
    let f = fixture(false).await;
    let model = f.model(POST, "/api/login", r#"{"username":"root","password":"s3cret"}"#).await;
    assert_eq!(model, json!({"accessToken": TOKEN, "username": "root", "isGuest": false}));
    let wrong = r#"{"username":"root","password":"guess"}"#;
    f.fails(POST, "/api/login", false, wrong, StatusCode::UNAUTHORIZED, "wrong password").await;
    f.fails(POST, "/api/login", false, "root", StatusCode::BAD_REQUEST, "login body").await;
    let console = f.model(GET, "/api/console", "").await;
    assert_eq!(console, json!({"readOnly": false, "registry": "", "trace": false}));
}

#[tokio::test]
async fn job_views() {
    let f = fixture(false).await;
    let (status, count) = f.raw(GET, "/api/jobs/count", false, "").await;
    assert_eq!((status, count.as_str()), (StatusCode::OK, "1"), "a bare integer");
    let jobs = f.model(GET, "/api/jobs/getAllJobsBriefInfo", "").await;
    assert_eq!(
        jobs,
        json!([{"jobName": "orders", "status": "OK", "description": "", "cron": "0/2 * * * * ?",
                "instanceCount": 2, "shardingTotalCount": 4, "leader": A}])
    );
    let sharding = f.model(GET, "/api/jobs/orders/sharding", "").await;
    assert_eq!(
        sharding[3],
        json!({"item": 3, "serverIp": IP, "instanceId": A, "status": "PENDING",
               "failover": false, "failoverInstanceId": null})
    );
    let detail = f.model(GET, "/api/jobs/orders", "").await;
    assert_eq!(detail["brief"]["jobName"], "orders");
    assert_eq!(detail["servers"][0]["instances"], json!([A, B]));
    assert!(detail["yaml"].as_str().unwrap().contains("shardingTotalCount: 4\n"));
    let config = f.model(GET, "/api/jobs/config/orders", "").await;
    assert_eq!(config["shardingItemParameters"], "0=Beijing,1=Shanghai,2=Guangzhou,3=Shenzhen");
    assert_eq!(config["failover"], true);

    for path in ["/api/jobs/nope", "/api/jobs/nope/sharding", "/api/jobs/config/nope"] {
        f.fails(GET, path, false, "", StatusCode::NOT_FOUND, "no job named nope").await;
    }
}

#[tokio::test]
async fn job_actions_need_the_token_and_reach_the_registry() {
    let f = fixture(false).await;
    f.fails(POST, "/api/jobs/orders/trigger", false, "", StatusCode::UNAUTHORIZED, "log in").await;
    let (status, value) = {
        let mut request = Request::builder().method(POST).uri("/api/jobs/orders/trigger");
        request = request.header("Access-Token", "nope");
        let response = f.app.clone().oneshot(request.body(Body::empty()).unwrap()).await.unwrap();
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (status, serde_json::from_slice::<Value>(&bytes).unwrap())
    };
    assert_eq!(
        (status, value["errorMsg"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("wrong access token"))
    );
    assert!(!f.exists("/orders/trigger").await, "nothing triggered without the token");

    assert_eq!(f.model(POST, "/api/jobs/orders/trigger", "").await, json!({"instances": 2}));
    assert!(
        f.exists(&format!("/orders/trigger/{A}")).await
            && f.exists(&format!("/orders/trigger/{B}")).await
    );

    f.model(POST, "/api/jobs/orders/sharding/2/disable", "").await;
    assert!(f.exists("/orders/sharding/2/disabled").await);
    let sharding = f.model(GET, "/api/jobs/orders/sharding", "").await;
    assert_eq!(sharding[2]["status"], "DISABLED");
    f.model(POST, "/api/jobs/orders/sharding/2/enable", "").await;
    assert!(!f.exists("/orders/sharding/2/disabled").await);
    f.fails(
        POST,
        "/api/jobs/orders/sharding/4/disable",
        true,
        "",
        StatusCode::BAD_REQUEST,
        "outside 0..4",
    )
    .await;
    f.fails(
        POST,
        "/api/jobs/orders/sharding/x/disable",
        true,
        "",
        StatusCode::BAD_REQUEST,
        "not a sharding item",
    )
    .await;
    f.fails(
        POST,
        "/api/jobs/orders/sharding/1/pause",
        true,
        "",
        StatusCode::NOT_FOUND,
        "no action",
    )
    .await;

    assert_eq!(f.model(POST, "/api/jobs/orders/disable", "").await, json!({"servers": [IP]}));
    assert_eq!(f.text("/orders/servers/192.0.2.2").await.as_deref(), Some("DISABLED"));
    assert_eq!(f.model(GET, "/api/jobs/getAllJobsBriefInfo", "").await[0]["status"], "DISABLED");
    f.model(POST, "/api/jobs/orders/enable", "").await;
    assert_eq!(f.text("/orders/servers/192.0.2.2").await.as_deref(), Some("ENABLED"));
    f.fails(POST, "/api/jobs/nope/disable", true, "", StatusCode::NOT_FOUND, "no job").await;
    f.fails(POST, "/api/jobs/orders/frobnicate", true, "", StatusCode::NOT_FOUND, "no action")
        .await;

    assert_eq!(f.model(POST, "/api/jobs/orders/shutdown", "").await, json!({"instances": 2}));
    assert_eq!(f.model(GET, "/api/jobs/getAllJobsBriefInfo", "").await[0]["status"], "CRASHED");
    f.fails(POST, "/api/jobs/nope/trigger", true, "", StatusCode::NOT_FOUND, "no job").await;
}

#[tokio::test]
async fn config_update_add_and_remove() {
    let f = fixture(false).await;
    let before = f.text("/orders/config").await;
    f.fails(
        PUT,
        "/api/jobs/config",
        false,
        r#"{"jobName":"orders","shardingTotalCount":2}"#,
        StatusCode::UNAUTHORIZED,
        "log in",
    )
    .await;
    f.fails(
        PUT,
        "/api/jobs/config",
        true,
        r#"{"jobName":"orders","shardingTotalCount":0}"#,
        StatusCode::BAD_REQUEST,
        "shardingTotalCount: must be at least 1",
    )
    .await;
    f.fails(
        PUT,
        "/api/jobs/config",
        true,
        r#"{"jobName":"orders","shardingTotalCount":2,"cron":"0 0 25 * * ?"}"#,
        StatusCode::BAD_REQUEST,
        "cron",
    )
    .await;
    f.fails(
        PUT,
        "/api/jobs/config",
        true,
        "jobName: orders",
        StatusCode::BAD_REQUEST,
        "not a JSON config",
    )
    .await;
    f.fails(
        PUT,
        "/api/jobs/config",
        true,
        r#"{"shardingTotalCount":2}"#,
        StatusCode::BAD_REQUEST,
        "jobName",
    )
    .await;
    f.fails(
        PUT,
        "/api/jobs/config",
        true,
        r#"{"jobName":"nope","shardingTotalCount":2}"#,
        StatusCode::NOT_FOUND,
        "no job",
    )
    .await;
    assert_eq!(f.text("/orders/config").await, before, "refused edits change nothing");

    let update = f
        .model(
            PUT,
            "/api/jobs/config",
            r#"{"jobName":"orders","shardingTotalCount":6,"cron":"0/5 * * * * ?"}"#,
        )
        .await;
    assert_eq!(update, json!({"replacedOnRestart": true, "keptExtraConfigurations": false}));
    assert_eq!(f.model(GET, "/api/jobs/config/orders", "").await["shardingTotalCount"], 6);

    // The page's editor: YAML in, validation errors out.
    f.fails(
        PUT,
        "/api/jobs/orders/yaml",
        true,
        "shardingTotalCount: [\n",
        StatusCode::BAD_REQUEST,
        "job config YAML",
    )
    .await;
    f.model(PUT, "/api/jobs/orders/yaml", "cron: 0/7 * * * * ?\nshardingTotalCount: 3\n").await;
    assert!(f.text("/orders/config").await.unwrap().contains("cron: 0/7 * * * * ?\n"));

    let (status, value) = f
        .call(
            POST,
            "/api/jobs/config",
            true,
            r#"{"jobName":"hourly","cron":"0 0 * * * ?","shardingTotalCount":2}"#,
        )
        .await;
    assert_eq!((status, &value["model"]), (StatusCode::CREATED, &json!({"jobName": "hourly"})));
    f.fails(
        POST,
        "/api/jobs/config",
        true,
        r#"{"jobName":"hourly","shardingTotalCount":2}"#,
        StatusCode::CONFLICT,
        "already exists",
    )
    .await;
    let (status, _) = f
        .call(POST, "/api/jobs/daily/yaml", true, "cron: 0 0 3 * * ?\nshardingTotalCount: 1\n")
        .await;
    assert_eq!(status, StatusCode::CREATED);
    f.fails(
        POST,
        "/api/jobs/bad/yaml",
        true,
        "shardingTotalCount: -1\n",
        StatusCode::BAD_REQUEST,
        "shardingTotalCount",
    )
    .await;
    assert!(!f.exists("/bad").await);
    assert_eq!(f.raw(GET, "/api/jobs/count", false, "").await.1, "3");

    f.model(DELETE, "/api/jobs/config/hourly", "").await;
    assert!(!f.exists("/hourly").await);
    f.fails(
        DELETE,
        "/api/jobs/config/orders",
        true,
        "",
        StatusCode::BAD_REQUEST,
        "shut them down first",
    )
    .await;
    f.fails(DELETE, "/api/jobs/config/nope", true, "", StatusCode::NOT_FOUND, "no job").await;
    f.fails(DELETE, "/api/jobs/config/daily", false, "", StatusCode::UNAUTHORIZED, "log in").await;
}

#[tokio::test]
async fn server_views_and_actions() {
    let f = fixture(false).await;
    assert_eq!(f.raw(GET, "/api/servers/count", false, "").await.1, "1");
    let servers = f.model(GET, "/api/servers/getAllServersBriefInfo", "").await;
    assert_eq!(
        servers,
        json!([{"serverIp": IP, "instances": [A, B], "jobNames": ["orders"], "instancesNum": 2,
                "jobsNum": 1, "disabledJobsNum": 0}])
    );
    let jobs = f.model(GET, "/api/servers/192.0.2.2/jobs", "").await;
    assert_eq!(jobs, json!([{"jobName": "orders", "status": "OK", "instanceCount": 2}]));
    f.fails(
        GET,
        "/api/servers/10.9.9.9/jobs",
        false,
        "",
        StatusCode::NOT_FOUND,
        "no server 10.9.9.9",
    )
    .await;
    let instances = f.model(GET, "/api/instances", "").await;
    assert_eq!(instances[1], json!({"instanceId": B, "serverIp": IP, "jobNames": ["orders"]}));

    f.fails(POST, "/api/servers/192.0.2.2/disable", false, "", StatusCode::UNAUTHORIZED, "log in")
        .await;
    assert_eq!(
        f.model(POST, "/api/servers/192.0.2.2/disable", "").await,
        json!({"jobNames": ["orders"]})
    );
    assert_eq!(f.text("/orders/servers/192.0.2.2").await.as_deref(), Some("DISABLED"));
    f.model(POST, "/api/servers/192.0.2.2/enable", "").await;
    assert_eq!(f.text("/orders/servers/192.0.2.2").await.as_deref(), Some("ENABLED"));
    f.model(POST, "/api/servers/192.0.2.2/jobs/orders/disable", "").await;
    assert_eq!(f.model(GET, "/api/servers/192.0.2.2/jobs", "").await[0]["status"], "DISABLED");
    f.model(POST, "/api/servers/192.0.2.2/jobs/orders/enable", "").await;
    f.fails(POST, "/api/servers/10.9.9.9/disable", true, "", StatusCode::NOT_FOUND, "no server")
        .await;
    f.fails(
        POST,
        "/api/servers/192.0.2.2/jobs/nope/disable",
        true,
        "",
        StatusCode::NOT_FOUND,
        "no job",
    )
    .await;
    f.fails(POST, "/api/servers/192.0.2.2/reboot", true, "", StatusCode::NOT_FOUND, "no action")
        .await;

    assert_eq!(
        f.model(POST, "/api/servers/192.0.2.2/jobs/orders/shutdown", "").await,
        json!({"instances": 2})
    );
    assert!(f.registry.children("/orders/instances").await.unwrap().is_empty());
    f.model(POST, "/api/servers/192.0.2.2/shutdown", "").await;
    f.model(DELETE, "/api/servers/192.0.2.2/jobs/orders", "").await;
    assert!(!f.exists("/orders/servers/192.0.2.2").await);
    f.fails(DELETE, "/api/servers/192.0.2.2", true, "", StatusCode::NOT_FOUND, "no server").await;
    f.registry.put("/orders/servers/192.0.2.2", b"ENABLED").await.unwrap();
    f.fails(DELETE, "/api/servers/192.0.2.2", false, "", StatusCode::UNAUTHORIZED, "log in").await;
    assert_eq!(
        f.model(DELETE, "/api/servers/192.0.2.2", "").await,
        json!({"jobNames": ["orders"]})
    );
    assert_eq!(f.raw(GET, "/api/servers/count", false, "").await.1, "0");
}

#[tokio::test]
async fn a_read_only_console_refuses_every_change() {
    let f = fixture(true).await;
    assert_eq!(f.model(GET, "/api/console", "").await["readOnly"], true);
    let before = f.registry.children("/orders").await.unwrap();
    for (method, path) in [
        (POST, "/api/jobs/orders/trigger"),
        (POST, "/api/jobs/orders/disable"),
        (POST, "/api/jobs/orders/shutdown"),
        (POST, "/api/jobs/orders/sharding/1/disable"),
        (PUT, "/api/jobs/config"),
        (POST, "/api/jobs/config"),
        (DELETE, "/api/jobs/config/orders"),
        (PUT, "/api/jobs/orders/yaml"),
        (POST, "/api/servers/192.0.2.2/disable"),
        (POST, "/api/servers/192.0.2.2/jobs/orders/shutdown"),
        (DELETE, "/api/servers/192.0.2.2"),
        (POST, "/api/login"),
    ] {
        f.fails(method, path, true, "{}", StatusCode::FORBIDDEN, "read-only").await;
    }
    assert_eq!(f.registry.children("/orders").await.unwrap(), before);
    assert!(!f.exists("/orders/sharding/1/disabled").await);
    assert_eq!(f.model(GET, "/api/jobs/getAllJobsBriefInfo", "").await[0]["status"], "OK");
}

#[tokio::test]
async fn other_answers_are_wrapped_too() {
    let f = fixture(false).await;
    // No trace database given: every trace endpoint says how to give one.
    for path in ["/api/event-trace/execution", "/api/event-trace/status"] {
        f.fails(POST, path, false, "{}", StatusCode::SERVICE_UNAVAILABLE, "start it with --trace")
            .await;
    }
    for path in [
        "/api/event-trace/execution/jobNames",
        "/api/event-trace/execution/ip/10.",
        "/api/event-trace/status/jobNames/ord",
    ] {
        f.fails(GET, path, false, "", StatusCode::SERVICE_UNAVAILABLE, "--trace URL").await;
    }
    f.fails(GET, "/api/nothing/here", false, "", StatusCode::NOT_FOUND, "no such endpoint").await;

    let (status, html) = f.raw(GET, "/", false, "").await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("<script src=\"app.js\">"));
    let (status, script) = f.raw(GET, "/app.js", false, "").await;
    assert!(status == StatusCode::OK && script.contains("getAllJobsBriefInfo"));
    assert_eq!(f.raw(GET, "/app.css", false, "").await.0, StatusCode::OK);

    // The registry goes away: the console says so in the wrapper.
    f.registry.close().await.unwrap();
    f.fails(GET, "/api/jobs/getAllJobsBriefInfo", false, "", StatusCode::SERVICE_UNAVAILABLE, "")
        .await;
    f.fails(POST, "/api/jobs/orders/trigger", true, "", StatusCode::SERVICE_UNAVAILABLE, "").await;
}
