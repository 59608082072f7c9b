//! `shardcron-bench`: measures what users choose a scheduler for and writes BENCHMARKS.md.
//!
//! ```sh
//! scripts/bench.sh all                                  # every section, servers started for it
//! cargo run --release -p shardcron-bench -- precision   # one section, servers from the env
//! cargo run --release -p shardcron-bench -- all --quick # shorter windows, fewer repetitions
//! ```
//!
//! Numbers are taken side by side in one run of one binary, because the machines are noisy;
//! nothing here asserts a timing. Each scheduler under test runs alone in a child process of
//! this binary (a hidden sub-command), so its CPU time and memory are its own.
//!
//! ## Layout
//! - `precision`: section 1, trigger lateness and delivery at 100-10,000 fires/s.
//! - `memory`: section 2, RSS and threads per registered job.
//! - `registry_load`: section 3, registry operations per fire and per idle second.
//! - `projection`: section 3b, the registry load of clusters of up to 100 instances in the
//!   simulator, projected to 100 instances × 10,000 jobs.
//! - `failover`: section 4, crash and stop to restart of the orphaned items, real processes.
//! - `sim`: section 5, simulator throughput.
//! - `micro`: section 6, cron and sharding micro-benchmarks.
//! - `contenders`: shardcron and tokio-cron-scheduler started the same way.
//! - `report`, `stats`, `proc`: BENCHMARKS.md, percentiles, process measurements.
//!
//! Two binaries run this library: `shardcron-bench`, on the system's allocator (what an
//! application gets unless it chooses), and `shardcron-bench-mimalloc`, on mimalloc, whose
//! children give the rows that show what the choice of allocator does (`…, mimalloc`).

mod contenders;
mod failover;
mod memory;
mod micro;
mod precision;
mod proc;
mod projection;
mod registry_load;
mod report;
mod sim;
mod stats;
mod wire;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Errors of the bench binary: messages for the person running it.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// An [`Error`] with `message`.
pub fn err(message: impl Into<String>) -> Error {
    message.into().into()
}

#[derive(Debug, Parser)]
#[command(name = "shardcron-bench", about = "Benchmarks of shardcron; writes BENCHMARKS.md")]
struct Cli {
    /// Shorter windows and fewer points (minutes instead of half an hour); figures are noisier.
    #[arg(long, global = true)]
    quick: bool,
    /// The report to update.
    #[arg(long, global = true, default_value = "BENCHMARKS.md")]
    out: PathBuf,
    /// Print the section instead of writing the report.
    #[arg(long, global = true)]
    dry_run: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Every section, in order.
    All(PrecisionArgs),
    /// Section 1: trigger precision at scale, side by side with tokio-cron-scheduler.
    Precision(PrecisionArgs),
    /// Section 2: memory and threads per registered job.
    Memory,
    /// Section 3: registry operations per fire and per idle second, mem / ZooKeeper / etcd.
    Registry(RegistryArgs),
    /// Section 3b: the registry load of clusters of up to 100 instances in the simulator,
    /// projected to 100 instances × 10,000 jobs.
    Projection,
    /// Section 4: failover latency with real worker processes.
    Failover,
    /// Section 5: simulator throughput.
    Sim,
    /// Section 6: cron and sharding micro-benchmarks.
    Micro,
    #[command(hide = true)]
    ChildPrecision {
        #[arg(long)]
        scheduler: String,
        #[arg(long)]
        jobs: u64,
        #[arg(long)]
        seconds: u64,
    },
    #[command(hide = true)]
    ChildMemory {
        #[arg(long)]
        scheduler: String,
        #[arg(long)]
        jobs: u64,
    },
}

#[derive(Debug, Clone, clap::Args)]
struct PrecisionArgs {
    /// Length of each precision window, seconds (default: 60, or 10 with --quick).
    #[arg(long)]
    duration: Option<u64>,
    /// Job counts of the precision section (default: 1,100,1000,10000).
    #[arg(long, value_delimiter = ',')]
    jobs: Option<Vec<u64>>,
    /// Schedulers of the precision section (default: all).
    #[arg(long, value_delimiter = ',')]
    schedulers: Option<Vec<String>>,
}

#[derive(Debug, Clone, clap::Args)]
struct RegistryArgs {
    /// Cluster sizes of the registry section, instances (default: 3,10,30, or 3,10 with --quick).
    #[arg(long, value_delimiter = ',')]
    instances: Option<Vec<usize>>,
}

