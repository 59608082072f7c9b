//! [`Extensions`]: the application's shared state, registered once with the scheduler
//! ([`SchedulerBuilder::extension`](crate::runtime::SchedulerBuilder::extension)) and reachable
//! from every item's context by its type, instead of each job capturing its own `Arc`s.

use std::any::{Any, TypeId};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// Values keyed by their type, at most one of each. Cheap to clone (shared).
///
/// ```
/// use shardcron_core::job::Extensions;
/// struct Database { url: String }
/// let mut extensions = Extensions::new();
/// extensions.insert(Database { url: "postgres://db/orders".into() });
/// assert_eq!(extensions.get::<Database>().map(|db| db.url.as_str()), Some("postgres://db/orders"));
/// assert!(extensions.get::<String>().is_none());
/// ```
#[derive(Clone, Default)]
pub struct Extensions {
    by_type: Arc<BTreeMap<TypeId, Arc<dyn Any + Send + Sync>>>,
}

impl Extensions {
    /// No values.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `value`, replacing the value of the same type if there was one.
    pub fn insert<T: Send + Sync + 'static>(&mut self, value: T) {
        Arc::make_mut(&mut self.by_type).insert(TypeId::of::<T>(), Arc::new(value));
    }

    /// The value of type `T`, if one was inserted.
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.by_type.get(&TypeId::of::<T>()).and_then(|value| value.downcast_ref::<T>())
    }

    /// How many values there are.
    pub fn len(&self) -> usize {
        self.by_type.len()
    }

    /// True when there is none.
    pub fn is_empty(&self) -> bool {
        self.by_type.is_empty()
    }
}

impl fmt::Debug for Extensions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Extensions").field("len", &self.by_type.len()).finish()
    }
}
