//! Section 5, simulator throughput: how fast `shardcron-sim` runs clusters of the real core in
//! virtual time. One seed is one `shardcron-sim run ... --json`, in a child process: the binary
//! as shipped (its own allocator, mimalloc, and the release profile's fat LTO), found next to
//! this one (`cargo build --release -p shardcron-sim` builds it; `cargo run -p shardcron-bench`
//! does not, so a binary left there by an older build would be measured). A run is the faults
//! phase, then the quiet, liveness and final phases, then the invariant check; the wall time is
//! the run's own, as the simulator measures it, without the process's start-up. The figures are
//! virtual seconds per wall second and seeds per minute on one core, for 3×1, 10×10 and 50×100
//! (instances × jobs).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use shardcron_sim::{FaultProfile, RunSummary};

use crate::report::{thousands, Section, Verdict};
use crate::stats::median;
use crate::{err, Error};

/// (instances, jobs, virtual seconds of the fault phase, seeds) of one point.
fn points(quick: bool) -> Vec<(usize, usize, u64, u64)> {
    if quick {
        vec![(3, 1, 120, 3), (10, 10, 60, 2), (50, 100, 20, 1)]
    } else {
        vec![(3, 1, 120, 10), (10, 10, 120, 5), (50, 100, 30, 1)]
    }
}

#[derive(Debug)]
struct Point {
    instances: usize,
    jobs: usize,
    profile: FaultProfile,
    /// Virtual seconds of the fault phase.
    fault_secs: u64,
    seeds: u64,
    /// Per seed: (virtual seconds, wall seconds, item runs, violations).
    runs: Vec<(f64, f64, usize, usize)>,
    /// The first violation the checker reported, with its seed.
    first_violation: Option<(u64, String)>,
}

impl Point {
    fn speed(&self) -> Vec<f64> {
        self.runs.iter().map(|r| r.0 / r.1.max(1e-9)).collect()
    }
    fn wall(&self) -> Vec<f64> {
        self.runs.iter().map(|r| r.1).collect()
    }
}

