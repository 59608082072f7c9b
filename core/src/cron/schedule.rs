//! `CronSchedule` and the next-fire-time search.
//!
//! The search reproduces the one in Quartz 2.3's `CronExpression.getTimeAfter`, step for step,
//! over the lenient calendar of `calendar.rs`: starting one second after the given instant
//! (truncated to the second), each pass fixes the fields from the second upwards; a field that
//! does not match moves the calendar to the next candidate (resetting the smaller fields) and
//! starts a new pass; a pass in which every field matches is the answer. Few passes are needed
//! (one per field that has to move, plus one per month or year skipped), so a search costs
//! microseconds whatever the distance to the next fire.
//!
//! Why not a cleaner search, e.g. "enumerate matching local times, map each to an instant"? It
//! would differ from Quartz exactly where users notice: around daylight-saving transitions.
//! Quartz's answers there are a consequence of the order in which it writes calendar fields and
//! of Java's rules for wall times that do not exist or exist twice; `mod.rs` lists the effects.

use super::calendar::{days_in_month, LenientCalendar};
use super::error::CronError;
use super::field::{CronSpec, DaySpec, MonthDays, WeekDays, LAST_YEAR};
use super::zone::JobTimeZone;

/// A Quartz cron expression bound to a time zone: answers "when is the next fire after this
/// instant?" exactly as Quartz 2.3 does (see the [module docs](super) for the rules and the few
/// deliberate differences).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CronSchedule {
    expression: String,
    zone: JobTimeZone,
    spec: CronSpec,
}

impl CronSchedule {
    /// Parses a 6- or 7-field Quartz expression and a zone id (see [`JobTimeZone::parse`]).
    ///
    /// An empty `time_zone` means UTC, so that a schedule means the same on every machine.
    /// ElasticJob's default is the JVM's default zone instead; pass it explicitly to match a
    /// deployment that relied on that.
    pub fn parse(expression: &str, time_zone: &str) -> Result<CronSchedule, CronError> {
        let spec = CronSpec::parse(expression)?;
        let zone = JobTimeZone::parse(time_zone)?;
        Ok(CronSchedule { expression: expression.to_owned(), zone, spec })
    }

    /// The first fire time strictly after `after_epoch_ms`, in epoch milliseconds (always a
    /// whole second). Like Quartz, the search starts at the next whole second, so a fire at
    /// exactly `after_epoch_ms` is not returned. `None` when the schedule has no fire left up to
    /// the end of 2099.
    pub fn next_after(&self, after_epoch_ms: i64) -> Option<i64> {
        super::memo::next_fire(&self.spec, &self.zone, after_epoch_ms)
    }

    /// The parsed expression and the zone, for the memo's tests.
    #[cfg(test)]
    pub(crate) fn parts(&self) -> (&CronSpec, &JobTimeZone) {
        (&self.spec, &self.zone)
    }

    /// Fire times after `after_epoch_ms`, each found from the previous one with
    /// [`CronSchedule::next_after`], as Quartz chains a cron trigger.
    pub fn iter_after(&self, after_epoch_ms: i64) -> impl Iterator<Item = i64> + '_ {
        std::iter::successors(self.next_after(after_epoch_ms), move |previous| {
            self.next_after(*previous)
        })
    }

    /// The latest fire time in `(after_epoch_ms, until_epoch_ms]`, if any. Searched backwards
    /// from `until` over growing windows, so a frequent cron after a long gap costs a few
    /// fires, not one step per fire of the gap.
    pub fn last_in(&self, after_epoch_ms: i64, until_epoch_ms: i64) -> Option<i64> {
        let mut window = LAST_IN_FIRST_WINDOW_MS;
        loop {
            let from = until_epoch_ms.saturating_sub(window).max(after_epoch_ms);
            let latest = self.iter_after(from).take_while(|&t| t <= until_epoch_ms).last();
            if latest.is_some() || from == after_epoch_ms {
                return latest;
            }
            window = window.saturating_mul(8);
        }
    }

    /// The expression as given to [`CronSchedule::parse`].
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// The zone the expression is evaluated in.
    pub fn time_zone(&self) -> &JobTimeZone {
        &self.zone
    }
}

/// The first window [`CronSchedule::last_in`] looks back over.
const LAST_IN_FIRST_WINDOW_MS: i64 = 60_000;

/// 1969-01-01T00:00:00Z. Every search starting earlier gives the same answer as one starting here
/// (nothing fires before 1970 in any zone), and clamping keeps the calendar off pre-1970 zone
/// history, where Java and the tz database used by chrono-tz disagree.
const EARLIEST_START: i64 = -31_536_000;
/// 2100-01-02T00:00:00Z: from here on it is 2100 or later in every zone, so nothing fires.
const LATEST_START: i64 = 4_102_531_200;
/// A safety net, not a limit that real expressions reach: the longest searches (a day that comes
/// round once in decades, like `0 0 0 ? 2 6#5`) take a few hundred passes. It guarantees an
/// answer where Quartz itself can loop for ever (the parser already rejects the one known case).
const MAX_PASSES: u32 = 100_000;

