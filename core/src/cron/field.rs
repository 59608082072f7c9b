//! Parsing: a Quartz cron expression's text into [`CronSpec`], the sets and day rules the search
//! in `schedule.rs` walks.
//!
//! The grammar is Quartz 2.3's (see `mod.rs` for the list), read element by element: a field is a
//! comma-separated list of elements, each a value, a range, a step, `*`, or one of the day
//! specials. Where Quartz's hand-written parser accepts text by accident (trailing characters
//! after a value, a step after a name, empty list elements, a step of zero), we reject it with a
//! reason rather than reproduce a meaning nobody intended; `mod.rs` lists each such case.

use super::error::{CronError, CronField, FieldErrorKind};

/// First year a schedule can fire in; Quartz's `*` in the year field starts here too.
pub(crate) const FIRST_YEAR: u32 = 1970;
/// Last year a schedule can fire in. Quartz's own limit is "this year + 100", which depends on
/// the clock; we fix it so that a schedule's answers never change with the date it is asked on.
pub(crate) const LAST_YEAR: u32 = 2099;

/// A set of small integers (0..192) as a bitset: membership and "next member at or after" are a
/// few instructions, which keeps the search free of allocation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ValueSet([u64; 3]);

impl ValueSet {
    const CAPACITY: u32 = 192;

    fn insert(&mut self, value: u32) {
        if value < Self::CAPACITY {
            self.0[(value / 64) as usize] |= 1 << (value % 64);
        }
    }

    #[cfg(test)]
    pub(crate) fn contains(&self, value: u32) -> bool {
        value < Self::CAPACITY && self.0[(value / 64) as usize] & (1 << (value % 64)) != 0
    }

    /// The smallest member, if any.
    pub(crate) fn first(&self) -> Option<u32> {
        self.next_at_or_after(0)
    }

    /// The smallest member `>= value`, if any. Negative `value`s act as 0.
    pub(crate) fn next_at_or_after(&self, value: i64) -> Option<u32> {
        let start = u32::try_from(value.max(0)).ok()?;
        if start >= Self::CAPACITY {
            return None;
        }
        let mut word = (start / 64) as usize;
        let mut bits = self.0[word] & (u64::MAX << (start % 64));
        loop {
            if bits != 0 {
                return Some(word as u32 * 64 + bits.trailing_zeros());
            }
            word += 1;
            if word == self.0.len() {
                return None;
            }
            bits = self.0[word];
        }
    }

    /// Members in ascending order (used by tests and `Debug`-style summaries).
    #[cfg(test)]
    pub(crate) fn members(&self) -> Vec<u32> {
        (0..Self::CAPACITY).filter(|v| self.contains(*v)).collect()
    }
}

/// How the day is chosen: Quartz requires exactly one of the two day fields to be `?`, so a
/// schedule is driven either by day-of-month or by day-of-week, never by both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DaySpec {
    /// Day-of-week is `?`.
    OfMonth(MonthDays),
    /// Day-of-month is `?`.
    OfWeek(WeekDays),
}

/// The day-of-month rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MonthDays {
    /// Listed days 1-31.
    Days(ValueSet),
    /// `L` / `L-n`: the last day of the month, `offset` days earlier.
    Last { offset: u32 },
    /// `LW` / `L-nW`: the weekday nearest to `L-n`.
    LastWeekday { offset: u32 },
    /// `nW`: the weekday (Mon-Fri) nearest to day `n`, without leaving the month.
    NearestWeekday { day: u32 },
}

/// The day-of-week rules; weekdays are numbered as in Quartz and Java: 1 = Sunday ... 7 = Saturday.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WeekDays {
    /// Listed weekdays 1-7.
    Days(ValueSet),
    /// `nL`: the last such weekday of the month.
    Last { weekday: u32 },
    /// `n#k`: the k-th such weekday of the month (k = 1-5; months without one are skipped).
    Nth { weekday: u32, nth: u32 },
}

/// A parsed expression: what the search needs, nothing else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CronSpec {
    pub(crate) seconds: ValueSet,
    pub(crate) minutes: ValueSet,
    pub(crate) hours: ValueSet,
    pub(crate) days: DaySpec,
    /// Months 1-12.
    pub(crate) months: ValueSet,
    /// Years, stored as `year - FIRST_YEAR`; use [`CronSpec::next_year_at_or_after`].
    years: ValueSet,
}

