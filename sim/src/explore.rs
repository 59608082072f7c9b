//! Exploration: many seeds, one simulation per seed, on every core. Each worker is an OS thread
//! with its own simulations (each a single-threaded runtime of its own): threads live here, in
//! the driver, never inside a simulation.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::builder::Builder;
use crate::faults::FaultProfile;
use crate::invariants::Invariant;
use crate::scenarios::builtin;
use crate::variants::Variant;
use crate::workload::JobSpec;

/// What each explored seed runs.
#[derive(Debug, Clone)]
pub struct ExploreOptions {
    pub profile: FaultProfile,
    pub jobs: usize,
    pub instances: usize,
    pub duration: Duration,
    pub session_timeout: Duration,
    /// A built-in scenario run with every seed instead of a generated schedule.
    pub scenario: Option<String>,
    /// A planted bug every seed runs with (to see the checker catch it across seeds).
    pub variant: Option<Variant>,
    /// Explicit jobs instead of `jobs` generated ones (from `job_config`, say).
    pub specs: Vec<JobSpec>,
    /// The ElasticJob YAML file `specs` came from, and their item time (for the replay
    /// command).
    pub job_config: Option<(PathBuf, u64)>,
    /// The schedulers' fire lead (`Settings::fire_lead`, the runtime's default unless set;
    /// zero: none).
    pub fire_lead: Duration,
}

impl Default for ExploreOptions {
    fn default() -> Self {
        let b = Builder::default();
        ExploreOptions {
            profile: b.profile,
            jobs: b.jobs,
            instances: b.instances,
            duration: b.duration,
            session_timeout: b.session_timeout,
            scenario: None,
            variant: None,
            specs: Vec::new(),
            job_config: None,
            fire_lead: b.settings.fire_lead,
        }
    }
}

impl ExploreOptions {
    /// The builder of one seed; `None` for an unknown built-in scenario.
    pub fn builder(&self, seed: u64) -> Option<Builder> {
        match &self.scenario {
            Some(name) => builtin(name, seed),
            None => Some(Builder {
                seed,
                instances: self.instances,
                jobs: self.jobs,
                duration: self.duration,
                profile: self.profile,
                session_timeout: self.session_timeout,
                variant: self.variant,
                specs: self.specs.clone(),
                settings: shardcron_core::runtime::Settings {
                    fire_lead: self.fire_lead,
                    ..Default::default()
                },
                ..Builder::default()
            }),
        }
    }
}

/// The command that replays `seed` with these options.
pub fn replay_command(o: &ExploreOptions, seed: u64) -> String {
    let command = replay_of(o, seed);
    match o.variant {
        Some(v) => format!("{command} --variant {v}"),
        None => command,
    }
}

fn replay_of(o: &ExploreOptions, seed: u64) -> String {
    // The runtime's default lead is the command line's.
    let lead = match o.fire_lead {
        shardcron_core::runtime::DEFAULT_FIRE_LEAD => String::new(),
        lead => format!(" --fire-lead-ms {}", lead.as_millis()),
    };
    let jobs = match &o.job_config {
        Some((path, item_ms)) => {
            format!("--job-config {} --item-ms {item_ms}", shell_word(&path.display().to_string()))
        }
        None => format!("--jobs {}", o.jobs),
    };
    match &o.scenario {
        Some(name) => format!("shardcron-sim replay --scenario {name} --seed {seed}"),
        None => format!(
            "shardcron-sim replay --seed {seed} --profile {} {jobs} --instances {} --duration {} \
             --session-timeout {}{lead}",
            o.profile,
            o.instances,
            o.duration.as_secs(),
            o.session_timeout.as_secs()
        ),
    }
}

/// `word` as one shell word (quoted when it has anything but plain path characters).
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+=:,@".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// The result of an exploration.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub seeds: u64,
    pub virtual_ms: i64,
    pub wall: Duration,
    /// The wall time of all runs added up (over every worker).
    pub busy: Duration,
    pub threads: usize,
    /// Violations by invariant, over every seed.
    pub by_invariant: BTreeMap<Invariant, usize>,
    /// Every failing seed with the invariants it broke and its first violation, by seed.
    pub failing: Vec<(u64, Vec<Invariant>, String)>,
    pub replay: Vec<String>,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let vs = self.virtual_ms as f64 / 1000.0;
        let wall = self.wall.as_secs_f64().max(1e-9);
        let busy = self.busy.as_secs_f64().max(1e-9);
        writeln!(f, "seeds run:            {}", self.seeds)?;
        writeln!(f, "virtual time:         {vs:.0} s")?;
        writeln!(f, "wall time:            {wall:.1} s on {} thread(s)", self.threads)?;
        writeln!(
            f,
            "throughput:           {:.0} virtual s per wall s ({:.0} per thread)",
            vs / wall,
            vs / busy
        )?;
        writeln!(f, "failing seeds:        {}", self.failing.len())?;
        if self.by_invariant.is_empty() {
            writeln!(f, "violations:           none")?;
        } else {
            writeln!(f, "violations by invariant:")?;
            for (inv, n) in &self.by_invariant {
                writeln!(f, "  {:<14} {n}", inv.name())?;
            }
        }
        for ((seed, invs, first), replay) in self.failing.iter().zip(&self.replay) {
            let names: Vec<&str> = invs.iter().map(|i| i.name()).collect();
            writeln!(f, "seed {seed} [{}]: {first}", names.join(", "))?;
            writeln!(f, "    {replay}")?;
        }
        Ok(())
    }
}

