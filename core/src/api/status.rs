//! Statistics: the jobs of a namespace, their servers and the state of every sharding item, by
//! the rules ElasticJob's console applies, so that an operator who knows that console reads the
//! same statuses here, for a shardcron namespace and for one ElasticJob's own instances wrote.
//!
//! Field names in the serde form are the ones of the console's JSON model (`jobName`,
//! `serverIp`, ...), so scripts written against it read ours.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::config::JobConfig;
use crate::error::Result;
use crate::instance::ip_of;
use crate::layout::{ItemNode, JobPaths};
use crate::protocol::records::{InstanceRecord, ServerStatus};
use crate::registry::RegistryExt;

use super::JobOperations;

/// The status of a job, or of a job on one server (where only `Ok` and `Disabled` apply).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum JobStatus {
    /// Instances run it and it is sharded among live ones.
    Ok,
    /// No live instance runs it.
    Crashed,
    /// Every server of the job is disabled.
    Disabled,
    /// An item has no owner, or an owner that is gone: a reshard is due.
    ShardingFlag,
}

/// The state of one item, as a console shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum ItemStatus {
    /// Disabled by an operator: its owner skips it.
    Disabled,
    /// Being run now.
    Running,
    /// Its owner is not a live instance: a reshard (or a failover) is due.
    ShardingFlag,
    /// Owned by a live instance and idle (ElasticJob's console calls it "Staging").
    Pending,
}

/// One job of the namespace, as the console's job list shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobBrief {
    /// The job's name.
    pub job_name: String,
    /// ElasticJob's job status, as its console computes it from the job's nodes.
    pub status: JobStatus,
    /// The config's `description`; empty when none.
    pub description: String,
    /// The config's cron; empty for a one-off job or an unusable config.
    pub cron: String,
    /// Live instances running the job.
    pub instance_count: usize,
    /// 0 when the stored config is unusable (see `problem`).
    pub sharding_total_count: i32,
    /// The leader's instance id, when one is elected.
    pub leader: Option<String>,
    /// Why the stored config cannot be used, when it cannot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// One sharding item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardingItem {
    /// The item's number.
    pub item: u32,
    /// The server IP of the owner.
    pub server_ip: Option<String>,
    /// The owner's instance id (`sharding/{n}/instance`).
    pub instance_id: Option<String>,
    /// What the item is doing, as ElasticJob's console names it.
    pub status: ItemStatus,
    /// True while a failover taker runs the item (`sharding/{n}/failover` exists).
    pub failover: bool,
    /// The taker's instance id, when `failover` is true.
    pub failover_instance_id: Option<String>,
}

/// One server of a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobServer {
    /// The server's IP (`servers/{ip}`).
    pub server_ip: String,
    /// `Disabled` when `servers/{ip}` holds `DISABLED` (any case), else `Ok`.
    pub status: JobStatus,
    /// The live instances of the job on that IP.
    pub instances: Vec<String>,
}

/// One server (IP) of the namespace, over all its jobs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerBrief {
    /// The server's IP.
    pub server_ip: String,
    /// Live instances on that IP, of any job.
    pub instances: Vec<String>,
    /// Jobs with a `servers/{ip}` node for that IP.
    pub job_names: Vec<String>,
    /// `instances.len()`, as ElasticJob-UI's JSON carries it.
    pub instances_num: usize,
    /// `job_names.len()`, as ElasticJob-UI's JSON carries it.
    pub jobs_num: usize,
    /// Jobs whose `servers/{ip}` node for that IP is `DISABLED`.
    pub disabled_jobs_num: usize,
}

/// One job on one server, as the console's server page lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerJob {
    /// The job's name.
    pub job_name: String,
    /// The job's status on that server (`Disabled` when the server is disabled for it).
    pub status: JobStatus,
    /// Live instances of the job on that server.
    pub instance_count: usize,
}

/// One live instance of the namespace, over all its jobs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceBrief {
    /// The instance's id (`{ip}@-@{pid}`).
    pub instance_id: String,
    /// The IP part of the id.
    pub server_ip: String,
    /// The jobs this instance runs, sorted.
    pub job_names: Vec<String>,
}

/// Everything a console shows of one job.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobDetail {
    /// The line of the job list.
    pub brief: JobBrief,
    /// The stored config; `None` when it is unusable (the reason is in `brief.problem`).
    #[serde(skip)]
    pub config: Option<JobConfig>,
    /// Every server of the job, live or not.
    pub servers: Vec<JobServer>,
    /// Every item, in order.
    pub sharding: Vec<ShardingItem>,
}

