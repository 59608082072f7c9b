//! One timer heap for every job of the process (ElasticJob ran a Quartz scheduler and threads per
//! job, #510): deadlines ordered by time, then by job name and kind, so equal deadlines fire in a
//! deterministic order.

use std::collections::{BTreeMap, BTreeSet};

/// What a deadline is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TimerKind {
    /// The job's next scheduled fire.
    Fire,
    /// The leader's periodic check of the assignment (`reconcileIntervalMinutes`).
    Reconcile,
    /// The deadline of what the job's protocol waits for.
    Wait,
}

/// A timer: one job's deadline of one kind.
pub type TimerKey = (String, TimerKind);

/// The next deadline of each armed timer.
#[derive(Debug, Default)]
pub struct TimerHeap {
    queue: BTreeSet<(i64, TimerKey)>,
    armed: BTreeMap<TimerKey, i64>,
}

impl TimerHeap {
    /// Sets (or replaces, or with `None` clears) the deadline of `key`.
    pub fn arm(&mut self, key: TimerKey, deadline_ms: Option<i64>) {
        if let Some(old) = self.armed.remove(&key) {
            self.queue.remove(&(old, key.clone()));
        }
        if let Some(at) = deadline_ms {
            self.queue.insert((at, key.clone()));
            self.armed.insert(key, at);
        }
    }

    /// Clears every timer of `job`.
    pub fn disarm_job(&mut self, job: &str) {
        for kind in [TimerKind::Fire, TimerKind::Reconcile, TimerKind::Wait] {
            self.arm((job.to_owned(), kind), None);
        }
    }

    /// The earliest deadline.
    pub fn next_deadline(&self) -> Option<i64> {
        self.queue.first().map(|(at, _)| *at)
    }

    /// Removes and returns every deadline at or before `now_ms`, earliest first.
    pub fn pop_due(&mut self, now_ms: i64) -> Vec<(i64, TimerKey)> {
        let mut due = Vec::new();
        while self.queue.first().is_some_and(|(at, _)| *at <= now_ms) {
            let Some((at, key)) = self.queue.pop_first() else { break };
            self.armed.remove(&key);
            due.push((at, key));
        }
        due
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fire(job: &str) -> TimerKey {
        (job.to_owned(), TimerKind::Fire)
    }

    #[test]
    fn due_in_time_then_name_order_and_rearm_replaces() {
        let mut t = TimerHeap::default();
        t.arm(fire("b"), Some(10));
        t.arm(fire("a"), Some(10));
        t.arm(("a".to_owned(), TimerKind::Reconcile), Some(10));
        t.arm(fire("c"), Some(5));
        t.arm(fire("c"), Some(20));
        assert_eq!(t.next_deadline(), Some(10));
        assert_eq!(
            t.pop_due(10),
            vec![(10, fire("a")), (10, ("a".to_owned(), TimerKind::Reconcile)), (10, fire("b"))]
        );
        t.disarm_job("c");
        assert!(t.is_empty());
    }
}
