//! Which key ranges a snapshot reads for a set of watched ranges.
//!
//! A scheduler watches some twenty ranges per job (its config, servers, instances, leader
//! nodes, and each item's nodes; see the core's narrow scope), all under the job's root. Read
//! one by one, a resync of a scheduler of 10,000 jobs was 200,000 range requests, and the
//! narrowing of a newly registered job twenty. Ranges that share their first path segment (a
//! job's root) are read instead as that root's subtree, one paged request for the job, and
//! the nodes none of them covers are dropped on arrival. What the subtree holds beyond the
//! scope is a job's other nodes (other instances' ledgers and running markers), of the same
//! order as what the scope covers.

use std::collections::BTreeMap;

use shardcron_core::registry::path;

use crate::watched::Range;

/// One read of a snapshot: the range to read, and the watched ranges that keep a node of it
/// (`None`: every node it holds is covered).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Read<'a> {
    pub range: Range,
    pub keep: Option<Vec<&'a Range>>,
}

impl Read<'_> {
    /// Whether the node at `at`, found by this read, is covered by the watched ranges.
    pub fn keeps(&self, at: &str) -> bool {
        self.keep.as_ref().is_none_or(|ranges| ranges.iter().any(|r| covers(r, at)))
    }
}

/// Whether watched range `range` covers the node at `at`.
fn covers(range: &Range, at: &str) -> bool {
    let of = range.path();
    if !range.is_subtree() {
        return at == of;
    }
    of == path::ROOT
        || at.strip_prefix(of).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The first segment of `at` as a path (`/job` for `/job/config`); the root for the root.
fn first_segment(at: &str) -> &str {
    match at.get(1..).and_then(|rest| rest.find('/')) {
        Some(end) => &at[..end + 1],
        None => at,
    }
}

/// The reads that together hold every node `ranges` cover: one read per first path segment
/// the ranges share with another (its subtree, filtered), the others as they are.
pub(crate) fn plan<'a>(ranges: &[&'a Range]) -> Vec<Read<'a>> {
    let mut groups: BTreeMap<&str, Vec<&'a Range>> = BTreeMap::new();
    for &range in ranges {
        groups.entry(first_segment(range.path())).or_default().push(range);
    }
    groups
        .into_iter()
        .map(|(root, group)| match group.as_slice() {
            [only] => Read { range: (*only).clone(), keep: None },
            _ => Read { range: Range::subtree(root), keep: Some(group) },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subtree(p: &str) -> Range {
        Range::subtree(p)
    }

    fn node(p: &str) -> Range {
        Range::node(p).expect("not the root")
    }

    #[test]
    fn the_first_segment_is_the_jobs_root() {
        assert_eq!(first_segment("/job/config"), "/job");
        assert_eq!(first_segment("/job"), "/job");
        assert_eq!(first_segment("/"), "/");
        assert_eq!(first_segment("/a/b/c"), "/a");
    }

    #[test]
    fn ranges_of_one_job_are_read_as_its_subtree_and_filtered() {
        let (config, item, leader) =
            (subtree("/j/config"), node("/j/sharding/0"), node("/j/leader"));
        let alone = subtree("/k");
        let ranges = [&config, &item, &alone, &leader];
        let reads = plan(&ranges);
        assert_eq!(reads.len(), 2);
        let job = &reads[0];
        assert_eq!(job.range, subtree("/j"));
        assert!(job.keeps("/j/config"));
        assert!(job.keeps("/j/config/x"));
        assert!(job.keeps("/j/sharding/0"));
        assert!(job.keeps("/j/leader"));
        // A node entry covers the node, not its children; a subtree not its look-alikes.
        assert!(!job.keeps("/j/sharding/0/running"));
        assert!(!job.keeps("/j/leader/election"));
        assert!(!job.keeps("/j/configs"));
        assert!(!job.keeps("/j/sharding/1"));
        assert!(!job.keeps("/j"));
        assert_eq!(reads[1], Read { range: subtree("/k"), keep: None });
    }

    #[test]
    fn a_range_alone_under_its_root_is_read_as_it_is() {
        let item = node("/j/sharding/0");
        let reads = plan(&[&item]);
        assert_eq!(reads, vec![Read { range: node("/j/sharding/0"), keep: None }]);
        assert!(plan(&[]).is_empty());
    }

    #[test]
    fn the_root_subtree_covers_everything() {
        let (root, other) = (subtree("/"), node("/j"));
        let reads = plan(&[&root]);
        assert_eq!(reads, vec![Read { range: subtree("/"), keep: None }]);
        assert!(covers(&root, "/anything/below"));
        // The root's group holds only the root's subtree (the root has no node range).
        assert_eq!(plan(&[&root, &other]).len(), 2);
    }
}
