//! Exploration, shrinking and the checker on hand-written traces.

use std::time::Duration;

use shardcron_core::runtime::{FireKind, SchedulerEvent, SkipReason};
use shardcron_sim::explore::{explore, ExploreOptions};
use shardcron_sim::trace::{Entry, Note, What};
use shardcron_sim::{
    shrink, Builder, Fault, FaultProfile, Invariant, JobSpec, Scenario, Variant, Workload,
};

#[test]
fn explore_runs_every_seed_and_summarises() {
    let options = ExploreOptions {
        profile: FaultProfile::None,
        duration: Duration::from_secs(20),
        ..ExploreOptions::default()
    };
    let summary = explore(&options, 100, 4, Some(2), false);
    assert_eq!(summary.seeds, 4);
    assert!(summary.virtual_ms > 4 * 20_000);
    assert!(summary.failing.is_empty(), "{summary}");
    let text = summary.to_string();
    assert!(text.contains("virtual s per wall s"), "{text}");
}

#[test]
fn shrinking_keeps_only_the_steps_that_matter() {
    // A planted bug that needs no fault at all, hidden in a noisy schedule: everything shrinks
    // away, and the result is printed as a scripted scenario.
    let noisy = Scenario::new("noisy")
        .at(3_000, Fault::Restart(2))
        .at(6_000, Fault::RestartRegistry)
        .at(8_000, Workload::Trigger { job: "j0".into() })
        .at(9_000, Fault::Slow(3, 200))
        .at(12_000, Fault::Slow(3, 0));
    let sim = Builder {
        seed: 9,
        specs: vec![JobSpec::new("j0", "0/5 * * * * ?", 4)],
        duration: Duration::from_secs(20),
        profile: FaultProfile::None,
        scenario: Some(noisy),
        variant: Some(Variant::LeakRunningMarkers),
        ..Builder::default()
    }
    .build();
    let shrunk = shrink::shrink(&sim);
    assert!(matches!(shrunk.target, Some(Invariant::Liveness | Invariant::Leaks)), "{shrunk}");
    assert!(shrunk.scenario.steps.is_empty(), "{shrunk}");
    let text = shrunk.to_string();
    assert!(text.contains("Scenario::new(") && text.contains("JobSpec::new(\"j0\""), "{text}");
}

#[test]
fn shrinking_a_passing_run_says_so() {
    let sim = Builder {
        seed: 1,
        duration: Duration::from_secs(15),
        profile: FaultProfile::None,
        ..Builder::default()
    }
    .build();
    let shrunk = shrink::shrink(&sim);
    assert_eq!(shrunk.target, None);
    assert!(shrunk.to_string().contains("nothing to shrink"));
}

fn event(at: i64, who: usize, event: SchedulerEvent, session: Option<u64>) -> Entry {
    Entry { at, who, what: What::Event { event, session, leader: None } }
}

fn start(at: i64, who: usize, session: u64) -> Entry {
    let e = SchedulerEvent::ItemStarted {
        job: "j".into(),
        item: 0,
        fire_ms: shardcron_sim::trace::EPOCH_MS + 1_000,
        kind: FireKind::Scheduled,
        token: 1,
    };
    event(at, who, e, Some(session))
}

#[test]
fn overlapping_runs_are_violations_unless_the_first_instance_was_killed() {
    let note = |at, who, note| Entry { at, who, what: What::Note(note) };
    let session = Duration::from_secs(10);
    let exclusive = |entries: &[Entry]| {
        shardcron_sim::invariants::check(entries, &[], session)
            .into_iter()
            .filter(|v| v.invariant == Invariant::Exclusive)
            .count()
    };
    // i1 runs the item in session 1; i2 starts it while session 1 is still valid.
    let overlap = [start(1_000, 1, 1), start(2_000, 2, 2)];
    assert_eq!(exclusive(&overlap), 1);
    // The same, but the registry ended session 1 first (i1 was cut off): its run had to end
    // before that (the local lease), so this is a violation too (GUARANTEES.md, section 1).
    let cut_off =
        [start(1_000, 1, 1), note(1_500, 1, Note::SessionEnded { session: 1 }), start(2_000, 2, 2)];
    assert_eq!(exclusive(&cut_off), 1);
    // i1 crashed: a killed process runs nothing.
    let crashed =
        [start(1_000, 1, 1), note(1_500, 1, Note::Crashed { tasks: 3 }), start(2_000, 2, 2)];
    assert_eq!(exclusive(&crashed), 0);
}

/// A small hand-written trace: two instances, job `j` of one item every 5 s, i1 owns it.
fn base_trace() -> Vec<Entry> {
    use shardcron_sim::trace::JobState;
    let note = |at, who, note| Entry { at, who, what: What::Note(note) };
    let state = JobState {
        job: "j".into(),
        cron: Some("0/5 * * * * ?".into()),
        time_zone: None,
        count: 1,
        failover: true,
        misfire: true,
        disabled: false,
        max_time_diff_seconds: -1,
        strategy: None,
        item_parameters: None,
        monitor_execution: true,
        static_sharding: false,
        item_ms: 1_000,
    };
    let sharded = SchedulerEvent::Sharded {
        job: "j".into(),
        assignment: vec![("10.0.0.1@-@1".into(), vec![0]), ("10.0.0.2@-@1".into(), vec![])],
    };
    vec![
        note(0, 0, Note::Begin { seed: 0, instances: 2, profile: "test".into(), fire_lead_ms: 0 }),
        note(0, 0, Note::Config(state)),
        note(0, 1, Note::SessionOpened { session: 1 }),
        note(0, 1, Note::Started),
        note(0, 2, Note::SessionOpened { session: 2 }),
        note(0, 2, Note::Started),
        Entry {
            at: 5_000,
            who: 1,
            what: What::Event {
                event: sharded,
                session: None,
                leader: Some("10.0.0.1@-@1".into()),
            },
        },
    ]
}