/// What a pass concluded.
enum Pass {
    /// The calendar moved; look again.
    Again,
    /// Every field matches the calendar's current time.
    Found,
    /// No fire in the years the schedule allows.
    End,
}

pub(crate) fn next_fire(spec: &CronSpec, zone: &JobTimeZone, after_epoch_ms: i64) -> Option<i64> {
    // Quartz adds one second and drops the milliseconds.
    let start = after_epoch_ms.div_euclid(1000) + 1;
    if start > LATEST_START {
        return None;
    }
    let start = start.max(EARLIEST_START);
    let mut calendar = LenientCalendar::at_instant(zone, start)?;
    for _ in 0..MAX_PASSES {
        let pass = search_pass(spec, &mut calendar, start);
        if calendar.failed() {
            return None;
        }
        match pass {
            Pass::Again => {}
            Pass::Found => return calendar.instant().checked_mul(1000),
            Pass::End => return None,
        }
    }
    None
}

/// Moves the calendar to `hour` with minute and second as already set. If `hour` does not exist
/// that day (a gap), Quartz asks for the hour after it; hour 24 is left to roll into the next day.
fn set_hour_skipping_gap(calendar: &mut LenientCalendar<'_>, hour: i64) {
    calendar.set_hour(hour);
    if calendar.hour() != hour && hour != 24 {
        calendar.set_hour(hour + 1);
    }
}

/// Midnight of `day` in `month` (both may overflow; the calendar rolls them over).
fn go_to_day(calendar: &mut LenientCalendar<'_>, day: i64, month: i64) {
    calendar.set_second(0);
    calendar.set_minute(0);
    calendar.set_hour(0);
    calendar.set_day(day);
    calendar.set_month(month);
}

/// One pass of the search. `start` is the search start in epoch seconds (Quartz's `afterTime`,
/// used by the `W` rules to decide whether a candidate day is already behind).
fn search_pass(spec: &CronSpec, calendar: &mut LenientCalendar<'_>, start: i64) -> Pass {
    if calendar.year() > i64::from(LAST_YEAR) {
        return Pass::End;
    }

    // Second: the next allowed second in this minute, or the first one of the next minute.
    let second = calendar.second();
    let minute = calendar.minute();
    match spec.seconds.next_at_or_after(second) {
        Some(s) => calendar.set_second(i64::from(s)),
        None => {
            calendar.set_minute(minute + 1);
            calendar.set_second(first(spec.seconds.first()));
        }
    }

    // Minute: if it has to move, the seconds restart at 0 and the next pass re-checks them.
    let minute = calendar.minute();
    let hour = calendar.hour();
    match spec.minutes.next_at_or_after(minute) {
        Some(m) if i64::from(m) == minute => {}
        found => {
            let (m, h) = match found {
                Some(m) => (i64::from(m), hour),
                None => (first(spec.minutes.first()), hour + 1),
            };
            calendar.set_second(0);
            calendar.set_minute(m);
            set_hour_skipping_gap(calendar, h);
            return Pass::Again;
        }
    }

    // Hour.
    let hour = calendar.hour();
    let day = calendar.day();
    match spec.hours.next_at_or_after(hour) {
        Some(h) if i64::from(h) == hour => {}
        found => {
            let (h, d) = match found {
                Some(h) => (i64::from(h), day),
                None => (first(spec.hours.first()), day + 1),
            };
            calendar.set_second(0);
            calendar.set_minute(0);
            calendar.set_day(d);
            set_hour_skipping_gap(calendar, h);
            return Pass::Again;
        }
    }

    // Day, by whichever of the two day fields is not `?`.
    let day = calendar.day();
    let month = calendar.month();
    let moved = match spec.days {
        DaySpec::OfMonth(rule) => month_day_pass(rule, calendar, day, month, start),
        DaySpec::OfWeek(rule) => week_day_pass(rule, calendar, day, month),
    };
    if moved {
        return Pass::Again;
    }

    // Month.
    let month = calendar.month();
    let year = calendar.year();
    if year > i64::from(LAST_YEAR) {
        return Pass::End;
    }
    match spec.months.next_at_or_after(month) {
        Some(m) if i64::from(m) == month => {}
        found => {
            let (m, y) = match found {
                Some(m) => (i64::from(m), year),
                None => (first(spec.months.first()), year + 1),
            };
            go_to_day(calendar, 1, m);
            calendar.set_year(y);
            return Pass::Again;
        }
    }

    // Year.
    let year = calendar.year();
    match spec.next_year_at_or_after(year) {
        None => Pass::End,
        Some(y) if y == year => Pass::Found,
        Some(y) => {
            go_to_day(calendar, 1, 1);
            calendar.set_year(y);
            Pass::Again
        }
    }
}

/// A set's smallest member. Sets are never empty (every element adds at least one value); the
/// fallback only keeps this total.
fn first(member: Option<u32>) -> i64 {
    member.map_or(0, i64::from)
}

