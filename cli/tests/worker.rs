//! Runs the built `shardcron worker` on the in-memory registry: the exact JSON shape of every
//! event kind it prints, graceful stops on SIGTERM and SIGINT, and the exit codes of bad input.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure report

mod common;

use std::collections::BTreeSet;
use std::process::Output;
use std::time::Duration;

use serde_json::Value;
use shardcron_core::runtime::DEFAULT_FIRE_LEAD;

use common::*;

/// `shardcron worker ARGS`, running.
fn start(args: &[&str]) -> Worker {
    Worker::spawn(&[&["worker"], args].concat())
}

fn of<'a>(lines: &'a [Value], event: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["event"] == event).collect()
}

fn keys(line: &Value) -> BTreeSet<&str> {
    line.as_object().unwrap().keys().map(String::as_str).collect()
}

const COMMON: [&str; 7] = ["event", "job", "item", "instance", "fire_ms", "at_ms", "token"];

fn assert_keys(line: &Value, extra: &[&str]) {
    let expected: BTreeSet<&str> = COMMON.iter().chain(extra).copied().collect();
    assert_eq!(keys(line), expected, "{line}");
}

/// Whether every item in `0..total` of one fire ended.
fn a_fire_completed(lines: &[Value], total: u64) -> bool {
    let ends = of(lines, "item_end");
    ends.iter().any(|end| {
        let fire = &end["fire_ms"];
        (0..total).all(|i| ends.iter().any(|e| e["fire_ms"] == *fire && e["item"] == i))
    })
}

#[test]
fn every_event_is_one_json_object_of_a_fixed_shape() {
    let before = now_ms();
    let worker = start(&[
        "--registry",
        "mem:",
        "--job",
        "shape",
        "--cron",
        "* * * * * ?",
        "--total",
        "2",
        "--item-ms",
        "100",
        "--failover",
        "--instance-suffix",
        "t1",
    ]);
    let instance = format!("127.0.0.1@-@{}@-@t1", worker.pid());
    worker.wait_until("a whole fire", Duration::from_secs(15), |lines| a_fire_completed(lines, 2));
    worker.signal("TERM");
    let (status, stderr, lines) = worker.finish(Duration::from_secs(15));
    let after = now_ms();
    assert_eq!(stderr, "");
    assert_eq!(status.code(), Some(0));

    for line in &lines {
        assert_eq!(line["instance"], instance.as_str(), "{line}");
        let at = line["at_ms"].as_i64().unwrap();
        assert!((before..=after).contains(&at), "{line}");
        let expected_job = if line["event"] == "session" { Value::Null } else { "shape".into() };
        assert_eq!(line["job"], expected_job, "{line}");
    }

    let leader = of(&lines, "leader");
    assert_eq!(leader.len(), 1, "{lines:#?}");
    assert_keys(leader[0], &[]);
    assert!(leader[0]["item"].is_null() && leader[0]["fire_ms"].is_null());
    assert!(leader[0]["token"].is_null());

    let sharding = of(&lines, "sharding");
    assert!(!sharding.is_empty(), "{lines:#?}");
    for line in &sharding {
        assert_keys(line, &["assignment"]);
        assert_eq!(line["assignment"], serde_json::json!({ instance.clone(): [0, 1] }));
        assert!(line["item"].is_null() && line["fire_ms"].is_null() && line["token"].is_null());
    }

    let starts = of(&lines, "item_start");
    assert!(starts.len() >= 2, "{lines:#?}");
    for start in &starts {
        assert_keys(start, &["kind"]);
        assert_eq!(start["kind"], "scheduled");
        let fire = start["fire_ms"].as_i64().unwrap();
        assert_eq!(fire % 1000, 0, "fires on whole seconds: {start}");
        // Marked running up to the fire lead ahead of the fire, whose time its code starts at.
        let lead_ms = i64::try_from(DEFAULT_FIRE_LEAD.as_millis()).unwrap_or(0);
        assert!(start["at_ms"].as_i64().unwrap() >= fire - lead_ms, "{start}");
        assert!(start["item"].as_u64().unwrap() < 2);
        assert!(start["token"].is_u64(), "{start}");
    }
    for end in of(&lines, "item_end") {
        assert_keys(end, &["ok"]);
        assert_eq!(end["ok"], true, "{end}");
        let start = starts
            .iter()
            .find(|s| s["item"] == end["item"] && s["fire_ms"] == end["fire_ms"])
            .unwrap_or_else(|| panic!("no start for {end}"));
        assert_eq!(end["token"], start["token"], "the end carries its start's token");
        let ran = end["at_ms"].as_i64().unwrap() - start["at_ms"].as_i64().unwrap();
        assert!(ran >= 90, "the item slept its 100 ms: {ran} ms");
    }

    for session in of(&lines, "session") {
        if session["state"] == "connected" {
            assert_keys(session, &["state", "session_id"]);
        } else {
            assert_keys(session, &["state"]);
        }
    }
    let stopped = of(&lines, "stopped");
    assert_eq!(stopped.len(), 1, "{lines:#?}");
    assert_keys(stopped[0], &["reason"]);
    assert!(stopped[0]["reason"].is_string());

    // Nothing but the documented kinds.
    let documented = [
        "item_start",
        "item_end",
        "sharding",
        "leader",
        "failover_claim",
        "session",
        "skip",
        "fire_failed",
        "config_applied",
        "config_rejected",
        "registry_garbage",
        "stopped",
        "error",
    ];
    for line in &lines {
        assert!(documented.contains(&line["event"].as_str().unwrap()), "{line}");
    }
    for skip in of(&lines, "skip") {
        assert_keys(skip, &["reason"]);
    }
    // The leader is elected and shards before the first item starts.
    let position = |event: &str| lines.iter().position(|l| l["event"] == event).unwrap();
    assert!(position("leader") < position("sharding"));
    assert!(position("sharding") < position("item_start"));
}

