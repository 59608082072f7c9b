//! [`ShardingStrategies`]: strategies by `jobShardingStrategyType`, built-ins plus custom ones.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use super::{
    Assignment, AverageAllocation, OdevitySortByName, RoundRobinByName, ShardingError,
    ShardingStrategy,
};

/// The type names of the built-in strategies, in registration order.
pub const BUILTIN_STRATEGY_TYPES: [&str; 3] =
    [AverageAllocation::TYPE, OdevitySortByName::TYPE, RoundRobinByName::TYPE];

/// The strategy used when a config names none (`jobShardingStrategyType` absent or empty).
pub const DEFAULT_STRATEGY_TYPE: &str = AverageAllocation::TYPE;

/// Strategies keyed by type name. [`Default`] holds the three built-ins; add custom ones with
/// [`register`](Self::register).
///
/// ```
/// use shardcron_core::sharding::ShardingStrategies;
/// let strategies = ShardingStrategies::default();
/// let assignment = strategies.shard(Some("AVG_ALLOCATION"), "job", &["a", "b", "c"], 8)?;
/// assert_eq!(assignment.items("a"), Some(&[0, 1, 6][..]));
/// assert_eq!(assignment.items("c"), Some(&[4, 5][..]));
/// # Ok::<(), shardcron_core::sharding::ShardingError>(())
/// ```
#[derive(Clone, Debug)]
pub struct ShardingStrategies {
    /// Shared: every job's protocol holds the scheduler's set, and a clone per job would copy
    /// the map (about a kilobyte per job with the two sets of [`KnownTypes`](crate::config::KnownTypes)).
    by_type: Arc<BTreeMap<String, Arc<dyn ShardingStrategy>>>,
}

impl Default for ShardingStrategies {
    fn default() -> Self {
        let builtins: [Arc<dyn ShardingStrategy>; 3] =
            [Arc::new(AverageAllocation), Arc::new(OdevitySortByName), Arc::new(RoundRobinByName)];
        let by_type = builtins
            .into_iter()
            .map(|strategy| (strategy.type_name().to_string(), strategy))
            .collect();
        Self { by_type: Arc::new(by_type) }
    }
}

impl ShardingStrategies {
    /// Adds a custom strategy under its [`type_name`](ShardingStrategy::type_name).
    ///
    /// Names are unique: replacing a strategy (built-in or not) silently would change assignments
    /// of running jobs, so a clash is an error.
    pub fn register(&mut self, strategy: Arc<dyn ShardingStrategy>) -> Result<(), ShardingError> {
        let name = strategy.type_name();
        if name.is_empty() {
            return Err(ShardingError::EmptyStrategyName);
        }
        if self.by_type.contains_key(name) {
            return Err(ShardingError::DuplicateStrategy { name: name.to_string() });
        }
        Arc::make_mut(&mut self.by_type).insert(name.to_string(), strategy);
        Ok(())
    }

    /// The strategy registered under exactly `type_name` (case-sensitive, as in ElasticJob).
    pub fn get(&self, type_name: &str) -> Result<&Arc<dyn ShardingStrategy>, ShardingError> {
        self.by_type.get(type_name).ok_or_else(|| ShardingError::UnknownStrategy {
            name: type_name.to_string(),
            known: self.type_names().collect::<Vec<_>>().join(", "),
        })
    }

    /// ElasticJob's lookup rule: an absent or empty type means [`DEFAULT_STRATEGY_TYPE`].
    pub fn resolve(
        &self,
        type_name: Option<&str>,
    ) -> Result<&Arc<dyn ShardingStrategy>, ShardingError> {
        match type_name {
            None | Some("") => self.get(DEFAULT_STRATEGY_TYPE),
            Some(name) => self.get(name),
        }
    }

    /// True when a strategy is registered under exactly `type_name`.
    pub fn contains(&self, type_name: &str) -> bool {
        self.by_type.contains_key(type_name)
    }

    /// The registered type names, sorted.
    pub fn type_names(&self) -> impl Iterator<Item = &str> {
        self.by_type.keys().map(String::as_str)
    }

    /// Resolves the strategy, checks the input and shards, verifying the result.
    ///
    /// `instances` must already be in sharding order ([`sort_for_sharding`](super::sort_for_sharding))
    /// when the result should match a cluster's; they are used as given.
    pub fn shard(
        &self,
        type_name: Option<&str>,
        job_name: &str,
        instances: &[&str],
        total_count: u32,
    ) -> Result<Assignment, ShardingError> {
        let strategy = self.resolve(type_name)?;
        check_instances(instances)?;
        let assignment = strategy.shard(job_name, instances, total_count);
        assignment.verify(instances, total_count).map_err(|defect| {
            ShardingError::InvalidAssignment { strategy: strategy.type_name().to_string(), defect }
        })?;
        Ok(assignment)
    }
}

/// Rejects empty and repeated instance ids, naming the first offender.
pub fn check_instances(instances: &[&str]) -> Result<(), ShardingError> {
    // Checked in input order, so the reported offender is deterministic whatever the hasher.
    let mut seen = HashSet::with_capacity(instances.len());
    for (position, id) in instances.iter().enumerate() {
        if id.is_empty() {
            return Err(ShardingError::EmptyInstanceId { position });
        }
        if !seen.insert(*id) {
            return Err(ShardingError::DuplicateInstance { instance: id.to_string() });
        }
    }
    Ok(())
}
