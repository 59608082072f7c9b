//! The queue of ephemeral-sequential nodes both recipes stand in.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::StreamExt;

use crate::registry::{
    path, CoordinatorRegistry, CreateMode, Node, Op, RegistryError, Result, SessionEvent,
    SessionEvents, WatchEvent, WatchStream,
};

/// Width of the sequence suffix every backend appends.
const SEQ_WIDTH: usize = 10;

/// Retry pause after a transient failure while (re)creating the queue node.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// The sequence number of a queue node's name, if it is one.
pub(super) fn sequence(name: &str) -> Option<u64> {
    let start = name.len().checked_sub(SEQ_WIDTH)?;
    let digits = name.get(start..)?;
    if digits.bytes().all(|b| b.is_ascii_digit()) {
        digits.parse().ok()
    } else {
        None
    }
}

/// What woke the queue up.
pub(super) enum Step {
    Session(Option<SessionEvent>),
    Created(Result<String>),
    Watch(Option<WatchEvent>),
}

/// One member's view of the queue under `dir`.
pub(super) struct Queue {
    pub registry: Arc<dyn CoordinatorRegistry>,
    pub dir: String,
    /// `{owner}-{kind}-`: the name prefix of this member's node.
    pub prefix: String,
    pub owner: String,
    watch: WatchStream,
    session: SessionEvents,
    /// Direct children of `dir`, by full path, as the watch shows them.
    view: BTreeMap<String, Node>,
    /// This member's node, once created.
    pub own: Option<String>,
    pub connected: bool,
    /// A create (or the search for an earlier one) in flight.
    pending: Option<BoxFuture<'static, Result<String>>>,
    /// Set once the member leaves: no more nodes are created.
    leaving: bool,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("dir", &self.dir)
            .field("owner", &self.owner)
            .field("own", &self.own)
            .field("connected", &self.connected)
            .field("members", &self.view.len())
            .finish()
    }
}

impl Queue {
    /// Subscribes to `dir` and starts creating this member's node; [`Queue::step`] completes it
    /// and reports its errors.
    pub async fn join(
        registry: Arc<dyn CoordinatorRegistry>,
        dir: &str,
        owner: &str,
        kind: &str,
    ) -> Result<Self> {
        path::validate_node(dir)?;
        path::validate_segment(owner).map_err(|_| RegistryError::InvalidPath {
            path: path::join(dir, owner),
            reason: "owner id must be a valid node name (no '/', no control characters)",
        })?;
        let session = registry.session_events();
        let watch = registry.watch(dir).await?;
        let mut queue = Queue {
            prefix: format!("{owner}-{kind}-"),
            owner: owner.to_owned(),
            dir: dir.to_owned(),
            registry,
            watch,
            session,
            view: BTreeMap::new(),
            own: None,
            connected: true,
            pending: None,
            leaving: false,
        };
        queue.recreate_if_missing();
        Ok(queue)
    }

    /// Whether this member's node is at the head of the queue, as far as the watch has shown.
    pub fn at_head(&self) -> bool {
        let Some(own) = &self.own else { return false };
        if !self.connected || !self.view.contains_key(own) {
            return false;
        }
        self.head().as_deref() == Some(own.as_str())
    }

    /// The path of the node at the head of the queue in the current view.
    pub fn head(&self) -> Option<String> {
        self.view
            .keys()
            .filter_map(|p| sequence(path::name(p)).map(|seq| (seq, p)))
            .min()
            .map(|(_, p)| p.clone())
    }

    /// Waits for the next event and applies it. Cancel-safe: streams lose nothing when the future
    /// is dropped, and an in-flight create stays in `pending` for the next call.
    pub async fn step(&mut self) -> Result<()> {
        let step = {
            let Queue { session, watch, pending, .. } = self;
            tokio::select! {
                biased;
                ev = session.next() => Step::Session(ev),
                res = poll_pending(pending) => Step::Created(res),
                ev = watch.next() => Step::Watch(ev),
            }
        };
        match step {
            Step::Session(Some(ev)) => self.on_session(ev),
            Step::Session(None) | Step::Watch(None) => {
                Err(RegistryError::Closed { op: Op::Latch, path: self.dir.clone() })
            }
            Step::Created(res) => {
                self.pending = None;
                match res {
                    Ok(own) => self.own = Some(own),
                    // The session ended under the create; the next `Connected` starts again.
                    Err(RegistryError::SessionExpired { .. }) => {}
                    Err(e) => return Err(e),
                }
                Ok(())
            }
            Step::Watch(Some(ev)) => {
                self.on_watch(ev);
                Ok(())
            }
        }
    }

