//! core::cron against Quartz 2.3.2's recorded answers (`quartz-oracle/fixture.tsv`): every
//! special character, zones with and without daylight saving (transitions before and after 2037,
//! where Java switches from its transition table to rules), a day skipped entirely, the edges of
//! 1970 and 2099, milliseconds, and the expressions Quartz rejects. Needs no Java; the live test
//! `cron_quartz_live.rs` asks Quartz itself.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure report

mod common;

use common::{compare, parse_answer_line, Answer};

/// Expressions Quartz accepts (or hangs on) and we reject on purpose, each for the reason in
/// `core::cron`'s module docs. Every one must be in the fixture, accepted by Quartz there, and
/// rejected by us.
const DELIBERATE: &[&str] = &[
    "0 0 5-10x * * ?",      // trailing characters after a range
    "0 0 12 ? * MONDAY",    // Quartz reads MON and ignores the rest
    "0 0 12 1 JANUARY ?",   // likewise JAN
    "0 0 0 1,,2 * ?",       // empty list element
    "0 0 12 ? * MON/2",     // step after a name: ignored by Quartz
    "0 0 12 1 JAN-JUN/2 ?", // step after a name range: ignored by Quartz
    "*/0 * * * * ?",        // step 0: Quartz reads `*`
    "5/0 * * * * ?",        // step 0: Quartz reads `5`
    "0-59/60 * * * * ?",    // step larger than the field
    "0 0 12 1,15W * ?",     // W in a list: Quartz applies it to the first day only
    "0 0 12 1-5W * ?",      // W after a range: ignored by Quartz
    "0 0 0 0W * ?",         // day 0
    "0 0 0 ? * 9#3",        // weekday 9
    "0 0 0 1 1 ? 2100",     // beyond 2099
    "0 0 0 1 1 ? 1969",     // before 1970
    "0 0 0 * * ? 2020 1",   // an eighth field, ignored by Quartz
    "0 0 0 L-W * ?",        // `L-` without its number: Quartz reads LW
    "0 0 0 ? * LW",         // Quartz reads L (Saturday) and ignores W
    "0 0 0 1 * ?x",         // one character after `?`, ignored by Quartz
    "0 0 0 L-28W * ?",      // Quartz never returns in February
    "0 0 0 L-30W * ?",      // likewise
    "0 0 0 ? * 5L3",        // trailing characters after `5L`
    "0 0 12 ? * L-2",       // Quartz reads L (Saturday) and ignores `-2`
    "0 0 0 1 1 ? L",        // `L` as a year: Quartz accepts it and never fires
];

fn fixture() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/quartz-oracle/fixture.tsv");
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn matches_quartz_recorded_answers() {
    let text = fixture();
    let mut checked = 0;
    let mut failures = Vec::new();
    for line in text.lines() {
        let Some(parsed) = parse_answer_line(line) else {
            continue;
        };
        let (case, answer) = parsed.unwrap();
        let deliberate = DELIBERATE.contains(&case.expression.as_str());
        if let Err(difference) = compare(&case, &answer, deliberate) {
            failures.push(difference);
        }
        checked += 1;
    }
    assert!(checked >= 500, "the fixture lost cases: only {checked} left");
    assert!(
        failures.is_empty(),
        "{} of {checked} recorded Quartz answers differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_deliberate_difference_is_recorded_against_quartz() {
    let text = fixture();
    for expression in DELIBERATE {
        let answers: Vec<Answer> = text
            .lines()
            .filter_map(parse_answer_line)
            .map(Result::unwrap)
            .filter(|(case, _)| case.expression == *expression)
            .map(|(_, answer)| answer)
            .collect();
        assert!(!answers.is_empty(), "`{expression}` is not in the fixture");
        assert!(
            answers.iter().all(|a| *a != Answer::Rejected),
            "Quartz rejects `{expression}` too; it is not a difference"
        );
    }
}

#[test]
fn fixture_covers_every_feature() {
    let text = fixture();
    let expressions: Vec<&str> = text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split('\t').next())
        .collect();
    let zones: Vec<&str> = text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split('\t').nth(1))
        .collect();
    for needle in [
        "0/10", "5/15", "10-40/7", "*/5", "L-3", "LW", "15W", "6L", "6#3", "MON-FRI", "NOV-FEB",
        "2099",
    ] {
        assert!(
            expressions.iter().any(|e| e.split(' ').any(|f| f == needle)),
            "no fixture expression uses `{needle}`"
        );
    }
    for zone in [
        "America/New_York",
        "Europe/London",
        "Australia/Sydney",
        "Australia/Lord_Howe",
        "Pacific/Apia",
        "GMT+08:00",
        "GMT-5",
        "",
    ] {
        assert!(zones.contains(&zone), "no fixture case in zone `{zone}`");
    }
}