impl CronSpec {
    /// A few words of the expression mixed into one, to spread schedules over a table (equal
    /// specs have equal fingerprints; unequal ones seldom do).
    pub(crate) fn fingerprint(&self) -> u64 {
        let ValueSet(s) = self.seconds;
        let ValueSet(m) = self.minutes;
        let ValueSet(h) = self.hours;
        let ValueSet(mo) = self.months;
        s[0] ^ m[0].rotate_left(17) ^ h[0].rotate_left(31) ^ mo[0].rotate_left(47)
    }

    /// The first year in the set that is `>= year`.
    pub(crate) fn next_year_at_or_after(&self, year: i64) -> Option<i64> {
        self.years
            .next_at_or_after(year - i64::from(FIRST_YEAR))
            .map(|offset| i64::from(offset) + i64::from(FIRST_YEAR))
    }

    /// Parses the text of a whole expression (6 or 7 fields separated by whitespace).
    pub(crate) fn parse(expression: &str) -> Result<CronSpec, CronError> {
        let tokens: Vec<&str> = expression.split_ascii_whitespace().collect();
        if tokens.len() != 6 && tokens.len() != 7 {
            return Err(CronError::FieldCount {
                expression: expression.to_owned(),
                count: tokens.len(),
            });
        }
        let mut parsed = Vec::with_capacity(7);
        for (field, text) in CronField::ALL.iter().zip(&tokens) {
            parsed.push(parse_field(*field, text)?);
        }
        // A missing year field means every year, as in Quartz.
        let years = match tokens.get(6) {
            Some(_) => parsed[6].set_or_all(CronField::Year),
            None => all_values(CronField::Year),
        };
        let day_of_month = parsed[3];
        let day_of_week = parsed[5];
        let conflict = || CronError::DayFieldConflict {
            day_of_month: tokens[3].to_owned(),
            day_of_week: tokens[5].to_owned(),
        };
        let days = match (day_of_month, day_of_week) {
            (Parsed::Unspecified, Parsed::Unspecified) => return Err(conflict()),
            (Parsed::Unspecified, dow) => DaySpec::OfWeek(match dow {
                Parsed::LastOfWeekday(weekday) => WeekDays::Last { weekday },
                Parsed::Nth(weekday, nth) => WeekDays::Nth { weekday, nth },
                other => WeekDays::Days(other.set_or_all(CronField::DayOfWeek)),
            }),
            (dom, Parsed::Unspecified) => DaySpec::OfMonth(match dom {
                Parsed::Last { offset, weekday: false } => MonthDays::Last { offset },
                Parsed::Last { offset, weekday: true } => MonthDays::LastWeekday { offset },
                Parsed::NearestWeekday(day) => MonthDays::NearestWeekday { day },
                other => MonthDays::Days(other.set_or_all(CronField::DayOfMonth)),
            }),
            _ => return Err(conflict()),
        };
        Ok(CronSpec {
            seconds: parsed[0].set_or_all(CronField::Seconds),
            minutes: parsed[1].set_or_all(CronField::Minutes),
            hours: parsed[2].set_or_all(CronField::Hours),
            days,
            months: parsed[4].set_or_all(CronField::Month),
            years,
        })
    }
}

/// What one field says, before the two day fields are combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Parsed {
    Set(ValueSet),
    /// `?`
    Unspecified,
    /// `L`, `L-n`, `LW`, `L-nW` (day-of-month)
    Last {
        offset: u32,
        weekday: bool,
    },
    /// `nW` (day-of-month)
    NearestWeekday(u32),
    /// `nL` (day-of-week)
    LastOfWeekday(u32),
    /// `n#k` (day-of-week)
    Nth(u32, u32),
}

impl Parsed {
    /// The value set; the specials never reach a field that only takes sets, because
    /// `parse_element` rejects them there, so the fallback is never used in practice.
    fn set_or_all(self, field: CronField) -> ValueSet {
        match self {
            Parsed::Set(set) => set,
            _ => all_values(field),
        }
    }
}

fn all_values(field: CronField) -> ValueSet {
    let (lo, hi) = field.bounds();
    let mut set = ValueSet::default();
    for v in lo..=hi {
        set.insert(stored(field, v));
    }
    set
}

/// How a value is kept in the field's set (years are shifted to fit the bitset).
fn stored(field: CronField, value: u32) -> u32 {
    match field {
        CronField::Year => value - FIRST_YEAR,
        _ => value,
    }
}

