//! Hints for expressions written for Unix cron (5 fields, minute first) or as `@daily`-style
//! macros: the Quartz expression that means the same, for the field-count error to suggest.

use super::CronSchedule;

/// `"; did you mean ..."` for a Unix cron or a macro, or an empty string.
pub(super) fn hint(expression: &str) -> String {
    let fields: Vec<&str> = expression.split_whitespace().collect();
    if let [macro_name] = fields.as_slice() {
        return match macro_quartz(macro_name) {
            Some(quartz) => format!("; did you mean `{quartz}`"),
            None => String::new(),
        };
    }
    let [minute, hour, day_of_month, month, day_of_week] = fields.as_slice() else {
        return String::new();
    };
    let unix = "; this looks like a Unix cron (minute first, no seconds)";
    let suggestion = quartz_of_unix(minute, hour, day_of_month, month, day_of_week)
        .filter(|quartz| CronSchedule::parse(quartz, "UTC").is_ok());
    match suggestion {
        Some(quartz) => format!("{unix}: did you mean `{quartz}`"),
        None if *day_of_month != "*" && *day_of_week != "*" => format!(
            "{unix}: Quartz starts with seconds and needs `?` in day-of-month or day-of-week, \
             and cannot say \"this day of the month or this weekday\" in one expression"
        ),
        None => format!(
            "{unix}: Quartz starts with seconds, numbers weekdays 1-7 from Sunday, and needs `?` \
             in day-of-month or day-of-week, e.g. `0 */5 * * * ?` for every 5 minutes"
        ),
    }
}

/// The Quartz form of a Unix cron, when it has one: seconds `0` in front, `?` for the day field
/// Unix left at `*`, weekdays renumbered (Unix 0-7 from Sunday, Quartz 1-7 from Sunday).
fn quartz_of_unix(
    minute: &str,
    hour: &str,
    day_of_month: &str,
    month: &str,
    day_of_week: &str,
) -> Option<String> {
    let (day_of_month, day_of_week) = match (day_of_month, day_of_week) {
        (dom, "*") => (dom.to_owned(), "?".to_owned()),
        ("*", dow) => ("?".to_owned(), quartz_weekdays(dow)?),
        // Unix fires when either matches; Quartz has no such expression.
        _ => return None,
    };
    Some(format!("0 {minute} {hour} {day_of_month} {month} {day_of_week}"))
}

/// A Unix day-of-week list in Quartz numbering: names as they are, numbers and non-wrapping
/// numeric ranges shifted by one; `None` for anything else (steps, ranges that would wrap).
fn quartz_weekdays(field: &str) -> Option<String> {
    let shift = |text: &str| -> Option<u32> {
        let day: u32 = text.parse().ok()?;
        (day <= 7).then_some(day % 7 + 1)
    };
    let elements: Option<Vec<String>> = field
        .split(',')
        .map(|element| {
            if element.chars().all(|c| c.is_ascii_alphabetic() || c == '-') {
                return Some(element.to_owned()); // SUN, MON-FRI
            }
            match element.split_once('-') {
                None => shift(element).map(|day| day.to_string()),
                Some((from, to)) => {
                    let (from, to) = (shift(from)?, shift(to)?);
                    (from <= to).then(|| format!("{from}-{to}"))
                }
            }
        })
        .collect();
    Some(elements?.join(","))
}

/// The Quartz form of the macros Unix cron (and many schedulers) accept.
fn macro_quartz(name: &str) -> Option<&'static str> {
    Some(match name.to_ascii_lowercase().as_str() {
        "@yearly" | "@annually" => "0 0 0 1 1 ?",
        "@monthly" => "0 0 0 1 * ?",
        "@weekly" => "0 0 0 ? * SUN",
        "@daily" | "@midnight" => "0 0 0 * * ?",
        "@hourly" => "0 0 * * * ?",
        _ => return None,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn suggested(unix: &str) -> String {
        CronSchedule::parse(unix, "UTC").unwrap_err().to_string()
    }

    #[test]
    fn unix_crons_get_their_quartz_form() {
        for (unix, quartz) in [
            ("*/5 * * * *", "0 */5 * * * ?"),
            ("30 2 * * *", "0 30 2 * * ?"),
            ("0 9 * * 1-5", "0 0 9 ? * 2-6"),
            ("0 9 * * 0,6", "0 0 9 ? * 1,7"),
            ("0 9 * * 7", "0 0 9 ? * 1"),
            ("0 9 * * MON-FRI", "0 0 9 ? * MON-FRI"),
            ("15 3 1 * *", "0 15 3 1 * ?"),
        ] {
            let message = suggested(unix);
            assert!(
                message.ends_with(&format!(
                    "; this looks like a Unix cron (minute first, no seconds): did you mean \
                     `{quartz}`"
                )),
                "{unix}: {message}"
            );
            CronSchedule::parse(quartz, "UTC").unwrap();
        }
    }

    #[test]
    fn without_an_equivalent_the_hint_says_why() {
        let message = suggested("0 9 1 * MON");
        assert!(
            message.contains("cannot say \"this day of the month or this weekday\""),
            "{message}"
        );
        let message = suggested("0 9 * * 5-1");
        assert!(message.contains("e.g. `0 */5 * * * ?` for every 5 minutes"), "{message}");
        assert_eq!(hint("0 0 0 * * ? 2020 1"), "");
        assert_eq!(hint("@reboot"), "");
        assert_eq!(hint("@hourly"), "; did you mean `0 0 * * * ?`");
    }
}
