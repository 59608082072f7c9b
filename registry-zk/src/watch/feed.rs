//! One feed: the task that follows a persistent recursive watch and turns its events into the
//! contract's, for every subscriber within its root. See the [module documentation](super).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::future::join_all;
use futures::FutureExt;
use shardcron_core::registry::{path, Node, WatchEvent};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;
use zookeeper_client as zk;

use super::hub::{Fact, Signal, Subscriber};
use super::{snapshot, Seen};
use crate::client::Shared;
use crate::session::Session;

/// First pause before retrying a failed resync or re-subscription; doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// How a run of the event loop ended.
pub(super) enum Next {
    /// No subscriber is left or the client closed: end the task.
    Stop,
    /// The session ended or changed: subscribe again on the current one.
    Resubscribe,
}

/// An event taken from the watcher and not yet emitted.
struct Pending {
    event: zk::WatchedEvent,
    /// Its place among the events taken (1 for the first).
    seq: u64,
    /// The write of this client that caused it, when a settled ticket says so, and how many
    /// events had been taken when the write's answer was known.
    own: Option<(Arc<Fact>, u64)>,
}

/// What a path's events come to, once their node is known.
enum Outcome {
    /// The node as it is (read now, or left by a write of this client), known once this many
    /// events had been taken.
    Node(Vec<u8>, zk::Stat, u64),
    Absent,
    /// Unreadable with our credentials: left out.
    Hidden,
}

pub(super) struct Feed {
    shared: Weak<Shared>,
    root: String,
    limit: Duration,
    subscribers: Vec<Subscriber>,
    signals: UnboundedReceiver<Signal>,
    generations: watch::Receiver<u64>,
    /// What the subscribers hold, by path.
    view: BTreeMap<String, Seen>,
    /// Events taken from the watcher, in order, not yet emitted.
    pending: VecDeque<Pending>,
    /// How many events were ever taken into `pending`, and how many left it.
    taken: u64,
    done: u64,
    /// Barriers and settled writes to answer once `done` reaches the count.
    waiting: Vec<(u64, oneshot::Sender<()>)>,
    /// Tickets this feed has seen settle that the hub may still hold open.
    settled: BTreeSet<u64>,
    /// The link is down: reads would wait for it, and events are being lost.
    link_lost: bool,
    /// The view may miss changes: send a resync as soon as reads work.
    need_resync: bool,
    /// When to try the pending resync again after a failure.
    retry_at: Option<Instant>,
    failures: u32,
}

impl Feed {
    pub fn new(
        shared: &Arc<Shared>,
        root: &str,
        first: Subscriber,
        signals: UnboundedReceiver<Signal>,
    ) -> Self {
        Feed {
            shared: Arc::downgrade(shared),
            root: root.to_owned(),
            limit: shared.operation_timeout(),
            subscribers: vec![first],
            signals,
            generations: shared.generations(),
            view: BTreeMap::new(),
            pending: VecDeque::new(),
            taken: 0,
            done: 0,
            waiting: Vec::new(),
            settled: BTreeSet::new(),
            link_lost: false,
            need_resync: false,
            retry_at: None,
            failures: 0,
        }
    }

    pub async fn run(mut self, mut first: Option<(Arc<Session>, zk::PersistentWatcher)>) {
        loop {
            let (session, watcher) = match first.take() {
                Some(established) => established,
                None => match self.establish().await {
                    Some(established) => established,
                    None => return,
                },
            };
            match self.follow(session, watcher).await {
                Next::Stop => return,
                Next::Resubscribe => self.forget_pending(),
            }
        }
    }

