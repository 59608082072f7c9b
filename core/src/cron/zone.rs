//! `JobTimeZone`: the zone a schedule is evaluated in, accepted the way ElasticJob (Java's
//! `TimeZone.getTimeZone`) accepts it, plus the two conversions the schedule search needs.

use std::fmt;

use chrono::{DateTime, FixedOffset, NaiveDateTime, Offset, SecondsFormat, TimeZone};
use chrono_tz::Tz;

use super::error::CronError;

/// A time zone for a cron schedule.
///
/// Accepted ids, tried in this order (Java's `TimeZone.getTimeZone` semantics, minus its silent
/// fallback to GMT for anything it does not know, which hides typos until a job fires at the
/// wrong hour; we return [`CronError::UnknownTimeZone`] instead):
/// - `""`: UTC. ElasticJob's default is the JVM's default zone, which depends on the machine; we
///   choose UTC so that a schedule means the same everywhere.
/// - IANA names from the tz database (`Asia/Shanghai`, `America/New_York`, `UTC`, `Etc/GMT+8`),
///   case-sensitive as in Java.
/// - Java's old three-letter ids (`CTT`, `PST`, `JST`, ...), mapped to the zones Java maps them to.
/// - Custom ids `GMT+h`, `GMT+hh`, `GMT+hmm`, `GMT+hhmm`, `GMT+h:mm`, `GMT+hh:mm` and their `-`
///   forms, hours 0-23 and minutes 0-59: a fixed offset without daylight saving.
///
/// [`fmt::Display`] gives the id exactly as it was given (`"UTC"` for the empty id).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobTimeZone {
    id: String,
    rules: Rules,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rules {
    /// A constant offset east of UTC, in seconds.
    Fixed(i32),
    Iana(Tz),
}

/// Java's `ZoneInfoFile` old mappings: three-letter ids Java still accepts, and the zone each
/// one stands for. (`EST`, `MST` and `HST` are tz database names and found there.)
const JAVA_SHORT_IDS: [(&str, &str); 25] = [
    ("ACT", "Australia/Darwin"),
    ("AET", "Australia/Sydney"),
    ("AGT", "America/Argentina/Buenos_Aires"),
    ("ART", "Africa/Cairo"),
    ("AST", "America/Anchorage"),
    ("BET", "America/Sao_Paulo"),
    ("BST", "Asia/Dhaka"),
    ("CAT", "Africa/Harare"),
    ("CNT", "America/St_Johns"),
    ("CST", "America/Chicago"),
    ("CTT", "Asia/Shanghai"),
    ("EAT", "Africa/Addis_Ababa"),
    ("ECT", "Europe/Paris"),
    ("IET", "America/Indiana/Indianapolis"),
    ("IST", "Asia/Kolkata"),
    ("JST", "Asia/Tokyo"),
    ("MIT", "Pacific/Apia"),
    ("NET", "Asia/Yerevan"),
    ("NST", "Pacific/Auckland"),
    ("PLT", "Asia/Karachi"),
    ("PNT", "America/Phoenix"),
    ("PRT", "America/Puerto_Rico"),
    ("PST", "America/Los_Angeles"),
    ("SST", "Pacific/Guadalcanal"),
    ("VST", "Asia/Ho_Chi_Minh"),
];

impl JobTimeZone {
    /// UTC, the zone used for an empty id.
    pub fn utc() -> JobTimeZone {
        JobTimeZone { id: "UTC".to_owned(), rules: Rules::Fixed(0) }
    }

    /// Parses a zone id; see the type's documentation for what is accepted.
    pub fn parse(id: &str) -> Result<JobTimeZone, CronError> {
        if id.is_empty() {
            return Ok(JobTimeZone::utc());
        }
        let rules = if let Ok(tz) = id.parse::<Tz>() {
            Rules::Iana(tz)
        } else if let Some(tz) = JAVA_SHORT_IDS
            .iter()
            .find(|(short, _)| *short == id)
            .and_then(|(_, name)| name.parse::<Tz>().ok())
        {
            Rules::Iana(tz)
        } else if let Some(rest) = id.strip_prefix("GMT") {
            Rules::Fixed(parse_custom_offset(rest).map_err(|reason| {
                CronError::UnknownTimeZone { id: id.to_owned(), reason: reason.to_owned() }
            })?)
        } else {
            return Err(CronError::UnknownTimeZone { id: id.to_owned(), reason: String::new() });
        };
        Ok(JobTimeZone { id: id.to_owned(), rules })
    }

