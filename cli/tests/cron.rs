//! Runs `shardcron cron next` and checks exact stdout, stderr and exit codes.

mod common;

use common::*;

#[test]
fn next_fire_times_in_utc_from_epoch_millis() {
    let out =
        shardcron(&["cron", "next", "--after", "1700000000000", "--count", "3", "0/15 * * * * ?"]);
    assert_prints(
        &out,
        "1700000010000\t2023-11-14T22:13:30+00:00\n1700000025000\t2023-11-14T22:13:45+00:00\n1700000040000\t2023-11-14T22:14:00+00:00\n",
    );
}

#[test]
fn strictly_after_the_instant_and_in_the_zone() {
    let out = shardcron(&[
        "cron",
        "next",
        "--tz",
        "GMT+08:00",
        "--after",
        "2023-11-15T06:13:30+08:00",
        "0/15 * * * * ?",
    ]);
    assert_prints(&out, "1700000025000\t2023-11-15T06:13:45+08:00\n");
}

#[test]
fn daylight_saving_gap_is_skipped_as_quartz_does() {
    // 02:30 does not exist in New York on 2024-03-10; Quartz skips that day.
    let out = shardcron(&[
        "cron",
        "next",
        "--tz",
        "America/New_York",
        "--after",
        "2024-03-09T12:00:00-05:00",
        "--count",
        "2",
        "0 30 2 * * ?",
    ]);
    assert_prints(
        &out,
        "1710138600000\t2024-03-11T02:30:00-04:00\n1710225000000\t2024-03-12T02:30:00-04:00\n",
    );
}

#[test]
fn fewer_lines_when_the_schedule_ends() {
    let out = shardcron(&["cron", "next", "--after", "0", "--count", "5", "0 0 0 1 1 ? 2098-2099"]);
    assert_prints(
        &out,
        "4039372800000\t2098-01-01T00:00:00+00:00\n4070908800000\t2099-01-01T00:00:00+00:00\n",
    );
}

#[test]
fn a_schedule_that_never_fires_says_so_with_status_1() {
    for (args, message) in [
        (
            &["cron", "next", "0 0 0 30 2 ?"][..],
            "error: `0 0 0 30 2 ?` never fires: no date matches all of its fields at once (like \
             February 30, or the 31st of a 30-day month)\n",
        ),
        (
            &["cron", "next", "--after", "2024-01-01T00:00:00Z", "0 0 0 1 1 ? 2020"][..],
            "error: `0 0 0 1 1 ? 2020` never fires after 2024-01-01T00:00:00+00:00: its last fire \
             time is earlier (its year field ends, and Quartz years end at 2099)\n",
        ),
    ] {
        let out = shardcron(args);
        assert_eq!(text(&out.stdout), "");
        assert_eq!(text(&out.stderr), message);
        assert_eq!(out.status.code(), Some(1));
    }
}

#[test]
fn a_unix_cron_gets_its_quartz_form_suggested() {
    assert_refused(
        &shardcron(&["cron", "next", "*/5 * * * *"]),
        "this looks like a Unix cron (minute first, no seconds): did you mean `0 */5 * * * ?`",
    );
}

#[test]
fn default_instant_is_now() {
    let out = shardcron(&["cron", "next", "--count", "2", "* * * * * ?"]);
    assert_eq!(out.status.code(), Some(0));
    let lines: Vec<i64> =
        text(&out.stdout).lines().map(|l| l.split('\t').next().unwrap().parse().unwrap()).collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1] - lines[0], 1000, "every second");
}

#[test]
fn invalid_input_exits_2_with_one_line() {
    assert_refused(&shardcron(&["cron", "next", "0 0 25 * * ?"]), "hours field `25`");
    assert_refused(&shardcron(&["cron", "next", "0 0 12 * *"]), "5 field(s)");
    assert_refused(
        &shardcron(&["cron", "next", "--tz", "Mars/Base", "0 0 12 * * ?"]),
        "unknown time zone `Mars/Base`",
    );
    assert_refused(
        &shardcron(&["cron", "next", "--after", "yesterday", "0 0 12 * * ?"]),
        "--after \"yesterday\"",
    );
    assert_refused(&shardcron(&["cron", "next", "--count", "many", "0 0 12 * * ?"]), "--count");
    assert_refused(&shardcron(&["cron", "next"]), "EXPR");
}

#[test]
fn help_describes_the_output() {
    let out = shardcron(&["cron", "next", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout);
    assert!(help.contains("<epoch-ms>\\t<RFC 3339 in the zone>"), "{help}");
    assert!(help.contains("--tz") && help.contains("--after") && help.contains("--count"));
}
