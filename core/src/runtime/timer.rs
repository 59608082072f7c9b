//! One timer heap for every job of the process (ElasticJob ran a Quartz scheduler and threads per
//! job, #510): deadlines ordered by time, then by job name, so equal deadlines fire in a
//! deterministic order.

use std::collections::{BTreeMap, BTreeSet};

/// The next deadline of each armed job.
#[derive(Debug, Default)]
pub struct TimerHeap {
    queue: BTreeSet<(i64, String)>,
    armed: BTreeMap<String, i64>,
}

impl TimerHeap {
    /// Sets (or replaces, or with `None` clears) the deadline of `job`.
    pub fn arm(&mut self, job: &str, deadline_ms: Option<i64>) {
        if let Some(old) = self.armed.remove(job) {
            self.queue.remove(&(old, job.to_owned()));
        }
        if let Some(at) = deadline_ms {
            self.queue.insert((at, job.to_owned()));
            self.armed.insert(job.to_owned(), at);
        }
    }

    /// The earliest deadline.
    pub fn next_deadline(&self) -> Option<i64> {
        self.queue.first().map(|(at, _)| *at)
    }

    /// Removes and returns every deadline at or before `now_ms`, earliest first.
    pub fn pop_due(&mut self, now_ms: i64) -> Vec<(i64, String)> {
        let mut due = Vec::new();
        while let Some((at, job)) = self.queue.first().cloned() {
            if at > now_ms {
                break;
            }
            self.queue.remove(&(at, job.clone()));
            self.armed.remove(&job);
            due.push((at, job));
        }
        due
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_in_time_then_name_order_and_rearm_replaces() {
        let mut t = TimerHeap::default();
        t.arm("b", Some(10));
        t.arm("a", Some(10));
        t.arm("c", Some(5));
        t.arm("c", Some(20));
        assert_eq!(t.next_deadline(), Some(10));
        assert_eq!(t.pop_due(10), vec![(10, "a".to_owned()), (10, "b".to_owned())]);
        t.arm("c", None);
        assert!(t.is_empty());
    }
}
