//! User invariants: the user's own properties of a run ("item 3 never ran twice for one fire",
//! "my ledger ends consistent with the fencing tokens"), checked on the run's trace and state
//! after the built-in ones. Their violations are [`Violation`]s of [`Invariant::User`], so they
//! fail a run, replay and shrink like the built-in ones.
//!
//! ```
//! use shardcron_sim::{Finding, UserInvariant};
//! // No item of `billing` runs twice for one fire.
//! let once = UserInvariant::new("billing-once-per-fire", |run| {
//!     let mut seen = std::collections::BTreeSet::new();
//!     run.runs()
//!         .into_iter()
//!         .filter(|r| r.job == "billing" && r.ok())
//!         .filter(|r| !seen.insert((r.item, r.fire_ms)))
//!         .map(|r| Finding::about(&r, "completed a second time"))
//!         .collect()
//! });
//! assert_eq!(once.name(), "billing-once-per-fire");
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use shardcron_core::runtime::{FireKind, SchedulerEvent};

use crate::code::RunState;
use crate::faults::Fault;
use crate::invariants::{context, index_at, Invariant, Violation};
use crate::trace::{rel, Entry, Note, What};

/// One run of one item, read from the trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemRun {
    pub job: String,
    pub item: u32,
    /// The fire it belongs to, in epoch milliseconds (`ShardingContext::fire_time_ms`).
    pub fire_ms: i64,
    pub kind: FireKind,
    /// The fencing token the run held (`ShardingContext::fencing_token`).
    pub token: u64,
    /// The instance that ran it (1-based).
    pub instance: usize,
    /// When its code started, in the trace's milliseconds since the start of the run: when it
    /// was marked running, or, for a fire its scheduler took ahead (`Settings::fire_lead`),
    /// when its instance's clock reached the fire.
    pub started_at: i64,
    /// When it ended and whether it succeeded; `None` if it never reported an end (its
    /// instance crashed, or the run ended first).
    pub ended: Option<(i64, bool)>,
}

impl ItemRun {
    /// It ended and succeeded.
    pub fn ok(&self) -> bool {
        matches!(self.ended, Some((_, true)))
    }
}

/// What a user invariant sees of a run.
#[derive(Debug, Clone, Copy)]
pub struct RunView<'a> {
    pub seed: u64,
    /// Every trace entry, in order.
    pub entries: &'a [Entry],
    state: &'a RunState,
}

impl<'a> RunView<'a> {
    pub(crate) fn new(seed: u64, entries: &'a [Entry], state: &'a RunState) -> Self {
        RunView { seed, entries, state }
    }

    /// Every item run, in the order they started.
    pub fn runs(&self) -> Vec<ItemRun> {
        let mut runs: Vec<ItemRun> = Vec::new();
        // The runs still going, by (instance, job, item, fire), to match their ends.
        let mut open: BTreeMap<(usize, String, u32, i64), usize> = BTreeMap::new();
        // The fire lead of the run, and how far each instance's clock is off the registry's.
        let mut lead_ms = 0;
        let mut skew: BTreeMap<usize, i64> = BTreeMap::new();
        for e in self.entries {
            let event = match &e.what {
                What::Event { event, .. } => event,
                What::Note(Note::Begin { fire_lead_ms, .. }) => {
                    lead_ms = *fire_lead_ms;
                    continue;
                }
                What::Note(Note::Fault(Fault::SkewClock(who, ms))) => {
                    skew.insert(*who, *ms);
                    continue;
                }
                What::Note(_) => continue,
            };
            match event {
                SchedulerEvent::ItemStarted { job, item, fire_ms, kind, token } => {
                    open.insert((e.who, job.clone(), *item, *fire_ms), runs.len());
                    // Taken ahead, it waited until its instance's clock read the fire.
                    let gated = lead_ms > 0 && *kind != FireKind::Manual;
                    let at_fire = rel(*fire_ms) - skew.get(&e.who).copied().unwrap_or(0);
                    let started_at = if gated { e.at.max(at_fire) } else { e.at };
                    runs.push(ItemRun {
                        job: job.clone(),
                        item: *item,
                        fire_ms: *fire_ms,
                        kind: *kind,
                        token: *token,
                        instance: e.who,
                        started_at,
                        ended: None,
                    });
                }
                SchedulerEvent::ItemFinished { job, item, fire_ms, ok } => {
                    let key = (e.who, job.clone(), *item, *fire_ms);
                    if let Some(k) = open.remove(&key) {
                        runs[k].ended = Some((e.at, *ok));
                    }
                }
                _ => {}
            }
        }
        runs
    }

