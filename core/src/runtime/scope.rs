//! Which part of the namespace the process watches (issue #15): the union of what its jobs
//! need ([`crate::protocol::job::JobScope`]), changed in place when the union changes.
//!
//! The process keeps one watch stream for its whole life. Each entry of the union (a subtree
//! or a node) counts the jobs that need it, so a job's change of scope touches its own
//! entries only: the union changes where a count leaves or reaches zero. When it changes, a
//! task of its own (the driver never waits for the registry) sends the stream's
//! [`WatchScoper`](crate::registry::WatchScoper) the difference ([`ScopeChange`]); the backend
//! registers and reads only what the change adds, and the stream then carries a `Rescoped`
//! event, in its order, with the nodes added. The driver applies it to the view where it comes
//! ([`crate::protocol::view::View::rescope`]: nodes no entry covers any more leave, the added
//! ones come in, the rest stays as the same watch keeps it), tells the jobs whose scope
//! changed to look again (a resync), and the others of any added node of theirs. One change is
//! under way at a time; the changes asked for meanwhile are taken together by the next. Every
//! step costs what the change changes, not the size of the union: a process registering
//! thousands of jobs one after the other changes its scope at each.
//!
//! A change that fails (the registry unreachable) is sent again until it works; the jobs that
//! need it wait meanwhile. Each change has a generation, so that a try that timed out but was
//! applied after all makes its retry a no-op rather than undo a later change.
//!
//! A stream without a scoper (a backend outside this repository) is swapped instead: a new
//! watch of the whole union is opened, and its snapshot replaces the view
//! ([`crate::protocol::view::View::swap`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::StreamExt;
use rustc_hash::{FxHashMap, FxHashSet};
use tokio::sync::mpsc;

use super::{JobId, Shared};
use crate::registry::{
    Node, RegistryError, ScopeChange, WatchEvent, WatchScope, WatchScoper, WatchStream,
};

/// A watch opened for a swap (streams without a scoper), with its first snapshot.
pub(crate) struct Opened {
    pub scope: WatchScope,
    /// The jobs whose scope changed since the last change was asked for.
    pub asked: BTreeSet<JobId>,
    pub stream: WatchStream,
    pub nodes: BTreeMap<String, Node>,
}

/// An entry of the union: a subtree's root or a single node.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Entry {
    Subtree(String),
    Node(String),
}

/// What is known of an entry.
#[derive(Debug, Default)]
struct Count {
    /// How many jobs' scopes have it.
    jobs: u32,
    /// Whether the stream has it (as of the last change applied).
    watched: bool,
}

/// The jobs' scopes and the change under way.
pub(crate) struct Watching {
    /// What each job asked for last.
    scopes: BTreeMap<JobId, WatchScope>,
    /// Every entry a job needs or the stream has. Gone once neither. Hashed (a process of
    /// 100 jobs in a cluster of 20 has thousands of entries, with long common prefixes): what
    /// comes out of it in its own order is sorted before use ([`WatchScope::of_entries`]).
    counts: FxHashMap<Entry, Count>,
    /// Entries whose count or presence changed since the last change was asked for (in no
    /// order: the change made of them is sorted).
    touched: FxHashSet<Entry>,
    /// Jobs whose scope changed since the last change was asked for.
    dirty: BTreeSet<JobId>,
    /// The change under way, and the jobs whose scope it is for.
    asked: Option<(ScopeChange, BTreeSet<JobId>)>,
    /// The generation of the last change asked for.
    generation: u64,
    /// What changes the current stream's scope; `None`: swap streams instead.
    scoper: Option<Arc<dyn WatchScoper>>,
    opened_tx: mpsc::UnboundedSender<Opened>,
    pub opened: mpsc::UnboundedReceiver<Opened>,
}

/// How long a failed change waits before it is tried again.
const RETRY_MS: i64 = 500;

fn entries(scope: &WatchScope) -> impl Iterator<Item = Entry> + '_ {
    let subtrees = scope.subtrees().iter().map(|r| Entry::Subtree(r.clone()));
    subtrees.chain(scope.nodes().iter().map(|n| Entry::Node(n.clone())))
}

fn entries_of(subtrees: Vec<&str>, nodes: Vec<&str>) -> Vec<Entry> {
    let subtrees = subtrees.into_iter().map(|r| Entry::Subtree(r.to_owned()));
    subtrees.chain(nodes.into_iter().map(|n| Entry::Node(n.to_owned()))).collect()
}

