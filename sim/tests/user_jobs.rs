//! Users simulate their own deployment: jobs from a `JobConfig` or ElasticJob YAML (every
//! field that changes behaviour), their own code and duration models, custom strategies, and
//! their own invariants, whose violations read in their terms, replay and shrink.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use shardcron_core::config::JobConfig;
use shardcron_core::job::Job;
use shardcron_core::runtime::Settings;
use shardcron_core::sharding::{Assignment, ShardingStrategies, ShardingStrategy};
use shardcron_sim::trace::What;
use shardcron_sim::{
    job_configs_from_yaml, shrink, Builder, Fault, FaultProfile, Finding, Invariant, JobCode,
    JobFileError, JobSpec, Scenario, UserInvariant,
};

fn examples(file: &str) -> String {
    let path = format!("{}/examples/{file}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Item 0 to the first instance in sharding order, the rest round robin over the others.
#[derive(Debug)]
struct PinFirst;

impl ShardingStrategy for PinFirst {
    fn type_name(&self) -> &str {
        "PIN_FIRST"
    }
    fn shard(&self, _job: &str, instances: &[&str], total_count: u32) -> Assignment {
        let mut a = Assignment::with_instances(instances);
        let Some(first) = instances.first() else { return a };
        a.assign(first, [0]);
        let rest = if instances.len() > 1 { &instances[1..] } else { instances };
        for (k, item) in (1..total_count).enumerate() {
            a.assign(rest[k % rest.len()], [item]);
        }
        a
    }
}

fn pin_first_settings() -> Settings {
    let mut settings = Settings::default();
    settings.strategies.register(Arc::new(PinFirst)).expect("a new strategy name");
    settings
}

#[test]
fn a_spec_from_a_config_publishes_that_config() {
    let yaml = "jobName: settle\ncron: 0/10 * * * * ?\ntimeZone: Asia/Shanghai\n\
                shardingTotalCount: 3\nshardingItemParameters: 0=A,1=B,2=C\njobParameter: p\n\
                monitorExecution: false\nfailover: false\nmisfire: false\nmaxTimeDiffSeconds: 5\n\
                reconcileIntervalMinutes: 3\njobShardingStrategyType: ODEVITY\n\
                jobErrorHandlerType: IGNORE\ndisabled: true\nstaticSharding: true\n\
                props:\n  region: eu\n";
    let config = JobConfig::from_yaml(yaml).expect("valid YAML");
    let spec = JobSpec::from(&config);
    assert_eq!(spec.config(), config);
    assert_eq!(
        (
            spec.time_zone.as_deref(),
            spec.strategy.as_deref(),
            spec.monitor_execution,
            spec.disabled
        ),
        (Some("Asia/Shanghai"), Some("ODEVITY"), false, true)
    );
    // The spec's fields override the config they came from.
    let changed = spec.clone().count(5).failover(true).item_parameters("0=X");
    let published = changed.config();
    assert_eq!(published.sharding_total_count(), 5);
    assert!(published.failover());
    assert_eq!(published.sharding_item_parameters(), Some("0=X"));
    assert_eq!(published.reconcile_interval_minutes(), 3);
    assert!(published.static_sharding());
}

#[test]
fn a_generated_spec_publishes_what_it_always_did() {
    let spec = JobSpec::new("j0", "0/5 * * * * ?", 4).failover(true).max_time_diff_seconds(5);
    let expected = JobConfig::builder("j0")
        .cron("0/5 * * * * ?")
        .sharding_total_count(4)
        .failover(true)
        .max_time_diff(Some(Duration::from_secs(5)))
        .build()
        .expect("a valid config");
    assert_eq!(spec.config(), expected);
    assert_eq!(
        spec.to_string(),
        "JobSpec::new(\"j0\", \"0/5 * * * * ?\", 4).item_ms(500).failover(true).max_time_diff_seconds(5)"
    );
}

#[test]
fn job_files_are_read_in_every_shape_elasticjob_users_have() {
    let builtin = ShardingStrategies::default();
    let documents = job_configs_from_yaml(&examples("jobs.yaml"), &builtin).expect("jobs.yaml");
    let names: Vec<&str> = documents.iter().map(|c| c.job_name()).collect();
    assert_eq!(names, ["settlement", "reports"]);
    assert_eq!(documents[0].item_parameters().expect("parameters")[&3], "Shenzhen");

    let list = "- jobName: a\n  cron: 0/5 * * * * ?\n  shardingTotalCount: 1\n\
                - jobName: b\n  cron: 0/7 * * * * ?\n  shardingTotalCount: 2\n";
    assert_eq!(job_configs_from_yaml(list, &builtin).expect("a list").len(), 2);

    // The Spring Boot file names a custom strategy: refused until it is registered.
    let spring = examples("deployment.yml");
    let refused = job_configs_from_yaml(&spring, &builtin).expect_err("unknown strategy");
    assert!(matches!(&refused, JobFileError::Invalid { job, .. } if job == "settlement"));
    assert!(refused.to_string().contains("HEAD_OFFICE_FIRST"), "{refused}");
    let mut strategies = ShardingStrategies::default();
    strategies.register(Arc::new(HeadOffice)).expect("new name");
    let configs = job_configs_from_yaml(&spring, &strategies).expect("with the strategy");
    assert_eq!(configs.len(), 2);
    assert_eq!(configs[0].sharding_strategy_type(), "HEAD_OFFICE_FIRST");
    assert_eq!(configs[0].time_zone_id(), Some("Asia/Shanghai"));
}

#[derive(Debug)]
struct HeadOffice;

impl ShardingStrategy for HeadOffice {
    fn type_name(&self) -> &str {
        "HEAD_OFFICE_FIRST"
    }
    fn shard(&self, job: &str, instances: &[&str], total_count: u32) -> Assignment {
        PinFirst.shard(job, instances, total_count)
    }
}

#[test]
fn bad_job_files_are_refused_with_what_is_wrong() {
    let builtin = ShardingStrategies::default();
    let refuse =
        |yaml: &str| job_configs_from_yaml(yaml, &builtin).expect_err("refused").to_string();
    assert!(refuse("").contains("no job"));
    assert!(refuse("cron: 0/5 * * * * ?\n").contains("a map without `jobName`"));
    assert!(refuse("jobName: [x\n").contains("not valid YAML"));
    assert!(refuse("jobName: a\nshardingTotalCount: 0\n").contains("shardingTotalCount"));
    assert!(refuse(
        "jobName: a\ncron: 0/5 * * * * ?\nshardingTotalCount: 1\n---\n\
                    jobName: a\ncron: 0/5 * * * * ?\nshardingTotalCount: 1\n"
    )
    .contains("appears twice"));
    assert!(refuse("elasticjob:\n  regCenter: {}\n").contains("no `jobs` map"));
    assert!(refuse("jobName: a\ncron: 99 * * * * ?\nshardingTotalCount: 1\n").contains("cron"));
}

#[test]
fn a_custom_strategy_is_run_and_its_assignment_checked() {
    let report = Builder {
        seed: 5,
        instances: 3,
        specs: vec![JobSpec::new("pinned", "0/5 * * * * ?", 5).strategy("PIN_FIRST")],
        duration: Duration::from_secs(30),
        profile: FaultProfile::None,
        settings: pin_first_settings(),
        ..Builder::default()
    }
    .build()
    .run();
    assert!(report.ok(), "{}", report.violations_text());
    let assignments: Vec<String> = report
        .entries
        .iter()
        .filter_map(|e| match &e.what {
            What::Event {
                event: shardcron_core::runtime::SchedulerEvent::Sharded { assignment, .. },
                ..
            } => Some(format!("{assignment:?}")),
            _ => None,
        })
        .collect();
    assert!(!assignments.is_empty());
    for a in &assignments {
        // Item 0 alone on one instance (the first in sharding order), the rest spread.
        assert!(a.contains("\", [0])"), "item 0 alone on the first: {a}");
    }
    assert!(report.item_runs() > 20);
    // Judged with the built-in strategies only, the same run breaks the assignment invariant:
    // the run's own strategies are what the check must use.
    let (builtin_only, _) = shardcron_sim::invariants::check_with_accounting(
        &report.entries,
        &report.checkpoints,
        Duration::from_secs(10),
    );
    assert!(builtin_only.iter().any(|v| v.invariant == Invariant::Assignment));
}

/// Item 0 must stay where it first ran: false as soon as its instance dies under failover.
fn item0_stays() -> UserInvariant {
    UserInvariant::new("item0-stays", |run| {
        let runs = run.runs();
        let Some(home) = runs.iter().find(|r| r.item == 0).map(|r| r.instance) else {
            return Vec::new();
        };
        runs.iter()
            .filter(|r| r.item == 0 && r.instance != home)
            .map(|r| Finding::about(r, format!("item 0 left i{home}")))
            .collect()
    })
}

fn crash_builder() -> Builder {
    Builder {
        seed: 11,
        instances: 3,
        specs: vec![JobSpec::new("settle", "0/5 * * * * ?", 3).item_ms(2_000).failover(true)],
        duration: Duration::from_secs(40),
        profile: FaultProfile::None,
        scenario: Some(
            Scenario::new("crash of i1 among noise")
                .at(3_000, Fault::Slow(3, 50))
                .at(6_000, Fault::Slow(3, 0))
                .at(12_000, Fault::Crash(3))
                .at(25_000, Fault::Restart(3))
                .at(30_000, Fault::RestartRegistry),
        ),
        checks: vec![item0_stays()],
        ..Builder::default()
    }
}

#[test]
fn a_user_invariant_fails_in_user_terms_and_replays() {
    let sim = crash_builder().build();
    let report = sim.run();
    let mine: Vec<_> =
        report.violations.iter().filter(|v| v.invariant == Invariant::User).collect();
    assert!(!mine.is_empty(), "i3 crashed, so item 0 moved:\n{}", report.violations_text());
    let text = mine[0].to_string();
    assert!(text.contains("item0-stays: settle#0 fire=+"), "{text}");
    assert!(text.contains(" UTC) on i"), "{text}");
    assert!(text.contains("item 0 left i3"), "{text}");
    assert!(!text.contains("fire_ms") && !text.contains(" { "), "no Debug structs: {text}");
    assert!(!mine[0].context.is_empty());
    // The same run again: the same trace and the same violations, byte for byte.
    let again = sim.run();
    assert_eq!(again.trace_text(), report.trace_text());
    assert_eq!(again.violations_text(), report.violations_text());
}

#[test]
fn a_user_invariant_failure_shrinks_to_the_step_that_matters() {
    let shrunk = shrink::shrink(&crash_builder().build());
    assert_eq!(shrunk.target, Some(Invariant::User));
    assert_eq!(shrunk.user_invariant.as_deref(), Some("item0-stays"));
    let steps: Vec<String> = shrunk.scenario.steps.iter().map(|s| s.action.to_string()).collect();
    assert_eq!(steps, ["Fault::Crash(3)"], "{shrunk}");
    assert!(shrunk.to_string().contains("still violates user (item0-stays)"), "{shrunk}");
    assert!(shrunk.code.contains("..builder.clone()"), "{}", shrunk.code);
}

#[derive(Default)]
struct Settled(AtomicU32);

#[test]
fn user_code_state_starts_fresh_in_every_run() {
    let code = JobCode::new(|env| {
        let settled = env.state.get::<Settled>();
        Job::from_fn(move |ctx| {
            let settled = settled.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                if !ctx.item_parameter.is_empty() {
                    settled.0.fetch_add(1, Ordering::SeqCst);
                }
                Ok(())
            }
        })
    });
    let sim = Builder {
        seed: 2,
        specs: vec![JobSpec::new("s", "0/5 * * * * ?", 2).item_parameters("0=A,1=B").code(code)],
        duration: Duration::from_secs(20),
        profile: FaultProfile::None,
        ..Builder::default()
    }
    .build();
    let count = |r: &shardcron_sim::Report| {
        r.state.existing::<Settled>().map(|s| s.0.load(Ordering::SeqCst))
    };
    let (first, second) = (sim.run(), sim.run());
    assert!(first.ok(), "{}", first.violations_text());
    let settled = count(&first).expect("the job code made its state");
    assert_eq!(settled as usize, first.runs().iter().filter(|r| r.ok()).count());
    assert!(settled > 4);
    assert_eq!(count(&second), Some(settled), "nothing carried over from the first run");
}

#[test]
fn a_duration_model_sets_how_long_each_item_takes() {
    let model = JobCode::durations(|ctx| Duration::from_millis(200 * (u64::from(ctx.item) + 1)));
    let report = Builder {
        seed: 4,
        specs: vec![JobSpec::new("d", "0/5 * * * * ?", 3).code(model).item_ms(600)],
        duration: Duration::from_secs(20),
        profile: FaultProfile::None,
        ..Builder::default()
    }
    .build()
    .run();
    assert!(report.ok(), "{}", report.violations_text());
    let runs = report.runs();
    assert!(runs.len() > 6);
    for r in runs.iter().filter(|r| r.ended.is_some()) {
        let (end, ok) = r.ended.expect("ended");
        assert!(ok);
        assert_eq!(end - r.started_at, 200 * (i64::from(r.item) + 1), "{r:?}");
    }
}

#[test]
fn disabled_static_and_zoned_jobs_are_judged_by_their_own_rules() {
    let fixed = JobConfig::builder("fixed")
        .cron("0/6 * * * * ?")
        .sharding_total_count(4)
        .static_sharding(true)
        .build()
        .expect("a valid config");
    let report = Builder {
        seed: 8,
        specs: vec![
            JobSpec::new("off", "0/4 * * * * ?", 2).disabled(true),
            JobSpec::new("on", "0/5 * * * * ?", 2).time_zone("America/New_York"),
            JobSpec::from(&fixed).failover(true),
        ],
        duration: Duration::from_secs(30),
        profile: FaultProfile::Failover,
        ..Builder::default()
    }
    .build()
    .run();
    assert!(report.ok(), "{}", report.violations_text());
    let runs = report.runs();
    assert!(runs.iter().all(|r| r.job != "off"), "a disabled job runs nothing");
    assert!(runs.iter().any(|r| r.job == "on") && runs.iter().any(|r| r.job == "fixed"));
    assert!(report.trace_text().contains("static-sharding=true"));
}

/// Found by simulating `monitorExecution: false`: a misfired fire's catch-up ran again and
/// again on the same instance (its launch never settled the misfire marker).
#[test]
fn monitor_execution_off_runs_a_misfire_catch_up_once() {
    let report = Builder {
        seed: 81,
        specs: vec![JobSpec::new("nomonitor", "0/5 * * * * ?", 3).monitor_execution(false)],
        duration: Duration::from_secs(30),
        profile: FaultProfile::None,
        scenario: Some(
            Scenario::new("trigger just before a fire")
                .at(9_970, shardcron_sim::Workload::Trigger { job: "nomonitor".into() }),
        ),
        ..Builder::default()
    }
    .build()
    .run();
    assert!(report.ok(), "{}", report.violations_text());
}

fn sim_cli(args: &[&str]) -> (Option<i32>, String, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_shardcron-sim"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the shardcron-sim binary runs");
    let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).into_owned();
    (output.status.code(), text(output.stdout), text(output.stderr))
}

