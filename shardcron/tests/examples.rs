//! Runs the built examples (`shardcron/examples/`) and checks what they print, so that they keep
//! working: those without a server on the in-memory registry, the cluster ones against the
//! ZooKeeper and etcd servers `scripts/test.sh` starts (`SHARDCRON_ZK`, `SHARDCRON_ETCD`;
//! without them the cluster runs are skipped with a note, unless `SHARDCRON_REQUIRE_SERVERS=1`).
//!
//! `cargo test` builds the examples before it runs the tests; alone, build them first with
//! `cargo build -p shardcron --all-features --examples`.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure report

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// `target/debug/examples/{name}`, next to the `deps` directory this test runs from.
fn example(name: &str) -> Command {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(|deps| deps.parent()).unwrap();
    let binary = dir.join("examples").join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        binary.exists(),
        "{} is missing: `cargo test` builds it; alone, run `cargo build -p shardcron \
         --all-features --examples` first",
        binary.display()
    );
    let mut command = Command::new(binary);
    command.current_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".."));
    command.env_remove("SHARDCRON_ZK").env_remove("SHARDCRON_ETCD");
    command
}

/// Runs `command` to its end, killing it past `limit`.
fn run(mut command: Command, limit: Duration) -> (Output, String, String) {
    let mut child =
        command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            panic!(
                "still running after {limit:?}\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output, stdout, stderr)
}

/// Runs `command`, which must exit with status 0 within `limit`; returns its stdout.
fn run_ok(command: Command, limit: Duration) -> String {
    let (output, stdout, stderr) = run(command, limit);
    assert!(output.status.success(), "{}\nstdout:\n{stdout}\nstderr:\n{stderr}", output.status);
    stdout
}

#[test]
fn dataflow_drains_the_outbox_across_the_items() {
    let out = run_ok(example("dataflow"), Duration::from_secs(60));
    assert!(out.contains("sent 20 mails (per item [6, 7, 7]), 0 left in the outbox"), "{out}");
    for item in 0..3 {
        assert!(out.contains(&format!("item {item} finished (drained its share)")), "{out}");
    }
}

#[test]
#[cfg(unix)]
fn script_passes_the_context_and_reports_the_failing_exit() {
    let out = run_ok(example("script"), Duration::from_secs(60));
    assert!(out.contains("item 0: exit status 0"), "{out}");
    assert!(out.contains("item 2: failed"), "{out}");
    let raised =
        out.lines().find(|l| l.starts_with("item 2 raised: ")).unwrap_or_else(|| panic!("{out}"));
    assert!(raised.contains("region 2 is offline"), "{raised}");
    let json = out
        .lines()
        .find_map(|l| l.strip_prefix("item 1's script received "))
        .unwrap_or_else(|| panic!("{out}"));
    let context: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(context["jobName"], "regions");
    assert_eq!(context["shardingItem"], 1);
    assert_eq!(context["shardingParameter"], "south");
    assert_eq!(context["jobParameter"], "report=daily");
    assert!(out.contains("item 2's script wrote nothing"), "{out}");
}

#[test]
fn failover_fencing_refuses_the_replaced_owners_write() {
    let out = run_ok(example("failover_fencing"), Duration::from_secs(90));
    let stalled = out
        .lines()
        .find_map(|l| l.strip_suffix(": stalls mid-item for 6 s, deaf to the registry"))
        .unwrap_or_else(|| panic!("{out}"));
    let survivor = if stalled == "A" { "B" } else { "A" };
    let token_of = |line: &str| -> u64 { line.rsplit(' ').next().unwrap().parse().unwrap() };
    let first = out
        .lines()
        .find(|l| l.starts_with(&format!("{stalled}: item 0 (READY) runs with fencing token ")))
        .unwrap_or_else(|| panic!("{out}"));
    let taken = out
        .lines()
        .find(|l| l.starts_with(&format!("{survivor}: item 0 (FAILOVER) runs with fencing token ")))
        .unwrap_or_else(|| panic!("the survivor did not re-run the item:\n{out}"));
    assert!(token_of(taken) > token_of(first), "{out}");
    assert!(
        out.lines().any(|l| l.starts_with(&format!("{stalled}: the store refused: token "))),
        "the stale write was not refused:\n{out}"
    );
    assert!(
        out.contains(&format!("store: item 0 = \"written by {survivor} with token ")),
        "the survivor's write is not the one kept:\n{out}"
    );
}

/// An HTTP/1.1 request on a fresh connection; the whole response.
fn http(address: &str, method: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(stream, "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// Waits for a line of `lines` matching `wanted`, keeping every line in `seen`.
fn wait_line(
    lines: &mpsc::Receiver<String>,
    seen: &mut Vec<String>,
    wanted: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(line) = seen.iter().find(|l| wanted(l)) {
            return line.clone();
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => seen.push(line),
            Err(_) => panic!("not printed within 30 s; printed: {seen:#?}"),
        }
    }
}

/// Kills the child when a failed assertion unwinds past it (a no-op once it exited).
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_exit(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "still running {limit:?} after the stop");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
#[cfg(unix)]
fn axum_service_triggers_jobs_over_http_and_stops_on_ctrl_c() {
    let mut child = example("axum_service")
        .args(["--listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let lines = common::lines_of(child.stdout.take().unwrap());
    let mut child = KillOnDrop(child);
    let child = &mut child.0;
    let mut seen = Vec::new();
    let listening = wait_line(&lines, &mut seen, |l| l.starts_with("listening on http://"));
    let address = listening.trim_start_matches("listening on http://").to_owned();

    // The scheduler runs: a heartbeat fired (every 2 s).
    let deadline = Instant::now() + Duration::from_secs(30);
    let heartbeats = |stats: &str| -> u64 {
        let line = stats.lines().find_map(|l| l.strip_prefix("heartbeats ")).unwrap();
        line.parse().unwrap()
    };
    while heartbeats(&http(&address, "GET", "/stats")) == 0 {
        assert!(Instant::now() < deadline, "no heartbeat within 30 s: {seen:#?}");
        std::thread::sleep(Duration::from_millis(100));
    }

    let jobs = http(&address, "GET", "/jobs");
    assert!(jobs.starts_with("HTTP/1.1 200"), "{jobs}");
    assert!(jobs.contains("heartbeat\n") && jobs.contains("rebuild-index\n"), "{jobs}");
    let missing = http(&address, "POST", "/jobs/nope/trigger");
    assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
    let triggered = http(&address, "POST", "/jobs/rebuild-index/trigger");
    assert!(triggered.starts_with("HTTP/1.1 202"), "{triggered}");
    assert!(triggered.contains("triggered rebuild-index on 1 instance(s)"), "{triggered}");
    wait_line(&lines, &mut seen, |l| l == "rebuild-index: item 0 of 2 rebuilt");
    wait_line(&lines, &mut seen, |l| l == "rebuild-index: item 1 of 2 rebuilt");
    let stats = http(&address, "GET", "/stats");
    assert!(stats.contains("rebuilt items 2"), "{stats}");

    let status = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let exit = wait_exit(child, Duration::from_secs(30));
    seen.extend(lines.iter());
    assert!(exit.success(), "{exit}: {seen:#?}");
    let tail: Vec<&str> = seen.iter().map(String::as_str).rev().take(3).collect();
    assert_eq!(
        tail,
        ["stopped", "HTTP server stopped; stopping the scheduler", "Ctrl-C: stopping gracefully"],
        "{seen:#?}"
    );
}

#[test]
fn axum_service_stops_at_its_deadline() {
    let mut command = example("axum_service");
    command.args(["--listen", "127.0.0.1:0", "--stop-after", "1"]);
    let out = run_ok(command, Duration::from_secs(30));
    assert!(out.contains("--stop-after reached: stopping gracefully"), "{out}");
    assert!(out.ends_with("stopped\n"), "{out}");
}

// ------------------------------------------------------------------------ registry servers

/// The server address in `var`; `None` (with a note) when unset and servers are not required.
#[cfg(any(feature = "zookeeper", feature = "etcd"))]
fn server(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(address) if !address.is_empty() => Some(address),
        _ if std::env::var("SHARDCRON_REQUIRE_SERVERS").as_deref() == Ok("1") => {
            panic!("SHARDCRON_REQUIRE_SERVERS=1 but {var} is not set (scripts/test.sh sets it)")
        }
        _ => {
            eprintln!("note: {var} is not set: skipping the example's run against a server");
            None
        }
    }
}

#[cfg(any(feature = "zookeeper", feature = "etcd"))]
fn check_cluster_run(name: &str, var: &str, address: &str) {
    let mut command = example(name);
    command.env(var, address);
    let out = run_ok(command, Duration::from_secs(150));
    assert!(out.contains("the leader divided 6 items over 3 instances:"), "{out}");
    assert!(out.contains("10.0.0.3 stops gracefully"), "{out}");
    assert!(out.contains("the leader divided 6 items over 2 instances:"), "{out}");
    let after = &out[out.find("over 2 instances").unwrap()..];
    let ran = after.lines().find(|l| l.starts_with("every item ran once: ")).unwrap();
    assert!(!ran.contains("10.0.0.3"), "{out}");
    assert!(out.ends_with("all instances stopped\n"), "{out}");
}

#[cfg(any(feature = "zookeeper", feature = "etcd"))]
fn check_cluster_errors(name: &str, unreachable_url: &str, script: &str) {
    // No server given: the example says how to get one.
    let (output, _, stderr) = run(example(name), Duration::from_secs(30));
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no server given") && stderr.contains(script), "{stderr}");
    // Nobody listening: a clear error, within the connect timeout.
    let mut command = example(name);
    command.arg(unreachable_url);
    let (output, _, stderr) = run(command, Duration::from_secs(60));
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with("error: cannot connect: "), "{stderr}");
    assert!(stderr.contains("127.0.0.1:1"), "the error names the host: {stderr}");
}

#[test]
#[cfg(feature = "zookeeper")]
fn zookeeper_cluster_divides_the_items_and_takes_over_a_leavers_share() {
    check_cluster_errors(
        "zookeeper_cluster",
        "zk://127.0.0.1:1/x?connect_timeout_ms=1000",
        "scripts/zookeeper.sh start",
    );
    if let Some(address) = server("SHARDCRON_ZK") {
        check_cluster_run("zookeeper_cluster", "SHARDCRON_ZK", &address);
    }
}

#[test]
#[cfg(feature = "etcd")]
fn etcd_cluster_divides_the_items_and_takes_over_a_leavers_share() {
    check_cluster_errors(
        "etcd_cluster",
        "etcd://127.0.0.1:1/x?connect_timeout_ms=1000",
        "scripts/etcd.sh start",
    );
    if let Some(address) = server("SHARDCRON_ETCD") {
        check_cluster_run("etcd_cluster", "SHARDCRON_ETCD", &address);
    }
}
