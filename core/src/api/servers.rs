//! Operations on servers and instances, as ElasticJob's console offers them: on one job, or on
//! every job of the namespace a server or an instance takes part in.

use crate::error::{Error, Result};
use crate::layout::JobPaths;
use crate::protocol::sharding::DISABLED;
use crate::registry::{path, RegistryExt};

use super::JobOperations;

/// What `servers/{ip}` holds for an enabled server, as ElasticJob writes it.
pub const ENABLED: &str = "ENABLED";

impl JobOperations<'_> {
    /// Disables or enables a whole job, the way ElasticJob's console does and a bit more:
    /// `DISABLED` / `ENABLED` into every `servers/{ip}` of the job (what ElasticJob's tools read)
    /// and the config's `disabled` flag (so that servers joining later stay off too). Returns
    /// the IPs written.
    pub async fn disable_job(&self, job: &str, disabled: bool) -> Result<Vec<String>> {
        let paths = JobPaths::new(job);
        self.require_job(&paths, job).await?;
        let ips = self.registry.children_or_empty(&paths.servers()).await?;
        let mut config = self.config(job).await?;
        if config.disabled != disabled {
            config.disabled = disabled;
            self.update_config(&config).await?;
        }
        for ip in &ips {
            self.registry.put(&paths.server(ip), server_value(disabled)).await?;
        }
        Ok(ips)
    }

    /// Disables or enables server `ip` for `job`, or for every job it has a server node in.
    /// Returns the jobs changed; an IP no job knows is an error and changes nothing.
    pub async fn disable_server(
        &self,
        ip: &str,
        job: Option<&str>,
        disabled: bool,
    ) -> Result<Vec<String>> {
        let jobs = self.jobs_with_server(ip, job).await?;
        for j in &jobs {
            self.registry.put(&JobPaths::new(j).server(ip), server_value(disabled)).await?;
        }
        Ok(jobs)
    }

    /// Shuts down the instances on server `ip` (of `job`, or of every job): their instance
    /// nodes are deleted, which stops those jobs there gracefully. Returns how many instance
    /// nodes went.
    pub async fn shutdown_server(&self, ip: &str, job: Option<&str>) -> Result<usize> {
        let jobs = self.jobs_with_server(ip, job).await?;
        let mut stopped = 0;
        for j in &jobs {
            let paths = JobPaths::new(j);
            for (id, server) in self.instances_of(j).await? {
                if server == ip && self.registry.delete_if_exists(&paths.instance(&id)).await? {
                    stopped += 1;
                }
            }
        }
        Ok(stopped)
    }

    /// Shuts down instance `instance` for `job`, or for every job it runs. Returns the jobs it
    /// was stopped in; an instance that runs none of them is an error.
    pub async fn shutdown_instance(
        &self,
        instance: &str,
        job: Option<&str>,
    ) -> Result<Vec<String>> {
        path::validate_segment(instance)?;
        let candidates = match job {
            Some(j) => {
                self.require_live_job(&JobPaths::new(j), j).await?;
                vec![j.to_owned()]
            }
            None => self.job_names().await?,
        };
        let mut stopped = Vec::new();
        for j in candidates {
            if self.registry.delete_if_exists(&JobPaths::new(&j).instance(instance)).await? {
                stopped.push(j);
            }
        }
        if stopped.is_empty() {
            return Err(Error::NoSuchInstance {
                instance: instance.to_owned(),
                job: job.map(str::to_owned),
            });
        }
        Ok(stopped)
    }

    /// Removes server `ip` from `job` (or from every job): shuts its instances down and deletes
    /// its `servers/{ip}` node. Returns the jobs it was removed from.
    pub async fn remove_server(&self, ip: &str, job: Option<&str>) -> Result<Vec<String>> {
        let jobs = self.jobs_with_server(ip, job).await?;
        self.shutdown_server(ip, job).await?;
        for j in &jobs {
            self.registry.delete_if_exists(&JobPaths::new(j).server(ip)).await?;
        }
        Ok(jobs)
    }

    /// The jobs (`job` alone, or all) that have a server node for `ip`; none is an error.
    async fn jobs_with_server(&self, ip: &str, job: Option<&str>) -> Result<Vec<String>> {
        path::validate_segment(ip)?;
        let candidates = match job {
            Some(j) => {
                self.require_live_job(&JobPaths::new(j), j).await?;
                vec![j.to_owned()]
            }
            None => self.job_names().await?,
        };
        let mut out = Vec::new();
        for j in candidates {
            if self.registry.exists(&JobPaths::new(&j).server(ip)).await? {
                out.push(j);
            }
        }
        if out.is_empty() {
            return Err(Error::NoSuchServer { ip: ip.to_owned(), job: job.map(str::to_owned) });
        }
        Ok(out)
    }
}

fn server_value(disabled: bool) -> &'static [u8] {
    if disabled {
        DISABLED.as_bytes()
    } else {
        ENABLED.as_bytes()
    }
}