#[test]
fn the_command_line_explores_and_replays_a_job_file() {
    let common =
        ["--job-config", "examples/jobs.yaml", "--instances", "5", "--profile", "failover"];
    let explore = [&["explore", "--seeds", "6", "--from", "40", "--quiet"][..], &common].concat();
    let (status, stdout, stderr) = sim_cli(&explore);
    assert_eq!(status, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("seeds run:            6"), "{stdout}");
    let replay = [&["replay", "--seed", "41"][..], &common].concat();
    let (status, stdout, stderr) = sim_cli(&replay);
    assert_eq!(status, Some(0), "{stderr}");
    assert!(
        stdout.contains("config settlement cron=0/10 * * * * ? count=4 failover=true"),
        "{stdout}"
    );
    assert!(stdout.contains("time-zone=Asia/Shanghai strategy=ODEVITY"), "{stdout}");
    assert!(stdout.contains("start settlement#3 fire=+"), "{stdout}");
    let (status, again, _) = sim_cli(&replay);
    assert_eq!((status, again), (Some(0), stdout), "a replay reproduces the run");
}

#[test]
fn the_command_line_refuses_a_job_file_it_cannot_simulate() {
    let (status, _, stderr) = sim_cli(&["run", "--job-config", "examples/missing.yaml"]);
    assert_eq!(status, Some(2));
    assert!(stderr.contains("cannot read the job file examples/missing.yaml"), "{stderr}");
    // A custom strategy exists only in Rust: the command line says where to go.
    let (status, _, stderr) = sim_cli(&["run", "--job-config", "examples/deployment.yml"]);
    assert_eq!(status, Some(2));
    assert!(
        stderr.contains("HEAD_OFFICE_FIRST") && stderr.contains("docs/simulating.md"),
        "{stderr}"
    );
    let (status, _, stderr) =
        sim_cli(&["run", "--job-config", "examples/jobs.yaml", "--jobs", "3"]);
    assert_eq!(status, Some(2));
    assert!(stderr.contains("cannot be used with"), "{stderr}");
}

