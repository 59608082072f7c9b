//! Simulates a deployment: the jobs of an ElasticJob `application.yml` (`deployment.yml`:
//! item parameters, a custom sharding strategy, failover) on 5 instances under the failover
//! fault profile, with the settlement job's own code writing to a ledger and two invariants of
//! our own on top of the built-in ones, over 200 seeds.
//!
//! ```text
//! cargo run -p shardcron-sim --example deployment            # seeds 0..200
//! cargo run -p shardcron-sim --example deployment -- 1000 50  # seeds 1000..1050
//! ```
//!
//! A failing seed prints its violations (job, item, fire time, what went wrong, the trace
//! entries that led to it) and exits with status 1.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use shardcron_core::config::JobConfig;
use shardcron_core::job::Job;
use shardcron_core::sharding::{Assignment, ShardingStrategy};
use shardcron_sim::explore::explore_with;
use shardcron_sim::{
    load_job_configs, Builder, FaultProfile, Finding, JobCode, JobSpec, RunView, UserInvariant,
};

/// Our custom strategy (`jobShardingStrategyType: HEAD_OFFICE_FIRST`): item 0, the head
/// office, always goes to the first instance in sharding order; the regions go round robin
/// over the others (over everyone when there is only one).
#[derive(Debug)]
struct HeadOfficeFirst;

impl ShardingStrategy for HeadOfficeFirst {
    fn type_name(&self) -> &str {
        "HEAD_OFFICE_FIRST"
    }

    fn shard(&self, _job: &str, instances: &[&str], total_count: u32) -> Assignment {
        let mut assignment = Assignment::with_instances(instances);
        let Some(first) = instances.first() else { return assignment };
        assignment.assign(first, [0]);
        let regions = if instances.len() > 1 { &instances[1..] } else { instances };
        for (k, item) in (1..total_count).enumerate() {
            assignment.assign(regions[k % regions.len()], [item]);
        }
        assignment
    }
}

/// What the settlement job writes: one row per (item, fire), fenced by the item's token as
/// GUARANTEES.md suggests (a write with a lower token than one seen for the item is refused).
#[derive(Debug, Default)]
struct Ledger {
    rows: Mutex<BTreeMap<(u32, i64), Row>>,
    fence: Mutex<BTreeMap<u32, u64>>,
    refused: Mutex<Vec<(u32, i64, u64)>>,
}

#[derive(Debug, Clone)]
struct Row {
    region: String,
    token: u64,
}