impl Watching {
    /// Watching `current` with the stream whose scoper is `scoper`, no job yet.
    pub fn new(current: WatchScope, scoper: Option<Arc<dyn WatchScoper>>) -> Self {
        let (opened_tx, opened) = mpsc::unbounded_channel();
        let mut watching = Watching {
            scopes: BTreeMap::new(),
            counts: FxHashMap::default(),
            touched: FxHashSet::default(),
            dirty: BTreeSet::new(),
            asked: None,
            generation: 0,
            scoper,
            opened_tx,
            opened,
        };
        watching.watch(&current);
        watching
    }

    /// Job `job` needs `scope` (`None`: nothing any more). Starts a change when the union
    /// changed.
    pub fn set(&mut self, shared: &Arc<Shared>, job: JobId, scope: Option<WatchScope>) {
        let old = match scope {
            Some(scope) => self.scopes.insert(job, scope),
            None => self.scopes.remove(&job),
        };
        let new = self.scopes.get(&job);
        if old.as_ref() == new {
            return;
        }
        // Only the entries this job's scope gained or lost are looked at, whatever the size
        // of the union or of the job's scope (a narrow one changes by a marker per fire).
        let empty = WatchScope::new();
        let (came_subtrees, came_nodes, gone_subtrees, gone_nodes) =
            old.as_ref().unwrap_or(&empty).entry_changes(new.unwrap_or(&empty));
        let came = entries_of(came_subtrees, came_nodes);
        let gone = entries_of(gone_subtrees, gone_nodes);
        for entry in came {
            self.counts.entry(entry.clone()).or_default().jobs += 1;
            self.touched.insert(entry);
        }
        for entry in gone {
            if let Some(count) = self.counts.get_mut(&entry) {
                count.jobs = count.jobs.saturating_sub(1);
            }
            self.touched.insert(entry);
        }
        self.dirty.insert(job);
        self.change_if_needed(shared);
    }

    /// The stream carried a `Rescoped` event for `change`: the change asked for is in force.
    /// Starts the next change if the jobs asked for another scope meanwhile. Returns the jobs
    /// whose scope it changed (they look at everything again).
    pub fn rescoped(&mut self, shared: &Arc<Shared>, change: &ScopeChange) -> BTreeSet<JobId> {
        match self.asked.take() {
            Some((asked, jobs)) if asked.generation == change.generation => {
                self.applied(&asked);
                self.done(shared, jobs)
            }
            other => {
                // Not the change under way: with generations a backend applies each once,
                // so this is an event this driver did not ask for. Its entries are what the
                // stream has now; the next change starts from them.
                tracing::debug!(
                    generation = change.generation,
                    "watch: a scope change nobody waited for"
                );
                self.asked = other;
                self.applied(change);
                let jobs = self.scopes.keys().copied().collect();
                self.change_if_needed(shared);
                jobs
            }
        }
    }

    /// A swap's watch is open: it is the current one from now on (see [`Self::rescoped`]).
    pub fn opened(
        &mut self,
        shared: &Arc<Shared>,
        scope: WatchScope,
        asked: BTreeSet<JobId>,
        scoper: Option<Arc<dyn WatchScoper>>,
    ) -> BTreeSet<JobId> {
        self.asked = None;
        self.scoper = scoper;
        let stale: Vec<Entry> =
            self.counts.iter().filter(|(_, c)| c.watched).map(|(e, _)| e.clone()).collect();
        for entry in stale {
            self.unwatch(&entry);
        }
        self.watch(&scope);
        self.done(shared, asked)
    }

    fn done(&mut self, shared: &Arc<Shared>, mut jobs: BTreeSet<JobId>) -> BTreeSet<JobId> {
        if !self.change_if_needed(shared) {
            // Whose scope changed meanwhile within what the stream has: covered now.
            jobs.append(&mut self.dirty);
        }
        jobs
    }

    /// Records that the stream has `change` in force.
    fn applied(&mut self, change: &ScopeChange) {
        for entry in entries(&change.remove) {
            self.unwatch(&entry);
        }
        self.watch(&change.add);
    }

    fn watch(&mut self, scope: &WatchScope) {
        for entry in entries(scope) {
            self.counts.entry(entry.clone()).or_default().watched = true;
            self.touched.insert(entry);
        }
    }

    fn unwatch(&mut self, entry: &Entry) {
        if let Some(count) = self.counts.get_mut(entry) {
            count.watched = false;
            self.touched.insert(entry.clone());
        }
    }

