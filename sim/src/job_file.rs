//! Reading the jobs of a deployment from ElasticJob YAML, to simulate them.
//!
//! Three shapes are accepted, as ElasticJob users have them:
//! - one or more job configs as ElasticJob keeps them in `/{job}/config` (`jobName: ...`),
//!   one per YAML document (`---` between them), or a list of them;
//! - the Spring Boot starter's `application.yml`: `elasticjob: jobs: {name: {cron: ...}}`
//!   (the map key is the job name; keys the simulator does not need, such as
//!   `elasticJobClass`, are kept and ignored).
//!
//! ```
//! use shardcron_core::sharding::ShardingStrategies;
//! use shardcron_sim::job_configs_from_yaml;
//! let yaml = "elasticjob:\n  jobs:\n    settle:\n      cron: 0/10 * * * * ?\n      \
//!             shardingTotalCount: 2\n      shardingItemParameters: 0=Beijing,1=Shanghai\n";
//! let configs = job_configs_from_yaml(yaml, &ShardingStrategies::default())?;
//! assert_eq!(configs[0].job_name(), "settle");
//! assert_eq!(configs[0].item_parameters()?[&1], "Shanghai");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_norway::{Mapping, Value};
use shardcron_core::config::{ConfigError, JobConfig, KnownTypes};
use shardcron_core::sharding::ShardingStrategies;

/// Why a job file cannot be simulated.
#[derive(Debug, thiserror::Error)]
pub enum JobFileError {
    #[error("cannot read the job file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("YAML document {document} of the job file is not valid YAML: {reason}")]
    Yaml { document: usize, reason: String },
    #[error(
        "YAML document {document} of the job file is not a job: {what}; expected job configs \
         (`jobName: ...`, one per document or a list) or a Spring Boot `elasticjob: jobs:` map"
    )]
    NotAJob { document: usize, what: String },
    #[error("job {job:?} of the job file is unusable: {source}")]
    Invalid {
        job: String,
        #[source]
        source: ConfigError,
    },
    #[error("job {job:?} appears twice in the job file; job names are unique in a namespace")]
    Duplicate { job: String },
    #[error("the job file has no job in it")]
    Empty,
}

/// Reads and validates every job of an ElasticJob YAML file (see the module's doc for the
/// shapes). `strategies` are the sharding strategies the simulated instances know: a job
/// naming another one is refused, as the scheduler would.
pub fn load_job_configs(
    path: &Path,
    strategies: &ShardingStrategies,
) -> Result<Vec<JobConfig>, JobFileError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| JobFileError::Read { path: path.to_owned(), source })?;
    job_configs_from_yaml(&text, strategies)
}

/// [`load_job_configs`] of a YAML text.
pub fn job_configs_from_yaml(
    text: &str,
    strategies: &ShardingStrategies,
) -> Result<Vec<JobConfig>, JobFileError> {
    let known = strategies
        .type_names()
        .fold(KnownTypes::default(), |k, name| k.with_sharding_strategy(name));
    let mut configs = Vec::new();
    let mut names = BTreeSet::new();
    for (k, document) in serde_norway::Deserializer::from_str(text).enumerate() {
        let document_no = k + 1;
        let value = Value::deserialize(document)
            .map_err(|e| JobFileError::Yaml { document: document_no, reason: e.to_string() })?;
        for (job, mapping) in jobs_of(value, document_no)? {
            let yaml = serde_norway::to_string(&Value::Mapping(mapping))
                .map_err(|e| JobFileError::Yaml { document: document_no, reason: e.to_string() })?;
            let invalid = |source| JobFileError::Invalid { job: job.clone(), source };
            let config = JobConfig::from_yaml(&yaml).map_err(invalid)?;
            config.validate_with(&known).map_err(invalid)?;
            if !names.insert(config.job_name().to_owned()) {
                return Err(JobFileError::Duplicate { job: config.job_name().to_owned() });
            }
            configs.push(config);
        }
    }
    if configs.is_empty() {
        return Err(JobFileError::Empty);
    }
    Ok(configs)
}

/// The jobs of one document: `(name as written, its mapping with jobName)`.
fn jobs_of(value: Value, document: usize) -> Result<Vec<(String, Mapping)>, JobFileError> {
    let not_a_job = |what: &str| JobFileError::NotAJob { document, what: what.to_owned() };
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Sequence(items) => {
            let mut jobs = Vec::new();
            for item in items {
                jobs.extend(jobs_of(item, document)?);
            }
            Ok(jobs)
        }
        Value::Mapping(mut map) => {
            if let Some(elasticjob) = map.remove("elasticjob") {
                let Value::Mapping(mut elasticjob) = elasticjob else {
                    return Err(not_a_job("`elasticjob` is not a map"));
                };
                let Some(Value::Mapping(jobs)) = elasticjob.remove("jobs") else {
                    return Err(not_a_job("`elasticjob` has no `jobs` map"));
                };
                let mut out = Vec::new();
                for (name, job) in jobs {
                    let Value::String(name) = name else {
                        return Err(not_a_job("a key of `elasticjob.jobs` is not a job name"));
                    };
                    let Value::Mapping(mut job) = job else {
                        return Err(not_a_job(&format!("`elasticjob.jobs.{name}` is not a map")));
                    };
                    if !job.contains_key("jobName") {
                        job.insert(Value::String("jobName".into()), Value::String(name.clone()));
                    }
                    out.push((name, job));
                }
                return Ok(out);
            }
            match map.get("jobName") {
                Some(Value::String(name)) => Ok(vec![(name.clone(), map)]),
                Some(_) => Err(not_a_job("`jobName` is not a string")),
                None => Err(not_a_job("a map without `jobName`")),
            }
        }
        _ => Err(not_a_job("a scalar")),
    }
}
