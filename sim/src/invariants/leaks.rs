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
//! The detail of a queue entry (`shardcron/failover/*`) leaks when its node is gone: the two
//! are written and removed together. The flag's detail stays by design (made at registration,
//! blank while no reshard is asked for), and so does a misfire marker's
//! (`shardcron/misfire/*`) once the marker is settled, blank, so that its version only grows (a
//! start checks it at the version its view read): it leaks when it still holds something (a
//! fire, or garbage) without its marker.

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
        .filter(|(path, (text, ephemeral))| {
            *ephemeral || leak(path) || orphan_detail(path, text, |p| cp.nodes.contains_key(p))
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

/// A detail node whose node is gone (`exists` tells which nodes the registry holds), holding
/// `text`: blank is what a misfire marker's keeps once its node goes. (The flag's detail is
/// no leak at all: it is made at registration, not with the flag.)
fn orphan_detail(path: &str, text: &str, exists: impl Fn(&str) -> bool) -> bool {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let node = match parts.as_slice() {
        [job, "shardcron", "misfire", n] => format!("/{job}/sharding/{n}/misfire"),
        [job, "shardcron", "failover", n] => {
            return !exists(&format!("/{job}/leader/failover/items/{n}"))
        }
        _ => return false,
    };
    !text.trim().is_empty() && !exists(&node)
}

#[cfg(test)]
mod tests {
    use super::orphan_detail;

    #[test]
    fn a_detail_leaks_once_its_node_is_gone_unless_kept_blank() {
        let nodes = ["/j/sharding/1/misfire", "/j/leader/failover/items/2"];
        let exists = |p: &str| nodes.contains(&p);
        assert!(!orphan_detail("/j/shardcron/misfire/1", "7000", exists));
        assert!(orphan_detail("/j/shardcron/misfire/2", "7000", exists));
        assert!(!orphan_detail("/j/shardcron/misfire/2", " ", exists), "settled: kept blank");
        assert!(!orphan_detail("/j/shardcron/failover/2", "7000 0 missed i1", exists));
        assert!(orphan_detail("/j/shardcron/failover/1", "7000 0 missed i1", exists));
        assert!(orphan_detail("/j/shardcron/failover/1", " ", exists), "entries' go with them");
        assert!(!orphan_detail("/j/shardcron/necessary", " ", exists), "the flag's stays");
    }
}
