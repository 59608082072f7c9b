//! The one error type of `core::cron`: every rejected expression or time zone says where and why.

use std::fmt;

/// A field of a Quartz cron expression, in the order they are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CronField {
    /// First field, 0-59.
    Seconds,
    /// Second field, 0-59.
    Minutes,
    /// Third field, 0-23.
    Hours,
    /// Fourth field, 1-31, `L`, `L-n`, `nW`, `LW`, `?`.
    DayOfMonth,
    /// Fifth field, 1-12 or JAN-DEC.
    Month,
    /// Sixth field, 1-7 (1 = SUN) or SUN-SAT, `L`, `nL`, `n#k`, `?`.
    DayOfWeek,
    /// Optional seventh field, 1970-2099.
    Year,
}

impl CronField {
    /// The fields in expression order; index `i` is the `i`-th whitespace-separated token.
    pub(crate) const ALL: [CronField; 7] = [
        CronField::Seconds,
        CronField::Minutes,
        CronField::Hours,
        CronField::DayOfMonth,
        CronField::Month,
        CronField::DayOfWeek,
        CronField::Year,
    ];

    /// The name used in error messages and documentation.
    pub fn name(self) -> &'static str {
        match self {
            CronField::Seconds => "seconds",
            CronField::Minutes => "minutes",
            CronField::Hours => "hours",
            CronField::DayOfMonth => "day-of-month",
            CronField::Month => "month",
            CronField::DayOfWeek => "day-of-week",
            CronField::Year => "year",
        }
    }

    /// Smallest and largest numeric value the field accepts.
    pub(crate) fn bounds(self) -> (u32, u32) {
        match self {
            CronField::Seconds | CronField::Minutes => (0, 59),
            CronField::Hours => (0, 23),
            CronField::DayOfMonth => (1, 31),
            CronField::Month => (1, 12),
            CronField::DayOfWeek => (1, 7),
            CronField::Year => (super::field::FIRST_YEAR, super::field::LAST_YEAR),
        }
    }

    /// The range as printed in messages, with the names where the field has them.
    fn range_text(self) -> String {
        let (lo, hi) = self.bounds();
        match self {
            CronField::Month => format!("{lo}-{hi} (JAN-DEC)"),
            CronField::DayOfWeek => format!("{lo}-{hi} (SUN-SAT)"),
            _ => format!("{lo}-{hi}"),
        }
    }
}

impl fmt::Display for CronField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why one element of a field was rejected. Shown after the field name and the element text.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FieldErrorKind {
    /// Nothing between two commas, or a field that is only commas.
    EmptyElement,
    /// A character that has no meaning at this place.
    UnexpectedCharacter(char),
    /// A number outside the field's range (for years: outside 1970-2099).
    ValueOutOfRange(u64),
    /// A three-letter name that is not a month (or not a weekday).
    UnknownName(String),
    /// Month or weekday names in a field that has none.
    NamesNotAllowed,
    /// `5-` and the like.
    MissingRangeEnd,
    /// `5/`, `*/` and the like.
    MissingStep,
    /// `*/0`: Quartz silently reads it as `*` (or as the start alone); we refuse to guess.
    StepZero,
    /// A step larger than the field's span (Quartz: "Increment > 60").
    StepTooLarge {
        /// The step as written.
        step: u64,
        /// The largest step Quartz accepts in this field.
        max: u32,
    },
    /// `MON/2`, `JAN-JUN/2`: Quartz 2.3 ignores a step written after a name.
    StepAfterName,
    /// A range whose ends are a number and a name (`1-FRI`).
    MixedRange,
    /// Years only run forwards (`2030-2020`); Quartz rejects it too.
    ReversedYearRange,
    /// A special character in a field that does not support it.
    NotAllowedInField(char),
    /// `L`, `W`, `#` or `?` combined with other elements; Quartz supports them only alone.
    NotAlone(char),
    /// `W` after a range or step rather than a single day.
    WeekdayNeedsSingleDay,
    /// The `k` of `n#k` is not 1-5.
    NthOutOfRange(u64),
    /// The `n` of `L-n` is larger than 30.
    LastOffsetOutOfRange(u64),
    /// `L-nW` with `n` of 28 or more: in February it lands before the 1st, where Quartz 2.3 loops
    /// for ever instead of answering.
    LastOffsetWeekdayUnsupported(u64),
    /// `L-` without the number.
    MissingLastOffset,
}

