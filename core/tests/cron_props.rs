//! Properties of `CronSchedule` over generated expressions. The generator builds each field
//! together with the set of values it means, so the checks below do not rely on our parser:
//! - every answer is a whole second strictly after the start, and its wall-clock fields in the
//!   zone satisfy the expression (in any zone, daylight saving included);
//! - answers chain: strictly increasing, and `iter_after` is repeated `next_after`;
//! - in zones without daylight saving, the answer is the earliest matching second after the
//!   start, found by a brute-force day-by-day scan (Quartz's peculiarities are all DST ones);
//! - letter case and spacing do not change the meaning.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure report

use std::collections::BTreeSet;

use chrono::{DateTime, Datelike, NaiveDate, Timelike};
use proptest::prelude::*;
use shardcron_core::cron::{CronSchedule, JobTimeZone};

/// A field's text and the values it stands for.
#[derive(Clone, Debug)]
struct Field {
    text: String,
    values: BTreeSet<u32>,
}

/// How the day is chosen (Quartz: exactly one of the day fields is `?`).
#[derive(Clone, Debug)]
enum Day {
    MonthDays(Field),
    Last(u32),
    LastWeekday(u32),
    NearestWeekday(u32),
    WeekDays(Field),
    LastOf(u32),
    Nth(u32, u32),
}

#[derive(Clone, Debug)]
struct Spec {
    seconds: Field,
    minutes: Field,
    hours: Field,
    day: Day,
    months: Field,
    years: Option<Field>,
}

impl Spec {
    fn expression(&self) -> String {
        let (dom, dow) = match &self.day {
            Day::MonthDays(f) => (f.text.clone(), "?".to_owned()),
            Day::Last(0) => ("L".to_owned(), "?".to_owned()),
            Day::Last(n) => (format!("L-{n}"), "?".to_owned()),
            Day::LastWeekday(0) => ("LW".to_owned(), "?".to_owned()),
            Day::LastWeekday(n) => (format!("L-{n}W"), "?".to_owned()),
            Day::NearestWeekday(d) => (format!("{d}W"), "?".to_owned()),
            Day::WeekDays(f) => ("?".to_owned(), f.text.clone()),
            Day::LastOf(w) => ("?".to_owned(), format!("{w}L")),
            Day::Nth(w, n) => ("?".to_owned(), format!("{w}#{n}")),
        };
        let mut fields = vec![
            self.seconds.text.clone(),
            self.minutes.text.clone(),
            self.hours.text.clone(),
            dom,
            self.months.text.clone(),
            dow,
        ];
        if let Some(years) = &self.years {
            fields.push(years.text.clone());
        }
        fields.join(" ")
    }

    fn year_ok(&self, year: u32) -> bool {
        (1970..=2099).contains(&year)
            && self.years.as_ref().is_none_or(|y| y.values.contains(&year))
    }

    fn date_ok(&self, date: NaiveDate) -> bool {
        let (year, month, day) = (date.year() as u32, date.month(), date.day());
        if !self.year_ok(year) || !self.months.values.contains(&month) {
            return false;
        }
        let last = days_in_month(date);
        let weekday = date.weekday().num_days_from_sunday() + 1; // Quartz: 1 = Sunday
        match &self.day {
            Day::MonthDays(f) => f.values.contains(&day),
            Day::Last(n) => last > *n && day == last - n,
            Day::LastWeekday(n) => day == nearest_weekday(date, last - n),
            Day::NearestWeekday(d) => day == nearest_weekday(date, *d),
            Day::WeekDays(f) => f.values.contains(&weekday),
            Day::LastOf(w) => weekday == *w && day + 7 > last,
            Day::Nth(w, n) => weekday == *w && (day - 1) / 7 + 1 == *n,
        }
    }

    fn time_ok(&self, hour: u32, minute: u32, second: u32) -> bool {
        self.hours.values.contains(&hour)
            && self.minutes.values.contains(&minute)
            && self.seconds.values.contains(&second)
    }

    /// The first matching time of day at or after `from` (seconds since midnight).
    fn first_time_from(&self, from: u32) -> Option<u32> {
        for h in &self.hours.values {
            for m in &self.minutes.values {
                for s in &self.seconds.values {
                    let t = h * 3600 + m * 60 + s;
                    if t >= from {
                        return Some(t);
                    }
                }
            }
        }
        None
    }
}