/// Where a simulation's time goes, for a run that misses a target.
const WHY_SLOW: &str =
    "\n**Where the time goes** (callgrind, 2026-11-28, 10×10 with the failover profile, seed \
    2: instruction counts, which repeat where CPU times on this shared machine do not). The \
    simulator runs the unchanged core, and its time is the core's: 2.13 G instructions for the \
    seed's 169 virtual s, 3.58 G the day before (2.20 G before the last change: the raise time \
    of the assignment record, checked line by line at every fire, is now checked once per \
    change of the record). What went: a job hears the changes queued in \
    its mailbox in one step (at every step it looks at everything it might do next; the \
    seed's 35,000 steps of changes became 8,000, and a leader no longer raises the reshard \
    flag twice for one joiner), path ancestors found by a byte search (the scope checks of \
    every read), the assignment record's raise time read without building the record at each \
    fire, garbage checks only where they decide something, the process's watch entries \
    hashed and changed only where a job's scope changed, the in-memory registry reading only \
    what a scope change adds. Later that day, 1.68 G (-21 %; the traces of 43 runs of nine \
    shapes, 50 × 100 among them, byte for byte the same before and after each change, so \
    the runs decide exactly what they decided): a job's facts about its scope (which items \
    it owns and which of them are enabled, whether it leads, whether a leader shows, whether \
    a reshard flag or a failover entry is up, whether its server is disabled) are read again \
    at changes of its own nodes, not at every change of any job of the process (a change \
    count per job root in the view, and a scope change counts for the jobs whose entries it \
    moved), and the audit of changed nodes, every step's look at leadership and every fire \
    ask those facts instead of building paths and looking them up (about 9 %); an idle job \
    remembers that it owes no catch-up until its own nodes change, and that none of its \
    items has a misfire marker until its shape changes; the assignment record is checked \
    once per change, not parsed whole at each look (4 %); path segments and record lines \
    are cut by a byte search and paths joined by concatenation, not by the formatter \
    (6 %). The same build without LTO went from 1,207 to 1,487 virtual s per wall s (20 \
    seeds on one thread, run one after the other); the table's LTO build read 1,005 before \
    these changes, 1,302 after the first of them, 1,335, 1,298 and 1,295 in three runs after \
    the last \
    (medians of 5 seeds on a shared machine): its time follows the memory's latency more \
    than the instruction count (a lookup among a node's children waits for their cache \
    lines: 10 % of the time at 50 × 100 in `Segment::position` alone). A tree of the scope \
    index's subtree roots by segment (one lookup of the job's name, then short names) \
    measured no faster than the hashed ancestors and was dropped. What is left, inclusive: \
    the job runners' protocol steps 43 % (the choice of the next thing to do 30 %: whether \
    the view covers the job's scope yet 8 %, the audit of changed nodes 7 %, the fire path \
    6 %, the idle checks 4 %; which scope the job needs, asked after every step, 7 %); \
    path lookups in the views 10 %, spread through those; the drivers' watch handling \
    16 %; the committer and the registry's transactions 12 %; the changes of the process's \
    watch as jobs register, widen and narrow 11 %; the check of every read and every \
    published change against a scope (the simulator counts a read outside it as a protocol \
    bug; production schedulers skip the reads' check) 7 %; instances starting and adding \
    their jobs 6 %. Allocation is 9 %. No single cost dominates: the gap to 2,000 virtual s \
    per wall s is a \
    protocol step that looks at everything again, in the view, at each input. **Large \
    clusters**: a cluster's start has every instance's registration of every job seen by \
    the job's runners on every other instance, so its cost grows with the square of the \
    instances per job (20 × 100, one seed, 1 s of faults: 17.4 G instructions the day \
    before, 9.5 G now). So did its end, until 2026-11-29: in the final phase every instance \
    leaves every job, and each leaver noted its ledger mark in the job's one record of the \
    assignments, losing the race for it to every other leaver in turn (50 × 100: 117,970 \
    leave transactions for 5,000 leaves). An instance that owns no item now leaves in one \
    transaction that notes nothing (10,277 transactions): the 50 × 100 `failover` seed 1 \
    takes 5.1-5.2 wall s instead of 6.6-7.0 (`shardcron-sim run`, the two builds \
    alternated; the table's 12.5 s of the day before was a busier machine). At 10 × 10 the \
    two builds read the same (1,724-1,768 virtual s per wall s, 20 seeds). The same machine \
    reads from run to run as far apart as a change of the code: in the evening of 2026-11-29 \
    the table read 1,373 at 10 × 10 and 10 at 50 × 100, while the builds of that morning and \
    evening, alternated, ran 8 seeds at 10 × 10 in 0.87-0.91 s each and the 50 × 100 seed 1 \
    in 5.8-6.6 s each. On 2026-11-29 (session 32), 1.59 G instructions for that seed before two \
    changes, 1.51 G after (the traces of the 10 × 10 seeds byte for byte the same): a catch-up \
    looks up the latest fire due only for a marker that names none (a search back through the \
    schedule at every decision about a catch-up), and the runtime compares a job's scope with \
    the one in force without building it after each step; the table read 1,512. On \
    2026-11-29 (session 33) the simulator gained a witness of the configs each instance is \
    shown and writes (the checker's record of the config a cluster runs): 1.51 G \
    instructions for that seed before, 1.53 G after (the traces byte for byte the same; a \
    first version, which parsed a config at each change of a watch's scope, cost 1.56 G). On \
    2026-11-29 (session 34), 1.54 G (+0.9 %) after that session's protocol fixes (a bid for \
    leadership is a transaction that also writes `leader/election`, whose version fences the \
    leader's commits, and a job's first election makes that node; a misfire that marks every \
    item checks the flag's detail), and the table read 1,398: the same instruction count, \
    within 2 %, has read 1,373 to 1,525 on this machine from one session to the next. \
    What would close the gap: a step that looks only at what its input changed, registrations that do not \
    widen the watch to the whole job. A cache shared by the instances of one process does \
    not fit: each simulated instance must see the registry through its own session (a \
    partitioned or paused one sees an older state). On 2026-11-29 (session 35) the section \
    began to measure the `shardcron-sim` binary as shipped (mimalloc, fat LTO), one child \
    process per seed; until then it ran the simulator in the bench's own process, on the \
    system allocator, which is slower: the same seeds, the two builds of the same code \
    alternated, took 1.53-1.54 s for eight 10 × 10 `failover` seeds in the binary against \
    1.72-1.88 s without mimalloc (11-19 %), and 8.9 s against 11.8 s for the 50 × 100 seed 1 \
    (25 %). The code the seeds run did not change that session where they run without a \
    fire lead (1.54 G instructions for the 10 × 10 seed 2, as before). On 2026-11-30 \
    (session 39), 1.57 G before that session's changes and 1.48 G after (-6 %) for that seed, \
    5.61 G and 5.06 G (-10 %) for 20 × 100 `none` seed 1 with 1 s of faults (the traces of 17 \
    runs of fourteen shapes, 50 × 100 among them, byte for byte the same): a ledger's event \
    that only confirms this process's own write wakes no job, as a marker's did not already \
    (the 10 × 10 seed's job steps went from 24,107 to 20,310); a fire time already found on \
    the thread is read from a small table (every fire step and every instance of a job \
    asked the same search again; like the next, a table of a pure function's answers, \
    which the instances on one thread share where they cannot share a view of the \
    registry); a job's config written as YAML once per thread, not once \
    per instance (the emitter costs some 30 µs and 64 KiB of zeroed buffers each time); \
    path names read as text without a check of their bytes each time (`compact_str`); the \
    checker's liveness check and the live window's search of each schedule made linear in \
    the jobs. Where the 50 × 100 seed's time went before them, by phase (one run, `none`, \
    1 s of faults, 3.7 s in all): the start 1.7 s, 15 s of quiet 0.5 s, 28 s of live 0.46 s, the \
    final phase (every instance leaves every job) 0.9 s, the check 0.17 s. Of its 827,000 \
    watch events, 643,000 are registrations and departures (an instance's and its server's \
    node, seen by the job's runners on every other instance); yet two experiments on \
    20 × 100 bound what a narrower watch alone would win: runners not woken by the others' \
    server nodes saved 2.8 % of the instructions, registrations that do not widen the watch \
    3.5 %. The steady state costs 15-17 ms of wall time per virtual s at 50 × 100 (5,000 \
    job runners), which alone exceeds the 0.43 s a whole 86 s seed may take at 200 virtual s \
    per wall s; and at 10 × 10 the steps are the design's own (38 % replies to the job's \
    requests, 23 % fires, 11 % item ends, 22 % changes, 6 % resyncs) at 21,700 instructions \
    each on average. Both targets need the step that looks only at what its input \
    changed.\n";