    /// The id as given to [`JobTimeZone::parse`] (`"UTC"` for the empty id).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The zone's offset east of UTC, in seconds, at an instant; `None` outside chrono's range.
    pub fn offset_seconds_at(&self, epoch_ms: i64) -> Option<i32> {
        self.offset_at(epoch_ms.div_euclid(1000))
    }

    /// Formats an instant as RFC 3339 in this zone, e.g. `2025-03-10T02:30:00-04:00`; fractional
    /// seconds appear only when the instant has them. `None` outside chrono's range.
    pub fn format_rfc3339(&self, epoch_ms: i64) -> Option<String> {
        let offset = FixedOffset::east_opt(self.offset_seconds_at(epoch_ms)?)?;
        let utc = DateTime::from_timestamp_millis(epoch_ms)?;
        Some(utc.with_timezone(&offset).to_rfc3339_opts(SecondsFormat::AutoSi, false))
    }

    /// Offset east of UTC in seconds at an instant given in epoch seconds.
    /// What the zone's answers depend on (two ids of one zone give the same answers).
    pub(crate) fn rules(&self) -> Rules {
        self.rules
    }

    pub(crate) fn offset_at(&self, epoch_seconds: i64) -> Option<i32> {
        match self.rules {
            Rules::Fixed(offset) => Some(offset),
            Rules::Iana(tz) => {
                let utc = DateTime::from_timestamp(epoch_seconds, 0)?.naive_utc();
                Some(tz.offset_from_utc_datetime(&utc).fix().local_minus_utc())
            }
        }
    }

    /// The instant (epoch seconds) that a wall-clock time (seconds since 1970-01-01T00:00 on the
    /// zone's local time line) stands for, together with the wall time of that instant (which
    /// differs from `wall` only in a gap). Resolved the way Java's `GregorianCalendar` does it,
    /// because that is what Quartz's search is built on:
    /// - a time that exists once maps to that instant;
    /// - a time repeated when clocks go back maps to its *later* instant (Java's ZoneInfo takes the
    ///   offset in force after the transition);
    /// - a time skipped when clocks go forward is read with the offset in force *before* the gap,
    ///   so 02:30 in a 02:00->03:00 gap becomes 03:30.
    ///
    /// One zone lookup in the common case, which is what the search does most.
    pub(crate) fn resolve_wall(&self, wall: i64) -> Option<(i64, i64)> {
        let tz = match self.rules {
            Rules::Fixed(offset) => return Some((wall - i64::from(offset), wall)),
            Rules::Iana(tz) => tz,
        };
        let naive = naive_from_seconds(wall)?;
        if let Some(offset) = later_offset(tz.offset_from_local_datetime(&naive)) {
            return Some((wall - offset, wall));
        }
        // In a gap: walk back in half-hour steps to the last wall time before the gap and take its
        // offset. Gaps are at most a day long (Pacific/Apia skipped 2011-12-30), hence 49 steps.
        for step in 1..=49_i64 {
            let before = naive_from_seconds(wall - step * 1800)?;
            if let Some(offset) = later_offset(tz.offset_from_local_datetime(&before)) {
                let instant = wall - offset;
                return Some((instant, instant + i64::from(self.offset_at(instant)?)));
            }
        }
        None
    }

    /// Just the instant of [`JobTimeZone::resolve_wall`].
    #[cfg(test)]
    pub(crate) fn wall_to_instant(&self, wall: i64) -> Option<i64> {
        self.resolve_wall(wall).map(|(instant, _)| instant)
    }
}

