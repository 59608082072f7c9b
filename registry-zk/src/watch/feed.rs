//! The feed: the one task per client that holds its ZooKeeper watches, keeps the view its
//! subscribers were shown, and turns ZooKeeper's events into the contract's for every
//! subscriber whose scope covers them. See the [module documentation](super).
//!
//! This file is the task's life: signals, subscribers joining and leaving (which changes the
//! watches), sessions and resyncs. What it does with events is in [`super::events`].

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::future::join_all;
use shardcron_core::registry::{Node, Op, RegistryError, ScopeChange, WatchEvent, WatchScope};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;
use zookeeper_client as zk;

use super::hub::{Signal, Subscriber};
use super::watchers::{Entry, Watchers};
use super::{snapshot, Fresh, Snapshot, View};
use crate::client::Shared;
use crate::error::At;
use crate::session::Session;

/// First pause before retrying a failed resync; doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// What the task does after a step.
pub(super) enum Next {
    /// Go on.
    Continue,
    /// The client closed: end the task.
    Stop,
    /// The session of the watches ended: watch again on the current one.
    Resubscribe,
}

/// An event taken from a watcher and not yet emitted.
pub(super) struct Pending {
    pub event: zk::WatchedEvent,
    /// Its place among the events taken (1 for the first).
    pub seq: u64,
    /// The watcher it came from.
    pub slot: u64,
    /// The write of this client that caused it, when a settled ticket says so, and how many
    /// events had been taken when the write's answer was known.
    pub own: Option<(Arc<super::hub::Fact>, u64)>,
}

pub(super) struct Feed {
    pub shared: Weak<Shared>,
    pub limit: Duration,
    pub subscribers: Vec<Subscriber>,
    /// The union of the subscribers' scopes, minimal: what the watchers cover.
    pub watched: WatchScope,
    pub watchers: Watchers,
    /// The session the watchers are registered on; `None` while there are none.
    pub session: Option<Arc<Session>>,
    signals: UnboundedReceiver<Signal>,
    generations: watch::Receiver<u64>,
    /// Which state of each node `watched` covers the subscribers were shown, by path.
    pub view: View,
    /// Events taken from the watchers, in order, not yet emitted.
    pub pending: VecDeque<Pending>,
    /// How many events were ever taken into `pending`, and how many left it.
    pub taken: u64,
    pub done: u64,
    /// Barriers and settled writes to answer once `done` reaches the count.
    pub waiting: Vec<(u64, oneshot::Sender<()>)>,
    /// Tickets this feed has seen settle that the hub may still hold open.
    pub settled: BTreeSet<u64>,
    /// The link is down: reads would wait for it, and events are being lost.
    pub link_lost: bool,
    /// The view may miss changes: send a resync as soon as reads work.
    pub need_resync: bool,
    /// When to try the pending resync again after a failure.
    pub retry_at: Option<Instant>,
    failures: u32,
}