    /// Subscribes on the current session and resyncs; waits and retries until that works.
    /// `None` when the task should end.
    async fn establish(&mut self) -> Option<(Arc<Session>, zk::PersistentWatcher)> {
        loop {
            let current = {
                let shared = self.shared.upgrade()?;
                if shared.is_closed() {
                    return None;
                }
                shared.current()
            };
            let Some(session) = current else {
                // No session while a new one is being opened: the generation bump wakes us.
                self.idle(None).await?;
                continue;
            };
            let attempt = async {
                let watcher =
                    session.ns.watch(&self.root, zk::AddWatchMode::PersistentRecursive).await?;
                let nodes = snapshot(&session.ns, &self.root).await?;
                Ok::<_, zk::Error>((watcher, nodes))
            };
            match tokio::time::timeout(self.limit, attempt).await {
                Ok(Ok((watcher, nodes))) => {
                    self.failures = 0;
                    self.install(nodes);
                    if self.subscribers.is_empty() {
                        return None;
                    }
                    return Some((session, watcher));
                }
                Ok(Err(e)) => {
                    tracing::debug!(root = %self.root, error = %e, "watch: re-subscribing failed")
                }
                Err(_) => tracing::debug!(root = %self.root, "watch: re-subscribing timed out"),
            }
            drop(session);
            let pause = self.backoff();
            self.idle(Some(pause)).await?;
        }
    }

    /// Waits for a session change, a pause to run out, or the end; answers signals meanwhile
    /// (there is nothing to catch up with while not subscribed). `None` when the task should
    /// end.
    async fn idle(&mut self, pause: Option<Duration>) -> Option<()> {
        let sleep = async {
            match pause {
                Some(pause) => tokio::time::sleep(pause).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                biased;
                changed = self.generations.changed() => return changed.ok(),
                signal = self.signals.recv() => {
                    match signal? {
                        Signal::Barrier(ack) | Signal::Settled { ack, .. } => {
                            let _ = ack.send(());
                        }
                        other => self.on_membership(other),
                    }
                    if self.subscribers.is_empty() {
                        return None;
                    }
                }
                () = &mut sleep => return Some(()),
            }
        }
    }

    /// Follows one subscription until its session ends, the client closes or every subscriber
    /// leaves.
    async fn follow(&mut self, session: Arc<Session>, mut watcher: zk::PersistentWatcher) -> Next {
        self.link_lost = false;
        loop {
            let retry_at = self.retry_at;
            let step = tokio::select! {
                biased;
                changed = self.generations.changed() => {
                    if changed.is_err() {
                        return Next::Stop;
                    }
                    match self.shared.upgrade() {
                        None => return Next::Stop,
                        Some(shared) if shared.is_closed() => return Next::Stop,
                        Some(shared) => match shared.current() {
                            Some(current) if current.id == session.id => continue,
                            _ => return Next::Resubscribe,
                        },
                    }
                }
                signal = self.signals.recv() => {
                    let Some(signal) = signal else { return Next::Stop };
                    match signal {
                        Signal::Barrier(ack) => {
                            self.take(&mut watcher);
                            self.waiting.push((self.taken, ack));
                        }
                        Signal::Settled { ticket, facts, ack } => {
                            // The write's events came before its answer: they are all here.
                            self.take(&mut watcher);
                            self.own(&facts);
                            self.settled.insert(ticket);
                            self.waiting.push((self.taken, ack));
                        }
                        Signal::Released => {}
                        other => self.on_membership(other),
                    }
                    self.catch_up(&session, &mut watcher).await
                }
                event = watcher.changed() => {
                    self.push(event);
                    self.catch_up(&session, &mut watcher).await
                }
                () = sleep_until(retry_at), if retry_at.is_some() => {
                    self.retry_at = None;
                    self.resync(&session, &mut watcher).await
                }
            };
            if let Some(next) = step {
                return next;
            }
            if self.subscribers.is_empty() {
                return Next::Stop;
            }
        }
    }

    /// A subscriber joining or leaving.
    fn on_membership(&mut self, signal: Signal) {
        match signal {
            Signal::Join(subscriber, ready) => {
                let nodes = within(&self.view, &subscriber.root);
                if subscriber.out.send(WatchEvent::Resync { nodes }).is_ok() {
                    self.subscribers.push(subscriber);
                    let _ = ready.send(());
                }
            }
            Signal::Left(id) => self.subscribers.retain(|s| s.id != id),
            Signal::Barrier(ack) | Signal::Settled { ack, .. } => {
                let _ = ack.send(());
            }
            Signal::Released => {}
        }
    }

    fn push(&mut self, event: zk::WatchedEvent) {
        // The namespace node itself only changes for registry time (see `node::node`).
        if event.event_type != zk::EventType::Session && event.path == path::ROOT {
            return;
        }
        self.taken += 1;
        self.pending.push_back(Pending { event, seq: self.taken, own: None });
    }

