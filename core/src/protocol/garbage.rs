//! Garbage in the registry: reading any node of a job the protocol reads through its one parser
//! ([`super::records`]), and the checks that tell a node holding something the cluster cannot
//! act on (garbage, or the id of an instance that is gone) from one that is fine.
//!
//! What an instance does about it (reports it, rewrites what it owns, has the item resharded)
//! is the job's ([`super::job`]); this module only reads.

use crate::layout::{ItemNode, JobNode, JobPaths};
use crate::sharding::ShardingStrategies;

use super::records::{
    parse_flag, parse_instance_id, parse_owner, parse_time, Assigned, FailoverEntry, Garbage,
    InstanceRecord, Ledger, ServerStatus,
};
use super::sharding;
use super::view::View;

/// Whether `id` is a live instance of the job (its instance node exists).
pub fn is_live(view: &View, paths: &JobPaths, id: &str) -> bool {
    view.exists(&paths.instance(id))
}

/// Whether `data` names a live instance of the job.
pub fn names_live(view: &View, paths: &JobPaths, data: &[u8]) -> bool {
    std::str::from_utf8(data).is_ok_and(|t| {
        let id = t.trim();
        !id.is_empty() && !id.contains('/') && is_live(view, paths, id)
    })
}

/// What is wrong with the data of `node` as the view shows it, by the node's parser: `None`
/// when it reads (or is absent, or is a node whose data the protocol never reads: directories,
/// `disabled`, `failover` markers, triggers, distribute-once records, the config, which the job
/// judges itself).
///
/// Of the nodes ElasticJob keeps empty (`misfire`, the flag, queue entries) only the detail
/// shardcron keeps beside each is read (see [`super::detail`]): the garbage is there, whatever
/// the node itself holds.
pub fn unreadable(view: &View, paths: &JobPaths, node: &JobNode) -> Option<Garbage> {
    let path = path_of(paths, node)?;
    let data = match node.detailed() {
        Some(of) => super::detail::read(view, paths, of)?.1,
        None => &view.get(&path)?.data,
    };
    let result = match node {
        JobNode::Config => Ok(()),
        JobNode::Instance(id) => InstanceRecord::parse(&path, data).and_then(|record| {
            if record.job_instance_id == *id {
                Ok(())
            } else {
                Err(Garbage::new(&path, data, "the instance node names another instance"))
            }
        }),
        JobNode::Server(_) => ServerStatus::parse(&path, data).map(drop),
        JobNode::Item(_, ItemNode::Instance) => parse_owner(&path, data).map(drop),
        JobNode::Item(_, ItemNode::Running) => {
            parse_instance_id(&path, data, "a running marker").map(drop)
        }
        JobNode::Item(_, ItemNode::Misfire) => {
            if data.iter().all(u8::is_ascii_whitespace) {
                Ok(())
            } else {
                parse_time(&path, data, "a misfire marker").map(drop)
            }
        }
        JobNode::LeaderInstance => parse_instance_id(&path, data, "the leader node").map(drop),
        JobNode::ShardingNecessary => parse_flag(&path, data).map(drop),
        JobNode::FailoverItem(_) => FailoverEntry::parse(&path, data).map(drop),
        JobNode::Ledger(_) => Ledger::parse(&path, data).map(drop),
        // Read once per change of the record (every fire asks for its raise time), not built
        // at every look: a record of 17 assignments is some 150 lines.
        JobNode::Assigned => match super::failover::assigned_since(view, paths) {
            Some(_) => Ok(()),
            None => Assigned::raised_ms(&path, data).map(drop),
        },
        _ => Ok(()),
    };
    result.err()
}

/// The path of a node whose data the protocol reads (for a node ElasticJob keeps empty, its
/// detail's).
pub fn path_of(paths: &JobPaths, node: &JobNode) -> Option<String> {
    if let Some(of) = node.detailed() {
        return Some(paths.detail(of));
    }
    Some(match node {
        JobNode::Config => paths.config(),
        JobNode::Instance(id) => paths.instance(id),
        JobNode::Server(ip) => paths.server(ip),
        JobNode::Item(n, leaf @ (ItemNode::Instance | ItemNode::Running | ItemNode::Misfire)) => {
            paths.item_node(*n, *leaf)
        }
        JobNode::LeaderInstance => paths.leader_instance(),
        JobNode::ShardingNecessary => paths.sharding_necessary(),
        JobNode::FailoverItem(n) => paths.failover_item(*n),
        JobNode::Ledger(id) => paths.ledger(id),
        JobNode::Assigned => paths.assigned(),
        _ => return None,
    })
}

