//! [`MeteredRegistry`]: a registry wrapper that counts operations, errors by kind, and times
//! them, in the manner of core's `CountingRegistry`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use metrics::{counter, histogram, Counter, Histogram};
use shardcron_core::registry::{
    Capability, CoordinatorRegistry, CreateMode, LeaderLatch, MutexGuard, Node, Op, Result,
    SessionEvents, TxnOp, TxnResult, Version, WatchScope, WatchStream,
};

/// Forwards every call to `inner`, counting it (`shardcron_registry_operations_total{op}`),
/// timing it (`shardcron_registry_operation_duration_seconds{op}`) and counting its failures by
/// kind (`shardcron_registry_errors_total{op, kind}`; `kind` as [`RegistryError::kind`] names
/// it).
///
/// Expected outcomes count as errors too (`no_node` of a read, `node_exists` of a create race,
/// `bad_version` of a lost compare-and-set): the `kind` label tells them from trouble
/// (`connection_loss`, `timeout`, `session_expired`).
///
/// Create it after the metrics recorder is installed ([`Metrics::registry`](super::Metrics::registry)
/// does): it registers its series once, at creation.
///
/// [`RegistryError::kind`]: shardcron_core::registry::RegistryError::kind
#[derive(Debug, Clone)]
pub struct MeteredRegistry {
    inner: Arc<dyn CoordinatorRegistry>,
    /// The count and the timing of each operation, by [`OPS`] index.
    series: Arc<[(Counter, Histogram)]>,
}

/// The operations counted, in the order of [`MeteredRegistry::series`].
const OPS: [&str; 16] = [
    "connect",
    "create",
    "get",
    "set",
    "delete",
    "exists",
    "children",
    "delete_recursive",
    "transaction",
    "check",
    "watch",
    "latch",
    "lock",
    "time",
    "close",
    "other",
];

impl MeteredRegistry {
    pub fn new(inner: Arc<dyn CoordinatorRegistry>) -> Self {
        let series = OPS
            .iter()
            .map(|&op| {
                (
                    counter!("shardcron_registry_operations_total", "op" => op),
                    histogram!("shardcron_registry_operation_duration_seconds", "op" => op),
                )
            })
            .collect();
        MeteredRegistry { inner, series }
    }

    async fn timed<T>(
        &self,
        op: Op,
        call: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        let started = Instant::now();
        let result = call.await;
        let index = op_index(op);
        if let Some((ops, duration)) = self.series.get(index) {
            ops.increment(1);
            duration.record(started.elapsed().as_secs_f64());
        }
        if let Err(error) = &result {
            let name = OPS.get(index).copied().unwrap_or("other");
            counter!("shardcron_registry_errors_total", "op" => name, "kind" => error.kind())
                .increment(1);
        }
        result
    }
}

/// `op`'s place in [`OPS`] (its name there).
fn op_index(op: Op) -> usize {
    match op {
        Op::Connect => 0,
        Op::Create => 1,
        Op::Get => 2,
        Op::Set => 3,
        Op::Delete => 4,
        Op::Exists => 5,
        Op::Children => 6,
        Op::DeleteRecursive => 7,
        Op::Transaction => 8,
        Op::Check => 9,
        Op::Watch => 10,
        Op::Latch => 11,
        Op::Lock => 12,
        Op::Time => 13,
        Op::Close => 14,
        _ => 15,
    }
}

#[async_trait]
impl CoordinatorRegistry for MeteredRegistry {
    fn capability(&self) -> Capability {
        self.inner.capability()
    }
    async fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> Result<String> {
        self.timed(Op::Create, self.inner.create(path, data, mode)).await
    }
    async fn get(&self, path: &str) -> Result<Option<Node>> {
        self.timed(Op::Get, self.inner.get(path)).await
    }
    async fn set(&self, path: &str, data: &[u8], expected: Option<Version>) -> Result<Version> {
        self.timed(Op::Set, self.inner.set(path, data, expected)).await
    }
    async fn delete(&self, path: &str, expected: Option<Version>) -> Result<()> {
        self.timed(Op::Delete, self.inner.delete(path, expected)).await
    }
    async fn exists(&self, path: &str) -> Result<bool> {
        self.timed(Op::Exists, self.inner.exists(path)).await
    }
    async fn children(&self, path: &str) -> Result<Vec<String>> {
        self.timed(Op::Children, self.inner.children(path)).await
    }
    async fn delete_recursive(&self, path: &str) -> Result<()> {
        self.timed(Op::DeleteRecursive, self.inner.delete_recursive(path)).await
    }
    async fn transaction(&self, ops: Vec<TxnOp>) -> Result<Vec<TxnResult>> {
        self.timed(Op::Transaction, self.inner.transaction(ops)).await
    }
    async fn watch_scope(&self, scope: WatchScope) -> Result<WatchStream> {
        self.timed(Op::Watch, self.inner.watch_scope(scope)).await
    }
    fn session_events(&self) -> SessionEvents {
        self.inner.session_events()
    }
    async fn leader_latch(&self, path: &str, participant: &str) -> Result<Box<dyn LeaderLatch>> {
        self.timed(Op::Latch, self.inner.leader_latch(path, participant)).await
    }
    async fn lock(
        &self,
        path: &str,
        owner: &str,
        timeout: Duration,
    ) -> Result<Box<dyn MutexGuard>> {
        self.timed(Op::Lock, self.inner.lock(path, owner, timeout)).await
    }
    async fn registry_time(&self) -> Result<i64> {
        self.timed(Op::Time, self.inner.registry_time()).await
    }
    async fn close(&self) -> Result<()> {
        self.timed(Op::Close, self.inner.close()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_operation_has_its_own_name() {
        let ops = [
            (Op::Connect, "connect"),
            (Op::Create, "create"),
            (Op::Get, "get"),
            (Op::Set, "set"),
            (Op::Delete, "delete"),
            (Op::Exists, "exists"),
            (Op::Children, "children"),
            (Op::DeleteRecursive, "delete_recursive"),
            (Op::Transaction, "transaction"),
            (Op::Check, "check"),
            (Op::Watch, "watch"),
            (Op::Latch, "latch"),
            (Op::Lock, "lock"),
            (Op::Time, "time"),
            (Op::Close, "close"),
        ];
        for (op, name) in ops {
            assert_eq!(OPS[op_index(op)], name);
        }
        assert_eq!(OPS[OPS.len() - 1], "other");
    }
}