impl JobOperations<'_> {
    /// The names of the jobs of the namespace (top-level nodes with a `config` child), sorted.
    pub async fn job_names(&self) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for name in self.registry.children_or_empty("/").await? {
            if self.registry.exists(&JobPaths::new(&name).config()).await? {
                out.push(name);
            }
        }
        Ok(out)
    }

    /// Every job of the namespace with its status, sorted by name.
    pub async fn jobs(&self) -> Result<Vec<JobBrief>> {
        let mut out = Vec::new();
        for name in self.job_names().await? {
            out.push(self.job_brief(&name).await?);
        }
        Ok(out)
    }

    /// One job with its status.
    pub async fn job_brief(&self, job: &str) -> Result<JobBrief> {
        Ok(self.job_brief_and_config(job).await?.0)
    }

    async fn job_brief_and_config(&self, job: &str) -> Result<(JobBrief, Option<JobConfig>)> {
        let paths = JobPaths::new(job);
        self.require_job(&paths, job).await?;
        let (config, problem) = match self.config(job).await {
            Ok(c) => (Some(c), None),
            Err(crate::Error::StoredConfigUnusable { source, .. }) => {
                (None, Some(source.to_string()))
            }
            Err(e) => return Err(e),
        };
        let instances = self.live_instances(job).await?;
        let status = self.job_status(&paths, &instances).await?;
        let leader = self.registry.get_text(&paths.leader_instance()).await?;
        let text = |f: fn(&JobConfig) -> Option<&String>| {
            config.as_ref().and_then(f).cloned().unwrap_or_default()
        };
        let brief = JobBrief {
            job_name: job.to_owned(),
            status,
            description: text(|c| c.description.as_ref()),
            cron: text(|c| c.cron.as_ref()),
            instance_count: instances.len(),
            sharding_total_count: config.as_ref().map_or(0, |c| c.sharding_total_count),
            leader,
            problem,
        };
        Ok((brief, config))
    }

    /// The job's status: `Crashed` without live instances; `Disabled` when every server is
    /// disabled; `ShardingFlag` when no item has an owner or an owner is not live; else `Ok`.
    async fn job_status(&self, paths: &JobPaths, instances: &[String]) -> Result<JobStatus> {
        if instances.is_empty() {
            return Ok(JobStatus::Crashed);
        }
        let mut all_disabled = true;
        for ip in self.registry.children_or_empty(&paths.servers()).await? {
            if !is_disabled(self.registry.get_text(&paths.server(&ip)).await?.as_deref()) {
                all_disabled = false;
                break;
            }
        }
        // As in ElasticJob, a job without any server node counts as disabled everywhere.
        if all_disabled {
            return Ok(JobStatus::Disabled);
        }
        let mut owners = BTreeSet::new();
        for item in self.registry.children_or_empty(&paths.sharding()).await? {
            let Ok(item) = item.parse::<u32>() else { continue };
            let owner = self.registry.get_text(&paths.item_node(item, ItemNode::Instance)).await?;
            if let Some(owner) = owner.filter(|o| !o.is_empty()) {
                owners.insert(owner);
            }
        }
        if owners.is_empty() || owners.iter().any(|o| !instances.contains(o)) {
            return Ok(JobStatus::ShardingFlag);
        }
        Ok(JobStatus::Ok)
    }

    /// The job's brief, config, servers and items.
    pub async fn job_detail(&self, job: &str) -> Result<JobDetail> {
        let (brief, config) = self.job_brief_and_config(job).await?;
        let servers = self.servers(job).await?;
        let sharding = self.sharding_status(job).await?;
        Ok(JobDetail { brief, config, servers, sharding })
    }

    /// The job's servers with their status and live instances, sorted by IP.
    pub async fn servers(&self, job: &str) -> Result<Vec<JobServer>> {
        let paths = JobPaths::new(job);
        self.require_job(&paths, job).await?;
        let instances = self.instances_of(job).await?;
        let mut out = Vec::new();
        for ip in self.registry.children_or_empty(&paths.servers()).await? {
            let value = self.registry.get_text(&paths.server(&ip)).await?;
            let status =
                if is_disabled(value.as_deref()) { JobStatus::Disabled } else { JobStatus::Ok };
            let mine =
                instances.iter().filter(|(_, i)| *i == ip).map(|(id, _)| id.clone()).collect();
            out.push(JobServer { server_ip: ip, status, instances: mine });
        }
        Ok(out)
    }

    /// The state of every item: the items `0..shardingTotalCount` (when the config is usable)
    /// and any other item the registry still has nodes for, sorted.
    pub async fn sharding_status(&self, job: &str) -> Result<Vec<ShardingItem>> {
        let paths = JobPaths::new(job);
        self.require_job(&paths, job).await?;
        let mut items: BTreeSet<u32> = self
            .registry
            .children_or_empty(&paths.sharding())
            .await?
            .iter()
            .filter_map(|n| n.parse().ok())
            .collect();
        if let Ok(config) = self.config(job).await {
            if let Ok(total) = config.checked_total_count() {
                items.extend(0..total);
            }
        }
        let live = self.live_instances(job).await?;
        let mut out = Vec::new();
        for item in items {
            let node = |n: ItemNode| paths.item_node(item, n);
            let instance = self.registry.get_text(&node(ItemNode::Instance)).await?;
            let instance = instance.filter(|i| !i.is_empty());
            let failover_instance = self.registry.get_text(&node(ItemNode::Failover)).await?;
            let status = if self.registry.exists(&node(ItemNode::Disabled)).await? {
                ItemStatus::Disabled
            } else if self.registry.exists(&node(ItemNode::Running)).await? {
                ItemStatus::Running
            } else if instance.as_ref().is_none_or(|i| !live.contains(i)) {
                ItemStatus::ShardingFlag
            } else {
                ItemStatus::Pending
            };
            out.push(ShardingItem {
                item,
                server_ip: instance.as_deref().map(|i| ip_of(i).to_owned()),
                instance_id: instance,
                status,
                failover: failover_instance.is_some(),
                failover_instance_id: failover_instance,
            });
        }
        Ok(out)
    }

    /// Every server IP of the namespace with its jobs and live instances, sorted by IP.
    pub async fn all_servers(&self) -> Result<Vec<ServerBrief>> {
        let mut jobs_of: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut disabled: BTreeMap<String, usize> = BTreeMap::new();
        let mut instances_of: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for job in self.job_names().await? {
            let paths = JobPaths::new(&job);
            for ip in self.registry.children_or_empty(&paths.servers()).await? {
                if is_disabled(self.registry.get_text(&paths.server(&ip)).await?.as_deref()) {
                    *disabled.entry(ip.clone()).or_default() += 1;
                }
                jobs_of.entry(ip).or_default().insert(job.clone());
            }
            for (id, ip) in self.instances_of(&job).await? {
                instances_of.entry(ip).or_default().insert(id);
            }
        }
        Ok(jobs_of
            .into_iter()
            .map(|(ip, jobs)| {
                let instances: Vec<String> =
                    instances_of.get(&ip).map(|s| s.iter().cloned().collect()).unwrap_or_default();
                ServerBrief {
                    instances_num: instances.len(),
                    jobs_num: jobs.len(),
                    disabled_jobs_num: disabled.get(&ip).copied().unwrap_or(0),
                    job_names: jobs.into_iter().collect(),
                    instances,
                    server_ip: ip,
                }
            })
            .collect())
    }

    /// The jobs that have a server node for `ip`, with the job's status on that server.
    pub async fn server_jobs(&self, ip: &str) -> Result<Vec<ServerJob>> {
        let mut out = Vec::new();
        for job in self.job_names().await? {
            let paths = JobPaths::new(&job);
            let Some(value) = self.registry.get(&paths.server(ip)).await? else { continue };
            let status =
                if is_disabled(Some(&value.text())) { JobStatus::Disabled } else { JobStatus::Ok };
            let instance_count =
                self.instances_of(&job).await?.iter().filter(|(_, i)| i == ip).count();
            out.push(ServerJob { job_name: job, status, instance_count });
        }
        if out.is_empty() {
            return Err(crate::Error::NoSuchServer { ip: ip.to_owned(), job: None });
        }
        Ok(out)
    }

    /// Every live instance of the namespace with the jobs it runs, sorted by id.
    pub async fn all_instances(&self) -> Result<Vec<InstanceBrief>> {
        let mut by_id: BTreeMap<String, (String, Vec<String>)> = BTreeMap::new();
        for job in self.job_names().await? {
            for (id, ip) in self.instances_of(&job).await? {
                by_id.entry(id).or_insert_with(|| (ip, Vec::new())).1.push(job.clone());
            }
        }
        Ok(by_id
            .into_iter()
            .map(|(instance_id, (server_ip, job_names))| InstanceBrief {
                instance_id,
                server_ip,
                job_names,
            })
            .collect())
    }

    /// The live instances of a job with their server IP: the `serverIp` of the instance node's
    /// YAML, or the id's IP part when the node does not say.
    pub(super) async fn instances_of(&self, job: &str) -> Result<Vec<(String, String)>> {
        let paths = JobPaths::new(job);
        let mut out = Vec::new();
        for id in self.live_instances(job).await? {
            let data = self.registry.get(&paths.instance(&id)).await?;
            // A node whose data does not read (garbage, rewritten by its instance) says
            // nothing: the id's IP part stands.
            let path = paths.instance(&id);
            let ip = data
                .as_ref()
                .and_then(|n| InstanceRecord::parse(&path, &n.data).ok())
                .map_or_else(|| ip_of(&id).to_owned(), |record| record.server_ip);
            out.push((id, ip));
        }
        Ok(out)
    }
}

/// Whether a `servers/{ip}` value disables the server (ElasticJob compares ignoring case).
pub(super) fn is_disabled(value: Option<&str>) -> bool {
    let status = value.map(|v| ServerStatus::parse("", v.as_bytes()));
    status == Some(Ok(ServerStatus::Disabled))
}
