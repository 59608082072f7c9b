//! Invariant 5: no registry node leaks (instances, running, failover, flags) after all
//! instances stop.
//!
//! Judged at the Final checkpoint, after every instance stopped gracefully and a session timeout
//! passed. If some instance has not finished stopping by then (the simulator waits the shutdown
//! timeout plus a minute), that is reported as a liveness violation instead. Leaks are: any ephemeral node; `instances/*`; `sharding/*/running` and
//! `sharding/*/failover` and `sharding/*/failovering`; `leader/election/instance`; `leader/sharding/processing`; queued
//! `leader/failover/items/*`. Persistent intent is not a leak: `leader/sharding/necessary`
//! (the next cluster must reshard anyway, and every starting instance sets it), `misfire`
//! markers (a catch-up owed across restarts), `disabled` markers, servers, assignments, config.
//! The detail of a misfire marker or a queue entry (`shardcron/misfire/*`,
//! `shardcron/failover/*`) leaks when its node is gone: the two are written and removed
//! together (the flag's detail stays by design, blank).

use super::{context, index_at, Checkpoint, Invariant, Violation};
use crate::trace::{Entry, Phase};

pub(super) fn check(entries: &[Entry], checkpoints: &[Checkpoint], out: &mut Vec<Violation>) {
    let Some(cp) = checkpoints.iter().find(|c| c.phase == Phase::Final) else { return };
    if !cp.unsettled.is_empty() {
        let who: Vec<String> = cp.unsettled.iter().map(|(i, s)| format!("i{i} ({s:?})")).collect();
        out.push(Violation {
            invariant: Invariant::Liveness,
            at: cp.at,
            message: format!(
                "{} still not down long after the final graceful stop began (shutdown timeout \
                 plus a minute); leaks cannot be judged",
                who.join(", ")
            ),
            context: context(entries, index_at(entries, cp.at), None),
        });
        return;
    }
    let leaked: Vec<String> = cp
        .nodes
        .iter()
        .filter(|(path, (_, ephemeral))| {
            *ephemeral || leak(path) || orphan_detail(path, |p| cp.nodes.contains_key(p))
        })
        .map(|(path, (text, _))| format!("{path} ({text})"))
        .collect();
    if !leaked.is_empty() {
        out.push(Violation {
            invariant: Invariant::Leaks,
            at: cp.at,
            message: format!("left behind after every instance stopped: {}", leaked.join(", ")),
            context: context(entries, index_at(entries, cp.at), None),
        });
    }
}

fn leak(path: &str) -> bool {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    matches!(
        parts.as_slice(),
        [_, "instances", _]
            | [_, "sharding", _, "running" | "failover" | "failovering"]
            | [_, "leader", "election", "instance"]
            | [_, "leader", "sharding", "processing"]
            | [_, "leader", "failover", "items", _]
    )
}

/// A detail node whose node is gone (`exists` tells which nodes the registry holds).
fn orphan_detail(path: &str, exists: impl Fn(&str) -> bool) -> bool {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let node = match parts.as_slice() {
        [job, "shardcron", "misfire", n] => format!("/{job}/sharding/{n}/misfire"),
        [job, "shardcron", "failover", n] => format!("/{job}/leader/failover/items/{n}"),
        _ => return false,
    };
    !exists(&node)
}

#[cfg(test)]
mod tests {
    use super::orphan_detail;

    #[test]
    fn a_detail_leaks_once_its_node_is_gone() {
        let nodes = ["/j/sharding/1/misfire", "/j/leader/failover/items/2"];
        let exists = |p: &str| nodes.contains(&p);
        assert!(!orphan_detail("/j/shardcron/misfire/1", exists));
        assert!(orphan_detail("/j/shardcron/misfire/2", exists));
        assert!(!orphan_detail("/j/shardcron/failover/2", exists));
        assert!(orphan_detail("/j/shardcron/failover/1", exists));
        assert!(!orphan_detail("/j/shardcron/necessary", exists), "the flag's detail stays");
    }
}
