//! The job's `config` node: publishing a local config at start-up with ElasticJob's overwrite
//! rule, and reading a changed one.

use crate::error::{Error, Result};
use crate::layout::JobPaths;
use crate::registry::{CoordinatorRegistry, CreateMode, RegistryError};

use super::{JobConfig, KnownTypes};

/// Publishes `local` for its job and returns the config the job must run with.
///
/// The local config is validated first: an invalid one fails before the registry is touched.
/// Then, as in ElasticJob: no stored config, or `overwrite: true` → the local one is written and
/// used; otherwise the stored one wins (an operator may have changed it through a console). A
/// stored config that is not a job config at all (garbage: not text, not YAML of a config) is
/// no one's intent: the local one is written over it, as the job's leader would. One that
/// parses but does not validate, or names another job, is refused unless `overwrite` is on,
/// naming the problem instead of running with it.
pub async fn publish(
    registry: &dyn CoordinatorRegistry,
    local: &JobConfig,
    known: &KnownTypes,
) -> Result<JobConfig> {
    local.validate_with(known)?;
    let paths = JobPaths::new(&local.job_name);
    let yaml = local.to_yaml()?;
    let stored = registry.get(&paths.config()).await?;
    let Some(stored) = stored else {
        match registry.create(&paths.config(), yaml.as_bytes(), CreateMode::Persistent).await {
            Ok(_) => return Ok(local.clone()),
            // Another instance published first: fall through to reading theirs.
            Err(RegistryError::NodeExists { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        return Box::pin(publish(registry, local, known)).await;
    };
    if local.overwrite {
        if stored.data != yaml.as_bytes() {
            registry.set(&paths.config(), yaml.as_bytes(), None).await?;
        }
        return Ok(local.clone());
    }
    if is_garbage(&stored.data) {
        // Fenced: an operator's fix meanwhile wins.
        match registry.set(&paths.config(), yaml.as_bytes(), Some(stored.version)).await {
            Ok(_) => return Ok(local.clone()),
            Err(RegistryError::BadVersion { .. } | RegistryError::NoNode { .. }) => {
                return Box::pin(publish(registry, local, known)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
    parse_stored(&local.job_name, &stored.data, known)
        .map_err(|reason| Error::StoredConfigUnusable { job: local.job_name.clone(), reason })
}

/// Whether a stored config is not a job config at all (as opposed to one that does not
/// validate).
fn is_garbage(data: &[u8]) -> bool {
    std::str::from_utf8(data).map_or(true, |text| JobConfig::from_yaml(text).is_err())
}

/// Parses and validates a stored config; the error is a one-line reason.
pub fn parse_stored(job: &str, data: &[u8], known: &KnownTypes) -> Result<JobConfig, String> {
    let text = std::str::from_utf8(data).map_err(|_| "config node is not UTF-8 text".to_owned())?;
    let config = JobConfig::from_yaml(text).map_err(|e| e.to_string())?;
    config.validate_with(known).map_err(|e| e.to_string())?;
    if config.job_name != job {
        return Err(format!("it names job {:?}, not {job:?}", config.job_name));
    }
    Ok(config)
}
