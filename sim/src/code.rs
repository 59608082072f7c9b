//! The code a simulated job runs: the simulator's default (each item sleeps a fixed time), a
//! user-supplied duration model, or the user's own job.
//!
//! Everything runs in virtual time on the simulation's single thread, so user code must be
//! deterministic: sleep with `tokio::time`, draw randomness from the seed (or from the item and
//! fire), and keep state in the run's [`RunState`] rather than in statics, so that every run
//! (and every replay of it, and every run a shrink tries) starts from nothing.

use std::any::{Any, TypeId};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use shardcron_core::job::{Job, ShardingContext};

/// State shared by everything of one run: the job code of every instance and the user
/// invariants that check the run. A value of each type is made (with `Default`) the first time
/// it is asked for; a new run starts with none.
///
/// ```
/// # use shardcron_sim::RunState;
/// #[derive(Default)]
/// struct Ledger(parking_lot::Mutex<Vec<u32>>);
/// let state = RunState::default();
/// state.get::<Ledger>().0.lock().push(3);
/// assert_eq!(*state.get::<Ledger>().0.lock(), vec![3]);
/// ```
#[derive(Clone, Default)]
pub struct RunState {
    values: Arc<Mutex<BTreeMap<TypeId, Arc<dyn Any + Send + Sync>>>>,
}

impl RunState {
    /// The run's value of type `T` (made with `T::default()` on first use).
    pub fn get<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        let mut values = self.values.lock();
        let value = values
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Arc::new(T::default()) as Arc<dyn Any + Send + Sync>)
            .clone();
        drop(values);
        match value.downcast::<T>() {
            Ok(v) => v,
            // Unreachable: the map is keyed by the value's own type id.
            Err(_) => Arc::new(T::default()),
        }
    }

    /// The run's value of type `T`, if anything made one.
    pub fn existing<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        let value = self.values.lock().get(&TypeId::of::<T>())?.clone();
        value.downcast::<T>().ok()
    }
}

impl fmt::Debug for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunState").field("values", &self.values.lock().len()).finish()
    }
}

/// Where a job's code runs: which instance of which run.
#[derive(Debug, Clone)]
pub struct JobEnv {
    /// The instance (1-based, as in the trace: `i1`, `i2`, ...).
    pub instance: usize,
    /// The run's seed.
    pub seed: u64,
    /// The run's shared state.
    pub state: RunState,
}

type MakeJob = dyn Fn(&JobEnv) -> Job + Send + Sync;
type ItemDuration = dyn Fn(&ShardingContext) -> Duration + Send + Sync;

/// What a simulated job runs. Compared by identity: two specs are equal only if they share the
/// same code.
#[derive(Clone)]
pub struct JobCode(CodeKind);

#[derive(Clone)]
enum CodeKind {
    /// Each item sleeps as long as the model says (or until cancelled).
    Durations(Arc<ItemDuration>),
    /// The user's job, made once per instance start.
    Job(Arc<MakeJob>),
}

impl JobCode {
    /// The user's job, made for each instance each time it starts. `make` gets the instance
    /// and the run's [`RunState`] (a ledger, a fake database...).
    pub fn new(make: impl Fn(&JobEnv) -> Job + Send + Sync + 'static) -> Self {
        JobCode(CodeKind::Job(Arc::new(make)))
    }

    /// A job that does no real work: each item sleeps (in virtual time) for as long as
    /// `duration` says for its context (item, parameter, fire time...), stopping early when the
    /// runtime cancels it, as a well-behaved job does.
    pub fn durations(
        duration: impl Fn(&ShardingContext) -> Duration + Send + Sync + 'static,
    ) -> Self {
        JobCode(CodeKind::Durations(Arc::new(duration)))
    }

    /// The job instance `env` runs.
    pub(crate) fn job(&self, env: &JobEnv) -> Job {
        match &self.0 {
            CodeKind::Job(make) => make(env),
            CodeKind::Durations(model) => {
                let model = model.clone();
                Job::from_fn(move |ctx| {
                    let wait = model(&ctx);
                    sleeping(ctx, wait)
                })
            }
        }
    }

    /// How the code prints in a spec's Rust expression.
    pub(crate) fn describe(&self) -> &'static str {
        match &self.0 {
            CodeKind::Job(_) => ".code(/* your job */)",
            CodeKind::Durations(_) => ".code(/* your duration model */)",
        }
    }
}

/// The simulator's default item: sleeps `item` of virtual time, or until cancelled.
pub(crate) fn sleeping_job(item: Duration) -> Job {
    Job::from_fn(move |ctx| sleeping(ctx, item))
}

async fn sleeping(ctx: ShardingContext, item: Duration) -> shardcron_core::job::JobResult {
    tokio::select! {
        biased;
        () = ctx.cancellation.cancelled() => {}
        () = tokio::time::sleep(item) => {}
    }
    Ok(())
}

impl PartialEq for JobCode {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (CodeKind::Job(a), CodeKind::Job(b)) => Arc::ptr_eq(a, b),
            (CodeKind::Durations(a), CodeKind::Durations(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for JobCode {}

impl fmt::Debug for JobCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            CodeKind::Job(_) => f.write_str("JobCode::Job"),
            CodeKind::Durations(_) => f.write_str("JobCode::Durations"),
        }
    }
}