/// The command line as the report shows it.
fn command_line() -> String {
    if let Ok(c) = std::env::var("SHARDCRON_BENCH_COMMAND") {
        return c;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    format!("cargo run --release -p shardcron-bench -- {}", args.join(" "))
}

/// The allocator the running binary was built with, as the report names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allocator {
    /// The system's (glibc's malloc on Linux).
    System,
    /// mimalloc, the global allocator of `shardcron-bench-mimalloc`.
    Mimalloc,
}

static ALLOCATOR: std::sync::OnceLock<Allocator> = std::sync::OnceLock::new();

/// The allocator of this process (what its `main` said).
pub(crate) fn allocator() -> Allocator {
    ALLOCATOR.get().copied().unwrap_or(Allocator::System)
}

/// The bench's command line, run by a binary whose global allocator is `allocator`.
pub fn main(allocator: Allocator) {
    let _ = ALLOCATOR.set(allocator);
    let cli = Cli::parse();
    // `RUST_LOG=shardcron_core=debug,shardcron_registry_etcd=debug` (and so on) shows what a
    // child's schedulers and registries log.
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_default_env() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .try_init();
    }
    if let Err(e) = run(cli) {
        eprintln!("shardcron-bench: {e}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> Result<(), Error> {
    let quick = cli.quick;
    let section = |id: &str| -> Result<(), Error> {
        let provenance = report::Provenance::now(&command_line());
        eprintln!("== {id}");
        let section = match id {
            "precision" => precision_section(&cli.command, quick)?,
            "memory" => memory::run(quick)?,
            "registry" => {
                let sizes = match &cli.command {
                    Command::Registry(args) => args.instances.clone(),
                    _ => None,
                };
                registry_load::run(quick, sizes)?
            }
            "micro" => micro::run(quick)?,
            "projection" => projection::run(quick)?,
            "sim" => sim::run(quick)?,
            "failover" => failover::run(quick)?,
            other => not_yet(other),
        };
        if cli.dry_run {
            println!("{}", section.body);
            for v in &section.verdicts {
                println!("{v:?}");
            }
            return Ok(());
        }
        report::write(&cli.out, id, &section, &provenance)?;
        eprintln!("== {id}: written to {}", cli.out.display());
        Ok(())
    };
    match &cli.command {
        Command::All(_) => {
            for (id, _) in report::SECTIONS {
                section(id)?;
            }
            Ok(())
        }
        Command::Precision(_) => section("precision"),
        Command::Memory => section("memory"),
        Command::Registry(_) => section("registry"),
        Command::Projection => section("projection"),
        Command::Failover => section("failover"),
        Command::Sim => section("sim"),
        Command::Micro => section("micro"),
        Command::ChildPrecision { scheduler, jobs, seconds } => {
            precision::child(scheduler, *jobs, *seconds)
        }
        Command::ChildMemory { scheduler, jobs } => memory::child(scheduler, *jobs),
    }
}

fn precision_section(command: &Command, quick: bool) -> Result<report::Section, Error> {
    let args = match command {
        Command::All(a) | Command::Precision(a) => a.clone(),
        _ => PrecisionArgs { duration: None, jobs: None, schedulers: None },
    };
    let seconds = args.duration.unwrap_or(if quick { 10 } else { 60 });
    // One job shows the floor (the timer's own lateness); then the issue's three scales.
    let jobs = args.jobs.unwrap_or_else(|| vec![1, 100, 1_000, 10_000]);
    let default = [
        contenders::SHARDCRON,
        contenders::SHARDCRON_NOLEAD,
        contenders::SHARDCRON_NOMONITOR,
        contenders::SHARDCRON_OBSERVED,
        contenders::SHARDCRON_LEAD,
        contenders::TCS,
        contenders::TCS_SIZED,
        contenders::SHARDCRON_MIMALLOC,
        contenders::TCS_SIZED_MIMALLOC,
    ];
    let schedulers: Vec<String> =
        args.schedulers.unwrap_or_else(|| default.iter().map(|s| (*s).to_owned()).collect());
    let names: Vec<&str> = schedulers.iter().map(String::as_str).collect();
    precision::run(&jobs, seconds, &names, quick)
}

fn not_yet(id: &str) -> report::Section {
    report::Section { body: format!("Section {id} is not implemented yet."), verdicts: vec![] }
}
