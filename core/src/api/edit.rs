//! Changing a job's config from outside its instances, and adding a job: both validated before
//! the registry is touched, so that a rejected edit changes nothing.

use serde::Serialize;

use crate::config::{validate_job_name, JobConfig};
use crate::error::{Error, Result};
use crate::layout::JobPaths;
use crate::registry::{CreateMode, RegistryError};

use super::JobOperations;

/// What an accepted config update means for the running cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigUpdate {
    /// The config replaced was published with `overwrite: true`: an instance publishing its
    /// local config that way replaces the stored one whenever it starts, so this edit lasts
    /// only until the next restart of such an instance (the overwrite rule). Change the
    /// application's local config too, or publish it with `overwrite: false`.
    pub replaced_on_restart: bool,
    /// The new config had no `jobExtraConfigurations` and the stored one's were kept (as
    /// ElasticJob's console does: its editor does not show them).
    pub kept_extra_configurations: bool,
}

impl JobOperations<'_> {
    /// Replaces job `job`'s config with the one in `yaml` (ElasticJob's field names; a JSON
    /// object is accepted too), after validating it. A missing `jobName` means `job`; another
    /// name is refused. The write is conditional on the version read, so a concurrent edit is
    /// not silently lost: the update fails instead, and can be retried.
    pub async fn set_config_yaml(&self, job: &str, yaml: &str) -> Result<ConfigUpdate> {
        validate_job_name(job)?;
        let paths = JobPaths::new(job);
        let stored = self.registry.get(&paths.config()).await?.ok_or_else(|| no_job(job))?;
        let mut config = parse_for(job, yaml)?;
        // An unreadable stored config is replaced as it is: there is nothing to keep from it.
        let previous =
            std::str::from_utf8(&stored.data).ok().and_then(|t| JobConfig::from_yaml(t).ok());
        let mut kept_extra_configurations = false;
        if let Some(previous) = &previous {
            if config.job_extra_configurations.is_empty()
                && !previous.job_extra_configurations.is_empty()
            {
                config.job_extra_configurations = previous.job_extra_configurations.clone();
                kept_extra_configurations = true;
            }
        }
        config.validate_with(&self.known)?;
        let text = config.to_yaml()?;
        match self.registry.set(&paths.config(), text.as_bytes(), Some(stored.version)).await {
            Ok(_) => {}
            Err(RegistryError::BadVersion { .. }) => {
                return Err(Error::Contended {
                    what: format!("updating the config of job {job} (changed meanwhile)"),
                })
            }
            Err(RegistryError::NoNode { .. }) => return Err(no_job(job)),
            Err(e) => return Err(e.into()),
        }
        Ok(ConfigUpdate {
            replaced_on_restart: previous.is_some_and(|p| p.overwrite),
            kept_extra_configurations,
        })
    }

    /// Registers a new job from its YAML config (a missing `jobName` means `job`). Instances
    /// that have a handler for it pick it up; until then its status is `CRASHED`.
    pub async fn add_job_yaml(&self, job: &str, yaml: &str) -> Result<JobConfig> {
        validate_job_name(job)?;
        let config = parse_for(job, yaml)?;
        self.add_job(&config).await?;
        Ok(config)
    }

    /// Registers a new job: validates the config and creates its `config` node. A job whose
    /// config the registry holds already is refused (update it instead).
    pub async fn add_job(&self, config: &JobConfig) -> Result<()> {
        config.validate_with(&self.known)?;
        let paths = JobPaths::new(&config.job_name);
        let text = config.to_yaml()?;
        match self.registry.create(&paths.config(), text.as_bytes(), CreateMode::Persistent).await {
            Ok(_) => Ok(()),
            Err(RegistryError::NodeExists { .. }) => {
                Err(Error::JobAlreadyRegistered { job: config.job_name.clone() })
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// Parses a config meant for `job`: an absent `jobName` is filled in, another one refused.
fn parse_for(job: &str, yaml: &str) -> Result<JobConfig> {
    let mut config = JobConfig::from_yaml(yaml)?;
    if config.job_name.is_empty() {
        config.job_name = job.to_owned();
    } else if config.job_name != job {
        return Err(Error::Refused {
            job: job.to_owned(),
            reason: format!(
                "the config names job {:?}; a job cannot be renamed (add a new one instead)",
                config.job_name
            ),
        });
    }
    Ok(config)
}

fn no_job(job: &str) -> Error {
    Error::NoSuchJob { job: job.to_owned() }
}
