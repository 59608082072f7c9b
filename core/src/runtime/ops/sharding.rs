//! Running the resharding protocol's registry operations (see [`crate::protocol::sharding`]).

use std::collections::BTreeMap;

use super::commit;
use crate::error::{Error, Result};
use crate::instance::ip_of;
use crate::layout::{ItemNode, JobPaths};
use crate::protocol::sharding::{self, is_flag_race, Reshard, ReshardStart, DISABLED};
use crate::registry::{CoordinatorRegistry, CreateMode, RegistryError, RegistryExt};
use crate::runtime::cache::SharedCache;
use crate::sharding::{sort_for_sharding, ShardingStrategies};

/// Asks for a reshard before the next fire. Setting (rather than creating) the flag bumps its
/// version, which is what makes a concurrent leader's commit fail and retry.
///
/// The flag holds the time it was raised (`now_ms`, the setter's clock): a fire scheduled before
/// it runs with the assignment it was due under, and the reshard waits for the next fire, so
/// that one fire never runs partly under the old and partly under the new assignment.
///
/// A flag already raised keeps its (earliest) time: instances may be waiting for the reshard
/// of a fire between the two times, and a later time would release them to run that fire under
/// the old assignment while the leader runs it under the new one. Hence a read and a
/// version-checked write here, not a blind put; flags are rare (membership and config changes).
///
/// Losing that write to another instance's raise is success: the other write came after our
/// read, so after whatever change we raise the flag for, and it bumped the version a leader's
/// commit checks just as ours would have (fifty instances starting at once all raise it).
/// Only a flag deleted under us (a reshard committed meanwhile, maybe without our change) is
/// raised again.
pub async fn set_necessary(
    registry: &dyn CoordinatorRegistry,
    cache: &SharedCache,
    paths: &JobPaths,
    now_ms: i64,
) -> Result<()> {
    let path = paths.sharding_necessary();
    for _ in 0..FLAG_ATTEMPTS {
        let written = match registry.get(&path).await? {
            Some(flag) => {
                let data = sharding::raised_time(&flag.data, now_ms).to_string();
                match registry.set(&path, data.as_bytes(), Some(flag.version)).await {
                    Ok(version) => Some((data, version)),
                    Err(RegistryError::BadVersion { .. }) => return Ok(()),
                    Err(RegistryError::NoNode { .. }) => None,
                    Err(e) => return Err(e.into()),
                }
            }
            None => {
                let data = now_ms.to_string();
                match registry.create(&path, data.as_bytes(), CreateMode::Persistent).await {
                    Ok(_) => Some((data, 0)),
                    Err(RegistryError::NodeExists { .. }) => return Ok(()),
                    Err(e) => return Err(e.into()),
                }
            }
        };
        if let Some((data, version)) = written {
            cache.update(|c| c.wrote(&path, data.as_bytes(), version, false));
            return Ok(());
        }
    }
    Err(Error::Contended { what: format!("raising the reshard flag {path}") })
}

/// How often `set_necessary` retries against concurrent writers of the flag.
const FLAG_ATTEMPTS: usize = 16;

/// What a reshard starts from, read from the registry: for when the view keeps racing (a watch
/// that merges events may have left it behind).
async fn start_from_registry(
    registry: &dyn CoordinatorRegistry,
    paths: &JobPaths,
    me: &str,
) -> Result<std::result::Result<ReshardStart, Reshard>> {
    let Some(flag) = registry.get(&paths.sharding_necessary()).await? else {
        return Ok(Err(Reshard::NotNeeded));
    };
    let leader = registry.get(&paths.leader_instance()).await?;
    let Some(leader) = leader.filter(|n| n.data == me.as_bytes()) else {
        return Ok(Err(Reshard::NotLeader));
    };
    let mut existing = BTreeMap::new();
    for name in registry.children_or_empty(&paths.sharding()).await? {
        if let Ok(n) = name.parse::<u32>() {
            existing.insert(n, registry.exists(&paths.item_node(n, ItemNode::Instance)).await?);
        }
    }
    let mut instances = Vec::new();
    for id in registry.children_or_empty(&paths.instances()).await? {
        let server = registry.get(&paths.server(ip_of(&id))).await?;
        if server.is_none_or(|n| n.data != DISABLED.as_bytes()) {
            instances.push(id);
        }
    }
    sort_for_sharding(&mut instances);
    Ok(Ok(ReshardStart {
        necessary_version: flag.version,
        leader_version: leader.version,
        instances,
        existing,
    }))
}

/// The leader's reshard: computes the assignment over the eligible instances and commits it,
/// fenced by the flag's and the leader node's versions. The caller has made sure no item is
/// running. With `fresh`, the starting state is read from the registry instead of the view.
#[allow(clippy::too_many_arguments)]
pub async fn reshard(
    registry: &dyn CoordinatorRegistry,
    cache: &SharedCache,
    paths: &JobPaths,
    me: &str,
    job: &str,
    strategy: Option<&str>,
    strategies: &ShardingStrategies,
    total_count: u32,
    fresh: bool,
) -> Result<Reshard> {
    let start = if fresh {
        start_from_registry(registry, paths, me).await?
    } else {
        ReshardStart::from_view(&cache.read(), paths, me)
    };
    let start = match start {
        Ok(start) => start,
        Err(outcome) => return Ok(outcome),
    };
    let processing = paths.sharding_processing();
    match registry.create(&processing, b"", CreateMode::Ephemeral).await {
        Ok(_) => {}
        // A stale flag of a leader that died mid-reshard goes with its session; the caller retries.
        Err(RegistryError::NodeExists { .. }) => return Ok(Reshard::Raced),
        Err(e) => return Err(e.into()),
    }
    let result = async {
        let plan = sharding::plan(paths, job, strategy, strategies, total_count, &start)?;
        for marker in &plan.stale_markers {
            registry.delete_if_exists(marker).await?;
        }
        registry.ensure(&paths.sharding()).await?;
        commit(registry, cache, plan.ops).await?;
        Ok::<_, Error>(plan.assignment)
    }
    .await;
    match result {
        Ok(assignment) => Ok(Reshard::Committed(assignment)),
        Err(e) => {
            // Leave no processing flag behind, or followers would wait for nothing.
            registry.delete_if_exists(&processing).await?;
            match e {
                Error::Registry(ref r) if is_flag_race(r) => Ok(Reshard::Raced),
                other => Err(other),
            }
        }
    }
}
