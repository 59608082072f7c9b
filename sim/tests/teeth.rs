//! Proof the checker has teeth: deliberately broken variants of the system, each of which the
//! checker must catch, on a scenario where the unbroken system passes.

use std::time::Duration;

use shardcron_sim::{Builder, FaultProfile, Invariant, JobSpec, Report, Variant};

fn run(variant: Option<Variant>) -> Report {
    Builder {
        seed: 3,
        instances: 3,
        specs: vec![
            JobSpec::new("j0", "0/5 * * * * ?", 6).item_ms(1_000),
            JobSpec::new("j1", "0/3 * * * * ?", 2).item_ms(300),
        ],
        duration: Duration::from_secs(30),
        profile: FaultProfile::None,
        variant,
        ..Builder::default()
    }
    .build()
    .run()
}

fn caught(variant: Variant, invariant: Invariant) {
    let report = run(Some(variant));
    assert!(
        report.violations.iter().any(|v| v.invariant == invariant),
        "{variant} should break {invariant}; the checker reported:\n{}",
        report.violations_text()
    );
    let first = report.violations.iter().find(|v| v.invariant == invariant);
    assert!(first.is_some_and(|v| !v.context.is_empty()), "a violation carries its context");
}

#[test]
fn the_unbroken_system_passes_the_same_scenario() {
    let report = run(None);
    assert!(report.ok(), "{}", report.violations_text());
}

#[test]
fn a_dropped_watch_event_is_caught() {
    caught(Variant::DropWatchEvent, Invariant::Fires);
}

#[test]
fn a_forgotten_item_is_caught() {
    caught(Variant::ForgetItem, Invariant::Fires);
}

#[test]
fn a_false_leader_is_caught() {
    caught(Variant::FalseLeader, Invariant::Leader);
}

#[test]
fn leaked_running_markers_are_caught() {
    caught(Variant::LeakRunningMarkers, Invariant::Leaks);
    caught(Variant::LeakRunningMarkers, Invariant::Liveness);
}

#[test]
fn a_stale_assignment_is_caught() {
    caught(Variant::StaleAssignment, Invariant::Assignment);
}

#[test]
fn a_greedy_owner_running_items_twice_at_once_is_caught() {
    caught(Variant::GreedyOwner, Invariant::Exclusive);
    caught(Variant::GreedyOwner, Invariant::Fires);
}
