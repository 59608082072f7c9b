//! The built `shardcron-sim` refuses arguments that would make a run check nothing (0
//! instances, jobs, seconds or seeds) instead of reporting "0 violations".

use std::process::Command;

fn sim(args: &[&str]) -> (Option<i32>, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_shardcron-sim"))
        .args(args)
        .output()
        .expect("the shardcron-sim binary runs");
    let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).into_owned();
    (output.status.code(), text(output.stdout), text(output.stderr))
}

#[test]
fn zero_instances_jobs_seconds_or_seeds_are_refused() {
    for (args, flag) in [
        (&["run", "--instances", "0"][..], "--instances <INSTANCES>"),
        (&["run", "--jobs", "0"][..], "--jobs <JOBS>"),
        (&["run", "--duration", "0"][..], "--duration <DURATION>"),
        (&["run", "--session-timeout", "0"][..], "--session-timeout <SESSION_TIMEOUT>"),
        (&["explore", "--seeds", "0"][..], "--seeds <SEEDS>"),
        (&["explore", "--threads", "0"][..], "--threads <THREADS>"),
        (&["check-determinism", "--seeds", "0"][..], "--seeds <SEEDS>"),
    ] {
        let (status, stdout, stderr) = sim(args);
        assert_eq!(status, Some(2), "{args:?}: {stderr}");
        assert_eq!(stdout, "", "{args:?}");
        assert!(
            stderr.contains(&format!("invalid value '0' for '{flag}'"))
                && stderr.contains("must be at least 1: a run with none checks nothing"),
            "{args:?}: {stderr}"
        );
    }
    let (status, _, stderr) = sim(&["run", "--instances", "three"]);
    assert_eq!(status, Some(2));
    assert!(stderr.contains("expected a whole number of at least 1"), "{stderr}");
}
