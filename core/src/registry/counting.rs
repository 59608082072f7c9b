//! A wrapper that counts the operations a component sends to the registry.
//!
//! Registry load is one of shardcron's targets (`docs/targets.md`: one transaction to start and one
//! to finish the items of a fire, zero reads, nothing while idle); this wrapper is how tests and
//! benchmarks measure it, on any backend.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;

use super::{
    Capability, CoordinatorRegistry, CreateMode, LeaderLatch, MutexGuard, Node, Op, Result,
    SessionEvents, TxnOp, TxnResult, Version, WatchScope, WatchStream,
};

/// Forwards every call to `inner` and counts it by [`Op`]. A latch or a lock counts as one
/// operation when taken; the recipe's own traffic behind it goes to `inner` uncounted.
#[derive(Debug, Clone)]
pub struct CountingRegistry {
    inner: Arc<dyn CoordinatorRegistry>,
    counts: Arc<Mutex<BTreeMap<String, u64>>>,
}

impl CountingRegistry {
    /// Wraps `inner`; every operation through the wrapper is counted, then passed on.
    pub fn new(inner: Arc<dyn CoordinatorRegistry>) -> Self {
        CountingRegistry { inner, counts: Arc::default() }
    }

    fn count(&self, op: Op) {
        *self.counts.lock().entry(op.to_string()).or_default() += 1;
    }

    /// Counts so far, by operation name (`create`, `get`, `transaction`, ...).
    pub fn counts(&self) -> BTreeMap<String, u64> {
        self.counts.lock().clone()
    }

    /// All operations counted so far.
    pub fn total(&self) -> u64 {
        self.counts.lock().values().sum()
    }

    /// Counts so far, and starts again from zero.
    pub fn take(&self) -> BTreeMap<String, u64> {
        std::mem::take(&mut *self.counts.lock())
    }
}

#[async_trait]
impl CoordinatorRegistry for CountingRegistry {
    fn capability(&self) -> Capability {
        self.inner.capability()
    }
    async fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> Result<String> {
        self.count(Op::Create);
        self.inner.create(path, data, mode).await
    }
    async fn get(&self, path: &str) -> Result<Option<Node>> {
        self.count(Op::Get);
        self.inner.get(path).await
    }
    async fn set(&self, path: &str, data: &[u8], expected: Option<Version>) -> Result<Version> {
        self.count(Op::Set);
        self.inner.set(path, data, expected).await
    }
    async fn delete(&self, path: &str, expected: Option<Version>) -> Result<()> {
        self.count(Op::Delete);
        self.inner.delete(path, expected).await
    }
    async fn exists(&self, path: &str) -> Result<bool> {
        self.count(Op::Exists);
        self.inner.exists(path).await
    }
    async fn children(&self, path: &str) -> Result<Vec<String>> {
        self.count(Op::Children);
        self.inner.children(path).await
    }
    async fn delete_recursive(&self, path: &str) -> Result<()> {
        self.count(Op::DeleteRecursive);
        self.inner.delete_recursive(path).await
    }
    async fn transaction(&self, ops: Vec<TxnOp>) -> Result<Vec<TxnResult>> {
        self.count(Op::Transaction);
        self.inner.transaction(ops).await
    }
    async fn watch_scope(&self, scope: WatchScope) -> Result<WatchStream> {
        self.count(Op::Watch);
        self.inner.watch_scope(scope).await
    }
    fn session_events(&self) -> SessionEvents {
        self.inner.session_events()
    }
    async fn leader_latch(&self, path: &str, participant: &str) -> Result<Box<dyn LeaderLatch>> {
        self.count(Op::Latch);
        self.inner.leader_latch(path, participant).await
    }
    async fn lock(
        &self,
        path: &str,
        owner: &str,
        timeout: Duration,
    ) -> Result<Box<dyn MutexGuard>> {
        self.count(Op::Lock);
        self.inner.lock(path, owner, timeout).await
    }
    async fn registry_time(&self) -> Result<i64> {
        self.count(Op::Time);
        self.inner.registry_time().await
    }
    async fn close(&self) -> Result<()> {
        self.count(Op::Close);
        self.inner.close().await
    }
}