fn days_in_month(date: NaiveDate) -> u32 {
    let (y, m) = (date.year(), date.month());
    let next = if m == 12 {
        NaiveDate::from_ymd_opt(y + 1, 1, 1)
    } else {
        NaiveDate::from_ymd_opt(y, m + 1, 1)
    };
    next.unwrap().pred_opt().unwrap().day()
}

/// Quartz's `W`: the weekday nearest to `target` (1..=last) without leaving the month.
fn nearest_weekday(date: NaiveDate, target: u32) -> u32 {
    let last = days_in_month(date);
    let weekday = date.with_day(target).unwrap().weekday().num_days_from_sunday() + 1;
    match weekday {
        7 if target == 1 => 3,
        7 => target - 1,
        1 if target == last => target - 2,
        1 => target + 1,
        _ => target,
    }
}

/// The earliest second after `after_ms` that matches, for a zone with a constant offset.
fn brute_force(spec: &Spec, offset: i64, after_ms: i64) -> Option<i64> {
    let start = after_ms.div_euclid(1000) + 1;
    let local = DateTime::from_timestamp(start + offset, 0).unwrap().naive_utc();
    let mut date = local.date();
    let mut from = local.num_seconds_from_midnight();
    while date.year() <= 2099 {
        if !spec.year_ok(date.year() as u32) {
            date = NaiveDate::from_ymd_opt(date.year() + 1, 1, 1).unwrap();
            from = 0;
            continue;
        }
        if !spec.months.values.contains(&date.month()) {
            date = date.with_day(days_in_month(date)).unwrap().succ_opt().unwrap();
            from = 0;
            continue;
        }
        if spec.date_ok(date) {
            if let Some(t) = spec.first_time_from(from) {
                let midnight = date.and_hms_opt(0, 0, 0).unwrap().and_utc().timestamp();
                return Some((midnight + i64::from(t) - offset) * 1000);
            }
        }
        date = date.succ_opt().unwrap();
        from = 0;
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Generators

/// Values of `a-b/step` as Quartz defines them, wrapping when `a > b`.
fn range(lo: u32, hi: u32, a: u32, b: u32, step: u32) -> BTreeSet<u32> {
    let span = hi - lo + 1;
    let end = if a <= b { b } else { b + span };
    (a..=end).step_by(step as usize).map(|i| if i > hi { i - span } else { i }).collect()
}

fn element(lo: u32, hi: u32) -> impl Strategy<Value = Field> {
    let max_step = (hi - lo).clamp(1, 20);
    prop_oneof![
        (lo..=hi).prop_map(|v| Field { text: v.to_string(), values: [v].into() }),
        (lo..=hi, lo..=hi).prop_map(move |(a, b)| {
            // Years cannot wrap around.
            let (a, b) = if lo == 1970 { (a.min(b), a.max(b)) } else { (a, b) };
            Field { text: format!("{a}-{b}"), values: range(lo, hi, a, b, 1) }
        }),
        (lo..=hi, 1..=max_step).prop_map(move |(a, s)| Field {
            text: format!("{a}/{s}"),
            values: (a..=hi).step_by(s as usize).collect(),
        }),
        (1..=max_step).prop_map(move |s| Field {
            text: format!("*/{s}"),
            values: (lo..=hi).step_by(s as usize).collect(),
        }),
        (lo..=hi, lo..=hi, 1..=max_step).prop_map(move |(a, b, s)| {
            let (a, b) = if lo == 1970 { (a.min(b), a.max(b)) } else { (a, b) };
            Field { text: format!("{a}-{b}/{s}"), values: range(lo, hi, a, b, s) }
        }),
    ]
}

fn field(lo: u32, hi: u32) -> impl Strategy<Value = Field> {
    prop_oneof![
        2 => Just(Field { text: "*".to_owned(), values: (lo..=hi).collect() }),
        4 => element(lo, hi),
        1 => prop::collection::vec(element(lo, hi), 2..4).prop_map(|parts| Field {
            text: parts.iter().map(|p| p.text.as_str()).collect::<Vec<_>>().join(","),
            values: parts.iter().flat_map(|p| p.values.iter().copied()).collect(),
        }),
    ]
}

fn day() -> impl Strategy<Value = Day> {
    prop_oneof![
        3 => field(1, 31).prop_map(Day::MonthDays),
        1 => (0..=30_u32).prop_map(Day::Last),
        1 => (0..=27_u32).prop_map(Day::LastWeekday),
        // 29W-31W only exist in some months, where Quartz has its own reading; leave them to
        // the differential tests.
        1 => (1..=28_u32).prop_map(Day::NearestWeekday),
        3 => field(1, 7).prop_map(Day::WeekDays),
        1 => (1..=7_u32).prop_map(Day::LastOf),
        1 => (1..=7_u32, 1..=5_u32).prop_map(|(w, n)| Day::Nth(w, n)),
    ]
}

fn spec() -> impl Strategy<Value = Spec> {
    let years = prop_oneof![
        4 => Just(None),
        1 => field(1970, 2099).prop_map(Some),
    ];
    (field(0, 59), field(0, 59), field(0, 23), day(), field(1, 12), years).prop_map(
        |(seconds, minutes, hours, day, months, years)| Spec {
            seconds,
            minutes,
            hours,
            day,
            months,
            years,
        },
    )
}

/// 1995-01-01 .. 2060-01-01, sometimes with milliseconds.
fn instant() -> impl Strategy<Value = i64> {
    (788_918_400_i64..2_840_140_800, prop_oneof![3 => Just(0_i64), 1 => 0..1000_i64])
        .prop_map(|(s, ms)| s * 1000 + ms)
}

/// Zones whose offset has not changed since 1995, with that offset in seconds.
const FIXED_ZONES: &[(&str, i64)] = &[
    ("UTC", 0),
    ("", 0),
    ("GMT+08:00", 8 * 3600),
    ("GMT-5", -5 * 3600),
    ("GMT+5:45", 5 * 3600 + 45 * 60),
    ("Asia/Kolkata", 5 * 3600 + 1800),
];

const ANY_ZONES: &[&str] = &[
    "UTC",
    "Asia/Shanghai",
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",
    "America/Sao_Paulo",
    "GMT+08:00",
];

/// The wall-clock fields of an instant in a zone.
fn local_fields(zone: &JobTimeZone, epoch_ms: i64) -> (NaiveDate, u32, u32, u32) {
    let offset = i64::from(zone.offset_seconds_at(epoch_ms).unwrap());
    let local = DateTime::from_timestamp_millis(epoch_ms + offset * 1000).unwrap().naive_utc();
    (local.date(), local.hour(), local.minute(), local.second())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn answers_are_later_whole_seconds_that_match(
        spec in spec(),
        zone in prop::sample::select(ANY_ZONES),
        after in instant(),
    ) {
        let schedule = CronSchedule::parse(&spec.expression(), zone).unwrap();
        let mut previous = after;
        for fire in schedule.iter_after(after).take(4) {
            prop_assert!(fire > previous, "{fire} not after {previous}");
            prop_assert_eq!(fire.rem_euclid(1000), 0);
            let (date, h, m, s) = local_fields(schedule.time_zone(), fire);
            prop_assert!(spec.date_ok(date), "{} does not match the day rule", date);
            prop_assert!(spec.time_ok(h, m, s), "{h}:{m}:{s} does not match");
            prop_assert_eq!(Some(fire), schedule.next_after(previous));
            previous = fire;
        }
    }

    #[test]
    fn without_daylight_saving_the_answer_is_the_earliest_match(
        spec in spec(),
        zone in prop::sample::select(FIXED_ZONES),
        after in instant(),
    ) {
        let (zone, offset) = zone;
        let schedule = CronSchedule::parse(&spec.expression(), zone).unwrap();
        let mut from = after;
        for _ in 0..3 {
            let expected = brute_force(&spec, offset, from);
            prop_assert_eq!(schedule.next_after(from), expected, "after {}", from);
            match expected {
                Some(t) => from = t,
                None => break,
            }
        }
    }

    #[test]
    fn letter_case_and_spacing_do_not_matter(spec in spec(), after in instant()) {
        let text = spec.expression();
        let plain = CronSchedule::parse(&text, "Europe/London").unwrap();
        let spaced = text.replace(' ', "  \t ").to_lowercase();
        let other = CronSchedule::parse(&format!(" {spaced} "), "Europe/London").unwrap();
        prop_assert_eq!(plain.next_after(after), other.next_after(after));
    }

    #[test]
    fn later_starts_never_give_earlier_answers_without_dst(
        spec in spec(),
        a in instant(),
        gap in 0_i64..40_000_000_000,
    ) {
        let schedule = CronSchedule::parse(&spec.expression(), "GMT+08:00").unwrap();
        let (x, y) = (schedule.next_after(a), schedule.next_after(a + gap));
        match (x, y) {
            (Some(x), Some(y)) => prop_assert!(x <= y),
            (None, Some(_)) => prop_assert!(false, "ended, then fired again"),
            _ => {}
        }
    }
}