/// Day-of-month rules. Returns whether the calendar was moved (start a new pass).
fn month_day_pass(
    rule: MonthDays,
    calendar: &mut LenientCalendar<'_>,
    day: i64,
    month: i64,
    start: i64,
) -> bool {
    let year = calendar.year();
    let last = days_in_month(year, month);
    let time = (calendar.hour(), calendar.minute(), calendar.second());
    let (target_day, target_month) = match rule {
        MonthDays::Days(days) => match days.next_at_or_after(day) {
            Some(d) if i64::from(d) <= last => (i64::from(d), month),
            _ => (first(days.first()), month + 1),
        },
        MonthDays::Last { offset } => {
            let target = last - i64::from(offset);
            if day <= target {
                (target, month)
            } else if month < 12 {
                (1, month + 1)
            } else {
                // Quartz moves the year itself here and always starts a new pass.
                calendar.add_year();
                go_to_day(calendar, 1, 1);
                return true;
            }
        }
        MonthDays::LastWeekday { offset } => {
            let target = last - i64::from(offset);
            match nearest_weekday(calendar, year, month, target, time, start) {
                Some(d) => (d, month),
                None => (1, month + 1),
            }
        }
        MonthDays::NearestWeekday { day: target } => {
            let target = i64::from(target);
            match nearest_weekday(calendar, year, month, target, time, start) {
                Some(d) => (d, month),
                None => (target, month + 1),
            }
        }
    };
    if target_day != day || target_month != month {
        go_to_day(calendar, target_day, target_month);
        return true;
    }
    false
}

/// The `W` rule: the weekday nearest to `target` in `month` (Saturday -> Friday before, Sunday ->
/// Monday after, but never across the month's first or last day), at the calendar's current time
/// of day. `None` if that moment lies before the search start (the month's fire is already past).
///
/// Quartz evaluates this on a scratch calendar, lenient like the main one, so a `target` beyond
/// the month's end (`31W` in April) is read as a day of the next month.
fn nearest_weekday(
    calendar: &LenientCalendar<'_>,
    year: i64,
    month: i64,
    target: i64,
    (hour, minute, second): (i64, i64, i64),
    start: i64,
) -> Option<i64> {
    let mut scratch =
        LenientCalendar::with_fields(calendar.zone(), (year, month, target), (0, 0, 0));
    let weekday = scratch.day_of_week();
    let last = days_in_month(year, month);
    let day = match weekday {
        7 if target == 1 => target + 2,
        7 => target - 1,
        1 if target == last => target - 2,
        1 => target + 1,
        _ => target,
    };
    scratch.set_second(second);
    scratch.set_minute(minute);
    scratch.set_hour(hour);
    scratch.set_day(day);
    scratch.set_month(month);
    // Quartz compares with the search start in milliseconds, and its scratch calendar carries the
    // wall clock's milliseconds, so a candidate in the very second the search starts is "before"
    // or not at random. We say "not before": the only answer under which a fire at that second
    // is not skipped, and Quartz's answer whenever `after` is a whole second.
    (scratch.instant() >= start).then_some(day)
}

/// Day-of-week rules. Returns whether the calendar was moved (start a new pass).
fn week_day_pass(rule: WeekDays, calendar: &mut LenientCalendar<'_>, day: i64, month: i64) -> bool {
    let today = calendar.day_of_week();
    let last = days_in_month(calendar.year(), month);
    // Days from today to the next `weekday` (0 if today is one).
    let until = |weekday: u32| (i64::from(weekday) - today).rem_euclid(7);
    match rule {
        WeekDays::Days(weekdays) => {
            let wanted = weekdays.next_at_or_after(today).or_else(|| weekdays.first()).unwrap_or(1);
            let ahead = until(wanted);
            if day + ahead > last {
                go_to_day(calendar, 1, month + 1);
                true
            } else if ahead > 0 {
                go_to_day(calendar, day + ahead, month);
                true
            } else {
                false
            }
        }
        WeekDays::Last { weekday } => {
            let mut ahead = until(weekday);
            if day + ahead > last {
                go_to_day(calendar, 1, month + 1);
                return true;
            }
            while day + ahead + 7 <= last {
                ahead += 7;
            }
            if ahead > 0 {
                go_to_day(calendar, day + ahead, month);
                return true;
            }
            false
        }
        WeekDays::Nth { weekday, nth } => {
            let ahead = until(weekday);
            let candidate = day + ahead;
            // Which occurrence of that weekday `candidate` is: 1 for days 1-7, 2 for 8-14, ...
            let occurrence = (candidate + 6) / 7;
            let shift = (i64::from(nth) - occurrence) * 7;
            let target = candidate + shift;
            if shift < 0 || target > last {
                go_to_day(calendar, 1, month + 1);
                true
            } else if shift > 0 || ahead > 0 {
                go_to_day(calendar, target, month);
                true
            } else {
                false
            }
        }
    }
}
