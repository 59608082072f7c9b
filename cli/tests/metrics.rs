//! `shardcron worker --metrics`: two worker processes on the ZooKeeper the test script starts;
//! the first one (with metrics) fails one item, the second one joins and is killed with
//! `kill -9` while its item runs, the first one takes its item over. `/metrics` of the first is
//! then scraped over HTTP and every series is checked against what the worker printed: fires by
//! kind, items started and finished by outcome, the failover, the reshards, the election, the
//! skips, the session, the registry operations.
//!
//! Without `SHARDCRON_ZK` the test prints a note and passes, unless `SHARDCRON_REQUIRE_SERVERS=1`
//! (set by `scripts/test.sh`).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure report

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::Value;

use common::*;

const JOB: &str = "metered";
const CRON: &str = "0/3 * * * * ?";

/// A worker of the test's job (2 items, 1.2 s each, failover on) with `extra` arguments.
fn spawn_worker(registry: &str, suffix: &str, extra: &[&str]) -> Worker {
    let args = ["worker", "--registry", registry, "--job", JOB, "--cron", CRON, "--total", "2"];
    let more = ["--item-ms", "1200", "--failover", "--instance-suffix", suffix];
    Worker::spawn(&[&args[..], &more, extra].concat())
}

fn event(v: &Value) -> &str {
    v["event"].as_str().unwrap_or("")
}

/// `GET /metrics` over a plain TCP connection: the series and their values, as
/// `name{labels}` → value.
fn scrape(port: u16) -> BTreeMap<String, f64> {
    let text =
        http(&format!("127.0.0.1:{port}"), "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.") && head.contains(" 200 "), "{head}");
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            Some((series.to_owned(), value.parse().ok()?))
        })
        .collect()
}

fn value(metrics: &BTreeMap<String, f64>, series: &str) -> f64 {
    metrics.get(series).copied().unwrap_or(0.0)
}