impl Feed {
    pub fn new(shared: &Arc<Shared>, signals: UnboundedReceiver<Signal>) -> Self {
        Feed {
            shared: Arc::downgrade(shared),
            limit: shared.operation_timeout(),
            subscribers: Vec::new(),
            watched: WatchScope::new(),
            watchers: Watchers::default(),
            session: None,
            signals,
            generations: shared.generations(),
            view: View::default(),
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

    /// Runs until the client closes.
    pub async fn run(mut self) {
        loop {
            let retry_at = self.retry_at;
            let next = tokio::select! {
                biased;
                changed = self.generations.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    self.on_generation().await
                }
                signal = self.signals.recv() => {
                    let Some(signal) = signal else { return };
                    self.on_signal(signal).await
                }
                (slot, event) = self.watchers.next() => {
                    self.push(slot, event);
                    self.catch_up().await
                }
                () = sleep_until(retry_at), if retry_at.is_some() => {
                    self.retry_at = None;
                    self.resync().await
                }
            };
            match next {
                Next::Continue => {}
                Next::Stop => return,
                Next::Resubscribe => {
                    self.drop_watches();
                    if let Next::Stop = self.resync().await {
                        return;
                    }
                }
            }
        }
    }

    /// The session changed or the client closed.
    async fn on_generation(&mut self) -> Next {
        let Some(shared) = self.shared.upgrade() else { return Next::Stop };
        if shared.is_closed() {
            return Next::Stop;
        }
        let current = shared.current();
        drop(shared);
        match (&self.session, &current) {
            (Some(ours), Some(now)) if ours.id == now.id => Next::Continue,
            (None, None) => Next::Continue,
            _ => {
                self.drop_watches();
                if current.is_some() {
                    self.resync().await
                } else {
                    Next::Continue
                }
            }
        }
    }

    /// Forgets the watches of a session that ended (with what they had pending).
    fn drop_watches(&mut self) {
        self.watchers.clear();
        self.session = None;
        self.link_lost = false;
        self.forget_pending();
        self.set_active();
    }

    async fn on_signal(&mut self, signal: Signal) -> Next {
        match signal {
            Signal::Barrier(ack) => {
                self.take();
                self.waiting.push((self.taken, ack));
            }
            Signal::Settled { ticket, facts, ack } => {
                // The write's events came before its answer: they are all here.
                self.take();
                self.own(&facts);
                self.settled.insert(ticket);
                self.waiting.push((self.taken, ack));
            }
            Signal::Released => {}
            Signal::Join(subscriber, reply) => {
                let result = self.join(subscriber).await;
                let _ = reply.send(result);
            }
            Signal::Left(id) => self.leave(id).await,
            Signal::Rescope(id, change, reply) => {
                let result = self.rescope(id, change).await;
                let _ = reply.send(result);
            }
        }
        self.catch_up().await
    }

    /// A new subscriber: when the watches cover its scope already, shown the nodes the view
    /// holds there (read again: the view keeps no data); otherwise after watching what they
    /// lack and reading it.
    async fn join(&mut self, subscriber: Subscriber) -> Result<(), RegistryError> {
        let covered = self.watched.includes(&subscriber.scope);
        if covered && (self.session.is_some() || self.watched.is_empty()) {
            let paths = self.view.covered_by(&subscriber.scope);
            let label = super::label(&subscriber.scope).to_owned();
            let nodes = self.show(paths, BTreeMap::new(), &label).await?;
            if subscriber.out.send(WatchEvent::Resync { nodes }).is_ok() {
                self.subscribers.push(subscriber);
            }
            return Ok(());
        }
        let Some(session) = self.session.clone() else {
            // No watches yet, or none since the session ended: watch everything on the
            // current session; the resync opens the new stream and refreshes the others.
            let before = self.watched.clone();
            self.watched = before.union(&subscriber.scope).minimal();
            let id = subscriber.id;
            self.subscribers.push(subscriber);
            let result = self.try_resync().await;
            if result.is_err() {
                self.subscribers.retain(|s| s.id != id);
                self.watched = before;
                if !self.watched.is_empty() {
                    self.retry_at = Some(Instant::now() + self.backoff());
                }
            }
            return result;
        };
        self.extend(&session, subscriber).await
    }

    /// Watches what `subscriber`'s scope adds to the watches of `session`, reads it, and
    /// opens the subscriber's stream.
    async fn extend(
        &mut self,
        session: &Arc<Session>,
        subscriber: Subscriber,
    ) -> Result<(), RegistryError> {
        let read = self.widen(session, &subscriber.scope).await?;
        let paths = self.view.covered_by(&subscriber.scope);
        let label = super::label(&subscriber.scope).to_owned();
        let nodes = match self.show(paths, read, &label).await {
            Ok(nodes) => nodes,
            Err(e) => {
                self.shrink().await;
                return Err(e);
            }
        };
        if subscriber.out.send(WatchEvent::Resync { nodes }).is_ok() {
            self.subscribers.push(subscriber);
        }
        Ok(())
    }

    /// Watches what `scope` adds to the watches of `session` and reads it into the view
    /// (which no subscriber covered: nothing is emitted), and returns the nodes read. The
    /// watches it makes redundant go once the new ones are registered. Looks at `scope`'s
    /// entries and the watches below them, not at every watch.
    async fn widen(
        &mut self,
        session: &Arc<Session>,
        scope: &WatchScope,
    ) -> Result<BTreeMap<Box<str>, Node>, RegistryError> {
        let (joining, redundant) = self.watched.widening(scope);
        let (add, remove, replacing) = entries_of(&joining, &redundant);
        let label = super::label(scope).to_owned();
        // What the new watches cover beyond the old ones, read once they are registered.
        let attempt = async {
            let watchers = register_change(&session.ns, &add, replacing).await?;
            let nodes = snapshot(&session.ns, &joining).await?;
            Ok::<_, zk::Error>((watchers, nodes))
        };
        let (watchers, nodes) = match tokio::time::timeout(self.limit, attempt).await {
            Ok(Ok(done)) => done,
            Ok(Err(e)) => {
                self.after_failed_change(&add);
                return Err(self.map_err(e, &label));
            }
            Err(_) => {
                self.after_failed_change(&add);
                return Err(crate::error::timeout(Op::Watch, &label, self.limit));
            }
        };
        for (entry, watcher) in add.into_iter().zip(watchers) {
            self.watchers.insert(entry, watcher);
        }
        self.retire(&remove);
        // What the old watches covered the view follows already, events included: those
        // reads are taken as after an event (what they show that the view did not goes to the
        // subscribers first); the rest goes into the view.
        let mut read = BTreeMap::new();
        let mut followed = Vec::new();
        for (at, fresh) in nodes {
            if self.watched.covers(&at) {
                followed.push((at, fresh));
            } else {
                self.view.insert(&at, fresh.seen);
                read.insert(at, fresh.node);
            }
        }
        read.extend(self.take_reads(followed));
        self.watched.apply_entries(&joining, &redundant);
        self.set_active();
        Ok(read)
    }

    /// The nodes at `paths` (the view's) as a subscriber is to be shown them: from `read`
    /// (nodes just read) where there, read again otherwise.
    async fn show(
        &mut self,
        paths: Vec<Box<str>>,
        mut read: BTreeMap<Box<str>, Node>,
        label: &str,
    ) -> Result<BTreeMap<String, Node>, RegistryError> {
        let mut shown = BTreeMap::new();
        let mut again = Vec::new();
        for at in paths {
            match read.remove(&at) {
                Some(node) => {
                    shown.insert(at.into_string(), node);
                }
                None => again.push(at),
            }
        }
        if !again.is_empty() {
            shown.extend(self.refresh(again, label).await?);
        }
        Ok(shown)
    }

    /// Reads `paths` (nodes the watches cover) again for a subscriber to be shown them: the
    /// view keeps which state of a node the subscribers were shown, not its data. All reads go
    /// out together; on any failure but a missing or hidden node, nothing is taken.
    async fn refresh(
        &mut self,
        paths: Vec<Box<str>>,
        label: &str,
    ) -> Result<BTreeMap<String, Node>, RegistryError> {
        let Some(session) = self.session.clone() else {
            return Err(RegistryError::ConnectionLoss { op: Op::Watch, path: label.to_owned() });
        };
        let reads = join_all(paths.iter().map(|at| session.ns.get_data(at)));
        let Ok(reads) = tokio::time::timeout(self.limit, reads).await else {
            return Err(crate::error::timeout(Op::Watch, label, self.limit));
        };
        // Every event that came before the answers is taken now: later ones came after.
        self.take();
        let answered_at = self.taken;
        let mut present = Vec::with_capacity(paths.len());
        let mut gone = Vec::new();
        for (at, read) in paths.into_iter().zip(reads) {
            match read {
                Ok((data, stat)) => {
                    present.push((at.clone(), Fresh::new(&at, data, &stat, Some(answered_at))));
                }
                Err(zk::Error::NoNode) => gone.push(at),
                Err(zk::Error::NoAuth) => {
                    tracing::warn!(path = %at, "watch: node unreadable with these credentials; left out");
                }
                Err(e) => return Err(self.map_err(e, &at)),
            }
        }
        // Nothing is taken before every read answered: the deletions, then the rest.
        for at in gone {
            for event in self.on_absent(&at) {
                self.emit(event);
            }
        }
        Ok(self
            .take_reads(present)
            .into_iter()
            .map(|(at, node)| (at.into_string(), node))
            .collect())
    }

    /// Takes reads of nodes the watches covered already as reads after events are taken: what
    /// one shows that the view did not (a change whose events are still on their way) goes to
    /// the subscribers covering it, in the order of the changes (zxids), so that a subscriber
    /// shown these reads and the others see the same states. Returns the nodes read.
    fn take_reads(&mut self, mut reads: Vec<(Box<str>, Fresh)>) -> BTreeMap<Box<str>, Node> {
        reads.sort_by_key(|(_, fresh)| fresh.seen.mzxid);
        let mut nodes = BTreeMap::new();
        for (at, fresh) in reads {
            nodes.insert(at.clone(), fresh.node.clone());
            for event in self.on_node(&at, fresh) {
                self.emit(event);
            }
        }
        nodes
    }

    /// Changes subscriber `id`'s scope to `scope` in place: the watches grow to cover it
    /// (registering and reading only what they lack), the subscriber gets a `Rescoped` event
    /// with the nodes `scope` adds to its old scope, as the view holds them at this point of
    /// its stream, and the watches shrink to what the subscribers need now.
    async fn rescope(&mut self, id: u64, change: ScopeChange) -> Result<(), RegistryError> {
        let label = change.label().to_owned();
        let closed = |path: &str| RegistryError::Closed { op: Op::Watch, path: path.to_owned() };
        let Some(subscriber) = self.subscribers.iter().find(|s| s.id == id) else {
            return Err(closed(&label));
        };
        if change.generation <= subscriber.generation {
            // A retry of a change applied already.
            return Ok(());
        }
        // The entries that leave the subscriber's scope (those it has, and the change does
        // not add back), for narrowing the watches afterwards. The watches cover every
        // subscriber's scope: they cover the new one when they cover what the change adds.
        let leaving = leaving(&subscriber.scope, &change);
        let mut read = BTreeMap::new();
        if !self.watched.includes(&change.add) {
            match self.session.clone() {
                Some(session) => read = self.widen(&session, &change.add).await?,
                None => read = self.rescope_without_session(id, &change).await?,
            }
        }
        let paths = match self.subscribers.iter().find(|s| s.id == id) {
            Some(subscriber) => added_paths(&self.view, &subscriber.scope, &change.add),
            None => return Err(closed(&label)),
        };
        let added = match self.show(paths, read, &label).await {
            Ok(added) => added,
            Err(e) => {
                // The subscriber keeps its old scope (a retry of the change applies it); the
                // watches go back to what the subscribers need.
                self.shrink().await;
                return Err(e);
            }
        };
        let mut sent = false;
        if let Some(subscriber) = self.subscribers.iter_mut().find(|s| s.id == id) {
            subscriber.scope.apply(&change);
            subscriber.generation = change.generation;
            let event = WatchEvent::Rescoped { change, added };
            sent = subscriber.out.send(event).is_ok();
        }
        if sent {
            self.narrow(&leaving).await;
            Ok(())
        } else {
            self.subscribers.retain(|s| s.id != id);
            self.shrink().await;
            Err(closed(&label))
        }
    }

    /// [`Self::rescope`]'s widening with no watches yet, or none since the session ended:
    /// watch everything on the current session; the resync sends every subscriber its scope
    /// anew, and returns the nodes the new scope covers. The scope is the new one meanwhile
    /// (the resync shows it), the old one again on failure.
    async fn rescope_without_session(
        &mut self,
        id: u64,
        change: &ScopeChange,
    ) -> Result<BTreeMap<Box<str>, Node>, RegistryError> {
        let Some(subscriber) = self.subscribers.iter().find(|s| s.id == id) else {
            return Err(RegistryError::Closed { op: Op::Watch, path: change.label().to_owned() });
        };
        let old = subscriber.scope.clone();
        let scope = old.clone().with_change(change);
        let before = self.watched.clone();
        self.watched = before.union(&scope).minimal();
        self.set_scope(id, scope.clone());
        let result = self.try_resync_showing(&scope).await;
        self.set_scope(id, old);
        if result.is_err() {
            self.watched = before;
            if !self.watched.is_empty() {
                self.retry_at = Some(Instant::now() + self.backoff());
            }
        }
        result
    }

    fn set_scope(&mut self, id: u64, scope: WatchScope) {
        if let Some(subscriber) = self.subscribers.iter_mut().find(|s| s.id == id) {
            subscriber.scope = scope;
        }
    }

    /// Drops the watchers of `entries`, once the watches replacing them are registered.
    ///
    /// The events they received before that registration answered reached the client through
    /// them alone (ZooKeeper sends a session the events of a change before the answer to any
    /// later request), and sit in their channels until taken: taken first, or they would go
    /// with the watchers, and the view would keep those nodes as they were before (an owner
    /// node, say, for good: the swaps of narrow and wide scopes lost exactly these).
    fn retire(&mut self, entries: &[Entry]) {
        if entries.is_empty() {
            return;
        }
        self.take();
        self.watchers.remove(entries);
    }

    /// A change of the watches failed half-way. A watch registered on a path another watch
    /// of this client already held has replaced that one's mode on the server (ZooKeeper keeps
    /// one per path): a resync registers every watch again with its own.
    fn after_failed_change(&mut self, tried: &[Entry]) {
        if tried.iter().any(|e| self.watchers.holds_path(&e.path)) {
            self.need_resync = true;
        }
    }

    /// A subscriber left: the watches shrink to what the others need, and the view with them.
    async fn leave(&mut self, id: u64) {
        self.subscribers.retain(|s| s.id != id);
        self.shrink().await;
    }

    /// The watches shrink to what the subscribers need, and the view with them: the whole
    /// union of their scopes computed again (after a failure, or a subscriber gone).
    async fn shrink(&mut self) {
        // Sorted once, not merged subscriber by subscriber.
        let target = WatchScope::union_of(self.subscribers.iter().map(|s| &s.scope)).minimal();
        if target == self.watched {
            return;
        }
        let (returning, gone) = {
            let (added_subtrees, added_nodes, removed_subtrees, removed_nodes) =
                self.watched.entry_changes(&target);
            let owned = |v: Vec<&str>| v.into_iter().map(str::to_owned).collect::<Vec<_>>();
            (
                WatchScope::of_entries(owned(added_subtrees), owned(added_nodes)),
                WatchScope::of_entries(owned(removed_subtrees), owned(removed_nodes)),
            )
        };
        self.change_watches(returning, gone).await;
    }

    /// The watches shrink after `leaving` left a subscriber's scope: looks at those entries
    /// and the subscribers' entries below them, not at every watch.
    async fn narrow(&mut self, leaving: &WatchScope) {
        if leaving.is_empty() {
            return;
        }
        let scopes: Vec<&WatchScope> = self.subscribers.iter().map(|s| &s.scope).collect();
        let (returning, gone) = self.watched.narrowing(leaving, &scopes);
        if returning.is_empty() && gone.is_empty() {
            self.check_watched();
            return;
        }
        self.change_watches(returning, gone).await;
    }

    /// Registers the watches of `returning` and drops those of `gone`, the view with them.
    async fn change_watches(&mut self, returning: WatchScope, gone: WatchScope) {
        let (add, remove, replacing) = entries_of(&returning, &gone);
        // A narrower watch takes over part of a wider one (a node inside a subtree left alone,
        // a subtree's root kept as a node): registered before the wider one goes, so nothing
        // falls between. The view already holds what it covers.
        // Without a session they are registered with everything else once there is one.
        if let (false, Some(session)) = (add.is_empty(), &self.session) {
            let registered =
                tokio::time::timeout(self.limit, register_change(&session.ns, &add, replacing))
                    .await;
            match registered {
                Ok(Ok(watchers)) => {
                    for (entry, watcher) in add.into_iter().zip(watchers) {
                        self.watchers.insert(entry, watcher);
                    }
                }
                _ => {
                    tracing::debug!("watch: narrowing the watches failed; resyncing");
                    self.need_resync = true;
                }
            }
        }
        self.retire(&remove);
        self.watched.apply_entries(&returning, &gone);
        self.view.drop_uncovered(&gone, &self.watched);
        self.check_watched();
        self.set_active();
    }

    /// In debug builds (the tests), that the watches kept change by change are the minimal
    /// union of the subscribers' scopes computed whole.
    fn check_watched(&self) {
        if cfg!(debug_assertions) {
            let whole = WatchScope::union_of(self.subscribers.iter().map(|s| &s.scope)).minimal();
            debug_assert_eq!(self.watched, whole, "the watches kept by changes drifted");
        }
    }

    /// Registers every watch again on the current session, re-reads what they cover and sends
    /// it as a resync; on failure, schedules another try.
    ///
    /// Registering again is not redundant: `zookeeper-client` 0.11.2 does not restore persistent
    /// watches when it reconnects (its `resend_watches` never sends the persistent kinds), so
    /// after a reconnect the server knows no watch for us. The new watchers replace the old
    /// ones before the snapshot is read, so no change falls between the two.
    pub async fn resync(&mut self) -> Next {
        match self.try_resync().await {
            Ok(()) => Next::Continue,
            Err(RegistryError::Closed { .. }) => Next::Stop,
            Err(e) => {
                tracing::debug!(error = %e, "watch: resync failed; retrying");
                self.retry_at = Some(Instant::now() + self.backoff());
                Next::Continue
            }
        }
    }

    async fn try_resync(&mut self) -> Result<(), RegistryError> {
        self.try_resync_showing(&WatchScope::new()).await.map(drop)
    }

    /// [`Self::try_resync`], returning the nodes read that `keep` covers.
    async fn try_resync_showing(
        &mut self,
        keep: &WatchScope,
    ) -> Result<BTreeMap<Box<str>, Node>, RegistryError> {
        let label = super::label(&self.watched).to_owned();
        let Some(shared) = self.shared.upgrade() else {
            return Err(RegistryError::Closed { op: Op::Watch, path: label });
        };
        if shared.is_closed() {
            return Err(RegistryError::Closed { op: Op::Watch, path: label });
        }
        let current = shared.current();
        drop(shared);
        let Some(session) = current else {
            // The generation bump that brings the next session brings a resync.
            return Err(RegistryError::ConnectionLoss { op: Op::Watch, path: label });
        };
        if self.session.as_ref().is_some_and(|s| s.id != session.id) {
            self.drop_watches();
        }
        let entries = Entry::of(&self.watched);
        let attempt = async {
            let watchers = register(&session.ns, &entries).await?;
            let nodes = snapshot(&session.ns, &self.watched).await?;
            Ok::<_, zk::Error>((watchers, nodes))
        };
        match tokio::time::timeout(self.limit, attempt).await {
            Ok(Ok((watchers, nodes))) => {
                // Events still queued in the old watchers, or pending, predate the snapshot.
                self.watchers.clear();
                for (entry, watcher) in entries.into_iter().zip(watchers) {
                    self.watchers.insert(entry, watcher);
                }
                if self.session.is_none() {
                    self.link_lost = false;
                }
                self.session = Some(session);
                self.forget_pending();
                self.failures = 0;
                self.retry_at = None;
                let kept = self.install(nodes, keep);
                self.set_active();
                Ok(kept)
            }
            Ok(Err(e)) => {
                if matches!(e, zk::Error::SessionExpired | zk::Error::ClientClosed) {
                    self.drop_watches();
                }
                Err(self.map_err(e, &label))
            }
            Err(_) => Err(crate::error::timeout(Op::Watch, &label, self.limit)),
        }
    }

    /// Replaces the view with a snapshot and sends each subscriber its part; returns the nodes
    /// `keep` covers.
    fn install(&mut self, nodes: Snapshot, keep: &WatchScope) -> BTreeMap<Box<str>, Node> {
        self.need_resync = false;
        // A closed channel means the subscriber left.
        self.subscribers
            .retain(|s| s.out.send(WatchEvent::Resync { nodes: within(&nodes, &s.scope) }).is_ok());
        let mut kept = BTreeMap::new();
        self.view = View::from_sorted(nodes.into_iter().map(|(at, fresh)| {
            if keep.covers(&at) {
                kept.insert(at.clone(), fresh.node);
            }
            (at, fresh.seen)
        }));
        kept
    }

    /// Tells the hub whether writes must let this feed catch up.
    fn set_active(&self) {
        if let Some(shared) = self.shared.upgrade() {
            shared.watches.set_active(!self.watchers.is_empty());
        }
    }

    fn map_err(&self, e: zk::Error, at: &str) -> RegistryError {
        match self.shared.upgrade() {
            Some(shared) if !shared.is_closed() => crate::error::map(e, At::new(Op::Watch, at)),
            _ => RegistryError::Closed { op: Op::Watch, path: at.to_owned() },
        }
    }

    pub fn backoff(&mut self) -> Duration {
        self.failures = self.failures.saturating_add(1);
        let factor = 1u32.checked_shl(self.failures - 1).unwrap_or(u32::MAX);
        FIRST_PAUSE.saturating_mul(factor).min(MAX_PAUSE)
    }

    pub fn answer_waiting(&mut self) {
        let done = self.done;
        let (through, still): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.waiting).into_iter().partition(|(n, _)| *n <= done);
        self.waiting = still;
        for (_, ack) in through {
            let _ = ack.send(());
        }
    }

