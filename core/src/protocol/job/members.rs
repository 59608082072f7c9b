//! The instances of a job as its protocol last saw them.

/// Instance ids, sorted and without duplicates. A sorted `Vec` rather than a `BTreeSet`: a job
/// has a handful of instances, and a `BTreeSet` allocates room for eleven on its first insert
/// (some 280 bytes of every job, and a process may hold thousands of jobs). Iterated in id
/// order, as the set was, so that the protocol's decisions stay deterministic.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Members(Vec<String>);

impl Members {
    /// Adds `id`; true if it was not there.
    pub fn insert(&mut self, id: String) -> bool {
        match self.0.binary_search(&id) {
            Ok(_) => false,
            Err(at) => {
                self.0.insert(at, id);
                true
            }
        }
    }

    /// Removes `id`; true if it was there.
    pub fn remove(&mut self, id: &str) -> bool {
        match self.0.binary_search_by(|m| m.as_str().cmp(id)) {
            Ok(at) => {
                self.0.remove(at);
                true
            }
            Err(_) => false,
        }
    }

    pub fn contains(&self, id: &str) -> bool {
        self.0.binary_search_by(|m| m.as_str().cmp(id)).is_ok()
    }

    /// The ids in order.
    pub fn iter(&self) -> std::slice::Iter<'_, String> {
        self.0.iter()
    }
}

impl FromIterator<String> for Members {
    fn from_iter<I: IntoIterator<Item = String>>(ids: I) -> Self {
        let mut ids: Vec<String> = ids.into_iter().collect();
        ids.sort_unstable();
        ids.dedup();
        ids.shrink_to_fit();
        Members(ids)
    }
}

#[cfg(test)]
mod tests {
    use super::Members;

    #[test]
    fn keeps_ids_sorted_and_once() {
        let mut m: Members = ["b", "a", "b"].into_iter().map(String::from).collect();
        assert_eq!(m.iter().map(String::as_str).collect::<Vec<_>>(), ["a", "b"]);
        assert!(m.insert("c".into()));
        assert!(!m.insert("a".into()));
        assert!(m.contains("c") && !m.contains("d"));
        assert!(m.remove("a") && !m.remove("a"));
        assert_eq!(m.iter().map(String::as_str).collect::<Vec<_>>(), ["b", "c"]);
    }
}
