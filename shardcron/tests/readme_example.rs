//! The fresh-clone check: the README's example is `examples/readme.rs` word for word, and the
//! built example does what the README says: it runs a job, a failing item is reported on
//! stderr (no logging set up), and Ctrl-C (SIGINT) stops it gracefully with status 0.
//!
//! `cargo test` builds the examples before it runs the tests; alone, build it first with
//! `cargo build -p shardcron --example readme`.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure report

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The first ```` ```rust,no_run ```` block of the README after `heading`.
fn readme_block(heading: &str) -> String {
    let readme = std::fs::read_to_string(repository().join("README.md")).unwrap();
    let section = &readme[readme.find(heading).unwrap_or_else(|| panic!("no {heading:?}"))..];
    let fence = "```rust,no_run\n";
    let start = section.find(fence).unwrap() + fence.len();
    let end = start + section[start..].find("```\n").unwrap();
    section[start..end].to_owned()
}

#[test]
fn the_readme_example_is_the_example_file() {
    let file = std::fs::read_to_string(repository().join("shardcron/examples/readme.rs")).unwrap();
    // The file opens with a comment saying what it is; the code after it is the README's.
    let code: String = file
        .lines()
        .skip_while(|line| line.starts_with("//!"))
        .skip(1)
        .map(|line| format!("{line}\n"))
        .collect();
    assert_eq!(readme_block("## Quick start"), code);
}

/// `target/debug/examples/readme`, next to the `deps` directory this test runs from.
fn example_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(|deps| deps.parent()).unwrap();
    let binary = dir.join("examples").join(format!("readme{}", std::env::consts::EXE_SUFFIX));
    assert!(
        binary.exists(),
        "{} is missing: `cargo test` builds it; alone, run `cargo build -p shardcron --example \
         readme` first",
        binary.display()
    );
    binary
}

#[test]
#[cfg(unix)]
fn the_example_reports_a_failing_item_and_stops_on_ctrl_c() {
    let mut child = Command::new(example_binary())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = common::lines_of(child.stdout.take().unwrap());
    let stderr = common::lines_of(child.stderr.take().unwrap());
    let (mut out, mut err) = (Vec::new(), Vec::new());

    // Until item 0 ran and item 1's failure was reported (fires come every 2 s).
    let deadline = Instant::now() + Duration::from_secs(20);
    let reported = |err: &[String]| err.iter().any(|l| l.contains("item 1 of the fire at"));
    while !(out.iter().any(|l: &String| l.starts_with("item 0 of the fire at")) && reported(&err)) {
        assert!(Instant::now() < deadline, "stdout: {out:#?}\nstderr: {err:#?}");
        out.extend(stdout.try_iter());
        err.extend(stderr.try_iter());
        std::thread::sleep(Duration::from_millis(50));
    }
    let failure = err.iter().find(|l| l.contains("item 1 of the fire at")).unwrap();
    assert!(
        failure.starts_with(" WARN shardcron: job \"hello\" item 1 of the fire at "),
        "{failure}"
    );
    assert!(
        failure.ends_with(" (READY) failed: the job returned an error: cannot reach the database"),
        "{failure}"
    );
    assert!(err.iter().any(|l| l.contains("no `tracing` subscriber is installed")), "{err:#?}");

    // Ctrl-C.
    let status = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    let exit = loop {
        if let Some(exit) = child.try_wait().unwrap() {
            break exit;
        }
        assert!(Instant::now() < deadline, "still running 20 s after SIGINT");
        std::thread::sleep(Duration::from_millis(50));
    };
    // The readers end with the pipes; collect the rest.
    out.extend(stdout.iter());
    err.extend(stderr.iter());
    assert_eq!(exit.code(), Some(0), "stdout: {out:#?}\nstderr: {err:#?}");
    assert_eq!(out.last().map(String::as_str), Some("stopped"), "{out:#?}");
    assert!(
        err.iter().any(|l| l.ends_with(
            "INFO shardcron: stopping gracefully: running items finish (for up to 30 s), then \
             this instance leaves the registry; press Ctrl-C again to stop at once"
        )),
        "{err:#?}"
    );
}
