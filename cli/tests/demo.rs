//! Runs the built `shardcron demo --fast` and checks that its timeline shows every phase, in
//! order, and that the summary it computes from the events reports no duplicate.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure report

use std::process::Command;
use std::time::{Duration, Instant};

/// The first line at or after `from` that contains every one of `needles`; panics otherwise.
fn find(lines: &[&str], from: usize, needles: &[&str]) -> usize {
    lines[from..]
        .iter()
        .position(|line| needles.iter().all(|n| line.contains(n)))
        .map(|i| from + i)
        .unwrap_or_else(|| {
            panic!("no line after line {from} with {needles:?} in:\n{}", lines.join("\n"))
        })
}

#[test]
fn the_demo_shows_every_phase_and_no_duplicate() {
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_shardcron"))
        .args(["demo", "--fast"])
        .output()
        .expect("the shardcron binary runs");
    let took = started.elapsed();
    let stdout = String::from_utf8(output.stdout).unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(output.status.code(), Some(0), "stderr: {stderr}\nstdout:\n{stdout}");
    assert_eq!(stderr, "");
    assert!(took < Duration::from_secs(30), "the fast demo took {took:?}");

    let lines: Vec<&str> = stdout.lines().collect();
    let header = find(&lines, 0, &["time", "instance", "event", "details"]);
    let starting = find(&lines, header, &[">>> starting 10.0.0.1, 10.0.0.2, 10.0.0.3"]);
    let leader = find(&lines, starting, &["leader", "elected"]);
    let sharding =
        find(&lines, leader, &["sharding", "10.0.0.3: 0,1", "10.0.0.2: 2,3", "10.0.0.1: 4,5"]);
    find(&lines, sharding, &["10.0.0.3", "start", "items 0,1 of fire"]);
    let crash = find(&lines, sharding, &[">>> crashing 10.0.0.3 mid-run"]);
    let expired = find(&lines, crash, &["10.0.0.3", "left", "session expired"]);
    let claim = find(&lines, expired, &["claim", "orphaned item"]);
    let failover = find(&lines, claim, &["start", "failed over"]);
    find(&lines, failover, &["finish", ": ok"]);
    let reshard = find(&lines, expired, &["sharding"]);
    assert!(!lines[reshard].contains("10.0.0.3"), "{}", lines[reshard]);
    let join = find(&lines, reshard, &[">>> 10.0.0.4 joins"]);
    let joined = find(&lines, join, &["10.0.0.4", "joined"]);
    let reshard = find(&lines, joined, &["sharding", "10.0.0.4: 0,1"]);
    find(&lines, reshard, &["10.0.0.4", "start"]);
    let stop = find(&lines, reshard, &[">>> stopping 10.0.0.1, 10.0.0.2, 10.0.0.4 gracefully"]);
    // Running items finish after the stop began, then every instance reports its stop.
    let finish = find(&lines, stop, &["finish", ": ok"]);
    for ip in ["10.0.0.1", "10.0.0.2", "10.0.0.4"] {
        find(&lines, stop, &[ip, "stopped"]);
        find(&lines, stop, &[ip, "left", "instance node deleted"]);
    }
    let summary = find(&lines, finish, &["summary: "]);
    let summary = lines[summary];
    assert!(summary.contains("duplicates: 0"), "{summary}");
    assert!(summary.contains("registry nodes left: 0"), "{summary}");
    assert!(summary.contains("interrupted by the crash"), "{summary}");
    assert!(!summary.contains(" 0 failed over"), "{summary}");
    assert!(!stdout.contains("gave up"), "{stdout}");
    // Aligned columns: the time is right-aligned in 7 columns, then two spaces.
    for line in &lines[header + 1..] {
        if line.is_empty() || line.starts_with("summary") {
            continue;
        }
        let bytes = line.as_bytes();
        assert!(bytes.len() > 10 && bytes[6] == b's' && &bytes[7..9] == b"  ", "{line:?}");
    }
}
