//! Mutex: the member at the head of the queue holds the lock.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::queue::Queue;
use crate::registry::{CoordinatorRegistry, MutexGuard, Op, RegistryError, Result};

/// A held lock over ephemeral-sequential nodes `{dir}/{owner}-lock-{seq}`.
#[derive(Debug)]
pub struct SequentialMutex {
    queue: Queue,
}

impl SequentialMutex {
    /// Takes the lock at `dir` for `owner`, waiting at most `timeout`. On timeout (or any error)
    /// the waiting node is removed again so that it blocks no one.
    pub async fn lock(
        registry: Arc<dyn CoordinatorRegistry>,
        dir: &str,
        owner: &str,
        timeout: Duration,
    ) -> Result<Self> {
        let mut queue = Queue::join(registry, dir, owner, "lock").await?;
        let waited = tokio::time::timeout(timeout, async {
            while !queue.at_head() {
                queue.step().await?;
            }
            Ok::<_, RegistryError>(())
        })
        .await;
        let failure = match waited {
            Ok(Ok(())) => return Ok(SequentialMutex { queue }),
            Ok(Err(e)) => e,
            Err(_) => RegistryError::Timeout { op: Op::Lock, path: dir.to_owned(), after: timeout },
        };
        // Give up our place; the original failure is what the caller needs to see.
        if let Err(cleanup) = queue.leave().await {
            tracing::warn!(dir, error = %cleanup, "could not remove an abandoned lock node");
        }
        Err(failure)
    }
}

#[async_trait]
impl MutexGuard for SequentialMutex {
    async fn release(mut self: Box<Self>) -> Result<()> {
        self.queue.leave().await
    }
}