/// Starts a one-item worker whose item takes `item_ms`, signals it as soon as the item starts,
/// and checks that the item completed before a clean exit.
fn stops_gracefully_on(signal: &str, item_ms: i64) {
    let item = item_ms.to_string();
    let worker = start(&[
        "--registry",
        "mem:/graceful",
        "--job",
        "graceful",
        "--cron",
        "* * * * * ?",
        "--total",
        "1",
        "--item-ms",
        &item,
    ]);
    worker.wait_for("an item_start", Duration::from_secs(15), |l| l["event"] == "item_start");
    let signalled = now_ms();
    worker.signal(signal);
    let (status, stderr, lines) = worker.finish(Duration::from_secs(15));
    assert_eq!(stderr, "");
    assert_eq!(status.code(), Some(0), "{lines:#?}");

    let start = of(&lines, "item_start")[0];
    let end = of(&lines, "item_end");
    assert_eq!(end.len(), 1, "the running item ends, and no other starts: {lines:#?}");
    assert_eq!(end[0]["ok"], true, "the item completed instead of being cancelled");
    assert_eq!(end[0]["fire_ms"], start["fire_ms"]);
    let ran = end[0]["at_ms"].as_i64().unwrap() - start["at_ms"].as_i64().unwrap();
    assert!(ran >= item_ms - 10, "the item ran its {item_ms} ms: {ran}");
    assert!(end[0]["at_ms"].as_i64().unwrap() >= signalled);
    assert_eq!(of(&lines, "item_start").len(), 1, "{lines:#?}");
    let last_item_event = lines.iter().rposition(|l| l["event"] == "item_end").unwrap();
    let stopped = lines.iter().rposition(|l| l["event"] == "stopped").unwrap();
    assert!(last_item_event < stopped, "stopped comes after the item ended: {lines:#?}");
}

#[test]
fn sigterm_lets_the_running_item_finish_then_exits_0() {
    stops_gracefully_on("TERM", 1200);
}

#[test]
fn ctrl_c_stops_gracefully_too() {
    stops_gracefully_on("INT", 300);
}

