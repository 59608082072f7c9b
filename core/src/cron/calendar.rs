//! A small model of `java.util.GregorianCalendar` in lenient mode, the calendar Quartz's search
//! runs on.
//!
//! Quartz's daylight-saving behaviour is not written down anywhere in Quartz; it falls out of how
//! this calendar turns a set of wall-clock fields back into an instant. Setting fields does
//! nothing at first; the next read *normalises*: out-of-range values roll over arithmetically on
//! the local time line (minute 60 is the next hour, day 32 of April is 2 May, month 13 is January
//! of the next year), the wall time is mapped to an instant with [`JobTimeZone::wall_to_instant`]
//! (skipped times read with the offset before the gap, repeated times taken at their later
//! instant), and every field is recomputed from that instant. Reproducing *when* Quartz reads and
//! writes fields therefore reproduces its answers, including the surprising ones near DST
//! transitions.

use super::zone::JobTimeZone;

const SECONDS_PER_DAY: i64 = 86_400;

/// Days since 1970-01-01 of a proleptic Gregorian date (`month` 1-12, `day` 1-31).
pub(crate) fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    // Count from 1 March of a 400-year era, so that the leap day ends the counting year.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The inverse of [`days_from_civil`]: `(year, month 1-12, day 1-31)`.
pub(crate) fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 { month_from_march + 3 } else { month_from_march - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Days in a month (1-12) of a year, Gregorian rules.
pub(crate) fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Weekday numbered as Java and Quartz do: 1 = Sunday ... 7 = Saturday.
pub(crate) fn weekday_of(days_since_epoch: i64) -> i64 {
    // 1970-01-01 was a Thursday (Java 5).
    (days_since_epoch + 4).rem_euclid(7) + 1
}

/// The calendar: wall-clock fields, possibly not yet normalised, in one zone.
#[derive(Debug)]
pub(crate) struct LenientCalendar<'z> {
    zone: &'z JobTimeZone,
    year: i64,
    /// 1-12 once normalised (Java counts months from 0; we keep Quartz's 1-based view).
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    /// Fields were changed since the last normalisation (Java: the time is not "set").
    pending: bool,
    /// The instant of the fields at the last normalisation, epoch seconds.
    instant: i64,
    /// A zone lookup failed (only possible far outside the years a schedule can fire in); the
    /// search gives up instead of continuing on made-up numbers.
    failed: bool,
}

impl<'z> LenientCalendar<'z> {
    /// Java: `setTime(instant)` followed by `set(MILLISECOND, 0)`: the fields are those of the
    /// instant, but the calendar will re-derive the instant from them on the next read, which is
    /// what moves a time in the first pass of a repeated hour to the second pass.
    pub(crate) fn at_instant(zone: &'z JobTimeZone, epoch_seconds: i64) -> Option<Self> {
        let wall = epoch_seconds + i64::from(zone.offset_at(epoch_seconds)?);
        let mut calendar = LenientCalendar {
            zone,
            year: 0,
            month: 1,
            day: 1,
            hour: 0,
            minute: 0,
            second: 0,
            pending: true,
            instant: epoch_seconds,
            failed: false,
        };
        calendar.load_wall(wall);
        calendar.pending = true;
        Some(calendar)
    }

    /// A calendar whose date and time fields are all set explicitly (Quartz's scratch `tcal`).
    pub(crate) fn with_fields(
        zone: &'z JobTimeZone,
        (year, month, day): (i64, i64, i64),
        (hour, minute, second): (i64, i64, i64),
    ) -> Self {
        LenientCalendar {
            zone,
            year,
            month,
            day,
            hour,
            minute,
            second,
            pending: true,
            instant: 0,
            failed: false,
        }
    }

