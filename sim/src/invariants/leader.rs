//! Invariant 3: at most one leader at a time, and sharding flags never stay set once a live
//! leader exists.
//!
//! Leadership is the leader node; what matters is who *acts* as leader. The trace records, for
//! every `leader` claim and every committed assignment (`sharded`), who held the leader node at
//! that moment: the claimant must be the holder. At the Live checkpoint (membership stable for
//! a session timeout, then at least one fire), a job whose leader node names an instance that is
//! up must have neither `necessary` nor `processing` set.

use shardcron_core::runtime::SchedulerEvent;

use super::timeline::Timeline;
use super::{context, index_at, Checkpoint, Invariant, Violation};
use crate::trace::{Entry, Phase, What};

pub(super) fn check(
    entries: &[Entry],
    tl: &Timeline,
    checkpoints: &[Checkpoint],
    out: &mut Vec<Violation>,
) {
    for (idx, e) in entries.iter().enumerate() {
        let What::Event { event, leader, .. } = &e.what else { continue };
        let (job, act) = match event {
            SchedulerEvent::LeaderElected { job } => (job, "claimed leadership"),
            SchedulerEvent::Sharded { job, .. } => (job, "committed an assignment"),
            _ => continue,
        };
        let me = format!("{}@-@1", crate::workload::ip_of(e.who));
        if leader.as_deref() != Some(me.as_str()) {
            out.push(Violation {
                invariant: Invariant::Leader,
                at: e.at,
                message: format!(
                    "i{} {act} for {job} while the leader node named {}",
                    e.who,
                    leader.as_deref().unwrap_or("nobody")
                ),
                context: context(entries, idx, Some(job)),
            });
        }
    }
    let Some(cp) = checkpoints.iter().find(|c| c.phase == Phase::Live) else { return };
    if !cp.unsettled.is_empty() {
        // Membership is still changing (liveness reports why): flags may legitimately be set.
        return;
    }
    let live_from = tl.phase(Phase::Live).unwrap_or(0);
    for job in tl.configs.keys().filter(|j| !tl.gone_at_end(j)) {
        let Some(holder) = cp.text(&format!("/{job}/leader/election/instance")) else { continue };
        // A disabled job skips its fires before sharding: its flags stay set, rightly.
        if tl.config_at(job, cp.at).is_some_and(|state| state.disabled) {
            continue;
        }
        if !cp.up.iter().any(|(_, id)| id == holder) {
            continue;
        }
        // Flags are cleared lazily, at a fire: only judge jobs that fired since things settled.
        let fired = entries.iter().any(|e| {
            e.at >= live_from
                && matches!(&e.what, What::Event { event: SchedulerEvent::Skipped { job: j, .. }
                    | SchedulerEvent::ItemStarted { job: j, .. }, .. } if j == job)
        });
        if !fired {
            continue;
        }
        let set: Vec<&str> = ["necessary", "processing"]
            .into_iter()
            .filter(|f| cp.nodes.contains_key(&format!("/{job}/leader/sharding/{f}")))
            .collect();
        if !set.is_empty() {
            out.push(Violation {
                invariant: Invariant::Leader,
                at: cp.at,
                message: format!(
                    "{job}: sharding flag(s) {} still set although {holder} leads and the job \
                     fired since the cluster settled",
                    set.join(", ")
                ),
                context: context(entries, index_at(entries, cp.at), Some(job)),
            });
        }
    }
}
