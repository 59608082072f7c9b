//! The typed forms of the config's named choices: [`ShardingStrategyType`] and
//! [`ErrorHandlerType`]. The YAML keeps ElasticJob's strings (`AVG_ALLOCATION`, `LOG`); these
//! enums are what the application writes and reads, with a `Custom` variant for names it
//! registers itself.

use std::fmt;

use crate::sharding::{AverageAllocation, OdevitySortByName, RoundRobinByName};

/// Which sharding strategy divides a job's items among its instances
/// (`jobShardingStrategyType`).
///
/// ```
/// use shardcron_core::config::ShardingStrategyType;
/// assert_eq!(ShardingStrategyType::RoundRobin.as_str(), "ROUND_ROBIN");
/// assert_eq!(ShardingStrategyType::from_name("BY_ZONE"), ShardingStrategyType::Custom("BY_ZONE".into()));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ShardingStrategyType {
    /// `AVG_ALLOCATION`, the default: items in equal runs, the remainder to the first instances.
    #[default]
    AverageAllocation,
    /// `ODEVITY`: instances sorted by name, ascending or descending by the job name's hash.
    OdevitySortByName,
    /// `ROUND_ROBIN`: instances rotated by the job name's hash.
    RoundRobin,
    /// A strategy the application registers under this name
    /// ([`ShardingStrategies::register`](crate::sharding::ShardingStrategies::register)).
    Custom(String),
}

impl ShardingStrategyType {
    /// The name written in the YAML.
    pub fn as_str(&self) -> &str {
        match self {
            Self::AverageAllocation => AverageAllocation::TYPE,
            Self::OdevitySortByName => OdevitySortByName::TYPE,
            Self::RoundRobin => RoundRobinByName::TYPE,
            Self::Custom(name) => name,
        }
    }

    /// The type a YAML name stands for; the empty name is the default, as in ElasticJob.
    pub fn from_name(name: &str) -> Self {
        match name {
            "" => Self::AverageAllocation,
            AverageAllocation::TYPE => Self::AverageAllocation,
            OdevitySortByName::TYPE => Self::OdevitySortByName,
            RoundRobinByName::TYPE => Self::RoundRobin,
            custom => Self::Custom(custom.to_owned()),
        }
    }
}

impl fmt::Display for ShardingStrategyType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What happens when an item fails (`jobErrorHandlerType`).
///
/// ```
/// use shardcron_core::config::ErrorHandlerType;
/// assert_eq!(ErrorHandlerType::from_name("THROW"), ErrorHandlerType::Throw);
/// assert_eq!(ErrorHandlerType::Custom("PAGER".into()).as_str(), "PAGER");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ErrorHandlerType {
    /// `LOG`, the default: a `tracing` warning; the next fire runs as usual.
    #[default]
    Log,
    /// `THROW`: the fire reports the failure as an error event.
    Throw,
    /// `IGNORE`: nothing.
    Ignore,
    /// A handler the application registers under this name
    /// ([`ErrorHandlers`](crate::job::ErrorHandlers)).
    Custom(String),
}

impl ErrorHandlerType {
    /// The name written in the YAML.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Log => "LOG",
            Self::Throw => "THROW",
            Self::Ignore => "IGNORE",
            Self::Custom(name) => name,
        }
    }

    /// The type a YAML name stands for; the empty name is the default, as in ElasticJob.
    pub fn from_name(name: &str) -> Self {
        match name {
            "" | "LOG" => Self::Log,
            "THROW" => Self::Throw,
            "IGNORE" => Self::Ignore,
            custom => Self::Custom(custom.to_owned()),
        }
    }
}

impl fmt::Display for ErrorHandlerType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BUILTIN_ERROR_HANDLER_TYPES;
    use crate::sharding::BUILTIN_STRATEGY_TYPES;

    #[test]
    fn every_builtin_name_maps_to_its_own_variant_and_back() {
        for name in BUILTIN_STRATEGY_TYPES {
            let typed = ShardingStrategyType::from_name(name);
            assert!(!matches!(typed, ShardingStrategyType::Custom(_)), "{name}");
            assert_eq!(typed.as_str(), name);
        }
        for name in BUILTIN_ERROR_HANDLER_TYPES {
            let typed = ErrorHandlerType::from_name(name);
            assert!(!matches!(typed, ErrorHandlerType::Custom(_)), "{name}");
            assert_eq!(typed.as_str(), name);
        }
    }
}
