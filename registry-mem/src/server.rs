//! The server: one tree, the clients connected to it, and one lock around both.
//!
//! Everything a client does is applied while holding [`Shared::state`], and every consequence
//! (watch events, session events) is queued before the lock is released. So the order in which
//! the lock is taken *is* the registry's order, and every observer sees the same one. The lock is
//! a plain `parking_lot` mutex that is never held across an `.await`.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;
use shardcron_core::handles::Handles;
use shardcron_core::registry::{path, Node, Op, RegistryError};

use crate::client::{ClientId, ConnectOptions, MemRegistry};
use crate::namespace::Namespace;
use crate::ops::fault;
use crate::session::ClientState;
use crate::tree::{Change, SessionId, Tree};

/// What the server and its clients share.
pub(crate) struct Shared {
    pub handles: Handles,
    pub state: Mutex<State>,
}

impl Shared {
    /// Takes the state lock, first expiring the sessions whose deadline has passed: every
    /// observer then sees deadlines at the exact millisecond.
    pub fn lock(&self) -> parking_lot::MutexGuard<'_, State> {
        let now_ms = self.handles.clock.now_ms();
        let mut state = self.state.lock();
        state.settle(now_ms);
        state
    }
}

/// The server's whole state.
#[derive(Debug, Default)]
pub(crate) struct State {
    pub tree: Tree,
    pub clients: BTreeMap<ClientId, ClientState>,
    last_client: u64,
    last_session: u64,
    last_cut: u64,
}

impl State {
    pub fn new_session_id(&mut self) -> SessionId {
        self.last_session += 1;
        self.last_session
    }

    pub fn new_cut_id(&mut self) -> u64 {
        self.last_cut += 1;
        self.last_cut
    }

    /// Queues applied changes on every watch that covers them, in the order applied.
    pub fn publish(&mut self, changes: &[Change]) {
        if changes.is_empty() {
            return;
        }
        for client in self.clients.values_mut().filter(|c| !c.closed) {
            let up = client.link_up();
            client.watches.publish(&client.ns, changes, up);
        }
    }
}

/// An in-memory registry server that any number of clients connect to.
///
/// Cheap to clone: clones are the same server. Time, timers and tasks come from the [`Handles`]
/// it is built with, so under paused tokio time (tests, the simulator) it runs in virtual time,
/// deterministically. The fault hooks ([`expire_session`](Self::expire_session),
/// [`cut`](Self::cut), [`heal`](Self::heal), ...) act on one client by its [`ClientId`].
#[derive(Clone)]
pub struct MemServer {
    pub(crate) shared: Arc<Shared>,
}

impl fmt::Debug for MemServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.shared.state.lock();
        f.debug_struct("MemServer")
            .field("nodes", &state.tree.len())
            .field("clients", &state.clients.len())
            .finish()
    }
}

impl MemServer {
    /// A new, empty server (only the root node `/` exists).
    pub fn new(handles: Handles) -> Self {
        MemServer { shared: Arc::new(Shared { handles, state: Mutex::new(State::default()) }) }
    }

    /// Connects a new client with its own session. The namespace node is created (with its
    /// parents) if missing, as Curator does for a chroot.
    ///
    /// Errors: `InvalidPath` for a malformed namespace; `EphemeralParent` if an ephemeral node
    /// stands where the namespace would go.
    pub fn connect(&self, options: ConnectOptions) -> Result<MemRegistry, RegistryError> {
        let ns = Namespace::parse(options.namespace.as_deref())?;
        let mut guard = self.shared.lock();
        let state = &mut *guard;
        if ns.root() != path::ROOT && state.tree.get(ns.root()).is_none() {
            let mut batch = state.tree.batch();
            batch
                .create_parents(ns.root())
                .and_then(|()| batch.create(ns.root(), b"", None, false).map(|_| ()))
                .map_err(|f| fault(f, Op::Connect, "/"))?;
            let changes = batch.commit();
            state.publish(&changes);
        }
        let margin =
            crate::session::lease_margin(options.session_timeout, options.lease_margin, ns.root())?;
        state.last_client += 1;
        let id = ClientId(state.last_client);
        let session = state.new_session_id();
        state
            .clients
            .insert(id, ClientState::new(ns.clone(), options.session_timeout, margin, session));
        drop(guard);
        Ok(MemRegistry::new(self.clone(), id, ns, options.operation_timeout, options.views_lag))
    }

    /// Every node on the server by server path (namespaces included), as it is now. For
    /// invariant checks and dumps; clients read through their namespace instead.
    pub fn snapshot(&self) -> BTreeMap<String, Node> {
        let state = self.shared.lock();
        state.tree.iter().map(|(p, e)| (p.to_owned(), e.node())).collect()
    }

    /// The node at server path `path` (namespace included), as it is now: what
    /// [`snapshot`](Self::snapshot) would show for it, without copying the whole tree.
    pub fn node(&self, path: &str) -> Option<Node> {
        let state = self.shared.lock();
        state.tree.get(path).map(|e| e.node())
    }
}
