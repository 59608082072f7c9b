//! Server nodes nobody uses any more. ElasticJob leaves `servers/{ip}` behind for every IP an
//! instance ever ran on; where pod IPs change with every restart (Kubernetes), they pile up
//! and every view and console lists them. The leader removes a server node once no live
//! instance has had its IP for the grace (`Settings::stale_server_grace_ms`). A node an
//! operator set to `DISABLED` stays: that word outlives the instances it was said of.

use std::collections::{BTreeMap, BTreeSet};

use super::{Ctx, JobProtocol, Next, Pending, Request};
use crate::instance::ip_of;
use crate::protocol::records::ServerStatus;
use crate::registry::TxnOp;

impl JobProtocol {
    /// The leader's removal of the next server node stale for the grace, if any; notes from
    /// when on each server node is stale.
    pub(super) fn stale_servers_next(&mut self, ctx: &Ctx<'_>) -> Option<Next> {
        if !std::mem::take(&mut self.servers_audit_owed) {
            return None;
        }
        let grace = self.settings.stale_server_grace_ms?;
        if !self.is_leader(ctx) {
            self.stale_servers.clear();
            return None;
        }
        let view = ctx.view;
        let instances = view.children(&self.paths.instances());
        let live: BTreeSet<&str> = instances.iter().map(|id| ip_of(id)).collect();
        let mut stale = BTreeMap::new();
        for ip in view.children(&self.paths.servers()) {
            if live.contains(ip.as_str()) {
                continue;
            }
            let path = self.paths.server(&ip);
            let Some(node) = view.get(&path) else { continue };
            if ServerStatus::parse(&path, &node.data) == Ok(ServerStatus::Disabled) {
                continue;
            }
            let since = self.stale_servers.get(&ip).copied().unwrap_or(ctx.now_ms);
            stale.insert(ip, since);
        }
        self.stale_servers = stale;
        let (ip, _) = self.stale_servers.iter().find(|(_, &since)| ctx.now_ms - since >= grace)?;
        let path = self.paths.server(ip);
        let version = view.get(&path)?.version;
        // Fenced on the version: an operator's write since (a DISABLED, say) keeps the node.
        let ops = vec![TxnOp::delete(path, Some(version))];
        // Looked at again once the view shows the deletion (or what beat it).
        self.servers_audit_owed = true;
        Some(Next::Request(Pending::DeleteServer, Request::Txn(ops)))
    }

    /// When the next server node's grace runs out, while this instance leads.
    pub(super) fn stale_servers_deadline(&self) -> Option<i64> {
        let grace = self.settings.stale_server_grace_ms?;
        self.stale_servers.values().map(|since| since.saturating_add(grace)).min()
    }
}
