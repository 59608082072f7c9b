//! The job's `config` node: publishing a local config at start-up with ElasticJob's overwrite
//! rule, and reading a changed one.

use crate::error::{Error, Result};
use crate::layout::JobPaths;
use crate::registry::{CoordinatorRegistry, CreateMode, RegistryError};

use super::{ConfigError, JobConfig, KnownTypes};

/// Why a config read from the registry cannot be used: what is wrong with the node.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoredConfigError {
    /// The node's bytes are not UTF-8 text (binary garbage).
    #[error("the config node is not UTF-8 text")]
    NotText(#[source] std::str::Utf8Error),
    /// The text is not a job config (not YAML, or a field of the wrong type).
    #[error("{0}")]
    Unreadable(#[source] ConfigError),
    /// The config reads but breaks a rule (a bad cron, a count below 1, an unknown kind...).
    #[error("{0}")]
    Invalid(#[source] ConfigError),
    /// The config is another job's (copied over by hand?).
    #[error("it names job {named:?}, not {expected:?}")]
    OtherJob {
        /// The job the stored config names.
        named: String,
        /// The job whose node it is.
        expected: String,
    },
}

/// A config as [`publish`] left it: the one the job must run with, and a fingerprint of the
/// stored bytes that read as it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Published {
    /// The config the job runs with.
    pub config: JobConfig,
    /// [`fingerprint`] of the `config` node's bytes that read as `config`: a later look at the
    /// node that finds the same bytes need not parse them again.
    pub fingerprint: u64,
    /// The bytes of a stored config that was no job config at all (garbage), which the local
    /// one replaced: the caller reports them (nobody else will: the node reads now).
    pub replaced_garbage: Option<Vec<u8>>,
}

/// A fingerprint of a stored config's bytes (SipHash with fixed keys: the same in every run of
/// a build, and no accidental collision between a config and garbage written over it).
pub fn fingerprint(data: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::hash::DefaultHasher::new();
    data.hash(&mut hasher);
    hasher.finish()
}

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
) -> Result<Published> {
    local.validate_with(known)?;
    let paths = JobPaths::new(&local.job_name);
    let yaml = local.to_yaml()?;
    let stored = registry.get(&paths.config()).await?;
    let Some(stored) = stored else {
        match registry.create(&paths.config(), yaml.as_bytes(), CreateMode::Persistent).await {
            Ok(_) => {
                return Ok(Published {
                    config: local.clone(),
                    fingerprint: fingerprint(yaml.as_bytes()),
                    replaced_garbage: None,
                })
            }
            // Another instance published first: fall through to reading theirs.
            Err(RegistryError::NodeExists { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        return Box::pin(publish(registry, local, known)).await;
    };
    if local.overwrite {
        let mut replaced_garbage = None;
        if stored.data != yaml.as_bytes() {
            registry.set(&paths.config(), yaml.as_bytes(), None).await?;
            // Garbage it wrote over is reported as any replaced garbage is (a job file with
            // `overwrite: true`, 1 instance, `garbage` seed 3,315,688,222: a restart wrote
            // over garbage in the config node, reported by nobody).
            if read_config(&stored.data).is_none() {
                replaced_garbage = Some(stored.data);
            }
        }
        return Ok(Published {
            config: local.clone(),
            fingerprint: fingerprint(yaml.as_bytes()),
            replaced_garbage,
        });
    }
    // Ours already, byte for byte (every instance of a cluster that runs one config): nothing
    // to parse (a simulated cluster's start parsed it once per instance and job).
    if stored.data == yaml.as_bytes() {
        return Ok(Published {
            config: local.clone(),
            fingerprint: fingerprint(&stored.data),
            replaced_garbage: None,
        });
    }
    // Parsed once: what reads as no job config at all is garbage, the rest is checked.
    let Some(parsed) = read_config(&stored.data) else {
        // Fenced: an operator's fix meanwhile wins.
        match registry.set(&paths.config(), yaml.as_bytes(), Some(stored.version)).await {
            Ok(_) => {
                return Ok(Published {
                    config: local.clone(),
                    fingerprint: fingerprint(yaml.as_bytes()),
                    replaced_garbage: Some(stored.data),
                })
            }
            Err(RegistryError::BadVersion { .. } | RegistryError::NoNode { .. }) => {
                return Box::pin(publish(registry, local, known)).await;
            }
            Err(e) => return Err(e.into()),
        }
    };
    let config = checked(&local.job_name, parsed, known)
        .map_err(|source| Error::StoredConfigUnusable { job: local.job_name.clone(), source })?;
    Ok(Published { config, fingerprint: fingerprint(&stored.data), replaced_garbage: None })
}

/// A stored config as a job config; `None` for one that is not a job config at all (not text,
/// not YAML of a config), as opposed to one that does not validate.
fn read_config(data: &[u8]) -> Option<JobConfig> {
    JobConfig::from_yaml(std::str::from_utf8(data).ok()?).ok()
}

/// Parses and validates a stored config.
pub fn parse_stored(
    job: &str,
    data: &[u8],
    known: &KnownTypes,
) -> std::result::Result<JobConfig, StoredConfigError> {
    let text = std::str::from_utf8(data).map_err(StoredConfigError::NotText)?;
    let config = JobConfig::from_yaml(text).map_err(StoredConfigError::Unreadable)?;
    checked(job, config, known)
}

/// A parsed stored config, validated and checked to be `job`'s.
fn checked(
    job: &str,
    config: JobConfig,
    known: &KnownTypes,
) -> std::result::Result<JobConfig, StoredConfigError> {
    config.validate_with(known).map_err(StoredConfigError::Invalid)?;
    if config.job_name != job {
        return Err(StoredConfigError::OtherJob {
            named: config.job_name,
            expected: job.to_owned(),
        });
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(job: &str, cron: &str) -> Vec<u8> {
        let config = JobConfig::builder(job).cron(cron).sharding_total_count(2).build();
        match config {
            Ok(c) => c.to_yaml().map(String::into_bytes).unwrap_or_default(),
            // An invalid cron is refused by the builder: write the YAML by hand.
            Err(_) => {
                format!("jobName: {job}\ncron: '{cron}'\nshardingTotalCount: 2\n").into_bytes()
            }
        }
    }

    #[test]
    fn a_stored_config_says_what_is_wrong_with_it() {
        let known = KnownTypes::default();
        assert!(parse_stored("j", &stored("j", "0/5 * * * * ?"), &known).is_ok());
        assert!(matches!(
            parse_stored("j", &[0xff, 0xfe], &known),
            Err(StoredConfigError::NotText(_))
        ));
        assert!(matches!(
            parse_stored("j", b"cron: [unclosed", &known),
            Err(StoredConfigError::Unreadable(_))
        ));
        assert!(matches!(
            parse_stored("j", &stored("j", "not a cron"), &known),
            Err(StoredConfigError::Invalid(ConfigError::Cron { .. }))
        ));
        let other = parse_stored("j", &stored("k", "0/5 * * * * ?"), &known);
        assert_eq!(
            other,
            Err(StoredConfigError::OtherJob { named: "k".into(), expected: "j".into() })
        );
    }

    #[test]
    fn an_emptied_config_node_is_garbage_not_a_nameless_config() {
        // Garbage, which a starting instance writes over, rather than a config that breaks a
        // rule, which it refuses to replace (1 × 3 `garbage` seed 1,791,321,886: the only
        // instance, restarted, was refused for good).
        let known = KnownTypes::default();
        for data in [&b""[..], b"\n  \n", b"# nothing\n---\n"] {
            assert!(
                matches!(parse_stored("j", data, &known), Err(StoredConfigError::Unreadable(_))),
                "{data:?}"
            );
        }
    }
}