#[test]
fn the_shutdown_timeout_cancels_items_that_outlast_it() {
    let worker = start(&[
        "--registry",
        "mem:/cancel",
        "--job",
        "cancel",
        "--cron",
        "* * * * * ?",
        "--total",
        "1",
        "--item-ms",
        "20000",
        "--shutdown-timeout-ms",
        "300",
    ]);
    worker.wait_for("an item_start", Duration::from_secs(15), |l| l["event"] == "item_start");
    let signalled = now_ms();
    worker.signal("TERM");
    let (status, stderr, lines) = worker.finish(Duration::from_secs(10));
    assert_eq!(stderr, "");
    assert_eq!(status.code(), Some(0), "{lines:#?}");
    let end = of(&lines, "item_end");
    assert_eq!(end.len(), 1, "{lines:#?}");
    assert_eq!(end[0]["ok"], false, "cancelled at the shutdown timeout: {lines:#?}");
    let waited = end[0]["at_ms"].as_i64().unwrap() - signalled;
    assert!((250..5_000).contains(&waited), "cancelled {waited} ms after the signal");
    assert_eq!(of(&lines, "stopped").len(), 1, "{lines:#?}");
}

fn worker(args: &[&str]) -> Output {
    shardcron(&[&["worker"], args].concat())
}

/// Exit 2, nothing on stdout, one `error: ...` line on stderr that starts with `reason`.
fn assert_rejects(output: &Output, reason: &str) {
    let line = assert_refused(output, reason);
    assert!(line.starts_with(&format!("error: {reason}")), "{line:?} should start with {reason:?}");
}

#[test]
fn invalid_input_exits_2_with_one_line() {
    let ok = ["--registry", "mem:", "--job", "j"];
    let with = |extra: &[&str]| {
        let mut args = ok.to_vec();
        args.extend_from_slice(extra);
        worker(&args)
    };
    assert_rejects(
        &worker(&["--registry", "redis://h:1/ns", "--job", "j"]),
        "--registry: malformed registry URL \"redis://h:1/ns\": unknown scheme; expected one of: mem:",
    );
    assert_rejects(
        &worker(&["--registry", "zk://h/ns", "--job", "j"]),
        "--registry: malformed registry URL \"zk://h/ns\": every host must be host:port",
    );
    assert_rejects(
        &worker(&["--registry", "zk://h:2181/ns?bogus=1", "--job", "j"]),
        "--registry: invalid ZooKeeper URL",
    );
    if cfg!(feature = "etcd") {
        assert_rejects(
            &worker(&["--registry", "etcd://h:2379/ns?ttl_s=x", "--job", "j"]),
            "--registry: bad etcd",
        );
    } else {
        assert_rejects(
            &worker(&["--registry", "etcd://h:2379/ns", "--job", "j"]),
            "--registry: etcd:// registries need shardcron's `etcd` cargo feature",
        );
    }
    assert_rejects(&with(&["--cron", "0 0 25 * * ?"]), "--cron \"0 0 25 * * ?\": ");
    assert_rejects(&with(&["--cron", "* * * *"]), "--cron \"* * * *\": ");
    assert_rejects(&with(&["--total", "0"]), "--total: must be at least 1, got 0");
    assert_rejects(&with(&["--total", "-2"]), "--total: must be at least 1, got -2");
    assert_rejects(&with(&["--total", "1000001"]), "--total: must be at most 1000000, got 1000001");
    assert_rejects(&with(&["--total", "x"]), "invalid value 'x' for '--total <N>'");
    assert_rejects(&with(&["--item-ms", "-1"]), "unexpected argument '-1' found");
    assert_rejects(&worker(&["--registry", "mem:", "--job", "a/b"]), "--job: \"a/b\" cannot be");
    assert_rejects(&worker(&["--registry", "mem:", "--job", ""]), "--job: must not be empty");
    assert_rejects(&with(&["--instance-suffix", "a/b"]), "--instance-suffix \"a/b\": ");
    assert_rejects(&with(&["--trace", "mysql://h/db"]), "--trace: trace database \"mysql://h/db\"");
    assert_rejects(&with(&["--fail-items", "0,3"]), "--fail-items: item 3 is not below --total 3");
    assert_rejects(&with(&["--metrics", "9464"]), "invalid value '9464' for '--metrics <ADDR>'");
    assert_rejects(&with(&["--ip", ""]), "--ip \"\": ");
    assert_rejects(
        &worker(&["--job", "j"]),
        "the following required arguments were not provided: --registry <URL>",
    );
}

