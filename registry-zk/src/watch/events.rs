//! What the feed does with ZooKeeper's events: takes them from its watchers, matches them with
//! the client's own writes, reads a node after its events where it must, and emits the
//! contract's events to the subscribers whose scopes cover them. See the
//! [module documentation](super).

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::join_all;
use shardcron_core::registry::{path, WatchEvent};
use zookeeper_client as zk;

use super::feed::{Feed, Next, Pending};
use super::hub::Fact;
use super::watchers::is_final;
use super::Fresh;

/// What a path's events come to, once their node is known.
enum Outcome {
    /// The node as it is (read now, or left by a write of this client), known once this many
    /// events had been taken.
    Node(Vec<u8>, zk::Stat, u64),
    Absent,
    /// Unreadable with our credentials: left out.
    Hidden,
}

impl Feed {
    /// Queues an event of watcher `slot`. Of the session events, which every watcher receives,
    /// only the lead watcher's are kept, and the final ones of any (that watcher is done).
    pub(super) fn push(&mut self, slot: u64, event: zk::WatchedEvent) {
        match event.event_type {
            zk::EventType::Session if !is_final(&event) && self.watchers.lead() != Some(slot) => {
                return;
            }
            // A node entry's watch reports its children's comings and goings too; the
            // contract's node entry does not cover them (a child covered otherwise has its
            // own event).
            zk::EventType::NodeChildrenChanged => return,
            // The namespace node itself only changes for registry time (see `node::node`).
            _ if event.path == path::ROOT => return,
            _ => {}
        }
        self.taken += 1;
        self.pending.push_back(Pending { event, seq: self.taken, slot, own: None });
    }

    /// Moves every event already received by a watcher to `pending`. All of them: an answer
    /// that arrived before this call is then known to precede every event taken later.
    pub(super) fn take(&mut self) {
        while let Some((slot, event)) = self.watchers.try_next() {
            self.push(slot, event);
        }
    }

    /// A write of this client settled with `facts`: the waiting events of a path are its own
    /// when there are exactly as many as it caused (its events are all here, and any other
    /// client's change of the path would add one).
    pub(super) fn own(&mut self, facts: &[Arc<Fact>]) {
        let known_at = self.taken;
        for fact in facts {
            if !self.watched.covers(&fact.path) {
                continue;
            }
            let mine = |p: &Pending| {
                p.own.is_none()
                    && p.event.event_type != zk::EventType::Session
                    && p.event.path == fact.path
            };
            if self.pending.iter().filter(|p| mine(p)).count() == fact.events {
                for p in self.pending.iter_mut().filter(|p| mine(p)) {
                    p.own = Some((fact.clone(), known_at));
                }
            }
        }
    }