    /// Moves every event already waiting in the watcher to `pending`. All of them: an answer
    /// that arrived before this call is then known to precede every event taken later.
    fn take(&mut self, watcher: &mut zk::PersistentWatcher) {
        // Polling once more after a final session state would panic inside the client.
        while !self.pending.back().is_some_and(|p| is_final(&p.event)) {
            match watcher.changed().now_or_never() {
                Some(event) => self.push(event),
                None => break,
            }
        }
    }

    /// A write of this client settled with `facts`: the waiting events of a path are its own
    /// when there are exactly as many as it caused (its events are all here, and any other
    /// client's change of the path would add one).
    fn own(&mut self, facts: &[Arc<Fact>]) {
        let known_at = self.taken;
        for fact in facts {
            if !path::is_within(&fact.path, &self.root) {
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
    /// holds back, and answers the barriers that are through. `Some` when the loop must end.
    async fn catch_up(
        &mut self,
        session: &Session,
        watcher: &mut zk::PersistentWatcher,
    ) -> Option<Next> {
        self.take(watcher);
        if let Some(shared) = self.shared.upgrade() {
            shared.watches.retain_open(&mut self.settled);
        }
        loop {
            let run = self.free_run();
            if run > 0 {
                let events: Vec<Pending> = self.pending.drain(..run).collect();
                self.done += run as u64;
                if let Some(next) = self.apply(session, watcher, events).await {
                    return Some(next);
                }
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
                        // Expired, closed: the watch died with the session.
                        _ => return Some(Next::Resubscribe),
                    }
                }
                // Empty, or held back by a write in flight.
                _ => break,
            }
        }
        self.answer_waiting();
        if self.need_resync && !self.link_lost && self.retry_at.is_none() {
            return self.resync(session, watcher).await;
        }
        None
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

    fn answer_waiting(&mut self) {
        let done = self.done;
        let (through, still): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.waiting).into_iter().partition(|(n, _)| *n <= done);
        self.waiting = still;
        for (_, ack) in through {
            let _ = ack.send(());
        }
    }

    /// Drops what was pending (a resync or a new session covers it) and answers every waiter.
    fn forget_pending(&mut self) {
        self.done += self.pending.len() as u64;
        self.pending.clear();
        self.done = self.done.max(self.taken);
        self.answer_waiting();
    }

    /// Emits what a run of node events changed: per path one outcome, read (all reads at once)
    /// unless a write of this client left it or nothing can have changed for the subscribers.
    async fn apply(
        &mut self,
        session: &Session,
        watcher: &mut zk::PersistentWatcher,
        events: Vec<Pending>,
    ) -> Option<Next> {
        if self.link_lost || self.need_resync {
            // Reads would wait for the link; the coming resync covers these events.
            self.need_resync = true;
            return None;
        }
        // Per path: its last event (position in the run, place among the events taken, whether
        // a deletion), and whether all its events are this client's own (the fact of the last).
        struct Path {
            last: usize,
            seq: u64,
            deleted: bool,
            own: Option<(Arc<Fact>, u64)>,
            all_own: bool,
        }
        let mut paths: HashMap<String, Path> = HashMap::new();
        for (i, p) in events.into_iter().enumerate() {
            let deleted = p.event.event_type == zk::EventType::NodeDeleted;
            let entry = paths.entry(p.event.path).or_insert(Path {
                last: i,
                seq: p.seq,
                deleted,
                own: None,
                all_own: true,
            });
            entry.last = i;
            entry.seq = p.seq;
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
                    Some(seen) if seen.known_at.is_some_and(|n| p.seq > n) => Some(Outcome::Absent),
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
                tracing::debug!(root = %self.root, "watch: reads timed out; resyncing");
                self.need_resync = true;
                return None;
            };
            // Every event that came before the answers is taken now: later ones came after.
            self.take(watcher);
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
                        tracing::debug!(root = %self.root, error = %e, "watch: a read failed; resyncing");
                        self.need_resync = true;
                        return None;
                    }
                });
            }
        }
        for ((at, _), outcome) in order.iter().zip(known) {
            let emitted = match outcome {
                Some(Outcome::Node(data, stat, known_at)) => {
                    self.on_node(at, Seen::new(at, data, &stat, Some(known_at)))
                }
                Some(Outcome::Absent) => self.on_absent(at),
                Some(Outcome::Hidden) | None => Vec::new(),
            };
            for event in emitted {
                self.emit(event);
            }
        }
        None
    }

    /// A node as it is now (or as a write of this client left it): what changed since the view.
    fn on_node(&mut self, at: &str, fresh: Seen) -> Vec<WatchEvent> {
        let node = fresh.node.clone();
        match self.view.get_mut(at) {
            None => {
                self.view.insert(at.to_owned(), fresh);
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
                        seen.known_at = seen.known_at.max(fresh.known_at);
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
    fn on_absent(&mut self, at: &str) -> Vec<WatchEvent> {
        match self.view.remove(at) {
            Some(_) => vec![WatchEvent::Deleted { path: at.to_owned() }],
            None => Vec::new(),
        }
    }

    /// Sends `event` to every subscriber within whose root it lies; forgets those gone.
    fn emit(&mut self, event: WatchEvent) {
        let Some(at) = event.path() else { return };
        let at = at.to_owned();
        self.subscribers
            .retain(|s| !path::is_within(&at, &s.root) || s.out.send(event.clone()).is_ok());
    }

    /// Registers the watch again, re-reads the subtree and sends it as a resync; on failure,
    /// schedules another try.
    ///
    /// Registering again is not redundant: `zookeeper-client` 0.11.2 does not restore persistent
    /// watches when it reconnects (its `resend_watches` never sends the persistent kinds), so
    /// after a reconnect the server knows no watch for us. The new watcher replaces the old one
    /// before the snapshot is read, so no change falls between the two.
    async fn resync(
        &mut self,
        session: &Session,
        watcher: &mut zk::PersistentWatcher,
    ) -> Option<Next> {
        let attempt = async {
            let fresh = session.ns.watch(&self.root, zk::AddWatchMode::PersistentRecursive).await?;
            let nodes = snapshot(&session.ns, &self.root).await?;
            Ok::<_, zk::Error>((fresh, nodes))
        };
        match tokio::time::timeout(self.limit, attempt).await {
            Ok(Ok((fresh, nodes))) => {
                // Events still queued in the old watcher, or pending, predate the snapshot.
                *watcher = fresh;
                self.forget_pending();
                self.failures = 0;
                self.install(nodes);
                if self.subscribers.is_empty() {
                    return Some(Next::Stop);
                }
            }
            Ok(Err(zk::Error::SessionExpired)) | Ok(Err(zk::Error::ClientClosed)) => {
                return Some(Next::Resubscribe)
            }
            Ok(Err(e)) => {
                tracing::debug!(root = %self.root, error = %e, "watch: resync failed; retrying");
                self.retry_at = Some(Instant::now() + self.backoff());
            }
            Err(_) => {
                tracing::debug!(root = %self.root, "watch: resync timed out; retrying");
                self.retry_at = Some(Instant::now() + self.backoff());
            }
        }
        None
    }

    /// Replaces the view with a snapshot and sends each subscriber its part.
    pub fn install(&mut self, nodes: BTreeMap<String, Seen>) {
        self.view = nodes;
        self.need_resync = false;
        let view = &self.view;
        // A closed channel means the subscriber left.
        self.subscribers
            .retain(|s| s.out.send(WatchEvent::Resync { nodes: within(view, &s.root) }).is_ok());
    }

    fn backoff(&mut self) -> Duration {
        self.failures = self.failures.saturating_add(1);
        let factor = 1u32.checked_shl(self.failures - 1).unwrap_or(u32::MAX);
        FIRST_PAUSE.saturating_mul(factor).min(MAX_PAUSE)
    }
}

/// The part of `view` within `root`, as the contract's nodes.
fn within(view: &BTreeMap<String, Seen>, root: &str) -> BTreeMap<String, Node> {
    view.iter()
        .filter(|(p, _)| path::is_within(p, root))
        .map(|(p, seen)| (p.clone(), seen.node.clone()))
        .collect()
}

fn is_final(event: &zk::WatchedEvent) -> bool {
    event.event_type == zk::EventType::Session && event.session_state.is_terminated()
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