struct Outcome {
    seed: u64,
    virtual_ms: i64,
    wall: Duration,
    invariants: Vec<Invariant>,
    first: Option<String>,
}

/// Runs `count` seeds from `from` on `threads` workers (default: every core).
pub fn explore(
    options: &ExploreOptions,
    from: u64,
    count: u64,
    threads: Option<usize>,
    progress: bool,
) -> Summary {
    let o = options.clone();
    let mut summary = explore_with(move |seed| o.builder(seed), from, count, threads, progress);
    summary.replay = summary.failing.iter().map(|(s, _, _)| replay_command(options, *s)).collect();
    summary
}

/// Runs `count` seeds from `from` on `threads` workers (default: every core), each with the
/// simulation `make` builds for it (`None`: stop). For your own jobs and invariants:
///
/// ```no_run
/// # use shardcron_sim::{Builder, FaultProfile, JobSpec};
/// let specs = vec![JobSpec::new("billing", "0/5 * * * * ?", 4).failover(true)];
/// let summary = shardcron_sim::explore::explore_with(
///     move |seed| Some(Builder { seed, specs: specs.clone(), profile: FaultProfile::Failover, ..Builder::default() }),
///     0, 200, None, false,
/// );
/// assert!(summary.failing.is_empty(), "{summary}");
/// ```
///
/// Each failing seed's `replay` line names its seed: run the same builder with it.
pub fn explore_with(
    make: impl Fn(u64) -> Option<Builder> + Send + Sync + 'static,
    from: u64,
    count: u64,
    threads: Option<usize>,
    progress: bool,
) -> Summary {
    let make = Arc::new(make);
    let threads = threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let started = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let (tx, rx) = mpsc::channel::<Outcome>();
    let mut workers = Vec::new();
    for _ in 0..threads {
        let (next, tx, make) = (next.clone(), tx.clone(), make.clone());
        workers.push(std::thread::spawn(move || loop {
            let k = next.fetch_add(1, Ordering::SeqCst);
            if k >= count {
                return;
            }
            let seed = from.wrapping_add(k);
            let Some(builder) = make(seed) else { return };
            let report = builder.build().run();
            let mut invariants: Vec<Invariant> =
                report.violations.iter().map(|v| v.invariant).collect();
            invariants.dedup();
            let first = report
                .violations
                .first()
                .map(|v| format!("{} at {} ms: {}", v.invariant, v.at, v.message));
            let outcome = Outcome {
                seed,
                virtual_ms: report.virtual_ms,
                wall: report.wall,
                invariants: report.violations.iter().map(|v| v.invariant).collect(),
                first,
            };
            if tx.send(outcome).is_err() {
                return;
            }
        }));
    }
    drop(tx);
    let bar = if progress { ProgressBar::new(count) } else { ProgressBar::hidden() };
    if let Ok(style) =
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} seeds, {msg}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    let mut summary = Summary { threads, ..Summary::default() };
    for outcome in rx {
        summary.seeds += 1;
        summary.virtual_ms += outcome.virtual_ms;
        summary.busy += outcome.wall;
        for inv in &outcome.invariants {
            *summary.by_invariant.entry(*inv).or_default() += 1;
        }
        if let Some(first) = outcome.first {
            let mut invs = outcome.invariants.clone();
            invs.sort();
            invs.dedup();
            summary.failing.push((outcome.seed, invs, first));
        }
        bar.set_message(format!("{} failing", summary.failing.len()));
        bar.inc(1);
    }
    bar.finish_and_clear();
    for w in workers {
        let _ = w.join();
    }
    summary.wall = started.elapsed();
    summary.failing.sort_by_key(|(seed, _, _)| *seed);
    summary.replay = summary
        .failing
        .iter()
        .map(|(s, _, _)| format!("replay: the same Builder with seed: {s}"))
        .collect();
    summary
}
