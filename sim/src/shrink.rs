//! Shrinking: delta debugging (Zeller's ddmin) over the steps of a failing schedule, down to a
//! 1-minimal one that still breaks the same invariant, printed as a scripted scenario.
//!
//! Every run is deterministic, so "still fails" is a plain function of the schedule. Removing a
//! step is always valid (fault verbs tolerate any state, and the quiet phase repairs whatever a
//! missing repair step left broken).

use std::fmt;

use crate::invariants::{Invariant, Violation};
use crate::scenarios::{Scenario, Step};
use crate::sim::Sim;
use crate::user::user_invariant_of;

/// At most this many runs per shrink.
const MAX_RUNS: usize = 400;

/// What shrinking found.
#[derive(Debug, Clone)]
pub struct Shrunk {
    pub seed: u64,
    /// The invariant the schedule keeps breaking; `None` if the original run passed.
    pub target: Option<Invariant>,
    /// For [`Invariant::User`]: which user invariant.
    pub user_invariant: Option<String>,
    pub first_violation: Option<String>,
    pub original_steps: usize,
    pub scenario: Scenario,
    pub runs: usize,
    /// The builder code of the minimal scenario.
    pub code: String,
}

/// Shrinks the schedule of `sim` (which should fail).
pub fn shrink(sim: &Sim) -> Shrunk {
    let original = sim.run();
    let mut runs = 1;
    let Some(first) = original.violations.first() else {
        return Shrunk {
            seed: sim.seed(),
            target: None,
            user_invariant: None,
            first_violation: None,
            original_steps: sim.scenario().steps.len(),
            scenario: sim.scenario().clone(),
            runs,
            code: String::new(),
        };
    };
    let target = first.invariant;
    let user_target = user_invariant_of(first).map(str::to_owned);
    let same =
        |v: &Violation| v.invariant == target && user_invariant_of(v) == user_target.as_deref();
    let mut last_violation = first.to_string();
    let mut fails = |steps: &[Step], runs: &mut usize| -> bool {
        *runs += 1;
        let scenario = Scenario { name: sim.scenario().name.clone(), steps: steps.to_vec() };
        let report = sim.with_scenario(scenario).run();
        match report.violations.iter().find(|v| same(v)) {
            Some(v) => {
                last_violation = v.to_string();
                true
            }
            None => false,
        }
    };
    let mut steps = sim.scenario().steps.clone();
    if !steps.is_empty() && fails(&[], &mut runs) {
        steps.clear();
    }
    let mut n = 2usize;
    while steps.len() >= 2 && runs < MAX_RUNS {
        let len = steps.len();
        let chunk = len.div_ceil(n);
        let mut reduced = false;
        for start in (0..len).step_by(chunk) {
            let candidate: Vec<Step> = steps
                .iter()
                .enumerate()
                .filter(|(k, _)| *k < start || *k >= start + chunk)
                .map(|(_, s)| s.clone())
                .collect();
            if fails(&candidate, &mut runs) {
                steps = candidate;
                n = (n - 1).max(2);
                reduced = true;
                break;
            }
            if runs >= MAX_RUNS {
                break;
            }
        }
        if !reduced {
            if n >= len {
                break;
            }
            n = (2 * n).min(len);
        }
    }
    if steps.len() == 1 && fails(&[], &mut runs) {
        steps.clear();
    }
    // Re-run the result so the reported violation is the minimal schedule's own.
    fails(&steps, &mut runs);
    let scenario = Scenario { name: format!("shrunk from seed {}", sim.seed()), steps };
    let code = sim.code(&scenario);
    Shrunk {
        seed: sim.seed(),
        target: Some(target),
        user_invariant: user_target,
        first_violation: Some(last_violation),
        original_steps: sim.scenario().steps.len(),
        scenario,
        runs,
        code,
    }
}

impl fmt::Display for Shrunk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(target) = self.target else {
            return writeln!(f, "seed {}: no violation, nothing to shrink", self.seed);
        };
        writeln!(
            f,
            "seed {}: {} step(s) shrunk to {} in {} runs; still violates {target}{}",
            self.seed,
            self.original_steps,
            self.scenario.steps.len(),
            self.runs,
            self.user_invariant.as_deref().map(|u| format!(" ({u})")).unwrap_or_default()
        )?;
        if let Some(v) = &self.first_violation {
            writeln!(f, "{v}")?;
        }
        writeln!(f, "// The minimal schedule as a scripted scenario:")?;
        writeln!(f, "{}", self.code)
    }
}
