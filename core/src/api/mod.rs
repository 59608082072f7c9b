//! Operations and statistics for consoles and operators, working on any backend through the
//! registry alone: no scheduler needs to run in the calling process. Every change goes through
//! the nodes the running schedulers watch, so they react within a watch round trip.
//!
//! ```no_run
//! # async fn demo(registry: &dyn shardcron_core::registry::CoordinatorRegistry) -> shardcron_core::Result<()> {
//! use shardcron_core::api::JobOperations;
//! let ops = JobOperations::new(registry);
//! ops.trigger("billing").await?;                  // run once now on every live instance
//! ops.set_item_disabled("billing", 2, true).await?; // skip item 2 from the next fire on
//! for item in ops.sharding_status("billing").await? {
//!     println!("{} -> {:?} {:?}", item.item, item.instance_id, item.status);
//! }
//! # Ok(()) }
//! ```

mod dump;
mod edit;
mod servers;
mod status;

pub use dump::DumpedNode;
pub use edit::ConfigUpdate;
pub use status::{
    InstanceBrief, ItemStatus, JobBrief, JobDetail, JobServer, JobStatus, ServerBrief, ServerJob,
    ShardingItem,
};

use crate::config::{store, JobConfig, KnownTypes};
use crate::error::{Error, Result};
use crate::layout::{ItemNode, JobPaths};
use crate::protocol::sharding::DISABLED;
use crate::registry::{CoordinatorRegistry, CreateMode, RegistryExt};

/// Operations on the jobs of one namespace.
#[derive(Debug, Clone)]
pub struct JobOperations<'a> {
    registry: &'a dyn CoordinatorRegistry,
    known: KnownTypes,
}

impl<'a> JobOperations<'a> {
    /// Operations that accept the built-in sharding strategies and error handlers.
    pub fn new(registry: &'a dyn CoordinatorRegistry) -> Self {
        JobOperations { registry, known: KnownTypes::default() }
    }

    /// Operations that also accept the custom types the schedulers of this namespace know.
    pub fn with_known_types(registry: &'a dyn CoordinatorRegistry, known: KnownTypes) -> Self {
        JobOperations { registry, known }
    }

    /// The job's stored config.
    pub async fn config(&self, job: &str) -> Result<JobConfig> {
        crate::config::validate_job_name(job)?;
        let paths = JobPaths::new(job);
        let node = self.registry.get(&paths.config()).await?.ok_or_else(|| no_job(job))?;
        store::parse_stored(job, &node.data, &self.known)
            .map_err(|source| Error::StoredConfigUnusable { job: job.to_owned(), source })
    }

    /// Replaces the job's config after validating it: a cron change reschedules the live
    /// instances, a count change reshards before the next fire. The write is conditional on the
    /// version read, so a concurrent edit is not silently overwritten.
    pub async fn update_config(&self, config: &JobConfig) -> Result<()> {
        config.validate_with(&self.known)?;
        let paths = JobPaths::new(&config.job_name);
        let node =
            self.registry.get(&paths.config()).await?.ok_or_else(|| no_job(&config.job_name))?;
        self.registry
            .set(&paths.config(), config.to_yaml()?.as_bytes(), Some(node.version))
            .await?;
        Ok(())
    }

    /// Runs the job once now on every live instance (each runs its own items).
    pub async fn trigger(&self, job: &str) -> Result<usize> {
        let paths = JobPaths::new(job);
        self.require_live_job(&paths, job).await?;
        let instances = self.live_instances(job).await?;
        for instance in &instances {
            self.registry
                .create_if_absent(&paths.trigger(instance), b"", CreateMode::Persistent)
                .await?;
        }
        Ok(instances.len())
    }

    /// Disables or enables the whole job (its config's `disabled` flag).
    pub async fn set_job_disabled(&self, job: &str, disabled: bool) -> Result<()> {
        let mut config = self.config(job).await?;
        config.disabled = disabled;
        self.update_config(&config).await
    }

    /// Disables or enables a server for one job: a disabled server's instances get no items and
    /// its leader abdicates.
    pub async fn set_server_disabled(&self, job: &str, ip: &str, disabled: bool) -> Result<()> {
        let paths = JobPaths::new(job);
        self.require_live_job(&paths, job).await?;
        let value: &[u8] = if disabled { DISABLED.as_bytes() } else { b"" };
        self.registry.put(&paths.server(ip), value).await?;
        Ok(())
    }

    /// Disables or enables one sharding item: a disabled item is skipped by its owner.
    pub async fn set_item_disabled(&self, job: &str, item: u32, disabled: bool) -> Result<()> {
        let paths = JobPaths::new(job);
        let config = self.config(job).await?;
        let total = config.checked_total_count()?;
        if item >= total {
            return Err(Error::Refused {
                job: job.to_owned(),
                reason: format!("item {item} is outside 0..{total}"),
            });
        }
        let node = paths.item_node(item, ItemNode::Disabled);
        if disabled {
            self.registry.create_if_absent(&node, b"", CreateMode::Persistent).await?;
        } else {
            self.registry.delete_if_exists(&node).await?;
        }
        Ok(())
    }

    /// Shuts one instance of the job down (it stops the job and leaves the registry), or every
    /// instance when `instance` is `None`.
    pub async fn shutdown(&self, job: &str, instance: Option<&str>) -> Result<usize> {
        let paths = JobPaths::new(job);
        self.require_live_job(&paths, job).await?;
        let targets = match instance {
            Some(i) => vec![i.to_owned()],
            None => self.live_instances(job).await?,
        };
        let mut stopped = 0;
        for i in &targets {
            if self.registry.delete_if_exists(&paths.instance(i)).await? {
                stopped += 1;
            }
        }
        Ok(stopped)
    }

    /// Removes the job from the registry. Refused while instances still run it: shut them down
    /// first.
    pub async fn remove(&self, job: &str) -> Result<()> {
        let paths = JobPaths::new(job);
        self.require_job(&paths, job).await?;
        let live = self.live_instances(job).await?;
        if !live.is_empty() {
            return Err(Error::Refused {
                job: job.to_owned(),
                reason: format!(
                    "{} instance(s) still run it ({}); shut them down first",
                    live.len(),
                    live.join(", ")
                ),
            });
        }
        self.registry.delete_recursive(paths.root()).await?;
        Ok(())
    }

    /// The live instances of the job, sorted.
    pub async fn live_instances(&self, job: &str) -> Result<Vec<String>> {
        Ok(self.registry.children_or_empty(&JobPaths::new(job).instances()).await?)
    }

    async fn require_job(&self, paths: &JobPaths, job: &str) -> Result<()> {
        crate::config::validate_job_name(job)?;
        if self.registry.exists(&paths.config()).await? {
            Ok(())
        } else {
            Err(no_job(job))
        }
    }

    /// [`Self::require_job`] for what acts on a job's servers and instances: a job whose
    /// config node was deleted while instances still run it is theirs to run, and enabling a
    /// server is how an operator gives it a leader again to write the config back (with every
    /// server disabled, a deleted config would otherwise leave the job without one for good).
    async fn require_live_job(&self, paths: &JobPaths, job: &str) -> Result<()> {
        crate::config::validate_job_name(job)?;
        if self.registry.exists(&paths.config()).await?
            || !self.registry.children_or_empty(&paths.instances()).await?.is_empty()
        {
            Ok(())
        } else {
            Err(no_job(job))
        }
    }
}

fn no_job(job: &str) -> Error {
    Error::NoSuchJob { job: job.to_owned() }
}