    pub(crate) fn zone(&self) -> &'z JobTimeZone {
        self.zone
    }

    pub(crate) fn failed(&self) -> bool {
        self.failed
    }

    fn load_wall(&mut self, wall: i64) {
        let days = wall.div_euclid(SECONDS_PER_DAY);
        let time = wall.rem_euclid(SECONDS_PER_DAY);
        let (year, month, day) = civil_from_days(days);
        self.year = year;
        self.month = month;
        self.day = day;
        self.hour = time / 3600;
        self.minute = time / 60 % 60;
        self.second = time % 60;
    }

    /// Java's `complete()`: fields -> instant -> fields.
    fn normalise(&mut self) {
        if !self.pending {
            return;
        }
        self.pending = false;
        // Month overflow moves the year first; day and time overflow are plain arithmetic on the
        // local time line, as in `GregorianCalendar.computeTime`.
        let year = self.year + (self.month - 1).div_euclid(12);
        let month = (self.month - 1).rem_euclid(12) + 1;
        let days = days_from_civil(year, month, 1) + self.day - 1;
        let wall = days * SECONDS_PER_DAY + self.hour * 3600 + self.minute * 60 + self.second;
        match self.zone.resolve_wall(wall) {
            Some((instant, local)) => {
                self.instant = instant;
                self.load_wall(local);
            }
            None => self.failed = true,
        }
    }

    pub(crate) fn year(&mut self) -> i64 {
        self.normalise();
        self.year
    }

    pub(crate) fn month(&mut self) -> i64 {
        self.normalise();
        self.month
    }

    pub(crate) fn day(&mut self) -> i64 {
        self.normalise();
        self.day
    }

    pub(crate) fn hour(&mut self) -> i64 {
        self.normalise();
        self.hour
    }

    pub(crate) fn minute(&mut self) -> i64 {
        self.normalise();
        self.minute
    }

    pub(crate) fn second(&mut self) -> i64 {
        self.normalise();
        self.second
    }

    /// 1 = Sunday ... 7 = Saturday.
    pub(crate) fn day_of_week(&mut self) -> i64 {
        self.normalise();
        weekday_of(days_from_civil(self.year, self.month, self.day))
    }

    /// Epoch seconds of the current fields.
    pub(crate) fn instant(&mut self) -> i64 {
        self.normalise();
        self.instant
    }

    // Setters only record the value; normalisation waits for the next read, as in Java. Writing
    // the value a normalised field already has changes nothing, because normalising normalised
    // fields gives them back unchanged, so it is skipped.

    pub(crate) fn set_year(&mut self, value: i64) {
        if self.year != value {
            self.year = value;
            self.pending = true;
        }
    }

    /// `value` is 1-based; 13 means January of the next year.
    pub(crate) fn set_month(&mut self, value: i64) {
        if self.month != value {
            self.month = value;
            self.pending = true;
        }
    }

    pub(crate) fn set_day(&mut self, value: i64) {
        if self.day != value {
            self.day = value;
            self.pending = true;
        }
    }

    pub(crate) fn set_hour(&mut self, value: i64) {
        if self.hour != value {
            self.hour = value;
            self.pending = true;
        }
    }

    pub(crate) fn set_minute(&mut self, value: i64) {
        if self.minute != value {
            self.minute = value;
            self.pending = true;
        }
    }

    pub(crate) fn set_second(&mut self, value: i64) {
        if self.second != value {
            self.second = value;
            self.pending = true;
        }
    }

    /// Java's `add(YEAR, 1)`: normalise, move the year, and pin the day to the month's length.
    pub(crate) fn add_year(&mut self) {
        self.normalise();
        self.set_year(self.year + 1);
        let length = days_in_month(self.year, self.month);
        if self.day > length {
            self.set_day(length);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn civil_round_trip() {
        for days in (-800_000..800_000).step_by(997) {
            let (y, m, d) = civil_from_days(days);
            assert!((1..=12).contains(&m) && (1..=days_in_month(y, m)).contains(&d));
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(weekday_of(0), 5); // Thursday
        assert_eq!(weekday_of(days_from_civil(2025, 3, 9)), 1); // Sunday
    }

    #[test]
    fn lenient_fields_roll_over() {
        let utc = JobTimeZone::utc();
        let mut cal = LenientCalendar::with_fields(&utc, (2025, 4, 31), (23, 59, 60));
        assert_eq!((cal.year(), cal.month(), cal.day()), (2025, 5, 2));
        assert_eq!((cal.hour(), cal.minute(), cal.second()), (0, 0, 0));
        let mut cal = LenientCalendar::with_fields(&utc, (2025, 13, 0), (24, 0, 0));
        assert_eq!((cal.year(), cal.month(), cal.day(), cal.hour()), (2026, 1, 1, 0));
        let mut cal = LenientCalendar::with_fields(&utc, (2025, 2, -2), (0, 0, 0));
        assert_eq!((cal.month(), cal.day()), (1, 29));
    }

    #[test]
    fn gap_and_overlap_normalise_like_java() {
        let ny = JobTimeZone::parse("America/New_York").unwrap();
        // 02:30 on the spring-forward day becomes 03:30 EDT.
        let mut cal = LenientCalendar::with_fields(&ny, (2025, 3, 9), (2, 30, 0));
        assert_eq!((cal.hour(), cal.minute()), (3, 30));
        // 01:30 on the fall-back day is the second 01:30 (EST, 06:30Z).
        let mut cal = LenientCalendar::with_fields(&ny, (2025, 11, 2), (1, 30, 0));
        assert_eq!(cal.instant(), 1_762_065_000);
        // An instant in the first 01:30 (EDT, 05:30Z) reads back as the second one.
        let mut cal = LenientCalendar::at_instant(&ny, 1_762_061_400).unwrap();
        assert_eq!(cal.instant(), 1_762_065_000);
    }
}
