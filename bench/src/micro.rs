//! Section 6, the cron and sharding micro-benchmarks of `core/benches/` (the same cases and
//! the same public API calls), collected into the report, with the cron parser
//! tokio-cron-scheduler uses (croner) on the same expressions alongside.

use std::hint::black_box;
use std::time::{Duration, Instant};

use chrono::TimeZone as _;
use shardcron_core::cron::CronSchedule;
use shardcron_core::sharding::{sort_for_sharding, ShardingStrategies};

use crate::report::{thousands, Section};
use crate::Error;

/// `core/benches/cron.rs`'s cases: (name, Quartz expression, zone). croner takes the same
/// strings (Quartz weekday numbering on), in the same zones through chrono-tz.
const CRON_CASES: &[(&str, &str, &str)] = &[
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

/// Deterministic start instants over 2000-2090, epoch ms (the same as `core/benches/cron.rs`).
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

/// ns per call of the fastest round of `f` over `inputs`, rounds until `budget` has passed.
fn measure<T: Copy>(budget: Duration, inputs: &[T], mut f: impl FnMut(T)) -> f64 {
    for &i in inputs {
        f(i);
    }
    let begin = Instant::now();
    let mut best = f64::INFINITY;
    while begin.elapsed() < budget {
        let round = Instant::now();
        for &i in inputs {
            f(i);
        }
        best = best.min(round.elapsed().as_nanos() as f64 / inputs.len() as f64);
    }
    best
}

/// The croner parser configured as tokio-cron-scheduler configures it (seconds required, day
/// of month AND day of week), plus Quartz weekday numbering so the same strings mean the same.
fn croner(expression: &str) -> Option<croner::Cron> {
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Required)
        .year(croner::parser::Year::Optional)
        .dom_and_dow(true)
        .alternative_weekdays(true)
        .build()
        .parse(expression)
        .ok()
}

/// The IANA name of a zone (Java's `GMT+08:00` is `Etc/GMT-8`).
fn iana(zone: &str) -> &str {
    match zone {
        "GMT+08:00" => "Etc/GMT-8",
        other => other,
    }
}

fn croner_next(cron: &croner::Cron, tz: chrono_tz::Tz, after_ms: i64) -> Option<i64> {
    let start = tz.timestamp_millis_opt(after_ms).single()?;
    cron.find_next_occurrence(&start, false).ok().map(|t| t.timestamp_millis())
}

fn cron_table(budget: Duration) -> String {
    let starts = starts(1000);
    let mut out = String::from(
        "**Cron**: ns per next-fire computation, averaged over 1,000 start instants spread over \
         2000-2090, fastest of repeated rounds; each call starts a second later than the one \
         before, so that none repeats a search (a thread keeps its last answers, which a \
         repeated start would read). shardcron: `CronSchedule::next_after` (Quartz \
         2.3 semantics); croner 3: `Cron::find_next_occurrence`, the parser inside \
         tokio-cron-scheduler, configured as it configures it (plus Quartz weekday numbering). \
         \"Same answers\" is the share of the 1,000 starts where croner returns the instant \
         Quartz (and shardcron) does.\n\n\
         | case | expression | zone | shardcron ns | croner ns | croner/shardcron | same answers |\n\
         |---|---|---|---:|---:|---:|---:|\n",
    );
    for (name, expression, zone) in CRON_CASES {
        let Ok(ours) = CronSchedule::parse(expression, zone) else {
            out.push_str(&format!("| {name} | `{expression}` | {zone} | parse failed | | | |\n"));
            continue;
        };
        // Each call a second after the previous call's start: no call repeats a search, which
        // a thread's table of its last answers would otherwise answer (`core::cron`'s memo).
        let mut shift = 0i64;
        let ns = measure(budget, &starts, |after| {
            shift += 1000;
            black_box(ours.next_after(black_box(after + shift)));
        });
        let peer = croner(expression).zip(iana(zone).parse::<chrono_tz::Tz>().ok());
        let (peer_ns, ratio, same) = match peer {
            Some((cron, tz)) => {
                let mut shift = 0i64;
                let peer_ns = measure(budget, &starts, |after| {
                    shift += 1000;
                    black_box(croner_next(&cron, tz, black_box(after + shift)));
                });
                let same = starts
                    .iter()
                    .filter(|&&s| croner_next(&cron, tz, s) == ours.next_after(s))
                    .count();
                (
                    thousands(peer_ns.round() as u64),
                    format!("{:.1}×", peer_ns / ns),
                    format!("{:.1} %", same as f64 / 10.0),
                )
            }
            None => ("cannot parse".into(), "-".into(), "-".into()),
        };
        out.push_str(&format!(
            "| {name} | `{expression}` | {zone} | {} | {peer_ns} | {ratio} | {same} |\n",
            thousands(ns.round() as u64)
        ));
    }
    {
        let ns = measure(budget, &starts[..100], |_| {
            black_box(
                CronSchedule::parse(black_box("0 15 10 ? JAN-NOV 6#3 2020-2030"), "Europe/Berlin")
                    .ok(),
            );
        });
        let peer_ns = measure(budget, &starts[..100], |_| {
            black_box(croner(black_box("0 15 10 ? JAN-NOV 6#3 2020-2030")));
        });
        out.push_str(&format!(
            "| parse (with zone lookup for shardcron) | `0 15 10 ? JAN-NOV 6#3 2020-2030` | Europe/Berlin | {} | {} | {:.1}× | |\n",
            thousands(ns.round() as u64),
            thousands(peer_ns.round() as u64),
            peer_ns / ns
        ));
    }
    out
}

