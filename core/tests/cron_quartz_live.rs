//! Live differential test against real Quartz 2.3: thousands of generated expressions, zones and
//! start instants, each answered by Quartz (through `quartz-oracle/QuartzOracle.java`) and by us.
//!
//! Needs `javac`/`java` (17+) and Quartz's jar (`/usr/share/java/quartz2.jar`, or the path in
//! `SHARDCRON_QUARTZ_JAR`); on Debian: `apt-get install -y libquartz2-java openjdk-17-jdk-headless`.
//! Without them the test prints a note and passes, unless `SHARDCRON_REQUIRE_QUARTZ=1`, which
//! makes it fail (CI sets it so that a missing install step cannot hide). The number of cases is
//! `SHARDCRON_QUARTZ_CASES` (default 4000); the seed `SHARDCRON_QUARTZ_SEED` (default fixed, so
//! a failure reproduces; every seed must pass).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure report

mod common;

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{compare, parse_answer_line, Case};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use shardcron_core::cron::JobTimeZone;

const ZONES: &[&str] = &[
    "",
    "UTC",
    "Asia/Shanghai",
    "America/New_York",
    "Europe/London",
    "Europe/Berlin",
    "Australia/Sydney",
    "Australia/Lord_Howe",
    "America/Sao_Paulo",
    "America/Santiago",
    "Asia/Kolkata",
    "Asia/Kathmandu",
    "Pacific/Chatham",
    "America/St_Johns",
    "Pacific/Apia",
    "Europe/Moscow",
    "GMT+08:00",
    "GMT-5",
    "GMT+5:45",
    "CTT",
    "PST",
];