/// Every node of the job the protocol reads the data of, as the view shows them (an audit
/// looks at each after the view was replaced or leadership changed hands).
pub fn read_nodes(view: &View, paths: &JobPaths) -> Vec<JobNode> {
    let mut nodes: Vec<JobNode> = Vec::new();
    let numbered = |name: &String| name.parse::<u32>().ok().filter(|n| n.to_string() == *name);
    nodes.extend(view.children(&paths.instances()).into_iter().map(JobNode::Instance));
    nodes.extend(view.children(&paths.servers()).into_iter().map(JobNode::Server));
    for n in view.children(&paths.sharding()).iter().filter_map(numbered) {
        for leaf in [ItemNode::Instance, ItemNode::Running, ItemNode::Misfire] {
            // A narrow scope covers the markers of this instance's items only: an audit
            // looks at what the view covers (a leader's is of the whole subtree).
            let path = paths.item_node(n, leaf);
            if view.covers(&path) && view.exists(&path) {
                nodes.push(JobNode::Item(n, leaf));
            }
        }
    }
    nodes.extend([JobNode::LeaderInstance, JobNode::ShardingNecessary, JobNode::Assigned]);
    let entries = view.children(&paths.failover_items());
    nodes.extend(entries.iter().filter_map(numbered).map(JobNode::FailoverItem));
    nodes.extend(view.children(&paths.ledgers()).into_iter().map(JobNode::Ledger));
    nodes
}

/// Why the owner node of item `n` cannot stand (the item needs a reshard): missing, garbage,
/// or naming no live instance. `None` when it names a live instance.
pub fn owner_problem(view: &View, paths: &JobPaths, n: u32) -> Option<Garbage> {
    let path = paths.item_node(n, ItemNode::Instance);
    let Some(node) = view.get(&path) else {
        return Some(Garbage::missing(&path, "the owner node is missing; the item is resharded"));
    };
    match parse_owner(&path, &node.data) {
        Ok(Some(id)) if is_live(view, paths, &id) => None,
        Ok(_) => Some(Garbage::new(
            &path,
            &node.data,
            "the owner is no live instance of the job; the item is resharded",
        )),
        Err(g) => Some(Garbage { reason: format!("{}; the item is resharded", g.reason), ..g }),
    }
}

/// Whether the owner nodes hold what the job's strategy makes of the eligible instances (a
/// reshard would change nothing). An unusable strategy or no eligible instance: nothing to
/// compare, `true`.
pub fn assignment_is_strategy(
    view: &View,
    paths: &JobPaths,
    job: &str,
    strategy: Option<&str>,
    strategies: &ShardingStrategies,
    total: u32,
) -> bool {
    let eligible = sharding::eligible_instances(view, paths);
    if eligible.is_empty() {
        return true;
    }
    let refs: Vec<&str> = eligible.iter().map(String::as_str).collect();
    let Ok(assignment) = strategies.shard(strategy, job, &refs, total) else { return true };
    let same = assignment.iter().all(|(id, items)| {
        items.iter().all(|&n| {
            view.get(&paths.item_node(n, ItemNode::Instance))
                .is_some_and(|owner| owner.data == id.as_bytes())
        })
    });
    // Items beyond the count keep their owner node, emptied by the reshard that dropped them.
    // A narrow watch (issue #15) covers the owner nodes below the count only: the ones beyond
    // are looked at by a leader watching the whole subtree (its audit, every reshard).
    let numbered = |name: &String| name.parse::<u32>().ok();
    let beyond_emptied = view.children(&paths.sharding()).iter().filter_map(numbered).all(|n| {
        let owner = paths.item_node(n, ItemNode::Instance);
        n < total || !view.covers(&owner) || view.get(&owner).is_none_or(|o| o.data.is_empty())
    });
    same && beyond_emptied
}
