//! `shardcron cron next`: the next fire times of a Quartz cron expression, as the scheduler
//! computes them.

use std::io::Write;

use clap::{Args as ClapArgs, Subcommand};
use shardcron_core::cron::{CronSchedule, JobTimeZone};
use shardcron_core::handles::{Clock, SystemClock};

use crate::error::CliError;

pub const ABOUT: &str = "Inspect Quartz cron expressions";

#[derive(Debug, ClapArgs)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, Subcommand)]
enum Action {
    /// Print the next fire times of EXPR, one per line: `<epoch-ms>\t<RFC 3339 in the zone>`.
    ///
    /// Fewer lines are printed when the schedule ends (Quartz years stop at 2099); when it never
    /// fires after the instant (`0 0 0 30 2 ?`: February has no 30th), nothing is printed and
    /// the reason goes to stderr with exit status 1.
    Next(NextArgs),
}

#[derive(Debug, ClapArgs)]
struct NextArgs {
    /// Time zone: an IANA name (`Asia/Shanghai`) or ElasticJob's `GMT+08:00` form [default: UTC]
    #[arg(long, value_name = "ZONE")]
    tz: Option<String>,
    /// Start strictly after this instant: epoch milliseconds or RFC 3339 [default: now]
    #[arg(long, value_name = "INSTANT")]
    after: Option<String>,
    /// How many fire times to print
    #[arg(long, value_name = "N", default_value_t = 1)]
    count: usize,
    /// The Quartz cron expression, e.g. "0 0/15 9-17 ? * MON-FRI" (quote it)
    #[arg(value_name = "EXPR")]
    expression: String,
}

pub fn run(args: &Args, out: &mut dyn Write) -> Result<(), CliError> {
    match &args.action {
        Action::Next(next) => run_next(next, out),
    }
}

fn run_next(args: &NextArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let invalid = |e: &dyn std::fmt::Display| CliError::InvalidInput(e.to_string());
    let zone = args.tz.as_deref().unwrap_or("");
    let schedule = CronSchedule::parse(&args.expression, zone).map_err(|e| invalid(&e))?;
    let after = match &args.after {
        Some(text) => parse_instant(text)?,
        None => SystemClock.now_ms(),
    };
    let tz: &JobTimeZone = schedule.time_zone();
    let mut printed = 0;
    for fire in schedule.iter_after(after).take(args.count) {
        let local = tz
            .format_rfc3339(fire)
            .ok_or_else(|| invalid(&format!("{fire} ms cannot be shown in {tz}")))?;
        writeln!(out, "{fire}\t{local}")?;
        printed += 1;
    }
    if printed == 0 && args.count > 0 {
        return Err(CliError::Failed(never_fires(&args.expression, &schedule, after)));
    }
    Ok(())
}

/// Why `schedule` has no fire time after `after`.
fn never_fires(expression: &str, schedule: &CronSchedule, after: i64) -> String {
    // Quartz years start in 1970: a schedule with no fire from then on never fires at all.
    if schedule.next_after(-1).is_none() {
        return format!(
            "`{expression}` never fires: no date matches all of its fields at once (like \
             February 30, or the 31st of a 30-day month)"
        );
    }
    let tz = schedule.time_zone();
    let when = tz.format_rfc3339(after).unwrap_or_else(|| format!("{after} ms"));
    format!(
        "`{expression}` never fires after {when}: its last fire time is earlier (its year field \
         ends, and Quartz years end at 2099)"
    )
}

/// Epoch milliseconds (digits, optionally negative) or an RFC 3339 timestamp.
fn parse_instant(text: &str) -> Result<i64, CliError> {
    if let Ok(ms) = text.parse::<i64>() {
        return Ok(ms);
    }
    chrono::DateTime::parse_from_rfc3339(text).map(|t| t.timestamp_millis()).map_err(|e| {
        CliError::InvalidInput(format!(
            "--after {text:?}: {e}; expected epoch milliseconds (1700000000000) or RFC 3339 (2024-03-10T01:59:00-05:00)"
        ))
    })
}
