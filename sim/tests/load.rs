//! The registry load a run reports (`Report::load`): what the server received from the
//! instances and sent them, sampled as each phase began.

use std::collections::BTreeSet;
use std::time::Duration;

use shardcron_core::runtime::SchedulerEvent;
use shardcron_sim::trace::{Phase, What};
use shardcron_sim::{Builder, FaultProfile, JobSpec};

fn steady_run(instances: usize) -> shardcron_sim::Report {
    let specs = (0..4)
        .map(|j| JobSpec::new(format!("j{j}"), "0/2 * * * * ?", 3).item_ms(100).failover(true))
        .collect();
    Builder {
        seed: 3,
        instances,
        specs,
        profile: FaultProfile::None,
        duration: Duration::from_secs(20),
        ..Builder::default()
    }
    .build()
    .run()
}

#[test]
fn every_phase_is_sampled_in_order_and_the_counts_only_grow() {
    let report = steady_run(3);
    assert!(report.ok(), "{}", report.violations_text());
    let phases: Vec<Phase> = report.load.iter().map(|s| s.phase).collect();
    assert_eq!(phases, [Phase::Faults, Phase::Quiet, Phase::Live, Phase::Final, Phase::End]);
    let faults = &report.load[0];
    assert_eq!((faults.clients, faults.operations, faults.events), (0, 0, 0), "nobody started yet");
    for pair in report.load[1..4].windows(2) {
        assert_eq!(pair[0].clients, 3);
        assert!(pair[0].at_ms < pair[1].at_ms);
        assert!(pair[0].operations < pair[1].operations, "the jobs fire: {pair:?}");
        assert!(pair[0].events < pair[1].events, "their own markers reach them: {pair:?}");
    }
    assert_eq!(steady_run(3).load, report.load, "the same seed, the same load");
}

#[test]
fn a_steady_instance_sends_two_transactions_per_tick_in_which_it_starts_items() {
    let report = steady_run(3);
    let at = |phase: Phase| report.load.iter().find(|s| s.phase == phase).copied();
    let (Some(from), Some(to)) = (at(Phase::Quiet), at(Phase::Final)) else {
        panic!("phases missing: {:?}", report.load)
    };
    let mut busy_ticks = BTreeSet::new();
    for entry in report.entries.iter().filter(|e| e.at >= from.at_ms && e.at < to.at_ms) {
        if let What::Event { event: SchedulerEvent::ItemStarted { fire_ms, .. }, .. } = &entry.what
        {
            busy_ticks.insert((entry.who, *fire_ms));
        }
    }
    // Four jobs of three items on three instances, all due together: each instance starts
    // its items of the four jobs in one transaction and ends them in one more.
    let per_tick = (to.operations - from.operations) as f64 / busy_ticks.len() as f64;
    assert!(busy_ticks.len() >= 20, "{} busy ticks", busy_ticks.len());
    assert!((1.8..=2.2).contains(&per_tick), "{per_tick} operations per busy tick");
}
