//! Invariant 1: an item never runs on two instances at once (GUARANTEES.md, section 1).
//!
//! A run is open from its `start` to its `end` on the same instance, or until the instance
//! crashes (a killed process runs nothing). When an item starts, no other run of the same item
//! may be open: not even one whose session the registry has ended, since a cut-off instance
//! stops its items when its local lease runs out, before the server can end its session. The
//! same instance starting an item again before its previous run of it ended is a violation
//! too.
//!
//! Only for a job with `monitorExecution` on: the `running` markers are what fence a start
//! against another run of the item; with it off nothing marks a run, and an item moved by a
//! reshard may start on its new owner while its old owner still runs it, as in ElasticJob
//! (GUARANTEES.md, section 1).

use std::collections::{BTreeMap, BTreeSet};

use shardcron_core::runtime::SchedulerEvent;

use super::timeline::Timeline;
use super::{context, Invariant, Violation};
use crate::trace::{Entry, Note, What};

struct Run {
    who: usize,
    session: Option<u64>,
    at: i64,
    fire_ms: i64,
}

pub(super) fn check(entries: &[Entry], tl: &Timeline, out: &mut Vec<Violation>) {
    let mut open: BTreeMap<(String, u32), Vec<Run>> = BTreeMap::new();
    let mut ended: BTreeSet<(usize, u64)> = BTreeSet::new();
    for (idx, e) in entries.iter().enumerate() {
        match &e.what {
            What::Note(Note::SessionEnded { session }) => {
                ended.insert((e.who, *session));
            }
            What::Note(Note::Crashed { .. }) => {
                for runs in open.values_mut() {
                    runs.retain(|r| r.who != e.who);
                }
            }
            What::Event {
                event: SchedulerEvent::ItemStarted { job, item, fire_ms, .. },
                session,
                ..
            } => {
                if tl.config_at(job, e.at).is_some_and(|c| !c.monitor_execution) {
                    continue;
                }
                let runs = open.entry((job.clone(), *item)).or_default();
                let live =
                    |who: usize, s: Option<u64>| s.is_none_or(|s| !ended.contains(&(who, s)));
                // The first open run is enough to report.
                if let Some(r) = runs.first() {
                    let message = if r.who == e.who {
                        format!(
                            "{job}#{item} started on i{} (fire +{}) while its run of fire +{} \
                             started there at {} had not ended",
                            e.who,
                            fire_ms - crate::trace::EPOCH_MS,
                            r.fire_ms - crate::trace::EPOCH_MS,
                            r.at
                        )
                    } else {
                        let valid = if live(r.who, r.session) && live(e.who, *session) {
                            "both sessions valid"
                        } else {
                            "the first one's session ended, but its run had not"
                        };
                        format!(
                            "{job}#{item} started on i{} (session {}) while it ran on i{} \
                             (session {}, started at {}), {valid}",
                            e.who,
                            session.map_or("-".into(), |s| s.to_string()),
                            r.who,
                            r.session.map_or("-".into(), |s| s.to_string()),
                            r.at
                        )
                    };
                    out.push(Violation {
                        invariant: Invariant::Exclusive,
                        at: e.at,
                        message,
                        context: context(entries, idx, Some(job)),
                    });
                }
                runs.push(Run { who: e.who, session: *session, at: e.at, fire_ms: *fire_ms });
            }
            What::Event { event: SchedulerEvent::ItemFinished { job, item, .. }, .. } => {
                if let Some(runs) = open.get_mut(&(job.clone(), *item)) {
                    if let Some(k) = runs.iter().position(|r| r.who == e.who) {
                        runs.remove(k);
                    }
                }
            }
            _ => {}
        }
    }
}
