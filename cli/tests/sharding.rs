//! Runs the built `shardcron` binary and checks exact stdout, stderr and exit codes.

mod common;

use std::process::Output;

use common::*;

fn sharding(strategy: &str, job: &str, total: &str, instances: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "sharding",
        "--strategy",
        strategy,
        "--job",
        job,
        "--total",
        total,
        "--instances",
        instances,
    ];
    args.extend_from_slice(extra);
    shardcron(&args)
}

/// Exit 2, nothing on stdout, exactly one `error: {reason}` line on stderr.
fn assert_rejects(output: &Output, reason: &str) {
    assert_eq!(assert_refused(output, reason), format!("error: {reason}\n"));
}

#[test]
fn average_allocation_documented_examples_in_given_order() {
    let cases = [
        ("8", "s1\t0,1,6\ns2\t2,3,7\ns3\t4,5\n"),
        ("9", "s1\t0,1,2\ns2\t3,4,5\ns3\t6,7,8\n"),
        ("10", "s1\t0,1,2,9\ns2\t3,4,5\ns3\t6,7,8\n"),
    ];
    for (total, expected) in cases {
        let output = sharding("AVG_ALLOCATION", "orders", total, "s1,s2,s3", &["--order", "given"]);
        assert_prints(&output, expected);
    }
}

#[test]
fn registry_order_sorts_descending_but_prints_in_given_order() {
    // Fed as s3, s2, s1 (ElasticJob's order); printed as listed.
    let output = sharding("AVG_ALLOCATION", "orders", "8", "s1,s3,s2", &[]);
    assert_prints(&output, "s1\t4,5\ns3\t0,1,6\ns2\t2,3,7\n");
    let explicit = sharding("AVG_ALLOCATION", "orders", "8", "s1,s3,s2", &["--order", "registry"]);
    assert_eq!(explicit.stdout, output.stdout);
}

#[test]
fn idle_instances_print_an_empty_list() {
    let output = sharding("AVG_ALLOCATION", "j", "2", "a,b,c", &["--order", "given"]);
    assert_prints(&output, "a\t0\nb\t1\nc\t\n");
}

#[test]
fn odevity_and_round_robin_follow_the_job_name_hash() {
    // "job1" hashes to 3267604 (even): ODEVITY reverses; 3267604 % 3 == 1: ROUND_ROBIN rotates by 1.
    let given = ["--order", "given"];
    assert_prints(&sharding("ODEVITY", "job1", "2", "s1,s2,s3", &given), "s1\t\ns2\t1\ns3\t0\n");
    assert_prints(&sharding("ODEVITY", "myJob", "2", "s1,s2,s3", &given), "s1\t0\ns2\t1\ns3\t\n");
    assert_prints(
        &sharding("ROUND_ROBIN", "job1", "9", "s1,s2,s3", &given),
        "s1\t6,7,8\ns2\t0,1,2\ns3\t3,4,5\n",
    );
    // i32::MIN hash, where ElasticJob itself throws for 3 instances: rotation by 2^31 % 3 == 2.
    assert_prints(
        &sharding("ROUND_ROBIN", "polygenelubricants", "9", "s1,s2,s3", &given),
        "s1\t3,4,5\ns2\t6,7,8\ns3\t0,1,2\n",
    );
}

#[test]
fn instances_may_repeat_the_flag_and_carry_spaces() {
    let output = shardcron(&[
        "sharding",
        "--strategy",
        "AVG_ALLOCATION",
        "--job",
        "j",
        "--total",
        "3",
        "--order",
        "given",
        "--instances",
        "a, b",
        "--instances",
        " c ",
    ]);
    assert_prints(&output, "a\t0\nb\t1\nc\t2\n");
}

#[test]
fn real_instance_ids() {
    let output = sharding("AVG_ALLOCATION", "j", "3", "10.0.0.2@-@77,10.0.0.10@-@77", &[]);
    // "10.0.0.2@-@77" > "10.0.0.10@-@77" as strings, so it comes first and takes the extra item.
    assert_prints(&output, "10.0.0.2@-@77\t0,2\n10.0.0.10@-@77\t1\n");
}

#[test]
fn invalid_input_exits_2_with_one_line() {
    let cases: Vec<(Output, &str)> = vec![
        (
            sharding("RANDOM", "j", "3", "a", &[]),
            "--strategy: unknown sharding strategy \"RANDOM\"; use one of AVG_ALLOCATION, \
             ODEVITY, ROUND_ROBIN",
        ),
        (
            sharding("avg_allocation", "j", "3", "a", &[]),
            "--strategy: unknown sharding strategy \"avg_allocation\"; use one of \
             AVG_ALLOCATION, ODEVITY, ROUND_ROBIN",
        ),
        (sharding("ODEVITY", "j", "0", "a", &[]), "--total: must be at least 1, got 0"),
        (sharding("ODEVITY", "j", "-3", "a", &[]), "--total: must be at least 1, got -3"),
        (
            sharding("ODEVITY", "j", "1000001", "a", &[]),
            "--total: must be at most 1000000, got 1000001",
        ),
        (
            sharding("ODEVITY", "j", "x", "a", &[]),
            "invalid value 'x' for '--total <N>': invalid digit found in string",
        ),
        (
            sharding("ODEVITY", "j", "3", "a,,b", &[]),
            "--instances: id number 2 is empty; give non-empty, comma-separated ids",
        ),
        (
            sharding("ODEVITY", "j", "3", "", &[]),
            "--instances: id number 1 is empty; give non-empty, comma-separated ids",
        ),
        (
            sharding("ODEVITY", "j", "3", "a,b, a", &[]),
            "--instances: \"a\" is listed more than once; give each instance once",
        ),
        (sharding("ODEVITY", "", "3", "a", &[]), "--job: must not be empty"),
        (
            sharding("ODEVITY", "a/b", "3", "a", &[]),
            "--job: \"a/b\" cannot be a registry path segment: it contains '/' (the path \
             separator) at byte 1",
        ),
        (
            sharding("ODEVITY", "j", "3", "a", &["--order", "sorted"]),
            "invalid value 'sorted' for '--order <ORDER>' [possible values: registry, given]",
        ),
        (
            shardcron(&["sharding", "--job", "j"]),
            "the following required arguments were not provided: --strategy <NAME> --total <N> \
             --instances <ID[,ID...]>",
        ),
        (
            shardcron(&[]),
            "'shardcron' requires a subcommand but one was not provided [subcommands: cron, sharding, \
             worker, demo, jobs, job, servers, instances, trigger, disable, enable, shutdown, \
             config, add, remove, dump, console, help]",
        ),
        (shardcron(&["bogus"]), "unrecognized subcommand 'bogus'"),
    ];
    for (output, reason) in &cases {
        assert_rejects(output, reason);
    }
}

#[test]
fn help_is_available_everywhere() {
    for args in [&["--help"][..], &["sharding", "--help"], &["help", "sharding"], &["-h"]] {
        let output = shardcron(args);
        assert_eq!(output.status.code(), Some(0), "{args:?}");
        assert_eq!(text(&output.stderr), "", "{args:?}");
        assert!(text(&output.stdout).contains("Usage: shardcron"), "{args:?}");
    }
    let help = shardcron(&["sharding", "--help"]);
    let help = text(&help.stdout);
    assert!(help.contains("<instance><TAB><items ascending, comma-separated>"));
    assert!(help.contains("descending order of their ids"));
    assert!(help.contains("exits with status 2"));
    let version = shardcron(&["--version"]);
    assert_eq!(text(&version.stdout), format!("shardcron {}\n", env!("CARGO_PKG_VERSION")));
}