/// An invalid cron expression or time zone.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CronError {
    /// The expression does not have 6 or 7 whitespace-separated fields. The message suggests
    /// the Quartz form of a Unix cron (5 fields, minute first) or of a `@daily`-style macro.
    #[error(
        "cron expression `{expression}` has {count} field(s); expected 6 or 7: \
         seconds minutes hours day-of-month month day-of-week [year]{}",
        super::unix::hint(expression)
    )]
    FieldCount {
        /// The expression as given.
        expression: String,
        /// How many fields it has.
        count: usize,
    },
    /// One element of one field is invalid.
    #[error("{}", field_message(*field, element, kind))]
    Field {
        /// Which field.
        field: CronField,
        /// The offending comma-separated element, as written.
        element: String,
        /// Why.
        kind: FieldErrorKind,
    },
    /// Day-of-month and day-of-week are both `?` or both given. Quartz 2.3 needs exactly one `?`.
    #[error(
        "day-of-month `{day_of_month}` and day-of-week `{day_of_week}`: exactly one of them must \
         be `?` (Quartz does not support {})",
        if day_of_month == "?" { "leaving both unspecified" } else { "specifying both" }
    )]
    DayFieldConflict {
        /// The day-of-month field as written.
        day_of_month: String,
        /// The day-of-week field as written.
        day_of_week: String,
    },
    /// The time zone id is neither an IANA name, a Java short id, nor a `GMT±hh:mm` custom id.
    /// Java's `TimeZone.getTimeZone` would silently fall back to GMT; we refuse instead.
    #[error(
        "unknown time zone `{id}`: expected an IANA name such as `Asia/Shanghai` or `UTC`, \
         or a custom id such as `GMT+08:00` or `GMT-5`{}",
        if reason.is_empty() { String::new() } else { format!(" ({reason})") }
    )]
    UnknownTimeZone {
        /// The id as given.
        id: String,
        /// What is wrong with a `GMT…` custom id; empty for an unknown name.
        reason: String,
    },
}