#[test]
fn metrics_of_a_worker_match_its_fires_failures_and_failover() {
    let Some(zk) = server_address("SHARDCRON_ZK") else { return };
    let namespace = format!("metrics-{}", std::process::id());
    let registry = format!("zk://{zk}/{namespace}?session_timeout_ms=2000");
    let port = free_port();
    let metrics_addr = format!("127.0.0.1:{port}");
    let a = spawn_worker(&registry, "a", &["--metrics", &metrics_addr, "--fail-items", "1"]);

    // A runs both items alone: item 1 fails.
    a.wait_for("a failed item on a", Duration::from_secs(20), |v| {
        event(v) == "item_end" && v["ok"] == false
    });
    // B joins; the next fires are split between them. B dies while its item runs.
    let mut b = spawn_worker(&registry, "b", &[]);
    let started = b.wait_for("an item on b", Duration::from_secs(30), |v| event(v) == "item_start");
    std::thread::sleep(Duration::from_millis(300));
    b.kill();
    let orphan = started["item"].as_u64().unwrap();
    a.wait_for("a's failover run of b's item", Duration::from_secs(30), |v| {
        event(v) == "item_end" && v["kind"].is_null() && v["item"] == orphan && {
            let fire = v["fire_ms"].clone();
            a.lines().iter().any(|s| {
                event(s) == "item_start" && s["kind"] == "failover" && s["fire_ms"] == fire
            })
        }
    });

    // Compare at a quiet moment: the same lines and the same scrape twice in a row.
    let job = format!("job=\"{JOB}\"");
    let deadline = Instant::now() + Duration::from_secs(30);
    let (lines, metrics) = loop {
        let before = a.lines().len();
        let first = scrape(port);
        std::thread::sleep(Duration::from_millis(300));
        let second = scrape(port);
        let lines = a.lines();
        let started = |m: &BTreeMap<String, f64>| {
            value(m, &format!("shardcron_items_started_total{{{job}}}"))
        };
        // Quiet: nothing printed meanwhile and no item running (every start has its end).
        let ends = lines.iter().filter(|v| event(v) == "item_end").count();
        let starts = lines.iter().filter(|v| event(v) == "item_start").count();
        if before == lines.len() && started(&first) == started(&second) && starts == ends {
            break (lines, second);
        }
        assert!(Instant::now() < deadline, "worker a never went quiet");
    };

    let count = |keep: &dyn Fn(&Value) -> bool| lines.iter().filter(|v| keep(v)).count() as f64;
    let starts = count(&|v| event(v) == "item_start");
    assert!(starts >= 3.0);
    assert_eq!(value(&metrics, &format!("shardcron_items_started_total{{{job}}}")), starts);
    let ok = count(&|v| event(v) == "item_end" && v["ok"] == true);
    let not_ok = count(&|v| event(v) == "item_end" && v["ok"] == false);
    assert!(not_ok >= 1.0);
    let finished = |outcome: &str| {
        value(&metrics, &format!("shardcron_items_finished_total{{{job},outcome=\"{outcome}\"}}"))
    };
    assert_eq!(finished("succeeded"), ok);
    assert_eq!(finished("failed"), not_ok);
    assert_eq!(finished("cancelled"), 0.0);
    for kind in ["scheduled", "misfire", "manual", "failover"] {
        let mut fires: Vec<i64> = lines
            .iter()
            .filter(|v| event(v) == "item_start" && v["kind"] == kind)
            .map(|v| v["fire_ms"].as_i64().unwrap())
            .collect();
        fires.dedup();
        let series = format!("shardcron_fires_total{{{job},kind=\"{kind}\"}}");
        assert_eq!(value(&metrics, &series), fires.len() as f64, "{series}");
    }
    assert!(value(&metrics, &format!("shardcron_fires_total{{{job},kind=\"failover\"}}")) >= 1.0);
    let claims = count(&|v| event(v) == "failover_claim");
    assert!(claims >= 1.0);
    assert_eq!(value(&metrics, &format!("shardcron_failovers_total{{{job}}}")), claims);
    let reshards = count(&|v| event(v) == "sharding");
    assert!(reshards >= 2.0, "a alone, then a and b, then a alone again");
    assert_eq!(value(&metrics, &format!("shardcron_reshards_total{{{job}}}")), reshards);
    assert_eq!(
        value(&metrics, &format!("shardcron_reshard_duration_seconds_count{{{job}}}")),
        reshards,
        "every reshard is for a fire that fell due"
    );
    let elections = count(&|v| event(v) == "leader");
    assert_eq!(value(&metrics, &format!("shardcron_leader_elections_total{{{job}}}")), elections);
    let mut skips: BTreeMap<String, f64> = BTreeMap::new();
    for v in lines.iter().filter(|v| event(v) == "skip") {
        *skips.entry(v["reason"].as_str().unwrap().to_owned()).or_default() += 1.0;
    }
    for (reason, n) in &skips {
        let series = format!("shardcron_fires_skipped_total{{{job},reason=\"{reason}\"}}");
        assert_eq!(value(&metrics, &series), *n, "{series}");
    }
    let scheduled_starts = count(&|v| event(v) == "item_start" && v["kind"] == "scheduled");
    assert_eq!(
        value(&metrics, &format!("shardcron_trigger_lateness_seconds_count{{{job}}}")),
        scheduled_starts
    );
    assert_eq!(
        value(&metrics, &format!("shardcron_item_duration_seconds_count{{{job}}}")),
        ok + not_ok
    );
    assert_eq!(value(&metrics, "shardcron_session_connected"), 1.0);
    assert_eq!(value(&metrics, "shardcron_session_transitions_total{state=\"connected\"}"), 1.0);
    assert!(value(&metrics, "shardcron_registry_operations_total{op=\"transaction\"}") >= 1.0);
    // The failover claim and the takeover race b's session: some operations fail by design
    // (a create that finds the node there), and are counted by kind.
    let errors: f64 = metrics
        .iter()
        .filter(|(k, _)| k.starts_with("shardcron_registry_errors_total{"))
        .map(|(_, v)| v)
        .sum();
    eprintln!("registry errors by kind: {errors}; skips {skips:?}");
    assert!(metrics.keys().any(|k| k.starts_with("shardcron_trigger_lateness_seconds_bucket{")));

    a.signal("TERM");
    let (status, stderr, _) = a.finish(Duration::from_secs(30));
    assert!(status.success(), "a stopped with {status}; stderr: {stderr}");
}
