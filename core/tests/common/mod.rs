//! Shared by the cron tests: the Quartz oracle's line format and the comparison with our answers.
#![allow(dead_code)] // each test binary uses a different part

use shardcron_core::cron::CronSchedule;

/// One question to Quartz: the next `count` fire times of `expression` in `zone` after `after`.
#[derive(Clone, Debug)]
pub struct Case {
    pub expression: String,
    pub zone: String,
    pub after: i64,
    pub count: usize,
}

impl Case {
    /// The oracle's input line (four tab-separated columns).
    pub fn to_line(&self) -> String {
        format!("{}\t{}\t{}\t{}", self.expression, self.zone, self.after, self.count)
    }
}

/// Quartz's answer (the oracle's fifth column).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Up to `count` fire times; fewer when Quartz's schedule ended.
    Fires(Vec<i64>),
    /// `new CronExpression(..)` threw a ParseException.
    Rejected,
    /// Quartz did not return within the oracle's time limit.
    Timeout,
    /// Quartz accepted the expression, then threw from the search.
    Crash,
}

/// Parses a five-column oracle output line; `None` for comments and blank lines.
pub fn parse_answer_line(line: &str) -> Option<Result<(Case, Answer), String>> {
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    Some(parse_columns(line))
}

fn parse_columns(line: &str) -> Result<(Case, Answer), String> {
    let columns: Vec<&str> = line.split('\t').collect();
    let [expression, zone, after, count, answer] = columns[..] else {
        return Err(format!("expected 5 tab-separated columns: {line:?}"));
    };
    let case = Case {
        expression: expression.to_owned(),
        zone: zone.to_owned(),
        after: after.parse().map_err(|e| format!("{line:?}: after: {e}"))?,
        count: count.parse().map_err(|e| format!("{line:?}: count: {e}"))?,
    };
    let answer = match answer {
        "error" => Answer::Rejected,
        "timeout" => Answer::Timeout,
        "crash" => Answer::Crash,
        _ => {
            let list =
                answer.strip_prefix("ok:").ok_or_else(|| format!("{line:?}: unknown answer"))?;
            let fires = if list.is_empty() {
                Vec::new()
            } else {
                list.split(',')
                    .map(|t| t.parse::<i64>().map_err(|e| format!("{line:?}: {e}")))
                    .collect::<Result<_, _>>()?
            };
            Answer::Fires(fires)
        }
    };
    Ok((case, answer))
}

/// Compares our behaviour with Quartz's answer. `deliberate` says that we reject this expression
/// on purpose although Quartz accepts it. Returns a description of the difference, if any.
pub fn compare(case: &Case, answer: &Answer, deliberate: bool) -> Result<(), String> {
    let ours = CronSchedule::parse(&case.expression, &case.zone);
    let describe = |times: &[i64], schedule: Option<&CronSchedule>| -> String {
        let zone = schedule.map(|s| s.time_zone().clone());
        times
            .iter()
            .map(|t| match zone.as_ref().and_then(|z| z.format_rfc3339(*t)) {
                Some(text) => format!("{t} ({text})"),
                None => t.to_string(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let head = format!(
        "`{}` in `{}` after {} ({})",
        case.expression,
        case.zone,
        case.after,
        shardcron_core::cron::JobTimeZone::utc().format_rfc3339(case.after).unwrap_or_default()
    );
    match (answer, ours) {
        (Answer::Rejected | Answer::Crash, Err(_)) => Ok(()),
        (Answer::Crash, Ok(_)) => Err(format!("{head}: Quartz fails on it, we accept it")),
        (Answer::Rejected, Ok(_)) => Err(format!("{head}: Quartz rejects it, we accept it")),
        // Quartz never answered (it loops for ever on some inputs). We must not pretend to
        // know better: either the expression is rejected, or our chain of answers stops short
        // (the search gives up and reports the end of the schedule).
        (Answer::Timeout, Err(_)) => Ok(()),
        (Answer::Timeout, Ok(schedule)) => {
            let got = schedule.iter_after(case.after).take(case.count).count();
            if got < case.count {
                Ok(())
            } else {
                Err(format!("{head}: Quartz hangs on it, we answer {got} fire times"))
            }
        }
        (Answer::Fires(_), Err(e)) if deliberate => {
            let _ = e;
            Ok(())
        }
        (Answer::Fires(_), Ok(_)) if deliberate => {
            Err(format!("{head}: listed as a deliberate difference, but we accept it"))
        }
        (Answer::Fires(_), Err(e)) => Err(format!("{head}: Quartz accepts it, we reject it: {e}")),
        (Answer::Fires(quartz), Ok(schedule)) => {
            // Our schedules end with 2099; Quartz's run on to "now + 100 years".
            let expected: Vec<i64> =
                quartz.iter().copied().take_while(|t| local_year(&schedule, *t) <= 2099).collect();
            let got: Vec<i64> = schedule.iter_after(case.after).take(case.count).collect();
            if got == expected {
                Ok(())
            } else {
                Err(format!(
                    "{head}:\n    quartz: [{}]\n    ours:   [{}]",
                    describe(&expected, Some(&schedule)),
                    describe(&got, Some(&schedule))
                ))
            }
        }
    }
}

fn local_year(schedule: &CronSchedule, epoch_ms: i64) -> i64 {
    schedule
        .time_zone()
        .format_rfc3339(epoch_ms)
        .and_then(|text| text.get(..4).and_then(|y| y.parse().ok()))
        .unwrap_or(i64::MAX)
}
