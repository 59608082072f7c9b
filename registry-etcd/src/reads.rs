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
//!
//! A scope of thousands of jobs is still thousands of requests that way (10,000 jobs: a read
//! of the whole scope took 2.5 s, most of it etcd answering one small request after another).
//! When the namespace holds not many more keys than those jobs' subtrees, the reads are made
//! instead as a few *lanes*: the jobs' subtrees sorted by key and cut into runs of adjacent
//! ones, each run read as the one key interval from its first subtree to its last, in pages,
//! keeping what one of its reads covers. The nodes between two jobs of a run (the jobs of
//! other processes, other roots) are read and dropped: the caller counts the namespace's nodes
//! first and takes lanes only where that stays cheap.

use std::collections::BTreeMap;

use shardcron_core::registry::path;

use crate::keys::KeySpace;
use crate::watched::{prefix_end, Range};

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

/// A key interval read in pages, and the reads whose ranges lie in it, by their first key.
#[derive(Debug)]
pub(crate) struct Lane<'a> {
    /// The interval's first key.
    pub from: Vec<u8>,
    /// The first key after the interval.
    pub to: Vec<u8>,
    spans: Vec<Span<'a>>,
}

/// One read's key interval in a lane.
#[derive(Debug)]
struct Span<'a> {
    from: Vec<u8>,
    to: Vec<u8>,
    read: &'a Read<'a>,
}

impl Lane<'_> {
    /// Whether the node at `at`, stored at `key` and found in this lane, is covered by the
    /// watched ranges: it lies in one read's interval, and that read keeps it.
    pub fn keeps(&self, key: &[u8], at: &str) -> bool {
        let after = self.spans.partition_point(|span| span.from.as_slice() <= key);
        after
            .checked_sub(1)
            .and_then(|i| self.spans.get(i))
            .is_some_and(|span| key < span.to.as_slice() && span.read.keeps(at))
    }
}

/// `reads` as at most `count` lanes of adjacent reads (by key), each about as many reads as
/// the others; `None` when one read is the root's subtree (its interval holds all the
/// others': read it alone, as it is).
pub(crate) fn lanes<'a>(
    reads: &'a [Read<'a>],
    keys: &KeySpace,
    count: usize,
) -> Option<Vec<Lane<'a>>> {
    if reads.iter().any(|read| read.range.is_subtree() && read.range.path() == path::ROOT) {
        return None;
    }
    let mut spans: Vec<Span<'a>> = reads
        .iter()
        .map(|read| {
            let from = read.range.key(keys);
            // A single key's interval ends right after it.
            let to = read.range.end(keys).unwrap_or_else(|| {
                let mut next = from.clone();
                next.push(0);
                next
            });
            Span { from, to, read }
        })
        .collect();
    // Subtrees of distinct first segments, and nodes alone under theirs, never overlap: sorted
    // by their first keys, each ends before the next begins.
    spans.sort_by(|a, b| a.from.cmp(&b.from));
    let per_lane = spans.len().div_ceil(count.max(1)).max(1);
    let mut lanes = Vec::new();
    let mut spans = spans.into_iter().peekable();
    while spans.peek().is_some() {
        let run: Vec<Span<'a>> = spans.by_ref().take(per_lane).collect();
        let (Some(first), Some(last)) = (run.first(), run.last()) else { break };
        let (from, to) = (first.from.clone(), last.to.clone());
        lanes.push(Lane { from, to, spans: run });
    }
    Some(lanes)
}

/// The key interval of every node of the namespace, for counting them.
pub(crate) fn every_node(keys: &KeySpace) -> (Vec<u8>, Vec<u8>) {
    let from = keys.subtree(path::ROOT);
    let to = prefix_end(&from);
    (from, to)
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

    #[test]
    fn lanes_cut_the_reads_by_key_into_runs_and_keep_what_they_cover() {
        let keys = KeySpace::new(Some("ns")).expect("a namespace");
        // By path `/a` sorts before `/a-b`; by key (`/ns/n/a/`, `/ns/n/a-b/`) after it.
        let (a, a_dash, b) = (subtree("/a/config"), subtree("/a-b/config"), node("/b/leader"));
        let (a2, a_dash2) = (node("/a/leader"), node("/a-b/leader"));
        let ranges = [&a, &a2, &a_dash, &a_dash2, &b];
        let reads = plan(&ranges);
        assert_eq!(reads.len(), 3);
        let lanes = lanes(&reads, &keys, 2).expect("no root subtree");
        assert_eq!(lanes.len(), 2, "three reads in lanes of two");
        let first = &lanes[0];
        assert_eq!(first.from, keys.subtree("/a-b"), "the first key first");
        assert_eq!(first.to, prefix_end(&keys.subtree("/a")));
        let key = |at: &str| keys.node(at);
        assert!(first.keeps(&key("/a/config/x"), "/a/config/x"));
        assert!(first.keeps(&key("/a-b/leader"), "/a-b/leader"));
        assert!(!first.keeps(&key("/a/servers"), "/a/servers"), "not covered");
        assert!(!first.keeps(&key("/a-a/config"), "/a-a/config"), "before the first read");
        // A node alone under its root: its lane holds that key only.
        let second = &lanes[1];
        assert!(second.keeps(&key("/b/leader"), "/b/leader"));
        assert!(!second.keeps(&key("/b/leader/x"), "/b/leader/x"));
        assert!(!second.keeps(&key("/b"), "/b"));
        // Every read in one lane when asked for one.
        assert_eq!(super::lanes(&reads, &keys, 1).expect("no root").len(), 1);
    }

    #[test]
    fn the_root_subtree_is_read_alone_not_in_lanes() {
        let keys = KeySpace::new(None).expect("no namespace");
        let (root, other) = (subtree("/"), node("/j"));
        let reads = plan(&[&root, &other]);
        assert!(lanes(&reads, &keys, 4).is_none());
    }
}
