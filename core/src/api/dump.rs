//! A job's whole subtree, node by node: what an operator attaches to a bug report, and what the
//! in-memory registry can be loaded from again (the JSON form has the fields of a ZooKeeper
//! node dump: `path`, `ephemeral`, `data`).

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::layout::JobPaths;
use crate::registry::{path, RegistryExt};

use super::JobOperations;

/// One node of a dump.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DumpedNode {
    /// The node's path in the namespace.
    pub path: String,
    /// Whether a session owned it (it goes with that session): what tells an instance's
    /// liveness nodes from the job's lasting state when a dump is read or loaded again.
    pub ephemeral: bool,
    /// The data as text (lossy for non-UTF-8 data, which shardcron never writes).
    pub data: String,
    /// The node's version when dumped: how often it was written, which a bug report needs
    /// (fencing tokens are versions); 0 in dumps that do not record it.
    #[serde(default)]
    pub version: u64,
}

impl JobOperations<'_> {
    /// Every node of the job's subtree, the job's root first, parents before children, siblings
    /// in name order.
    pub async fn dump(&self, job: &str) -> Result<Vec<DumpedNode>> {
        let paths = JobPaths::new(job);
        self.require_job(&paths, job).await?;
        let mut out = Vec::new();
        // Depth first with an explicit stack, children pushed in reverse to pop in order.
        let mut stack = vec![paths.root().to_owned()];
        while let Some(p) = stack.pop() {
            // A node deleted between listing and reading (an ephemeral one going) is skipped.
            let Some(node) = self.registry.get(&p).await? else { continue };
            let children = self.registry.children_or_empty(&p).await?;
            stack.extend(children.iter().rev().map(|c| path::join(&p, c)));
            out.push(DumpedNode {
                data: node.text().into_owned(),
                ephemeral: node.ephemeral,
                version: node.version,
                path: p,
            });
        }
        Ok(out)
    }
}
