//! Which part of the namespace the process watches (issue #15): the union of what its jobs
//! need ([`crate::protocol::job::JobScope`]), changed in place when the union changes.
//!
//! The process keeps one watch stream for its whole life. When the union changes, a task of
//! its own (the driver never waits for the registry) asks the stream's
//! [`WatchScoper`](crate::registry::WatchScoper) for the new scope; the backend registers and
//! reads only what the change adds, and the stream then carries a `Rescoped` event, in its
//! order, with the nodes added. The driver applies it to the view where it comes
//! ([`crate::protocol::view::View::rescope`]: nodes outside the new scope leave, the added ones
//! come in, the rest stays as the same watch keeps it), tells the jobs whose scope changed to
//! look again (a resync), and the others of any added node of theirs. One change is under
//! way at a time; the scopes asked for meanwhile are taken together by the next. A change that
//! fails (the registry unreachable) is asked again until it works; the jobs that need it wait
//! meanwhile.
//!
//! A stream without a scoper (a backend outside this repository) is swapped instead: a new
//! watch of the whole union is opened, and its snapshot replaces the view
//! ([`crate::protocol::view::View::swap`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use tokio::sync::mpsc;

use super::{JobId, Shared};
use crate::registry::{Node, RegistryError, WatchEvent, WatchScope, WatchScoper, WatchStream};

/// A watch opened for a swap (streams without a scoper), with its first snapshot.
pub(crate) struct Opened {
    pub scope: WatchScope,
    /// Each job's scope when the watch was asked for.
    pub asked: BTreeMap<JobId, Arc<WatchScope>>,
    pub stream: WatchStream,
    pub nodes: BTreeMap<String, Node>,
}

/// The jobs' scopes and the change under way.
pub(crate) struct Watching {
    /// What each job asked for last (shared: every change records them all).
    scopes: BTreeMap<JobId, Arc<WatchScope>>,
    /// What the current watch covers.
    current: WatchScope,
    /// Each job's scope the current watch was set for.
    granted: BTreeMap<JobId, Arc<WatchScope>>,
    /// The change under way: the scope asked for, and each job's scope then.
    asked: Option<(WatchScope, BTreeMap<JobId, Arc<WatchScope>>)>,
    /// What changes the current stream's scope; `None`: swap streams instead.
    scoper: Option<Arc<dyn WatchScoper>>,
    opened_tx: mpsc::UnboundedSender<Opened>,
    pub opened: mpsc::UnboundedReceiver<Opened>,
}

/// How long a failed change waits before it is tried again.
const RETRY_MS: i64 = 500;

impl Watching {
    /// Watching `current` with the stream whose scoper is `scoper`, no job yet.
    pub fn new(current: WatchScope, scoper: Option<Arc<dyn WatchScoper>>) -> Self {
        let (opened_tx, opened) = mpsc::unbounded_channel();
        Watching {
            scopes: BTreeMap::new(),
            current,
            granted: BTreeMap::new(),
            asked: None,
            scoper,
            opened_tx,
            opened,
        }
    }

    /// Job `job` needs `scope` (`None`: nothing any more). Starts a change when the union
    /// changed.
    pub fn set(&mut self, shared: &Arc<Shared>, job: JobId, scope: Option<WatchScope>) {
        match scope {
            Some(scope) => self.scopes.insert(job, Arc::new(scope)),
            None => self.scopes.remove(&job),
        };
        self.change_if_needed(shared);
    }

    /// The stream carried a `Rescoped` event for `scope`: the change asked for is in force.
    /// Starts the next change if the jobs asked for another scope meanwhile. Returns the jobs
    /// whose scope it changed (they look at everything again).
    pub fn rescoped(&mut self, shared: &Arc<Shared>, scope: &WatchScope) -> Vec<JobId> {
        let asked = match self.asked.take() {
            Some((wanted, asked)) if wanted == *scope => asked,
            // Not the change under way: a change that timed out on its way and was applied
            // after all (its retry, or the next change, comes after it). The stream covers
            // `scope` now: every job looks again, and a change to what they want follows
            // unless one is under way.
            other => {
                self.asked = other;
                self.current = scope.clone();
                self.granted.clear();
                self.change_if_needed(shared);
                return self.scopes.keys().copied().collect();
            }
        };
        self.done(shared, scope.clone(), asked)
    }

    /// A swap's watch is open: it is the current one from now on (see [`Self::rescoped`]).
    pub fn opened(
        &mut self,
        shared: &Arc<Shared>,
        scope: WatchScope,
        asked: BTreeMap<JobId, Arc<WatchScope>>,
        scoper: Option<Arc<dyn WatchScoper>>,
    ) -> Vec<JobId> {
        self.asked = None;
        self.scoper = scoper;
        self.done(shared, scope, asked)
    }

    fn done(
        &mut self,
        shared: &Arc<Shared>,
        scope: WatchScope,
        asked: BTreeMap<JobId, Arc<WatchScope>>,
    ) -> Vec<JobId> {
        self.current = scope;
        let same = |job: &JobId, s: &Arc<WatchScope>| {
            self.granted.get(job).is_some_and(|g| Arc::ptr_eq(g, s) || g == s)
        };
        let changed = asked.iter().filter(|(job, s)| !same(job, s)).map(|(j, _)| *j);
        let changed = changed.collect();
        self.granted = asked;
        self.change_if_needed(shared);
        changed
    }

    fn wanted(&self) -> WatchScope {
        // Not `minimal`: the backends make their server-side entries minimal themselves.
        WatchScope::union_of(self.scopes.values().map(|s| s.as_ref()))
    }

    fn change_if_needed(&mut self, shared: &Arc<Shared>) {
        if self.asked.is_some() {
            return;
        }
        let wanted = self.wanted();
        if wanted == self.current {
            return;
        }
        self.asked = Some((wanted.clone(), self.scopes.clone()));
        let task = match self.scoper.clone() {
            Some(scoper) => {
                let shared = shared.clone();
                Box::pin(async move { rescope_until_done(&shared, scoper.as_ref(), wanted).await })
                    as futures::future::BoxFuture<'static, ()>
            }
            None => {
                let tx = self.opened_tx.clone();
                let opener = shared.clone();
                let asked = self.scopes.clone();
                Box::pin(async move {
                    let opened = open_until_done(&opener, wanted, asked).await;
                    let _ = tx.send(opened);
                })
            }
        };
        shared.handles.spawner.spawn(task);
    }
}

/// Asks for `scope` again and again until it works (the registry may be unreachable for a
/// while). The stream then carries the `Rescoped` event the driver acts on. A try that timed
/// out may still be applied later, after a newer change: the driver then asks again for
/// what the jobs want (`Watching::rescoped`).
async fn rescope_until_done(shared: &Shared, scoper: &dyn WatchScoper, scope: WatchScope) {
    loop {
        match scoper.rescope(scope.clone()).await {
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
    asked: BTreeMap<JobId, Arc<WatchScope>>,
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
