//! Exploration, shrinking and the checker on hand-written traces.

use std::time::Duration;

use shardcron_core::runtime::{FireKind, SchedulerEvent};
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
fn overlapping_runs_count_only_while_both_sessions_are_valid() {
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
    // The same, but the registry ended session 1 first (i1 was cut off): fenced, allowed.
    let fenced =
        [start(1_000, 1, 1), note(1_500, 1, Note::SessionEnded { session: 1 }), start(2_000, 2, 2)];
    assert_eq!(exclusive(&fenced), 0);
    // i1 crashed: a killed process runs nothing.
    let crashed =
        [start(1_000, 1, 1), note(1_500, 1, Note::Crashed { tasks: 3 }), start(2_000, 2, 2)];
    assert_eq!(exclusive(&crashed), 0);
}
