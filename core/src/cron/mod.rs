//! Quartz-compatible cron schedules: the expressions ElasticJob users write, answering "when
//! next?" exactly as Quartz 2.3's `CronExpression.getNextValidTimeAfter` does.
//!
//! ```
//! use shardcron_core::cron::CronSchedule;
//!
//! // 10:15 on the third Friday of every month, Shanghai time.
//! let schedule = CronSchedule::parse("0 15 10 ? * 6#3", "Asia/Shanghai")?;
//! let after = 1_735_689_600_000; // 2025-01-01T00:00:00Z
//! let next = schedule.next_after(after).expect("fires in 2025");
//! assert_eq!(
//!     schedule.time_zone().format_rfc3339(next).as_deref(),
//!     Some("2025-01-17T10:15:00+08:00")
//! );
//! assert_eq!(schedule.iter_after(after).take(3).count(), 3);
//! # Ok::<(), shardcron_core::cron::CronError>(())
//! ```
//!
//! # Expressions
//! `seconds minutes hours day-of-month month day-of-week [year]`, separated by whitespace, letters
//! in any case:
//!
//! | field | values | specials |
//! |---|---|---|
//! | seconds, minutes | 0-59 | `, - * /` |
//! | hours | 0-23 | `, - * /` |
//! | day-of-month | 1-31 | `, - * / ?`, `L` (last day), `L-3` (3 days before it), `15W` (weekday nearest the 15th), `LW` (last weekday) |
//! | month | 1-12, JAN-DEC | `, - * /` |
//! | day-of-week | 1-7 = SUN-SAT | `, - * / ?`, `L` (Saturday), `6L` / `FRIL` (last Friday), `6#3` (third Friday) |
//! | year (optional) | 1970-2099 | `, - * /` |
//!
//! `a/n` is "from a, every n" up to the field's maximum (`5/15` seconds: 5, 20, 35, 50); `*/n`
//! and Quartz's shorthand `/n` start at the field's minimum; `a-b/n` steps through a range
//! (`10-40/7`: 10, 17, 24, 31, 38). A range may wrap (`22-2` hours, `NOV-FEB`, `FRI-MON`).
//! Exactly one of day-of-month and day-of-week must be `?` (`* * * * * ?` and `0 0 12 ? * WED`
//! are valid; `0 0 0 * * *` and `0 0 0 ? * ?` are not), as Quartz requires. `L`, `W`, `#` and `?`
//! must stand alone in their field.
//!
//! # Time zones
//! IANA names, Java's three-letter ids, and ElasticJob's `GMT+08:00` / `GMT-5` custom ids; the
//! empty id is UTC (ElasticJob would use the JVM default zone, which differs between machines).
//! See [`JobTimeZone`].
//!
//! # Daylight saving, as Quartz does it
//! Quartz steps a lenient `java.util.GregorianCalendar` field by field; Java reads a wall time
//! that does not exist (clocks go forward) with the offset before the gap, and one that exists
//! twice (clocks go back) as its *later* occurrence. The consequences, all reproduced here:
//! - A fire time inside the gap is skipped when the search reaches it through the hour field:
//!   `0 30 2 * * ?` in America/New_York does not fire on the spring-forward day, while
//!   `0 0/30 * * * ?` fires at 01:30 EST and then 03:00 EDT.
//! - In the repeated hour only the second pass fires: `0 30 1 * * ?` fires once, at 01:30 EST,
//!   and `0 * * * * ?` jumps from 00:59 EDT to 01:00 EST, one hour and one minute later.
//! - A search starting inside the first pass of the repeated hour jumps to the second pass:
//!   `* * * * * ?` after 01:30:00 EDT answers 01:30:01 EST.
//! - Daily jobs at a midnight that does not exist (DST starting at 00:00, as in Sao Paulo until
//!   2019) skip that day.
//!
//! # Where we differ from Quartz 2.3, on purpose
//! Quartz's parser accepts some text by accident and gives it a meaning nobody would choose;
//! these are rejected with an error instead (each is recorded against real Quartz in
//! `tests/quartz-oracle/fixture.tsv` and listed in `tests/cron_quartz_fixture.rs`):
//! - characters after a value (`5-10x`; `MONDAY`, which Quartz reads as `MON`; `L-2` in
//!   day-of-week, read as `L`; `?x`), empty list elements (`1,,2`), more than 7 fields;
//! - a step after a name (`MON/2`, `JAN-JUN/2`: Quartz ignores the step), a step of 0 (Quartz:
//!   `*/0` is `*`, `5/0` is `5`), a step larger than the field in a range (`0-59/60`);
//! - `W` in a list or after a range (Quartz applies it to the first day only, or drops it);
//! - out-of-range values Quartz lets through (`0W`, `9#3`), years outside 1970-2099;
//! - `L-` without its number (Quartz reads `LW` for `L-W`), `LW` in day-of-week;
//! - `L-28W` to `L-30W`, for which Quartz never returns from the search in February;
//! - `L` in seconds, minutes, hours, month or year, which Quartz accepts and then throws on (or,
//!   in the year field, never fires).
//!
//! Other differences:
//! - The search ends after 2099. Quartz's end is 100 years after the current date, which would
//!   make answers depend on the clock.
//! - Unknown zone ids are an error; Java silently uses GMT.
//! - Whether a candidate `W` day in the very second the search starts is already past: Quartz
//!   decides it with the milliseconds of its own wall clock (only when `after` is not a whole
//!   second); we say it is not, so that fire is not skipped (see `schedule.rs`).
//! - Where Quartz loops for ever, we give up after a bounded search and answer `None`: the
//!   only such case left after the parser's checks is a `W`/`LW` day that the zone skips
//!   entirely (Pacific/Apia, 30 December 2011). A scheduler using Quartz would hang there.
//! - A search starting before 1970 answers from 1970. Quartz, asked about an instant before
//!   the year 99, answers in the year 99 (its set of years holds its `*` marker, 99).
//!
//! # Why our own parser and search
//! The `cron` crate and `croner` implement cron, not Quartz: neither reproduces Quartz's
//! daylight-saving behaviour above, Quartz's weekday numbering together with `L-3`, `LW` and
//! `6#3`, nor Quartz's acceptance rules for `?`. Matching Quartz exactly means re-doing its search
//! on a model of Java's lenient calendar, which is a few hundred lines over chrono-tz's zone data.
//! Real Quartz is the judge: `tests/quartz-oracle/` holds a Java oracle, a fixture of its answers
//! checked on every test run, and a live differential test.
//!
//! # Layout
//! - `error.rs`: [`CronError`], [`CronField`], [`FieldErrorKind`]
//! - `field.rs`: parsing an expression into value sets and day rules
//! - `calendar.rs`: the model of Java's lenient `GregorianCalendar`
//! - `schedule.rs`: [`CronSchedule`] and the next-fire search
//! - `zone.rs`: [`JobTimeZone`]

mod calendar;
mod error;
mod field;
mod memo;
mod schedule;
mod unix;
mod zone;

pub use error::{CronError, CronField, FieldErrorKind};
pub use schedule::CronSchedule;
pub use zone::JobTimeZone;
