//! [`Builder`]: what a simulation runs (instances, jobs, duration, faults) and from which seed.

use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use shardcron_core::runtime::Settings;

use crate::faults::{FaultProfile, GenContext};
use crate::scenarios::Scenario;
use crate::sim::Sim;
use crate::user::UserInvariant;
use crate::variants::Variant;
use crate::workload::JobSpec;

/// Configures a simulation. Every field has a default; set the ones you care about:
///
/// ```
/// # use shardcron_sim::{Builder, FaultProfile};
/// let sim = Builder { seed: 7, instances: 3, jobs: 2, profile: FaultProfile::None, ..Builder::default() }
///     .build();
/// assert_eq!(sim.specs().len(), 2);
/// ```
#[derive(Debug, Clone)]
pub struct Builder {
    /// Everything random in the run derives from it: jobs, schedule, the schedulers' randomness.
    pub seed: u64,
    /// How many instances run (ids `10.0.0.{i}@-@1`, i from 1).
    pub instances: usize,
    /// How many jobs to generate from the seed (ignored when `specs` is given).
    pub jobs: usize,
    /// Explicit jobs instead of generated ones.
    pub specs: Vec<JobSpec>,
    /// How long the fault phase lasts (virtual time). The quiet, liveness and final phases
    /// follow it.
    pub duration: Duration,
    /// Which faults a generated schedule contains (ignored when `scenario` is given).
    pub profile: FaultProfile,
    /// A scripted schedule instead of a generated one.
    pub scenario: Option<Scenario>,
    /// The registry session timeout of every instance.
    pub session_timeout: Duration,
    /// The schedulers' settings.
    pub settings: Settings,
    /// A deliberately broken variant of the system (to prove the checker catches it).
    pub variant: Option<Variant>,
    /// The user's own invariants, checked after the built-in ones.
    pub checks: Vec<UserInvariant>,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            seed: 0,
            instances: 3,
            jobs: 2,
            specs: Vec::new(),
            duration: Duration::from_secs(120),
            profile: FaultProfile::Default,
            scenario: None,
            session_timeout: Duration::from_secs(10),
            settings: Settings::default(),
            variant: None,
            checks: Vec::new(),
        }
    }
}

impl Builder {
    /// Draws the jobs and the schedule from the seed (unless given) and returns the simulation.
    pub fn build(self) -> Sim {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let specs = if self.specs.is_empty() {
            let session_ms = u64::try_from(self.session_timeout.as_millis()).unwrap_or(10_000);
            (0..self.jobs).map(|j| generate_job(&mut rng, j, self.profile, session_ms)).collect()
        } else {
            self.specs.clone()
        };
        let duration_ms = u64::try_from(self.duration.as_millis()).unwrap_or(u64::MAX);
        let session_timeout_ms = u64::try_from(self.session_timeout.as_millis()).unwrap_or(10_000);
        let scenario = match self.scenario.clone() {
            Some(s) => s,
            None => {
                let ctx = GenContext {
                    instances: self.instances,
                    jobs: &specs,
                    duration_ms,
                    session_timeout_ms,
                };
                Scenario {
                    name: format!("seed {} profile {}", self.seed, self.profile),
                    steps: self.profile.generate(&mut rng, &ctx),
                }
            }
        };
        Sim::new(self, specs, scenario)
    }
}

/// A job drawn from the seed: a cron every 2 to 10 seconds, 1 to 8 items of 100 ms to 3 s
/// (with the `lease` profile, of one to two and a half session timeouts).
fn generate_job(rng: &mut ChaCha8Rng, j: usize, profile: FaultProfile, session_ms: u64) -> JobSpec {
    let secs = [2, 3, 4, 5, 5, 6, 10][rng.gen_range(0..7)];
    let count = rng.gen_range(1..=8);
    let item_ms = [100, 300, 500, 1_000, 1_500, 3_000][rng.gen_range(0..6)];
    let item_ms = match profile {
        FaultProfile::Lease => session_ms * [2, 3, 4, 5][rng.gen_range(0..4)] / 2,
        _ => item_ms,
    };
    let mut spec = JobSpec::new(format!("j{j}"), format!("0/{secs} * * * * ?"), count)
        .item_ms(item_ms)
        .failover(profile.failover_jobs());
    if profile == FaultProfile::Chaos {
        spec = spec.max_time_diff_seconds(5);
    }
    spec
}
