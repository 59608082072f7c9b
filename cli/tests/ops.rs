//! The operations commands against real ZooKeeper and etcd servers, on a namespace a real
//! `shardcron worker` process runs in: what the commands show of it, that their changes reach
//! it, and that bad input exits with status 2, one line on stderr, and changes nothing.
//!
//! The servers' addresses come from `SHARDCRON_ZK` and `SHARDCRON_ETCD` (`scripts/test.sh`
//! starts them); without them the tests skip, unless `SHARDCRON_REQUIRE_SERVERS=1`.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure report

mod common;

use std::process::Output;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::*;

/// How long a worker's line is waited for.
const WAIT: Duration = Duration::from_secs(30);

fn namespace(backend: &str) -> String {
    let ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
    format!("ops-{backend}-{}-{ms}", std::process::id())
}

/// `shardcron ARGS --registry URL`.
fn on(url: &str, args: &[&str]) -> Output {
    shardcron(&[args, &["--registry", url]].concat())
}

/// Runs a command that must succeed; returns its stdout.
fn ok(url: &str, args: &[&str]) -> String {
    let out = on(url, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {:?} {stderr}", out.status);
    String::from_utf8(out.stdout).expect("UTF-8")
}

fn json(url: &str, args: &[&str]) -> serde_json::Value {
    let mut args = args.to_vec();
    args.extend(["--output", "json"]);
    let text = ok(url, &args);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: {e}: {text}"))
}

/// Runs a command that must be refused: status 2, one `error:` line, nothing on stdout.
fn refused(url: &str, args: &[&str]) {
    assert_refused(&on(url, args), "");
}

/// A `shardcron worker` running `job` (3 items every second, 100 ms each) on `url`.
fn start_worker(url: &str, job: &str) -> Worker {
    Worker::spawn(&[
        "worker",
        "--registry",
        url,
        "--job",
        job,
        "--total",
        "3",
        "--cron",
        "0/1 * * * * ?",
        "--item-ms",
        "100",
        "--ip",
        "127.0.0.9",
    ])
}

fn scenario(url: &str) {
    let dir = std::env::temp_dir().join(format!("shardcron-ops-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };

    // A job added before any worker runs it: known, but crashed.
    let hourly = file("hourly.yaml", "cron: 0 0 * * * ?\nshardingTotalCount: 2\n");
    assert_eq!(ok(url, &["add", "hourly", &hourly]), "job hourly: added with 2 item(s)\n");
    let jobs = json(url, &["jobs"]);
    assert_eq!(jobs[0]["jobName"], "hourly");
    assert_eq!(jobs[0]["status"], "CRASHED");

    let worker = start_worker(url, "demo");
    worker.wait_for("a run of item 1", WAIT, |e| e["event"] == "item_end" && e["item"] == 1);
    let jobs = json(url, &["jobs"]);
    let demo = jobs.as_array().unwrap().iter().find(|j| j["jobName"] == "demo").unwrap().clone();
    assert_eq!((demo["status"].as_str(), demo["instanceCount"].as_u64()), (Some("OK"), Some(1)));
    let servers = json(url, &["servers"]);
    assert_eq!(servers[0]["serverIp"], "127.0.0.9");
    let instance = json(url, &["instances"])[0]["instanceId"].as_str().unwrap().to_owned();
    assert!(instance.starts_with("127.0.0.9@-@"), "{instance}");

    ok(url, &["disable", "demo", "--item", "1"]);
    let show = json(url, &["job", "show", "demo"]);
    assert_eq!(show["sharding"][1]["status"], "DISABLED");
    assert_eq!(show["sharding"][0]["instanceId"], instance.as_str());
    let dump = ok(url, &["dump", "demo"]);
    assert!(dump.contains("/demo/sharding/1/disabled  P  \n"), "{dump}");
    ok(url, &["enable", "demo", "--item", "1"]);
    ok(url, &["disable", "--server", "127.0.0.9"]);
    assert_eq!(json(url, &["job", "show", "demo"])["status"], "DISABLED");
    ok(url, &["enable", "--server", "127.0.0.9"]);

    let triggered = ok(url, &["trigger", "demo"]);
    assert_eq!(triggered, "job demo: triggered on 1 instance(s)\n");
    worker.wait_for("a manual run", WAIT, |e| e["event"] == "item_start" && e["kind"] == "manual");

    let cron = file("demo.yaml", "cron: 0/2 * * * * ?\nshardingTotalCount: 3\njobParameter: x\n");
    let out = ok(url, &["config", "set", "demo", &cron]);
    assert!(out.contains("overwrite: true"), "the worker publishes with overwrite on: {out}");
    assert!(ok(url, &["config", "get", "demo"]).contains("jobParameter: x\n"));
    worker.wait_for("the new config", WAIT, |e| e["event"] == "config_applied");

    // Refused, changing nothing.
    let before = ok(url, &["config", "get", "demo"]);
    refused(url, &["job", "show", "nope"]);
    refused(url, &["disable", "demo", "--item", "3"]);
    refused(url, &["disable", "demo", "--item", "x"]);
    refused(url, &["shutdown", "--instance", "10.1.1.1@-@1"]);
    refused(url, &["config", "set", "demo", &file("bad.yaml", "shardingTotalCount: [\n")]);
    refused(url, &["config", "set", "demo", &file("zero.yaml", "shardingTotalCount: 0\n")]);
    refused(url, &["add", "demo", &cron]);
    refused(url, &["remove", "demo"]);
    assert_eq!(ok(url, &["config", "get", "demo"]), before);
    assert!(json(url, &["job", "show", "demo"])["sharding"]
        .as_array()
        .unwrap()
        .iter()
        .all(|i| i["status"] != "DISABLED"));

    // An operator's shutdown stops the worker gracefully.
    ok(url, &["shutdown", "demo"]);
    let (status, stderr, _) = worker.finish(WAIT);
    assert!(status.success(), "{status:?}: {stderr}");
    assert_eq!(json(url, &["jobs"])[0]["status"], "CRASHED");
    ok(url, &["remove", "demo"]);
    ok(url, &["remove", "hourly"]);
    assert_eq!(json(url, &["jobs"]), serde_json::json!([]));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn operations_on_zookeeper() {
    let Some(address) = server_address("SHARDCRON_ZK") else { return };
    scenario(&format!("zk://{address}/{}", namespace("zk")));
}

#[cfg(feature = "etcd")]
#[test]
fn operations_on_etcd() {
    let Some(address) = server_address("SHARDCRON_ETCD") else { return };
    scenario(&format!("etcd://{address}/{}", namespace("etcd")));
}

#[test]
fn an_unreachable_registry_is_refused() {
    refused("zk://127.0.0.1:1/x?connect_timeout_ms=300", &["jobs"]);
    refused("zk://127.0.0.1:1/x?connect_timeout_ms=300", &["trigger", "demo"]);
    refused("redis://h:1/x", &["jobs"]);
}

/// A worker serving script jobs runs the ones added later whose program it allows, and only
/// those.
fn serve_jobs_scenario(url: &str) {
    let dir =
        std::env::temp_dir().join(format!("shardcron-serve-{}-{}", std::process::id(), url.len()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("runs.log");
    let script = dir.join("record.sh");
    std::fs::write(&script, format!("#!/bin/sh\necho \"$@\" >> {}\n", log.display())).unwrap();
    let mut permissions = std::fs::metadata(&script).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&script, permissions).unwrap();
    let script = script.display().to_string();

    let worker =
        Worker::spawn(&["worker", "--registry", url, "--serve-jobs", "--allow-command", &script]);
    let allowed = dir.join("allowed.yaml");
    let line = format!("{script} 'first arg'");
    std::fs::write(
        &allowed,
        format!(
            "cron: 0/1 * * * * ?\nshardingTotalCount: 2\nprops:\n  script.command.line: {line}\n"
        ),
    )
    .unwrap();
    let refused = dir.join("refused.yaml");
    std::fs::write(&refused, "cron: 0/1 * * * * ?\nshardingTotalCount: 1\nprops:\n  script.command.line: /bin/echo hello\n").unwrap();
    ok(url, &["add", "refused", &refused.display().to_string()]);
    ok(url, &["add", "scripted", &allowed.display().to_string()]);
    worker.wait_for("a run of the added script job", WAIT, |e| {
        e["event"] == "item_end" && e["job"] == "scripted" && e["ok"] == true
    });
    let runs = std::fs::read_to_string(&log).unwrap();
    let first = runs.lines().next().unwrap();
    assert!(first.starts_with("first arg {"), "the context is the last argument: {first}");
    assert!(first.contains("\"jobName\":\"scripted\""), "{first}");
    let jobs = json(url, &["jobs"]);
    let status = |name: &str| {
        jobs.as_array().unwrap().iter().find(|j| j["jobName"] == name).unwrap()["status"].clone()
    };
    assert_eq!(status("scripted"), "OK");
    assert_eq!(status("refused"), "CRASHED", "/bin/echo is not on the allow-list");
    drop(worker);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn serve_jobs_on_zookeeper() {
    let Some(address) = server_address("SHARDCRON_ZK") else { return };
    serve_jobs_scenario(&format!(
        "zk://{address}/{}?session_timeout_ms=2000",
        namespace("zk-serve")
    ));
}

#[cfg(feature = "etcd")]
#[test]
fn serve_jobs_on_etcd() {
    let Some(address) = server_address("SHARDCRON_ETCD") else { return };
    serve_jobs_scenario(&format!("etcd://{address}/{}?ttl_s=2", namespace("etcd-serve")));
}

#[test]
fn serve_jobs_refuses_a_missing_allowed_program() {
    let out = shardcron(&[
        "worker",
        "--registry",
        "mem:",
        "--serve-jobs",
        "--allow-command",
        "/no/such/x",
    ]);
    assert_refused(&out, "--allow-command /no/such/x");
}
