//! Scenarios: a schedule of faults and workload changes at virtual times, scripted by a test or
//! generated from a seed, and the built-in scenarios of issue 6.
//!
//! ```
//! use shardcron_sim::{Fault, Scenario};
//! let s = Scenario::new("leader crash").at(12_000, Fault::Crash(1)).at(30_000, Fault::Restart(1));
//! assert_eq!(s.steps.len(), 2);
//! // A scenario prints as the Rust code that builds it (which is how `shrink` reports).
//! assert!(s.to_string().contains(".at(12_000, Fault::Crash(1))"));
//! ```

use std::fmt;
use std::time::Duration;

use crate::builder::Builder;
use crate::faults::{Fault, FaultProfile};
use crate::workload::{JobSpec, Workload};

/// One thing to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Fault(Fault),
    Work(Workload),
}

impl From<Fault> for Action {
    fn from(f: Fault) -> Self {
        Action::Fault(f)
    }
}

impl From<Workload> for Action {
    fn from(w: Workload) -> Self {
        Action::Work(w)
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Fault(x) => write!(f, "{x}"),
            Action::Work(x) => write!(f, "{x}"),
        }
    }
}

/// An action at a virtual time (milliseconds since the start of the run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub at_ms: u64,
    pub action: Action,
}

/// A schedule of steps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scenario {
    pub name: String,
    pub steps: Vec<Step>,
}

impl Scenario {
    pub fn new(name: impl Into<String>) -> Self {
        Scenario { name: name.into(), steps: Vec::new() }
    }

    /// Adds a step at `at_ms` (steps run in time order; equal times in the order added).
    pub fn at(mut self, at_ms: u64, action: impl Into<Action>) -> Self {
        self.steps.push(Step { at_ms, action: action.into() });
        self.steps.sort_by_key(|s| s.at_ms);
        self
    }
}

pub(crate) fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push('_');
        }
        out.push(c);
    }
    out
}

/// Prints the scenario as the Rust code of a scripted scenario.
impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Scenario::new({:?})", self.name)?;
        for step in &self.steps {
            write!(f, "\n    .at({}, {})", thousands(step.at_ms), step.action)?;
        }
        Ok(())
    }
}

/// The names of the built-in scenarios.
pub const BUILTIN: [&str; 12] = [
    "leader-crash",
    "crash-mid-run-failover-off",
    "crash-mid-run-failover-on",
    "crash-during-resharding",
    "rolling-restart",
    "partition-shorter-than-session",
    "partition-longer-than-session",
    "session-expiry-storm",
    "clock-skew-beyond-max-time-diff",
    "count-change-under-load",
    "whole-cluster-restart",
    "graceful-stop-and-join",
];

/// A built-in scenario as a ready builder (3 instances unless said otherwise, session timeout
/// 10 s, a fault phase of 60 s). `None` for an unknown name.
pub fn builtin(name: &str, seed: u64) -> Option<Builder> {
    let base = |specs: Vec<JobSpec>, scenario: Scenario| Builder {
        seed,
        instances: 3,
        specs,
        duration: Duration::from_secs(60),
        profile: FaultProfile::None,
        scenario: Some(scenario),
        ..Builder::default()
    };
    let every5 = |count| JobSpec::new("j0", "0/5 * * * * ?", count).item_ms(1_000);
    let long = |failover| JobSpec::new("j0", "0/10 * * * * ?", 6).item_ms(4_000).failover(failover);
    let s = Scenario::new(name);
    Some(match name {
        // i1 starts first and leads; it dies between fires and nobody restarts it until the
        // quiet phase.
        "leader-crash" => base(vec![every5(6)], s.at(12_000, Fault::Crash(1))),
        // The fire of 10 s runs 4 s; i2 dies in the middle of it.
        "crash-mid-run-failover-off" => {
            base(vec![long(false)], s.at(11_000, Fault::Crash(2)).at(35_000, Fault::Restart(2)))
        }
        "crash-mid-run-failover-on" => {
            base(vec![long(true)], s.at(11_000, Fault::Crash(2)).at(35_000, Fault::Restart(2)))
        }
        // A member leaves and the count changes (both ask for a reshard); the leader's registry
        // link is slow, and it dies while it reshards at the fire of 10 s.
        "crash-during-resharding" => base(
            vec![every5(6)],
            s.at(6_000, Fault::Stop(3))
                .at(7_000, Workload::SetCount { job: "j0".into(), count: 8 })
                .at(8_000, Fault::Slow(1, 400))
                .at(10_500, Fault::Crash(1))
                .at(30_000, Fault::Restart(1))
                .at(32_000, Fault::Restart(3)),
        ),
        "rolling-restart" => base(
            vec![every5(6), JobSpec::new("j1", "0/3 * * * * ?", 4).item_ms(500)],
            s.at(10_000, Fault::Restart(1))
                .at(20_000, Fault::Restart(2))
                .at(30_000, Fault::Restart(3)),
        ),
        "partition-shorter-than-session" => base(
            vec![every5(6)],
            s.at(11_000, Fault::Partition(vec![2])).at(16_000, Fault::Heal(vec![2])),
        ),
        "partition-longer-than-session" => base(
            vec![every5(6)],
            s.at(11_000, Fault::Partition(vec![2])).at(36_000, Fault::Heal(vec![2])),
        ),
        "session-expiry-storm" => {
            let mut s = s;
            for (k, t) in [10_200u64, 10_700, 13_000, 21_000].into_iter().enumerate() {
                for i in 1..=3 {
                    s = s.at(t + (k as u64 * 7 + i as u64) * 10, Fault::ExpireSession(i));
                }
            }
            base(vec![every5(6), JobSpec::new("j1", "0/2 * * * * ?", 3).item_ms(300)], s)
        }
        "clock-skew-beyond-max-time-diff" => base(
            vec![every5(6).max_time_diff_seconds(5)],
            s.at(10_500, Fault::SkewClock(2, 20_000))
                .at(20_500, Fault::SkewClock(3, -9_000))
                .at(40_500, Fault::SkewClock(2, 0))
                .at(40_500, Fault::SkewClock(3, 0)),
        ),
        "count-change-under-load" => base(
            vec![JobSpec::new("j0", "0/5 * * * * ?", 4).item_ms(3_000)],
            s.at(11_000, Workload::SetCount { job: "j0".into(), count: 8 })
                .at(23_000, Workload::SetCount { job: "j0".into(), count: 2 })
                .at(36_000, Workload::SetCount { job: "j0".into(), count: 6 }),
        ),
        "whole-cluster-restart" => base(
            vec![every5(6)],
            s.at(20_000, Fault::Crash(1))
                .at(20_000, Fault::Crash(2))
                .at(20_000, Fault::Crash(3))
                .at(25_000, Fault::Restart(1))
                .at(25_000, Fault::Restart(2))
                .at(25_000, Fault::Restart(3)),
        ),
        "graceful-stop-and-join" => base(
            vec![every5(6)],
            s.at(12_000, Fault::Stop(3))
                .at(27_000, Fault::Restart(3))
                .at(31_000, Workload::DisableServer { job: "j0".into(), instance: 1 })
                .at(46_000, Workload::EnableServer { job: "j0".into(), instance: 1 }),
        ),
        _ => return None,
    })
}
