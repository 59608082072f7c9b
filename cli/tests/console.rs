//! `shardcron console` as a process: it says where it listens, answers the API there, refuses
//! bad options with status 2, and stops cleanly on SIGTERM.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure report

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_shardcron");

/// A plain HTTP/1.1 request; returns the whole response.
fn http(addr: &str, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

#[test]
fn serves_the_api_and_stops_on_sigterm() {
    let mut child = Command::new(BIN)
        .args(["console", "--registry", "mem:/c", "--listen", "127.0.0.1:0", "--token", "t0k"])
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

    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let exit = loop {
        if let Some(exit) = child.try_wait().unwrap() {
            break exit;
        }
        assert!(Instant::now() < deadline, "the console did not stop");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exit.success(), "{exit:?}");
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
    ] {
        let out = Command::new(BIN).args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: ") && stderr.lines().count() == 1, "{args:?}: {stderr}");
    }
}