    /// Drops what was pending (a resync or a new session covers it) and answers every waiter.
    pub fn forget_pending(&mut self) {
        self.done += self.pending.len() as u64;
        self.pending.clear();
        self.done = self.done.max(self.taken);
        self.answer_waiting();
    }
}

/// Registers a watch per entry (the requests go out together); all or nothing.
async fn register(
    client: &zk::Client,
    entries: &[Entry],
) -> Result<Vec<zk::PersistentWatcher>, zk::Error> {
    join_all(entries.iter().map(|e| client.watch(&e.path, e.mode()))).await.into_iter().collect()
}

/// Registers the watches `add` of a change (ordered by [`changes`]: the entries that replace a
/// watch the change drops come last), a watcher per entry, in its order; all or nothing.
///
/// ZooKeeper keeps one watch per path and client, the last one registered: an entry on the
/// path of a dropped one (a subtree's root watched as a node instead, or the other way round)
/// replaces the old watch the moment the server registers it. Those go in a second round,
/// once the rest of `add` is in place. In one round, the node watch on a subtree's root could
/// end its recursive watch before the watches of the nodes below were registered, and a change
/// of one of those in between reached the client through neither: a scheduler that stopped
/// watching an item whole missed the reshard that gave it the item, for good.
async fn register_change(
    client: &zk::Client,
    add: &[Entry],
    replacing: usize,
) -> Result<Vec<zk::PersistentWatcher>, zk::Error> {
    let (rest, replacing) = add.split_at(add.len() - replacing);
    let mut watchers = register(client, rest).await?;
    watchers.extend(register(client, replacing).await?);
    Ok(watchers)
}