/// The last line of `stderr`, which must be the one `error: ...` line.
fn error_line(stderr: &str) -> &str {
    let last = stderr.lines().last().unwrap_or_default();
    assert!(last.starts_with("error: cannot connect to the registry: "), "{stderr}");
    assert_eq!(stderr.lines().filter(|l| l.starts_with("error:")).count(), 1, "{stderr}");
    last
}

#[test]
#[cfg(feature = "etcd")]
fn an_unreachable_etcd_is_named_with_every_endpoint_and_the_time_spent() {
    // Ports 1 and 2 on the loopback: nothing listens there; the connect attempt fails fast.
    let output = worker(&[
        "--registry",
        "etcd://127.0.0.1:1,127.0.0.1:2/ns?connect_timeout_ms=300",
        "--job",
        "j",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "");
    assert!(
        stderr.contains(
            "INFO connecting to etcd at http://127.0.0.1:1,http://127.0.0.1:2 (up to 300ms)"
        ),
        "progress first: {stderr}"
    );
    let error = error_line(&stderr);
    for needle in [
        "could not reach etcd in ",
        " s; endpoints tried: 127.0.0.1:1 (connection refused: nothing listens there), \
         127.0.0.1:2 (connection refused: nothing listens there); last error: ",
        "Check that etcd serves clients at these addresses",
    ] {
        assert!(error.contains(needle), "{needle:?} missing from {error}");
    }
}

#[test]
fn an_unreachable_zookeeper_reports_each_attempt_then_names_every_host() {
    let output = worker(&[
        "--registry",
        "zk://127.0.0.1:1,127.0.0.1:2/ns?connect_timeout_ms=300&retry_attempts=2&retry_base_ms=100",
        "--job",
        "j",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 4, "{stderr}");
    assert!(
        lines[0].ends_with(
            "INFO connecting to ZooKeeper at 127.0.0.1:1,127.0.0.1:2 (attempt 1 of 2, up to 300ms)"
        ),
        "{stderr}"
    );
    assert!(lines[1].contains("WARN ZooKeeper attempt 1 of 2 failed after 0."), "{stderr}");
    assert!(lines[1].ends_with("; retrying in 100ms"), "{stderr}");
    assert!(lines[2].ends_with("(attempt 2 of 2, up to 300ms)"), "{stderr}");
    let error = error_line(&stderr);
    for needle in [
        "no ZooKeeper session after 2 attempt(s) in 0.",
        " s; hosts tried: 127.0.0.1:1 (connection refused: nothing listens there), 127.0.0.1:2 \
         (connection refused: nothing listens there); last attempt: no session on \
         127.0.0.1:1,127.0.0.1:2 within the connect timeout of 300ms. Check that ZooKeeper runs \
         at these addresses",
    ] {
        assert!(error.contains(needle), "{needle:?} missing from {error}");
    }
}

#[test]
fn help_documents_the_json_lines() {
    let output = shardcron(&["worker", "--help"]);
    assert_eq!(output.status.code(), Some(0));
    let help = String::from_utf8(output.stdout).unwrap();
    for needle in [
        // --job may be left out with --serve-jobs.
        "Usage: shardcron worker [OPTIONS] --registry <URL>",
        "--job <NAME>",
        "fire_ms",
        "at_ms",
        "event     item_start, item_end, sharding, leader, failover_claim, session, skip,",
        "null where they do not apply",
        "SIGTERM or Ctrl-C stops the worker gracefully",
        "DIAGNOSTICS: stderr gets the log",
        "[default: \"0/5 * * * * ?\"]",
        "[default: 3]",
        "[default: 1000]",
        "--shutdown-timeout-ms <MS>",
        "[default: 30000]",
    ] {
        assert!(help.contains(needle), "{needle:?} missing from:\n{help}");
    }
}