/// The `shardcron-sim` binary next to this one (as `cargo build --release` puts them).
fn sim_bin() -> Result<PathBuf, Error> {
    let exe = std::env::current_exe()
        .map_err(|e| err(format!("cannot find the bench binary's own path: {e}")))?;
    let bin = exe.with_file_name("shardcron-sim");
    if bin.is_file() {
        Ok(bin)
    } else {
        Err(err(format!(
            "the simulator section runs the `shardcron-sim` binary, and there is none at {} \
             (next to this bench binary): build it with `cargo build --release -p \
             shardcron-sim` (scripts/bench.sh does), then run the section again",
            bin.display()
        )))
    }
}

/// At most `max` characters of `text`, trimmed, with a mark where it was cut.
fn truncate(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let cut: String = text.chars().take(max).collect();
    format!("{cut}... (cut)")
}

/// Runs one seed in a child `shardcron-sim` and reads its JSON line.
fn run_seed(bin: &Path, args: &[String]) -> Result<RunSummary, Error> {
    let command = format!("{} {}", bin.display(), args.join(" "));
    let out = Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| err(format!("cannot start `{command}`: {e}")))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stderr = match stderr.trim() {
        "" => "nothing".to_owned(),
        text => format!("\"{}\"", truncate(text, 400)),
    };
    // Exit status 1 is a run that found violations: its JSON line counts like any other.
    // Anything else that is not a success (2: the simulator refused the flags; a signal or
    // 101: it crashed) is no measurement.
    if !(out.status.success() || out.status.code() == Some(1)) {
        return Err(err(format!(
            "`{command}` failed ({}); on stderr it printed {stderr}",
            out.status
        )));
    }
    let last = stdout.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
    serde_json::from_str(last).map_err(|e| {
        err(format!(
            "`{command}` ({}) printed no JSON summary as its last line ({e}): its last line \
             was \"{}\"; on stderr it printed {stderr}",
            out.status,
            truncate(last, 200)
        ))
    })
}

pub fn run(quick: bool) -> Result<Section, Error> {
    let bin = sim_bin()?;
    eprintln!("sim: running {}", bin.display());
    let mut results = Vec::new();
    for (instances, jobs, secs, seeds) in points(quick) {
        for profile in [FaultProfile::None, FaultProfile::Failover] {
            eprintln!("sim: {instances}×{jobs}, profile {profile}, {secs} s, {seeds} seeds");
            let mut point = Point {
                instances,
                jobs,
                profile,
                fault_secs: secs,
                seeds,
                runs: Vec::new(),
                first_violation: None,
            };
            for seed in 1..=seeds {
                let args: Vec<String> = [
                    "run",
                    "--seed",
                    &seed.to_string(),
                    "--profile",
                    &profile.to_string(),
                    "--instances",
                    &instances.to_string(),
                    "--jobs",
                    &jobs.to_string(),
                    "--duration",
                    &secs.to_string(),
                    "--json",
                ]
                .map(String::from)
                .into();
                let report = run_seed(&bin, &args)?;
                if report.seed != seed {
                    return Err(err(format!(
                        "`{} {}` reported seed {} (expected {seed}): is the binary the one \
                         this bench was built with? Rebuild it with `cargo build --release -p \
                         shardcron-sim`",
                        bin.display(),
                        args.join(" "),
                        report.seed
                    )));
                }
                if point.first_violation.is_none() {
                    if let Some(v) = report.first_violation {
                        point.first_violation = Some((seed, v));
                    }
                }
                point.runs.push((
                    report.virtual_ms as f64 / 1000.0,
                    report.wall_secs,
                    report.item_runs,
                    report.violations,
                ));
            }
            results.push(point);
        }
    }
    Ok(render(&results))
}

