//! [`Assignment`]: the result of sharding, and the check that it is a valid one.

use std::collections::BTreeMap;
use std::fmt;

/// Which sharding items each instance runs: instance id → items in ascending order.
///
/// Every instance handed to the strategy appears, also those that get no item (an empty list),
/// because callers print or persist per instance. Iteration is in instance-id order (a `BTreeMap`),
/// so the value is deterministic whatever order the strategy produced it in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Assignment {
    items: BTreeMap<String, Vec<u32>>,
}

impl Assignment {
    /// An assignment with no instance at all (what every strategy returns for no instances).
    pub fn new() -> Self {
        Self::default()
    }

    /// An assignment listing each instance with no item yet.
    pub fn with_instances(instances: &[&str]) -> Self {
        let items = instances.iter().map(|id| (id.to_string(), Vec::new())).collect();
        Self { items }
    }

    /// Gives `items` to `instance`, added to what it already has, keeping the list ascending.
    ///
    /// Adding rather than replacing means a strategy that sees an instance twice still assigns
    /// every item; duplicates in the input are rejected earlier by
    /// [`ShardingStrategies::shard`](super::ShardingStrategies::shard).
    pub fn assign(&mut self, instance: &str, items: impl IntoIterator<Item = u32>) {
        let list = match self.items.get_mut(instance) {
            Some(list) => list,
            None => self.items.entry(instance.to_string()).or_default(),
        };
        let sorted_before = list.len();
        list.extend(items);
        // Built-in strategies append ranges in order; sort only when needed.
        if !list[sorted_before.saturating_sub(1)..].is_sorted() {
            list.sort_unstable();
        }
    }

    /// The items of `instance`, or `None` if it was not part of the sharding.
    pub fn items(&self, instance: &str) -> Option<&[u32]> {
        self.items.get(instance).map(Vec::as_slice)
    }

    /// `(instance, items)` pairs in instance-id order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u32])> {
        self.items.iter().map(|(id, items)| (id.as_str(), items.as_slice()))
    }

    /// The instances, in instance-id order.
    pub fn instances(&self) -> impl Iterator<Item = &str> {
        self.items.keys().map(String::as_str)
    }

    /// Number of instances (including those without items).
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True when no instance took part.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Total number of assigned items over all instances.
    pub fn item_count(&self) -> usize {
        self.items.values().map(Vec::len).sum()
    }

    /// Item → owner, the shape the registry stores (`/sharding/{item}/instance`).
    pub fn owners(&self) -> BTreeMap<u32, &str> {
        self.iter().flat_map(|(id, items)| items.iter().map(move |item| (*item, id))).collect()
    }

    /// The underlying map.
    pub fn as_map(&self) -> &BTreeMap<String, Vec<u32>> {
        &self.items
    }

    /// Consumes the assignment into its map.
    pub fn into_map(self) -> BTreeMap<String, Vec<u32>> {
        self.items
    }

    /// Checks that this is a complete assignment of `0..total_count` over exactly `instances`:
    /// every instance present, no other instance, every item exactly once.
    ///
    /// Built-in strategies always pass; this guards the runtime against custom strategies.
    pub fn verify(&self, instances: &[&str], total_count: u32) -> Result<(), AssignmentDefect> {
        if let Some(missing) = instances.iter().find(|id| !self.items.contains_key(**id)) {
            return Err(AssignmentDefect::MissingInstance(missing.to_string()));
        }
        if self.items.len() != instances.len() {
            // Every input id is present, so a size difference means an id we did not hand out.
            let unknown = self.instances().find(|id| !instances.contains(id));
            if let Some(unknown) = unknown {
                return Err(AssignmentDefect::UnknownInstance(unknown.to_string()));
            }
        }
        let mut seen = vec![false; total_count as usize];
        for (_, items) in self.iter() {
            for &item in items {
                let Some(slot) = seen.get_mut(item as usize) else {
                    return Err(AssignmentDefect::ItemOutOfRange { item, total_count });
                };
                if *slot {
                    return Err(AssignmentDefect::DuplicateItem(item));
                }
                *slot = true;
            }
        }
        match seen.iter().position(|assigned| !assigned) {
            // `position < total_count`, a u32, so the cast is lossless.
            Some(item) if !instances.is_empty() => {
                Err(AssignmentDefect::UnassignedItem(item as u32))
            }
            _ => Ok(()),
        }
    }
}