/// Jobs as many ElasticJob users configure them: clock checks off (`maxTimeDiffSeconds` is
/// -1 by default) and `monitorExecution` off for frequent jobs. Held to what GUARANTEES.md
/// promises for those settings, under faults: found on such configs, a run of a fire that a
/// busy owner's misfire marker owed, by its new owner after a reshard, was caught up again
/// (fire.rs), and clock skew or overlaps across a reshard, which those settings do not guard
/// against, were reported as violations.
#[test]
fn elasticjob_default_settings_hold_their_promises_under_faults() {
    let yaml = "jobName: a\ncron: 0/2 * * * * ?\nshardingTotalCount: 3\nmonitorExecution: false\n\
                failover: false\nmisfire: true\n---\n\
                jobName: b\ncron: 0/4 * * * * ?\nshardingTotalCount: 5\nfailover: true\n\
                misfire: true\njobShardingStrategyType: ODEVITY\n\
                shardingItemParameters: 0=a,1=b,2=c\n";
    // The double run (failover and lease), and runs whose violations were the settings' own
    // (chaos: a clock off without checks; an overlap without running markers).
    // And a fire due again as a registration ended, which found its own run in flight (no
    // markers held without monitorExecution) and marked every item: its catch-up ran it again.
    use FaultProfile::{Chaos, Failover, Lease};
    let seeds = [
        (1_167_590_455, 3, Failover),
        (1_167_590_455, 3, Lease),
        (1_167_590_509, 3, Chaos),
        (1_167_590_131, 3, Chaos),
        (2_536_971_420, 1, Chaos),
    ];
    run_job_file(&specs_of(yaml), &seeds);
}

