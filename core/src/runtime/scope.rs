//! Which part of the namespace the process watches (issue #15): the union of what its jobs
//! need ([`crate::protocol::job::JobScope`]), swapped when the union changes.
//!
//! A swap opens the new watch on a task of its own (the driver never waits for the
//! registry), takes its first snapshot, and hands both to the driver. The driver takes what
//! the old watch has ready, replaces the view with the snapshot
//! ([`crate::protocol::view::View::swap`]: nodes outside the new scope leave it), drops the old
//! watch, and tells the jobs whose scope changed to look again (a resync); the others hear of
//! each node the snapshot shows otherwise than the old watch did, as changes. What the old
//! watch showed after the snapshot was taken the new watch delivers again, applied before any
//! job looks. One swap is under way at a time; the scopes asked for meanwhile are taken
//! together by the next. On ZooKeeper the client's one feed keeps the nodes both watches
//! cover, so a swap reads only what the new scope adds.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use tokio::sync::mpsc;

use super::{JobId, Shared};
use crate::registry::{Node, RegistryError, WatchEvent, WatchScope, WatchStream};

/// A watch opened for a swap, with its first snapshot.
pub(crate) struct Opened {
    pub scope: WatchScope,
    /// Each job's scope when the watch was asked for.
    pub asked: BTreeMap<JobId, WatchScope>,
    pub stream: WatchStream,
    pub nodes: BTreeMap<String, Node>,
}

/// The jobs' scopes and the swap under way.
pub(crate) struct Watching {
    /// What each job asked for last.
    scopes: BTreeMap<JobId, WatchScope>,
    /// What the current watch covers.
    current: WatchScope,
    /// Each job's scope the current watch was opened for.
    granted: BTreeMap<JobId, WatchScope>,
    /// A swap is under way.
    opening: bool,
    opened_tx: mpsc::UnboundedSender<Opened>,
    pub opened: mpsc::UnboundedReceiver<Opened>,
}

/// How long a failed open waits before it is tried again.
const RETRY_MS: i64 = 500;

impl Watching {
    /// Watching `current` (the scheduler's first watch), no job yet.
    pub fn new(current: WatchScope) -> Self {
        let (opened_tx, opened) = mpsc::unbounded_channel();
        Watching {
            scopes: BTreeMap::new(),
            current,
            granted: BTreeMap::new(),
            opening: false,
            opened_tx,
            opened,
        }
    }

    /// Job `job` needs `scope` (`None`: nothing any more). Starts a swap when the union changed.
    pub fn set(&mut self, shared: &Arc<Shared>, job: JobId, scope: Option<WatchScope>) {
        match scope {
            Some(scope) => self.scopes.insert(job, scope),
            None => self.scopes.remove(&job),
        };
        self.swap_if_needed(shared);
    }

    /// A swap's watch is open: it is the current one from now on. Starts the next swap if
    /// the jobs asked for another scope meanwhile. Returns the jobs whose scope it changed
    /// (they look at everything again).
    pub fn opened(
        &mut self,
        shared: &Arc<Shared>,
        scope: WatchScope,
        asked: BTreeMap<JobId, WatchScope>,
    ) -> Vec<JobId> {
        self.opening = false;
        self.current = scope;
        let changed =
            asked.iter().filter(|(job, s)| self.granted.get(job) != Some(s)).map(|(j, _)| *j);
        let changed = changed.collect();
        self.granted = asked;
        self.swap_if_needed(shared);
        changed
    }

    fn wanted(&self) -> WatchScope {
        // Not `minimal`: the backends make their server-side entries minimal themselves.
        WatchScope::union_of(self.scopes.values())
    }

    fn swap_if_needed(&mut self, shared: &Arc<Shared>) {
        if self.opening {
            return;
        }
        let wanted = self.wanted();
        if wanted == self.current {
            return;
        }
        self.opening = true;
        let tx = self.opened_tx.clone();
        let opener = shared.clone();
        let asked = self.scopes.clone();
        let task = async move {
            let opened = open_until_done(&opener, wanted, asked).await;
            let _ = tx.send(opened);
        };
        shared.handles.spawner.spawn(Box::pin(task));
    }
}

/// Opens a watch of `scope` and takes its snapshot, again and again until it works (the
/// registry may be unreachable for a while; the jobs that need the scope wait meanwhile).
async fn open_until_done(
    shared: &Arc<Shared>,
    scope: WatchScope,
    asked: BTreeMap<JobId, WatchScope>,
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
