//! `shardcron sharding`: print the assignment a strategy computes for a set of instances.

use std::io::Write;

use clap::ValueEnum;
use shardcron_core::config::{validate_job_name, MAX_SHARDING_TOTAL_COUNT};
use shardcron_core::sharding::{
    check_instances, sort_for_sharding, ShardingError, ShardingStrategies,
};

use crate::error::CliError;

/// One-line description, for `shardcron --help`.
pub const ABOUT: &str = "Show which sharding items each instance gets from a strategy";

/// Full description, for `shardcron sharding --help`.
pub const LONG_ABOUT: &str = "\
Show which sharding items each instance gets from a strategy.

Prints one line per instance, in the order given on the command line:

    <instance><TAB><items ascending, comma-separated>

An instance that gets no item is printed with nothing after the tab.

Instance order: ElasticJob, and the shardcron runtime, hand a strategy the live instances \
sorted in descending order of their ids (Java String.compareTo), the order the registry lists \
them in. With the default --order registry the ids are sorted that way before sharding, so the \
output is what a cluster with exactly these members computes. With --order given they are \
handed over as listed, e.g. to reproduce ElasticJob's documented examples.

Example: shardcron sharding --strategy AVG_ALLOCATION --job orders --total 8 --order given \
--instances s1,s2,s3
prints s1 0,1,6 / s2 2,3,7 / s3 4,5 (tab-separated, one per line).

Invalid input (unknown strategy, total outside 1..1000000, an empty or repeated instance id, a job \
name that cannot be a registry path segment) exits with status 2 and a one-line reason on stderr.";

/// Arguments of `shardcron sharding`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Sharding strategy type: AVG_ALLOCATION, ODEVITY or ROUND_ROBIN (case-sensitive, as in
    /// ElasticJob's jobShardingStrategyType).
    #[arg(long, value_name = "NAME")]
    pub strategy: String,

    /// Job name. ODEVITY and ROUND_ROBIN derive the instance order from its Java hashCode.
    #[arg(long, value_name = "JOB")]
    pub job: String,

    /// Sharding total count: the job has items 0..N-1 (1 to 1000000).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub total: i64,

    /// Instance ids, comma-separated or given several times, e.g. 10.0.0.1@-@4242. Spaces
    /// around an id are ignored; empty and repeated ids are rejected.
    #[arg(long, value_name = "ID[,ID...]", value_delimiter = ',', required = true)]
    pub instances: Vec<String>,

    /// Order in which the instances are handed to the strategy.
    #[arg(long, value_enum, default_value_t = Order::Registry)]
    pub order: Order,
}

/// How `--instances` are ordered before sharding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Order {
    /// Descending by id, as ElasticJob and the shardcron runtime order live instances.
    Registry,
    /// Exactly as listed on the command line.
    Given,
}

/// Runs the command: validates the input, shards, prints one line per instance.
pub fn run(args: &Args, out: &mut dyn Write) -> Result<(), CliError> {
    let strategies = ShardingStrategies::default();
    let strategy = strategies.get(&args.strategy).map_err(|_| {
        let known = strategies.type_names().collect::<Vec<_>>().join(", ");
        invalid(format!(
            "--strategy: unknown sharding strategy {:?}; use one of {known}",
            args.strategy
        ))
    })?;
    job_name(&args.job)?;
    let total = total_count(args.total)?;
    let given: Vec<&str> = args.instances.iter().map(|id| id.trim()).collect();
    check_instances(&given).map_err(instances_error)?;

    let mut ordered = given.clone();
    if args.order == Order::Registry {
        sort_for_sharding(&mut ordered);
    }
    let assignment = strategy.shard(&args.job, &ordered, total);

    for id in &given {
        let items = assignment.items(id).unwrap_or_default();
        let items: Vec<String> = items.iter().map(u32::to_string).collect();
        writeln!(out, "{id}\t{}", items.join(","))?;
    }
    Ok(())
}

/// Checks `--job`: a name the registry can hold as a path segment.
pub(crate) fn job_name(job: &str) -> Result<(), CliError> {
    validate_job_name(job).map_err(|err| {
        // The core message starts with the config field name; here the flag is the name.
        let err = err.to_string();
        invalid(format!("--job: {}", err.trim_start_matches("jobName: ")))
    })
}

/// Checks `--total`: a sharding total count in 1..=1000000.
pub(crate) fn total_count(total: i64) -> Result<u32, CliError> {
    match u32::try_from(total) {
        Ok(n) if (1..=MAX_SHARDING_TOTAL_COUNT).contains(&n) => Ok(n),
        _ if total < 1 => Err(invalid(format!("--total: must be at least 1, got {total}"))),
        _ => Err(invalid(format!(
            "--total: must be at most {MAX_SHARDING_TOTAL_COUNT}, got {total}"
        ))),
    }
}

fn instances_error(err: ShardingError) -> CliError {
    match err {
        ShardingError::EmptyInstanceId { position } => invalid(format!(
            "--instances: id number {} is empty; give non-empty, comma-separated ids",
            position + 1
        )),
        ShardingError::DuplicateInstance { instance } => invalid(format!(
            "--instances: {instance:?} is listed more than once; give each instance once"
        )),
        other => invalid(format!("--instances: {other}")),
    }
}

fn invalid(reason: String) -> CliError {
    CliError::InvalidInput(reason)
}