fn parse_field(field: CronField, text: &str) -> Result<Parsed, CronError> {
    let elements: Vec<&str> = text.split(',').collect();
    let mut set = ValueSet::default();
    for element in &elements {
        let fail = |kind| CronError::Field { field, element: (*element).to_owned(), kind };
        let upper = element.to_ascii_uppercase();
        match parse_element(field, &upper, element).map_err(fail)? {
            Element::Values(values) => {
                for v in values {
                    set.insert(stored(field, v));
                }
            }
            Element::Special(special, symbol) => {
                // Quartz gives `L`, `W`, `#` (and `?`) a meaning only when they stand alone.
                if elements.len() > 1 {
                    return Err(fail(FieldErrorKind::NotAlone(symbol)));
                }
                return Ok(special);
            }
        }
    }
    Ok(Parsed::Set(set))
}

/// One comma-separated element.
enum Element {
    /// Plain values to add to the field's set.
    Values(Vec<u32>),
    /// A day special, with the character that makes it special (for the "must be alone" error).
    Special(Parsed, char),
}

/// A tiny cursor over the upper-cased ASCII bytes of one element.
struct Cursor<'a> {
    bytes: &'a [u8],
    /// The element as written, for naming an unexpected character in its original case.
    original: &'a str,
    pos: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn eat(&mut self, byte: u8) -> bool {
        if self.peek() == Some(byte) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// A run of digits, saturating (an absurdly long number is simply out of range).
    fn number(&mut self) -> Option<u64> {
        let start = self.pos;
        let mut value: u64 = 0;
        while let Some(b) = self.peek().filter(u8::is_ascii_digit) {
            value = value.saturating_mul(10).saturating_add(u64::from(b - b'0'));
            self.pos += 1;
        }
        (self.pos > start).then_some(value)
    }

    /// A run of letters.
    fn word(&mut self) -> &str {
        let start = self.pos;
        while self.peek().is_some_and(|b| b.is_ascii_alphabetic()) {
            self.pos += 1;
        }
        // Only ASCII letters were consumed, so this slice is valid UTF-8.
        std::str::from_utf8(&self.bytes[start..self.pos]).unwrap_or("")
    }

    /// Fails on anything left over.
    fn end(&self) -> Result<(), FieldErrorKind> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(self.unexpected()),
        }
    }

    /// The error for the character at the cursor (which may be non-ASCII).
    fn unexpected(&self) -> FieldErrorKind {
        let c = self.original.get(self.pos..).and_then(|rest| rest.chars().next()).unwrap_or(' ');
        FieldErrorKind::UnexpectedCharacter(c)
    }
}

const MONTH_NAMES: [&str; 12] =
    ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"];
const DAY_NAMES: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

fn name_value(field: CronField, name: &str) -> Option<u32> {
    let names: &[&str] = match field {
        CronField::Month => &MONTH_NAMES,
        CronField::DayOfWeek => &DAY_NAMES,
        _ => return None,
    };
    names.iter().position(|n| *n == name).and_then(|i| u32::try_from(i + 1).ok())
}

/// The largest step Quartz accepts in a field ("Increment > 60" and friends); years have none.
fn max_step(field: CronField) -> u32 {
    match field {
        CronField::Seconds | CronField::Minutes => 59,
        CronField::Hours => 23,
        CronField::DayOfMonth => 31,
        CronField::Month => 12,
        CronField::DayOfWeek => 7,
        CronField::Year => u32::MAX,
    }
}

fn in_range(field: CronField, value: u64) -> Result<u32, FieldErrorKind> {
    let (lo, hi) = field.bounds();
    match u32::try_from(value) {
        Ok(v) if (lo..=hi).contains(&v) => Ok(v),
        _ => Err(FieldErrorKind::ValueOutOfRange(value)),
    }
}

fn step_value(field: CronField, cursor: &mut Cursor<'_>) -> Result<u32, FieldErrorKind> {
    let step = cursor.number().ok_or(FieldErrorKind::MissingStep)?;
    if step == 0 {
        return Err(FieldErrorKind::StepZero);
    }
    let max = max_step(field);
    u32::try_from(step).ok().filter(|s| *s <= max).ok_or(FieldErrorKind::StepTooLarge { step, max })
}

