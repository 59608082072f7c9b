//! Table tests of `CronSchedule`: parsing of valid expressions and next fire times for every
//! special character, zone form and daylight-saving case. Times are written as RFC 3339 in the
//! schedule's zone, the way a person checks them against a calendar; each row was also confirmed
//! with Quartz 2.3.2 (see `quartz-oracle/`).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure report

use chrono::DateTime;
use shardcron_core::cron::{CronSchedule, JobTimeZone};

fn epoch_ms(rfc3339: &str) -> i64 {
    DateTime::parse_from_rfc3339(rfc3339)
        .unwrap_or_else(|e| panic!("{rfc3339}: {e}"))
        .timestamp_millis()
}

/// (expression, zone, after, the next fire times in the zone; fewer than asked means the end)
type Row = (&'static str, &'static str, &'static str, &'static [&'static str]);

fn check(rows: &[Row]) {
    for (expression, zone, after, expected) in rows {
        let schedule = CronSchedule::parse(expression, zone)
            .unwrap_or_else(|e| panic!("`{expression}` in `{zone}`: {e}"));
        let got: Vec<String> = schedule
            .iter_after(epoch_ms(after))
            .take(expected.len() + 1)
            .map(|t| schedule.time_zone().format_rfc3339(t).unwrap())
            .collect();
        // One more than expected is asked for, so a schedule that should end is checked too;
        // rows that do not end list only a prefix.
        let got = if got.len() > expected.len() && !ends(expected) {
            &got[..expected.len()]
        } else {
            &got[..]
        };
        let expected: Vec<&str> = expected.iter().copied().filter(|t| *t != END).collect();
        assert_eq!(got, expected, "`{expression}` in `{zone}` after {after}");
    }
}

/// Marks the end of a schedule in a row.
const END: &str = "end";

fn ends(expected: &[&str]) -> bool {
    expected.last() == Some(&END)
}

#[test]
fn steps_ranges_lists_and_names() {
    check(&[
        (
            "0/10 * * * * ?",
            "UTC",
            "2025-01-01T00:00:05Z",
            &[
                "2025-01-01T00:00:10+00:00",
                "2025-01-01T00:00:20+00:00",
                "2025-01-01T00:00:30+00:00",
            ],
        ),
        (
            "5/15 * * * * ?",
            "UTC",
            "2025-01-01T00:00:50Z",
            &[
                "2025-01-01T00:01:05+00:00",
                "2025-01-01T00:01:20+00:00",
                "2025-01-01T00:01:35+00:00",
            ],
        ),
        (
            "10-40/7 * * * * ?",
            "UTC",
            "2025-01-01T00:00:38Z",
            &[
                "2025-01-01T00:01:10+00:00",
                "2025-01-01T00:01:17+00:00",
                "2025-01-01T00:01:24+00:00",
            ],
        ),
        (
            "*/20 * * * * ?",
            "UTC",
            "2025-01-01T00:00:00Z",
            &[
                "2025-01-01T00:00:20+00:00",
                "2025-01-01T00:00:40+00:00",
                "2025-01-01T00:01:00+00:00",
            ],
        ),
        (
            "0 0 22-2 * * ?",
            "UTC",
            "2025-01-01T02:00:00Z",
            &[
                "2025-01-01T22:00:00+00:00",
                "2025-01-01T23:00:00+00:00",
                "2025-01-02T00:00:00+00:00",
                "2025-01-02T01:00:00+00:00",
                "2025-01-02T02:00:00+00:00",
                "2025-01-02T22:00:00+00:00",
            ],
        ),
        (
            "0 0,30 8 1,15 * ?",
            "UTC",
            "2025-01-01T08:00:00Z",
            &[
                "2025-01-01T08:30:00+00:00",
                "2025-01-15T08:00:00+00:00",
                "2025-01-15T08:30:00+00:00",
            ],
        ),
        // 2025-01-03 is a Friday.
        (
            "0 0 12 ? * MON-FRI",
            "UTC",
            "2025-01-03T12:00:00Z",
            &[
                "2025-01-06T12:00:00+00:00",
                "2025-01-07T12:00:00+00:00",
                "2025-01-08T12:00:00+00:00",
            ],
        ),
        (
            "0 0 12 ? * fri-mon",
            "UTC",
            "2025-01-01T00:00:00Z",
            &[
                "2025-01-03T12:00:00+00:00",
                "2025-01-04T12:00:00+00:00",
                "2025-01-05T12:00:00+00:00",
                "2025-01-06T12:00:00+00:00",
                "2025-01-10T12:00:00+00:00",
            ],
        ),
        // Quartz numbers weekdays from Sunday = 1.
        (
            "0 0 12 ? * 1",
            "UTC",
            "2025-01-01T00:00:00Z",
            &["2025-01-05T12:00:00+00:00", "2025-01-12T12:00:00+00:00"],
        ),
        ("0 0 12 ? * 7", "UTC", "2025-01-01T00:00:00Z", &["2025-01-04T12:00:00+00:00"]),
        ("0 0 12 ? * L", "UTC", "2025-01-01T00:00:00Z", &["2025-01-04T12:00:00+00:00"]),
        (
            "0 0 12 ? * */3",
            "UTC",
            "2025-01-01T00:00:00Z",
            &[
                "2025-01-01T12:00:00+00:00",
                "2025-01-04T12:00:00+00:00",
                "2025-01-05T12:00:00+00:00",
            ],
        ),
        (
            "0 0 0 1 NOV-FEB ?",
            "UTC",
            "2025-03-01T00:00:00Z",
            &[
                "2025-11-01T00:00:00+00:00",
                "2025-12-01T00:00:00+00:00",
                "2026-01-01T00:00:00+00:00",
                "2026-02-01T00:00:00+00:00",
                "2026-11-01T00:00:00+00:00",
            ],
        ),
        (
            "0 0 0 1 */5 ?",
            "UTC",
            "2025-01-01T00:00:00Z",
            &[
                "2025-06-01T00:00:00+00:00",
                "2025-11-01T00:00:00+00:00",
                "2026-01-01T00:00:00+00:00",
            ],
        ),
        (
            "0 0 0 28-2 2 ?",
            "UTC",
            "2025-01-01T00:00:00Z",
            &[
                "2025-02-01T00:00:00+00:00",
                "2025-02-02T00:00:00+00:00",
                "2025-02-28T00:00:00+00:00",
                "2026-02-01T00:00:00+00:00",
            ],
        ),
        ("0   0\t12  *  *  ?", "UTC", "2025-01-01T00:00:00Z", &["2025-01-01T12:00:00+00:00"]),
    ]);
}

#[test]
fn last_weekday_and_nth_specials() {
    check(&[
        (
            "0 0 12 L * ?",
            "UTC",
            "2024-01-31T12:00:00Z",
            &[
                "2024-02-29T12:00:00+00:00",
                "2024-03-31T12:00:00+00:00",
                "2024-04-30T12:00:00+00:00",
            ],
        ),
        (
            "0 0 12 L-3 * ?",
            "UTC",
            "2025-01-01T00:00:00Z",
            &[
                "2025-01-28T12:00:00+00:00",
                "2025-02-25T12:00:00+00:00",
                "2025-03-28T12:00:00+00:00",
            ],
        ),
        // L-30 exists only in 31-day months (the 1st).
        (
            "0 0 12 L-30 * ?",
            "UTC",
            "2025-01-02T00:00:00Z",
            &[
                "2025-03-01T12:00:00+00:00",
                "2025-05-01T12:00:00+00:00",
                "2025-07-01T12:00:00+00:00",
            ],
        ),
        // Last weekday: 31 May 2025 is a Saturday, so the 30th.
        (
            "0 0 12 LW * ?",
            "UTC",
            "2025-01-01T00:00:00Z",
            &[
                "2025-01-31T12:00:00+00:00",
                "2025-02-28T12:00:00+00:00",
                "2025-03-31T12:00:00+00:00",
                "2025-04-30T12:00:00+00:00",
                "2025-05-30T12:00:00+00:00",
            ],
        ),
        // L-2W: 29 Jan 2025 is a Wednesday; 26 Feb a Wednesday; 29 Mar a Saturday -> 28th.
        (
            "0 0 12 L-2W * ?",
            "UTC",
            "2025-01-01T00:00:00Z",
            &[
                "2025-01-29T12:00:00+00:00",
                "2025-02-26T12:00:00+00:00",
                "2025-03-28T12:00:00+00:00",
            ],
        ),
        // 15 Feb and 15 Mar 2025 are Saturdays (-> Friday), 15 Jun a Sunday (-> Monday).
        (
            "0 0 12 15W * ?",
            "UTC",
            "2025-01-01T00:00:00Z",
            &[
                "2025-01-15T12:00:00+00:00",
                "2025-02-14T12:00:00+00:00",
                "2025-03-14T12:00:00+00:00",
                "2025-04-15T12:00:00+00:00",
                "2025-05-15T12:00:00+00:00",
                "2025-06-16T12:00:00+00:00",
            ],
        ),
        // 1 Feb and 1 Mar 2025 are Saturdays: W does not leave the month, so Monday the 3rd.
        (
            "0 0 12 1W * ?",
            "UTC",
            "2025-01-15T00:00:00Z",
            &[
                "2025-02-03T12:00:00+00:00",
                "2025-03-03T12:00:00+00:00",
                "2025-04-01T12:00:00+00:00",
            ],
        ),
        // 30 Nov 2025 is a Sunday and the month's last day: back to Friday the 28th.
        ("0 0 12 30W * ?", "UTC", "2025-11-01T00:00:00Z", &["2025-11-28T12:00:00+00:00"]),
        // The nearest weekday to the 14th is the 14th 12:00 here, already behind the search
        // start: next month.
        ("0 0 12 15W * ?", "UTC", "2025-02-14T12:00:00Z", &["2025-03-14T12:00:00+00:00"]),
        (
            "0 0 12 ? * 6L",
            "UTC",
            "2025-01-01T00:00:00Z",
            &[
                "2025-01-31T12:00:00+00:00",
                "2025-02-28T12:00:00+00:00",
                "2025-03-28T12:00:00+00:00",
            ],
        ),
        ("0 0 12 ? * friL", "UTC", "2025-01-01T00:00:00Z", &["2025-01-31T12:00:00+00:00"]),
        (
            "0 0 12 ? * 6#3",
            "UTC",
            "2025-01-01T00:00:00Z",
            &[
                "2025-01-17T12:00:00+00:00",
                "2025-02-21T12:00:00+00:00",
                "2025-03-21T12:00:00+00:00",
            ],
        ),
        (
            "0 0 12 ? * MON#1",
            "UTC",
            "2025-01-01T00:00:00Z",
            &["2025-01-06T12:00:00+00:00", "2025-02-03T12:00:00+00:00"],
        ),
        // Months without a fifth Monday are skipped.
        (
            "0 0 12 ? * 2#5",
            "UTC",
            "2025-01-01T00:00:00Z",
            &[
                "2025-03-31T12:00:00+00:00",
                "2025-06-30T12:00:00+00:00",
                "2025-09-29T12:00:00+00:00",
                "2025-12-29T12:00:00+00:00",
            ],
        ),
        (
            "0 0 0 29 2 ?",
            "UTC",
            "2025-01-01T00:00:00Z",
            &["2028-02-29T00:00:00+00:00", "2032-02-29T00:00:00+00:00"],
        ),
        (
            "0 0 0 31 * ?",
            "UTC",
            "2025-04-01T00:00:00Z",
            &[
                "2025-05-31T00:00:00+00:00",
                "2025-07-31T00:00:00+00:00",
                "2025-08-31T00:00:00+00:00",
            ],
        ),
    ]);
}

#[test]
fn years_and_the_end_of_a_schedule() {
    check(&[
        (
            "0 15 10 ? * 6L 2022-2025",
            "UTC",
            "2025-11-01T00:00:00Z",
            &["2025-11-28T10:15:00+00:00", "2025-12-26T10:15:00+00:00", END],
        ),
        ("0 0 0 1 1 ? 2099", "UTC", "2025-01-01T00:00:00Z", &["2099-01-01T00:00:00+00:00", END]),
        (
            "0 0 0 1 1 ? 2050/10",
            "UTC",
            "2025-01-01T00:00:00Z",
            &[
                "2050-01-01T00:00:00+00:00",
                "2060-01-01T00:00:00+00:00",
                "2070-01-01T00:00:00+00:00",
                "2080-01-01T00:00:00+00:00",
                "2090-01-01T00:00:00+00:00",
                END,
            ],
        ),
        (
            "59 59 23 31 12 ?",
            "UTC",
            "2098-06-01T00:00:00Z",
            &["2098-12-31T23:59:59+00:00", "2099-12-31T23:59:59+00:00", END],
        ),
        // A day that never comes.
        ("0 0 0 30 2 ?", "UTC", "2025-01-01T00:00:00Z", &[END]),
        ("0 0 0 ? 2 2#5 2025-2030", "UTC", "2025-01-01T00:00:00Z", &[END]),
        // Nothing fires before 1970, whenever the search starts.
        ("0 0 0 * * ?", "UTC", "1900-01-01T00:00:00Z", &["1970-01-01T00:00:00+00:00"]),
        (
            "0 0 0 * * ?",
            "Asia/Shanghai",
            "1969-12-31T15:00:00Z",
            &["1970-01-01T00:00:00+08:00", "1970-01-02T00:00:00+08:00"],
        ),
        ("* * * * * ?", "UTC", "2099-12-31T23:59:58Z", &["2099-12-31T23:59:59+00:00", END]),
    ]);
}

#[test]
fn strictly_after_and_whole_seconds() {
    check(&[
        ("0 0 12 * * ?", "UTC", "2025-01-01T12:00:00Z", &["2025-01-02T12:00:00+00:00"]),
        ("0 0 12 * * ?", "UTC", "2025-01-01T11:59:59.999Z", &["2025-01-01T12:00:00+00:00"]),
        ("0 0 12 * * ?", "UTC", "2025-01-01T11:59:59Z", &["2025-01-01T12:00:00+00:00"]),
        // The rest of the second of `after` is skipped too (Quartz truncates to the second).
        ("* * * * * ?", "UTC", "2025-01-01T12:00:00.001Z", &["2025-01-01T12:00:01+00:00"]),
        ("* * * * * ?", "UTC", "2025-01-01T11:59:59.999Z", &["2025-01-01T12:00:00+00:00"]),
    ]);
    let schedule = CronSchedule::parse("0 0 12 * * ?", "UTC").unwrap();
    assert_eq!(schedule.next_after(i64::MAX), None);
    assert_eq!(schedule.next_after(i64::MIN), Some(43_200_000));
}

#[test]
fn time_zone_forms() {
    check(&[
        ("0 0 9 * * ?", "Asia/Shanghai", "2025-01-01T00:00:00Z", &["2025-01-01T09:00:00+08:00"]),
        ("0 0 9 * * ?", "GMT+08:00", "2025-01-01T00:00:00Z", &["2025-01-01T09:00:00+08:00"]),
        ("0 0 9 * * ?", "GMT+8", "2025-01-01T00:00:00Z", &["2025-01-01T09:00:00+08:00"]),
        ("0 0 9 * * ?", "CTT", "2025-01-01T00:00:00Z", &["2025-01-01T09:00:00+08:00"]),
        ("0 0 9 * * ?", "GMT-5", "2025-01-01T00:00:00Z", &["2025-01-01T09:00:00-05:00"]),
        ("0 0 9 * * ?", "GMT-05:30", "2025-01-01T00:00:00Z", &["2025-01-01T09:00:00-05:30"]),
        ("0 0 9 * * ?", "GMT", "2025-01-01T00:00:00Z", &["2025-01-01T09:00:00+00:00"]),
        ("0 0 9 * * ?", "", "2025-01-01T00:00:00Z", &["2025-01-01T09:00:00+00:00"]),
        ("0 0 9 * * ?", "Asia/Kathmandu", "2025-01-01T00:00:00Z", &["2025-01-01T09:00:00+05:45"]),
        ("0 0 9 * * ?", "Pacific/Chatham", "2025-01-01T00:00:00Z", &["2025-01-02T09:00:00+13:45"]),
    ]);
}

#[test]
fn daylight_saving_as_quartz_does_it() {
    check(&[
        // New York, 9 Mar 2025: 02:00 EST -> 03:00 EDT. 02:30 does not exist that day and is
        // skipped, not moved.
        (
            "0 30 2 * * ?",
            "America/New_York",
            "2025-03-08T12:00:00-05:00",
            &["2025-03-10T02:30:00-04:00", "2025-03-11T02:30:00-04:00"],
        ),
        (
            "0 0 2 * * ?",
            "America/New_York",
            "2025-03-08T12:00:00-05:00",
            &["2025-03-10T02:00:00-04:00"],
        ),
        // Reaching the gap through the minutes lands on the first time after it.
        (
            "0 0/30 * * * ?",
            "America/New_York",
            "2025-03-09T01:00:00-05:00",
            &[
                "2025-03-09T01:30:00-05:00",
                "2025-03-09T03:00:00-04:00",
                "2025-03-09T03:30:00-04:00",
            ],
        ),
        // 2 Nov 2025: 02:00 EDT -> 01:00 EST. The repeated 01:30 fires once, in its second pass.
        (
            "0 30 1 * * ?",
            "America/New_York",
            "2025-11-01T12:00:00-04:00",
            &["2025-11-02T01:30:00-05:00", "2025-11-03T01:30:00-05:00"],
        ),
        // Every minute jumps over the first pass of the repeated hour.
        (
            "0 * * * * ?",
            "America/New_York",
            "2025-11-02T00:58:00-04:00",
            &[
                "2025-11-02T00:59:00-04:00",
                "2025-11-02T01:00:00-05:00",
                "2025-11-02T01:01:00-05:00",
            ],
        ),
        // A search starting inside the first pass continues in the second.
        (
            "* * * * * ?",
            "America/New_York",
            "2025-11-02T01:30:00-04:00",
            &["2025-11-02T01:30:01-05:00", "2025-11-02T01:30:02-05:00"],
        ),
        (
            "0 0 * * * ?",
            "America/New_York",
            "2025-11-02T00:30:00-04:00",
            &["2025-11-02T01:00:00-05:00", "2025-11-02T02:00:00-05:00"],
        ),
        // London, 30 Mar 2025: 01:00 GMT -> 02:00 BST; 26 Oct: 02:00 BST -> 01:00 GMT.
        ("0 30 1 * * ?", "Europe/London", "2025-03-29T12:00:00Z", &["2025-03-31T01:30:00+01:00"]),
        (
            "0 30 1 * * ?",
            "Europe/London",
            "2025-10-25T12:00:00Z",
            &["2025-10-26T01:30:00+00:00", "2025-10-27T01:30:00+00:00"],
        ),
        // Sydney, 5 Oct 2025: 02:00 AEST -> 03:00 AEDT (the southern spring).
        (
            "0 30 2 * * ?",
            "Australia/Sydney",
            "2025-10-04T12:00:00+10:00",
            &["2025-10-06T02:30:00+11:00"],
        ),
        // Lord Howe moves by half an hour: 02:00 -> 02:30 on 5 Oct 2025. 02:15 is skipped,
        // 02:45 still fires.
        (
            "0 15 2 * * ?",
            "Australia/Lord_Howe",
            "2025-10-04T12:00:00+10:30",
            &["2025-10-06T02:15:00+11:00"],
        ),
        (
            "0 45 2 * * ?",
            "Australia/Lord_Howe",
            "2025-10-04T12:00:00+10:30",
            &["2025-10-05T02:45:00+11:00"],
        ),
        // Sao Paulo, 4 Nov 2018: 00:00 -> 01:00, so the midnight job skips that day.
        (
            "0 0 0 * * ?",
            "America/Sao_Paulo",
            "2018-11-03T12:00:00-03:00",
            &["2018-11-05T00:00:00-02:00"],
        ),
        // Beyond 2037 Java switches from its transition table to rules; same behaviour.
        (
            "0 30 2 * * ?",
            "America/New_York",
            "2045-03-11T12:00:00-05:00",
            &["2045-03-13T02:30:00-04:00"],
        ),
    ]);
}

#[test]
fn accessors_and_iteration() {
    let schedule = CronSchedule::parse("0 0 12 ? * wed", "Asia/Shanghai").unwrap();
    assert_eq!(schedule.expression(), "0 0 12 ? * wed");
    assert_eq!(schedule.time_zone().to_string(), "Asia/Shanghai");
    assert_eq!(*schedule.time_zone(), JobTimeZone::parse("Asia/Shanghai").unwrap());
    let after = epoch_ms("2025-01-01T00:00:00Z");
    let mut previous = after;
    for fire in schedule.iter_after(after).take(20) {
        assert_eq!(Some(fire), schedule.next_after(previous));
        previous = fire;
    }
    // Parsing is case- and spacing-insensitive in meaning, but keeps the text it was given.
    let upper = CronSchedule::parse("0 0 12 ? * WED", "Asia/Shanghai").unwrap();
    assert_ne!(upper, schedule);
    assert_eq!(upper.next_after(after), schedule.next_after(after));
    assert_eq!(schedule.clone(), schedule);
    assert!(format!("{schedule:?}").contains("0 0 12 ? * wed"));
    for valid in ["* * * * * ?", "0 0 12 ? * WED", "0 0 12 * * ? *", "0 0 12 L * ? 2025"] {
        assert!(CronSchedule::parse(valid, "").is_ok(), "{valid}");
    }
}

#[test]
fn last_in_is_the_last_fire_a_forward_walk_finds() {
    let walk = |s: &CronSchedule, after: i64, until: i64| {
        s.iter_after(after).take_while(|&t| t <= until).last()
    };
    let base = 1_700_000_000_000;
    for cron in ["0/2 * * * * ?", "0 0/7 * * * ?", "0 30 3 * * ?", "0 0 0 29 2 ? *"] {
        let s = CronSchedule::parse(cron, "").unwrap();
        for (after, until) in [
            (base, base),
            (base, base + 1_999),
            (base - 1, base + 2_000),
            (base, base + 3_600_000),
            (base - 86_400_000, base),
            (base - 3 * 86_400_000, base + 17_000),
        ] {
            assert_eq!(
                s.last_in(after, until),
                walk(&s, after, until),
                "{cron} ({after}, {until}]"
            );
        }
    }
}
