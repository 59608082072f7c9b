//! Invariant 4: after membership stops changing, the assignment is what the strategy computes
//! for the live enabled instances, and every item has exactly one owner.
//!
//! Judged at the Live checkpoint: membership has been stable since the quiet phase began (a
//! session timeout and more), and every job fired since. The live instances are those up; each
//! must be registered under `instances/` and nothing else may be. The eligible ones are those
//! whose server is not disabled, in ElasticJob's order; the strategy is the job's.

use std::collections::BTreeMap;

use shardcron_core::sharding::{sort_for_sharding, ShardingStrategies};

use super::timeline::Timeline;
use super::{context, index_at, Checkpoint, Invariant, Violation};
use crate::trace::{Entry, Phase};

pub(super) fn check(
    entries: &[Entry],
    tl: &Timeline,
    checkpoints: &[Checkpoint],
    strategies: &ShardingStrategies,
    out: &mut Vec<Violation>,
) {
    let Some(cp) = checkpoints.iter().find(|c| c.phase == Phase::Live) else { return };
    if !cp.unsettled.is_empty() {
        // Membership is still changing (liveness reports why); the assignment cannot be judged.
        return;
    }
    for job in tl.configs.keys().filter(|j| !tl.gone_at_end(j)) {
        let Some(state) = tl.config_at(job, cp.at) else { continue };
        if state.disabled {
            continue; // skips its fires before sharding: no assignment to judge
        }
        let mut problems = Vec::new();
        let prefix = format!("/{job}/instances/");
        let registered: Vec<&str> = cp
            .nodes
            .keys()
            .filter_map(|p| p.strip_prefix(&prefix))
            .filter(|rest| !rest.contains('/'))
            .collect();
        let up: Vec<&str> = cp.up.iter().map(|(_, id)| id.as_str()).collect();
        for id in &up {
            if !registered.contains(id) {
                problems.push(format!("{id} is up but not registered"));
            }
        }
        for id in &registered {
            if !up.contains(id) {
                problems.push(format!("{id} is registered but not up"));
            }
        }
        let mut eligible: Vec<&str> = up
            .iter()
            .copied()
            .filter(|id| {
                let ip = id.split("@-@").next().unwrap_or(id);
                cp.text(&format!("/{job}/servers/{ip}")) != Some("DISABLED")
            })
            .collect();
        sort_for_sharding(&mut eligible);
        let mut actual: BTreeMap<u32, String> = BTreeMap::new();
        let sharding = format!("/{job}/sharding/");
        for (path, (text, _)) in &cp.nodes {
            let Some(rest) = path.strip_prefix(&sharding) else { continue };
            let Some((n, "instance")) = rest.split_once('/') else { continue };
            if let Ok(n) = n.parse::<u32>() {
                actual.insert(n, text.clone());
            }
        }
        if state.static_sharding && !eligible.is_empty() {
            // `staticSharding` keeps the first assignment while instances come and go: any
            // live eligible owner will do, but every item needs one.
            for n in 0..state.count {
                match actual.get(&n) {
                    Some(owner) if eligible.contains(&owner.as_str()) => {}
                    Some(owner) => problems.push(format!("item {n} is owned by {owner}, not up")),
                    None => problems.push(format!("item {n} has no owner")),
                }
            }
        } else if !eligible.is_empty() {
            match strategies.shard(state.strategy.as_deref(), job, &eligible, state.count) {
                Ok(expected) => {
                    for (instance, items) in expected.iter() {
                        for n in items {
                            match actual.get(n) {
                                Some(owner) if owner == instance => {}
                                Some(owner) => problems
                                    .push(format!("item {n} is owned by {owner}, not {instance}")),
                                None => {
                                    problems.push(format!("item {n} has no owner, not {instance}"))
                                }
                            }
                        }
                    }
                }
                Err(e) => problems.push(format!("the strategy failed: {e}")),
            }
        }
        // Items beyond the count keep their owner node, emptied: its version is the item's
        // fencing token, which must keep growing if the count grows again.
        for (n, owner) in actual.iter().filter(|(n, _)| **n >= state.count) {
            if !owner.is_empty() {
                problems.push(format!(
                    "item {n} is beyond the count {} but owned by {owner}",
                    state.count
                ));
            }
        }
        if !problems.is_empty() {
            out.push(Violation {
                invariant: Invariant::Assignment,
                at: cp.at,
                message: format!("{job}: {}", problems.join("; ")),
                context: context(entries, index_at(entries, cp.at), Some(job)),
            });
        }
    }
}
