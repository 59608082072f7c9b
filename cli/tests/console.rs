//! `shardcron console` as a process: it says where it listens, answers the API there (with
//! `--trace`, the event-trace searches on what a worker recorded), refuses bad options with
//! status 2, and stops cleanly on SIGTERM.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure report

mod common;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use common::*;

/// Starts `shardcron console ARGS` on a free port; the process and its address.
fn console(args: &[&str]) -> (Child, String) {
    let mut child = Command::new(BIN)
        .args(["console", "--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let addr = first
        .strip_prefix("listening on http://")
        .and_then(|rest| rest.strip_suffix('/'))
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_owned();
    // Keep reading, so the console never blocks on a full pipe.
    std::thread::spawn(move || lines.map_while(Result::ok).for_each(drop));
    (child, addr)
}

/// `POST path` with a JSON body; the status line and the body as JSON.
fn post(addr: &str, path: &str, body: &str) -> (String, Value) {
    let response = http(
        addr,
        &format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ),
    );
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head.lines().next().unwrap().to_owned();
    (status, serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}")))
}

/// SIGTERM, then the exit status (within 10 s).
fn stop(mut child: Child) -> std::process::ExitStatus {
    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(exit) = child.try_wait().unwrap() {
            return exit;
        }
        assert!(Instant::now() < deadline, "the console did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn serves_the_api_and_stops_on_sigterm() {
    let (child, addr) = console(&["--registry", "mem:/c", "--token", "t0k"]);

    let count = http(&addr, "GET /api/jobs/count HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert!(count.starts_with("HTTP/1.1 200") && count.ends_with("\r\n\r\n0"), "{count}");
    let body = r#"{"jobName":"hourly","cron":"0 0 * * * ?","shardingTotalCount":2}"#;
    let add = |token: &str| {
        http(
            &addr,
            &format!(
                "POST /api/jobs/config HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
                 Access-Token: {token}\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            ),
        )
    };
    assert!(add("wrong").starts_with("HTTP/1.1 401"));
    let added = add("t0k");
    assert!(added.starts_with("HTTP/1.1 201") && added.contains("\"success\":true"), "{added}");
    let page = http(&addr, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert!(page.contains("<title>shardcron console</title>"));

    // No --trace: the trace searches say how to get one.
    let (status, answer) = post(&addr, "/api/event-trace/execution", "{}");
    assert!(status.contains(" 503 "), "{status}");
    assert!(answer["errorMsg"].as_str().unwrap().contains("start it with --trace"), "{answer}");

    let exit = stop(child);
    assert!(exit.success(), "{exit:?}");
}

/// A worker records its fires with `--trace FILE`; a console started with `--trace FILE`
/// finds them through ElasticJob-UI's searches.
#[test]
fn with_trace_it_searches_what_a_worker_recorded() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli-console-trace");
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join(format!("trace-{}.db", std::process::id()));
    let db = db.to_str().unwrap();
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{db}{suffix}"));
    }
    let worker = Worker::spawn(&[
        "worker",
        "--registry",
        "mem:",
        "--job",
        "nightly",
        "--cron",
        "* * * * * ?",
        "--total",
        "2",
        "--item-ms",
        "50",
        "--fail-items",
        "1",
        "--trace",
        db,
    ]);
    worker.wait_for("a failed item", Duration::from_secs(20), |v| {
        v["event"] == "item_end" && v["item"] == 1 && v["ok"] == false
    });
    worker.signal("TERM");
    let (status, stderr, _) = worker.finish(Duration::from_secs(20));
    assert!(status.success(), "{status:?}: {stderr}");

    let (child, addr) = console(&["--registry", "mem:", "--trace", db]);
    let body = r#"{"jobName": "nightly", "isSuccess": false, "pageSize": 1}"#;
    let (status, answer) = post(&addr, "/api/event-trace/execution", body);
    assert!(status.contains(" 200 "), "{status}: {answer}");
    assert_eq!(answer["success"], true);
    let page = &answer["model"];
    assert!(page["total"].as_u64().unwrap() >= 1, "{answer}");
    assert_eq!(page["rows"].as_array().unwrap().len(), 1);
    assert_eq!(
        (&page["rows"][0]["jobName"], &page["rows"][0]["shardingItem"]),
        (&Value::from("nightly"), &Value::from(1))
    );
    let (_, answer) =
        post(&addr, "/api/event-trace/status", r#"{"jobName": "nightly", "state": "TASK_ERROR"}"#);
    assert!(answer["model"]["total"].as_u64().unwrap() >= 1, "{answer}");
    let (status, answer) = post(&addr, "/api/event-trace/status", r#"{"sortBy": "nope"}"#);
    assert!(
        status.contains(" 400 ") && answer["errorMsg"].as_str().unwrap().contains("sortBy"),
        "{answer}"
    );
    assert!(stop(child).success());
}

#[test]
fn bad_options_exit_with_status_2() {
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = busy.local_addr().unwrap().to_string();
    for args in [
        vec!["console", "--registry", "mem:", "--token", ""],
        vec!["console", "--registry", "mem:", "--listen", "localhost"],
        vec!["console", "--registry", "mem:", "--listen", &taken],
        vec!["console", "--registry", "nope://x"],
        vec!["console", "--registry", "mem:", "--trace", "mysql://h/db"],
        vec!["console", "--registry", "mem:", "--trace", "/no/such/dir/trace.db"],
    ] {
        assert_refused(&shardcron(&args), "");
    }
    // An unreachable trace database is named (without its password) with what to check.
    let unreachable = format!("postgres://u:s3cret@127.0.0.1:{}/db", free_port());
    let out = shardcron(&["console", "--registry", "mem:", "--trace", &unreachable]);
    let line = assert_refused(&out, "--trace: cannot open the trace database postgres://u:***@");
    assert!(line.contains("check that the database runs") && !line.contains("s3cret"), "{line}");
}
