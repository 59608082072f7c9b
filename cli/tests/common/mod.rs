//! What the CLI's test files share: running the `shardcron` binary, the test servers' addresses,
//! a worker process and its JSON lines, plain HTTP requests.

#![allow(dead_code, clippy::unwrap_used)] // each test binary uses part of it; a panic is the report

use std::cell::Cell;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_shardcron");

pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

/// A loopback port free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The address (`host:port`, without `http://`) of the test server in `var` (`SHARDCRON_ZK`,
/// `SHARDCRON_ETCD`), or `None` after checking that skipping is allowed: with
/// `SHARDCRON_REQUIRE_SERVERS=1` (set by `scripts/test.sh`) a missing address fails the test.
pub fn server_address(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(address) => Some(address.trim_start_matches("http://").trim_end_matches('/').to_owned()),
        Err(_) if std::env::var("SHARDCRON_REQUIRE_SERVERS").as_deref() == Ok("1") => panic!(
            "SHARDCRON_REQUIRE_SERVERS=1 but {var} is not set: start the server \
             (scripts/zookeeper.sh, scripts/etcd.sh) and export its address"
        ),
        Err(_) => {
            eprintln!("note: {var} not set; skipping this test");
            None
        }
    }
}

/// `shardcron ARGS`, run to its end.
pub fn shardcron(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("the shardcron binary runs")
}

pub fn text(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).expect("utf-8 output")
}

/// Exit 0, nothing on stderr, exactly `expected` on stdout.
pub fn assert_prints(output: &Output, expected: &str) {
    assert_eq!(text(&output.stderr), "");
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(text(&output.stdout), expected);
}

/// Refused as bad input: exit 2, nothing on stdout, one `error: ` line on stderr that mentions
/// `needle`. Returns that line.
pub fn assert_refused<'a>(output: &'a Output, needle: &str) -> &'a str {
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "stderr: {stderr}");
    assert_eq!(text(&output.stdout), "", "stderr: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
    assert!(
        stderr.starts_with("error: ") && stderr.contains(needle),
        "{stderr:?} should mention {needle:?}"
    );
    stderr
}

/// One HTTP/1.x request written as is (say `Connection: close` or use HTTP/1.0); the whole
/// response.
pub fn http(addr: &str, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// A `shardcron` process (a worker) whose stdout lines (JSON objects) and stderr are collected
/// as they come. Dropping it kills the process if it still runs.
pub struct Worker {
    child: Child,
    stdout: Arc<Mutex<Vec<String>>>,
    stdout_reader: Option<JoinHandle<()>>,
    stderr: Arc<Mutex<String>>,
    stderr_reader: Option<JoinHandle<()>>,
    /// Lines before this one are behind the last [`wait_for`](Self::wait_for) match.
    cursor: Cell<usize>,
}

impl Worker {
    /// Starts `shardcron ARGS` (ARGS begin with the command, e.g. `worker`).
    pub fn spawn(args: &[&str]) -> Worker {
        let mut child = Command::new(BIN)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the shardcron binary runs");
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let sink = stdout.clone();
        let pipe = child.stdout.take().unwrap();
        let stdout_reader = std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        let pipe = child.stderr.take().unwrap();
        let stderr_reader = std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut text = sink.lock().unwrap();
                text.push_str(&line);
                text.push('\n');
            }
        });
        Worker {
            child,
            stdout,
            stdout_reader: Some(stdout_reader),
            stderr,
            stderr_reader: Some(stderr_reader),
            cursor: Cell::new(0),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Every line printed so far, each checked to be a JSON object.
    pub fn lines(&self) -> Vec<Value> {
        self.stdout.lock().unwrap().iter().map(|line| parse(line)).collect()
    }

    /// What it printed on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits for the first line after the previous match that satisfies `keep`; returns it.
    pub fn wait_for(&self, what: &str, timeout: Duration, keep: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let lines = self.lines();
            let from = self.cursor.get();
            if let Some(at) = lines.iter().skip(from).position(&keep) {
                self.cursor.set(from + at + 1);
                return lines[from + at].clone();
            }
            self.give_up_after(deadline, what, &lines);
        }
    }

    /// Waits until `done` holds for every line so far; returns them.
    pub fn wait_until(
        &self,
        what: &str,
        timeout: Duration,
        done: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let lines = self.lines();
            if done(&lines) {
                return lines;
            }
            self.give_up_after(deadline, what, &lines);
        }
    }

    fn give_up_after(&self, deadline: Instant, what: &str, lines: &[Value]) {
        assert!(
            Instant::now() < deadline,
            "no {what} in time; lines so far: {lines:#?}; stderr: {}",
            self.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    /// Sends `signal` (TERM, INT, KILL, STOP, CONT) with kill(1).
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.pid().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// `kill -9`, and waits for the end.
    pub fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Waits for the exit (at most `timeout`, then kills it and fails) and for the rest of its
    /// output; returns the exit status, stderr and every stdout line.
    pub fn finish(mut self, timeout: Duration) -> (ExitStatus, String, Vec<Value>) {
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("it did not exit within {timeout:?}; lines: {:#?}", self.lines());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        for reader in [self.stdout_reader.take(), self.stderr_reader.take()].into_iter().flatten() {
            reader.join().unwrap();
        }
        (status, self.stderr(), self.lines())
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn parse(line: &str) -> Value {
    let value: Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
    assert!(value.is_object(), "not an object: {line}");
    value
}
