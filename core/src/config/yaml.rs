//! Reading and writing [`JobConfig`] as the YAML ElasticJob keeps in `/{job}/config`.
//!
//! ElasticJob serialises its POJO with SnakeYAML: fields sorted by name, `null` fields and empty
//! lists or maps left out, block style, YAML-1.1-ambiguous strings single-quoted, and
//! `jobExtraConfigurations` items tagged with their Java class (`snakeyaml.rs`). We write the same
//! bytes, except that SnakeYAML folds plain strings longer than 80 columns onto several lines and
//! we do not (both read back the same).
//!
//! On reading, fields we do not know are kept (ElasticJob itself would reject them) so that a
//! config written by a newer version survives a read-modify-write by an older one.

use std::collections::BTreeMap;

use serde_norway::Value;

use super::{ConfigError, JobConfig};

/// Read and written outside serde: see `snakeyaml.rs` for why.
const EXTRA_CONFIGURATIONS: &str = "jobExtraConfigurations";

/// The YAML names of [`JobConfig`]'s fields; any other top-level key is an unknown field.
const KNOWN_FIELDS: [&str; 22] = [
    "jobName",
    "cron",
    "timeZone",
    "shardingTotalCount",
    "shardingItemParameters",
    "jobParameter",
    "monitorExecution",
    "failover",
    "misfire",
    "maxTimeDiffSeconds",
    "reconcileIntervalMinutes",
    "jobShardingStrategyType",
    "jobExecutorServiceHandlerType",
    "jobErrorHandlerType",
    "jobListenerTypes",
    "jobExtraConfigurations",
    "description",
    "props",
    "disabled",
    "overwrite",
    "label",
    "staticSharding",
];

impl JobConfig {
    /// Parses a config from YAML. Absent fields take their defaults; unknown fields are kept.
    ///
    /// This only checks the shape; call [`validate`](Self::validate) before using the config.
    /// An empty document (nothing but blank lines, comments or `---`) is no job config: it is
    /// refused as unreadable rather than read as a config of defaults without a name, so an
    /// emptied `config` node counts as garbage, which a starting instance writes over.
    pub fn from_yaml(text: &str) -> Result<Self, ConfigError> {
        let blank = |line: &str| {
            let line = line.trim();
            line.is_empty() || line.starts_with('#') || line == "---"
        };
        if text.lines().all(blank) {
            return Err(ConfigError::Parse {
                reason: "the document is empty (a job config is a mapping with at least jobName, \
                         cron and shardingTotalCount)"
                    .into(),
            });
        }
        // Two passes over a small document: the typed pass reads scalars the way SnakeYAML
        // would (`jobParameter: 123` is the string "123"), which a pass through `Value` cannot;
        // the untyped pass finds the keys the typed one skipped.
        let mut config: JobConfig = serde_norway::from_str(text).map_err(parse_error)?;
        let document = super::snakeyaml::parse_mapping(text).map_err(parse_error)?;
        for (key, value) in document {
            let Value::String(key) = key else {
                return Err(ConfigError::Parse {
                    reason: format!("top-level key {key:?} is not a string"),
                });
            };
            if key == EXTRA_CONFIGURATIONS {
                // Taken from this pass, which keeps their `!!Class` tags.
                let Value::Sequence(items) = value else {
                    return Err(ConfigError::Parse {
                        reason: format!("{EXTRA_CONFIGURATIONS}: expected a sequence"),
                    });
                };
                config.job_extra_configurations = items;
            } else if !KNOWN_FIELDS.contains(&key.as_str()) {
                config.unknown_fields.insert(key, value);
            }
        }
        Ok(config)
    }

    /// Writes the config as ElasticJob would: fields sorted by name, unset ones left out.
    pub fn to_yaml(&self) -> Result<String, ConfigError> {
        // The YAML of the configs this thread wrote last: every instance of a job writes the
        // same config as it starts (in a simulated cluster, all on one thread), and the
        // emitter costs some 30 µs and 64 KiB of zeroed buffers each time. A pure function of
        // the config: a written config is the same whichever thread wrote it.
        thread_local! {
            static WRITTEN: std::cell::RefCell<std::collections::VecDeque<(JobConfig, String)>> =
                const { std::cell::RefCell::new(std::collections::VecDeque::new()) };
        }
        let known = WRITTEN.with(|w| {
            w.borrow().iter().find(|(config, _)| config == self).map(|(_, yaml)| yaml.clone())
        });
        if let Some(yaml) = known {
            return Ok(yaml);
        }
        let yaml = self.write_yaml()?;
        WRITTEN.with(|w| {
            let mut w = w.borrow_mut();
            if w.len() == WRITTEN_KEPT {
                w.pop_back();
            }
            w.push_front((self.clone(), yaml.clone()));
        });
        Ok(yaml)
    }

    fn write_yaml(&self) -> Result<String, ConfigError> {
        let Value::Mapping(known) = serde_norway::to_value(self).map_err(encode_error)? else {
            return Err(ConfigError::Encode {
                reason: "a job config must encode as a mapping".into(),
            });
        };
        // A BTreeMap sorts keys the way SnakeYAML sorts bean properties (they are ASCII).
        let mut fields: BTreeMap<String, Value> = self.unknown_fields.clone();
        if !self.job_extra_configurations.is_empty() {
            let items = Value::Sequence(self.job_extra_configurations.clone());
            fields.insert(EXTRA_CONFIGURATIONS.to_string(), items);
        }
        for (key, value) in known {
            if let Value::String(key) = key {
                fields.insert(key, value);
            }
        }
        super::snakeyaml::to_string(fields).map_err(encode_error)
    }
}

/// How many written configs [`JobConfig::to_yaml`] keeps per thread: looked through in order,
/// so a handful (the instances of a simulated cluster add a process's jobs in the same order).
const WRITTEN_KEPT: usize = 8;

fn parse_error(err: serde_norway::Error) -> ConfigError {
    ConfigError::Parse { reason: err.to_string() }
}

fn encode_error(err: serde_norway::Error) -> ConfigError {
    ConfigError::Encode { reason: err.to_string() }
}