/// The watches to add and to remove for `joining` and `leaving` entries, and how many of the
/// added ones (at the end) are on the path of a removed one. See [`register_change`] for why
/// the replacing ones come last.
fn entries_of(joining: &WatchScope, leaving: &WatchScope) -> (Vec<Entry>, Vec<Entry>, usize) {
    let entries = |scope: &WatchScope| -> Vec<Entry> {
        let subtrees =
            scope.subtrees().iter().map(|p| Entry { path: p.to_owned(), recursive: true });
        let nodes = scope.nodes().iter().map(|p| Entry { path: p.to_owned(), recursive: false });
        subtrees.chain(nodes).collect()
    };
    let remove = entries(leaving);
    let replaced: BTreeSet<&str> = remove.iter().map(|e| e.path.as_str()).collect();
    let (mut add, replacing): (Vec<Entry>, Vec<Entry>) =
        entries(joining).into_iter().partition(|e| !replaced.contains(e.path.as_str()));
    let last = replacing.len();
    add.extend(replacing);
    (add, remove, last)
}

/// The entries of `scope` that `change` takes out of it and does not put back.
fn leaving(scope: &WatchScope, change: &ScopeChange) -> WatchScope {
    let subtrees = change.remove.subtrees().iter();
    let nodes = change.remove.nodes().iter();
    WatchScope::of_entries(
        subtrees.filter(|r| scope.has_subtree(r) && !change.add.has_subtree(r)).cloned().collect(),
        nodes.filter(|n| scope.has_node(n) && !change.add.has_node(n)).cloned().collect(),
    )
}

