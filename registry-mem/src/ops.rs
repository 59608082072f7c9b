//! The registry operations as the server applies them, under its lock.
//!
//! Each takes client paths (already validated), maps them into the client's namespace, applies
//! the op through a tree batch, publishes the changes, and maps results and faults back to the
//! client's view: errors carry the op and the path exactly as the client gave it.

use shardcron_core::registry::{
    CreateMode, Node, Op, RegistryError, Result, ScopeChange, TxnOp, TxnResult, Version, WatchScope,
};

use crate::client::ClientId;
use crate::namespace::Namespace;
use crate::server::State;
use crate::tree::{Batch, Fault, SessionId};

/// Who applies an operation: the client, its namespace, and the session it runs in.
#[derive(Debug)]
pub(crate) struct Ctx<'a> {
    pub client: ClientId,
    pub ns: &'a Namespace,
    pub session: SessionId,
}

/// A tree fault as the contract's error for `op` on client path `path`.
pub(crate) fn fault(fault: Fault, op: Op, path: &str) -> RegistryError {
    let path = path.to_owned();
    match fault {
        Fault::NoNode => RegistryError::NoNode { op, path },
        Fault::NodeExists => RegistryError::NodeExists { op, path },
        Fault::BadVersion(expected) => RegistryError::BadVersion { op, path, expected },
        Fault::NotEmpty => RegistryError::NotEmpty { op, path },
        Fault::EphemeralParent => RegistryError::EphemeralParent { op, path },
    }
}

impl State {
    pub fn create(
        &mut self,
        cx: &Ctx<'_>,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> Result<String> {
        let server_path = cx.ns.to_server(path);
        let owner = mode.is_ephemeral().then_some(cx.session);
        let mut batch = self.tree.batch();
        batch.create_parents(&server_path).map_err(|f| fault(f, Op::Create, path))?;
        let created = batch
            .create(&server_path, data, owner, mode.is_sequential())
            .map_err(|f| fault(f, Op::Create, path))?;
        let changes = batch.commit();
        self.publish(&changes);
        Ok(cx.ns.to_client(&created))
    }

    pub fn get(&self, cx: &Ctx<'_>, path: &str) -> Option<Node> {
        self.tree.get(&cx.ns.to_server(path)).map(|e| e.node())
    }

    pub fn exists(&self, cx: &Ctx<'_>, path: &str) -> bool {
        self.tree.get(&cx.ns.to_server(path)).is_some()
    }

    pub fn children(&self, cx: &Ctx<'_>, path: &str) -> Result<Vec<String>> {
        self.tree.children(&cx.ns.to_server(path)).map_err(|f| fault(f, Op::Children, path))
    }

    pub fn set(
        &mut self,
        cx: &Ctx<'_>,
        path: &str,
        data: &[u8],
        expected: Option<Version>,
    ) -> Result<Version> {
        let mut batch = self.tree.batch();
        let version = batch
            .set(&cx.ns.to_server(path), data, expected)
            .map_err(|f| fault(f, Op::Set, path))?;
        let changes = batch.commit();
        self.publish(&changes);
        Ok(version)
    }

    pub fn delete(&mut self, cx: &Ctx<'_>, path: &str, expected: Option<Version>) -> Result<()> {
        let mut batch = self.tree.batch();
        batch.delete(&cx.ns.to_server(path), expected).map_err(|f| fault(f, Op::Delete, path))?;
        let changes = batch.commit();
        self.publish(&changes);
        Ok(())
    }

    pub fn delete_recursive(&mut self, cx: &Ctx<'_>, path: &str) {
        let mut batch = self.tree.batch();
        batch.delete_subtree(&cx.ns.to_server(path));
        let changes = batch.commit();
        self.publish(&changes);
    }

    /// Applies `ops` in order in one batch; the first failure drops the batch, which rolls back
    /// everything before it.
    pub fn transaction(&mut self, cx: &Ctx<'_>, ops: &[TxnOp]) -> Result<Vec<TxnResult>> {
        let mut batch = self.tree.batch();
        let mut results = Vec::with_capacity(ops.len());
        for (index, op) in ops.iter().enumerate() {
            let result = apply_txn_op(&mut batch, cx, op)
                .map_err(|e| RegistryError::Transaction { index, source: Box::new(e) })?;
            results.push(result);
        }
        let changes = batch.commit();
        self.publish(&changes);
        Ok(results)
    }

    pub fn watch(
        &mut self,
        cx: &Ctx<'_>,
        scope: &WatchScope,
    ) -> Result<(crate::watch::Channel<shardcron_core::registry::WatchEvent>, u64)> {
        let server_scope = scope.map_paths(|p| cx.ns.to_server(p));
        let client = self.clients.get_mut(&cx.client).ok_or_else(|| RegistryError::Closed {
            op: Op::Watch,
            path: first_path(scope).to_owned(),
        })?;
        Ok(client.watches.subscribe(&self.tree, &client.ns, server_scope))
    }

    /// Changes the scope of the client's subscription `id` in place (see
    /// [`crate::watch::Watches::rescope`]).
    pub fn rescope(&mut self, cx: &Ctx<'_>, id: u64, change: &ScopeChange) -> Result<()> {
        let server_change = change.map_paths(|p| cx.ns.to_server(p));
        let closed = || RegistryError::Closed { op: Op::Watch, path: change.label().to_owned() };
        let client = self.clients.get_mut(&cx.client).ok_or_else(closed)?;
        let up = client.link_up();
        let ns = &client.ns;
        if client.watches.rescope(id, &self.tree, ns, &server_change, change.clone(), up) {
            Ok(())
        } else {
            Err(closed())
        }
    }
}

fn apply_txn_op(batch: &mut Batch<'_>, cx: &Ctx<'_>, op: &TxnOp) -> Result<TxnResult> {
    match op {
        TxnOp::Check { path, version } => batch
            .check(&cx.ns.to_server(path), *version)
            .map(|()| TxnResult::Checked)
            .map_err(|f| fault(f, Op::Check, path)),
        TxnOp::Absent { path } => match batch.check(&cx.ns.to_server(path), None) {
            Err(Fault::NoNode) => Ok(TxnResult::Checked),
            Ok(()) => Err(fault(Fault::NodeExists, Op::Check, path)),
            Err(f) => Err(fault(f, Op::Check, path)),
        },
        TxnOp::Create { path, data, mode } => {
            let owner = mode.is_ephemeral().then_some(cx.session);
            batch
                .create(&cx.ns.to_server(path), data, owner, mode.is_sequential())
                .map(|created| TxnResult::Created { path: cx.ns.to_client(&created) })
                .map_err(|f| fault(f, Op::Create, path))
        }
        TxnOp::Set { path, data, version } => batch
            .set(&cx.ns.to_server(path), data, *version)
            .map(|version| TxnResult::Set { version })
            .map_err(|f| fault(f, Op::Set, path)),
        TxnOp::Delete { path, version } => batch
            .delete(&cx.ns.to_server(path), *version)
            .map(|()| TxnResult::Deleted)
            .map_err(|f| fault(f, Op::Delete, path)),
    }
}

/// The path errors about a watch of `scope` name: its first entry (`/` for an empty scope).
pub(crate) fn first_path(scope: &WatchScope) -> &str {
    scope.subtrees().iter().chain(scope.nodes()).next().map_or("/", String::as_str)
}