/// A cron whose fires are not evenly spaced: healthy may come just before its longest gap,
/// and the liveness window must wait for the fire after it (it read the gap between the next
/// two fires only, and every run of such a job failed liveness).
#[test]
fn a_cron_with_uneven_gaps_is_judged_by_its_longest() {
    let config = JobConfig::from_yaml(
        "jobName: gap\ncron: 0,1,3,30 * * * * ?\nshardingTotalCount: 2\nfailover: true\n",
    )
    .expect("valid YAML");
    let seeds: Vec<_> = (1_000..1_005).map(|seed| (seed, 2, FaultProfile::Failover)).collect();
    run_job_file(&[JobSpec::from(&config)], &seeds);
}

/// The job file the static-sharding seeds below were found with: a static job, a
/// `ROUND_ROBIN` one without misfire, one with item parameters and a short reconcile; with
/// `failover` on (true) or off in all three.
fn static_job_file(failover: bool) -> Vec<JobSpec> {
    let yaml = "jobName: st\ncron: 0/3 * * * * ?\nshardingTotalCount: 4\nfailover: true\n\
                misfire: true\nstaticSharding: true\nmaxTimeDiffSeconds: 5\n---\n\
                jobName: rr\ncron: 0/5 * * * * ?\nshardingTotalCount: 6\nfailover: true\n\
                misfire: false\njobShardingStrategyType: ROUND_ROBIN\nmaxTimeDiffSeconds: 5\n---\n\
                jobName: para\ncron: 0/4 * * * * ?\nshardingTotalCount: 3\n\
                shardingItemParameters: 0=x,1=y,2=z\njobParameter: p\nfailover: true\n\
                reconcileIntervalMinutes: 1\nmaxTimeDiffSeconds: 5\n";
    let yaml =
        if failover { yaml.to_owned() } else { yaml.replace("failover: true", "failover: false") };
    specs_of(&yaml)
}