    /// Emits what the waiting events changed, up to the first one a write of this client still
    /// holds back, and answers the barriers that are through.
    pub(super) async fn catch_up(&mut self) -> Next {
        self.take();
        if let Some(shared) = self.shared.upgrade() {
            shared.watches.retain_open(&mut self.settled);
        }
        loop {
            let run = self.free_run();
            if run > 0 {
                let events: Vec<Pending> = self.pending.drain(..run).collect();
                self.done += run as u64;
                self.apply(events).await;
                // The reads' answers may have brought more events.
                continue;
            }
            match self.pending.front() {
                Some(p) if p.event.event_type == zk::EventType::Session => {
                    let state = p.event.session_state;
                    self.pending.pop_front();
                    self.done += 1;
                    match state {
                        zk::SessionState::Disconnected => self.link_lost = true,
                        zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                            if self.link_lost {
                                // Events of the gap may be lost (ZOOKEEPER-4698).
                                self.link_lost = false;
                                self.need_resync = true;
                            }
                        }
                        // Expired, closed: the watches died with the session.
                        _ => return Next::Resubscribe,
                    }
                }
                // Empty, or held back by a write in flight.
                _ => break,
            }
        }
        self.answer_waiting();
        if self.need_resync && !self.link_lost && self.retry_at.is_none() {
            return self.resync().await;
        }
        Next::Continue
    }

    /// How many node events at the front of `pending` can be emitted now: up to a session
    /// event or an event a write of this client holds back.
    fn free_run(&self) -> usize {
        let shared = self.shared.upgrade();
        self.pending
            .iter()
            .take_while(|p| {
                p.event.event_type != zk::EventType::Session
                    && (p.own.is_some()
                        || shared
                            .as_ref()
                            .is_none_or(|s| !s.watches.holds(&p.event.path, &self.settled)))
            })
            .count()
    }

    /// Emits what a run of node events changed: per path one outcome, read (all reads at once)
    /// unless a write of this client left it or nothing can have changed for the subscribers.
    /// Paths the watches no longer cover (events of a watch being replaced) are dropped unread.
    async fn apply(&mut self, events: Vec<Pending>) {
        let Some(session) = self.session.clone() else { return };
        if self.link_lost || self.need_resync {
            // Reads would wait for the link; the coming resync covers these events.
            self.need_resync = true;
            return;
        }
        // Per path: its last event (position in the run, place among the events taken, watcher,
        // whether a deletion), and whether all its events are this client's own (the fact of
        // the last).
        struct Path {
            last: usize,
            seq: u64,
            slot: u64,
            deleted: bool,
            own: Option<(Arc<Fact>, u64)>,
            all_own: bool,
        }
        let mut paths: HashMap<String, Path> = HashMap::new();
        for (i, p) in events.into_iter().enumerate() {
            if !self.watched.covers(&p.event.path) {
                continue;
            }
            let deleted = p.event.event_type == zk::EventType::NodeDeleted;
            let entry = paths.entry(p.event.path).or_insert(Path {
                last: i,
                seq: p.seq,
                slot: p.slot,
                deleted,
                own: None,
                all_own: true,
            });
            entry.last = i;
            entry.seq = p.seq;
            entry.slot = p.slot;
            entry.deleted = deleted;
            entry.all_own &= p.own.is_some();
            entry.own = p.own;
        }
        let mut order: Vec<(String, Path)> = paths.into_iter().collect();
        order.sort_by_key(|(_, p)| p.last);
        let mut known: Vec<Option<Outcome>> = Vec::with_capacity(order.len());
        let mut to_read = Vec::new();
        for (i, (at, p)) in order.iter().enumerate() {
            known.push(match (&p.own, p.all_own) {
                (Some((fact, known_at)), true) => Some(match &fact.state {
                    Some((data, stat)) => Outcome::Node(data.clone(), *stat, *known_at),
                    None => Outcome::Absent,
                }),
                _ if p.deleted => match self.view.get(at) {
                    // Gone before anyone was told it exists: nothing to say.
                    None => Some(Outcome::Hidden),
                    // Deleted after the view learnt the node: what the view shows is gone (a
                    // re-creation has an event of its own, later).
                    Some(seen) if seen.known_at().is_some_and(|n| p.seq > n) => {
                        Some(Outcome::Absent)
                    }
                    // The view may already show a later incarnation: read.
                    Some(_) => None,
                },
                _ => None,
            });
            if known[i].is_none() {
                to_read.push((i, session.ns.get_data(at)));
            }
        }
        if !to_read.is_empty() {
            let (slots, reads): (Vec<usize>, Vec<_>) = to_read.into_iter().unzip();
            let Ok(reads) = tokio::time::timeout(self.limit, join_all(reads)).await else {
                tracing::debug!("watch: reads timed out; resyncing");
                self.need_resync = true;
                return;
            };
            // Every event that came before the answers is taken now: later ones came after.
            self.take();
            let answered_at = self.taken;
            for (slot, read) in slots.into_iter().zip(reads) {
                let at = &order[slot].0;
                known[slot] = Some(match read {
                    Ok((data, stat)) => Outcome::Node(data, stat, answered_at),
                    Err(zk::Error::NoNode) => Outcome::Absent,
                    Err(zk::Error::NoAuth) => {
                        tracing::warn!(path = %at, "watch: node unreadable with these credentials; skipped");
                        Outcome::Hidden
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "watch: a read failed; resyncing");
                        self.need_resync = true;
                        return;
                    }
                });
            }
        }
        let keys: Vec<(u64, i64)> = order
            .iter()
            .zip(&known)
            .map(|((_, p), outcome)| match outcome {
                Some(Outcome::Node(_, stat, _)) => (p.slot, stat.mzxid),
                _ => (p.slot, i64::MAX),
            })
            .collect();
        let mut outcomes: Vec<Option<(String, Option<Outcome>)>> =
            order.into_iter().map(|(at, _)| at).zip(known).map(Some).collect();
        for i in emit_order(&keys) {
            let Some((at, outcome)) = outcomes[i].take() else { continue };
            let emitted = match outcome {
                Some(Outcome::Node(data, stat, known_at)) => {
                    self.on_node(&at, Fresh::new(&at, data, &stat, Some(known_at)))
                }
                Some(Outcome::Absent) => self.on_absent(&at),
                Some(Outcome::Hidden) | None => Vec::new(),
            };
            for event in emitted {
                self.emit(event);
            }
        }
    }

    /// A node as it is now (or as a write of this client left it): what changed since the view.
    pub(super) fn on_node(&mut self, at: &str, fresh: Fresh) -> Vec<WatchEvent> {
        let Fresh { node, seen: fresh } = fresh;
        match self.view.get_mut(at) {
            None => {
                self.view.insert(at, fresh);
                vec![WatchEvent::Created { path: at.to_owned(), node }]
            }
            Some(seen) if seen.czxid == fresh.czxid => {
                if fresh.mzxid > seen.mzxid {
                    *seen = fresh;
                    vec![WatchEvent::Changed { path: at.to_owned(), node }]
                } else {
                    // Already shown (an earlier read got ahead of this event); it is still the
                    // node's state at this later answer.
                    if fresh.mzxid == seen.mzxid {
                        seen.known = seen.known.max(fresh.known);
                    }
                    Vec::new()
                }
            }
            Some(seen) if fresh.czxid > seen.czxid => {
                // Deleted and re-created meanwhile: both happened.
                *seen = fresh;
                vec![
                    WatchEvent::Deleted { path: at.to_owned() },
                    WatchEvent::Created { path: at.to_owned(), node },
                ]
            }
            Some(_) => Vec::new(),
        }
    }

    /// A node that is gone now.
    pub(super) fn on_absent(&mut self, at: &str) -> Vec<WatchEvent> {
        match self.view.remove(at) {
            Some(_) => vec![WatchEvent::Deleted { path: at.to_owned() }],
            None => Vec::new(),
        }
    }

    /// Sends `event` to every subscriber whose scope covers it; forgets those gone.
    pub(super) fn emit(&mut self, event: WatchEvent) {
        let Some(at) = event.path() else { return };
        let at = at.to_owned();
        self.subscribers.retain(|s| !s.scope.covers(&at) || s.out.send(event.clone()).is_ok());
    }
}