/// `upper` is the element upper-cased (ASCII only, so byte positions match `original`).
fn parse_element(field: CronField, upper: &str, original: &str) -> Result<Element, FieldErrorKind> {
    let mut cursor = Cursor { bytes: upper.as_bytes(), original, pos: 0 };
    let is_dom = field == CronField::DayOfMonth;
    let is_dow = field == CronField::DayOfWeek;
    let (lo, hi) = field.bounds();
    match cursor.peek() {
        None => Err(FieldErrorKind::EmptyElement),
        Some(b'?') => {
            if !(is_dom || is_dow) {
                return Err(FieldErrorKind::NotAllowedInField('?'));
            }
            cursor.pos += 1;
            cursor.end()?;
            Ok(Element::Special(Parsed::Unspecified, '?'))
        }
        Some(b'*') | Some(b'/') => {
            // `*`, `*/n`, and Quartz's shorthand `/n` for `*/n`.
            cursor.eat(b'*');
            let step = if cursor.eat(b'/') { step_value(field, &mut cursor)? } else { 1 };
            cursor.end()?;
            Ok(Element::Values(stepped(lo, hi, step)))
        }
        Some(b'L') if is_dom => {
            cursor.pos += 1;
            let mut offset = 0;
            if cursor.eat(b'-') {
                let n = cursor.number().ok_or(FieldErrorKind::MissingLastOffset)?;
                if n > 30 {
                    return Err(FieldErrorKind::LastOffsetOutOfRange(n));
                }
                offset = n as u32; // <= 30
            }
            let weekday = cursor.eat(b'W');
            cursor.end()?;
            if weekday && offset >= 28 {
                return Err(FieldErrorKind::LastOffsetWeekdayUnsupported(u64::from(offset)));
            }
            Ok(Element::Special(Parsed::Last { offset, weekday }, 'L'))
        }
        Some(b'L') if is_dow => {
            // `L` alone in day-of-week is Saturday, the last day of the week.
            cursor.pos += 1;
            cursor.end()?;
            Ok(Element::Special(Parsed::Set(single(7)), 'L'))
        }
        Some(b'L') => Err(FieldErrorKind::NotAllowedInField('L')),
        Some(b) if b.is_ascii_digit() => {
            let start = in_range(field, cursor.number().unwrap_or(0))?;
            parse_after_start(field, &mut cursor, start, false)
        }
        Some(b) if b.is_ascii_alphabetic() => {
            let word = cursor.word().to_owned();
            if !(field == CronField::Month || is_dow) {
                return Err(FieldErrorKind::NamesNotAllowed);
            }
            if let Some(v) = name_value(field, &word) {
                return parse_after_start(field, &mut cursor, v, true);
            }
            // `FRIL`: a name run together with `L` (last Friday), as Quartz reads it.
            if is_dow && word.len() == 4 && word.ends_with('L') {
                if let Some(v) = name_value(field, &word[..3]) {
                    cursor.end()?;
                    return Ok(Element::Special(Parsed::LastOfWeekday(v), 'L'));
                }
            }
            Err(FieldErrorKind::UnknownName(word))
        }
        Some(_) => Err(cursor.unexpected()),
    }
}

