//! Same scenario and seed, same trace, byte for byte (`docs/architecture.md`, determinism).

use std::time::Duration;

use shardcron_sim::{Builder, FaultProfile};

fn sim(seed: u64, profile: FaultProfile) -> shardcron_sim::Sim {
    Builder { seed, duration: Duration::from_secs(60), profile, ..Builder::default() }.build()
}

#[test]
fn the_same_seed_gives_the_same_trace() {
    for (seed, profile) in
        [(1, FaultProfile::Default), (2, FaultProfile::Chaos), (3, FaultProfile::Failover)]
    {
        let s = sim(seed, profile);
        let (a, b) = (s.run(), s.run());
        assert!(a.entries.len() > 50, "seed {seed}: the run did something");
        assert_eq!(a.trace_text(), b.trace_text(), "seed {seed} {profile} is not deterministic");
        assert_eq!(a.violations, b.violations);
    }
}

#[test]
fn different_seeds_give_different_runs() {
    let (a, b) = (sim(10, FaultProfile::Default).run(), sim(11, FaultProfile::Default).run());
    assert_ne!(a.trace_text(), b.trace_text());
}

#[test]
fn the_schedule_is_drawn_from_the_seed() {
    let a = sim(5, FaultProfile::Chaos);
    let b = sim(5, FaultProfile::Chaos);
    assert_eq!(a.scenario(), b.scenario());
    assert_eq!(a.specs(), b.specs());
    assert!(!a.scenario().steps.is_empty());
    assert!(sim(5, FaultProfile::None).scenario().steps.is_empty());
}

/// Several jobs firing at the same instant make several runners of one instance wait on its
/// cache at once. The core's `SharedCache` wakes them through `tokio::sync::watch`, whose
/// receivers park on one of eight `Notify`s picked by tokio's per-process random generator,
/// so their wake order (and the trace) changes from process to process.
#[test]
fn simultaneous_fires_of_several_jobs_are_deterministic() {
    use shardcron_sim::JobSpec;
    for seed in 1000..1010 {
        let s = Builder {
            seed,
            specs: (0..3).map(|j| JobSpec::new(format!("j{j}"), "0/5 * * * * ?", 6)).collect(),
            duration: Duration::from_secs(60),
            profile: FaultProfile::Default,
            ..Builder::default()
        }
        .build();
        assert_eq!(s.run().trace_text(), s.run().trace_text(), "seed {seed}");
    }
}