/// The offset (seconds) of a local-time lookup that Java would pick: the only one, or of two the
/// one giving the later instant (the smaller offset). `None` for a gap.
fn later_offset(result: chrono::LocalResult<<Tz as TimeZone>::Offset>) -> Option<i64> {
    match result {
        chrono::LocalResult::Single(o) => Some(i64::from(o.fix().local_minus_utc())),
        chrono::LocalResult::Ambiguous(a, b) => {
            let (a, b) = (a.fix().local_minus_utc(), b.fix().local_minus_utc());
            Some(i64::from(a.min(b)))
        }
        chrono::LocalResult::None => None,
    }
}

fn naive_from_seconds(seconds: i64) -> Option<NaiveDateTime> {
    Some(DateTime::from_timestamp(seconds, 0)?.naive_utc())
}

/// The part after `GMT` of a Java custom zone id, as `TimeZone.parseCustomTimeZone` reads it.
/// Returns the offset in seconds, or why it is not valid.
fn parse_custom_offset(rest: &str) -> Result<i32, &'static str> {
    let mut chars = rest.chars();
    let sign = match chars.next() {
        Some('+') => 1,
        Some('-') => -1,
        _ => return Err("a custom id is GMT followed by + or - and the offset"),
    };
    let body = chars.as_str();
    let (hours, minutes) = match body.split_once(':') {
        Some((h, m)) => {
            if h.is_empty() || h.len() > 2 || m.len() != 2 {
                return Err("use hh:mm, with one or two hour digits and two minute digits");
            }
            (digits(h)?, digits(m)?)
        }
        None => {
            if body.is_empty() {
                return Err("the offset is missing");
            }
            let n = digits(body)?;
            // Java reads one or two digits as hours, more as hours*100 + minutes.
            if body.len() <= 2 {
                (n, 0)
            } else {
                (n / 100, n % 100)
            }
        }
    };
    if hours > 23 {
        return Err("hours must be 0-23");
    }
    if minutes > 59 {
        return Err("minutes must be 0-59");
    }
    // Both are bounded above, so the product fits.
    let seconds = i32::try_from(hours * 3600 + minutes * 60).map_err(|_| "offset too large")?;
    Ok(sign * seconds)
}

fn digits(text: &str) -> Result<u32, &'static str> {
    if text.is_empty() || text.len() > 9 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err("the offset must be digits with at most one `:`");
    }
    text.parse::<u32>().map_err(|_| "the offset must be digits")
}

impl fmt::Display for JobTimeZone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.id)
    }
}