#[test]
fn quartz_agrees_on_generated_expressions() {
    let Some(oracle) = Oracle::find() else {
        return;
    };
    let cases_wanted: usize = env_number("SHARDCRON_QUARTZ_CASES").unwrap_or(4000);
    let seed: u64 = env_number("SHARDCRON_QUARTZ_SEED").unwrap_or(0x5eed_c0de);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let cases: Vec<Case> = (0..cases_wanted).map(|_| random_case(&mut rng)).collect();

    let answers = oracle.ask(&cases);
    assert_eq!(answers.len(), cases.len(), "the oracle answered every case");
    let mut failures = Vec::new();
    for line in &answers {
        let (case, answer) = match parse_answer_line(line) {
            Some(Ok(parsed)) => parsed,
            Some(Err(e)) => panic!("bad oracle output: {e}"),
            None => continue,
        };
        if let Err(difference) = compare(&case, &answer, false) {
            failures.push(difference);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from Quartz (seed {seed:#x}); first ones:\n{}",
        failures.len(),
        cases.len(),
        failures.iter().take(15).cloned().collect::<Vec<_>>().join("\n")
    );
}

fn env_number<T: std::str::FromStr>(name: &str) -> Option<T> {
    let text = std::env::var(name).ok()?;
    let text = text.trim();
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok()?.to_string().parse().ok(),
        None => text.parse().ok(),
    }
}

/// The compiled Java oracle.
struct Oracle {
    jar: PathBuf,
    classes: PathBuf,
}

impl Oracle {
    /// Compiles the oracle, or explains why it cannot (and fails if Quartz is required).
    fn find() -> Option<Oracle> {
        let required = std::env::var("SHARDCRON_REQUIRE_QUARTZ").is_ok_and(|v| v == "1");
        let jar = std::env::var_os("SHARDCRON_QUARTZ_JAR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/usr/share/java/quartz2.jar"));
        let missing = if !jar.is_file() {
            Some(format!("Quartz jar {} not found", jar.display()))
        } else if !runs("javac", "-version") || !runs("java", "-version") {
            Some("javac/java not found on PATH".to_owned())
        } else {
            None
        };
        if let Some(reason) = missing {
            let hint = "install with: apt-get update && apt-get install -y libquartz2-java \
                        openjdk-17-jdk-headless";
            assert!(!required, "SHARDCRON_REQUIRE_QUARTZ=1 but {reason}; {hint}");
            println!("note: skipping the live Quartz differential test: {reason} ({hint})");
            return None;
        }
        let source =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/quartz-oracle/QuartzOracle.java");
        let classes = Path::new(env!("CARGO_TARGET_TMPDIR")).join("quartz-oracle");
        std::fs::create_dir_all(&classes).unwrap();
        let status = Command::new("javac")
            .arg("-nowarn")
            .arg("-cp")
            .arg(&jar)
            .arg("-d")
            .arg(&classes)
            .arg(&source)
            .status()
            .unwrap();
        assert!(status.success(), "javac failed on {}", source.display());
        Some(Oracle { jar, classes })
    }

    /// Runs the oracle on the cases; returns its output lines.
    fn ask(&self, cases: &[Case]) -> Vec<String> {
        let input = self.classes.join("cases.tsv");
        let mut file = File::create(&input).unwrap();
        for case in cases {
            writeln!(file, "{}", case.to_line()).unwrap();
        }
        drop(file);
        let classpath = format!("{}:{}", self.jar.display(), self.classes.display());
        let output = Command::new("java")
            .arg("-cp")
            .arg(classpath)
            .arg("QuartzOracle")
            .stdin(Stdio::from(File::open(&input).unwrap()))
            .stderr(Stdio::inherit())
            .output()
            .unwrap();
        assert!(output.status.success(), "the Quartz oracle failed");
        String::from_utf8(output.stdout).unwrap().lines().map(str::to_owned).collect()
    }
}

fn runs(program: &str, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

// ---------------------------------------------------------------------------------------------
// Generators. They produce only expressions we accept; every special of the grammar appears.

/// Zones with daylight saving (or other offset changes) in the years we generate.
const DST_ZONES: &[&str] = &[
    "America/New_York",
    "Europe/London",
    "Europe/Berlin",
    "Australia/Sydney",
    "Australia/Lord_Howe",
    "America/Sao_Paulo",
    "America/Santiago",
    "Pacific/Chatham",
    "America/St_Johns",
    "Pacific/Apia",
    "PST",
];

/// Expressions that fire often around the small hours, where transitions happen.
fn dense_expression(rng: &mut ChaCha8Rng) -> String {
    let seconds = ["0", "*", "*/15", "30", "0,59"].choose(rng).unwrap();
    let minutes = ["0", "*", "0/30", "30", "59", "0,15,45", "*/7"].choose(rng).unwrap();
    let hours = ["*", "0-4", "1", "2", "3", "0,1,2,3", "1-3/2", "23-3", "0"].choose(rng).unwrap();
    let days =
        ["* * ?", "? * *", "L * ?", "? * 1", "? * SUN", "? * 1L", "? * 1#2", "LW * ?", "8-14 * ?"]
            .choose(rng)
            .unwrap();
    format!("{seconds} {minutes} {hours} {days}")
}

fn random_case(rng: &mut ChaCha8Rng) -> Case {
    if rng.gen_bool(0.3) {
        let zone = *DST_ZONES.choose(rng).unwrap();
        let base = rng.gen_range(631_152_000_i64..2_840_140_800);
        let seconds = transition_near(zone, base).unwrap_or(base) + rng.gen_range(-10_800..10_800);
        let millis = if rng.gen_bool(0.8) { 0 } else { rng.gen_range(0..1000) };
        let expression = dense_expression(rng);
        let millis = if expression.contains('W') { 0 } else { millis };
        return Case {
            expression,
            zone: zone.to_owned(),
            after: seconds * 1000 + millis,
            count: 6,
        };
    }
    let zone = *ZONES.choose(rng).unwrap();
    let expression = random_expression(rng);
    let mut after = random_instant(rng, zone);
    if expression.to_ascii_uppercase().contains('W') {
        // Quartz decides whether a `W` day in the very second the search starts is already past
        // with the milliseconds of its own wall clock (see `schedule.rs`): ask only with whole
        // seconds there, where its answer does not depend on chance.
        after -= after.rem_euclid(1000);
    }
    Case { expression, zone: zone.to_owned(), after, count: 6 }
}

fn random_instant(rng: &mut ChaCha8Rng, zone: &str) -> i64 {
    // 1990-01-01 .. 2060-01-01
    let (lo, hi) = (631_152_000_i64, 2_840_140_800_i64);
    let base = rng.gen_range(lo..hi);
    let mut seconds = base;
    if rng.gen_bool(0.5) {
        // Near a transition of the zone: that is where Quartz is most peculiar.
        if let Some(t) = transition_near(zone, base) {
            seconds = t + rng.gen_range(-7200..7200);
        }
    }
    let millis = if rng.gen_bool(0.8) { 0 } else { rng.gen_range(0..1000) };
    seconds * 1000 + millis
}

/// The first offset change of `zone` in the year after `from` (epoch seconds), to the second.
fn transition_near(zone: &str, from: i64) -> Option<i64> {
    let zone = JobTimeZone::parse(zone).ok()?;
    let offset = |s: i64| zone.offset_seconds_at(s * 1000);
    let day = 86_400;
    let mut t = from;
    let first = offset(t)?;
    while t < from + 366 * day {
        if offset(t + day)? != first {
            // Bisect inside the day.
            let (mut lo, mut hi) = (t, t + day);
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if offset(mid)? == first {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            return Some(hi);
        }
        t += day;
    }
    None
}

fn maybe_lower(rng: &mut ChaCha8Rng, text: String) -> String {
    if rng.gen_bool(0.2) {
        text.to_lowercase()
    } else {
        text
    }
}

/// A generic numeric field element list for a field with values lo..=hi.
fn numeric_field(rng: &mut ChaCha8Rng, lo: u32, hi: u32, max_step: u32, dense: bool) -> String {
    let value = |rng: &mut ChaCha8Rng| rng.gen_range(lo..=hi);
    let step = |rng: &mut ChaCha8Rng| rng.gen_range(1..=max_step.min(hi - lo + 1).max(1));
    let element = |rng: &mut ChaCha8Rng| -> String {
        match rng.gen_range(0..7) {
            0 => value(rng).to_string(),
            1 => {
                let (a, b) = (value(rng), value(rng));
                format!("{}-{}", a.min(b), a.max(b))
            }
            // Ranges that wrap around the field.
            2 => format!("{}-{}", value(rng), value(rng)),
            3 => format!("{}/{}", value(rng), step(rng)),
            4 => format!("*/{}", step(rng)),
            5 => format!("{}-{}/{}", value(rng), value(rng), step(rng)),
            _ => format!("{:02}", value(rng)),
        }
    };
    if dense && rng.gen_bool(0.4) {
        return "*".to_owned();
    }
    match rng.gen_range(0..4) {
        0 => (0..rng.gen_range(2..=4)).map(|_| element(rng)).collect::<Vec<_>>().join(","),
        _ => element(rng),
    }
}

const MONTHS: [&str; 12] =
    ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"];
const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

fn named_field(rng: &mut ChaCha8Rng, names: &[&str]) -> String {
    let name = |rng: &mut ChaCha8Rng| (*names.choose(rng).unwrap()).to_owned();
    let text = match rng.gen_range(0..3) {
        0 => name(rng),
        1 => format!("{}-{}", name(rng), name(rng)),
        _ => (0..rng.gen_range(2..=3)).map(|_| name(rng)).collect::<Vec<_>>().join(","),
    };
    maybe_lower(rng, text)
}

fn random_expression(rng: &mut ChaCha8Rng) -> String {
    let seconds =
        if rng.gen_bool(0.5) { "0".to_owned() } else { numeric_field(rng, 0, 59, 59, true) };
    let minutes =
        if rng.gen_bool(0.3) { "0".to_owned() } else { numeric_field(rng, 0, 59, 59, true) };
    let hours = numeric_field(rng, 0, 23, 23, true);
    let month = match rng.gen_range(0..5) {
        0 | 1 => "*".to_owned(),
        2 => named_field(rng, &MONTHS),
        _ => numeric_field(rng, 1, 12, 12, true),
    };
    let (dom, dow) = if rng.gen_bool(0.5) {
        let dom = match rng.gen_range(0..9) {
            0 => "*".to_owned(),
            1 => "L".to_owned(),
            2 => format!("L-{}", rng.gen_range(0..=30)),
            3 => "LW".to_owned(),
            4 => format!("L-{}W", rng.gen_range(0..=27)),
            5 => format!("{}W", rng.gen_range(1..=31)),
            _ => numeric_field(rng, 1, 31, 31, false),
        };
        (maybe_lower(rng, dom), "?".to_owned())
    } else {
        let weekday = rng.gen_range(1..=7);
        let dow = match rng.gen_range(0..9) {
            0 => "*".to_owned(),
            1 => "L".to_owned(),
            2 => format!("{weekday}L"),
            3 => format!("{}L", DAYS[weekday as usize - 1]),
            4 => format!("{weekday}#{}", rng.gen_range(1..=5)),
            5 => format!("{}#{}", DAYS[weekday as usize - 1], rng.gen_range(1..=5)),
            6 => named_field(rng, &DAYS),
            _ => numeric_field(rng, 1, 7, 7, false),
        };
        ("?".to_owned(), maybe_lower(rng, dow))
    };
    let mut fields = vec![seconds, minutes, hours, dom, month, dow];
    match rng.gen_range(0..8) {
        0 => fields.push("*".to_owned()),
        1 => fields.push(rng.gen_range(1990..2070).to_string()),
        2 => {
            let a = rng.gen_range(1990..2070);
            fields.push(format!("{a}-{}", a + rng.gen_range(0..20)));
        }
        3 => fields.push(format!("{}/{}", rng.gen_range(1990..2070), rng.gen_range(1..6))),
        _ => {}
    }
    // Several spaces between fields now and then (tabs would clash with the oracle format).
    fields.join(if rng.gen_bool(0.1) { "   " } else { " " })
}