    fn on_session(&mut self, ev: SessionEvent) -> Result<()> {
        match ev {
            SessionEvent::Connected { .. } => {
                self.connected = true;
                self.recreate_if_missing();
            }
            SessionEvent::Reconnected => self.connected = true,
            SessionEvent::Suspended => self.connected = false,
            // A lost session is as good as expired: its node may go at any moment, and the
            // client never resumes it (an `Expired` and a new session follow).
            SessionEvent::Lost | SessionEvent::Expired => {
                self.connected = false;
                self.own = None;
                self.pending = None;
            }
            SessionEvent::Closed => {
                return Err(RegistryError::Closed { op: Op::Latch, path: self.dir.clone() })
            }
        }
        Ok(())
    }

    fn on_watch(&mut self, ev: WatchEvent) {
        let direct_child = |p: &str| path::parent(p) == Some(self.dir.as_str());
        match &ev {
            WatchEvent::Resync { nodes } => {
                self.view = nodes
                    .iter()
                    .filter(|(p, _)| direct_child(p))
                    .map(|(p, n)| (p.clone(), n.clone()))
                    .collect();
            }
            other => {
                if other.path().is_some_and(direct_child) {
                    other.apply_to(&mut self.view);
                }
            }
        }
        // Our node vanished while we still believe in it (deleted by an operator, or a resync
        // after expiry): stand in the queue again.
        if let Some(own) = &self.own {
            let gone = match &ev {
                WatchEvent::Deleted { path } => path == own,
                WatchEvent::Resync { .. } => !self.view.contains_key(own),
                _ => false,
            };
            if gone {
                self.own = None;
                if self.connected {
                    self.recreate_if_missing();
                }
            }
        }
    }

    fn recreate_if_missing(&mut self) {
        if self.own.is_none() && self.pending.is_none() && !self.leaving {
            self.pending = Some(Box::pin(ensure_node(
                self.registry.clone(),
                self.dir.clone(),
                self.prefix.clone(),
                self.owner.clone(),
            )));
        }
    }

    /// Leaves the queue: deletes every node of this member, including one a cancelled create may
    /// have left behind.
    pub async fn leave(&mut self) -> Result<()> {
        self.leaving = true;
        self.pending = None;
        self.own = None;
        let names = match self.registry.children(&self.dir).await {
            Ok(names) => names,
            Err(e) if e.is_no_node() => return Ok(()),
            Err(e) => return Err(e),
        };
        for name in names.iter().filter(|n| n.starts_with(&self.prefix)) {
            match self.registry.delete(&path::join(&self.dir, name), None).await {
                Ok(()) => {}
                Err(e) if e.is_no_node() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

async fn poll_pending(pending: &mut Option<BoxFuture<'static, Result<String>>>) -> Result<String> {
    match pending {
        Some(fut) => fut.await,
        None => std::future::pending().await,
    }
}

/// Finds this member's node (a create whose answer was lost may have made it) or creates one.
/// Transient failures are retried after a pause; anything else is returned.
async fn ensure_node(
    registry: Arc<dyn CoordinatorRegistry>,
    dir: String,
    prefix: String,
    owner: String,
) -> Result<String> {
    loop {
        match find_or_create(registry.as_ref(), &dir, &prefix, &owner).await {
            Ok(own) => return Ok(own),
            Err(e) if e.is_retryable() => tokio::time::sleep(RETRY_PAUSE).await,
            Err(e) => return Err(e),
        }
    }
}

async fn find_or_create(
    registry: &dyn CoordinatorRegistry,
    dir: &str,
    prefix: &str,
    owner: &str,
) -> Result<String> {
    match registry.children(dir).await {
        Ok(names) => {
            let mut mine: Vec<&String> =
                names.iter().filter(|n| n.starts_with(prefix) && sequence(n).is_some()).collect();
            mine.sort_by_key(|n| sequence(n));
            if let Some((first, extra)) = mine.split_first() {
                // Duplicates only arise from retried creates; keep the oldest place in the queue.
                for name in extra {
                    match registry.delete(&path::join(dir, name), None).await {
                        Ok(()) => {}
                        Err(e) if e.is_no_node() => {}
                        Err(e) => return Err(e),
                    }
                }
                return Ok(path::join(dir, first));
            }
        }
        Err(e) if e.is_no_node() => {}
        Err(e) => return Err(e),
    }
    registry
        .create(&path::join(dir, prefix), owner.as_bytes(), CreateMode::EphemeralSequential)
        .await
}

#[cfg(test)]
mod tests {
    use super::sequence;

    #[test]
    fn sequence_suffix() {
        assert_eq!(sequence("a@-@1-latch-0000000042"), Some(42));
        assert_eq!(sequence("latch-"), None);
        assert_eq!(sequence("x-00000000a1"), None);
        assert_eq!(sequence("0000000007"), Some(7));
    }
}