/// Runs `seeds` of the static job file (see [`run_job_file`]).
fn run_static_job_file(failover: bool, seeds: &[(u64, usize, FaultProfile)]) -> Vec<String> {
    run_job_file(&static_job_file(failover), seeds)
}

/// The jobs of a job file.
fn specs_of(yaml: &str) -> Vec<JobSpec> {
    let builtin = ShardingStrategies::default();
    job_configs_from_yaml(yaml, &builtin).expect("valid jobs").iter().map(JobSpec::from).collect()
}

/// Runs `seeds` (seed, instances, profile) of `specs` for 120 s of faults; each must hold
/// every promise. Their traces.
fn run_job_file(specs: &[JobSpec], seeds: &[(u64, usize, FaultProfile)]) -> Vec<String> {
    let mut traces = Vec::new();
    for &(seed, instances, profile) in seeds {
        let report = Builder {
            seed,
            instances,
            specs: specs.to_vec(),
            duration: Duration::from_secs(120),
            profile,
            ..Builder::default()
        }
        .build()
        .run();
        let what = format!("seed {seed} at {instances} instances, {profile:?}");
        assert!(report.ok(), "{what}: {}", report.violations_text());
        traces.push(report.trace_text());
    }
    traces
}

/// A static job's owner node overwritten with the id of an instance that never was (an
/// operator's or a tool's write): static sharding waited for that "departed" owner to come
/// back, so the item never ran again and nothing was reported. An id no reshard gave the item
/// is garbage: reported, and the job resharded.
#[test]
fn a_static_job_reshards_an_owner_id_no_reshard_wrote() {
    use FaultProfile::Garbage;
    let seeds = [(3_424_951_518, 2, Garbage), (453_580_286, 2, Garbage), (534_674_893, 4, Garbage)];
    for trace in run_static_job_file(true, &seeds) {
        assert!(trace.contains("the owner is an instance no reshard gave the item"));
    }
}