/// What may follow the first value (number or name) of an element.
fn parse_after_start(
    field: CronField,
    cursor: &mut Cursor<'_>,
    start: u32,
    is_name: bool,
) -> Result<Element, FieldErrorKind> {
    let (_, hi) = field.bounds();
    match cursor.peek() {
        None => Ok(Element::Values(vec![start])),
        Some(b'-') => {
            cursor.pos += 1;
            let end = match cursor.peek() {
                None => return Err(FieldErrorKind::MissingRangeEnd),
                Some(b) if b.is_ascii_digit() => {
                    if is_name {
                        return Err(FieldErrorKind::MixedRange);
                    }
                    in_range(field, cursor.number().unwrap_or(0))?
                }
                Some(b) if b.is_ascii_alphabetic() => {
                    let word = cursor.word().to_owned();
                    if !(field == CronField::Month || field == CronField::DayOfWeek) {
                        return Err(FieldErrorKind::NamesNotAllowed);
                    }
                    if !is_name {
                        return Err(FieldErrorKind::MixedRange);
                    }
                    name_value(field, &word).ok_or(FieldErrorKind::UnknownName(word))?
                }
                Some(_) => return Err(FieldErrorKind::MissingRangeEnd),
            };
            let step = if cursor.eat(b'/') {
                if is_name {
                    return Err(FieldErrorKind::StepAfterName);
                }
                step_value(field, cursor)?
            } else {
                1
            };
            if cursor.peek() == Some(b'W') && field == CronField::DayOfMonth {
                return Err(FieldErrorKind::WeekdayNeedsSingleDay);
            }
            cursor.end()?;
            range_values(field, start, end, step).map(Element::Values)
        }
        Some(b'/') => {
            cursor.pos += 1;
            if is_name {
                return Err(FieldErrorKind::StepAfterName);
            }
            let step = step_value(field, cursor)?;
            if cursor.peek() == Some(b'W') && field == CronField::DayOfMonth {
                return Err(FieldErrorKind::WeekdayNeedsSingleDay);
            }
            cursor.end()?;
            // `a/n`: from a up to the field's maximum.
            Ok(Element::Values(stepped(start, hi, step)))
        }
        Some(b'W') => {
            if field != CronField::DayOfMonth {
                return Err(FieldErrorKind::NotAllowedInField('W'));
            }
            cursor.pos += 1;
            cursor.end()?;
            Ok(Element::Special(Parsed::NearestWeekday(start), 'W'))
        }
        Some(b'L') if field == CronField::DayOfWeek => {
            cursor.pos += 1;
            cursor.end()?;
            Ok(Element::Special(Parsed::LastOfWeekday(start), 'L'))
        }
        Some(b'#') => {
            if field != CronField::DayOfWeek {
                return Err(FieldErrorKind::NotAllowedInField('#'));
            }
            cursor.pos += 1;
            let nth = cursor.number().ok_or(FieldErrorKind::NthOutOfRange(0))?;
            cursor.end()?;
            if !(1..=5).contains(&nth) {
                return Err(FieldErrorKind::NthOutOfRange(nth));
            }
            Ok(Element::Special(Parsed::Nth(start, nth as u32), '#'))
        }
        Some(b'L') if field != CronField::DayOfMonth => Err(FieldErrorKind::NotAllowedInField('L')),
        Some(_) => Err(cursor.unexpected()),
    }
}

fn single(value: u32) -> ValueSet {
    let mut set = ValueSet::default();
    set.insert(value);
    set
}

/// `from, from+step, ...` up to `to` inclusive.
fn stepped(from: u32, to: u32, step: u32) -> Vec<u32> {
    (from..=to).step_by(step as usize).collect()
}