fn kind_start(at: i64, who: usize, session: u64, fire: i64, kind: FireKind) -> Entry {
    let e = SchedulerEvent::ItemStarted {
        job: "j".into(),
        item: 0,
        fire_ms: shardcron_sim::trace::EPOCH_MS + fire,
        kind,
        token: 1,
    };
    event(at, who, e, Some(session))
}

fn fires_violations(entries: &[Entry]) -> Vec<String> {
    shardcron_sim::invariants::check(entries, &[], Duration::from_secs(10))
        .into_iter()
        .filter(|v| v.invariant == Invariant::Fires)
        .map(|v| v.message)
        .collect()
}

#[test]
fn a_failover_of_an_interrupted_run_is_the_same_fire_running_once() {
    use shardcron_sim::trace::Phase;
    let note = |at, who, note| Entry { at, who, what: What::Note(note) };
    let mut t = base_trace();
    t.push(kind_start(5_000, 1, 1, 5_000, FireKind::Scheduled));
    t.push(note(5_500, 1, Note::Crashed { tasks: 2 }));
    t.push(kind_start(5_600, 2, 2, 5_000, FireKind::Failover));
    t.push(note(9_000, 0, Note::Phase(Phase::Final)));
    assert_eq!(fires_violations(&t), Vec::<String>::new());

    // Without the crash the failover start is a second run of the fire.
    let mut t = base_trace();
    t.push(kind_start(5_000, 1, 1, 5_000, FireKind::Scheduled));
    t.push(kind_start(5_600, 2, 2, 5_000, FireKind::Failover));
    t.push(note(9_000, 0, Note::Phase(Phase::Final)));
    let v = fires_violations(&t);
    assert!(v.iter().any(|m| m.contains("ran 2 times")), "{v:?}");

    // A crash with failover on and no re-execution is a violation.
    let mut t = base_trace();
    t.push(kind_start(5_000, 1, 1, 5_000, FireKind::Scheduled));
    t.push(note(5_500, 1, Note::Crashed { tasks: 2 }));
    t.push(note(9_000, 0, Note::Phase(Phase::Final)));
    let v = fires_violations(&t);
    assert!(v.iter().any(|m| m.contains("but it was not re-executed")), "{v:?}");

    // A fire nobody ran or skipped while its owner was up is a violation.
    let mut t = base_trace();
    t.push(note(12_000, 0, Note::Phase(Phase::Final)));
    let v = fires_violations(&t);
    assert!(v.iter().any(|m| m.contains("neither ran nor was recorded")), "{v:?}");
}

/// Two reshards in one millisecond, and a misfire recorded between them by the owner the
/// first gave the item to (3 × 2 `lease` 2,541,553,107): the skip speaks for the item, by the
/// order of the trace, and owes its catch-up like any misfire. The boundary of that reading
/// (GUARANTEES.md, section 2): the same trace without the catch-up is a lost fire.
#[test]
fn a_misfire_between_two_reshards_of_one_millisecond_owes_its_catch_up() {
    use shardcron_sim::trace::Phase;
    let note = |at, who, note| Entry { at, who, what: What::Note(note) };
    let sharded = |at: i64, owner_of_0: usize| {
        let (first, second) = if owner_of_0 == 1 { (vec![0], vec![]) } else { (vec![], vec![0]) };
        let assignment = vec![("10.0.0.1@-@1".into(), first), ("10.0.0.2@-@1".into(), second)];
        let event = SchedulerEvent::Sharded { job: "j".into(), assignment };
        Entry {
            at,
            who: 1,
            what: What::Event { event, session: None, leader: Some("10.0.0.1@-@1".into()) },
        }
    };
    let skip = |at: i64, who: usize, session: u64, fire: i64| {
        let e = SchedulerEvent::Skipped {
            job: "j".into(),
            fire_ms: shardcron_sim::trace::EPOCH_MS + fire,
            reason: SkipReason::Misfire,
        };
        event(at, who, e, Some(session))
    };
    let end = |at: i64, who: usize, session: u64, fire: i64| {
        let e = SchedulerEvent::ItemFinished {
            job: "j".into(),
            item: 0,
            fire_ms: shardcron_sim::trace::EPOCH_MS + fire,
            ok: true,
        };
        event(at, who, e, Some(session))
    };
    let trace = |catch_up: bool| {
        let mut t = base_trace();
        t.push(kind_start(5_000, 1, 1, 5_000, FireKind::Scheduled));
        t.push(sharded(10_000, 2));
        t.push(skip(10_000, 2, 2, 10_000));
        t.push(sharded(10_000, 1));
        t.push(end(11_000, 1, 1, 5_000));
        t.push(kind_start(11_000, 1, 1, 10_000, FireKind::Misfire));
        if !catch_up {
            t.pop();
        }
        t.push(note(14_000, 0, Note::Phase(Phase::Final)));
        t
    };
    assert_eq!(fires_violations(&trace(true)), Vec::<String>::new());
    let v = fires_violations(&trace(false));
    assert!(v.iter().any(|m| m.contains("neither ran nor was recorded")), "{v:?}");
}
