//! `shardcron-sim`: run, replay, explore and shrink simulations of shardcron clusters.
//!
//! ```text
//! shardcron-sim run --seed 7                       one run; violations and a summary
//! shardcron-sim run --seed 7 --json                the summary as one JSON line
//! shardcron-sim explore --job-config jobs.yaml --instances 5 --profile failover
//!                                                  your ElasticJob jobs, many seeds
//! shardcron-sim run --scenario leader-crash        a built-in scenario (see `scenarios`)
//! shardcron-sim replay --seed 7 [--trace FILE]     print the trace, or compare it with FILE
//! shardcron-sim check-determinism --seed 7         run twice, diff the traces
//! shardcron-sim explore --seeds 1000 [--from S]    many seeds on every core (random start)
//! shardcron-sim shrink --seed 7                    minimal failing schedule, as code
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use shardcron_core::config::ConfigError;
use shardcron_core::sharding::ShardingStrategies;
use shardcron_sim::explore::{self, ExploreOptions};
use shardcron_sim::{
    builtin, load_job_configs, shrink, Builder, FaultProfile, JobFileError, JobSpec, Report,
    Variant, BUILTIN,
};

/// Every step of every simulated job allocates small paths and vectors; mimalloc serves those
/// faster than the system allocator (the binary only: a library leaves the choice to its user).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
#[command(name = "shardcron-sim", about = "Deterministic simulation of shardcron clusters")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Runs one simulation and checks every invariant.
    Run {
        #[command(flatten)]
        run: RunArgs,
        /// Also print the whole trace.
        #[arg(long)]
        trace: bool,
        /// Print one JSON line instead of the violations and the summary (after the trace,
        /// with `--trace`): `seed`, `virtual_ms`, `wall_secs` (the run's own wall time, from
        /// the start of the simulated cluster to the end of the invariant check), `item_runs`,
        /// `violations` (a count) and `first_violation` (the first line of the first one, or
        /// null). The exit status is the same as without it: failure if any was found.
        #[arg(long)]
        json: bool,
    },
    /// Runs a seed again: prints its trace, or compares it with a recorded one.
    Replay {
        #[command(flatten)]
        run: RunArgs,
        /// A trace recorded earlier (`replay ... > FILE`); the run must reproduce it exactly.
        #[arg(long)]
        trace: Option<std::path::PathBuf>,
    },
    /// Runs each seed twice and requires byte-identical traces.
    CheckDeterminism {
        #[command(flatten)]
        run: RunArgs,
        /// Check this many seeds, from `--seed` on (seeds drawn at random when `--random`).
        #[arg(long, default_value_t = 1, value_parser = at_least_one_u64)]
        seeds: u64,
        /// Draw the seeds from the operating system instead of counting up from `--seed`.
        #[arg(long)]
        random: bool,
    },
    /// Runs many seeds on every core and summarises the violations.
    Explore {
        #[command(flatten)]
        run: RunArgs,
        /// How many seeds.
        #[arg(long, default_value_t = 100, value_parser = at_least_one_u64)]
        seeds: u64,
        /// The first seed (default: a random one, printed, so that no range is favoured).
        #[arg(long)]
        from: Option<u64>,
        /// Worker threads (default: every core).
        #[arg(long, value_parser = at_least_one_usize)]
        threads: Option<usize>,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
    },
    /// Reduces the fault schedule of a failing seed to a minimal one that still fails.
    Shrink {
        #[command(flatten)]
        run: RunArgs,
    },
    /// Lists the built-in scenarios.
    Scenarios,
}