/// A static job whose count changed while no instance ran it: nobody resharded for the
/// change, and static sharding kept the assignment of the old count to the end (an item
/// beyond the count owned, or one below it without an owner).
#[test]
fn a_static_job_reshards_an_assignment_of_another_count() {
    use FaultProfile::{Chaos, Failover};
    run_static_job_file(true, &[(170_878_543, 1, Chaos), (1_022_888_057, 1, Failover)]);
    run_static_job_file(false, &[(15_676_483, 1, Failover), (15_676_560, 1, Failover)]);
}

/// Found with failover off: an owner node emptied while a reshard was pending, its change
/// still queued behind the fire that made the reshard, was written over unreported.
#[test]
fn an_owner_emptied_under_a_reshard_is_reported_before_it_is_written_over() {
    let traces = run_static_job_file(false, &[(3_305_731_981, 2, FaultProfile::Garbage)]);
    assert!(traces[0].contains("the owner node of an item below the count is empty"));
}

/// Without failover a `running` marker is its holder's alone: garbage over it while the holder
/// was cut off, until its session ended and took the marker, was read by nobody (the checker
/// asked for a report nobody could make).
#[test]
fn a_marker_that_went_with_its_session_unread_needs_no_report() {
    use FaultProfile::Garbage;
    run_static_job_file(false, &[(1_054_040_436, 1, Garbage), (1_791_048_947, 5, Garbage)]);
}

