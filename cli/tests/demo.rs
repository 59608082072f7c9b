//! Runs the built `shardcron demo --fast` and checks that its timeline shows every phase, in
//! order, and that the summary it computes from the events reports no duplicate and explains
//! every number.

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
    let summary = find(&lines, finish, &["summary, counted from the events above:"]);
    let row = |label: &str| {
        let at = find(&lines, summary, &[&format!("  {label:<12}")]);
        lines[at]
    };
    assert!(row("duplicates").contains("   0  item fires that completed more than once"));
    assert!(row("nodes left").contains("   0  ephemeral registry nodes"));
    assert!(row("interrupted").contains("running on 10.0.0.3 when it was killed at"));
    let failed_over = row("failed over");
    assert!(!failed_over.contains("   0  "), "{failed_over}");
    assert!(failed_over.contains("failover: the survivors take over the items a dead instance"));
    assert!(row("fires").contains("fire times at which at least one item started"));
    assert!(row("completed").contains("item runs that completed"));
    assert!(row("shardings").contains("assignments the leader committed: "));
    // Every item fire not run is explained, with whether it was caught up.
    let not_run = row("not run");
    if !not_run.contains("   0  every item of every fire completed") {
        assert!(not_run.contains("Not caught up: "), "{not_run}");
        assert!(
            not_run.contains("while the cluster still counted it as live")
                || not_run.contains("did not report starting them"),
            "{not_run}"
        );
    }
    assert!(!stdout.contains("gave up"), "{stdout}");
    // Aligned columns: the time is right-aligned in 7 columns, then two spaces.
    for line in &lines[header + 1..summary] {
        if line.is_empty() {
            continue;
        }
        let bytes = line.as_bytes();
        assert!(bytes.len() > 10 && bytes[6] == b's' && &bytes[7..9] == b"  ", "{line:?}");
    }
}

/// The first "about N seconds" of `text`, whitespace and line breaks ignored.
fn duration_claim(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let at = words
        .windows(3)
        .position(|w| {
            w[0].ends_with("about") && w[1].parse::<u32>().is_ok() && w[2].starts_with("second")
        })
        .unwrap_or_else(|| panic!("no \"about N seconds\" in:\n{text}"));
    format!("about {} seconds", words[at + 1])
}

#[test]
fn the_readme_and_the_help_give_the_same_duration() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let demo = readme.find("cargo run -p shardcron-cli -- demo").expect("the README runs the demo");
    // The paragraph that introduces the command (the one before its code block).
    let block = readme[..demo].rfind("```").unwrap_or(0);
    let intro = &readme[readme[..block].trim_end().rfind("\n\n").unwrap_or(0)..block];
    let help =
        Command::new(env!("CARGO_BIN_EXE_shardcron")).args(["demo", "--help"]).output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    assert_eq!(duration_claim(intro), duration_claim(&help));
    assert!(help.contains("8 with --fast"), "{help}");
}