/// What defines a run.
#[derive(Args, Debug, Clone)]
struct RunArgs {
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Fault profile: none, default, failover, chaos, garbage, lease, lag, victim.
    #[arg(long, default_value = "default")]
    profile: FaultProfile,
    /// Jobs every instance runs (at least 1), generated from the seed.
    #[arg(long, default_value_t = 2, value_parser = at_least_one_usize)]
    jobs: usize,
    /// Run the jobs of this ElasticJob YAML file instead of generated ones: job configs as
    /// ElasticJob stores them (`jobName: ...`, one per YAML document), or a Spring Boot
    /// `elasticjob: jobs:` map. Every field that changes behaviour is simulated.
    #[arg(long, conflicts_with = "jobs")]
    job_config: Option<PathBuf>,
    /// How long each item of a `--job-config` job runs, in virtual milliseconds.
    #[arg(long, default_value_t = 500, requires = "job_config")]
    item_ms: u64,
    /// Instances in the cluster (at least 1).
    #[arg(long, default_value_t = 3, value_parser = at_least_one_usize)]
    instances: usize,
    /// Length of the fault phase, in virtual seconds (at least 1).
    #[arg(long, default_value_t = 120, value_parser = at_least_one_u64)]
    duration: u64,
    /// Session timeout, in virtual seconds (at least 1).
    #[arg(long, default_value_t = 10, value_parser = at_least_one_u64)]
    session_timeout: u64,
    /// A built-in scenario instead of a generated schedule.
    #[arg(long)]
    scenario: Option<String>,
    /// Run a deliberately broken variant (DropWatchEvent, ForgetItem, FalseLeader,
    /// LeakRunningMarkers, StaleAssignment, GreedyOwner, IgnoreLeaseLoss, ForgetDeparture,
    /// DropCatchUp, DropMissedFires, IgnoreGarbage, MuteClockSkew, MuteLateSkips,
    /// LateAsMisfire, MuteEveryLateSkip, LateAsNoItems, ForgetReshardTime, MuteSkipsBeforeFirstRun, IgnoreConfigChange, DisabledOwnerDropsCatchUp, ForgetLedgerMark, RaiseDropsCatchUps, ReshardDropsCatchUps, StaleConfigRepair, OverLead, MuteCatchUps, TrustLaggingViews, LeakMisfireDetails) to see the checker catch it; the later ones show under faults (`--profile failover`, `chaos` or `garbage`; TrustLaggingViews under `victim`).
    #[arg(long)]
    variant: Option<Variant>,
    /// Run the schedulers with this fire lead, in virtual milliseconds (`Settings::fire_lead`:
    /// each takes its fires that far ahead of its clock and holds the items until the fire's
    /// time; the default is the runtime's). 0: none, each fire taken at its time.
    #[arg(long, default_value_t = default_fire_lead_ms())]
    fire_lead_ms: u64,
}

/// `Settings::fire_lead`'s default, in milliseconds.
fn default_fire_lead_ms() -> u64 {
    u64::try_from(shardcron_core::runtime::DEFAULT_FIRE_LEAD.as_millis()).unwrap_or(0)
}

/// A count or length that must be at least 1: a run with 0 instances, jobs or seconds checks
/// nothing and would report "0 violations" as if the cluster had been tested.
fn at_least_one_u64(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(0) => Err("must be at least 1: a run with none checks nothing".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("{e}; expected a whole number of at least 1")),
    }
}

fn at_least_one_usize(text: &str) -> Result<usize, String> {
    at_least_one_u64(text).and_then(|n| usize::try_from(n).map_err(|e| e.to_string()))
}

impl RunArgs {
    fn builder(&self, seed: u64) -> Result<Builder, String> {
        let mut builder = self.base(seed)?;
        builder.variant = self.variant;
        Ok(builder)
    }

    fn base(&self, seed: u64) -> Result<Builder, String> {
        if let Some(name) = &self.scenario {
            return builtin(name, seed).ok_or_else(|| {
                format!("no built-in scenario {name:?}; one of: {}", BUILTIN.join(", "))
            });
        }
        Ok(Builder {
            seed,
            instances: self.instances,
            jobs: self.jobs,
            specs: self.specs()?,
            duration: Duration::from_secs(self.duration),
            profile: self.profile,
            session_timeout: Duration::from_secs(self.session_timeout),
            settings: shardcron_core::runtime::Settings {
                fire_lead: Duration::from_millis(self.fire_lead_ms),
                ..Default::default()
            },
            ..Builder::default()
        })
    }

    /// The jobs of `--job-config` (none without it: generated ones).
    fn specs(&self) -> Result<Vec<JobSpec>, String> {
        let Some(path) = &self.job_config else { return Ok(Vec::new()) };
        let configs = load_job_configs(path, &ShardingStrategies::default()).map_err(|e| {
            let custom = matches!(
                &e,
                JobFileError::Invalid { source: ConfigError::UnknownShardingStrategy { .. }, .. }
            );
            if custom {
                format!(
                    "{e}\n(the command line knows the built-in strategies only: simulate a \
                     custom one from Rust, with the strategy registered in \
                     Builder::settings.strategies; see docs/simulating.md)"
                )
            } else {
                e.to_string()
            }
        })?;
        Ok(configs.iter().map(|c| JobSpec::from(c).item_ms(self.item_ms)).collect())
    }

    /// The flags that reproduce a run of `seed`.
    fn replay_command(&self, seed: u64) -> String {
        let Ok(options) = self.options() else { return String::new() };
        let command = explore::replay_command(&options, seed);
        match self.variant {
            Some(v) => format!("{command} --variant {v}"),
            None => command,
        }
    }