/// A fire time as the epoch milliseconds the simulator's item runs are keyed by.
fn epoch_ms(time: std::time::SystemTime) -> i64 {
    let since = time.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

impl Ledger {
    fn write(&self, item: u32, fire_ms: i64, region: &str, token: u64) {
        let mut fence = self.fence.lock();
        let seen = fence.entry(item).or_default();
        if token < *seen {
            self.refused.lock().push((item, fire_ms, token));
            return;
        }
        *seen = token;
        self.rows.lock().insert((item, fire_ms), Row { region: region.to_owned(), token });
    }
}

/// The settlement job: settling a region takes 300 ms plus 100 ms per item (virtual time),
/// then the result goes to the ledger. A cancelled item writes nothing.
fn settlement() -> JobCode {
    JobCode::new(|env| {
        let ledger = env.state.get::<Ledger>();
        Job::from_fn(move |ctx| {
            let ledger = ledger.clone();
            async move {
                let work = Duration::from_millis(300 + 100 * u64::from(ctx.item));
                tokio::select! {
                    biased;
                    () = ctx.cancellation.cancelled() => return Ok(()),
                    () = tokio::time::sleep(work) => {}
                }
                ledger.write(
                    ctx.item,
                    epoch_ms(ctx.fire_time()),
                    &ctx.item_parameter,
                    ctx.fencing_token,
                );
                Ok(())
            }
        })
    })
}

/// Our invariants: every completed settlement is in the ledger, for its item's region and
/// with a token at least its own; and a write is refused only when the item had a newer
/// owner (a run with a higher token).
fn ledger_invariants(parameters: BTreeMap<u32, String>) -> Vec<UserInvariant> {
    let recorded = UserInvariant::new("ledger-has-every-settlement", move |run: &RunView<'_>| {
        let Some(ledger) = run.state::<Ledger>() else {
            return Vec::new(); // nothing settled in this run
        };
        let rows = ledger.rows.lock();
        let mut findings = Vec::new();
        for r in run.runs().iter().filter(|r| r.job == "settlement" && r.ok()) {
            let region = parameters.get(&r.item).map_or("", String::as_str);
            match rows.get(&(r.item, r.fire_ms)) {
                None => findings.push(Finding::about(r, "completed, but the ledger has no row")),
                Some(row) if row.region != region => findings.push(Finding::about(
                    r,
                    format!("the ledger row is for region {:?}, not {region:?}", row.region),
                )),
                Some(row) if row.token < r.token => findings.push(Finding::about(
                    r,
                    format!(
                        "the ledger row has token {}, older than the run's {}",
                        row.token, r.token
                    ),
                )),
                Some(_) => {}
            }
        }
        findings
    });
    let fenced = UserInvariant::new("refused-only-when-replaced", |run: &RunView<'_>| {
        let Some(ledger) = run.state::<Ledger>() else { return Vec::new() };
        let runs = run.runs();
        let refused = ledger.refused.lock().clone();
        refused
            .into_iter()
            .filter(|&(item, _, token)| {
                !runs.iter().any(|r| r.job == "settlement" && r.item == item && r.token > token)
            })
            .map(|(item, fire, token)| {
                Finding::new(
                    "settlement",
                    format!("write with token {token} refused, yet no run had a newer one"),
                )
                .item(item)
                .fire(fire)
            })
            .collect()
    });
    vec![recorded, fenced]
}

fn main() -> ExitCode {
    let args: Vec<u64> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (from, seeds) = match args[..] {
        [] => (0, 200),
        [seeds] => (0, seeds),
        [from, seeds, ..] => (from, seeds),
    };

    // The instances know our strategy; the file is read and checked with it.
    let mut settings = shardcron_core::runtime::Settings::default();
    if let Err(e) = settings.strategies.register(Arc::new(HeadOfficeFirst)) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/deployment.yml");
    let configs = match load_job_configs(path.as_ref(), &settings.strategies) {
        Ok(configs) => configs,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let spec = |c: &JobConfig| match c.job_name() {
        "settlement" => JobSpec::from(c).code(settlement()).item_ms(1_000),
        _ => JobSpec::from(c).item_ms(800),
    };
    let specs: Vec<JobSpec> = configs.iter().map(spec).collect();
    let parameters = configs
        .iter()
        .find(|c| c.job_name() == "settlement")
        .and_then(|c| c.item_parameters().ok())
        .unwrap_or_default();
    let checks = ledger_invariants(parameters);

    let builder = move |seed| {
        Some(Builder {
            seed,
            instances: 5,
            specs: specs.clone(),
            profile: FaultProfile::Failover,
            settings: settings.clone(),
            checks: checks.clone(),
            ..Builder::default()
        })
    };
    // One run first, to show what a run of these jobs looks like.
    if let Some(first) = builder(from) {
        let report = first.build().run();
        let settled = report.state.existing::<Ledger>().map_or(0, |l| l.rows.lock().len());
        println!(
            "seed {from}: {} item runs, {settled} settlements in the ledger, {} violation(s)",
            report.item_runs(),
            report.violations.len()
        );
    }
    let builder = Arc::new(builder);
    let make = builder.clone();
    let summary = explore_with(move |seed| make(seed), from, seeds, None, false);
    print!("{summary}");
    let Some((seed, _, _)) = summary.failing.first() else { return ExitCode::SUCCESS };
    // The first failing seed again, in full: every violation with the entries that led to it.
    if let Some(failing) = builder(*seed) {
        print!("{}", failing.build().run().violations_text());
    }
    ExitCode::FAILURE
}