/// The paths of `view` that `added` (a change's added entries) covers and `old` does not: the
/// nodes the change of a subscriber's scope from `old` adds. Looks at the added entries only,
/// not at the whole new scope (tens of thousands of entries at ten thousand jobs).
fn added_paths(view: &View, old: &WatchScope, added: &WatchScope) -> Vec<Box<str>> {
    let subtrees = added
        .subtrees()
        .iter()
        .filter(|root| !old.includes(&WatchScope::subtree(root.as_str())))
        .cloned()
        .collect();
    let nodes = added.nodes().iter().filter(|at| !old.covers(at)).cloned().collect();
    let mut paths = view.covered_by(&WatchScope::of_entries(subtrees, nodes));
    paths.retain(|at| !old.covers(at));
    paths
}

/// The part of `nodes` that `scope` covers, as the contract's nodes.
fn within(nodes: &Snapshot, scope: &WatchScope) -> BTreeMap<String, Node> {
    nodes
        .iter()
        .filter(|(at, _)| scope.covers(at))
        .map(|(at, fresh)| (at.to_string(), fresh.node.clone()))
        .collect()
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(path: &str) -> Entry {
        Entry { path: path.to_owned(), recursive: false }
    }

    fn subtree(path: &str) -> Entry {
        Entry { path: path.to_owned(), recursive: true }
    }

    #[test]
    fn a_node_watch_replacing_its_subtree_is_registered_after_the_nodes_below() {
        let from = WatchScope::subtree("/j/sharding/5").with_node("/j/config".to_owned());
        let to = WatchScope::node("/j/sharding/5")
            .with_node("/j/sharding/5/instance".to_owned())
            .with_node("/j/sharding/5/failover".to_owned())
            .with_node("/j/config".to_owned());
        // The subtree leaves; the nodes below it that `to` has come back.
        let (returning, gone) = from.narrowing(&WatchScope::subtree("/j/sharding/5"), &[&to]);
        let (add, remove, replacing) = entries_of(&returning, &gone);
        assert_eq!(remove, [subtree("/j/sharding/5")]);
        assert_eq!(
            add,
            [node("/j/sharding/5/failover"), node("/j/sharding/5/instance"), node("/j/sharding/5")],
            "the root's node watch last"
        );
        assert_eq!(replacing, 1);
        // The other way, the subtree's watch replaces the root's node watch: alone, and last.
        let (joining, redundant) = to.widening(&WatchScope::subtree("/j/sharding/5"));
        let (add, _, replacing) = entries_of(&joining, &redundant);
        assert_eq!((add, replacing), (vec![subtree("/j/sharding/5")], 1));
    }
}
