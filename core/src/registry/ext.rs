//! Conveniences over the contract, available on every backend (the trait stays minimal;
//! helpers live here).

use std::time::Duration;

use async_trait::async_trait;

use super::{
    path, CoordinatorRegistry, CreateMode, LeaderLatch, Leadership, Op, RegistryError, Result,
    Version,
};

/// Helpers built from [`CoordinatorRegistry`] operations.
#[async_trait]
pub trait RegistryExt: CoordinatorRegistry {
    /// Creates the persistent node `path` (and its parents) unless it exists. Returns whether
    /// this call created it.
    async fn ensure(&self, path: &str) -> Result<bool> {
        match self.create(path, b"", CreateMode::Persistent).await {
            Ok(_) => Ok(true),
            Err(e) if e.is_node_exists() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Creates `path` with `data` unless it exists. Returns whether this call created it.
    async fn create_if_absent(&self, path: &str, data: &[u8], mode: CreateMode) -> Result<bool> {
        match self.create(path, data, mode).await {
            Ok(_) => Ok(true),
            Err(e) if e.is_node_exists() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Writes `data` to a persistent node, creating it (and its parents) if needed.
    async fn put(&self, path: &str, data: &[u8]) -> Result<Version> {
        loop {
            match self.set(path, data, None).await {
                Ok(v) => return Ok(v),
                Err(e) if e.is_no_node() => {}
                Err(e) => return Err(e),
            }
            match self.create(path, data, CreateMode::Persistent).await {
                Ok(_) => return Ok(0),
                // Someone created it between our two calls: overwrite theirs on the next turn.
                Err(e) if e.is_node_exists() => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// The node's data as UTF-8 text; `None` if the node does not exist.
    async fn get_text(&self, path: &str) -> Result<Option<String>> {
        match self.get(path).await? {
            None => Ok(None),
            Some(node) => {
                String::from_utf8(node.data).map(Some).map_err(|_| RegistryError::Backend {
                    backend: "shardcron",
                    op: Op::Get,
                    path: path.to_owned(),
                    message: "node data is not UTF-8 text".into(),
                    retryable: false,
                    source: None,
                })
            }
        }
    }

    /// Deletes a node if it exists. Returns whether this call deleted it.
    async fn delete_if_exists(&self, path: &str) -> Result<bool> {
        match self.delete(path, None).await {
            Ok(()) => Ok(true),
            Err(e) if e.is_no_node() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The children of `path`, or an empty list if it does not exist.
    async fn children_or_empty(&self, path: &str) -> Result<Vec<String>> {
        match self.children(path).await {
            Ok(c) => Ok(c),
            Err(e) if e.is_no_node() => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// The full paths of the children of `path` (empty if it does not exist).
    async fn child_paths(&self, path: &str) -> Result<Vec<String>> {
        Ok(self.children_or_empty(path).await?.iter().map(|c| path::join(path, c)).collect())
    }
}

impl<T: CoordinatorRegistry + ?Sized> RegistryExt for T {}

/// Waits until `latch` holds leadership, at most `timeout`. Returns at once if it already does.
pub async fn await_leadership(latch: &mut dyn LeaderLatch, timeout: Duration) -> Result<()> {
    if latch.is_leader() {
        return Ok(());
    }
    let wait = async {
        loop {
            if latch.changed().await? == Leadership::Acquired {
                return Ok(());
            }
        }
    };
    match tokio::time::timeout(timeout, wait).await {
        Ok(res) => res,
        Err(_) => {
            Err(RegistryError::Timeout { op: Op::Latch, path: String::new(), after: timeout })
        }
    }
}