/// Builds an assignment from `(instance, items)` pairs in any order; an instance listed twice
/// gets the items of both entries. This is how the built-in strategies build their result: one
/// sort of the ids and a bulk build of the map, instead of one tree insertion per instance.
impl<S: Into<String>> FromIterator<(S, Vec<u32>)> for Assignment {
    fn from_iter<T: IntoIterator<Item = (S, Vec<u32>)>>(iter: T) -> Self {
        let mut pairs: Vec<(String, Vec<u32>)> =
            iter.into_iter().map(|(id, items)| (id.into(), items)).collect();
        pairs.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut merged: Vec<(String, Vec<u32>)> = Vec::with_capacity(pairs.len());
        for (id, items) in pairs {
            match merged.last_mut() {
                Some((last, list)) if *last == id => list.extend(items),
                _ => merged.push((id, items)),
            }
        }
        for (_, list) in &mut merged {
            if !list.is_sorted() {
                list.sort_unstable();
            }
        }
        // Already sorted and unique: the map is built in one pass.
        Self { items: merged.into_iter().collect() }
    }
}

/// What is wrong with an [`Assignment`] that failed [`Assignment::verify`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AssignmentDefect {
    /// An input instance is absent from the result (it must appear, with an empty list if idle).
    MissingInstance(String),
    /// The result names an instance that was not in the input.
    UnknownInstance(String),
    /// An item is `>= total_count`.
    ItemOutOfRange {
        /// The offending item.
        item: u32,
        /// The job's sharding total count.
        total_count: u32,
    },
    /// An item is assigned more than once.
    DuplicateItem(u32),
    /// An item is assigned to nobody although there were instances.
    UnassignedItem(u32),
}

impl fmt::Display for AssignmentDefect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MissingInstance(id) => write!(f, "instance {id:?} is missing from the result"),
            Self::UnknownInstance(id) => write!(f, "instance {id:?} was not among the inputs"),
            Self::ItemOutOfRange { item, total_count } => {
                write!(f, "item {item} is outside 0..{total_count}")
            }
            Self::DuplicateItem(item) => write!(f, "item {item} is assigned more than once"),
            Self::UnassignedItem(item) => write!(f, "item {item} is assigned to no instance"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Assignment {
        let mut a = Assignment::with_instances(&["a", "b", "c"]);
        a.assign("a", [0, 1]);
        a.assign("b", [2]);
        a
    }

    #[test]
    fn keeps_idle_instances_and_sorts_items() {
        let mut a = sample();
        a.assign("a", [5, 3]);
        assert_eq!(a.items("a"), Some(&[0, 1, 3, 5][..]));
        assert_eq!(a.items("c"), Some(&[][..]));
        assert_eq!(a.items("zz"), None);
        assert_eq!(a.len(), 3);
        assert_eq!(a.item_count(), 5);
        assert_eq!(a.instances().collect::<Vec<_>>(), ["a", "b", "c"]);
    }

    #[test]
    fn owners_maps_items_to_instances() {
        let assignment = sample();
        let owners = assignment.owners();
        assert_eq!(owners.into_iter().collect::<Vec<_>>(), [(0, "a"), (1, "a"), (2, "b")]);
    }

    #[test]
    fn verify_accepts_a_complete_assignment() {
        assert_eq!(sample().verify(&["a", "b", "c"], 3), Ok(()));
        assert_eq!(Assignment::new().verify(&[], 3), Ok(()));
    }

    #[test]
    fn verify_names_each_defect() {
        let cases: Vec<(Assignment, &[&str], u32, &str)> = vec![
            (sample(), &["a", "b", "c", "d"], 3, "instance \"d\" is missing from the result"),
            (sample(), &["a", "b"], 3, "instance \"c\" was not among the inputs"),
            (sample(), &["a", "b", "c"], 2, "item 2 is outside 0..2"),
            (sample(), &["a", "b", "c"], 4, "item 3 is assigned to no instance"),
            (
                [("a".to_string(), vec![0, 1]), ("b".to_string(), vec![1, 2])]
                    .into_iter()
                    .collect(),
                &["a", "b"],
                3,
                "item 1 is assigned more than once",
            ),
        ];
        for (assignment, instances, total, message) in cases {
            let defect = assignment.verify(instances, total).unwrap_err();
            assert_eq!(defect.to_string(), message);
        }
    }
}