/// Seeds per minute from the wall time of one seed.
fn per_minute(wall_secs: f64) -> String {
    if wall_secs <= 0.0 {
        return "-".into();
    }
    let n = 60.0 / wall_secs;
    if n < 10.0 {
        format!("{n:.1}")
    } else {
        thousands(n.round() as u64)
    }
}

fn render(results: &[Point]) -> Section {
    let mut body = String::from(
        "The figures are of the `shardcron-sim` binary as shipped (its own allocator, \
         mimalloc, and the release profile's fat LTO), one child process per seed. One seed = \
         one `shardcron-sim run --seed S --profile P --instances I --jobs J --duration SECS \
         --json`: the fault phase of the given length, then the simulator's quiet, liveness and \
         final phases, then the invariant check, on one thread in virtual time (jobs drawn from \
         the seed: a cron every 2-10 s, 1-8 items of 0.1-3 s). Profile `none`: no fault; \
         `failover`: crashes, stops, restarts, expiries, partitions, slow links and workload \
         changes with failover on. Virtual seconds are the whole run's; the wall time is the \
         run's own, as the simulator measures it: from the start of the simulated cluster to \
         the end of the invariant check, not the process's start-up. Seeds per minute are for \
         one core (`shardcron-sim explore` runs seeds on every core). No peer: \
         tokio-cron-scheduler has no simulator.\n\n\
         | instances × jobs | profile | fault phase | virtual s per seed | seeds | virtual s per wall s (median, min) | wall per seed (median) | seeds per minute | item runs per seed | violations |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for p in results {
        let speed = p.speed();
        let wall = median(&p.wall()).unwrap_or(0.0);
        let min_speed = speed.iter().copied().fold(f64::INFINITY, f64::min);
        let runs = p.runs.iter().map(|r| r.2).sum::<usize>() / p.runs.len().max(1);
        let violations: usize = p.runs.iter().map(|r| r.3).sum();
        let secs = p.runs.first().map_or(0.0, |r| r.0);
        body.push_str(&format!(
            "| {}×{} | {} | {} s | {:.0} s | {} | {} ({}) | {:.2} s | {} | {} | {} |\n",
            p.instances,
            p.jobs,
            p.profile,
            p.fault_secs,
            secs,
            p.seeds,
            thousands(median(&speed).unwrap_or(0.0).round() as u64),
            thousands(min_speed.round() as u64),
            wall,
            per_minute(wall),
            thousands(runs as u64),
            violations
        ));
    }
    let flagged: Vec<&Point> = results.iter().filter(|p| p.first_violation.is_some()).collect();
    if !flagged.is_empty() {
        body.push_str(
            "\nThe violations column counts what the invariant checker reported on these seeds \
             (it is the simulator doing its job, not a throughput figure); the first of each \
             point, with the command that replays it:\n\n",
        );
        for p in flagged {
            if let Some((seed, text)) = &p.first_violation {
                let line = text.lines().next().unwrap_or("");
                let short: String = line.chars().take(240).collect();
                body.push_str(&format!(
                    "- {short}\n  `cargo run --release -p shardcron-sim -- run --seed {seed} \
                     --profile {} --instances {} --jobs {} --duration {}`\n",
                    p.profile, p.instances, p.jobs, p.fault_secs
                ));
            }
        }
    }
    let mut verdicts = Vec::new();
    let mut missed = false;
    // The failover profile is the one the targets name: faults add restarts, resyncs and
    // failover work.
    for (instances, jobs, target) in [(10, 10, 2_000.0), (50, 100, 200.0)] {
        let what = format!(
            "simulator ≥ {} virtual s per wall s per thread at {instances}×{jobs}",
            thousands(target as u64)
        );
        let point = results.iter().find(|p| {
            p.instances == instances && p.jobs == jobs && p.profile == FaultProfile::Failover
        });
        match point.and_then(|p| median(&p.speed())) {
            Some(speed) => {
                let met = speed >= target;
                missed |= !met;
                let mut v = Verdict::new(
                    what,
                    format!("{} (profile failover)", thousands(speed.round() as u64)),
                    met,
                );
                if !met {
                    v = v.note(
                        "the time goes to the core's protocol steps and its watch scopes' \
                         bookkeeping; see the section",
                    );
                }
                verdicts.push(v);
            }
            None => verdicts.push(Verdict::not_measured(what, "not in this run")),
        }
    }
    if missed {
        body.push_str(WHY_SLOW);
    }
    Section { body, verdicts }
}