    /// The change from what the stream has to what the jobs need, looking at the entries
    /// touched since the last one only. Forgets the entries nobody needs or watches.
    fn pending(&mut self) -> ScopeChange {
        let (mut add_subtrees, mut add_nodes) = (Vec::new(), Vec::new());
        let (mut remove_subtrees, mut remove_nodes) = (Vec::new(), Vec::new());
        for entry in std::mem::take(&mut self.touched) {
            let Some(count) = self.counts.get(&entry) else { continue };
            let (wanted, watched) = (count.jobs > 0, count.watched);
            if !wanted && !watched {
                self.counts.remove(&entry);
                continue;
            }
            match (entry, wanted, watched) {
                (Entry::Subtree(r), true, false) => add_subtrees.push(r),
                (Entry::Node(n), true, false) => add_nodes.push(n),
                (Entry::Subtree(r), false, true) => remove_subtrees.push(r),
                (Entry::Node(n), false, true) => remove_nodes.push(n),
                _ => {}
            }
        }
        ScopeChange {
            generation: self.generation + 1,
            add: WatchScope::of_entries(add_subtrees, add_nodes),
            remove: WatchScope::of_entries(remove_subtrees, remove_nodes),
        }
    }

    /// What the jobs need, whole (for a swap, which opens a new watch of it).
    fn wanted(&self) -> WatchScope {
        let (mut subtrees, mut nodes) = (Vec::new(), Vec::new());
        for (entry, count) in &self.counts {
            match entry {
                Entry::Subtree(r) if count.jobs > 0 => subtrees.push(r.clone()),
                Entry::Node(n) if count.jobs > 0 => nodes.push(n.clone()),
                _ => {}
            }
        }
        WatchScope::of_entries(subtrees, nodes)
    }

    /// Starts a change if none is under way and the union differs from what the stream has.
    /// Returns whether one is under way now.
    fn change_if_needed(&mut self, shared: &Arc<Shared>) -> bool {
        if self.asked.is_some() {
            return true;
        }
        let change = self.pending();
        if change.is_empty() {
            return false;
        }
        self.generation = change.generation;
        let jobs = std::mem::take(&mut self.dirty);
        let task = match self.scoper.clone() {
            Some(scoper) => {
                self.asked = Some((change.clone(), jobs));
                let shared = shared.clone();
                Box::pin(async move { rescope_until_done(&shared, scoper.as_ref(), change).await })
                    as futures::future::BoxFuture<'static, ()>
            }
            None => {
                let wanted = self.wanted();
                self.asked = Some((change, jobs.clone()));
                let tx = self.opened_tx.clone();
                let opener = shared.clone();
                Box::pin(async move {
                    let opened = open_until_done(&opener, wanted, jobs).await;
                    let _ = tx.send(opened);
                })
            }
        };
        shared.handles.spawner.spawn(task);
        true
    }
}

/// Sends `change` again and again until it works (the registry may be unreachable for a
/// while). The stream then carries the `Rescoped` event the driver acts on. A try that timed
/// out may still be applied later: its generation makes the retry (or a later try of it)
/// change nothing.
async fn rescope_until_done(shared: &Shared, scoper: &dyn WatchScoper, change: ScopeChange) {
    loop {
        match scoper.rescope(change.clone()).await {
            Ok(()) => return,
            // The client is closed: the stream ends, and the driver with it.
            Err(RegistryError::Closed { .. }) => return,
            Err(e) => {
                tracing::warn!(error = %e, "cannot change the scope of the jobs' watch; trying again");
                let clock = &shared.handles.clock;
                clock.sleep_until(clock.now_ms() + RETRY_MS).await;
            }
        }
    }
}

/// Opens a watch of `scope` and takes its snapshot, again and again until it works.
async fn open_until_done(
    shared: &Arc<Shared>,
    scope: WatchScope,
    asked: BTreeSet<JobId>,
) -> Opened {
    loop {
        match open(shared, &scope).await {
            Ok((stream, nodes)) => return Opened { scope, asked, stream, nodes },
            Err(e) => {
                tracing::warn!(error = %e, "cannot open the watch of the jobs' scope; trying again");
                let clock = &shared.handles.clock;
                clock.sleep_until(clock.now_ms() + RETRY_MS).await;
            }
        }
    }
}

async fn open(
    shared: &Shared,
    scope: &WatchScope,
) -> Result<(WatchStream, BTreeMap<String, Node>), RegistryError> {
    let mut stream = shared.registry.watch_scope(scope.clone()).await?;
    match stream.next().await {
        Some(WatchEvent::Resync { nodes }) => Ok((stream, nodes)),
        _ => Err(RegistryError::Closed { op: crate::registry::Op::Watch, path: "/".into() }),
    }
}