fn field_message(field: CronField, element: &str, kind: &FieldErrorKind) -> String {
    let why = match kind {
        FieldErrorKind::EmptyElement => "empty list element".to_owned(),
        FieldErrorKind::UnexpectedCharacter(c) => format!("unexpected character `{c}`"),
        FieldErrorKind::ValueOutOfRange(v) => {
            // `8` -> "value out of range"; `1-70` -> "value 70 out of range": name the number when
            // the element is more than that number.
            if element.trim_start_matches('0') == v.to_string()
                || (element.chars().all(|c| c == '0') && *v == 0)
            {
                format!("value out of range {}", field.range_text())
            } else {
                format!("value {v} out of range {}", field.range_text())
            }
        }
        FieldErrorKind::UnknownName(name) => match field {
            CronField::Month => format!("unknown month name `{name}` (expected JAN-DEC)"),
            _ => format!("unknown day name `{name}` (expected SUN-SAT)"),
        },
        FieldErrorKind::NamesNotAllowed => {
            format!("names are not allowed here, only numbers {}", field.range_text())
        }
        FieldErrorKind::MissingRangeEnd => "range has no end value after `-`".to_owned(),
        FieldErrorKind::MissingStep => "`/` must be followed by a step number".to_owned(),
        FieldErrorKind::StepZero => "step must be at least 1".to_owned(),
        FieldErrorKind::StepTooLarge { step, max } => {
            format!("step {step} is larger than {max}, the largest step in this field")
        }
        FieldErrorKind::StepAfterName => {
            "a step after a name is ignored by Quartz; write the range with numbers (e.g. 2-6/2)"
                .to_owned()
        }
        FieldErrorKind::MixedRange => {
            "a range must use two numbers or two names, not one of each".to_owned()
        }
        FieldErrorKind::ReversedYearRange => {
            "a year range must not end before it starts".to_owned()
        }
        FieldErrorKind::NotAllowedInField(c) => {
            let allowed = match c {
                '?' | 'L' => "the day-of-month and day-of-week fields",
                'W' => "the day-of-month field",
                _ => "the day-of-week field",
            };
            format!("`{c}` is only allowed in {allowed}")
        }
        FieldErrorKind::NotAlone(c) => {
            format!("`{c}` cannot be combined with other values in this field")
        }
        FieldErrorKind::WeekdayNeedsSingleDay => {
            "`W` must follow a single day (e.g. 15W), not a range or step".to_owned()
        }
        FieldErrorKind::NthOutOfRange(n) => {
            format!("the number after `#` must be 1-5, not {n}")
        }
        FieldErrorKind::LastOffsetOutOfRange(n) => {
            format!("the offset after `L-` must be 0-30, not {n}")
        }
        FieldErrorKind::LastOffsetWeekdayUnsupported(n) => format!(
            "`L-{n}W` can fall before the 1st of February, where Quartz 2.3 never returns; \
             use an offset of 27 or less with `W`"
        ),
        FieldErrorKind::MissingLastOffset => "`L-` must be followed by a number".to_owned(),
    };
    format!("{field} field `{element}`: {why}")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::cron::CronSchedule;

    fn field(field: CronField, element: &str, kind: FieldErrorKind) -> CronError {
        CronError::Field { field, element: element.to_owned(), kind }
    }

    /// Every way an expression can be invalid: the error value and its exact message.
    fn table() -> Vec<(&'static str, CronError, &'static str)> {
        use CronField::*;
        use FieldErrorKind as K;
        vec![
            (
                "",
                CronError::FieldCount { expression: String::new(), count: 0 },
                "cron expression `` has 0 field(s); expected 6 or 7: \
                 seconds minutes hours day-of-month month day-of-week [year]",
            ),
            (
                "* * * * *",
                CronError::FieldCount { expression: "* * * * *".into(), count: 5 },
                "cron expression `* * * * *` has 5 field(s); expected 6 or 7: \
                 seconds minutes hours day-of-month month day-of-week [year]; this looks like a \
                 Unix cron (minute first, no seconds): did you mean `0 * * * * ?`",
            ),
            (
                "*/5 * * * *",
                CronError::FieldCount { expression: "*/5 * * * *".into(), count: 5 },
                "cron expression `*/5 * * * *` has 5 field(s); expected 6 or 7: \
                 seconds minutes hours day-of-month month day-of-week [year]; this looks like a \
                 Unix cron (minute first, no seconds): did you mean `0 */5 * * * ?`",
            ),
            (
                "@daily",
                CronError::FieldCount { expression: "@daily".into(), count: 1 },
                "cron expression `@daily` has 1 field(s); expected 6 or 7: \
                 seconds minutes hours day-of-month month day-of-week [year]; did you mean \
                 `0 0 0 * * ?`",
            ),
            (
                "0 0 0 * * ? 2020 1",
                CronError::FieldCount { expression: "0 0 0 * * ? 2020 1".into(), count: 8 },
                "cron expression `0 0 0 * * ? 2020 1` has 8 field(s); expected 6 or 7: \
                 seconds minutes hours day-of-month month day-of-week [year]",
            ),
            (
                "0 0 0 1,,2 * ?",
                field(DayOfMonth, "", K::EmptyElement),
                "day-of-month field ``: empty list element",
            ),
            (
                "0 0 5-10x * * ?",
                field(Hours, "5-10x", K::UnexpectedCharacter('x')),
                "hours field `5-10x`: unexpected character `x`",
            ),
            (
                "0 0 12 ? * 5L3",
                field(DayOfWeek, "5L3", K::UnexpectedCharacter('3')),
                "day-of-week field `5L3`: unexpected character `3`",
            ),
            (
                "0 0 0 ? * L-2",
                field(DayOfWeek, "L-2", K::UnexpectedCharacter('-')),
                "day-of-week field `L-2`: unexpected character `-`",
            ),
            (
                "0 0 0 1 * ?x",
                field(DayOfWeek, "?x", K::UnexpectedCharacter('x')),
                "day-of-week field `?x`: unexpected character `x`",
            ),
            (
                "0 0 0 1 * ?é",
                field(DayOfWeek, "?é", K::UnexpectedCharacter('é')),
                "day-of-week field `?é`: unexpected character `é`",
            ),
            (
                "0 0 0 ? * 8",
                field(DayOfWeek, "8", K::ValueOutOfRange(8)),
                "day-of-week field `8`: value out of range 1-7 (SUN-SAT)",
            ),
            (
                "0 0 0 ? * 0",
                field(DayOfWeek, "0", K::ValueOutOfRange(0)),
                "day-of-week field `0`: value out of range 1-7 (SUN-SAT)",
            ),
            (
                "60 * * * * ?",
                field(Seconds, "60", K::ValueOutOfRange(60)),
                "seconds field `60`: value out of range 0-59",
            ),
            (
                "1-70 * * * * ?",
                field(Seconds, "1-70", K::ValueOutOfRange(70)),
                "seconds field `1-70`: value 70 out of range 0-59",
            ),
            (
                "* 99999999999999999999999 * * * ?",
                field(Minutes, "99999999999999999999999", K::ValueOutOfRange(u64::MAX)),
                "minutes field `99999999999999999999999`: value 18446744073709551615 out of \
                 range 0-59",
            ),
            (
                "* * 24 * * ?",
                field(Hours, "24", K::ValueOutOfRange(24)),
                "hours field `24`: value out of range 0-23",
            ),
            (
                "* * * 32 * ?",
                field(DayOfMonth, "32", K::ValueOutOfRange(32)),
                "day-of-month field `32`: value out of range 1-31",
            ),
            (
                "0 0 0 0W * ?",
                field(DayOfMonth, "0W", K::ValueOutOfRange(0)),
                "day-of-month field `0W`: value 0 out of range 1-31",
            ),
            (
                "* * * * 13 ?",
                field(Month, "13", K::ValueOutOfRange(13)),
                "month field `13`: value out of range 1-12 (JAN-DEC)",
            ),
            (
                "0 0 0 ? * 9#3",
                field(DayOfWeek, "9#3", K::ValueOutOfRange(9)),
                "day-of-week field `9#3`: value 9 out of range 1-7 (SUN-SAT)",
            ),
            (
                "0 0 0 1 1 ? 2100",
                field(Year, "2100", K::ValueOutOfRange(2100)),
                "year field `2100`: value out of range 1970-2099",
            ),
            (
                "0 0 0 1 1 ? 1969",
                field(Year, "1969", K::ValueOutOfRange(1969)),
                "year field `1969`: value out of range 1970-2099",
            ),
            (
                "0 0 12 ? * MONDAY",
                field(DayOfWeek, "MONDAY", K::UnknownName("MONDAY".into())),
                "day-of-week field `MONDAY`: unknown day name `MONDAY` (expected SUN-SAT)",
            ),
            (
                "0 0 0 1 foo ?",
                field(Month, "foo", K::UnknownName("FOO".into())),
                "month field `foo`: unknown month name `FOO` (expected JAN-DEC)",
            ),
            (
                "0 0 0 ? * MON-FOO",
                field(DayOfWeek, "MON-FOO", K::UnknownName("FOO".into())),
                "day-of-week field `MON-FOO`: unknown day name `FOO` (expected SUN-SAT)",
            ),
            (
                "0 0 MON * * ?",
                field(Hours, "MON", K::NamesNotAllowed),
                "hours field `MON`: names are not allowed here, only numbers 0-23",
            ),
            (
                "0 0 1-X * * ?",
                field(Hours, "1-X", K::NamesNotAllowed),
                "hours field `1-X`: names are not allowed here, only numbers 0-23",
            ),
            (
                "0 0 0 5- * ?",
                field(DayOfMonth, "5-", K::MissingRangeEnd),
                "day-of-month field `5-`: range has no end value after `-`",
            ),
            (
                "0 0 0 5-/2 * ?",
                field(DayOfMonth, "5-/2", K::MissingRangeEnd),
                "day-of-month field `5-/2`: range has no end value after `-`",
            ),
            (
                "5/ * * * * ?",
                field(Seconds, "5/", K::MissingStep),
                "seconds field `5/`: `/` must be followed by a step number",
            ),
            (
                "*/ * * * * ?",
                field(Seconds, "*/", K::MissingStep),
                "seconds field `*/`: `/` must be followed by a step number",
            ),
            (
                "*/0 * * * * ?",
                field(Seconds, "*/0", K::StepZero),
                "seconds field `*/0`: step must be at least 1",
            ),
            (
                "*/60 * * * * ?",
                field(Seconds, "*/60", K::StepTooLarge { step: 60, max: 59 }),
                "seconds field `*/60`: step 60 is larger than 59, the largest step in this field",
            ),
            (
                "0 0 0 ? * 1-7/8",
                field(DayOfWeek, "1-7/8", K::StepTooLarge { step: 8, max: 7 }),
                "day-of-week field `1-7/8`: step 8 is larger than 7, the largest step in this \
                 field",
            ),
            (
                "0 0 12 ? * MON/2",
                field(DayOfWeek, "MON/2", K::StepAfterName),
                "day-of-week field `MON/2`: a step after a name is ignored by Quartz; write the \
                 range with numbers (e.g. 2-6/2)",
            ),
            (
                "0 0 12 1 JAN-JUN/2 ?",
                field(Month, "JAN-JUN/2", K::StepAfterName),
                "month field `JAN-JUN/2`: a step after a name is ignored by Quartz; write the \
                 range with numbers (e.g. 2-6/2)",
            ),
            (
                "0 0 0 ? * 1-FRI",
                field(DayOfWeek, "1-FRI", K::MixedRange),
                "day-of-week field `1-FRI`: a range must use two numbers or two names, not one of \
                 each",
            ),
            (
                "0 0 0 1 JAN-5 ?",
                field(Month, "JAN-5", K::MixedRange),
                "month field `JAN-5`: a range must use two numbers or two names, not one of each",
            ),
            (
                "0 0 0 ? * MON 2030-2020",
                field(Year, "2030-2020", K::ReversedYearRange),
                "year field `2030-2020`: a year range must not end before it starts",
            ),
            (
                "? * * * * ?",
                field(Seconds, "?", K::NotAllowedInField('?')),
                "seconds field `?`: `?` is only allowed in the day-of-month and day-of-week fields",
            ),
            (
                "0 0 L * * ?",
                field(Hours, "L", K::NotAllowedInField('L')),
                "hours field `L`: `L` is only allowed in the day-of-month and day-of-week fields",
            ),
            (
                "0 0 5L * * ?",
                field(Hours, "5L", K::NotAllowedInField('L')),
                "hours field `5L`: `L` is only allowed in the day-of-month and day-of-week fields",
            ),
            (
                "0 0 0 ? * 3W",
                field(DayOfWeek, "3W", K::NotAllowedInField('W')),
                "day-of-week field `3W`: `W` is only allowed in the day-of-month field",
            ),
            (
                "0 0 0 5#2 * ?",
                field(DayOfMonth, "5#2", K::NotAllowedInField('#')),
                "day-of-month field `5#2`: `#` is only allowed in the day-of-week field",
            ),
            (
                "0 0 0 5L * ?",
                field(DayOfMonth, "5L", K::UnexpectedCharacter('L')),
                "day-of-month field `5L`: unexpected character `L`",
            ),
            (
                "0 0 0 L,5 * ?",
                field(DayOfMonth, "L", K::NotAlone('L')),
                "day-of-month field `L`: `L` cannot be combined with other values in this field",
            ),
            (
                "0 0 0 ? * 2,6L",
                field(DayOfWeek, "6L", K::NotAlone('L')),
                "day-of-week field `6L`: `L` cannot be combined with other values in this field",
            ),
            (
                "0 0 0 ? * 1#1,2#2",
                field(DayOfWeek, "1#1", K::NotAlone('#')),
                "day-of-week field `1#1`: `#` cannot be combined with other values in this field",
            ),
            (
                "0 0 12 1,15W * ?",
                field(DayOfMonth, "15W", K::NotAlone('W')),
                "day-of-month field `15W`: `W` cannot be combined with other values in this field",
            ),
            (
                "0 0 0 ?,1 * *",
                field(DayOfMonth, "?", K::NotAlone('?')),
                "day-of-month field `?`: `?` cannot be combined with other values in this field",
            ),
            (
                "0 0 12 1-5W * ?",
                field(DayOfMonth, "1-5W", K::WeekdayNeedsSingleDay),
                "day-of-month field `1-5W`: `W` must follow a single day (e.g. 15W), not a range \
                 or step",
            ),
            (
                "0 0 12 1/5W * ?",
                field(DayOfMonth, "1/5W", K::WeekdayNeedsSingleDay),
                "day-of-month field `1/5W`: `W` must follow a single day (e.g. 15W), not a range \
                 or step",
            ),
            (
                "0 0 0 ? * 5#6",
                field(DayOfWeek, "5#6", K::NthOutOfRange(6)),
                "day-of-week field `5#6`: the number after `#` must be 1-5, not 6",
            ),
            (
                "0 0 0 ? * 5#",
                field(DayOfWeek, "5#", K::NthOutOfRange(0)),
                "day-of-week field `5#`: the number after `#` must be 1-5, not 0",
            ),
            (
                "0 0 0 L-31 * ?",
                field(DayOfMonth, "L-31", K::LastOffsetOutOfRange(31)),
                "day-of-month field `L-31`: the offset after `L-` must be 0-30, not 31",
            ),
            (
                "0 0 0 L-28W * ?",
                field(DayOfMonth, "L-28W", K::LastOffsetWeekdayUnsupported(28)),
                "day-of-month field `L-28W`: `L-28W` can fall before the 1st of February, where \
                 Quartz 2.3 never returns; use an offset of 27 or less with `W`",
            ),
            (
                "0 0 0 L- * ?",
                field(DayOfMonth, "L-", K::MissingLastOffset),
                "day-of-month field `L-`: `L-` must be followed by a number",
            ),
            (
                "0 0 0 l-w * ?",
                field(DayOfMonth, "l-w", K::MissingLastOffset),
                "day-of-month field `l-w`: `L-` must be followed by a number",
            ),
            (
                "0 0 0 * * *",
                CronError::DayFieldConflict { day_of_month: "*".into(), day_of_week: "*".into() },
                "day-of-month `*` and day-of-week `*`: exactly one of them must be `?` (Quartz \
                 does not support specifying both)",
            ),
            (
                "0 0 0 15 * MON",
                CronError::DayFieldConflict {
                    day_of_month: "15".into(),
                    day_of_week: "MON".into(),
                },
                "day-of-month `15` and day-of-week `MON`: exactly one of them must be `?` (Quartz \
                 does not support specifying both)",
            ),
            (
                "0 0 0 ? * ?",
                CronError::DayFieldConflict { day_of_month: "?".into(), day_of_week: "?".into() },
                "day-of-month `?` and day-of-week `?`: exactly one of them must be `?` (Quartz \
                 does not support leaving both unspecified)",
            ),
        ]
    }

    /// Makes adding a `FieldErrorKind` without a test case a compile error here.
    fn kind_index(kind: &FieldErrorKind) -> usize {
        match kind {
            FieldErrorKind::EmptyElement => 0,
            FieldErrorKind::UnexpectedCharacter(_) => 1,
            FieldErrorKind::ValueOutOfRange(_) => 2,
            FieldErrorKind::UnknownName(_) => 3,
            FieldErrorKind::NamesNotAllowed => 4,
            FieldErrorKind::MissingRangeEnd => 5,
            FieldErrorKind::MissingStep => 6,
            FieldErrorKind::StepZero => 7,
            FieldErrorKind::StepTooLarge { .. } => 8,
            FieldErrorKind::StepAfterName => 9,
            FieldErrorKind::MixedRange => 10,
            FieldErrorKind::ReversedYearRange => 11,
            FieldErrorKind::NotAllowedInField(_) => 12,
            FieldErrorKind::NotAlone(_) => 13,
            FieldErrorKind::WeekdayNeedsSingleDay => 14,
            FieldErrorKind::NthOutOfRange(_) => 15,
            FieldErrorKind::LastOffsetOutOfRange(_) => 16,
            FieldErrorKind::LastOffsetWeekdayUnsupported(_) => 17,
            FieldErrorKind::MissingLastOffset => 18,
        }
    }
    const KINDS: usize = 19;

    #[test]
    fn every_invalid_expression_says_where_and_why() {
        for (expression, error, message) in table() {
            let got = CronSchedule::parse(expression, "UTC").unwrap_err();
            assert_eq!(got, error, "`{expression}`");
            assert_eq!(got.to_string(), message, "`{expression}`");
        }
    }

    #[test]
    fn every_error_kind_is_in_the_table() {
        let mut seen = [false; KINDS];
        let mut count_error = false;
        let mut conflict = false;
        for (_, error, _) in table() {
            match error {
                CronError::Field { kind, .. } => seen[kind_index(&kind)] = true,
                CronError::FieldCount { .. } => count_error = true,
                CronError::DayFieldConflict { .. } => conflict = true,
                CronError::UnknownTimeZone { .. } => {}
            }
        }
        assert!(count_error && conflict);
        let missing: Vec<usize> = (0..KINDS).filter(|i| !seen[*i]).collect();
        assert!(missing.is_empty(), "kinds without a case: {missing:?}");
    }

    #[test]
    fn unknown_zone_is_reported_after_a_valid_expression() {
        let err = CronSchedule::parse("0 0 0 * * ?", "Mars/Olympus").unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown time zone `Mars/Olympus`: expected an IANA name such as `Asia/Shanghai` or \
             `UTC`, or a custom id such as `GMT+08:00` or `GMT-5`"
        );
        // The expression is checked first.
        let err = CronSchedule::parse("0 0 0 * * *", "Mars/Olympus").unwrap_err();
        assert!(matches!(err, CronError::DayFieldConflict { .. }));
    }
}
