//! Liveness: once things are healthy, every enabled item of every enabled job runs again.
//!
//! "Healthy" is the Live phase: faults stopped, links healed, every instance up again, and a
//! session timeout plus five seconds passed (so sessions of crashed processes are gone). The
//! Live phase lasts two fire periods (longest gaps) of the slowest job plus twice its item time (the
//! run an owner may have in flight, then one launch of the re-runs it claimed, which come before
//! its catch-ups: GUARANTEES.md, section 4); every item below
//! the count, not disabled, of a job not disabled, must start (any kind) within it, provided
//! some live instance may run the job (not every server disabled). Every instance must also
//! have finished starting or stopping by the Live checkpoint: an instance still in the middle
//! of a graceful stop then is a violation (the checks of invariants 3 and 4, which need settled
//! membership, are skipped for that run).

use std::collections::HashSet;

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
    let (Some(from), Some(to)) = (tl.phase(Phase::Live), tl.phase(Phase::Final)) else { return };
    for cp in checkpoints.iter().filter(|c| c.phase == Phase::Live) {
        for (who, status) in &cp.unsettled {
            out.push(Violation {
                invariant: Invariant::Liveness,
                at: cp.at,
                message: format!(
                    "i{who} is still {status:?} when the cluster should be healthy: a graceful \
                     stop or a start took longer than the quiet phase"
                ),
                context: context(entries, index_at(entries, cp.at), None),
            });
        }
    }
    let instances = tl.down.len();
    // The items that started in the window, read in one pass: a look through every entry per
    // item grew with jobs × items × entries.
    let started: HashSet<(&str, u32)> = entries
        .iter()
        .filter(|e| e.at >= from && e.at < to)
        .filter_map(|e| match &e.what {
            What::Event { event: SchedulerEvent::ItemStarted { job, item, .. }, .. } => {
                Some((job.as_str(), *item))
            }
            _ => None,
        })
        .collect();
    for job in tl.configs.keys().filter(|j| !tl.gone_at_end(j)) {
        let Some(state) = tl.config_at(job, from) else { continue };
        if state.disabled || state.cron.is_none() {
            continue;
        }
        if (1..=instances).all(|w| tl.server_disabled(job, w, from)) {
            continue;
        }
        let mut missing = Vec::new();
        for item in 0..state.count {
            if tl.item_disabled_now(job, item, from) {
                continue;
            }
            if !started.contains(&(job.as_str(), item)) {
                missing.push(item.to_string());
            }
        }
        if !missing.is_empty() {
            out.push(Violation {
                invariant: Invariant::Liveness,
                at: to,
                message: format!(
                    "{job}: item(s) {} did not run between {from} and {to}, although the cluster \
                     was healthy",
                    missing.join(", ")
                ),
                context: context(entries, index_at(entries, to), Some(job)),
            });
        }
    }
}
