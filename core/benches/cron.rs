//! Micro-benchmark of `core::cron`: the cost of one next-fire computation, for typical and
//! worst-case expressions, in zones with and without daylight saving, plus parsing.
//!
//! A plain binary (no benchmark framework, to keep the build light):
//!     cargo bench -p shardcron-core --bench cron
//! It prints one line per case: nanoseconds per call, averaged over 1,000 start instants spread
//! over 2000-2090, best of many rounds after a warm-up (`CRON_BENCH_MS` sets the time per case,
//! default 400). The figures in `core/README.md` come from this.

use std::hint::black_box;
use std::time::{Duration, Instant};

use shardcron_core::cron::CronSchedule;

const CASES: &[(&str, &str, &str)] = &[
    ("every 10 s", "0/10 * * * * ?", "UTC"),
    ("every second", "* * * * * ?", "GMT+08:00"),
    ("daily 02:30 (DST gap)", "0 30 2 * * ?", "America/New_York"),
    ("weekly WED 12:00", "0 0 12 ? * WED", "Asia/Shanghai"),
    ("weekdays 9-17/2", "0 0 9-17/2 ? * MON-FRI", "Europe/Berlin"),
    ("3rd Friday 10:15", "0 15 10 ? * 6#3", "America/New_York"),
    ("last weekday", "0 0 18 LW * ?", "Europe/London"),
    ("15W", "0 0 12 15W * ?", "Australia/Sydney"),
    ("leap day", "0 0 0 29 2 ?", "UTC"),
    ("5th Saturday of Feb (rare)", "0 0 0 ? 2 7#5", "UTC"),
];

/// Deterministic start instants, 2000-01-01 .. 2090-01-01, in epoch ms.
fn starts(count: usize) -> Vec<i64> {
    let (lo, span) = (946_684_800_000_i64, 2_840_140_800_000_i64 - 946_684_800_000);
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..count)
        .map(|_| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            lo + ((state >> 11) % span as u64) as i64 / 1000 * 1000
        })
        .collect()
}

/// Runs `f` over the start instants in rounds until `budget` has passed; returns the ns per call
/// of the fastest round. The machine is shared, so the fastest round is the one least disturbed
/// by other work, the best estimate of the code's own cost.
fn measure(budget: Duration, starts: &[i64], mut f: impl FnMut(i64)) -> f64 {
    // Warm-up: one pass.
    for s in starts {
        f(*s);
    }
    let begin = Instant::now();
    let mut best = f64::INFINITY;
    while begin.elapsed() < budget {
        let round = Instant::now();
        for s in starts {
            f(*s);
        }
        best = best.min(round.elapsed().as_nanos() as f64 / starts.len() as f64);
    }
    best
}

fn main() {
    let budget = Duration::from_millis(
        std::env::var("CRON_BENCH_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(400),
    );
    let starts = starts(1000);
    println!("{:<28} {:<24} {:<20} {:>12}", "case", "expression", "zone", "ns/next_after");
    for (name, expression, zone) in CASES {
        let Ok(schedule) = CronSchedule::parse(expression, zone) else {
            eprintln!("cannot parse {expression}");
            std::process::exit(1);
        };
        // Each call a second after the previous call's start: no call repeats a search, which
        // the thread's table of its last answers would answer.
        let mut shift = 0i64;
        let ns = measure(budget, &starts, |after| {
            shift += 1000;
            black_box(schedule.next_after(black_box(after + shift)));
        });
        println!("{name:<28} {expression:<24} {zone:<20} {ns:>12.0}");
    }
    // A scheduler chains fires: each next time from the previous one.
    let schedule = CronSchedule::parse("0/10 * * * * ?", "America/New_York").ok();
    if let Some(schedule) = schedule {
        let fires = 100_000;
        let begin = Instant::now();
        let n = schedule.iter_after(starts[0]).take(fires).count();
        let ns = begin.elapsed().as_nanos() as f64 / n as f64;
        println!(
            "{:<28} {:<24} {:<20} {:>12.0}",
            "chained iter_after", "0/10 * * * * ?", "America/New_York", ns
        );
    }
    let ns = measure(budget, &starts[..100], |_| {
        black_box(
            CronSchedule::parse(black_box("0 15 10 ? JAN-NOV 6#3 2020-2030"), "Europe/Berlin").ok(),
        );
    });
    println!(
        "{:<28} {:<24} {:<20} {:>12.0}",
        "parse", "0 15 10 ? JAN-NOV 6#3 ..", "Europe/Berlin", ns
    );
}