/// `a-b/n`. A range that ends before it starts wraps around the field (`22-2` hours, `NOV-FEB`,
/// `FRI-MON`), as Quartz documents; years cannot wrap.
fn range_values(
    field: CronField,
    start: u32,
    end: u32,
    step: u32,
) -> Result<Vec<u32>, FieldErrorKind> {
    if start <= end {
        return Ok(stepped(start, end, step));
    }
    let span = match field {
        CronField::Seconds | CronField::Minutes => 60,
        CronField::Hours => 24,
        CronField::DayOfMonth => 31,
        CronField::Month => 12,
        CronField::DayOfWeek => 7,
        CronField::Year => return Err(FieldErrorKind::ReversedYearRange),
    };
    let one_based =
        matches!(field, CronField::DayOfMonth | CronField::Month | CronField::DayOfWeek);
    Ok((start..=end + span)
        .step_by(step as usize)
        .map(|i| match i % span {
            0 if one_based => span,
            v => v,
        })
        .collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn set_of(field: CronField, text: &str) -> Vec<u32> {
        match parse_field(field, text).unwrap_or_else(|e| panic!("{text}: {e}")) {
            Parsed::Set(set) => set.members(),
            other => panic!("{text}: expected a set, got {other:?}"),
        }
    }

    #[test]
    fn value_sets() {
        use CronField::*;
        let cases: &[(CronField, &str, &[u32])] = &[
            (Seconds, "0", &[0]),
            (Seconds, "59", &[59]),
            (Seconds, "05", &[5]),
            (Seconds, "0/10", &[0, 10, 20, 30, 40, 50]),
            (Seconds, "5/15", &[5, 20, 35, 50]),
            (Seconds, "*/20", &[0, 20, 40]),
            (Seconds, "/20", &[0, 20, 40]),
            (Seconds, "10-40/7", &[10, 17, 24, 31, 38]),
            (Seconds, "1,3,5-7", &[1, 3, 5, 6, 7]),
            (Seconds, "50-10/5", &[0, 5, 10, 50, 55]),
            (Minutes, "*/59", &[0, 59]),
            (Minutes, "58-2", &[0, 1, 2, 58, 59]),
            (Hours, "22-2", &[0, 1, 2, 22, 23]),
            (Hours, "*/6", &[0, 6, 12, 18]),
            (Hours, "9-17/4", &[9, 13, 17]),
            (DayOfMonth, "*/10", &[1, 11, 21, 31]),
            (DayOfMonth, "28-2", &[1, 2, 28, 29, 30, 31]),
            (DayOfMonth, "1,15,31", &[1, 15, 31]),
            (Month, "JAN", &[1]),
            (Month, "jan-mar", &[1, 2, 3]),
            (Month, "NOV-FEB", &[1, 2, 11, 12]),
            (Month, "7/6", &[7]),
            (Month, "*/5", &[1, 6, 11]),
            (Month, "12", &[12]),
            (DayOfWeek, "MON-FRI", &[2, 3, 4, 5, 6]),
            (DayOfWeek, "Sun,Sat", &[1, 7]),
            (DayOfWeek, "FRI-MON", &[1, 2, 6, 7]),
            (DayOfWeek, "*/2", &[1, 3, 5, 7]),
            (DayOfWeek, "1-7", &[1, 2, 3, 4, 5, 6, 7]),
            (DayOfWeek, "6-2/2", &[1, 6]),
            (DayOfWeek, "L", &[7]),
            (Year, "2030", &[60]),
            (Year, "2020-2022", &[50, 51, 52]),
            (Year, "2095/2", &[125, 127, 129]),
        ];
        for (field, text, expected) in cases {
            assert_eq!(set_of(*field, text), *expected, "{field} `{text}`");
        }
        assert_eq!(set_of(Seconds, "*").len(), 60);
        assert_eq!(set_of(Year, "*").len(), 130);
        assert_eq!(set_of(Year, "*/10").len(), 13);
    }

    #[test]
    fn day_specials() {
        use CronField::*;
        let cases: &[(CronField, &str, Parsed)] = &[
            (DayOfMonth, "L", Parsed::Last { offset: 0, weekday: false }),
            (DayOfMonth, "l", Parsed::Last { offset: 0, weekday: false }),
            (DayOfMonth, "L-3", Parsed::Last { offset: 3, weekday: false }),
            (DayOfMonth, "L-30", Parsed::Last { offset: 30, weekday: false }),
            (DayOfMonth, "LW", Parsed::Last { offset: 0, weekday: true }),
            (DayOfMonth, "L-2W", Parsed::Last { offset: 2, weekday: true }),
            (DayOfMonth, "L-27W", Parsed::Last { offset: 27, weekday: true }),
            (DayOfMonth, "15W", Parsed::NearestWeekday(15)),
            (DayOfMonth, "1w", Parsed::NearestWeekday(1)),
            (DayOfMonth, "?", Parsed::Unspecified),
            (DayOfWeek, "?", Parsed::Unspecified),
            (DayOfWeek, "6L", Parsed::LastOfWeekday(6)),
            (DayOfWeek, "FRIL", Parsed::LastOfWeekday(6)),
            (DayOfWeek, "6#3", Parsed::Nth(6, 3)),
            (DayOfWeek, "MON#1", Parsed::Nth(2, 1)),
            (DayOfWeek, "7#5", Parsed::Nth(7, 5)),
        ];
        for (field, text, expected) in cases {
            assert_eq!(parse_field(*field, text).unwrap(), *expected, "{field} `{text}`");
        }
    }

    #[test]
    fn value_set_search() {
        let mut set = ValueSet::default();
        for v in [3, 64, 130, 191] {
            set.insert(v);
        }
        assert_eq!(set.first(), Some(3));
        assert_eq!(set.next_at_or_after(-5), Some(3));
        assert_eq!(set.next_at_or_after(4), Some(64));
        assert_eq!(set.next_at_or_after(65), Some(130));
        assert_eq!(set.next_at_or_after(131), Some(191));
        assert_eq!(set.next_at_or_after(192), None);
        assert_eq!(ValueSet::default().first(), None);
    }

    #[test]
    fn missing_year_means_every_year() {
        let six = CronSpec::parse("0 0 0 * * ?").unwrap();
        let seven = CronSpec::parse("0 0 0 * * ? *").unwrap();
        assert_eq!(six, seven);
        assert_eq!(six.next_year_at_or_after(1900), Some(1970));
        assert_eq!(six.next_year_at_or_after(2099), Some(2099));
        assert_eq!(six.next_year_at_or_after(2100), None);
    }
}