/// The order to emit a run's outcomes in, given per outcome (in the order of their last
/// events) its watcher and the zxid of the state it shows (`i64::MAX` when unknown: a
/// deletion).
///
/// Events of one watcher come in ZooKeeper's order, but the run interleaves watchers in the
/// order they were drained, which is not necessarily the order ZooKeeper sent their events.
/// Each outcome's state is at least as new as its event, so within a watcher the smallest zxid
/// at or after an outcome bounds when that outcome's event happened; ordering by that bound
/// (then by position) keeps each watcher's order and puts the others' between by zxid. With a
/// single watcher the bounds never decrease, so the order is the run's.
fn emit_order(keys: &[(u64, i64)]) -> Vec<usize> {
    let mut bound = vec![i64::MAX; keys.len()];
    let mut least: HashMap<u64, i64> = HashMap::new();
    for i in (0..keys.len()).rev() {
        let (slot, key) = keys[i];
        let after = least.entry(slot).or_insert(i64::MAX);
        *after = (*after).min(key);
        bound[i] = *after;
    }
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by_key(|&i| (bound[i], i));
    order
}

#[cfg(test)]
mod tests {
    use super::emit_order;

    #[test]
    fn one_watcher_keeps_the_run_order() {
        assert_eq!(emit_order(&[(1, 9), (1, 4), (1, i64::MAX), (1, 7)]), vec![0, 1, 2, 3]);
    }

    #[test]
    fn watchers_interleave_by_zxid() {
        // Watcher 1 drained first (zxids 10, 30), then watcher 2 (20, 40).
        assert_eq!(emit_order(&[(1, 10), (1, 30), (2, 20), (2, 40)]), vec![0, 2, 1, 3]);
        // A deletion stays before what follows it in its own watcher.
        assert_eq!(emit_order(&[(1, i64::MAX), (1, 30), (2, 20)]), vec![2, 0, 1]);
    }
}
