//! One timer heap for every job of the process (ElasticJob ran a Quartz scheduler and threads per
//! job, #510): deadlines ordered by time, then by job (the order they were added in) and kind, so
//! equal deadlines fire in a deterministic order. Keys are numbers: arming a fire copies and
//! compares no name.

use std::collections::{BTreeMap, BTreeSet};

use super::JobId;

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
pub type TimerKey = (JobId, TimerKind);

/// The next deadline of each armed timer.
#[derive(Debug, Default)]
pub struct TimerHeap {
    queue: BTreeSet<(i64, TimerKey)>,
    armed: BTreeMap<TimerKey, i64>,
    /// How many fires are armed at each deadline: whether the earliest deadline holds a fire,
    /// whichever job's timer comes first at it.
    fires: BTreeMap<i64, usize>,
}

impl TimerHeap {
    /// Sets (or replaces, or with `None` clears) the deadline of `key`.
    pub fn arm(&mut self, key: TimerKey, deadline_ms: Option<i64>) {
        if let Some(old) = self.armed.remove(&key) {
            self.queue.remove(&(old, key));
            self.count_fire(key, old, false);
        }
        if let Some(at) = deadline_ms {
            self.queue.insert((at, key));
            self.armed.insert(key, at);
            self.count_fire(key, at, true);
        }
    }

    fn count_fire(&mut self, (_, kind): TimerKey, at: i64, armed: bool) {
        if kind != TimerKind::Fire {
            return;
        }
        let count = self.fires.entry(at).or_insert(0);
        if armed {
            *count += 1;
        } else if *count > 1 {
            *count -= 1;
        } else {
            self.fires.remove(&at);
        }
    }

    /// Clears every timer of `job`.
    pub fn disarm_job(&mut self, job: JobId) {
        for kind in [TimerKind::Fire, TimerKind::Reconcile, TimerKind::Wait] {
            self.arm((job, kind), None);
        }
    }

    /// The earliest deadline, and whether a fire is due at it.
    pub fn next_deadline(&self) -> Option<(i64, bool)> {
        self.queue.first().map(|&(at, _)| (at, self.fires.contains_key(&at)))
    }

    /// Removes every deadline at or before `now_ms` into `due`, earliest first.
    pub fn pop_due(&mut self, now_ms: i64, due: &mut Vec<(i64, TimerKey)>) {
        while self.queue.first().is_some_and(|(at, _)| *at <= now_ms) {
            let Some((at, key)) = self.queue.pop_first() else { break };
            self.armed.remove(&key);
            self.count_fire(key, at, false);
            due.push((at, key));
        }
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fire(job: u64) -> TimerKey {
        (JobId(job), TimerKind::Fire)
    }

    #[test]
    fn due_in_time_then_job_order_and_rearm_replaces() {
        let mut t = TimerHeap::default();
        t.arm(fire(2), Some(10));
        t.arm(fire(1), Some(10));
        t.arm((JobId(1), TimerKind::Reconcile), Some(10));
        t.arm(fire(3), Some(5));
        t.arm(fire(3), Some(20));
        assert_eq!(t.next_deadline(), Some((10, true)));
        let mut due = Vec::new();
        t.pop_due(10, &mut due);
        assert_eq!(due, vec![(10, fire(1)), (10, (JobId(1), TimerKind::Reconcile)), (10, fire(2))]);
        t.disarm_job(JobId(3));
        assert!(t.is_empty());
        assert!(t.fires.is_empty(), "no fire counted once none is armed");
        // Another job's wait first at the deadline: a fire is due at it all the same.
        t.arm((JobId(1), TimerKind::Wait), Some(30));
        t.arm(fire(2), Some(30));
        assert_eq!(t.next_deadline(), Some((30, true)));
        t.arm(fire(2), None);
        assert_eq!(t.next_deadline(), Some((30, false)));
    }
}