impl Default for JobTimeZone {
    fn default() -> Self {
        JobTimeZone::utc()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const HOUR: i32 = 3600;

    #[test]
    fn accepts_iana_short_and_custom_ids() {
        let cases: &[(&str, i32)] = &[
            ("UTC", 0),
            ("GMT", 0),
            ("Asia/Shanghai", 8 * HOUR),
            ("Asia/Kolkata", 5 * HOUR + 1800),
            ("Etc/GMT+8", -8 * HOUR),
            ("CTT", 8 * HOUR),
            ("JST", 9 * HOUR),
            ("GMT+08:00", 8 * HOUR),
            ("GMT+8", 8 * HOUR),
            ("GMT+08", 8 * HOUR),
            ("GMT+800", 8 * HOUR),
            ("GMT+0800", 8 * HOUR),
            ("GMT+8:00", 8 * HOUR),
            ("GMT+123", HOUR + 23 * 60),
            ("GMT-5", -5 * HOUR),
            ("GMT-05:30", -(5 * HOUR + 1800)),
            ("GMT+23:59", 23 * HOUR + 59 * 60),
            ("GMT-00:00", 0),
        ];
        for (id, offset) in cases {
            let zone = JobTimeZone::parse(id).unwrap_or_else(|e| panic!("{id}: {e}"));
            // 2021-01-15T00:00:00Z: winter in the north, no DST in any zone listed.
            assert_eq!(zone.offset_seconds_at(1_610_668_800_000), Some(*offset), "{id}");
            assert_eq!(zone.to_string(), *id);
        }
    }

    #[test]
    fn empty_id_is_utc() {
        let zone = JobTimeZone::parse("").unwrap();
        assert_eq!(zone, JobTimeZone::utc());
        assert_eq!(zone.id(), "UTC");
        assert_eq!(zone.offset_seconds_at(1_700_000_000_000), Some(0));
    }

    #[test]
    fn rejects_what_java_would_turn_into_gmt() {
        let cases: &[(&str, &str)] = &[
            ("Mars/Olympus", ""),
            ("asia/shanghai", ""),
            (" UTC", ""),
            ("utc", ""),
            ("Z", ""),
            ("gmt+8", ""),
            ("GMT+", "the offset is missing"),
            ("GMT8", "a custom id is GMT followed by + or - and the offset"),
            ("GMT+24", "hours must be 0-23"),
            ("GMT+08:60", "minutes must be 0-59"),
            ("GMT+8:0", "use hh:mm, with one or two hour digits and two minute digits"),
            ("GMT+123:00", "use hh:mm, with one or two hour digits and two minute digits"),
            ("GMT+1:2:3", "use hh:mm, with one or two hour digits and two minute digits"),
            ("GMT+8h", "the offset must be digits with at most one `:`"),
        ];
        for (id, reason) in cases {
            let err = JobTimeZone::parse(id).unwrap_err();
            assert_eq!(
                err,
                CronError::UnknownTimeZone { id: (*id).to_owned(), reason: (*reason).to_owned() },
                "{id}"
            );
            let message = err.to_string();
            assert!(message.starts_with(&format!("unknown time zone `{id}`")), "{message}");
            if !reason.is_empty() {
                assert!(message.ends_with(&format!("({reason})")), "{message}");
            }
        }
    }

    #[test]
    fn formats_rfc3339_in_the_zone() {
        let ny = JobTimeZone::parse("America/New_York").unwrap();
        // 2025-03-10T06:30:00Z is 02:30 EDT.
        assert_eq!(
            ny.format_rfc3339(1_741_588_200_000).as_deref(),
            Some("2025-03-10T02:30:00-04:00")
        );
        assert_eq!(
            ny.format_rfc3339(1_741_588_200_250).as_deref(),
            Some("2025-03-10T02:30:00.250-04:00")
        );
        let utc = JobTimeZone::utc();
        assert_eq!(utc.format_rfc3339(0).as_deref(), Some("1970-01-01T00:00:00+00:00"));
        assert_eq!(
            JobTimeZone::parse("GMT+08:00").unwrap().format_rfc3339(0).as_deref(),
            Some("1970-01-01T08:00:00+08:00")
        );
        assert_eq!(utc.format_rfc3339(i64::MAX), None);
    }

    #[test]
    fn wall_time_resolution_follows_java() {
        let ny = JobTimeZone::parse("America/New_York").unwrap();
        // 2025-03-09 02:30 does not exist (02:00 EST -> 03:00 EDT): read as EST, i.e. 07:30Z.
        let gap_wall = 1_741_487_400; // 2025-03-09T02:30:00 as if UTC
        assert_eq!(ny.wall_to_instant(gap_wall), Some(gap_wall + 5 * 3600));
        // 2025-11-02 01:30 happens twice (EDT, then EST): Java takes the later one, EST.
        let overlap_wall = 1_762_047_000; // 2025-11-02T01:30:00 as if UTC
        assert_eq!(ny.wall_to_instant(overlap_wall), Some(overlap_wall + 5 * 3600));
        // An ordinary time maps to its only instant.
        let summer = 1_751_371_200; // 2025-07-01T12:00:00 as if UTC
        assert_eq!(ny.wall_to_instant(summer), Some(summer + 4 * 3600));
        // Lord Howe moves by half an hour: 02:15 in its 02:00->02:30 gap is read with +10:30.
        let lord_howe = JobTimeZone::parse("Australia/Lord_Howe").unwrap();
        let lh_gap = 1_759_630_500; // 2025-10-05T02:15:00 as if UTC
        assert_eq!(lord_howe.wall_to_instant(lh_gap), Some(lh_gap - 37_800));
    }
}