/// A job that allows a clock 10 s off runs the fires of a clock 8 s ahead by that clock: a
/// fire run early ran again once the clock was set right after a graceful restart (the new
/// process had no memory of the run), or at its time on the item's next owner. Judged as a
/// job without clock checks is (GUARANTEES.md, "Configurations"), not as a violation.
#[test]
fn a_clock_off_within_what_the_checks_allow_is_judged_as_without_checks() {
    let yaml = "jobName: ny\ncron: 0/4 * * * * ?\nshardingTotalCount: 3\n\
                timeZone: America/New_York\nfailover: true\nmisfire: true\nmaxTimeDiffSeconds: 3\n\
                ---\njobName: uneven\ncron: 5,6,20,40-44 * * * * ?\nshardingTotalCount: 2\n\
                failover: true\nmisfire: true\n---\n\
                jobName: nomis\ncron: 0/6 * * * * ?\nshardingTotalCount: 4\nfailover: true\n\
                misfire: false\nmaxTimeDiffSeconds: 10\n";
    use FaultProfile::Chaos;
    let seeds = [(1_747_400_773, 1, Chaos), (2_866_137_901, 2, Chaos), (4_261_779_099, 3, Chaos)];
    run_job_file(&specs_of(yaml), &seeds);
}

/// A raise over a slow link moved past a fire ran that fire under the assignment before the
/// reshard, as every instance reads the moved flag; the checker read the flag as the fire
/// found it, and asked the reshard's owner for a fire of items whose old owner had crashed
/// (failover off: nothing catches a crashed owner's fires up).
#[test]
fn a_fire_a_moved_raise_let_by_answers_to_the_old_assignment() {
    let yaml = "jobName: m1\ncron: 0/2 * * * * ?\nshardingTotalCount: 2\nfailover: true\n\
                misfire: true\nmaxTimeDiffSeconds: 5\n---\n\
                jobName: m2\ncron: 0/3 * * * * ?\nshardingTotalCount: 7\nfailover: false\n\
                misfire: true\nmonitorExecution: false\n---\n\
                jobName: m3\ncron: 0/5 * * * * ?\nshardingTotalCount: 4\nfailover: true\n\
                misfire: false\nstaticSharding: true\nmaxTimeDiffSeconds: 5\n---\n\
                jobName: m4\ncron: 0/10 * * * * ?\nshardingTotalCount: 3\nfailover: true\n\
                misfire: true\njobShardingStrategyType: ODEVITY\nmaxTimeDiffSeconds: 5\n---\n\
                jobName: m5\ncron: 0/4 * * * * ?\nshardingTotalCount: 1\nfailover: false\n\
                misfire: false\n---\n\
                jobName: m6\ncron: 3/6 * * * * ?\nshardingTotalCount: 5\nfailover: true\n\
                misfire: true\njobShardingStrategyType: ROUND_ROBIN\nreconcileIntervalMinutes: 1\n\
                maxTimeDiffSeconds: 5\n";
    run_job_file(&specs_of(yaml), &[(2_451_795_458, 2, FaultProfile::Failover)]);
}

/// `overwrite: true`: a restart writes its own config over the stored one, an operator's
/// change included, and that is the cluster's config from then on (the checker went on holding
/// the cluster to the operator's); garbage it writes over is reported.
#[test]
fn a_job_with_overwrite_runs_the_config_its_restart_writes() {
    let yaml = "jobName: off\ncron: 0/4 * * * * ?\nshardingTotalCount: 3\ndisabled: true\n\
                failover: true\n---\n\
                jobName: ow\ncron: 0/5 * * * * ?\nshardingTotalCount: 6\noverwrite: true\n\
                failover: true\nmisfire: true\nmaxTimeDiffSeconds: 5\n---\n\
                jobName: tz\ncron: 0/3 * * * * ?\nshardingTotalCount: 4\n\
                timeZone: Pacific/Chatham\nfailover: true\nmisfire: false\nmaxTimeDiffSeconds: 2\n";
    use FaultProfile::{Chaos, Failover, Garbage};
    let seeds =
        [(3_303_219_729, 1, Chaos), (3_315_688_222, 1, Garbage), (2_779_147_608, 3, Failover)];
    run_job_file(&specs_of(yaml), &seeds);
}
