//! Statistics: the jobs of a namespace, their servers and the state of every sharding item, by
//! ElasticJob console's rules.

use crate::config::JobConfig;
use crate::error::Result;
use crate::instance::ip_of;
use crate::layout::{ItemNode, JobPaths};
use crate::protocol::sharding::DISABLED;
use crate::registry::RegistryExt;

use super::JobOperations;

/// The state of one item, as a console shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemStatus {
    /// Owned and idle.
    Pending,
    Running,
    /// A fire was skipped while it ran; a catch-up run is owed.
    Misfired,
    Disabled,
    /// Its owner is gone and no one has taken it over yet.
    ShardingFlag,
    /// Being run by a failover taker.
    FailedOver,
}

/// One sharding item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardingItem {
    pub item: u32,
    pub instance: Option<String>,
    pub failover_instance: Option<String>,
    pub status: ItemStatus,
}

/// One server of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerStatus {
    pub ip: String,
    pub disabled: bool,
    pub instances: Vec<String>,
}

/// One job of the namespace.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSummary {
    pub name: String,
    /// `None` when the stored config is unusable (the reason is in `problem`).
    pub config: Option<JobConfig>,
    pub problem: Option<String>,
    pub instances: usize,
    pub leader: Option<String>,
}

impl JobOperations<'_> {
    /// Every job of the namespace (nodes with a `config` child), sorted by name.
    pub async fn jobs(&self) -> Result<Vec<JobSummary>> {
        let mut out = Vec::new();
        for name in self.registry.children_or_empty("/").await? {
            let paths = JobPaths::new(&name);
            let Some(config) = self.registry.get(&paths.config()).await? else { continue };
            let (config, problem) =
                match crate::config::store::parse_stored(&name, &config.data, &self.known) {
                    Ok(c) => (Some(c), None),
                    Err(reason) => (None, Some(reason)),
                };
            let instances = self.registry.children_or_empty(&paths.instances()).await?.len();
            let leader = self.registry.get_text(&paths.leader_instance()).await?;
            out.push(JobSummary { name, config, problem, instances, leader });
        }
        Ok(out)
    }

    /// The job's servers with their live instances.
    pub async fn servers(&self, job: &str) -> Result<Vec<ServerStatus>> {
        let paths = JobPaths::new(job);
        let instances = self.live_instances(job).await?;
        let mut out = Vec::new();
        for ip in self.registry.children_or_empty(&paths.servers()).await? {
            let disabled =
                self.registry.get_text(&paths.server(&ip)).await?.as_deref() == Some(DISABLED);
            let mine = instances.iter().filter(|i| ip_of(i) == ip).cloned().collect();
            out.push(ServerStatus { ip, disabled, instances: mine });
        }
        Ok(out)
    }

    /// The state of every item below the job's sharding total count.
    pub async fn sharding_status(&self, job: &str) -> Result<Vec<ShardingItem>> {
        let paths = JobPaths::new(job);
        let total = self.config(job).await?.checked_total_count()?;
        let live = self.live_instances(job).await?;
        let mut out = Vec::new();
        for item in 0..total {
            let node = |n: ItemNode| paths.item_node(item, n);
            let instance = self.registry.get_text(&node(ItemNode::Instance)).await?;
            let failover_instance = self.registry.get_text(&node(ItemNode::Failover)).await?;
            let running = self.registry.exists(&node(ItemNode::Running)).await?;
            let status = if self.registry.exists(&node(ItemNode::Disabled)).await? {
                ItemStatus::Disabled
            } else if failover_instance.is_some() {
                ItemStatus::FailedOver
            } else if running {
                ItemStatus::Running
            } else if self.registry.exists(&node(ItemNode::Misfire)).await? {
                ItemStatus::Misfired
            } else if instance.as_ref().is_none_or(|i| !live.contains(i)) {
                ItemStatus::ShardingFlag
            } else {
                ItemStatus::Pending
            };
            out.push(ShardingItem { item, instance, failover_instance, status });
        }
        Ok(out)
    }
}