    fn options(&self) -> Result<ExploreOptions, String> {
        Ok(ExploreOptions {
            profile: self.profile,
            jobs: self.jobs,
            instances: self.instances,
            duration: Duration::from_secs(self.duration),
            session_timeout: Duration::from_secs(self.session_timeout),
            scenario: self.scenario.clone(),
            variant: self.variant,
            specs: self.specs()?,
            job_config: self.job_config.clone().map(|path| (path, self.item_ms)),
            fire_lead: Duration::from_millis(self.fire_lead_ms),
        })
    }
}

fn json_summary(report: &Report) -> Result<String, String> {
    serde_json::to_string(&report.summary())
        .map_err(|e| format!("cannot write the JSON summary: {e}"))
}

fn summary(report: &Report) -> String {
    let secs = report.virtual_ms as f64 / 1000.0;
    let wall = report.wall.as_secs_f64();
    format!(
        "seed {}: {} violation(s); {} trace entries, {} item runs, {:.0} virtual s in {:.2} wall s \
         ({:.0} virtual s per wall s)",
        report.seed,
        report.violations.len(),
        report.entries.len(),
        report.item_runs(),
        secs,
        wall,
        secs / wall.max(1e-9)
    )
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // `RUST_LOG=shardcron_core::protocol=trace` prints every protocol step (with its virtual
    // time); off unless asked, as it slows a run down many times.
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .without_time()
            .with_target(false)
            .with_ansi(false)
            .with_writer(std::io::stderr)
            .init();
    }
    match run(cli.command) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(command: Command) -> Result<bool, String> {
    match command {
        Command::Run { run, trace, json } => {
            let report = run.builder(run.seed)?.build().run();
            if trace {
                print!("{}", report.trace_text());
            }
            if json {
                println!("{}", json_summary(&report)?);
                return Ok(report.ok());
            }
            print!("{}", report.violations_text());
            println!("{}", summary(&report));
            if !report.ok() {
                println!("replay: {}", run.replay_command(run.seed));
            }
            Ok(report.ok())
        }
        Command::Replay { run, trace } => {
            let report = run.builder(run.seed)?.build().run();
            let text = report.trace_text();
            match trace {
                None => print!("{text}"),
                Some(path) => {
                    let recorded = std::fs::read_to_string(&path)
                        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                    if let Some(diff) = first_difference(&recorded, &text) {
                        println!("the run differs from {}:\n{diff}", path.display());
                        return Ok(false);
                    }
                    println!(
                        "the run reproduces {} exactly ({} lines)",
                        path.display(),
                        report.entries.len()
                    );
                }
            }
            eprint!("{}", report.violations_text());
            eprintln!("{}", summary(&report));
            Ok(report.ok())
        }
        Command::CheckDeterminism { run, seeds, random } => {
            let mut all = true;
            for k in 0..seeds {
                let seed = if random { rand::random::<u64>() } else { run.seed + k };
                let sim = run.builder(seed)?.build();
                let (a, b) = (sim.run().trace_text(), sim.run().trace_text());
                match first_difference(&a, &b) {
                    None => println!("seed {seed}: deterministic ({} lines)", a.lines().count()),
                    Some(diff) => {
                        all = false;
                        println!("seed {seed}: NOT deterministic\n{diff}");
                        println!("replay: {}", run.replay_command(seed));
                    }
                }
            }
            Ok(all)
        }
        Command::Explore { run, seeds, from, threads, quiet } => {
            // The explorer's own entry point, not the simulation: the seeds it runs are
            // deterministic once the first is printed.
            let from = from.unwrap_or_else(|| u64::from(rand::random::<u32>()));
            let options = run.options()?;
            run.builder(from)?;
            println!("seeds {from}..{} (repeat with --from {from})", from.saturating_add(seeds));
            let summary = explore::explore(&options, from, seeds, threads, !quiet);
            print!("{summary}");
            Ok(summary.failing.is_empty())
        }
        Command::Shrink { run } => {
            let sim = run.builder(run.seed)?.build();
            let outcome = shrink::shrink(&sim);
            print!("{outcome}");
            Ok(true)
        }
        Command::Scenarios => {
            for name in BUILTIN {
                println!("{name}");
            }
            Ok(true)
        }
    }
}

/// The first line where two traces differ, with a little context; `None` if they are equal.
fn first_difference(a: &str, b: &str) -> Option<String> {
    if a == b {
        return None;
    }
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let k = la.iter().zip(&lb).position(|(x, y)| x != y).unwrap_or(la.len().min(lb.len()));
    let mut out = format!("first difference at line {}:\n", k + 1);
    for line in la.iter().take(k).skip(k.saturating_sub(3)) {
        out.push_str(&format!("    {line}\n"));
    }
    out.push_str(&format!("  - {}\n", la.get(k).copied().unwrap_or("<end>")));
    out.push_str(&format!("  + {}\n", lb.get(k).copied().unwrap_or("<end>")));
    Some(out)
}