    /// The run's value of type `T`, if its job code made one (see [`RunState`]).
    pub fn state<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        self.state.existing::<T>()
    }
}

/// One thing a user invariant found wrong, in the user's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub job: String,
    pub item: Option<u32>,
    /// The fire, in epoch milliseconds.
    pub fire_ms: Option<i64>,
    pub instance: Option<usize>,
    /// When it went wrong (trace milliseconds); default: when the item's fire started, else
    /// the end of the run.
    pub at: Option<i64>,
    pub message: String,
}

impl Finding {
    /// Something wrong with `job` as a whole.
    pub fn new(job: impl Into<String>, message: impl Into<String>) -> Self {
        Finding {
            job: job.into(),
            item: None,
            fire_ms: None,
            instance: None,
            at: None,
            message: message.into(),
        }
    }

    /// Something wrong with one item run (its job, item, fire, instance and start).
    pub fn about(run: &ItemRun, message: impl Into<String>) -> Self {
        Finding {
            item: Some(run.item),
            fire_ms: Some(run.fire_ms),
            instance: Some(run.instance),
            at: Some(run.started_at),
            ..Finding::new(run.job.clone(), message)
        }
    }

    pub fn item(mut self, item: u32) -> Self {
        self.item = Some(item);
        self
    }

    /// The fire, in epoch milliseconds.
    pub fn fire(mut self, fire_ms: i64) -> Self {
        self.fire_ms = Some(fire_ms);
        self
    }

    pub fn instance(mut self, instance: usize) -> Self {
        self.instance = Some(instance);
        self
    }

    /// When it went wrong, in trace milliseconds.
    pub fn at(mut self, at: i64) -> Self {
        self.at = Some(at);
        self
    }
}

/// Says what went wrong the way the trace does: `billing#3 fire=+15000 (2023-11-14 22:13:35
/// UTC) on i2: message`.
impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.job)?;
        if let Some(item) = self.item {
            write!(f, "#{item}")?;
        }
        if let Some(fire) = self.fire_ms {
            write!(f, " fire=+{}", rel(fire))?;
            if let Some(t) = chrono::DateTime::from_timestamp_millis(fire) {
                write!(f, " ({})", t.format("%Y-%m-%d %H:%M:%S%.3f UTC"))?;
            }
        }
        if let Some(i) = self.instance {
            write!(f, " on i{i}")?;
        }
        write!(f, ": {}", self.message)
    }
}

type Check = dyn Fn(&RunView<'_>) -> Vec<Finding> + Send + Sync;

/// A named property of a run, checked by a function of the [`RunView`]: it returns what it
/// found wrong (nothing: the property holds).
#[derive(Clone)]
pub struct UserInvariant {
    name: String,
    check: Arc<Check>,
}

impl UserInvariant {
    pub fn new(
        name: impl Into<String>,
        check: impl Fn(&RunView<'_>) -> Vec<Finding> + Send + Sync + 'static,
    ) -> Self {
        UserInvariant { name: name.into(), check: Arc::new(check) }
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Debug for UserInvariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UserInvariant").field("name", &self.name).finish()
    }
}

/// The user invariant a violation of [`Invariant::User`] breaks (its message starts with it).
pub fn user_invariant_of(v: &Violation) -> Option<&str> {
    (v.invariant == Invariant::User).then(|| v.message.split(": ").next().unwrap_or(""))
}

/// Runs every user invariant on the run; their findings as violations.
pub(crate) fn check(invariants: &[UserInvariant], view: &RunView<'_>) -> Vec<Violation> {
    let mut out = Vec::new();
    for inv in invariants {
        for finding in (inv.check)(view) {
            let at = finding.at.unwrap_or_else(|| started(view.entries, &finding));
            let idx = index_at(view.entries, at);
            out.push(Violation {
                invariant: Invariant::User,
                at,
                message: format!("{}: {finding}", inv.name),
                context: context(view.entries, idx, Some(&finding.job)),
            });
        }
    }
    out
}

/// When the finding's item (or fire, or job) first started; the end of the run if never.
fn started(entries: &[Entry], finding: &Finding) -> i64 {
    let first = entries.iter().find(|e| match &e.what {
        What::Event { event: SchedulerEvent::ItemStarted { job, item, fire_ms, .. }, .. } => {
            *job == finding.job
                && finding.item.is_none_or(|i| i == *item)
                && finding.fire_ms.is_none_or(|f| f == *fire_ms)
        }
        _ => false,
    });
    first.or(entries.last()).map_or(0, |e| e.at)
}
