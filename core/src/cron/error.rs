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
    /// The expression does not have 6 or 7 whitespace-separated fields.
    #[error(
        "cron expression `{expression}` has {count} field(s); expected 6 or 7: \
         seconds minutes hours day-of-month month day-of-week [year]"
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
            format!(
                "names are not allowed here, only numbers {}",
                field.range_text()
            )
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