fn sharding_table(samples: usize) -> String {
    const INSTANCES: usize = 1_000;
    const ITEMS: u32 = 10_000;
    const BATCH: u32 = 20;
    let mut ids: Vec<String> =
        (0..INSTANCES).map(|i| format!("10.0.{}.{}@-@{}", i / 250, i % 250, 4000 + i)).collect();
    sort_for_sharding(&mut ids);
    let instances: Vec<&str> = ids.iter().map(String::as_str).collect();
    let strategies = ShardingStrategies::default();
    let mut out = format!(
        "**Sharding** (`core/benches/sharding.rs`'s cases): {} items over {} instances, \
         {samples} samples of {BATCH} calls after a warm-up. \"strategy only\" is \
         `ShardingStrategy::shard`; \"checked\" is `ShardingStrategies::shard`, which the \
         runtime uses (input check, strategy, verification that every item is assigned once). \
         No peer: tokio-cron-scheduler has no sharding.\n\n\
         | case | min per call | median per call |\n|---|---:|---:|\n",
        thousands(u64::from(ITEMS)),
        thousands(INSTANCES as u64)
    );
    let mut row = |label: &str, f: &mut dyn FnMut()| {
        for _ in 0..BATCH {
            f();
        }
        let mut per_call: Vec<Duration> = (0..samples)
            .map(|_| {
                let start = Instant::now();
                for _ in 0..BATCH {
                    f();
                }
                start.elapsed() / BATCH
            })
            .collect();
        per_call.sort();
        let us = |d: Duration| format!("{:.1} µs", d.as_secs_f64() * 1e6);
        out.push_str(&format!(
            "| {label} | {} | {} |\n",
            us(per_call[0]),
            us(per_call[samples / 2])
        ));
    };
    for name in ["AVG_ALLOCATION", "ODEVITY", "ROUND_ROBIN"] {
        let Ok(strategy) = strategies.get(name) else { continue };
        row(&format!("`{name}` strategy only"), &mut || {
            black_box(strategy.shard(black_box("orders"), black_box(&instances), ITEMS));
        });
        row(&format!("`{name}` checked"), &mut || {
            black_box(strategies.shard(Some(name), "orders", black_box(&instances), ITEMS).is_ok());
        });
    }
    row("`sort_for_sharding` of 1,000 ids", &mut || {
        let mut copy = instances.clone();
        sort_for_sharding(&mut copy);
        black_box(copy);
    });
    out
}

pub fn run(quick: bool) -> Result<Section, Error> {
    let budget = Duration::from_millis(if quick { 150 } else { 1_000 });
    eprintln!("micro: cron ({budget:?} per case), sharding");
    let mut body = cron_table(budget);
    body.push('\n');
    body.push_str(&sharding_table(if quick { 15 } else { 50 }));
    body.push_str(
        "\nThe same cases run standalone with `cargo bench -p shardcron-core --bench cron` and \
         `--bench sharding`; `core/README.md` discusses them.\n",
    );
    Ok(Section { body, verdicts: Vec::new() })
}
